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



def lbfgs_failed_search(seeds: int = 5, limits: tuple[int, ...] = (1, 25)) -> dict[str, str]:
    """torch's LBFGS has no max_ls argument: its strong-Wolfe search may try 25 step lengths. The search itself
    (torch.optim.lbfgs._strong_wolfe, private) called as LBFGS.step calls it, at lr=0.01, allowed each of `limits`
    trials: with one, the first trial is too short for the curvature condition, the search extrapolates once, runs
    out of trials and returns the point of lowest loss it evaluated, unchecked, with no error or flag; step() then
    moves the parameters there. With its default 25 it finds a point that meets the condition. Counted over
    least-squares seeds (chapter 3)."""
    from torch.optim.lbfgs import _strong_wolfe

    default = inspect.signature(_strong_wolfe).parameters["max_ls"].default
    out = {"max_ls among LBFGS's arguments": (f"{'max_ls' in inspect.signature(torch.optim.LBFGS).parameters}; its "
                                              f"strong-Wolfe search tries at most {default} step lengths")}
    for max_ls in limits:
        moved = fell = unchecked = silent = stretched = 0
        for seed in range(seeds):
            x, y, lin = least_squares_problem(seed)
            opt = torch.optim.LBFGS(lin.parameters(), lr=0.01, line_search_fn="strong_wolfe")

            @torch.enable_grad()              # step() runs under no_grad and wraps the closure the same way
            def closure():
                opt.zero_grad()
                loss = nn.functional.mse_loss(lin(x), y)
                loss.backward()
                return loss
            with torch.no_grad(), warnings.catch_warnings(record=True) as warned:
                warnings.simplefilter("always")
                start = closure().item()
                g = opt._gather_flat_grad()
                d, t = g.neg(), 0.01 * min(1.0, 1.0 / g.abs().sum().item())   # LBFGS.step's first direction, t
                before = opt._clone_param()
                end, g_end, kept, _ = _strong_wolfe(lambda p, step, v: opt._directional_evaluate(closure, p, step, v),
                                                    before, t, d, start, g, g.dot(d), max_ls=max_ls)
                opt._add_grad(kept, d)                                     # as step() does with the search's t
            moved += any(not torch.equal(a, b) for a, b in zip(before, opt._clone_param()))
            fell += end < start
            unchecked += abs(g_end.dot(d)).item() > 0.9 * abs(g.dot(d)).item()   # strong Wolfe's curvature, c2 0.9
            stretched += 1 < kept / t <= 10
            silent += not warned
        out[f"its strong-Wolfe search with max_ls={max_ls}, lr=0.01"] = (
            f"parameters moved on {moved} of {seeds} seeds; the loss fell on {fell}; the point kept fails the "
            f"curvature condition on {unchecked}; the step kept was longer than the first trial and at most 10 "
            f"times it (one extrapolation) on {stretched}; no error, and no warning on {silent}; the search returns "
            "no flag, only (loss, gradient, step, evaluations)")
    return out
