"""The mutants of a reference solution (issue 40 item 2; run by ``tools/mutate_exercises.py``, `make mutants`).

Each is one small change to the solution's ``ast``: an operator, a constant or an off-by-one, a cast or a dtype
width, a copy removed, a mode switch, ``no_grad``, a seed or generator, a statement dropped or two swapped.

Mutant ids are stable: ``<function>:<operator>:L<line from the def>:<original> -> <replacement>``
(with ``#2``... when the same text changes twice on one line), so an entry of the equivalent file keeps
naming the same mutant when code elsewhere in the module moves.
"""
from __future__ import annotations

import __future__
import ast
import copy
import inspect
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

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
