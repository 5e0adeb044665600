"""Chapter 6: what the simulator reports in words: its readouts and settings line (also its nbval text)."""
from __future__ import annotations

from course_utils.engine.loop import EpochEvent, StepEvent
from course_utils.engine.memory import CPU_KIND
from course_utils.infra.notebook import sig
from course_utils.engine.session import Session, TrainConfig
from course_utils.widgets.simulator_layout import OPTIMIZER_LABELS, SCHEDULE_LABELS


def _last(history: list, kind: type) -> list:
    """The latest event of `kind` as a one-item list (empty if none): the readouts' cost does not grow with history."""
    for event in reversed(history):
        if isinstance(event, kind):
            return [event]
    return []


def fmt(x: float) -> str:
    """A number as the readouts print it (4 significant digits), anything else as text."""
    return f"{sig(x):g}" if isinstance(x, float) else str(x)


def readout_lines(s: Session) -> list[str]:
    """The readout lines: counts, metrics, memory (and the ghost's numbers), from the latest events only."""
    c = s.config
    steps, epochs = _last(s.history, StepEvent), _last(s.history, EpochEvent)
    total = c.epochs * c.arithmetic().iters_per_epoch
    line = [f"epoch {s.epochs_done} of {c.epochs} done", f"step {s.state.step} of {total}",
            f"updates {s.state.updates}", f"next lr {fmt(s.lr)}"]
    metrics = [f"loss {fmt(steps[-1].loss)}" if steps else "loss -",
               f"grad norm {fmt(steps[-1].grad_norm)}" if steps else "grad norm -",
               f"val accuracy {fmt(epochs[-1].val_acc)}" if epochs else "val accuracy -"]
    memory = [f"graph memory: step {fmt(steps[-1].memory / 1024) if steps else '-'} KiB",
              f"evaluation {fmt(epochs[-1].eval_memory / 1024) if epochs else '-'} KiB",
              f"autograd nodes kept by the loss log {steps[-1].graph_nodes if steps else 0}"]
    lines = [" | ".join(line), " | ".join(metrics), " | ".join(memory),
             f"(memory = {CPU_KIND}, peak per step / per evaluation)"]
    if s.ghost is not None:
        g = s.ghost
        ghost_steps, ghost_epochs = _last(g.history, StepEvent), _last(g.history, EpochEvent)
        ghost = [f"healthy ghost (same seed): step {g.state.step}"]
        if ghost_steps:
            ghost += [f"loss {fmt(ghost_steps[-1].loss)}", f"grad norm {fmt(ghost_steps[-1].grad_norm)}"]
        if ghost_epochs:
            ghost.append(f"val accuracy {fmt(ghost_epochs[-1].val_acc)}")
        lines.append(" | ".join(ghost))
    return lines


def settings_text(c: TrainConfig) -> str:
    """The run's settings in the words the controls use."""
    return (f"dataset size {c.n_train}, classes {c.classes}, noise {fmt(c.noise)}, batch size {c.batch_size}, "
            f"learning rate {fmt(c.lr)}, optimizer {OPTIMIZER_LABELS[c.optimizer]}, "
            f"schedule {SCHEDULE_LABELS[c.schedule]}, epochs {c.epochs}, accumulation steps {c.accum_steps}, "
            f"dropout {fmt(c.dropout)}, clip norm {fmt(c.clip_norm) if c.clip_norm else 'off'}")
