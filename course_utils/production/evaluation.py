"""Moving batches and validating a task (chapter 7): the pieces of fit() that depend on what a batch holds."""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from course_utils.engine.arithmetic import batch_sizes
from course_utils.production.amp import Precision
from course_utils.production.metrics import computed_here, feed
from course_utils.production.task import Task, TaskError, check_batch, logits_of, one_line


def to_device(value: Any, device: torch.device) -> Any:
    """Every tensor in a batch (tensors, dicts, tuples and lists of them) on `device`; the CPU moves nothing."""
    if device.type == "cpu":
        return value
    if isinstance(value, torch.Tensor):
        return value.to(device, non_blocking=True)
    if isinstance(value, dict):
        return {key: to_device(item, device) for key, item in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(to_device(item, device) for item in value)
    return value


@contextlib.contextmanager
def evaluating(model: nn.Module) -> Iterator[None]:
    """model.eval() for the block, then every layer back in the mode it was in: a BatchNorm frozen in eval inside a
    training model stays frozen (as Lightning restores each submodule's mode after validation), where
    ``model.train()`` would switch it back to learning its statistics."""
    modes = [(layer, layer.training) for layer in model.modules()]
    model.eval()
    try:
        yield
    finally:
        for layer, training in modes:
            layer.training = training


def train_mode(model: nn.Module, say: Callable[[str], None]) -> None:
    """Training's mode at the start of fit: a model that comes in eval mode (left so by an evaluation) is switched to
    train mode, and fit says so; one in train mode is left as it is, layers frozen in eval included (named once)."""
    if not model.training:
        model.train()
        say("the model came in eval mode (left so by an evaluation?): fit switched it to train mode")
        return
    frozen = [name for name, layer in model.named_modules() if not layer.training]
    if frozen:
        shown = ", ".join(frozen[:4]) + (f" and {len(frozen) - 4} more" if len(frozen) > 4 else "")
        say(f"{len(frozen)} layer{'s' * (len(frozen) > 1)} in eval mode inside the training model stay so, as given "
            f"(frozen): {shown}")


def check_task(task: Task, model: nn.Module, loader, precision: Precision, device: torch.device) -> int | None:
    """Run one validation batch through the model and the loss before training (TaskError if they do not fit).

    Returns the class dimension when val_acc means something. The random streams are put back afterwards,
    so checking changes no number of the run.
    """
    try:
        batch = to_device(next(iter(loader)), device)
    except Exception as exc:  # noqa: BLE001 - the learner's dataset or collate function, in one line
        raise TaskError(f"loading the first validation batch failed: {one_line(exc)}") from None
    devices = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices, device_type=device.type), evaluating(model):
        return check_batch(task, model, batch, precision.autocast)


def metric_names(task: Task, class_dim: int | None) -> list[str]:
    """The fields validation writes to each epoch's record: val_loss, val_acc when meaningful, the task's metric."""
    names = ["val_loss"] + (["val_acc"] if class_dim is not None else [])
    return names + ([f"val_{task.metric_name}"] if task.metric is not None else [])


def evaluate(task: Task, model: nn.Module, loader, precision: Precision, device: torch.device,
             class_dim: int | None) -> dict[str, float]:
    """Validation loss (mean over examples), accuracy and the task's metric, in eval mode without gradients.

    The task's metric adds each batch to its state (update) and computes once over the whole set; the loss, the
    counts and the course's metrics stay on the device until the end, where each is read once. Every layer goes back
    to the mode it trained in (``evaluating``).
    """
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    correct = torch.zeros((), dtype=torch.int64, device=device)
    counted = torch.zeros((), dtype=torch.int64, device=device)
    metric = task.validator
    if metric is not None:
        metric.reset()
    sizes = batch_sizes(len(loader.dataset), loader.batch_size)     # examples per batch, as the loader deals them
    with torch.no_grad(), evaluating(model):
        for batch, size in zip(loader, sizes, strict=True):
            inputs, targets = task.split(to_device(batch, device))
            with precision.autocast():
                outputs = task.forward(model, inputs)
                loss = task.loss_fn(outputs, targets)
            loss_sum += loss.double() * size
            if class_dim is not None:
                kept = targets >= 0                    # CrossEntropyLoss's ignore_index -100 is not a guess
                correct += ((logits_of(outputs).argmax(dim=class_dim) == targets) & kept).sum()
                counted += kept.sum()
            if metric is not None:
                feed(metric, outputs, targets, size)
    examples = len(loader.dataset)
    record = {"val_loss": loss_sum.item() / examples}
    if class_dim is not None:
        record["val_acc"] = correct.item() / max(counted.item(), 1)
    if metric is not None:
        record[f"val_{task.metric_name}"] = float(computed_here(metric))
    return record
