"""The other ``torch.optim.lr_scheduler`` classes (chapter 7, after the gallery): the LR of each epoch, and each one's trap.

Every curve comes from a real scheduler stepped once per epoch on an SGD optimizer with lr 0.1 (CyclicLR, an
update scheduler, is stepped the same way here: one step = one update). The values are products and sums of
Python floats, the same on every machine.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch.optim import lr_scheduler as ls

LR = 0.1
EPOCHS = 8


def _optimizer(momentum: float = 0.9) -> torch.optim.SGD:
    return torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=LR, momentum=momentum)


def schedulers() -> dict[str, tuple[str, Callable[[torch.optim.Optimizer], object]]]:
    """name -> (how it is built, a builder taking the optimizer) for the schedulers of this table (chapter 7)."""
    return {
        "LambdaLR": ("LambdaLR(opt, lambda e: 0.9)", lambda o: ls.LambdaLR(o, lr_lambda=lambda e: 0.9)),
        "MultiplicativeLR": ("MultiplicativeLR(opt, lambda e: 0.9)",
                             lambda o: ls.MultiplicativeLR(o, lr_lambda=lambda e: 0.9)),
        "ExponentialLR": ("ExponentialLR(opt, gamma=0.8)", lambda o: ls.ExponentialLR(o, gamma=0.8)),
        "MultiStepLR": ("MultiStepLR(opt, milestones=[2, 5], gamma=0.1)",
                        lambda o: ls.MultiStepLR(o, milestones=[2, 5], gamma=0.1)),
        "ConstantLR": ("ConstantLR(opt, factor=0.5, total_iters=3)",
                       lambda o: ls.ConstantLR(o, factor=0.5, total_iters=3)),
        "LinearLR": ("LinearLR(opt, start_factor=0.25, total_iters=3)",
                     lambda o: ls.LinearLR(o, start_factor=0.25, end_factor=1.0, total_iters=3)),
        "PolynomialLR": ("PolynomialLR(opt, total_iters=4, power=2)",
                         lambda o: ls.PolynomialLR(o, total_iters=4, power=2.0)),
        "SequentialLR": ("SequentialLR(opt, [LinearLR(3 epochs), ExponentialLR(0.8)], milestones=[3])",
                         lambda o: ls.SequentialLR(o, schedulers=[
                             ls.LinearLR(o, start_factor=0.25, total_iters=3), ls.ExponentialLR(o, gamma=0.8)],
                             milestones=[3])),
        "ChainedScheduler": ("ChainedScheduler([ConstantLR(0.5, 3), ExponentialLR(0.8)])",
                             lambda o: ls.ChainedScheduler([ls.ConstantLR(o, factor=0.5, total_iters=3),
                                                            ls.ExponentialLR(o, gamma=0.8)])),
        "CyclicLR": ("CyclicLR(opt, base_lr=0.01, max_lr=0.1, step_size_up=2)",
                     lambda o: ls.CyclicLR(o, base_lr=0.01, max_lr=LR, step_size_up=2)),
    }


def lr_curve(name: str, epochs: int = EPOCHS) -> list[float]:
    """The LR each epoch uses under scheduler `name`, stepped after every epoch (chapter 7)."""
    optimizer = _optimizer()
    scheduler = schedulers()[name][1](optimizer)
    lrs = []
    for _ in range(epochs):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return lrs


def traps() -> dict[str, object]:
    """The behaviours these schedulers are known to surprise with, each checked (chapter 7)."""
    out: dict[str, object] = {}
    mult, lam = lr_curve("MultiplicativeLR"), lr_curve("LambdaLR")
    out["same lambda: LambdaLR stays at 0.09, MultiplicativeLR compounds"] = (
        len({round(v, 12) for v in lam[1:]}) == 1 and mult[-1] < mult[1])
    const = lr_curve("ConstantLR")
    out["ConstantLR jumps back to the full LR at epoch 3"] = round(const[2], 9) == LR * 0.5 and round(const[3], 9) == LR
    out["PolynomialLR stays at 0 after total_iters"] = all(v == 0 for v in lr_curve("PolynomialLR")[4:])
    no_momentum = _optimizer(momentum=0.0)
    ls.CyclicLR(no_momentum, base_lr=0.01, max_lr=LR)
    out["CyclicLR turns SGD's momentum 0 into"] = no_momentum.param_groups[0]["momentum"]
    try:
        ls.CyclicLR(torch.optim.Adagrad([torch.zeros(1, requires_grad=True)], lr=LR), base_lr=0.01, max_lr=LR)
        out["CyclicLR on Adagrad (no momentum to cycle)"] = "accepted"
    except ValueError as err:
        out["CyclicLR on Adagrad (no momentum to cycle)"] = type(err).__name__
    plain = _optimizer(momentum=0.0)
    ls.CyclicLR(plain, base_lr=0.01, max_lr=LR, cycle_momentum=False)
    out["CyclicLR overwrites the optimizer's lr with base_lr"] = plain.param_groups[0]["lr"] == 0.01
    return out
