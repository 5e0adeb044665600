"""Exercises of chapter 7: a resumable checkpoint pair (ch07_checkpoint), early stopping, warmup-cosine, clipping."""
from __future__ import annotations

import math

import torch
from torch.optim import lr_scheduler

from course_utils.exercises.ch07_checkpoint import check_checkpoint_pair
from course_utils.exercises.core import Attempt, Exercise
from course_utils.exercises.search import search
from course_utils.exercises.guards import OneShot
from course_utils.exercises.words import Fail, differ, need_float, need_int, number, show
from course_utils.production import EarlyStopping


# --- stop_check ---------------------------------------------------------------------------------------------

def stopping_check(losses: list[float], patience: int, min_delta: float) -> int | None:
    """The oracle: the course's EarlyStopping (PyTorch Lightning's rule); the 1-based check that stops, or None."""
    rule = EarlyStopping(patience=patience, min_delta=min_delta, mode="min")
    for value in losses:
        rule.update(value)
        if rule.should_stop:
            return rule.checks
    return None


def _why(losses: list[float], patience: int, min_delta: float, stop: int | None) -> str:
    if stop is None:
        return "no run of patience checks without an improvement beyond min_delta, and no value that is not finite"
    value = losses[stop - 1]
    if not math.isfinite(value):
        return f"check {stop} is {value}: a value that is not finite stops at once"
    best, best_at = math.inf, 0
    for i, v in enumerate(losses[:stop], 1):
        if v + min_delta < best:
            best, best_at = v, i
    checks = f"check {stop} did" if best_at + 1 == stop else f"checks {best_at + 1} to {stop} did"
    allowed = (f"{patience} check{'s' * (patience != 1)} without improvement" if patience else
               "with patience 0, the first check without an improvement stops")
    return f"{checks} not beat the best, {number(best)} (check {best_at}), by more than min_delta {min_delta:g}: {allowed}"


def _variant(losses: list[float], patience: int, min_delta: float, late: bool = False,
             previous: bool = False, ties: bool = False, creep: bool = False, relative: bool = False,
             never_reset: bool = False) -> int | None:
    """Common misreadings of the rule: one check late, comparing with the previous value, ties as improvements,
    the best moved by any decrease (even one within min_delta), min_delta as a fraction of the best, the count of
    checks without improvement never reset by an improvement."""
    best, waited = math.inf, 0
    for check, value in enumerate(losses, 1):
        if not math.isfinite(value):
            return check
        better = value < best * (1 - min_delta) if relative and math.isfinite(best) else \
            value + min_delta <= best if ties else value + min_delta < best
        waited = 0 if better and not never_reset else waited + (not better)
        if previous or better:
            best = value
        elif creep:
            best = min(best, value)
        if waited > patience if late else waited >= patience:
            return check
    return None


def _stop_case(attempt: Attempt, losses: list[float], patience: int, min_delta: float) -> None:
    got = attempt.call(f"losses {show(losses, 90)}, patience={patience}, min_delta={min_delta:g}",
                       list(losses), patience, min_delta)
    if got is not None:
        got = need_int(got)
    want = stopping_check(losses, patience, min_delta)
    if got == want:
        return
    said = "never stops (None)" if got is None else f"stops at check {got}"
    must = "never stops" if want is None else f"stops at check {want}"
    values = losses[:max(want or 0, got or 0, 1)]
    if want is not None and not math.isfinite(losses[want - 1]):
        hint = ("NaN compares false with everything: test for a non-finite value before comparing."
                if math.isnan(losses[want - 1]) else
                "inf is not finite either: test with math.isfinite (NaN and inf), not only math.isnan.")
    elif min_delta == 0 and got == _variant(losses, patience, min_delta, ties=True) and any(
            values[i] == values[j] for i in range(len(values)) for j in range(i)):
        hint = "An improvement must be strictly better than the best so far; an equal value is not one."
    elif min_delta > 0 and got == stopping_check(losses, patience, 0.0):
        hint = "An improvement must beat the best by more than min_delta."
    elif min_delta > 0 and got == _variant(losses, patience, min_delta, relative=True):
        hint = ("min_delta is an amount of loss, not a fraction of the best: the best must drop by more than "
                "min_delta itself.")
    elif min_delta > 0 and got == _variant(losses, patience, min_delta, creep=True):
        hint = ("The best moves only on an improvement: a decrease of min_delta or less leaves it where it was, so a "
                "later value is compared with the old best.")
    elif got == _variant(losses, patience, min_delta, previous=True):
        hint = "Compare each value with the best so far, not with the previous value."
    elif got is not None and got == _variant(losses, patience, min_delta, never_reset=True):
        hint = ("An improvement starts the count of checks without improvement again from 0: yours kept counting "
                "across improvements.")
    elif got is not None and want is not None and got == want - 1 and _zero_based(attempt):
        hint = "Checks are counted from 1: the first loss is check 1."
    elif got == _variant(losses, patience, min_delta, late=True):
        hint = "Stop as soon as the count of checks without improvement reaches patience."
    else:
        hint = ""           # no misreading fits this answer alone: no hint
    raise Fail(f"your function {said}, but the rule {must}: {_why(losses, patience, min_delta, want)}.", hint)


def _zero_based(attempt: Attempt) -> bool:
    """Whether the learner's function answers one less on two probes where every other misreading agrees with the
    rule (the stop after an improvement, and a NaN at once): it counts checks from 0."""
    probes = (([1.0, 0.9, 0.95, 0.97], 2, 0.0), ([1.0, 0.5, math.nan], 5, 0.0))
    try:
        return all(attempt.fn(list(l), p, d) == stopping_check(l, p, d) - 1 for l, p, d in probes)
    except Exception:  # noqa: BLE001 - a probe that raises is no evidence
        return False


def check_stop_check(attempt: Attempt) -> str:
    """The oracle: the course's EarlyStopping, which reproduces Lightning's rule; hypothesis draws the histories."""
    nan, inf = math.nan, math.inf
    edge = [([1.0, 0.9, 0.95, 0.97], 2, 0.0), ([1.0, 1.0], 1, 0.0), ([1.0, 0.875, 0.8125, 0.75], 1, 0.125),
            ([1.0, nan, 0.5], 3, 0.0), ([1.0, 0.5, 0.6, 0.55, 0.58], 2, 0.0),
            ([1.0, 0.8, 0.9, 0.7, 0.75, 0.76, 0.74], 3, 0.0), ([0.5], 1, 0.0),
            ([1.0, 0.9, 0.8], 2, 0.0), ([inf, 1.0], 2, 0.0), ([2.0, 1.0, 1.2, 0.99, 1.1, 1.05], 2, 0.02),
            ([1.0, 0.875, 0.75, 0.7], 2, 0.125),
            ([8.0, 7.5, 7.25, 7.125], 2, 0.25), ([0.125, 0.0625, 0.03125], 1, 0.0625),   # best far from 1
            ([1.0, 1.0, 0.5], 0, 0.0), ([1.0, 0.9, 0.8], 0, 0.0),      # patience 0: the first check not improving
            ([1.0, 0.9, -inf, 0.5], 3, 0.0)]                           # -inf is not finite either, not a best
    for losses, patience, min_delta in edge:
        _stop_case(attempt, losses, patience, min_delta)
    _stop_default(attempt)
    from hypothesis import strategies as st
    # Values and min_delta are exact in binary (1 - 0.875 is exactly 0.125), so a value on the boundary
    # is on it however the comparison is written (best - value > min_delta, or value + min_delta < best).
    values = st.one_of(st.sampled_from([1.0, 0.875, 0.75, 0.625, 0.5]), st.floats(0, 2, allow_nan=False),
                       st.sampled_from([math.nan, math.inf, -math.inf]))
    # Scaled by a power of two (values far from 1 as well as near it: a relative min_delta differs there), still exact.
    cases = st.tuples(st.lists(values, min_size=1, max_size=12), st.integers(0, 4), st.sampled_from([0.0, 0.125, 0.25]),
                      st.sampled_from([1.0, 8.0, 0.0625])).map(
        lambda c: ([v * c[3] for v in c[0]], c[1], c[2]))
    tried = search(cases, lambda case: _stop_case(attempt, *case), examples=150)
    return (f"{len(edge) + tried + 1} histories agree with the course's EarlyStopping (Lightning's rule): strict "
            "improvement beyond min_delta (an amount, with losses near 1 and far from it), patience counted in checks "
            "since the best (patience 0: the first check without one), NaN and inf stop at once, min_delta 0 when "
            "it is not given.")


def _stop_default(attempt: Attempt) -> None:
    """Called without min_delta, the rule is min_delta = 0 (the signature's default)."""
    losses, patience = [1.0, 0.9, 0.95, 0.97], 2
    got = attempt.call(f"losses {show(losses)}, patience={patience}, min_delta not given", list(losses), patience)
    if got is not None:
        got = need_int(got)
    want = stopping_check(losses, patience, 0.0)
    if got != want:
        said = "never stops (None)" if got is None else f"stops at check {got}"
        raise Fail(f"called without min_delta, your function {said}; min_delta defaults to 0.0, and then the rule "
                   f"{'never stops' if want is None else f'stops at check {want}'}.",
                   "Keep the stub's signature: `min_delta=0.0`.")


# --- warmup_cosine_lr ---------------------------------------------------------------------------------------

_curves: dict[tuple[float, int, int], list[float]] = {}


def torch_warmup_cosine(base_lr: float, warmup: int, total: int) -> list[float]:
    """The oracle: torch's LinearLR (from base_lr/warmup up to base_lr) then CosineAnnealingLR to 0, chained."""
    key = (base_lr, warmup, total)
    if key not in _curves:
        optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=base_lr)
        cosine = lr_scheduler.CosineAnnealingLR(optimizer, T_max=total - warmup)
        schedule = cosine if not warmup else lr_scheduler.SequentialLR(
            optimizer, [lr_scheduler.LinearLR(optimizer, start_factor=1 / warmup, total_iters=max(1, warmup - 1)),
                        cosine], milestones=[warmup])
        curve = []
        for _ in range(total):
            curve.append(optimizer.param_groups[0]["lr"])
            optimizer.step()
            schedule.step()
        _curves[key] = curve
    return _curves[key]


def _lr_case(attempt: Attempt, update: int, base_lr: float, warmup: int, total: int) -> None:
    got = need_float(attempt.call(f"update={update}, base_lr={base_lr:g}, warmup={warmup}, total={total}",
                                  update, base_lr, warmup, total))
    want = torch_warmup_cosine(base_lr, warmup, total)[update]
    if abs(got - want) <= 1e-7 * base_lr:
        return
    phase = (f"update {update} is in the warm-up (updates 0 to {warmup - 1})" if update < warmup else
             f"update {update} is {update - warmup} updates into the cosine of {total - warmup} updates")
    cos = lambda progress: 0.5 * base_lr * (1 + math.cos(math.pi * progress))  # noqa: E731
    span = total - warmup
    variants = [  # (it matches what came back, the misreading it shows)
        (update < warmup and _near(got, base_lr * update / warmup, base_lr),
         "The first update already learns: the warm-up starts at base_lr/warmup and reaches base_lr at its "
         "last update, warmup-1."),
        (update == warmup and _near(got, base_lr * (update + 1) / warmup if warmup else -1, base_lr),
         "The warm-up covers updates 0 to warmup-1 (update < warmup); update warmup is the cosine's first."),
        (update >= warmup and _near(got, cos(update / total), base_lr),
         "The cosine starts when the warm-up ends: progress = (update - warmup) / (total - warmup)."),
        (update >= warmup and span > 0 and _near(got, base_lr - cos((update - warmup) / span), base_lr),
         "After the warm-up the lr falls: half a cosine from base_lr down to 0, (1 + cos(pi * progress)) / 2."),
        (update >= warmup and span > 0 and _near(got, base_lr * math.cos(math.pi / 2 * (update - warmup) / span),
                                                    base_lr),
         "Half a cosine runs from its top to its bottom: (1 + cos(pi * progress)) / 2, not cos(pi/2 * progress)."),
        (update >= warmup and warmup > 0 and _near(got, cos((update - warmup + 1) / (span + 1)), base_lr),
         "The cosine's first update, warmup, is its peak: progress = (update - warmup) / (total - warmup), "
         "which is 0 there."),
        (update >= warmup and span > 1 and _near(got, cos((update - warmup + 1) / span), base_lr),
         "The cosine's first update, warmup, is its peak: progress = (update - warmup) / (total - warmup), "
         "which is 0 there."),
        (update >= warmup and span > 1 and _near(got, cos((update - warmup) / (span - 1)), base_lr),
         "The cosine reaches 0 at update total, one past the last: divide by (total - warmup), not one less."),
    ]
    hint = next((text for matched, text in variants if matched), "")     # no one misreading fits: no hint
    mine, right = differ(got, want)
    raise Fail(f"your function returned {mine}; torch's LinearLR then CosineAnnealingLR give {right} ({phase}).", hint)


def _near(a: float, b: float, scale: float) -> bool:
    return abs(a - b) <= 1e-7 * scale


def check_warmup_cosine_lr(attempt: Attempt) -> str:
    """The oracle: torch's own schedulers chained by SequentialLR, stepped once per update."""
    edge = [(0, 0.1, 10, 100), (9, 0.1, 10, 100), (10, 0.1, 10, 100), (55, 0.1, 10, 100), (99, 0.1, 10, 100),
            (0, 0.5, 0, 20), (7, 0.5, 0, 20), (0, 1.0, 1, 5), (3, 1.0, 1, 5), (2, 0.01, 3, 4)]
    for case in edge:
        _lr_case(attempt, *case)
    from hypothesis import strategies as st
    cases = st.tuples(st.integers(2, 300), st.sampled_from([0.1, 1e-3, 3.0])).flatmap(
        lambda tb: st.tuples(st.just(tb[0]), st.just(tb[1]), st.integers(0, tb[0] - 1))).flatmap(
        lambda tbw: st.tuples(st.integers(0, tbw[0] - 1), st.just(tbw[1]), st.just(tbw[2]), st.just(tbw[0])))
    tried = search(cases, lambda case: _lr_case(attempt, *case), examples=120)
    return (f"{len(edge) + tried} cases agree with torch's LinearLR then CosineAnnealingLR (SequentialLR): the first "
            "and last warm-up updates, the cosine's start, middle and end, no warm-up, a warm-up of one update.")


# --- clip_gradients -----------------------------------------------------------------------------------------

def _clip_case(attempt: Attempt, shapes: list[tuple[int, ...]], scale: float, max_norm: float, seed: int,
               none_at: int | None = None, generator: bool = True, norm: float | None = None) -> None:
    g = torch.Generator().manual_seed(seed)
    params = [torch.zeros(*s, requires_grad=True) for s in shapes]
    for i, (p, shape) in enumerate(zip(params, shapes)):
        p.grad = None if i == none_at else scale * torch.randn(*shape, generator=g)
    if norm is not None:      # the global norm set exactly (between max_norm and its square, say)
        total = torch.linalg.vector_norm(torch.cat([p.grad.flatten() for p in params if p.grad is not None]))
        for p in params:
            if p.grad is not None:
                p.grad *= norm / total
    grads = [None if p.grad is None else p.grad.clone() for p in params]
    twins = [torch.zeros(*s, requires_grad=True) for s in shapes]
    for t, gr in zip(twins, grads):
        t.grad = None if gr is None else gr.clone()
    want_norm = torch.nn.utils.clip_grad_norm_(twins, max_norm).item()
    given = OneShot(params) if generator else list(params)
    what = (f"{len(shapes)} parameters of shapes {shapes}, passed as "
            + ("a generator, as model.parameters() is" if generator else "a list")
            + (f" (parameter {none_at} has no gradient)" if none_at is not None else "")
            + f", global gradient norm {number(want_norm)}, max_norm={max_norm:g}")
    originals = [p.grad for p in params]
    got = need_float(attempt.call(what, given, max_norm))
    rebound = [i for i, (p, g) in enumerate(zip(params, originals)) if g is not None and p.grad is not g]
    if rebound:
        raise Fail(f"your function replaced the .grad of parameter {rebound[0]} with a new tensor; the statement asks "
                   "to scale every gradient in place: code that holds the gradient tensor (DDP's buckets, a hook, "
                   "an optimizer's view) keeps the unscaled one.", "Scale in place: `p.grad.mul_(factor)`.")
    scaled = any(p.grad is not None and not torch.equal(p.grad, g) for p, g in zip(params, grads))
    if want_norm > max_norm and not scaled and not (generator and given.late_passes):
        raise Fail(f"the global norm {number(want_norm)} is above max_norm={max_norm:g}, and after your function every "
                   "gradient is as it was: nothing was scaled.", "`g = g * factor` only rebinds a local name: scale "
                   "the tensor itself, in place (`p.grad.mul_(factor)`).")
    if generator and given.late_passes and want_norm > max_norm and not scaled:
        raise Fail("your function went over `parameters` a second time, after it was used up: `parameters` is a "
                   "generator here (as model.parameters() is), so the second pass saw no parameter and no gradient "
                   "was clipped.", "Walk it once: `params = list(parameters)` first, then use that list twice.")
    for i, (p, t) in enumerate(zip(params, twins)):
        if t.grad is None:
            if p.grad is not None:
                raise Fail(f"parameter {i} had no gradient and now has one.", "Skip parameters whose .grad is None.")
            continue
        if p.grad is None or not torch.allclose(p.grad, t.grad, rtol=1e-4, atol=1e-7):
            each = [None if gr is None else gr.norm().item() for gr in grads]
            if want_norm <= max_norm:
                hint = "When the global norm is already at most max_norm, the gradients stay as they are."
            elif any(n is not None and n > max_norm for n in each) and p.grad is not None and abs(
                    p.grad.norm().item() - min(each[i], max_norm)) < 1e-4 * max_norm:
                hint = ("Clip the *global* norm, over all gradients together, and scale every gradient by the same "
                        "factor.")
            else:
                hint = "Scale every gradient by max_norm / global norm, where the global norm is over all of them."
            now = "None" if p.grad is None else show(p.grad)
            raise Fail(f"parameter {i}'s gradient is now {now}; clip_grad_norm_ makes it {show(t.grad)}.", hint)
    if abs(got - want_norm) > 1e-4 * max(1.0, want_norm):
        clipped = math.isclose(got, min(want_norm, max_norm), rel_tol=1e-4)
        mine, right = differ(got, want_norm)
        raise Fail(f"your function returned {mine}; the global norm before clipping is {right}"
                   + (" (yours is the norm after clipping)." if clipped else "."),
                   "Return the norm measured before clipping: that is the figure worth logging.")


def check_clip_gradients(attempt: Attempt) -> str:
    """The oracle: torch.nn.utils.clip_grad_norm_ on copies of the same gradients."""
    _clip_case(attempt, [(3, 2), (2,)], 1.0, 1.0, 0, generator=False)
    _clip_case(attempt, [(3, 2), (2,)], 1.0, 1.0, 0)
    _clip_case(attempt, [(4,), (2, 2)], 0.01, 1.0, 1)
    _clip_case(attempt, [(5,), (1,), (3,)], 10.0, 0.5, 2, none_at=1)
    _clip_case(attempt, [(10,), (10,)], 1.0, 2.0, 3)
    _clip_case(attempt, [(6, 3)], 3.0, 1.0, 4)
    _clip_case(attempt, [(2,), (2,)], 0.0, 1.0, 5)
    _clip_case(attempt, [(3,), (2,)], 1.0, 2.0, 6, norm=1.5)     # below max_norm, above its square root
    _clip_case(attempt, [(3,), (2,)], 1.0, 0.7, 7, norm=0.8)     # above max_norm, below its square root
    return ("9 cases agree with torch's clip_grad_norm_, the parameters passed as a list and as a generator (as "
            "model.parameters() is): gradients above and below max_norm (norms between max_norm and its square root "
            "too), all zero, one global norm over every parameter, a parameter without a gradient, and the norm "
            "before clipping returned.")


def exercises() -> list[Exercise]:
    """Chapter 7."""
    return [
        Exercise("checkpoint_pair", "07", "a checkpoint that resumes exactly",
                 "save_checkpoint(path, model, optimizer, scheduler, epoch) -> None; "
                 "load_checkpoint(path, model, optimizer, scheduler) -> int", check_checkpoint_pair,
                 functions=("save_checkpoint", "load_checkpoint"), arity=(5, 4), time_limit=30.0,
                 oracle="an uninterrupted run; the checked run is killed after an epoch and resumed"),
        Exercise("stop_check", "07", "the early-stopping rule",
                 "stop_check(losses, patience, min_delta=0.0) -> int | None", check_stop_check, arity=(3,),
                 oracle="course_utils.production.EarlyStopping (Lightning's rule)"),
        Exercise("warmup_cosine_lr", "07", "a warmup + cosine learning rate",
                 "warmup_cosine_lr(update, base_lr, warmup, total) -> float", check_warmup_cosine_lr, arity=(4,),
                 oracle="torch's LinearLR and CosineAnnealingLR chained by SequentialLR"),
        Exercise("clip_gradients", "07", "gradient clipping by the global norm",
                 "clip_gradients(parameters, max_norm) -> float", check_clip_gradients, arity=(2,),
                 oracle="torch.nn.utils.clip_grad_norm_",
                 forbids=("clip_grad_norm_", "clip_grad_norm", "get_total_norm", "clip_grads_with_norm_")),
    ]
