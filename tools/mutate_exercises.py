"""Mutation testing of the course's own exercise solutions (issue 40 item 2): `make mutants`.

Each reference solution (``course_utils/exercises/solutions.py``'s ``SOLUTIONS``) is parsed with ``ast``;
every mutant is one small change to it (an operator, a constant, a cast, a statement dropped or two
swapped, a mode switch, ``no_grad``, a seed), compiled into a function in the solution's own module
globals and run through its exercise's own checker, in process, as a learner's function would be
(``EXERCISES[name].check(fn, record=False)``: a Verdict, nothing saved in any progress file). A
mutant is *killed* when the check fails, *survives* when it passes, and is *skipped* when it does
not compile. A survivor is either listed as equivalent in
``course_utils/exercises/equivalent_mutants.py`` (with its reason: it behaves the same on the whole
domain the statement allows) or a hole in the checks. The command exits 1 while any non-equivalent
mutant survives.

Why a small tool of our own rather than mutmut or cosmic-ray: those rewrite files on disk and run a
test command per mutant (seconds of imports each), and judge a mutant by the suite's exit code. Here
each mutant is one function checked in process by its exercise's checker in milliseconds, the verdict
itself says why it was killed, and the operators that matter are specific to training loops
(``train()``/``eval()`` swapped or removed, ``torch.no_grad()`` removed, dtype casts and ``dtype=``
widths, a ``generator=`` dropped or a seed reused) which those libraries do not have. ``ast`` and
``inspect`` are all it needs.

The mutants themselves (operators, sites, ids) are made by ``tools/mutation_operators.py``.

    python tools/mutate_exercises.py                  # every exercise; build/mutants.json and a table
    python tools/mutate_exercises.py dropout evaluate # some
    python tools/mutate_exercises.py --list dropout   # the mutants only, not run
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect  # noqa: F401 - the tests read it from here
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutation_operators import (OPERATORS, Mutant, compile_mutant, exercise_mutants,  # noqa: E402, F401
                                mutants_of)

ROOT = Path(__file__).resolve().parents[1]
EQUIVALENT_FILE = ROOT / "course_utils" / "exercises" / "equivalent_mutants.py"   # EQUIVALENT, a dict literal
DEFAULT_OUT = ROOT / "build" / "mutants.json"


def load_equivalent(path: Path = EQUIVALENT_FILE) -> dict[str, dict[str, str]]:
    """{exercise: {mutant id: why it behaves the same on the statement's domain}}, read as a literal (not run)."""
    if not path.exists():
        return {}
    tree = ast.parse(path.read_text())
    value = next(node.value for node in tree.body if isinstance(node, ast.AnnAssign | ast.Assign) and
                 "EQUIVALENT" in ast.unparse(node.target if isinstance(node, ast.AnnAssign) else node.targets[0]))
    return {name: dict(entries) for name, entries in ast.literal_eval(value).items()}


# --- running ------------------------------------------------------------------------------------------------

def run_exercise(name: str, equivalent: dict[str, str] | None = None, factor: float = 10.0,
                 floor_s: float = 3.0) -> tuple[list[Mutant], float]:
    """Run every mutant of one exercise through its check, in this process. Returns (mutants, baseline seconds)."""
    from course_utils.exercises import EXERCISES
    from course_utils.exercises.solutions import SOLUTIONS
    equivalent = load_equivalent().get(name, {}) if equivalent is None else equivalent
    exercise, solution = EXERCISES[name], SOLUTIONS[name]
    exercise.check(*solution, record=False)          # warm: imports, hypothesis, caches
    start = time.perf_counter()
    verdict = exercise.check(*solution, record=False)
    baseline = time.perf_counter() - start
    if not verdict.passed:
        raise RuntimeError(f"{name}: the course's own solution fails its check: {verdict.message}")
    quick = dataclasses.replace(exercise, time_limit=min(exercise.time_limit, max(floor_s, factor * baseline)))
    mutants = exercise_mutants(name)
    for mutant in mutants:
        try:
            fn = compile_mutant(mutant, solution[mutant.position])
        except Exception as exc:  # noqa: BLE001 - a mutant that does not compile is skipped, not counted
            mutant.status, mutant.message = "skipped", f"{type(exc).__name__}: {exc}"
            continue
        functions = list(solution)
        functions[mutant.position] = fn
        start = time.perf_counter()
        verdict = quick.check(*functions, record=False)
        if not verdict.passed and "did not finish within" in verdict.message and quick.time_limit < exercise.time_limit:
            verdict = exercise.check(*functions, record=False)   # slow is not wrong: the exercise's own limit
        mutant.seconds = round(time.perf_counter() - start, 3)
        mutant.message = verdict.message
        if not verdict.passed:
            mutant.status = "killed"
        elif mutant.id in equivalent:
            mutant.status, mutant.reason = "equivalent", equivalent[mutant.id]
        else:
            mutant.status = "survived"
    return mutants, baseline


def _worker(name: str) -> None:
    mutants, baseline = run_exercise(name)
    print(json.dumps({"exercise": name, "baseline_s": round(baseline, 3),
                      "mutants": [dataclasses.asdict(m) for m in mutants]}))


def _in_subprocess(name: str) -> dict:
    """One exercise in a fresh interpreter (a mutant that breaks global state breaks only its own exercise)."""
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", name], cwd=ROOT,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    if done.returncode != 0:
        return {"exercise": name, "error": (done.stderr or done.stdout)[-2000:], "mutants": []}
    return json.loads(done.stdout.strip().splitlines()[-1])


def summarise(results: list[dict]) -> tuple[str, int]:
    """The table (exercise: generated / killed / equivalent / survived / skipped) and the number of survivors."""
    rows = [f"{'exercise':24s} {'generated':>9s} {'killed':>7s} {'equiv':>6s} {'survived':>8s} {'skipped':>7s}"]
    totals = [0, 0, 0, 0, 0]
    for result in results:
        statuses = [m["status"] for m in result["mutants"]]
        counts = [len(statuses)] + [statuses.count(s) for s in ("killed", "equivalent", "survived", "skipped")]
        if result.get("error"):
            counts[3] += 1       # an exercise that could not run counts as a survivor: the target must fail
        totals = [a + b for a, b in zip(totals, counts)]
        rows.append(f"{result['exercise']:24s} {counts[0]:9d} {counts[1]:7d} {counts[2]:6d} {counts[3]:8d} "
                    f"{counts[4]:7d}" + ("  ERROR" if result.get("error") else ""))
    rows.append(f"{'total':24s} {totals[0]:9d} {totals[1]:7d} {totals[2]:6d} {totals[3]:8d} {totals[4]:7d}")
    return "\n".join(rows), totals[3]


def stale_entries(equivalent: dict[str, dict[str, str]] | None = None) -> list[str]:
    """Entries of the equivalent file that name no mutant the tool generates today."""
    equivalent = load_equivalent() if equivalent is None else equivalent
    stale = []
    for name, entries in equivalent.items():
        ids = {m.id for m in exercise_mutants(name)} if entries else set()
        stale += [f"{name}: {mutant_id}" for mutant_id in entries if mutant_id not in ids]
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="exercises (default: all)")
    parser.add_argument("--jobs", "-j", type=int, default=max(1, min(4, (os.cpu_count() or 2) // 2)))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--list", action="store_true", help="print the mutants without running them")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    if args.worker:
        _worker(args.worker)
        return 0
    from course_utils.exercises import EXERCISES
    names = args.names or list(EXERCISES)
    unknown = [n for n in names if n not in EXERCISES]
    if unknown:
        parser.error(f"no exercise called {', '.join(unknown)}")
    if args.list:
        for name in names:
            for mutant in exercise_mutants(name):
                print(f"{name}  {mutant.id}")
        return 0
    start = time.perf_counter()
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(_in_subprocess, names))
    seconds = time.perf_counter() - start
    table, survivors = summarise(results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"seconds": round(seconds, 1), "results": results}, indent=1))
    print(table)
    for result in results:
        if result.get("error"):
            print(f"\n{result['exercise']}: could not run:\n{result['error']}")
        for m in result["mutants"]:
            if m["status"] == "survived":
                print(f"SURVIVED {result['exercise']}: {m['id']}")
    stale = stale_entries({n: e for n, e in load_equivalent().items() if n in names})
    for entry in stale:
        print(f"STALE equivalent entry (no such mutant today): {entry}")
    print(f"\n{len(names)} exercises in {seconds:.1f} s; report: {args.out}")
    return 1 if survivors or stale else 0


if __name__ == "__main__":
    sys.exit(main())
