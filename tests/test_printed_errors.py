"""Printed errors are torch's own words (issue 42, the class, not the case).

Chapter 4 once printed the course's own sentence after a typed ``ValueError:``, so it looked like torch's message
and matched nothing a learner sees. The rule: the course never types an exception's name at the start of a line
followed by words of its own; a message it shows comes from the exception object (``f"{type(e).__name__}: {e}"``).
Scanned: every string literal (f-strings' typed parts too) in the course package and the notebook sources, except
docstrings and the atlas (whose entries are torch's messages as patterns, checked against fresh runs by
tests/test_atlas.py). The one typed message left, the explain box's example, is checked here against torch.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import torch

from course_utils.widgets.explain_view import EXAMPLE

ROOT = Path(__file__).resolve().parents[1]
DRESSED = re.compile(r"^[\s>|]*[A-Z][A-Za-z]*(?:Error|Exception|Warning): (.*)$")
TYPED_ON_PURPOSE = {("course_utils/widgets/explain_view.py", EXAMPLE)}   # checked against torch below


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def _is_dressed(line: str) -> bool:
    match = DRESSED.match(line)
    return bool(match and re.search(r"[A-Za-z]{3,}", match.group(1).replace("{}", "")))


def dressed_lines(source: str) -> list[tuple[int, str]]:
    """(line number, text) of every typed line that starts like an exception's message with words of its own.

    An f-string is read as its template, each replacement field as {}: ``f"RuntimeError: {error}"`` shows the
    exception's own words; ``f"ValueError: {name} needs more"`` types some.
    """
    tree = ast.parse(source)
    skip, found = _docstrings(tree), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            template = node.value
        elif isinstance(node, ast.JoinedStr):
            template = "".join(part.value if isinstance(part, ast.Constant) else "{}" for part in node.values)
        else:
            continue
        found += [(node.lineno, line) for line in template.splitlines() if _is_dressed(line)]
    return found


def scanned_files() -> list[Path]:
    package = [p for p in (ROOT / "course_utils").rglob("*.py") if "atlas" not in p.relative_to(ROOT).parts]
    return sorted(package + list((ROOT / "notebooks" / "src").glob("*.py")))


def test_the_course_never_types_a_message_dressed_as_an_exception():
    problems = []
    for path in scanned_files():
        where = str(path.relative_to(ROOT))
        for line_number, text in dressed_lines(path.read_text(encoding="utf-8")):
            if (where, text) not in TYPED_ON_PURPOSE:
                problems.append(f"{where}:{line_number}: {text.strip()[:100]!r}")
    assert not problems, ("typed text dressed as an exception's message (print the exception object instead):\n"
                          + "\n".join(problems))


@pytest.mark.parametrize("snippet, dressed", [
    ('print("ValueError: Expected more than 1 value per channel when training")', True),
    ('print(f"ValueError: {name} needs more than one value")', True),
    ('print(f"the loader said:\\nRuntimeError: stack expects {n}")', True),
    ('print(f"{type(error).__name__}: {error}")', False),
    ('print(f"RuntimeError: {error}")', False),
    ('print(f"caught {type(error).__name__}: {error}")', False),
    ('print(f"`{name}` still raises NotImplementedError: it is the stub")', False),
    ('def f():\n    """RuntimeError: in a docstring, describing, is not printed."""', False),
])
def test_the_scan_sees_a_dressed_message(snippet, dressed):
    assert bool(dressed_lines(snippet)) is dressed


def test_the_explain_box_example_is_what_torch_says():
    with pytest.raises(RuntimeError) as caught:
        torch.zeros(32, 3136) @ torch.zeros(784, 10)
    assert EXAMPLE == f"RuntimeError: {caught.value}"
