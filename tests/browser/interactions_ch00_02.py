"""Chapters 0-2 in the browser: the calculator interaction, and the timed controls of every view (issue 15.2)."""
from __future__ import annotations

from tests.browser.timing import click_button, slider_keys, tick, type_into


def use_calculator(page) -> None:
    """Chapter 0: change the batch size and see the numbers (and the timeline, in the same update) change."""
    numbers = page.locator(".widget-html", has_text="iterations per epoch").first
    numbers.scroll_into_view_if_needed()
    before = numbers.inner_text()
    assert "313" in before
    type_into("batch size B", "64")(page)
    page.wait_for_function("(b) => { const e = [...document.querySelectorAll('.widget-html')]"
                           ".find(x => x.innerText.includes('iterations per epoch')); return e && e.innerText !== b; }",
                           arg=before, timeout=30_000)
    after = numbers.inner_text()
    assert "157" in after and after != before
    page.wait_for_function("() => [...document.querySelectorAll('.widget-html svg')]"
                           ".some(svg => svg.textContent.includes('157 iterations'))", timeout=30_000)


def answer_first_question(page) -> None:
    """Chapter 0's quiz: type the right answer to Q1 and press Check."""
    card = page.locator(".widget-vbox", has=page.locator(".widget-html", has_text="50,000 examples")).last
    card.scroll_into_view_if_needed()
    card.locator("input[type='text']").first.fill("196")
    card.locator("button.jupyter-button", has_text="Check").first.click()


INTERACTIONS = {"00_vocabulary.ipynb": use_calculator}

# (what the learner does, the action, a screenshot name or None). Default first, then edge values.
TIMINGS = {
    "00_vocabulary.ipynb": [
        ("calculator: B = 64, Enter", type_into("batch size B", "64"), "calc-default"),
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
