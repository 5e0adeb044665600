"""Chapter 4: accuracy counted wrong while the loss is right. One batch of 300 predictions whose right answer is
known by construction (270 correct, 30 wrong), counted the usual ways: labels kept as a column (N, 1) broadcast
against the predictions (N,) into an N x N table of every prediction against every label; floor division of the
count (0 until every answer is right); one-hot labels compared with class indices (torch refuses the shapes)."""
from __future__ import annotations

import warnings

import torch


def _batch(n: int = 300, classes: int = 3, wrong: int = 30) -> tuple[torch.Tensor, torch.Tensor]:
    """(logits, labels): labels cycle through the classes; the first `wrong` predictions name the next class."""
    labels = torch.arange(n) % classes
    predicted = labels.clone()
    predicted[:wrong] = (labels[:wrong] + 1) % classes
    return 3.0 * torch.nn.functional.one_hot(predicted, classes).float(), labels


def _floor_accuracy(logits: torch.Tensor, labels: torch.Tensor) -> int:
    """The count of right answers floor-divided by the count of examples, as integer arithmetic does it."""
    return int((logits.argmax(1) == labels).sum()) // len(labels)


def accuracy_count_lines() -> list[str]:
    logits, y = _batch()
    pred = logits.argmax(1)
    n = len(y)
    right = (pred == y).float().mean().item()
    column = y.unsqueeze(1)                                   # a Dataset that returned [label]: shape (N, 1)
    table = pred == column
    lines = [f"{n} predictions, {int((pred == y).sum())} right by construction",
             f"(pred == y).float().mean():                  {right:.2f}",
             f"labels shaped (N, 1): pred == y is {tuple(table.shape)}; .float().mean() {table.float().mean().item():.2f} "
             f"(1 / 3: every prediction against every label), .sum() / len(y) {table.sum().item() / n:.0f} "
             "(an 'accuracy' of 100 right answers per example)",
             f"correct // total (floor division of the count): {_floor_accuracy(logits, y)} with these "
             f"{int((pred == y).sum())} right; {_floor_accuracy(*_batch(wrong=0))} for a model right on all {n}, "
             f"{_floor_accuracy(*_batch(wrong=1))} again with a single mistake"]
    try:
        pred == torch.nn.functional.one_hot(y, 3)             # one-hot labels (N, 3) against indices (N,)
        lines.append("one-hot labels against class indices: no error")
    except RuntimeError as error:
        lines.append(f"one-hot labels against class indices: RuntimeError: {error}")
    return lines


def shared_metric_lines() -> list[str]:
    """One Accuracy object updated by training and validation batches alike, in the order a Lightning epoch with
    validation runs its hooks (training updates, then validation updates, compute and reset, then the training
    epoch's compute), against one object per phase. Training: 270 of 300 right; validation: 210 of 300."""
    from course_utils.production import Accuracy

    train, val = _batch(wrong=30), _batch(wrong=90)
    shared = Accuracy()
    for logits, labels in zip(train[0].split(100), train[1].split(100)):
        shared.update(logits, labels)
    for logits, labels in zip(val[0].split(100), val[1].split(100)):
        shared.update(logits, labels)
    val_shared = shared.compute().item()
    shared.reset()
    train_shared = shared.compute().item()
    own = {}
    for name, (logits, labels) in (("train", train), ("val", val)):
        metric = Accuracy()
        metric.update(logits, labels)
        own[name] = metric.compute().item()
    from torchmetrics.classification import MulticlassAccuracy

    theirs = MulticlassAccuracy(num_classes=3, average="micro")
    for logits, labels in (train, val):
        theirs.update(logits, labels)
    val_theirs = theirs.compute().item()
    theirs.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train_theirs = theirs.compute().item()
    said = str(caught[0].message).split(" which ")[0] if caught else "no warning"
    return [f"one Accuracy for both phases: validation reads {val_shared:.2f}, then after its reset the training "
            f"epoch reads {train_shared}",
            f"torchmetrics' MulticlassAccuracy in the same order: validation {val_theirs:.2f}, then training "
            f"{train_theirs:.2f}, with a {type(caught[0].message).__name__ if caught else ''}: {said}",
            f"one Accuracy per phase: training {own['train']:.2f}, validation {own['val']:.2f}"]
