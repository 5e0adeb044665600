"""Per-chapter browser interactions: use each notebook's main widget the way a learner would."""
from __future__ import annotations

import importlib
import pathlib
import re

# Everything a view shows: its HTML texts and its images. A control that works changes it.
_STATE_JS = ("() => JSON.stringify([...document.querySelectorAll('.widget-html, .widget-image')]"
             ".map(e => e.tagName === 'IMG' ? e.getAttribute('src') : e.innerText))")


def state(page) -> str:
    return page.evaluate(_STATE_JS)


def button(page, label: str):
    """A widget button by its exact label (an icon beside the label is allowed)."""
    return page.locator("button.jupyter-button").filter(has_text=re.compile(rf"^\s*{re.escape(label)}\s*$")).first


def click_and_see_change(page, label: str) -> None:
    """Click a widget button and wait until what the views show has changed."""
    target = button(page, label)
    target.scroll_into_view_if_needed()
    before = state(page)
    target.click()
    page.wait_for_function(f"(b) => ({_STATE_JS})() !== b", arg=before, timeout=30_000)


def use_pipeline(page) -> None:
    """Chapter 1: Next epoch reshuffles the same loader: epoch 2, a different set of skipped examples."""
    click_and_see_change(page, "Next epoch")
    page.wait_for_function("() => [...document.querySelectorAll('.widget-html')]"
                           ".some(e => e.innerText.includes('Epoch 2'))", timeout=30_000)   # after its busy line


def use_sampling(page) -> None:
    """Chapter 2: the sampling-strategies view draws new batches with a new seed."""
    click_and_see_change(page, "New seed")


def use_step_through(page) -> None:
    """Chapter 3: reset, then press every operation in order; the weights change at optimizer.step()."""
    click_and_see_change(page, "reset")
    weights = page.locator(".widget-html", has_text="W.grad").first
    for label in ["zero_grad()", "forward", "loss", "backward()", "clip"]:
        click_and_see_change(page, label)
    before_step = weights.inner_text()
    click_and_see_change(page, "optimizer.step()")
    assert "0.511" in weights.inner_text() and "0.511" not in before_step


def use_train_eval(page) -> None:
    """Chapter 4: forward passes in train mode show new dropout masks; the history of passes grows."""
    click_and_see_change(page, "forward")
    click_and_see_change(page, "forward")


INTERACTIONS = {
    "01_datasets_dataloaders.ipynb": use_pipeline,
    "02_samplers_collation.ipynb": use_sampling,
    "03_anatomy_of_a_step.ipynb": use_step_through,
    "04_evaluation_loop.ipynb": use_train_eval,
}
TIMINGS: dict = {}
PASSES: dict = {}
# Each later chapter keeps its interactions in tests/browser/interactions_chNN.py, a module with its own
# INTERACTIONS dict {notebook file name: function(page)}, TIMINGS (see timing.py) and, for a chapter whose pass
# is more than "interactions, then timed controls", PASSES {notebook file name: function(page, url)}.
for _module in sorted(pathlib.Path(__file__).parent.glob("interactions_ch*.py")):
    _loaded = importlib.import_module(f"tests.browser.{_module.stem}")
    INTERACTIONS.update(getattr(_loaded, "INTERACTIONS", {}))
    TIMINGS.update(getattr(_loaded, "TIMINGS", {}))
    PASSES.update(getattr(_loaded, "PASSES", {}))


def standard_pass(name: str):
    """One notebook, one run: Run All, then its interaction, then its timed controls (each within 1 s)."""
    def run(page, url: str) -> None:
        from tests.browser.test_lab import run_all
        from tests.browser.timing import timed
        run_all(page, url, name)
        if name in INTERACTIONS:
            INTERACTIONS[name](page)
        timed(page, name, TIMINGS.get(name, []))
    return run


for _name in sorted(set(INTERACTIONS) | set(TIMINGS)):
    PASSES.setdefault(_name, standard_pass(_name))
