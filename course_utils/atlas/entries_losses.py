"""The atlas's entries for what reaches the loss (chapters 3 and 5): targets of the wrong shape, dtype or range for
cross-entropy, BCE and the regression losses, per-pixel targets, integers where the model's scores belong. Kept
apart from entries_step.py (shapes, devices, the graph) and entries_loss_dtypes.py (a batch or target in another
dtype than the loss computes in, legacy flags) so that each file holds one concern."""
from __future__ import annotations

from course_utils.atlas.entry import Entry

ENTRIES = (
    Entry(
        id="cross-entropy-target-dtype", stage="step", chapter=3,
        title="class labels passed to cross_entropy as floats (or int32)",
        code="torch.manual_seed(0)\n"
             "logits = nn.Linear(8, 3)(torch.randn(4, 8))\n"
             "labels = torch.tensor([0, 2, 1, 2], dtype=torch.$dtype)   # labels read from a CSV or a numpy array\n"
             "loss = F.cross_entropy(logits, labels)",
        fix="torch.manual_seed(0)\n"
            "logits = nn.Linear(8, 3)(torch.randn(4, 8))\n"
            "labels = torch.tensor([0, 2, 1, 2], dtype=torch.$dtype).long()   # class indices are int64\n"
            "loss = F.cross_entropy(logits, labels)\n"
            "shown = str(labels.dtype)",
        cause="With class indices as targets, cross_entropy wants int64 (long); labels from a float column, a "
              "float numpy array or np.int32 arrive as another dtype. Older torch words it 'expected scalar type "
              "Long but found Float'.",
        expect="RuntimeError",
        params=({"dtype": "float32"}, {"dtype": "int32"}),
        sources=("https://github.com/milesial/Pytorch-UNet/issues/93",
                 "https://github.com/pytorch/pytorch/issues/103813",
                 "https://github.com/jfzhang95/pytorch-video-recognition/issues/71",
                 "https://github.com/qubvel-org/segmentation_models.pytorch/issues/197",
                 "https://github.com/pytorch/pytorch/issues/118280"),
        wordings=("Expected object of scalar type Long but got scalar type Float for argument #2 'target' in call to "
                  "_thnn_nll_loss2d_forward",
                  "Expected object of scalar type Long but got scalar type Float for argument #2 'target'",
                  "expected scalar type Long but found Float"),   # an older torch's words (the last thread)
    ),
    Entry(
        id="cross-entropy-target-2d", stage="step", chapter=3,
        title="class labels of shape (N, 1) passed to cross_entropy",
        code="torch.manual_seed(0)\n"
             "logits = nn.Linear(8, $classes)(torch.randn($batch, 8))\n"
             "labels = torch.randint(0, $classes, ($batch, 1))   # one label per row, kept as a column\n"
             "loss = F.cross_entropy(logits, labels)",
        fix="torch.manual_seed(0)\n"
            "logits = nn.Linear(8, $classes)(torch.randn($batch, 8))\n"
            "labels = torch.randint(0, $classes, ($batch, 1)).squeeze(1)   # shape (N,)\n"
            "loss = F.cross_entropy(logits, labels)\n"
            "shown = tuple(labels.shape)",
        cause="With logits of shape (N, C), class-index targets must have shape (N,); a column (N, 1), as a "
              "Dataset returning [label] or a DataFrame column gives, reads as several targets per sample. "
              "Squeeze or view(-1) the labels.",
        expect="RuntimeError",
        params=({"classes": 3, "batch": 4}, {"classes": 10, "batch": 32}),
        sources=("https://github.com/Vidhiwar/multimodule-ecg-classification/issues/4",
                 "https://github.com/pytorch/pytorch/issues/3670",
                 "https://github.com/DeepRank/deeprank/issues/28"),
        wordings=("multi-target not supported at d:\\projects\\pytorch\\torch\\lib\\thnn\\generic/"
                  "ClassNLLCriterion.c:22",),
    ),
    Entry(
        id="cross-entropy-one-hot-integers", stage="step", chapter=3,
        title="one-hot labels (int64, shaped like the logits) passed to cross_entropy",
        code="torch.manual_seed(0)\n"
             "logits = nn.Linear(8, $classes)(torch.randn($batch, 8))\n"
             "labels = F.one_hot(torch.randint(0, $classes, ($batch,)), $classes)   # one-hot, as a Dataset made them\n"
             "loss = F.cross_entropy(logits, labels)",
        fix="torch.manual_seed(0)\n"
            "logits = nn.Linear(8, $classes)(torch.randn($batch, 8))\n"
            "labels = F.one_hot(torch.randint(0, $classes, ($batch,)), $classes)\n"
            "loss = F.cross_entropy(logits, labels.argmax(dim=1))   # back to class indices, shape (N,)\n"
            "same = F.cross_entropy(logits, labels.float())         # or kept as probabilities: float\n"
            "shown = bool(torch.allclose(loss, same))",
        cause="A target shaped like the logits is read as class probabilities (torch 1.10 and later), and "
              "probabilities must be floating point; one-hot labels are int64. Give class indices of shape (N,) "
              "(labels.argmax(dim=1)), or .float() them to keep them as probabilities (the same loss, and the form "
              "label smoothing and mixup need). Before torch 1.10 the same labels raised 'multi-target not "
              "supported'.",
        expect="RuntimeError",
        params=({"classes": 3, "batch": 4}, {"classes": 10, "batch": 16}),
        sources=("https://github.com/George730/E-ResGAT/issues/5",
                 "https://github.com/jbohnslav/deepethogram/issues/88",
                 "https://github.com/ycwu1997/MC-Net/issues/7"),
    ),
    Entry(
        id="cross-entropy-mask-with-channel", stage="step", chapter=3,
        title="a segmentation mask kept with a channel dimension, (N, 1, H, W) or (N, H, W, 3), for cross_entropy",
        code="torch.manual_seed(0)\n"
             "logits = nn.Conv2d(3, $classes, 1)(torch.randn($batch, 3, $size, $size))   # (N, C, H, W)\n"
             "mask = torch.randint(0, $classes, ($batch, 1, $size, $size))   # a grayscale mask loaded as an image\n"
             "loss = F.cross_entropy(logits, mask)",
        fix="torch.manual_seed(0)\n"
            "logits = nn.Conv2d(3, $classes, 1)(torch.randn($batch, 3, $size, $size))\n"
            "mask = torch.randint(0, $classes, ($batch, 1, $size, $size)).squeeze(1)   # (N, H, W) class indices\n"
            "loss = F.cross_entropy(logits, mask)\n"
            "shown = tuple(mask.shape)",
        cause="Per-pixel cross_entropy takes logits (N, C, H, W) and a mask (N, H, W) of class indices, one per "
              "pixel. A mask read as an image keeps a channel: (N, 1, H, W) from a grayscale file (squeeze(1)), "
              "or (N, H, W, 3) from an RGB one, whose colours must first be mapped to class indices. Older torch "
              "words it '...but got targets of size: : [N, 1, H, W]'.",
        expect="RuntimeError",
        params=({"classes": 3, "batch": 2, "size": 4}, {"classes": 5, "batch": 4, "size": 8}),
        sources=("https://github.com/jfzhang95/pytorch-deeplab-xception/issues/189",
                 "https://github.com/milesial/Pytorch-UNet/issues/226",
                 "https://github.com/SforAiDl/KD_Lib/issues/122",
                 "https://github.com/HSG-AIML/SSLTransformerRS/issues/1"),
        wordings=("only batches of spatial targets supported (3D tensors) but got targets of size: : "
                  "[8, 1, 224, 224]",
                  "1only batches of spatial targets supported (3D tensors) but got targets of size: : "
                  "[1, 1, 187, 621]"),
    ),
    Entry(
        id="cross-entropy-spatial-size-mismatch", stage="step", chapter=3,
        title="segmentation logits at another resolution than the mask (or left channels-last) for cross_entropy",
        code="torch.manual_seed(0)\n"
             "features = torch.randn($batch, 3, $size, $size)\n"
             "logits = nn.Conv2d(3, $classes, 3, stride=2, padding=1)(features)   # the output is half the size\n"
             "mask = torch.randint(0, $classes, ($batch, $size, $size))\n"
             "loss = F.cross_entropy(logits, mask)",
        fix="torch.manual_seed(0)\n"
            "features = torch.randn($batch, 3, $size, $size)\n"
            "logits = nn.Conv2d(3, $classes, 3, stride=2, padding=1)(features)\n"
            "logits = F.interpolate(logits, size=($size, $size), mode='bilinear')   # back to the mask's size\n"
            "mask = torch.randint(0, $classes, ($batch, $size, $size))\n"
            "loss = F.cross_entropy(logits, mask)\n"
            "shown = tuple(logits.shape)",
        cause="Every pixel of the mask needs its own logits: (N, C, H, W) against (N, H, W), the same H and W. A "
              "model whose output is strided (a decoder that stops at a quarter of the size) needs its logits "
              "upsampled to the mask (or the mask resized with nearest); logits left channels-last, (N, H, W, C), "
              "give the same message and need permute(0, 3, 1, 2).",
        expect="RuntimeError",
        params=({"classes": 3, "batch": 2, "size": 8}, {"classes": 6, "batch": 3, "size": 16}),
        sources=("https://github.com/CSAILVision/semantic-segmentation-pytorch/issues/66",
                 "https://github.com/swamiviv/LSD-seg/issues/1"),
        wordings=("input and target batch or spatial sizes don't match: target [1 x 85 x 106], input [1 x 8 x 170 x "
                  "212] at /opt/conda/conda-bld/pytorch_1524582441669/work/aten/src/THCUNN/generic/"
                  "SpatialClassNLLCriterion.cu:24",),
    ),
    Entry(
        id="regression-target-other-size", stage="step", chapter=3,
        title="MSELoss (or L1Loss) between a prediction and a target of another size (a map at a lower resolution)",
        code="torch.manual_seed(0)\n"
             "images = torch.randn(2, 3, $size, $size)\n"
             "density = nn.Conv2d(3, 1, 3, stride=$stride, padding=1)(images)   # the output is strided\n"
             "target = torch.rand(2, 1, $size, $size)                         # the map at full resolution\n"
             "loss = F.mse_loss(density, target)",
        fix="torch.manual_seed(0)\n"
            "images = torch.randn(2, 3, $size, $size)\n"
            "density = nn.Conv2d(3, 1, 3, stride=$stride, padding=1)(images)\n"
            "target = torch.rand(2, 1, $size, $size)\n"
            "target = F.avg_pool2d(target, $stride) * $stride ** 2   # resized to the output (a count kept)\n"
            "loss = F.mse_loss(density, target)\n"
            "shown = tuple(target.shape)",
        cause="An elementwise loss compares the prediction and the target element by element, so their shapes must "
              "match (torch first warns 'Using a target size ... that is different to the input size', then "
              "fails where broadcasting cannot help). Resize one to the other: the target down to the model's "
              "output (pooling, keeping sums for a density map) or the prediction up (F.interpolate).",
        expect="RuntimeError",
        params=({"size": 16, "stride": 2}, {"size": 32, "stride": 4}),
        sources=("https://github.com/surajdakua/Crowd-Counting-Using-Pytorch/issues/4",
                 "https://github.com/face-alignment-group-of-ahucs/SHN-based-2D-face-alignment/issues/2",
                 "https://github.com/qianngli/MCNet/issues/3"),
    ),
    Entry(
        id="cross-entropy-batch-size-mismatch", stage="step", chapter=3,
        title="a flatten with a hard-coded size turned the batch into more rows than there are targets",
        code="torch.manual_seed(0)\n"
             "feats = torch.randn($batch, 16, 5, 5)           # conv features: 400 per sample\n"
             "logits = nn.Linear($flat, 10)(feats.view(-1, $flat))\n"
             "loss = F.cross_entropy(logits, torch.randint(0, 10, ($batch,)))",
        fix="torch.manual_seed(0)\n"
            "feats = torch.randn($batch, 16, 5, 5)\n"
            "logits = nn.Linear(400, 10)(feats.flatten(1))   # keep the batch dimension\n"
            "loss = F.cross_entropy(logits, torch.randint(0, 10, ($batch,)))\n"
            "shown = tuple(logits.shape)",
        cause="The logits and the targets disagree on the number of samples; usually x.view(-1, k) with a k "
              "that does not match the features per sample folds several samples into one row or splits one into "
              "several. Flatten with x.flatten(1) or x.view(x.size(0), -1).",
        expect="ValueError",
        params=({"batch": 4, "flat": 200}, {"batch": 6, "flat": 100}),
        sources=("https://github.com/pytorch/pytorch/issues/139031",
                 "https://github.com/xinge008/Cylinder3D/issues/128"),
    ),
    Entry(
        id="cross-entropy-target-out-of-bounds", stage="step", chapter=5,
        title="class labels numbered 1..C instead of 0..C-1",
        code="torch.manual_seed(0)\n"
             "labels = torch.tensor($labels)           # classes numbered from 1, as in the CSV\n"
             "logits = nn.Linear(8, $classes)(torch.randn(len(labels), 8))\n"
             "loss = F.cross_entropy(logits, labels)",
        fix="torch.manual_seed(0)\n"
            "labels = torch.tensor($labels) - 1       # 0 .. C-1\n"
            "logits = nn.Linear(8, $classes)(torch.randn(len(labels), 8))\n"
            "loss = F.cross_entropy(logits, labels)\n"
            "shown = (int(labels.min()), int(labels.max()))",
        cause="A target index is >= the number of classes (or negative): labels counted from 1, a mask with "
              "pixel values 0..255, or a head sized for fewer classes. On a GPU the same mistake is a "
              "'CUDA error: device-side assert triggered' (Assertion `t >= 0 && t < n_classes` failed) that can "
              "surface at a later call; rerun on the CPU to see this message.",
        expect="IndexError",
        params=({"classes": 5, "labels": "[1, 2, 3, 4, 5]"}, {"classes": 10, "labels": "[3, 10, 1, 7]"}),
        sources=("https://github.com/milesial/Pytorch-UNet/issues/291",
                 "https://github.com/TencentGameMate/gnn_cross_lingual/issues/5",
                 "https://github.com/aws/studio-lab-examples/issues/236"),
    ),
    Entry(
        id="bce-target-size", stage="step", chapter=3,
        title="BCEWithLogitsLoss got logits of shape (N, 1) and targets of shape (N,)",
        code="torch.manual_seed(0)\n"
             "logits = nn.Linear(8, 1)(torch.randn($batch, 8))        # (N, 1)\n"
             "targets = torch.randint(0, 2, ($batch,)).float()         # (N,)\n"
             "loss = nn.BCEWithLogitsLoss()(logits, targets)",
        fix="torch.manual_seed(0)\n"
            "logits = nn.Linear(8, 1)(torch.randn($batch, 8)).squeeze(1)   # (N,)\n"
            "targets = torch.randint(0, 2, ($batch,)).float()\n"
            "loss = nn.BCEWithLogitsLoss()(logits, targets)\n"
            "shown = tuple(logits.shape)",
        cause="Binary cross-entropy compares input and target element by element, so both must have the same "
              "shape; a one-unit output layer gives (N, 1) while labels come as (N,). Squeeze the output or "
              "unsqueeze the targets.",
        expect="ValueError",
        params=({"batch": 4}, {"batch": 32}),
        sources=("https://github.com/pytorch/pytorch/issues/25663",
                 "https://github.com/milesial/Pytorch-UNet/issues/244"),
    ),
    Entry(
        id="bce-integer-target", stage="step", chapter=3,
        title="BCEWithLogitsLoss got integer (0/1) targets",
        code="torch.manual_seed(0)\n"
             "logits = nn.Linear(8, 1)(torch.randn(6, 8)).squeeze(1)\n"
             "targets = torch.tensor([0, 1, 1, 0, 1, 0], dtype=torch.$dtype)\n"
             "loss = nn.BCEWithLogitsLoss()(logits, targets)",
        fix="torch.manual_seed(0)\n"
            "logits = nn.Linear(8, 1)(torch.randn(6, 8)).squeeze(1)\n"
            "targets = torch.tensor([0, 1, 1, 0, 1, 0], dtype=torch.$dtype).float()\n"
            "loss = nn.BCEWithLogitsLoss()(logits, targets)\n"
            "shown = str(targets.dtype)",
        cause="Binary cross-entropy treats targets as probabilities, so they must be floating point like the "
              "logits; integer class labels make torch try to write a float result into an integer tensor. "
              "Convert them with .float().",
        expect="RuntimeError",
        params=({"dtype": "int64"}, {"dtype": "int32"}),
        sources=("https://github.com/ando-khachatryan/HiDDeN/issues/28",
                 "https://github.com/PacktPublishing/Mastering-PyTorch/issues/4",
                 "https://github.com/skorch-dev/skorch/issues/813"),
    ),
    Entry(
        id="loss-input-integer", stage="step", chapter=3,
        title="the loss got integers where the model's float scores belong (predictions cast with .long(), an argmax "
              "or a threshold taken before the loss, integer data never turned into floats)",
        code="torch.manual_seed(0)\n"
             "model = nn.Linear(4, $classes)\n"
             "x, y = torch.randn(8, 4), $labels\n"
             "loss = $loss($bad, y)   # integers in: no float kernel, and no gradient either",
        fix="torch.manual_seed(0)\n"
            "model = nn.Linear(4, $classes)\n"
            "x, y = torch.randn(8, 4), $labels\n"
            "loss = $loss($good, $target)   # the raw float output; argmax and thresholds only for metrics\n"
            "loss.backward()\n"
            "shown = model.weight.grad is not None",
        cause="Losses compute on floating-point scores; an integer input finds no kernel for its dtype and torch "
              "names the kernel that was missing (log_softmax inside cross_entropy, mse, binary_cross_entropy). Had it "
              "run, nothing would train: .long(), argmax and a threshold have no gradient, so the loss would not "
              "reach the weights. Pass the model's output as it comes (logits to CrossEntropyLoss or "
              "BCEWithLogitsLoss) and keep argmax and thresholds for the metrics; data that arrives as integers (a "
              "numpy int array, torch.arange) becomes an input with .float().",
        expect="NotImplementedError",
        params=({"classes": 3, "labels": "torch.randint(0, 3, (8,))", "loss": "F.cross_entropy",
                 "bad": "model(x).long()", "good": "model(x)", "target": "y"},
                {"classes": 1, "labels": "torch.randint(0, 2, (8, 1))", "loss": "F.mse_loss",
                 "bad": "(model(x) > 0).long()", "good": "model(x)", "target": "y.float()"}),
        sources=("https://github.com/pytorch/pytorch/issues/40388",
                 "https://github.com/rasbt/machine-learning-book/issues/144",
                 "https://github.com/pytorch/pytorch/issues/14224"),
        wordings=("\"log_softmax_lastdim_kernel_impl\" not implemented for 'torch.LongTensor'",),   # torch 1.0 (#14224)
    ),
    Entry(
        id="bce-input-not-probability", stage="step", chapter=5,
        title="raw logits passed to BCELoss (the sigmoid is missing)",
        code="torch.manual_seed(0)\n"
             "logits = nn.Linear(8, 1)(torch.randn($batch, 8)).squeeze(1)   # no sigmoid at the end of the model\n"
             "targets = torch.randint(0, 2, ($batch,)).float()\n"
             "loss = nn.BCELoss()(logits, targets)",
        fix="torch.manual_seed(0)\n"
            "logits = nn.Linear(8, 1)(torch.randn($batch, 8)).squeeze(1)\n"
            "targets = torch.randint(0, 2, ($batch,)).float()\n"
            "loss = nn.BCEWithLogitsLoss()(logits, targets)   # the sigmoid inside, numerically stable\n"
            "shown = round(float(loss), 2)  # two decimals: what another CPU computes agrees",
        cause="BCELoss takes probabilities in [0, 1], but a model ending in a Linear layer gives logits of any "
              "sign; use BCEWithLogitsLoss on the logits. On a GPU the same mistake is a device-side assert "
              "(CUDA error: device-side assert triggered) rather than this message.",
        expect="RuntimeError",
        params=({"batch": 8}, {"batch": 64}),
        sources=("https://github.com/ray-project/ray/issues/17117",
                 "https://github.com/pytorch/pytorch/issues/1010",
                 "https://github.com/pytorch/pytorch/issues/65659",
                 "https://github.com/NVIDIA/pix2pixHD/issues/9"),
        wordings=(   # on a GPU the check is a kernel assert, one line per thread, then "device-side assert triggered"
            "/opt/conda/conda-bld/pytorch_1631630806732/work/aten/src/ATen/native/cuda/Loss.cu:111: operator(): "
            "block: [0,0,0], thread: [28,0,0] Assertion `input_val >= zero && input_val <= one` failed.",
            "/opt/conda/conda-bld/pytorch_1512386481460/work/torch/lib/THCUNN/BCECriterion.cu:30: block: [16,0,0], "
            "thread: [31,0,0] Assertion `input >= 0. && input <= 1.` failed."),
    ),
    Entry(
        id="mse-target-size-broadcast", stage="step", chapter=5,
        title="MSELoss between an output of shape (N, 1) and targets of shape (N,)",
        code="torch.manual_seed(0)\n"
             "pred = nn.Linear(4, 1)(torch.randn($batch, 4))     # (N, 1)\n"
             "y = torch.randn($batch)                             # (N,)\n"
             "loss = nn.$loss()(pred, y)                          # broadcasts to (N, N): trains on the wrong thing",
        fix="torch.manual_seed(0)\n"
            "pred = nn.Linear(4, 1)(torch.randn($batch, 4)).squeeze(1)   # (N,)\n"
            "y = torch.randn($batch)\n"
            "loss = nn.$loss()(pred, y)\n"
            "shown = tuple(pred.shape)",
        cause="Only a warning: (N, 1) against (N,) broadcasts to an (N, N) table of every prediction against every "
              "target, so the loss is finite, the code runs, and the model learns to predict the mean. Make the "
              "shapes equal.",
        expect="UserWarning",
        params=({"batch": 4, "loss": "MSELoss"}, {"batch": 64, "loss": "L1Loss"}),
        sources=("https://github.com/deepset-ai/FARM/issues/229",
                 "https://github.com/Photon-AI-Research/NeuralSolvers/issues/20",
                 "https://github.com/sunwuzhou03/reinforcement-learning-lab/issues/1"),
    ),
    Entry(
        id="ctc-input-lengths-batch", stage="step", chapter=7,
        title="CTCLoss input_lengths built once for the loader's batch size, on a shorter last batch",
        code="torch.manual_seed(0)\n"
             "log_probs = torch.randn(20, $last, 6).log_softmax(2)          # (T, N, C): the last batch is shorter\n"
             "targets = torch.randint(1, 6, ($last, 4))\n"
             "input_lengths = torch.full(($batch,), 20)                    # sized once, for the full batch\n"
             "loss = nn.CTCLoss()(log_probs, targets, input_lengths, torch.full(($last,), 4))",
        fix="torch.manual_seed(0)\n"
            "log_probs = torch.randn(20, $last, 6).log_softmax(2)\n"
            "targets = torch.randint(1, 6, ($last, 4))\n"
            "input_lengths = torch.full((log_probs.shape[1],), log_probs.shape[0])   # from this batch\n"
            "loss = nn.CTCLoss()(log_probs, targets, input_lengths, torch.full(($last,), 4))\n"
            "shown = tuple(input_lengths.shape)",
        cause="CTCLoss wants one input length and one target length per example of this batch; lengths built once "
              "from the configured batch size fail on the shorter last batch of an epoch, so the error comes and "
              "goes. Build them from log_probs.shape every iteration.",
        expect="RuntimeError",
        params=({"batch": 4, "last": 2}, {"batch": 64, "last": 17}),
        sources=("https://github.com/Sierkinhane/CRNN_Chinese_Characters_Rec/issues/304",),
    ),
)
