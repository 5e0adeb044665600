"""Exercise 5.3 (chapter 5): `snapshot(model)`, a copy of the state dict that later training leaves alone.

The checker trains real models (BatchNorm, Dropout, SGD with momentum, a float64 layer, a buffer that is not
saved), takes the learner's snapshot between steps, trains on, and compares every entry with what the model
held at the time of the call: bit for bit, dtype and device included. It also loads the snapshot back, takes a
second snapshot (the first must not change), and checks that the call left the model's mode, weights and the
grad mode as they were.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping

import torch
from torch import nn

from course_utils.exercises.core import Attempt, Exercise
from course_utils.exercises.words import Fail, number, show


def reference_snapshot(model: nn.Module) -> dict[str, torch.Tensor]:
    """The course's solution: every entry of the state dict, copied into its own memory."""
    return copy.deepcopy(model.state_dict())


class _Masked(nn.Module):
    """A layer with a saved buffer (a scale, float64) and a buffer that state_dict leaves out (persistent=False)."""

    def __init__(self, width: int):
        super().__init__()
        self.linear = nn.Linear(width, width).double()
        self.register_buffer("scale", torch.ones(width, dtype=torch.float64))
        self.register_buffer("mask", torch.ones(width), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.linear(x.double()) * self.scale).float() * self.mask


def _model(kind: str, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    if kind == "bn":
        return nn.Sequential(nn.Linear(3, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.2), nn.Linear(8, 2))
    if kind == "plain":
        return nn.Linear(3, 2)
    return nn.Sequential(nn.Linear(3, 4), _Masked(4), nn.BatchNorm1d(4), nn.Linear(4, 2))


def _train(model: nn.Module, optimizer: torch.optim.Optimizer, steps: int, g: torch.Generator) -> None:
    """A few real steps in train mode; the scale buffer moves too, as a running statistic would."""
    was = model.training
    model.train()
    for _ in range(steps):
        x, y = torch.randn(16, 3, generator=g), torch.randint(0, 2, (16,), generator=g)
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        for module in model.modules():
            if isinstance(module, _Masked):
                module.scale.mul_(1.01)
    model.train(was)


def _truth(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.device == b.device and torch.equal(a, b)


def _need_mapping(got: object, what: str) -> Mapping:
    if isinstance(got, nn.Module):
        raise Fail(f"{what} a model (an nn.Module), not a state dict.",
                   "Return a dict of tensors, the kind model.state_dict() returns, which load_state_dict accepts.")
    if not isinstance(got, Mapping):
        raise Fail(f"{what} {show(got)}, not a dict of tensors.",
                   "Return a dict from names to tensors, like model.state_dict().")
    return got


def _check_entries(snap: Mapping, truth: dict[str, torch.Tensor], model: nn.Module) -> None:
    """The snapshot holds exactly the state dict's names, each a detached tensor equal to the truth."""
    missing = [k for k in truth if k not in snap]
    if missing:
        buffers = {name for name, _ in model.named_buffers()}
        kinds = "buffers" if all(k in buffers for k in missing) else "entries"
        raise Fail(f"your snapshot lacks {len(missing)} {kinds} of the state dict: "
                   f"{', '.join(f'`{k}`' for k in missing[:4])}{' ...' if len(missing) > 4 else ''}.",
                   "A module's state is its parameters *and* its buffers (BatchNorm's running statistics): "
                   "start from model.state_dict().")
    extra = [k for k in snap if k not in truth]
    if extra:
        raise Fail(f"your snapshot has names the state dict does not: {', '.join(f'`{k}`' for k in extra[:4])}; "
                   "load_state_dict refuses unexpected keys.",
                   "Buffers registered with persistent=False are not part of the state dict: copy "
                   "model.state_dict(), not named_parameters() and named_buffers().")
    for name, want in truth.items():
        got = snap[name]
        if not isinstance(got, torch.Tensor):
            raise Fail(f"your snapshot's `{name}` is {show(got)}, not a tensor.", "Keep each entry a tensor.")
        owner = _owner(got, name, truth)
        shapes = f"shape {tuple(got.shape)}; the model's `{name}` has shape {tuple(want.shape)}"
        if owner:
            raise Fail(f"your snapshot's `{name}` holds the model's `{owner}`"
                       + (f" ({shapes})." if got.shape != want.shape else "."),
                       "Take each name and its tensor together, from model.state_dict().items(): parameters() and "
                       "buffers() come in another order than the state dict's names.")
        if got.shape != want.shape:
            raise Fail(f"your snapshot's `{name}` has {shapes}.",
                       "Copy each tensor of model.state_dict() under its own name, as it is.")
        if got.dtype != want.dtype or got.device != want.device:
            raise Fail(f"your snapshot's `{name}` is {got.dtype} on {got.device}; the model's is {want.dtype} on "
                       f"{want.device}.",
                       "Copy each tensor as it is: no change of dtype or device (a float copy of an int64 "
                       "counter, a half copy of float32 weights, is not the same state).")
        if got.grad_fn is not None:
            raise Fail(f"your snapshot's `{name}` is attached to the autograd graph (grad_fn "
                       f"{type(got.grad_fn).__name__}).", "Copy detached tensors: state_dict() already gives them.")
        if not torch.equal(got, want):
            gap = (got.double() - want.double()).abs().max().item()
            raise Fail(f"your snapshot's `{name}` differs from the model's at the time of the call (by up to "
                       f"{number(gap)}).", "Copy the values exactly as they are.")


def _owner(got: torch.Tensor, name: str, truth: dict[str, torch.Tensor]) -> str:
    """The other state-dict entry whose value `got` is, where it is not `name`'s own ('' if none or its own)."""
    if _same(got.detach(), truth[name]):
        return ""
    return next((k for k, v in truth.items() if k != name and _same(got.detach(), v)), "")


def _shares(snap_value: torch.Tensor, live: torch.Tensor) -> bool:
    try:
        return snap_value.untyped_storage().data_ptr() == live.untyped_storage().data_ptr()
    except Exception:  # noqa: BLE001 - a tensor without storage (meta): not shared
        return False


def _case(attempt: Attempt, kind: str, seed: int, before: int, after: int, mode: str, grad_mode: bool) -> None:
    model = _model(kind, seed)
    optimizer = torch.optim.SGD([{"params": [p for n, p in model.named_parameters() if "bias" not in n]},
                                 {"params": [p for n, p in model.named_parameters() if "bias" in n], "lr": 0.05}],
                                lr=0.1, momentum=0.9)
    g = torch.Generator().manual_seed(seed)
    _train(model, optimizer, before, g)
    model.train(mode == "train")
    truth = _truth(model)
    what = {"bn": "Linear-BatchNorm-ReLU-Dropout-Linear", "plain": "one Linear layer (no buffers)",
            "masked": "a model with a float64 layer, a saved float64 buffer and a buffer not saved "
                      "(persistent=False)"}[kind]
    case = (f"{what}, after {before} step{'s' * (before != 1)} of SGD with momentum, in {mode} mode"
            f"{'' if grad_mode else ', called under torch.no_grad()'}; then {after} more steps")
    with torch.set_grad_enabled(grad_mode):
        got = attempt.call(case, model)          # (Attempt.run fails a function that leaves the grad mode changed)
    snap = _need_mapping(got, "your function returned")
    if model.training != (mode == "train"):
        raise Fail(f"the model was in {mode} mode and your function left it in "
                   f"{'train' if model.training else 'eval'} mode.",
                   "Taking a snapshot reads the model; it should not switch it (no model.eval() or model.train()).")
    now = model.state_dict()
    changed = [k for k in truth if not _same(now[k], truth[k])]
    if changed:
        raise Fail(f"calling your function changed the model's `{changed[0]}`.", "Only read the model's state.")
    _check_entries(snap, truth, model)
    _train(model, optimizer, after, g)
    live = model.state_dict()
    for name, want in truth.items():
        if not torch.equal(snap[name], want):
            shared = _shares(snap[name], live[name])
            raise Fail(f"after {after} more training steps your snapshot's `{name}` had changed"
                       + (": it is the model's own tensor (the same memory), so it follows training."
                          if shared else "."),
                       "state_dict(), a dict(...) of it and copy.copy(model) hold the model's tensors themselves, "
                       "and .detach() (or .cpu() on a CPU model) returns the same memory: copy each tensor (.clone()) "
                       "or copy.deepcopy the dict."
                       if shared else "Keep the copy away from anything training writes to.")
    second = _need_mapping(attempt.call(case + "; then a second snapshot", model), "your second call returned")
    for name, want in truth.items():
        if not torch.equal(snap[name], want):
            raise Fail(f"taking a second snapshot changed the first one's `{name}`: both share one store.",
                       "Return a new dict with new tensors on every call.")
    _check_entries(second, _truth(model), model)
    model.load_state_dict(snap)
    back = model.state_dict()
    wrong = [k for k in truth if not _same(back[k], truth[k])]
    if wrong:
        raise Fail(f"model.load_state_dict(your snapshot) did not bring back `{wrong[0]}` as it was.",
                   "The snapshot must hold the values of the moment of the call.")


def check_snapshot(attempt: Attempt) -> str:
    """The oracle: a copy of the state dict taken by the checker itself at the moment of the call."""
    _case(attempt, "bn", 0, 3, 4, "train", True)
    _case(attempt, "bn", 1, 2, 3, "eval", False)
    _case(attempt, "plain", 2, 1, 2, "train", True)
    _case(attempt, "masked", 3, 2, 3, "train", True)
    _case(attempt, "bn", 4, 0, 2, "train", True)
    return ("5 models (BatchNorm and Dropout, a plain Linear, a float64 layer with a saved buffer and one not saved), "
            "snapshots in train and eval mode and under no_grad, then more SGD-with-momentum steps: every parameter "
            "and buffer stayed as it was at the call, dtype included; a second snapshot left the first alone; "
            "load_state_dict brought the weights back; the model's mode and weights were untouched.")


def exercises() -> list[Exercise]:
    return [
        Exercise("snapshot", "05", "a true copy of the best weights", "snapshot(model) -> dict of tensors",
                 check_snapshot, arity=(1,), oracle="the state dict copied by the checker at the moment of the call"),
    ]
