"""The chapter-7 cost table, measured: each component of the flowchart's loop alone against the minimal loop.

Lines come from the assembled code. Memory is what this CPU machine can measure exactly: the peak
bytes autograd keeps for backward (the course's graph-memory meter) and the bytes the run writes to
disk. Speed is wall-clock time of the same training (spiral, MLP, same epochs), the minimum over
repeats, relative to the minimal loop: timings vary with the machine's load.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from course_utils.engine.data import spiral_splits
from course_utils.chapters.ch07_flowchart import BY_KEY, KEYS, lines_added, load_fit
from course_utils.engine.memory import GraphMemoryMeter
from course_utils.engine.models import MLP

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
    it, and tells the process group to join it as a client (TORCHELASTIC_USE_AGENT_STORE). Two shortcuts
    hang instead: picking a free port and letting the group bind it later races with other runs on the
    machine, and MASTER_PORT=0 hung a group within a few hundred runs whenever two processes made groups
    at once (measured: 300 x 2 concurrent runs of this store never did).
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


def _prepare(fit, components: tuple[str, ...], options: dict, folder: str) -> None:
    """The options an assembled loop needs besides the run's own (a folder to write in, eager compile), then seed 0."""
    if "out" in fit.__code__.co_varnames:
        options["out"] = folder
    if "compile" in components:
        options["compile_backend"] = "eager"
    torch.manual_seed(0)


def run_component(components: tuple[str, ...], epochs: int = 2, splits=None) -> tuple[float, int, int, list]:
    """Run the assembled loop once: (seconds, peak graph bytes, bytes written, history)."""
    splits = splits or spiral_splits(384, 128, seed=0)
    fit = load_fit(components)
    options = dict(epochs=epochs, batch_size=8 if "accumulation" in components else 32, lr=0.01)
    with tempfile.TemporaryDirectory() as folder, one_process_group_env():
        _prepare(fit, components, options, folder)
        meter = GraphMemoryMeter()
        start = time.perf_counter()
        with meter:     # a loop with DDP keeps it until exit (load_fit): freeing it here could deadlock
            _, history = fit(lambda: MLP(hidden=32), splits.train, splits.val, **options)
        seconds = time.perf_counter() - start
        disk = sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())
    return seconds, meter.peak, disk, history


@dataclass(frozen=True)
class Traffic:
    """What DDP sent in one run of the flowchart's loop: gradient all-reduces against updates and micro-batches."""

    allreduces: int
    updates: int
    micro_batches: int


def count_allreduces(components: tuple[str, ...] = ("accumulation", "scale_out"), no_sync: bool = True,
                     epochs: int = 1, batch_size: int = 8, accum_steps: int = 4, splits=None) -> Traffic:
    """Run the assembled loop as one gloo rank, counting DDP's gradient all-reduces with a communication hook
    (each bucket DDP hands to it, which in a group of one is its own average).

    `no_sync=False` makes DDP's `no_sync()` a do-nothing context: the loop as it would be without it
    (chapter 7, and the test that the template all-reduces once per update).
    """
    if "scale_out" not in components:
        raise ValueError("counting all-reduces needs the scale_out component")
    splits = splits or spiral_splits(384, 128, seed=0)
    fit = load_fit(components)
    calls: list[int] = []
    skip_sync = no_sync

    def counted_allreduce(state, bucket):
        """Count the bucket DDP asks to all-reduce; in this one-process group the average is the bucket itself,
        returned as it is: the count needs no gloo work."""
        calls.append(1)
        done = torch.futures.Future()
        done.set_result(bucket.buffer())       # the mean over one rank: unchanged
        return done

    class CountingDDP(fit.__globals__["DDP"]):
        """DDP whose every bucket all-reduce is counted, then done as DDP does it by default."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.register_comm_hook(None, counted_allreduce)

        if not skip_sync:
            def no_sync(self):
                return contextlib.nullcontext()

    fit.__globals__["DDP"] = CountingDDP
    options = dict(epochs=epochs, batch_size=batch_size, lr=0.01)
    if "accumulation" in components:
        options["accum_steps"] = accum_steps
    micro: list[int] = []

    def make_model():
        model = MLP(hidden=32)
        model.register_forward_pre_hook(lambda module, args: micro.append(1) if module.training else None)
        return model

    with tempfile.TemporaryDirectory() as folder, one_process_group_env():
        _prepare(fit, components, options, folder)
        _, history = fit(make_model, splits.train, splits.val, **options)
    return Traffic(len(calls), history[-1]["updates"], len(micro))


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


# ----------------------------------------------------------------------------- the source article's cost claims
SEED_COSTS = {  # the cost table of the course's source article (seed 000): lines added, memory, speed
    "checkpoint": ("~10+", "disk 2x the model", "~1% (I/O)"),
    "early_stop": ("~8", "none", "saves hours (stops early)"),
    "accumulation": ("~4", "-60% (smaller micro-batch)", "~same (same total FLOPs)"),
    "amp": ("~5", "-40% (bf16 activations)", "+50-100% faster"),
    "seed": ("~6", "none", "-10-30% (deterministic)"),
    "logging": ("~3", "none", "negligible"),
    "clip": ("~2", "none", "negligible"),
}


def _amp_record() -> str:
    """bf16's speed-up in the GPU record, against float32 and against TF32."""
    from course_utils.chapters.gpu_figures import recorded

    rows = recorded()["precision"]
    shapes = sorted({(r["batch"], r["width"]) for r in rows})
    fp32, tf32 = [], []
    for shape in shapes:
        mode = {(r["mode"], r["tf32"]): r["ms_per_step"] for r in rows if (r["batch"], r["width"]) == shape}
        fp32.append(mode["none", False] / mode["bf16", False])
        tf32.append(mode["none", True] / mode["bf16", False])
    return (f"GPU record: bf16 {min(fp32):.1f}-{max(fp32):.1f}x float32, but only {min(tf32):.1f}-{max(tf32):.1f}x "
            "float32 with TF32")


def seed_comparison_text(rows: list[Cost]) -> str:
    """The article's cost claims beside what this chapter measures or counts (chapter 7's cost table)."""
    by = {r.component: r for r in rows}
    base = by["minimal loop"]
    weights = 4 * sum(p.numel() for p in MLP(hidden=32).parameters())
    here_speed = {
        "checkpoint": "time: the timed table below (one small file per epoch here)",
        "early_stop": "time: stops when patience runs out (section 6)",
        "accumulation": "4x the micro-steps for the same examples, each paying the per-step overhead (timed below)",
        "amp": _amp_record(),
        "seed": "no extra work per step; the article's cost is deterministic GPU kernels (not run here)",
        "logging": "time: the timed table below",
        "clip": "one norm per update: the timed table below",
    }
    lines = []
    for key, (seed_lines, seed_memory, seed_speed) in SEED_COSTS.items():
        row = by[key]
        change = row.graph_bytes / base.graph_bytes - 1
        memory = f"backward keeps {change:+.0%}" if change else "backward keeps the same"
        if row.disk_bytes:
            memory += f"; disk {row.disk_bytes / weights:.1f}x the weights"
        lines.append(f"{key:<13} article: {seed_lines} lines; memory {seed_memory}; speed {seed_speed}")
        lines.append(f"{'':<13} here:    {row.lines_alone} lines; {memory}; {here_speed[key]}")
    return "\n".join(lines)


def compile_record_lines() -> list[str]:
    """Chapter 7: inductor on this kind of CPU, from benchmarks/bench_compile_cpu.py's record."""
    import json

    record = json.loads((Path(__file__).parent / "results" / "compile_cpu.json").read_text())
    lines = [f"measured on an {record['cpu']} ({record['cores']} cores, load average {record['load_average_1min']:g}, "
             f"{record['threads']} thread), torch {record['torch']}, {record['date']} (benchmarks/bench_compile_cpu.py)"]
    for run in record["runs"]:
        lines.append(f"{run['mode']:<9} first epoch {run['first_epoch_s']:.3g} s, later epochs "
                     f"{1000 * run['later_epoch_s']:.3g} ms each, final val loss {run['final_val_loss']:.4f}")
    return lines
