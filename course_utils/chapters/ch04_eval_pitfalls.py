"""Chapter 4: two questions learners ask about evaluation, measured. Does shuffling the evaluation data change the
metric? And why does a BatchNorm model that does well in train mode collapse in eval mode?"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from course_utils.engine.data import spiral_splits
from course_utils.engine.loop import evaluate


@dataclass(frozen=True)
class ShuffleEffect:
    """Metrics of one model under several evaluation orders (chapter 4)."""

    ordered: tuple[float, float]              # (loss, accuracy), shuffle=False, averaged per example
    shuffled: list[tuple[float, float]]       # the same, one per shuffle seed
    batch_mean_losses: list[float]            # mean of batch means, one per shuffle seed
    drop_last_accuracies: list[float]         # shuffle=True, drop_last=True, one per shuffle seed
    drop_last_counted: int                    # examples a drop_last loader evaluates


def shuffle_effect(model: nn.Module, data: TensorDataset, batch_size: int, seeds: range) -> ShuffleEffect:
    """Evaluate `model` in order, then shuffled with each seed, per example, per batch and with drop_last (chapter 4)."""
    def loader(seed: int | None, drop_last: bool = False) -> DataLoader:
        g = None if seed is None else torch.Generator().manual_seed(seed)
        return DataLoader(data, batch_size=batch_size, shuffle=seed is not None, generator=g, drop_last=drop_last)

    ordered = evaluate(model, loader(None))
    shuffled = [evaluate(model, loader(s)) for s in seeds]
    batch_means = [evaluate(model, loader(s), average="batch")[0] for s in seeds]
    dropping = [evaluate(model, loader(s, drop_last=True))[1] for s in seeds]
    counted = len(data) // batch_size * batch_size
    return ShuffleEffect(ordered, shuffled, batch_means, dropping, counted)


def bn_mlp() -> nn.Sequential:
    """The spiral MLP with a BatchNorm after each hidden Linear (chapter 4)."""
    return nn.Sequential(nn.Linear(2, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 64), nn.BatchNorm1d(64),
                         nn.ReLU(), nn.Linear(64, 3))


@dataclass(frozen=True)
class BNCollapse:
    """A BatchNorm model after a short training run on inputs that are not centred (chapter 4)."""

    train_mode_accuracy: float     # validation accuracy with the batch's own statistics
    eval_mode_accuracy: float      # the same model in eval mode: running statistics
    recalibrated_accuracy: float   # eval mode after re-estimating the running statistics from training data
    gap_before: float              # |running mean - true mean| of the first BatchNorm, in true standard deviations
    gap_after: float               # the same after re-estimating


def _first_bn_gap(model: nn.Sequential, inputs: torch.Tensor) -> float:
    """How far the first BatchNorm's running mean is from its input's real mean, in real standard deviations."""
    with torch.no_grad():
        pre = model[0](inputs)
    bn = model[1]
    return float(((bn.running_mean - pre.mean(0)).abs() / pre.std(0)).median())


def bn_collapse(seed: int, steps: int = 30, offset: float = 10.0, batch_size: int = 32, lr: float = 0.2) -> BNCollapse:
    """Train the BatchNorm MLP `steps` updates on spiral inputs shifted by `offset`; evaluate three ways (chapter 4)."""
    splits = spiral_splits(600, 300, seed=seed)
    (xt, yt), (xv, yv) = splits.train.tensors, splits.val.tensors
    xt, xv = xt + offset, xv + offset              # raw features far from 0, as unnormalised data often are
    torch.manual_seed(seed)
    model = bn_mlp()
    order = torch.Generator().manual_seed(seed)
    done = 0
    while done < steps:                            # shuffled batches, one epoch after another
        for batch in torch.randperm(len(yt), generator=order).split(batch_size):
            model.zero_grad()
            nn.functional.cross_entropy(model(xt[batch]), yt[batch]).backward()
            with torch.no_grad():                  # plain SGD, written out
                for p in model.parameters():
                    p -= lr * p.grad
            done += 1
            if done == steps:
                break

    def accuracy(train_mode: bool) -> float:
        model.train(train_mode)
        with torch.no_grad():
            return float((model(xv).argmax(1) == yv).double().mean())

    in_train, in_eval, before = accuracy(True), accuracy(False), _first_bn_gap(model, xt)
    recalibrate_batchnorm(model, DataLoader(TensorDataset(xt, yt), batch_size=batch_size))
    return BNCollapse(in_train, in_eval, accuracy(False), before, _first_bn_gap(model, xt))


def recalibrate_batchnorm(model: nn.Module, loader: DataLoader) -> None:
    """Re-estimate every BatchNorm's running statistics as the plain average over `loader`'s batches (chapter 4)."""
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    momenta = [m.momentum for m in norms]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None                          # None: a cumulative average instead of an exponential one
    was_training = model.training
    model.train()
    with torch.no_grad():
        for inputs, _ in loader:
            model(inputs)
    for m, momentum in zip(norms, momenta):
        m.momentum = momentum
    model.train(was_training)
