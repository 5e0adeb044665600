"""The cheat sheet (chapter 9): every section generated from the course's code, shown and printable.

Each ``Section`` has an HTML body (JupyterLab, the export) and a plain-text body (nbval, GitHub):
the formulas with a worked example from ``arithmetic.training_arithmetic``; the operations of a step
in the loop's own order (``bugs.STEP``, described by ``loop.py``'s docstrings); the evaluation loop
and the training-loop template (code that ``run_template`` executes and compares with the course's
loop); the bug table from the registry; the DataLoader's arguments with the defaults read from
torch's own signature; the production checklist. The printable page (HTML and PDF) is made from these
sections by ``course_utils/cheatsheet_page.py``.
"""
from __future__ import annotations

import html
import inspect
import re
from dataclasses import dataclass

import torch
from torch.utils.data import DataLoader

from course_utils import loop
from course_utils.arithmetic import training_arithmetic
from course_utils.bugs import BUGS, STEP
from course_utils.evaluation import memory_budget
from course_utils.memory import GraphMemoryMeter
from course_utils.models import MLP

EXAMPLE = (20_000, 64, 10, 4)     # N, B, E, K of the worked example (the final quiz's numbers)


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


def _table(rows, header) -> tuple[str, str]:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    plain = [" | ".join(str(h) for h in header)] + [
        " | ".join(html.unescape(re.sub("<[^>]+>", "", str(c))) for c in row) for row in rows]
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>", "\n".join(plain)


def _code(source: str) -> str:
    return f"<pre>{html.escape(source.strip())}</pre>"


# --- 1. formulas ---------------------------------------------------------------------------------

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


def formulas(n: int = EXAMPLE[0], b: int = EXAMPLE[1], e: int = EXAMPLE[2], k: int = EXAMPLE[3]) -> Section:
    """The counting formulas, each with its value for N, B, E, K (chapters 0, 9)."""
    a = training_arithmetic(n, b, e, k)
    dropped = training_arithmetic(n, b, e, k, drop_last=True)
    mem = spiral_memory(b)
    rows = [
        ("iterations per epoch", "ceil(N / B)", f"ceil({n:,} / {b}) = {a.iters_per_epoch:,}"),
        ("… with drop_last=True", "floor(N / B)", f"floor({n:,} / {b}) = {dropped.iters_per_epoch:,}"),
        ("micro-steps in all", "E · iterations", f"{e} · {a.iters_per_epoch:,} = {a.total_micro_steps:,}"),
        ("effective batch", "B · K", f"{b} · {k} = {a.effective_batch_size:,}"),
        ("updates per epoch (with the flush)", "ceil(iterations / K)",
         f"ceil({a.iters_per_epoch:,} / {k}) = {a.updates_per_epoch:,} (naive loop: {a.naive_updates_per_epoch:,})"),
        ("updates in all", "E · updates per epoch", f"{e} · {a.updates_per_epoch} = {a.total_weight_updates:,}"),
        ("SGD update", "w ← w − lr · ∂L/∂w", "e.g. lr 0.1, gradient 0.5: w moves by −0.05"),
        ("training memory", "weights + grads + optimizer state + activations",
         f"spiral MLP, Adam, B={b}: {mem['weights']:,} + {mem['grads']:,} + {mem['optimizer_state']:,} + "
         f"{mem['activations']:,} (measured) = {mem['total']:,} B"),
    ]
    table_html, table_text = _table([(html.escape(r[0]), f"<code>{html.escape(r[1])}</code>", html.escape(r[2]))
                                     for r in rows], ("quantity", "formula", f"N={n:,}, B={b}, E={e}, K={k}"))
    return Section("Formulas (worked example computed by the course's calculator)", table_html, table_text)


# --- 2. the operations of one step, in order -------------------------------------------------------

CALLS = {"zero_grad": "optimizer.zero_grad()", "forward": "logits = model(x)",
         "compute_loss": "loss = loss_fn(logits, y)", "backward": "loss.backward()",
         "clip": "clip_grad_norm_(model.parameters(), max_norm)", "optimizer_step": "optimizer.step()",
         "scheduler_step": "scheduler.step()"}


def operations() -> Section:
    """The step's operations in the loop's order (bugs.STEP), each with its call and what it does."""
    rows = []
    for i, name in enumerate(STEP, 1):
        doc = inspect.getdoc(getattr(loop, name)).splitlines()[0]
        doc = re.sub(r"\s*\((chapters? [\d, -]+)\)", "", doc).split(";")[0].rstrip(".") + "."
        rows.append((str(i), f"<code>{html.escape(CALLS[name])}</code>", html.escape(doc)))
    table_html, table_text = _table(rows, ("#", "call", "what it does"))
    note = "Then, once per epoch: evaluate (next section) and step an epoch-based scheduler."
    return Section("The operations of one training step, in order", table_html + f"<p>{note}</p>",
                   table_text + "\n" + note)


# --- 3-4. the evaluation loop and the training-loop template -----------------------------------------

TEMPLATE = '''
import torch

@torch.no_grad()                                   # no graph, no saved activations
def evaluate(model, loader, loss_fn):
    model.eval()                                   # dropout off, BatchNorm uses running stats
    total, correct, seen = 0.0, 0, 0
    for x, y in loader:
        logits = model(x)
        total += loss_fn(logits, y).item() * len(y)   # weight each batch by its size
        correct += (logits.argmax(dim=1) == y).sum().item()
        seen += len(y)
    return total / seen, correct / seen

def train_one_epoch(model, loader, loss_fn, optimizer, accum_steps=1, max_norm=None, scheduler=None):
    model.train()                                  # back to train mode after evaluate()
    B, n = loader.batch_size, len(loader.sampler)
    sizes = [min(B, n - s) for s in range(0, n, B)][:len(loader)]
    total, seen = 0.0, 0
    for i, (x, y) in enumerate(loader):
        first = i - i % accum_steps                # this micro-batch's accumulation window
        window = sizes[first:first + accum_steps]
        if i == first:
            optimizer.zero_grad()                  # 1 clear the gradients
        logits = model(x)                          # 2 forward
        loss = loss_fn(logits, y)                  # 3 loss: the batch mean
        (loss * (len(y) / sum(window))).backward() # 4 backward, weighted by examples
        if i == first + len(window) - 1:           # window full, or the epoch's last batch
            if max_norm is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)  # 5
            optimizer.step()                       # 6 update
            if scheduler is not None:
                scheduler.step()                   # 7 a per-update schedule
        total += loss.item() * len(y)              # log a float, never the tensor
        seen += len(y)
    return total / seen

def fit(model, train_loader, val_loader, loss_fn, optimizer, epochs, accum_steps=1):
    history = []
    for epoch in range(epochs):
        train_loss = train_one_epoch(model, train_loader, loss_fn, optimizer, accum_steps)
        history.append((train_loss, *evaluate(model, val_loader, loss_fn)))
    return history
'''


def evaluation_loop() -> Section:
    """The evaluation loop: the template's `evaluate`, shown on its own."""
    source = TEMPLATE.split("\n\ndef train_one_epoch")[0]
    return Section("The evaluation loop", _code(source), source.strip())


def template() -> Section:
    """The training-loop template (the code `run_template` executes)."""
    source = TEMPLATE.split("\n\ndef train_one_epoch")[1]
    source = "def train_one_epoch" + source
    return Section("The training-loop template", _code(source), source.strip())


@dataclass(frozen=True)
class TemplateCheck:
    """The template's history against the course's loop on the same config and seed."""

    template_history: list[tuple[float, float, float]]
    course_history: list[tuple[float, float, float]]
    same_weights: bool

    @property
    def identical(self) -> bool:
        return self.template_history == self.course_history and self.same_weights


def run_template(config=None) -> TemplateCheck:
    """Execute TEMPLATE on a fresh build of `config` and compare with the course's loop (chapter 9)."""
    from course_utils.session import Session, TrainConfig, build

    config = config or TrainConfig(n_train=600, batch_size=64, accum_steps=3, epochs=3, optimizer="adam",
                                   lr=0.01, measure_memory=False)
    namespace: dict = {"torch": torch}
    exec(compile(TEMPLATE, "<cheat sheet template>", "exec"), namespace)
    state = build(config)
    history = namespace["fit"](state.model, state.train_loader, state.val_loader, state.loss_fn, state.optimizer,
                               config.epochs, config.accum_steps)
    course = Session(config)
    course.run_to_end()
    course_history = [(e.train_loss, e.val_loss, e.val_acc) for e in course.epochs]
    same = all(torch.equal(p, q) for p, q in zip(state.model.parameters(), course.model.parameters()))
    return TemplateCheck(history, course_history, same)


# --- 5. bugs, 6. DataLoader, 7. checklist ----------------------------------------------------------

def _first_sentence(text: str) -> str:
    """Up to the first '. ' or ': ' outside `code`."""
    for match in re.finditer(r"(?<=[.:])\s", text):
        if text[:match.start()].count("`") % 2 == 0:
            return text[:match.start()].rstrip(":.") + "."
    return text


def bug_section() -> Section:
    """The bug table from the registry: name, operation, first sentence of the symptom, the fix."""
    rows = [(f"<b>{html.escape(b.title)}</b>", html.escape(b.operation), html.escape(_first_sentence(b.symptom)),
             html.escape(b.fix)) for b in BUGS.values()]
    table_html, table_text = _table(rows, ("bug", "operation", "what you see", "fix"))
    return Section(f"The bugs ({len(rows)}, from the course's registry)", table_html, table_text)


DATALOADER_ARGS = {
    "dataset": "what to load: a map-style Dataset (len + getitem) or an IterableDataset",
    "batch_size": "examples per batch (None: no batching)",
    "shuffle": "reshuffle every epoch (True for training, False for evaluation)",
    "sampler": "your own order of indices (excludes shuffle)",
    "batch_sampler": "yields whole lists of indices (excludes batch_size, shuffle, sampler, drop_last)",
    "num_workers": "worker processes loading batches (0: the main process)",
    "collate_fn": "merges examples into a batch (e.g. padding sequences)",
    "pin_memory": "page-locked host memory: faster, asynchronous copies to a GPU",
    "drop_last": "skip the last incomplete batch",
    "timeout": "seconds to wait for a worker's batch (0: forever)",
    "worker_init_fn": "runs in each worker at start (seed NumPy / random there)",
    "multiprocessing_context": "how workers start: fork, spawn or forkserver",
    "generator": "the RNG of shuffling and sampling: seed it to reproduce the order",
    "prefetch_factor": "batches each worker loads ahead (None: 2 when num_workers > 0)",
    "persistent_workers": "keep workers alive between epochs (saves their start-up cost)",
    "pin_memory_device": "the device to pin memory for ('': the current accelerator)",
    "in_order": "return batches in order even if a later worker is faster",
}


def dataloader_arguments() -> list[tuple[str, str, str]]:
    """(argument, default as torch's signature gives it, meaning) for every DataLoader argument."""
    rows = []
    for name, parameter in inspect.signature(DataLoader.__init__).parameters.items():
        if name == "self":
            continue
        default = "required" if parameter.default is inspect.Parameter.empty else repr(parameter.default)
        rows.append((name, default, DATALOADER_ARGS.get(name, "(new in this torch: see its docs)")))
    return rows


def dataloader_section() -> Section:
    rows = [(f"<code>{html.escape(n)}</code>", f"<code>{html.escape(d)}</code>", html.escape(m))
            for n, d, m in dataloader_arguments()]
    table_html, table_text = _table(rows, ("argument", "default", "what it does"))
    return Section(f"DataLoader arguments (defaults read from torch {torch.__version__.split('+')[0]})",
                   table_html, table_text)


CHECKLIST = (
    "Seed torch, NumPy and random; give the DataLoader a seeded generator (and worker_init_fn with workers).",
    "Checkpoint everything: model, optimizer, scheduler, scaler, epoch, step, best metric, RNG states, data "
    "position; write atomically (temp file, fsync, os.replace); load with torch.load(weights_only=True).",
    "Keep the last k checkpoints and the best one; delete old ones only after the new one is safe.",
    "Accumulation: weight each micro-batch's loss by its share of the window; step at the epoch's end too.",
    "Mixed precision: autocast; fp16 needs GradScaler and unscale_ before clipping; bf16 needs neither.",
    "Clip after backward, before step; log the pre-clip gradient norm.",
    "Guard against NaN/Inf loss: skip or stop, and say which step.",
    "Evaluate in model.eval() under torch.no_grad(); switch back with model.train().",
    "Early stopping on a validation metric: patience, min_delta, mode; stop on a non-finite value.",
    "Log losses as floats (loss.item()), to TensorBoard and a progress bar.",
    "Step per-epoch schedulers once per epoch, per-update ones (OneCycleLR, warmup) after each update; "
    "ReduceLROnPlateau takes the validation loss.",
    "Several GPUs: torchrun + DistributedDataParallel, DistributedSampler.set_epoch(epoch), log and save on rank 0.",
)


def checklist_section() -> Section:
    items = "".join(f"<li>{html.escape(c)}</li>" for c in CHECKLIST)
    return Section("Production checklist", f"<ol>{items}</ol>",
                   "\n".join(f"{i}. {c}" for i, c in enumerate(CHECKLIST, 1)))


def sections() -> list[Section]:
    """Every section of the cheat sheet, in the order it is printed."""
    return [formulas(), operations(), evaluation_loop(), template(), bug_section(), dataloader_section(),
            checklist_section()]
