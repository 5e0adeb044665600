"""Browser timing (issue 15.2): every registered control answers within 1 s, input event to last DOM change.

Controls are registered per chapter in tests/browser/interactions_chNN.py as TIMINGS (see timing.py). Each
notebook is run once (Run All), then its controls are driven in order; figures go to
tests/artifacts/timing-NN.json and screenshots of the changed view to tests/artifacts/timing-NN-<name>.png.
Also here: a quiz answer in chapter 0 survives a kernel restart (issue 9, "Must show").
"""
from __future__ import annotations

import importlib
import json
import pathlib

import pytest

from tests.browser.test_lab import ARTIFACTS, browser, lab, menu, run_all, shutdown_kernels  # noqa: F401 (fixtures)
from tests.browser.timing import LIMIT_MS, measure, shoot_changed_cell, wait_for_idle_kernel

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]

TIMINGS: dict = {}
for _module in sorted(pathlib.Path(__file__).parent.glob("interactions_ch*.py")):
    TIMINGS.update(getattr(importlib.import_module(f"tests.browser.{_module.stem}"), "TIMINGS", {}))


@pytest.mark.parametrize("name", sorted(TIMINGS))
def test_every_timed_control_answers_within_a_second(lab, browser, name):  # noqa: F811
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    stem = name[:2]
    results = []
    try:
        run_all(page, lab, name)
        wait_for_idle_kernel(page)
        page.wait_for_timeout(2000)   # let JupyterLab finish rendering the last outputs before the first action
        for label, action, shot in TIMINGS[name]:
            ms = measure(page, action)
            results.append({"control": label, "ms": round(ms)})
            if shot:
                shoot_changed_cell(page, ARTIFACTS / f"timing-{stem}-{shot}.png")
        errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']",
                              has_text="Traceback")
        assert errors.count() == 0, errors.first.inner_text()[:2000]
    finally:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        (ARTIFACTS / f"timing-{stem}.json").write_text(json.dumps(results, indent=1))
        for r in results:
            print(f"[timing] {name}: {r['control']}: {r['ms']} ms")
        page.close()
        shutdown_kernels(lab)
    slow = [r for r in results if r["ms"] > LIMIT_MS]
    assert not slow, f"controls slower than {LIMIT_MS} ms: {slow}"


def test_quiz_answer_in_chapter_0_survives_a_kernel_restart(lab, browser):  # noqa: F811
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        run_all(page, lab, "00_vocabulary.ipynb")
        card = page.locator(".widget-vbox", has=page.locator(".widget-html", has_text="50,000 examples")).last
        card.scroll_into_view_if_needed()
        box = card.locator("input[type='text']").first
        box.fill("196")
        card.locator("button.jupyter-button", has_text="Check").first.click()
        page.wait_for_function("() => [...document.querySelectorAll('.widget-html')]"
                               ".some(e => e.innerText.includes('Correct. (attempt 1)'))", timeout=30_000)
        menu(page, "Kernel", "Restart Kernel and Run All Cells")
        page.locator(".jp-Dialog button", has_text="Restart").first.click()
        page.wait_for_function("() => [...document.querySelectorAll('.widget-html')]"
                               ".some(e => e.innerText.includes('Earlier: answered correctly after 1 attempt'))",
                               timeout=240_000)
        card = page.locator(".widget-vbox", has=page.locator(".widget-html", has_text="50,000 examples")).last
        card.scroll_into_view_if_needed()
        assert card.locator("input[type='text']").first.input_value() == "196"
        card.screenshot(path=str(ARTIFACTS / "timing-00-quiz-after-restart.png"))
    finally:
        page.close()
        shutdown_kernels(lab)
