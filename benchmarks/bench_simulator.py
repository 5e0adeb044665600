"""What chapter 6's simulator costs in the kernel: a Step and a Train epoch through the view, headless.

The browser figure (click -> last change of the page) is the kernel's share measured here plus the
round trip and the drawing; tests/browser/interactions_ch06.py measures that one in JupyterLab.

    .venv/bin/python benchmarks/bench_simulator.py [--repeats 5]

Prints the median and minimum per Step (engine + ghost-free view update: readouts, new points, a
48 x 48 decision-boundary grid) and per Train epoch (19 micro-batches + evaluation), for the default
run and with a bug ticked (the healthy ghost runs in lockstep), and the matplotlib cost the live plot
avoids: rendering the same five panels and boundary to a PNG once.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch


def _time(action, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        out.append((time.perf_counter() - start) * 1000)
    return out


def _messages_per_step() -> str:
    """Count every widget's outgoing comm messages for the first Steps after a Reset, the page acknowledging each."""
    from ipywidgets import Widget
    from course_utils.widgets.simulator import simulator
    view, counts = simulator(), []
    view.plot._on_message(view.plot, {"type": "ready"}, [])
    original = Widget._send

    def counting(widget, msg, buffers=None):
        counts[-1] += 1
        original(widget, msg, buffers)
        if widget is view.plot and "seq" in msg.get("content", {}):
            view.plot._on_message(view.plot, {"type": "ack", "seq": msg["content"]["seq"]}, [])
    Widget._send = counting
    try:
        for _ in range(5):
            counts.append(0)
            view.step()
    finally:
        Widget._send = original
    return ", ".join(map(str, counts)) + " (Steps 1-5)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    torch.set_num_threads(1)
    import matplotlib
    matplotlib.use("Agg")
    from course_utils.chapters.ch06_simulator import run_figure
    from course_utils.widgets.base import figure_png
    from course_utils.widgets.simulator import simulator

    for bugs in [(), ("missing_zero_grad",)]:
        view = simulator(bugs=bugs)
        view.step()                                     # warm-up
        steps = _time(view.step, 15)
        view.reset()
        epochs = []
        for _ in range(args.repeats):
            if view.session.done:
                view.reset()
            epochs += _time(view.train_epoch, 1)
        name = "default run" if not bugs else f"with {bugs[0]} (+ ghost)"
        print(f"{name:<34} Step median {statistics.median(steps):6.1f} ms (min {min(steps):5.1f})   "
              f"Train epoch median {statistics.median(epochs):6.1f} ms (min {min(epochs):5.1f})")
    print(f"comm messages per Step (every widget's, a page showing the view): {_messages_per_step()}")
    view.train_to_end()
    png = _time(lambda: figure_png(run_figure(view.session)), 3)
    print(f"for comparison: one matplotlib PNG of the same panels  median {statistics.median(png):6.1f} ms "
          f"(min {min(png):5.1f})")
    print("(kernel side only; the browser adds the round trip and the canvas drawing)")


if __name__ == "__main__":
    main()
