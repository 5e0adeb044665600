"""Which examples a split holds (chapters 5, 9): content keys, from storage or from batches as they flow.

Nothing here calls a dataset's ``__getitem__`` or draws from any random generator: a split's examples
are read from its storage (a tensor, a NumPy array, a ``TensorDataset``, a torchvision-style ``.data``
array, through ``Subset`` and ``ConcatDataset``), untransformed, or else from the collated batches the
loop itself drew. A key is a 64-bit hash of an example's bytes, so two splits share a key only if they
hold a byte-for-byte copy of the same example. A 1-D integer array is a token stream, not a list of
examples: it is keyed by its ``TOKEN_WINDOW``-token windows at content-defined anchors, so two streams
that share text share keys however they were cut into batches.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import ConcatDataset, DataLoader, Dataset, Subset, TensorDataset

TOKEN_WINDOW = 32    # tokens in one keyed window of a token stream
ANCHOR_EVERY = 8     # keep the windows whose hash is 0 modulo this (the same text gives the same anchors)
CHUNK = 4096         # rows hashed at a time (bounds the temporary memory)
IDENTIFYING = 0.5    # keys identify examples if at least this share of them differ (within a batch, or in storage)
_WEIGHTS = np.random.default_rng(20240613).integers(1, 2 ** 63, size=4096, dtype=np.uint64) | np.uint64(1)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


@dataclass(frozen=True)
class Keys:
    """A split's keys: ``rows`` (one per example) or ``windows`` (anchored n-grams of token sequences).
    ``distinct``: for rows, how many keys differ within the storage, or within each batch summed over batches."""

    kind: str
    values: np.ndarray
    examples: int
    distinct: int = 0

    def identifies(self) -> bool:
        """Do the keys tell examples apart? Rows whose keys mostly repeat within a batch (or within storage) are
        not examples but something examples share: a user id keying every rating of one user (NCF's (user, item,
        label) batches), where a validation key equal to a training one says nothing about copies."""
        return self.kind != "rows" or self.distinct >= IDENTIFYING * self.examples


def _mix(x: np.ndarray) -> np.ndarray:
    """A 64-bit finaliser (splitmix64): nearby inputs get unrelated outputs. Wraps modulo 2**64 on purpose."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
        return x ^ (x >> np.uint64(31))


def _numpy(data: object) -> np.ndarray:
    if isinstance(data, np.ndarray) and data.dtype.kind == "U":
        return data.view(np.uint32).reshape(len(data), -1)     # file names: their characters
    if isinstance(data, torch.Tensor):
        data = data.detach().cpu()
        if data.dtype in (torch.bfloat16, torch.float16):
            data = data.view(torch.int16)
        return data.contiguous().numpy()
    return np.ascontiguousarray(data)


def _words(rows: np.ndarray) -> np.ndarray:
    """Each row's bytes as 64-bit words (zero-padded), shape (rows, words)."""
    raw = np.ascontiguousarray(rows).reshape(len(rows), -1).view(np.uint8)
    pad = -raw.shape[1] % 8
    if pad:
        raw = np.concatenate([raw, np.zeros((len(raw), pad), np.uint8)], axis=1)
    return raw.view(np.uint64)


def _hash_words(words: np.ndarray) -> np.ndarray:
    """One key per row of 64-bit words: a weighted sum of mixed words (weights cycle past 4096 words)."""
    weights = np.resize(_WEIGHTS, words.shape[1])
    with np.errstate(over="ignore"):
        return _mix((_mix(words) * weights).sum(axis=1, dtype=np.uint64) + np.uint64(words.shape[1]))


def row_keys(rows: np.ndarray, indices: np.ndarray | None = None) -> np.ndarray:
    """The key of every row of `rows` (or of rows[indices]), hashed CHUNK rows at a time."""
    count = len(rows) if indices is None else len(indices)
    out = np.empty(count, np.uint64)
    for start in range(0, count, CHUNK):
        part = rows[start:start + CHUNK] if indices is None else rows[indices[start:start + CHUNK]]
        out[start:start + CHUNK] = _hash_words(_words(np.asarray(part)))
    return out


def window_keys(tokens: np.ndarray) -> np.ndarray:
    """Anchored TOKEN_WINDOW-token windows of a 1-D token sequence (the whole sequence if shorter)."""
    tokens = _mix(tokens.astype(np.int64).view(np.uint64))
    if len(tokens) < TOKEN_WINDOW:
        return _hash_words(tokens[None, :])
    windows = np.lib.stride_tricks.sliding_window_view(tokens, TOKEN_WINDOW)
    with np.errstate(over="ignore"):
        hashes = _mix((windows * _WEIGHTS[:TOKEN_WINDOW]).sum(axis=1, dtype=np.uint64))
    return hashes[hashes % np.uint64(ANCHOR_EVERY) == 0]


def _is_tokens(array: np.ndarray) -> bool:
    return array.dtype.kind in "iu"


# --- a split's storage, read without __getitem__ -----------------------------------------------------

def _storage_rows(data: object) -> tuple[np.ndarray | torch.Tensor, np.ndarray | None] | None:
    """(array, indices) holding a Dataset's untransformed examples, or None if it has no such storage."""
    if isinstance(data, TensorDataset):
        return data.tensors[0], None
    if isinstance(data, Subset):
        inner = _storage_rows(data.dataset)
        if inner is None:
            return None
        array, indices = inner
        chosen = np.asarray(data.indices, dtype=np.int64)
        return array, chosen if indices is None else indices[chosen]
    if isinstance(data, Dataset) and not isinstance(data, ConcatDataset) and hasattr(data, "__len__"):
        for name in RAW_ATTRIBUTES:
            found = _raw(getattr(data, name, None), len(data))
            if found is not None:
                return found, None
    return None


RAW_ATTRIBUTES = ("data", "samples", "imgs", "file_names", "filenames", "files", "paths", "image_paths")


def _raw(value: object, length: int) -> np.ndarray | torch.Tensor | None:
    """A dataset attribute holding one raw entry per example: an array (torchvision's .data) or the example's
    file name (a list of paths, or of (path, label) pairs as ImageFolder's .samples)."""
    if isinstance(value, (torch.Tensor, np.ndarray)) and value.ndim >= 1 and len(value) == length:
        return value
    if isinstance(value, (list, tuple)) and len(value) == length and value:
        first = value[0]
        if isinstance(first, str):
            return np.array(value)
        if isinstance(first, tuple) and first and isinstance(first[0], str):
            return np.array([entry[0] for entry in value])
    return None


def storage_keys(data: object) -> Keys | None:
    """Keys of every example of a split given to the doctor, read from storage; None if it cannot be read."""
    if isinstance(data, DataLoader):
        data = data.dataset
    if isinstance(data, (tuple, list)) and data and isinstance(data[0], (torch.Tensor, np.ndarray)):
        data = data[0]
    if isinstance(data, Mapping):
        data = data.get("input_ids", next((v for v in data.values() if isinstance(v, (torch.Tensor, np.ndarray))),
                                          None))
    if isinstance(data, (torch.Tensor, np.ndarray)):
        array = _numpy(data)
        if array.ndim == 1:
            if _is_tokens(array):
                return Keys("windows", np.unique(window_keys(array)), 1)
            array = array[:, None]
        if array.ndim == 2 and _is_tokens(array) and array.shape[1] >= TOKEN_WINDOW:
            return Keys("windows", np.unique(np.concatenate([window_keys(r) for r in array])), len(array))
        return _rows(row_keys(array))
    if isinstance(data, ConcatDataset):
        parts = [storage_keys(part) for part in data.datasets]
        if any(p is None or p.kind != "rows" for p in parts):
            return None
        return Keys("rows", np.concatenate([p.values for p in parts]), sum(p.examples for p in parts),
                    sum(p.distinct for p in parts))
    found = _storage_rows(data)
    if found is None:
        return None
    array, indices = found
    array = _numpy(array) if isinstance(array, torch.Tensor) or array.dtype.kind == "U" else array
    return _rows(row_keys(array, indices))


def _rows(values: np.ndarray) -> Keys:
    return Keys("rows", values, len(values), len(np.unique(values)))


def readable(data: object) -> bool:
    """Can the doctor key this split from storage (no __getitem__)? Cheap: nothing is hashed."""
    if isinstance(data, DataLoader):
        data = data.dataset
    if isinstance(data, (torch.Tensor, np.ndarray, Mapping)):
        return True
    if isinstance(data, (tuple, list)):
        return bool(data) and isinstance(data[0], (torch.Tensor, np.ndarray))
    if isinstance(data, ConcatDataset):
        return all(readable(part) for part in data.datasets)
    return _storage_rows(data) is not None


# --- batches as they flow --------------------------------------------------------------------------

def attribute_tensors(obj: object) -> list[torch.Tensor]:
    """The tensors a plain object holds as attributes, in the order they were set: a batch container such as
    DETR's NestedTensor(tensors, mask) or a collate function's own Batch class. One level; nothing for tensors,
    containers, strings or modules."""
    if isinstance(obj, (torch.Tensor, Mapping, tuple, list, str, bytes, torch.nn.Module)):
        return []
    attributes = getattr(obj, "__dict__", None)
    return [v for v in attributes.values() if isinstance(v, torch.Tensor)] if isinstance(attributes, dict) else []


def batch_tensors(batch: object) -> list[torch.Tensor]:
    """The tensors of a collated batch (a tensor, a tuple/list, a dict, an object holding tensors), and of a list
    in it, of views (SimCLR's ([view_1, view_2], labels)) or of tokenized sides (sentence-transformers'
    ([{input_ids, ...}, ...], labels)): two levels deep."""
    if isinstance(batch, torch.Tensor):
        return [batch]
    if not isinstance(batch, (Mapping, tuple, list)):
        return attribute_tensors(batch)
    found = []
    for v in batch.values() if isinstance(batch, Mapping) else batch:
        if isinstance(v, torch.Tensor):
            found.append(v)
        elif isinstance(v, (tuple, list)):
            for item in v:
                inner = item.values() if isinstance(item, Mapping) else (item,)
                found += [t for t in inner if isinstance(t, torch.Tensor)]
        else:
            found += attribute_tensors(v)
    return found


def batch_second(batch: object, batch_size: int | None) -> bool:
    """Are the batch's examples along dimension 1 ([seq_len, batch], as an RNN's time-major batches and
    bentrevett's seq2seq collate them)? Yes where the loader's batch size is dimension 1's and not dimension 0's,
    or, for a short last batch, where every tensor of two or more dimensions agrees on dimension 1 and not on 0."""
    tensors = [t for t in batch_tensors(batch) if t.dim() >= 2]
    if not tensors:
        return False
    if batch_size:
        first, second = ({t.shape[d] == batch_size for t in tensors} for d in (0, 1))
        if first != second:
            return second == {True}
    return len(tensors) > 1 and len({t.shape[0] for t in tensors}) > 1 and len({t.shape[1] for t in tensors}) == 1


def batch_keys(batch: object, examples_second: bool = False) -> Keys | None:
    """Keys of the examples in one collated CPU batch: its inputs (``input_ids`` without padding, or the first
    tensor, along dimension 1 when `examples_second`); None if there is no CPU tensor to read."""
    mask = None
    if isinstance(batch, Mapping):
        inputs = batch.get("input_ids")
        mask = batch.get("attention_mask")
        if not isinstance(inputs, torch.Tensor):
            inputs = next(iter(batch_tensors(batch)), None)
    else:
        inputs = next(iter(batch_tensors(batch)), None)
    if inputs is None or inputs.device.type != "cpu" or inputs.dim() == 0:
        return None
    if examples_second and inputs.dim() >= 2:
        inputs = inputs.transpose(0, 1)
    if isinstance(mask, torch.Tensor) and mask.shape == inputs.shape and inputs.dim() == 2:
        rows = [r[m.bool()] for r, m in zip(inputs, mask)]
        return _rows(np.array([row_keys(_numpy(r)[None, :])[0] for r in rows], np.uint64))
    array = _numpy(inputs)
    if array.ndim == 2 and _is_tokens(array) and array.shape[1] >= TOKEN_WINDOW:
        return Keys("windows", np.concatenate([window_keys(r) for r in array]), len(array))
    return _rows(row_keys(array if array.ndim > 1 else array[:, None]))


def merge(parts: list[Keys]) -> Keys | None:
    """One split's keys from many batches (of one kind: the first batch's)."""
    if not parts:
        return None
    kind = parts[0].kind
    same = [p for p in parts if p.kind == kind]
    return Keys(kind, np.unique(np.concatenate([p.values for p in same])), sum(p.examples for p in same),
                sum(p.distinct for p in same))
