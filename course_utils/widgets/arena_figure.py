"""Chapter 8: the arena's figure (a race against the baseline) and the words its view writes knobs and times in."""
from __future__ import annotations

from course_utils.chapters.ch08_arena import Knobs, RaceResult
from course_utils.widgets.decimate import log_decimate
from course_utils.widgets.simulator_layout import OPTIMIZER_LABELS, SCHEDULE_LABELS


def knobs_words(knobs: Knobs) -> str:
    """The knobs as the menus say them ("Adam, lr 0.03, B 64, warmup + cosine, 20 epochs")."""
    return (f"{OPTIMIZER_LABELS.get(knobs.optimizer, knobs.optimizer)}, lr {knobs.lr:g}, B {knobs.batch_size}, "
            f"{SCHEDULE_LABELS.get(knobs.schedule, knobs.schedule)}, {knobs.epochs} epochs")


def seconds(wall_s: float) -> str:
    """A run's time as every place of the view shows it: from the value the scoreboard stores (3 decimals)."""
    return f"{round(wall_s, 3):.1f} s"


def race_figure(mine: RaceResult | None, baseline: RaceResult | None, target: float, live: list | None = None,
                title: str | None = None):
    """Validation accuracy after each update: the learner's run against the baseline's, with the target.

    A bare matplotlib Figure, not pyplot's: the view draws it from its training thread. A live curve
    is drawn decimated (at most ~600 points), so each redraw costs the same however long the race.
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.2, 2.9), dpi=90)
    ax = fig.subplots()
    if baseline is not None:
        ax.plot(*zip(*baseline.curve), color="#888", ls="--", lw=1.2, label="baseline (SGD, lr 0.01, B 32)")
    curve = list(mine.curve) if mine is not None else (live or [])
    if curve:
        label = "your run" + (f" ({knobs_words(mine.knobs)})" if mine is not None else " (running)")
        ax.plot(*zip(*log_decimate(curve)), color="#1565c0", lw=1.6, label=label)
    hit = mine.updates_to_target if mine is not None else None
    if hit is not None:
        ax.plot([hit], [dict(curve)[hit]], "o", color="#0d47a1", ms=6, mec="white", zorder=4)
        ax.annotate(f"{hit} updates", (hit, target), textcoords="offset points", xytext=(0, -26), ha="center",
                    fontsize=9, color="#0d47a1", zorder=5,
                    arrowprops={"arrowstyle": "-", "color": "#0d47a1", "lw": 0.8},   # a label on a white box, off
                    bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "#0d47a1", "lw": 0.6})   # the curve
    ax.axhline(target, color="#c62828", lw=1, label=f"target {target:.0%}")
    ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("updates (optimizer.step() calls, log scale)")
    ax.set_ylabel("validation accuracy")
    ax.legend(loc="lower right", fontsize=8, framealpha=0.9)
    if title:
        ax.set_title(title, fontsize=10)
    fig.subplots_adjust(left=0.09, right=0.98, top=0.88 if title else 0.95, bottom=0.17)   # fixed: fast, no jumps
    return fig


def figure_bytes(fig) -> bytes:
    """PNG bytes of a figure with fixed margins (cheaper than a tight bounding box)."""
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()
