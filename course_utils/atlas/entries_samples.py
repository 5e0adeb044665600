"""The atlas's entries for what `__getitem__` returns and how a batch is made of it (chapter 1): collation, and
samples that failed to load."""
from __future__ import annotations

from course_utils.atlas.entry import Entry, source

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
    Entry(
        id="collate-stack-unequal-sizes", stage="data", chapter=1,
        title="samples of different sizes (images not resized, sequences not padded) batched by default_collate",
        code=source("""
            samples = [(torch.zeros($first), 0), (torch.zeros($second), 1)]
            loader = DataLoader(samples, batch_size=2)
            xb, yb = next(iter(loader))
        """),
        fix=source(_PAD_COLLATE, """
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
        code=source("""
            samples = [(torch.zeros($first), 0), (torch.zeros($second), 1)]
            loader = DataLoader(samples, batch_size=2, num_workers=1)
            xb, yb = next(iter(loader))
        """),
        fix=source(_PAD_COLLATE, """
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
        code=source("""
            samples = [(torch.zeros(4), [$labels_a]), (torch.zeros(4), [$labels_b])]
            loader = DataLoader(samples, batch_size=2)
            xb, labels = next(iter(loader))
        """),
        fix=source("""
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
        code=source("""
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
        fix=source("""
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
        id="dataset-image-read-none", stage="data", chapter=1,
        title="an image reader returned None for a file it could not read (cv2.imread does, without an error), and "
              "__getitem__ read its .shape",
        code=source("""
            def read_image(path):                  # as cv2.imread: None, not an error, for a path it cannot read
                return np.load(path) if os.path.exists(path) else None

            np.save(tmp / "a.npy", np.zeros((8, 6, 3)))
            class Images(Dataset):
                def __init__(self, paths):
                    self.paths = paths

                def __len__(self):
                    return len(self.paths)

                def __getitem__(self, i):
                    image = read_image(self.paths[i])
                    height, width = image.$attr[:2]
                    return torch.zeros(3)

            for xb in DataLoader(Images([tmp / "a.npy", tmp / "$missing"]), batch_size=2):
                pass
        """),
        fix=source("""
            def read_image(path):
                return np.load(path) if os.path.exists(path) else None

            np.save(tmp / "a.npy", np.zeros((8, 6, 3)))
            class Images(Dataset):
                def __init__(self, paths):
                    self.paths = [p for p in paths if os.path.exists(p)]   # drop (and report) unreadable files first
                    self.missing = len(paths) - len(self.paths)

                def __len__(self):
                    return len(self.paths)

                def __getitem__(self, i):
                    image = read_image(self.paths[i])
                    height, width = image.$attr[:2]
                    return torch.zeros(3)

            images = Images([tmp / "a.npy", tmp / "$missing"])
            shown = (len(images), images.missing, sum(len(xb) for xb in DataLoader(images, batch_size=2)))
        """),
        cause="The image is None: the reader could not open the file (a wrong path or extension, a file that is "
              "missing or corrupt, a path with non-ASCII characters) and, like OpenCV's cv2.imread, returned None "
              "instead of raising. Print the path of the failing index, and check the files once before training "
              "(drop or report the unreadable ones).",
        expect="AttributeError",
        params=({"attr": "shape", "missing": "b.npy"}, {"attr": "shape", "missing": "images/0001.jpg"}),
        sources=("https://github.com/biubug6/Pytorch_Retinaface/issues/185",
                 "https://github.com/vision4robotics/TCTrack/issues/41",
                 "https://github.com/lindawangg/COVID-Net/issues/155",
                 "https://github.com/hongsukchoi/TCMR_RELEASE/issues/12"),
    ),
    Entry(
        id="dataset-file-not-found", stage="data", chapter=1,
        title="__getitem__ opens a file by a path that does not exist from where the script runs (names relative to "
              "the data folder opened from the working directory; a path written for another machine)",
        code=source("""
            from pathlib import Path
            (tmp / "data").mkdir()
            for i in range(4):
                np.save(tmp / "data" / f"{i}.npy", np.full(3, float(i)))
            (tmp / "data" / "list.txt").write_text("0.npy 1.npy 2.npy 3.npy")   # names relative to data/

            class Listed(Dataset):
                def __init__(self, list_file):
                    self.names = Path(list_file).read_text().split()

                def __len__(self):
                    return len(self.names)

                def __getitem__(self, i):
                    return torch.from_numpy(np.load(self.names[i]))   # opened from the working directory

            for xb in DataLoader(Listed(tmp / "data" / "list.txt"), batch_size=2, num_workers=$workers):
                pass
        """),
        fix=source("""
            from pathlib import Path
            (tmp / "data").mkdir()
            for i in range(4):
                np.save(tmp / "data" / f"{i}.npy", np.full(3, float(i)))
            (tmp / "data" / "list.txt").write_text("0.npy 1.npy 2.npy 3.npy")

            class Listed(Dataset):
                def __init__(self, list_file):
                    root = Path(list_file).parent
                    self.paths = [root / name for name in Path(list_file).read_text().split()]   # from the list's folder
                    missing = [str(p) for p in self.paths if not p.exists()]
                    if missing:                                    # said once, at the start, with the first few
                        raise FileNotFoundError(f"{len(missing)} files of the list are missing: {missing[:3]}")

                def __len__(self):
                    return len(self.paths)

                def __getitem__(self, i):
                    return torch.from_numpy(np.load(self.paths[i]))

            shown = sum(len(xb) for xb in DataLoader(Listed(tmp / "data" / "list.txt"), batch_size=2,
                                                     num_workers=$workers))
        """),
        fix_line="self.paths = [root / name for name in Path(list_file).read_text().split()]   # root: the list's "
                 "folder, not the working directory",
        cause="A relative path is read from the working directory, which is where the script was started, not where "
              "the data or the list of names lives: the same code finds its files from one folder and not from "
              "another. Other common causes are a path written for another machine (a placeholder such as "
              "'your_data_path', a Windows path with backslashes on Linux) and data not downloaded or unpacked. Build "
              "each path from the dataset's root (root / name, pathlib) and check the files exist in __init__, so a "
              "missing one is named at the start rather than epochs later in a worker.",
        expect="FileNotFoundError",
        params=({"workers": 0}, {"workers": 1}),
        sources=("https://github.com/wgcban/ddpm-cd/issues/4",
                 "https://github.com/AceCoooool/DSS-pytorch/issues/17",
                 "https://github.com/ExplainableML/czsl/issues/9",
                 "https://github.com/layumi/Person_reID_baseline_pytorch/issues/214"),
        python_note="Python's own words ('[Errno 2] No such file or directory: ...'), the same in 3.11-3.13; in a "
                    "worker, wrapped as 'Caught FileNotFoundError in DataLoader worker process 0.'",
    ),
    Entry(
        id="collate-empty-batch", stage="data", chapter=1,
        title="a collate_fn that drops samples which failed to load stacks an empty batch",
        code=source("""
            class Images(Dataset):
                def __len__(self):
                    return 4

                def __getitem__(self, i):
                    return None if i < $bad else torch.zeros(3)   # None: this file could not be read

            def skip_bad(batch):
                batch = [sample for sample in batch if sample is not None]
                return torch.stack(batch)

            for xb in DataLoader(Images(), batch_size=2, collate_fn=skip_bad):
                pass
        """),
        fix=source("""
            class Images(Dataset):
                def __len__(self):
                    return 4

                def __getitem__(self, i):
                    return None if i < $bad else torch.zeros(3)

            def skip_bad(batch):
                batch = [sample for sample in batch if sample is not None]
                return torch.stack(batch) if batch else None   # a batch with nothing left: say so

            shown = sum(1 for xb in DataLoader(Images(), batch_size=2, collate_fn=skip_bad) if xb is not None)
        """),
        cause="A collate_fn that filters out failed samples leaves nothing when every sample of a batch failed (a "
              "folder of unreadable files, a small batch), and torch.stack of an empty list raises. Return None "
              "for an empty batch and skip it in the loop, or better, find and drop the bad files before "
              "training.",
        expect="RuntimeError",
        params=({"bad": 2}, {"bad": 4}),
        sources=("https://github.com/kai422/IART/issues/16",
                 "https://github.com/filliptm/ComfyUI_FL-Trainer/issues/6"),
    ),
)
