"""Chapter 6: what the simulator's controls accept, what each bug needs to show, and its live panels."""
from __future__ import annotations

import math

import ipywidgets as w

from course_utils.engine.loop import StepEvent
from course_utils.engine.session import TrainConfig
from course_utils.widgets.base import number_box
from course_utils.widgets.live_plot import CLASS_COLOURS, Panel, Series

# the simulator's default run: the course's spiral, Adam at lr 0.01, ten epochs of 19 micro-batches
DEFAULT = TrainConfig(n_train=600, n_val=300, epochs=10)
OPTIMIZER_LABELS = {"sgd": "SGD", "momentum": "SGD + momentum", "adam": "Adam", "adamw": "AdamW"}
SCHEDULE_LABELS = {"constant": "constant", "step": "step", "cosine": "cosine", "warmup_cosine": "warmup + cosine",
                   "onecycle": "OneCycle"}
# setting -> (label on screen, smallest, largest): what a box accepts
LIMITS = {"n_train": ("dataset size", 30, 5000), "classes": ("classes", 2, len(CLASS_COLOURS)),
          "noise": ("noise", 0.0, 2.0), "batch_size": ("batch size", 1, 1024), "epochs": ("epochs", 1, 200),
          "accum_steps": ("accumulation steps", 1, 64), "dropout": ("dropout", 0.0, 0.9),
          "clip_norm": ("clip norm (0 = off)", 0.0, 1000.0)}
WHOLE = ("n_train", "classes", "batch_size", "epochs", "accum_steps")       # whole-number boxes; the rest decimal
# the settings in their on-screen order: two columns of five
BOX_ORDER = ("n_train", "classes", "noise", "batch_size", "epochs", "accum_steps", "dropout", "clip_norm",
             "optimizer", "schedule")
MESSAGE_HEIGHT = "76px"  # the note / error line: three lines of text at 848 px (line height 1.4), in every state
# bugs that leave no trace unless a setting lets them act: (does it act?, what it needs, in screen words)
NEEDS = {
    "eval_in_train_mode": (lambda c: c.dropout > 0, "dropout above 0"),
    "missing_train_switch": (lambda c: c.dropout > 0, "dropout above 0"),
    "epoch_schedule_per_batch": (lambda c: c.schedule in ("step", "cosine"), "schedule step or cosine"),
    "unscaled_accumulation": (lambda c: c.accum_steps > 1, "accumulation steps above 1"),
    "accumulation_without_flush": (lambda c: c.arithmetic().iters_per_epoch % c.accum_steps != 0,
                                   "accumulation steps that do not divide the micro-batches per epoch"),
    "clip_after_step": (lambda c: c.clip_norm is not None, "a clip norm above 0"),
    "clip_before_backward": (lambda c: c.clip_norm is not None,
                             "a clip norm above 0 (its gradient norm reads 0: it is measured where the clip runs, "
                             "before backward fills .grad)"),
    "mean_of_batch_means": (lambda c: c.n_val % c.batch_size != 0,
                            "a batch size that does not divide the 300 validation examples"),
}
LOG_LR = (-4.0, 0.5)
AXIS_MIN = 5000         # a run of up to this many steps gets its whole length as the x axis from the start


def axis_end(step: int, planned: int) -> int:
    """The x axis's end: the planned run if short; else it grows with the run (1-2-5 steps), capped at the plan.

    A million-step run does not start as a sliver at the left of its axis.
    """
    if planned <= AXIS_MIN:
        return max(planned, 1)
    want = max(AXIS_MIN, step * 1.25)
    magnitude = 10 ** math.floor(math.log10(want))
    nice = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= want)
    return int(min(planned, nice))
FLUSH_S = 0.05          # while training runs: send new points at most every 50 ms
GRID = 48               # decision-boundary grid, GRID x GRID predictions
COLOURS = {"train": "#1565c0", "val": "#e65100", "ghost": "#757575", "lr": "#2e7d32", "mem": "#6a1b9a"}


def panels(ghost: bool) -> list[Panel]:
    """The five line panels (loss, accuracy, gradient norm, lr, memory), with ghost series when a bug is on."""
    def with_ghost(*series: Series, ghost_ids: tuple[tuple[str, str], ...] = ()) -> tuple[Series, ...]:
        if not ghost:
            return series
        return series + tuple(Series(i, "" if n else "ghost", COLOURS["ghost"], style, faint=True)
                              for n, (i, style) in enumerate(ghost_ids))
    return [
        Panel("loss", with_ghost(Series("loss", "train", COLOURS["train"]),
                                 Series("val_loss", "val", COLOURS["val"], "dots"),
                                 ghost_ids=(("ghost_loss", "line"), ("ghost_val_loss", "dots"))), log=True),
        Panel("validation accuracy", with_ghost(Series("val_acc", "val", COLOURS["val"], "dots"),
                                                ghost_ids=(("ghost_val_acc", "dots"),)), top=1.0),
        Panel("gradient norm (pre-clip)", with_ghost(Series("grad", "", COLOURS["train"]),
                                                     ghost_ids=(("ghost_grad", "line"),)), log=True, floor=1e-4),
        Panel("learning rate", with_ghost(Series("lr", "", COLOURS["lr"]), ghost_ids=(("ghost_lr", "line"),))),
        Panel("graph memory (KiB)",
              with_ghost(Series("mem", "step", COLOURS["mem"]), Series("eval_mem", "eval", COLOURS["val"], "dots"),
                         ghost_ids=(("ghost_mem", "line"),))),
    ]


def event_points(event, prefix: str = "") -> list[tuple[str, float, float]]:
    """The live panels' new points for one event of the run (prefix "ghost_" for the healthy twin's)."""
    if isinstance(event, StepEvent):
        return [(prefix + "loss", event.step, event.loss), (prefix + "grad", event.step, event.grad_norm),
                (prefix + "lr", event.step, event.lr), (prefix + "mem", event.step, event.memory / 1024)]
    points = [(prefix + "val_loss", event.steps, event.val_loss), (prefix + "val_acc", event.steps, event.val_acc)]
    if not prefix:
        points.append(("eval_mem", event.steps, event.eval_memory / 1024))
    return points


def setting_box(name: str, config: TrainConfig) -> w.Widget:
    """One setting's control: a menu, or a number box read by the course's one input rule (what it shows is used)."""
    if name == "optimizer":
        return w.Dropdown(options=[(v, k) for k, v in OPTIMIZER_LABELS.items()], value=config.optimizer,
                          description="optimizer")
    if name == "schedule":
        return w.Dropdown(options=[(v, k) for k, v in SCHEDULE_LABELS.items()], value=config.schedule,
                          description="schedule")
    value = (config.clip_norm or 0.0) if name == "clip_norm" else getattr(config, name)
    return number_box(value, LIMITS[name][0], kind="whole" if name in WHOLE else "decimal")
