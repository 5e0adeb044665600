"""The instrumented training loop (chapters 3-8), written as chapter 3's operations.

One micro-batch runs a *recipe*: zero_grad -> forward -> compute_loss -> backward -> clip ->
optimizer_step -> scheduler_step. A healthy run uses that order; a bug from ``bugs.BUGS`` is a
declarative variation of one operation (skip it, move it, or run it another way), so the loop
has one place per operation that consults the active bugs and no bugged copies of itself.

``stream(state)`` yields a ``StepEvent`` after every micro-batch and an ``EpochEvent`` after every
epoch's evaluation, each carrying measured telemetry. What a run is made of is ``TrainConfig``
(``train_config.py``); ``build`` and the ``Session`` widgets pull events from live in ``session.py``.
"""
from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn.utils import clip_grads_with_norm_, get_total_norm
from torch.utils.data import DataLoader, Dataset, TensorDataset

from course_utils.engine.arithmetic import batch_sizes, is_update_step, loss_weight
from course_utils.engine.bugs import Plan
from course_utils.engine.data import Splits, batch_loader
from course_utils.engine.memory import GraphMemoryMeter, count_new_nodes
from course_utils.engine.train_config import TrainConfig

# --- the operations of one step (chapter 3) ------------------------------------------------------

def zero_grad(optimizer: torch.optim.Optimizer) -> None:
    """Clear every .grad (chapter 3); set_to_none=True, torch's default since 2.0."""
    optimizer.zero_grad()


def forward(model: nn.Module, inputs: torch.Tensor) -> torch.Tensor:
    """Run the model, building the autograd graph and saving activations (chapter 3)."""
    return model(inputs)


def compute_loss(loss_fn: nn.Module, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The batch's mean loss: a scalar with a grad_fn (chapter 3)."""
    return loss_fn(logits, targets)


def backward(loss: torch.Tensor) -> None:
    """Fill .grad by the chain rule, adding to what is there; frees the saved tensors (chapter 3)."""
    loss.backward()


def global_norm(grads: list[torch.Tensor]) -> torch.Tensor:
    """The norm of all gradients laid end to end: a norm per tensor, then the norm of those norms.

    The same arithmetic as ``torch.nn.utils.get_total_norm``, so the value is bitwise the same; when every
    gradient shares one device and dtype (always, in the course's runs) it skips that function's grouping
    by device and dtype, which costs about 45 µs a step here (issue 9, item 8). Otherwise it calls it.
    """
    if not grads:
        return torch.zeros(())
    device, dtype = grads[0].device, grads[0].dtype
    if all(g.device == device and g.dtype == dtype for g in grads):
        return torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
    return get_total_norm(grads)


def clip(parameters: list[torch.Tensor], max_norm: float | None) -> float:
    """Measure the global gradient norm; if max_norm is set and the norm exceeds it, rescale down to max_norm;
    returns the pre-clip norm (chapters 3, 7)."""
    grads = [p.grad for p in parameters if p.grad is not None]
    norm = global_norm(grads)
    if max_norm is not None:
        clip_grads_with_norm_(parameters, max_norm, norm)
    return norm.item()


def optimizer_step(optimizer: torch.optim.Optimizer) -> None:
    """Apply the update rule to every parameter with a gradient (chapter 3)."""
    optimizer.step()


def scheduler_step(scheduler: torch.optim.lr_scheduler.LRScheduler) -> None:
    """Move the learning rate one unit along its schedule (chapter 3)."""
    scheduler.step()


def schedule_due(cadence: str, variant: str, update: bool, last_batch: bool) -> bool:
    """Is it time for scheduler_step? Per update, or once per epoch (after its last batch) (chapters 3, 5)."""
    if variant == "every_batch":
        return True
    return update if cadence == "update" else last_batch


# --- telemetry -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class StepEvent:
    """Measured after one micro-batch. Counts are totals so far; memory is the step's peak graph bytes."""

    epoch: int         # 1-based
    batch: int         # 1-based index of the micro-batch within its epoch
    step: int          # micro-steps so far (global)
    updates: int       # optimizer.step() calls so far
    lr: float          # the learning rate this micro-step's update used
    loss: float        # the batch's mean loss, before any division for accumulation
    grad_norm: float   # global norm of .grad where the clip operation runs (pre-clip)
    memory: int        # peak bytes during the step, as GraphMemoryMeter.kind says (0 if not measured)
    batch_size: int
    update: bool       # did this micro-step end an accumulation window and update the weights?
    training: bool     # was the model in train mode during forward?
    graph_nodes: int   # autograd nodes the loop's own loss log keeps alive (0 when it logs floats)


@dataclass(frozen=True)
class EpochEvent:
    """Measured at an epoch's end, after evaluation on the validation (and test) set."""

    epoch: int
    steps: int
    updates: int
    train_loss: float        # per-example mean over the epoch, as the loop's own log computed it
    val_loss: float
    val_acc: float
    eval_memory: int         # peak bytes during evaluation: 0 under no_grad on the CPU
    lr: float                # the learning rate for the next epoch's first update
    graph_nodes: int
    test_loss: float | None = None
    test_acc: float | None = None


Event = StepEvent | EpochEvent


class LossLog:
    """The loop's record of batch losses (chapters 3-5): floats, or graph-attached tensors (the logging bug)."""

    def __init__(self, keep_graph: bool = False):
        self.keep_graph = keep_graph
        self.values: list[float | torch.Tensor] = []
        self.sizes: list[int] = []
        self.graph_nodes = 0
        self._seen: set = set()

    def add(self, loss: torch.Tensor, size: int, value: float | None = None) -> None:
        """Record one batch's mean loss: `loss.item()` (or `value`, if already read), or (the bug) the tensor."""
        if self.keep_graph:
            self.values.append(loss)
            self.graph_nodes += count_new_nodes(loss.grad_fn, self._seen)
        else:
            self.values.append(loss.item() if value is None else value)
        self.sizes.append(size)

    def mean(self, per: str = "example") -> float:
        """Mean loss weighted by batch size ("example") or the plain mean of batch means ("batch")."""
        values = [v.item() if torch.is_tensor(v) else v for v in self.values]
        if not values:
            return math.nan
        if per == "batch":
            return sum(values) / len(values)
        return sum(v * n for v, n in zip(values, self.sizes)) / sum(self.sizes)


# --- evaluation (chapter 4) ----------------------------------------------------------------------

def evaluate(model: nn.Module, data: DataLoader | Dataset, loss_fn: nn.Module | None = None, *,
             eval_mode: bool = True, no_grad: bool = True, average: str = "example", keep_graph: bool = False,
             meter: GraphMemoryMeter | None = None) -> tuple[float, float]:
    """Loss and accuracy over `data`, averaged per example (chapter 4); switches off = the chapter-5 bugs.

    Leaves the model in eval mode when eval_mode is on: the training loop switches back.
    """
    loader = (data if isinstance(data, DataLoader) else batch_loader(data, 256) if isinstance(data, TensorDataset)
              else DataLoader(data, batch_size=256))
    loss_fn = loss_fn or nn.CrossEntropyLoss()
    if eval_mode:
        model.eval()
    log, hits, sizes = LossLog(keep_graph), [], []
    with torch.no_grad() if no_grad else contextlib.nullcontext(), meter or contextlib.nullcontext():
        for inputs, targets in loader:
            logits = model(inputs)
            log.add(loss_fn(logits, targets), len(targets))
            hits.append((logits.argmax(dim=1) == targets).sum().item())
            sizes.append(len(targets))
    if average == "batch":
        return log.mean("batch"), sum(h / n for h, n in zip(hits, sizes)) / len(sizes)
    return log.mean("example"), sum(hits) / sum(sizes)


# --- one run -------------------------------------------------------------------------------------

class _PrivateRng:
    """The run's own torch RNG stream (dropout, init), swapped in around each step so streams can interleave."""

    def __init__(self, seed: int):
        self.state = torch.Generator().manual_seed(seed).get_state()

    def __enter__(self) -> None:
        self._outer = torch.get_rng_state()
        torch.set_rng_state(self.state)

    def __exit__(self, *exc_info) -> None:
        self.state = torch.get_rng_state()
        torch.set_rng_state(self._outer)


@dataclass(eq=False)
class RunState:
    """Everything one run is made of, plus its counters (what `Session` exposes to widgets)."""

    config: TrainConfig
    plan: Plan
    splits: Splits
    model: nn.Module
    loss_fn: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    cadence: str
    train_loader: DataLoader
    val_loader: DataLoader
    meter: GraphMemoryMeter | None
    rng: _PrivateRng                 # training's stream: init and the dropout masks of training steps
    params: list[torch.Tensor]
    eval_rng: _PrivateRng | None = None   # evaluation's own stream: validating never shifts training's masks
    epoch: int = 0
    step: int = 0
    updates: int = 0
    log: LossLog = field(default_factory=LossLog)


def micro_step(state: RunState, inputs: torch.Tensor, targets: torch.Tensor, index: int,
               sizes: list[int]) -> StepEvent:
    """One micro-batch through the plan's recipe, the operations of chapter 3 in order (chapters 3, 5, 6)."""
    plan, k = state.plan, state.config.accum_steps
    n_batches = len(sizes)                                # the epoch's batch sizes, in order
    window_start = index % k == 0
    weight = loss_weight(index, sizes, k)                 # this batch's share of its window's examples
    if plan.variant("optimizer_step") == "no_flush":
        update = (index + 1) % k == 0
    else:
        update = is_update_step(index, n_batches, k)
    lr = state.optimizer.param_groups[0]["lr"]
    meter = state.meter                                   # on while autograd saves tensors: forward and loss
    if meter is not None:
        meter.reset_peak()
    try:
        for operation in plan.recipe:
            if operation == "zero_grad":
                if window_start:
                    zero_grad(state.optimizer)
            elif operation == "forward":
                training = state.model.training
                if meter is not None:
                    meter.__enter__()
                logits = forward(state.model, inputs)
            elif operation == "compute_loss":
                loss = compute_loss(state.loss_fn, logits, targets)
                if meter is not None:
                    meter.__exit__(None, None, None)
                objective = loss                          # weighted by its share of the window's examples
                if plan.variant(operation) != "unscaled" and weight != 1:
                    objective = loss * weight
            elif operation == "backward":
                backward(objective)
            elif operation == "clip":                     # measures every micro-step, clips on updates only
                grad_norm = clip(state.params, state.config.clip_norm if update else None)
            elif operation == "optimizer_step":
                if update:
                    optimizer_step(state.optimizer)
                    state.updates += 1
            elif operation == "scheduler_step":
                if schedule_due(state.cadence, plan.variant(operation), update, index == n_batches - 1):
                    scheduler_step(state.scheduler)
    finally:
        if meter is not None:                             # an error mid-forward must not leave the hooks on
            while meter._depth:
                meter.__exit__(None, None, None)
    state.step += 1
    loss_value = loss.item()
    state.log.add(loss, len(targets), loss_value)
    return StepEvent(epoch=state.epoch, batch=index + 1, step=state.step, updates=state.updates, lr=lr,
                     loss=loss_value, grad_norm=grad_norm,
                     memory=state.meter.peak if state.meter is not None else 0,
                     batch_size=len(targets), update=update, training=training,
                     graph_nodes=state.log.graph_nodes)


def train_epoch(state: RunState) -> Iterator[StepEvent]:
    """One pass over the training data, yielding each micro-batch's telemetry (chapters 3, 6)."""
    state.epoch += 1
    if state.plan.variant("train_mode") != "skip":
        state.model.train()                               # switch back after the last evaluation (ch. 4)
    state.log = LossLog(keep_graph=state.plan.variant("log") == "tensor")
    loader = state.train_loader
    batches = loader.batch_sampler or loader.sampler      # a batch_loader's sampler is its BatchSampler
    sizes = batch_sizes(len(batches.sampler), batches.batch_size, batches.drop_last)
    for index, (inputs, targets) in enumerate(loader):
        with state.rng:
            event = micro_step(state, inputs, targets, index, sizes)
        yield event


def evaluate_run(state: RunState, data: DataLoader | Dataset) -> tuple[float, float, int]:
    """The run's evaluation as planned (bugs included): loss, accuracy and peak graph bytes (chapters 4, 5)."""
    plan = state.plan
    if state.meter is not None:
        state.meter.reset_peak()
    with state.eval_rng or state.rng:
        loss, acc = evaluate(state.model, data, state.loss_fn, eval_mode=plan.variant("eval_mode") != "skip",
                             no_grad=plan.variant("no_grad") != "skip", average=plan.variant("average"),
                             keep_graph=plan.variant("log") == "tensor", meter=state.meter)
    return loss, acc, state.meter.peak if state.meter is not None else 0


def end_epoch(state: RunState) -> EpochEvent:
    """Validate (and test, if the run has a test set) at an epoch's end (chapters 4, 6)."""
    val_loss, val_acc, eval_memory = evaluate_run(state, state.val_loader)
    test_loss = test_acc = None
    if len(state.splits.test):
        test_loss, test_acc, _ = evaluate_run(state, state.splits.test)
    return EpochEvent(epoch=state.epoch, steps=state.step, updates=state.updates,
                      train_loss=state.log.mean(), val_loss=val_loss, val_acc=val_acc,
                      eval_memory=eval_memory, lr=state.optimizer.param_groups[0]["lr"],
                      graph_nodes=state.log.graph_nodes, test_loss=test_loss, test_acc=test_acc)


def stream(state: RunState) -> Iterator[Event]:
    """All events of a run: every micro-batch's StepEvent, then the epoch's EpochEvent (chapters 5, 6, 8)."""
    for _ in range(state.config.epochs):
        yield from train_epoch(state)
        yield end_epoch(state)
