"""Updates (chapters 5, 9): optimizers found as they are built or stepped, their steps, clipping, GradScaler
and schedulers, as seen by ``LoopDoctor``.

``UpdateWatch`` is the part of ``LoopDoctor`` that keeps one ``Track`` per optimizer (``gradients.py``) and
calls the event checks (``checks.py``) at each step, clip and scheduler step. Every wrapper calls the original
with the same arguments and returns its result.
"""
from __future__ import annotations

import torch

from course_utils.doctor import checks
from course_utils.doctor.gradients import Track, storage_pointer


class UpdateWatch:
    """The update side of LoopDoctor (a mixin: the state lives on the doctor, set up in its __init__)."""

    def _track(self, optimizer: torch.optim.Optimizer | None, params: list | None = None) -> Track:
        if optimizer is not None:
            for track in self.tracks:
                if track.optimizer is optimizer:
                    return track
        params = params if params is not None else [p for g in optimizer.param_groups for p in g["params"]]
        label = type(optimizer).__name__ if optimizer is not None else "hand-written update"
        track = Track(label, params, optimizer)
        manual = next((t for t in self.tracks if t.optimizer is None), None)
        if manual is not None and optimizer is not None:       # passes seen before this optimizer showed up
            track.pending, track.consumed = manual.pending, manual.consumed
            self.tracks.remove(manual)
        self.tracks.append(track)
        return track

    def _optimizer_built(self, original, optimizer, *args, **kwargs):
        result = original(optimizer, *args, **kwargs)
        self._guarded(self._track, optimizer)
        return result

    def _hand_update(self, track: Track) -> None:
        """The parameters moved between two backward passes with no optimizer.step(): an update by hand
        (it used .grad as the last backward left it, so it is applied before looking for a zero_grad)."""
        self._update(track)
        track.fingerprint = None

    def _before_step(self, optimizer, args, kwargs) -> None:
        self._guarded(self._step_begins, optimizer, args, kwargs)

    def _step_begins(self, optimizer, args, kwargs) -> None:
        track = self._track(optimizer)
        closure = args[1] if len(args) > 1 else kwargs.get("closure")    # args[0] is the optimizer
        if closure is not None:                   # LBFGS-style: the closure's passes belong to this update
            self._stepping = track
            track.updates += 1
        else:
            track.settle("step", track.updates + 1)
            self._update(track)
        checks.params_outside_optimizers(self.obs, self.models, self.tracks, track)
        frozen = [p for p in track.params if not p.requires_grad]
        self._frozen = [(p, p.detach().clone()) for p in frozen] if frozen else []

    def _update(self, track: Track) -> None:
        track.update()
        if track.stale and track.stale[-1] == track.updates:
            checks.stale_update(self.obs, track, len(self.tracks) > 1)
        checks.scheduler_order(self.obs, track)
        self._tick()

    def _after_step(self, optimizer, args, kwargs) -> None:
        self._guarded(self._step_ends, optimizer)

    def _step_ends(self, optimizer) -> None:
        track = self._track(optimizer)
        if self._frozen:
            checks.frozen_moved(self.obs, self._frozen, track.updates)
            self._frozen = []
        if self._stepping is track:
            track.discard()
            self._stepping = None
        track.look_after_step()

    def _tick(self) -> None:
        """The update round: the busiest optimizer's update count (a GAN's round is one D and one G update)."""
        self._round = max((t.updates for t in self.tracks), default=0)
        self.graphs.check(self._round)

    def _scaler_step(self, original, scaler, optimizer, *args, **kwargs):
        track = self._guarded(self._track, optimizer)
        before = track.updates if track is not None else None
        result = original(scaler, optimizer, *args, **kwargs)
        if track is not None and track.updates == before:       # inf/NaN found: the scaler skipped the update
            track.skipped += 1
            track.discard()
        return result

    def _scale(self, original, scaler, outputs):
        result = original(scaler, outputs)
        pointer = self._guarded(checks.scale_pointer, scaler)
        if pointer is not None:
            self._scales.add(pointer)
        return result

    def _unscale(self, original, scaler, optimizer):
        track = self._guarded(self._track, optimizer)
        before = track.known_state() if track is not None else None
        result = original(scaler, optimizer)
        if track is not None:
            track.rekey(before)
        return result

    def _clip(self, original, name: str, parameters, *args, **kwargs):
        if self._depth["clip"] or self.failure is not None:
            return original(parameters, *args, **kwargs)
        params = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
        ids = {id(p) for p in params}
        tracks = [t for t in self.tracks if any(id(p) in ids for p in t.params)]
        for track in tracks:
            if track.optimizer is None and self._guarded(track.moved):
                self._guarded(self._hand_update, track)
        self._guarded(checks.clip_timing, self.obs, tracks, name)
        before = [track.known_state() for track in tracks]
        self._depth["clip"] += 1
        try:
            return original(params, *args, **kwargs)
        finally:
            self._depth["clip"] -= 1
            for track, state in zip(tracks, before):
                track.rekey(state)
                if track.stepped is not None:        # torch's clipping after a step: clip_timing judged it
                    track.look_after_step()

    def _grad_edit(self, original, tensor, *args, **kwargs):
        """An in-place clamp, clip or scaling (clamp_, clip_, mul_, div_, ...) of a tensor whose storage is a .grad
        the last update already used, such as ``p.grad.data.clamp_(-c, c)`` after step(): too late to matter."""
        if self.failure is None and not self._depth["clip"] and any(t.stepped is not None for t in self.tracks):
            self._guarded(self._check_grad_edit, tensor, original.__name__)
        return original(tensor, *args, **kwargs)

    def _check_grad_edit(self, tensor, name: str) -> None:
        pointer = storage_pointer(tensor)
        for track in self.tracks:
            if track.stepped is not None and pointer in track.stepped_storages:
                self.obs.note("clip_after_step", f"after update {track.updates}, .grad was changed in place by "
                              f"{name} (a clip or clamp written by hand?) before any backward refilled it: no "
                              "update used the change")
                track.stepped = None
                return

    def _zero_grad(self, original, owner, *args, **kwargs):
        """optimizer.zero_grad() / model.zero_grad(): were the gradients it clears edited after the last update?"""
        if self.failure is None and not self._depth["clip"] and any(t.stepped is not None for t in self.tracks):
            ids = {id(p) for p in (owner.parameters() if isinstance(owner, torch.nn.Module)
                                   else (p for g in owner.param_groups for p in g["params"]))}
            for track in self.tracks:
                if track.stepped is not None and any(id(p) in ids for p in track.params):
                    self._guarded(checks.edited_after_step, self.obs, track, "cleared by zero_grad")
        return original(owner, *args, **kwargs)

    def _scheduler_step(self, original, scheduler, *args, **kwargs):
        if self._depth["sched"] or getattr(scheduler, "_is_initial", False) or self.failure is not None:
            return original(scheduler, *args, **kwargs)
        self._guarded(self._scheduler_stepped, scheduler)
        self._depth["sched"] += 1
        try:
            return original(scheduler, *args, **kwargs)
        finally:
            self._depth["sched"] -= 1

    def _scheduler_stepped(self, scheduler) -> None:
        entry = self.schedulers.get(id(scheduler))
        if entry is None:
            optimizer = getattr(scheduler, "optimizer", None)
            track = self._track(optimizer) if isinstance(optimizer, torch.optim.Optimizer) else None
            entry = self.schedulers[id(scheduler)] = [scheduler, 0, track]
        entry[1] += 1
        checks.scheduler_stepped(self.obs, entry)
