"""Task (chapter 7): the learner's own model and data, as the production trainer takes them.

    from course_utils.production import FitConfig, Task, fit
    task = Task(model, train_data, val_data)                     # loss_fn defaults to CrossEntropyLoss()
    fit(FitConfig(out="runs/mine", epochs=5), task)

    python -m course_utils.train --task mytasks:make_task --out runs/mine   # make_task(config) -> Task

A batch is what the DataLoader gives (your `collate_fn`, or torch's default). The trainer splits it
into inputs and targets, calls the model and the loss:

- ``(inputs, targets)`` (a tuple or list of two), or a dict holding the targets under ``labels``
  (or ``label``, ``targets``, ``target``, ``y``), the rest being the inputs; any other shape: give
  ``unpack(batch) -> (inputs, targets)``;
- ``model(inputs)``; a dict of inputs is passed as keyword arguments, a tuple or list as positional ones;
- ``loss_fn(outputs, targets)`` must return one number (a 0-dim tensor): the batch's mean loss.

Validation logs ``val_loss`` (weighted by examples), ``val_acc`` when the outputs are class logits for
integer targets (the output, or its first element when the model returns a tuple), and
``val_<metric_name>`` when a metric is given. A metric object (``update(outputs, targets)``, ``compute()``,
``reset()``: ``production.metrics``; F1, precision, recall, AUROC in ``production.classification_metrics``;
torchmetrics' objects too), its class or a function returning a fresh one accumulates over the whole validation
set and computes once. A plain function ``(outputs, targets) -> number`` is averaged over batches weighted by
examples, which is right only for a metric that is a mean over examples (MAE, accuracy): the per-batch mean of
F1, precision, recall or AUROC is not their value on the whole set.

Random augmentation in ``__getitem__`` or ``collate_fn`` resumes exactly, with any number of workers,
when it draws from torch's, NumPy's or ``random``'s global generators: each batch's draws are seeded
from (seed, epoch, its indices) (``data_order.SeededBatches``). A generator the dataset keeps as an
attribute (``self.rng = np.random.default_rng()``) is not reseeded, and its draws are not exact on resume.
"""
from __future__ import annotations

import copy
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_flatten, tree_map
from torch.utils.data import Dataset, IterableDataset

from course_utils.production.metrics import MetricError, as_metric, check_metric

TARGET_KEYS = ("labels", "label", "targets", "target", "y")
MODES = ("min", "max")


class TaskError(ValueError):
    """A task that cannot be trained as given; the message is one line saying what and why (chapter 7)."""


@dataclass
class Task:
    """A model and its data for fit(config, task) (chapter 7); invalid fields raise TaskError naming them."""

    model: nn.Module
    train_data: Dataset                      # map-style: __len__ and __getitem__ (a mid-epoch resume indexes it)
    val_data: Dataset
    loss_fn: Callable[[Any, Any], torch.Tensor] = field(default_factory=nn.CrossEntropyLoss)
    metric: Any = None                       # a metric object (update/compute/reset), its class or a function
                                             # returning one; or (outputs, targets) -> number, a per-batch mean
    metric_name: str = "metric"              # logged as val_<metric_name>; monitor it with --monitor val_<name>
    metric_mode: str = "max"                 # "max": higher is better, "min": lower is better
    collate_fn: Callable[[list], Any] | None = None
    unpack: Callable[[Any], tuple[Any, Any]] | None = None   # batch -> (inputs, targets), when the default won't do
    name: str = "task"                       # recorded in every checkpoint: a resume must train the same task
    val_batch_size: int = 256
    seed_batches: bool | None = None         # seed each batch's random draws from (seed, epoch, batch); None: auto
    validator: Any = field(init=False, repr=False, compare=False)   # the metric as validation feeds it (as_metric)

    def __post_init__(self) -> None:
        def need(ok: bool, what: str, got: object) -> None:
            if not ok:
                raise TaskError(f"Task {what}, got {_describe(got)}")

        need(isinstance(self.model, nn.Module), "model must be a torch.nn.Module", self.model)
        need(any(p.requires_grad for p in self.model.parameters()),
             "model must have parameters that require gradients (the optimizer trains them)", self.model)
        for name in ("train_data", "val_data"):
            data = getattr(self, name)
            need(not isinstance(data, IterableDataset) and hasattr(data, "__getitem__") and hasattr(data, "__len__"),
                 f"{name} must be a map-style dataset with __len__ and __getitem__ (a mid-epoch resume "
                 "picks up at an index; an IterableDataset cannot)", data)
            try:
                size = len(data)
            except Exception as exc:  # noqa: BLE001 - a learner's __len__ can raise anything
                raise TaskError(f"Task {name}: len() failed ({type(exc).__name__}: {exc})") from None
            need(isinstance(size, int) and size > 0, f"{name} must hold at least one example", data)
        need(callable(self.loss_fn), "loss_fn must be callable as loss_fn(outputs, targets)", self.loss_fn)
        for name in ("collate_fn", "unpack"):
            value = getattr(self, name)
            need(value is None or callable(value), f"{name} must be None or callable", value)
        try:
            self.validator = as_metric(self.metric)
        except MetricError as exc:
            raise TaskError(f"Task metric: {exc}") from None
        need(isinstance(self.metric_name, str) and self.metric_name.isidentifier()
             and self.metric_name not in ("loss", "acc"), "metric_name must be a name like 'mae' (not loss or acc)",
             self.metric_name)
        need(self.metric_mode in MODES, "metric_mode must be 'min' or 'max'", self.metric_mode)
        need(isinstance(self.name, str) and self.name.strip() != "", "name must be a non-empty string", self.name)
        need(isinstance(self.val_batch_size, int) and not isinstance(self.val_batch_size, bool)
             and self.val_batch_size >= 1, "val_batch_size must be an integer >= 1", self.val_batch_size)
        need(self.seed_batches is None or isinstance(self.seed_batches, bool), "seed_batches must be None, True or "
             "False", self.seed_batches)

    def split(self, batch: Any) -> tuple[Any, Any]:
        """(inputs, targets) of one batch."""
        if self.unpack is not None:
            return self.unpack(batch)
        if isinstance(batch, (tuple, list)) and len(batch) == 2:
            return batch[0], batch[1]
        if isinstance(batch, dict):
            for key in TARGET_KEYS:
                if key in batch:
                    return {k: v for k, v in batch.items() if k != key}, batch[key]
        raise TaskError(f"a batch is {_describe(batch)}: expected (inputs, targets) or a dict with a 'labels' "
                        "entry; give Task(unpack=...) to split it")

    def forward(self, model: nn.Module, inputs: Any) -> Any:
        """The model called on a batch's inputs (dict: keyword arguments; tuple or list: positional)."""
        if isinstance(inputs, dict):
            return model(**inputs)
        if isinstance(inputs, (tuple, list)):
            return model(*inputs)
        return model(inputs)


def logits_of(outputs: Any) -> torch.Tensor | None:
    """The tensor accuracy would read: the output itself, or the first element of a tuple/list output."""
    if isinstance(outputs, torch.Tensor):
        return outputs
    if isinstance(outputs, (tuple, list)) and outputs and isinstance(outputs[0], torch.Tensor):
        return outputs[0]
    return None


def class_dim(outputs: Any, targets: Any) -> int | None:
    """The class dimension when `outputs` are logits for integer class `targets` (accuracy means something), else None.

    Logits (..., C) for targets (...), or CrossEntropyLoss's layout (N, C, ...) for targets (N, ...), with C >= 2.
    """
    logits = logits_of(outputs)
    if logits is None or not isinstance(targets, torch.Tensor) or not logits.is_floating_point():
        return None
    if targets.is_floating_point() or targets.is_complex() or targets.dtype == torch.bool or logits.dim() < 2:
        return None
    if logits.shape[:-1] == targets.shape and logits.shape[-1] >= 2:
        return logits.dim() - 1
    if logits.shape[0] == targets.shape[0] and logits.shape[2:] == targets.shape[1:] and logits.shape[1] >= 2:
        return 1
    return None


def _describe(value: Any) -> str:
    """A short description of a value for a one-line message: tensors by shape and dtype."""
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)} ({str(value.dtype).replace('torch.', '')})"
    if isinstance(value, (tuple, list)):
        inner = ", ".join(_describe(v) for v in value[:3]) + (", ..." if len(value) > 3 else "")
        return f"a {type(value).__name__} of {len(value)} ({inner})"
    if isinstance(value, dict):
        return f"a dict with keys {sorted(map(str, value))[:6]}"
    text = repr(value)
    return f"{type(value).__name__} {text[:60] + '...' if len(text) > 60 else text}"


def _name(function: Any) -> str:
    """A loss function's name: its class for a module (MSELoss), its own name for a function."""
    return getattr(function, "__name__", type(function).__name__)


def one_line(exc: BaseException) -> str:
    """'TypeError: message' (first line), and where it was raised outside torch, for a one-line error."""
    message = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if "/torch/" not in f.filename and not f.filename.startswith("<")]
    where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {message}{where}"


def check_batch(task: Task, model: nn.Module, batch: Any, autocast) -> int | None:
    """One forward pass and loss on a validation batch before training; TaskError saying what does not fit.

    Returns the class dimension when accuracy is meaningful (see class_dim), else None. Runs in eval mode
    without gradients; the caller keeps the random streams as they were.
    """
    try:
        inputs, targets = task.split(batch)
    except TaskError:
        raise
    except Exception as exc:  # noqa: BLE001 - the learner's unpack function
        raise TaskError(f"unpack could not split a batch ({_describe(batch)}): {one_line(exc)}") from None
    try:
        with torch.no_grad(), autocast():
            outputs = task.forward(model, inputs)
    except Exception as exc:  # noqa: BLE001 - the learner's model: report whatever it raised, in one line
        raise TaskError(f"the model cannot take a batch's inputs ({_describe(inputs)}): {one_line(exc)}") from None
    try:
        with torch.no_grad(), autocast(), warnings.catch_warnings():
            warnings.filterwarnings("error", message=".*target size.*different to the input size")
            _loss_on_the_cpu_first(task.loss_fn, outputs, targets)
            loss = task.loss_fn(outputs, targets)   # torch broadcasts (N, 1) against (N,) with only that warning
    except Exception as exc:  # noqa: BLE001
        raise TaskError(f"the model's output does not fit the loss: {_name(task.loss_fn)} got outputs "
                        f"{_describe(outputs)} and targets {_describe(targets)}: {one_line(exc)}") from None
    if not (isinstance(loss, torch.Tensor) and loss.dim() == 0 and loss.is_floating_point()):
        raise TaskError(f"loss_fn must return the batch's mean loss as one number (a 0-dim float tensor), "
                        f"got {_describe(loss)}")
    if task.validator is not None:
        try:
            check_metric(task.validator, outputs, targets)
        except Exception as exc:  # noqa: BLE001 - the learner's metric: report whatever it raised, in one line
            raise TaskError(f"metric {task.metric_name!r} cannot measure a validation batch (outputs "
                            f"{_describe(outputs)}, targets {_describe(targets)}): {one_line(exc)}") from None
    return class_dim(outputs, targets)


def _loss_on_the_cpu_first(loss_fn: Callable, outputs: Any, targets: Any) -> None:
    """For a batch on a GPU, the loss on CPU copies first (`loss_on_cpu_copies`), raising what the CPU raises.

    On a GPU a class index out of range, or a probability outside [0, 1] given to BCELoss, is a device-side
    assert: it ends the process's CUDA context with a message that names neither. The CPU raises torch's own
    one-line error instead.
    """
    if any(isinstance(t, torch.Tensor) and t.device.type != "cpu" for t in tree_flatten((outputs, targets))[0]):
        loss_on_cpu_copies(loss_fn, outputs, targets)


def loss_on_cpu_copies(loss_fn: Callable, outputs: Any, targets: Any) -> None:
    """`loss_fn` (a copy, if a module) on CPU copies of a batch's outputs (float32) and targets; raises what torch
    raises there, except a device mismatch: a loss that keeps its own tensors on the GPU (a function over CUDA
    constants) is left to the GPU, since the mismatch says nothing about the batch."""
    cpu = lambda t: (t.detach().float() if t.is_floating_point() else t.detach()).cpu() \
        if isinstance(t, torch.Tensor) else t                                        # noqa: E731
    on_cpu = copy.deepcopy(loss_fn).cpu() if isinstance(loss_fn, nn.Module) else loss_fn
    try:
        with torch.autocast("cpu", enabled=False):
            on_cpu(tree_map(cpu, outputs), tree_map(cpu, targets))
    except RuntimeError as exc:
        if "same device" not in str(exc):
            raise


# --- naming a task on the command line -------------------------------------------------------------
