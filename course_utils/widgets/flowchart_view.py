"""Chapter 7: the production flowchart. Tick components; the flowchart and the loop's code update together."""
from __future__ import annotations

import html

import anywidget
import ipywidgets as w
import traitlets

from course_utils.chapters.ch07_flowchart import BY_KEY, COMPONENTS, KEYS, assembled_lines, code_lines
from course_utils.chapters.ch07_flowchart_boxes import NODES, STAGES, active_nodes, flow_text
from course_utils.widgets.base import View, error_html, guarded

BOX_W, BOX_H, GAP, COL_W, TOP = 236, 24, 7, 292, 34
CODE_HEIGHT_PX = 440
BASE_COLOUR = "#34495e"
# one colour per component, eleven hues far apart (Tableau 10 and yellow): the legend beside each checkbox
# ties a colour to its component, in the flowchart's boxes and in the code's margin alike
COLOURS = {"seed": "#9467bd", "checkpoint": "#1f77b4", "early_stop": "#17becf", "accumulation": "#bcbd22",
           "amp": "#ff7f0e", "clip": "#d62728", "nan_guard": "#8c564b", "schedule": "#2ca02c",
           "logging": "#7f7f7f", "compile": "#e377c2", "scale_out": "#ffd92f"}


class CodeBox(anywidget.AnyWidget):
    """The assembled code in a scrolling box that brings the first tinted line into view (chapter 7)."""

    _esm = """
    function render({ model, el }) {
      const box = document.createElement("div");
      el.appendChild(box);
      function show() {
        box.innerHTML = model.get("html");
        const scroller = box.firstElementChild, first = box.querySelector("[data-tinted]");
        if (!scroller) return;
        const margin = first ? 3 * first.offsetHeight : 0;          // three lines of context above the first
        scroller.scrollTop = first ? Math.max(0, first.offsetTop - scroller.offsetTop - margin) : 0;
      }
      model.on("change:html", show);
      show();
    }
    export default { render };
    """
    html = traitlets.Unicode("").tag(sync=True)


def _tint(colour: str, alpha: str = "22") -> str:
    return colour + alpha


def flowchart_svg(enabled: frozenset[str]) -> str:
    """The flowchart as SVG: every box always drawn (no layout jumps); boxes of switched-off components dashed grey."""
    rows = [sum(1 for n in NODES if n.stage == s) for s in range(len(STAGES))]
    height = TOP + max(rows) * (BOX_H + GAP) + 8
    width = COL_W * len(STAGES)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="100%" style="max-width:{width}px;height:auto" '
             f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12" role="img" '
             f'aria-label="flowchart of the training loop">',
             '<defs><marker id="fc-arrow" markerWidth="8" markerHeight="8" refX="6" refY="3" orient="auto">'
             '<path d="M0,0 L6,3 L0,6 z" fill="#7f8c8d"/></marker></defs>']
    for s, title in enumerate(STAGES):
        x = s * COL_W + 8
        parts.append(f'<text x="{x}" y="16" font-weight="bold" fill="#2c3e50">{s + 1}. {html.escape(title)}</text>')
        if s:
            parts.append(f'<line x1="{x - 22}" y1="12" x2="{x - 8}" y2="12" stroke="#7f8c8d" '
                         f'marker-end="url(#fc-arrow)"/>')
        nodes = [n for n in NODES if n.stage == s]
        for row, node in enumerate(nodes):
            y = TOP + row * (BOX_H + GAP)
            on = node.component is None or node.component in enabled
            if node.component is None:
                fill, stroke, ink, dash = "#f4f6f7", BASE_COLOUR, "#1b2631", ""
            elif on:
                colour = COLOURS[node.component]
                fill, stroke, ink, dash = _tint(colour, "33"), colour, "#1b2631", ""
            else:
                fill, stroke, ink, dash = "#ffffff", "#c8ced3", "#aab2b8", ' stroke-dasharray="4 3"'
            parts.append(f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="5" fill="{fill}" '
                         f'stroke="{stroke}" stroke-width="1.4"{dash}/>')
            parts.append(f'<text x="{x + 8}" y="{y + 16}" fill="{ink}">{html.escape(node.text(enabled))}</text>')
            if row:
                parts.append(f'<line x1="{x + 18}" y1="{y - GAP}" x2="{x + 18}" y2="{y}" stroke="#bdc3c7"/>')
        bottom = TOP + len(nodes) * (BOX_H + GAP) - GAP
        right = x + BOX_W + 10
        if s == 1:  # the batch loop: back to the forward pass
            target = TOP + _batch_start_row() * (BOX_H + GAP) + BOX_H / 2
            parts.append(f'<path d="M{x + BOX_W},{bottom - BOX_H / 2} H{right} V{target} H{x + BOX_W + 2}" '
                         f'fill="none" stroke="#7f8c8d" marker-end="url(#fc-arrow)"/>')
            parts.append(_side_label(right + 4, (target + bottom) / 2, "next batch"))
        if s == 2:  # the epoch loop: back to the top of stage 2
            back = COL_W + 8 + BOX_W / 2
            parts.append(f'<path d="M{x + BOX_W},{bottom - BOX_H / 2} H{right} V{TOP - 7} H{back} V{TOP - 2}" '
                         f'fill="none" stroke="#7f8c8d" marker-end="url(#fc-arrow)"/>')
            parts.append(_side_label(right + 4, (TOP + bottom) / 2, "next epoch"))
    parts.append("</svg>")
    return "".join(parts)


def _batch_start_row() -> int:
    """Row of the first per-batch box in stage 2 (the boxes above it run once per epoch)."""
    stage = [n for n in NODES if n.stage == 1]
    return next(i for i, n in enumerate(stage) if n.label.startswith("forward"))


def _side_label(x: float, y: float, text: str) -> str:
    return (f'<text x="{x}" y="{y}" font-size="10" fill="#7f8c8d" transform="rotate(90 {x} {y})" '
            f'text-anchor="middle">{text}</text>')


def tinted_lines(enabled: frozenset[str], key: str) -> list[int]:
    """Numbers (from 1) of the code lines a component adds or changes: the lines the view tints for it."""
    return [n for n, (_, owners) in enumerate(assembled_lines(enabled), start=1) if key in owners]


def code_html(enabled: frozenset[str], highlight: str | None = None) -> str:
    """The assembled code, each component's lines marked in its colour; `highlight`'s lines tinted."""
    rows = []
    for number, (code, owners) in enumerate(assembled_lines(enabled), start=1):
        owner = next((k for k in KEYS if k in owners), None)
        colour = COLOURS[owner] if owner else "transparent"
        tinted = bool(highlight and highlight in owners)
        background = _tint(COLOURS[highlight], "38") if tinted else "transparent"
        rows.append(f'<div{" data-tinted" if tinted else ""} style="border-left:4px solid {colour};'
                    f'background:{background};padding-left:6px;'
                    f'white-space:pre"><span style="color:#99a3a4;display:inline-block;width:2.6em">{number}</span>'
                    f'{html.escape(code) or " "}</div>')
    return (f'<div style="height:{CODE_HEIGHT_PX}px;overflow:auto;border:1px solid #d5dbdb;border-radius:4px;'
            f'font-family:monospace;font-size:12px;line-height:1.35;background:#fdfefe">' + "".join(rows) + "</div>")


class FlowchartView(View):
    """Eleven component switches over one flowchart and the loop's assembled code (chapter 7)."""

    def __init__(self, enabled: tuple[str, ...] | list[str] = ()):
        self.boxes = {c.key: w.Checkbox(False, description=c.label, indent=False,
                                        layout=w.Layout(width="180px")) for c in COMPONENTS}
        self.minimal_button = w.Button(description="minimal loop", icon="minus")
        self.all_button = w.Button(description="all components", icon="plus")
        self.message = w.HTML(layout=w.Layout(height="52px", overflow="hidden"))  # two lines, in every state
        self.board = w.HTML()
        self.code = CodeBox()
        self.enabled: frozenset[str] = frozenset()
        self.last_change: str | None = None
        self._quiet = False
        for key, box in self.boxes.items():
            box.observe(guarded(self, lambda change, key=key: self._toggled(key, change["new"])), names="value")
        self.minimal_button.on_click(guarded(self, lambda _: self.set_components(())))
        self.all_button.on_click(guarded(self, lambda _: self.set_components(KEYS)))
        legend = [w.HBox([w.HTML(f'<span title="the colour of {html.escape(c.label)} in the flowchart and the '
                                 f'code" style="display:inline-block;width:12px;height:12px;margin-top:9px;'
                                 f'background:{COLOURS[c.key]};border-radius:2px"></span>',
                                 layout=w.Layout(width="16px")), self.boxes[c.key]],
                          layout=w.Layout(width="202px")) for c in COMPONENTS]
        grid = w.GridBox(legend, layout=w.Layout(grid_template_columns="repeat(4, 202px)", grid_gap="0px 6px"))
        self.widget = w.VBox([grid, w.HBox([self.minimal_button, self.all_button]), self.message, self.board,
                              self.code], layout=w.Layout(max_width="848px"))
        self.set_components(enabled)

    def set_components(self, enabled) -> None:
        """Switch exactly these components on (unknown names: a message in the view, nothing changes)."""
        unknown = sorted(set(enabled) - set(KEYS))
        if unknown:
            self.show_error(f"There is no component called {', '.join(unknown)}.")
            return
        self._quiet = True
        try:
            for key, box in self.boxes.items():
                box.value = key in enabled
        finally:
            self._quiet = False
        self.enabled, self.last_change = frozenset(enabled), None
        self._render()
        if not self.enabled:
            self.message.value = f"The minimal loop: {code_lines(())} lines. Tick a component to add it."
        elif self.enabled == frozenset(KEYS):
            self.message.value = (f"All {len(KEYS)} components on: {code_lines(KEYS)} lines. Untick one to see "
                                  f"what it adds.")

    def toggle(self, key: str) -> None:
        """Flip one component, as a click on its box does."""
        self.boxes[key].value = not self.boxes[key].value

    def _toggled(self, key: str, on: bool) -> None:
        if self._quiet:
            return
        self.enabled = self.enabled | {key} if on else self.enabled - {key}
        self.last_change = key
        self._render()

    def _render(self) -> None:
        total = code_lines(self.enabled)
        if self.last_change:
            c = BY_KEY[self.last_change]
            delta = total - code_lines(self.enabled ^ {c.key})
            if c.key in self.enabled:
                tinted = tinted_lines(self.enabled, c.key)
                said = (f"added: {delta} more lines; the {len(tinted)} lines it adds or changes are tinted below "
                        f"(from line {tinted[0]})" if tinted else f"added: {delta} more lines")
            else:
                said = f"removed: {abs(delta)} lines gone"
            self.message.value = (f"<b>{html.escape(c.label)}</b> {said}. "
                                  f"<i>Problem:</i> {html.escape(c.problem)}. <i>Prevents:</i> {html.escape(c.prevents)}.")
        else:
            self.message.value = (f"Tick a component to add it to the loop. The code below is exactly what runs "
                                  f"for this combination: {total} lines (blank lines not counted).")
        self.board.value = (flowchart_svg(self.enabled)
                            + f"<div style='margin:4px 0;color:#566573'>{len(self.enabled)} of {len(KEYS)} components on "
                              f"· {total} lines of code (the minimal loop has {code_lines(())})</div>")
        self.code.html = code_html(self.enabled, self.last_change if self.last_change in self.enabled else None)

    def show_error(self, message: str) -> None:
        self.message.value = error_html(message)

    def text(self) -> str:
        on = [c.label for c in COMPONENTS if c.key in self.enabled]
        return "\n".join([f"Production loop: {len(on)} of {len(KEYS)} components on: {', '.join(on) or 'none'}",
                          f"code: {code_lines(self.enabled)} lines (the minimal loop has {code_lines(())})",
                          flow_text(self.enabled)])


def flowchart_view(*enabled: str) -> FlowchartView:
    """Show the chapter-7 flowchart with these components switched on."""
    return FlowchartView(enabled)


__all__ = ["FlowchartView", "flowchart_view", "flowchart_svg", "code_html", "active_nodes"]
