"""The cheat sheet (chapter 9): the course on two pages, every number and default computed, the code executed.

Each ``Section`` has an HTML body (JupyterLab, the printed page) and a plain-text body (nbval, GitHub).
Computed: the worked examples (``arithmetic.training_arithmetic``), the memory line (the chapter-4 meter),
the first checks (a fresh model's loss, one batch over-fitted), the DataLoader defaults (torch's own
signature), the scheduler cadences (chapter 7's gallery), the softmax floor. Executed: the evaluation loop,
the training-loop template and the save/resume lines (``ch09_cheatsheet_code``, checked against the course's loop
and an uninterrupted run). Typed, and checked by tests where a run can check them: the terms, the
descriptions, the bug signatures and the checklist. ``ch09_cheatsheet_page`` prints it.
"""
from __future__ import annotations

import html
import inspect
import re
from dataclasses import dataclass

import torch
from torch.utils.data import DataLoader

from course_utils.engine import loop
from course_utils.engine.arithmetic import training_arithmetic
from course_utils.engine.bugs import BUGS, STEP
from course_utils.chapters.ch09_cheatsheet_code import SAVE_RESUME, TEMPLATE, run_template  # noqa: F401 - re-exported
from course_utils.chapters.ch04_evaluation import memory_budget
from course_utils.chapters.ch07_loop_tables import double_softmax_floor, initial_loss_check
from course_utils.engine.memory import GraphMemoryMeter
from course_utils.engine.models import MLP
from course_utils.chapters.ch05_museum import ONE_LINE
from course_utils.infra.notebook import sig

EXAMPLE = (50_000, 128, 3, 4, 2)  # N, B, E, K, W of the worked example (not the final quiz's numbers)
CELL = "text-align:left;vertical-align:top;padding:2px 6px;overflow-wrap:anywhere"


@dataclass(frozen=True)
class Section:
    """One block of the cheat sheet: a title, an HTML body and a plain-text body."""

    title: str
    body_html: str
    body_text: str

    def _repr_html_(self) -> str:
        return f"<div class='cs-section'><h3>{html.escape(self.title)}</h3>{self.body_html}</div>"

    def __repr__(self) -> str:
        return f"{self.title}\n{self.body_text}"

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(repr(self))


def _inline(text: str) -> str:
    """Escape text for HTML, showing `code` spans as <code> and *emphasis* (a heading's markdown) as <em>."""
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))
    return re.sub(r"(?<![\w*])\*([^*\s][^*]*?)\*(?![\w*])", r"<em>\1</em>", text)


def _table(rows, header, widths=None) -> tuple[str, str]:
    """(HTML, text) of a table: left-aligned, wrapping cells, fixed column widths (percent) when given."""
    cols = "".join(f"<col style='width:{w}%'>" for w in widths) if widths else ""
    head = "".join(f"<th style='{CELL}'>{html.escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td style='{CELL}'>{c}</td>" for c in row) + "</tr>" for row in rows)
    plain = [" | ".join(str(h) for h in header)] + [
        " | ".join(html.unescape(re.sub("<[^>]+>", "", str(c))) for c in row) for row in rows]
    layout = "table-layout:fixed;" if widths else ""
    return (f"<table style='{layout}width:100%;border-collapse:collapse'><colgroup>{cols}</colgroup>"
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>", "\n".join(plain))


def _code(source: str) -> str:
    return f"<pre style='white-space:pre;overflow-x:auto'>{html.escape(source.strip())}</pre>"


# --- terms and formulas -----------------------------------------------------------------------------

TERMS = (
    ("micro-step", "forward + backward on one batch (code often says step)"),
    ("update", "optimizer.step(): every K micro-steps, + the flush"),
    ("iteration", "one batch from the DataLoader: one micro-step"),
    ("epoch", "one pass over the data (each rank's shard in DDP)"),
    ("effective batch", "examples per update: B·K, or B·K·W on W ranks"),
    ("cadence", "when a scheduler steps: update, epoch or validation"),
)


def terms() -> Section:
    """The words the sheet uses: micro-step versus update (chapter 0's central point)."""
    table_html, table_text = _table([(f"<b>{html.escape(t)}</b>", html.escape(m)) for t, m in TERMS],
                                    ("term", "meaning"), (24, 76))
    return Section("Terms", table_html, table_text)


def spiral_memory(batch_size: int = 64, optimizer: str = "adam") -> dict[str, int]:
    """The memory formula for the course's MLP: weights, grads, optimizer state (computed) + activations (measured)."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = MLP()
    params = sum(p.numel() for p in model.parameters())
    budget = memory_budget(params, 4, optimizer)
    meter = GraphMemoryMeter()
    x, y = torch.randn(batch_size, 2), torch.zeros(batch_size, dtype=torch.long)
    with meter:
        loss = torch.nn.functional.cross_entropy(model(x), y)
    activations = meter.peak
    loss.backward()
    return {"params": params, "weights": budget.weights, "grads": budget.grads,
            "optimizer_state": budget.optimizer_state, "activations": activations,
            "total": budget.weights + budget.grads + budget.optimizer_state + activations}


def formulas(n: int = EXAMPLE[0], b: int = EXAMPLE[1], e: int = EXAMPLE[2], k: int = EXAMPLE[3],
             w: int = EXAMPLE[4]) -> Section:
    """The counting formulas and update rules, each worked for N, B, E, K, W (chapters 0, 3, 9)."""
    a = training_arithmetic(n, b, e, k)
    dropped = training_arithmetic(n, b, e, k, drop_last=True)
    ranks = training_arithmetic(n, b, e, k, world_size=w)
    mem = spiral_memory(b)
    rows = [
        ("iterations per epoch", "ceil(N / B)", f"ceil({n:,} / {b}) = {a.iters_per_epoch:,}"),
        ("… with drop_last=True", "floor(N / B)", f"floor({n:,} / {b}) = {dropped.iters_per_epoch:,}"),
        ("micro-steps in all", "E · iterations", f"{e} · {a.iters_per_epoch:,} = {a.total_micro_steps:,}"),
        ("updates per epoch (with the flush)", "ceil(iterations / K); = ceil(N / (B·K)) without drop_last",
         f"ceil({a.iters_per_epoch:,} / {k}) = {a.updates_per_epoch:,} (without the flush: {a.naive_updates_per_epoch:,})"),
        ("updates in all", "E · updates per epoch", f"{e} · {a.updates_per_epoch:,} = {a.total_weight_updates:,}"),
        ("effective batch", "B · K", f"{b} · {k} = {a.effective_batch_size:,}"),
        (f"W ranks (DDP), here W={w}: iterations per rank", "ceil(ceil(N / W) / B)",
         f"ceil({ranks.samples_per_rank:,} / {b}) = {ranks.iters_per_epoch:,}"),
        ("… effective batch, updates in all", "B · K · W;  E · ceil(iterations per rank / K)",
         f"{ranks.effective_batch_size:,};  {ranks.total_weight_updates:,}"),
        ("SGD (momentum μ)", "v ← μ·v + g;  w ← w − lr · v", "μ = 0: w moves by −lr · g"),
        ("Adam (step t)", "m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²;  w ← w − lr · m̂ / (√v̂ + ε), "
         "m̂ = m / (1−β1^t), v̂ = v / (1−β2^t)", "β1 0.9, β2 0.999, ε 1e-8; step 1 moves each weight by "
         "about lr"),
        ("AdamW (decay λ)", "Adam's step, plus w ← w − lr · λ · w (decoupled, not added to g)",
         "torch's λ: 0.01 for AdamW; Adam's weight_decay adds λ·w to g instead"),
        ("training memory", "at most weights + grads + optimizer state + activations",
         f"spiral MLP, Adam, B={b}: {mem['weights']:,} + {mem['grads']:,} + {mem['optimizer_state']:,} + "
         f"{mem['activations']:,} (measured) = {mem['total']:,} B"),
    ]
    table_html, table_text = _table([(html.escape(r[0]), f"<code>{html.escape(r[1])}</code>", html.escape(r[2]))
                                     for r in rows], ("quantity", "formula", f"N={n:,}, B={b}, E={e}, K={k}, W={w}"),
                                    (26, 44, 30))
    return Section("Formulas, worked by the course's calculator", table_html, table_text)


def _below(value: float) -> str:
    """A small loss as a bound that holds on any machine ("< 0.01"), else its value."""
    for bound in (0.001, 0.01, 0.1):
        if value < bound:
            return f"< {bound:g}"
    return f"{sig(value, 2)}"


def first_checks(seed: int = 0) -> Section:
    """Before a long run: the first loss against log C, and one batch over-fitted (both computed here)."""
    fresh, log_c = initial_loss_check(classes=3, seed=seed)
    from course_utils.engine.data import make_spiral

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # 16 examples: one thread is faster, and the same everywhere
    try:
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            model = MLP()
            x, y = make_spiral(16, seed=seed).tensors
            optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
            for _ in range(200):
                optimizer.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
    finally:
        torch.set_num_threads(threads)
    floor = double_softmax_floor()[1]
    rows = [("first loss ≈ log C", f"fresh spiral MLP: {fresh:.2f}, log 3 = {log_c:.2f}",
             "far above: init scale, unnormalised inputs (not the labels; a softmax too many also starts at log C)"),
            ("over-fit one batch", f"16 examples, Adam, 200 steps: loss {_below(loss.item())}",
             "stays high: a bug in the loop"),
            ("loss floor", f"softmax before cross_entropy, 3 classes: ≥ {sig(floor, 3)}",
             "cross_entropy takes logits")]
    table_html, table_text = _table([tuple(html.escape(c) for c in r) for r in rows],
                                    ("check", "computed here", "if not"), (22, 42, 36))
    return Section("First checks", table_html, table_text)


# --- the operations, the code ---------------------------------------------------------------------

CALLS = {"zero_grad": "optimizer.zero_grad()", "forward": "logits = model(x)",
         "compute_loss": "loss = loss_fn(logits, y)", "backward": "loss.backward()",
         "clip": "clip_grad_norm_(params, max_norm)", "optimizer_step": "optimizer.step()",
         "scheduler_step": "scheduler.step()"}
SAID = {"zero_grad": "Set the optimizer's parameters' .grad to None (others keep theirs)."}


def operations() -> Section:
    """The step's operations in the loop's order (bugs.STEP), each with its call and what it does."""
    rows = []
    for i, name in enumerate(STEP, 1):
        doc = inspect.getdoc(getattr(loop, name)).splitlines()[0]
        doc = SAID.get(name) or re.sub(r"\s*\((chapters? [\d, -]+)\)", "", doc).split(";")[0].rstrip(".") + "."
        rows.append((str(i), f"<code>{html.escape(CALLS[name])}</code>", html.escape(doc)))
    table_html, table_text = _table(rows, ("#", "call", "what it does"), (5, 44, 51))
    note = ("With accumulation: 1 once per window, 2-4 for each micro-batch, 5-7 once per update. Once per epoch: "
            "evaluate, then step an epoch scheduler.")
    return Section("One training step, in order", table_html + f"<p>{html.escape(note)}</p>",
                   table_text + "\n" + note)


def evaluation_loop() -> Section:
    """The evaluation loop: the template's `evaluate`, shown on its own."""
    source = TEMPLATE.split("\n\ndef windows")[0]
    return Section("The evaluation loop", _code(source), source.strip())


def template() -> Section:
    """The training-loop template (the code `run_template` executes)."""
    source = "def windows" + TEMPLATE.split("\n\ndef windows")[1]
    return Section("The training-loop template", _code(source), source.strip())


def save_resume() -> Section:
    """The lines that save a resumable checkpoint and load it safely (executed by the tests)."""
    shown = SAVE_RESUME.strip().split("\n\n", 1)[1]      # the set-up lines are the template's: only save and resume
    note = "Set up as in the template, the loader shuffled by a seeded generator `order`; then:"
    return Section("Save and resume", f"<p>{_inline(note)}</p>{_code(shown)}", f"{note}\n{shown}")


# --- bugs, schedulers, DataLoader, checklist -------------------------------------------------------

SIGNS = {  # what you see, for the registry's bugs that chapter 5's quick reference does not list
    "scheduler_before_optimizer": "torch warns once; each update uses the next update's LR",
    "softmax_before_cross_entropy": "the loss cannot go below a floor ({floor} for 3 classes); training crawls",
    "update_schedule_per_epoch": "the lr stays near its starting value: warmup never ends, no annealing",
}
FIXES = {"accumulation_without_flush": "Also step after an epoch's last micro-batch: `(i + 1) % K == 0 or i + 1 == len(loader)`.",
         "unscaled_accumulation": "Weight each micro-batch's mean loss by n_i / n_window, its share of the window's "
                                  "examples (1/K only for equal batches)."}


def signature(name: str) -> str:
    """What a learner sees first when bug `name` is in the loop (chapter 5's quick reference, else SIGNS)."""
    if ONE_LINE.get(name):
        return ONE_LINE[name]
    return SIGNS[name].format(floor=sig(double_softmax_floor()[1], 2))


def bug_section() -> Section:
    """The bug table from the registry: the bug, what you see, the fix."""
    rows = [(f"<b>{html.escape(b.title)}</b>", _inline(signature(name)), _inline(FIXES.get(name, b.fix)))
            for name, b in BUGS.items()]
    table_html, table_text = _table(rows, ("bug", "what you see", "fix"), (24, 38, 38))
    return Section(f"The bugs ({len(rows)}, from the course's registry)", table_html, table_text)


def scheduler_section() -> Section:
    """Each scheduler's cadence and call, from chapter 7's gallery."""
    from course_utils.chapters.ch07_scheduler_gallery import GALLERY

    when = {"epoch": "per epoch", "update": "per update",
            "metric": "per validation"}
    rows = [(f"{html.escape(e.name)} ({when[e.cadence]})", f"<code>{html.escape(e.call.split('  #')[0])}</code>")
            for e in GALLERY]
    table_html, table_text = _table(rows, ("scheduler (cadence)", "call"), (58, 42))
    return Section("Scheduler cadences (sized in that unit)", table_html, table_text)


DATALOADER_ARGS = {  # argument: (what it does, when to change it)
    "batch_size": ("examples per batch", "memory and speed; scale the LR with it"),
    "shuffle": ("when True: a new order every epoch (None, False: none)", "True for training, False for evaluation"),
    "sampler": ("your own order of indices (not with shuffle)", "class balance, DDP: DistributedSampler"),
    "num_workers": ("processes loading batches (0: the main process)", "data loading is the bottleneck"),
    "collate_fn": ("merges examples into a batch", "variable lengths: pad and mask"),
    "pin_memory": ("page-locked host memory", "GPU training: faster copies, non_blocking"),
    "drop_last": ("skip the last short batch", "BatchNorm on tiny last batches; fixed shapes"),
    "worker_init_fn": ("runs in each worker at start", "other libraries, a generator your dataset holds (torch "
                                                        "seeds random, NumPy, torch)"),
    "generator": ("the RNG of shuffling and worker seeds", "always, seeded: order and epochs reproducible"),
    "prefetch_factor": ("batches each worker loads ahead", "workers starve the GPU"),
    "persistent_workers": ("keep workers between epochs", "worker start-up is slow"),
}
RARE = ("batch_sampler", "timeout", "multiprocessing_context", "pin_memory_device", "in_order")


def dataloader_arguments() -> list[tuple[str, str, str, str]]:
    """(argument, default as torch's signature gives it, what it does, when to change it) for the common ones."""
    params = inspect.signature(DataLoader.__init__).parameters
    return [(name, "required" if params[name].default is inspect.Parameter.empty else repr(params[name].default),
             *DATALOADER_ARGS[name]) for name in params if name in DATALOADER_ARGS]


def dataloader_section() -> Section:
    params = inspect.signature(DataLoader.__init__).parameters
    rows = [(f"<code>{html.escape(n)}={html.escape(d)}</code>", html.escape(m), html.escape(w))
            for n, d, m, w in dataloader_arguments()]
    table_html, table_text = _table(rows, ("argument=default", "what it does", "change it when"), (26, 34, 40))
    rare = [name for name in params if name not in DATALOADER_ARGS and name not in ("self", "dataset")]
    note = "Rarely set: " + ", ".join(rare) + "."
    if "pin_memory_device" in rare:
        note += " pin_memory_device is deprecated (the current accelerator is used)."
    return Section(f"DataLoader (defaults read from torch {torch.__version__.split('+')[0]})",
                   table_html + f"<p>{html.escape(note)}</p>", table_text + "\n" + note)


CHECKLIST = (
    "Seed torch, NumPy and random; a seeded generator on every DataLoader (worker_init_fn for other libraries "
    "and for a generator your dataset holds).",
    "Checkpoint all the next update needs (model, optimizer, scheduler, scaler, counters, best metric, RNG states, "
    "data position; NumPy's as lists); write atomically; load with weights_only=True.",
    "Keep the last k checkpoints and the best; delete old ones only once the new one is safe.",
    "Accumulation: weight each micro-batch by its share of the window's examples (of its real tokens, for a "
    "token loss over padded sequences); flush at the epoch's end.",
    "Mixed precision: autocast; fp16 needs GradScaler (unscale_ before clipping); bf16 needs neither.",
    "Clip after backward, before step; log the pre-clip norm; max_norm above its typical value.",
    "NaN/Inf guard: skip the update on the device (a fused optimizer's found_inf, as GradScaler does), so nothing "
    "waits for the GPU; stop after several in a row; say which steps at the next log point.",
    "Evaluate in eval() under no_grad(), restore the mode, average per example (per real token for a token "
    "loss); a metric like F1 or AUC from counts gathered over the whole set, not a mean of per-batch values.",
    "Early stopping: patience, min_delta, mode; deliver the best weights, not the last.",
    "Log floats to TensorBoard and a progress bar, read at log points: keep losses and norms on the device (a "
    "read, .item() or .tolist(), waits for the GPU; chapter 5 measures it).",
    "Step each scheduler at its cadence; ReduceLROnPlateau takes the validation loss.",
    "DDP: torchrun, DistributedSampler.set_epoch(epoch), no_sync() inside each accumulation window, the LR sized for "
    "B·K·W, save and log on rank 0.",
)


def checklist_section() -> Section:
    items = "".join(f"<li>{html.escape(c)}</li>" for c in CHECKLIST)
    return Section("Production checklist", f"<ol>{items}</ol>",
                   "\n".join(f"{i}. {c}" for i, c in enumerate(CHECKLIST, 1)))


def sections() -> list[Section]:
    """Every section of the cheat sheet, in the order it is printed."""
    return [terms(), formulas(), first_checks(), operations(), evaluation_loop(), template(), save_resume(),
            scheduler_section(), bug_section(), dataloader_section(), checklist_section()]


def widest_code_line() -> int:
    """The longest line of the sheet's code, in characters (the printed page must not wrap it)."""
    return max(len(line) for line in (TEMPLATE + SAVE_RESUME).splitlines())

