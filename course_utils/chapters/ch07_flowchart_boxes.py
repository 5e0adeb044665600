"""The production flowchart's boxes (chapter 7): which operations a loop with these components runs, by stage."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from course_utils.chapters.ch07_flowchart import components_of


@dataclass(frozen=True)
class Node:
    """One box of the flowchart: the stage it sits in, its words, the component that adds it (None: always)."""

    stage: int
    label: str
    component: str | None
    variant: tuple[str, str] | None = None  # (component, label to show when that component is on)

    def text(self, enabled: frozenset[str]) -> str:
        """The box's words for these components (a box changes when a component alters its operation)."""
        return self.variant[1] if self.variant and self.variant[0] in enabled else self.label


STAGES = ("once, before training", "each epoch, then each batch", "each epoch end")
NODES: tuple[Node, ...] = (
    Node(0, "init process group (rank)", "scale_out"),
    Node(0, "seed everything", "seed"),
    Node(0, "model, optimizer", None),
    Node(0, "data loader", None),
    Node(0, "DistributedSampler", "scale_out"),
    Node(0, "LR scheduler", "schedule"),
    Node(0, "GradScaler", "amp"),
    Node(0, "TensorBoard writer", "logging"),
    Node(0, "resume from last checkpoint", "checkpoint"),
    Node(0, "model.compile()", "compile"),
    Node(0, "wrap in DDP", "scale_out"),
    Node(1, "stop if patience is used up", "early_stop"),
    Node(1, "sampler.set_epoch(epoch)", "scale_out"),
    Node(1, "forward + loss", None, ("amp", "forward + loss in autocast")),
    Node(1, "weight loss by window share", "accumulation"),
    Node(1, "backward", None, ("amp", "scaler.scale(loss).backward")),
    Node(1, "window complete? else next batch", "accumulation", ("scale_out", "window done? (no_sync until then)")),
    Node(1, "clip grad norm", "clip"),
    Node(1, "finite? else skip update", "nan_guard"),
    Node(1, "optimizer.step, zero_grad", None, ("amp", "scaler.step, update, zero_grad")),
    Node(1, "scheduler.step", "schedule"),
    Node(1, "log LR, grad norm", "logging"),
    Node(2, "validate", None),
    Node(2, "early-stopping check, keep best", "early_stop"),
    Node(2, "log losses, accuracy", "logging"),
    Node(2, "save checkpoint (rank 0, atomic)", "checkpoint"),
    Node(2, "barrier: ranks wait", "scale_out"),
)


def active_nodes(enabled: Iterable[str]) -> list[Node]:
    """The boxes a loop with these components runs, in order."""
    chosen = components_of(enabled)
    return [n for n in NODES if n.component is None or n.component in chosen]


def flow_text(enabled: Iterable[str]) -> str:
    """The flowchart as text: the active boxes of each stage, in order (what nbval compares)."""
    chosen = components_of(enabled)
    nodes = active_nodes(chosen)
    return "\n".join(f"{STAGES[s]}: " + " -> ".join(n.text(chosen) for n in nodes if n.stage == s)
                     for s in range(3))
