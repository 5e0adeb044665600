"""The chapter-7 cost table, measured: each component of the flowchart's loop alone against the minimal loop.

Lines come from the assembled code. Memory is what this CPU machine can measure exactly: the peak
bytes autograd keeps for backward (the course's graph-memory meter) and the bytes the run writes to
disk. Speed is wall-clock time of the same training (spiral, MLP, same epochs), the minimum over
repeats, relative to the minimal loop: timings vary with the machine's load.
"""
from __future__ import annotations

import os
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from course_utils.data import spiral_splits
from course_utils.flowchart import BY_KEY, KEYS, lines_added, load_fit
from course_utils.memory import GraphMemoryMeter
from course_utils.models import MLP

CONDITIONS = ("CPU, 1 thread; spiral 384 train / 128 val; MLP(hidden=32); batch 32 (accumulation: 8 x 4); "
              "AdamW; {epochs} epochs; seconds = minimum of {repeats} runs")
NOT_TIMED = {"compile": "its first-step compilation (inductor) takes far longer than this tiny run"}


@dataclass(frozen=True)
class Cost:
    """One row of the cost table."""

    component: str
    lines_alone: int
    lines_in_full: int
    graph_bytes: int
    disk_bytes: int
    seconds: float | None
    prevents: str


@contextmanager
def one_process_group_env():
    """The variables torchrun would set, for a one-process group (scale-out run alone), and its store.

    Like torchrun, it opens the rendezvous store itself, on a port the system picks while the store holds
    it, and tells the process group to join it as a client (TORCHELASTIC_USE_AGENT_STORE). Picking a free
    port, closing it and letting the group bind it later is a race: another run on the machine can take the
    port in between, and the group then waits forever for peers that never come.
    """
    import torch.distributed as dist

    store = dist.TCPStore("127.0.0.1", 0, world_size=1, is_master=True, wait_for_workers=False)
    names = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "TORCHELASTIC_USE_AGENT_STORE")
    saved = {k: os.environ.get(k) for k in names}
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(store.port), RANK="0", WORLD_SIZE="1",
                      LOCAL_RANK="0", TORCHELASTIC_USE_AGENT_STORE="True")
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        del store


def run_component(components: tuple[str, ...], epochs: int = 2, splits=None) -> tuple[float, int, int, list]:
    """Run the assembled loop once: (seconds, peak graph bytes, bytes written, history)."""
    splits = splits or spiral_splits(384, 128, seed=0)
    fit = load_fit(components)
    options = dict(epochs=epochs, batch_size=8 if "accumulation" in components else 32, lr=0.01)
    with tempfile.TemporaryDirectory() as folder, one_process_group_env():
        if "out" in fit.__code__.co_varnames:
            options["out"] = folder
        if "compile" in components:
            options["compile_backend"] = "eager"
        torch.manual_seed(0)
        meter = GraphMemoryMeter()
        start = time.perf_counter()
        with meter:
            _, history = fit(lambda: MLP(hidden=32), splits.train, splits.val, **options)
        seconds = time.perf_counter() - start
        disk = sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())
    return seconds, meter.peak, disk, history


def measure_costs(epochs: int = 2, repeats: int = 2, timed: bool = True) -> list[Cost]:
    """The cost table: the minimal loop, then each component alone (chapter 7)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    splits = spiral_splits(384, 128, seed=0)
    try:
        keys = ("",) + KEYS
        runs: dict[str, list] = {key: [] for key in keys}
        for repeat in range(repeats if timed else 1):  # round-robin: a change of load hits every variant alike
            for key in keys:
                if repeat == 0 or key not in NOT_TIMED:  # an untimed component runs once, for its memory
                    runs[key].append(run_component((key,) if key else (), epochs, splits))
        rows = []
        for key in keys:
            seconds = min(r[0] for r in runs[key]) if timed and key not in NOT_TIMED else None
            alone, in_full = lines_added(key) if key else (0, 0)
            rows.append(Cost(key or "minimal loop", alone, in_full, runs[key][0][1], runs[key][0][2], seconds,
                             BY_KEY[key].prevents if key else "-"))
        return rows
    finally:
        torch.set_num_threads(threads)


def cost_text(rows: list[Cost], epochs: int = 2, repeats: int = 2, with_time: bool = False) -> str:
    """The table as text: lines, memory (and, with_time, speed relative to the minimal loop)."""
    head = f"{'component':<14}{'+lines':>7}{'(in full)':>10}{'graph KiB':>10}{'disk KiB':>9}"
    head += f"{'time x':>8}" if with_time else "  prevents"
    lines = [head]
    base = rows[0].seconds
    for r in rows:
        line = f"{r.component:<14}{r.lines_alone:>7}{r.lines_in_full:>10}{r.graph_bytes / 1024:>10.1f}{r.disk_bytes / 1024:>9.1f}"
        if with_time:
            line += f"{r.seconds / base:>8.2f}" if r.seconds and base else f"{'n/a':>8}"
        else:
            line += f"  {r.prevents}"
        lines.append(line)
    if with_time:
        lines.append("conditions: " + CONDITIONS.format(epochs=epochs, repeats=repeats))
    return "\n".join(lines)
