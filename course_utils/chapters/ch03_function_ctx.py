"""Chapter 3: what a custom autograd Function's `ctx` holds. `save_for_backward` takes tensors only (torch
refuses anything else when the forward returns) and keeps the last call's; other values go on `ctx` as attributes;
a tensor saved through it is checked for in-place changes, one kept as an attribute is not; `needs_input_grad`
says which inputs require grad, not which gradients the caller asked for."""
from __future__ import annotations

import torch


class _Scale(torch.autograd.Function):
    """y = exp(2a): the intermediate 2a (not an output) saved one of two ways, chosen by `how` (a string on ctx)."""

    @staticmethod
    def forward(ctx, a, how):
        inner = 2 * a
        y = inner.exp()
        ctx.how = how                                      # a non-tensor: an attribute
        if how == "save_for_backward":
            ctx.save_for_backward(inner, y)
        else:
            ctx.inner, ctx.y = inner, y
        return y

    @staticmethod
    def backward(ctx, grad):
        inner, y = ctx.saved_tensors if ctx.how == "save_for_backward" else (ctx.inner, ctx.y)
        return grad * 2 * y, None


class _NonTensor(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a, 3)
        return a.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad


class _Twice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        ctx.save_for_backward(a * 3)
        return a.clone()

    @staticmethod
    def backward(ctx, grad):
        (saved,) = ctx.saved_tensors
        return grad * saved


class _Mul(torch.autograd.Function):
    seen: list = []

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        grads = (grad * b if ctx.needs_input_grad[0] else None), (grad * a if ctx.needs_input_grad[1] else None)
        _Mul.seen.append((ctx.needs_input_grad, grads[1] is not None))     # and whether b's gradient was computed
        return grads


def function_ctx_lines() -> list[str]:
    lines = []
    a = torch.ones(2, requires_grad=True)
    try:
        _NonTensor.apply(a)
        lines.append("save_for_backward(a, 3): accepted")
    except TypeError as error:
        lines.append(f"save_for_backward(a, 3): TypeError: {error}")
    a = torch.ones(2, requires_grad=True)
    _Twice.apply(a).sum().backward()
    lines.append(f"save_for_backward called twice (a, then a * 3): backward received a * 3: {a.grad.tolist() == [3.0, 3.0]}")
    reference = torch.zeros(2, requires_grad=True)
    (10 * (2 * reference).exp()).sum().backward()        # the same function by torch's own ops, no in-place change
    for how in ("save_for_backward", "attribute"):
        a = torch.zeros(2, requires_grad=True)
        y = _Scale.apply(a, how)
        y.mul_(10)                                       # the caller changes the output in place
        try:
            y.sum().backward()
            lines.append(f"intermediate and output kept as a ctx {how}, output then changed in place: gradient "
                         f"{a.grad.tolist()} (the true one: {reference.grad.tolist()})")
        except RuntimeError as error:
            lines.append(f"intermediate and output kept with {how}, output then changed in place: RuntimeError: "
                         f"{str(error).split(':')[0]}")
    a, b = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
    _Mul.seen.clear()
    torch.autograd.grad(_Mul.apply(a, b).sum(), a)
    torch.autograd.grad(_Mul.apply(a, b.detach()).sum(), a)
    (asked, computed), (detached, computed_detached) = _Mul.seen
    lines.append(f"autograd.grad(out, a) only: needs_input_grad {asked}, b's gradient computed: {computed}; with b "
                 f"detached: {detached}, computed: {computed_detached}")
    return lines
