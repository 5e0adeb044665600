"""Chapter 9's cheat sheet: its numbers computed, its code executed against oracles (the course's loop, an
uninterrupted run, torch's optimizers), its typed signatures checked by runs, and it prints on 2 pages."""
import inspect
import math
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from torch.utils.data import BatchSampler, DataLoader, SequentialSampler

from course_utils.chapters import ch09_cheatsheet as cheatsheet, ch09_cheatsheet_page as cheatsheet_page
from course_utils.engine.arithmetic import training_arithmetic
from course_utils.engine.bugs import BUGS, STEP
from course_utils.chapters.ch09_cheatsheet_code import (SAVE_RESUME, TEMPLATE, run_save_resume, run_template,
                                                        template_namespace)
from course_utils.engine.data import spiral_splits
from course_utils.engine.models import MLP
from course_utils.infra.quiz import load_bank
from course_utils.engine.session import TrainConfig

ROOT = Path(__file__).resolve().parents[1]


def test_formulas_show_the_calculators_numbers_for_the_example_and_for_w_ranks():
    text = repr(cheatsheet.formulas())
    n, b, e, k, w = cheatsheet.EXAMPLE
    a = training_arithmetic(n, b, e, k)
    ranks = training_arithmetic(n, b, e, k, world_size=w)
    for value in (a.iters_per_epoch, a.total_micro_steps, a.updates_per_epoch, a.total_weight_updates,
                  a.effective_batch_size, training_arithmetic(n, b, e, k, drop_last=True).iters_per_epoch,
                  ranks.iters_per_epoch):
        assert f"= {value:,}" in text, value
    assert f"{ranks.effective_batch_size:,};  {ranks.total_weight_updates:,}" in text
    assert math.ceil(math.ceil(n / w) / b) == ranks.iters_per_epoch and ranks.effective_batch_size == b * k * w
    mem = cheatsheet.spiral_memory(b)
    assert mem["weights"] == mem["grads"] == 4 * mem["params"] and mem["optimizer_state"] == 2 * mem["weights"]
    assert mem["activations"] > 0 and f"= {mem['total']:,} B" in text


def test_the_worked_example_does_not_answer_the_final_quiz():
    text = repr(cheatsheet.formulas())
    for q in load_bank(9).questions:
        if q.kind == "numeric":
            assert not re.search(rf"= {int(q.answer):,}\b", text), q.id


def _adam_as_written(w, g_seq, lr, decoupled):
    """The sheet's Adam / AdamW rules, step by step (torch's defaults: beta 0.9, 0.999, eps 1e-8, AdamW decay 0.01)."""
    b1, b2, eps, lam = 0.9, 0.999, 1e-8, 0.01
    m = v = torch.zeros_like(w)
    for t, g in enumerate(g_seq, 1):
        if decoupled:
            w = w - lr * lam * w
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        w = w - lr * (m / (1 - b1 ** t)) / ((v / (1 - b2 ** t)).sqrt() + eps)
    return w


@pytest.mark.parametrize("name", ["Adam", "AdamW"])
def test_the_update_rules_on_the_sheet_are_torchs(name):
    torch.manual_seed(0)
    start = torch.randn(20, dtype=torch.float64)
    grads = [torch.randn(20, dtype=torch.float64) for _ in range(5)]
    p = torch.nn.Parameter(start.clone())
    optimizer = getattr(torch.optim, name)([p], lr=0.01)
    for g in grads:
        p.grad = g.clone()
        optimizer.step()
    assert torch.allclose(p.detach(), _adam_as_written(start, grads, 0.01, name == "AdamW"), atol=1e-12)
    first = torch.nn.Parameter(start.clone())
    one = torch.optim.Adam([first], lr=0.01)
    first.grad = grads[0].clone()
    one.step()
    assert torch.allclose((first.detach() - start).abs(), torch.full_like(start, 0.01), rtol=1e-5)  # "about lr"


def test_first_checks_are_computed_and_hold():
    text = repr(cheatsheet.first_checks())
    fresh, log_c = cheatsheet.initial_loss_check(classes=3)
    assert f"{fresh:.2f}" in text and abs(fresh - log_c) < 0.05 * log_c
    assert "loss < 0.001" in text
    assert f"≥ {cheatsheet.sig(cheatsheet.double_softmax_floor()[1], 3)}" in text


def test_operations_follow_the_loops_recipe_and_zero_grad_is_said_right():
    lines = repr(cheatsheet.operations()).splitlines()[2:2 + len(STEP)]
    assert [line.split(" | ")[1] for line in lines] == [cheatsheet.CALLS[name] for name in STEP]
    model, orphan = MLP(), torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    (model(torch.randn(4, 2)).sum() + orphan(torch.randn(4, 2)).sum()).backward()
    optimizer.zero_grad()
    assert all(p.grad is None for p in model.parameters()) and orphan.weight.grad is not None
    assert "to None" in lines[0] and "others keep theirs" in lines[0]


@pytest.mark.parametrize("config", [
    None,
    TrainConfig(n_train=150, batch_size=32, accum_steps=2, epochs=2, optimizer="sgd", lr=0.1, measure_memory=False),
    TrainConfig(n_train=100, batch_size=100, epochs=2, optimizer="momentum", lr=0.05, measure_memory=False),
    TrainConfig(n_train=300, batch_size=32, accum_steps=3, epochs=3, optimizer="adamw", lr=0.01, clip_norm=0.5,
                schedule="onecycle", measure_memory=False),
    TrainConfig(n_train=300, batch_size=32, accum_steps=2, epochs=3, optimizer="momentum", lr=0.05, clip_norm=0.5,
                schedule="cosine", measure_memory=False),
    TrainConfig(n_train=200, batch_size=16, accum_steps=4, epochs=2, optimizer="sgd", lr=0.1,
                schedule="warmup_cosine", measure_memory=False),
], ids=["adam-k3", "sgd-k2", "full-batch", "clip-onecycle", "clip-cosine-per-epoch", "warmup-cosine"])
def test_the_template_trains_exactly_like_the_course_loop(config):
    check = run_template(config)
    assert check.identical, (check.template_history, check.course_history)


def test_the_template_would_notice_a_different_loop():
    """The comparison can fail: a template that divides by K instead of the window's examples differs."""
    wrong = TEMPLATE.replace("(loss * (len(y) / n)).backward()", "(loss / accum_steps).backward()")
    assert wrong != TEMPLATE and not run_template(source=wrong).identical


def test_the_template_takes_a_batch_sampler_and_a_plateau_scheduler():
    names = template_namespace()
    split = spiral_splits(100, 50, seed=0)
    loader = DataLoader(split.train, batch_sampler=BatchSampler(SequentialSampler(split.train), 30, False))
    assert loader.batch_size is None                     # what broke the old one-liner
    model = MLP(hidden=16)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    steps = []
    optimizer.register_step_post_hook(lambda *args: steps.append(1))
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, patience=0, threshold=10.0)  # never improves
    history = names["fit"](model, loader, DataLoader(split.val, batch_size=50), torch.nn.functional.cross_entropy,
                           optimizer, 2, "cpu", 3, None, None, plateau)
    assert len(history) == 2 and len(steps) == 2 * math.ceil(4 / 3)  # 4 batches a epoch, K=3: 2 updates (flush)
    assert optimizer.param_groups[0]["lr"] < 0.1                      # the plateau rule was fed the metric


def test_evaluate_leaves_the_mode_as_it_found_it():
    evaluate = template_namespace()["evaluate"]
    split = spiral_splits(20, 20, seed=0)
    model = MLP(dropout=0.5)
    for mode in (True, False):
        model.train(mode)
        evaluate(model, DataLoader(split.val, batch_size=8), torch.nn.functional.cross_entropy, "cpu")
        assert model.training is mode


def test_the_save_and_resume_lines_resume_bitwise():
    assert run_save_resume() == (True, True)
    assert 'torch.load(path, weights_only=True)' in SAVE_RESUME and '"optimizer": optimizer.state_dict()' in SAVE_RESUME


def test_the_shown_code_is_the_executed_code():
    shown = repr(cheatsheet.evaluation_loop()).split("\n", 1)[1] + "\n\n" + repr(cheatsheet.template()).split("\n", 1)[1]
    assert shown.strip() == TEMPLATE.strip()
    note, shown_lines = repr(cheatsheet.save_resume()).split("\n", 1)[1].split("\n", 1)
    set_up, executed = SAVE_RESUME.strip().split("\n\n", 1)      # the sheet prints save and resume; set-up is said
    assert shown_lines.strip() == executed.strip() and set_up.startswith("# set up") and "`order`" in note
    assert cheatsheet.widest_code_line() <= 60  # fits a printed half-page column at 7.5 pt


def test_bug_table_is_the_registry_with_chapter_5s_signatures():
    from course_utils.chapters.ch05_museum import ONE_LINE
    rows = repr(cheatsheet.bug_section()).splitlines()[2:]
    assert len(rows) == len(BUGS)
    assert [r.split(" | ")[0] for r in rows] == [b.title for b in BUGS.values()]
    for row, (name, bug) in zip(rows, BUGS.items()):
        seen, fix = row.split(" | ")[1:]
        assert seen == (ONE_LINE.get(name) or cheatsheet.signature(name))
        assert fix == cheatsheet.FIXES.get(name, bug.fix).replace("`", "")
    assert "is_update_step" not in repr(cheatsheet.bug_section()) and "`" not in cheatsheet.bug_section().body_html


def test_the_typed_signatures_are_what_a_run_shows():
    x, y = torch.randn(8, 2), torch.randint(0, 3, (8,))
    loss = lambda m: torch.nn.functional.cross_entropy(m(x), y)  # noqa: E731
    # model.half() after building Adam: its next step raises a dtype RuntimeError; SGD runs on
    for name, raises in (("Adam", True), ("SGD", False)):
        model = MLP()
        optimizer = getattr(torch.optim, name)(model.parameters(), lr=0.01)
        loss(model).backward()
        optimizer.step()
        model.half()
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x.half()).float(), y).backward()
        if raises:
            with pytest.raises(RuntimeError, match="dtype"):
                optimizer.step()
        else:
            optimizer.step()
    # freezing after building the optimizer: frozen weights still move with momentum under set_to_none=False
    model = MLP()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    optimizer.zero_grad(set_to_none=False)
    loss(model).backward()
    optimizer.step()
    for p in model.body.parameters():
        p.requires_grad_(False)
    frozen = model.body[0].weight.clone()
    optimizer.zero_grad(set_to_none=False)
    loss(model).backward()
    optimizer.step()
    assert not torch.equal(frozen, model.body[0].weight)
    # a head added after building the optimizer never moves
    model = MLP()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    model.head = torch.nn.Linear(64, 3)
    head = model.head.weight.clone()
    for _ in range(3):
        optimizer.zero_grad()
        loss(model).backward()
        optimizer.step()
    assert model.head.weight.grad is not None and torch.equal(head, model.head.weight)
    # scheduler.step() before optimizer.step(): torch warns
    optimizer = torch.optim.SGD(MLP().parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scheduler.step()
    assert any("optimizer.step()" in str(w.message) for w in caught)
    assert "0.55 for 3 classes" in cheatsheet.signature("softmax_before_cross_entropy")
    # a per-update schedule stepped once per epoch: the lr stays near its start, no annealing
    d = BUGS["update_schedule_per_epoch"].demo()
    assert "stays near its starting value" in cheatsheet.signature("update_schedule_per_epoch")
    assert d.peak_per_epoch < 0.1 * d.max_lr and d.last_per_epoch > 100 * d.last_healthy


def test_dataloader_defaults_come_from_torchs_signature():
    params = {n: p for n, p in inspect.signature(DataLoader.__init__).parameters.items() if n != "self"}
    rows = cheatsheet.dataloader_arguments()
    assert [r[0] for r in rows] == [n for n in params if n in cheatsheet.DATALOADER_ARGS]
    assert all(r[1] == repr(params[r[0]].default) for r in rows)
    assert set(params) <= set(cheatsheet.DATALOADER_ARGS) | set(cheatsheet.RARE) | {"dataset"}, \
        "a DataLoader argument is neither described nor listed as rare"
    text = repr(cheatsheet.dataloader_section())
    assert all(name in text for name in cheatsheet.RARE if name in params)
    assert re.search(r"pin_memory_device.{0,80}Deprecated", DataLoader.__doc__ or "", re.S)
    assert "pin_memory_device is deprecated" in text
    assert torch.__version__.split("+")[0] in cheatsheet.dataloader_section().title


def test_workers_seed_random_and_numpy_themselves():
    """The checklist's claim: without a worker_init_fn, each worker's random and NumPy streams differ."""
    import numpy as np

    class Draws(torch.utils.data.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            import random
            return torch.tensor([random.random(), float(np.random.rand())])

    loader = DataLoader(Draws(), batch_size=1, num_workers=2, generator=torch.Generator().manual_seed(0))
    first = [tuple(b[0].tolist()) for b in loader]
    second = [tuple(b[0].tolist()) for b in loader]
    assert len(set(first)) == 4                          # two workers do not repeat each other's draws
    assert first == [tuple(b[0].tolist()) for b in DataLoader(Draws(), batch_size=1, num_workers=2,
                                                              generator=torch.Generator().manual_seed(0))]
    assert first != second                               # a new epoch, new worker seeds


def test_the_scheduler_table_is_the_gallery():
    from course_utils.chapters.ch07_scheduler_gallery import GALLERY
    rows = repr(cheatsheet.scheduler_section()).splitlines()[2:]
    assert [r.split(" | ")[0].rsplit(" (per ", 1)[0] for r in rows] == [e.name for e in GALLERY]
    assert "scheduler.step(val_loss)" in rows[[e.name for e in GALLERY].index("ReduceLROnPlateau")]


def test_sections_render_left_aligned_html_and_text():
    for section in cheatsheet.sections():
        html = section._repr_html_()
        assert html.startswith("<div class='cs-section'><h3>") and repr(section).startswith(section.title)
        assert "text-align:right" not in html and all("text-align:left" in cell for cell in re.findall(r"<t[dh][ >][^>]*>", html))
    page = cheatsheet_page.document()
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page and "http" not in page   # standalone


def test_the_printed_page_has_no_text_below_7_5_pt():
    sizes = [float(v) for v in re.findall(r"font-size:\s*([\d.]+)pt", cheatsheet_page.CSS)]
    assert sizes and min(sizes) >= 7.5


def test_pdf_pages_counts_page_objects():
    fake = b"<< /Type /Pages /Count 2 >> << /Type /Page >> << /Type /Page >> << /Type/Page>>"
    assert cheatsheet_page.pdf_pages(fake) == 3


def test_command_line_bad_use_exits_2(tmp_path):
    assert cheatsheet_page.main([]) == 2
    assert cheatsheet_page.main([str(tmp_path / "c.html"), "--pdf"]) == 2


@pytest.mark.skipif(cheatsheet_page.find_chromium() is None, reason="needs Chromium (tools/ensure_chromium.sh)")
def test_make_cheatsheet_writes_html_and_a_pdf_of_at_most_two_pages_with_whole_code_lines(tmp_path):
    html, pdf = tmp_path / "cheatsheet.html", tmp_path / "cheatsheet.pdf"
    subprocess.run([sys.executable, "-m", "course_utils.chapters.ch09_cheatsheet_page", str(html), "--pdf", str(pdf)],
                   cwd=ROOT, check=True, capture_output=True, timeout=300)
    assert html.read_text(encoding="utf-8") == cheatsheet_page.document()
    data = pdf.read_bytes()
    assert data.startswith(b"%PDF") and 1 <= cheatsheet_page.pdf_pages(data) <= 2
    if shutil.which("pdftotext"):                 # every code line printed whole: not wrapped, not cut
        text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True,
                              check=True).stdout
        flat = " ".join(text.split())
        for line in (TEMPLATE + SAVE_RESUME.strip().split("\n\n", 1)[1]).strip().splitlines():  # the sheet says the set-up
            assert " ".join(line.split()) in flat, line


READS = ["item", "tolist", "numpy", "cpu", "__bool__", "__float__", "__int__", "__index__", "nonzero"]


def _count_reads(monkeypatch) -> list[str]:
    """Every way a tensor's value reaches Python (a host sync on a GPU), recorded as it happens; except the
    DataLoader's own read of the CPU seed it draws for its workers when an epoch's iterator starts."""
    seen: list[str] = []

    def record(name, original):
        def read(*args, **kwargs):
            caller = sys._getframe(1).f_globals.get("__name__", "")
            if not caller.startswith("torch.utils.data"):
                seen.append(name)
            return original(*args, **kwargs)
        return read
    for name in READS:
        monkeypatch.setattr(torch.Tensor, name, record(name, getattr(torch.Tensor, name)))
    return seen


@pytest.mark.parametrize("batches", [4, 16])
def test_the_template_reads_the_device_a_fixed_number_of_times_per_epoch(monkeypatch, batches):
    """Chapter 5 measures a host read per step as costly on a GPU: the template learners copy keeps losses, counts
    and norms on the device and reads each once per epoch, however many batches the epoch has (issue 42 item 1)."""
    names = template_namespace()
    split = spiral_splits(8 * batches, 8 * batches, seed=0)
    model = MLP(hidden=16)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)           # no optimizer state: no counter reads
    train, val = DataLoader(split.train, batch_size=8), DataLoader(split.val, batch_size=8)
    reads = _count_reads(monkeypatch)
    history = names["fit"](model, train, val, torch.nn.functional.cross_entropy, optimizer, 2, "cpu", 3, 1.0)
    monkeypatch.undo()
    assert len(history) == 2 and len(reads) == 2 * 4, reads   # per epoch: losses, top norm; eval's losses, hits


def test_the_template_returns_the_largest_pre_clip_norm_of_each_epoch(monkeypatch):
    """09.4 (wave 4): the value clip_grad_norm_ returns is kept, the epoch's largest returned with the loss."""
    returned: list[float] = []
    real = torch.nn.utils.clip_grad_norm_
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", lambda *a, **k: returned.append(real(*a, **k)) or
                        returned[-1])
    names = template_namespace()
    split = spiral_splits(96, 32, seed=0)
    torch.manual_seed(0)
    model = MLP(hidden=16)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    loss, top = names["train_one_epoch"](model, DataLoader(split.train, batch_size=16), torch.nn.functional.cross_entropy,
                                         optimizer, "cpu", 2, 0.1)
    assert len(returned) == 3 and top == max(float(r) for r in returned) > 0.1   # pre-clip: above max_norm
    assert names["train_one_epoch"](model, DataLoader(split.train, batch_size=16), torch.nn.functional.cross_entropy,
                                    optimizer, "cpu")[1] is None          # no clipping asked: no norm
