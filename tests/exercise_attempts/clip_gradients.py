"""Attempts at Exercise 7.4, clip_gradients(parameters, max_norm) -> the norm before clipping, a float."""
import math

import torch


def right_list_first(parameters, max_norm):
    """Materialise the iterable once (it may be a generator), then norm and scale in place."""
    grads = [p.grad for p in parameters if p.grad is not None]
    total = math.sqrt(sum(float(g.detach().double().pow(2).sum()) for g in grads))
    if total > max_norm:
        for g in grads:
            g.mul_(max_norm / total)
    return total


def right_stacked_norms(parameters, max_norm):
    """torch: the norm of the per-tensor norms, then one _foreach_mul_ by the factor."""
    grads = [p.grad for p in list(parameters) if p.grad is not None]
    if not grads:
        return 0.0
    total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.double()) for g in grads]))
    if total > max_norm:
        torch._foreach_mul_(grads, (max_norm / total).item())
    return total.item()


def wrong_iterates_twice(parameters, max_norm):
    """Two passes over `parameters`: given model.parameters() (a generator) the second pass is empty, nothing clipped."""
    total = math.sqrt(sum(p.grad.pow(2).sum().item() for p in parameters if p.grad is not None))
    if total > max_norm:
        for p in parameters:
            if p.grad is not None:
                p.grad.mul_(max_norm / total)
    return total


def wrong_per_parameter(parameters, max_norm):
    """Clips each gradient to max_norm on its own: two gradients of norm 3 and 4, max_norm 4, are left as they are."""
    norms = []
    for p in parameters:
        if p.grad is None:
            continue
        n = p.grad.norm().item()
        norms.append(n)
        if n > max_norm:
            p.grad.mul_(max_norm / n)
    return math.sqrt(sum(n * n for n in norms))


def wrong_rebinds_grad(parameters, max_norm):
    """p.grad = p.grad * factor: a new tensor, not in place: a reference held to the old .grad is not clipped."""
    params = [p for p in parameters if p.grad is not None]
    total = math.sqrt(sum(p.grad.pow(2).sum().item() for p in params))
    if total > max_norm:
        for p in params:
            p.grad = p.grad * (max_norm / total)
    return total


def wrong_scales_local_name(parameters, max_norm):
    """g = g * factor rebinds the loop variable only: no gradient changes, any norm above max_norm."""
    grads = [p.grad for p in parameters if p.grad is not None]
    total = math.sqrt(sum(g.pow(2).sum().item() for g in grads))
    if total > max_norm:
        for g in grads:
            g = g * (max_norm / total)  # noqa: F841
    return total


def wrong_returns_clipped_norm(parameters, max_norm):
    """Returns the norm after clipping: max_norm whenever it clipped, not the norm before."""
    grads = [p.grad for p in parameters if p.grad is not None]
    total = math.sqrt(sum(g.pow(2).sum().item() for g in grads))
    if total > max_norm:
        for g in grads:
            g.mul_(max_norm / total)
        total = max_norm
    return total


def wrong_sum_of_norms(parameters, max_norm):
    """Adds the per-tensor norms instead of their squares: norms 3 and 4 give 7, not 5."""
    grads = [p.grad for p in parameters if p.grad is not None]
    total = sum(g.norm().item() for g in grads)
    if total > max_norm:
        for g in grads:
            g.mul_(max_norm / total)
    return total


def wrong_always_scales(parameters, max_norm):
    """Scales by max_norm / norm unconditionally: small gradients (norm 1, max_norm 5) are blown up 5x."""
    grads = [p.grad for p in parameters if p.grad is not None]
    total = math.sqrt(sum(g.pow(2).sum().item() for g in grads))
    for g in grads:
        g.mul_(max_norm / total)
    return total


def wrong_no_none_skip(parameters, max_norm):
    """Forgets to skip grad None: a frozen or unused parameter raises AttributeError."""
    params = list(parameters)
    total = math.sqrt(sum(p.grad.pow(2).sum().item() for p in params))
    if total > max_norm:
        for p in params:
            p.grad.mul_(max_norm / total)
    return total


def wrong_returns_tensor(parameters, max_norm):
    """Returns the norm as a 0-d tensor, not a float: any input."""
    grads = [p.grad for p in parameters if p.grad is not None]
    total = torch.sqrt(sum((g ** 2).sum() for g in grads))
    if total > max_norm:
        for g in grads:
            g.mul_(max_norm / total)
    return total
