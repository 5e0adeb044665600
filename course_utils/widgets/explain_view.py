"""Chapter 9's "paste your error" box (issue 39), and the folded "errors you will meet here" of each chapter."""
from __future__ import annotations

import html

import ipywidgets as w

from course_utils.explain import explain_text
from course_utils.widgets.base import View, error_html, guarded

EXAMPLE = "RuntimeError: mat1 and mat2 shapes cannot be multiplied (32x3136 and 784x10)"


class ExplainView(View):
    """A text box for a message or a traceback, an Explain button, the atlas's answer below."""

    def __init__(self, text: str = EXAMPLE):
        self.box = w.Textarea(value=text, placeholder="paste an error message or a whole traceback here",
                              layout=w.Layout(width="100%", height="9em"))
        self.button = w.Button(description="Explain", button_style="primary")
        self.answer = w.HTML()
        self.button.on_click(guarded(self, lambda _: self.explain()))
        self.widget = w.VBox([self.box, self.button, self.answer], layout=w.Layout(width="100%"))
        self.explain()

    def explain(self) -> None:
        self.answer.value = f"<pre style='white-space:pre-wrap'>{html.escape(self.text())}</pre>"

    def show_error(self, message: str) -> None:
        self.answer.value = error_html(message)

    def text(self) -> str:
        return explain_text(self.box.value)


class Folded:
    """Printed text shown folded in JupyterLab (a closed <details>), compared whole by nbval (text/plain)."""

    def __init__(self, summary: str, text: str):
        self.summary, self.body = summary, text

    def _repr_mimebundle_(self, **kwargs):
        return {"text/plain": self.body,
                "text/html": f"<details><summary>{html.escape(self.summary)}</summary>"
                             f"<pre style='white-space:pre-wrap'>{html.escape(self.body)}</pre></details>"}


def errors_here(chapter: int) -> Folded:
    """Chapter `chapter`'s atlas entries, each raised now with its fix run, folded until opened."""
    from course_utils.atlas import ENTRIES
    from course_utils.atlas.text import chapter_text

    count = sum(e.chapter == chapter for e in ENTRIES)
    return Folded(f"{count} errors this chapter's mechanisms raise, in torch's words, each with its fix "
                  "(click to open)", chapter_text(chapter))


class Reference:
    """An HTML table in JupyterLab (folded in a <details>), its text form for nbval and plain readers."""

    def __init__(self, summary: str, table_html: str, text: str):
        self.summary, self.table_html, self.body = summary, table_html, text

    def _repr_mimebundle_(self, **kwargs):
        return {"text/plain": self.body,
                "text/html": f"<details><summary>{html.escape(self.summary)}</summary>{self.table_html}</details>"}


def atlas_reference() -> Reference:
    """Chapter 9: every entry of the atlas raised now, as a table by stage (torch's words, cause, fix, chapter)."""
    from course_utils.atlas import ENTRIES
    from course_utils.atlas.text import outcomes, size_by_stage, table

    done = outcomes(ENTRIES)
    table_html, text = table(done)
    quoted = sum(bool(e.not_run) for e in ENTRIES)
    return Reference(f"the atlas: {size_by_stage()}; {sum(o.ok for o in done)} of {len(done) - quoted} raised as "
                     f"expected just now, each with its fix run; {quoted} quoted, not run (click to open)",
                     table_html, text)
