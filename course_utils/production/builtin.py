"""The trainer's built-in tasks (chapter 7): `--task spiral` (the default), `--task chars`, `--task shapes`.

- spiral: the course's spiral and MLP, sized by FitConfig's spiral fields (n_train, hidden, ...).
- chars: a tiny character-level transformer language model on the course's own prose (the markdown of
  chapters 0-9 as of this trainer's writing, shipped in ``course_utils/production/texts/course_prose.txt``). Each
  training window starts at a random offset drawn in ``__getitem__``: a random crop, every epoch.
- shapes: a small CNN telling discs, squares, triangles and crosses apart in 20 x 20 images drawn
  procedurally (nothing is downloaded); training images are shifted, flipped, rescaled in brightness
  and noised at random in ``__getitem__`` (torch's and NumPy's global generators).

Each is a function of the FitConfig returning a Task, exactly like a learner's own ``--task
MODULE:FUNCTION``; keyword arguments size them from Python (the command line uses the defaults).
``build_task`` turns a ``--task`` name (one of these, or the learner's MODULE:FUNCTION) into a Task.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import Dataset

from course_utils.engine.data import spiral_splits
from course_utils.engine.models import MLP
from course_utils.production.task import Task, TaskError, _describe, one_line

SHAPES = ("disc", "square", "triangle", "cross")


def spiral_task(config) -> Task:
    """The course's spiral MLP (chapters 3-7), sized by the config's spiral fields."""
    splits = spiral_splits(config.n_train, config.n_val, classes=config.classes, noise=config.noise,
                           seed=config.seed)
    model = MLP(2, config.hidden, config.classes, config.depth, config.dropout)
    return Task(model, splits.train, splits.val, name="spiral")


# --- chars: a tiny transformer language model ------------------------------------------------------

def course_text() -> str:
    """The course's prose the chars task trains on (about 77,000 characters)."""
    return resources.files("course_utils.production").joinpath("texts/course_prose.txt").read_text(encoding="utf-8")


class CharWindows(Dataset):
    """Windows of `context` characters and the characters that follow each (chapter 7's chars task).

    Item i covers characters [i * context + offset, ... + context]; with ``random_offset`` the offset is
    drawn in [0, context) each time the item is loaded (a random crop), else it is 0.
    """

    def __init__(self, codes: torch.Tensor, context: int, random_offset: bool):
        self.codes, self.context, self.random_offset = codes, context, random_offset
        self.windows = (len(codes) - 1 - context) // context

    def __len__(self) -> int:
        return self.windows

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        offset = int(torch.randint(self.context, ())) if self.random_offset else 0
        start = index * self.context + offset
        chunk = self.codes[start:start + self.context + 1]
        return chunk[:-1], chunk[1:]


class Block(nn.Module):
    """One pre-norm transformer block: causal self-attention, then a 4x MLP, each added back."""

    def __init__(self, width: int, heads: int, dropout: float):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(batch, length, 3, self.heads, width // self.heads).unbind(2)
        attended = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                  is_causal=True)
        x = x + self.drop(self.proj(attended.transpose(1, 2).reshape(batch, length, width)))
        return x + self.drop(self.mlp(self.norm2(x)))


class CharTransformer(nn.Module):
    """A GPT-style character model: embeddings, `layers` causal blocks, logits over the vocabulary."""

    def __init__(self, vocab: int, context: int, width: int = 64, layers: int = 2, heads: int = 4,
                 dropout: float = 0.1):
        super().__init__()
        self.tokens, self.positions = nn.Embedding(vocab, width), nn.Embedding(context, width)
        self.blocks = nn.Sequential(*[Block(width, heads, dropout) for _ in range(layers)])
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, vocab)

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        """Logits of shape (batch, length, vocab) for the next character at every position."""
        where = torch.arange(codes.shape[1], device=codes.device)
        return self.head(self.norm(self.blocks(self.tokens(codes) + self.positions(where))))


def token_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy per character: (batch, length, vocab) logits against (batch, length) codes."""
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def chars_task(config, *, context: int = 64, width: int = 64, layers: int = 2, heads: int = 4,
               dropout: float = 0.1, text: str | None = None) -> Task:
    """A tiny character-level transformer LM on the course's prose; the last tenth is validation (chapter 7)."""
    text = course_text() if text is None else text
    vocab = {c: i for i, c in enumerate(sorted(set(text)))}
    codes = torch.tensor([vocab[c] for c in text], dtype=torch.long)
    cut = len(codes) * 9 // 10
    model = CharTransformer(len(vocab), context, width, layers, heads, dropout)
    return Task(model, CharWindows(codes[:cut], context, random_offset=True),
                CharWindows(codes[cut:], context, random_offset=False), loss_fn=token_cross_entropy, name="chars")


# --- shapes: a small CNN on images drawn on the fly -------------------------------------------------

def draw_shapes(n: int, size: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """n images (n, 1, size, size) of the four SHAPES, classes in turn, random centres and sizes."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % len(SHAPES)
    radius = size * (0.18 + 0.14 * torch.rand(n, generator=generator))
    margin = radius + 1
    cx = margin + (size - 2 * margin) * torch.rand(n, generator=generator)
    cy = margin + (size - 2 * margin) * torch.rand(n, generator=generator)
    grid = torch.arange(size, dtype=torch.float32) + 0.5
    dx = grid.view(1, 1, size) - cx.view(n, 1, 1)
    dy = grid.view(1, size, 1) - cy.view(n, 1, 1)
    r = radius.view(n, 1, 1)
    disc = dx ** 2 + dy ** 2 <= r ** 2
    square = (dx.abs() <= r * 0.8) & (dy.abs() <= r * 0.8)
    triangle = (dy.abs() <= r) & (dx.abs() <= (dy + r) / 2)
    cross = ((dx.abs() <= r / 3) & (dy.abs() <= r)) | ((dy.abs() <= r / 3) & (dx.abs() <= r))
    masks = torch.stack([disc, square, triangle, cross], 1)[torch.arange(n), labels]
    return masks.float().unsqueeze(1), labels


class Shapes(Dataset):
    """Procedural shape images; with `augment`, each load shifts, flips, rescales and noises the image at random."""

    def __init__(self, n: int, size: int, seed: int, augment: bool):
        self.images, self.labels = draw_shapes(n, size, seed)
        self.augment = augment

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        image = self.images[index]
        if self.augment:                                   # drawn from torch's and NumPy's global generators
            shift = torch.randint(-2, 3, (2,))
            image = torch.roll(image, (int(shift[0]), int(shift[1])), dims=(1, 2))
            if torch.rand(()) < 0.5:
                image = image.flip(2)
            image = image * float(np.random.uniform(0.7, 1.3)) + 0.15 * torch.randn(image.shape)
        return image, self.labels[index]


class SmallCNN(nn.Module):
    """Two 3x3 conv blocks (conv, ReLU, 2x2 max-pool), then a hidden layer and one logit per class."""

    def __init__(self, size: int = 20, width: int = 16, classes: int = len(SHAPES), dropout: float = 0.1):
        super().__init__()
        side = size // 4
        self.net = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(2 * width * side * side, 4 * width), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(4 * width, classes))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.net(images)


def shapes_task(config, *, n_train: int = 2048, n_val: int = 512, size: int = 20, width: int = 16) -> Task:
    """A small CNN on procedurally drawn shapes with random augmentation (chapter 7)."""
    if size % 4 or size < 8:
        raise ValueError(f"size must be a multiple of 4 and >= 8, got {size}")
    seed = config.seed % 2**31
    return Task(SmallCNN(size, width), Shapes(n_train, size, seed, augment=True),
                Shapes(n_val, size, seed + 1, augment=False), name="shapes")


BUILTIN = {"spiral": spiral_task, "chars": chars_task, "shapes": shapes_task}


# --- a --task name: a built-in task or the learner's MODULE:FUNCTION -------------------------------------

def _import(module_name: str):
    """The module named `module_name`, or the file `module_name` when it ends in .py."""
    if module_name.endswith(".py"):
        path = Path(module_name)
        if not path.is_file():
            raise TaskError(f"--task {module_name}: no such file")
        name = "course_task_" + path.stem
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module           # pickling by reference (DataLoader workers) finds it
        spec.loader.exec_module(module)
        return module
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # like `python -m`: modules in the current folder import
    return importlib.import_module(module_name)


def resolve(spec: str) -> Callable[[Any], Task]:
    """The function a task name or MODULE:FUNCTION names (chapter 7); TaskError (one line) when there is none."""
    if spec in BUILTIN:
        return BUILTIN[spec]
    if spec.count(":") != 1 or not all(spec.split(":")):
        raise TaskError(f"--task must be one of {', '.join(BUILTIN)} or MODULE:FUNCTION (a function that takes the "
                        f"FitConfig and returns a Task), got {spec!r}")
    module_name, function_name = spec.split(":")
    try:
        module = _import(module_name)
    except TaskError:
        raise
    except Exception as exc:  # noqa: BLE001 - ImportError, or whatever the module raised while importing
        raise TaskError(f"--task {spec}: cannot import {module_name} ({one_line(exc)})") from None
    function = getattr(module, function_name, None)
    if not callable(function):
        raise TaskError(f"--task {spec}: {module_name} has no function {function_name}")
    return function


def build_task(spec: str, config: Any) -> Task:
    """Call the task function `spec` names with the FitConfig; TaskError unless it returns a Task (chapter 7)."""
    function = resolve(spec)
    try:
        task = function(config)
    except TaskError as exc:
        raise TaskError(f"--task {spec}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - the learner's function: one line naming what it raised, and where
        raise TaskError(f"--task {spec}: the task function raised {one_line(exc)}") from None
    if not isinstance(task, Task):
        raise TaskError(f"--task {spec}: the function must return a course_utils.production.Task, it returned "
                        f"{_describe(task)}")
    return task


def task_to_train(config: Any, task: Task | None) -> Task:
    """fit's Task: the one given, else the one the FitConfig's task names (built in, or MODULE:FUNCTION)."""
    if task is None:
        return build_task(config.task, config)
    if not isinstance(task, Task):
        raise TaskError(f"fit's task must be a course_utils.production.Task, got {type(task).__name__}")
    if not config.is_spiral:
        raise TaskError(f"the task is given twice: as fit's task argument and as config.task={config.task!r}")
    changed = config.spiral_changes()
    if changed:
        raise TaskError(f"{changed[0]} describes only the spiral task; the task given to fit brings its own model "
                        "and data (leave the spiral fields at their defaults)")
    return task
