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


def test_the_reference_table_is_readable_in_jupyterlab_and_shows_the_line_a_learner_writes():
    """Seen in a screenshot: JupyterLab right-aligned the cells and cut the last column off, the summary showed
    two arrows, and the device entry's fix was its CPU stand-in (fake tensors on meta), not `.to(device)`."""
    from course_utils.atlas import ENTRIES
    from course_utils.atlas.text import table
    from course_utils.atlas.runner import Outcome
    device = next(e for e in ENTRIES if e.id == "tensors-on-two-devices")
    assert ".to(device)" in device.fix_shown and "Fake" not in device.fix_shown
    outcome = Outcome(device, "RuntimeError", "Expected all tensors to be on the same device", True, "meta")
    html_table, text = table([outcome])
    assert "table-layout:fixed" in html_table and html_table.count("text-align:left") == 10   # 5 heads, 5 cells
    assert "x, y = x.to(device), y.to(device)" in text and "FakeTensorMode" not in text
    from course_utils.widgets.explain_view import errors_here
    assert not errors_here(3).summary.startswith("▸")       # JupyterLab draws its own marker


def test_every_fix_column_shows_a_line_of_the_fix_not_its_bookkeeping():
    """Seen in JupyterLab: the fix column showed each fix's last line, `shown = tuple(xb.shape)`, for most
    entries. Now it is the line the fix changes, read off the two fragments, and it is a line of the fix."""
    import string

    from course_utils.atlas import ENTRIES
    from course_utils.atlas.entry import logical_lines
    for entry in ENTRIES:
        line = entry.fix_shown
        assert not line.startswith("shown"), entry.id
        statement = line.removeprefix("delete: ").partition("  #")[0].strip()
        fix = " ".join(logical_lines(string.Template(entry.fix).substitute(entry.params[0])))
        code = string.Template(entry.code).substitute(entry.params[0])
        if line.startswith("delete: "):
            assert statement in code and statement not in fix, entry.id
        elif entry.id not in ("tensors-on-two-devices",               # its run fix is a CPU stand-in (meta tensors)
                              "collective-tensor-on-other-device"):   # ... and gloo stands in for nccl
            assert statement in fix, (entry.id, statement)


def test_the_changed_line_is_read_off_the_two_fragments():
    from course_utils.atlas.entry import changed_line
    code = "x = load()\nloader = DataLoader(ds,\n                    batch_size=4)\n"
    fix = "x = load()\nloader = DataLoader(ds, batch_size=4,\n                    collate_fn=pad)\nshown = 1\n"
    assert changed_line(code, fix) == "loader = DataLoader(ds, batch_size=4, collate_fn=pad)"
    assert changed_line("a = 1\nb = 2   # why\n", "a = 1\nb = 3\nc = 4  # the fix\n") == "c = 4  # the fix"
    assert changed_line("with torch.no_grad():\n    loss = f()\n", "loss = f()\nshown = 1\n") == \
        "delete: with torch.no_grad():"
