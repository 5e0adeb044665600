"""Reproduce the one-process gloo deadlock that course_utils/infra/gloo_groups.py prevents, or show it gone.

    python tools/gloo_stress.py [--seconds 60] [--free-groups]

Runs the atlas's DDP entries over and over in a child process whose gloo worker threads are slowed down
(SCHED_IDLE while three CPU burners run), which widens the window in which a worker still holds a finished
work. `--free-groups` turns keep_until_exit off, so each fragment's group is freed as soon as nothing holds it,
as the runner did before. Prints how many entries ran and whether the child hung (no progress for 30 s).
Measured on the 2-core build machine, 45 s each: with --free-groups it hung in 2 tries of 2 (after 2 and 194
entries; gdb: the child's main thread in ~ProcessGroupGloo, a worker in ~AsyncWork waiting for the GIL); without
it, 470 entries and no hang (and 1,000 in 120 s in a longer run).
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _slow_gloo_workers() -> None:
    """Put every gloo worker thread of this process in SCHED_IDLE as soon as it appears."""
    seen: set[str] = set()
    while True:
        for tid in os.listdir("/proc/self/task"):
            if tid in seen:
                continue
            try:
                if "gloo_runloop" in Path(f"/proc/self/task/{tid}/comm").read_text():
                    os.sched_setscheduler(int(tid), os.SCHED_IDLE, os.sched_param(0))
                    seen.add(tid)
            except OSError:
                pass
        time.sleep(0.0005)


def _child(seconds: float, free_groups: bool, progress) -> None:
    import warnings
    warnings.simplefilter("ignore")
    from course_utils.atlas import ENTRIES, runner
    if free_groups:
        runner.keep_until_exit = lambda *holders: None
    threading.Thread(target=_slow_gloo_workers, daemon=True).start()
    entries = [e for e in ENTRIES if e.id.startswith("ddp-") and not e.not_run]
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        for entry in entries:
            for variant in range(len(entry.params)):
                runner.run_entry(entry, variant)
                with progress.get_lock():
                    progress.value += 1


def _burn(until: float) -> None:
    while time.monotonic() < until:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--free-groups", action="store_true", help="free each group at once (the old runner)")
    args = parser.parse_args(argv)
    context = multiprocessing.get_context("spawn")
    progress = context.Value("l", 0)
    until = time.monotonic() + args.seconds + 30
    burners = [context.Process(target=_burn, args=(until,)) for _ in range(3)]
    child = context.Process(target=_child, args=(args.seconds, args.free_groups, progress))
    for process in burners + [child]:
        process.start()
    last, last_change = -1, time.monotonic()
    while child.is_alive() and time.monotonic() - last_change < 30:
        time.sleep(1)
        if progress.value != last:
            last, last_change = progress.value, time.monotonic()
    hung = child.is_alive()
    for process in burners + [child]:
        process.kill()
        process.join()
    print(f"{progress.value} entries ran; " + ("HUNG: no progress for 30 s" if hung else "no hang"))
    return 1 if hung else 0


if __name__ == "__main__":
    sys.exit(main())
