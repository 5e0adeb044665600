"""The facts the mechanism map reads from code (issue 43): what a piece of Python does to torch, read with ``ast``.

``facts_of`` lists, for some statements whose names are resolved through their imports: the torch callables
called or handed over to be called (with the parameters passed, by keyword or position), the methods called
on any object, the dotted torch paths read or assigned, optimizers given parameter-group dicts, and the course
units (functions and classes of ``course_utils`` or of a notebook) the code reaches. ``CourseCode`` parses the
course's modules on demand and resolves a dotted path to its unit (``_moved``'s old names, re-exports, relative
imports). ``torch_map_cells`` applies both to the notebooks' cells; its docstring states the matching rules.
"""
from __future__ import annotations

import ast
import inspect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from course_utils.chapters.torch_map import lookup, signature

ROOT = Path(__file__).resolve().parents[2]


def key(obj: Any) -> int:
    """A stable identity for a torch callable (a bound classmethod is a fresh object at each getattr; importing
    torch._dynamo, as a first optimizer.step() does, wraps some functions such as torch.manual_seed)."""
    return id(inspect.unwrap(getattr(obj, "__func__", obj)))


@lru_cache(maxsize=None)
def torch_object(path: str) -> Any:
    try:
        return lookup(path)
    except Exception:          # an import torch cannot do here (a missing optional backend)
        return None


@lru_cache(maxsize=None)
def positional_names(path: str, drop_self: bool = False) -> tuple[str, ...]:
    """The names a call's positional arguments bind to, for the torch callable at `path`."""
    sig = signature(torch_object(path), drop_self)
    if sig is None:
        return ()
    return tuple(p.name for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


@dataclass
class Facts:
    """What one piece of code does to torch, and which course code it reaches."""

    used: dict[int, set[str]] = field(default_factory=dict)       # torch callable -> parameters passed
    classes: list[type] = field(default_factory=list)              # torch classes built or subclassed
    methods: dict[str, list[tuple[frozenset[str], int]]] = field(default_factory=dict)  # name -> (keywords, n pos)
    refs: set[str] = field(default_factory=set)                    # dotted torch paths read or assigned
    groups: set[int] = field(default_factory=set)                  # torch callables given a list of dicts
    edges: set[str] = field(default_factory=set)                   # course units referenced

    def merge(self, other: Facts) -> None:
        for k, params in other.used.items():
            self.used.setdefault(k, set()).update(params)
        self.classes.extend(other.classes)
        for name, calls in other.methods.items():
            self.methods.setdefault(name, []).extend(calls)
        self.refs |= other.refs
        self.groups |= other.groups


def chain(node: ast.AST) -> tuple[str, ...] | None:
    """('a', 'b', 'c') for the expression a.b.c, None when it does not start from a name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return (node.id, *reversed(parts))
    return None


def walk(nodes: Iterable[ast.AST], skip_defs: bool = False) -> Iterator[ast.AST]:
    """ast.walk without annotations (a type named is not a call); with skip_defs, the bodies of function and
    class definitions are left out (they are units of their own) but a class's bases and decorators stay."""
    stack = list(nodes)
    while stack:
        node = stack.pop()
        yield node
        if skip_defs and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            stack.extend(node.decorator_list)
            stack.extend(node.args.defaults + [d for d in node.args.kw_defaults if d])
            continue
        if skip_defs and isinstance(node, ast.ClassDef):
            stack.extend(node.decorator_list + node.bases + [k.value for k in node.keywords])
            continue
        for name, value in ast.iter_fields(node):
            if name in ("annotation", "returns"):
                continue
            if isinstance(value, ast.AST):
                stack.append(value)
            elif isinstance(value, list):
                stack.extend(v for v in value if isinstance(v, ast.AST))


def statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement in a body, nested ones too (imports are statements: no need to walk expressions)."""
    stack = list(body)
    while stack:
        node = stack.pop()
        yield node
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            stack.extend(getattr(node, name, ()))


def import_names(tree: ast.Module, module: str = "", is_package: bool = False) -> dict[str, str]:
    """name -> the dotted path it stands for, over every import in `tree` (function-level ones too)."""
    names = {}
    for node in statements(tree.body):
        if isinstance(node, ast.Import):
            for a in node.names:
                names[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")
                parts = parts[: len(parts) - node.level + is_package]
                base = ".".join(parts + ([node.module] if node.module else []))
            for a in node.names:
                if a.name != "*":
                    names[a.asname or a.name] = f"{base}.{a.name}"
    return names


def definitions(body: list[ast.stmt]) -> dict[str, ast.AST]:
    return {n.name: n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def facts_of(nodes: Iterable[ast.AST], names: dict[str, str], resolve_unit, skip_defs: bool = False) -> Facts:
    """The Facts of some statements whose names mean `names`; resolve_unit maps a dotted path to a unit key."""
    facts = Facts()

    def qualified(node: ast.AST) -> str | None:
        parts = chain(node)
        if parts is None or parts[0] not in names:
            return None
        return ".".join((names[parts[0]], *parts[1:]))

    def use(path: str, params: Iterable[str] = ()) -> Any:
        obj = torch_object(path)
        if obj is None or not callable(obj):
            return None
        facts.used.setdefault(key(obj), set()).update(params)
        if isinstance(obj, type):
            facts.classes.append(obj)
        return obj

    nodes = list(walk(nodes, skip_defs))
    handed, typed = set(), set()     # expressions handed over to be called later; those in type tests
    for node in nodes:
        if isinstance(node, ast.Call):
            handed.update(id(a) for a in [*node.args, *(k.value for k in node.keywords)])
            if isinstance(node.func, ast.Name) and node.func.id in ("isinstance", "issubclass") and len(node.args) == 2:
                typed.update(id(n) for n in ast.walk(node.args[1]))
        elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            handed.update(id(e) for e in node.elts)
        elif isinstance(node, ast.Dict):
            handed.update(id(v) for v in node.values)
        elif isinstance(node, ast.ClassDef):
            handed.update(id(b) for b in node.bases)
            handed.update(id(d) for d in node.decorator_list)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            handed.update(id(d) for d in [*node.decorator_list, *node.args.defaults, *node.args.kw_defaults] if d)
        elif isinstance(node, ast.ExceptHandler) and node.type is not None:
            typed.update(id(n) for n in ast.walk(node.type))
    for node in nodes:
        if isinstance(node, (ast.Name, ast.Attribute)):
            path = qualified(node)
            if path is None:
                continue
            if path.split(".")[0] != "torch":
                unit = resolve_unit(path)
                if unit:
                    facts.edges.add(unit)
                continue
            facts.refs.add(path)
            if id(node) in handed and id(node) not in typed:
                use(path)             # handed over to be called: a callback, a choice in a dict, a base, a decorator
        elif isinstance(node, ast.Call):
            keywords = frozenset(k.arg for k in node.keywords if k.arg)
            positional = 0
            for a in node.args:
                if isinstance(a, ast.Starred):
                    break
                positional += 1
            path = qualified(node.func)
            if path and path.split(".")[0] == "torch":
                names_by_position = positional_names(path)
                obj = use(path, keywords | set(names_by_position[:positional]))
                first = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "params"), None)
                if obj is not None and _is_groups(first):
                    facts.groups.add(key(obj))
            if isinstance(node.func, ast.Attribute):
                facts.methods.setdefault(node.func.attr, []).append((keywords, positional))
    return facts


def _is_groups(node: ast.AST | None) -> bool:
    """A list (or comprehension) of dict displays: an optimizer's parameter groups."""
    if isinstance(node, (ast.List, ast.Tuple)):
        return bool(node.elts) and all(isinstance(e, ast.Dict) or _is_dict_call(e) for e in node.elts)
    if isinstance(node, ast.ListComp):
        return isinstance(node.elt, ast.Dict) or _is_dict_call(node.elt)
    return False


def _is_dict_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict"


class CourseCode:
    """The course's modules, parsed on demand: units (top-level functions and classes) and what each reaches."""

    def __init__(self, root: Path = ROOT) -> None:
        from course_utils._moved import MOVED
        self.root = root
        self.moved = MOVED
        self.modules: dict[str, tuple[dict[str, str], dict[str, ast.AST]] | None] = {}
        self.units: dict[str, tuple[ast.AST, dict[str, str]]] = {}
        self.facts: dict[str, Facts] = {}

    def module(self, name: str) -> tuple[dict[str, str], dict[str, ast.AST]] | None:
        """(names, definitions) of a course module, or None when `name` is no module of the course."""
        if name not in self.modules:
            base = self.root / Path(*name.split("."))
            is_package = (base / "__init__.py").exists()
            path = base / "__init__.py" if is_package else base.with_suffix(".py")
            if not name.startswith("course_utils") or not path.exists():
                self.modules[name] = None
            else:
                tree = ast.parse(path.read_text(encoding="utf-8"))
                defs = definitions(tree.body)
                names = {**import_names(tree, name, is_package), **{d: f"{name}.{d}" for d in defs}}
                self.modules[name] = (names, defs)
                for d, node in defs.items():
                    self.units[f"{name}.{d}"] = (node, names)
        return self.modules[name]

    def resolve(self, path: str, seen: frozenset[str] = frozenset()) -> str | None:
        """The unit a dotted path names (a function or class of course_utils), following re-exports."""
        if not path.startswith("course_utils") or path in seen:
            return None
        for old, new in self.moved.items():
            if path == old or path.startswith(old + "."):
                path = new + path[len(old):]
        parts = path.split(".")
        for k in range(len(parts) - 1, 0, -1):
            found = self.module(".".join(parts[:k]))
            if found is None:
                continue
            names, defs = found
            head = parts[k]
            if head in defs:
                return f"{'.'.join(parts[:k])}.{head}"
            if head in names:
                return self.resolve(".".join([names[head], *parts[k + 1:]]), seen | {path})
            return None
        return None

    def unit_facts(self, unit: str) -> Facts:
        if unit not in self.facts:
            node, names = self.units[unit]
            self.facts[unit] = facts_of([node], names, self.resolve)
        return self.facts[unit]
