"""Inputs as real code passes them, and the state around a call (every chapter's checks; see core.py's list).

- ``OneShot(items)``: an iterable that can be walked once, as ``model.parameters()`` is; ``passes``
  counts the walks, so a check can say "your function went over it twice" instead of "nothing changed".
- ``Watch(model)``: records every forward of a model (its train/eval mode, whether autograd was on,
  the batch it saw), to tell "trained in eval mode" from "measured in train mode" from "built a graph".
- ``modes(model)`` and ``mode_changes``: the train/eval flag of every submodule (``model.training = x``
  flips only the top one, ``model.train(x)`` flips all).
- ``forbidden(places, fail)``: while the learner's function runs, the torch functions a statement rules out
  (F.dropout; autograd's grad and backward) stop the call with ``fail`` instead of running.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch import nn


@contextmanager
def forbidden(places: list[tuple[object, str]], fail: object):
    """Replace each `owner.name` by a function that stops the learner's call with `fail` (a words.Fail), then put the
    originals back: how a check sees *how* an answer was computed where the statement rules out a torch function."""
    from course_utils.exercises.words import Stop

    def refuse(*_args, **_kwargs):
        raise Stop(fail)
    saved = [(owner, name, getattr(owner, name)) for owner, name in places]
    for owner, name, _ in saved:
        setattr(owner, name, refuse)
    try:
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


class OneShot:
    """An iterable that yields its items once (a generator, as `model.parameters()` is), counting the walks."""

    def __init__(self, items: Iterable):
        self._items = list(items)
        self._position = 0
        self.passes = 0            # how many times iteration was started
        self.late_passes = 0       # walks started after the items were used up (they see nothing)

    def __iter__(self) -> Iterator:
        self.passes += 1
        if self._position >= len(self._items):
            self.late_passes += 1
        return self

    def __next__(self):
        if self._position >= len(self._items):
            raise StopIteration
        self._position += 1
        return self._items[self._position - 1]

    def __repr__(self) -> str:
        return "<generator object Module.parameters>"


def modes(model: nn.Module) -> dict[str, bool]:
    """The train/eval flag of every submodule, by name ('' is the model itself)."""
    return {name: module.training for name, module in model.named_modules()}


def mode_changes(model: nn.Module, before: dict[str, bool]) -> list[str]:
    """Names of the submodules whose mode differs from `before` ('the model' for the top one)."""
    return [name or "the model" for name, training in modes(model).items() if before.get(name) != training]


@dataclass
class Forward:
    """One forward pass of a watched model."""

    training: bool         # the model's mode
    grad: bool             # autograd on?
    size: int              # the batch's first dimension
    marked: bool           # was the input the marked tensor (e.g. the validation inputs given)?


@dataclass
class Watch:
    """Record every forward of `model`; `mark` names one input tensor (compared by identity, then by value)."""

    model: nn.Module
    mark: torch.Tensor | None = None
    forwards: list[Forward] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._handle = self.model.register_forward_pre_hook(self._record)

    def _record(self, module: nn.Module, args: tuple) -> None:
        x = args[0] if args else None
        size = int(x.shape[0]) if isinstance(x, torch.Tensor) and x.dim() else 0
        marked = False
        if self.mark is not None and isinstance(x, torch.Tensor):
            marked = x is self.mark or (x.shape[1:] == self.mark.shape[1:] and size > 0 and _rows_of(x, self.mark))
        self.forwards.append(Forward(module.training, torch.is_grad_enabled(), size, marked))

    def close(self) -> None:
        self._handle.remove()

    def marked(self) -> list[Forward]:
        return [f for f in self.forwards if f.marked]

    def unmarked(self) -> list[Forward]:
        return [f for f in self.forwards if not f.marked]


def _rows_of(x: torch.Tensor, whole: torch.Tensor) -> bool:
    """Is x made of rows of `whole` (the validation inputs, or a slice of them)?"""
    try:
        with torch.no_grad():
            first = x[:1].to(whole.dtype)
            return bool((whole == first).all(dim=tuple(range(1, whole.dim()))).any()) and x.shape[0] <= whole.shape[0]
    except Exception:  # noqa: BLE001 - a strange input is simply not the marked one
        return False
