"""Chapter 7's browser interaction: switch flowchart components on and see the flowchart and the code change."""
from pathlib import Path

from tests.browser.interactions import click_and_see_change, state

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"


def _tick(page, label: str) -> None:
    """Tick a component's checkbox and wait until the flowchart view shows it."""
    before = state(page)
    box = page.locator(".widget-checkbox", has_text=label).first.locator("input")
    box.scroll_into_view_if_needed()
    box.click()
    page.wait_for_function("(b) => JSON.stringify([...document.querySelectorAll('.widget-html, .widget-image')]"
                           ".map(e => e.tagName === 'IMG' ? e.getAttribute('src') : e.innerText)) !== b",
                           arg=before, timeout=30_000)


def _board_says(page, words: str) -> None:
    """Wait until the flowchart board (which arrives just after the message) shows `words`."""
    page.wait_for_function("(w) => [...document.querySelectorAll('.widget-html')]"
                           ".some(e => e.innerText.includes('lines of code') && e.innerText.includes(w))",
                           arg=words, timeout=30_000)


def use_flowchart(page) -> None:
    """Add accumulation and mixed precision, then everything, then back to the minimal loop."""
    board = page.locator(".widget-html", has_text="lines of code").first
    board.scroll_into_view_if_needed()
    assert "2 of 11 components on" in board.inner_text()
    _tick(page, "gradient accumulation")
    _tick(page, "mixed precision")
    _board_says(page, "4 of 11 components on")
    text = board.inner_text()
    assert "4 of 11 components on" in text and "loss_weight" in text and "autocast" in text
    assert page.locator(".widget-html", has_text="mixed precision added").count() >= 1
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "07_production_loop-four-components.png"))
    click_and_see_change(page, "all components")
    _board_says(page, "11 of 11 components on")
    assert "11 of 11 components on" in board.inner_text() and "DDP(model)" in board.inner_text()
    page.screenshot(path=str(ARTIFACTS / "07_production_loop-all-components.png"))
    click_and_see_change(page, "minimal loop")
    _board_says(page, "0 of 11 components on")
    assert "0 of 11 components on" in board.inner_text()
    board.scroll_into_view_if_needed()


INTERACTIONS = {"07_production_loop.ipynb": use_flowchart}
