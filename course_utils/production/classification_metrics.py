"""Classification metrics that accumulate (chapters 4 and 7): F1, precision, recall, accuracy, AUROC.

What they read. A binary metric reads one score per target: a logit, predicted positive when it is above
`threshold` (0: a probability above 0.5; give 0.5 for a model that outputs probabilities), or two class logits
(the score is logit 1 - logit 0, so class 1 is predicted when it wins the arg-max). A multiclass metric reads
class logits, (N, C) for targets (N,) or CrossEntropyLoss's (N, C, ...) for (N, ...), and predicts the arg-max.
A tuple output is read through its first element, as the trainer's val_acc is. Targets below 0 are ignored
(CrossEntropyLoss's ignore_index, -100). A target that is no class (2 in a binary task, 0.3, 7 of 3 classes) is
counted on the device, and compute() raises MetricError saying how many there were.

F1, precision and recall come from a confusion matrix: how many examples of each target class were predicted
as each class, summed over batches (and over ranks) as int64 counts, so the accumulated value is exactly the
value on the whole set. Per class: F1 = 2TP / (2TP + FP + FN), precision = TP / (TP + FP), recall = TP / (TP + FN),
0 when the denominator is 0 (sklearn's zero_division=0). The binary metrics report the positive class (1); the
multiclass ones the macro average: the plain mean over the classes that occur among the targets or the
predictions (the classes sklearn and torchmetrics average over).

AUROC keeps every score and label and computes once, exactly: the probability that a random positive scores
above a random negative, a tie counting one half, by the rank formula (Mann-Whitney U) with tied scores given
their average rank. NaN when the examples hold only one class.
"""
from __future__ import annotations

from typing import Any

import torch

from course_utils.production.metrics import Metric, MetricError
from course_utils.production.task import _describe, class_dim, logits_of

IGNORED = -1


def _tensors(outputs: Any, targets: Any, who: str) -> tuple[torch.Tensor, torch.Tensor]:
    logits = logits_of(outputs)
    if logits is None or not isinstance(targets, torch.Tensor):
        raise MetricError(f"{who} takes a tensor of outputs (or a tuple whose first element is one) and a tensor of "
                          f"targets, got outputs {_describe(outputs)} and targets {_describe(targets)}")
    if not logits.is_floating_point():
        raise MetricError(f"{who}: the outputs must be scores or logits (floating point), got {_describe(logits)}")
    return logits, targets


def binary_scores(outputs: Any, targets: Any, who: str) -> torch.Tensor:
    """One score per target: the outputs as they are, without their last dimension of 1, or logit 1 - logit 0."""
    logits, targets = _tensors(outputs, targets, who)
    scores, wanted = tuple(logits.shape), tuple(targets.shape)
    if scores == wanted:
        return logits
    if scores == wanted + (1,):
        return logits[..., 0]
    if scores == wanted + (2,):
        return logits[..., 1] - logits[..., 0]
    raise MetricError(f"{who}: outputs of shape {scores} do not fit targets of shape {wanted}: give one score per "
                      "target (the same shape, or a last dimension of 1) or two class logits (a last dimension of 2)")


def binary_targets(targets: torch.Tensor) -> torch.Tensor:
    """Targets as int64 codes: 0 and 1 as they are (bool, integer or float), IGNORED below 0, 2 for anything else."""
    if targets.dtype == torch.bool:
        return targets.long()
    is_class = (targets == 0) | (targets == 1)
    return torch.where(is_class, targets.long(), torch.where(targets < 0, IGNORED, 2))


def class_predictions(outputs: Any, targets: Any, num_classes: int | None, who: str) -> torch.Tensor:
    """The arg-max class of each target's logits; MetricError if the shapes do not fit."""
    logits, targets = _tensors(outputs, targets, who)
    if targets.is_floating_point() or targets.is_complex() or targets.dtype == torch.bool:
        raise MetricError(f"{who}: the targets must be integer class indices, got {_describe(targets)}")
    dim = class_dim(logits, targets)
    if dim is not None and num_classes not in (None, logits.shape[dim]):
        dim = None
    if dim is None:
        wanted = list(targets.shape)
        classes = num_classes or "C"
        raise MetricError(f"{who}: outputs of shape {tuple(logits.shape)} do not fit targets of shape {tuple(wanted)}: "
                          f"expected class logits of shape {_shape(wanted + [classes])}"
                          + (f" (or {_shape([wanted[0], classes, *wanted[1:]])}, CrossEntropyLoss's layout)"
                             if len(wanted) > 1 else ""))
    return logits.argmax(dim=dim)


def _shape(dims: list) -> str:
    """(7, 3) or (7, C): a shape as the error messages write it."""
    return f"({', '.join(map(str, dims))}{',' if len(dims) == 1 else ''})"


def _ratio(numerator: torch.Tensor, denominator: torch.Tensor) -> torch.Tensor:
    """numerator / denominator, 0 where the denominator is 0."""
    return torch.where(denominator > 0, numerator / torch.where(denominator > 0, denominator, 1), 0.0)


def f1_per_class(tp: torch.Tensor, fp: torch.Tensor, fn: torch.Tensor) -> torch.Tensor:
    return _ratio(2 * tp, 2 * tp + fp + fn)


def precision_per_class(tp: torch.Tensor, fp: torch.Tensor, fn: torch.Tensor) -> torch.Tensor:
    return _ratio(tp, tp + fp)


def recall_per_class(tp: torch.Tensor, fp: torch.Tensor, fn: torch.Tensor) -> torch.Tensor:
    return _ratio(tp, tp + fn)


class ConfusionMetric(Metric):
    """A C x C matrix of int64 counts, [target class, predicted class], added up on the device batch by batch."""

    per_class = staticmethod(f1_per_class)

    def __init__(self, num_classes: int):
        super().__init__()
        if not isinstance(num_classes, int) or isinstance(num_classes, bool) or num_classes < 2:
            raise MetricError(f"{type(self).__name__} needs num_classes, an integer >= 2, got {num_classes!r}")
        self.num_classes = num_classes
        self.sum_state("confusion", (num_classes, num_classes), torch.int64)
        self.sum_state("not_a_class", (), torch.int64)      # targets that are no class and not ignored

    def pairs(self, outputs: Any, targets: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """(target codes, predicted classes), int64 of one shape: codes below 0 ignored, num_classes and up no class."""
        raise NotImplementedError

    def batch_state(self, outputs: Any, targets: Any) -> dict[str, torch.Tensor]:
        target, predicted = self.pairs(outputs, targets)
        classes = self.num_classes
        counted = (target >= 0) & (target < classes)
        cell = torch.where(counted, target * classes + predicted, 0).reshape(-1)
        confusion = torch.zeros(classes * classes, dtype=torch.int64, device=cell.device)
        confusion.index_put_((cell,), counted.reshape(-1).long(), accumulate=True)   # no host read, unlike bincount
        return {"confusion": confusion.view(classes, classes), "not_a_class": (target >= classes).sum()}

    def value(self, state: dict[str, torch.Tensor]) -> torch.Tensor:
        wrong = int(state["not_a_class"])
        if wrong:
            raise MetricError(f"{self!r}: {wrong} target(s) were not a class ({self.target_rule}); "
                              "a negative target is ignored")
        counts = state["confusion"].double()
        tp = counts.diagonal()
        return self.summary(tp, counts.sum(0) - tp, counts.sum(1) - tp)

    target_rule = ""

    def summary(self, tp: torch.Tensor, fp: torch.Tensor, fn: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


class BinaryConfusion(ConfusionMetric):
    """The positive class's ratio, from binary scores thresholded at `threshold` (0 for logits)."""

    target_rule = "a binary target is 0 or 1"

    def __init__(self, threshold: float = 0.0):
        super().__init__(2)
        self.threshold = float(threshold)

    def pairs(self, outputs: Any, targets: Any) -> tuple[torch.Tensor, torch.Tensor]:
        scores = binary_scores(outputs, targets, repr(self))
        return binary_targets(targets), (scores > self.threshold).long()

    def summary(self, tp: torch.Tensor, fp: torch.Tensor, fn: torch.Tensor) -> torch.Tensor:
        return self.per_class(tp, fp, fn)[1]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(threshold={self.threshold:g})"


class MulticlassConfusion(ConfusionMetric):
    """The macro average over the classes that occur among the targets or the predictions, from arg-max predictions."""

    @property
    def target_rule(self) -> str:
        return f"a class index is 0 to {self.num_classes - 1}"

    def pairs(self, outputs: Any, targets: Any) -> tuple[torch.Tensor, torch.Tensor]:
        return targets.long(), class_predictions(outputs, targets, self.num_classes, repr(self))

    def summary(self, tp: torch.Tensor, fp: torch.Tensor, fn: torch.Tensor) -> torch.Tensor:
        occurs = (tp + fp + fn > 0).double()
        return (self.per_class(tp, fp, fn) * occurs).sum() / occurs.sum()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_classes={self.num_classes})"


class BinaryF1(BinaryConfusion):
    """F1 of the positive class, 2TP / (2TP + FP + FN), over every batch since reset()."""

    per_class = staticmethod(f1_per_class)


class BinaryPrecision(BinaryConfusion):
    """TP / (TP + FP): of the examples predicted positive, the share that are."""

    per_class = staticmethod(precision_per_class)


class BinaryRecall(BinaryConfusion):
    """TP / (TP + FN): of the positive examples, the share predicted positive."""

    per_class = staticmethod(recall_per_class)


class MulticlassF1(MulticlassConfusion):
    """Macro F1: each class's F1 against the rest, averaged over the classes that occur."""

    per_class = staticmethod(f1_per_class)


class MulticlassPrecision(MulticlassConfusion):
    """Macro precision over the classes that occur."""

    per_class = staticmethod(precision_per_class)


class MulticlassRecall(MulticlassConfusion):
    """Macro recall over the classes that occur (balanced accuracy)."""

    per_class = staticmethod(recall_per_class)


class Accuracy(Metric):
    """The share of targets whose logits' arg-max is right, as two int64 counts (negative targets left out)."""


    def __init__(self, num_classes: int | None = None):
        super().__init__()
        self.num_classes = num_classes
        self.sum_state("correct", (), torch.int64)
        self.sum_state("counted", (), torch.int64)

    def batch_state(self, outputs: Any, targets: Any) -> dict[str, torch.Tensor]:
        predicted = class_predictions(outputs, targets, self.num_classes, repr(self))
        counted = targets >= 0
        return {"correct": ((predicted == targets) & counted).sum(), "counted": counted.sum()}

    def value(self, state: dict[str, torch.Tensor]) -> torch.Tensor:
        return state["correct"].double() / state["counted"].double()

    def __repr__(self) -> str:
        return f"Accuracy(num_classes={self.num_classes})"


class BinaryAUROC(Metric):
    """Area under the ROC curve of binary scores: every score kept on the device, ranked once at compute()."""


    def __init__(self):
        super().__init__()
        self.cat_state("scores", torch.float64)
        self.cat_state("labels", torch.int8)                # 0, 1, IGNORED, or 2: no class

    def batch_state(self, outputs: Any, targets: Any) -> dict[str, torch.Tensor]:
        scores = binary_scores(outputs, targets, repr(self))
        return {"scores": scores.reshape(-1).double(), "labels": binary_targets(targets).reshape(-1).to(torch.int8)}

    def value(self, state: dict[str, torch.Tensor]) -> torch.Tensor:
        scores, labels = state["scores"], state["labels"]
        kept = labels >= 0
        wrong, missing = int((labels > 1).sum()), int((scores.isnan() & kept).sum())
        if wrong or missing:
            raise MetricError(f"{self!r}: " + ("; ".join(
                ([f"{wrong} target(s) were not 0 or 1 (a negative target is ignored)"] if wrong else [])
                + ([f"{missing} score(s) were NaN"] if missing else []))))
        return auroc_by_ranks(scores[kept], labels[kept] == 1)

    def __repr__(self) -> str:
        return "BinaryAUROC()"


def auroc_by_ranks(scores: torch.Tensor, positive: torch.Tensor) -> torch.Tensor:
    """P(a positive's score > a negative's) + P(equal) / 2, exactly: (sum of the positives' ranks - P(P+1)/2) / (P N),
    ranks from 1 up, tied scores sharing the average of their ranks. Float64 holds every half rank exactly."""
    ordered = scores.double().sort().values
    below = torch.searchsorted(ordered, scores.double(), side="left")     # how many score strictly less
    up_to = torch.searchsorted(ordered, scores.double(), side="right")    # how many score less or the same
    ranks = (below + up_to + 1).double() / 2                              # the mean of ranks below+1 .. up_to
    positives = positive.sum().double()
    negatives = positive.numel() - positives
    return ((ranks * positive).sum() - positives * (positives + 1) / 2) / (positives * negatives)
