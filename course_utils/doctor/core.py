"""LoopDoctor (chapters 5, 9): watch a learner's own, unchanged training loop and name its silent bugs.

It only observes, through hooks torch provides and a few wrappers that call the original and change
nothing: a forward hook on the model (train/eval mode, grad mode, which split the batch came from), a
hook on each forward's output (was it backwarded?), optimizer step pre/post hooks, and wrappers around
``torch.autograd.backward``, gradient clipping (``clip_grad_norm_``, ``clip_grad_value_``), ``GradScaler.scale``/``step`` and the
given scheduler's ``step``. Everything is removed on exit, also when the loop raises.

Gradient bookkeeping: the doctor counts *contributions*, backward passes summed into ``.grad`` since it
was last empty, and how many of them an update has already *consumed*. An empty ``.grad`` (None or all
zeros) at a backward or a step means someone cleared it. The checks that turn counts into findings
live in ``checks.py``.
"""
from __future__ import annotations

import functools
import weakref
from collections import deque
from dataclasses import dataclass, field

import torch
from torch import nn

from course_utils.doctor import checks
from course_utils.doctor.examples import batch_row_key, example_keys
from course_utils.doctor.report import Report

MODE_LAYERS = (nn.modules.dropout._DropoutNd, nn.modules.batchnorm._BatchNorm, nn.modules.instancenorm._InstanceNorm)
GRAPH_LAG = 3        # a graph alive this many forwards (and 2 backward passes) after its forward is being kept
SOFTMAX_CHECKS = 5   # backward passes whose loss graph is searched for softmax -> cross_entropy


class _Sentinel:
    """Put in an autograd node's metadata: it dies with the node, which a weak reference can tell."""


@dataclass(eq=False)
class _Forward:
    """A grad-enabled forward whose fate is open: backwarded (training) or not (evaluation with a graph)."""

    index: int
    training: bool
    reached: bool = False
    handle: object = None


@dataclass(eq=False)
class Observations:
    """Everything the doctor counted; checks.py reads it to write findings."""

    forwards: int = 0
    training_forwards: int = 0
    evaluation_forwards: int = 0
    backward_passes: int = 0
    updates: int = 0
    scheduler_steps: int = 0
    contributions: int = 0            # backward passes summed in .grad since it was last empty
    consumed: int = 0                 # of those, how many an update already applied
    factors: list[float] = field(default_factory=list)    # loss multiplier of each contribution
    windows: list[tuple[int, int, tuple[float, ...]]] = field(default_factory=list)  # (update, new, factors)
    wipes: list[tuple[str, int, int]] = field(default_factory=list)   # (where, index, contributions lost)
    events: dict[str, list] = field(default_factory=dict)   # finding name -> [first evidence, times seen]
    sched_mark: int | None = None     # forward count when scheduler.step() ran with gradients pending
    clips: int = 0                    # clip_grad_norm_ / clip_grad_value_ calls
    skipped_updates: int = 0          # GradScaler.step calls that skipped the update (inf/NaN gradients)
    leftover: int = 0                 # backward passes no update applied, counted at the loop's end

    def note(self, name: str, evidence: str) -> None:
        """Record one observation of bug `name` (the first evidence is the one reported)."""
        entry = self.events.setdefault(name, [evidence, 0])
        entry[1] += 1


def _first_tensor(output: object) -> torch.Tensor | None:
    if isinstance(output, torch.Tensor):
        return output
    values = output.values() if isinstance(output, dict) else output if isinstance(output, (tuple, list)) else ()
    return next((v for v in values if isinstance(v, torch.Tensor)), None)


def _check_arguments(model, optimizer, scheduler) -> None:
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise ValueError(f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}")
    if scheduler is not None and not callable(getattr(scheduler, "step", None)):
        raise ValueError(f"scheduler must be None or have a step() method, got {type(scheduler).__name__}")


class LoopDoctor:
    """``with LoopDoctor(model, optimizer, ...) as doctor: <your loop>`` then ``print(doctor.report())`` (ch. 5, 9)."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, scheduler: object | None = None,
                 train_data: object | None = None, val_data: object | None = None):
        _check_arguments(model, optimizer, scheduler)
        self.model, self.optimizer, self.scheduler = model, optimizer, scheduler
        self.train_data, self.val_data = train_data, val_data
        self.batches_per_epoch = len(train_data) if isinstance(train_data, torch.utils.data.DataLoader) else None
        train_keys = example_keys(train_data) if train_data is not None else []
        val_keys = example_keys(val_data) if val_data is not None else []
        train_set = set(train_keys)
        self.leaked = sum(key in train_set for key in val_keys)
        self.val_size = len(val_keys)
        self._val_only = {key for key in val_keys if key not in train_set}
        self.obs = Observations()
        self._mode_layers = [m for m in model.modules() if isinstance(m, MODE_LAYERS)]
        self._undo: list = []
        self._pending: list[_Forward] = []
        self._graphs: deque = deque()
        self._scaled: dict[int, tuple[weakref.ref, float]] = {}
        self._frozen: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._active = self._closed = False

    # --- install / remove ------------------------------------------------------------------------

    def __enter__(self) -> LoopDoctor:
        if self._active or self._closed:
            raise RuntimeError("a LoopDoctor watches one loop: create a new one for the next")
        self._active = True
        try:
            self._install()
        except BaseException:
            self._remove()
            raise
        return self

    def __exit__(self, *exc_info) -> bool:
        try:
            if exc_info[0] is None:
                self._resolve(final=True)
        finally:
            self._remove()
            self._active, self._closed = False, True
        return False

    def _patch(self, owner: object, name: str, wrapper) -> None:
        had_own = name in vars(owner) if not isinstance(owner, type) else True
        original = getattr(owner, name) if isinstance(owner, type) else vars(owner).get(name)
        setattr(owner, name, wrapper)
        self._undo.append(lambda: setattr(owner, name, original) if had_own else delattr(owner, name))

    def _install(self) -> None:
        handle = self.model.register_forward_hook(self._on_forward)
        self._undo.append(handle.remove)
        for hook, register in [(self._before_step, self.optimizer.register_step_pre_hook),
                               (self._after_step, self.optimizer.register_step_post_hook)]:
            self._undo.append(register(hook).remove)
        backward = torch.autograd.backward
        self._patch(torch.autograd, "backward", functools.wraps(backward)(
            lambda tensors, *a, **k: self._backward(backward, tensors, *a, **k)))
        # clip_grad_norm_ (however it was imported) calls the module-level _clip_grads_with_norm_
        clip_grad = torch.nn.utils.clip_grad
        for label, owners in [("clip_grad_norm_", [(clip_grad, "_clip_grads_with_norm_"),
                                                   (torch.nn.utils, "clip_grads_with_norm_")]),
                              ("clip_grad_value_", [(clip_grad, "clip_grad_value_"),
                                                    (torch.nn.utils, "clip_grad_value_")])]:
            original = getattr(*owners[0])
            wrapper = functools.wraps(original)(functools.partial(self._clip, original, label))
            for owner, name in owners:
                self._patch(owner, name, wrapper)
        scale, scaler_step = torch.amp.GradScaler.scale, torch.amp.GradScaler.step
        self._patch(torch.amp.GradScaler, "scale", functools.wraps(scale)(
            lambda scaler, outputs: self._scale(scale, scaler, outputs)))
        self._patch(torch.amp.GradScaler, "step", functools.wraps(scaler_step)(
            lambda scaler, optimizer, *a, **k: self._scaler_step(scaler_step, scaler, optimizer, *a, **k)))
        if self.scheduler is not None:
            step = self.scheduler.step
            self._patch(self.scheduler, "step", functools.wraps(step)(
                lambda *a, **k: self._scheduler_step(step, *a, **k)))

    def _remove(self) -> None:
        while self._undo:
            self._undo.pop()()
        for record in self._pending:
            if record.handle is not None:
                record.handle.remove()
        self._pending.clear()

    # --- what the gradients hold -----------------------------------------------------------------

    def _optimizer_params(self) -> list[torch.Tensor]:
        return [p for group in self.optimizer.param_groups for p in group["params"]]

    def _grads_empty(self) -> bool:
        """Is every trainable optimizer parameter's .grad None or all zeros (cleared)?"""
        return all(p.grad is None or not bool(p.grad.any()) for p in self._optimizer_params() if p.requires_grad)

    def _settle(self, where: str, index: int) -> None:
        """If .grad was cleared since we last looked, forget its contributions (noting any never applied)."""
        obs = self.obs
        if obs.contributions and self._grads_empty():
            if obs.contributions > obs.consumed:
                obs.wipes.append((where, index, obs.contributions - obs.consumed))
            obs.contributions = obs.consumed = 0
            obs.factors.clear()

    # --- observers -------------------------------------------------------------------------------

    def _mode_training(self) -> bool:
        """Train mode as it matters: of the Dropout/BatchNorm layers if there are any, else of the model."""
        layers = self._mode_layers
        return any(m.training for m in layers) if layers else self.model.training

    def _on_forward(self, module: nn.Module, inputs: tuple, output: object) -> None:
        obs = self.obs
        obs.forwards += 1
        training = self._mode_training()
        out = _first_tensor(output)
        if not torch.is_grad_enabled() or out is None or not out.requires_grad:
            obs.evaluation_forwards += 1
            if training:
                checks.eval_in_train_mode(obs, obs.forwards, is_val=False)
            return
        self._watch_graph(out)
        if self._val_only and batch_row_key(inputs) in self._val_only:   # CPU inputs only: no device sync
            obs.evaluation_forwards += 1
            checks.evaluation_with_graph(obs, obs.forwards, training, is_val=True)
            return
        record = _Forward(obs.forwards, training)
        record.handle = out.register_hook(functools.partial(self._reached, record))
        self._pending.append(record)

    @staticmethod
    def _reached(record: _Forward, grad: torch.Tensor) -> None:
        record.reached = True

    def _watch_graph(self, out: torch.Tensor) -> None:
        """Tag the output's autograd node; a tag alive GRAPH_LAG forwards and 2 backward passes later is kept."""
        obs, graphs = self.obs, self._graphs
        while graphs and obs.forwards - graphs[0][0] >= GRAPH_LAG and obs.backward_passes - graphs[0][1] >= 2:
            index, _, alive = graphs.popleft()
            if alive() is not None:
                checks.graph_kept(obs, index, obs.forwards)
        sentinel = _Sentinel()
        out.grad_fn.metadata["loop_doctor"] = sentinel
        graphs.append((obs.forwards, obs.backward_passes, weakref.ref(sentinel)))

    def _resolve(self, final: bool = False) -> None:
        """Decide the open forwards: backwarded ones trained; older (or, at the end, all) others evaluated."""
        last = max((r.index for r in self._pending if r.reached), default=None)
        still_open = []
        for record in self._pending:
            if record.reached:
                self.obs.training_forwards += 1
                if not record.training:
                    checks.trained_in_eval_mode(self.obs, record.index)
            elif final or (last is not None and record.index < last):
                self.obs.evaluation_forwards += 1
                checks.evaluation_with_graph(self.obs, record.index, record.training, is_val=False)
            else:
                still_open.append(record)
                continue
            record.handle.remove()
        self._pending = still_open
        if final:
            checks.at_exit(self)

    def _backward(self, original, tensors, *args, **kwargs):
        root = tensors if isinstance(tensors, torch.Tensor) else next(iter(tensors), None)
        if isinstance(root, torch.Tensor) and root.requires_grad:
            obs = self.obs
            obs.backward_passes += 1
            self._settle("backward", obs.backward_passes)
            obs.contributions += 1
            obs.factors.append(checks.loss_factor(root, self._scaled))
            if obs.backward_passes <= SOFTMAX_CHECKS and "softmax_before_cross_entropy" not in obs.events:
                checks.softmax_in_loss(obs, root)
            result = original(tensors, *args, **kwargs)
            self._resolve()
            return result
        return original(tensors, *args, **kwargs)

    def _before_step(self, optimizer, args, kwargs) -> None:
        obs = self.obs
        obs.updates += 1
        self._settle("step", obs.updates)
        checks.update_window(obs)
        if obs.sched_mark is not None and obs.sched_mark == obs.forwards:
            checks.scheduler_first(obs, obs.updates)
        obs.sched_mark = None
        if obs.updates <= 2:
            checks.params_outside_optimizer(obs, self.model, self._optimizer_params(), obs.updates)
        frozen = [p for p in self._optimizer_params() if not p.requires_grad]
        self._frozen = [(p, p.detach().clone()) for p in frozen]

    def _after_step(self, optimizer, args, kwargs) -> None:
        if self._frozen:
            checks.frozen_moved(self.obs, self._frozen, self.obs.updates)
            self._frozen = []

    def _clip(self, original, name: str, parameters, *args, **kwargs):
        checks.clip_timing(self.obs, self._grads_empty(), name)
        return original(parameters, *args, **kwargs)

    def _scale(self, original, scaler, outputs):
        result = original(scaler, outputs)
        if isinstance(result, torch.Tensor) and result is not outputs:
            self._scaled = {k: v for k, v in self._scaled.items() if v[0]() is not None}
            self._scaled[id(result)] = (weakref.ref(result), float(scaler.get_scale()))
        return result

    def _scaler_step(self, original, scaler, optimizer, *args, **kwargs):
        updates = self.obs.updates
        result = original(scaler, optimizer, *args, **kwargs)
        if optimizer is self.optimizer and self.obs.updates == updates:   # inf/NaN found: the scaler skipped it
            self.obs.skipped_updates += 1
            self.obs.consumed = self.obs.contributions                    # discarded on purpose, not lost
        return result

    def _scheduler_step(self, original, *args, **kwargs):
        obs = self.obs
        obs.scheduler_steps += 1
        if obs.updates == 0 and obs.backward_passes == 0:
            checks.scheduler_before_any_update(obs, obs.scheduler_steps)
        elif obs.contributions > obs.consumed:
            obs.sched_mark = obs.forwards
        return original(*args, **kwargs)

    # --- the verdict -----------------------------------------------------------------------------

    def report(self) -> Report:
        """The findings so far (complete once the with-block has ended), with what was counted."""
        obs, notes = self.obs, []
        if obs.backward_passes and not obs.forwards:
            notes.append("no forward pass of the model was seen: call model(x), not model.forward(x), or the "
                         "train/eval and no_grad checks cannot run")
        if obs.skipped_updates:
            notes.append(f"GradScaler skipped {obs.skipped_updates} updates with inf/NaN gradients, as it should; "
                         "their gradients were discarded on purpose and are not counted as lost")
        return Report(checks.findings(self), obs.training_forwards, obs.evaluation_forwards, obs.backward_passes,
                      obs.updates, None if self.scheduler is None else obs.scheduler_steps, tuple(notes))
