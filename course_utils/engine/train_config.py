"""What one run of the course's loop is made of (chapters 5, 6, 8): ``TrainConfig``, every knob, validated.

``loop.py`` runs a config and ``session.py`` builds one; both import it from here, so neither imports the other.
"""
from __future__ import annotations

from dataclasses import dataclass

from course_utils.engine.arithmetic import TrainingArithmetic, training_arithmetic
from course_utils.engine.bugs import make_plan
from course_utils.engine.models import OPTIMIZERS
from course_utils.engine.schedules import SCHEDULES
from course_utils.infra.checks import is_real as _real, require as _require


@dataclass(frozen=True)
class TrainConfig:
    """Every knob of one run of the course's loop (chapters 5, 6, 8); invalid values raise ValueError."""

    n_train: int = 600
    n_val: int = 300
    classes: int = 3
    noise: float = 0.2
    hidden: int = 64
    depth: int = 2
    dropout: float = 0.0
    batchnorm: bool = False
    batch_size: int = 32
    lr: float = 0.01
    optimizer: str = "adam"
    momentum: float = 0.9
    weight_decay: float | None = None   # None: the optimizer's own default (AdamW 0.01, the others 0)
    schedule: str = "constant"
    epochs: int = 10
    accum_steps: int = 1
    clip_norm: float | None = None
    bugs: tuple[str, ...] = ()      # names from bugs.LOOP_BUGS, at most one per operation
    seed: int = 0
    measure_memory: bool = True     # False skips the graph-memory meter (memory figures read 0)
    drop_last: bool = False
    leak: float = 0.0               # share of validation copied from training (data_leakage uses 0.5 if 0)
    n_test: int = 0                 # a clean held-out test set, evaluated at every epoch's end if > 0

    def __post_init__(self):
        for name, minimum in [("n_train", 1), ("n_val", 1), ("n_test", 0), ("classes", 2), ("hidden", 1),
                              ("depth", 0), ("batch_size", 1), ("epochs", 1), ("accum_steps", 1), ("seed", 0)]:
            value = getattr(self, name)
            _require(isinstance(value, int) and not isinstance(value, bool) and value >= minimum,
                     name, f"an integer >= {minimum}", value)
        _require(self.seed < 2**64, "seed", "an integer in [0, 2**64)", self.seed)   # torch's seed range
        _require(_real(self.lr) and self.lr > 0, "lr", "a finite number > 0", self.lr)
        _require(_real(self.noise) and self.noise >= 0, "noise", "a finite number >= 0", self.noise)
        _require(_real(self.dropout) and 0 <= self.dropout < 1, "dropout", "in [0, 1)", self.dropout)
        _require(_real(self.momentum) and 0 <= self.momentum < 1, "momentum", "in [0, 1)", self.momentum)
        _require(self.weight_decay is None or (_real(self.weight_decay) and self.weight_decay >= 0),
                 "weight_decay", "None or a finite number >= 0", self.weight_decay)
        _require(_real(self.leak) and 0 <= self.leak <= 1, "leak", "in [0, 1]", self.leak)
        _require(self.clip_norm is None or (_real(self.clip_norm) and self.clip_norm > 0), "clip_norm",
                 "None or a finite number > 0", self.clip_norm)
        _require(self.optimizer in OPTIMIZERS, "optimizer", f"one of {OPTIMIZERS}", self.optimizer)
        _require(self.schedule in SCHEDULES, "schedule", f"one of {SCHEDULES}", self.schedule)
        for name in ("batchnorm", "measure_memory", "drop_last"):
            _require(isinstance(getattr(self, name), bool), name, "True or False", getattr(self, name))
        _require(not isinstance(self.bugs, (str, bytes)) and hasattr(self.bugs, "__iter__"), "bugs",
                 "a tuple of bug names", self.bugs)
        object.__setattr__(self, "bugs", tuple(self.bugs))
        _require(all(isinstance(name, str) for name in self.bugs), "bugs", "a tuple of bug names (strings)",
                 self.bugs)
        make_plan(self.bugs)
        if "epoch_schedule_per_batch" in self.bugs and self.schedule == "onecycle" and self.accum_steps > 1:
            raise ValueError("bugs: epoch_schedule_per_batch with schedule='onecycle' and accum_steps > 1 would "
                             "step OneCycleLR past its total_steps, which torch refuses mid-run")
        last_batch = self.n_train % self.batch_size
        if self.batchnorm and (self.batch_size == 1 or (last_batch == 1 and not self.drop_last)):
            raise ValueError(f"batch_size={self.batch_size} leaves a batch of one example, which BatchNorm cannot "
                             "normalise in train mode; change batch_size or set drop_last=True")

    def arithmetic(self) -> TrainingArithmetic:
        """Chapter 0's counts for this run (the loop's counted updates match them)."""
        return training_arithmetic(self.n_train, self.batch_size, self.epochs, self.accum_steps,
                                   drop_last=self.drop_last)
