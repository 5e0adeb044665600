"""Chapter 6's browser interaction: the simulator used as a learner would, with its speed measured.

Step a few times, train epochs, tick a bug (the ghost appears), train to the end and stop it, reset.
Each click is timed from the click to the last change inside the simulator's output (HTML readouts,
canvases: the live plot stamps a data-version attribute after every redraw), until the view is
quiet for QUIET_MS. The figures are printed and written to tests/artifacts/ch06_speed.json; they are
reported, never asserted (the machine is shared).
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path

from tests.browser.interactions import button

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
QUIET_MS = 400

_OBSERVE = """() => {
  const root = document.querySelector('.lp-root').closest('.jp-OutputArea-output');
  window.__simLast = 0;
  window.__simObserver && window.__simObserver.disconnect();
  window.__simObserver = new MutationObserver(() => { window.__simLast = performance.now(); });
  window.__simObserver.observe(root, {subtree: true, childList: true, attributes: true, characterData: true});
}"""
_CLICK = "(el) => { window.__simLast = 0; window.__simT0 = performance.now(); el.click(); }"
_QUIET = f"""() => window.__simLast > window.__simT0 && performance.now() - window.__simLast > {QUIET_MS}"""


def _readouts(page) -> str:
    return page.evaluate("() => [...document.querySelectorAll('.widget-html')].map(e => e.innerText)"
                         ".filter(t => t.includes(' done | step ')).join('\\n')")


def _message(page) -> str:
    return page.evaluate("() => { const r = document.querySelector('.lp-root').closest('.widget-vbox');"
                         " return r ? r.innerText : ''; }")


STEPS_TIMED = 25   # Step clicks timed: enough for a median that one slow round trip does not move


def timed_click(page, label: str, until: str = "", timeout: int = 60_000) -> float:
    """Click a simulator button; return ms from the click to the last change of the view.

    The view counts as done when it has been quiet for QUIET_MS and (if given) its text contains `until`.
    """
    handle = button(page, label).element_handle()
    page.evaluate(_CLICK, handle)
    page.wait_for_function(f"(until) => document.body.innerText.includes(until) && ({_QUIET})()", arg=until,
                           timeout=timeout, polling=50)
    return page.evaluate("() => window.__simLast - window.__simT0")


def use_simulator(page) -> None:
    """Step, train epochs, tick a bug, train to the end and stop, reset; time the clicks."""
    page.locator(".lp-root").first.scroll_into_view_if_needed()
    page.wait_for_function("() => document.querySelector('.lp-root') && "
                           "document.querySelector('.lp-root').dataset.version", timeout=30_000)
    button(page, "Reset").scroll_into_view_if_needed()
    page.evaluate(_OBSERVE)
    timed_click(page, "Reset")
    assert "step 0 of 190" in _readouts(page)
    steps, draws = [], []
    for n in range(STEPS_TIMED):
        steps.append(timed_click(page, "Step", until=f"step {n + 1} of 190"))
        draws.append(float(page.evaluate("() => document.querySelector('.lp-root').dataset.drawMs")))
    assert f"step {STEPS_TIMED} of 190" in _readouts(page), _readouts(page)
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
               "epoch_median_ms": statistics.median(epochs), "epoch_min_ms": min(epochs)}
    (ARTIFACTS / "ch06_speed.json").write_text(json.dumps(figures, indent=1))
    print(f"\nchapter 6 speed (click -> last change of the view, quiet {QUIET_MS} ms): "
          f"Step median {figures['step_median_ms']:.0f} ms (min {figures['step_min_ms']:.0f}, n={len(steps)}); "
          f"Train epoch median {figures['epoch_median_ms']:.0f} ms (min {figures['epoch_min_ms']:.0f}, "
          f"n={len(epochs)}); canvas drawing per Step median {figures['draw_median_ms']:.1f} ms; "
          f"Stop honoured mid-run: {stopped}")
    assert stopped, "Stop did not end the running Train to end"


INTERACTIONS = {"06_training_simulator.ipynb": use_simulator}
