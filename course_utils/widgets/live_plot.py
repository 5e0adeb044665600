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

import anywidget
import traitlets

from course_utils.widgets.decimate import LIMIT, Buckets

CLASS_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")

_ESM = r"""
const COLOURS = %COLOURS%;
function fmt(v) {
  if (!isFinite(v)) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e5)) return v.toExponential(1);
  return String(Number(v.toPrecision(3)));
}
function hexRgb(h) { return [1, 3, 5].map(i => parseInt(h.slice(i, i + 2), 16)); }
const RGB = COLOURS.map(hexRgb);
function bytesOf(b) {
  if (!b) return null;
  if (b instanceof DataView) return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  if (b instanceof ArrayBuffer) return new Uint8Array(b);
  return new Uint8Array(b.buffer || b);
}
function floatsOf(b) {
  const u = bytesOf(b); const copy = new Uint8Array(u); return new Float32Array(copy.buffer);
}
function canvas(w, h) {
  const c = document.createElement("canvas");
  const r = window.devicePixelRatio || 1;
  c.width = Math.round(w * r); c.height = Math.round(h * r);
  c.style.width = w + "px"; c.style.height = h + "px";
  c.getContext("2d").setTransform(r, 0, 0, r, 0, 0);
  return c;
}
function niceUp(v) {            // the smallest of 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8 (x 10^k) at or above v
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (m * p >= v * (1 - 1e-9)) return m * p;
  return 10 * p;
}
function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "lp-root";
  el.appendChild(root);
  let data = {}, points = null, grid = null, text = [], version = 0, xmax = model.get("xmax"), acked = 0, ackFrame = 0;
  let panels = [], textBox = null;
  let layer = null, layerOf = null, layerKey = "";   // the data points, drawn once per points message
  const cells = document.createElement("canvas");     // the boundary grid, one pixel per cell
  function build() {
    root.innerHTML = "";
    panels = [];
    const W = model.get("panel_width"), H = model.get("panel_height");
    textBox = document.createElement("div"); textBox.className = "lp-text";
    textBox.style.minHeight = (1.45 * model.get("text_lines")) + "em";   // room for every line: no jump
    const row = document.createElement("div"); row.className = "lp-row";
    const left = document.createElement("div"); left.className = "lp-left";
    const right = document.createElement("div"); right.className = "lp-grid";
    row.append(left, right);
    root.append(textBox, row);
    showText();
    if (model.get("boundary")) {
      const box = document.createElement("div"); box.className = "lp-panel";
      const title = document.createElement("div"); title.className = "lp-title";
      title.textContent = model.get("boundary_title");
      const c = canvas(model.get("boundary_size"), model.get("boundary_size"));
      box.append(title, c); left.appendChild(box);
      panels.push({ kind: "boundary", canvas: c });
    }
    for (const spec of model.get("panels")) {
      const box = document.createElement("div"); box.className = "lp-panel";
      const title = document.createElement("div"); title.className = "lp-title";
      const b = document.createElement("b"); b.textContent = spec.title; title.appendChild(b);
      for (const s of spec.series) {
        if (!s.label) continue;
        const key = document.createElement("span"); key.className = "lp-key";
        const sw = document.createElement("span"); sw.className = "lp-swatch";
        sw.style.borderTop = (s.style === "dots" ? "3px dotted " : s.faint ? "2px dashed " : "2px solid ") + s.color;
        if (s.faint) sw.style.opacity = "0.55";
        key.append(sw, document.createTextNode(s.label));
        title.appendChild(key);
      }
      const c = canvas(W, H);
      box.style.width = W + "px";           // the legend never widens a panel: no jump when a ghost appears
      box.append(title, c); right.appendChild(box);
      panels.push({ kind: "line", spec, canvas: c, W, H });
    }
    draw();
  }
  // a bucket is [x, y] (one point, or y null for a gap) or [x, mean, min, max] (several points)
  const lowOf = b => b.length > 2 ? b[2] : b[1], highOf = b => b.length > 2 ? b[3] : b[1];
  function drawLine(p) {
    const ctx = p.canvas.getContext("2d"), W = p.W, H = p.H, spec = p.spec;
    const L = 44, R = 6, T = 4, B = 14;
    ctx.clearRect(0, 0, W, H);
    const tf = spec.log ? (v => Math.log10(Math.max(v, spec.floor || 1e-8))) : (v => v);
    let lo = Infinity, hi = -Infinity;
    for (const s of spec.series) for (const b of (data[s.id] || [])) {
      if (b[1] === null || !Number.isFinite(b[1])) continue;
      const a = tf(lowOf(b)), z = tf(highOf(b)); if (a < lo) lo = a; if (z > hi) hi = z;
    }
    const end = Math.max(1, xmax);
    ctx.strokeStyle = "#bbb"; ctx.lineWidth = 1;
    ctx.beginPath(); ctx.moveTo(L, T); ctx.lineTo(L, H - B); ctx.lineTo(W - R, H - B); ctx.stroke();
    ctx.fillStyle = "#444"; ctx.font = "10px sans-serif";
    ctx.textAlign = "left"; ctx.fillText("0", L, H - 3);
    ctx.textAlign = "right"; ctx.fillText(model.get("xlabel") + " " + end.toLocaleString("en-US"), W - R, H - 3);
    if (lo === Infinity) { ctx.textAlign = "center"; ctx.fillStyle = "#999";
      ctx.fillText("no data yet", (L + W) / 2, H / 2); return; }
    if (spec.log) {
      if (hi - lo < 1e-12) { lo -= 0.5; hi += 0.5; }
      const pad = (hi - lo) * 0.05; lo -= pad; hi += pad;
    } else if (lo >= 0 && lo <= 0.5 * hi) {          // from 0 to a round number: "0 ... 20", never "17.7"
      lo = 0; hi = niceUp(hi * 1.04);
    } else if (lo >= 0 && hi - lo < 1e-12) {          // a flat positive curve (a constant lr): 0 to a round top
      lo = 0; hi = niceUp(hi * 1.2);
    } else {
      if (hi - lo < 1e-12) { const d = Math.abs(hi) * 0.05 || 1; lo -= d; hi += d; }
      const pad = (hi - lo) * 0.05; lo -= pad; hi += pad;
    }
    if (spec.top !== null && spec.top !== undefined) hi = Math.min(hi, spec.top);   // accuracy never past 1
    const X = x => L + (W - L - R) * x / end, Y = y => T + (H - T - B) * (1 - (tf(y) - lo) / (hi - lo));
    const label = t => fmt(spec.log ? Math.pow(10, t) : t);
    ctx.textAlign = "right"; ctx.fillText(label(hi), L - 3, T + 9); ctx.fillText(label(lo), L - 3, H - B);
    ctx.save(); ctx.beginPath(); ctx.rect(L, T, W - L - R, H - T - B); ctx.clip();
    for (const s of spec.series) {
      const pts = data[s.id] || []; if (!pts.length) continue;
      ctx.strokeStyle = s.color; ctx.fillStyle = s.color;
      // the min-max band of aggregated buckets: the noise of a long run, drawn once, not point by point
      ctx.globalAlpha = s.faint ? 0.12 : 0.22;
      let run = [];
      const band = () => { if (run.length > 1) { ctx.beginPath();
        run.forEach((b, i) => i ? ctx.lineTo(X(b[0]), Y(highOf(b))) : ctx.moveTo(X(b[0]), Y(highOf(b))));
        for (let i = run.length - 1; i >= 0; i--) ctx.lineTo(X(run[i][0]), Y(lowOf(run[i])));
        ctx.closePath(); ctx.fill(); } run = []; };
      if (s.style !== "dots") { for (const b of pts) { if (b[1] === null) band(); else run.push(b); } band(); }
      ctx.globalAlpha = s.faint ? 0.45 : 1;
      ctx.setLineDash(s.faint ? [4, 3] : []); ctx.lineWidth = s.faint ? 1.2 : 1.4;
      if (s.style === "dots") {
        for (const b of pts) if (b[1] !== null) {
          if (b.length > 2) { ctx.beginPath(); ctx.moveTo(X(b[0]), Y(b[2])); ctx.lineTo(X(b[0]), Y(b[3])); ctx.stroke(); }
          ctx.beginPath(); ctx.arc(X(b[0]), Y(b[1]), 2.6, 0, 2 * Math.PI); ctx.fill(); }
        ctx.beginPath(); let pen = false;
        for (const b of pts) { if (b[1] === null) { pen = false; continue; }
          if (pen) ctx.lineTo(X(b[0]), Y(b[1])); else { ctx.moveTo(X(b[0]), Y(b[1])); pen = true; } }
        ctx.stroke();
      } else {
        ctx.beginPath(); let pen = false;
        for (const b of pts) { if (b[1] === null) { pen = false; continue; }
          if (pen) ctx.lineTo(X(b[0]), Y(b[1])); else { ctx.moveTo(X(b[0]), Y(b[1])); pen = true; } }
        ctx.stroke();
      }
    }
    ctx.restore(); ctx.globalAlpha = 1; ctx.setLineDash([]);
  }
  function drawBoundary(p) {
    const c = p.canvas, S = model.get("boundary_size"), ctx = c.getContext("2d");
    ctx.clearRect(0, 0, S, S);
    const ext = model.get("extent");
    if (grid) {
      const n = grid.n, img = new ImageData(n, n);
      for (let i = 0; i < n * n; i++) {
        const [r, g, b] = RGB[grid.cls[i] % RGB.length];
        const a = 0.15 + 0.45 * grid.conf[i] / 255;
        const row = n - 1 - Math.floor(i / n), col = i % n, j = 4 * (row * n + col);
        img.data[j] = 255 + (r - 255) * a; img.data[j + 1] = 255 + (g - 255) * a; img.data[j + 2] = 255 + (b - 255) * a;
        img.data[j + 3] = 255;
      }
      if (cells.width !== n) { cells.width = n; cells.height = n; }
      cells.getContext("2d").putImageData(img, 0, 0);
      ctx.imageSmoothingEnabled = true; ctx.drawImage(cells, 0, 0, S, S);
    }
    if (points) {
      const key = ext.join() + "/" + S;
      if (layerOf !== points || layerKey !== key) {    // new points, extent or size: draw the layer again
        layer = canvas(S, S); layerOf = points; layerKey = key;
        const lc = layer.getContext("2d");
        const X = x => S * (x - ext[0]) / (ext[1] - ext[0]), Y = y => S * (1 - (y - ext[2]) / (ext[3] - ext[2]));
        lc.lineWidth = 0.6; lc.strokeStyle = "#222";
        for (let i = 0; i < points.cls.length; i++) {
          lc.fillStyle = COLOURS[points.cls[i] % COLOURS.length];
          lc.beginPath(); lc.arc(X(points.xy[2 * i]), Y(points.xy[2 * i + 1]), 2.2, 0, 2 * Math.PI); lc.fill(); lc.stroke();
        }
      }
      ctx.drawImage(layer, 0, 0, S, S);
    }
    ctx.strokeStyle = "#999"; ctx.lineWidth = 1; ctx.strokeRect(0.5, 0.5, S - 1, S - 1);
  }
  function showText() {
    if (!textBox) return;
    textBox.replaceChildren(...text.map(line => {
      const d = document.createElement("div"); d.textContent = line; return d;
    }));
  }
  function draw() {
    const start = performance.now();
    for (const p of panels) (p.kind === "line" ? drawLine : drawBoundary)(p);
    root.dataset.drawMs = (performance.now() - start).toFixed(1);   // what the browser spent drawing
    root.dataset.drawn = String(Object.values(data).reduce((n, list) => n + list.length, 0));   // buckets held
    root.dataset.version = String(++version);
  }
  function ack(seq) {          // after the next frame is painted: the page has caught up to message `seq`
    acked = Math.max(acked, seq);
    if (ackFrame) return;
    ackFrame = requestAnimationFrame(() => { ackFrame = 0; model.send({ type: "ack", seq: acked }); });
  }
  model.on("msg:custom", (msg, buffers) => {
    if (msg.type === "reset") { data = {}; points = null; grid = null; }
    if (msg.series) for (const [id, [from, buckets]] of Object.entries(msg.series)) {
      const list = data[id] || (data[id] = []); list.length = Math.min(list.length, from); list.push(...buckets);
    }
    if (msg.xmax) xmax = msg.xmax;
    if (msg.points) points = { xy: floatsOf(buffers[msg.points.xy]), cls: bytesOf(buffers[msg.points.cls]) };
    if (msg.grid) grid = { n: msg.grid.n, cls: bytesOf(buffers[msg.grid.cls]), conf: bytesOf(buffers[msg.grid.conf]) };
    if (msg.text) { text = msg.text; showText(); }
    draw();                     // at once: one message per update, no wait for the next animation frame
    if (msg.seq) ack(msg.seq);
  });
  for (const name of ["panels", "boundary", "panel_width", "panel_height", "boundary_size", "text_lines"]) model.on("change:" + name, build);
  for (const name of ["extent", "xlabel"]) model.on("change:" + name, draw);
  build();
  model.send({ type: "ready" });
  return () => { if (ackFrame) cancelAnimationFrame(ackFrame); };
}
export default { render };
""".replace("%COLOURS%", str(list(CLASS_COLOURS)))

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
        """Every curve as the browser has it: buckets [x, y] (one point each while the run is short) or [x, mean, min, max]."""
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
        self._grid = (n, classes, confidence)
        self._grid_pending = True

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
