"""What every simulation view shares: a widget, a readable text form, figures as PNG images."""
from __future__ import annotations

import base64
import functools
import html
import io

import anywidget
import ipywidgets as w
import traitlets

from course_utils.infra.numbers import parse_decimal, parse_whole_number  # noqa: F401 (the views' one input rule)

RUN_HINT = "(Run this notebook, Run > Run All Cells, to get the interactive view.)"
REOPEN_HINT = ("▶ This view was saved with the notebook and is not connected to Python: run this cell "
               "(Shift+Enter), or Run > Run All Cells, to bring it back.")


# What every view's page needs, loaded once with its ReopenHint: the hint says it once for the whole view, so
# JupyterLab's broken-link mark on each control goes; text lines marked "cu-lines" (a message, a summary)
# get a reading line height, so the lines a view reserves for them are enough.
VIEW_CSS = (".cu-view.jupyter-widgets-disconnected::before, "
            ".cu-view .jupyter-widgets-disconnected::before { display: none; } "
            ".cu-lines .widget-html-content { line-height: 1.4; padding-top: 3px; }")


def line_spaced(widget: w.HTML) -> w.HTML:
    """Mark an HTML widget as lines of text (line height 1.4): a message or summary of known height."""
    widget.add_class("cu-lines")
    return widget


class ReopenHint(anywidget.AnyWidget):
    """One line above every view, shown only when the view has no live kernel behind it (every chapter).

    A notebook reopened later shows its views from the widget state saved with it (make lab turns
    saving on), or after a kernel restart keeps their last picture: the controls look alive but
    nothing answers. The line says so and how to bring the view back; while Python is connected it
    takes no room at all.
    """

    _esm = """
    async function render({ model, el }) {
      const line = document.createElement("div");
      line.className = "cu-reopen-hint";
      line.textContent = model.get("message");
      line.style.cssText = "display:none;padding:4px 8px;margin:2px 0;background:#fff8e1;color:#5d4037;" +
                           "border-left:4px solid #ffb300;font-size:13px";
      el.appendChild(line);
      try {
        const self = await model.widget_manager.get_model(model.get("own_id"));
        const update = () => { line.style.display = self.comm_live === false ? "block" : "none"; };
        update();
        self.on("comm_live_update", update);
      } catch (error) {
        line.style.display = "block";
      }
    }
    export default { render };
    """
    _css = VIEW_CSS
    message = traitlets.Unicode(REOPEN_HINT).tag(sync=True)
    own_id = traitlets.Unicode("").tag(sync=True)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.own_id = self.model_id


class View:
    """A thin ipywidgets view. JupyterLab renders ``widget``; nbval, GitHub and a headless run read ``text()``.

    What a notebook displays is the view under a ReopenHint (invisible while the kernel is connected);
    its text form, shown where the view cannot be (an untrusted notebook, GitHub), ends with RUN_HINT.
    """

    widget: w.Widget

    def text(self) -> str:  # pragma: no cover - every view overrides it
        raise NotImplementedError

    def _repr_mimebundle_(self, **kwargs):
        shown = getattr(self, "_shown", None)
        if shown is None:
            shown = self._shown = w.VBox([ReopenHint(), self.widget], layout=w.Layout(width="100%"))
            shown.add_class("cu-view")
        data = dict(shown._repr_mimebundle_(**kwargs))
        data["text/plain"] = self.text() + "\n" + RUN_HINT
        return data


def figure_png(fig, tight: bool = True) -> bytes:
    """Render a matplotlib figure to PNG bytes and close it (views show figures as Image widgets: no flicker).

    tight=False skips the tight bounding box, which draws the figure twice: for figures that set their
    own margins (chapter 5's eight panels render in half the time).
    """
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", **({"bbox_inches": "tight"} if tight else {}))
    plt.close(fig)
    return buffer.getvalue()


def error_html(message: str) -> str:
    """A clear, friendly error box (bad input never shows a traceback)."""
    return (f'<div style="color:#8a1c1c;background:#fdecea;border:1px solid #f5c2c0;padding:6px 10px;'
            f'border-radius:4px">⚠ {html.escape(message)}</div>')


def table_html(rows, header=None) -> str:
    """A small HTML table from rows of cells."""
    head = ("<tr>" + "".join(f"<th style='text-align:left;padding:2px 10px'>{html.escape(str(h))}</th>" for h in header)
            + "</tr>") if header else ""
    body = "".join("<tr>" + "".join(f"<td style='padding:2px 10px'>{html.escape(str(c))}</td>" for c in row) + "</tr>"
                   for row in rows)
    return f"<table style='border-collapse:collapse;font-family:monospace'>{head}{body}</table>"


# ----------------------------------------------------------------------------- shared view helpers (chapters 0-9)

def number_box(value: float, description: str, width: str = "260px", label_width: str = "150px",
               kind: str = "whole") -> w.Text:
    """A text box for a number: it keeps exactly what was typed or pasted; the view parses it on Enter.

    Every number box of the course is this box read by `course_utils.infra.numbers` (parse_whole_number for
    kind "whole", parse_decimal for "decimal"): what the box shows is what is computed, or refused in
    words. The view fuzz finds the boxes by `number_kind` and holds every one to that rule.
    """
    if kind not in ("whole", "decimal"):
        raise ValueError(f"kind must be 'whole' or 'decimal', got {kind!r}")
    box = w.Text(f"{value:g}" if isinstance(value, float) else str(value), description=description,
                 continuous_update=False, style={"description_width": label_width}, layout=w.Layout(width=width))
    box.number_kind = kind
    return box


def figure_html(png: bytes, width: int | None = None, alt: str = "figure") -> str:
    """A PNG as an <img> inside HTML (so a view's table and figure arrive as one update, and never a broken icon)."""
    size = f"width:{width}px;" if width else ""
    data = base64.b64encode(png).decode("ascii")
    return f'<img alt="{html.escape(alt)}" style="{size}max-width:100%;display:block" src="data:image/png;base64,{data}"/>'


def png_size(png: bytes) -> tuple[int, int]:
    """(width, height) in pixels of PNG bytes (read from the header)."""
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def stale_html(body: str, message: str) -> str:
    """The last valid output, dimmed, under a message: an error state that keeps the view's height."""
    return (error_html(message) + "<div style='opacity:0.3;pointer-events:none' title='last valid input'>"
            + body + "</div>")


def guarded(view, handler):
    """Wrap a widget callback so no exception escapes (JupyterLab would hide it): it lands in view.show_error."""
    @functools.wraps(handler)
    def run(*args, **kwargs):
        try:
            return handler(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - a view must never die silently
            view.show_error(f"Something went wrong: {exc}" if not isinstance(exc, ValueError) else str(exc))
            return None
    return run


def busy_html(what: str = "updating") -> str:
    """A one-line "working" note, shown at once while a slower update runs (feedback within 200 ms)."""
    return f'<div style="color:#555;padding:6px 10px">⏳ {html.escape(what)}…</div>'
