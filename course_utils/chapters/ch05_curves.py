"""Chapter 5: reading curves, measured over seeds, and keeping the best weights in memory.

- ``val_below_train``: why a logged training loss sits above the validation loss. Two measurement
  effects, each measured alone: the logged loss is an average over an epoch in which the model
  improved (it lags the end-of-epoch model), and it is taken in train mode, with dropout on.
- ``rising_together``: validation loss and accuracy rising at once. The loss on the examples the model
  gets wrong grows (it grows more confident on them) while more examples are right.
- ``best_copy``: ``state_dict()`` returns the live tensors; a "best" kept that way follows training.
Every figure is a count of seeds or a comparison with its margin, so it reads the same on any CPU.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.data import DataLoader

from course_utils.engine.data import spiral_splits
from course_utils.engine.models import MLP

SEEDS = tuple(range(5))


def _loss(model: nn.Module, data, train_mode: bool) -> float:
    """Mean cross-entropy over a whole TensorDataset, in the mode asked for, without a graph."""
    was = model.training
    model.train(train_mode)
    x, y = data.tensors
    with torch.no_grad():
        value = nn.functional.cross_entropy(model(x), y).item()
    model.train(was)
    return value


# --- validation loss below training loss -------------------------------------------------------------------

@dataclass(frozen=True)
class EpochEnd:
    """The four losses of one epoch: logged (train mode, mean over the epoch), and the end-of-epoch model's."""

    logged: float          # what a loop prints: the mean of the epoch's training batch losses
    end_train_mode: float  # the end-of-epoch model on the whole training set, dropout on
    end_eval_mode: float   # the same, dropout off (measured the way validation is)
    val: float             # validation loss, eval mode


def epoch_ends(seed: int, dropout: float, epochs: int = 3) -> list[EpochEnd]:
    """Train the spiral MLP (Adam, batch 32, 300 training and 300 validation points); the losses of each epoch."""
    splits = spiral_splits(300, 300, seed=seed)
    torch.manual_seed(seed)
    model = MLP(hidden=64, dropout=dropout)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    loader = DataLoader(splits.train, batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(seed))
    ends = []
    for _ in range(epochs):
        model.train()
        total = 0.0
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            total += loss.item() * len(yb)
        ends.append(EpochEnd(total / len(splits.train), _loss(model, splits.train, True),
                             _loss(model, splits.train, False), _loss(model, splits.val, False)))
    return ends


@dataclass(frozen=True)
class BelowTrain:
    """Epoch ends over seeds, without and with dropout; counts of the comparisons chapter 5 prints."""

    plain: tuple[EpochEnd, ...]      # no dropout, every seed's epochs
    dropout: tuple[EpochEnd, ...]    # dropout 0.5

    def counts(self) -> dict[str, tuple[int, int]]:
        """Each comparison: (epoch ends where it holds, epoch ends)."""
        def count(ends, test):
            return sum(test(e) for e in ends), len(ends)
        both = self.plain + self.dropout
        return {
            "no dropout: logged above val": count(self.plain, lambda e: e.logged > e.val),
            "no dropout: logged above end-of-epoch": count(self.plain, lambda e: e.logged > e.end_train_mode),
            "dropout: logged above val": count(self.dropout, lambda e: e.logged > e.val),
            "dropout: train mode above eval mode": count(self.dropout, lambda e: e.end_train_mode > e.end_eval_mode),
            "like validation: train above val": count(both, lambda e: e.end_eval_mode > e.val),
        }

    def smallest_margin(self) -> float:
        """The closest call among the counted comparisons (a test keeps it far above rounding)."""
        pairs = [(e.logged, e.val) for e in self.plain + self.dropout] + \
                [(e.logged, e.end_train_mode) for e in self.plain] + \
                [(e.end_train_mode, e.end_eval_mode) for e in self.dropout] + \
                [(e.end_eval_mode, e.val) for e in self.plain + self.dropout]
        return min(abs(a - b) for a, b in pairs)


def val_below_train(seeds=SEEDS, epochs: int = 3) -> BelowTrain:
    """Chapter 5's 'validation loss below training loss' runs, on every seed."""
    return BelowTrain(tuple(e for s in seeds for e in epoch_ends(s, 0.0, epochs)),
                      tuple(e for s in seeds for e in epoch_ends(s, 0.5, epochs)))


# --- validation loss and accuracy rising together ----------------------------------------------------------

@dataclass(frozen=True)
class Evaluation:
    """One validation pass: the loss, the accuracy, the loss on the right and on the wrong predictions."""

    step: int
    loss: float
    accuracy: float
    loss_right: float
    loss_wrong: float
    confidence_wrong: float   # the mean probability the model gives its (wrong) predicted class


def evaluations(seed: int, steps: int = 150, every: int = 10) -> list[Evaluation]:
    """Full-batch Adam (lr 0.02) on 150 points of a noisy spiral (noise 1.0), validated on 300 every `every` steps."""
    splits = spiral_splits(150, 300, seed=seed, noise=1.0)
    (x, y), (vx, vy) = splits.train.tensors, splits.val.tensors
    torch.manual_seed(seed)
    model = MLP(hidden=64)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    found = []
    for step in range(1, steps + 1):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        if step % every == 0:
            with torch.no_grad():
                scores = model(vx)
            losses = nn.functional.cross_entropy(scores, vy, reduction="none")
            right = scores.argmax(dim=1) == vy
            confidence = scores.softmax(dim=1).max(dim=1).values
            found.append(Evaluation(step, losses.mean().item(), right.float().mean().item(),
                                    losses[right].mean().item(), losses[~right].mean().item(),
                                    confidence[~right].mean().item()))
    return found


@dataclass(frozen=True)
class Rise:
    """One seed's run: the evaluation with the lowest validation loss, the best accuracy after it, the last one."""

    lowest_loss: Evaluation
    best_after: Evaluation     # the highest accuracy at or after the loss minimum (the earliest such)
    last: Evaluation

    @property
    def rose_together(self) -> bool:
        """Accuracy peaked after the loss minimum, with a higher loss than at the minimum."""
        return self.best_after.step > self.lowest_loss.step and self.best_after.accuracy > self.lowest_loss.accuracy


def rising_together(seeds=SEEDS) -> list[Rise]:
    """Chapter 5's 'loss and accuracy rise together' runs, one Rise per seed."""
    rises = []
    for seed in seeds:
        ev = evaluations(seed)
        low = min(range(len(ev)), key=lambda k: (ev[k].loss, k))
        best = max(range(low, len(ev)), key=lambda k: (ev[k].accuracy, -k))
        rises.append(Rise(ev[low], ev[best], ev[-1]))
    return rises


# --- keeping the best weights --------------------------------------------------------------------------------

KEEPS = ("state_dict()", "copy.deepcopy(state_dict())", "clone the parameters only")


def _keep(model: nn.Module, how: str):
    if how == "state_dict()":
        return model.state_dict()                                   # references to the live tensors
    if how == "copy.deepcopy(state_dict())":
        return copy.deepcopy(model.state_dict())                    # its own memory, buffers included
    if how == "clone the parameters only":
        return [p.detach().clone() for p in model.parameters()]     # BatchNorm's running statistics left out
    raise ValueError(f"how must be one of {KEEPS}, got {how!r}")


def _restore(model: nn.Module, kept) -> None:
    if isinstance(kept, list):
        with torch.no_grad():
            for p, saved in zip(model.parameters(), kept):
                p.copy_(saved)
    else:
        model.load_state_dict(kept)


@dataclass(frozen=True)
class BestCopy:
    """One run that keeps its best weights one way, then restores them and validates again."""

    how: str
    best_epoch: int
    epochs: int
    best_val: float              # the validation loss recorded at the best epoch
    restored_val: float          # the validation loss of the restored model
    last_val: float              # the validation loss at the end of training
    shares_memory: bool          # the kept head weight is the live one's storage

    @property
    def restored_exactly(self) -> bool:
        return self.restored_val == self.best_val


def best_copies(seed: int = 0, epochs: int = 25) -> dict[str, BestCopy]:
    """Train a BatchNorm MLP on a noisy spiral, keeping the best validation epoch's weights each way (chapter 5).

    One run keeps all three "best" copies at once; at the end each is restored into its own copy of the
    trained model and validated again.
    """
    splits = spiral_splits(150, 300, seed=seed, noise=1.0)
    torch.manual_seed(seed)
    model = MLP(hidden=64, batchnorm=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    loader = DataLoader(splits.train, batch_size=50, shuffle=True, generator=torch.Generator().manual_seed(seed))
    best_val, best_epoch, kept = float("inf"), 0, {}
    for epoch in range(1, epochs + 1):
        model.train()
        for xb, yb in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            optimizer.step()
        val = _loss(model, splits.val, False)
        if val < best_val:
            best_val, best_epoch, kept = val, epoch, {how: _keep(model, how) for how in KEEPS}
    last_val = _loss(model, splits.val, False)
    found = {}
    for how, copy_kept in kept.items():
        head = copy_kept["head.weight"] if isinstance(copy_kept, dict) else copy_kept[-2]
        shares = head.untyped_storage().data_ptr() == model.head.weight.untyped_storage().data_ptr()
        restored = copy.deepcopy(model)
        _restore(restored, copy_kept)
        found[how] = BestCopy(how, best_epoch, epochs, best_val, _loss(restored, splits.val, False), last_val, shares)
    return found
