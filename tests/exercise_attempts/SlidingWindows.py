"""Attempts at Exercise 1.1, the class SlidingWindows(series, window): each attempt is a whole Dataset class."""
import torch
from torch.utils.data import Dataset


class right_unfold(Dataset):
    """All windows at once with Tensor.unfold (views, no copy); tensor indexing raises IndexError past the end."""

    def __init__(self, series, window):
        n = max(len(series) - window, 0)
        self.inputs = series.unfold(0, window, 1)[:n] if n else series.new_empty(0, window)
        self.targets = series[window:window + n]

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, i):
        if not 0 <= i < len(self):
            raise IndexError(f"index {i} out of range for {len(self)} windows")
        return self.inputs[i], self.targets[i]


class right_explicit(Dataset):
    """Slices on demand, with the bound checked by hand."""

    def __init__(self, series, window):
        self.series, self.window = series, window

    def __len__(self):
        return max(0, len(self.series) - self.window)

    def __getitem__(self, i):
        if i < 0 or i >= len(self):
            raise IndexError(i)
        return self.series[i:i + self.window], self.series[i + self.window]


class wrong_len_off_by_one(Dataset):
    """Counts windows, not (window, next value) pairs: 5 values, window 2 gives len 4, not 3."""

    def __init__(self, series, window):
        self.series, self.window = series, window

    def __len__(self):
        return len(self.series) - self.window + 1

    def __getitem__(self, i):
        return self.series[i:i + self.window], self.series[i + self.window]


class wrong_target_slice(Dataset):
    """Target sliced series[i+w : i+w+1]: shape [1] not a scalar (batches [B, 1]), and no IndexError past the end."""

    def __init__(self, series, window):
        self.series, self.window = series, window

    def __len__(self):
        return len(self.series) - self.window

    def __getitem__(self, i):
        return self.series[i:i + self.window], self.series[i + self.window:i + self.window + 1]


class wrong_negative_len(Dataset):
    """No floor at 0: a series of 3 values with window 4 makes len() raise ValueError instead of returning 0."""

    def __init__(self, series, window):
        self.series, self.window = series, window

    def __len__(self):
        return len(self.series) - self.window

    def __getitem__(self, i):
        return self.series[i:i + self.window], self.series[i + self.window]


class wrong_target_in_window(Dataset):
    """Target is the window's own last value series[i + window - 1], not the next one: any series."""

    def __init__(self, series, window):
        self.series, self.window = series, window

    def __len__(self):
        return max(0, len(self.series) - self.window)

    def __getitem__(self, i):
        if i >= len(self):
            raise IndexError(i)
        return self.series[i:i + self.window], self.series[i + self.window - 1]


class wrong_non_overlapping(Dataset):
    """Windows stride by `window` instead of 1: 10 values, window 3 gives 3 examples, not 7."""

    def __init__(self, series, window):
        self.series, self.window = series, window

    def __len__(self):
        return max(0, (len(self.series) - 1) // self.window)

    def __getitem__(self, i):
        if i >= len(self):
            raise IndexError(i)
        start = i * self.window
        return self.series[start:start + self.window], self.series[start + self.window]


class wrong_via_list(Dataset):
    """Stores series.tolist() and rebuilds tensors: a float64 series comes back float32 (an int one stays int64)."""

    def __init__(self, series, window):
        self.values, self.window = series.tolist(), window

    def __len__(self):
        return max(0, len(self.values) - self.window)

    def __getitem__(self, i):
        if i >= len(self):
            raise IndexError(i)
        return torch.tensor(self.values[i:i + self.window]), torch.tensor(self.values[i + self.window])


class wrong_item_target(Dataset):
    """Target returned as .item(): default_collate turns a float32 series' targets into a float64 batch."""

    def __init__(self, series, window):
        self.series, self.window = series, window

    def __len__(self):
        return max(0, len(self.series) - self.window)

    def __getitem__(self, i):
        if i >= len(self):
            raise IndexError(i)
        return self.series[i:i + self.window], self.series[i + self.window].item()


class wrong_window_includes_target(Dataset):
    """Window slice series[i : i + window + 1] also holds the target: windows of window + 1 values, any series."""

    def __init__(self, series, window):
        self.series, self.window = series, window

    def __len__(self):
        return max(0, len(self.series) - self.window)

    def __getitem__(self, i):
        if i >= len(self):
            raise IndexError(i)
        return self.series[i:i + self.window + 1], self.series[i + self.window]
