"""Where a stuck loss sits: each of torch's losses on the output of a model that learned nothing (chapter 7).

A loss that stops at one value and stays there is often sitting exactly on the value of a trivial solution: equal
logits, the label frequencies, the targets' mean, every embedding the same. Each row computes one such value with
torch's own loss module on fixed reference targets, and beside it the closed form computed without torch, so
the table is a lookup from a number in a log to what the model is doing. Every ``_Loss`` subclass ``torch.nn``
exports has a row (the tests hold the table to that list; ``AdaptiveLogSoftmaxWithLoss``, a Module with an output of
its own, is not one). Values are sums of a few exact terms, the same on every machine.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

CLASSES = 10
FREQUENCIES = (0.4, 0.3, 0.2, 0.1)          # the label frequencies of the prior row
N = 1000


@dataclass(frozen=True)
class StuckRow:
    loss: str
    output: str          # what the model outputs
    value: float         # torch's loss on it
    closed: float        # the same value, without torch
    form: str            # the closed form, in words
    reads: str           # what a loss sitting there means


def _labels(frequencies=FREQUENCIES, n: int = N) -> torch.Tensor:
    return torch.cat([torch.full((round(f * n),), c) for c, f in enumerate(frequencies)])


def _standardised(n: int = N) -> torch.Tensor:
    """Fixed regression targets with mean 0 and (population) variance 1, exactly in float64."""
    y = torch.linspace(-1.0, 1.0, n, dtype=torch.float64)
    return ((y - y.mean()) / y.std(unbiased=False)).float()


def _entropy(frequencies) -> float:
    return -sum(f * math.log(f) for f in frequencies)


def _ctc_paths(target_length: int, frames: int) -> int:
    """How many frame-by-frame paths of CTC (blanks, repeats) spell a target of distinct symbols: the count behind
    the uniform output's loss, by the forward recursion over the blank-extended target."""
    states = 2 * target_length + 1
    count = [1, 1] + [0] * (states - 2)
    for _ in range(frames - 1):
        count = [count[s] + (count[s - 1] if s >= 1 else 0) + (count[s - 2] if s >= 2 and s % 2 else 0)
                 for s in range(states)]
    return count[-1] + count[-2]


def _classification() -> list[StuckRow]:
    labels = _labels()
    c, k = CLASSES, len(FREQUENCIES)
    equal = torch.zeros(N, c)
    prior = torch.tensor(FREQUENCIES).log().expand(N, k)
    targets = torch.randint(c, (N,), generator=torch.Generator().manual_seed(0))
    head = nn.LinearCrossEntropyLoss(8, c)
    nn.init.zeros_(head.linear.weight)
    multi = torch.zeros(N, c)
    multi[:, :3] = 1.0                                      # three positive labels of ten
    multilabel = torch.full((N, c), -1, dtype=torch.long)
    multilabel[:, :3] = torch.arange(3)
    sign = torch.where(torch.arange(N) % 10 == 0, 1.0, -1.0)
    rate = 0.1
    return [
        StuckRow("CrossEntropyLoss", f"equal logits, {c} classes", nn.CrossEntropyLoss()(equal, targets).item(),
                 math.log(c), f"log {c}", "outputs pinned equal (a fresh or dead last layer); with balanced labels "
                 "also a model that learned only the frequencies"),
        StuckRow("CrossEntropyLoss", "log of the label frequencies " + "/".join(f"{f:g}" for f in FREQUENCIES),
                 nn.CrossEntropyLoss()(prior, labels).item(), _entropy(FREQUENCIES),
                 "entropy of the labels", "learned the label frequencies, nothing from the inputs"),
        StuckRow("NLLLoss (and NLLLoss2d)", "log_softmax of equal logits",
                 nn.NLLLoss()(F.log_softmax(equal, 1), targets).item(), math.log(c), f"log {c}", "no information"),
        StuckRow("LinearCrossEntropyLoss", "a zero weight: equal logits", head(torch.randn(N, 8), targets).item(),
                 math.log(c), f"log {c}", "no information"),
        StuckRow("BCEWithLogitsLoss", "logit 0", nn.BCEWithLogitsLoss()(torch.zeros(N), (sign > 0).float()).item(),
                 math.log(2), "log 2", "no information about any label"),
        StuckRow("BCEWithLogitsLoss", f"logit log(p/(1-p)), positives' share p = {rate:g}",
                 nn.BCEWithLogitsLoss()(torch.full((N,), math.log(rate / (1 - rate))), (sign > 0).float()).item(),
                 _entropy((rate, 1 - rate)), "entropy of the positive rate", "learned the positive rate only"),
        StuckRow("BCELoss", "probability 0.5", nn.BCELoss()(torch.full((N,), 0.5), (sign > 0).float()).item(),
                 math.log(2), "log 2", "no information"),
        StuckRow("MultiLabelSoftMarginLoss", "logits 0", nn.MultiLabelSoftMarginLoss()(torch.zeros(N, c),
                 multi).item(), math.log(2), "log 2", "no information about any label"),
        StuckRow("SoftMarginLoss", "output 0", nn.SoftMarginLoss()(torch.zeros(N), sign).item(), math.log(2),
                 "log 2", "no information"),
        StuckRow("BCEWithLogitsLoss (sigmoid x2)", f"perfect probabilities fed as logits (positives {rate:g})",
                 nn.BCEWithLogitsLoss()(torch.sigmoid(torch.where(sign > 0, 50.0, -50.0)), (sign > 0).float()).item(),
                 rate * math.log(1 + math.exp(-1)) + (1 - rate) * math.log(2),
                 "p·log(1 + 1/e) + (1 − p)·log 2", "every prediction right, yet no lower: drop the sigmoid"),
        StuckRow("CrossEntropyLoss (softmax x2)", f"perfect probabilities fed as logits, {c} classes",
                 nn.CrossEntropyLoss()(F.one_hot(targets, c).float(), targets).item(), math.log(1 + (c - 1) / math.e),
                 "log(1 + (C − 1)/e)", "every prediction right, yet no lower: drop the softmax"),
        StuckRow("MultiMarginLoss", f"equal scores, {c} classes", nn.MultiMarginLoss()(equal, targets).item(),
                 (c - 1) / c, f"margin x (C-1)/C = {c - 1}/{c}", "no class preferred"),
        StuckRow("MultiLabelMarginLoss", "equal scores, 3 positive labels of 10",
                 nn.MultiLabelMarginLoss()(torch.zeros(N, c), multilabel).item(), 3 * (c - 3) / c,
                 "margin x positives x negatives / C", "no label preferred"),
    ]


def _regression() -> list[StuckRow]:
    y = _standardised()
    mean, median = torch.zeros(N), torch.full((N,), y.median().item())
    counts = torch.arange(N, dtype=torch.float32) % 5           # counts 0..4, mean 2
    return [
        StuckRow("MSELoss", "the targets' mean (targets standardised)", nn.MSELoss()(mean, y).item(), 1.0,
                 "the targets' variance (R² = 0)", "predicts the mean: a constant, or inputs lost"),
        StuckRow("L1Loss", "the targets' median (targets spread uniformly)", nn.L1Loss()(median, y).item(),
                 (y.double() - y.double().median()).abs().mean().item(), "mean absolute deviation",
                 "predicts the median"),
        StuckRow("HuberLoss (delta=1)", "the targets' mean (targets spread uniformly)", nn.HuberLoss()(mean, y).item(),
                 sum(0.5 * v * v if abs(v) < 1 else abs(v) - 0.5 for v in y.tolist()) / N,
                 "mean of 0.5·y² (|y| < 1) or |y| − 0.5", "a constant"),
        StuckRow("SmoothL1Loss (beta=1)", "the targets' mean (targets spread uniformly)",
                 nn.SmoothL1Loss()(mean, y).item(),
                 sum(0.5 * v * v if abs(v) < 1 else abs(v) - 0.5 for v in y.tolist()) / N,
                 "Huber's value at delta = beta = 1", "a constant"),
        StuckRow("GaussianNLLLoss", "the targets' mean and variance", nn.GaussianNLLLoss()(mean, y,
                 torch.ones(N)).item(), 0.5, "(log var + 1)/2 with var 1 (full=False)",
                 "a constant mean with the right spread"),
        StuckRow("PoissonNLLLoss", "log rate log 2 (counts 0-4, mean 2)", nn.PoissonNLLLoss()(torch.full((N,), math.log(2)),
                 counts).item(), 2 - 2 * math.log(2), "mean − mean·log(mean)", "a constant rate"),
    ]


def _embedding_and_distribution() -> list[StuckRow]:
    same = torch.ones(N, 4)
    target = torch.tensor(FREQUENCIES).expand(N, -1)
    uniform = torch.full((N, len(FREQUENCIES)), 1 / len(FREQUENCIES))
    sign = torch.where(torch.arange(N) % 4 == 0, 1.0, -1.0)      # a quarter of the pairs similar
    return [
        StuckRow("KLDivLoss (batchmean)", "the target distribution itself", nn.KLDivLoss(reduction="batchmean")(
                 target.log(), target).item(), 0.0, "0", "matches (with soft targets, the floor is 0, not the entropy)"),
        StuckRow("KLDivLoss (batchmean)", "uniform", nn.KLDivLoss(reduction="batchmean")(uniform.log(),
                 target).item(), math.log(len(FREQUENCIES)) - _entropy(FREQUENCIES), "log C − entropy of target",
                 "no information"),
        StuckRow("TripletMarginLoss", "every embedding the same", nn.TripletMarginLoss(margin=1.0)(same, same,
                 same).item(), 1.0, "the margin", "collapsed: every input mapped to one point"),
        StuckRow("TripletMarginWithDistanceLoss", "every embedding the same",
                 nn.TripletMarginWithDistanceLoss(margin=1.0)(same, same, same).item(), 1.0, "the margin", "collapsed"),
        StuckRow("MarginRankingLoss (margin=1)", "equal scores", nn.MarginRankingLoss(margin=1.0)(torch.zeros(N),
                 torch.zeros(N), sign).item(), 1.0, "the margin", "no order learned (not a collapse)"),
        StuckRow("HingeEmbeddingLoss", "distance 0 for every pair (a quarter similar)",
                 nn.HingeEmbeddingLoss()(torch.zeros(N), sign).item(), 0.75, "margin x share of dissimilar pairs",
                 "collapsed"),
        StuckRow("CosineEmbeddingLoss (margin=0)", "every embedding the same (a quarter similar)",
                 nn.CosineEmbeddingLoss()(same, same, sign).item(), 0.75, "(1 − margin) x share of dissimilar pairs",
                 "collapsed"),
        StuckRow("CTCLoss", "uniform over 6 outputs, 10 frames, 3-symbol targets",
                 nn.CTCLoss()(torch.full((10, N, 6), -math.log(6)), torch.tensor([1, 2, 3]).repeat(N, 1),
                              torch.full((N,), 10), torch.full((N,), 3)).item(),
                 (10 * math.log(6) - math.log(_ctc_paths(3, 10))) / 3,
                 "(frames·log 6 − log paths) / target length", "no information"),
        StuckRow("CrossEntropyLoss, soft targets", "the target distribution itself",
                 nn.CrossEntropyLoss()(target.log(), target).item(), _entropy(FREQUENCIES),
                 "entropy of the targets", "matches: the floor of a soft-target CE is the entropy, not 0"),
    ]


def stuck_rows() -> list[StuckRow]:
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return _classification() + _regression() + _embedding_and_distribution()


def sequential_head_check() -> tuple[bool, bool]:
    """A head written nn.Sequential(nn.Linear(8, 1), nn.Sigmoid()): is head[0] the Linear alone, and do its outputs
    leave (0, 1), as logits may (so head[0](x) can feed BCEWithLogitsLoss)?"""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        head = nn.Sequential(nn.Linear(8, 1), nn.Sigmoid())
        out = head[0](10 * torch.randn(100, 8))
    return isinstance(head[0], nn.Linear), bool(((out < 0) | (out > 1)).any())


def stuck_lines() -> list[str]:
    rows = stuck_rows()
    lines = [f"{'loss':31}{'output of a model that learned nothing':53}{'value':>7}  = closed form (agree?)  -> reads as"]
    for row in rows:
        lines.append(f"{row.loss:31}{row.output:53}{row.value:7.4f}  = {row.form} "
                     f"({abs(row.value - row.closed) < 1e-4})  -> {row.reads}")
    alone, beyond = sequential_head_check()
    lines.append(f"nn.Sequential(nn.Linear(8, 1), nn.Sigmoid())[0] is the Linear alone: {alone}; its outputs leave "
                 f"(0, 1), as logits do: {beyond}")
    return lines
