"""The atlas's entries for the data pipeline and for evaluation.

Stage "data": Dataset, DataLoader, collate_fn and worker errors (chapter 1), samplers, random_split and
WeightedRandomSampler (chapter 2). Stage "evaluation": no_grad, inference_mode, eval mode and metrics
(chapter 4). Fragments that start DataLoader workers use one worker and the fork start method (the Linux
default), so classes defined in a fragment reach the worker without pickling.
"""
from __future__ import annotations

from textwrap import dedent

from course_utils.atlas.entry import Entry


def _src(*parts: str) -> str:
    """A fragment written indented in this file (in one or more parts), as the code it is."""
    return "\n".join(dedent(part).strip("\n") + "\n" for part in parts)


# A collate_fn that pads every tensor of a batch to the largest shape in it (used by two fixes).
_PAD_COLLATE = """
def pad_collate(batch):
    xs, ys = zip(*batch)
    size = [max(dims) for dims in zip(*(x.shape for x in xs))]
    xb = torch.zeros(len(xs), *size)
    for i, x in enumerate(xs):
        xb[(i, *(slice(0, n) for n in x.shape))] = x
    return xb, torch.tensor(ys)
"""

ENTRIES = (
    # ---------------------------------------------------------------- chapter 1: Dataset, DataLoader, collate
    Entry(
        id="collate-stack-unequal-sizes", stage="data", chapter=1,
        title="samples of different sizes (images not resized, sequences not padded) batched by default_collate",
        code=_src("""
            samples = [(torch.zeros($first), 0), (torch.zeros($second), 1)]
            loader = DataLoader(samples, batch_size=2)
            xb, yb = next(iter(loader))
        """),
        fix=_src(_PAD_COLLATE, """
            samples = [(torch.zeros($first), 0), (torch.zeros($second), 1)]
            loader = DataLoader(samples, batch_size=2, collate_fn=pad_collate)
            xb, yb = next(iter(loader))
            shown = tuple(xb.shape)
        """),
        cause="default_collate builds a batch with torch.stack, which needs every sample's tensor to have the "
              "same shape; images of different sizes or sequences of different lengths cannot be stacked. "
              "Resize or crop in the dataset, or pass a collate_fn that pads (or returns a list).",
        expect="RuntimeError",
        params=({"first": "3, 32, 32", "second": "3, 28, 28"}, {"first": "12", "second": "9"}),
        sources=("https://github.com/milesial/Pytorch-UNet/issues/285",
                 "https://github.com/Suanmd/TR-MISR/issues/3",
                 "https://github.com/abhishekkrthakur/captcha-recognition-pytorch/issues/1"),
    ),
    Entry(
        id="collate-resize-storage-in-worker", stage="data", chapter=1,
        title="samples of different sizes batched inside a DataLoader worker (num_workers > 0)",
        code=_src("""
            samples = [(torch.zeros($first), 0), (torch.zeros($second), 1)]
            loader = DataLoader(samples, batch_size=2, num_workers=1)
            xb, yb = next(iter(loader))
        """),
        fix=_src(_PAD_COLLATE, """
            samples = [(torch.zeros($first), 0), (torch.zeros($second), 1)]
            loader = DataLoader(samples, batch_size=2, num_workers=1, collate_fn=pad_collate)
            xb, yb = next(iter(loader))
            shown = tuple(xb.shape)
        """),
        cause="The same unequal shapes as the stack error, seen from a worker: there default_collate first "
              "allocates shared memory for the batch's total size and shapes it like the first sample, which "
              "fails when the first sample is the largest. Make the samples one shape, or pad in a collate_fn.",
        expect="RuntimeError",
        params=({"first": "3, 32, 32", "second": "3, 28, 28"}, {"first": "12", "second": "9"}),
        sources=("https://github.com/open-edge-platform/anomalib/issues/1855",
                 "https://github.com/voletiv/mcvd-pytorch/issues/22",
                 "https://github.com/Project-MONAI/MONAI/issues/7171"),
        python_note="The message embeds the worker's formatted traceback: the site-packages path and torch's line "
                    "numbers vary by install, and Python 3.12+ shows no <listcomp> frame (comprehensions are "
                    "inlined) and may draw other caret lines than 3.11; only the first line ('Caught RuntimeError in "
                    "DataLoader worker process 0.') and the last line (the original error) are stable.",
    ),
    Entry(
        id="collate-list-unequal-length", stage="data", chapter=1,
        title="__getitem__ returns a Python list whose length differs between samples (boxes, labels, tokens)",
        code=_src("""
            samples = [(torch.zeros(4), [$labels_a]), (torch.zeros(4), [$labels_b])]
            loader = DataLoader(samples, batch_size=2)
            xb, labels = next(iter(loader))
        """),
        fix=_src("""
            def keep_lists(batch):
                xs, labels = zip(*batch)
                return torch.stack(xs), [torch.tensor(l) for l in labels]
            samples = [(torch.zeros(4), [$labels_a]), (torch.zeros(4), [$labels_b])]
            loader = DataLoader(samples, batch_size=2, collate_fn=keep_lists)
            xb, labels = next(iter(loader))
            shown = [len(l) for l in labels]
        """),
        cause="default_collate collates a list field position by position, so the lists in one batch must "
              "all have the same length; a variable number of labels or boxes per sample breaks it. Keep them "
              "as a list of tensors (custom collate_fn) or pad them to one length.",
        expect="RuntimeError",
        params=({"labels_a": "1, 2, 3", "labels_b": "4, 5"}, {"labels_a": "7", "labels_b": "1, 7, 9, 9"}),
        sources=("https://github.com/shaoxiongji/fed-att/issues/5",
                 "https://github.com/cheerss/PixelLink-with-pytorch/issues/13",
                 "https://github.com/IDKiro/action-recognition/issues/21"),
    ),
    Entry(
        id="collate-unsupported-type", stage="data", chapter=1,
        title="__getitem__ returns a custom object (or None) that default_collate cannot batch",
        code=_src("""
            class Sample:
                def __init__(self, x, y):
                    self.x, self.y = x, y

            class Wrapped(Dataset):
                def __len__(self):
                    return 4

                def __getitem__(self, i):
                    return $item

            batch = next(iter(DataLoader(Wrapped(), batch_size=2)))
        """),
        fix=_src("""
            class Wrapped(Dataset):
                def __len__(self):
                    return 4

                def __getitem__(self, i):
                    return torch.zeros(3), i % 2

            xb, yb = next(iter(DataLoader(Wrapped(), batch_size=2)))
            shown = tuple(xb.shape)
        """),
        cause="default_collate only knows tensors, NumPy arrays, numbers, strings and dicts/lists/tuples of "
              "them; an object of your own class, or None from a sample that failed to load, cannot be "
              "batched. Return tensors in a tuple or dict, skip bad samples, or write a collate_fn.",
        expect="TypeError",
        params=({"item": "Sample(torch.zeros(3), i % 2)"}, {"item": "None if i == 0 else (torch.zeros(3), 1)"}),
        sources=("https://github.com/Megvii-BaseDetection/YOLOX/issues/1523",
                 "https://github.com/open-mmlab/mmdetection/issues/10952",
                 "https://github.com/graphnet-team/graphnet/issues/685"),
    ),
    Entry(
        id="dataset-len-too-long", stage="data", chapter=1,
        title="a Dataset whose __len__ is one more than the samples it holds",
        code=_src("""
            class Series(Dataset):
                def __init__(self, n):
                    self.x = torch.arange(float(n))

                def __len__(self):
                    return len(self.x) + 1

                def __getitem__(self, i):
                    return self.x[i]

            for xb in DataLoader(Series($n), batch_size=$bs):
                pass
        """),
        fix=_src("""
            class Series(Dataset):
                def __init__(self, n):
                    self.x = torch.arange(float(n))

                def __len__(self):
                    return len(self.x)

                def __getitem__(self, i):
                    return self.x[i]

            shown = sum(1 for xb in DataLoader(Series($n), batch_size=$bs))
        """),
        cause="The sampler draws indices 0 .. len(dataset) - 1 from __len__, so a __len__ larger than the "
              "data (an off-by-one, or a length taken from another list) asks __getitem__ for an index that "
              "does not exist. __len__ must count exactly the samples __getitem__ can return.",
        expect="IndexError",
        params=({"n": 10, "bs": 4}, {"n": 50, "bs": 8}),
        sources=("https://github.com/jakeoung/Unet_pytorch/issues/4",
                 "https://github.com/wangyu/rethink-audio-fsl/issues/4"),
    ),
    Entry(
        id="unpack-batch-fields", stage="data", chapter=1,
        title="the loop unpacks fewer fields than each batch holds",
        code=_src("""
            ds = TensorDataset(torch.randn(8, 4), torch.randint(0, 2, (8,)), $extra)
            for $targets in DataLoader(ds, batch_size=4):
                pass
        """),
        fix=_src("""
            ds = TensorDataset(torch.randn(8, 4), torch.randint(0, 2, (8,)), $extra)
            for $targets, *rest in DataLoader(ds, batch_size=4):
                pass
            shown = len(rest)
        """),
        cause="A batch has as many fields as __getitem__ returns (here also an index or a mask), and "
              "`for x, y in loader` unpacks exactly two. Unpack every field the dataset returns, or change "
              "__getitem__ to return only what the loop expects.",
        expect="ValueError",
        params=({"extra": "torch.arange(8)", "targets": "x, y"},
                {"extra": "torch.ones(8), torch.arange(8)", "targets": "x, y, w"}),
        sources=("https://github.com/zhangxueting/DCN/issues/4",
                 "https://github.com/sgrvinod/a-PyTorch-Tutorial-to-Image-Captioning/issues/115"),
        python_note="Python's own message: identical on 3.11 and 3.13 (checked); later Pythons may also say "
                    "how many values there were, so match on 'too many values to unpack (expected N'.",
    ),
    Entry(
        id="shuffle-empty-dataset", stage="data", chapter=1,
        title="shuffle=True on a dataset that found no files (wrong folder or file pattern)",
        code=_src("""
            for i in range(6):
                torch.save(torch.full((2,), float(i)), tmp / f"{i}.pt")

            class Folder(Dataset):
                def __init__(self, root, pattern):
                    self.files = sorted(root.glob(pattern))

                def __len__(self):
                    return len(self.files)

                def __getitem__(self, i):
                    return torch.load(self.files[i])

            loader = DataLoader(Folder($root, "$pattern"), batch_size=2, shuffle=True)
        """),
        fix=_src("""
            for i in range(6):
                torch.save(torch.full((2,), float(i)), tmp / f"{i}.pt")

            class Folder(Dataset):
                def __init__(self, root, pattern):
                    self.files = sorted(root.glob(pattern))
                    if not self.files:
                        raise FileNotFoundError(f"no {pattern} files in {root}")

                def __len__(self):
                    return len(self.files)

                def __getitem__(self, i):
                    return torch.load(self.files[i])

            loader = DataLoader(Folder(tmp, "*.pt"), batch_size=2, shuffle=True)
            shown = sum(len(xb) for xb in loader)
        """),
        cause="shuffle=True builds a RandomSampler over len(dataset) samples, and it refuses zero: the dataset "
              "is empty, nearly always because its path or file pattern matched nothing. Check the folder "
              "and the extension; fail loudly in __init__ when no file is found.",
        expect="ValueError",
        params=({"root": "tmp", "pattern": "*.pth"}, {"root": "tmp / 'train'", "pattern": "*.pt"}),
        sources=("https://github.com/facebookresearch/detr/issues/195",
                 "https://github.com/pprp/captcha_identify.pytorch/issues/1",
                 "https://github.com/LeeJunHyun/Image_Segmentation/issues/88"),
    ),
    Entry(
        id="next-on-dataloader", stage="data", chapter=1,
        title="next() called on the DataLoader (or the Dataset) instead of on an iterator over it",
        code=_src("""
            ds = TensorDataset(torch.randn(8, 4), torch.randint(0, 2, (8,)))
            loader = DataLoader(ds, batch_size=4)
            xb, yb = next($iterable)
        """),
        fix=_src("""
            ds = TensorDataset(torch.randn(8, 4), torch.randint(0, 2, (8,)))
            loader = DataLoader(ds, batch_size=4)
            xb, yb = next(iter(loader))
            shown = tuple(xb.shape)
        """),
        cause="A DataLoader (like a Dataset) is an iterable, not an iterator: each iter(loader) starts a new "
              "pass over the data, and next() needs that iterator. Use next(iter(loader)) for one batch, or "
              "keep `it = iter(loader)` and call next(it).",
        expect="TypeError",
        params=({"iterable": "loader"}, {"iterable": "ds"}),
        sources=("https://github.com/KarhouTam/SCAFFOLD-PyTorch/issues/2",
                 "https://github.com/pytorch/tutorials/pull/2963"),
        python_note="Python's own message ('... object is not an iterator'): identical on 3.11 and 3.13 (checked).",
    ),
    Entry(
        id="iterable-dataset-shuffle", stage="data", chapter=1,
        title="shuffle=True (or a sampler) given to a DataLoader over an IterableDataset",
        code=_src("""
            from torch.utils.data import RandomSampler

            class Stream(IterableDataset):
                def __iter__(self):
                    return iter(torch.arange(8.0))

            loader = DataLoader(Stream(), batch_size=4, $option)
        """),
        fix=_src("""
            class Stream(IterableDataset):
                def __init__(self, seed):
                    self.generator = torch.Generator().manual_seed(seed)

                def __iter__(self):
                    order = torch.randperm(8, generator=self.generator)
                    return iter(torch.arange(8.0)[order])

            loader = DataLoader(Stream(seed=0), batch_size=4)
            shown = sum(len(xb) for xb in loader)
        """),
        cause="An IterableDataset decides its own order (it has no indices for a sampler to draw), so the "
              "DataLoader refuses shuffle and sampler for it. Shuffle inside __iter__ (a shuffle buffer, "
              "or shuffled shards), or use a map-style Dataset.",
        expect="ValueError",
        params=({"option": "shuffle=True"}, {"option": "sampler=RandomSampler(range(8))"}),
        sources=("https://github.com/huggingface/sentence-transformers/issues/740",
                 "https://github.com/vahidk/tfrecord/issues/51",
                 "https://github.com/fastai/fastai/issues/2387"),
    ),
    Entry(
        id="prefetch-factor-without-workers", stage="data", chapter=1,
        title="prefetch_factor set while num_workers=0",
        code=_src("""
            workers = 0
            ds = TensorDataset(torch.randn(16, 4))
            loader = DataLoader(ds, batch_size=$bs, num_workers=workers, prefetch_factor=$prefetch)
        """),
        fix=_src("""
            workers = 0
            ds = TensorDataset(torch.randn(16, 4))
            loader = DataLoader(ds, batch_size=$bs, num_workers=workers,
                                prefetch_factor=$prefetch if workers > 0 else None)
            shown = len(loader)
        """),
        cause="prefetch_factor is how many batches each worker loads ahead; with num_workers=0 there are no "
              "workers and the DataLoader rejects it. Pass prefetch_factor only when num_workers > 0 "
              "(a config that sets both often turns workers off, e.g. on Windows or in a debug run).",
        expect="ValueError",
        params=({"bs": 4, "prefetch": 2}, {"bs": 8, "prefetch": 4}),
        sources=("https://github.com/rom1504/clip-retrieval/issues/356",
                 "https://github.com/autonomousvision/projected-gan/issues/102",
                 "https://github.com/FudanNLP/fastHan/issues/45"),
    ),
    Entry(
        id="persistent-workers-without-workers", stage="data", chapter=1,
        title="persistent_workers=True while num_workers=0",
        code=_src("""
            workers = 0
            ds = TensorDataset(torch.randn(16, 4))
            loader = DataLoader(ds, batch_size=$bs, num_workers=workers, persistent_workers=True)
        """),
        fix=_src("""
            workers = 0
            ds = TensorDataset(torch.randn(16, 4))
            loader = DataLoader(ds, batch_size=$bs, num_workers=workers, persistent_workers=workers > 0)
            shown = len(loader)
        """),
        cause="persistent_workers keeps the worker processes alive between epochs; with num_workers=0 there "
              "are none to keep, and the DataLoader rejects the option. Tie it to the worker count: "
              "persistent_workers=num_workers > 0.",
        expect="ValueError",
        params=({"bs": 4}, {"bs": 16}),
        sources=("https://github.com/torchmd/torchmd-net/issues/323",
                 "https://github.com/mllam/neural-lam/issues/298",
                 "https://github.com/modelscope/ms-swift/pull/10123"),
    ),
    Entry(
        id="worker-raised", stage="data", chapter=1,
        title="__getitem__ raises inside a DataLoader worker (a bad row in the data)",
        code=_src("""
            class Rows(Dataset):
                rows = [$rows]

                def __len__(self):
                    return len(self.rows)

                def __getitem__(self, i):
                    x, y = self.rows[i].split(",")
                    return torch.tensor(float(x)), int(y)

            for xb, yb in DataLoader(Rows(), batch_size=2, num_workers=1):
                pass
        """),
        fix=_src("""
            def parses(row):
                x, y = row.split(",")
                try:
                    float(x), int(y)
                except ValueError:
                    return False
                return True

            class Rows(Dataset):
                def __init__(self, rows):
                    self.rows = [row for row in rows if parses(row)]

                def __len__(self):
                    return len(self.rows)

                def __getitem__(self, i):
                    x, y = self.rows[i].split(",")
                    return torch.tensor(float(x)), int(y)

            shown = sum(len(yb) for xb, yb in DataLoader(Rows([$rows]), batch_size=2, num_workers=1))
        """),
        cause="An exception in __getitem__ (or a transform, or collate_fn) inside a worker is sent back and "
              "re-raised as the same type with 'Caught ... in DataLoader worker process N'; the real error "
              "is the last line of the 'Original Traceback' that follows. Fix that: here, a row that does "
              "not parse (clean or skip it when the dataset is built).",
        expect="ValueError",
        params=({"rows": '"0.5,1", "0.7,cat", "0.1,0"'}, {"rows": '"0.5,1", "n/a,0", "0.1,1", "0.3,0"'}),
        sources=("https://github.com/airctic/icevision/issues/365",
                 "https://github.com/qinglew/PCN-PyTorch/issues/9",
                 "https://github.com/Binyr/ASDA/issues/5"),
        python_note="The message embeds the worker's formatted traceback: the site-packages path and torch's line "
                    "numbers vary by install, and Python 3.12+ shows no <listcomp> frame (comprehensions are "
                    "inlined) and may draw other caret lines than 3.11; only the first line ('Caught ValueError in "
                    "DataLoader worker process 0.') and the last line (the original error) are stable.",
    ),
    Entry(
        id="worker-exited-unexpectedly", stage="data", chapter=1,
        title="a DataLoader worker process dies (killed by the OOM killer, or it crashed or exited)",
        code=_src("""
            class Fragile(Dataset):
                def __len__(self):
                    return 4

                def __getitem__(self, i):
                    $death
                    return torch.zeros(2)

            for xb in DataLoader(Fragile(), batch_size=2, num_workers=1):
                pass
        """),
        fix=_src("""
            class Fragile(Dataset):
                def __len__(self):
                    return 4

                def __getitem__(self, i):
                    return torch.zeros(2)

            shown = sum(1 for xb in DataLoader(Fragile(), batch_size=2, num_workers=1))
        """),
        cause="The worker process ended without a Python exception to send back: the kernel's out-of-memory "
              "killer, a crash in native code (a segfault, /dev/shm full) or an exit() in the dataset; the "
              "message cannot say which. Rerun with num_workers=0 to see the error in the main process, "
              "check the kernel log for the OOM killer, lower num_workers or the batch size.",
        expect="RuntimeError",
        params=({"death": "os._exit(1)"}, {"death": "os.kill(os.getpid(), signal.SIGKILL)"}),
        sources=("https://github.com/rowanz/r2c/issues/27",
                 "https://github.com/patrickloeber/pytorchTutorial/issues/3",
                 "https://github.com/xuebinqin/BASNet/issues/32"),
    ),
    Entry(
        id="dataloader-timeout", stage="data", chapter=1,
        title="a batch takes longer to load than the DataLoader's timeout",
        code=_src("""
            import time

            class Slow(Dataset):
                def __len__(self):
                    return 1

                def __getitem__(self, i):
                    time.sleep($load)  # e.g. a read from a slow network drive
                    return torch.zeros(2)

            loader = DataLoader(Slow(), batch_size=1, num_workers=1, timeout=$timeout)
            batch = next(iter(loader))
        """),
        fix=_src("""
            import time

            class Slow(Dataset):
                def __len__(self):
                    return 1

                def __getitem__(self, i):
                    time.sleep($load)  # e.g. a read from a slow network drive
                    return torch.zeros(2)

            loader = DataLoader(Slow(), batch_size=1, num_workers=1, timeout=4 * $load)
            batch = next(iter(loader))
            shown = tuple(batch.shape)
        """),
        cause="With timeout > 0 the main process waits at most that many seconds for each batch from the "
              "workers, then gives up. Set it well above the slowest batch (or leave the default 0, wait "
              "forever), and if a worker is really stuck find out where (a deadlock, a hung read).",
        expect="RuntimeError",
        params=({"load": 1.2, "timeout": 1}, {"load": 0.6, "timeout": 0.4}),
        sources=("https://github.com/pytorch/pytorch/issues/33296",
                 "https://github.com/pytorch/pytorch/issues/43502",
                 "https://github.com/MPI-Dortmund/tomotwin-cryoet/pull/57"),
    ),
    Entry(
        id="too-many-workers", stage="data", chapter=1,
        title="num_workers set far above the number of CPUs the process may use",
        code=_src("""
            ds = TensorDataset(torch.randn(64, 4))
            loader = DataLoader(ds, batch_size=8, num_workers=$workers)
        """),
        fix=_src("""
            ds = TensorDataset(torch.randn(64, 4))
            workers = min($workers, len(os.sched_getaffinity(0)))
            loader = DataLoader(ds, batch_size=8, num_workers=workers)
        """),
        cause="Each worker is a process; more of them than the CPUs this process may run on (its affinity, "
              "which cgroups and containers restrict) only adds contention and memory, and can freeze the "
              "loader. Cap num_workers at the CPU count the warning suggests (the number depends on the machine).",
        expect="UserWarning",
        params=({"workers": 64}, {"workers": 256}),
        sources=("https://github.com/AILab-CVC/YOLO-World/issues/413",
                 "https://github.com/embeddings-benchmark/mteb/issues/1331",
                 "https://github.com/MIC-DKFZ/ParticleSeg3D/pull/2"),
    ),
    Entry(
        id="from-numpy-negative-stride", stage="data", chapter=1,
        title="torch.from_numpy on a flipped or reversed NumPy view (flip augmentation, BGR to RGB)",
        code=_src("""
            img = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3)  # H, W, C
            x = torch.from_numpy($view)
        """),
        fix=_src("""
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
        code=_src("""
            was = torch.is_warn_always_enabled()
            torch.set_warn_always(True)  # torch shows this warning once per process: show it every run
            try:
                arr = $array
                x = torch.from_numpy(arr)
            finally:
                torch.set_warn_always(was)
        """),
        fix=_src("""
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
        title="a NumPy array of dtype object (ragged features, a DataFrame column of arrays) made into a tensor",
        code=_src("""
            features = [np.ones(n, dtype=np.float32) for n in ($lengths)]
            arr = np.array(features, dtype=object)
            x = torch.tensor(arr)
        """),
        fix=_src("""
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
        code=_src("""
            was = torch.is_warn_always_enabled()
            torch.set_warn_always(True)  # torch shows this warning once per process: show it every run
            try:
                frames = [np.zeros($shape, dtype=np.float32) for _ in range($n)]
                batch = torch.tensor(frames)
            finally:
                torch.set_warn_always(was)
        """),
        fix=_src("""
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
    # ---------------------------------------------------------------- chapter 2: samplers and splits
    Entry(
        id="sampler-with-shuffle", stage="data", chapter=2,
        title="a sampler (WeightedRandomSampler, DistributedSampler) and shuffle=True given together",
        code=_src("""
            from torch.utils.data.distributed import DistributedSampler

            ds = TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,)))
            sampler = $sampler
            loader = DataLoader(ds, batch_size=4, sampler=sampler, shuffle=True)
        """),
        fix=_src("""
            from torch.utils.data.distributed import DistributedSampler

            ds = TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,)))
            sampler = $sampler
            loader = DataLoader(ds, batch_size=4, sampler=sampler)
            shown = len(loader)
        """),
        cause="shuffle=True means 'use a RandomSampler', so it cannot be combined with a sampler of your own, "
              "which already decides the order. Drop shuffle; the sampler shuffles (a DistributedSampler "
              "with its own shuffle=True and set_epoch each epoch).",
        expect="ValueError",
        params=({"sampler": "WeightedRandomSampler(torch.ones(16), num_samples=16)"},
                {"sampler": "DistributedSampler(ds, num_replicas=2, rank=0)"}),
        sources=("https://github.com/wohlert/semi-supervised-pytorch/issues/12",),
    ),
    Entry(
        id="batch-sampler-exclusive", stage="data", chapter=2,
        title="a batch_sampler given together with batch_size, shuffle, sampler or drop_last",
        code=_src("""
            from torch.utils.data import BatchSampler, RandomSampler

            ds = TensorDataset(torch.randn(10, 4))
            batches = BatchSampler(RandomSampler(ds), batch_size=$bs, drop_last=False)
            loader = DataLoader(ds, batch_sampler=batches, $extra)
        """),
        fix=_src("""
            from torch.utils.data import BatchSampler, RandomSampler

            ds = TensorDataset(torch.randn(10, 4))
            batches = BatchSampler(RandomSampler(ds), batch_size=$bs, drop_last=False)
            loader = DataLoader(ds, batch_sampler=batches)
            shown = len(loader)
        """),
        cause="A batch_sampler yields whole batches of indices, so it alone decides batch size, order and "
              "what happens to the last batch; the DataLoader rejects batch_size, shuffle, sampler and "
              "drop_last next to it. Set those on the batch sampler instead.",
        expect="ValueError",
        params=({"bs": 4, "extra": "batch_size=4"}, {"bs": 3, "extra": "drop_last=True"}),
        sources=("https://github.com/meta-pytorch/opacus/issues/352",
                 "https://github.com/catalyst-team/catalyst/pull/271"),
    ),
    Entry(
        id="random-split-lengths", stage="data", chapter=2,
        title="random_split given lengths rounded down from fractions, which no longer add up",
        code=_src("""
            ds = TensorDataset(torch.randn($n, 2))
            lengths = [int(f * len(ds)) for f in ($fractions)]
            parts = random_split(ds, lengths, generator=torch.Generator().manual_seed(0))
        """),
        fix=_src("""
            ds = TensorDataset(torch.randn($n, 2))
            lengths = [int(f * len(ds)) for f in ($fractions)]
            lengths[-1] = len(ds) - sum(lengths[:-1])
            parts = random_split(ds, lengths, generator=torch.Generator().manual_seed(0))
            shown = tuple(len(p) for p in parts)
        """),
        cause="With whole numbers, random_split needs lengths that add up exactly to len(dataset); int() "
              "rounds each part down and loses samples. Give the last part the remainder, or pass the "
              "fractions themselves (summing to 1), which random_split rounds for you.",
        expect="ValueError",
        params=({"n": 1001, "fractions": "0.8, 0.2"}, {"n": 97, "fractions": "0.7, 0.15, 0.15"}),
        sources=("https://github.com/HUST-NingKang-Lab/MGM/issues/2",
                 "https://github.com/BraTS-inpainting/2023_challenge/issues/1",
                 "https://github.com/metatensor/metatrain/issues/290"),
    ),
    Entry(
        id="weighted-sampler-zero-weights", stage="data", chapter=2,
        title="WeightedRandomSampler whose weights are all zero (class weights from integer division)",
        code=_src("""
            labels = torch.tensor([$labels])
            counts = torch.bincount(labels)
            weights = 1 // counts[labels]  # integer division: every weight becomes 0
            sampler = WeightedRandomSampler(weights, num_samples=len(labels))
            indices = list(sampler)
        """),
        fix=_src("""
            labels = torch.tensor([$labels])
            counts = torch.bincount(labels)
            weights = 1.0 / counts[labels]
            sampler = WeightedRandomSampler(weights, num_samples=len(labels))
            indices = list(sampler)
            shown = len(indices)
        """),
        cause="The sampler draws with torch.multinomial, which needs non-negative weights with a positive "
              "sum; all zeros (here 1 // count on integers, elsewhere a class-weight lookup that missed) "
              "leaves nothing to draw. The error comes when the sampler is iterated, not when it is built.",
        expect="RuntimeError",
        params=({"labels": "0, 0, 0, 1, 1"}, {"labels": "0, 1, 2, 0, 1, 2, 2, 2"}),
        sources=("https://github.com/salesforce/ALBEF/issues/18",
                 "https://github.com/salesforce/ALBEF/issues/131"),
    ),
    Entry(
        id="weighted-sampler-without-replacement", stage="data", chapter=2,
        title="WeightedRandomSampler asked for more samples than there are weights with replacement=False",
        code=_src("""
            weights = torch.ones($n)
            sampler = WeightedRandomSampler(weights, num_samples=$draws, replacement=False)
            indices = list(sampler)
        """),
        fix=_src("""
            weights = torch.ones($n)
            sampler = WeightedRandomSampler(weights, num_samples=$draws, replacement=True)
            indices = list(sampler)
            shown = len(indices)
        """),
        cause="Without replacement each index can be drawn once, so num_samples cannot exceed the number of "
              "weights; oversampling a minority class needs replacement=True (the default).",
        expect="RuntimeError",
        params=({"n": 10, "draws": 20}, {"n": 3, "draws": 4}),
        sources=("https://github.com/speechbrain/speechbrain/issues/1786",),
    ),
    # ---------------------------------------------------------------- chapter 4: evaluation
    Entry(
        id="backward-under-no-grad", stage="evaluation", chapter=4,
        title="backward() on a loss computed inside torch.no_grad() or inference_mode() (evaluation code reused)",
        code=_src("""
            model = nn.Linear(4, 1)
            x, y = torch.randn(8, 4), torch.randn(8, 1)
            with $guard:
                loss = F.mse_loss(model(x), y)
            loss.backward()
        """),
        fix=_src("""
            model = nn.Linear(4, 1)
            x, y = torch.randn(8, 4), torch.randn(8, 1)
            loss = F.mse_loss(model(x), y)
            loss.backward()
            shown = tuple(model.weight.grad.shape)
        """),
        cause="Inside no_grad or inference_mode autograd records nothing, so the loss has no grad_fn and "
              "backward has no graph to walk. Compute training losses outside the evaluation context "
              "(the same message appears when every parameter was frozen with requires_grad_(False)).",
        expect="RuntimeError",
        params=({"guard": "torch.no_grad()"}, {"guard": "torch.inference_mode()"}),
        sources=("https://github.com/nianticlabs/monodepth2/issues/24",
                 "https://github.com/davidmascharka/tbd-nets/issues/8",
                 "https://github.com/weizheliu/People-Flows/issues/7"),
    ),
    Entry(
        id="inference-tensor-saved-for-backward", stage="evaluation", chapter=4,
        title="features computed once under torch.inference_mode() reused to train a head",
        code=_src("""
            backbone, head = nn.Linear(8, $hidden), nn.Linear($hidden, 2)
            x, y = torch.randn(4, 8), torch.tensor([0, 1, 0, 1])
            with torch.inference_mode():
                features = backbone(x)  # cached, reused every epoch
            loss = F.cross_entropy(head(features), y)
            loss.backward()
        """),
        fix=_src("""
            backbone, head = nn.Linear(8, $hidden), nn.Linear($hidden, 2)
            x, y = torch.randn(4, 8), torch.tensor([0, 1, 0, 1])
            with torch.no_grad():
                features = backbone(x)  # cached, reused every epoch
            loss = F.cross_entropy(head(features), y)
            loss.backward()
            shown = tuple(head.weight.grad.shape)
        """),
        cause="Tensors made under inference_mode are 'inference tensors' that autograd may never save; a "
              "layer that needs its input for the backward pass (Linear does) refuses them. Make such "
              "tensors under no_grad instead, or clone() them outside inference_mode.",
        expect="RuntimeError",
        params=({"hidden": 16}, {"hidden": 32}),
        sources=("https://github.com/facebookresearch/dinov2/issues/472",
                 "https://github.com/roboflow/rf-detr/issues/461"),
    ),
    Entry(
        id="inference-tensor-inplace-outside", stage="evaluation", chapter=4,
        title="a metric accumulated under torch.inference_mode() updated in place after the block",
        code=_src("""
            model = nn.Linear(4, 3)
            ds = TensorDataset(torch.randn(12, 4), torch.randint(0, 3, (12,)))
            loader = DataLoader(ds, batch_size=$bs)
            with torch.inference_mode():
                test_loss = 0
                for xb, yb in loader:
                    test_loss += F.cross_entropy(model(xb), yb)
            $after
        """),
        fix=_src("""
            model = nn.Linear(4, 3)
            ds = TensorDataset(torch.randn(12, 4), torch.randint(0, 3, (12,)))
            loader = DataLoader(ds, batch_size=$bs)
            with torch.inference_mode():
                test_loss = 0
                for xb, yb in loader:
                    test_loss += F.cross_entropy(model(xb), yb)
                $after
            shown = tuple(test_loss.shape)
        """),
        cause="The accumulated loss is an inference tensor, and outside inference_mode torch forbids in-place "
              "updates to it (/=, *=, add_). Finish the arithmetic inside the block (watch the "
              "indentation), or accumulate Python floats with .item().",
        expect="RuntimeError",
        params=({"bs": 4, "after": "test_loss /= len(loader)"}, {"bs": 6, "after": "test_loss.mul_(100)"}),
        sources=("https://github.com/mrdbourke/pytorch-deep-learning/issues/397",
                 "https://github.com/mantasu/glasses-detector/issues/19",
                 "https://github.com/vllm-project/vllm/issues/1968"),
    ),
    Entry(
        id="batchnorm-batch-of-one", stage="evaluation", chapter=4,
        title="predicting a single sample with a BatchNorm model still in train mode",
        code=_src("""
            model = nn.Sequential($layers)
            pred = model(torch.randn($shape))  # one sample; model.eval() was never called
        """),
        fix=_src("""
            model = nn.Sequential($layers)
            model.eval()
            with torch.no_grad():
                pred = model(torch.randn($shape))
            shown = tuple(pred.shape)
        """),
        cause="In train mode BatchNorm normalises with the batch's own mean and variance, which one value per "
              "channel cannot give. Call model.eval() for inference (it uses the running statistics); in "
              "training, avoid a last batch of one with drop_last=True.",
        expect="ValueError",
        params=({"layers": "nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2)", "shape": "1, 4"},
                {"layers": "nn.Conv2d(3, 16, 3), nn.AdaptiveAvgPool2d(1), nn.BatchNorm2d(16), nn.ReLU(), "
                           "nn.Flatten(), nn.Linear(16, 2)",
                 "shape": "1, 3, 8, 8"}),
        sources=("https://github.com/fungtion/DANN_py3/issues/8",
                 "https://github.com/luizgh/sigver/issues/10",
                 "https://github.com/open-mmlab/mmsegmentation/issues/272"),
    ),
    Entry(
        id="numpy-on-tensor-requiring-grad", stage="evaluation", chapter=4,
        title="model outputs turned into NumPy for a metric or a plot without detaching",
        code=_src("""
            model = nn.Linear(4, $classes)
            probs = model(torch.randn(5, 4)).softmax(dim=1)
            $convert
        """),
        fix=_src("""
            model = nn.Linear(4, $classes)
            with torch.no_grad():
                probs = model(torch.randn(5, 4)).softmax(dim=1)
            $convert
            shown = preds.shape
        """),
        cause="The outputs are part of the autograd graph (requires_grad=True), and NumPy memory cannot carry "
              "gradients, so torch refuses to hand it over silently. Evaluate under torch.no_grad(), or call "
              ".detach() (and .cpu()) before .numpy().",
        expect="RuntimeError",
        params=({"classes": 3, "convert": "preds = probs.numpy()"},
                {"classes": 2, "convert": "preds = np.asarray(probs)"}),
        sources=("https://github.com/pytorch/pytorch/issues/44023",
                 "https://github.com/zhuangdizhu/FedGen/issues/1",
                 "https://github.com/XiaMooo/Yolo-Detect-Layer-Visualization/issues/1"),
    ),
)
