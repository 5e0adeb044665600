"""Chapter 5: the museum's four-by-two panel figure of a healthy and a bugged run, and which panels a learner
can see the bug in (``visible_panels``: what the mystery game and its tests rely on)."""
from __future__ import annotations

from course_utils.chapters.ch05_museum import Comparison


# --- the four-by-two panel figure -------------------------------------------------------------------

# (title, per step or per epoch, how to read the series from Curves)
PANELS = [
    ("training loss", "step", lambda c: c.loss),
    ("gradient norm (pre-clip)", "step", lambda c: c.grad_norm),
    ("learning rate", "step", lambda c: c.lr),
    ("weight updates so far", "step", lambda c: c.step_updates),
    ("graph memory (KiB)", "step", lambda c: [m / 1024 for m in c.memory]),
    ("graph nodes kept by the loss log", "step", lambda c: c.graph_nodes),
    ("validation loss", "epoch", lambda c: c.val_loss),
    ("accuracy: validation, test", "epoch", lambda c: c.val_acc),
]


def visible_panels(comp: Comparison, threshold: float = 0.05) -> list[str]:
    """Panels in which the bugged curve departs from the healthy one by more than `threshold` of the panel's
    height (what a learner can see); the memory panel counts evaluation memory too, accuracy the test set."""
    seen = []
    for title, _, read in PANELS:
        pairs = [(read(comp.healthy), read(comp.bugged))]
        if title.startswith("graph memory"):
            if not comp.config.get("measure_memory", True):
                continue
            pairs.append(([m / 1024 for m in comp.healthy.eval_memory], [m / 1024 for m in comp.bugged.eval_memory]))
        if title.startswith("accuracy") and comp.healthy.test_acc[-1] is not None:
            pairs.append((comp.healthy.test_acc, comp.bugged.test_acc))
            pairs.append(([v - t for v, t in zip(comp.healthy.val_acc, comp.healthy.test_acc)],
                          [v - t for v, t in zip(comp.bugged.val_acc, comp.bugged.test_acc)]))
        values = [v for h, b in pairs for v in (*h, *b) if v == v and abs(v) != float("inf")]
        height = (max(values) - min(values)) if values else 0.0
        gap = max((abs(x - y) for h, b in pairs for x, y in zip(h, b)), default=0.0)
        if gap > threshold * max(height, 1e-12) and gap > 0:
            seen.append(title)
    return seen


def comparison_figure(comp: Comparison, title: str | None = None, show_healthy: bool = True):
    """Eight small panels against the micro-step, sized for a 900-pixel notebook (8-point text or larger)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 4, figsize=(8.8, 4.6), dpi=100)
    runs = [("bugged", comp.bugged, "#c62828", "-")]
    if show_healthy:
        runs.insert(0, ("healthy", comp.healthy, "#1565c0", "--"))
    measured = comp.config.get("measure_memory", True)
    has_test = comp.healthy.test_acc[-1] is not None
    for ax, (name, unit, read) in zip(axes.flat, PANELS):
        ax.set_title(name, fontsize=9)
        ax.tick_params(labelsize=8)
        ax.xaxis.get_major_locator().set_params(integer=True)
        if name.startswith("graph memory") and not measured:
            ax.text(0.5, 0.5, "not measured\nin this run", ha="center", va="center", fontsize=9, color="#555",
                    transform=ax.transAxes)
            ax.set_xticks([]), ax.set_yticks([])
            continue
        for label, c, colour, style in runs:
            x = range(1, len(c.loss) + 1) if unit == "step" else c.epoch_step
            marker = dict(marker="o", ms=2.5) if unit == "epoch" else {}
            ax.plot(x, read(c), style, color=colour, lw=1.1, **marker)
            if name.startswith("graph memory"):
                ax.plot(c.epoch_step, [m / 1024 for m in c.eval_memory], "s", color=colour, ms=3.5, mfc="none")
            if name.startswith("accuracy") and has_test:
                ax.plot(c.epoch_step, c.test_acc, ":", color=colour, lw=1.1)
        if name.startswith("gradient") and max(max(c.grad_norm) for _, c, _, _ in runs) > 50 * max(
                min(comp.healthy.grad_norm), 1e-3):
            ax.set_yscale("symlog", linthresh=1e-2)
        if name.startswith("training loss") and max(max(c.loss) for _, c, _, _ in runs) > 20:
            ax.set_yscale("log")
    for ax in axes[1]:
        ax.set_xlabel("micro-step", fontsize=8)
    handles = [plt.Line2D([], [], color=colour, ls=style, label=label) for label, _, colour, style in runs]
    handles.append(plt.Line2D([], [], color="#555", ls="none", marker="s", mfc="none",
                              label="memory: squares = evaluation"))
    if has_test:
        handles.append(plt.Line2D([], [], color="#555", ls=":", label="accuracy: dotted = test"))
    fig.legend(handles=handles, loc="upper center", ncol=len(handles), fontsize=8, frameon=False,
               bbox_to_anchor=(0.5, 0.955))
    name = " + ".join(comp.bugs) or "healthy"
    if len(comp.bugs) > 2:
        name = f"{len(comp.bugs)} bugs combined"
    fig.suptitle(title or name, fontsize=10, y=0.995)
    fig.subplots_adjust(left=0.06, right=0.99, bottom=0.1, top=0.8, wspace=0.32, hspace=0.45)  # no tight_layout pass
    return fig
