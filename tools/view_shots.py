"""Screenshots of chapter 0-2 views at their defaults and at edge values, rendered from the views' own HTML.

`python tools/view_shots.py` writes tests/artifacts/views/<name>.png at a 912 px wide page (the notebook
area's width with the file browser open) in headless Chromium (/usr/bin/chromium). JupyterLab screenshots of
tall views are clipped by its scrolling panel; these show each view whole. Look at them after changing a view.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "tests" / "artifacts" / "views"
HUGE = "99999999999999999999"


def view_html(view) -> str:
    """Everything a view shows below its controls: message, numbers, figures, tables."""
    parts = [getattr(view, name).value for name in ("message", "numbers", "timeline", "step_view", "output")
             if hasattr(view, name)]
    return "<div style='display:flex;flex-direction:column;gap:6px'>" + "".join(parts) + "</div>"


def cases() -> list[tuple[str, str]]:
    from course_utils.widgets.calculator import calculator
    from course_utils.widgets.pipeline_view import pipeline_view
    from course_utils.widgets.sampling_view import distributed, padding, sampling_strategies

    shots = []
    c = calculator(accum_steps=4)
    shots.append(("calc-default", view_html(c)))
    c.epochs.value = "2.5"
    shots.append(("calc-epochs-2.5", view_html(c)))
    c = calculator(dataset_size=1000, batch_size=64, accum_steps=3, drop_last=True, world_size=2)
    c.stage.value = 4
    shots.append(("calc-drop-last-w2", view_html(c)))
    p = pipeline_view(drop_last=True)
    shots.append(("pipeline-default", view_html(p)))
    p.n.value, p.batch_size.value = "400", 16
    p.next_epoch.click()
    shots.append(("pipeline-n400", view_html(p)))
    p.seed.value = HUGE
    shots.append(("pipeline-huge-seed", view_html(p)))
    s = sampling_strategies()
    shots.append(("sampling-default", view_html(s)))
    s.n_batches.value = 1
    shots.append(("sampling-1-batch", view_html(s)))
    d = distributed()
    shots.append(("distributed-default", view_html(d)))
    d.n.value, d.world_size.value = 60, 8
    shots.append(("distributed-n60-w8", view_html(d)))
    d.n.value, d.drop_last.value = 1, True
    shots.append(("distributed-n1-w8-droplast", view_html(d)))
    g = padding()
    shots.append(("padding-default", view_html(g)))
    g.batch_size.value = 1
    shots.append(("padding-b1", view_html(g)))
    g.seed.value = HUGE
    shots.append(("padding-huge-seed", view_html(g)))
    return shots


def main() -> int:
    from playwright.sync_api import sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=os.environ.get("CHROMIUM", "/usr/bin/chromium"),
                                    args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 912, "height": 800})
        for name, body in cases():
            page.set_content(f"<body style='font-family:sans-serif;width:872px'>{body}</body>")
            page.screenshot(path=str(OUT / f"{name}.png"), full_page=True)
        browser.close()
    print(f"wrote {len(cases())} screenshots to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
