"""Attempts at Exercise 0.2, loss_weights(sizes, K)."""
import torch


def right_window_starts(sizes, K):
    """Each micro-batch's size over its window's total, windows found by their start index."""
    out = []
    for start in range(0, len(sizes), K):
        window = sizes[start:start + K]
        out.extend(size / sum(window) for size in window)
    return out


def right_torch_segments(sizes, K):
    """torch: window totals by index_add over window ids, then one division."""
    if not sizes:
        return []
    s = torch.tensor(sizes, dtype=torch.float64)
    ids = torch.arange(len(sizes)) // K
    totals = torch.zeros(int(ids[-1]) + 1, dtype=torch.float64).index_add_(0, ids, s)
    return (s / totals[ids]).tolist()


def wrong_divide_by_K(sizes, K):
    """Every loss divided by K: the short last window, sizes [4, 4, 2], K=2, gets 0.5 instead of 1."""
    return [1 / K for _ in sizes]


def wrong_divide_by_window_count(sizes, K):
    """1 / (micro-batches in the window): a partial batch inside a window, sizes [4, 2], K=2, gets 0.5 not 1/3."""
    out = []
    for start in range(0, len(sizes), K):
        n = len(sizes[start:start + K])
        out.extend([1 / n] * n)
    return out


def wrong_epoch_share(sizes, K):
    """Share of the whole epoch's examples, not the window's: sizes [4, 4], K=1 gives 0.5 each, not 1."""
    total = sum(sizes)
    return [size / total for size in sizes]


def wrong_windows_from_end(sizes, K):
    """Windows aligned to the end (short window first): sizes [4, 4, 2], K=2 groups [4] and [4, 2]."""
    out = []
    first = len(sizes) % K or K
    bounds = [0] + list(range(first, len(sizes) + 1, K))
    for a, b in zip(bounds, bounds[1:]):
        window = sizes[a:b]
        out.extend(size / sum(window) for size in window)
    return out


def wrong_nominal_window(sizes, K):
    """Divides by the nominal window K * sizes[0]: the short last window, sizes [4, 4, 2], K=2, gets 0.25 not 1."""
    full = K * sizes[0] if sizes else 1
    return [size / full for size in sizes]


def wrong_window_off_by_one(sizes, K):
    """Window of i taken as (i + 1) // K: sizes [1, 2, 3], K=2 groups [1] and [2, 3] instead of [1, 2] and [3]."""
    groups: dict[int, int] = {}
    for i, size in enumerate(sizes):
        groups[(i + 1) // K] = groups.get((i + 1) // K, 0) + size
    return [size / groups[(i + 1) // K] for i, size in enumerate(sizes)]


def wrong_returns_tensor(sizes, K):
    """Returns a float32 tensor, not a list of floats, and 1/3 rounded to float32: sizes [1, 2], K=2."""
    s = torch.tensor(sizes, dtype=torch.float32)
    out = torch.empty_like(s)
    for start in range(0, len(sizes), K):
        out[start:start + K] = s[start:start + K] / s[start:start + K].sum()
    return out
