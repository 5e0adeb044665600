"""The model's forwards (chapters 5, 9): which layers care about train/eval mode, and the fate of each graph.

``mode_layers`` lists the modules whose output depends on ``model.training`` for *this* model: dropout
with p > 0, BatchNorm and InstanceNorm that track running statistics, RNNs and attention with dropout,
and modules written outside ``torch.nn`` whose ``forward`` reads ``self.training`` (unless every dropout
rate they hold is 0). A model without any is evaluated the same in either mode, and the doctor says so
instead of calling a forgotten ``eval()`` a bug.

A grad-enabled forward is *open* until a backward pass reaches one of its outputs (a training forward)
or a later forward of the same model is reached while it is not (an evaluation that built a graph for
nothing). Each open forward's graph carries a tag in its autograd node's metadata; a tag still alive two
update rounds after its forward means the loop keeps that graph (a loss in a list, ``total += loss``).
"""
from __future__ import annotations

import functools
import inspect
import re
import weakref
from collections import deque

import torch
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.modules.dropout import _DropoutNd
from torch.nn.modules.instancenorm import _InstanceNorm

from course_utils.doctor.keys import attribute_tensors

KEEP_ROUNDS = 2       # a graph alive this many update rounds after its forward is kept by the loop
_READS_TRAINING = re.compile(r"\bself\.training\b|\btraining\s*=\s*self\.training\b")


@functools.cache
def _forward_reads_training(cls: type) -> bool:
    """Does this class's forward (or a method it defines) read self.training? Source read once per class."""
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return False
    return bool(_READS_TRAINING.search(source))


def _rates(module: nn.Module) -> list[float]:
    return [v for k, v in vars(module).items() if "drop" in k.lower() and isinstance(v, (int, float))
            and not isinstance(v, bool)]


def mode_dependent(module: nn.Module) -> bool:
    """Does this module compute something different in train and eval mode?"""
    if isinstance(module, _DropoutNd) or type(module).__name__ == "AlphaDropout":
        return module.p > 0
    if isinstance(module, (_BatchNorm, _InstanceNorm)):
        return bool(module.track_running_stats)
    if isinstance(module, nn.RNNBase):
        return module.dropout > 0 and module.num_layers > 1
    if isinstance(module, nn.MultiheadAttention):
        return module.dropout > 0
    if type(module).__module__.startswith("torch."):
        return False
    if _forward_reads_training(type(module)):
        rates = _rates(module)
        return not rates or any(r > 0 for r in rates)
    return False


def mode_layers(model: nn.Module) -> list[nn.Module]:
    """The modules of `model` whose output depends on train/eval mode."""
    return [m for m in model.modules() if mode_dependent(m)]


def describe(layers: list[nn.Module]) -> str:
    """'Dropout(p=0.25) x2, BatchNorm2d': what the mode switches in this model."""
    names: dict[str, int] = {}
    for m in layers:
        label = f"{type(m).__name__}(p={m.p})" if isinstance(m, _DropoutNd) else type(m).__name__
        names[label] = names.get(label, 0) + 1
    return ", ".join(k if n == 1 else f"{k} x{n}" for k, n in names.items())


class _Tag:
    """Put in an autograd node's metadata: it dies with the node, which a weak reference can tell."""


class Forward:
    """One grad-enabled forward whose fate is open: its index, which watched model, its mode ("train", "eval",
    "mixed", or "plain train"/"plain eval" for a model without mode-dependent layers), the dataset id and batch
    identity of its input and its number of examples, whether a backward pass reached it, and the hooks that tell
    (a plain class: one is made per forward)."""

    __slots__ = ("index", "model", "training", "source", "batch", "size", "reached", "handles")

    def __init__(self, index: int, model: int, training: str, source: int | None, batch: object, size: int):
        self.index, self.model, self.training, self.source, self.batch = index, model, training, source, batch
        self.size = size
        self.reached, self.handles = False, []

    def hit(self, grad: torch.Tensor) -> None:
        self.reached = True


def outputs(output: object, limit: int = 4, depth: int = 3) -> list[torch.Tensor]:
    """The tensors a forward returned, at most `limit`: a tensor, or in a tuple/list, dict or ModelOutput, nested up
    to `depth` levels (a detector in eval mode returns a list of dicts of tensors), or held as the attributes of an
    output object (a dataclass such as diffusers' `UNet2DOutput(sample=...)`)."""
    if isinstance(output, torch.Tensor):
        return [output]
    if depth == 0:
        return []
    values = output.values() if hasattr(output, "values") and callable(output.values) else \
        output if isinstance(output, (tuple, list)) else attribute_tensors(output)   # or an object's (a dataclass)
    found: list[torch.Tensor] = []
    for value in values:
        if len(found) >= limit:
            break
        found += outputs(value, limit - len(found), depth - 1)
    return found


def first_input(args: tuple, kwargs: dict) -> torch.Tensor | None:
    """The forward's example tensor: its first tensor argument (or the first tensor of a tuple or list argument, or
    of an object holding tensors as attributes), or `input_ids`, or its first tensor kwarg."""
    for value in args:
        if isinstance(value, torch.Tensor):
            return value
        if isinstance(value, dict):
            kwargs = {**value, **kwargs}
        if isinstance(value, (tuple, list)):        # inputs packed in one tuple (tacotron2's model(x))
            inner = next((v for v in value if isinstance(v, torch.Tensor)), None)
            if inner is not None:
                return inner
        held = attribute_tensors(value)             # an object holding them (DETR's NestedTensor)
        if held:
            return held[0]
    if isinstance(kwargs.get("input_ids"), torch.Tensor):
        return kwargs["input_ids"]
    return next((v for v in kwargs.values() if isinstance(v, torch.Tensor)), None)


class Graphs:
    """Tags on the graphs of grad-enabled forwards; finds graphs the loop keeps alive round after round."""

    def __init__(self):
        self._young: deque = deque()        # (forward, round, tag, its Forward record)
        self._checked = -1
        self._kept: list[tuple[int, int, weakref.ref]] = []
        self.most_kept = 0
        self.first: tuple[int, int] | None = None       # (forward index, round) of the first kept graph
        self.pinned = 0                                 # kept graphs never backwarded (activations alive)

    def watch(self, index: int, output: torch.Tensor, now: int, backwarded: object) -> None:
        """Tag the graph of forward `index` (made in update round `now`)."""
        tag = _Tag()
        output.grad_fn.metadata["loop_doctor"] = tag
        self._young.append((index, now, weakref.ref(tag), backwarded))
        if len(self._young) > 100_000:        # no update for a very long time: forget the oldest
            self._young.popleft()

    def check(self, now: int) -> None:
        """Move graphs older than KEEP_ROUNDS rounds that are still alive to the kept list; count them. Ages change
        only when the round does, so the work is done once per round."""
        if now == self._checked:
            return
        self._checked = now
        young = self._young
        while young and now - young[0][1] >= KEEP_ROUNDS:
            index, made, ref, record = young.popleft()
            if ref() is not None:
                self._kept.append((index, made, ref))
                if self.first is None:
                    self.first = (index, made)
                if record is not None and not record.reached:
                    self.pinned += 1
        self._kept = [k for k in self._kept if k[2]() is not None]
        self.most_kept = max(self.most_kept, len(self._kept))


def mode(model_training: bool, layers_training: bool) -> str:
    """"train" or "eval" when the model and its mode-dependent layers agree; "mixed" when they do not (BatchNorm
    frozen in eval mode while the model trains, or dropout kept on in an eval-mode model on purpose)."""
    if model_training and layers_training:
        return "train"
    return "eval" if not model_training and not layers_training else "mixed"
