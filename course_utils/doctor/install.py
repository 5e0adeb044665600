"""Where the loop doctor listens (chapters 5, 9): hooks torch offers, and wrappers that call the original.

Every wrapper calls the original with the same arguments and returns its result; each is undone on
exit (``Undo``). What is wrapped, and why that way:

- ``torch.autograd.backward``: ``loss.backward()``, ``scaler.scale(loss).backward()`` and accelerate's
  ``backward`` all end there;
- the functions *inside* ``clip_grad_norm_``, ``clip_grad_value_`` and ``clip_grads_with_norm_`` (each is a
  ``no_grad`` wrapper around them): a name imported before the doctor started still reaches the wrapper;
- ``GradScaler.scale``/``unscale_``/``step``, the ``step`` of every ``LRScheduler`` class (so schedulers built
  inside a library call are seen too), ``Optimizer.__init__`` (optimizers built inside a library call),
  ``_BaseDataLoaderIter.__next__`` (each batch and each epoch's end, without touching the dataset),
  ``Tensor.item`` (and a loss module's call, to tell a batch's mean loss from a sum), the one-call means of a
  list (``np.mean``/``average``/``nanmean``, ``statistics.mean``/``fmean``,
  ``torch.tensor``/``as_tensor``/``stack`` then ``.mean()`` or ``torch.mean``; of readings, or of one loader's
  per-batch 0-d tensors) and a sum kept in a tensor (``Tensor.__iadd__``, ``__radd__``, ``cpu``, ``detach``,
  ``__truediv__``; see ``readings.py``);
- ``zero_grad`` of optimizers and modules, and the in-place edits a hand-written clip uses (``clamp_``, ``clip_``,
  ``mul_``, ``div_``, ...): was a .grad changed after the update that used it, before anything refilled it?
- torch's global optimizer step hooks, and forward hooks on the watched models (left out of a pickle or deep
  copy of the model, so ``torch.save(model)`` and ``copy.deepcopy(model)`` work and carry nothing of the doctor).
"""
from __future__ import annotations

import functools
import statistics
from collections.abc import Callable

import numpy
import torch
from torch.nn.utils import clip_grad
from torch.optim import lr_scheduler
from torch.optim import optimizer as optim_module
from torch.utils.data import dataloader


class Undo:
    """A stack of undo actions, run newest first."""

    def __init__(self):
        self._actions: list[Callable[[], None]] = []

    def push(self, action: Callable[[], None]) -> None:
        self._actions.append(action)

    def attribute(self, owner: object, name: str, value: object) -> None:
        """Set owner.name = value, restoring the original (or deleting an instance attribute it lacked)."""
        had_own = name in vars(owner)
        original = vars(owner).get(name)
        setattr(owner, name, value)
        self.push(lambda: setattr(owner, name, original) if had_own else delattr(owner, name))

    def cell(self, function: Callable, value: Callable) -> Callable:
        """Swap the function a closure wraps (its one free variable); returns the original."""
        (cell,) = function.__closure__
        original = cell.cell_contents
        cell.cell_contents = value
        self.push(lambda: setattr(cell, "cell_contents", original))
        return original

    def run(self) -> None:
        while self._actions:
            self._actions.pop()()


CLIPPERS = {"clip_grad_norm_": clip_grad.clip_grad_norm_, "clip_grad_value_": clip_grad.clip_grad_value_,
            "clip_grads_with_norm_": clip_grad._clip_grads_with_norm_}


def _scheduler_classes() -> list[type]:
    """LRScheduler and every subclass (torch's and any loaded so far) that defines its own step()."""
    found, todo = [], [lr_scheduler.LRScheduler]
    while todo:
        cls = todo.pop()
        if "step" in vars(cls):
            found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


GRAD_EDITS = ("clamp_", "clamp_min_", "clamp_max_", "clip_", "mul_", "div_")   # a hand-written clip or rescale

HOOK_DICTS = ("_forward_hooks", "_forward_hooks_with_kwargs", "_forward_hooks_always_called", "_forward_pre_hooks")


def _left_out_of_copies(model: torch.nn.Module, hooks: set[int], undo: Undo) -> None:
    """A pickle or deep copy of a watched model (torch.save(model), copy.deepcopy(model)) is made without the
    doctor's hooks, as if the doctor were not there: the module's own __getstate__, the `hooks` ids left out."""
    def getstate() -> dict:
        state = type(model).__getstate__(model)
        state.pop("__getstate__", None)
        for name in HOOK_DICTS:
            if isinstance(state.get(name), dict) and hooks & set(state[name]):
                state[name] = type(state[name])((k, v) for k, v in state[name].items() if k not in hooks)
        return state
    undo.attribute(model, "__getstate__", getstate)


def _direct_forward_calls(doctor, index: int, model: torch.nn.Module, undo: Undo) -> None:
    """`self.forward(x)` called from another method of the model (SAC's `policy.sample(state)`, an agent's
    `get_action`) runs no hooks. While watched, the model's class gets a forward that passes every call through
    and reports the calls made to this model outside its own `model(x)` as its forwards. Other instances of the
    class (an EMA copy, a target network), pickles and copies are untouched: the class is restored at the end."""
    cls = type(model)
    original = cls.forward

    @functools.wraps(original)
    def forward(self, *args, **kwargs):
        if self is not model or doctor._depth_in.get(index, 0):
            return original(self, *args, **kwargs)
        doctor._inside(index, 1)
        try:
            output = original(self, *args, **kwargs)
        finally:
            doctor._inside(index, -1)
        doctor._on_forward(index, model, args, kwargs, output)
        return output
    undo.attribute(cls, "forward", forward)


def _watch_model(doctor, index: int, model: torch.nn.Module, undo: Undo) -> None:
    """The model's forwards; and its direct children called on their own outside its forward (a frozen
    `model.encoder(x)` under no_grad, a DDP wrapper's `.module`), which `_on_child_forward` judges as evaluations."""
    handles = [model.register_forward_hook(functools.partial(doctor._on_forward, index), with_kwargs=True),
               model.register_forward_pre_hook(functools.partial(doctor._inside, index, 1)),
               model.register_forward_hook(functools.partial(doctor._inside, index, -1), always_call=True)]
    for handle in handles:
        undo.push(handle.remove)
    _left_out_of_copies(model, {h.id for h in handles}, undo)
    _direct_forward_calls(doctor, index, model, undo)
    for child in model.children():
        if any(child is m for m in doctor.models):
            continue
        handle = child.register_forward_hook(functools.partial(doctor._on_child_forward, index), with_kwargs=True)
        undo.push(handle.remove)
        _left_out_of_copies(child, {handle.id}, undo)


def install(doctor, undo: Undo) -> None:
    """Install every observer of `doctor` (a LoopDoctor); `undo.run()` removes them all."""
    for index, model in enumerate(doctor.models):
        _watch_model(doctor, index, model, undo)
    for register, hook in [(optim_module.register_optimizer_step_pre_hook, doctor._before_step),
                           (optim_module.register_optimizer_step_post_hook, doctor._after_step)]:
        undo.push(register(hook).remove)

    backward = torch.autograd.backward
    undo.attribute(torch.autograd, "backward", functools.wraps(backward)(
        lambda tensors, *a, **k: doctor._backward(backward, tensors, *a, **k)))

    for name, public in CLIPPERS.items():
        inner = public.__closure__[0].cell_contents
        undo.cell(public, functools.wraps(inner)(functools.partial(doctor._clip, inner, name)))

    scaler = torch.amp.GradScaler
    scale, unscale, scaler_step = scaler.scale, scaler.unscale_, scaler.step
    undo.attribute(scaler, "scale", functools.wraps(scale)(lambda s, outputs: doctor._scale(scale, s, outputs)))
    undo.attribute(scaler, "unscale_", functools.wraps(unscale)(lambda s, opt: doctor._unscale(unscale, s, opt)))
    undo.attribute(scaler, "step", functools.wraps(scaler_step)(
        lambda s, opt, *a, **k: doctor._scaler_step(scaler_step, s, opt, *a, **k)))

    for cls in _scheduler_classes():
        step = vars(cls)["step"]
        undo.attribute(cls, "step", functools.wraps(step)(
            lambda scheduler, *a, _step=step, **k: doctor._scheduler_step(_step, scheduler, *a, **k)))
    for scheduler in doctor.given_schedulers:
        if not isinstance(scheduler, lr_scheduler.LRScheduler):      # a scheduler of your own: patch the object
            step = scheduler.step
            undo.attribute(scheduler, "step", functools.wraps(step)(
                lambda *a, _step=step, _s=scheduler, **k: doctor._scheduler_step(lambda s, *b, **c: _step(*b, **c),
                                                                                  _s, *a, **k)))

    for name in GRAD_EDITS:
        edit = getattr(torch.Tensor, name)
        undo.attribute(torch.Tensor, name, functools.wraps(edit)(
            lambda t, *a, _edit=edit, **k: doctor._grad_edit(_edit, t, *a, **k)))
    for owner in (torch.optim.Optimizer, torch.nn.Module):
        zero_grad = owner.zero_grad
        undo.attribute(owner, "zero_grad", functools.wraps(zero_grad)(
            lambda o, *a, _zero_grad=zero_grad, **k: doctor._zero_grad(_zero_grad, o, *a, **k)))

    init = torch.optim.Optimizer.__init__
    undo.attribute(torch.optim.Optimizer, "__init__", functools.wraps(init)(
        lambda opt, *a, **k: doctor._optimizer_built(init, opt, *a, **k)))

    base = dataloader._BaseDataLoaderIter
    next_ = base.__next__
    undo.attribute(base, "__next__", functools.wraps(next_)(lambda it: doctor._next_batch(next_, it)))

    item = torch.Tensor.item
    undo.attribute(torch.Tensor, "item", functools.wraps(item)(lambda t: doctor._item(item, t)))
    # a loss module's result: is it a batch's mean (reduction="mean")? (readings.py: a sum of means / examples)
    call = torch.nn.Module.__call__
    undo.attribute(torch.nn.modules.loss._Loss, "__call__", functools.wraps(call)(
        lambda loss, *a, **k: doctor._loss_called(call, loss, *a, **k)))

    # a list of readings averaged in one call (readings.mean_of)
    for owner, name in [(numpy, "mean"), (numpy, "average"), (numpy, "nanmean"), (statistics, "mean"),
                        (statistics, "fmean")]:
        original = getattr(owner, name)
        undo.attribute(owner, name, functools.wraps(original)(
            lambda values, *a, _original=original, **k: doctor._mean_taken(_original, values, *a, **k)))
    for owner, name, wrapper in [(torch, "tensor", doctor._tensor_made), (torch, "as_tensor", doctor._tensor_made),
                                 (torch, "stack", doctor._tensor_made),
                                 (torch.Tensor, "mean", doctor._tensor_mean), (torch, "mean", doctor._tensor_mean)]:
        original = getattr(owner, name)
        undo.attribute(owner, name, functools.wraps(original)(
            lambda data, *a, _original=original, _wrapper=wrapper, **k: _wrapper(_original, data, *a, **k)))
    # readings summed in a tensor (readings.py): `total += values`, `.cpu()`, `.detach()`, `total / k`
    iadd, radd, div = torch.Tensor.__iadd__, torch.Tensor.__radd__, torch.Tensor.__truediv__
    undo.attribute(torch.Tensor, "__iadd__", functools.wraps(iadd)(lambda t, o: doctor._tensor_added(iadd, t, o)))
    undo.attribute(torch.Tensor, "__radd__", functools.wraps(radd)(lambda t, o: doctor._tensor_started(radd, t, o)))
    undo.attribute(torch.Tensor, "__truediv__", functools.wraps(div)(lambda t, o: doctor._tensor_divided(div, t, o)))
    for name in ("cpu", "detach"):
        moved = getattr(torch.Tensor, name)
        undo.attribute(torch.Tensor, name, functools.wraps(moved)(
            lambda t, *a, _moved=moved, **k: doctor._tensor_moved(_moved, t, *a, **k)))
