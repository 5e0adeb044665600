"""Losses and files a learner meets in other people's code (chapter 3): ``LinearCrossEntropyLoss`` (a loss that owns
the output layer), ``TripletMarginLoss``'s ``p`` and ``eps``, the pre-0.4.1 ``size_average``/``reduce`` flags of
every loss that still takes them, ``NLLLoss2d`` and ``clip_grad_norm`` without the underscore; ``torch.save``'s
``pickle_protocol``, ``torch.load``'s ``mmap``, and the seeding calls that do not do what their name suggests.

Each result is an exact value, a comparison, or torch's own message; the global generator is left as found.
"""
from __future__ import annotations

import io
import pickle
import tempfile
import warnings
from pathlib import Path

import torch
from torch import nn

from course_utils.chapters.raised import raised


def linear_cross_entropy_rules() -> dict[str, object]:
    """nn.LinearCrossEntropyLoss against Linear + CrossEntropyLoss, its parameters and its options (chapter 3)."""
    state = torch.get_rng_state()
    torch.manual_seed(0)
    x = torch.randn(6, 5)
    y = torch.tensor([0, 3, 9, 2, 9, 7])
    head = nn.LinearCrossEntropyLoss(5, 10)
    out: dict[str, object] = {"its parameters": {n: list(p.shape) for n, p in head.named_parameters()}}
    body = nn.Linear(5, 5)
    optimizer = torch.optim.SGD(body.parameters(), lr=0.1)     # built from the model alone, as usual
    before = head.linear.weight.detach().clone()
    head(body(x), y).backward()
    optimizer.step()
    out["optimizer from model.parameters() only: the loss's weight changed by a step"] = not torch.equal(
        before, head.linear.weight)
    w = torch.rand(10)
    same = []
    for loss, reference in ((nn.LinearCrossEntropyLoss(5, 10, weight=w), nn.CrossEntropyLoss(weight=w)),
                            (nn.LinearCrossEntropyLoss(5, 10, ignore_index=9), nn.CrossEntropyLoss(ignore_index=9)),
                            (nn.LinearCrossEntropyLoss(5, 10, label_smoothing=0.1),
                             nn.CrossEntropyLoss(label_smoothing=0.1)),
                            (nn.LinearCrossEntropyLoss(5, 10, reduction="sum"), nn.CrossEntropyLoss(reduction="sum")),
                            (nn.LinearCrossEntropyLoss(5, 10, reduction="none"),
                             nn.CrossEntropyLoss(reduction="none"))):
        loss.linear.weight = head.linear.weight
        same.append(torch.allclose(loss(x, y), reference(head.linear(x), y)))
    out["weight, ignore_index, label_smoothing, reduction sum/none: = CrossEntropyLoss on its logits"] = same
    out["bias=True, out_features=(4,): parameter shapes"] = {
        n: list(p.shape) for n, p in nn.LinearCrossEntropyLoss(5, 10, out_features=(4,), bias=True).named_parameters()}
    wide = nn.LinearCrossEntropyLoss(5, 10, dtype=torch.float64, device="cpu")
    out["dtype=torch.float64 head, float32 input"] = raised(lambda: wide(x, y))
    chunked = nn.LinearCrossEntropyLoss(5, 10, options=nn.LinearCrossEntropyOptions())
    chunked.linear.weight = head.linear.weight
    out["options=LinearCrossEntropyOptions() (chunked): = the reference"] = torch.allclose(chunked(x, y), head(x, y))
    loss = chunked(x.requires_grad_(), y)
    loss.backward(retain_graph=True)
    out["chunked, a second backward with retain_graph=True"] = raised(loss.backward)
    for label, kwargs, options in (("allow_retain_graph=True", {}, {"allow_retain_graph": True}),
                                   ("reduction='none'", {"reduction": "none"}, {})):
        again = nn.LinearCrossEntropyLoss(5, 10, options=nn.LinearCrossEntropyOptions(**options), **kwargs)
        again.linear.weight = head.linear.weight
        value = again(x, y).sum()
        value.backward(retain_graph=True)
        out[f"chunked, {label}: a second backward"] = raised(value.backward)
    torch.set_rng_state(state)
    return out


def triplet_rules() -> dict[str, object]:
    """TripletMarginLoss's p (the distance) and eps (added before the norm) on one hand-made triplet (chapter 3)."""
    anchor, positive, negative = torch.tensor([[0.0, 0.0]]), torch.tensor([[3.0, 4.0]]), torch.tensor([[6.0, 0.0]])
    out: dict[str, object] = {}
    for p in (1.0, 2.0, float("inf")):
        loss = nn.TripletMarginLoss(margin=1.0, p=p)(anchor, positive, negative)
        out[f"p={p}: d(a, positive), d(a, negative), loss"] = (
            round(nn.PairwiseDistance(p=p, eps=0.0)(anchor, positive).item(), 4),
            round(nn.PairwiseDistance(p=p, eps=0.0)(anchor, negative).item(), 4), round(loss.item(), 4))
    a = torch.tensor([[1.0, 2.0]], requires_grad=True)
    for eps in (1e-6, 0.0):
        nn.TripletMarginLoss(margin=1.0, eps=eps)(a, a.detach().clone(), torch.tensor([[1.5, 2.0]])).backward()
        out[f"eps={eps}: positive = anchor, anchor's gradient"] = [round(v, 4) for v in a.grad[0].tolist()]
        a.grad = None
    return out


def legacy_loss_flags() -> dict[str, object]:
    """size_average and reduce (deprecated since 0.4.1) on every loss that still takes them; NLLLoss2d;
    clip_grad_norm (chapter 3)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = [
            nn.BCELoss(size_average=False), nn.BCELoss(reduce=False),
            nn.BCEWithLogitsLoss(size_average=False), nn.BCEWithLogitsLoss(reduce=False),
            nn.CosineEmbeddingLoss(size_average=False), nn.CosineEmbeddingLoss(reduce=False),
            nn.CrossEntropyLoss(size_average=False), nn.CrossEntropyLoss(reduce=False),
            nn.HingeEmbeddingLoss(size_average=False), nn.HingeEmbeddingLoss(reduce=False),
            nn.KLDivLoss(size_average=False), nn.KLDivLoss(reduce=False),
            nn.L1Loss(size_average=False), nn.L1Loss(reduce=False),
            nn.MSELoss(size_average=False), nn.MSELoss(reduce=False),
            nn.MarginRankingLoss(size_average=False), nn.MarginRankingLoss(reduce=False),
            nn.MultiLabelMarginLoss(size_average=False), nn.MultiLabelMarginLoss(reduce=False),
            nn.MultiLabelSoftMarginLoss(size_average=False), nn.MultiLabelSoftMarginLoss(reduce=False),
            nn.MultiMarginLoss(size_average=False), nn.MultiMarginLoss(reduce=False),
            nn.NLLLoss(size_average=False), nn.NLLLoss(reduce=False),
            nn.PoissonNLLLoss(size_average=False), nn.PoissonNLLLoss(reduce=False),
            nn.SmoothL1Loss(size_average=False), nn.SmoothL1Loss(reduce=False),
            nn.SoftMarginLoss(size_average=False), nn.SoftMarginLoss(reduce=False),
            nn.TripletMarginLoss(size_average=False), nn.TripletMarginLoss(reduce=False),
        ]
        pairs = list(zip(old[::2], old[1::2]))
        out: dict[str, object] = {
            "classes; size_average=False -> reduction, reduce=False -> reduction": (
                len(pairs), sorted({(a.reduction, b.reduction) for a, b in pairs}))}
        out["MSELoss(size_average=False, reduction='mean').reduction"] = nn.MSELoss(size_average=False,
                                                                                     reduction="mean").reduction
        out["MSELoss(size_average=True, reduce=False).reduction"] = nn.MSELoss(size_average=True,
                                                                                reduce=False).reduction
        error, target = torch.ones(8), torch.zeros(8)
        out["8 errors of 1: size_average=False's loss, the default's"] = (
            nn.MSELoss(size_average=False)(error, target).item(), nn.MSELoss()(error, target).item())
        scores = torch.randn(2, 3, 4, 4, generator=torch.Generator().manual_seed(0)).log_softmax(1)
        labels = torch.randint(0, 3, (2, 4, 4), generator=torch.Generator().manual_seed(1))
        out["NLLLoss2d() = NLLLoss() on (N, C, H, W), bit for bit"] = torch.equal(nn.NLLLoss2d()(scores, labels),
                                                                                   nn.NLLLoss()(scores, labels))
        params = [nn.Parameter(torch.zeros(2))]
        params[0].grad = torch.tensor([3.0, -4.0])
        total = nn.utils.clip_grad_norm(params, max_norm=1.0, norm_type=1.0, error_if_nonfinite=True, foreach=True)
        out["clip_grad_norm (no underscore), L1: norm returned, grad after (clipped in place all the same)"] = (
            total.item(), [round(v, 4) for v in params[0].grad.tolist()])
    out["the warnings"] = sorted({f"{w.category.__name__}: {w.message}".split(" and see ")[0] for w in caught})
    return out


class Note:
    """An object of the course's own class, as a checkpoint may hold (chapter 3)."""


def file_and_seed_rules() -> dict[str, object]:
    """torch.save(pickle_protocol) read back with weights_only, torch.load(mmap), torch.seed/initial_seed,
    torch.cuda.manual_seed_all on the CPU stream (chapter 3)."""
    state = {"w": torch.arange(6.0).reshape(2, 3), "step": 3}
    out: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
        warnings.simplefilter("ignore")          # protocol 4's load also warns; the error below says it all
        for protocol in (2, 4):
            path = Path(folder) / f"p{protocol}.pt"
            torch.save(state, path, pickle_protocol=protocol)
            try:
                back = torch.load(path, weights_only=True)
                out[f"save(pickle_protocol={protocol}), load(weights_only=True)"] = (
                    f"loads, equal: {torch.equal(back['w'], state['w'])}")
            except Exception as e:  # noqa: BLE001
                out[f"save(pickle_protocol={protocol}), load(weights_only=True)"] = (
                    f"{type(e).__name__}: " + next(line for line in str(e).splitlines() if "operand" in line))
        mapped = torch.load(Path(folder) / "p2.pt", mmap=True, weights_only=True)
        out["load(path, mmap=True): equal"] = torch.equal(mapped["w"], state["w"])
        buffer = io.BytesIO()
        torch.save(state, buffer)
        buffer.seek(0)
        out["load(BytesIO, mmap=True)"] = raised(lambda: torch.load(buffer, mmap=True, weights_only=True))
    noted = io.BytesIO()
    torch.save({"w": state["w"], "note": Note()}, noted, pickle_module=pickle)
    for name, load in (("load(default)", lambda f: torch.load(f)),
                       ("load(pickle_module=pickle)", lambda f: torch.load(f, pickle_module=pickle)),
                       ("load(pickle_module=pickle, weights_only=True)",
                        lambda f: torch.load(f, pickle_module=pickle, weights_only=True))):
        noted.seek(0)
        try:
            out[f"a file holding a class instance, {name}"] = f"loads a {type(load(noted)['note']).__name__}"
        except Exception as e:  # noqa: BLE001
            text = str(e)
            out[f"a file holding a class instance, {name}"] = f"{type(e).__name__}: " + (
                next((line.strip() for line in text.splitlines() if "Unsupported global" in line), text)
                .split(" was not")[0])
    saved = torch.get_rng_state()
    seed = torch.seed()
    out["torch.seed(): initial_seed() is the seed it drew; a second call draws another"] = (
        torch.initial_seed() == seed, torch.seed() != seed)
    torch.manual_seed(0)
    first = torch.rand(3)
    torch.manual_seed(5)
    torch.cuda.manual_seed_all(0)
    out["manual_seed(5) then torch.cuda.manual_seed_all(0): CPU draws = manual_seed(0)'s"] = torch.equal(
        first, torch.rand(3))
    torch.set_rng_state(saved)
    return out
