"""Chapter 4: the evaluation loop's switches, measured.

Dropout and BatchNorm in train vs eval mode, what no_grad and inference_mode forbid, the graph
memory an evaluation keeps with and without no_grad, the memory budget of training, and the
two ways of averaging a loss over batches.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from torch import nn

from course_utils.engine.memory import GraphMemoryMeter

DROPOUT_VALUES = (0.8, 1.2, 0.3, 0.9)
OPTIMIZER_SLOTS = {"sgd": 0, "momentum": 1, "adam": 2, "adamw": 2}   # state tensors kept per parameter


# --- dropout ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class DropoutDemo:
    inputs: tuple[float, ...]
    p: float
    train_passes: tuple[tuple[float, ...], ...]   # outputs of each train-mode pass
    eval_passes: tuple[tuple[float, ...], ...]    # outputs of each eval-mode pass


def dropout_demo(values=DROPOUT_VALUES, p: float = 0.5, passes: int = 2, seed: int = 0) -> DropoutDemo:
    """Run nn.Dropout(p) over `values` `passes` times in train mode, then in eval mode."""
    torch.manual_seed(seed)
    layer = nn.Dropout(p)
    x = torch.tensor(values)
    layer.train()
    train = tuple(tuple(round(v, 6) for v in layer(x).tolist()) for _ in range(passes))
    layer.eval()
    evals = tuple(tuple(round(v, 6) for v in layer(x).tolist()) for _ in range(passes))
    return DropoutDemo(tuple(values), p, train, evals)


# --- batchnorm -------------------------------------------------------------------------------

@dataclass(frozen=True)
class BatchNormDemo:
    batch_mean: float       # the statistics this batch gives (what train mode normalises with)
    batch_var: float
    running_mean: float     # what eval mode normalises with (the layer's memory of training)
    running_var: float
    train_out: tuple[float, ...]
    eval_out: tuple[float, ...]


def batchnorm_demo(batch=(2.0, 4.0, 6.0, 8.0), running_mean: float = 3.0, running_var: float = 4.0) -> BatchNormDemo:
    """One BatchNorm1d(1) feature on `batch`: normalised with the batch's statistics (train) vs running ones (eval).

    Train mode uses the biased batch variance; the running statistics are set by hand here to what a
    long training run might have left behind. The running statistics are read back before the train
    pass updates them, so the eval pass uses exactly `running_mean` and `running_var`.
    """
    bn = nn.BatchNorm1d(1, affine=False)
    x = torch.tensor(batch).reshape(-1, 1)
    bn.eval()
    with torch.no_grad():
        bn.running_mean.fill_(running_mean)
        bn.running_var.fill_(running_var)
        eval_out = bn(x).reshape(-1).tolist()
        bn.train()
        train_out = bn(x).reshape(-1).tolist()
    r = lambda v: tuple(round(z, 4) for z in v)  # noqa: E731
    return BatchNormDemo(float(x.mean()), float(x.var(unbiased=False)), running_mean, running_var,
                         r(train_out), r(eval_out))


def tiny_batch_outputs(batch) -> tuple[float, ...] | str:
    """BatchNorm1d(1) in train mode on a tiny batch: its outputs, or torch's own error, word for word (chapter 4)."""
    bn = nn.BatchNorm1d(1, affine=False).train()
    try:
        with torch.no_grad():
            return tuple(round(v, 4) for v in bn(torch.tensor(batch).reshape(-1, 1)).reshape(-1).tolist())
    except ValueError as exc:
        return f"{type(exc).__name__}: {exc}"


def one_example_in_train_mode(shapes=((1, 3), (1, 3, 1, 1), (1, 3, 4, 4))) -> list[tuple[tuple, int, str]]:
    """One example through a train-mode BatchNorm of each shape: (shape, values per channel, what happened).

    torch refuses a batch only when a channel has a single value to normalise: a BatchNorm2d trains on one
    image as long as the image has more than one pixel (chapter 4)."""
    found = []
    for shape in shapes:
        bn = (nn.BatchNorm1d if len(shape) == 2 else nn.BatchNorm2d)(shape[1]).train()
        per_channel = shape[0] * (shape[2] * shape[3] if len(shape) == 4 else 1)
        try:
            with torch.no_grad():
                bn(torch.randn(shape, generator=torch.Generator().manual_seed(0)))
            found.append((shape, per_channel, "trains"))
        except ValueError as exc:
            found.append((shape, per_channel, f"{type(exc).__name__}: {exc}"))
    return found


# --- no_grad vs inference_mode ---------------------------------------------------------------

def inference_mode_errors() -> dict[str, str]:
    """What a tensor made under no_grad can do and one made under inference_mode cannot: the real errors.

    Keys: "save_for_backward" (use it where autograd must save it), "inplace_outside" (modify it in
    place after leaving inference mode), "requires_grad_ (nn.Parameter)" (make it a parameter); values "ok" or
    "<ErrorType>: <message>"; and whether a clone made inside or after the block is an inference tensor.
    """
    w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    results = {}
    for name, context in (("no_grad", torch.no_grad), ("inference_mode", torch.inference_mode)):
        with context():
            made = torch.ones(3) * 2
        for case, action in (("save_for_backward", lambda t: (w * t).sum().backward()),
                             ("inplace_outside", lambda t: t.add_(1)),
                             ("requires_grad_ (nn.Parameter)", lambda t: nn.Parameter(t))):
            try:
                action(made)
                results[f"{name}/{case}"] = "ok"
            except RuntimeError as exc:
                results[f"{name}/{case}"] = f"RuntimeError: {str(exc).splitlines()[0]}"
    with torch.inference_mode():
        made = torch.ones(3) * 2
        inside = made.clone()
    outside = made.clone()
    results["clone() inside the block: inference"] = str(inside.is_inference())
    results["clone() after it: inference"] = str(outside.is_inference())
    return results


def time_evaluation(model: nn.Module, x: torch.Tensor, mode: str, repeats: int = 200) -> float:
    """Median seconds per forward pass of `model` on `x` under mode "grad", "no_grad" or "inference_mode"."""
    contexts = {"grad": torch.enable_grad, "no_grad": torch.no_grad, "inference_mode": torch.inference_mode}
    if mode not in contexts:
        raise ValueError(f"mode must be one of {tuple(contexts)}, got {mode!r}")
    times = []
    with contexts[mode]():
        for _ in range(5):
            model(x)
        for _ in range(repeats):
            start = time.perf_counter()
            model(x)
            times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2]


# --- graph memory of an evaluation -------------------------------------------------------------

def eval_graph_bytes(model: nn.Module, x: torch.Tensor, y: torch.Tensor, no_grad: bool) -> int:
    """Bytes autograd saves for backward while evaluating `model` on (x, y), with or without no_grad (CPU).

    The model is evaluated in eval mode and left in the mode it came in (chapters 4, 5)."""
    meter = GraphMemoryMeter()
    was_training = model.training
    model.eval()
    try:
        with (torch.no_grad() if no_grad else torch.enable_grad()), meter:
            loss = nn.functional.cross_entropy(model(x), y)
        del loss
    finally:
        model.train(was_training)
    return meter.peak


@dataclass(frozen=True)
class BatchBytes:
    """Bytes autograd holds for backward per evaluation batch: once the batch is done, and the most while it ran."""

    after: list[int]
    peak: list[int]


def eval_bytes_per_batch(model: nn.Module, loader, no_grad: bool, keep_losses: bool) -> BatchBytes:
    """The evaluation loop written out, metered batch by batch (CPU saved-for-backward bytes; chapter 5).

    `keep_losses=True` logs the loss tensors (`losses.append(loss)`), False logs `loss.item()`. Without
    no_grad every forward builds a graph; whatever still references one (the `logits` and `loss` variables
    until the next batch replaces them, a kept loss for ever) keeps its saved activations alive.
    """
    meter = GraphMemoryMeter()
    was_training = model.training
    model.eval()
    losses, after, peak = [], [], []
    try:
        with (torch.no_grad() if no_grad else torch.enable_grad()), meter:
            for inputs, targets in loader:
                meter.reset_peak()
                logits = model(inputs)
                loss = nn.functional.cross_entropy(logits, targets)
                losses.append(loss if keep_losses else loss.item())
                after.append(meter.bytes)
                peak.append(meter.peak)
    finally:
        model.train(was_training)
    return BatchBytes(after, peak)


# --- memory budget ------------------------------------------------------------------------------

@dataclass(frozen=True)
class MemoryBudget:
    """Bytes needed for training, activations excluded (they depend on batch and architecture)."""

    params: int
    weights: int
    grads: int
    optimizer_state: int
    master_weights: int

    @property
    def total(self) -> int:
        return self.weights + self.grads + self.optimizer_state + self.master_weights

    def rows(self, unit: float = 1e9, name: str = "GB") -> list[tuple[str, str]]:
        return [(k, f"{getattr(self, k) / unit:g} {name}")
                for k in ("weights", "grads", "optimizer_state", "master_weights", "total")]


def memory_budget(params: int | float, dtype_bytes: int = 4, optimizer: str = "adam", *,
                  state_bytes: int | None = None, master_weights: bool = False) -> MemoryBudget:
    """Weights, gradients and optimizer state of a model with `params` parameters.

    dtype_bytes: 4 for FP32, 2 for FP16/BF16 (weights and gradients). The optimizer keeps
    OPTIMIZER_SLOTS[optimizer] tensors per parameter (Adam: two moments) of `state_bytes` each
    (default: dtype_bytes). master_weights adds an FP32 copy (mixed-precision training).
    """
    if optimizer not in OPTIMIZER_SLOTS:
        raise ValueError(f"optimizer must be one of {tuple(OPTIMIZER_SLOTS)}, got {optimizer!r}")
    if dtype_bytes not in (1, 2, 4, 8):
        raise ValueError(f"dtype_bytes must be 1, 2, 4 or 8, got {dtype_bytes!r}")
    if not params > 0:
        raise ValueError(f"params must be > 0, got {params!r}")
    n = int(params)
    state = dtype_bytes if state_bytes is None else state_bytes
    return MemoryBudget(n, n * dtype_bytes, n * dtype_bytes, n * state * OPTIMIZER_SLOTS[optimizer],
                        n * 4 if master_weights else 0)


# --- averaging ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Averages:
    per_example: float   # sum(mean_i * size_i) / sum(size_i): every example counts once
    per_batch: float     # mean of the batch means: a small last batch counts as much as a full one


def average_losses(batch_means, sizes) -> Averages:
    """The two averages of a list of batch-mean losses with their batch sizes."""
    batch_means, sizes = list(batch_means), list(sizes)
    if not batch_means or len(batch_means) != len(sizes):
        raise ValueError("need one size per batch mean, and at least one batch")
    total = sum(sizes)
    return Averages(sum(m * s for m, s in zip(batch_means, sizes)) / total, sum(batch_means) / len(batch_means))


def memory_budget_mb(params: int | float, dtype_bytes: int = 4, optimizer: str = "adam",
                     state_bytes: int | None = None) -> dict[str, float]:
    """memory_budget in megabytes (1 MB = 10^6 bytes), as a dict (the quiz key uses "total")."""
    b = memory_budget(params, dtype_bytes, optimizer, state_bytes=state_bytes)
    return {k: getattr(b, k) / 1e6 for k in ("weights", "grads", "optimizer_state", "master_weights", "total")}


# --- which layers read `training` ---------------------------------------------------------------

def modules_reading_training() -> list[str]:
    """Public torch.nn modules whose own torch.nn source reads self.training (chapter 4): measured from torch.

    Every method of the class is read, and of its torch.nn base classes (not nn.Module itself), because forward()
    can read the flag through a helper: InstanceNorm's forward calls _InstanceNorm._apply_instance_norm, which reads it.
    """
    import inspect

    reads: dict[type, bool] = {}      # a base class read once, though many modules share it

    def own_methods_read(base: type) -> bool:
        if base not in reads:
            reads[base] = False
            for member in vars(base).values():
                try:
                    if inspect.isfunction(member) and "self.training" in inspect.getsource(member):
                        reads[base] = True
                        break
                except (OSError, TypeError):
                    continue
        return reads[base]

    found = []
    for name in dir(nn):
        cls = getattr(nn, name)
        if inspect.isclass(cls) and issubclass(cls, nn.Module):
            bases = [b for b in cls.__mro__ if b not in (nn.Module, object) and b.__module__.startswith("torch.nn")]
            if any(own_methods_read(b) for b in bases):
                found.append(name)
    return found


def train_eval_differ(module: nn.Module, x: torch.Tensor, seed: int = 0) -> tuple[bool, bool]:
    """(two train-mode passes differ, two eval-mode passes differ) for `module` on `x` (chapter 4)."""
    torch.manual_seed(seed)
    with torch.no_grad():
        module.train()
        train_differ = not torch.equal(module(x), module(x))
        module.eval()
        eval_differ = not torch.equal(module(x), module(x))
    return train_differ, eval_differ


@dataclass(frozen=True)
class RunningStats:
    """BatchNorm1d(1)'s running mean and variance: at start, after one train pass, after one eval pass."""

    batch_mean: float
    batch_var_unbiased: float
    start: tuple[float, float]
    after_train: tuple[float, float]
    after_eval: tuple[float, float]
    momentum: float


def batchnorm_running_update(batch=(2.0, 4.0, 6.0, 8.0)) -> RunningStats:
    """Train mode updates BatchNorm's running statistics (EMA, unbiased variance); eval mode leaves them (ch. 4)."""
    bn = nn.BatchNorm1d(1, affine=False)
    x = torch.tensor(batch).reshape(-1, 1)
    read = lambda: (round(bn.running_mean.item(), 6), round(bn.running_var.item(), 6))  # noqa: E731
    start = read()
    with torch.no_grad():
        bn.train()
        bn(x)
        after_train = read()
        bn.eval()
        bn(x)
        after_eval = read()
    return RunningStats(float(x.mean()), float(x.var(unbiased=True)), start, after_train, after_eval, bn.momentum)


def transformer_fast_path() -> dict[str, bool]:
    """The one family where no_grad changes a layer's output: TransformerEncoder (nested tensors on, a padding mask,
    dropout 0) takes its fast path only in eval mode with gradients off, and that path returns exact zeros at the
    padded positions. Whether the padded outputs are all zero, for each mode with and without gradients."""
    import warnings
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0, batch_first=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")               # its note that nested tensors need eval mode and no_grad
        encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=True)
    x = torch.randn(2, 5, 8)
    padding = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])       # the second sequence: 3 tokens, 2 pads
    out = {}
    for mode in ("train", "eval"):
        encoder.train(mode == "train")
        for grad in (True, False):
            with torch.set_grad_enabled(grad), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                y = encoder(x, src_key_padding_mask=padding)
            out[f"{mode} mode, gradients {'on' if grad else 'off (no_grad)'}"] = bool((y[1, 3:] == 0).all())
    return out
