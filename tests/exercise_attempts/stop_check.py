"""Attempts at Exercise 7.2, stop_check(losses, patience, min_delta=0.0) -> 1-based check number or None."""
import math


def right_counter(losses, patience, min_delta=0.0):
    """Best so far and a wait counter, Lightning's order: non-finite first, then improvement, then patience."""
    best, wait = math.inf, 0
    for number, loss in enumerate(losses, start=1):
        if not math.isfinite(loss):
            return number
        if loss < best - min_delta:
            best, wait = loss, 0
        else:
            wait += 1
            if wait >= patience:
                return number
    return None


def right_last_improvement(losses, patience, min_delta=0.0):
    """Remembers where the last improvement was; stops when the distance to it reaches patience."""
    best, last = float("inf"), 0
    for i, loss in enumerate(map(float, losses), 1):
        if loss != loss or loss in (float("inf"), float("-inf")):
            return i
        if best - loss > min_delta:
            best, last = loss, i
        elif i - last >= patience:
            return i
    return None


def wrong_equal_improves(losses, patience, min_delta=0.0):
    """<= instead of <: an equal loss (e.g. [1.0, 1.0, 1.0], patience 2) counts as an improvement."""
    best, wait = math.inf, 0
    for n, loss in enumerate(losses, 1):
        if not math.isfinite(loss):
            return n
        if loss <= best - min_delta:
            best, wait = loss, 0
        else:
            wait += 1
            if wait >= patience:
                return n
    return None


def wrong_one_check_late(losses, patience, min_delta=0.0):
    """wait > patience: stops one check late, [1.0, 2.0, 2.0] with patience 2 gives None, not 3."""
    best, wait = math.inf, 0
    for n, loss in enumerate(losses, 1):
        if not math.isfinite(loss):
            return n
        if loss < best - min_delta:
            best, wait = loss, 0
        else:
            wait += 1
            if wait > patience:
                return n
    return None


def wrong_nan_waits(losses, patience, min_delta=0.0):
    """No finiteness check: a NaN just fails to improve, [1.0, nan] with patience 3 gives None, not 2."""
    best, wait = math.inf, 0
    for n, loss in enumerate(losses, 1):
        if loss < best - min_delta:
            best, wait = loss, 0
        else:
            wait += 1
            if wait >= patience:
                return n
    return None


def wrong_isnan_only(losses, patience, min_delta=0.0):
    """math.isnan only: +inf is waited out, [1.0, inf] with patience 3 gives None, not 2."""
    best, wait = math.inf, 0
    for n, loss in enumerate(losses, 1):
        if math.isnan(loss):
            return n
        if loss < best - min_delta:
            best, wait = loss, 0
        else:
            wait += 1
            if wait >= patience:
                return n
    return None


def wrong_zero_based(losses, patience, min_delta=0.0):
    """Returns the 0-based index: [1.0, 2.0] with patience 1 gives 1, not 2."""
    best, wait = math.inf, 0
    for i, loss in enumerate(losses):
        if not math.isfinite(loss):
            return i
        if loss < best - min_delta:
            best, wait = loss, 0
        else:
            wait += 1
            if wait >= patience:
                return i
    return None


def wrong_against_previous(losses, patience, min_delta=0.0):
    """Compares with the previous loss, not the best: [1.0, 3.0, 2.0] with patience 2 resets at 2.0, stops never."""
    previous, wait = math.inf, 0
    for n, loss in enumerate(losses, 1):
        if not math.isfinite(loss):
            return n
        if loss < previous - min_delta:
            wait = 0
        else:
            wait += 1
            if wait >= patience:
                return n
        previous = loss
    return None


def wrong_best_creeps(losses, patience, min_delta=0.0):
    """Moves the best on any decrease, even one within min_delta: [1.0, 0.94, 0.88] with min_delta 0.1, patience 2
    gives 3, but 0.88 beats the best 1.0 by more than 0.1 (an improvement)."""
    best, wait = math.inf, 0
    for n, loss in enumerate(losses, 1):
        if not math.isfinite(loss):
            return n
        improved = loss < best - min_delta
        best = min(best, loss)
        if improved:
            wait = 0
        else:
            wait += 1
            if wait >= patience:
                return n
    return None


def wrong_delta_sign(losses, patience, min_delta=0.0):
    """loss < best + min_delta: a loss worse by less than min_delta resets the wait, [1.0, 1.05, 1.05], 0.1, 2."""
    best, wait = math.inf, 0
    for n, loss in enumerate(losses, 1):
        if not math.isfinite(loss):
            return n
        if loss < best + min_delta:
            best, wait = min(best, loss), 0
        else:
            wait += 1
            if wait >= patience:
                return n
    return None
