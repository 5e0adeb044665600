"""Chapter 7, section 10: where the NaN guard reads. The same run read every update, and every 50 (issue 41)."""
from __future__ import annotations

import contextlib
import hashlib
import importlib
import io
from dataclasses import dataclass
from pathlib import Path

from course_utils.engine.host_reads import counting_host_reads
from course_utils.production import FitConfig, fit

fit_module = importlib.import_module("course_utils.production.fit")


@dataclass(frozen=True)
class GuardRun:
    """One run of the trainer with a poisoned micro-batch, its host reads counted on the training thread."""

    log_every: int
    updates: int
    skipped: int
    reads: int                 # reads of a tensor's value on the training thread, outside validation and the task check
    said: tuple[str, ...]      # the trainer's lines about skipped updates
    weights: str               # SHA-256 of model.pt


def guard_runs(folder: Path, log_every: tuple[int, ...] = (1, 50), **fields) -> list[GuardRun]:
    """The same run (2 epochs, a NaN loss at micro-step 5) once per `log_every`."""
    options = dict(epochs=2, n_train=400, batch_size=16, inject_nan_at=(5,), threads=1, progress=False,
                   tensorboard=False, schedule="warmup_cosine", optimizer="adamw") | fields
    options["optimizer"] = "sgd" if options["schedule"] == "onecycle" else options["optimizer"]
    runs = []
    for every in log_every:
        out = Path(folder) / f"log-every-{every}"
        printed = io.StringIO()
        with counting_host_reads() as reads, contextlib.redirect_stdout(printed), _paused_in(reads):
            result = fit(FitConfig(out=str(out), log_every=every, **options))
        said = tuple(line for line in printed.getvalue().splitlines() if line.startswith("skipped update"))
        runs.append(GuardRun(every, result.updates, result.skipped_updates, sum(reads.values()), said,
                             hashlib.sha256((out / "model.pt").read_bytes()).hexdigest()))
    return runs


@contextlib.contextmanager
def _paused_in(reads):
    """Leave validation and the task's one-batch check out of the count: they read the same in every run."""
    saved = {name: getattr(fit_module, name) for name in ("evaluate", "check_task")}

    def paused(function):
        def call(*args, **kwargs):
            with reads.paused():
                return function(*args, **kwargs)
        return call
    try:
        for name, function in saved.items():
            setattr(fit_module, name, paused(function))
        yield
    finally:
        for name, function in saved.items():
            setattr(fit_module, name, function)


def guard_text(runs: list[GuardRun]) -> str:
    """A table of the runs, and whether they trained the same weights."""
    lines = [f"{'host reads':<22}{'updates':>8}{'skipped':>8}{'reads':>7}{'per update':>11}   (validation aside)"]
    for run in runs:
        lines.append(f"{'every ' + str(run.log_every) + ' update(s)':<22}{run.updates:>8}{run.skipped:>8}"
                     f"{run.reads:>7}{run.reads / (run.updates + run.skipped):>11.2f}")
    lines.append("what each said: " + " / ".join(sorted(set(sum((r.said for r in runs), ())))))
    lines.append(f"the same weights, bit for bit: {len({r.weights for r in runs}) == 1}")
    return "\n".join(lines)
