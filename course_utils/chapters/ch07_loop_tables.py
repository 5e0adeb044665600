"""Chapter 7's reference tables: which loss for which task, what a sick run looks like, and the log C check.

Every value in the loss table is computed by the loss itself on a small fixed example, so the table
cannot drift from what torch does.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from course_utils.engine.data import make_spiral
from course_utils.engine.models import MLP
from course_utils.infra.notebook import seed_everything


@dataclass(frozen=True)
class LossRow:
    """One line of the loss selection table, with the loss computed on a fixed small example."""

    task: str
    loss: str
    prediction: str
    target: str
    value: float


_LOGITS = torch.tensor([[2.0, 0.5, -1.0], [0.1, 1.5, 0.3], [-0.5, 0.2, 2.2], [1.0, 1.0, 1.0]])
_CLASSES = torch.tensor([0, 1, 2, 1])
_BINARY_LOGITS = torch.tensor([1.2, -0.4, 2.5, -2.0])
_BINARY_TARGETS = torch.tensor([1.0, 0.0, 1.0, 1.0])
_PREDICTED = torch.tensor([2.5, 0.0, 2.0, 8.0])
_MEASURED = torch.tensor([3.0, -0.5, 2.0, 1.0])  # the last one is an outlier


def loss_table() -> list[LossRow]:
    """Task -> loss -> what it takes, each with its value on the same small batch (chapter 7)."""
    weights = torch.tensor([1.0, 2.0, 4.0])
    return [
        LossRow("classes, one label each", "nn.CrossEntropyLoss()", "logits (N, C), no softmax",
                "class indices (N,), int64", nn.CrossEntropyLoss()(_LOGITS, _CLASSES).item()),
        LossRow("same, over-confident model", "nn.CrossEntropyLoss(label_smoothing=0.1)", "logits (N, C)",
                "class indices (N,)", nn.CrossEntropyLoss(label_smoothing=0.1)(_LOGITS, _CLASSES).item()),
        LossRow("same, rare classes", "nn.CrossEntropyLoss(weight=w)", "logits (N, C)",
                "class indices (N,); w: one weight per class", nn.CrossEntropyLoss(weight=weights)(_LOGITS, _CLASSES).item()),
        LossRow("yes/no, or several labels at once", "nn.BCEWithLogitsLoss()", "logits (N,) or (N, L), no sigmoid",
                "floats 0/1, same shape", nn.BCEWithLogitsLoss()(_BINARY_LOGITS, _BINARY_TARGETS).item()),
        LossRow("a number", "nn.MSELoss()", "values (N,)", "floats (N,)", nn.MSELoss()(_PREDICTED, _MEASURED).item()),
        LossRow("a number, with outliers", "nn.HuberLoss(delta=1.0)", "values (N,)", "floats (N,)",
                nn.HuberLoss(delta=1.0)(_PREDICTED, _MEASURED).item()),
    ]


def double_softmax_floor() -> tuple[float, float]:
    """(loss of CrossEntropyLoss on confident correct logits, the same on softmax outputs): why no softmax first."""
    logits = torch.tensor([[10.0, -10.0, -10.0]])
    target = torch.tensor([0])
    right = nn.functional.cross_entropy(logits, target).item()
    wrong = nn.functional.cross_entropy(logits.softmax(dim=1), target).item()
    return right, wrong


def double_softmax_training(seeds=range(3), classes: int = 10, epochs: int = 10) -> dict[bool, list[float]]:
    """The last epoch's mean loss of the MLP on a 10-class spiral (SGD + momentum 0.9, lr 0.1, batch 50), without
    and with a softmax before CrossEntropyLoss, one value per seed (chapter 7): {softmax first?: losses}."""
    found: dict[bool, list[float]] = {False: [], True: []}
    for softmax in (False, True):
        for seed in seeds:
            x, y = make_spiral(600, classes=classes, noise=0.1, seed=seed).tensors
            seed_everything(seed)
            model = MLP(hidden=64, out_features=classes)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            order = torch.Generator().manual_seed(seed)
            for _ in range(epochs):
                total = 0.0
                for batch in torch.randperm(len(y), generator=order).split(50):
                    scores = model(x[batch])
                    loss = nn.functional.cross_entropy(scores.softmax(dim=1) if softmax else scores, y[batch])
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    total += loss.detach() * len(batch)
            found[softmax].append((total / len(y)).item())
    return found


@dataclass(frozen=True)
class Symptom:
    """One line of the debugging table."""

    symptom: str
    likely_causes: str
    first_check: str


DEBUG_TABLE: tuple[Symptom, ...] = (
    Symptom("loss starts far from log(C)", "logits too large from the start: init scale, unnormalised inputs (wrong "
            "labels do not show here: a near-uniform guess costs log(C) whatever the labels; a softmax before the "
            "loss still starts near log(C))", "print the first batch's loss next to math.log(num_classes)"),
    Symptom("loss stops falling at a floor (about 0.55 for 3 classes)", "softmax applied before the loss: "
            "CrossEntropyLoss applies its own log-softmax", "feed the loss the logits; compare with section 16's floor"),
    Symptom("loss flat at about log(C)", "no gradient reaches the step (zero_grad misplaced, frozen weights), LR far "
            "too small, data and labels shuffled apart, fp16 without a GradScaler (small gradients underflow to 0), "
            "a softmax before the loss with many classes (its gradient is tiny: section 16)",
            "print the gradient norm and the LR; overfit one batch"),
    Symptom("loss becomes NaN or Inf", "LR too high, log or division of zero, fp16 overflow (values above 65,504; "
            "a GradScaler skips such steps on purpose and lowers its scale), bad data",
            "check inputs with torch.isfinite, lower the LR, clip, keep the NaN guard on"),
    Symptom("out of memory (CUDA OOM)", "batch too large, graph kept by logging loss tensors, eval without no_grad",
            "halve the batch and accumulate 2 micro-batches per update (K=2); log loss.item(); no_grad in eval; bf16"),
    Symptom("train loss falls, val loss rises", "over-fitting: too little data or too big a model",
            "early stopping, more data or augmentation, weight decay, dropout"),
)


@dataclass(frozen=True)
class Table:
    """A reference table: markdown in JupyterLab, plain text for nbval and on GitHub (chapter 7)."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    def _repr_markdown_(self) -> str:
        def cell(text: str) -> str:
            return text.replace("|", "\\|")
        lines = ["| " + " | ".join(self.header) + " |", "|" + "---|" * len(self.header)]
        return "\n".join(lines + ["| " + " | ".join(cell(c) for c in row) + " |" for row in self.rows])

    def __repr__(self) -> str:
        return "\n".join(" | ".join(row) for row in (self.header, *self.rows))

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(repr(self))


def loss_view(digits: int = 3) -> Table:
    """The loss table as a Table, each value rounded to `digits` significant digits."""
    from course_utils.infra.notebook import sig

    return Table(("task", "loss", "takes", "targets", "on the small batch"),
                 tuple((r.task, f"`{r.loss}`", r.prediction, r.target, str(sig(r.value, digits))) for r in loss_table()))


def debug_view() -> Table:
    """The debugging table as a Table."""
    return Table(("symptom", "likely causes", "first check"),
                 tuple((r.symptom, r.likely_causes, r.first_check) for r in DEBUG_TABLE))


def initial_loss_check(classes: int = 3, n: int = 600, seed: int = 0) -> tuple[float, float]:
    """(loss of a freshly initialised spiral MLP, log C): they should be close before any training (chapter 7)."""
    seed_everything(seed)
    x, y = make_spiral(n, classes=classes, seed=seed).tensors
    model = MLP(out_features=classes)
    with torch.no_grad():
        loss = nn.functional.cross_entropy(model(x), y).item()
    return loss, math.log(classes)


PRIOR = (0.65, 0.25, 0.10)       # class frequencies of the collapse check (chapter 7)


def _collapse_run(seed: int, inputs_lost: bool, steps: int = 200) -> dict[str, float | int]:
    """A 3-class problem with skewed labels (PRIOR), Gaussian blobs; trained full-batch on 300 examples, measured on
    300 others. `inputs_lost`: every example arrives as the same row (a loader bug: the features never reach the
    model), so only the labels' frequencies can be learned."""
    g = torch.Generator().manual_seed(seed)
    y = torch.multinomial(torch.tensor(PRIOR), 600, replacement=True, generator=g)
    x = torch.tensor([[0.0, 0.0], [2.0, 0.0], [0.0, 2.0]])[y] + torch.randn(600, 2, generator=g)
    if inputs_lost:
        x = x[:1].expand(600, 2)
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 3))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x[:300]), y[:300]).backward()
        optimizer.step()
    with torch.no_grad():
        logits = model(x[300:])
    frequencies = torch.bincount(y[:300], minlength=3).float() / 300
    predicted = logits.argmax(1)
    return {"loss": nn.functional.cross_entropy(logits, y[300:]).item(),
            "prior_loss": nn.functional.cross_entropy(frequencies.log().expand(300, 3), y[300:]).item(),
            "classes": len(predicted.unique()), "accuracy": (predicted == y[300:]).float().mean().item(),
            "majority": (y[300:] == frequencies.argmax()).float().mean().item()}


def collapse_lines(seeds=range(5)) -> list[str]:
    """A model whose inputs never reach it learns the labels' frequencies and nothing else: one class predicted, the
    loss at the prior's cross-entropy, the accuracy at the majority's share; over seeds (chapter 7)."""
    from course_utils.chapters.over_seeds import tally
    prior = torch.tensor(PRIOR)
    lines = [f"labels split {'/'.join(f'{100 * p:.0f}' for p in PRIOR)}: the prior's cross-entropy "
             f"{-(prior * prior.log()).sum().item():.2f}, log 3 = {math.log(3):.2f}"]
    for name, lost in (("healthy", False), ("inputs lost (every example the same row)", True)):
        runs = [_collapse_run(seed, lost) for seed in seeds]
        at_prior = tally(abs(r["loss"] / r["prior_loss"] - 1) < 0.02 for r in runs)
        below = tally(r["loss"] < 0.8 * r["prior_loss"] for r in runs)
        one_class = tally(r["classes"] == 1 for r in runs)
        majority = tally(abs(r["accuracy"] - r["majority"]) < 1e-9 for r in runs)
        lines.append(f"{name}: held-out loss within 2% of the prior's on {at_prior}, below it by 20% or more on "
                     f"{below}; one class predicted on {one_class}; accuracy = the majority class's share on {majority}")
    return lines
