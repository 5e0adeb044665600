"""Chapters 8 and 9 in the browser: an arena run lands on the scoreboard and re-runs; the final quiz counts."""
from pathlib import Path

from tests.browser.interactions import button

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"

_RERUN_BUTTONS = ("() => [...document.querySelectorAll('button')]"
                  ".filter(b => b.innerText.trim() === 'Re-run this row').length")


def _input(page, label: str):
    return page.locator(".widget-inline-hbox", has=page.locator("label", has_text=label)).locator("input").first


def use_arena(page) -> None:
    """Batch 128, Run: the live status moves, the run appears as a second scoreboard row; re-run it."""
    rows_before = page.evaluate(_RERUN_BUTTONS)
    assert rows_before == 1, rows_before                     # the notebook's own run
    box = _input(page, "batch size B")
    box.scroll_into_view_if_needed()
    box.fill("128")
    box.press("Enter")
    button(page, "Run").click()
    page.wait_for_function(f"() => ({_RERUN_BUTTONS})() === 2", timeout=120_000)
    page.wait_for_function("() => [...document.querySelectorAll('.widget-html')]"
                           ".some(e => e.innerText.includes('on your scoreboard') && e.innerText.includes('final val acc'))",
                           timeout=30_000)
    rows = page.locator(".widget-gridbox .widget-html", has_text="← latest")
    assert rows.count() == 1
    page.locator("button", has_text="Re-run this row").first.click()
    page.wait_for_function("() => [...document.querySelectorAll('.widget-html')]"
                           ".some(e => e.innerText.includes('reproduced it exactly'))", timeout=120_000)
    table = page.locator(".widget-gridbox").first
    table.scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "08_arena-scoreboard.png"))
    page.locator(".widget-html", has_text="The arena").first.scroll_into_view_if_needed()
    page.wait_for_timeout(500)


def use_final_quiz(page) -> None:
    """Answer the final question (790 updates), Check, then Refresh the course progress: chapter 09 shows 1."""
    card = page.locator(".widget-vbox", has=page.locator(".widget-html", has_text="20,000 examples, batch 64")).last
    card.scroll_into_view_if_needed()
    card.locator("input").first.fill("790")
    card.locator("button", has_text="Check").first.click()
    page.wait_for_function("() => [...document.querySelectorAll('.widget-html')]"
                           ".some(e => e.innerText.includes('Correct.'))", timeout=30_000)
    refresh = button(page, "Refresh")
    refresh.scroll_into_view_if_needed()
    refresh.click()
    page.wait_for_function("() => [...document.querySelectorAll('.widget-html td')]"
                           ".some(td => td.innerText.trim() === '1/6')", timeout=30_000)
    page.wait_for_timeout(300)


INTERACTIONS = {"08_arena.ipynb": use_arena, "09_cheat_sheet.ipynb": use_final_quiz}
