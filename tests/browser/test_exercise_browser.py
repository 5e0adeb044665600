"""Browser test of a checked exercise (issue 25): solve exercise 0.1 in JupyterLab, see it pass, restart, see it counted.

The learner's path, in headless Chromium: run chapter 0, type a solution into the stub cell of
`updates_per_epoch` (first a formula that floors twice, which the check rejects with a hint to count the batches,
then a right one), run it and its check cell, read "passed"; restart the kernel (nothing in memory
survives), run the course-progress cell, and read that chapter 0 has 1 of its 2 exercises solved: the
result came back from the durable progress file. Screenshots: tests/artifacts/exercise-*.png.
"""
from __future__ import annotations

import pytest

from tests.browser.test_lab import ARTIFACTS, browser, lab, menu, run_all, shutdown_kernels  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

NOTEBOOK = "00_vocabulary.ipynb"
FIRST_TRY = ("def updates_per_epoch(N, B, K, drop_last=False):\n"   # floors twice: no partial batch, no flush
             "    return (N // B) // K\n")
SOLUTION = ("def updates_per_epoch(N, B, K, drop_last=False):\n"
            "    batches = N // B if drop_last or N % B == 0 else N // B + 1\n"
            "    return -(-batches // K)\n")


def code_cell(page, text: str):
    """The code cell whose source contains `text` (the first one, in notebook order)."""
    cell = page.locator(".jp-CodeCell", has=page.locator(".jp-InputArea-editor", has_text=text)).first
    cell.scroll_into_view_if_needed()
    return cell


def run_cell(page, cell) -> None:
    """Put the cursor in the cell's editor and run it (Shift+Enter), as a learner does."""
    cell.locator(".jp-InputArea-editor").first.click()
    page.keyboard.press("Shift+Enter")


def wait_for_text(page, text: str, timeout: int = 60_000) -> None:
    page.wait_for_function("(t) => document.body.innerText.includes(t)", arg=text, timeout=timeout)


def test_solving_an_exercise_passes_and_survives_a_kernel_restart(lab, browser):  # noqa: F811
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        run_all(page, lab, NOTEBOOK)
        check = code_cell(page, 'check("updates_per_epoch")')
        assert "still raises NotImplementedError: it is the stub" in check.inner_text()

        stub = code_cell(page, "def updates_per_epoch")
        for attempt, code, verdict in ((1, FIRST_TRY, "Hint: Count the batches first (is the partial last batch kept?)"),
                                       (2, SOLUTION, "✓ updates_per_epoch: passed.")):
            stub.locator(".jp-InputArea-editor").first.click()
            page.keyboard.press("Control+a")
            page.keyboard.insert_text(code)            # the editor gets the text as typed, without auto-indent
            assert code.splitlines()[1].strip() in stub.locator(".jp-InputArea-editor").inner_text()
            page.keyboard.press("Shift+Enter")         # runs the edited cell; the check cell is selected next
            run_cell(page, check)
            wait_for_text(page, verdict)
            check.scroll_into_view_if_needed()
            check.screenshot(path=str(ARTIFACTS / f"exercise-00-attempt-{attempt}.png"))
        assert "Traceback" not in check.inner_text()

        menu(page, "Kernel", "Restart Kernel")
        page.locator(".jp-Dialog button", has_text="Restart").first.click()
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60_000)
        progress = code_cell(page, "course_progress()")
        run_cell(page, progress)
        page.wait_for_function("() => [...document.querySelectorAll('.widget-html')]"
                               ".some(e => e.innerText.includes('1/2 solved'))", timeout=60_000)
        row = progress.locator(".widget-html tr", has_text="The vocabulary of training").first
        assert "1/2 solved" in row.inner_text()
        assert "0/2 solved" in progress.locator(".widget-html tr", has_text="Datasets and DataLoaders").inner_text()
        progress.scroll_into_view_if_needed()
        progress.screenshot(path=str(ARTIFACTS / "exercise-00-progress-after-restart.png"))
        errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']",
                              has_text="Traceback")
        assert errors.count() == 0, errors.first.inner_text()[:2000]
    except Exception:
        page.screenshot(path=str(ARTIFACTS / "exercise-00-FAILED.png"))
        raise
    finally:
        page.close()
        shutdown_kernels(lab)
