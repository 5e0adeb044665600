"""The loop doctor's event checks (chapters 5, 9): what the observers saw, as it happens, turned into evidence.

The observers (``core.py``, ``updates.py``) call these at a forward, a backward, a step, a clip or a scheduler
step; each records the first evidence of a bug and how often it was seen. The checks that need the whole run
live in ``verdict.py``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from course_utils.doctor.forwards import describe
from course_utils.doctor.gradients import Track

SCALE_NODES = ("MulBackward0", "DivBackward0")
SHAPE_NODES = ("View", "Reshape", "Transpose", "Permute", "Expand", "Squeeze", "Unsqueeze", "Slice", "Select",
               "Clone", "ToCopy", "Contiguous", "AsStrided", "Flatten", "Unflatten", "Index", "Alias")


@dataclass(eq=False)
class Observations:
    """What the doctor counted (core.py keeps one per doctor); the checks below read it."""

    forwards: int = 0
    training_forwards: int = 0
    evaluation_forwards: int = 0
    backward_passes: int = 0
    epochs: int = 0                      # training epochs that ended (the training DataLoader ran out)
    clips: int = 0
    events: dict[str, list] = field(default_factory=dict)   # finding name -> [first evidence, times seen]
    notes: dict[tuple, int] = field(default_factory=dict)   # (what, model class) not counted as a bug -> times
    graph_evals_in_train_mode: list = field(default_factory=list)   # (forward, source): decided at report
    averages: list = field(default_factory=list)            # (first, last, k, smallest, largest) of each mean
    weighted: set = field(default_factory=set)             # (forward, value) of readings multiplied by batch size
    evaluation_runs: list = field(default_factory=list)     # [first, last] runs of evaluation forward indices
    outside: list = field(default_factory=list)             # (update, [(name, parameter)]) outside optimizers

    def note(self, name: str, evidence: str) -> None:
        """Record one observation of bug `name` (the first evidence is the one reported)."""
        entry = self.events.setdefault(name, [evidence, 0])
        entry[1] += 1


def _passes(n: int) -> str:
    return f"{n} backward pass{'' if n == 1 else 'es'}"


def _who(track: Track, many: bool) -> str:
    return f" of {track.label}" if many else ""


# --- the loss graph at backward --------------------------------------------------------------------

def scale_pointer(scaler: torch.amp.GradScaler) -> int | None:
    """Where a GradScaler keeps its scale (the doctor knows the scale's multiply by it; no device read)."""
    scale = getattr(scaler, "_scale", None)
    return scale.data_ptr() if isinstance(scale, torch.Tensor) else None


def loss_factor(root: torch.Tensor, scales: set[int]) -> float:
    """The constant the loss was multiplied by before backward, a GradScaler's scale left out (ch. 5, 9).

    loss / K gives 1/K; through a sum of terms (loss / K + penalty / K) it is the largest factor of any term. A
    multiply by the tensor of a GradScaler (`scales`: where each keeps its scale) counts as 1, wherever it sits
    (scaler.scale(loss / K) or scaler.scale(loss) / K) and on any device: the scaler divides it out again.
    """
    return _node_factor(root.grad_fn, 8, scales)


def _node_factor(node: object, depth: int, scales: set[int]) -> float:
    name = type(node).__name__
    if depth == 0 or node is None or len(node.next_functions) != 2:
        return 1.0
    (left, _), (right, _) = node.next_functions
    if name in ("AddBackward0", "SubBackward0"):
        return max(_node_factor(n, depth - 1, scales) for n in (left, right) if n is not None)
    if name not in SCALE_NODES:
        return 1.0
    if right is None:
        constant, child = node._saved_other, left
    elif left is None and name == "MulBackward0":
        constant, child = node._saved_self, right
    else:
        return 1.0
    if constant is None or constant.numel() != 1:
        return 1.0
    if name == "MulBackward0" and constant.data_ptr() in scales:
        return _node_factor(child, depth - 1, scales)        # the GradScaler's own multiply
    if constant.device.type != "cpu":
        return 1.0                                          # reading it would wait for the device
    value = float(constant)
    return (value if name == "MulBackward0" else 1 / value) * _node_factor(child, depth - 1, scales)


def _through_shapes(node: object) -> object:
    """Look through casts and shape-only ops (view, reshape, transpose, ...) with a single input."""
    for _ in range(16):
        name = type(node).__name__
        inputs = [n for n, _ in getattr(node, "next_functions", ()) if n is not None]
        if len(inputs) != 1 or not any(name.startswith(s) for s in SHAPE_NODES):
            return node
        node = inputs[0]
    return node


# Nodes that only move values around, from several inputs: a copy into a preallocated tensor (CopySlices, index_put),
# cat/stack, where, pack_padded_sequence (a captioning decoder fills scores step by step, then packs them)
MOVE_NODES = ("CopySlices", "IndexPutBackward", "CatBackward", "StackBackward", "WhereBackward",
              "PackPaddedSequenceBackward")


def _from_squashing(node: object, squash: str = "SoftmaxBackward0", depth: int = 8) -> bool:
    """Does `node`'s value come straight from a softmax (or another squashing node, `squash`), through shape-only
    and value-moving nodes?"""
    node = _through_shapes(node)
    name = type(node).__name__
    if name == squash:
        return True
    if depth == 0 or not any(name.startswith(m) for m in MOVE_NODES):
        return False
    return any(_from_squashing(n, squash, depth - 1) for n, _ in getattr(node, "next_functions", ()) if n is not None)


# a loss's own squashing step, and what is wrong to feed it: probabilities where logits belong
SQUASHED_TWICE = {"LogSoftmaxBackward0": ("SoftmaxBackward0", "log_softmax (cross_entropy's own first step)",
                                          "a softmax"),
                  "BinaryCrossEntropyWithLogitsBackward0": ("SigmoidBackward0", "a sigmoid (inside "
                                                            "binary_cross_entropy_with_logits)", "a sigmoid")}


def softmax_in_loss(obs: Observations, root: torch.Tensor, index: int) -> None:
    """Does the loss graph apply log_softmax (cross_entropy's first step) to a softmax's output, or
    binary_cross_entropy_with_logits (whose first step is a sigmoid) to a sigmoid's? Only the loss's input is
    looked at: a target may be a probability (a teacher's soft labels)."""
    frontier, seen = [(root.grad_fn, 0)], 0
    while frontier and seen < 200:
        node, depth = frontier.pop(0)
        seen += 1
        if node is None or depth > 12:
            continue
        parents = [n for n, _ in node.next_functions]
        twice = SQUASHED_TWICE.get(type(node).__name__)
        if twice and parents and parents[0] is not None and _from_squashing(parents[0], twice[0]):
            obs.note("softmax_before_cross_entropy",
                     f"backward pass {index}: the loss applies {twice[1]} to the output of {twice[2]}: "
                     "probabilities were passed where logits belong")
            return
        frontier.extend((p, depth + 1) for p in parents)


# --- forwards ----------------------------------------------------------------------------------------

def eval_in_train_mode(obs: Observations, index: int, layers: list, how: str) -> None:
    """An evaluation forward ran with the model's mode-dependent layers in train mode."""
    on = [m for m in layers if m.training]
    obs.note("eval_in_train_mode", f"forward {index} evaluated {how} with the model in train mode: its "
             f"{describe(on)} behaved as in training (model.eval() was not called)")


def evaluation_with_graph(obs: Observations, index: int) -> None:
    """An evaluation forward recorded an autograd graph nobody backwarded."""
    obs.note("missing_no_grad", f"forward {index} was never backwarded, yet gradients were enabled: autograd "
             "recorded its graph and saved activations for a backward that never came")


def trained_in_eval_mode(obs: Observations, index: int, layers: list) -> None:
    """A forward that was backwarded (training) ran with the mode-dependent layers in eval mode."""
    obs.note("missing_train_switch", f"forward {index} was backwarded (a training step) but ran in eval mode: "
             f"its {describe(layers)} behaved as in evaluation while training")


# --- updates -----------------------------------------------------------------------------------------

def stale_update(obs: Observations, track: Track, many: bool) -> None:
    """An update found .grad still holding passes that earlier updates had applied (no zero_grad between)."""
    old = track.consumed_before
    obs.note("missing_zero_grad", f"update {track.updates}{_who(track, many)}: .grad still held {_passes(old)} "
             "already applied by earlier updates: the update used the sum of old and new gradients")


def closure_without_zero_grad(obs: Observations, track: Track, index: int) -> None:
    """A step(closure)'s closure ran backward into .grad that still held gradients."""
    obs.note("missing_zero_grad", f"backward pass {index}, inside {track.label}.step(closure) (update "
             f"{track.updates}): .grad still held {_passes(len(track.pending))}; the closure must clear the "
             "gradients before its backward, or each evaluation adds to the last")


def params_outside_optimizers(obs: Observations, models: list[nn.Module], tracks: list[Track],
                              track: Track) -> None:
    """Parameters that got gradients but belong to no optimizer seen so far (checked at two updates); judged at
    the report against every optimizer seen by then (one built before the doctor shows up at its first step)."""
    if track.updates > 2 or track.optimizer is None:
        return
    tracked = {id(p) for t in tracks if t.optimizer is not None for p in t.params}
    outside = [(name, p, p.detach().clone()) for model in models for name, p in model.named_parameters()
               if p.requires_grad and id(p) not in tracked and p.grad is not None]
    if outside:
        obs.outside.append((track.updates, outside))


def _unmoved(p: torch.Tensor, before: torch.Tensor) -> bool:
    """The same values as `before` (a cast or a move to another device is a change too)."""
    now = p.detach()
    return (now.dtype, now.device, now.shape) == (before.dtype, before.device, before.shape) and torch.equal(now, before)


def outside_optimizers(obs: Observations, tracks: list[Track]) -> None:
    """At the report: the parameters found outside every optimizer at an early update that no optimizer seen
    during the whole run holds, and that never moved since. One that moved is updated another way: float32 master
    copies in the optimizer written back into a half model after each step (improved-diffusion's fp16 loop)."""
    tracked = {id(p) for t in tracks if t.optimizer is not None for p in t.params}
    for update, outside in obs.outside:
        names = [name for name, p, before in outside if id(p) not in tracked and _unmoved(p, before)]
        if names:
            listed = ", ".join(names[:4]) + (" ..." if len(names) > 4 else "")
            obs.note("head_after_optimizer", f"update {update}: {len(names)} parameter tensors ({listed}) received "
                     "gradients but are in no param group of any optimizer, so no update ever moves them")


def frozen_moved(obs: Observations, frozen: list, update: int) -> None:
    """Frozen (requires_grad=False) parameters still in the optimizer: did this update move them?"""
    moved = max((p.detach() - before).abs().max().item() for p, before in frozen)
    if moved > 0:
        obs.note("freeze_after_optimizer", f"update {update}: {len(frozen)} frozen parameter tensors "
                 f"(requires_grad=False) are still in the optimizer and moved by up to {moved:.3g}")


def clip_timing(obs: Observations, tracks: list[Track], name: str) -> None:
    """A clip is useful only between backward and step: empty grads, or grads already applied, are not."""
    obs.clips += 1
    for track in tracks:
        empty = track.empty()
        if empty and track.unapplied():
            return   # a backward ran, but its gradients were cleared before the clip: zero_grad_after_backward
        if empty:
            obs.note("clip_before_backward", f"{name} call {obs.clips}: every .grad was empty, so it clipped "
                     "nothing (backward had not filled them yet)")
        elif track.updates and track.pending and not track.unapplied():
            obs.note("clip_after_step", f"{name} call {obs.clips}: it rescaled gradients that update "
                     f"{track.updates} had already applied, and no backward pass had run since: the clipping "
                     "changed nothing")


def edited_after_step(obs: Observations, track: Track, where: str) -> None:
    """Gradients changed in place after an update, by code other than torch's clipping functions (a clamp or clip
    written by hand), and then cleared or overwritten: no update ever used the change."""
    if track.stepped is not None and track.edited_since_step() and not track.empty():
        obs.note("clip_after_step", f"after update {track.updates}, .grad was changed in place (a clip or clamp "
                 f"written by hand?) and then {where} before any update used it: the change did nothing")
    track.stepped = None


def scheduler_stepped(obs: Observations, entry: list) -> None:
    """scheduler.step(): before any update at all, or while gradients wait for their update?"""
    scheduler, steps, track = entry
    if track is None:
        return
    if track.updates == 0 and not track.pending and obs.backward_passes == 0:
        obs.note("scheduler_before_optimizer", f"scheduler.step() call {steps} came before the first backward "
                 "and optimizer.step(): the schedule's first learning rate is never used")
    elif track.unapplied():
        track.sched_mark = obs.forwards


def scheduler_order(obs: Observations, track: Track) -> None:
    """At an update: did a scheduler step between this update's backward and its step?"""
    if track.sched_mark is not None and track.sched_mark == obs.forwards:
        obs.note("scheduler_before_optimizer", f"update {track.updates}: scheduler.step() ran after backward "
                 "and before optimizer.step(): the update used the learning rate meant for the next one")
    track.sched_mark = None
