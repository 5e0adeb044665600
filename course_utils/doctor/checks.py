"""The loop doctor's checks (chapters 5, 9): from what the observers counted to named findings with evidence.

The observers in ``core.py`` call the ``note``-style functions as events happen; ``findings`` runs the
checks that need the whole run (accumulation windows, the scheduler's cadence, leakage) at report time.
"""
from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import torch
from torch import nn
from torch.optim import lr_scheduler

from course_utils.doctor.report import Finding, finding

if TYPE_CHECKING:
    from course_utils.doctor.core import LoopDoctor, Observations

SCALE_NODES = ("MulBackward0", "DivBackward0")


def _passes(n: int) -> str:
    return f"{n} backward pass{'' if n == 1 else 'es'}"


# --- the loss graph at backward --------------------------------------------------------------------

def loss_factor(root: torch.Tensor, scaled: dict) -> float:
    """The constant the loss was multiplied by before backward (loss / K -> 1/K); a GradScaler's scale excluded.

    Through a sum of terms (loss / K + penalty / K) it is the largest factor of any term.
    """
    factor = _node_factor(root.grad_fn, 8)
    entry = scaled.get(id(root))
    if entry is not None and entry[0]() is root:
        factor /= entry[1]
    return factor


def _node_factor(node: object, depth: int) -> float:
    name = type(node).__name__
    if depth == 0 or node is None or len(node.next_functions) != 2:
        return 1.0
    (left, _), (right, _) = node.next_functions
    if name in ("AddBackward0", "SubBackward0"):
        return max(_node_factor(n, depth - 1) for n in (left, right) if n is not None)
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
    value = float(constant)
    return (value if name == "MulBackward0" else 1 / value) * _node_factor(child, depth - 1)


def _skip_casts(node: object) -> object:
    """Look through dtype casts (autocast inserts them between softmax and cross_entropy)."""
    while type(node).__name__ == "ToCopyBackward0":
        node = node.next_functions[0][0]
    return node


def softmax_in_loss(obs: Observations, root: torch.Tensor) -> None:
    """Does the loss graph apply log_softmax (cross_entropy's first step) to a softmax's output?"""
    frontier, seen = [root.grad_fn], 0
    while frontier and seen < 40:
        node = frontier.pop()
        seen += 1
        if node is None:
            continue
        parents = [n for n, _ in node.next_functions]
        if type(node).__name__ == "LogSoftmaxBackward0" and any(
                type(_skip_casts(p)).__name__ == "SoftmaxBackward0" for p in parents):
            obs.note("softmax_before_cross_entropy",
                     f"backward pass {obs.backward_passes}: the loss applies log_softmax (cross_entropy's own first "
                     "step) to the output of a softmax: probabilities were passed where logits belong")
            return
        frontier.extend(parents)


# --- forwards ----------------------------------------------------------------------------------------

def eval_in_train_mode(obs: Observations, index: int, is_val: bool) -> None:
    """An evaluation forward (no graph, or never backwarded) ran with the model in train mode."""
    where = " on validation data" if is_val else " without gradients"
    obs.note("eval_in_train_mode", f"forward {index} evaluated{where} with the model in train mode: Dropout "
             "and BatchNorm behaved as in training (model.training was True)")


def evaluation_with_graph(obs: Observations, index: int, training: bool, is_val: bool) -> None:
    """An evaluation forward recorded an autograd graph nobody backwarded."""
    what = "ran on validation data" if is_val else "was never backwarded"
    obs.note("missing_no_grad", f"forward {index} {what}, yet gradients were enabled: autograd recorded its "
             "graph and saved activations for a backward that never came")
    if training:
        eval_in_train_mode(obs, index, is_val)


def graph_kept(obs: Observations, index: int, now: int) -> None:
    """A forward's autograd graph outlived the next few forwards: the loop keeps a graph-attached tensor."""
    obs.note("graph_attached_logging", f"the autograd graph of forward {index} was still alive at forward {now}: "
             "a tensor attached to it (a loss kept in a list, `total += loss`) keeps every step's graph")


def trained_in_eval_mode(obs: Observations, index: int) -> None:
    """A forward that was backwarded (training) ran with the model in eval mode."""
    obs.note("missing_train_switch", f"forward {index} was backwarded (a training step) but ran in eval mode: "
             "Dropout was off and BatchNorm used running statistics while training")


# --- updates -----------------------------------------------------------------------------------------

def update_window(obs: Observations) -> None:
    """At optimizer.step(): which backward passes does this update use, and were some already applied?"""
    new = obs.contributions - obs.consumed
    if obs.consumed:
        obs.note("missing_zero_grad", f"update {obs.updates}: .grad still held {_passes(obs.consumed)} already "
                 f"applied by earlier updates, plus {new} new: the update used the sum of {obs.contributions}")
    if new:
        obs.windows.append((obs.updates, new, tuple(obs.factors[obs.consumed:])))
    obs.consumed = obs.contributions


def params_outside_optimizer(obs: Observations, model: nn.Module, optimizer_params: list, update: int) -> None:
    """Parameters that got gradients but belong to no param group never move."""
    tracked = {id(p) for p in optimizer_params}
    outside = [name for name, p in model.named_parameters()
               if p.requires_grad and id(p) not in tracked and p.grad is not None]
    if outside:
        names = ", ".join(outside[:4]) + (" ..." if len(outside) > 4 else "")
        obs.note("head_after_optimizer", f"update {update}: {len(outside)} parameter tensors ({names}) received "
                 "gradients but are in no param group of the optimizer, so no update ever moves them")


def frozen_moved(obs: Observations, frozen: list, update: int) -> None:
    """Frozen (requires_grad=False) parameters still in the optimizer: did this update move them?"""
    moved = max((p.detach() - before).abs().max().item() for p, before in frozen)
    if moved > 0:
        obs.note("freeze_after_optimizer", f"update {update}: {len(frozen)} frozen parameter tensors "
                 f"(requires_grad=False) are still in the optimizer and moved by up to {moved:.3g}")


def clip_timing(obs: Observations, grads_empty: bool, name: str) -> None:
    """A clip call is useful only between backward and step: empty grads, or grads already applied, are not."""
    obs.clips += 1
    if grads_empty and obs.contributions > obs.consumed:
        return   # a backward ran but its gradients were cleared before the clip: zero_grad_after_backward's doing
    if grads_empty:
        obs.note("clip_before_backward", f"{name} call {obs.clips}: every .grad was empty, so it clipped nothing "
                 "(backward had not filled them yet)")
    elif obs.updates and obs.contributions and obs.contributions == obs.consumed:
        obs.note("clip_after_step", f"{name} call {obs.clips}: it rescaled gradients that update {obs.updates} had "
                 "already applied, and no backward pass had run since: the clipping changed nothing")


def scheduler_first(obs: Observations, update: int) -> None:
    """scheduler.step() ran between backward and this optimizer.step()."""
    obs.note("scheduler_before_optimizer", f"update {update}: scheduler.step() ran after backward and before "
             "optimizer.step(): the update used the learning rate meant for the next one")


def scheduler_before_any_update(obs: Observations, call: int) -> None:
    """scheduler.step() before the loop's first backward and update."""
    obs.note("scheduler_before_optimizer", f"scheduler.step() call {call} came before the first backward and "
             "optimizer.step(): the schedule's first learning rate is never used")


def at_exit(doctor: LoopDoctor) -> None:
    """At the end of the loop: backward passes no update ever applied."""
    doctor._settle("exit", doctor.obs.backward_passes)
    doctor.obs.leftover = doctor.obs.contributions - doctor.obs.consumed


# --- whole-run checks ----------------------------------------------------------------------------------

def _zero_grad_and_flush(obs: Observations) -> list[Finding]:
    sizes = Counter(new for _, new, _ in obs.windows)
    typical = max(sizes, key=lambda n: (sizes[n], -n)) if sizes else 1
    at_step = [w for w in obs.wipes if w[0] == "step"]
    elsewhere = [w for w in obs.wipes if w[0] != "step"]
    if at_step or len(elsewhere) >= max(2, obs.updates / 2):
        where, index, lost = (at_step or elsewhere)[0]
        evidence = (f"update {index}: {_passes(lost)} had filled .grad since the last update, but at step() every "
                    ".grad was empty: it was cleared between backward and step" if where == "step" else
                    f"backward pass {index}: .grad was cleared before any update used the previous {_passes(lost)}; "
                    f"this happened {len(elsewhere)} times in {obs.updates} updates")
        return [finding("zero_grad_after_backward", evidence, len(obs.wipes))]
    evidence = []
    if typical >= 2:
        evidence += [f"backward pass {index}: the previous {_passes(lost)} were cleared without an update (an "
                     "epoch ended in the middle of a window)" for _, index, lost in elsewhere]
        evidence += [f"update {update}: it used {_passes(new)} where the other updates use {typical}: an unfinished "
                     "window from the previous epoch was carried into it" for update, new, _ in obs.windows
                     if new > typical]
        if getattr(obs, "leftover", 0) > 0:
            evidence.append(f"the loop ended with {_passes(obs.leftover)} that no update ever applied")
    return [finding("accumulation_without_flush", evidence[0], len(evidence))] if evidence else []


def _unscaled(obs: Observations) -> list[Finding]:
    bad = [(u, new, f) for u, new, f in obs.windows if new >= 2 and all(x > 0.99 for x in f)]
    if not bad:
        return []
    update, new, factors = bad[0]
    return [finding("unscaled_accumulation", f"update {update}: {_passes(new)} were summed into .grad on losses "
                    f"that were not divided (each multiplied by {min(factors):.3g}): the update used "
                    f"{sum(factors):.3g} times the window's mean gradient", len(bad))]


def _schedule_cadence(doctor: LoopDoctor) -> list[Finding]:
    scheduler, steps = doctor.scheduler, doctor.obs.scheduler_steps
    if scheduler is None or steps < 2:
        return []
    per_epoch = None
    if doctor.batches_per_epoch and doctor.obs.training_forwards:
        per_epoch = steps / (doctor.obs.training_forwards / doctor.batches_per_epoch)
    evidence = None
    if isinstance(scheduler, lr_scheduler.CosineAnnealingLR) and steps > scheduler.T_max and (
            per_epoch is None or per_epoch >= 2):
        evidence = (f"scheduler.step() ran {steps} times but CosineAnnealingLR's T_max is {scheduler.T_max}: the "
                    f"cosine reached its minimum after {scheduler.T_max} steps and climbed back up")
    elif per_epoch is not None and per_epoch >= 2:
        rate = f"{per_epoch:.3g} times per epoch"
        if isinstance(scheduler, lr_scheduler.StepLR) and scheduler.step_size < per_epoch:
            evidence = (f"StepLR(step_size={scheduler.step_size}) was stepped {rate}: it decayed every "
                        f"{scheduler.step_size} batches, not every {scheduler.step_size} epochs")
        elif isinstance(scheduler, lr_scheduler.MultiStepLR) and max(scheduler.milestones) < per_epoch:
            evidence = (f"MultiStepLR(milestones={sorted(scheduler.milestones)}) was stepped {rate}: every "
                        "milestone passed within the first epoch")
        elif isinstance(scheduler, lr_scheduler.ExponentialLR):
            evidence = f"ExponentialLR was stepped {rate}: the lr shrank by gamma every batch, not every epoch"
    return [finding("epoch_schedule_per_batch", evidence)] if evidence else []


def findings(doctor: LoopDoctor) -> tuple[Finding, ...]:
    """All findings: leakage first, then what was seen as it happened, then the whole-run checks."""
    obs = doctor.obs
    result = []
    if doctor.leaked:
        result.append(finding("data_leakage", f"{doctor.leaked} of the {doctor.val_size} validation examples are "
                              "exact copies of training examples"))
    for name, (evidence, count) in obs.events.items():
        if name == "graph_attached_logging" and count < 2:
            continue
        result.append(finding(name, evidence, count))
    result += _zero_grad_and_flush(obs) + _unscaled(obs) + _schedule_cadence(doctor)
    return tuple(result)
