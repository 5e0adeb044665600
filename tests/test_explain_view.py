"""Chapter 9's explain box and the folded "errors you will meet here" (issue 39)."""
from __future__ import annotations

from course_utils.atlas import ENTRIES
from course_utils.atlas.lookup import recorded
from course_utils.widgets.explain_view import EXAMPLE, ExplainView, Folded, errors_here


def test_the_box_answers_its_example_then_what_is_pasted_and_clicked():
    view = ExplainView()
    assert view.box.value == EXAMPLE and "mat1-mat2-shapes" in view.answer.value
    entry = next(e for e in ENTRIES if e.id == "batchnorm-batch-of-one")
    view.box.value = "Traceback (most recent call last):\n  File \"x.py\", line 3\nValueError: " + \
        recorded()[entry.id]["messages"][1]
    view.button.click()
    assert "batchnorm-batch-of-one" in view.answer.value and "mat1" not in view.answer.value
    view.box.value = "   "
    view.button.click()
    assert "nothing to explain" in view.answer.value
    view.box.value = "KeyError: 'learning_rate'"
    view.button.click()
    assert "no entry of the atlas matches" in view.answer.value


def test_a_failure_inside_shows_a_message_not_a_traceback(monkeypatch):
    view = ExplainView()
    monkeypatch.setattr(ExplainView, "text", lambda self: (_ for _ in ()).throw(RuntimeError("boom")))
    view.button.click()
    assert "Something went wrong: boom" in view.answer.value and "Traceback" not in view.answer.value


def test_a_chapter_section_is_folded_in_jupyterlab_and_whole_for_nbval():
    shown = errors_here(4)
    bundle = shown._repr_mimebundle_()
    assert bundle["text/plain"] == shown.body and "<details>" in bundle["text/html"]
    ids = [e.id for e in ENTRIES if e.chapter == 4]
    assert all(f"[{i}]" in shown.body for i in ids) and f"{len(ids)} errors" in shown.body
    assert f"{len(ids)} of them as expected" in shown.body
    assert isinstance(shown, Folded)
