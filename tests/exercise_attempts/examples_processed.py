"""Attempts at Exercise 8.2, examples_processed(updates, N, B, drop_last=False)."""
import itertools


def right_closed_form(updates, N, B, drop_last=False):
    """Whole epochs times the examples one epoch trains on, plus full batches of the epoch under way."""
    per_epoch_batches = N // B if drop_last else -(-N // B)
    per_epoch_examples = (N // B) * B if drop_last else N
    if per_epoch_batches == 0:
        return 0
    epochs, rest = divmod(updates, per_epoch_batches)
    return epochs * per_epoch_examples + rest * B


def right_simulated(updates, N, B, drop_last=False):
    """The batch sizes of one epoch, cycled, summed over the first `updates` batches."""
    sizes = [B] * (N // B) + ([] if drop_last or N % B == 0 else [N % B])
    if not sizes:
        return 0
    return sum(itertools.islice(itertools.cycle(sizes), updates))


def wrong_updates_times_B(updates, N, B, drop_last=False):
    """updates * B: every partial batch counted as full, N=10, B=4, updates=3 gives 12, not 10."""
    return updates * B


def wrong_ignores_drop_last(updates, N, B, drop_last=False):
    """Always counts the partial batch: N=10, B=4, drop_last=True, updates=3 gives 10, not 12."""
    nb = -(-N // B)
    return updates // nb * N + updates % nb * B


def wrong_one_epoch_cap(updates, N, B, drop_last=False):
    """min(updates * B, N), as if the run stopped after one epoch: N=10, B=4, updates=5 gives 10, not 18."""
    return min(updates * B, (N // B) * B if drop_last else N)


def wrong_always_partial_batch(updates, N, B, drop_last=False):
    """Batches per epoch N // B + 1 even when B divides N (a phantom empty batch): N=8, B=4, updates=3 gives 8, not 12."""
    nb = N // B if drop_last else N // B + 1
    per_epoch = (N // B) * B if drop_last else N
    return updates // nb * per_epoch + updates % nb * B


def wrong_true_division(updates, N, B, drop_last=False):
    """updates / batches_per_epoch * N in floats: fractional epochs, N=10, B=4, updates=1 gives 3.33, not 4."""
    nb = N // B if drop_last else -(-N // B)
    return updates / nb * ((N // B) * B if drop_last else N)


def wrong_drop_last_counts_dropped(updates, N, B, drop_last=False):
    """With drop_last, whole epochs still counted as N: N=10, B=4, drop_last=True, updates=2 gives 10, not 8."""
    nb = N // B if drop_last else -(-N // B)
    return updates // nb * N + updates % nb * B
