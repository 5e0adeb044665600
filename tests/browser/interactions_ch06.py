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


STEPS_TIMED = 25   # Step clicks timed: enough for a median that one slow round trip does not move

# The bare button (typed into a new last cell; one line, so the editor's auto-indent cannot change it).
BARE_CODE = ('import ipywidgets as _w; _bare_label = _w.HTML("bare clicks: 0"); _bare = _w.Button(description="Bare"); '
             '_bare.on_click(lambda _: setattr(_bare_label, "value", "bare clicks: %d" % '
             '(int(_bare_label.value.split()[-1]) + 1))); display(_w.HBox([_bare, _bare_label]))')


def observe(page, selector: str) -> None:
    """Watch the output area holding `selector` (the simulator, or the bare button) for changes."""
    page.evaluate(_OBSERVE, page.locator(selector).first.element_handle())


def add_bare_button(page) -> None:
    """Insert a code cell after the last one, type BARE_CODE into it and run it (the notebook is a copy)."""
    last = page.locator(".jp-Notebook .jp-Cell").last
    last.scroll_into_view_if_needed()
    last.locator(".jp-InputPrompt").first.click()
    page.keyboard.press("Escape")                  # command mode
    page.keyboard.press("b")                       # a new code cell below, selected
    page.keyboard.press("Enter")                   # edit it
    page.keyboard.type(BARE_CODE)
    page.keyboard.press("Shift+Enter")
    page.wait_for_function("() => document.body.innerText.includes('bare clicks: 0')", timeout=30_000)


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
    stopped = "Stopped at step" in _message(page)
    timed_click(page, "Reset")
    assert "step 0 of 190" in _readouts(page) and "Reset: a new run" in _message(page)
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
    assert stopped, "Stop did not end the running Train to end"


INTERACTIONS = {"06_training_simulator.ipynb": use_simulator}
