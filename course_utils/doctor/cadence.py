"""A schedule's cadence against the loop's (chapters 0, 5, 7, 9): an epoch schedule stepped every batch, a
per-update schedule stepped once per epoch, judged from the schedule's length where its arguments say it
(a cosine's T_max, OneCycleLR's total_steps, a LambdaLR's horizon read from its lambda)."""
from __future__ import annotations

from torch.optim import lr_scheduler

from course_utils.doctor.report import Finding, finding

PER_UPDATE = (lr_scheduler.OneCycleLR, lr_scheduler.CyclicLR)   # documented as stepped after every batch


def schedule_cadence(doctor) -> list[Finding]:
    epochs, found = doctor.obs.epochs, []
    for scheduler, steps, track in doctor.schedulers.values():
        per_epoch = steps / epochs if epochs else None
        updates_per_epoch = track.updates / epochs if epochs and track is not None else None
        evidence = name = None
        if isinstance(scheduler, lr_scheduler.CosineAnnealingLR) and steps > scheduler.T_max and (
                per_epoch is None or per_epoch >= 2):
            name = "epoch_schedule_per_batch"
            evidence = (f"scheduler.step() ran {steps} times but CosineAnnealingLR's T_max is {scheduler.T_max}: the "
                        f"cosine reached its minimum after {scheduler.T_max} steps and climbed back up")
        elif per_epoch is not None and per_epoch >= 2:
            rate, name = f"{per_epoch:.3g} times per epoch", "epoch_schedule_per_batch"
            if isinstance(scheduler, lr_scheduler.StepLR) and scheduler.step_size < per_epoch:
                evidence = (f"StepLR(step_size={scheduler.step_size}) was stepped {rate}: it decayed every "
                            f"{scheduler.step_size} batches, not every {scheduler.step_size} epochs")
            elif isinstance(scheduler, lr_scheduler.MultiStepLR) and max(scheduler.milestones) < per_epoch:
                evidence = (f"MultiStepLR(milestones={sorted(scheduler.milestones)}) was stepped {rate}: every "
                            "milestone passed within the first epoch")
            elif isinstance(scheduler, lr_scheduler.PolynomialLR) and steps > scheduler.total_iters:
                evidence = (f"PolynomialLR(total_iters={scheduler.total_iters}) was stepped {rate}: the lr reached "
                            f"0 after {scheduler.total_iters} batches and stayed there for the other "
                            f"{steps - scheduler.total_iters} steps")
            elif isinstance(scheduler, lr_scheduler.ExponentialLR):
                evidence = f"ExponentialLR was stepped {rate}: the lr shrank by gamma every batch, not every epoch"
            elif (planned := _horizon(scheduler, EPOCH_HORIZONS)) is not None and steps > planned:
                evidence = (f"the LambdaLR's lambda counts epochs ({planned}), but it was stepped {rate}: it reached "
                            f"the end of its schedule after {planned} batches and went on past it ({steps} steps)")
        elif (per_epoch is not None and per_epoch <= 1.5 and updates_per_epoch is not None
              and updates_per_epoch >= 2 and (isinstance(scheduler, PER_UPDATE) or _horizon(scheduler)
                                              or _sized_in_updates(scheduler, track.updates, epochs))):
            name = "update_schedule_per_epoch"
            horizon = getattr(scheduler, "total_steps", None) or _horizon(scheduler) or _length(scheduler)
            evidence = (f"{type(scheduler).__name__} was stepped {per_epoch:.3g} times per epoch while the optimizer "
                        f"made {updates_per_epoch:.3g} updates per epoch: after {steps} of its "
                        f"{horizon or 'planned'} steps the schedule has barely started")
        elif not epochs and (early := _decayed_early(scheduler, steps)):
            name, evidence = "epoch_schedule_per_batch", early
        if evidence:
            found.append(finding(name, evidence))
    return found


def _decayed_early(scheduler: object, steps: int) -> str | None:
    """With no epoch ended (an infinite sampler, a loop counted in iterations: detectron2's), the cadence is read
    from the schedule alone: a MultiStepLR whose every milestone passed within the first tenth of its steps, or a
    StepLR that decayed ten times or more, counted epochs and was stepped per iteration (a schedule written for
    iterations puts its milestones late in the run: detectron2's 1x at 60,000 and 80,000 of 90,000)."""
    if steps < 10:
        return None
    if isinstance(scheduler, lr_scheduler.MultiStepLR) and max(scheduler.milestones) * 10 <= steps:
        return (f"MultiStepLR(milestones={sorted(scheduler.milestones)}) was stepped {steps} times and the loop ended "
                "no epoch: every milestone passed within the first tenth of the run, so they count epochs, and the "
                "schedule was stepped per iteration")
    if isinstance(scheduler, lr_scheduler.StepLR) and steps // scheduler.step_size >= 10:
        return (f"StepLR(step_size={scheduler.step_size}) was stepped {steps} times and the loop ended no epoch: it "
                f"decayed {steps // scheduler.step_size} times (the rate times gamma={scheduler.gamma} each time), "
                "as a step size counted in epochs does when stepped per iteration")
    return None


STEP_HORIZONS = ("num_training_steps", "total_steps", "num_train_steps", "max_steps", "total_iters_in_steps")
EPOCH_HORIZONS = ("epochs", "num_epochs", "max_epochs", "n_epochs", "total_epochs", "num_train_epochs")
PER_STEP_WORDS = ("step", "iter", "batch", "len", "loader")


def _horizon(scheduler: object, names: tuple[str, ...] = STEP_HORIZONS) -> int | None:
    """A LambdaLR's length counted in training steps (or, with EPOCH_HORIZONS, in epochs), when its lambda says so:
    a functools.partial or a closure with a `num_training_steps`-like argument (transformers'
    get_*_schedule_with_warmup builds one), or yolov5's `lambda x: (1 - x / epochs) * ...`."""
    lambdas = getattr(scheduler, "lr_lambdas", None) if isinstance(scheduler, lr_scheduler.LambdaLR) else None
    for fn in lambdas or ():
        named = dict(getattr(fn, "keywords", None) or {})
        code, cells = getattr(fn, "__code__", None), getattr(fn, "__closure__", None) or ()
        if code is not None:
            for name, cell in zip(code.co_freevars, cells):
                try:
                    named[name] = cell.cell_contents
                except ValueError:
                    continue
        if names is EPOCH_HORIZONS and any(part in key for key in named for part in PER_STEP_WORDS):
            continue               # `epochs * steps_per_epoch`: a lambda that counts epochs and steps counts steps
        for key in names:
            if isinstance(named.get(key), int) and not isinstance(named[key], bool) and named[key] > 0:
                return named[key]
    return None


def _length(scheduler: object) -> int | None:
    """How many step() calls a schedule was built for, where its arguments say: OneCycleLR's total_steps, a cosine's
    T_max, LinearLR's or PolynomialLR's total_iters, a LambdaLR's step horizon; a SequentialLR's last milestone
    plus its last schedule's length."""
    if isinstance(scheduler, lr_scheduler.SequentialLR):
        last = _length(scheduler._schedulers[-1])
        return scheduler._milestones[-1] + last if last and scheduler._milestones else last
    for name in ("total_steps", "T_max", "total_iters"):
        value = getattr(scheduler, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return _horizon(scheduler)


def _sized_in_updates(scheduler: object, updates: int, epochs: int) -> bool:
    """Was the schedule built for the run's updates, not its epochs? Its length is the number of updates the run
    made, or one epoch's (T_max=len(train_loader), as SimCLR's; a warmup over len(loader) * warm iterations, as
    weiaicunzai's CIFAR-100 WarmUpLR), within a tenth, and longer than the epochs the run made, by more than a
    tenth: a schedule counted in epochs is seldom longer than the run (litgpt: warmup then cosine over max_steps;
    the CIFAR-100 warmup: 391 iterations for 200 epochs, which the earlier rule, twice the epochs, missed)."""
    length = _length(scheduler)
    if not length or not epochs or length <= epochs + max(1, epochs // 10):
        return False
    return any(abs(length - n) <= max(1, n // 10) for n in (updates, round(updates / epochs)))
