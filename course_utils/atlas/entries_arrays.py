"""The atlas's entries for NumPy arrays turned into tensors in a Dataset (chapter 1): negative strides,
read-only arrays, object arrays, a list of arrays, the aliases NumPy 1.24 removed, and an integer tensor (pixels,
counts) scaled in place by a float, a grayscale image normalised with three channels' values.
"""
from __future__ import annotations

from course_utils.atlas.entry import Entry, source

ENTRIES = (
    Entry(
        id="from-numpy-negative-stride", stage="data", chapter=1,
        title="torch.from_numpy on a flipped or reversed NumPy view (flip augmentation, BGR to RGB)",
        code=source("""
            img = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3)  # H, W, C
            x = torch.from_numpy($view)
        """),
        fix=source("""
            img = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3)  # H, W, C
            x = torch.from_numpy($view.copy())
            shown = tuple(x.shape)
        """),
        cause="np.flip and [::-1] return views that walk memory backwards (a negative stride), and a tensor "
              "cannot share memory laid out that way. Copy the view first (.copy() or "
              "np.ascontiguousarray), or flip the tensor with torch.flip after converting.",
        expect="ValueError",
        params=({"view": "np.flip(img, axis=1)"}, {"view": "img[..., ::-1]"}),
        sources=("https://github.com/1adrianb/face-alignment/issues/259",
                 "https://github.com/rayabhisek123/CFAT/issues/2",
                 "https://github.com/xuebinqin/U-2-Net/issues/375"),
    ),
    Entry(
        id="from-numpy-not-writable", stage="data", chapter=1,
        title="torch.from_numpy on a read-only NumPy array (broadcast view, bytes buffer, read-only memmap)",
        code=source("""
            was = torch.is_warn_always_enabled()
            torch.set_warn_always(True)  # torch shows this warning once per process: show it every run
            try:
                arr = $array
                x = torch.from_numpy(arr)
            finally:
                torch.set_warn_always(was)
        """),
        fix=source("""
            was = torch.is_warn_always_enabled()
            torch.set_warn_always(True)  # torch shows this warning once per process: show it every run
            try:
                arr = $array
                x = torch.from_numpy(arr.copy())
            finally:
                torch.set_warn_always(was)
            shown = tuple(x.shape)
        """),
        cause="from_numpy shares the array's memory, but torch has no read-only tensors, so writing to the "
              "tensor would write into memory NumPy marked read-only. Copy the array first, or "
              "use torch.tensor(arr), which copies.",
        expect="UserWarning",
        params=({"array": "np.broadcast_to(np.arange(3.0), (4, 3))"},
                {"array": "np.frombuffer(bytes(range(12)), dtype=np.uint8)"}),
        sources=("https://github.com/city96/ComfyUI-GGUF/issues/232",
                 "https://github.com/mlzxy/devit/issues/52",
                 "https://github.com/wzzheng/GenAD/issues/13"),
    ),
    Entry(
        id="object-array-to-tensor", stage="data", chapter=1,
        fix_line='arr = np.stack([np.pad(f, (0, width - len(f))) for f in features])   # pad to one length, then one array',
        title="a NumPy array of dtype object (ragged features, a DataFrame column of arrays) made into a tensor",
        code=source("""
            features = [np.ones(n, dtype=np.float32) for n in ($lengths)]
            arr = np.array(features, dtype=object)
            x = torch.tensor(arr)
        """),
        fix=source("""
            features = [np.ones(n, dtype=np.float32) for n in ($lengths)]
            width = max(len(f) for f in features)
            arr = np.stack([np.pad(f, (0, width - len(f))) for f in features])
            x = torch.from_numpy(arr)
            shown = tuple(x.shape)
        """),
        cause="An object array holds Python objects (here arrays of different lengths, or arrays stored "
              "per row), and a tensor needs one numeric dtype and a rectangular shape. Pad or stack into a "
              "numeric array first (np.stack, .astype(np.float32)).",
        expect="TypeError",
        params=({"lengths": "3, 2"}, {"lengths": "4, 4, 4"}),
        sources=("https://github.com/sebkim/lda2vec-pytorch/issues/5",
                 "https://github.com/georgian-io/Multimodal-Toolkit/issues/2",
                 "https://github.com/QwenAudio/CosyVoice/issues/195"),
    ),
    Entry(
        id="tensor-from-list-of-ndarrays", stage="data", chapter=1,
        title="torch.tensor on a Python list of NumPy arrays (e.g. a batch assembled by hand)",
        code=source("""
            was = torch.is_warn_always_enabled()
            torch.set_warn_always(True)  # torch shows this warning once per process: show it every run
            try:
                frames = [np.zeros($shape, dtype=np.float32) for _ in range($n)]
                batch = torch.tensor(frames)
            finally:
                torch.set_warn_always(was)
        """),
        fix=source("""
            was = torch.is_warn_always_enabled()
            torch.set_warn_always(True)  # torch shows this warning once per process: show it every run
            try:
                frames = [np.zeros($shape, dtype=np.float32) for _ in range($n)]
                batch = torch.from_numpy(np.stack(frames))
            finally:
                torch.set_warn_always(was)
            shown = tuple(batch.shape)
        """),
        cause="torch.tensor walks a list element by element, so a list of arrays is converted number by "
              "number, much slower than one array. Stack the arrays with np.stack (or np.array) and "
              "convert once.",
        expect="UserWarning",
        params=({"shape": "(3, 8, 8)", "n": 4}, {"shape": "(16,)", "n": 10}),
        sources=("https://github.com/kan-bayashi/ParallelWaveGAN/issues/367",
                 "https://github.com/pfnet/pfrl/issues/189",
                 "https://github.com/pytorch/pytorch/issues/57467"),
    ),
    Entry(
        id="tensor-copy-construct", stage="data", chapter=1,
        title="torch.tensor() called on something that is already a tensor (a Dataset's __getitem__, a label)",
        code="features = torch.randn($n, 4)                 # a dataset already held as tensors\n"
             "x = torch.tensor(features[0])                  # copies it, and says so",
        fix="features = torch.randn($n, 4)\n"
            "x = features[0].detach().clone()               # or just features[0], if no copy is needed\n"
            "shown = tuple(x.shape)",
        cause="torch.tensor() builds a new tensor from data; given a tensor it copies it (and drops its graph) and "
              "warns, because the copy is rarely what was meant. Index the tensor directly, or say what you want: "
              ".detach().clone() for an independent copy, torch.as_tensor() to convert only when needed.",
        expect="UserWarning",
        params=({"n": 8}, {"n": 3}),
        sources=("https://github.com/choderalab/modelforge/issues/57",
                 "https://github.com/pytorch/pytorch/issues/59800",
                 "https://github.com/cornellius-gp/gpytorch/issues/281",
                 "https://github.com/Comfy-Org/ComfyUI/issues/2986"),
        wordings=("To copy construct from a tensor, it is recommended to use sourceTensor.clone().detach() or "
                  "sourceTensor.clone().detach().requires_grad_(True), rather than torch.tensor(sourceTensor).",),
    ),
    Entry(
        id="numpy-removed-alias", stage="data", chapter=1,
        title="a dataset written for an older NumPy uses np.float or np.int (removed in NumPy 1.24)",
        code=source("""
            centre = np.array([12.5, 40.0], dtype=np.$alias)   # as in code written before NumPy 1.24
        """),
        fix=source("""
            centre = np.array([12.5, 40.0], dtype=$builtin)     # or np.$sized: the same dtype, named
            shown = str(centre.dtype)
        """),
        cause="The code was written for another version of the library than the one installed. NumPy 1.20 "
              "deprecated the aliases np.float, np.int and np.object of Python's own types and 1.24 removed "
              "them: write float, int, object (or np.float64, np.int64 where the width matters); pinning "
              "numpy<1.24 only postpones it. Any \"module 'X' has no attribute 'Y'\" is worth the same first "
              "check: the version of X the code asks for, then the name's spelling.",
        expect="AttributeError",
        params=({"alias": "float", "builtin": "float", "sized": "float64"},
                {"alias": "int", "builtin": "int", "sized": "int64"}),
        sources=("https://github.com/cnr-isti-vclab/TagLab/issues/133",
                 "https://github.com/leoxiaobin/deep-high-resolution-net.pytorch/issues/311",
                 "https://github.com/Torchlight-ljj/DSMT-Net/issues/4"),
    ),
    Entry(
        id="inplace-float-into-integer", stage="data", chapter=1,
        title="an integer tensor scaled in place by a float (uint8 pixels /= 255, int64 counts /= their sum)",
        code="$name = torch.tensor($values)   # $what\n"
             "$name $op",
        fix="$name = torch.tensor($values)\n"
            "$name = $name.float()   # a float copy first: an in-place result keeps the tensor's dtype\n"
            "$name $op\n"
            "shown = str($name.dtype)",
        cause="An in-place operation writes its result into the tensor it changes, so the result must fit that "
              "tensor's dtype: a division (true division is float since torch 1.6) or a multiplication by a float "
              "cannot go back into uint8 pixels or int64 counts. Convert first (`x = x.float() / 255`, or "
              "`.to(torch.float32)`), out of place; torchvision's ToTensor() and ConvertImageDtype do it for "
              "images. Averaging models' state_dicts in place meets it too: BatchNorm's num_batches_tracked is "
              "int64 (average the float entries, copy the integer ones).",
        expect="RuntimeError",
        params=({"name": "image", "values": "[[0, 128, 255]], dtype=torch.uint8", "op": "/= 255",
                 "what": "pixels as read from a file"},
                {"name": "counts", "values": "[30, 50, 20]", "op": "/= counts.sum()",
                 "what": "examples per class, int64"}),
        sources=("https://github.com/eugenelet/Meta-rPPG/issues/26",
                 "https://github.com/AI-secure/DBA/issues/1",
                 "https://github.com/vicFigure/EAutoDet/issues/5"),
        wordings=("result type Float can't be cast to the desired output type long int",),   # EAutoDet#5
    ),
    Entry(
        id="normalize-channels-mismatch", stage="data", chapter=1,
        title="a grayscale image normalised with an RGB mean and std (transforms.Normalize with ImageNet's three "
              "values on MNIST)",
        code="torch.manual_seed(0)\n"
             "image = torch.rand(1, $size, $size)                           # one channel\n"
             "mean = torch.tensor([0.485, 0.456, 0.406]).view(-1, 1, 1)   # ImageNet's, for three channels\n"
             "std = torch.tensor([0.229, 0.224, 0.225]).view(-1, 1, 1)\n"
             "image.sub_(mean).div_(std)                                  # what transforms.Normalize does",
        fix="torch.manual_seed(0)\n"
            "image = torch.rand(1, $size, $size)\n"
            "mean = torch.tensor([$mean]).view(-1, 1, 1)               # one value per channel the image has\n"
            "std = torch.tensor([$std]).view(-1, 1, 1)\n"
            "image.sub_(mean).div_(std)\n"
            "shown = tuple(image.shape)",
        cause="Normalize works in place, one mean and std per channel: three of them broadcast a one-channel "
              "image to three channels, which an in-place result cannot become. Give one value per channel the "
              "image has (MNIST: mean 0.1307, std 0.3081), or make the image three-channel first "
              "(Image.convert('RGB'), transforms.Grayscale(num_output_channels=3)) when the model expects RGB.",
        expect="RuntimeError",
        params=({"size": 28, "mean": "0.1307", "std": "0.3081"}, {"size": 32, "mean": "0.5", "std": "0.5"}),
        sources=("https://github.com/yunjey/pytorch-tutorial/issues/161",
                 "https://github.com/L1aoXingyu/pytorch-beginner/issues/31",
                 "https://github.com/udacity/deep-learning-v2-pytorch/pull/151"),
    ),
)
