"""Clipping's flags, the other optimizers on one problem over seeds, hooks, embedding rows and GradScaler's
knobs (chapter 3).

``clipping_rules`` clips known gradients ([3, -4] and [12]: L2 norm 13, L1 19, max 12). ``optimizer_gallery``
runs every built-in optimizer on one least-squares problem for 5 seeds and counts the runs whose loss falls
below a tenth of its start, with every run at least ``MARGIN`` times away from that line so the count is the
same on any CPU. ``optimizer_knobs`` covers parameter groups, maximize, foreach, step hooks and SparseAdam;
``scaler_knobs`` GradScaler's growth and backoff on the CPU. Results are booleans, counts and exact numbers.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import torch
from torch import nn
from torch.nn.utils import clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm

from course_utils.chapters.ch03_lbfgs import lbfgs_closures, least_squares_problem

MARGIN = 2.0        # every run's final/start loss ratio is at least this factor away from the 0.1 line


def _known_grads() -> list[nn.Parameter]:
    params = [nn.Parameter(torch.zeros(2)), nn.Parameter(torch.zeros(1))]
    params[0].grad = torch.tensor([3.0, -4.0])
    params[1].grad = torch.tensor([12.0])
    return params


def clipping_rules() -> dict[str, object]:
    """What clip_grad_norm_ returns for each norm_type, clip_grad_value_, NaN handling, the split form (chapter 3)."""
    out: dict[str, object] = {}
    for norm_type in (2.0, 1.0, math.inf):
        params = _known_grads()
        total = clip_grad_norm_(params, max_norm=1.0, norm_type=norm_type)
        after = get_total_norm([p.grad for p in params], norm_type=norm_type)
        out[f"norm_type={norm_type}: norm before, after"] = (total.item(), round(after.item(), 4))
    for max_norm in (0.0, -1.0):                  # torch checks neither: 0 wipes the gradients, -1 turns them round
        params = _known_grads()
        clip_grad_norm_(params, max_norm=max_norm)
        out[f"max_norm={max_norm}: grads after clipping"] = [[round(g, 4) + 0.0 for g in p.grad.tolist()]
                                                             for p in params]
    params = _known_grads()
    clip_grad_value_(params, clip_value=5.0, foreach=True)
    out["clip_grad_value_(5): grads"] = [p.grad.tolist() for p in params]
    params = _known_grads()
    params[1].grad = torch.tensor([float("nan")])
    out["NaN grad, default: returned norm is NaN"] = bool(clip_grad_norm_(params, 1.0).isnan())
    out["NaN grad, default: every grad NaN after clipping"] = all(bool(p.grad.isnan().all()) for p in params)
    try:
        clip_grad_norm_(_known_grads()[:1] + [params[1]], 1.0, error_if_nonfinite=True)
        out["NaN grad, error_if_nonfinite=True"] = "nothing"
    except RuntimeError as e:
        out["NaN grad, error_if_nonfinite=True"] = type(e).__name__
    try:
        get_total_norm([params[1].grad], error_if_nonfinite=True, foreach=False)
        out["get_total_norm(error_if_nonfinite=True) on NaN"] = "nothing"
    except RuntimeError as e:
        out["get_total_norm(error_if_nonfinite=True) on NaN"] = type(e).__name__
    torch.manual_seed(0)
    grads = [torch.randn(50, 20), torch.randn(20)]
    runs = []
    for split, foreach in ((False, False), (False, True), (True, True)):
        params = [nn.Parameter(torch.zeros_like(g)) for g in grads]
        for p, g in zip(params, grads):
            p.grad = g.clone()
        if split:
            total = get_total_norm([p.grad for p in params], norm_type=2.0, foreach=True)
            clip_grads_with_norm_(params, max_norm=1.0, total_norm=total, foreach=True)
        else:
            total = clip_grad_norm_(params, max_norm=1.0, foreach=foreach)
        runs.append((total, [p.grad for p in params]))

    def same(a, b) -> bool:
        return torch.equal(a[0], b[0]) and all(torch.equal(x, y) for x, y in zip(a[1], b[1]))

    out["foreach=True = foreach=False, bit for bit"] = same(runs[0], runs[1])
    out["get_total_norm + clip_grads_with_norm_ = clip_grad_norm_, bit for bit"] = same(runs[1], runs[2])
    return out


def optimizers() -> dict[str, Callable[[Iterable[torch.Tensor]], torch.optim.Optimizer]]:
    """name -> a builder of that optimizer at a learning rate that suits the problem (chapter 3)."""
    return {
        "SGD(nesterov=True)": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True),
        "NAdam": lambda p: torch.optim.NAdam(p, lr=0.05),
        "RAdam": lambda p: torch.optim.RAdam(p, lr=0.1),
        "RMSprop": lambda p: torch.optim.RMSprop(p, lr=0.02),
        "Adagrad": lambda p: torch.optim.Adagrad(p, lr=0.5),
        "Adadelta": lambda p: torch.optim.Adadelta(p, lr=1.0),
        "Adamax": lambda p: torch.optim.Adamax(p, lr=0.05),
        "ASGD": lambda p: torch.optim.ASGD(p, lr=0.05),
        "Rprop": lambda p: torch.optim.Rprop(p, lr=0.01),
        "Adafactor": lambda p: torch.optim.Adafactor(p, lr=1.0),
        "LBFGS": lambda p: torch.optim.LBFGS(p, lr=1.0, max_iter=10),
    }


def optimizer_run(name: str, seed: int, steps: int = 50) -> float:
    """The final loss over the starting loss after `steps` steps (LBFGS: 5 calls of step(closure))."""
    x, y, model = least_squares_problem(seed)
    optimizer = optimizers()[name](model.parameters())

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss

    with torch.no_grad():
        start = nn.functional.mse_loss(model(x), y).item()
    for _ in range(5 if name.startswith("LBFGS") else steps):
        optimizer.step(closure=closure)
    with torch.no_grad():
        return nn.functional.mse_loss(model(x), y).item() / start


def optimizer_gallery(seeds=range(5)) -> dict[str, tuple[int, bool]]:
    """name -> (runs below a tenth of the starting loss, every run at least MARGIN× from that line)."""
    out = {}
    for name in optimizers():
        ratios = [optimizer_run(name, s) for s in seeds]
        clear = all(r < 0.1 / MARGIN or r > 0.1 * MARGIN for r in ratios)
        out[name] = (sum(r < 0.1 for r in ratios), clear)
    return out


def optimizer_knobs() -> dict[str, object]:
    """Parameter groups, add_param_group, maximize, foreach, step hooks, SparseAdam (chapter 3)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 1), nn.Linear(1, 1))
    optimizer = torch.optim.SGD([{"params": model[0].parameters(), "lr": 0.1},
                                 {"params": model[1].parameters()}], lr=0.01)
    out: dict[str, object] = {"param_groups and their lr": [g["lr"] for g in optimizer.param_groups]}
    optimizer.add_param_group({"params": model[2].parameters(), "lr": 0.001})
    out["after add_param_group"] = [g["lr"] for g in optimizer.param_groups]
    calls = {"pre": 0, "post": 0}
    pre = optimizer.register_step_pre_hook(lambda opt, args, kwargs: calls.__setitem__("pre", calls["pre"] + 1))
    optimizer.register_step_post_hook(lambda opt, args, kwargs: calls.__setitem__("post", calls["post"] + 1))
    x = torch.ones(8, 3)
    for i in range(3):
        if i == 2:
            pre.remove()
        optimizer.zero_grad()
        model(x).pow(2).mean().backward()
        optimizer.step()
    out["3 steps, pre hook removed before the third: pre, post calls"] = (calls["pre"], calls["post"])
    for maximize in (False, True):
        x, y, lin = least_squares_problem(0)
        opt = torch.optim.Adam(lin.parameters(), lr=0.01, maximize=maximize)
        losses = []
        for _ in range(5):
            opt.zero_grad()
            loss = nn.functional.mse_loss(lin(x), y)
            losses.append(loss.item())
            loss.backward()
            opt.step()
        pairs = list(zip(losses, losses[1:]))
        out[f"Adam(maximize={maximize}): the loss over 5 steps"] = (
            "rose every step" if all(b > a for a, b in pairs) else
            "fell every step" if all(b < a for a, b in pairs) else "went both ways")
    weights = []
    for foreach in (False, True):
        x, y, lin = least_squares_problem(1)
        opt = torch.optim.Adam(lin.parameters(), lr=0.01, foreach=foreach)
        for _ in range(10):
            opt.zero_grad()
            nn.functional.mse_loss(lin(x), y).backward()
            opt.step()
        weights.append(lin.weight.detach())
    out["Adam foreach=False vs True after 10 steps: max |difference| < 1e-6"] = (
        (weights[0] - weights[1]).abs().max().item() < 1e-6)
    layer = nn.Linear(5, 3)
    for label, params in (("all of a Linear's parameters (bias 1-D)", layer.parameters()),
                          ("the weight matrix only", [layer.weight])):
        try:
            torch.optim.Muon(params, lr=0.02)
            out[f"Muon on {label}"] = "builds"
        except ValueError as e:
            out[f"Muon on {label}"] = type(e).__name__
    dense = nn.Embedding(10, 3)
    sparse = nn.Embedding(10, 3, sparse=True)
    for label, emb in (("dense", dense), ("sparse=True", sparse)):
        opt = torch.optim.SparseAdam(emb.parameters(), lr=0.1)
        emb(torch.tensor([1, 2])).sum().backward()
        try:
            opt.step()
            out[f"SparseAdam on a {label} Embedding's grad"] = "steps"
        except RuntimeError as e:
            out[f"SparseAdam on a {label} Embedding's grad"] = type(e).__name__
    out.update(lbfgs_closures())
    return out


def unused_rows() -> dict[str, bool]:
    """Embedding rows 1 and 2 used by step 1, row 3 alone by step 2: does step 2 move row 1 (zero gradient)?"""
    out = {}
    for label, sparse, make in (("SGD", False, lambda p: torch.optim.SGD(p, lr=0.1)),
                                ("SGD momentum 0.9", False, lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)),
                                ("Adam", False, lambda p: torch.optim.Adam(p, lr=0.1)),
                                ("SparseAdam, Embedding(sparse=True)", True, lambda p: torch.optim.SparseAdam(p, lr=0.1))):
        torch.manual_seed(0)
        emb = nn.Embedding(5, 3, sparse=sparse)
        optimizer = make(list(emb.parameters()))
        for rows in ([1, 2], [3]):
            optimizer.zero_grad()
            emb(torch.tensor(rows)).pow(2).sum().backward()
            before = emb.weight.detach().clone()
            optimizer.step()
        out[f"{label}: a step whose batch does not use row 1 moves row 1"] = \
            not torch.equal(emb.weight.detach()[1], before[1])
    return out


def tied_sparse_rows(vocab: int = 10) -> dict[str, str]:
    """An Embedding(sparse=True) alone, and tied to an output Linear (one Parameter, as weight-sharing language
    models do): the rows its gradient touches, its layout, and what SparseAdam says (chapter 3)."""
    out = {}
    for tied in (False, True):
        torch.manual_seed(0)
        emb = nn.Embedding(vocab, 4, sparse=True)
        head = nn.Linear(4, vocab, bias=False)
        if tied:
            head.weight = emb.weight
        hidden = emb(torch.tensor([[1, 2, 3]]))
        (head(hidden) if tied else hidden).sum().backward()
        grad = emb.weight.grad
        rows = int((grad.to_dense() if grad.is_sparse else grad).abs().sum(1).gt(0).sum())
        try:
            torch.optim.SparseAdam([emb.weight], lr=0.1).step()
            said = "steps"
        except RuntimeError as error:
            said = f"RuntimeError: {error}"
        out["tied to the output layer" if tied else "alone"] = (f"rows with a gradient {rows} of {vocab}, sparse: "
                                                               f"{grad.is_sparse}; SparseAdam: {said}")
    return out


def scaler_knobs() -> dict[str, object]:
    """GradScaler on the CPU: backoff after an inf, growth after growth_interval clean steps, the setters; and
    autocast on the CPU (chapter 3)."""
    w = nn.Parameter(torch.ones(2))
    optimizer = torch.optim.SGD([w], lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_factor=2.0, backoff_factor=0.5,
                                  growth_interval=3)
    out: dict[str, object] = {"init": scaler.get_scale()}
    scales = []
    for overflow in (True, False, False, False):
        optimizer.zero_grad()
        scaler.scale((w * (math.inf if overflow else 1.0)).sum()).backward()
        before = w.detach().clone()
        scaler.step(optimizer)
        scaler.update()
        scales.append(scaler.get_scale())
        if overflow:
            out["step with an inf grad skipped (weights unchanged)"] = torch.equal(before, w.detach())
    out["scale after the inf step, then after 3 clean steps"] = scales
    out["get_growth_factor, get_backoff_factor, get_growth_interval"] = (
        scaler.get_growth_factor(), scaler.get_backoff_factor(), scaler.get_growth_interval())
    scaler.set_growth_factor(4.0)
    scaler.set_backoff_factor(0.25)
    scaler.set_growth_interval(1)
    out["after the setters"] = (scaler.get_growth_factor(), scaler.get_backoff_factor(),
                                scaler.get_growth_interval())
    scaler.scale(w.sum())
    scaler.update(new_scale=8.0)
    out["update(new_scale=8.0)"] = scaler.get_scale()
    for unscaled in (False, True):                   # clip_grad_norm_(max_norm=1) with a scale of 1024
        w = nn.Parameter(torch.zeros(2))
        optimizer = torch.optim.SGD([w], lr=1.0)
        scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
        scaler.scale(torch.tensor([3.0, 4.0]).dot(w)).backward()      # the true gradient [3, 4], norm 5
        if unscaled:
            scaler.unscale_(optimizer)
        clip_grad_norm_([w], max_norm=1.0)
        scaler.step(optimizer)
        out[f"clip to 1 {'after' if unscaled else 'before'} scaler.unscale_(): the step's norm"] = round(
            w.detach().norm().item(), 6)
    out["is_autocast_available('cpu')"] = torch.amp.is_autocast_available("cpu")
    with torch.amp.autocast("cpu", dtype=torch.bfloat16, cache_enabled=False):
        out["autocast('cpu', bfloat16, cache_enabled=False): a Linear's output dtype"] = str(
            nn.Linear(2, 2)(torch.ones(1, 2)).dtype)
    return out


def sam_clip_placement(max_norm: float = 0.05, rho: float = 0.05, seed: int = 0) -> dict[str, bool]:
    """Sharpness-aware minimisation's two passes, written out (chapter 3): the first gradient only sets the
    direction of a perturbation e = rho * g / ||g||, the second, taken at w + e, makes the update. Where does
    clip_grad_norm_ act? A clip before the first step rescales g by a positive factor, which the division by its
    norm undoes; before the second it changes the update."""
    def run(clip_first: bool, clip_second: bool) -> tuple[torch.Tensor, torch.Tensor]:
        torch.manual_seed(seed)
        model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
        x, y = torch.randn(16, 4), torch.randn(16, 1)
        params = list(model.parameters())
        nn.functional.mse_loss(model(x), y).backward()
        if clip_first:
            nn.utils.clip_grad_norm_(params, max_norm)
        norm = torch.sqrt(sum((p.grad ** 2).sum() for p in params))
        with torch.no_grad():
            e = [rho * p.grad / norm for p in params]            # first_step: climb to w + e
            for p, ei in zip(params, e):
                p.add_(ei)
        model.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        if clip_second:
            nn.utils.clip_grad_norm_(params, max_norm)
        with torch.no_grad():                                     # second_step: back to w, then SGD with lr 0.1
            for p, ei in zip(params, e):
                p.sub_(ei).sub_(0.1 * p.grad)
        return torch.cat([ei.flatten() for ei in e]), torch.cat([p.detach().flatten() for p in params])

    e0, w0 = run(False, False)
    e1, w1 = run(True, False)
    _, w2 = run(False, True)
    return {"clip before first_step: the perturbation unchanged": bool(torch.allclose(e0, e1)),
            "clip before first_step: the update unchanged": bool(torch.allclose(w0, w1)),
            "clip before second_step: the update unchanged": bool(torch.allclose(w0, w2))}


def sam_with_scaler(max_norm: float = 0.05, rho: float = 0.05, seed: int = 0) -> dict[str, object]:
    """SAM's two passes under a GradScaler (chapter 3). The scaler allows one unscale_ per optimizer per update, and
    SAM wants gradients twice. The first pass needs no unscaling: its gradient only sets a direction, g / ||g||,
    and the scale cancels (an inf or NaN still has to be caught: the scaler's own check, in the second pass, skips
    the update). The second pass is the usual scaled step: unscale_, clip, scaler.step, update. Compared with the
    same two passes without a scaler."""
    def run(scaler, unscale_first: bool = False) -> torch.Tensor:
        torch.manual_seed(seed)
        model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
        x, y = torch.randn(16, 4), torch.randn(16, 1)
        params = list(model.parameters())
        optimizer = torch.optim.SGD(params, lr=0.1)
        scale = scaler.scale if scaler else (lambda loss: loss)
        scale(nn.functional.mse_loss(model(x), y)).backward()
        if scaler and unscale_first:
            scaler.unscale_(optimizer)
        norm = torch.sqrt(sum((p.grad ** 2).sum() for p in params))
        with torch.no_grad():
            e = [rho * p.grad / norm for p in params]            # first_step: climb to w + e (scale cancels)
            for p, ei in zip(params, e):
                p.add_(ei)
        optimizer.zero_grad()
        scale(nn.functional.mse_loss(model(x), y)).backward()
        with torch.no_grad():
            for p, ei in zip(params, e):                          # back to w before the real update
                p.sub_(ei)
        if scaler:
            scaler.unscale_(optimizer)
        nn.utils.clip_grad_norm_(params, max_norm)
        if scaler:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        return torch.cat([p.detach().flatten() for p in params])

    plain = run(None)
    scaled = run(torch.amp.GradScaler("cpu", init_scale=2.0 ** 16))
    out: dict[str, object] = {
        "first pass on the scaled gradient, second pass unscale_ + clip + scaler.step: the same update as without a "
        "scaler": bool(torch.allclose(plain, scaled, atol=1e-6))}
    try:
        run(torch.amp.GradScaler("cpu", init_scale=2.0 ** 16), unscale_first=True)
        out["unscale_ in both passes"] = "ran"
    except RuntimeError as exc:
        out["unscale_ in both passes"] = f"RuntimeError: {exc}"
    return out
