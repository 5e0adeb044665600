"""Chapters 0-2 in the browser: the newcomer's first ten minutes on chapter 0, and the timed controls of every view.

Chapter 0's pass (issue 27): land where `make lab` sends a learner (chapter 0, not the launcher), read how to
run it, Run All, change a box; then every timed control; then the notebook, saved and reopened later in a new
kernel: its views say how to bring them back, Run All does, and the quiz answer given before survives.
"""
from __future__ import annotations

from tests.browser.timing import ARTIFACTS, click_button, slider_keys, tick, timed, type_into


def answer_first_question(page) -> None:
    """Chapter 0's quiz: type the right answer to Q1 and press Check."""
    card = page.locator(".widget-vbox", has=page.locator(".widget-html", has_text="50,000 examples")).last
    card.scroll_into_view_if_needed()
    card.locator("input[type='text']").first.fill("196")
    card.locator("button.jupyter-button", has_text="Check").first.click()


def land_like_a_newcomer(page, url: str) -> None:
    """Open what `make lab` opens: the server's root URL. It must show chapter 0, saying how to run it."""
    from tests.browser.test_lab import wait_for_kernel
    page.goto(f"{url}/", wait_until="domcontentloaded")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    assert page.url.split("?")[0].endswith("/lab/tree/00_vocabulary.ipynb"), page.url
    tabs = page.locator("#jp-main-dock-panel .lm-TabBar-tab").all_inner_texts()
    assert any("00_vocabulary" in t for t in tabs) and not any("Launcher" in t for t in tabs), tabs
    page.wait_for_function("() => (document.querySelector('.jp-MarkdownCell') || {innerText: ''}).innerText"
                           ".includes('Run All Cells')", timeout=30_000)
    first = page.locator(".jp-MarkdownCell").first.inner_text()
    assert "Run > Run All Cells" in first and "Shift+Enter" in first, first[:300]
    # before any run (an untrusted notebook) a view shows its text form, which says what to do
    hint = page.locator(".jp-OutputArea-output", has_text="Run All Cells, to get the interactive view")
    assert hint.count() >= 1
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "00-newcomer-landing.png"))
    hint.first.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "00-newcomer-before-run.png"))
    wait_for_kernel(page)


def reopened_later(page, url: str) -> None:
    """Save, stop the kernel, open the notebook again: each view says how to bring it back, never 'model not found';
    Run All in the new kernel brings the views back, and the quiz answer given in the timed controls (Q1: 196,
    attempt 1) is restored: the chapter 0 quiz survives a kernel restart.
    """
    from tests.browser.test_lab import menu, run_all_cells, shutdown_kernels, wait_for_kernel
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=120_000)
    menu(page, "File", "Save Notebook")
    page.wait_for_function("() => !document.querySelector('.jp-mod-dirty')", timeout=30_000)
    shutdown_kernels(url)
    page.goto(f"{url}/lab/workspaces/reopened/tree/00_vocabulary.ipynb?reset", wait_until="domcontentloaded")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    wait_for_kernel(page)
    page.wait_for_selector(".cu-reopen-hint >> visible=true", timeout=60_000)
    hints = page.locator(".cu-reopen-hint >> visible=true")
    assert hints.count() >= 2                                       # the calculator and the quiz at least
    assert "run this cell" in hints.first.inner_text()
    assert "model not found" not in page.locator(".jp-Notebook").inner_text()
    hints.first.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "00-reopened-later.png"))
    run_all_cells(page)                                             # a new kernel: the views come back
    page.wait_for_function("() => [...document.querySelectorAll('.widget-html')]"
                           ".some(e => e.innerText.includes('Earlier: answered correctly after 1 attempt'))",
                           timeout=120_000)
    assert page.locator(".cu-reopen-hint >> visible=true").count() == 0
    card = page.locator(".widget-vbox", has=page.locator(".widget-html", has_text="50,000 examples")).last
    card.scroll_into_view_if_needed()
    assert card.locator("input[type='text']").first.input_value() == "196"
    card.screenshot(path=str(ARTIFACTS / "timing-00-quiz-after-restart.png"))


def chapter0_pass(page, url: str) -> None:
    """The newcomer's first ten minutes, every timed control, a restart and a reopening: one run of chapter 0."""
    from tests.browser.test_lab import run_all_cells
    land_like_a_newcomer(page, url)
    run_all_cells(page)
    numbers = page.locator(".widget-html", has_text="iterations per epoch").first
    assert "313" in numbers.inner_text()
    timed(page, "00_vocabulary.ipynb", TIMINGS["00_vocabulary.ipynb"])
    reopened_later(page, url)


_B64 = type_into("batch size B", "64")      # one action for both tries, so a repeat knows the box's first text


def calculator_b64(page) -> None:
    """The newcomer changes a box: B = 64, Enter; the numbers and the timeline say 157 iterations."""
    _B64(page)
    page.wait_for_function("() => [...document.querySelectorAll('.widget-html')]"
                           ".some(x => x.innerText.includes('iterations per epoch') && x.innerText.includes('157'))",
                           timeout=30_000)
    page.wait_for_function("() => [...document.querySelectorAll('.widget-html svg')]"
                           ".some(svg => svg.textContent.includes('157 iterations'))", timeout=30_000)


INTERACTIONS: dict = {}
PASSES = {"00_vocabulary.ipynb": chapter0_pass}

# (what the learner does, the action, a screenshot name or None). Default first, then edge values.
TIMINGS = {
    "00_vocabulary.ipynb": [
        ("calculator: B = 64, Enter (157 iterations)", calculator_b64, "calc-default"),
        ("calculator: stage slider, one step", slider_keys("stage", "ArrowRight"), None),
        ("calculator: micro-step slider to the end", slider_keys("micro-step", "End"), "calc-last-microstep"),
        ("calculator: N = 10,000,000, Enter", type_into("dataset size N", "10000000"), None),
        ("calculator: B = 1 at N = 10M", type_into("batch size B", "1"), "calc-n10m-b1"),
        ("calculator: stage slider at N = 10M", slider_keys("stage", "ArrowRight"), None),
        ("calculator: micro-step to the end at N = 10M", slider_keys("micro-step", "End"), None),
        ("calculator: epochs E pasted '2.5'", type_into("epochs E", "2.5"), "calc-error-2.5"),
        ("calculator: epochs E = 1e3", type_into("epochs E", "1e3"), "calc-epochs-1e3"),
        ("calculator: drop_last ticked", tick("drop_last"), "calc-drop-last"),
        ("quiz: Check with nothing chosen", click_button("Check", nth=3), "quiz00-nothing-chosen"),
        ("quiz: Q1 answered 196, Check", answer_first_question, "quiz00-q1-correct"),
        ("progress: Refresh (after an answer)", click_button("Refresh"), "progress-refreshed"),
    ],
    "01_datasets_dataloaders.ipynb": [
        ("pipeline: Next epoch", click_button("Next epoch"), "pipeline-default"),
        ("pipeline: N = 400, Enter", type_into("examples N", "400"), None),
        ("pipeline: batch size to 1 at N = 400", slider_keys("batch size", "Home"), None),
        ("pipeline: Next epoch at N = 400, B = 1", click_button("Next epoch"), "pipeline-n400-b1"),
        ("pipeline: Next epoch again (epoch 3)", click_button("Next epoch"), None),
        ("pipeline: huge seed", type_into("seed", "99999999999999999999"), "pipeline-huge-seed"),
        ("pipeline: N = 0", type_into("examples N", "0"), None),
        ("quiz: Check with nothing chosen", click_button("Check", nth=0), None),
    ],
    "02_samplers_collation.ipynb": [
        ("sampling: New seed", click_button("New seed"), "sampling-default"),
        ("sampling: batch size to 128", slider_keys("batch size", "End"), None),
        ("sampling: batches to 1", slider_keys("batches", "Home"), "sampling-1-batch"),
        ("sampling: huge seed", type_into("seed", "99999999999999999999"), "sampling-huge-seed"),
        ("sampling: New seed after the huge seed", click_button("New seed"), None),
        ("distributed: Next epoch", click_button("Next epoch"), "distributed-default"),
        ("distributed: N to 60", slider_keys("examples N", "End"), "distributed-n60"),
        ("distributed: W to 1", slider_keys("ranks W", "Home"), None),
        ("padding: bucket by length", tick("bucket by length"), "padding-bucketed"),
        ("padding: huge seed", type_into("seed", "99999999999999999999", nth=1), "padding-huge-seed"),
        ("padding: batch size to 64 (seed still huge)", slider_keys("batch size", "End", nth=1), None),
        ("padding: seed 3", type_into("seed", "3", nth=1), "padding-seed3-b64"),
    ],
}
