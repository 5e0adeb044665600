"""Chapter 9's cheat sheet: generated from the course's code, its template is the course's loop, it prints on 2 pages."""
import inspect
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader

from course_utils import cheatsheet, cheatsheet_page
from course_utils.arithmetic import training_arithmetic
from course_utils.bugs import BUGS, STEP
from course_utils.quiz import load_bank
from course_utils.session import TrainConfig

ROOT = Path(__file__).resolve().parents[1]


def test_formulas_show_the_calculators_numbers():
    text = repr(cheatsheet.formulas())
    a = training_arithmetic(20_000, 64, 10, 4)
    assert f"= {a.iters_per_epoch}" in text and f"= {a.total_weight_updates}" in text and "= 790" in text
    assert f"= {training_arithmetic(20_000, 64, 10, 4, drop_last=True).iters_per_epoch}" in text
    mem = cheatsheet.spiral_memory(64)
    assert mem["weights"] == mem["grads"] == 4 * mem["params"] and mem["optimizer_state"] == 2 * mem["weights"]
    assert mem["activations"] > 0 and f"= {mem['total']:,} B" in text


def test_operations_follow_the_loops_recipe():
    lines = repr(cheatsheet.operations()).splitlines()[2:2 + len(STEP)]
    assert [line.split(" | ")[1] for line in lines] == [cheatsheet.CALLS[name] for name in STEP]


@pytest.mark.parametrize("config", [
    None,
    TrainConfig(n_train=150, batch_size=32, accum_steps=2, epochs=2, optimizer="sgd", lr=0.1, measure_memory=False),
    TrainConfig(n_train=100, batch_size=100, epochs=2, optimizer="momentum", lr=0.05, measure_memory=False),
])
def test_the_template_trains_exactly_like_the_course_loop(config):
    check = cheatsheet.run_template(config)
    assert check.identical, (check.template_history, check.course_history)


def test_the_template_would_notice_a_different_loop():
    """The comparison can fail: a template that divides by K instead of the window's examples differs."""
    original = cheatsheet.TEMPLATE
    try:
        cheatsheet.TEMPLATE = original.replace("(loss * (len(y) / sum(window))).backward()",
                                               "(loss / accum_steps).backward()")
        assert not cheatsheet.run_template().identical
    finally:
        cheatsheet.TEMPLATE = original


def test_the_shown_code_is_the_executed_code():
    shown = repr(cheatsheet.evaluation_loop()).split("\n", 1)[1] + "\n\n" + repr(cheatsheet.template()).split("\n", 1)[1]
    assert shown.strip() == cheatsheet.TEMPLATE.strip()


def test_bug_table_is_the_registry():
    rows = repr(cheatsheet.bug_section()).splitlines()[2:]
    assert len(rows) == len(BUGS)
    assert [r.split(" | ")[0] for r in rows] == [b.title for b in BUGS.values()]
    assert all(r.split(" | ")[-1] == b.fix for r, b in zip(rows, BUGS.values()))


def test_dataloader_defaults_come_from_torchs_signature_and_every_argument_is_described():
    params = {n: p for n, p in inspect.signature(DataLoader.__init__).parameters.items() if n != "self"}
    rows = cheatsheet.dataloader_arguments()
    assert [r[0] for r in rows] == list(params)
    assert all(r[1] == repr(params[r[0]].default) for r in rows if r[0] != "dataset")
    assert set(params) <= set(cheatsheet.DATALOADER_ARGS), "a DataLoader argument has no description"
    assert dict((r[0], r[1]) for r in rows)["persistent_workers"] == "False"
    assert torch.__version__.split("+")[0] in cheatsheet.dataloader_section().title


def test_sections_render_html_and_text():
    for section in cheatsheet.sections():
        assert section._repr_html_().startswith("<div class='cs-section'><h3>") and repr(section).startswith(section.title)
    page = cheatsheet_page.document()
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page and "http" not in page   # standalone


def test_quiz_keys_ch09():
    bank = load_bank(9)
    assert len(bank.questions) >= 4
    assert bank.question("updates-20k-64-k4-10-final").answer == 790
    assert inspect.signature(DataLoader.__init__).parameters["shuffle"].default is None   # the shuffle question
    sampler = DataLoader(list(range(5)), batch_size=2).sampler
    assert type(sampler).__name__ == "SequentialSampler"


def test_pdf_pages_counts_page_objects():
    fake = b"<< /Type /Pages /Count 2 >> << /Type /Page >> << /Type /Page >> << /Type/Page>>"
    assert cheatsheet_page.pdf_pages(fake) == 3


def test_command_line_bad_use_exits_2(tmp_path):
    assert cheatsheet_page.main([]) == 2
    assert cheatsheet_page.main([str(tmp_path / "c.html"), "--pdf"]) == 2


@pytest.mark.skipif(cheatsheet_page.find_chromium() is None, reason="needs Chromium (tools/ensure_chromium.sh)")
def test_make_cheatsheet_writes_html_and_a_pdf_of_at_most_two_pages_with_whole_code_lines(tmp_path):
    html, pdf = tmp_path / "cheatsheet.html", tmp_path / "cheatsheet.pdf"
    subprocess.run([sys.executable, "-m", "course_utils.cheatsheet_page", str(html), "--pdf", str(pdf)], cwd=ROOT,
                   check=True, capture_output=True, timeout=300)
    assert html.read_text(encoding="utf-8") == cheatsheet_page.document()
    data = pdf.read_bytes()
    assert data.startswith(b"%PDF") and 1 <= cheatsheet_page.pdf_pages(data) <= 2
    if shutil.which("pdftotext"):                 # every code line printed whole: not wrapped, not cut
        text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True,
                              check=True).stdout
        flat = " ".join(text.split())
        for line in cheatsheet.TEMPLATE.strip().splitlines():
            assert " ".join(line.split()) in flat, line
