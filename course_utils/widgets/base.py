"""What every simulation view shares: a widget, a readable text form, figures as PNG images."""
from __future__ import annotations

import html
import io

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


def figure_png(fig) -> bytes:
    """Render a matplotlib figure to PNG bytes and close it (views show figures as Image widgets: no flicker)."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight")
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
