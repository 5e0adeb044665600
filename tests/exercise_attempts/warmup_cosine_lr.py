"""Attempts at Exercise 7.3, warmup_cosine_lr(update, base_lr, warmup, total)."""
import math

import torch


def right_piecewise(update, base_lr, warmup, total):
    """(update + 1) / warmup of base_lr while warming up, then 0.5 (1 + cos(pi progress)) over the rest."""
    if update < warmup:
        return base_lr * (update + 1) / warmup
    progress = (update - warmup) / (total - warmup)
    return base_lr * 0.5 * (1 + math.cos(math.pi * progress))


def right_cos_squared(update, base_lr, warmup, total):
    """The same curve as base_lr cos^2(pi/2 progress) after a linear ramp found with min()."""
    ramp = min(1.0, (update + 1) / warmup) if warmup else 1.0
    if update < warmup:
        return base_lr * ramp
    return base_lr * math.cos(math.pi / 2 * (update - warmup) / (total - warmup)) ** 2


def wrong_warmup_from_zero(update, base_lr, warmup, total):
    """Ramp update / warmup: update 0 trains at lr 0 and base_lr is reached one update late (warmup 4: 0, .25, .5, .75)."""
    if update < warmup:
        return base_lr * update / warmup
    return base_lr * 0.5 * (1 + math.cos(math.pi * (update - warmup) / (total - warmup)))


def wrong_cosine_ignores_warmup(update, base_lr, warmup, total):
    """Cosine over update / total from 0: after the warmup the rate drops straight below base_lr (warmup 10, total 20)."""
    if update < warmup:
        return base_lr * (update + 1) / warmup
    return base_lr * 0.5 * (1 + math.cos(math.pi * update / total))


def wrong_warmup_zero(update, base_lr, warmup, total):
    """min(1, (update + 1) / warmup) with no guard: warmup 0 raises ZeroDivisionError."""
    factor = min(1.0, (update + 1) / warmup)
    if update < warmup:
        return base_lr * factor
    return base_lr * 0.5 * (1 + math.cos(math.pi * (update - warmup) / (total - warmup)))


def wrong_quarter_wave(update, base_lr, warmup, total):
    """"Half a cosine" read as cos over [0, pi/2]: the right ends, a different curve in between (halfway 0.71 not 0.5)."""
    if update < warmup:
        return base_lr * (update + 1) / warmup
    return base_lr * math.cos(math.pi / 2 * (update - warmup) / (total - warmup))


def wrong_zero_one_early(update, base_lr, warmup, total):
    """Denominator total - warmup - 1: the cosine reaches 0 at update total - 1, every cosine update a bit low."""
    if update < warmup:
        return base_lr * (update + 1) / warmup
    return base_lr * 0.5 * (1 + math.cos(math.pi * (update - warmup) / (total - warmup - 1)))


def wrong_cosine_from_peak_update(update, base_lr, warmup, total):
    """Cosine starts at update warmup - 1 (the peak): update `warmup` is already below base_lr, warmup >= 1."""
    if update < warmup:
        return base_lr * (update + 1) / warmup
    start = max(warmup - 1, 0)
    return base_lr * 0.5 * (1 + math.cos(math.pi * (update - start) / (total - start)))


def wrong_returns_tensor(update, base_lr, warmup, total):
    """torch.cos on a tensor: the cosine part comes back as a 0-d float32 tensor, not a float."""
    if update < warmup:
        return base_lr * (update + 1) / warmup
    progress = torch.tensor((update - warmup) / (total - warmup))
    return base_lr * 0.5 * (1 + torch.cos(torch.pi * progress))
