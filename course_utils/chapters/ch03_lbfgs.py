"""Chapter 3: LBFGS, the optimizer that calls its closure. A closure must run the forward itself (one made outside
it backwards through a freed graph), and the optimizer's state carries its curvature history from one step() call
to the next."""
from __future__ import annotations

import inspect
import warnings

import torch
from torch import nn


def least_squares_problem(seed: int) -> tuple[torch.Tensor, torch.Tensor, nn.Linear]:
    """Least squares with an exact solution: y = X w* + b*, X of 64 × 5, a fresh Linear(5, 1) (also chapter 3's
    optimizer gallery)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(64, 5, generator=g)
    y = x @ torch.randn(5, 1, generator=g) + 0.5
    torch.manual_seed(seed)
    return x, y, nn.Linear(5, 1)


def lbfgs_closures() -> dict[str, str]:
    """LBFGS calls its closure several times per step; a closure that reuses a forward computed before it (only
    the loss and backward inside) backwards through the same graph again (chapter 3)."""
    out = {}
    for where in ("outside", "inside"):
        x, y, lin = least_squares_problem(0)
        opt = torch.optim.LBFGS(lin.parameters(), lr=1.0)
        pred = lin(x)

        def closure():
            opt.zero_grad()
            loss = nn.functional.mse_loss(lin(x) if where == "inside" else pred, y)
            loss.backward()
            return loss
        try:
            opt.step(closure)
            fell = nn.functional.mse_loss(lin(x), y).item() < 1e-3 * nn.functional.mse_loss(pred, y).item()
            result = f"ran; the loss fell below a thousandth of its start: {fell}"
        except RuntimeError as e:
            result = f"RuntimeError: {str(e).split(' (or ')[0].split('. ')[0]}"
        out[f"LBFGS, the forward {where} the closure"] = result
    return out


def lbfgs_calls(start: float = -1.5, dims: int = 6) -> dict[str, str]:
    """LBFGS on the Rosenbrock function from a far start (float64): one step(closure) with max_iter=200 against ten
    with max_iter=20, with and without its line search. The optimizer's state (the curvature history, the last
    direction and step) carries over from one call to the next, so the calls continue one run; each call begins by
    evaluating the closure once more. Final points compared bitwise (chapter 3)."""
    def rosenbrock(x: torch.Tensor) -> torch.Tensor:
        return ((1 - x[:-1]) ** 2).sum() + 100 * ((x[1:] - x[:-1] ** 2) ** 2).sum()

    out = {}
    for search in (None, "strong_wolfe"):
        ends = {}
        for calls, max_iter in ((1, 200), (10, 20)):
            x = torch.full((dims,), start, dtype=torch.float64, requires_grad=True)
            opt = torch.optim.LBFGS([x], lr=1, max_iter=max_iter, line_search_fn=search)

            def closure():
                opt.zero_grad()
                loss = rosenbrock(x)
                loss.backward()
                return loss
            for _ in range(calls):
                opt.step(closure)
            state = opt.state[x]
            ends[calls] = (x.detach().clone(), state["n_iter"], state["func_evals"], rosenbrock(x).item())
        (one, it1, ev1, f1), (ten, _, ev10, _) = ends[1], ends[10]
        out[f"LBFGS(line_search_fn={search!r}), 1 call of max_iter=200 against 10 of max_iter=20"] = (
            f"same final point: {torch.equal(one, ten)}; final loss below 1e-9: {f1 < 1e-9}; the ten calls evaluated "
            f"the closure more often: {ev10 > ev1}; the one call stopped before max_iter: {it1 < 200}")
    return out



def lbfgs_failed_search(seeds: int = 5, budgets: tuple[int, ...] = (1, 2, 25)) -> dict[str, str]:
    """LBFGS(line_search_fn="strong_wolfe", lr=0.01, max_iter=1) through its public step(), with `max_eval` closure
    calls allowed: the line search gets what is left of max_eval after the first call (torch.optim.LBFGS has no
    max_ls of its own; max_eval defaults to max_iter * 5 // 4, so 1 for max_iter=1). With one trial or two, the first
    step is too short for the strong Wolfe curvature condition and the search runs out of trials; it returns the
    lower of the starting point and its last trial, checked or not, and step() moves the parameters there, with no
    error, warning or flag. With 25 it finds a point that meets the condition. Counted over least-squares seeds."""
    out = {"max_ls among LBFGS's arguments": str("max_ls" in inspect.signature(torch.optim.LBFGS).parameters),
           "max_eval by default for max_iter=1": str(torch.optim.LBFGS([torch.zeros(1, requires_grad=True)],
                                                                       max_iter=1).defaults["max_eval"])}
    for budget in budgets:
        moved = fell = unchecked = silent = 0
        calls = set()
        for seed in range(seeds):
            x, y, lin = least_squares_problem(seed)
            opt = torch.optim.LBFGS(lin.parameters(), lr=0.01, max_iter=1, max_eval=budget,
                                    line_search_fn="strong_wolfe")

            def closure():
                opt.zero_grad()
                loss = nn.functional.mse_loss(lin(x), y)
                loss.backward()
                return loss
            start = closure().item()
            direction = -torch.cat([p.grad.flatten() for p in lin.parameters()])      # LBFGS's first direction
            before = [p.detach().clone() for p in lin.parameters()]
            with warnings.catch_warnings(record=True) as warned:
                warnings.simplefilter("always")
                opt.step(closure)
            end = closure().item()
            after = torch.cat([p.grad.flatten() for p in lin.parameters()])
            moved += any(not torch.equal(a, b) for a, b in zip(before, lin.parameters()))
            fell += end < start
            unchecked += abs(after @ direction).item() > 0.9 * abs(direction @ direction).item()   # c2 = 0.9
            silent += not warned
            calls.add(opt.state[opt._params[0]]["func_evals"])
        out[f"max_iter=1, max_eval={budget}"] = (
            f"parameters moved on {moved} of {seeds} seeds; the loss fell on {fell}; the new point fails the curvature "
            f"condition on {unchecked}; closure calls {'/'.join(map(str, sorted(calls)))}; no error, and no "
            f"warning on {silent}")
    return out
