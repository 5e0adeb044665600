"""Attempts at Exercise 4.2, dropout(x, p, training)."""
import torch


def right_bernoulli(x, p, training):
    """A Bernoulli(1 - p) keep-mask, survivors scaled by 1 / (1 - p); p = 1 zeroes everything."""
    if not training:
        return x
    if p >= 1:
        return torch.zeros_like(x)
    keep = torch.bernoulli(torch.full_like(x, 1 - p))
    return x * keep / (1 - p)


def right_where(x, p, training):
    """torch.where on uniform draws: uniform >= p keeps (probability 1 - p), no division when p = 1."""
    if not training or p == 0:
        return x
    keep = torch.rand_like(x) >= p
    return torch.where(keep, x / (1 - p) if p < 1 else x, torch.zeros_like(x))


def wrong_no_scaling(x, p, training):
    """Zeroes without rescaling: the expected output is (1 - p) x, any p > 0."""
    if not training:
        return x
    return x * (torch.rand_like(x) >= p)


def wrong_scale_by_p(x, p, training):
    """Scales survivors by 1 / p instead of 1 / (1 - p): expected output (1 - p) / p x, any p != 0.5."""
    if not training:
        return x
    return x * (torch.rand_like(x) >= p) / p


def wrong_keep_with_p(x, p, training):
    """Keeps with probability p (rand < p), scales by 1 / p: mean right, but p=0.2 zeroes 80% (same law only at p=0.5)."""
    if not training:
        return x
    return x * (torch.rand_like(x) < p) / p


def wrong_in_place(x, p, training):
    """mul_ and div_ on x: the result is right, but the caller's x is overwritten, any training call."""
    if not training:
        return x
    return x.mul_(torch.rand_like(x) >= p).div_(1 - p)


def wrong_p_one(x, p, training):
    """x * mask / (1 - p) with p = 1 divides by zero: NaN (or inf) instead of zeros."""
    if not training:
        return x
    return x * (torch.rand_like(x) >= p) / (1 - p)


def wrong_shared_mask(x, p, training):
    """One mask per feature broadcast over the batch rows: values are not dropped independently, x of shape [B, D]."""
    if not training:
        return x
    keep = torch.rand(x.shape[-1]) >= p
    return x * keep / (1 - p)


def wrong_scales_in_eval(x, p, training):
    """The original paper's test-time rule, x (1 - p) in eval: with scaling in training, eval must return x itself."""
    if not training:
        return x * (1 - p)
    return x * (torch.rand_like(x) >= p) / (1 - p)


def wrong_float64_mask(x, p, training):
    """Multiplies by a float64 mask: a float32 x comes back float64, any training call."""
    if not training:
        return x
    keep = (torch.rand(x.shape, dtype=torch.float64) >= p).double()
    return x * keep / (1 - p)
