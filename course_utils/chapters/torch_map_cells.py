"""Which compared notebook cells call which items of the mechanism map (issue 43), read from the code with ``ast``.

A cell counts when nbval compares it (no ``nbval-skip``, ``nbval-ignore-output`` or ``raises-exception`` tag,
nor their ``# NBVAL_...`` comments, read with nbval's own tables) and it prints something nbval holds fixed
(stdout, stderr, text/plain or text/html that is more than what ``tests/nbval_sanitize.cfg`` replaces).

A cell's code is its own statements plus, up to ``DEPTH`` calls deep, the functions and classes it reaches in
the course's own code: functions defined in earlier cells of its notebook and ``course_utils`` functions, with
imports resolved (``_moved``'s old names, re-exports, relative imports). Reaching a class reaches all its
methods; a course function referenced as a value (a callback) counts as reached. This over-approximates what
runs: a branch the cell's arguments never take still counts.

What matches an item (``torch_map.Item``):

- ``name``: the torch object is called, or handed over as a value that code then calls (an argument, an
  element of a list, tuple or dict, a default, a base class, a decorator), but not in ``isinstance``/
  ``issubclass`` or an ``except`` clause, nor assigned to a name (that is how code patches it); the code's
  name is resolved through its imports to the object itself, so ``torch.autocast`` is ``torch.amp.autocast``;
- ``param``: a call of that object passes the parameter by keyword, or by position (bound with its signature);
- ``method``: ``.<name>(...)`` called on any object (the receiver's type is not known statically), with the
  parameter by keyword if the item has one (a position would bind ``hashlib``'s ``digest.update(b)`` to
  ``GradScaler.update(new_scale)``). For classes other than ``nn.Module`` and ``Tensor``, the same reached code must
  also build an instance of the owner (or a subclass): ``.update()`` counts as ``GradScaler.update`` only where
  a GradScaler is made;
- ``attr``: the dotted path (or an attribute under it) is read or assigned;
- ``groups``: an optimizer class gets a list of dicts as its parameters.

Text in strings and comments never counts: ``ast`` does not see it.
"""
from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch

from course_utils.chapters.torch_map import Item, entries
from course_utils.chapters.torch_map_code import CourseCode, Facts, definitions, facts_of, import_names, key

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
SANITIZE = ROOT / "tests" / "nbval_sanitize.cfg"
DEPTH = 4                     # calls followed from a cell into the course's code
NO_GUARD = (torch.nn.Module, torch.Tensor)    # method items matched on any object, no instance needed


@dataclass(frozen=True)
class Cell:
    """A committed code cell and what nbval makes of it."""

    notebook: str
    id: str
    source: str
    compared: bool
    prints: bool


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else value or ""


@lru_cache(maxsize=1)
def nbval_markers() -> tuple[dict, dict]:
    """nbval's own tables, (comment markers, metadata tags), read from its source: importing nbval.plugin takes
    seconds (jsonschema's grammars)."""
    import importlib.util
    source = Path(importlib.util.find_spec("nbval").origin).with_name("plugin.py").read_text(encoding="utf-8")
    table = next(n.value for n in ast.parse(source).body if isinstance(n, ast.Assign)
                 and any(isinstance(t, ast.Name) and t.id == "comment_markers" for t in n.targets))
    comments = ast.literal_eval(table)
    tags = {k.lower().replace("_", "-"): v for k, v in comments.items()}
    tags["raises-exception"] = "check_exception"      # as nbval.plugin adds it
    return comments, tags


def _marker(value: Any) -> tuple[str, bool]:
    return value if isinstance(value, tuple) else (value, True)


@lru_cache(maxsize=1)
def _sanitizers() -> tuple[tuple[str, str], ...]:
    """(regex, replacement) pairs of tests/nbval_sanitize.cfg, parsed with nbval's own pattern."""
    text = SANITIZE.read_text(encoding="utf-8")
    return tuple(re.findall("^regex: (.*)$\n^replace: (.*)$", text, flags=re.MULTILINE))


def prints(outputs: list[dict]) -> bool:
    """Whether the outputs hold text nbval compares beyond what the sanitizers replace."""
    text = "".join(_text(o.get("text")) + _text(o.get("data", {}).get("text/plain"))
                   + _text(o.get("data", {}).get("text/html")) for o in outputs)
    for regex, _ in _sanitizers():
        text = re.sub(regex, "", text)
    return bool(text.strip())


def compared(tags: Iterable[str], source: str) -> bool:
    """Whether nbval compares the cell's output: no skip, ignore-output or raises-exception marker (a tag, or
    a ``# NBVAL_...`` comment line)."""
    comments, by_tag = nbval_markers()
    found = [_marker(by_tag[t]) for t in tags if t in by_tag]
    found += [_marker(comments[c]) for c in (line.strip().lstrip("#").strip() for line in source.splitlines()
                                               if line.strip().startswith("#")) if c in comments]
    markers = dict(found)
    return not (markers.get("skip") or markers.get("check_exception") or markers.get("check") is False)


def notebook_cells(name: str, nb: dict) -> list[Cell]:
    out = []
    for i, raw in enumerate(nb["cells"]):
        if raw["cell_type"] != "code":
            continue
        source = _text(raw.get("source"))
        tags = raw.get("metadata", {}).get("tags", [])
        out.append(Cell(name, raw.get("id", str(i)), source, compared(tags, source), prints(raw.get("outputs", []))))
    return out


def parse(source: str) -> ast.Module:
    """A cell's code; IPython's magic and shell lines become blank lines."""
    lines = ["" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return ast.Module(body=[], type_ignores=[])


class Analysis:
    """Every compared, printing cell of some notebooks, with the facts of the code it reaches."""

    def __init__(self, notebooks: dict[str, dict], code: CourseCode | None = None, depth: int = DEPTH) -> None:
        self.code = code or CourseCode()
        self.depth = depth
        self.cells: dict[tuple[str, str], tuple[Cell, Facts, list[tuple[str, Facts]]]] = {}
        for name, nb in notebooks.items():
            cells = notebook_cells(name, nb)
            trees = [parse(c.source) for c in cells]
            prefix = f"nb:{name}:"
            names: dict[str, str] = {}
            for tree in trees:
                names.update(import_names(tree))
                for d, node in definitions(tree.body).items():
                    names[d] = prefix + d
                    self.code.units[prefix + d] = (node, names)   # the notebook's final names (cells run in order)

            def resolve(path: str, _prefix: str = prefix) -> str | None:
                return path if path.startswith(_prefix) else self.code.resolve(path)

            for cell, tree in zip(cells, trees):
                if not (cell.compared and cell.prints):
                    continue
                own = facts_of(tree.body, names, resolve, skip_defs=True)
                self.cells[(name, cell.id)] = (cell, own, self.reach(own, resolve))

    def reach(self, own: Facts, resolve) -> list[tuple[str, Facts]]:
        """The course units a cell reaches within `depth` calls, nearest first, with their facts."""
        seen, order, frontier = set(), [], sorted(own.edges)
        for _ in range(self.depth):
            nxt = []
            for unit in frontier:
                if unit in seen or unit not in self.code.units:
                    continue
                seen.add(unit)
                facts = self.unit_facts(unit, resolve)
                order.append((unit, facts))
                nxt.extend(sorted(facts.edges))
            frontier = nxt
        return order

    def unit_facts(self, unit: str, resolve) -> Facts:
        if unit.startswith("nb:") and unit not in self.code.facts:
            node, names = self.code.units[unit]
            self.code.facts[unit] = facts_of([node], names, resolve)
        return self.code.unit_facts(unit)

    def find(self, items: list[Item]) -> dict[str, list[dict]]:
        """id -> the places that demonstrate it: {"notebook", "cell"[, "via": the course unit]}, cells whose own
        code calls it first, then in notebook order."""
        found: dict[str, list[dict]] = {}
        for (notebook, cell_id), (_, own, reached) in self.cells.items():
            every = Facts()
            every.merge(own)
            for _, facts in reached:
                every.merge(facts)
            for item in items:
                if not matches(item, every, every):
                    continue
                place = {"notebook": notebook, "cell": cell_id}
                if not matches(item, own, every):
                    place["via"] = next((u for u, f in reached if matches(item, f, every)), "several units")
                found.setdefault(item.id, []).append(place)
        return {i: sorted(places, key=lambda p: "via" in p) for i, places in found.items()}


def matches(item: Item, facts: Facts, context: Facts) -> bool:
    """Whether `facts` show `item` (see the module docstring); `context` (the whole reached code) decides the
    instance rule of method items."""
    if item.kind == "name":
        return key(item.targets[0]) in facts.used
    if item.kind == "param":
        return any(item.param in facts.used.get(key(t), ()) for t in item.targets)
    if item.kind == "groups":
        return any(key(t) in facts.groups for t in item.targets)
    if item.kind == "attr":
        return any(r == item.path or r.startswith(item.path + ".") for r in facts.refs)
    if item.kind == "method":
        calls = facts.methods.get(item.method)
        if not calls:
            return False
        owner = item.owner
        if not issubclass(owner, NO_GUARD) and not any(issubclass(c, owner) for c in context.classes):
            return False
        if not item.param:
            return True
        return any(item.param in kw for kw, _ in calls)
    raise ValueError(f"unknown kind {item.kind!r}")


def committed_notebooks(folder: Path = NOTEBOOKS) -> dict[str, dict]:
    """The course's committed notebooks, name -> nbformat JSON."""
    return {p.name: json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("[0-9][0-9]_*.ipynb"))}


def claim_problems(mapping: dict, places: dict[str, list[dict]]) -> list[str]:
    """Each "demonstrated" place of the map that the analysis (`places`, from Analysis.find) does not confirm."""
    out = []
    for i, e in entries(mapping).items():
        if e["status"] != "demonstrated":
            continue
        confirmed = {(p["notebook"], p["cell"]) for p in places.get(i, [])}
        out += [f"{i}: {p['notebook']} cell {p['cell']} does not call it (or nbval does not compare it, or it "
                f"prints nothing)" for p in e.get("where", []) if (p["notebook"], p["cell"]) not in confirmed]
    return out
