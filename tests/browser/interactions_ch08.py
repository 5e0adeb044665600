"""Chapters 8 and 9 in the browser: an arena run lands on the scoreboard and re-runs; the final quiz counts.

Chapter 8 also (issue 27): the menus speak words, the batch box refuses "2.5" in words at Enter, a re-run
updates summary and table together, a damaged scoreboard file is repaired row by row with one line in the view
(no RuntimeWarning, no folder path) and its dead Re-run buttons disappear, and the view keeps its height on an
empty scoreboard.
"""
from pathlib import Path

from tests.browser.interactions import button
from tests.browser.timing import measure, timed, type_into

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
    page.wait_for_function("() => [...document.querySelectorAll('.widget-html')]"
                           ".some(e => e.innerText.includes('Re-run of row 1'))", timeout=30_000)
    page.wait_for_function("() => [...document.querySelectorAll('.widget-gridbox .widget-html')]"
                           ".filter(e => e.innerText.includes('← re-run')).length === 1", timeout=30_000)
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


def _arena_height(page) -> float:
    return page.evaluate("() => { const v = [...document.querySelectorAll('.widget-vbox')]"
                         ".filter(x => x.innerText.includes('The arena')).pop();"
                         " return v.getBoundingClientRect().height; }")


def menus_and_batch_box(page) -> list[dict]:
    """Menus show the same words as chapter 6; "2.5" in the batch box is refused at Enter, quoting it."""
    select = page.locator(".widget-dropdown", has_text="schedule").locator("select").first
    labels = [t.replace("\xa0", " ") for t in select.locator("option").all_inner_texts()]
    assert "warmup + cosine" in labels and "OneCycle" in labels and "warmup_cosine" not in labels, labels
    optimizers = page.locator(".widget-dropdown", has_text="optimizer").locator("select").first
    assert "SGD + momentum" in [t.replace("\xa0", " ") for t in optimizers.locator("option").all_inner_texts()]
    ms = measure(page, type_into("batch size B", "2.5"))
    page.wait_for_function("() => document.body.innerText.includes('batch size B must be a whole number, got 2.5')",
                           timeout=30_000)
    page.screenshot(path=str(ARTIFACTS / "08-arena-batch-2.5.png"))
    back = measure(page, type_into("batch size B", "64"))
    return [{"control": "arena: batch size B '2.5', Enter (refused)", "ms": round(ms)},
            {"control": "arena: batch size B '64', Enter", "ms": round(back)}]


DAMAGE = ('import json; from course_utils.chapters.ch08_scoreboard import default_scoreboard_path as _p; _d = json.loads('
          '_p().read_text()); next(iter(_d["challenges"].values()))["runs"][0]["final_acc"] = "abc"; '
          '_p().write_text(json.dumps(_d)); print("damaged one field of", sum(len(c["runs"]) for c in '
          '_d["challenges"].values()), "runs")')


def damaged_scoreboard(page) -> None:
    """One bad field behind the view's back: a Re-run click finds the row gone, the file is repaired row by row,
    the view says so in one line and redraws the table; no warning appears in the cell."""
    from tests.browser.interactions_ch06 import add_cell
    before = page.evaluate(_RERUN_BUTTONS)
    add_cell(page, DAMAGE, "damaged one field of")
    arena_table = page.locator(".widget-gridbox").first
    arena_table.scroll_into_view_if_needed()
    page.locator("button", has_text="Re-run this row").first.click()
    page.wait_for_function("() => document.body.innerText.includes('Your arena scoreboard file was damaged')",
                           timeout=60_000)
    text = page.locator(".jp-Notebook").inner_text()
    assert f"{before - 1} of {before} saved runs were kept" in text, before
    assert "scoreboard.json.corrupt-" in text and "/tmp" not in text.split("scoreboard file was damaged")[1][:300]
    warnings = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']",
                            has_text="RuntimeWarning")
    assert warnings.count() == 0
    page.wait_for_function(f"() => ({_RERUN_BUTTONS})() === {before - 1}", timeout=30_000)
    page.locator(".widget-html", has_text="The arena").first.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "08-arena-damaged-repaired.png"))


def empty_board_keeps_the_height(page) -> None:
    """Another challenge with no runs: the notice spans the table and the view keeps its height."""
    height = _arena_height(page)
    size = page.locator(".widget-dropdown", has_text="dataset size N").locator("select").first
    size.select_option(label="1200")
    page.wait_for_function("() => document.body.innerText.includes('no runs yet on this challenge')", timeout=60_000)
    page.wait_for_timeout(500)
    assert abs(_arena_height(page) - height) <= 2, (height, _arena_height(page))
    page.locator(".widget-gridbox").first.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "08-arena-empty-board.png"))


def chapter8_pass(page, url: str) -> None:
    from tests.browser.test_lab import run_all
    run_all(page, url, "08_arena.ipynb")
    results = menus_and_batch_box(page)
    use_arena(page)
    damaged_scoreboard(page)
    empty_board_keeps_the_height(page)
    timed(page, "08_arena.ipynb", [], extra=results)


INTERACTIONS = {"09_cheat_sheet.ipynb": use_final_quiz}
PASSES = {"08_arena.ipynb": chapter8_pass}
