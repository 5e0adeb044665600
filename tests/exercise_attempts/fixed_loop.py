"""Attempts at Exercise 5.1, fixed_loop(model, optimizer, scheduler, train_loader, val_loader, epochs).

The given loop's silent bugs: scheduler.step() per batch (StepLR is epoch-based), loss tensors logged (graphs
kept), validation in train mode and with autograd on.
"""
import torch
from torch import nn


def right_minimal(model, optimizer, scheduler, train_loader, val_loader, epochs):
    """The three fixes and nothing else: scheduler per epoch, .item(), eval + no_grad for validation."""
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in train_loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
        model.eval()
        with torch.no_grad():
            val_loss = sum(nn.functional.cross_entropy(model(xb), yb).item() for xb, yb in val_loader)
    return losses


def right_weighted_validation(model, optimizer, scheduler, train_loader, val_loader, epochs):
    """Also makes val_loss a per-example mean (in one pass over val_loader); inference_mode; scheduler after validation."""
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in train_loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            losses.append(float(loss.detach()))
        model.eval()
        total, count = 0.0, 0
        with torch.inference_mode():
            for xb, yb in val_loader:  # one pass only: each pass of a loader draws from torch's global RNG
                total += nn.functional.cross_entropy(model(xb), yb, reduction="sum").item()
                count += len(yb)
        val_loss = total / count
        scheduler.step()
    return losses


def wrong_scheduler_per_batch(model, optimizer, scheduler, train_loader, val_loader, epochs):
    """Fixes logging and validation but keeps scheduler.step() per batch: StepLR decays len(loader) times too fast."""
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in train_loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            val_loss = sum(nn.functional.cross_entropy(model(xb), yb).item() for xb, yb in val_loader)
    return losses


def wrong_logs_tensors(model, optimizer, scheduler, train_loader, val_loader, epochs):
    """Keeps losses.append(loss): every step's graph stays alive in the list (weights right, memory grows)."""
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in train_loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss)
        scheduler.step()
        model.eval()
        with torch.no_grad():
            val_loss = sum(nn.functional.cross_entropy(model(xb), yb).item() for xb, yb in val_loader)
    return losses


def wrong_validation_in_train_mode(model, optimizer, scheduler, train_loader, val_loader, epochs):
    """Adds no_grad but not eval(): Dropout draws during validation move the RNG, so the next epoch's masks change."""
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in train_loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
        with torch.no_grad():
            val_loss = sum(nn.functional.cross_entropy(model(xb), yb).item() for xb, yb in val_loader)
    return losses


def wrong_validation_with_grad(model, optimizer, scheduler, train_loader, val_loader, epochs):
    """Adds eval() but not no_grad: validation builds graphs (weights right, the doctor sees the graph memory)."""
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in train_loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
        model.eval()
        val_loss = sum(nn.functional.cross_entropy(model(xb), yb).item() for xb, yb in val_loader)
    return losses


def wrong_scheduler_at_epoch_start(model, optimizer, scheduler, train_loader, val_loader, epochs):
    """scheduler.step() at the top of the epoch, before any optimizer.step(): the decay comes one epoch early."""
    losses = []
    for epoch in range(epochs):
        scheduler.step()
        model.train()
        for xb, yb in train_loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            val_loss = sum(nn.functional.cross_entropy(model(xb), yb).item() for xb, yb in val_loader)
    return losses


def wrong_train_once(model, optimizer, scheduler, train_loader, val_loader, epochs):
    """"Tidies" model.train() out of the epoch loop: after the first validation, epochs 2+ train in eval mode."""
    losses = []
    model.train()
    for epoch in range(epochs):
        for xb, yb in train_loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
        model.eval()
        with torch.no_grad():
            val_loss = sum(nn.functional.cross_entropy(model(xb), yb).item() for xb, yb in val_loader)
    return losses


def wrong_scheduler_in_validation(model, optimizer, scheduler, train_loader, val_loader, epochs):
    """scheduler.step() indented into the validation loop: one decay per validation batch, 2+ val batches."""
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in train_loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        val_loss = 0.0
        with torch.no_grad():
            for xb, yb in val_loader:
                val_loss += nn.functional.cross_entropy(model(xb), yb).item()
                scheduler.step()
    return losses
