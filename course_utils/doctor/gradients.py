"""What ``.grad`` holds, per optimizer (chapters 5, 9): backward passes summed in, and which updates used them.

A ``Track`` follows one optimizer's parameters (or, when no optimizer steps, the model's own parameters
updated by hand). Each backward pass that writes into them (seen as a new ``.grad`` tensor or a bumped
version counter) joins its ``pending`` list; an update *consumes* the pending passes it applies. When
``.grad`` is found empty again (``None`` or all zeros) the list is cleared, and any pass no update of *any*
optimizer applied is *lost* (a GAN's generator pass, which also fills the discriminator's ``.grad``, is
applied by the generator's optimizer and is not lost when the discriminator clears it).

Looking costs no device synchronisation in the common case: ``None`` is read in Python, and a ``.grad``
whose tensor and version counter are those recorded after the last backward or clip is unchanged. Only
a ``.grad`` changed in place since then (``zero_grad(set_to_none=False)``, a clip written by hand) is read
on the device: one max-abs per tensor, reduced there, read back with a single ``.item()``.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import NamedTuple

import torch
from torch.nn.parameter import UninitializedParameter


class Pass:
    """One backward pass: its loss multiplier (a GradScaler's scale left out), the data batches it reached, whether
    any update applied it, and how many examples its micro-batch held (a plain class: one is made per backward)."""

    __slots__ = ("index", "factor", "batches", "applied", "examples")

    def __init__(self, index: int, factor: float, batches: frozenset, applied: bool = False,
                 examples: int | None = None):
        self.index, self.factor, self.batches, self.applied, self.examples = index, factor, batches, applied, examples


class Window(NamedTuple):
    """What one update applied: its number, the passes, their loss factors, how many data batches they held."""

    update: int
    passes: int
    members: tuple[Pass, ...]
    batches: int


@dataclass(eq=False)
class Track:
    """The gradient history of one optimizer's parameters (or of a hand-written update's)."""

    label: str
    params: list[torch.Tensor]
    optimizer: torch.optim.Optimizer | None = None
    pending: list[Pass] = field(default_factory=list)
    consumed: int = 0
    updates: int = 0
    windows: list[Window] = field(default_factory=list)
    wipes: list[tuple[str, int, list[Pass]]] = field(default_factory=list)   # (where, index, lost passes)
    stale: list[int] = field(default_factory=list)          # updates that re-applied already applied passes
    epoch_marks: list[tuple[int, list[Pass]]] = field(default_factory=list)  # (epoch, passes pending at its end)
    skipped: int = 0
    consumed_before: int = 0                    # at the last update: passes it found already applied
    final_unapplied: int = 0                    # at the loop's end: passes no update ever applied
    stopped_inside_epoch: int = 0               # ... of which on batches of an epoch the loop left unfinished
    stepped: tuple | None = None                # state of .grad right after the last update, until a backward
    stepped_storages: set = field(default_factory=set)   # ... and where those .grad tensors keep their numbers
    sched_mark: int | None = None               # forward count when a scheduler stepped with passes pending
    snapshot: tuple | None = None               # (state of .grad, was it empty then)
    before: tuple | None = None                 # state of .grad when the current backward pass began
    current: tuple | None = None                # state of .grad at the last look (empty())
    fingerprint: torch.Tensor | None = None     # hand-written updates: a few values of each parameter

    # --- looking at .grad -------------------------------------------------------------------------

    def _grads(self) -> list[torch.Tensor | None]:
        return [p.grad for p in self.params]      # frozen and lazy (uninitialised) parameters have None or zeros

    def state(self) -> tuple:
        """Which tensor each .grad is (a weak reference: a freed tensor's id can be reused) and its version counter
        (bumped by every in-place change, a backward's accumulation included). Cheap: no device read."""
        ref = weakref.ref
        return tuple(None if g is None else (ref(g), g._version) for g in self._grads())

    def matches(self, state: tuple | None) -> bool:
        """Does .grad still hold exactly the tensors and versions of `state`?"""
        if state is None:
            return False
        for p, entry in zip(self.params, state):
            g = p.grad
            if entry is None:
                if g is not None:
                    return False
            elif g is None or entry[0]() is not g or entry[1] != g._version:
                return False
        return True

    def look_after_step(self) -> None:
        """Remember .grad as the update left it: which tensors and their versions, and where they keep their numbers
        (an edit through ``.data``, as in ``p.grad.data.clamp_()``, leaves the version alone: the doctor's wrapper
        of in-place edits sees it by the storage instead)."""
        self.stepped = self.state()
        self.stepped_storages = {storage_pointer(g) for g in self._grads() if g is not None}

    def edited_since_step(self) -> bool:
        """Was a .grad the last update used changed in place since (not by a backward: each one resets this)?"""
        if self.stepped is None:
            return False
        return any(entry is not None and p.grad is not None and entry[0]() is p.grad and p.grad._version != entry[1]
                   for p, entry in zip(self.params, self.stepped))

    def remember(self, empty: bool) -> None:
        """Record what .grad holds now, and whether that is empty."""
        self.snapshot = (self.state(), empty)

    def rekey(self, before: tuple) -> None:
        """An operation that keeps emptiness (clip, unscale_) ran: if we knew what .grad held just before it
        (`before` is the state then), we still know it."""
        if before is not None and self.snapshot is not None and self.snapshot[0] is before:
            self.snapshot = (self.state(), self.snapshot[1])

    def known_state(self) -> tuple | None:
        """The state recorded last, if .grad still matches it (so its emptiness is known without a device read)."""
        return self.snapshot[0] if self.snapshot is not None and self.matches(self.snapshot[0]) else None

    def empty(self) -> bool:
        """Is every .grad None or all zeros (cleared)? Reads the device only for tensors changed in place.
        Leaves the state of .grad it looked at in `current`."""
        present = [g for g in self._grads() if g is not None]
        if not present:
            self.current = (None,) * len(self.params)
            return True
        if self.snapshot is not None and self.matches(self.snapshot[0]):
            self.current = self.snapshot[0]
            return self.snapshot[1]
        if any(g.is_sparse for g in present):
            result = not any(bool(g.coalesce().values().any()) for g in present)
        else:
            by_device: dict[torch.device, list[torch.Tensor]] = {}
            for g in present:
                by_device.setdefault(g.device, []).append(g)
            flags = [torch.stack(torch._foreach_norm(gs, float("inf"))).ne(0).any() for gs in by_device.values()]
            result = not (flags[0] if len(flags) == 1 else torch.stack([f.cpu() for f in flags]).any()).item()
        self.snapshot = (self.state(), result)
        self.current = self.snapshot[0]
        return result

    # --- bookkeeping -------------------------------------------------------------------------------

    def settle(self, where: str, index: int) -> None:
        """If .grad was cleared since we last looked, forget its passes, noting those no update ever applied."""
        if self.pending and self.empty():
            lost = [p for p in self.pending[self.consumed:] if not p.applied]
            if lost:
                self.wipes.append((where, index, lost))
            self.pending.clear()
            self.consumed = 0

    def unapplied(self) -> list[Pass]:
        """Pending passes that no update of any optimizer has applied yet."""
        return [p for p in self.pending[self.consumed:] if not p.applied]

    def update(self) -> Window | None:
        """An update applies the pending passes it has not applied before; returns its window (None if empty)."""
        self.updates += 1
        self.consumed_before = self.consumed
        if self.consumed:
            self.stale.append(self.updates)
        new = self.pending[self.consumed:]
        self.consumed = len(self.pending)
        if not new:
            return None
        for p in new:
            p.applied = True
        ids = [b for p in new for b in p.batches]
        # micro-batches: the distinct data batches the passes reached (passes on generated inputs add none), at
        # most one per pass (one backward over many forwards, e.g. per-token steps, is one micro-batch)
        batches = min(len(set(ids)), len(new)) if ids else len(new)
        window = Window(self.updates, len(new), tuple(new), batches)
        self.windows.append(window)
        return window

    def discard(self) -> None:
        """The pending passes were dropped on purpose (GradScaler skipped the step for inf/NaN gradients)."""
        for p in self.pending:
            p.applied = True
        self.consumed = len(self.pending)

    # --- updates written by hand (no optimizer) -----------------------------------------------------

    def _values(self) -> torch.Tensor:
        return torch.cat([p.detach().reshape(-1)[:8] for p in self.params
                          if not isinstance(p, UninitializedParameter) and p.requires_grad])

    def moved(self) -> bool:
        """Hand-written updates: did the parameters change since the last backward pass ended?"""
        if self.fingerprint is None:
            return False
        return not torch.equal(self._values(), self.fingerprint)

    def mark(self) -> None:
        """Hand-written updates: remember the parameters as they are at the end of a backward pass."""
        self.fingerprint = self._values().clone()


def storage_pointer(tensor: torch.Tensor) -> int:
    """Where a tensor keeps its numbers: the same for views and ``.data`` aliases of it (-1 when there is none)."""
    try:
        return tensor.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return -1
