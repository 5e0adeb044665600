"""What every simulation view shares: a widget, a readable text form, figures as PNG images."""
from __future__ import annotations

import base64
import functools
import html
import io
import math
import re
from decimal import Decimal

import ipywidgets as w


class View:
    """A thin ipywidgets view. JupyterLab renders ``widget``; nbval, GitHub and a headless run read ``text()``."""

    widget: w.Widget

    def text(self) -> str:  # pragma: no cover - every view overrides it
        raise NotImplementedError

    def _repr_mimebundle_(self, **kwargs):
        data = dict(self.widget._repr_mimebundle_(**kwargs))
        data["text/plain"] = self.text()
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


# ----------------------------------------------------------------------------- shared view helpers (chapters 0-2)

_NUMBER = re.compile(r"^[+-]?(\d[\d,_]*)?(\.\d*)?(e[+-]?\d+)?$", re.IGNORECASE)


def parse_whole_number(text: object, label: str, minimum: int | None = None, maximum: int | None = None) -> int:
    """A whole number from what a learner typed or pasted ("1,000", "1e3", "2.0", " 40 "); ValueError in their words.

    The message names the box by its on-screen `label` and never silently changes the value:
    "2.5" is rejected (not truncated to 2, not read as 25).
    """
    raw = str(text).strip().replace(" ", "")
    if not raw or not _NUMBER.match(raw) or not any(ch.isdigit() for ch in raw):
        raise ValueError(f"{label}: {str(text).strip()[:30]!r} is not a number; type a whole number such as 12")
    if len(raw) > 40:
        raise ValueError(f"{label}: that number is far too long")
    integer_part = re.split(r"[.eE]", raw.lstrip("+-"))[0]
    if "," in integer_part and not re.fullmatch(r"\d{1,3}(,\d{3})+", integer_part):
        raise ValueError(f"{label}: {raw!r} is ambiguous; write 2.5 as 2.5 and thousands as 1,000 or 1000")
    cleaned = raw.replace(",", "").replace("_", "")
    try:
        number = int(cleaned)
    except ValueError:
        exponent = cleaned.lower().partition("e")[2]
        if exponent and abs(int(exponent)) > 30:
            raise ValueError(f"{label}: {raw} is out of range") from None
        value = float(cleaned)
        if not math.isfinite(value) or value != int(value):
            raise ValueError(f"{label} must be a whole number, got {raw}") from None
        exact = Decimal(cleaned)
        if exact != exact.to_integral_value():
            raise ValueError(f"{label} must be a whole number, got {raw}") from None
        number = int(exact)
    if minimum is not None and number < minimum:
        raise ValueError(f"{label} must be at least {minimum:,}, got {number:,}")
    if maximum is not None and number > maximum:
        raise ValueError(f"{label} must be at most {maximum:,} in this view, got {number:,}")
    return number


def number_box(value: int, description: str, width: str = "260px", label_width: str = "150px") -> w.Text:
    """A text box for a whole number: it keeps exactly what was typed or pasted; the view parses it on Enter."""
    return w.Text(str(value), description=description, continuous_update=False,
                  style={"description_width": label_width}, layout=w.Layout(width=width))


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
