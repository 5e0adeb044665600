"""Chapter 6's browser interaction: the simulator used as a learner would, with its speed measured.

Step a few times, train epochs, tick a bug (the ghost appears), train to the end and stop it, reset.
Each click is timed from the click to the last change inside the simulator's output (the readouts,
which the live plot shows above its canvases, and the canvases: it stamps a data-version attribute
after every redraw), until the view is
quiet for QUIET_MS. The figures are printed and written to tests/artifacts/ch06_speed.json; they are
reported, never asserted (the machine is shared).

For scale, every Step click is followed by a click on a bare button (one ipywidgets Button that updates
one HTML label) added in a new cell of the same notebook, timed the same way: the kernel round trip and
the browser's own work under the same load at the same moment, so the Step's own share is the difference.
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path

from tests.browser.interactions import button
from tests.browser.timing import LIMIT_MS, measure, text_box, tick, timed, type_into

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
QUIET_MS = 400

_OBSERVE = """(el) => {
  const root = el.closest('.jp-OutputArea-output');
  window.__simLast = 0;
  window.__simObserver && window.__simObserver.disconnect();
  window.__simObserver = new MutationObserver(() => { window.__simLast = performance.now(); });
  window.__simObserver.observe(root, {subtree: true, childList: true, attributes: true, characterData: true});
}"""
_CLICK = "(el) => { window.__simLast = 0; window.__simT0 = performance.now(); el.click(); }"
_QUIET = f"""() => window.__simLast > window.__simT0 && performance.now() - window.__simLast > {QUIET_MS}"""


def _readouts(page) -> str:
    return page.evaluate("() => document.querySelector('.lp-text').innerText")


def _message(page) -> str:
    return page.evaluate("() => { const r = document.querySelector('.lp-root').closest('.widget-vbox');"
                         " return r ? r.innerText : ''; }")


STEPS_TIMED = 10   # Step clicks timed: enough for a median that one slow round trip does not move
LONG = 10_000      # the long run's history: micro-batches trained in the kernel before Step and Stop are timed
                   # (over 5x the 7 x 256 buckets the page may hold; 50,000 cost 45 s of kernel time for the same check)

# The bare button (typed into a new last cell; one line, so the editor's auto-indent cannot change it).
BARE_CODE = ('import ipywidgets as _w; _bare_label = _w.HTML("bare clicks: 0"); _bare = _w.Button(description="Bare"); '
             '_bare.on_click(lambda _: setattr(_bare_label, "value", "bare clicks: %d" % '
             '(int(_bare_label.value.split()[-1]) + 1))); display(_w.HBox([_bare, _bare_label]))')


def observe(page, selector: str) -> None:
    """Watch the output area holding `selector` (the simulator, or the bare button) for changes."""
    page.evaluate(_OBSERVE, page.locator(selector).first.element_handle())


def add_cell(page, code: str, until: str, timeout: int = 120_000) -> None:
    """Insert a code cell after the last one, type `code` (one line) into it, run it, wait for `until` on the page."""
    last = page.locator(".jp-Notebook .jp-Cell").last
    last.scroll_into_view_if_needed()
    last.locator(".jp-InputPrompt").first.click()
    page.keyboard.press("Escape")                  # command mode
    page.keyboard.press("b")                       # a new code cell below, selected
    page.keyboard.press("Enter")                   # edit it
    page.keyboard.insert_text(code)                # as typed, without the editor's auto-indent or brackets
    page.keyboard.press("Shift+Enter")
    page.wait_for_function("(u) => document.body.innerText.includes(u)", arg=until, timeout=timeout)


def add_bare_button(page) -> None:
    """A bare button in a new last cell (the notebook is a copy): the kernel round trip, timed beside each Step."""
    add_cell(page, BARE_CODE, "bare clicks: 0", timeout=30_000)


def timed_click(page, label: str, until: str = "", timeout: int = 60_000) -> float:
    """Click a button (the simulator's, or the bare one); return ms from the click to the last change observed.

    The view counts as done when it has been quiet for QUIET_MS and (if given) its text contains `until`.
    """
    handle = button(page, label).element_handle()
    page.evaluate(_CLICK, handle)
    page.wait_for_function(f"(until) => document.body.innerText.includes(until) && ({_QUIET})()", arg=until,
                           timeout=timeout, polling=50)
    return page.evaluate("() => window.__simLast - window.__simT0")


def use_simulator(page) -> None:
    """Step, train epochs, tick a bug, train to the end and stop, reset; time the clicks."""
    page.wait_for_function("() => document.querySelector('.lp-root') && "
                           "document.querySelector('.lp-root').dataset.version", timeout=30_000)
    add_bare_button(page)
    page.locator(".lp-root").first.scroll_into_view_if_needed()
    button(page, "Reset").scroll_into_view_if_needed()
    observe(page, ".lp-root")
    timed_click(page, "Reset")
    assert "step 0 of 190" in _readouts(page)
    steps, draws, bare = [], [], []
    for n in range(STEPS_TIMED):                     # Step and the bare button in turn: the same load for both
        observe(page, ".lp-root")
        steps.append(timed_click(page, "Step", until=f"step {n + 1} of 190"))
        draws.append(float(page.evaluate("() => document.querySelector('.lp-root').dataset.drawMs")))
        observe(page, "button.jupyter-button:has-text('Bare')")
        bare.append(timed_click(page, "Bare", until=f"bare clicks: {n + 1}"))
    observe(page, ".lp-root")
    assert f"step {STEPS_TIMED} of 190" in _readouts(page), _readouts(page)
    page.locator(".lp-root").first.scroll_into_view_if_needed()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "06_training_simulator-steps.png"))
    timed_click(page, "Reset")                       # whole epochs from here: the Steps went past epoch 1
    assert "step 0 of 190" in _readouts(page)
    epochs = []
    for n in range(3):
        epochs.append(timed_click(page, "Train epoch", until=f"epoch {n + 1} of 10 done"))
        assert f"epoch {n + 1} of 10 done" in _readouts(page), _readouts(page)
    page.screenshot(path=str(ARTIFACTS / "06_training_simulator-epochs.png"))
    # a bug: the run restarts, the view says so, the healthy ghost joins the panels
    page.locator(".widget-checkbox", has_text="Missing zero_grad").first.locator("input").click()
    page.wait_for_function("() => document.body.innerText.includes('a new run started from step 0')",
                           timeout=30_000)
    assert page.locator(".lp-key", has_text="ghost").count() >= 1
    timed_click(page, "Train epoch", until="epoch 1 of 10 done")
    timed_click(page, "Train epoch", until="epoch 2 of 10 done")
    assert "healthy ghost (same seed): step 38" in _readouts(page), _readouts(page)
    page.locator(".lp-root").first.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "06_training_simulator-bug.png"))
    # Train to end, then Stop while it runs: the kernel still hears the Stop click
    handle = button(page, "Train to end").element_handle()
    page.evaluate(_CLICK, handle)
    page.wait_for_timeout(150)
    button(page, "Stop").click()
    page.wait_for_function("() => /Stopped at step|run is complete/.test(document.body.innerText)", timeout=60_000)
    ended = _message(page)                           # what the view said then: Reset below replaces it
    stopped = "Stopped at step" in ended
    timed_click(page, "Reset")
    assert "step 0 of 190" in _readouts(page) and "Reset: a new run" in _message(page)
    page.locator(".widget-checkbox", has_text="Missing zero_grad").first.locator("input").click()   # healthy again
    page.wait_for_function("() => !document.querySelector('.lp-text').innerText.includes('healthy ghost')",
                           timeout=30_000)
    figures = {"step_ms": steps, "epoch_ms": epochs, "stop_honoured": stopped, "draw_ms": draws,
               "draw_median_ms": statistics.median(draws),
               "step_median_ms": statistics.median(steps), "step_min_ms": min(steps),
               "bare_ms": bare, "bare_median_ms": statistics.median(bare), "bare_min_ms": min(bare),
               "epoch_median_ms": statistics.median(epochs), "epoch_min_ms": min(epochs)}
    (ARTIFACTS / "ch06_speed.json").write_text(json.dumps(figures, indent=1))
    print(f"\nchapter 6 speed (click -> last change of the view, quiet {QUIET_MS} ms): "
          f"Step median {figures['step_median_ms']:.0f} ms (min {figures['step_min_ms']:.0f}, n={len(steps)}); "
          f"bare button, same page, in turn with the Steps: median {figures['bare_median_ms']:.0f} ms "
          f"(min {figures['bare_min_ms']:.0f}); "
          f"Train epoch median {figures['epoch_median_ms']:.0f} ms (min {figures['epoch_min_ms']:.0f}, "
          f"n={len(epochs)}); canvas drawing per Step median {figures['draw_median_ms']:.1f} ms; "
          f"Stop honoured mid-run: {stopped}")
    # A 190-step run may end before the Stop click reaches the kernel on a fast host: here Stop and the run's end race,
    # and either ending must be said. That Stop is honoured is checked where it cannot lose the race: long_run().
    assert stopped or "run is complete" in ended, ended
    assert max(steps) < LIMIT_MS, f"a Step took {max(steps):.0f} ms"
    return figures


def _message_line(page) -> str:
    return page.evaluate("() => { const r = document.querySelector('.lp-root').closest('.widget-vbox');"
                         " const m = [...r.querySelectorAll('.widget-html')].filter(e => e.innerText.trim());"
                         " return m.map(e => e.innerText).join(' | '); }")


def number_boxes(page) -> list[dict]:
    """Chapter 6's boxes follow the course's one input rule in the browser: refused in words, or computed as typed."""
    cases = [("batch size", "2.5", "batch size must be a whole number, got 2.5", "32"),
             ("noise", "1e400", "noise: 1e400 is out of range", "0.2"),
             ("epochs", "2,5", "'2,5' is ambiguous", "10"),
             ("dataset size", "1e3", "You changed “dataset size” to 1,000", "1e3"),
             ("dataset size", "600", "You changed “dataset size” to 600", "600")]
    results = []
    for label, typed, words, shown in cases:
        ms = measure(page, type_into(label, typed))
        assert words in _message_line(page), (typed, _message_line(page))
        assert text_box(page, label).input_value() == shown, (label, typed)     # reverted, or kept as typed
        results.append({"control": f"simulator: {label} '{typed}', Enter", "ms": round(ms)})
        if typed == "2.5":
            page.locator(".lp-root").first.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "06-sim-batch-2.5-refused.png"))
    assert "step 0 of 190" in _readouts(page)
    return results


_PANELS_TOP = ("() => { const lp = document.querySelector('.lp-root'); const out = lp.closest('.jp-OutputArea-output');"
               " return lp.getBoundingClientRect().top - out.getBoundingClientRect().top; }")


def message_keeps_its_height(page) -> dict:
    """The longest note (a bug that needs a setting, and why its gradient norm reads 0) fits the message line:
    the panels below do not move."""
    top = page.evaluate(_PANELS_TOP)
    ms = measure(page, tick("Clipping before backward"))
    page.wait_for_function("() => document.body.innerText.includes('changes nothing: it needs a clip norm above 0')",
                           timeout=30_000)
    moved = page.evaluate(_PANELS_TOP) - top
    clipped = page.evaluate("() => [...document.querySelectorAll('.widget-html')].filter(e => e.innerText.includes("
                            "'changes nothing')).some(e => e.scrollHeight > e.clientHeight + 1)")
    page.locator(".lp-root").first.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "06-sim-clip-before-backward-note.png"))
    measure(page, tick("Clipping before backward"))
    assert abs(moved) <= 1 and not clipped, (moved, clipped)
    return {"control": "simulator: tick Clipping before backward (clip off: a note)", "ms": round(ms)}


def long_run(page) -> dict:
    """At 5,000 examples, batch 1, 200 epochs (1,000,000 micro-batches) with 10,000 already trained: Step and Stop
    answer as fast as on a fresh run, the page draws a bounded number of points, and it is never behind the kernel."""
    add_cell(page, 'sim.boxes["n_train"].value = "5000"; sim.boxes["batch_size"].value = "1"; '
                   f'sim.boxes["epochs"].value = "200"; print("skipped", sim.skip({LONG}))',
             f"skipped {LONG}", timeout=240_000)
    page.locator(".lp-root").first.scroll_into_view_if_needed()
    page.wait_for_function(f"() => document.querySelector('.lp-text').innerText.includes('step {LONG} of 1000000')",
                           timeout=60_000)
    drawn = int(page.evaluate("() => document.querySelector('.lp-root').dataset.drawn"))
    steps = []
    for n in range(10):
        observe(page, ".lp-root")
        steps.append(timed_click(page, "Step", until=f"step {LONG + n + 1} of 1000000"))
    page.screenshot(path=str(ARTIFACTS / f"06-sim-after-{LONG}-steps.png"))
    observe(page, ".lp-root")
    page.evaluate(_CLICK, button(page, "Train to end").element_handle())
    page.wait_for_timeout(3000)                          # a live run at batch 1: about 20 updates a second
    moving = _readouts(page)
    handle = button(page, "Stop").element_handle()
    page.evaluate("(el) => { window.__stopT0 = performance.now(); el.click(); }", handle)
    page.wait_for_function("() => document.body.innerText.includes('Stopped at step')", timeout=30_000, polling=20)
    stop_ms = page.evaluate("() => performance.now() - window.__stopT0")
    page.wait_for_timeout(QUIET_MS)
    message, readouts = _message(page), _readouts(page)
    stopped_at = int(message.split("Stopped at step ")[1].split(";")[0])
    assert f"step {stopped_at} of 1000000" in readouts, (message, readouts)     # the page is not behind the kernel
    assert stopped_at > LONG + 10 and f"step {LONG + 10} of" not in moving, moving
    page.screenshot(path=str(ARTIFACTS / "06-sim-long-run-stopped.png"))
    figures = {"history": LONG, "buckets_drawn": drawn, "step_after_history_ms": steps,
               "step_after_history_median_ms": statistics.median(steps), "stop_ms": round(stop_ms),
               "stopped_at": stopped_at}
    print(f"\nchapter 6 long run ({LONG:,} micro-batches of history, batch 1): Step median "
          f"{figures['step_after_history_median_ms']:.0f} ms (max {max(steps):.0f}), Stop answered in "
          f"{stop_ms:.0f} ms at step {stopped_at:,}, the page holds {drawn} buckets")
    assert drawn <= 7 * 256, drawn
    assert stop_ms < LIMIT_MS and max(steps) < LIMIT_MS, figures
    return figures


def lr_range_test(page) -> list[dict]:
    """Another optimizer in the menu dims the old sweep under a note; three quick Sweep clicks run one sweep."""
    row = page.locator(".widget-hbox", has=page.locator("button", has_text="Sweep")).first
    row.scroll_into_view_if_needed()
    ms = measure(page, lambda p: row.locator("select").select_option(label="SGD + momentum"))
    page.wait_for_function("() => document.body.innerText.includes('This figure is the sweep for Adam: press Sweep "
                           "to test SGD + momentum')", timeout=30_000)
    page.screenshot(path=str(ARTIFACTS / "06-lr-stale.png"))

    def three_clicks(p) -> None:
        sweep = row.locator("button", has_text="Sweep")
        for _ in range(3):
            sweep.click()
    sweep_ms = measure(page, three_clicks)
    page.wait_for_function("() => document.body.innerText.includes('LR range test (SGD + momentum)')", timeout=30_000)
    assert "This figure is the sweep for" not in page.locator(".jp-Notebook").inner_text()
    page.screenshot(path=str(ARTIFACTS / "06-lr-momentum.png"))
    sweep = {"control": "LR range test: Sweep clicked 3 times quickly (one sweep)", "ms": round(sweep_ms)}
    if sweep_ms > LIMIT_MS:
        # once more, as timing.timed does for every control: a burst of the background notebook passes is not
        # the view's slowness. The same optimizer's sweep is kept (the test is deterministic), so the second
        # measure sweeps one not yet swept: a whole new sweep again, not the view's "nothing new" answer.
        row.locator("select").select_option(label="AdamW")
        sweep["first_ms"], sweep["ms"] = sweep["ms"], round(measure(page, three_clicks))
        page.wait_for_function("() => document.body.innerText.includes('LR range test (AdamW)')", timeout=30_000)
    return [{"control": "LR range test: optimizer menu to SGD + momentum", "ms": round(ms)}, sweep]


def chapter6_pass(page, url: str) -> None:
    """Run chapter 6 once: the simulator's clicks and long run, its number boxes, the LR range test."""
    from tests.browser.test_lab import run_all
    run_all(page, url, "06_training_simulator.ipynb")
    fresh = use_simulator(page)
    results = number_boxes(page) + [message_keeps_its_height(page)] + lr_range_test(page)
    long = long_run(page)
    fresh_median = fresh["step_median_ms"]
    assert long["step_after_history_median_ms"] <= max(150, 3 * fresh_median), (fresh_median, long)
    (ARTIFACTS / "ch06_long_run.json").write_text(json.dumps(long, indent=1))
    timed(page, "06_training_simulator.ipynb", [], extra=results)


INTERACTIONS: dict = {}
PASSES = {"06_training_simulator.ipynb": chapter6_pass}
