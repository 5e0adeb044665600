"""Chapter 4: two questions learners ask about evaluation, measured. Does shuffling the evaluation data change the
metric? And why does a BatchNorm model that does well in train mode collapse in eval mode?"""
from __future__ import annotations

import copy

from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from course_utils.engine.data import spiral_splits
from course_utils.engine.loop import evaluate
from course_utils.infra.parallel import in_groups, map_runs


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
    update_bn_same: bool = False   # torch.optim.swa_utils.update_bn gives bit for bit the same statistics


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

    # eval mode first: a train-mode pass over the validation set moves the running statistics towards it
    in_eval, in_train, before = accuracy(False), accuracy(True), _first_bn_gap(model, xt)
    loader = DataLoader(TensorDataset(xt, yt), batch_size=batch_size)
    twin = copy.deepcopy(model)
    recalibrate_batchnorm(model, loader)
    torch.optim.swa_utils.update_bn(loader, twin)            # torch's own re-estimate, for comparison
    same = all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), twin.state_dict().values()))
    return BNCollapse(in_train, in_eval, accuracy(False), before, _first_bn_gap(model, xt), same)


def bn_collapse_fixes(seeds=range(5)) -> list[str]:
    """What removes chapter 4's BatchNorm collapse, counted on `seeds`: ten times the updates, or centred inputs.

    The running statistics lag the weights: each train-mode forward moves them 10% of the way, while every
    update moves the first BatchNorm's input mean by the change of the weights times the inputs' offset. More
    updates shrink the lag only once the weights settle; centred inputs remove its cause."""
    n = len(seeds)
    longer, centred = in_groups(map_runs(bn_collapse, [(s, 300) for s in seeds] + [(s, 30, 0.0) for s in seeds]), n)
    return [
        f"300 updates instead of 30 (inputs around 10): eval mode still more than 0.2 below the re-estimate on "
        f"{sum(r.recalibrated_accuracy - r.eval_mode_accuracy > 0.2 for r in longer)} of {n} seeds",
        f"inputs centred at 0, 30 updates: running mean within 0.1 std of the real one on "
        f"{sum(r.gap_before < 0.1 for r in centred)} of {n}; eval-mode accuracy above 0.7 on "
        f"{sum(r.eval_mode_accuracy > 0.7 for r in centred)} of {n}",
        f"torch.optim.swa_utils.update_bn(loader, model) leaves the same running statistics as the re-estimate on "
        f"{sum(r.update_bn_same for r in longer + centred)} of {2 * n} runs",
    ]


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


def _outputs_by_batch(batch_sizes, seed: int, modes=("train", "eval")):
    """The spiral MLP with BatchNorm on 300 validation points, per mode: (one batch's outputs, {size: outputs})."""
    x = spiral_splits(600, 300, seed=seed).val.tensors[0]
    torch.manual_seed(seed)
    model = bn_mlp()
    runs = {}
    with torch.no_grad():
        model.train()
        model(x)                                            # running statistics that are not the defaults
        for mode in modes:
            model.train(mode == "train")
            with torch.random.fork_rng():
                runs[mode] = model(x), {b: torch.cat([model(c) for c in x.split(b)]) for b in batch_sizes}
    return len(x), runs


def batch_dependence(batch_sizes=(2, 7, 64), seed: int = 0) -> list[str]:
    """Chapter 4: do a model's outputs for the same examples depend on the batch they are computed in?

    Two causes, measured on the spiral MLP with BatchNorm: train mode (the batch's own statistics, a large
    change) and, in eval mode, float32 itself (another batch size may take other kernel paths and sum in
    another order, so the last bits may move; the predictions do not). Whether the last bits do move depends on
    the CPU's code path, so these lines say only what holds on every path; `last_bits` says what this one did."""
    n, runs = _outputs_by_batch(batch_sizes, seed)
    sizes = ", ".join(map(str, batch_sizes))
    lines = []
    for mode, (whole, parts) in runs.items():
        gap = max((p - whole).abs().max().item() for p in parts.values())
        same_argmax = all(torch.equal(p.argmax(1), whole.argmax(1)) for p in parts.values())
        if mode == "train":
            lines.append(f"train mode, batches of {sizes} against one batch of {n}: outputs differ by more "
                         f"than 0.1: {gap > 0.1}; every prediction the same: {same_argmax}")
        else:
            lines.append(f"eval mode,  batches of {sizes} against one batch of {n}: outputs differ by less "
                         f"than 1e-5: {gap < 1e-5}; every prediction the same: {same_argmax}")
    return lines


def last_bits(batch_sizes=(1, 2, 7, 64), seed: int = 0) -> str:
    """Chapter 4, this machine's code path: which batch sizes give eval-mode outputs bit for bit those of one batch.

    Measured on this host (seeds 0-2 alike): all of them on the course's pin (ATen AVX2, MKL's AVX2 branch in
    strict mode); batches of 1, 2 and 7 differ on ATen's generic kernels and on the AVX-512 path, and all four
    on MKL's AVX2 branch without strict mode (tests/test_wave5_answers.py runs the generic path in a process of
    its own)."""
    n, runs = _outputs_by_batch(batch_sizes, seed, modes=("eval",))    # (train mode refuses a batch of 1)
    whole, parts = runs["eval"]
    same = ", ".join(f"{b}: {'yes' if torch.equal(parts[b], whole) else 'no'}" for b in batch_sizes)
    return (f"this machine ({torch.backends.cpu.get_cpu_capability()} kernels), eval mode, bit for bit the "
            f"outputs of one batch of {n}? batches of {same}")
