"""What ``default_collate`` makes of each kind of element (chapter 2), and a dataset whose examples are lists of words.

``default_collate`` looks at the first example of the batch and recurses: tensors, NumPy arrays and numbers are
stacked into one tensor; strings and bytes are left as they are; a dict is collated key by key, a tuple or list
field by field. A list example is therefore read as a record of fields, one per position: a sentence of four words
becomes four fields, each a tuple of one word per example (``zip`` transposes them), and sentences of different
lengths are refused. ``collate_fn=list`` keeps the examples as they are; ``batch_size=None`` turns batching off (each
example then goes through ``default_convert`` only: NumPy arrays become tensors, the rest is left as it is).
"""
from __future__ import annotations

import collections

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, default_collate

from course_utils.chapters.raised import raised

Pair = collections.namedtuple("Pair", "x word")
KINDS = {                                   # two examples of each kind, as a Dataset would return them
    "ints": [1, 2],
    "floats": [0.5, 1.5],
    "NumPy arrays": [np.array([1.0, 2.0]), np.array([3.0, 4.0])],
    "tensors": [torch.tensor([1, 2]), torch.tensor([3, 4])],
    "strings": ["cat", "dog"],
    "bytes": [b"cat", b"dog"],
    "tuples": [(1, "cat"), (2, "dog")],
    "dicts": [{"x": 1, "word": "cat"}, {"x": 2, "word": "dog"}],
    "namedtuples": [Pair(1, "cat"), Pair(2, "dog")],
    "lists": [["cat", "sat"], ["dog", "ran"]],
    "lists of two lengths": [["cat", "sat"], ["dog"]],
    "None": [None, None],
}


def _short(batch: object) -> str:
    """A batch on one line ("tensor([[1, 2], [3, 4]])")."""
    return " ".join(repr(batch).split())


def collate_lines() -> list[str]:
    """Each kind of example through default_collate: what comes out, or what it raises, in torch's words."""
    lines = []
    for kind, examples in KINDS.items():
        try:
            out = _short(default_collate(examples))
        except Exception:  # noqa: BLE001 - torch's own message is the result
            out = raised(lambda: default_collate(examples))
        lines.append(f"{kind:21} {_short(examples):36} -> {out}")
    floats = default_collate(KINDS["floats"])[:, None]
    lines.append(f"the floats' batch into a float32 nn.Linear(1, 1): {raised(lambda: torch.nn.Linear(1, 1)(floats))}; "
                 f"after .float(): {raised(lambda: torch.nn.Linear(1, 1)(floats.float()))}")
    return lines


class Sentences(Dataset):
    """Two examples, each a Python list of four words."""
    rows = (["This", "is", "a", "sentence."], ["Here", "is", "another", "one."])

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> list[str]:
        return list(self.rows[i])


class Ragged(Sentences):
    rows = (["This", "is", "a", "sentence."], ["Short", "one."])


def word_list_lines() -> list[str]:
    """A dataset of word lists through the loader: default_collate, then the two ways to keep the lists."""
    first = lambda **kw: _short(next(iter(DataLoader(Sentences(), **kw))))   # noqa: E731
    return [f"batch_size=1:                      {first(batch_size=1)}",
            f"batch_size=2:                      {first(batch_size=2)}",
            f"batch_size=2, lengths 4 and 2:     {raised(lambda: next(iter(DataLoader(Ragged(), batch_size=2))))}",
            f"batch_size=2, collate_fn=list:     {first(batch_size=2, collate_fn=list)}",
            f"batch_size=None (no batching):     {first(batch_size=None)}"]
