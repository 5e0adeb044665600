"""Committed notebooks: built from their sources, executed 1..n in a fresh kernel, no errors, tag policy kept."""
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import notebooks as nbtool  # noqa: E402

SOURCES = sorted((ROOT / "notebooks" / "src").glob("[0-9][0-9]_*.py"))
ALLOWED_TAGS = {"nbval-ignore-output"}
ANSWER_TAG = "answers-"   # a cell that answers learner questions (course_utils/chapters/ch09_symptoms.py)


def test_there_are_notebooks():
    assert SOURCES


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.stem)
def test_notebook_is_built_from_its_source_and_executed_in_order(src):
    assert nbtool.matches_source(src), f"{src.stem}.ipynb is out of date: run `make notebooks NB={src.stem[:2]}`"
    nb = nbformat.read(ROOT / "notebooks" / f"{src.stem}.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1))
    for cell in code:
        assert not [o for o in cell.outputs if o.output_type == "error"], cell.source[:60]
        assert not [o for o in cell.outputs if o.get("name") == "stderr" and "Traceback" in o.get("text", "")]
        assert {t for t in cell.metadata.get("tags", []) if not t.startswith(ANSWER_TAG)} <= ALLOWED_TAGS
        if any(t.startswith(ANSWER_TAG) for t in cell.metadata.get("tags", [])):
            assert "nbval-ignore-output" not in cell.metadata["tags"], "an answer must be compared by nbval"
        assert "execution" not in cell.metadata  # no timing metadata
    assert "setup_notebook()" in code[0].source
    assert nb.cells[0].cell_type == "markdown" and nb.cells[-1].cell_type == "markdown"
    assert any("quiz(" in c.source for c in code)
    ignored = [c for c in code if "nbval-ignore-output" in c.metadata.get("tags", [])]
    assert len(ignored) <= max(1, len(code) // 4), "most cells must be compared by nbval"


def test_parse_source_handles_markdown_code_and_tags():
    cells = nbtool.parse_source('"""doc"""\n# %% [markdown]\n# # Title\n#\n# text\n# %% tags=["nbval-ignore-output"]\nx = 1\n\n')
    assert cells == [{"type": "markdown", "source": "# Title\n\ntext", "tags": []},
                     {"type": "code", "source": "x = 1", "tags": ["nbval-ignore-output"]}]


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.stem)
def test_sources_round_trip_through_jupytext(src):
    """An instructor may pair or sync with jupytext: writing the built notebook back gives the same cells."""
    import jupytext
    nb = nbtool.build_notebook(src)
    again = nbtool.parse_source(jupytext.writes(nb, fmt="py:percent"))
    assert again == nbtool.parse_source(src.read_text(encoding="utf-8"))
