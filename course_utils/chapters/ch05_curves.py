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
from course_utils.infra.parallel import map_runs

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
    """One epoch of a dropout run: the logged loss, the same batches without dropout, the end-of-epoch losses."""

    logged: float          # what a loop prints: the epoch's batch losses (train mode, dropout on), per example
    logged_eval: float     # the same batches, same weights, each measured in eval mode just before its step
    end_train: float       # the end-of-epoch model on the whole training set, eval mode (the way validation is)
    val: float             # validation loss, eval mode


def epoch_ends(seed: int, epochs: int = 3, dropout: float = 0.5) -> list[EpochEnd]:
    """Train the spiral MLP with dropout (Adam, batch 32, 300 training and 300 validation points), per epoch."""
    splits = spiral_splits(300, 300, seed=seed)
    torch.manual_seed(seed)
    model = MLP(hidden=64, dropout=dropout)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    loader = DataLoader(splits.train, batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(seed))
    ends = []
    for _ in range(epochs):
        logged = without_dropout = 0.0
        for xb, yb in loader:
            model.eval()
            with torch.no_grad():
                without_dropout += nn.functional.cross_entropy(model(xb), yb).item() * len(yb)
            model.train()
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            logged += loss.item() * len(yb)
        n = len(splits.train)
        ends.append(EpochEnd(logged / n, without_dropout / n, _loss(model, splits.train, False),
                             _loss(model, splits.val, False)))
    return ends


@dataclass(frozen=True)
class BelowTrain:
    """Every epoch end of the dropout runs over seeds; counts of the comparisons chapter 5 prints."""

    ends: tuple[EpochEnd, ...]

    def counts(self) -> dict[str, int]:
        """How many epoch ends each comparison holds at (of len(ends))."""
        return {
            "logged above val": sum(e.logged > e.val for e in self.ends),
            "dropout: logged above the same batches in eval mode": sum(e.logged > e.logged_eval for e in self.ends),
            "lag: epoch average above the end-of-epoch model": sum(e.logged_eval > e.end_train for e in self.ends),
            "like validation: train above val": sum(e.end_train > e.val for e in self.ends),
        }

    def smallest_margin(self) -> float:
        """The closest call among the counted comparisons (a test keeps it far above rounding)."""
        return min(min(abs(e.logged - e.val), abs(e.logged - e.logged_eval), abs(e.logged_eval - e.end_train),
                       abs(e.end_train - e.val)) for e in self.ends)


def val_below_train(seeds=SEEDS, epochs: int = 3) -> BelowTrain:
    """Chapter 5's 'validation loss below training loss' runs, on every seed."""
    return BelowTrain(tuple(e for ends in map_runs(epoch_ends, [(s, epochs) for s in seeds]) for e in ends))


# --- validation loss and accuracy rising together ----------------------------------------------------------

def confidence_on_wrong(model: nn.Module, data) -> float:
    """The mean probability a model (in eval mode, no graph) gives its predicted class where that class is wrong."""
    was = model.training
    model.eval()
    x, y = data.tensors
    with torch.no_grad():
        probabilities = model(x).softmax(dim=1)
    model.train(was)
    top, predicted = probabilities.max(dim=1)
    wrong = predicted != y
    return top[wrong].mean().item() if wrong.any() else float("nan")


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

    MARGIN = 0.02    # 6 of the 300 validation points: a gain of one or two points is a near tie another CPU can flip

    @property
    def rose_together(self) -> bool:
        """Accuracy rose by more than MARGIN after the loss minimum, with a higher loss than at the minimum."""
        return (self.best_after.step > self.lowest_loss.step and self.best_after.loss > self.lowest_loss.loss
                and self.best_after.accuracy > self.lowest_loss.accuracy + self.MARGIN)


def rising_together(seeds=SEEDS) -> list[Rise]:
    """Chapter 5's 'loss and accuracy rise together' runs, one Rise per seed."""
    rises = []
    for ev in map_runs(evaluations, [(seed,) for seed in seeds]):
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
