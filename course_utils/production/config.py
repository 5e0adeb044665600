"""FitConfig (chapter 7): every knob of one production run, validated; the CLI flags mirror its fields."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from course_utils.infra.checks import is_int as _is_int, is_real as _is_real, require as _require
from course_utils.engine.models import OPTIMIZERS
from course_utils.engine.schedules import SCHEDULES

AMP_MODES = ("none", "bf16", "fp16")
MONITORS = {"val_loss": "min", "val_acc": "max"}   # which way is better; a task's own val_NAME says its own way
DEVICES = ("auto", "cpu", "cuda")
# The fields that describe only the spiral task (its data and its MLP): any other task brings its own.
SPIRAL_FIELDS = ("n_train", "n_val", "classes", "noise", "hidden", "depth", "dropout")
# Fields that change the numbers a run produces: a checkpoint only resumes a run with the same values.
# (epochs too, except that a run with a constant schedule may be extended: see LENGTH_FREE_SCHEDULES.)
RUN_DEFINING = ("task", "batch_size", "accum_steps", "lr", "optimizer", "momentum", "weight_decay", "schedule",
                "seed", *SPIRAL_FIELDS, "patience", "min_delta", "monitor", "amp", "clip_norm", "inject_nan_at")
LENGTH_FREE_SCHEDULES = ("constant",)   # the others are sized by epochs x updates per epoch


@dataclass(frozen=True)
class FitConfig:
    """One production run (chapter 7); invalid values raise ValueError naming the field."""

    out: str                              # run folder: metrics.jsonl, model.pt, checkpoints/, tb/
    task: str = "spiral"                  # a built-in task (spiral, chars, shapes) or MODULE:FUNCTION
    epochs: int = 10
    batch_size: int = 32
    accum_steps: int = 1
    lr: float = 0.01
    optimizer: str = "adam"
    momentum: float = 0.9
    weight_decay: float | None = None     # None: the optimizer's own default
    schedule: str = "constant"
    seed: int = 0
    n_train: int = 600
    n_val: int = 300
    classes: int = 3
    noise: float = 0.2
    hidden: int = 64
    depth: int = 2
    dropout: float = 0.0
    workers: int = 0                      # DataLoader worker processes
    checkpoint_every: int = 0             # also checkpoint every N updates inside an epoch (0: epoch ends only)
    keep: int = 3                         # rolling checkpoints kept (plus the best one)
    patience: int | None = None           # early stopping after this many validation checks without improvement
    min_delta: float = 0.0                # an improvement must beat the best by more than this
    monitor: str = "val_loss"             # val_loss (lower is better), val_acc (higher), or a task's val_NAME
    amp: str = "none"                     # none, bf16 (CPU or CUDA, no scaler), fp16 (CUDA, GradScaler)
    compile: bool = False                 # torch.compile the model
    deterministic: bool = False           # deterministic kernels, cuDNN autotuner off (GPU: needs CUBLAS_WORKSPACE_CONFIG)
    resume: bool = False                  # continue from the newest valid checkpoint in out/checkpoints
    clip_norm: float | None = None        # clip the global gradient norm to this (None: measure only)
    max_bad_steps: int = 3                # stop after this many non-finite updates in a row
    log_every: int = 50                   # the host reads losses, norms and skips every N updates (and at checkpoints
                                          # and epoch ends); between those points nothing waits for the device
    device: str = "auto"                  # auto (CUDA if present), cpu, cuda
    threads: int | None = None            # torch.set_num_threads (None: leave as is)
    progress: bool = True                 # tqdm bar (only on a terminal)
    tensorboard: bool = True              # event files under out/tb
    inject_nan_at: tuple[int, ...] = field(default=())   # demo: micro-steps (0-based, whole run) whose loss is NaN

    def __post_init__(self) -> None:
        _require(isinstance(self.out, str) and self.out.strip() != "", "out", "a folder path", self.out)
        _require(isinstance(self.task, str) and self.task.strip() != "", "task",
                 "a built-in task's name or MODULE:FUNCTION", self.task)
        for name, minimum in [("epochs", 1), ("batch_size", 1), ("accum_steps", 1), ("seed", 0), ("n_train", 1),
                              ("n_val", 1), ("classes", 2), ("hidden", 1), ("depth", 0), ("workers", 0),
                              ("checkpoint_every", 0), ("keep", 1), ("max_bad_steps", 1),
                              ("log_every", 1)]:
            value = getattr(self, name)
            _require(_is_int(value) and value >= minimum, name, f"an integer >= {minimum}", value)
        _require(self.seed < 2**32, "seed", "an integer in [0, 2**32)", self.seed)   # NumPy's seed range
        for name in ("patience", "threads"):
            value = getattr(self, name)
            minimum = 0 if name == "patience" else 1
            _require(value is None or (_is_int(value) and value >= minimum), name,
                     f"None or an integer >= {minimum}", value)
        _require(_is_real(self.lr) and self.lr > 0, "lr", "a finite number > 0", self.lr)
        _require(_is_real(self.momentum) and 0 <= self.momentum < 1, "momentum", "in [0, 1)", self.momentum)
        _require(self.weight_decay is None or (_is_real(self.weight_decay) and self.weight_decay >= 0),
                 "weight_decay", "None or a finite number >= 0", self.weight_decay)
        _require(_is_real(self.noise) and self.noise >= 0, "noise", "a finite number >= 0", self.noise)
        _require(_is_real(self.dropout) and 0 <= self.dropout < 1, "dropout", "in [0, 1)", self.dropout)
        _require(_is_real(self.min_delta) and self.min_delta >= 0, "min_delta", "a finite number >= 0",
                 self.min_delta)
        _require(self.clip_norm is None or (_is_real(self.clip_norm) and self.clip_norm > 0), "clip_norm",
                 "None or a finite number > 0", self.clip_norm)
        _require(self.optimizer in OPTIMIZERS, "optimizer", f"one of {', '.join(OPTIMIZERS)}", self.optimizer)
        _require(self.schedule in SCHEDULES, "schedule", f"one of {', '.join(SCHEDULES)}", self.schedule)
        _require(self.amp in AMP_MODES, "amp", f"one of {', '.join(AMP_MODES)}", self.amp)
        _require(isinstance(self.monitor, str) and self.monitor.startswith("val_") and self.monitor[4:].isidentifier(),
                 "monitor", "val_loss, val_acc or val_NAME (a task's metric)", self.monitor)
        _require(self.device in DEVICES, "device", f"one of {', '.join(DEVICES)}", self.device)
        for name in ("compile", "deterministic", "resume", "progress", "tensorboard"):
            _require(isinstance(getattr(self, name), bool), name, "True or False", getattr(self, name))
        steps = self.inject_nan_at
        _require(not isinstance(steps, (str, bytes)) and hasattr(steps, "__iter__"), "inject_nan_at",
                 "a tuple of micro-step numbers", steps)
        object.__setattr__(self, "inject_nan_at", tuple(steps))
        _require(all(_is_int(s) and s >= 0 for s in self.inject_nan_at), "inject_nan_at",
                 "a tuple of integers >= 0", self.inject_nan_at)
        if not self.is_spiral:
            changed = self.spiral_changes()
            if changed:
                raise ValueError(f"{changed[0]} describes only the spiral task; task {self.task!r} brings its own "
                                 "model and data (leave the spiral fields at their defaults)")

    @property
    def is_spiral(self) -> bool:
        """Does this config name the spiral task (the default)?"""
        return self.task == "spiral"

    def spiral_changes(self) -> list[str]:
        """The spiral fields set to something other than their default."""
        return [name for name in SPIRAL_FIELDS if getattr(self, name) != _DEFAULTS[name]]

    def as_plain(self) -> dict[str, Any]:
        """The fields as plain Python values (what a checkpoint stores)."""
        plain = asdict(self)
        plain["inject_nan_at"] = list(self.inject_nan_at)
        return plain

    def differences(self, saved: dict[str, Any]) -> list[str]:
        """The run-defining fields whose value in `saved` (a checkpoint's config) differs from this config.

        A larger `epochs` is no difference when the schedule does not depend on the run's length (constant).
        """
        mine = self.as_plain()
        saved = {"task": "spiral", **saved}            # checkpoints written before tasks existed trained the spiral
        changed = [f"{name}={saved.get(name)!r} (now {mine[name]!r})" for name in RUN_DEFINING
                   if saved.get(name) != mine[name]]
        if saved.get("epochs") != self.epochs and not (self.schedule in LENGTH_FREE_SCHEDULES
                                                      and self.epochs > saved.get("epochs", self.epochs)):
            why = ("" if self.schedule in LENGTH_FREE_SCHEDULES else
                   f": the {self.schedule} schedule is sized by the run's length; only a constant schedule can grow")
            changed.insert(0, f"epochs={saved.get('epochs')!r} (now {self.epochs!r}{why})")
        return changed


_DEFAULTS = {name: FitConfig.__dataclass_fields__[name].default for name in SPIRAL_FIELDS}
