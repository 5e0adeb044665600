"""A live plot for the training simulator (chapter 6): canvas panels that cost what they show, not the run's history.

``LivePlot`` is an anywidget. Python keeps each curve as at most a few hundred buckets
(``decimate.Buckets``: every point while the run is short, then a mean with its min-max band per
bucket) and sends only the buckets that changed (``add`` then ``flush``), so a message and a redraw
cost the same at step 100 and at step 1,000,000. The browser acknowledges each message after it has
drawn it; while ``WINDOW`` messages wait for their acknowledgement Python holds the next update (it
merges into the buckets), so messages never outrun the page and a Stop click is never stuck behind
a queue of drawings. A view that appears later (the notebook reopened, a second view of the widget)
asks for a snapshot and gets everything once. One panel may be a decision boundary: a small grid of
predicted classes and confidences, drawn under the data points. Lines of text (a view's readouts)
and the x axis's end travel in the same message as the points, so one update of the view is one
message and one change of the page. The Python side keeps the same data, so tests read exactly what
the browser was sent.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import anywidget
import traitlets

from course_utils.chapters.ch06_simulator import CLASS_COLOURS
from course_utils.widgets.decimate import LIMIT, Buckets

_ESM = (Path(__file__).with_name("live_plot.js").read_text(encoding="utf-8")
        .replace("%COLOURS%", str(list(CLASS_COLOURS))))

_CSS = """
.lp-root { display: flex; flex-direction: column; gap: 6px; font-family: sans-serif; font-size: 11px; }
.lp-text { font-size: 13px; line-height: 1.45em; color: #222; }
.lp-row { display: flex; gap: 10px; align-items: flex-start; }
.lp-grid { display: grid; grid-template-columns: repeat(2, auto); gap: 4px 10px; }
.lp-panel { display: flex; flex-direction: column; }
.lp-title { height: 16px; line-height: 16px; white-space: nowrap; overflow: hidden; color: #222; }
.lp-key { margin-left: 6px; color: #444; font-size: 10px; }
.lp-swatch { display: inline-block; width: 14px; height: 0; vertical-align: middle; margin-right: 3px; }
"""


@dataclass(frozen=True)
class Series:
    """One curve of a panel: its id, its legend label, colour, style ("line" or "dots"), faint for a ghost."""

    id: str
    label: str
    color: str
    style: str = "line"
    faint: bool = False


@dataclass(frozen=True)
class Panel:
    """One line panel: a title, its series, a log y axis (values below `floor` drawn at it) or a linear one.

    `top` caps a linear axis (accuracy: 1, never "1.03").
    """

    title: str
    series: tuple[Series, ...]
    log: bool = False
    floor: float = 1e-8
    top: float | None = None
    extra: dict = field(default_factory=dict)

    def spec(self) -> dict:
        return {"title": self.title, "log": self.log, "floor": self.floor, "top": self.top,
                "series": [vars(s) for s in self.series]}


WINDOW = 2              # data messages the page may have unacknowledged before Python holds the next one
ACK_TIMEOUT_S = 3.0     # an acknowledgement this late is taken as lost (a closed tab): send again


class LivePlot(anywidget.AnyWidget):
    """Canvas panels (and an optional decision-boundary panel) fed with changed buckets only (chapter 6)."""

    _esm = _ESM
    _css = _CSS
    panels = traitlets.List([]).tag(sync=True)
    boundary = traitlets.Bool(False).tag(sync=True)
    boundary_title = traitlets.Unicode("decision boundary").tag(sync=True)
    boundary_size = traitlets.Int(230).tag(sync=True)
    panel_width = traitlets.Int(272).tag(sync=True)
    panel_height = traitlets.Int(104).tag(sync=True)
    xlabel = traitlets.Unicode("step").tag(sync=True)
    extent = traitlets.List([-1.0, 1.0, -1.0, 1.0]).tag(sync=True)
    text_lines = traitlets.Int(0).tag(sync=True)        # lines of text the view keeps room for above the panels

    def __init__(self, panels: list[Panel] = (), limit: int = LIMIT, **kwargs):
        super().__init__(**kwargs)
        self.limit = limit
        self.curves: dict[str, Buckets] = {}
        self._points: tuple[bytes, bytes] | None = None
        self._grid: tuple[int, bytes, bytes] | None = None
        self._grid_pending = False
        self.text: list[str] = []
        self._text_pending = False
        self._xmax, self._xmax_pending = 1, False
        self.messages_sent = 0
        self.viewed = False                 # has a page shown this plot? (until then nothing is sent)
        self._seq = self._acked = 0
        self._last_send = 0.0
        self.held = 0                       # updates held back because the page had not caught up
        self.set_panels(panels)
        self.on_msg(self._on_message)

    @property
    def data(self) -> dict[str, list[list]]:
        """Every curve as the browser has it: buckets [x, y] (one point each, while the run is short) or
        [x, mean, min, max]."""
        return {name: curve.all() for name, curve in self.curves.items()}

    @property
    def xmax(self) -> int:
        """The x axis's end (sent with the next flush)."""
        return self._xmax

    @xmax.setter
    def xmax(self, value: int) -> None:
        value = max(1, int(value))
        if value != self._xmax:
            self._xmax, self._xmax_pending = value, True

    def set_panels(self, panels: list[Panel]) -> None:
        """Choose the panels (the browser rebuilds them; the data is kept)."""
        self.panels = [p.spec() for p in panels]

    def clear(self) -> None:
        """Forget every point, the data points and the boundary, here and in the browser."""
        self.curves, self._points, self._grid, self._grid_pending = {}, None, None, False
        if self.viewed:
            self._custom({"type": "reset"})          # the text stays: it changes only by set_text

    def add(self, series: str, x: float, y: float) -> None:
        """Queue one new point of `series` (sent, merged into its bucket, at the next flush)."""
        self.curves.setdefault(series, Buckets(self.limit)).add(float(x), float(y) if math.isfinite(y) else None)

    def set_text(self, lines: list[str]) -> None:
        """Lines of plain text shown above the panels, sent at the next flush (only if they changed)."""
        lines = [str(line) for line in lines]
        if lines != self.text:
            self.text, self._text_pending = lines, True

    def flush(self) -> bool:
        """Send what changed since the last flush (buckets, boundary, text, axis) in one message; False if held.

        Nothing is sent before a page has shown the plot, nor while WINDOW messages wait for the page's
        acknowledgement: the update stays queued (merged into its buckets) and goes with the next flush.
        """
        if not self.viewed:
            self._mark_sent()
            return False
        if self._seq - self._acked >= WINDOW and time.monotonic() - self._last_send < ACK_TIMEOUT_S:
            self.held += 1
            return False
        message: dict = {"type": "append"}
        buffers: list[bytes] = []
        series = {name: list(changed) for name, curve in self.curves.items()
                  if (changed := curve.changed()) is not None}
        if series:
            message["series"] = series
        if self._text_pending:
            message["text"] = self.text
        if self._xmax_pending:
            message["xmax"] = self._xmax
        if self._grid_pending and self._grid is not None:
            message["grid"] = {"n": self._grid[0], "cls": 0, "conf": 1}
            buffers = list(self._grid[1:])
        self._grid_pending = self._text_pending = self._xmax_pending = False
        if len(message) > 1:
            self._send_data(message, buffers)
        return True

    def set_points(self, xy: bytes, classes: bytes) -> None:
        """The data points of the boundary panel: float32 (x, y) pairs and one uint8 class per point."""
        self._points = (xy, classes)
        if self.viewed:
            self._custom({"type": "points", "points": {"xy": 0, "cls": 1}}, [xy, classes])

    def set_grid(self, n: int, classes: bytes, confidence: bytes) -> None:
        """The boundary: n x n predicted classes and confidences (uint8, rows from the bottom), sent at the next flush."""
        grid = (n, classes, confidence)
        if grid != self._grid:                  # an unchanged boundary is neither sent nor drawn again
            self._grid, self._grid_pending = grid, True

    def _mark_sent(self) -> None:
        for curve in self.curves.values():
            curve.changed()
        self._grid_pending = self._text_pending = self._xmax_pending = False

    def _send_data(self, content: dict, buffers: list[bytes]) -> None:
        self._seq += 1
        self._last_send = time.monotonic()
        self._custom({**content, "seq": self._seq}, buffers)

    def _custom(self, content: dict, buffers: list[bytes] | None = None) -> None:
        self.messages_sent += 1
        self.send(content, buffers)

    def _on_message(self, _widget, content, _buffers) -> None:
        if not isinstance(content, dict):
            return
        if content.get("type") == "ack" and isinstance(content.get("seq"), int):
            self._acked = max(self._acked, min(content["seq"], self._seq))
            if self.held:                       # the page caught up: send what waited, merged, at once
                self.held = 0
                self.flush()
        elif content.get("type") == "ready":      # a new view: send everything once
            self.viewed = True
            self._mark_sent()
            message: dict = {"type": "reset", "series": {name: [0, c.all()] for name, c in self.curves.items()},
                             "text": self.text, "xmax": self._xmax}
            buffers: list[bytes] = []
            if self._points is not None:
                message["points"] = {"xy": 0, "cls": 1}
                buffers += list(self._points)
            if self._grid is not None:
                message["grid"] = {"n": self._grid[0], "cls": len(buffers), "conf": len(buffers) + 1}
                buffers += list(self._grid[1:])
            self._acked = self._seq              # a fresh page: nothing earlier is in flight any more
            self._send_data(message, buffers)
