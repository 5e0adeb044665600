"""Datasets of the course: the 2-D spiral and its splits, an imbalanced set, variable-length sequences."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, RandomSampler, SequentialSampler, TensorDataset

from course_utils.infra.nudge import nudge

PAD_ID = 0  # token id that make_sequences never emits, so a pad collate can use it


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(int(seed))


def _check_count(name: str, value: int, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def make_spiral(n: int, classes: int = 3, noise: float = 0.2, seed: int = 0) -> TensorDataset:
    """The running example (chapters 2-8): `classes` spiral arms in 2-D, examples grouped by class.

    Class k holds n // classes or one more points. A point sits at a random position t in [0, 1)
    along its arm: radius t, angle 2*pi*k/classes + 4*t, plus Gaussian angle noise (radians).
    """
    _check_count("n", n, 1)
    _check_count("classes", classes, 2)
    if not (math.isfinite(noise) and noise >= 0):
        raise ValueError(f"noise must be a finite number >= 0, got {noise!r}")
    g = _generator(seed)
    y = torch.arange(n) * classes // n
    t = torch.rand(n, generator=g)
    angle = 2 * math.pi * y / classes + 4.0 * t + noise * torch.randn(n, generator=g)
    x = torch.stack([t * torch.sin(angle), t * torch.cos(angle)], dim=1)
    return TensorDataset(nudge(x.float()), y.long())


@dataclass(frozen=True)
class Splits:
    """Train / validation / test sets drawn from one spiral (chapters 4-8); `leaked` counts copied examples."""

    train: TensorDataset
    val: TensorDataset
    test: TensorDataset
    leaked: int


def spiral_splits(n_train: int, n_val: int, n_test: int = 0, *, classes: int = 3, noise: float = 0.2,
                  seed: int = 0, leak: float = 0.0) -> Splits:
    """Disjoint random splits of one spiral (chapters 4-8); `leak` copies training examples into validation.

    With leak = f, the first round(f * n_val) validation examples are replaced by copies of training
    examples (the data-leakage exhibit of chapter 5). The test set is never touched: it stays clean.
    """
    _check_count("n_train", n_train, 1)
    _check_count("n_val", n_val, 1)
    _check_count("n_test", n_test, 0)
    if not (0.0 <= leak <= 1.0):
        raise ValueError(f"leak must be a fraction in [0, 1], got {leak!r}")
    total = n_train + n_val + n_test
    x, y = make_spiral(total, classes, noise, seed).tensors
    order = torch.randperm(total, generator=_generator(seed))
    x, y = x[order], y[order]
    train_x, val_x, test_x = x[:n_train], x[n_train:n_train + n_val].clone(), x[n_train + n_val:]
    train_y, val_y, test_y = y[:n_train], y[n_train:n_train + n_val].clone(), y[n_train + n_val:]
    leaked = round(leak * n_val)
    if leaked > n_train:
        raise ValueError(f"leak={leak} asks for {leaked} copied examples but n_train is only {n_train}")
    val_x[:leaked], val_y[:leaked] = train_x[:leaked], train_y[:leaked]
    return Splits(TensorDataset(train_x, train_y), TensorDataset(val_x, val_y),
                  TensorDataset(test_x, test_y), leaked)


def batch_loader(dataset: TensorDataset, batch_size: int, *, shuffle: bool = False, drop_last: bool = False,
                 generator: torch.Generator | None = None) -> DataLoader:
    """A DataLoader over tensors that reads each batch with one index per tensor (the engine's runs, chapters 5, 6, 8).

    It deals the batches ``DataLoader(dataset, batch_size, shuffle=shuffle, drop_last=drop_last,
    generator=generator)`` deals, bitwise and in the same order, and draws the same numbers from `generator`: the
    sampler is the same; only the fetch differs, ``dataset[indices]`` instead of `batch_size` reads and a stack
    (measured: about 3x less time per batch of 32). Its ``sampler`` yields index lists, so count batches with
    ``len(loader)``, examples with ``len(loader.dataset)``.
    """
    order = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
    return DataLoader(dataset, sampler=BatchSampler(order, batch_size, drop_last), batch_size=None,
                      generator=generator)


def make_imbalanced(n_major: int = 900, n_minor: int = 100, seed: int = 0) -> TensorDataset:
    """Two overlapping 2-D Gaussian blobs, label 0 (majority) then label 1 (minority), for chapter 2's samplers."""
    _check_count("n_major", n_major, 1)
    _check_count("n_minor", n_minor, 1)
    g = _generator(seed)
    major = torch.randn(n_major, 2, generator=g) + torch.tensor([-1.0, 0.0])
    minor = 0.7 * torch.randn(n_minor, 2, generator=g) + torch.tensor([1.2, 0.8])
    y = torch.cat([torch.zeros(n_major, dtype=torch.long), torch.ones(n_minor, dtype=torch.long)])
    return TensorDataset(nudge(torch.cat([major, minor])), y)


class SequenceDataset(Dataset):
    """A list-backed Dataset of (LongTensor tokens of varying length, int label) pairs (chapter 2's collation)."""

    def __init__(self, items: list[tuple[torch.Tensor, int]]):
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return self.items[index]


def make_sequences(n: int = 200, min_len: int = 3, max_len: int = 20, vocab: int = 50,
                   seed: int = 0) -> SequenceDataset:
    """Variable-length token sequences for padding and bucketing (chapter 2).

    Token ids are drawn from 1..vocab-1 (0 is left free for padding, see PAD_ID); lengths are uniform in
    [min_len, max_len]. The label is 1 when the sequence's mean token id lies above the vocabulary's middle.
    """
    _check_count("n", n, 1)
    _check_count("min_len", min_len, 1)
    _check_count("max_len", max_len, min_len)
    _check_count("vocab", vocab, 3)
    g = _generator(seed)
    lengths = torch.randint(min_len, max_len + 1, (n,), generator=g).tolist()
    items = []
    for length in lengths:
        tokens = torch.randint(1, vocab, (length,), generator=g)
        items.append((tokens, int(tokens.float().mean() > vocab / 2)))
    return SequenceDataset(items)
