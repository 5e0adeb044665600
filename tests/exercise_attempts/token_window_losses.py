"""Attempts at Exercise 7.5, token_window_losses(token_losses, masks) -> K scalar tensors for one window."""
import torch


def right_masked_select(token_losses, masks):
    """Materialise both once; each micro-batch's real tokens by masked_select, summed, over the window's count."""
    token_losses, masks = list(token_losses), [m.bool() for m in masks]
    count = sum(int(m.sum()) for m in masks)
    if count == 0:
        raise ValueError("the window has no real token")
    return [torch.masked_select(t, m).sum() / count for t, m in zip(token_losses, masks)]


def right_weight_tensors(token_losses, masks):
    """One weight per position (1/count at a real token, 0 at padding) and a weighted sum, through torch.where."""
    pairs = list(zip(token_losses, masks))
    count = sum(torch.count_nonzero(m).item() for _, m in pairs)
    if not count:
        raise ValueError("no real token in this accumulation window")
    out = []
    for t, m in pairs:
        weight = torch.where(m != 0, 1.0 / count, 0.0).to(t.dtype)
        out.append(torch.where(m != 0, t, torch.zeros_like(t)).mul(weight).sum())
    return out


def wrong_mean_of_means(token_losses, masks):
    """Each micro-batch's own token mean, divided by K: micro-batches of 1 and 9 real tokens weigh that 1 token 9x."""
    pairs = [(t, m.bool()) for t, m in zip(token_losses, masks)]
    if not any(m.any() for _, m in pairs):
        raise ValueError("no real token")
    return [t[m].mean() / len(pairs) if m.any() else t.sum() * 0 for t, m in pairs]


def wrong_counts_padding(token_losses, masks):
    """Masks the numerator but divides by every position, padding included: any micro-batch with padding."""
    pairs = [(t, m.bool()) for t, m in zip(token_losses, masks)]
    if not any(m.any() for _, m in pairs):
        raise ValueError("no real token")
    positions = sum(t.numel() for t, _ in pairs)
    return [t[m].sum() / positions for t, m in pairs]


def wrong_iterates_twice(token_losses, masks):
    """Counts the tokens in one pass over `masks`, then zips it again: given generators, returns []."""
    count = sum(int(m.bool().sum()) for m in masks)
    if count == 0:
        raise ValueError("no real token")
    return [(t * m).sum() / count for t, m in zip(token_losses, masks)]


def wrong_int_mask_as_index(token_losses, masks):
    """`t[m]` with an int 0/1 mask indexes rows 0 and 1 (IndexError when B = 1): any int mask; bool masks work."""
    pairs = list(zip(token_losses, masks))
    count = sum(int(m.sum()) for _, m in pairs)
    if count == 0:
        raise ValueError("no real token")
    return [t[m].sum() / count for t, m in pairs]


def wrong_weights_by_examples(token_losses, masks):
    """The trainer's rule: each micro-batch's token mean times its share of sequences: any lengths that differ."""
    pairs = [(t, m.bool()) for t, m in zip(token_losses, masks)]
    if not any(m.any() for _, m in pairs):
        raise ValueError("no real token")
    sequences = sum(t.shape[0] for t, _ in pairs)
    return [t[m].mean() * t.shape[0] / sequences if m.any() else t.sum() * 0 for t, m in pairs]


def wrong_nan_on_empty_micro_batch(token_losses, masks):
    """Token share times own mean: a micro-batch with no real token returns 0 * (0/0) = NaN (its gradient is still 0)."""
    pairs = [(t, m.bool()) for t, m in zip(token_losses, masks)]
    counts = [int(m.sum()) for _, m in pairs]
    if sum(counts) == 0:
        raise ValueError("no real token")
    return [(k / sum(counts)) * t[m].mean() for (t, m), k in zip(pairs, counts)]


def wrong_constant_zero(token_losses, masks):
    """A micro-batch with no real token gets torch.tensor(0.0), which has no graph: its .backward() raises."""
    pairs = [(t, m.bool()) for t, m in zip(token_losses, masks)]
    count = sum(int(m.sum()) for _, m in pairs)
    if count == 0:
        raise ValueError("no real token")
    return [t[m].sum() / count if m.any() else torch.tensor(0.0) for t, m in pairs]


def wrong_no_error_on_empty_window(token_losses, masks):
    """Clamps the count to 1 instead of raising: a window with no real token returns K zeros, no ValueError."""
    pairs = [(t, m.bool()) for t, m in zip(token_losses, masks)]
    count = max(sum(int(m.sum()) for _, m in pairs), 1)
    return [(t * m).sum() / count for t, m in pairs]


def wrong_bitwise_not_mask(token_losses, masks):
    """Zeroes padding with masked_fill(~m, 0): fine for bool masks, but ~ of an int mask is -2/-1: RuntimeError."""
    pairs = list(zip(token_losses, masks))
    count = sum(int(m.sum()) for _, m in pairs)
    if count == 0:
        raise ValueError("no real token")
    return [t.masked_fill(~m, 0.0).sum() / count for t, m in pairs]


def wrong_detached_values(token_losses, masks):
    """Rewraps each value as torch.tensor(x.item(), requires_grad=True): a leaf, so backward reaches no weight."""
    pairs = [(t, m.bool()) for t, m in zip(token_losses, masks)]
    count = sum(int(m.sum()) for _, m in pairs)
    if count == 0:
        raise ValueError("no real token")
    return [torch.tensor(t[m].sum().item() / count, requires_grad=True) for t, m in pairs]
