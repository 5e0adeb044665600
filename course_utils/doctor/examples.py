"""Which inputs belong to which split (chapters 5, 9): exact byte keys of each example's input tensor."""
from __future__ import annotations

from collections.abc import Iterable

import torch
from torch.utils.data import DataLoader, Dataset, Subset, TensorDataset

MAX_EXAMPLES = 200_000   # larger splits are keyed on their first MAX_EXAMPLES examples only


def _key(row: torch.Tensor) -> bytes:
    row = row.detach().cpu().contiguous()
    return row.view(torch.uint8).numpy().tobytes() if row.dtype == torch.bfloat16 else row.numpy().tobytes()


def _inputs(data: object) -> Iterable[torch.Tensor]:
    """Each example's input tensor, for a DataLoader, (Tensor)Dataset, Subset, tensor or (inputs, targets) pair."""
    if isinstance(data, DataLoader):
        data = data.dataset
    if isinstance(data, torch.Tensor):
        return iter(data[:MAX_EXAMPLES])
    if isinstance(data, (tuple, list)) and data and isinstance(data[0], torch.Tensor):
        return iter(data[0][:MAX_EXAMPLES])
    if isinstance(data, TensorDataset):
        return iter(data.tensors[0][:MAX_EXAMPLES])
    if isinstance(data, Subset) and isinstance(data.dataset, TensorDataset):
        indices = list(data.indices)[:MAX_EXAMPLES]
        return iter(data.dataset.tensors[0][indices])
    if isinstance(data, Dataset) and hasattr(data, "__len__"):
        return (_first_tensor(data[i]) for i in range(min(len(data), MAX_EXAMPLES)))
    raise ValueError(f"train_data/val_data must be a DataLoader, a Dataset, a tensor or an (inputs, targets) "
                     f"pair, got {type(data).__name__}")


def _first_tensor(item: object) -> torch.Tensor:
    while isinstance(item, (tuple, list)) and item:
        item = item[0]
    if not isinstance(item, torch.Tensor):
        raise ValueError(f"train_data/val_data: an example's input must be a tensor, got {type(item).__name__}")
    return item


def example_keys(data: object) -> list[bytes]:
    """The byte key of every example's input, in the split's order."""
    return [_key(row) for row in _inputs(data)]


def batch_row_key(inputs: tuple) -> bytes | None:
    """The key of the first example in a forward's first tensor argument (on the CPU), or None."""
    for value in inputs:
        if isinstance(value, torch.Tensor) and value.dim() >= 1 and len(value) and value.device.type == "cpu":
            return _key(value[0])
    return None
