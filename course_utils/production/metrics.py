"""Metrics that accumulate (chapters 4 and 7): update(outputs, targets) on every batch, compute() once at the end.

F1, precision, recall and AUROC are not means over examples, so the mean of their per-batch values is not
their value on the whole set (chapter 4 measures by how much). A metric here keeps a *state* instead: sums
and counts that add up over batches (a confusion matrix), or, for AUROC, every score, concatenated. compute()
turns the state into the value once. The shape is torchmetrics':

    f1 = MulticlassF1(num_classes=3)            # in classification_metrics.py
    for inputs, targets in loader:
        f1.update(model(inputs), targets)       # adds to tensors on the outputs' device; reads nothing back
    value = f1.compute()                        # a 0-dim tensor; under torch.distributed, over every rank
    f1.reset()

The state lives on the device of the outputs and update() never reads it on the host, so a GPU never waits
between batches; compute() reads once. Under torch.distributed compute() first merges the ranks' states
(`sync`): sum states are all-reduced, concatenated states all-gathered, ranks holding different numbers of
examples included. Each rank's own state stays as it was; ``compute(sync=False)`` is this rank's alone.

``Task(metric=...)`` takes such an object, its class or a function returning a fresh one, or, as before, a plain
function (outputs, targets) -> number: that one is averaged over batches weighted by their examples
(``PerBatchMean``), which is right only for a metric that is itself a mean over examples (MAE, accuracy).
"""
from __future__ import annotations

import copy
import inspect
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import torch
import torch.distributed as dist
from torch import nn
from torch.utils._pytree import tree_flatten, tree_map

PROTOCOL = ("update", "compute", "reset")


class MetricError(ValueError):
    """A metric given what it cannot measure, or a metric object that is not one; the message names what and why."""


@runtime_checkable
class AccumulatingMetric(Protocol):
    """What the trainer asks of a metric object (torchmetrics' objects have it too)."""

    def update(self, outputs: Any, targets: Any) -> None: ...
    def compute(self) -> Any: ...
    def reset(self) -> None: ...


class Metric:
    """The course's metrics: declared tensor states, update() adding a batch's part to them, compute() from them.

    A subclass declares its states in __init__ (`sum_state`, `cat_state`), says what one batch adds
    (`batch_state`: a dict of tensors, computed on the device) and how the states make the value (`value`).
    """

    def __init__(self) -> None:
        self._sum_specs: dict[str, tuple[tuple[int, ...], torch.dtype]] = {}
        self._cat_specs: dict[str, torch.dtype] = {}
        self._sums: dict[str, torch.Tensor] = {}
        self._cats: dict[str, list[torch.Tensor]] = {}
        self._device = torch.device("cpu")         # where the state lives: the first update's outputs' device
        self._fresh = True                          # nothing added since the start or the last reset

    def sum_state(self, name: str, shape: tuple[int, ...], dtype: torch.dtype) -> None:
        """Declare a state that batches add to (counts, sums); ranks merge it by all-reduce."""
        self._sum_specs[name] = (tuple(shape), dtype)
        self._sums[name] = torch.zeros(shape, dtype=dtype, device=self._device)

    def cat_state(self, name: str, dtype: torch.dtype) -> None:
        """Declare a state that keeps every example's value (AUROC's scores); ranks merge it by all-gather."""
        self._cat_specs[name] = dtype
        self._cats[name] = []

    # -- what a subclass writes ---------------------------------------------------------------------
    def batch_state(self, outputs: Any, targets: Any) -> dict[str, torch.Tensor]:
        """One batch's part of every state, as tensors on the outputs' device (no host read)."""
        raise NotImplementedError

    def value(self, state: dict[str, torch.Tensor]) -> torch.Tensor:
        """The metric from the whole state (sums as they are, concatenated states joined)."""
        raise NotImplementedError

    # -- the protocol ---------------------------------------------------------------------------------
    def update(self, outputs: Any, targets: Any) -> None:
        """Add one batch to the state, on the device: no host read, so the device never waits for Python."""
        for name, part in self.batch_state(outputs, targets).items():
            part = part.detach()
            self._follow(part.device)
            if name in self._cat_specs:
                self._cats[name].append(part)
            else:
                self._sums[name].add_(part)
            self._fresh = False

    def _follow(self, device: torch.device) -> None:
        """Keep the sum states on `device`, the outputs': made there if nothing was added yet (zeros, no copy from
        the host, so no wait), else moved there."""
        if device == self._device:
            return
        if self._fresh:
            self._sums = {name: torch.zeros(shape, dtype=dtype, device=device)
                          for name, (shape, dtype) in self._sum_specs.items()}
        else:
            self._sums = {name: held.to(device) for name, held in self._sums.items()}
        self._device = device

    def reset(self) -> None:
        """Forget every batch (the state stays on its device)."""
        self._sums = {name: torch.zeros(shape, dtype=dtype, device=self._device)
                      for name, (shape, dtype) in self._sum_specs.items()}
        self._cats = {name: [] for name in self._cat_specs}
        self._fresh = True

    def compute(self, sync: bool = True) -> torch.Tensor:
        """The metric over every batch since the last reset, merged over ranks first when torch.distributed runs
        (`sync=False`: this rank's batches alone)."""
        return self.value(self.state(sync))

    def state(self, sync: bool = True) -> dict[str, torch.Tensor]:
        """Every state as one tensor: this rank's, or, with `sync` under torch.distributed, every rank's merged."""
        local = dict(self._sums)
        for name, dtype in self._cat_specs.items():
            parts = self._cats[name]
            local[name] = torch.cat(parts) if parts else torch.zeros(0, dtype=dtype, device=self._device)
        return merge_over_ranks(local, set(self._cat_specs)) if sync and ranks_running() else local

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def ranks_running() -> bool:
    """Whether this process is one of several ranks of an initialised torch.distributed group."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def merge_over_ranks(state: dict[str, torch.Tensor], concatenated: set[str]) -> dict[str, torch.Tensor]:
    """Every rank's state merged: sums all-reduced, the `concatenated` states all-gathered in rank order.

    Every rank must call it (a collective). Each rank may hold a different number of examples: the lengths are
    gathered first, each rank pads to the longest, and the padding is cut off again. The tensors travel on the
    backend's device (CUDA for nccl, the CPU for gloo) and come back to the state's own.
    """
    merged = {}
    for name, tensor in state.items():
        home = tensor.device
        moved = tensor.to(_backend_device(home))
        if name in concatenated:
            merged[name] = _gather_uneven(moved).to(home)
        else:
            total = moved.clone()
            dist.all_reduce(total)
            merged[name] = total.to(home)
    return merged


def _backend_device(home: torch.device) -> torch.device:
    """Where a collective of the default group takes its tensors."""
    backend = dist.get_backend()
    if backend == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu") if backend == "gloo" else home


def _gather_uneven(tensor: torch.Tensor) -> torch.Tensor:
    """Every rank's `tensor` (lengths may differ along the first dimension), joined in rank order."""
    world = dist.get_world_size()
    length = torch.tensor([tensor.shape[0]], device=tensor.device)
    lengths = [torch.zeros_like(length) for _ in range(world)]
    dist.all_gather(lengths, length)
    lengths = [int(n) for n in lengths]                    # the one read of a sync, at compute time
    padded = tensor.new_zeros((max(lengths), *tensor.shape[1:]))
    padded[: tensor.shape[0]] = tensor
    parts = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(parts, padded)
    return torch.cat([part[:n] for part, n in zip(parts, lengths)])


class PerBatchMean(Metric):
    """A plain function (outputs, targets) -> number, averaged over batches weighted by their examples.

    The trainer's rule for a metric given as a function, kept as it was. It is right only when the function
    is itself a mean over the batch's examples (MAE, accuracy, a mean loss): then the weighted mean of batch
    means is the mean over every example. F1, precision, recall or AUROC do not decompose so, and their
    weighted per-batch mean is not their value on the whole set; give a metric object for those.
    """

    def __init__(self, function: Callable[[Any, Any], Any]):
        super().__init__()
        self.function = function
        self.name = getattr(function, "__name__", type(function).__name__)
        self.sum_state("total", (), torch.float64)       # sum over batches of (batch value x examples)
        self.sum_state("examples", (), torch.float64)

    def update(self, outputs: Any, targets: Any, examples: int | None = None) -> None:
        """Add the batch's value weighted by its `examples` (by default the length of the targets' first tensor)."""
        count = examples if examples is not None else examples_in(targets)
        value = self.function(outputs, targets)
        if not isinstance(value, torch.Tensor):            # a host number: the function has read it already
            value = torch.as_tensor(value)                 # (a float becomes float32, as the trainer always did)
        self._follow(value.device)
        self._sums["total"].add_(value.double() * count)
        self._sums["examples"].add_(count)
        self._fresh = False

    def value(self, state: dict[str, torch.Tensor]) -> torch.Tensor:
        return state["total"] / state["examples"]

    def __repr__(self) -> str:
        return f"PerBatchMean({self.name})"


def examples_in(targets: Any) -> int:
    """How many examples a batch's targets hold: the first dimension of their first tensor."""
    leaves = [leaf for leaf in tree_flatten(targets)[0] if isinstance(leaf, torch.Tensor) and leaf.dim() > 0]
    if not leaves:
        raise MetricError("cannot tell how many examples a batch holds: its targets hold no tensor with a batch "
                          "dimension; pass examples= to update()")
    return leaves[0].shape[0]


# --- Task(metric=...): what the trainer validates with ----------------------------------------------------

def as_metric(metric: Any) -> AccumulatingMetric | None:
    """`Task.metric` as an object the trainer feeds: a metric object as given; a class or a function of no
    arguments called for a fresh one; a function (outputs, targets) -> number wrapped in PerBatchMean.
    MetricError saying what is missing otherwise."""
    if metric is None:
        return None
    if not isinstance(metric, type) and any(hasattr(metric, name) for name in PROTOCOL):
        _require_protocol(metric, f"the metric object {_short(metric)}")
        return metric
    if isinstance(metric, type) or (callable(metric) and _takes_no_arguments(metric)):
        try:
            made = metric()
        except Exception as exc:  # noqa: BLE001 - the learner's factory: say what it raised, in one line
            raise MetricError(f"{_short(metric)}() could not make a metric ({type(exc).__name__}: {exc}); give a "
                              "metric object, such as MulticlassF1(num_classes=3), or a function returning one") \
                from None
        _require_protocol(made, f"{_short(metric)}() returned {_short(made)}, which")
        return made
    if callable(metric):
        return PerBatchMean(metric)
    raise MetricError(f"metric must be a metric object with update(outputs, targets), compute() and reset(), its "
                      f"class, or a function (outputs, targets) -> number; got {_short(metric)}")


def _require_protocol(metric: Any, what: str) -> None:
    missing = [name for name in PROTOCOL if not callable(getattr(metric, name, None))]
    if missing:
        raise MetricError(f"{what} has no {' and no '.join(f'{name}()' for name in missing)}: a metric object needs "
                          "update(outputs, targets), compute() and reset()")


def _takes_no_arguments(function: Callable) -> bool:
    """A factory: a callable that needs no argument (a per-batch metric needs two)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):                      # a builtin without a signature: a per-batch function
        return False
    return not any(p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                   for p in parameters)


def _short(value: Any) -> str:
    text = value.__name__ if isinstance(value, type) or inspect.isfunction(value) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def feed(metric: AccumulatingMetric, outputs: Any, targets: Any, examples: int) -> None:
    """One validation batch into `metric` (a PerBatchMean is told the batch's number of examples)."""
    if isinstance(metric, PerBatchMean):
        metric.update(outputs, targets, examples=examples)
    else:
        metric.update(outputs, targets)


def computed_here(metric: AccumulatingMetric) -> Any:
    """compute() over this rank's batches: every rank of fit() validates the whole validation set, so merging
    ranks would only repeat it (a foreign object that merges anyway multiplies every count by the number of ranks,
    which leaves ratios such as F1 as they are)."""
    return metric.compute(sync=False) if isinstance(metric, Metric) else metric.compute()


def one_number(value: Any, who: str) -> float:
    """`value` as a float; MetricError when it is not one number (a dict of metrics, a vector)."""
    try:
        if isinstance(value, (str, bytes, bool, dict, list, tuple)):
            raise TypeError
        return float(value)
    except (TypeError, ValueError, RuntimeError):
        got = f"a tensor of shape {tuple(value.shape)}" if isinstance(value, torch.Tensor) else _short(value)
        raise MetricError(f"{who} must give one number, got {got}") from None


def check_metric(metric: AccumulatingMetric, outputs: Any, targets: Any) -> None:
    """The trainer's check on the first validation batch, before training: the metric measures it and computes one
    number (it is reset after). A function given as the metric must return one number for the batch. On a GPU, a
    copy of the metric measures CPU copies of the batch first, as the loss does: a metric that indexes by target
    would turn a target out of range into a device-side assert there, which ends the process's CUDA context
    without saying why (the course's metrics count such targets instead, and compute() names them)."""
    if isinstance(metric, PerBatchMean):
        one_number(metric.function(outputs, targets), f"the metric function {metric.name}(outputs, targets)")
        return
    if any(isinstance(t, torch.Tensor) and t.device.type != "cpu" for t in tree_flatten((outputs, targets))[0]):
        copy_ = copy.deepcopy(metric)
        if isinstance(copy_, nn.Module):
            copy_.cpu()
        _measure(copy_, tree_map(_cpu_copy, outputs), tree_map(_cpu_copy, targets))
    _measure(metric, outputs, targets)


def _measure(metric: Any, outputs: Any, targets: Any) -> None:
    metric.reset()
    try:
        metric.update(outputs, targets)
        one_number(computed_here(metric), f"{_short(metric)}.compute()")
    finally:
        metric.reset()


def _cpu_copy(value: Any) -> Any:
    if not isinstance(value, torch.Tensor):
        return value
    return (value.detach().float() if value.is_floating_point() else value.detach()).cpu()
