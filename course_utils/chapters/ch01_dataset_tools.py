"""torch.utils.data's dataset tools and the DataLoader's rarer knobs, each on a dataset of ten numbers (chapters 1-2).

``composition_rules`` (chapter 1): ``random_split`` (fractions, its generator), ``Subset``, ``ConcatDataset``,
``ChainDataset``, ``StackDataset``, ``default_convert``. ``loader_knobs`` (chapter 1): ``prefetch_factor``,
``pin_memory_device``, ``in_order`` with two workers. ``sampler_knobs`` (chapter 2): ``SubsetRandomSampler``,
``RandomSampler``'s ``replacement`` and ``num_samples``, a ``Sampler`` subclass without ``__len__``. Every
result is an exact value or torch's own message; every draw comes from a seeded generator, and each function
leaves the global generator as it found it (a loader's iterator draws its base seed from it).
"""
from __future__ import annotations

import multiprocessing as mp
import warnings

import numpy as np
import torch
from torch.utils.data import (ChainDataset, ConcatDataset, DataLoader, Dataset, IterableDataset, RandomSampler,
                              Sampler, StackDataset, Subset, SubsetRandomSampler, TensorDataset, default_convert,
                              random_split)

from course_utils.chapters.raised import raised


def _ten() -> TensorDataset:
    return TensorDataset(torch.arange(10.0), torch.arange(10) % 2)


class Count(IterableDataset):
    """A stream of 0 .. n-1 (chapter 1)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self) -> int:
        return self.n


def _val_indices(generator: torch.Generator | None, draw_before: bool) -> list[int]:
    torch.manual_seed(0)
    if draw_before:
        torch.rand(1)                   # one more random number drawn earlier in the script
    return list(random_split(_ten(), [7, 3], generator=generator)[1].indices)


class _WithTransform(Dataset):
    """Ten numbers 1..10, each passed through `self.transform` (none: unchanged), as an image folder applies one."""

    def __init__(self) -> None:
        self.transform = None

    def __len__(self) -> int:
        return 10

    def __getitem__(self, i: int) -> torch.Tensor:
        x = torch.tensor(float(i + 1))
        return self.transform(x) if self.transform else x


def composition_rules() -> dict[str, object]:
    """random_split, Subset, ConcatDataset, ChainDataset, StackDataset, default_convert (chapter 1)."""
    ds = _ten()
    state = torch.get_rng_state()
    out: dict[str, object] = {
        "random_split(10, [0.33, 0.33, 0.34]): lengths": [len(s) for s in random_split(ds, [0.33, 0.33, 0.34])],
        "random_split without generator, validation indices; then with one random draw before it":
            (_val_indices(None, False), _val_indices(None, True)),
        "the same with generator=torch.Generator().manual_seed(0)":
            tuple(_val_indices(torch.Generator().manual_seed(0), d) for d in (False, True)),
    }
    train, val = random_split(ds, [7, 3], generator=torch.Generator().manual_seed(0))
    out["train.dataset is val.dataset (a transform set on one is set on both)"] = train.dataset is val.dataset
    images = _WithTransform()
    train, val = random_split(images, [7, 3], generator=torch.Generator().manual_seed(0))
    before = [x.item() for x in next(iter(DataLoader(val, batch_size=3)))]
    val.transform = lambda x: -x                 # an attribute of the Subset: __getitem__ never reads it
    out["val.transform = f on the Subset: the val loader's batch, before and after"] = (
        before, [x.item() for x in next(iter(DataLoader(val, batch_size=3)))])
    val.dataset.transform = lambda x: -x         # the wrapped dataset's: both splits change
    out["val.dataset.transform = f (f: x -> -x): the val batch, and train's first item too"] = (
        [x.item() for x in next(iter(DataLoader(val, batch_size=3)))], train[0].item())
    plain = Subset(_WithTransform(), val.indices)          # a second dataset object, its own transform (none)
    out["Subset(a second dataset object, val.indices): the val batch, train's first item"] = (
        [x.item() for x in next(iter(DataLoader(plain, batch_size=3)))], train[0].item())
    out["Subset(ds, [1, 3, 5]).tensors"] = raised(lambda: Subset(ds, [1, 3, 5]).tensors)
    joined = ConcatDataset([TensorDataset(torch.arange(3)), TensorDataset(torch.arange(10, 15))])
    out["ConcatDataset(3 + 5): len, cumulative_sizes, item 4"] = (len(joined), joined.cumulative_sizes,
                                                                   joined[4][0].item())
    out["ConcatDataset([an IterableDataset])"] = raised(lambda: ConcatDataset([Count(2)]))
    out["ChainDataset([stream of 2, stream of 3])"] = list(ChainDataset([Count(2), Count(3)]))
    out["ChainDataset([a map-style dataset])"] = raised(lambda: list(ChainDataset([ds])))
    pairs = StackDataset(x=ds, y=TensorDataset(torch.arange(10) * 10))
    out["StackDataset(x=..., y=...)[2]"] = {k: [t.item() for t in v] for k, v in pairs[2].items()}
    out["StackDataset of 10 and 9 examples"] = raised(lambda: StackDataset(ds, TensorDataset(torch.arange(9))))
    converted = default_convert([np.array(1.0), np.array(2.0)])
    out["default_convert([two NumPy scalars]): type, dtypes"] = (type(converted).__name__,
                                                                 [str(t.dtype) for t in converted])
    out["DataLoader(batch_size=None): first item"] = [t.tolist() for t in next(iter(DataLoader(ds, batch_size=None)))]
    torch.set_rng_state(state)          # a loader's iterator draws its base seed from the global generator
    return out


class LateFirst(Dataset):
    """Eight numbers; item 0 waits (up to 10 s) until the main process has received a batch (chapter 1)."""

    def __init__(self) -> None:
        self.received = mp.get_context().Event()

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> int:
        if i == 0:
            self.received.wait(10)
        return i


def loader_knobs() -> dict[str, object]:
    """prefetch_factor without workers, pin_memory_device, in_order=False with a slow first batch (chapter 1)."""
    ds = _ten()
    state = torch.get_rng_state()
    out: dict[str, object] = {"DataLoader(num_workers=0, prefetch_factor=4)":
                              raised(lambda: DataLoader(ds, prefetch_factor=4))}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        next(iter(DataLoader(ds, pin_memory=True, pin_memory_device="cuda")))
    out["DataLoader(pin_memory=True, pin_memory_device='cuda') warns"] = [
        str(w.message) for w in caught if "pin_memory_device" in str(w.message)]
    late = LateFirst()
    batches = []
    for batch in DataLoader(late, batch_size=2, num_workers=2, in_order=False):
        batches.append(batch.tolist())
        late.received.set()
    out["in_order=False, worker 0's first batch slow: first batch out"] = batches[0]
    out["in_order=False: every batch arrives once, in dataset order"] = (
        sorted(batches) == [[0, 1], [2, 3], [4, 5], [6, 7]], batches == sorted(batches))
    torch.set_rng_state(state)
    return out


class Evens(Sampler):
    """Indices 0, 2, 4, ... below n, with no __len__ (chapter 2)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self):
        return iter(range(0, self.n, 2))


def sampler_knobs() -> dict[str, object]:
    """SubsetRandomSampler, RandomSampler(replacement, num_samples), a Sampler without __len__ (chapter 2)."""
    ds = _ten()
    state = torch.get_rng_state()
    subset = SubsetRandomSampler([7, 8, 9], generator=torch.Generator().manual_seed(0))
    out: dict[str, object] = {"SubsetRandomSampler([7, 8, 9]), two epochs": (list(subset), list(subset))}
    out["DataLoader(shuffle=True, sampler=...)"] = raised(lambda: DataLoader(ds, shuffle=True, sampler=subset))
    drawn = list(RandomSampler(ds, replacement=True, generator=torch.Generator().manual_seed(0)))
    out["RandomSampler(replacement=True): draws, distinct examples of 10"] = (len(drawn), len(set(drawn)))
    long = list(RandomSampler(ds, num_samples=25, generator=torch.Generator().manual_seed(0)))
    out["RandomSampler(num_samples=25) without replacement: times each example comes"] = (
        np.bincount(long, minlength=10).tolist())
    loader = DataLoader(ds, sampler=Evens(10), batch_size=2)
    out["DataLoader(sampler=Evens(10), batch_size=2): batches"] = [b[0].int().tolist() for b in loader]
    out["len() of that loader"] = raised(lambda: len(loader))
    torch.set_rng_state(state)
    return out


def one_batch_epochs(n: int = 640, batch_size: int = 64, epochs: int = 10, seed: int = 0) -> dict[str, int]:
    """A loop whose every 'epoch' is `x, y = next(iter(loader))`: each iter() starts a new pass and next() takes its
    first batch, so an epoch is one batch. How many distinct examples `epochs` such epochs see, without and with
    shuffling, against a full pass per epoch (chapter 1)."""
    from torch.utils.data import DataLoader, TensorDataset
    data = TensorDataset(torch.arange(n))
    out = {"examples": n}
    for shuffle in (False, True):
        loader = DataLoader(data, batch_size=batch_size, shuffle=shuffle, generator=torch.Generator().manual_seed(seed))
        seen = set()
        for _ in range(epochs):
            (batch,) = next(iter(loader))
            seen.update(batch.tolist())
        out[f"shuffle={shuffle}: distinct examples seen in {epochs} one-batch epochs"] = len(seen)
    loader = DataLoader(data, batch_size=batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed))
    out["a full pass (for x, y in loader) per epoch: distinct examples seen in one epoch"] = len(
        {v for (batch,) in loader for v in batch.tolist()})
    return out
