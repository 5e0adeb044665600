"""Buggy training loops as learners write them: each carries the bug(s) its case names, nothing else.

Helpers from correct.py are reused where the bug is elsewhere, so each loop differs from a correct one
only where the bug is.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils import clip_grad_norm_
from torch.utils.data import ConcatDataset, DataLoader, Subset

from tests.doctor_corpus.correct import _evaluate, _validate
from tests.doctor_corpus.setups import Setup


# --- missing_zero_grad ---------------------------------------------------------------------------

def no_zero_grad(s: Setup) -> None:
    """Seed 000's template with zero_grad forgotten."""
    s.model.train()
    for epoch in range(s.epochs):
        for xb, yb in s.train_loader:
            loss = s.loss_fn(s.model(xb), yb)
            loss.backward()
            s.optimizer.step()
        _evaluate(s.model, s.val_loader, s.loss_fn)


def zero_grad_once_per_epoch(s: Setup) -> None:
    """zero_grad at the top of each epoch instead of each batch (Adam)."""
    for epoch in range(s.epochs):
        s.model.train()
        s.optimizer.zero_grad()
        for xb, yb in s.train_loader:
            F.cross_entropy(s.model(xb), yb).backward()
            s.optimizer.step()
        _validate(s.model, s.val_loader, s.loss_fn)


# --- zero_grad_after_backward --------------------------------------------------------------------

def zero_between_backward_and_step(s: Setup) -> None:
    """The flaky script of seed 001: zero_grad moved between backward and step."""
    for epoch in range(s.epochs):
        s.model.train()
        for xb, yb in s.train_loader:
            loss = s.loss_fn(s.model(xb), yb)
            loss.backward()
            s.optimizer.zero_grad()
            s.optimizer.step()
        _evaluate(s.model, s.val_loader, s.loss_fn)


def model_zero_before_clip(s: Setup) -> None:
    """A while loop that clears with model.zero_grad(set_to_none=False) after backward, then clips and steps."""
    step, batches = 0, iter(s.train_loader)
    s.model.train()
    while step < s.epochs * len(s.train_loader):
        try:
            xb, yb = next(batches)
        except StopIteration:
            batches = iter(s.train_loader)
            continue
        s.loss_fn(s.model(xb), yb).backward()
        s.model.zero_grad(set_to_none=False)
        nn.utils.clip_grad_norm_(s.model.parameters(), 1.0)
        s.optimizer.step()
        step += 1


# --- eval_in_train_mode --------------------------------------------------------------------------

def validate_without_eval(s: Setup) -> None:
    """no_grad validation, but model.eval() forgotten (dropout model)."""
    for epoch in range(s.epochs):
        s.model.train()
        for xb, yb in s.train_loader:
            s.optimizer.zero_grad()
            s.loss_fn(s.model(xb), yb).backward()
            s.optimizer.step()
        with torch.no_grad():
            accuracy = sum((s.model(xb).argmax(1) == yb).sum().item() for xb, yb in s.val_loader)


def mid_epoch_inference_in_train_mode(s: Setup) -> None:
    """Mid-epoch check under inference_mode, BatchNorm model left in train mode."""
    for epoch in range(s.epochs):
        s.model.train()
        for i, (xb, yb) in enumerate(s.train_loader):
            s.optimizer.zero_grad()
            s.loss_fn(s.model(xb), yb).backward()
            s.optimizer.step()
            if i == 2:
                with torch.inference_mode():
                    val = [s.loss_fn(s.model(v), t).item() for v, t in s.val_loader]


# --- missing_no_grad -----------------------------------------------------------------------------

def eval_without_no_grad(s: Setup) -> None:
    """model.eval() but no no_grad: every validation batch builds a graph (values logged with .item())."""
    for epoch in range(s.epochs):
        s.model.train()
        for xb, yb in s.train_loader:
            s.optimizer.zero_grad()
            s.loss_fn(s.model(xb), yb).backward()
            s.optimizer.step()
        s.model.eval()
        val_loss = 0.0
        for xb, yb in s.val_loader:
            val_loss += s.loss_fn(s.model(xb), yb).item()


def _accuracy(model, loader):
    model.eval()
    right = sum((model(xb).argmax(dim=1) == yb).sum().item() for xb, yb in loader)
    model.train()
    return right / len(loader.dataset)


def accuracy_helper_with_graph(s: Setup) -> None:
    """A helper that measures accuracy mid-epoch, without no_grad, on an unknown loader (no val_data given)."""
    for epoch in range(s.epochs):
        s.model.train()
        for i, (xb, yb) in enumerate(s.train_loader):
            s.optimizer.zero_grad()
            s.loss_fn(s.model(xb), yb).backward()
            s.optimizer.step()
            if i % 3 == 2:
                _accuracy(s.model, s.val_loader)


# --- graph_attached_logging ----------------------------------------------------------------------

def append_loss_tensor(s: Setup) -> None:
    """losses.append(loss): the log keeps every step's graph."""
    losses = []
    for epoch in range(s.epochs):
        s.model.train()
        for xb, yb in s.train_loader:
            s.optimizer.zero_grad()
            loss = s.loss_fn(s.model(xb), yb)
            loss.backward()
            s.optimizer.step()
            losses.append(loss)
        _evaluate(s.model, s.val_loader, s.loss_fn)


def running_total_tensor(s: Setup) -> None:
    """total += loss with a helper returning the running tensor (seed 001's helper, .item() forgotten)."""
    for epoch in range(s.epochs):
        s.model.train()
        total = 0.0
        for xb, yb in s.train_loader:
            s.optimizer.zero_grad()
            loss = s.loss_fn(s.model(xb), yb)
            loss.backward()
            s.optimizer.step()
            total += loss
        epoch_loss = total / len(s.train_loader)
        _validate(s.model, s.val_loader, s.loss_fn)


# --- missing_train_switch ------------------------------------------------------------------------

def _evaluate_no_switch(model, loader, loss_fn):
    model.eval()
    with torch.no_grad():
        return sum(loss_fn(model(xb), yb).item() for xb, yb in loader) / len(loader)


def train_called_once(s: Setup) -> None:
    """Seed 000's template: model.train() once before the epochs, an evaluate() that never switches back."""
    s.model.train()
    for epoch in range(s.epochs):
        for xb, yb in s.train_loader:
            s.optimizer.zero_grad()
            s.loss_fn(s.model(xb), yb).backward()
            s.optimizer.step()
        _evaluate_no_switch(s.model, s.val_loader, s.loss_fn)


def mid_epoch_eval_no_switch(s: Setup) -> None:
    """A while loop validating every 4 steps, in eval mode, then training on in eval mode."""
    step, batches = 0, iter(s.train_loader)
    s.model.train()
    while step < s.epochs * len(s.train_loader):
        try:
            xb, yb = next(batches)
        except StopIteration:
            batches = iter(s.train_loader)
            continue
        s.optimizer.zero_grad()
        s.loss_fn(s.model(xb), yb).backward()
        s.optimizer.step()
        step += 1
        if step % 4 == 0:
            _evaluate_no_switch(s.model, s.val_loader, s.loss_fn)


def prepare_gradient_smoke_test(s: Setup) -> Setup:
    """The script checks one batch's gradients before training, then clears them to zeros."""
    xb, yb = next(iter(s.train_loader))
    s.loss_fn(s.model(xb), yb).backward()
    s.optimizer.zero_grad(set_to_none=False)
    return s


# --- clip_before_backward / clip_after_step ------------------------------------------------------

def clip_right_after_zero(s: Setup) -> None:
    """Clip placed right after zero_grad, before forward."""
    for epoch in range(s.epochs):
        s.model.train()
        for xb, yb in s.train_loader:
            s.optimizer.zero_grad()
            torch.nn.utils.clip_grad_norm_(s.model.parameters(), max_norm=1.0)
            s.loss_fn(s.model(xb), yb).backward()
            s.optimizer.step()
        _evaluate(s.model, s.val_loader, s.loss_fn)


def clip_value_before_backward(s: Setup) -> None:
    """clip_grad_value_ between the loss and backward (grads cleared with set_to_none=False)."""
    for epoch in range(s.epochs):
        s.model.train()
        for xb, yb in s.train_loader:
            s.optimizer.zero_grad(set_to_none=False)
            loss = s.loss_fn(s.model(xb), yb)
            nn.utils.clip_grad_value_(s.model.parameters(), 0.1)
            loss.backward()
            s.optimizer.step()
        _validate(s.model, s.val_loader, s.loss_fn)


def clip_after_step(s: Setup) -> None:
    """Clip after the step, zero_grad at the top."""
    for epoch in range(s.epochs):
        s.model.train()
        for xb, yb in s.train_loader:
            s.optimizer.zero_grad()
            s.loss_fn(s.model(xb), yb).backward()
            s.optimizer.step()
            torch.nn.utils.clip_grad_norm_(s.model.parameters(), max_norm=1.0)
        _evaluate(s.model, s.val_loader, s.loss_fn)


def clip_after_step_then_schedule(s: Setup) -> None:
    """Step, clip, schedule, zero: the clip comes one operation too late (clip_grad_norm_ imported by name)."""
    for epoch in range(s.epochs):
        s.model.train()
        for xb, yb in s.train_loader:
            s.loss_fn(s.model(xb), yb).backward()
            s.optimizer.step()
            clip_grad_norm_(s.model.parameters(), 0.5)
            s.scheduler.step()
            s.optimizer.zero_grad()
        _evaluate(s.model, s.val_loader, s.loss_fn)


# --- schedules -----------------------------------------------------------------------------------

def epoch_schedule_every_batch(s: Setup) -> None:
    """An epoch-counted schedule stepped inside the batch loop."""
    for epoch in range(s.epochs):
        s.model.train()
        for xb, yb in s.train_loader:
            s.optimizer.zero_grad()
            s.loss_fn(s.model(xb), yb).backward()
            s.optimizer.step()
            s.scheduler.step()
        _validate(s.model, s.val_loader, s.loss_fn)


def scheduler_before_step(s: Setup) -> None:
    """scheduler.step() between backward and optimizer.step()."""
    for epoch in range(s.epochs):
        s.model.train()
        for xb, yb in s.train_loader:
            s.optimizer.zero_grad()
            s.loss_fn(s.model(xb), yb).backward()
            s.scheduler.step()
            s.optimizer.step()
        _evaluate(s.model, s.val_loader, s.loss_fn)


def scheduler_at_epoch_start(s: Setup) -> None:
    """An epoch schedule stepped at the top of each epoch: epoch 1 trains at epoch 2's lr."""
    for epoch in range(s.epochs):
        s.scheduler.step()
        s.model.train()
        for xb, yb in s.train_loader:
            s.optimizer.zero_grad()
            s.loss_fn(s.model(xb), yb).backward()
            s.optimizer.step()
        _evaluate(s.model, s.val_loader, s.loss_fn)


# --- accumulation --------------------------------------------------------------------------------

def accumulation_undivided(s: Setup, accum_steps: int = 4) -> None:
    """Accumulation with the flush, but the loss is never divided by the window."""
    n = len(s.train_loader)
    for epoch in range(s.epochs):
        s.model.train()
        for i, (xb, yb) in enumerate(s.train_loader):
            s.loss_fn(s.model(xb), yb).backward()
            if (i + 1) % accum_steps == 0 or i + 1 == n:
                s.optimizer.step()
                s.optimizer.zero_grad()
        _evaluate(s.model, s.val_loader, s.loss_fn)


def amp_scaler_accumulation_undivided(s: Setup, accum_steps: int = 2) -> None:
    """bf16 autocast + GradScaler("cpu") with accumulation; the loss is scaled by the scaler only."""
    scaler = torch.amp.GradScaler("cpu")
    n = len(s.train_loader)
    for epoch in range(s.epochs):
        s.model.train()
        for i, (xb, yb) in enumerate(s.train_loader):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = s.loss_fn(s.model(xb), yb)
            scaler.scale(loss).backward()
            if (i + 1) % accum_steps == 0 or i + 1 == n:
                scaler.step(s.optimizer)
                scaler.update()
                s.optimizer.zero_grad()
        _evaluate(s.model, s.val_loader, s.loss_fn)


def seed_accumulation_no_flush(s: Setup, accum_steps: int = 4) -> None:
    """Seed 000's accumulation snippet as printed: (i + 1) % K, zero after step, no end-of-epoch flush."""
    for epoch in range(s.epochs):
        s.model.train()
        for i, (xb, yb) in enumerate(s.train_loader):
            loss = s.loss_fn(s.model(xb), yb) / accum_steps
            loss.backward()
            if (i + 1) % accum_steps == 0:
                s.optimizer.step()
                s.optimizer.zero_grad()
        _evaluate(s.model, s.val_loader, s.loss_fn)


def accumulation_zero_at_window_start(s: Setup, accum_steps: int = 4) -> None:
    """zero_grad when i % K == 0, step when (i + 1) % K == 0: an epoch's last partial window is wiped."""
    for epoch in range(s.epochs):
        s.model.train()
        for i, (xb, yb) in enumerate(s.train_loader):
            if i % accum_steps == 0:
                s.optimizer.zero_grad()
            (s.loss_fn(s.model(xb), yb) / accum_steps).backward()
            if (i + 1) % accum_steps == 0:
                s.optimizer.step()
        _validate(s.model, s.val_loader, s.loss_fn)


# --- optimizer / parameter mismatch --------------------------------------------------------------

def plain_training(s: Setup) -> None:
    """A healthy loop body; the bug of its case is in the script before the loop (its prepare step)."""
    for epoch in range(s.epochs):
        s.model.train()
        for xb, yb in s.train_loader:
            s.optimizer.zero_grad()
            s.loss_fn(s.model(xb), yb).backward()
            s.optimizer.step()
        _evaluate(s.model, s.val_loader, s.loss_fn)


def prepare_head_after_optimizer(s: Setup) -> Setup:
    """Swap in a new head after the optimizer was built."""
    s.model.head = nn.Linear(s.model.head.in_features, 3)
    return s


def prepare_wrapped_after_optimizer(s: Setup) -> Setup:
    """Wrap the model with an extra layer after the optimizer was built over the inner model."""
    s.model = nn.Sequential(s.model, nn.ReLU(), nn.Linear(3, 3))
    return s


def freeze_mid_training_zero_fill(s: Setup) -> None:
    """Freeze the body after epoch 1 with requires_grad_(False); gradients cleared to zeros, not None."""
    for epoch in range(s.epochs):
        if epoch == 1:
            s.model.body.requires_grad_(False)
        s.model.train()
        for xb, yb in s.train_loader:
            s.optimizer.zero_grad(set_to_none=False)
            s.loss_fn(s.model(xb), yb).backward()
            s.optimizer.step()
        _evaluate(s.model, s.val_loader, s.loss_fn)


def prepare_freeze_after_optimizer(s: Setup) -> Setup:
    """Freeze the body after building the optimizer over every parameter, and train the body once first."""
    xb, yb = next(iter(s.train_loader))
    s.loss_fn(s.model(xb), yb).backward()
    s.optimizer.step()
    s.model.body.requires_grad_(False)
    return s


def freeze_zero_fill(s: Setup) -> None:
    """Train after a freeze-after-build, clearing gradients to zeros (model.zero_grad(set_to_none=False))."""
    for epoch in range(s.epochs):
        s.model.train()
        for xb, yb in s.train_loader:
            s.model.zero_grad(set_to_none=False)
            s.loss_fn(s.model(xb), yb).backward()
            s.optimizer.step()
        _validate(s.model, s.val_loader, s.loss_fn)


def prepare_val_from_train(s: Setup) -> Setup:
    """Validation made of a slice of the training set plus the real validation set."""
    train = s.train_loader.dataset
    s.val_loader = DataLoader(ConcatDataset([Subset(train, range(10)), s.val_loader.dataset]), batch_size=16)
    return s


# --- softmax_before_cross_entropy ----------------------------------------------------------------

def softmax_in_loop_amp(s: Setup) -> None:
    """F.cross_entropy on F.softmax(logits) under bf16 autocast."""
    for epoch in range(s.epochs):
        s.model.train()
        for xb, yb in s.train_loader:
            s.optimizer.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                probs = F.softmax(s.model(xb), dim=1)
                loss = F.cross_entropy(probs, yb)
            loss.backward()
            s.optimizer.step()
        _evaluate(s.model, s.val_loader, s.loss_fn)


# --- two bugs at once ----------------------------------------------------------------------------

def no_eval_no_grad_log_tensor(s: Setup) -> None:
    """Validation with neither eval() nor no_grad, keeping the validation loss tensors."""
    for epoch in range(s.epochs):
        s.model.train()
        for xb, yb in s.train_loader:
            s.optimizer.zero_grad()
            s.loss_fn(s.model(xb), yb).backward()
            s.optimizer.step()
        val_losses = [s.loss_fn(s.model(xb), yb) for xb, yb in s.val_loader]
        mean = torch.stack(val_losses).mean().item()


# --- averages and per-update schedules (added with issue 23) ---------------------------------------

def validate_mean_of_batch_means(s: Setup) -> None:
    """A healthy loop whose validation (correct.py's _validate) divides the summed batch losses by the number of
    batches; its case's validation set (50 = 3 x 16 + 2) ends with a small batch."""
    for epoch in range(s.epochs):
        s.model.train()
        for xb, yb in s.train_loader:
            s.optimizer.zero_grad()
            s.loss_fn(s.model(xb), yb).backward()
            s.optimizer.step()
        _validate(s.model, s.val_loader, s.loss_fn)


def accuracy_mean_of_batch_accuracies(s: Setup) -> None:
    """Validation accuracy as the plain mean of per-batch accuracies (sum(acc.item()) / len(loader))."""
    for epoch in range(s.epochs):
        s.model.train()
        for xb, yb in s.train_loader:
            s.optimizer.zero_grad()
            s.loss_fn(s.model(xb), yb).backward()
            s.optimizer.step()
        s.model.eval()
        with torch.no_grad():
            accuracy = sum((s.model(xb).argmax(1) == yb).float().mean().item() for xb, yb in s.val_loader)
        accuracy = accuracy / len(s.val_loader)


def per_update_schedule_per_epoch(s: Setup) -> None:
    """OneCycleLR/CyclicLR, counted in updates, stepped after the batch loop as if it were an epoch schedule."""
    for epoch in range(s.epochs):
        s.model.train()
        for xb, yb in s.train_loader:
            s.optimizer.zero_grad()
            s.loss_fn(s.model(xb), yb).backward()
            s.optimizer.step()
        s.scheduler.step()
        _evaluate(s.model, s.val_loader, s.loss_fn)
