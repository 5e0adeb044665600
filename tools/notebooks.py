"""The notebook command: build each notebook from its source and execute it in place in a fresh kernel.

Sources live in ``notebooks/src/NN_name.py`` in jupytext's percent format (``# %%`` starts a code
cell, ``# %% [markdown]`` a markdown cell whose lines start with ``# ``, ``# %% tags=["a", "b"]`` tags a
code cell); jupytext reads them, so ``jupytext --to ipynb`` / ``--to py:percent`` and pairing work as usual. ``python tools/notebooks.py build [NN ...]`` writes ``notebooks/NN_name.ipynb`` with
fresh outputs; ``python tools/notebooks.py check`` verifies the committed notebooks match their sources.
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "notebooks" / "src"
OUT = ROOT / "notebooks"
TIMEOUT_S = 300


def parse_source(text: str) -> list[dict]:
    """Split a percent-format source into cells [{'type', 'source', 'tags'}], read by jupytext."""
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if line.startswith("# %%")), len(lines))
    # Anything before the first cell marker (a module docstring, a jupytext YAML header) is not a cell.
    notebook = jupytext.reads("\n".join(lines[first:]) + "\n", fmt="py:percent")
    return [{"type": cell.cell_type, "source": cell.source, "tags": list(cell.metadata.get("tags", []))}
            for cell in notebook.cells]


def build_notebook(src: Path) -> nbformat.NotebookNode:
    """A notebook (no outputs yet) from a percent-format source file."""
    nb = nbformat.v4.new_notebook()
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
        "language_info": {"name": "python", "version": "3.11"},
    }
    for i, cell in enumerate(parse_source(src.read_text(encoding="utf-8"))):
        make = nbformat.v4.new_markdown_cell if cell["type"] == "markdown" else nbformat.v4.new_code_cell
        nb_cell = make(cell["source"])
        nb_cell.id = f"{src.stem[:2]}-{i:03d}"
        if cell["tags"]:
            nb_cell.metadata["tags"] = cell["tags"]
        nb.cells.append(nb_cell)
    return nb


def execute(nb: nbformat.NotebookNode) -> float:
    """Run every cell in a fresh kernel, in the notebooks folder, with a throwaway progress file."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["COURSE_PROGRESS"] = str(Path(tmp) / "progress.json")
        client = NotebookClient(nb, timeout=TIMEOUT_S, kernel_name="python3", record_timing=False,
                                store_widget_state=True, resources={"metadata": {"path": str(OUT)}})
        client.execute()
    return time.perf_counter() - start


def sources(selected: list[str]) -> list[Path]:
    paths = sorted(SRC.glob("[0-9][0-9]_*.py"))
    if selected:
        paths = [p for p in paths if any(p.stem.startswith(s) for s in selected)]
        if not paths:
            raise SystemExit(f"no notebook source matches {selected}")
    return paths


def main(argv: list[str]) -> int:
    command, selected = (argv[0] if argv else "build"), argv[1:]
    if command == "build":
        for src in sources(selected):
            nb = build_notebook(src)
            seconds = execute(nb)
            nbformat.write(nb, OUT / f"{src.stem}.ipynb")
            print(f"{src.stem}.ipynb executed in {seconds:.1f} s")
        return 0
    if command == "check":
        bad = [s.stem for s in sources(selected) if not matches_source(s)]
        print("out of date: " + ", ".join(bad) if bad else "all notebooks match their sources")
        return 1 if bad else 0
    raise SystemExit(f"unknown command {command!r}: use build or check")


def matches_source(src: Path) -> bool:
    """Do the committed notebook's cells (sources, kinds, tags) equal the source file's?"""
    path = OUT / f"{src.stem}.ipynb"
    if not path.exists():
        return False
    committed = nbformat.read(path, as_version=4)
    fresh = build_notebook(src)
    def shape(nb):
        return [(c.cell_type, c.source, c.metadata.get("tags", [])) for c in nb.cells]
    return shape(committed) == shape(fresh)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
