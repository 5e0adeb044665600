"""nbval really guards the claims: a mutation that breaks what a chapter demonstrates makes its check fail.

Chapter 0: the calculator mutated from ceil to floor. Chapter 5 (issue 21, printed as claims instead of a
chaotic run's digits): an exhibit retuned so that its bug no longer hurts now prints "NO" beside the claim.
Each runs nbval on a copy of the package with the mutation, over the chapter's first cells only.
"""
import re
import shutil
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import nbval_perturbed  # noqa: E402


def mutated_nbval(tmp_path: Path, notebook: str, code_cells: int, module: str, mutation: tuple[str, str]):
    """nbval over the first `code_cells` code cells of `notebook`, with `mutation` applied to course_utils/`module`."""
    shutil.copytree(ROOT / "course_utils", tmp_path / "course_utils", ignore=shutil.ignore_patterns("__pycache__"))
    source = tmp_path / "course_utils" / module
    text = source.read_text()
    assert mutation[0] in text, f"the mutation no longer applies to {module}: update this test"
    source.write_text(text.replace(*mutation))
    nb = nbformat.read(ROOT / "notebooks" / notebook, as_version=4)
    kept, seen = [], 0
    for cell in nb.cells:
        if cell.cell_type == "code":
            if seen == code_cells:
                break
            seen += 1
        kept.append(cell)
    nb.cells = kept
    folder = tmp_path / "nb"
    folder.mkdir()
    nbformat.write(nb, folder / notebook)
    return nbval_perturbed.nbval([folder / notebook], PYTHONPATH=str(tmp_path))   # the kernel imports the mutant


def test_mutated_calculator_fails_nbval_on_chapter_0(tmp_path):
    outcome = mutated_nbval(tmp_path, "00_vocabulary.ipynb", 99, "engine/arithmetic.py",
                            ("        iters, last = full + 1, remainder", "        iters, last = full, remainder"))
    assert outcome.returncode == 1, outcome.log[-3000:]
    assert len(outcome.failed) >= 3, outcome.log[-3000:]   # the table, the K=4 comparison, the calculator widget...
    assert "312" in outcome.log                              # ...now print floor(10,000 / 32) = 312 instead of 313


def test_an_exhibit_whose_bug_stops_hurting_fails_nbval_on_chapter_5(tmp_path):
    """At SGD lr 0.01 a missing zero_grad looks like an improvement: exhibit 1's claims print NO."""
    outcome = mutated_nbval(tmp_path, "05_bug_museum.ipynb", 3, "chapters/ch05_museum.py",
                            ('"missing_zero_grad": dict(BASE, optimizer="sgd", lr=0.5)',
                             '"missing_zero_grad": dict(BASE, optimizer="sgd", lr=0.01)'))
    assert outcome.failed == ["05_bug_museum.ipynb::Cell 2"], outcome.log[-3000:]
    assert re.search(r"^\s+-\s+NO$", outcome.log, flags=re.M), outcome.log[-3000:]   # this run: NO; committed: yes


def test_a_notebook_whose_kernel_did_not_start_is_run_once_more_and_nothing_else(monkeypatch):
    """Seen once in a fresh-clone CI: a kernel died before its first reply, so every cell of one notebook was an
    error and nothing was compared. That notebook alone runs again; a cell that differs, or any other error, is
    reported as it came."""
    died = ("ERROR notebooks/01_x.ipynb::Cell 0 - RuntimeError: Kernel died before replying to kernel_info\n"
            "ERROR notebooks/01_x.ipynb::Cell 1 - RuntimeError: Kernel died before replying to kernel_info\n")
    calls: list[list[str]] = []

    def runs(outcomes):
        def once(paths, config, label, niceness, **extra):
            calls.append([p.name for p in paths])
            return outcomes[len(calls) - 1]
        return once
    paths = [Path("00_a.ipynb"), Path("01_x.ipynb")]
    Outcome = nbval_perturbed.Outcome
    monkeypatch.setattr(nbval_perturbed, "_nbval_once", runs([Outcome("p", [], "5 passed, 2 errors", 1.0, 1, died),
                                                             Outcome("p", [], "2 passed", 1.0, 0, "ok")]))
    done = nbval_perturbed.nbval(paths, "p")
    assert calls == [["00_a.ipynb", "01_x.ipynb"], ["01_x.ipynb"]] and done.passed
    assert "01_x.ipynb: the kernel did not start; run once more, alone: 2 passed" in done.summary
    for first in (Outcome("p", ["00_a.ipynb::Cell 3"], "1 failed", 1.0, 1, died),             # a cell differs too
                  Outcome("p", [], "1 error", 1.0, 1, "ERROR notebooks/00_a.ipynb::Cell 2 - NameError: x\n")):
        calls.clear()
        monkeypatch.setattr(nbval_perturbed, "_nbval_once", runs([first]))
        assert nbval_perturbed.nbval(paths, "p") is first and len(calls) == 1
    calls.clear()                   # an error of another kind in the notebook run again comes back, and counts
    monkeypatch.setattr(nbval_perturbed, "_nbval_once", runs([Outcome("p", [], "2 errors", 1.0, 1, died),
                                                             Outcome("p", [], "1 error", 1.0, 1, "NameError")]))
    assert not nbval_perturbed.nbval(paths, "p").passed and calls[1] == ["01_x.ipynb"]
