"""Chapter 3: the step-through view: one button per operation over TinyLinear, the tensors in colour."""
from __future__ import annotations

import html

import ipywidgets as w

from course_utils.chapters.ch03_anatomy import OPERATIONS, StepThrough, fmt
from course_utils.widgets.base import View

FORWARD, GRADIENT, UPDATE = "#1565c0", "#e65100", "#2e7d32"   # blue: values, orange: gradients, green: updates
KIND = {"x": FORWARD, "t": FORWARD, "y": FORWARD, "L": FORWARD, "W.grad": GRADIENT, "b.grad": GRADIENT,
        "W": UPDATE, "b": UPDATE}
LABELS = {"zero_grad": "zero_grad()", "forward": "forward", "loss": "loss", "backward": "backward()",
          "clip": "clip", "step": "optimizer.step()"}


class StepView(View):
    """Buttons zero_grad / forward / loss / backward / clip / step / reset over ``ch03_anatomy.StepThrough``."""

    def __init__(self, lr: float = 0.01, max_norm: float = 10.0):
        self.engine = StepThrough(lr=lr, max_norm=max_norm)
        self.buttons = {}
        for op in OPERATIONS:
            button = w.Button(description=LABELS[op], layout=w.Layout(width="150px"))
            button.on_click(lambda _, op=op: self.press(op))
            self.buttons[op] = button
        self.reset_button = w.Button(description="reset", icon="undo", button_style="warning",
                                     layout=w.Layout(width="100px"))
        self.reset_button.on_click(lambda _: self.reset())
        self.board = w.HTML()
        self.log = w.HTML(layout=w.Layout(min_height="190px"))   # room for 8 log lines: no layout jump
        legend = w.HTML(f"<span style='color:{FORWARD}'>■ forward values</span> &nbsp; "
                        f"<span style='color:{GRADIENT}'>■ gradients</span> &nbsp; "
                        f"<span style='color:{UPDATE}'>■ weights (changed by the update)</span> &nbsp; "
                        "<b>bold</b> = written by the last operation")
        self.widget = w.VBox([w.HBox(list(self.buttons.values()) + [self.reset_button]), legend, self.board,
                              self.log])
        self.draw()

    def press(self, operation: str):
        """Run one operation (what its button does) and redraw."""
        record = self.engine.run(operation)
        self.draw()
        return record

    def reset(self) -> None:
        """Back to the starting weights, no grads, no outputs, empty history."""
        self.engine.reset()
        self.draw()

    def draw(self) -> None:
        cells = []
        for name, tensor in self.engine.tensors().items():
            bold = "font-weight:bold;" if name in self.engine.changed else ""
            stale = name in self.engine.stale
            colour = "#9e9e9e" if stale else KIND[name]
            note = " <i>(stale: computed with the weights before the step; run forward again)</i>" if stale else ""
            cells.append(f"<tr><td style='padding:2px 10px'>{name}</td><td style='padding:2px 10px;color:{colour};"
                         f"{bold}font-family:monospace'>{html.escape(fmt(tensor))}{note}</td></tr>")
        self.board.value = f"<table>{''.join(cells)}</table>"
        rows = []
        for i, r in enumerate(self.engine.history[-8:], max(1, len(self.engine.history) - 7)):
            colour = "#333" if r.ok else "#8a1c1c"
            rows.append(f"<div style='color:{colour}'>{i}. <b>{r.operation}</b> — reads {html.escape(r.reads)}; "
                        f"writes {html.escape(r.writes)}. {html.escape(r.note)}</div>")
        self.log.value = "".join(rows) or "<i>Press the operations in order: zero_grad, forward, loss, backward, step.</i>"

    def text(self) -> str:
        lines = ["Step-through of one training step on TinyLinear (lr=%g, clip max_norm=%g)"
                 % (self.engine.lr, self.engine.max_norm)]
        lines += [f"  {name:7s} = {fmt(t)}" + ("  (stale: before the step)" if name in self.engine.stale else "")
                  for name, t in self.engine.tensors().items()]
        if self.engine.history:
            r = self.engine.history[-1]
            lines.append(f"last operation: {r.operation} — {r.note}")
        lines.append("Buttons: " + " | ".join(LABELS[op] for op in OPERATIONS) + " | reset")
        return "\n".join(lines)


def step_through(**kwargs) -> StepView:
    """Show chapter 3's step-through widget."""
    return StepView(**kwargs)
