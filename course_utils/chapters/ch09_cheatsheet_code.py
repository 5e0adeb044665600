"""The cheat sheet's code (chapter 9): the evaluation loop, the training-loop template and the save/resume lines.

Each is one string, shown on the sheet exactly as the tests execute it: ``run_template`` trains with the
template and with the course's own loop from the same seed (the histories and weights must be identical),
``run_save_resume`` saves with the sheet's lines, resumes in fresh objects and compares with a run that
never stopped.
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass

import torch

TEMPLATE = '''
import torch

@torch.no_grad()              # no graph, no activations
def evaluate(model, loader, loss_fn, device):
    """Mean loss, accuracy per example; keeps the modes."""
    modes = [(m, m.training) for m in model.modules()]
    model.eval()              # dropout off, BN frozen
    losses, hits, sizes = [], [], []  # on the device
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        logits = model(x)
        losses.append(loss_fn(logits, y))  # batch mean
        hits.append((logits.argmax(1) == y).sum())
        sizes.append(len(y))
    for m, training in modes:  # each layer as it was:
        m.training = training  # a frozen BN stays frozen
    losses = torch.stack(losses).tolist()  # read once
    hits, seen = torch.stack(hits).tolist(), sum(sizes)
    total = sum(m * n for m, n in zip(losses, sizes))
    return total / seen, sum(hits) / seen  # per example

def windows(loader, k):
    """Batches k at a time; the last window can be short."""
    window = []
    for batch in loader:
        window.append(batch)
        if len(window) == k:
            yield window
            window = []
    if window:
        yield window          # the flush: no batch lost

def train_one_epoch(model, loader, loss_fn, optimizer,
                    device, accum_steps=1, max_norm=None,
                    scheduler=None):
    """One update per window; (mean loss, top grad norm)."""
    model.train()  # all layers; re-freeze frozen BN after
    losses, sizes, norms = [], [], []  # kept on device:
    for window in windows(loader, accum_steps):  # no wait
        n = sum(len(y) for _, y in window)  # examples
        optimizer.zero_grad()        # 1 clear
        for x, y in window:
            x, y = x.to(device), y.to(device)
            loss = loss_fn(model(x), y)  # 2, 3
            (loss * (len(y) / n)).backward()  # 4 backward
            losses.append(loss.detach())  # not .item()
            sizes.append(len(y))
        if max_norm is not None:  # 5 clip; it returns
            norms.append(torch.nn.utils.clip_grad_norm_(
                model.parameters(), max_norm))  # the norm
        optimizer.step()             # 6 update
        if scheduler is not None:  # 7 per update:
            scheduler.step()       #   OneCycle, warmup
    losses = torch.stack(losses).tolist()  # read once
    total = sum(m * n for m, n in zip(losses, sizes))
    top = torch.stack(norms).max().item() if norms else None
    return total / sum(sizes), top  # pre-clip, largest

def fit(model, train_loader, val_loader, loss_fn,
        optimizer, epochs, device="cpu", accum_steps=1,
        max_norm=None, scheduler=None,
        epoch_scheduler=None):
    """[(train_loss, val_loss, val_acc, top_norm)]."""
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau
    history = []
    for epoch in range(epochs):
        train_loss, top_norm = train_one_epoch(
            model, train_loader, loss_fn, optimizer,
            device, accum_steps, max_norm, scheduler)
        val_loss, val_acc = evaluate(
            model, val_loader, loss_fn, device)
        if isinstance(epoch_scheduler, plateau):
            epoch_scheduler.step(val_loss)  # the metric
        elif epoch_scheduler is not None:
            epoch_scheduler.step()  # StepLR, cosine...
        history.append((train_loss, val_loss, val_acc,
                        top_norm))  # log them here
    return history
'''

SAVE_RESUME = '''
# set up: device and dtype first, then the optimizer
device = torch.device("cuda" if torch.cuda.is_available()
                      else "cpu")
model = make_model().to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(
    optimizer, T_max=epochs)
order = torch.Generator().manual_seed(0)  # shuffle's RNG
loader = DataLoader(train_set, batch_size=64,
                    shuffle=True, generator=order)

# save after epoch `epoch`: all the next update needs
state = {"model": model.state_dict(),
         "optimizer": optimizer.state_dict(),
         "scheduler": scheduler.state_dict(),
         "epoch": epoch, "order": order.get_state(),
         "rng": torch.get_rng_state()}  # + NumPy as lists
with open(path + ".tmp", "wb") as f:  # tensors, plain
    torch.save(state, f); f.flush(); os.fsync(f.fileno())
os.replace(path + ".tmp", path)   # never half a file

# resume: set up as above, then load the state back
state = torch.load(path, weights_only=True)  # safe
model.load_state_dict(state["model"])
optimizer.load_state_dict(state["optimizer"])
scheduler.load_state_dict(state["scheduler"])
torch.set_rng_state(state["rng"])
order.set_state(state["order"])
start_epoch = state["epoch"] + 1
'''


def _part(heading: str) -> str:
    """One part of SAVE_RESUME: from the comment starting with `heading` to the next blank line."""
    text = SAVE_RESUME.strip() + "\n\n"
    start = text.index(f"# {heading}")
    return text[start:text.index("\n\n", start)]


@dataclass(frozen=True)
class TemplateCheck:
    """The template's history against the course's loop on the same config and seed."""

    template_history: list[tuple[float, float, float]]
    course_history: list[tuple[float, float, float]]
    same_weights: bool
    top_norms: list[float | None] = ()      # the template's largest pre-clip gradient norm per epoch

    @property
    def identical(self) -> bool:
        return self.template_history == self.course_history and self.same_weights


def template_namespace(source: str | None = None) -> dict:
    """Execute the template (or `source`) and return its names: evaluate, windows, train_one_epoch, fit."""
    namespace: dict = {"torch": torch}
    exec(compile(source if source is not None else TEMPLATE, "<cheat sheet template>", "exec"), namespace)  # noqa: S102
    return namespace


def run_template(config=None, source: str | None = None) -> TemplateCheck:
    """Train with the template and with the course's loop (chapter 5's Session) on `config`; compare (chapter 9)."""
    from course_utils.engine.session import Session, TrainConfig, build

    config = config or TrainConfig(n_train=600, batch_size=64, accum_steps=3, epochs=3, optimizer="adam",
                                   lr=0.01, measure_memory=False)
    fit = template_namespace(source)["fit"]
    state = build(config)
    per_update = state.scheduler if state.cadence == "update" else None
    per_epoch = state.scheduler if state.cadence == "epoch" else None
    history = fit(state.model, state.train_loader, state.val_loader, state.loss_fn, state.optimizer,
                  config.epochs, "cpu", config.accum_steps, config.clip_norm, per_update, per_epoch)
    course = Session(config)
    course.run_to_end()
    course_history = [(e.train_loss, e.val_loss, e.val_acc) for e in course.epochs]
    same = all(torch.equal(p, q) for p, q in zip(state.model.parameters(), course.model.parameters()))
    return TemplateCheck([h[:3] for h in history], course_history, same, [h[3] for h in history])


def run_save_resume(epochs: int = 4, stop_after: int = 1) -> tuple[bool, bool]:
    """(weights identical, LR identical): the sheet's save/resume lines against a run that never stopped."""
    from torch.utils.data import DataLoader

    from course_utils.engine.data import spiral_splits
    from course_utils.engine.models import MLP

    split = spiral_splits(256, 64, seed=0)
    names = template_namespace()

    def setup(global_seed: int) -> dict:
        torch.manual_seed(global_seed)  # whatever happened before: the resume must not depend on it
        scope = {"torch": torch, "DataLoader": DataLoader, "os": os, "epochs": epochs, "train_set": split.train,
                 "make_model": lambda: MLP(hidden=32, dropout=0.2)}
        exec(_part("set up"), scope)  # noqa: S102 - the sheet's own lines
        return scope

    def train(scope: dict, first: int, last: int) -> None:
        for epoch in range(first, last):
            names["train_one_epoch"](scope["model"], scope["loader"], torch.nn.functional.cross_entropy,
                                     scope["optimizer"], scope["device"])
            scope["scheduler"].step()
            scope["epoch"] = epoch

    with torch.random.fork_rng():
        whole = setup(0)
        train(whole, 0, epochs)
        cut = setup(0)
        train(cut, 0, stop_after + 1)
        with tempfile.TemporaryDirectory() as folder:
            cut["path"] = os.path.join(folder, "checkpoint.pt")
            exec(_part("save"), cut)  # noqa: S102
            resumed = setup(12345)
            resumed["path"] = cut["path"]
            exec(_part("resume"), resumed)  # noqa: S102
            train(resumed, resumed["start_epoch"], epochs)
    same = all(torch.equal(p, q) for p, q in zip(whole["model"].parameters(), resumed["model"].parameters()))
    return same, whole["optimizer"].param_groups[0]["lr"] == resumed["optimizer"].param_groups[0]["lr"]
