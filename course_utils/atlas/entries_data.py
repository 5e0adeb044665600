"""The atlas's entries for the DataLoader itself (chapter 1): a Dataset's length, the loader's arguments, iterating
it. What a sample holds and how it is collated, workers, NumPy arrays, samplers and evaluation have files of their
own (entries_samples.py, entries_workers.py, entries_arrays.py, entries_samplers.py, entries_evaluation.py).
"""
from __future__ import annotations

from course_utils.atlas.entry import Entry, source

ENTRIES = (
    Entry(
        id="dataset-len-too-long", stage="data", chapter=1,
        title="a Dataset whose __len__ is one more than the samples it holds",
        code=source("""
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
        fix=source("""
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
        code=source("""
            ds = TensorDataset(torch.randn(8, 4), torch.randint(0, 2, (8,)), $extra)
            for $targets in DataLoader(ds, batch_size=4):
                pass
        """),
        fix=source("""
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
        code=source("""
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
        fix=source("""
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
        code=source("""
            ds = TensorDataset(torch.randn(8, 4), torch.randint(0, 2, (8,)))
            loader = DataLoader(ds, batch_size=4)
            xb, yb = next($iterable)
        """),
        fix=source("""
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
        fix_line='loader = DataLoader(Stream(seed=0), batch_size=4)   # no shuffle=: the stream shuffles itself',
        title="shuffle=True (or a sampler) given to a DataLoader over an IterableDataset",
        code=source("""
            from torch.utils.data import RandomSampler

            class Stream(IterableDataset):
                def __iter__(self):
                    return iter(torch.arange(8.0))

            loader = DataLoader(Stream(), batch_size=4, $option)
        """),
        fix=source("""
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
        code=source("""
            workers = 0
            ds = TensorDataset(torch.randn(16, 4))
            loader = DataLoader(ds, batch_size=$bs, num_workers=workers, prefetch_factor=$prefetch)
        """),
        fix=source("""
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
        code=source("""
            workers = 0
            ds = TensorDataset(torch.randn(16, 4))
            loader = DataLoader(ds, batch_size=$bs, num_workers=workers, persistent_workers=True)
        """),
        fix=source("""
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
)
