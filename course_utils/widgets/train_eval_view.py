"""Chapter 4: train mode vs eval mode side by side, with the measured graph memory of an evaluation."""
from __future__ import annotations

import html

import ipywidgets as w
import torch

from course_utils.engine.data import make_spiral
from course_utils.chapters.ch04_evaluation import eval_graph_bytes
from course_utils.engine.models import MLP
from course_utils.widgets.base import View

HIDDEN = 8
X = (0.5, -0.3)


class TrainEvalView(View):
    """A one-hidden-layer MLP with Dropout(p): press "forward" in train or eval mode and watch the mask and output."""

    def __init__(self, p: float = 0.5, seed: int = 0, memory_batch: int = 256):
        torch.manual_seed(seed)
        self.model = MLP(in_features=2, hidden=HIDDEN, out_features=3, depth=1, dropout=p)
        self.p, self.seed = p, seed
        self.x = torch.tensor([X])
        self._seen: dict[str, object] = {}
        self.model.body[-1].register_forward_hook(self._hook)   # the Dropout layer
        data = make_spiral(memory_batch, seed=seed)
        xs, ys = data.tensors
        self.memory = {"grad enabled": eval_graph_bytes(self.model, xs, ys, no_grad=False),
                       "no_grad": eval_graph_bytes(self.model, xs, ys, no_grad=True)}
        self.memory_batch = memory_batch
        self.mode = w.ToggleButtons(options=["train", "eval"], value="train")
        self.mode.observe(lambda _: self._draw(), names="value")
        self.forward_button = w.Button(description="forward", icon="play", button_style="primary")
        self.forward_button.on_click(lambda _: self.forward())
        self.reset_button = w.Button(description="reset", icon="undo")
        self.reset_button.on_click(lambda _: self.reset())
        self.mask_html = w.HTML()
        self.history_html = w.HTML()
        self.memory_html = w.HTML(self._memory_bars())
        self.history_html.layout = w.Layout(min_height="230px")    # room for 8 passes: no layout jump
        self.widget = w.VBox([w.HBox([w.Label("mode:"), self.mode, self.forward_button, self.reset_button]),
                              self.mask_html, self.history_html, self.memory_html])
        self.reset()

    def _hook(self, module, inputs, output):
        inp = inputs[0].detach()[0]
        out = output.detach()[0]
        self._seen = {"relu": inp.clone(), "out": out.clone(), "dropped": ((inp != 0) & (out == 0)).tolist()}

    def reset(self) -> None:
        """Reseed dropout's random stream and clear the history of passes."""
        self._rng = torch.Generator().manual_seed(self.seed).get_state()
        self.history: list[tuple[str, tuple[float, ...], int]] = []
        self.last_mask: list[bool] | None = None
        self._draw()

    def forward(self) -> tuple[float, ...]:
        """One forward pass of the fixed input in the selected mode (dropout uses the view's own RNG stream)."""
        self.model.train(self.mode.value == "train")
        outer = torch.get_rng_state()
        torch.set_rng_state(self._rng)
        try:
            with torch.no_grad():
                out = self.model(self.x)[0]
        finally:
            self._rng = torch.get_rng_state()
            torch.set_rng_state(outer)
        self.last_mask = self._seen["dropped"]
        values = tuple(round(v, 3) for v in out.tolist())   # 3 decimals: a 4th sat on a rounding edge (nudged nbval)
        self.history.append((self.mode.value, values, sum(self.last_mask)))
        self._draw()
        return values

    def _memory_bars(self) -> str:
        top = max(self.memory.values()) or 1
        bars = []
        for name, b in self.memory.items():
            width = int(300 * b / top)
            bars.append(f"<div style='font-family:monospace'><span style='display:inline-block;width:110px;"
                        f"text-align:right'>{name}:</span> <span style='display:inline-block;"
                        f"width:{width}px;height:10px;background:#ef6c00'></span> {b:,} bytes</div>")
        return (f"<b>Graph memory of evaluating {self.memory_batch} spiral examples</b> (saved for backward, "
                f"measured){''.join(bars)}")

    def _draw(self) -> None:
        cells = []
        if self.last_mask is not None:
            relu = self._seen["relu"].tolist()
            for i, dropped in enumerate(self.last_mask):
                if dropped:
                    style, label = "background:#bdbdbd;color:#757575", "×"
                elif relu[i] == 0:
                    style, label = "background:#eeeeee;color:#9e9e9e", "0"
                else:
                    style, label = "background:#90caf9;color:#0d47a1", f"{self._seen['out'][i].item():.2f}"
                cells.append(f"<span style='display:inline-block;width:44px;text-align:center;margin:2px;"
                             f"border-radius:12px;{style}'>{label}</span>")
        last_mode = self.history[-1][0] if self.history else None
        if last_mode is not None and last_mode != self.mode.value:
            note = (f"<i>mode is now <b>{self.mode.value}</b>; the units above are from the last {last_mode} pass: "
                    "press forward</i>")
        elif len(self.history) > 1 and self.history[-1] == self.history[-2] and last_mode == "train":
            note = ("<i>same mask as the pass before: with only a few units alive after ReLU, a repeat happens "
                    "now and then by chance</i>")
        else:
            note = "&nbsp;"
        self.mask_html.value = ("<b>hidden units after dropout</b> (grey × = dropped this pass, 0 = ReLU off):"
                                f"<div style='white-space:nowrap'>{''.join(cells) or '<i>press forward</i>'}</div>"
                                f"<div style='min-height:1.4em'>{note}</div>")
        first = max(1, len(self.history) - 7)
        rows = "".join(f"<div style='font-family:monospace'>pass {i}. {mode:5s} output {html.escape(str(list(v)))} "
                       f"dropped {d}</div>" for i, (mode, v, d) in enumerate(self.history[-8:], first))
        self.history_html.value = rows

    def text(self) -> str:
        lines = [f"Train vs eval: MLP(2 → {HIDDEN} → 3) with Dropout(p={self.p}), input x={list(X)}"]
        for i, (mode, v, d) in enumerate(self.history, 1):
            lines.append(f"  pass {i} ({mode}): output {list(v)}, units dropped {d}")
        for name, b in self.memory.items():
            lines.append(f"  graph memory, evaluation with {name}: {b:,} bytes")
        return "\n".join(lines)


def train_vs_eval(**kwargs) -> TrainEvalView:
    """Show chapter 4's train-vs-eval widget."""
    return TrainEvalView(**kwargs)
