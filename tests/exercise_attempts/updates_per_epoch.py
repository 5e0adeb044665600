"""Attempts at Exercise 0.1, updates_per_epoch(N, B, K, drop_last=False)."""
import math

import numpy as np


def right_counted(N, B, K, drop_last=False):
    """Walk the epoch batch by batch and count the steps, the flush included."""
    updates, pending, left = 0, 0, N
    while left >= B or (left > 0 and not drop_last):
        left -= min(B, left)
        pending += 1
        if pending == K:
            updates, pending = updates + 1, 0
    return updates + (pending > 0)


def right_negative_floor(N, B, K, drop_last=False):
    """Ceiling division written as floor division of negatives, in integers only."""
    iters = N // B if drop_last else -(-N // B)
    return -(-iters // K)


def wrong_no_flush(N, B, K, drop_last=False):
    """The textbook (i + 1) % K count, no flush: N=10, B=4, K=2 gives 1, not 2."""
    return math.ceil(N / B) // K if not drop_last else (N // B) // K


def wrong_ignores_drop_last(N, B, K, drop_last=False):
    """drop_last never read: N=10, B=4, K=1, drop_last=True gives 3, not 2."""
    return math.ceil(math.ceil(N / B) / K)


def wrong_drop_last_drops_short_window(N, B, K, drop_last=False):
    """Reads drop_last as also dropping the short window: N=12, B=4, K=2, drop_last=True gives 1, not 2."""
    iters = N // B if drop_last else math.ceil(N / B)
    return iters // K if drop_last else math.ceil(iters / K)


def wrong_round_half(N, B, K, drop_last=False):
    """Ceiling as round(x + 0.5): banker's rounding, N=12, B=4, K=1 gives round(3.5) = 4, not 3."""
    iters = N // B if drop_last else round(N / B + 0.5)
    return round(iters / K + 0.5)


def wrong_always_partial_batch(N, B, K, drop_last=False):
    """Adds one batch for the remainder even when there is none: N=8, B=4, K=1 gives 3, not 2."""
    iters = N // B if drop_last else N // B + 1
    return math.ceil(iters / K)


def wrong_at_least_one_batch(N, B, K, drop_last=False):
    """Keeps one batch even with drop_last: N=3, B=4, K=1, drop_last=True gives 1, not 0."""
    iters = max(1, N // B) if drop_last else math.ceil(N / B)
    return math.ceil(iters / K)


def wrong_numpy_float(N, B, K, drop_last=False):
    """np.ceil returns numpy.float64 (e.g. 2.0), not the int asked for, on every input."""
    iters = np.floor(N / B) if drop_last else np.ceil(N / B)
    return np.ceil(iters / K)


def wrong_float_ceil(N, B, K, drop_last=False):
    """Float division loses integers past 2**53: N=10**17 + 1, B=1, K=1 gives 10**17, not 10**17 + 1."""
    iters = N // B if drop_last else math.ceil(N / B)
    return math.ceil(iters / K)
