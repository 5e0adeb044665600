"""Correct training loops, written the way learners write them (the seeds' loops among them, in our words).

Every loop here must get zero findings from the doctor. Each takes the Setup its case builds.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F
from torch.optim import lr_scheduler

from tests.doctor_corpus.setups import Setup, share


def _evaluate(model, loader, loss_fn):
    """Seed 000's evaluation: eval mode, no graph, per-example averages, back to train mode."""
    model.eval()
    total, hits, seen = 0.0, 0, 0
    with torch.no_grad():
        for xb, yb in loader:
            out = model(xb)
            total += loss_fn(out, yb).item() * len(yb)
            hits += (out.argmax(dim=1) == yb).sum().item()
            seen += len(yb)
    model.train()
    return total / seen, hits / seen


def seed_template(s: Setup) -> None:
    """Seed 000's template: train() once, six operations per batch, StepLR(100) stepped every batch."""
    model, opt, sched = s.model, s.optimizer, s.scheduler
    model.train()
    for epoch in range(s.epochs):
        for xb, yb in s.train_loader:
            opt.zero_grad()
            out = model(xb)
            loss = s.loss_fn(out, yb)
            loss.backward()
            opt.step()
            sched.step()
        val_loss, val_acc = _evaluate(model, s.val_loader, s.loss_fn)


def _train_one_epoch(model, loader, opt, loss_fn):
    model.train()
    running, batches = 0.0, 0
    for xb, yb in loader:
        opt.zero_grad()
        logits = model(xb)
        loss = loss_fn(logits, yb)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        opt.step()
        running += loss.item()
        batches += 1
    return running / batches


@torch.no_grad()
def _validate(model, loader, loss_fn):
    model.eval()
    losses, preds, targets = 0.0, [], []
    for xb, yb in loader:
        logits = model(xb)
        losses += loss_fn(logits, yb).item()
        preds.append(logits.argmax(dim=1))
        targets.append(yb)
    return losses / len(loader), (torch.cat(preds) == torch.cat(targets)).float().mean().item()


def seed_clip_cosine(s: Setup) -> None:
    """Seed 001: helper functions, clipping after backward, CosineAnnealingLR(T_max=epochs) after each epoch."""
    for epoch in range(s.epochs):
        train_loss = _train_one_epoch(s.model, s.train_loader, s.optimizer, s.loss_fn)
        val_loss, acc = _validate(s.model, s.val_loader, s.loss_fn)
        s.scheduler.step()


def seed_onecycle(s: Setup) -> None:
    """Seed 001: OneCycleLR is a per-update schedule, stepped after every optimizer.step()."""
    for epoch in range(s.epochs):
        s.model.train()
        for xb, yb in s.train_loader:
            s.optimizer.zero_grad()
            loss = s.loss_fn(s.model(xb), yb)
            loss.backward()
            s.optimizer.step()
            s.scheduler.step()


def seed_plateau(s: Setup) -> None:
    """Seed 001: ReduceLROnPlateau stepped once per epoch with the validation loss."""
    for epoch in range(s.epochs):
        _train_one_epoch(s.model, s.train_loader, s.optimizer, s.loss_fn)
        val_loss, _ = _validate(s.model, s.val_loader, s.loss_fn)
        s.scheduler.step(val_loss)


def accumulation_with_flush(s: Setup, accum_steps: int = 4, by_k: bool = False) -> None:
    """Seed 000's accumulation, plus the end-of-epoch flush; zero_grad after the step."""
    n = len(s.train_loader)
    s.model.train()
    for epoch in range(s.epochs):
        for i, (xb, yb) in enumerate(s.train_loader):
            loss = s.loss_fn(s.model(xb), yb) * share(s.train_loader, i, accum_steps, len(yb), by_k)
            loss.backward()
            if (i + 1) % accum_steps == 0 or i + 1 == n:
                s.optimizer.step()
                s.optimizer.zero_grad()
        _evaluate(s.model, s.val_loader, s.loss_fn)


def accumulation_weighted(s: Setup, accum_steps: int = 4) -> None:
    """Chapter 0's rule: zero at each window's start, weight each micro-batch by its share of the window."""
    sizes = [len(yb) for _, yb in s.train_loader]
    n = len(sizes)
    for epoch in range(s.epochs):
        s.model.train()
        for i, (xb, yb) in enumerate(s.train_loader):
            start = i - i % accum_steps
            window = sum(sizes[start:min(start + accum_steps, n)])
            if i % accum_steps == 0:
                s.optimizer.zero_grad()
            loss = s.loss_fn(s.model(xb), yb) * (len(yb) / window)
            loss.backward()
            if (i + 1) % accum_steps == 0 or i == n - 1:
                s.optimizer.step()
        _validate(s.model, s.val_loader, s.loss_fn)


def amp_cpu_scaler_accumulation(s: Setup, accum_steps: int = 2, by_k: bool = False) -> None:
    """Seed 000's production loop on the CPU: bf16 autocast, a GradScaler, accumulation, clipping on updates."""
    scaler = torch.amp.GradScaler("cpu")
    n = len(s.train_loader)
    for epoch in range(s.epochs):
        s.model.train()
        for i, (xb, yb) in enumerate(s.train_loader):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = s.loss_fn(s.model(xb), yb) * share(s.train_loader, i, accum_steps, len(yb), by_k)
            scaler.scale(loss).backward()
            if (i + 1) % accum_steps == 0 or i + 1 == n:
                scaler.unscale_(s.optimizer)
                torch.nn.utils.clip_grad_norm_(s.model.parameters(), 1.0)
                scaler.step(s.optimizer)
                scaler.update()
                s.optimizer.zero_grad()
        s.scheduler.step()
        _evaluate(s.model, s.val_loader, s.loss_fn)


def seed_amp_inference(s: Setup) -> None:
    """Seed 003: autocast forward (bf16 on the CPU), zero_grad first; inference_mode for the final check."""
    s.model.train()
    for epoch in range(s.epochs):
        for xb, yb in s.train_loader:
            s.optimizer.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                predictions = s.model(xb)
                loss = s.loss_fn(predictions, yb)
            loss.backward()
            s.optimizer.step()
    s.model.eval()
    with torch.inference_mode():
        for xb, _ in s.val_loader:
            s.model(xb).argmax(dim=1)


def seed_zero_after_forward(s: Setup) -> None:
    """Seed 004: forward and loss first, then zero_grad, backward, step; a while loop over epochs."""
    epoch = 0
    history = []
    while epoch < s.epochs:
        s.model.train()
        total = 0.0
        for inputs, targets in s.train_loader:
            outputs = s.model(inputs)
            loss = s.loss_fn(outputs, targets)
            s.optimizer.zero_grad()
            loss.backward()
            s.optimizer.step()
            total += loss.item()
        history.append(_validate(s.model, s.val_loader, s.loss_fn))
        epoch += 1


def while_mid_epoch_eval(s: Setup, every: int = 4) -> None:
    """A step-counted while loop over a restarting iterator, validating every few steps (BatchNorm model)."""
    step, total_steps = 0, s.epochs * len(s.train_loader)
    batches = iter(s.train_loader)
    s.model.train()
    while step < total_steps:
        try:
            xb, yb = next(batches)
        except StopIteration:
            batches = iter(s.train_loader)
            continue
        s.optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(s.model(xb), yb).backward()
        s.optimizer.step()
        step += 1
        if step % every == 0:
            _evaluate(s.model, s.val_loader, s.loss_fn)


def warmup_zero_after_step(s: Setup) -> None:
    """Dropout + BatchNorm, a warmup LambdaLR per update, zero_grad(set_to_none=False) after the step."""
    for epoch in range(s.epochs):
        s.model.train()
        for xb, yb in s.train_loader:
            loss = s.loss_fn(s.model(xb), yb)
            loss.backward()
            s.optimizer.step()
            s.scheduler.step()
            s.optimizer.zero_grad(set_to_none=False)
        s.model.eval()
        with torch.inference_mode():
            accuracy = sum((s.model(xb).argmax(1) == yb).sum().item() for xb, yb in s.val_loader)


def freeze_then_build(s: Setup) -> None:
    """Fine-tuning done right (see prepare_frozen_body): only the head is trained, the body stays put."""
    for epoch in range(s.epochs):
        s.model.train()
        for xb, yb in s.train_loader:
            s.optimizer.zero_grad()
            s.loss_fn(s.model(xb), yb).backward()
            s.optimizer.step()
        _evaluate(s.model, s.val_loader, s.loss_fn)


def prepare_frozen_body(s: Setup) -> Setup:
    """The script before the loop: freeze the body first, then build the optimizer over what still trains."""
    s.model.body.requires_grad_(False)
    s.optimizer = torch.optim.Adam([p for p in s.model.parameters() if p.requires_grad], lr=0.01)
    return s


def prepare_new_head_first(s: Setup) -> Setup:
    """The script before the loop: swap in a fresh head, then build the optimizer over the final model."""
    s.model.head = nn.Linear(s.model.head.in_features, 3)
    s.optimizer = torch.optim.SGD(s.model.parameters(), lr=0.05, momentum=0.9)
    return s


def freeze_after_build_set_to_none(s: Setup) -> None:
    """Freezing after building Adam is harmless with zero_grad(set_to_none=True): frozen grads stay None."""
    for epoch in range(s.epochs):
        if epoch == 1:
            s.model.body.requires_grad_(False)
        s.model.train()
        for xb, yb in s.train_loader:
            s.optimizer.zero_grad()
            s.loss_fn(s.model(xb), yb).backward()
            s.optimizer.step()
        _evaluate(s.model, s.val_loader, s.loss_fn)


def manual_zero_regression(s: Setup) -> None:
    """Seed 003's regression: MSE, gradients cleared by hand (p.grad = None) before each backward."""
    for epoch in range(s.epochs):
        s.model.train()
        for features, targets in s.train_loader:
            prediction = s.model(features)
            loss = s.loss_fn(prediction, targets)
            for p in s.model.parameters():
                p.grad = None
            loss.backward()
            s.optimizer.step()
        s.model.eval()
        with torch.no_grad():
            val = sum(s.loss_fn(s.model(f), t).item() for f, t in s.val_loader)


def accumulation_clip_per_update(s: Setup, accum_steps: int = 3) -> None:
    """Accumulation with clipping of the whole window's gradient, once per update, and a per-update cosine."""
    n = len(s.train_loader)
    s.optimizer.zero_grad()
    for epoch in range(s.epochs):
        s.model.train()
        for i, (xb, yb) in enumerate(s.train_loader):
            last = (i + 1) % accum_steps == 0 or i == n - 1
            window = accum_steps if i < n - n % accum_steps else n % accum_steps
            (s.loss_fn(s.model(xb), yb) / window).backward()
            if last:
                nn.utils.clip_grad_norm_(s.model.parameters(), max_norm=0.5)
                s.optimizer.step()
                s.scheduler.step()
                s.optimizer.zero_grad()
        _evaluate(s.model, s.val_loader, s.loss_fn)


def per_update_cosine(s: Setup) -> None:
    """CosineAnnealingLR counted in updates (T_max = all updates), stepped every batch: correct."""
    for epoch in range(s.epochs):
        s.model.train()
        for xb, yb in s.train_loader:
            s.optimizer.zero_grad()
            s.loss_fn(s.model(xb), yb).backward()
            s.optimizer.step()
            s.scheduler.step()
        _validate(s.model, s.val_loader, s.loss_fn)


SCHEDULES = {
    "step100": lambda opt, n, e: lr_scheduler.StepLR(opt, step_size=100),
    "cosine_epochs": lambda opt, n, e: lr_scheduler.CosineAnnealingLR(opt, T_max=e, eta_min=1e-6),
    "cosine_updates": lambda opt, n, e: lr_scheduler.CosineAnnealingLR(opt, T_max=n * e),
    "onecycle": lambda opt, n, e: lr_scheduler.OneCycleLR(opt, max_lr=0.1, steps_per_epoch=n, epochs=e),
    "plateau": lambda opt, n, e: lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=0),
    "warmup": lambda opt, n, e: lr_scheduler.LambdaLR(opt, lambda u: min(1.0, (u + 1) / 5)),
    "step2": lambda opt, n, e: lr_scheduler.StepLR(opt, step_size=2, gamma=0.5),
    "multistep": lambda opt, n, e: lr_scheduler.MultiStepLR(opt, milestones=[1, 2], gamma=0.5),
    "exponential": lambda opt, n, e: lr_scheduler.ExponentialLR(opt, gamma=0.9),
}


# --- correct loops written after the doctor, to probe for false alarms ----------------------------

def amp_fp16_skipped_steps(s: Setup) -> None:
    """fp16 autocast with a GradScaler whose first scales overflow: it skips updates (torch's order
    warning then fires wrongly); OneCycleLR stepped after every scaler.step."""
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 24)
    for epoch in range(s.epochs):
        s.model.train()
        for xb, yb in s.train_loader:
            s.optimizer.zero_grad()
            with torch.autocast("cpu", dtype=torch.float16):
                loss = s.loss_fn(s.model(xb), yb)
            scaler.scale(loss).backward()
            scaler.step(s.optimizer)
            scaler.update()
            s.scheduler.step()
        _evaluate(s.model, s.val_loader, s.loss_fn)


def two_views_label_smoothing(s: Setup) -> None:
    """Two forwards per step (the batch and a jittered copy), label smoothing, one backward on their mean."""
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    for epoch in range(s.epochs):
        s.model.train()
        for xb, yb in s.train_loader:
            s.optimizer.zero_grad()
            jittered = xb + 0.05 * torch.randn_like(xb)
            loss = (criterion(s.model(xb), yb) + criterion(s.model(jittered), yb)) / 2
            loss.backward()
            s.optimizer.step()
        _validate(s.model, s.val_loader, s.loss_fn)


def regularised_accumulation(s: Setup, accum_steps: int = 4, weight_decay: float = 1e-4, by_k: bool = False) -> None:
    """Accumulation where each term of a loss + L2 penalty is weighted separately, with the flush."""
    n = len(s.train_loader)
    for epoch in range(s.epochs):
        s.model.train()
        for i, (xb, yb) in enumerate(s.train_loader):
            penalty = sum((p ** 2).sum() for p in s.model.parameters())
            weight = share(s.train_loader, i, accum_steps, len(yb), by_k)
            loss = s.loss_fn(s.model(xb), yb) * weight + weight_decay * penalty * weight
            loss.backward()
            if (i + 1) % accum_steps == 0 or i + 1 == n:
                s.optimizer.step()
                s.optimizer.zero_grad()
        _evaluate(s.model, s.val_loader, s.loss_fn)


def last_loss_and_train_accuracy(s: Setup) -> None:
    """Keeps the last loss tensor for an end-of-epoch print; measures training accuracy mid-epoch in eval mode."""
    for epoch in range(s.epochs):
        s.model.train()
        last = None
        for i, (xb, yb) in enumerate(s.train_loader):
            s.optimizer.zero_grad()
            loss = s.loss_fn(s.model(xb), yb)
            loss.backward()
            s.optimizer.step()
            last = loss
            if i == 3:
                s.model.eval()
                with torch.no_grad():
                    train_acc = (s.model(xb).argmax(1) == yb).float().mean().item()
                s.model.train()
        summary = f"epoch {epoch}: last loss {last.item():.3f}"


class PairList(torch.utils.data.Dataset):
    """A hand-written Dataset over (features, label) pairs, as learners write before TensorDataset."""

    def __init__(self, dataset):
        self.pairs = [(x.clone(), int(y)) for x, y in dataset]

    def __len__(self):
        return len(self.pairs)

    def __getitem__(self, index):
        return self.pairs[index]


def prepare_pair_lists(s: Setup) -> Setup:
    """Custom Datasets and a model that ends in log_softmax, trained with nll_loss."""
    s.train_loader = torch.utils.data.DataLoader(PairList(s.train_loader.dataset), batch_size=16, shuffle=True,
                                                 generator=torch.Generator().manual_seed(0))
    s.val_loader = torch.utils.data.DataLoader(PairList(s.val_loader.dataset), batch_size=16)
    s.model = nn.Sequential(s.model, nn.LogSoftmax(dim=1))
    s.loss_fn = nn.NLLLoss()
    return s
