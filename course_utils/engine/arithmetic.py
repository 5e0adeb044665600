"""Training arithmetic (chapter 0): exact counts of batches, micro-steps, updates and examples.

The counts mirror, per rank, a real ``DataLoader(dataset, batch_size, drop_last=drop_last)``
(over ``DistributedSampler(dataset, num_replicas=world_size)`` with its defaults when
``world_size > 1``: every rank gets ceil(N/W) indices, the shortfall padded by repeating the
first indices) and the course's loop, which steps the optimizer after every K micro-batches
*and* once more at the end of an epoch if a partial window of r < K micro-batches is left
(the "flush", as PyTorch Lightning, HF Accelerate and the HF Trainer do).
"""
from __future__ import annotations

import operator
from dataclasses import dataclass


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a positive integer, got a bool ({value!r})")
    try:
        number = operator.index(value)
    except Exception:  # noqa: BLE001 - any object: a float, a string, a tensor, one whose __index__ raises
        raise ValueError(f"{name} must be a positive integer, got {_short_repr(value)}") from None
    if number < 1:
        raise ValueError(f"{name} must be a positive integer (>= 1), got {number}")
    return number


def _short_repr(value: object) -> str:
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a broken __repr__ must not hide the real message
        text = f"a {type(value).__name__}"
    return text if len(text) <= 60 else text[:57] + "..."


def _ceil_div(a: int, b: int) -> int:
    """Exact ceil(a / b) for integers of any size (float division overflows above 1e308)."""
    return -(-a // b)


def is_update_step(micro_step: int, micro_steps_per_epoch: int, accum_steps: int) -> bool:
    """Does micro-batch `micro_step` (0-based, within its epoch) end an accumulation window? (ch. 0, 5, 7)"""
    return (micro_step + 1) % accum_steps == 0 or micro_step + 1 == micro_steps_per_epoch


def accumulation_window(micro_step: int, micro_steps_per_epoch: int, accum_steps: int) -> range:
    """The 0-based micro-batches of the window `micro_step` belongs to; the epoch's last may be short (ch. 0, 5, 7)."""
    start = micro_step - micro_step % accum_steps
    return range(start, min(start + accum_steps, micro_steps_per_epoch))


def batch_sizes(n_examples: int, batch_size: int, drop_last: bool = False) -> list[int]:
    """The sizes of the batches a DataLoader yields over `n_examples` indices (chapters 0, 5, 7)."""
    full, rest = divmod(n_examples, batch_size)
    return [batch_size] * full + ([rest] if rest and not drop_last else [])


def examples_after(updates: int, n_examples: int, batch_size: int, drop_last: bool = False) -> int:
    """Training examples processed by `updates` updates of one batch each, epoch after epoch (chapter 8).

    Counted batch by batch, as a DataLoader yields them: each epoch's last batch may be smaller.
    """
    sizes = batch_sizes(n_examples, batch_size, drop_last)
    if not sizes:
        return 0
    epochs, rest = divmod(updates, len(sizes))
    return epochs * sum(sizes) + sum(sizes[:rest])


def loss_weight(micro_step: int, sizes: list[int] | tuple[int, ...], accum_steps: int) -> float:
    """What to multiply micro-batch `micro_step`'s *mean* loss by before backward (chapters 0, 5, 7).

    Its share of the examples of its accumulation window: sizes[i] / (examples in the window).
    Summed over the window, the gradients then equal one big batch of the same examples exactly,
    the short last window and a partial last batch included (dividing by K, or by the number of
    micro-batches, over-weights the examples of a short window or of a partial batch).
    """
    window = accumulation_window(micro_step, len(sizes), accum_steps)
    return sizes[micro_step] / sum(sizes[i] for i in window)


@dataclass(frozen=True)
class TrainingArithmetic:
    """The counts for one configuration. Per-rank unless the name says global."""

    dataset_size: int
    batch_size: int
    epochs: int
    accum_steps: int
    drop_last: bool
    world_size: int
    samples_per_rank: int          # indices a rank's sampler yields per epoch (padding included)
    padded_samples: int            # duplicates added by DistributedSampler per epoch, over all ranks
    iters_per_epoch: int           # micro-batches (DataLoader batches) per epoch
    last_batch_size: int           # size of an epoch's final batch (0 if the epoch has no batch)
    dropped_per_epoch: int         # examples a rank skips per epoch because of drop_last
    total_micro_steps: int         # forward/backward passes over a batch, all epochs
    updates_per_epoch: int         # optimizer.step() calls per epoch, with the end-of-epoch flush
    naive_updates_per_epoch: int   # the textbook `if (i + 1) % K == 0` loop, no flush
    last_window_size: int          # micro-batches in an epoch's final accumulation window
    total_weight_updates: int
    effective_batch_size: int      # nominal examples per update: B * K * W
    largest_update_examples: int   # examples that really go into the largest update, all ranks (padding included)
    examples_per_epoch: int        # example-level forward passes per rank per epoch
    total_examples_seen: int       # example-level forward passes per rank, all epochs
    global_examples_seen: int      # the same summed over all W ranks (padding duplicates included)

    def rows(self, inputs: bool = True) -> list[tuple[str, int | bool]]:
        """(label, value) pairs: the inputs (optional), then the counts."""
        rows: list[tuple[str, int | bool]] = [
            ("dataset size N", self.dataset_size),
            ("batch size B", self.batch_size),
            ("epochs E", self.epochs),
            ("accumulation K", self.accum_steps),
            ("drop_last", self.drop_last),
            ("world size W", self.world_size),
        ] if inputs else []
        if self.world_size > 1:
            rows += [("examples per rank per epoch", self.samples_per_rank),
                     ("padding duplicates per epoch", self.padded_samples)]
        rows += [
            ("iterations per epoch", self.iters_per_epoch),
            ("last batch size", self.last_batch_size),
            ("examples dropped per epoch", self.dropped_per_epoch),
            ("micro-steps (all epochs)", self.total_micro_steps),
            ("effective batch B*K*W (nominal)", self.effective_batch_size),
            ("examples in the largest update", self.largest_update_examples),
            ("updates per epoch (with flush)", self.updates_per_epoch),
            ("updates per epoch (naive loop)", self.naive_updates_per_epoch),
            ("last accumulation window", self.last_window_size),
            ("weight updates (all epochs)", self.total_weight_updates),
            ("examples seen" + (" per rank" if self.world_size > 1 else ""), self.total_examples_seen),
        ]
        if self.world_size > 1:
            rows.append(("examples seen, all ranks", self.global_examples_seen))
        return rows

    def table(self) -> str:
        """A plain-text table for printing (what nbval compares)."""
        rows = self.rows()
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {v:>{10},}" if not isinstance(v, bool) else f"{k:<{width}}  {v!s:>10}"
                         for k, v in rows)

    def __str__(self) -> str:
        return self.table()


def training_arithmetic(dataset_size: int, batch_size: int, epochs: int, accum_steps: int = 1, *,
                        drop_last: bool = False, world_size: int = 1) -> TrainingArithmetic:
    """Exact training counts for N examples, batch B, E epochs, accumulation K, W ranks (chapter 0)."""
    n = _positive_int("dataset_size", dataset_size)
    b = _positive_int("batch_size", batch_size)
    e = _positive_int("epochs", epochs)
    k = _positive_int("accum_steps", accum_steps)
    w = _positive_int("world_size", world_size)
    if not isinstance(drop_last, bool):
        raise ValueError(f"drop_last must be True or False, got {_short_repr(drop_last)}")

    per_rank = _ceil_div(n, w)             # DistributedSampler(drop_last=False) pads to this
    padded = per_rank * w - n
    full, remainder = divmod(per_rank, b)
    if drop_last or remainder == 0:
        iters, last = full, (b if full else 0)
    else:
        iters, last = full + 1, remainder
    examples = full * b if drop_last else per_rank
    updates = _ceil_div(iters, k)
    window = iters - (updates - 1) * k if iters else 0
    return TrainingArithmetic(
        dataset_size=n, batch_size=b, epochs=e, accum_steps=k, drop_last=drop_last, world_size=w,
        samples_per_rank=per_rank, padded_samples=padded,
        iters_per_epoch=iters, last_batch_size=last, dropped_per_epoch=per_rank - examples,
        total_micro_steps=iters * e, updates_per_epoch=updates, naive_updates_per_epoch=iters // k,
        last_window_size=window, total_weight_updates=updates * e, effective_batch_size=b * k * w,
        largest_update_examples=min(b * k, examples) * w,
        examples_per_epoch=examples, total_examples_seen=examples * e,
        global_examples_seen=examples * e * w,
    )


def epoch_timeline(result: TrainingArithmetic) -> list[tuple[int, int, bool, bool]]:
    """One epoch, micro-batch by micro-batch: (first example, batch size, ends an update?, is it the flush?).

    Every epoch has the same counts, so one epoch describes them all (the chapter-0 timeline).
    """
    rows, start = [], 0
    it, k = result.iters_per_epoch, result.accum_steps
    for i in range(it):
        size = result.last_batch_size if i == it - 1 else result.batch_size
        update = is_update_step(i, it, k)
        rows.append((start, size, update, update and (i + 1) % k != 0))
        start += size
    return rows
