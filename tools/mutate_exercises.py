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

Mutant ids are stable: ``<function>:<operator>:L<line from the def>:<original> -> <replacement>``
(with ``#2``... when the same text changes twice on one line), so an entry of the equivalent file keeps
naming the same mutant when code elsewhere in the module moves.

    python tools/mutate_exercises.py                  # every exercise; build/mutants.json and a table
    python tools/mutate_exercises.py dropout evaluate # some
    python tools/mutate_exercises.py --list dropout   # the mutants only, not run
"""
from __future__ import annotations

import __future__
import argparse
import ast
import copy
import dataclasses
import inspect
import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EQUIVALENT_FILE = ROOT / "course_utils" / "exercises" / "equivalent_mutants.py"   # EQUIVALENT, a dict literal
DEFAULT_OUT = ROOT / "build" / "mutants.json"

OPERATORS = ("cmp", "arith", "const", "offbyone", "logic", "dtype", "copy", "mode", "no_grad", "seed", "drop", "swap")

_CMP = {ast.Lt: (ast.LtE, ast.Gt), ast.LtE: (ast.Lt, ast.GtE), ast.Gt: (ast.GtE, ast.Lt), ast.GtE: (ast.Gt, ast.LtE),
        ast.Eq: (ast.NotEq,), ast.NotEq: (ast.Eq,), ast.Is: (ast.IsNot,), ast.IsNot: (ast.Is,),
        ast.In: (ast.NotIn,), ast.NotIn: (ast.In,)}
_ARITH = {ast.Add: (ast.Sub, ast.Mult), ast.Sub: (ast.Add,), ast.Mult: (ast.Div, ast.Add),
          ast.Div: (ast.Mult, ast.FloorDiv), ast.FloorDiv: (ast.Div, ast.Mult), ast.Mod: (ast.FloorDiv,),
          ast.Pow: (ast.Mult,), ast.MatMult: (ast.Mult,)}
_DTYPE_METHODS = {"float": "double", "double": "float", "long": "int", "int": "long", "bool": "float",
                  "half": "float"}
_DTYPE_NAMES = {"long": "int32", "int64": "int32", "int32": "int64", "int": "int64", "float": "float64",
                "float32": "float64", "double": "float32", "float64": "float32", "bool": "uint8",
                "half": "float32", "float16": "float32"}
_GRAD_CONTEXTS = {"no_grad", "inference_mode", "enable_grad"}
_COPIES = {"clone", "detach", "item", "deepcopy", "copy"}


@dataclass
class Mutant:
    """One change to one solution function: its stable id, what changed, and the changed source."""

    exercise: str
    target: str           # the function or class changed (its name in its module)
    position: int         # which of the exercise's functions it replaces
    op: str
    line: int             # line offset from the `def`/`class` line
    original: str
    replacement: str
    source: str
    id: str = ""
    status: str = ""      # killed, survived, equivalent, skipped
    message: str = ""
    seconds: float = 0.0
    reason: str = field(default="", repr=False)


def _short(node: ast.AST | list, width: int = 70) -> str:
    text = "; ".join(ast.unparse(n) for n in node) if isinstance(node, list) else ast.unparse(node)
    text = " ".join(text.split("\n")[0].split())
    return text if len(text) <= width else text[:width - 3] + "..."


def _call_name(node: ast.AST) -> str:
    """`torch.no_grad()` -> 'no_grad'; `x.float()` -> 'float'; `len(x)` -> 'len' ('' when not a call)."""
    if not isinstance(node, ast.Call):
        return ""
    fn = node.func
    return fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""


def _plus(node: ast.expr, k: int) -> ast.expr:
    return ast.BinOp(node, ast.Add() if k > 0 else ast.Sub(), ast.Constant(abs(k)))


# --- expression mutations: (op, factory) where factory(the node in a fresh copy) -> its replacement -----------

def _expr_mutations(node: ast.expr, parent: ast.AST, field_name: str) -> Iterator[tuple[str, Callable]]:
    if isinstance(node, ast.Compare):
        for k, op in enumerate(node.ops):
            for new in _CMP.get(type(op), ()):
                def swap(n, k=k, new=new):
                    n.ops[k] = new()
                    return n
                yield "cmp", swap
    if isinstance(node, ast.BinOp):
        for new in _ARITH.get(type(node.op), ()):
            def arith(n, new=new):
                n.op = new()
                return n
            yield "arith", arith
        if isinstance(node.op, (ast.Mult, ast.Div, ast.Add, ast.Sub)):
            yield "arith", lambda n: n.left
        if isinstance(node.op, (ast.Mult, ast.Add)):
            yield "arith", lambda n: n.right
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        yield "arith", lambda n: n.operand
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield "logic", lambda n: n.operand
    if isinstance(node, ast.BoolOp):
        yield "logic", lambda n: ast.BoolOp(ast.Or() if isinstance(n.op, ast.And) else ast.And(), n.values)
    if isinstance(node, ast.Constant) and not isinstance(node.value, str) and node.value is not None \
            and not isinstance(parent, ast.Expr):
        if isinstance(node.value, bool):
            yield "const", lambda n: ast.Constant(not n.value)
        elif isinstance(node.value, (int, float)):
            yield "const", lambda n: ast.Constant(n.value + 1)
            yield "const", lambda n: ast.Constant(n.value - 1)
    name = _call_name(node)
    in_index = (isinstance(parent, ast.Slice) and field_name in ("lower", "upper")) or \
               (isinstance(parent, ast.Subscript) and field_name == "slice" and not isinstance(node, (ast.Slice,
                                                                                                    ast.Tuple))) or \
               (_call_name(parent) in ("range", "enumerate") and field_name == "args")
    if (in_index or name == "len") and not isinstance(node, ast.Constant):
        yield "offbyone", lambda n: _plus(n, 1)
        yield "offbyone", lambda n: _plus(n, -1)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if name in _DTYPE_METHODS and not node.args and not node.keywords:
            yield "dtype", lambda n: n.func.value
            def cast(n, new=_DTYPE_METHODS[name]):
                n.func.attr = new
                return n
            yield "dtype", cast
        if name == "to" and len(node.args) == 1 and not node.keywords:
            yield "dtype", lambda n: n.func.value
        if name in ("train", "eval"):
            yield "mode", lambda n: ast.Call(ast.Attribute(n.func.value, "eval" if n.func.attr == "train" else "train",
                                                           ast.Load()), [], [])
        if name in _COPIES and not node.args and name != "deepcopy":
            yield "copy", lambda n: n.func.value
        if name == "manual_seed" and node.args and not isinstance(node.args[0], ast.Constant):
            def reuse(n):
                n.args[0] = ast.Constant(0)
                return n
            yield "seed", reuse
            if isinstance(node.args[0], ast.BinOp):
                for side in ("left", "right"):
                    def one_side(n, side=side):
                        n.args[0] = getattr(n.args[0], side)
                        return n
                    yield "seed", one_side
    if isinstance(node, ast.Call) and name == "deepcopy" and len(node.args) == 1:
        yield "copy", lambda n: n.args[0]
    if isinstance(node, ast.Call):
        for k, keyword in enumerate(node.keywords):
            if keyword.arg == "dtype":
                def no_dtype(n, k=k):
                    del n.keywords[k]
                    return n
                yield "dtype", no_dtype
                value = keyword.value
                if isinstance(value, ast.Attribute) and value.attr in _DTYPE_NAMES:
                    def width(n, k=k, new=_DTYPE_NAMES[value.attr]):
                        n.keywords[k].value.attr = new
                        return n
                    yield "dtype", width
            if keyword.arg == "generator":
                def no_generator(n, k=k):
                    del n.keywords[k]
                    return n
                yield "seed", no_generator


# --- statement mutations: (op, factory) where factory(the statement in a fresh copy) -> statements ------------

def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _stmt_mutations(stmt: ast.stmt) -> Iterator[tuple[str, Callable]]:
    if isinstance(stmt, ast.AugAssign):
        for new in _ARITH.get(type(stmt.op), ()):
            def arith(s, new=new):
                s.op = new()
                return [s]
            yield "arith", arith
    if isinstance(stmt, ast.Expr) and _call_name(stmt.value) in ("train", "eval"):
        yield "mode", lambda s: []
    if isinstance(stmt, ast.With) and any(_call_name(item.context_expr) in _GRAD_CONTEXTS for item in stmt.items):
        yield "no_grad", lambda s: s.body
    if not _is_docstring(stmt) and not isinstance(stmt, (ast.FunctionDef, ast.ClassDef, ast.Pass)):
        yield "drop", lambda s: []


@dataclass
class _Site:
    op: str
    line: int
    original: str
    replacement: str
    apply: Callable[[list[ast.AST]], None]    # mutates the walked nodes of a fresh copy of the tree


_ANNOTATIONS = {(ast.arg, "annotation"), (ast.FunctionDef, "returns"), (ast.AnnAssign, "annotation")}


def _sites(tree: ast.AST) -> Iterator[_Site]:
    nodes = list(ast.walk(tree))
    hints = {id(inner) for node in nodes for field_name, value in ast.iter_fields(node)
             if (type(node), field_name) in _ANNOTATIONS and isinstance(value, ast.AST) for inner in ast.walk(value)}
    for index, parent in enumerate(nodes):
        if id(parent) in hints:                                 # inside a type hint: not behaviour
            continue
        for field_name, value in ast.iter_fields(parent):
            if (type(parent), field_name) in _ANNOTATIONS:     # type hints: not behaviour
                continue
            if isinstance(value, list) and value and all(isinstance(v, ast.stmt) for v in value):
                yield from _list_sites(index, field_name, value)
            elif isinstance(value, list):
                for k, child in enumerate(value):
                    if isinstance(child, ast.expr):
                        yield from _expr_sites(index, field_name, k, child, parent)
            elif isinstance(value, ast.expr):
                yield from _expr_sites(index, field_name, None, value, parent)


def _expr_sites(index: int, field_name: str, k: int | None, child: ast.expr, parent: ast.AST) -> Iterator[_Site]:
    for op, factory in _expr_mutations(child, parent, field_name):
        new = factory(copy.deepcopy(child))

        def apply(nodes, factory=factory):
            p = nodes[index]
            if k is None:
                setattr(p, field_name, factory(getattr(p, field_name)))
            else:
                getattr(p, field_name)[k] = factory(getattr(p, field_name)[k])
        yield _Site(op, child.lineno, _short(child), _short(new), apply)


def _list_sites(index: int, field_name: str, stmts: list[ast.stmt]) -> Iterator[_Site]:
    for j, stmt in enumerate(stmts):
        for op, factory in _stmt_mutations(stmt):
            new = factory(copy.deepcopy(stmt))

            def apply(nodes, j=j, factory=factory):
                body = getattr(nodes[index], field_name)
                body[j:j + 1] = factory(body[j])
                if not body:
                    body.append(ast.Pass())
            yield _Site(op, stmt.lineno, _short(stmt), _short(new) if new else "(removed)", apply)
        methods = isinstance(stmt, ast.FunctionDef) and j + 1 < len(stmts) and isinstance(stmts[j + 1], ast.FunctionDef)
        if j + 1 < len(stmts) and not _is_docstring(stmt) and not methods:   # two methods' order is no behaviour
            def swap(nodes, j=j):
                body = getattr(nodes[index], field_name)
                body[j], body[j + 1] = body[j + 1], body[j]
            yield _Site("swap", stmt.lineno, _short(stmt, 40), _short(stmts[j + 1], 40), swap)


def mutants_of(obj: object, exercise: str = "", position: int = 0) -> list[Mutant]:
    """Every distinct mutant of one function or class (the source of each differs from the original)."""
    source = textwrap.dedent(inspect.getsource(obj))
    tree = ast.parse(source)
    original = ast.unparse(tree)
    first = tree.body[0].lineno
    seen, found, counts = {original}, [], {}
    for site in _sites(tree):
        fresh = copy.deepcopy(tree)
        site.apply(list(ast.walk(fresh)))
        text = ast.unparse(ast.fix_missing_locations(fresh))
        if text in seen:
            continue
        seen.add(text)
        line = site.line - first
        base = f"{obj.__name__}:{site.op}:L{line}:{site.original} -> {site.replacement}"
        counts[base] = counts.get(base, 0) + 1
        mutant_id = base if counts[base] == 1 else f"{base} #{counts[base]}"
        found.append(Mutant(exercise, obj.__name__, position, site.op, line, site.original, site.replacement, text,
                            mutant_id))
    return found


def compile_mutant(mutant: Mutant, obj: object) -> object:
    """The mutant as a live function or class, defined in a copy of the solution module's globals."""
    module = sys.modules[obj.__module__]
    code = compile(mutant.source, f"<mutant {mutant.id}>", "exec",
                   flags=__future__.annotations.compiler_flag, dont_inherit=True)
    namespace = dict(vars(module))
    exec(code, namespace)  # noqa: S102 - the course's own solution, changed by one operator
    return namespace[obj.__name__]


def exercise_mutants(name: str) -> list[Mutant]:
    from course_utils.exercises.solutions import SOLUTIONS
    return [m for position, obj in enumerate(SOLUTIONS[name]) for m in mutants_of(obj, name, position)]


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
