// The browser side of course_utils/widgets/live_plot.py (chapter 6): the class colours are filled in there.
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
  function draw(changed) {      // changed(panel): redraw only the panels a message touched (all when absent)
    const start = performance.now();
    for (const p of panels) if (!changed || changed(p)) (p.kind === "line" ? drawLine : drawBoundary)(p);
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
    const all = msg.type === "reset";
    if (all) { data = {}; points = null; grid = null; }
    if (msg.series) for (const [id, [from, buckets]] of Object.entries(msg.series)) {
      const list = data[id] || (data[id] = []); list.length = Math.min(list.length, from); list.push(...buckets);
    }
    const axis = !!msg.xmax && msg.xmax !== xmax;
    if (msg.xmax) xmax = msg.xmax;
    if (msg.points) points = { xy: floatsOf(buffers[msg.points.xy]), cls: bytesOf(buffers[msg.points.cls]) };
    if (msg.grid) grid = { n: msg.grid.n, cls: bytesOf(buffers[msg.grid.cls]), conf: bytesOf(buffers[msg.grid.conf]) };
    if (msg.text) { text = msg.text; showText(); }
    const series = msg.series || {};
    // at once: one message per update, no wait for the next animation frame; only what it changed is redrawn
    draw(all ? null : p => p.kind === "line" ? axis || p.spec.series.some(s => s.id in series)
                                             : !!(msg.points || msg.grid));
    if (msg.seq) ack(msg.seq);
  });
  for (const name of ["panels", "boundary", "panel_width", "panel_height", "boundary_size", "text_lines"]) model.on("change:" + name, build);
  for (const name of ["extent", "xlabel"]) model.on("change:" + name, () => draw());
  build();
  model.send({ type: "ready" });
  return () => { if (ackFrame) cancelAnimationFrame(ackFrame); };
}
export default { render };
