"""Round 5 of the blind check (stop 60): wrong attempts written from the statements alone by a helper who saw neither
the checkers nor the solutions, nor earlier rounds' attempts (only their tags, to find other mistakes): 4 wrong and
1 right (an unusual but correct way) per exercise, 125 in all. Split by a hash of the name; the half run first: 0 of 52
wrong attempts passed and 0 of 12 right ones were refused; the unseen half, run after with nothing changed: 0 of 48
and 0 of 13. Kept verbatim, so that a later change to a check that lets one of them through fails
(tests/test_exercise_blind_rounds.py)."""
from __future__ import annotations

from pathlib import Path
from torch.utils.data import Dataset
import copy
import itertools
import math
import numpy as np
import os
import re
import torch
import torch.nn as nn
import torch.nn.functional as F

# ---------------------------------------------------------------- 1 updates_per_epoch

def updates_per_epoch__wrong__ignores_K(N, B, K, drop_last=False):
    """Returns the number of micro-batches per epoch, forgetting that K of them make one update."""
    return N // B if drop_last else (N + B - 1) // B


def updates_per_epoch__wrong__round_batches(N, B, K, drop_last=False):
    """Counts batches with round(N / B) instead of ceil (floor under drop_last): a remainder under half a batch is lost, one over half is kept."""
    batches = round(N / B)
    return -(-batches // K)


def updates_per_epoch__wrong__drop_last_ceil_minus_one(N, B, K, drop_last=False):
    """Under drop_last counts ceil(N / B) - 1 batches: one batch too few when B divides N."""
    batches = math.ceil(N / B)
    if drop_last:
        batches -= 1
    return math.ceil(batches / K)


def updates_per_epoch__wrong__drop_last_flush_strict(N, B, K, drop_last=False):
    """Counts the flush from the examples left after the full windows, but with `left > B` under drop_last: misses the flush when exactly one full batch is left."""
    full, left = divmod(N, B * K)
    if drop_last:
        return full + (1 if left > B else 0)
    return full + (1 if left > 0 else 0)


def updates_per_epoch__right__negative_floor_division(N, B, K, drop_last=False):
    """Right: batches as (N - B) // B + 1 (drop_last, 0 when N < B) or -(-N // B); updates as (batches - 1) // K + 1, which is 0 for 0 batches since -1 // K == -1."""
    batches = (N - B) // B + 1 if drop_last else -(-N // B)
    return int((batches - 1) // K + 1)


# ---------------------------------------------------------------- 2 loss_weights

def loss_weights__wrong__epoch_total(sizes, K):
    """Divides each batch size by the whole epoch's example count instead of its own window's total."""
    total = sum(sizes)
    return [s / total for s in sizes]


def loss_weights__wrong__inverse_window_total(sizes, K):
    """Gives 1 / window_total (the weight for a summed loss) to each mean loss, forgetting to multiply by the micro-batch's own size."""
    out = []
    for start in range(0, len(sizes), K):
        w = sizes[start:start + K]
        tot = sum(w)
        out += [1.0 / tot] * len(w)
    return out


def loss_weights__wrong__window_slice_K_plus_one(sizes, K):
    """Off-by-one slice: the window total is summed over sizes[start:start + K + 1], one micro-batch too many."""
    out = []
    for start in range(0, len(sizes), K):
        tot = sum(sizes[start:start + K + 1])
        out += [s / tot for s in sizes[start:start + K]]
    return out


def loss_weights__wrong__short_window_merged(sizes, K):
    """Folds the short last window into the previous one (one update of up to 2K-1 micro-batches), so both share a single denominator."""
    n = len(sizes)
    starts = list(range(0, n, K))
    if len(starts) > 1 and n - starts[-1] < K:
        starts.pop()
    out = []
    for j, st in enumerate(starts):
        end = starts[j + 1] if j + 1 < len(starts) else n
        tot = sum(sizes[st:end])
        out += [s / tot for s in sizes[st:end]]
    return out


def loss_weights__right__bincount(sizes, K):
    """Right: window id i // K per micro-batch, window totals by np.bincount weighted by the sizes, weight = size / its window's total."""
    s = np.asarray(list(sizes), dtype=np.float64)
    if s.size == 0:
        return []
    ids = np.arange(len(s)) // K
    totals = np.bincount(ids, weights=s)
    return [float(v) for v in s / totals[ids]]


# ---------------------------------------------------------------- 3 SlidingWindows

class SlidingWindows__wrong__len_minus_one(Dataset):
    """len is len(series) - window - 1: the last example (whose target is the series' last value) is missing."""

    def __init__(self, series, window):
        self.series = series
        self.window = window

    def __len__(self):
        return max(0, len(self.series) - self.window - 1)

    def __getitem__(self, i):
        if i < 0 or i >= len(self):
            raise IndexError(i)
        return self.series[i:i + self.window], self.series[i + self.window]


class SlidingWindows__wrong__inputs_one_short(Dataset):
    """Inputs are series[i : i + window - 1], one value short of the window (off-by-one slice); the target is right."""

    def __init__(self, series, window):
        self.series = series
        self.window = window

    def __len__(self):
        return len(self.series) - self.window

    def __getitem__(self, i):
        if i < 0 or i >= len(self):
            raise IndexError(i)
        return self.series[i:i + self.window - 1], self.series[i + self.window]


class SlidingWindows__wrong__non_overlapping(Dataset):
    """Cuts non-overlapping windows (example i starts at i * window) instead of sliding one step at a time."""

    def __init__(self, series, window):
        self.series = series
        self.window = window

    def __len__(self):
        return (len(self.series) - 1) // self.window

    def __getitem__(self, i):
        if i < 0 or i >= len(self):
            raise IndexError(i)
        s = i * self.window
        return self.series[s:s + self.window], self.series[s + self.window]


class SlidingWindows__wrong__normalizes_series(Dataset):
    """Standardizes the series (zero mean, unit std) in __init__, so inputs and targets are not the series' own values."""

    def __init__(self, series, window):
        self.series = (series - series.mean()) / series.std()
        self.window = window

    def __len__(self):
        return len(self.series) - self.window

    def __getitem__(self, i):
        if i < 0 or i >= len(self):
            raise IndexError(i)
        return self.series[i:i + self.window], self.series[i + self.window]


class SlidingWindows__right__unfold(Dataset):
    """Right: all windows precomputed as views by series.unfold(0, window, 1) minus the last, targets series[window:]; explicit bounds check raises IndexError."""

    def __init__(self, series, window):
        self.inputs = series.unfold(0, window, 1)[:-1]
        self.targets = series[window:]

    def __len__(self):
        return int(self.targets.shape[0])

    def __getitem__(self, i):
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"index {i} out of range for {n} examples")
        return self.inputs[i], self.targets[i]


# ---------------------------------------------------------------- 4 FolderDataset

_EXAMPLE = re.compile(r"(\d+)\.pt")


def _example_stems(folder):
    return [int(m.group(1)) for f in os.listdir(folder) if (m := _EXAMPLE.fullmatch(f))]


class FolderDataset__wrong__swapped_pair(Dataset):
    """Returns (y, x) instead of (x, y): label and features in the wrong order."""

    def __init__(self, folder):
        self.folder = folder
        self.n = len(_example_stems(folder))

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i < 0 or i >= self.n:
            raise IndexError(i)
        d = torch.load(os.path.join(self.folder, f"{i}.pt"))
        return d["y"], d["x"]


class FolderDataset__wrong__len_max_stem(Dataset):
    """len is the largest file number instead of the count of example files (off by one: files 0..n-1 give n - 1)."""

    def __init__(self, folder):
        self.folder = folder
        stems = _example_stems(folder)
        self.n = max(stems) if stems else 0

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i < 0 or i >= self.n:
            raise IndexError(i)
        d = torch.load(os.path.join(self.folder, f"{i}.pt"))
        return d["x"], d["y"]


class FolderDataset__wrong__x_float64(Dataset):
    """Converts x to float64 (x.double()) instead of keeping its stored float32: a float32 model refuses it."""

    def __init__(self, folder):
        self.folder = folder
        self.n = len(_example_stems(folder))

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i < 0 or i >= self.n:
            raise IndexError(i)
        d = torch.load(os.path.join(self.folder, f"{i}.pt"))
        return torch.as_tensor(d["x"]).double(), d["y"]


class FolderDataset__wrong__standardizes_x(Dataset):
    """Standardizes each x (subtracts its mean, divides by its std) instead of returning the stored features."""

    def __init__(self, folder):
        self.folder = folder
        self.n = len(_example_stems(folder))

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i < 0 or i >= self.n:
            raise IndexError(i)
        d = torch.load(os.path.join(self.folder, f"{i}.pt"))
        x = d["x"]
        x = (x - x.mean()) / (x.std() + 1e-8)
        return x, d["y"]


class FolderDataset__right__pathlib_list(Dataset):
    """Right: counts names matching exactly <digits>.pt with pathlib + re.fullmatch, loads <i>.pt lazily with weights_only=True and returns the accepted list [x, y]."""

    def __init__(self, folder):
        self.root = Path(folder)
        self.n = sum(1 for p in self.root.iterdir() if p.is_file() and re.fullmatch(r"\d+\.pt", p.name))

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        i = int(i)
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError(i)
        d = torch.load(self.root / f"{i}.pt", weights_only=True)
        return [d["x"], d["y"]]


# ---------------------------------------------------------------- 5 pad_collate

def _lengths_and_tokens(batch):
    tokens = [torch.as_tensor(t, dtype=torch.long).reshape(-1) for t, _ in batch]
    labels = torch.tensor([int(l) for _, l in batch], dtype=torch.long)
    return tokens, labels


def pad_collate__wrong__mask_marks_padding(batch):
    """The mask is True on padding (nn.MultiheadAttention's key_padding_mask convention), the reverse of what is asked."""
    tokens, labels = _lengths_and_tokens(batch)
    T = max(len(t) for t in tokens)
    ids = torch.zeros(len(tokens), T, dtype=torch.long)
    mask = torch.ones(len(tokens), T, dtype=torch.bool)
    for i, t in enumerate(tokens):
        ids[i, :len(t)] = t
        mask[i, :len(t)] = False
    return ids, mask, labels


def pad_collate__wrong__pads_minus_100(batch):
    """Pads input_ids with -100 (the loss ignore_index) instead of 0."""
    tokens, labels = _lengths_and_tokens(batch)
    T = max(len(t) for t in tokens)
    ids = torch.full((len(tokens), T), -100, dtype=torch.long)
    mask = torch.zeros(len(tokens), T, dtype=torch.bool)
    for i, t in enumerate(tokens):
        ids[i, :len(t)] = t
        mask[i, :len(t)] = True
    return ids, mask, labels


def pad_collate__wrong__sorted_by_length(batch):
    """Sorts the batch by decreasing length (the pack_padded_sequence habit): rows and labels no longer follow the batch's order."""
    batch = sorted(batch, key=lambda p: len(p[0]), reverse=True)
    tokens, labels = _lengths_and_tokens(batch)
    T = max(len(t) for t in tokens)
    ids = torch.zeros(len(tokens), T, dtype=torch.long)
    mask = torch.zeros(len(tokens), T, dtype=torch.bool)
    for i, t in enumerate(tokens):
        ids[i, :len(t)] = t
        mask[i, :len(t)] = True
    return ids, mask, labels


def pad_collate__wrong__truncates_to_shortest(batch):
    """T is the shortest sequence's length: longer sequences are cut instead of the shorter ones padded."""
    tokens, labels = _lengths_and_tokens(batch)
    T = min(len(t) for t in tokens)
    ids = torch.stack([t[:T] for t in tokens])
    mask = torch.ones(len(tokens), T, dtype=torch.bool)
    return ids, mask, labels


def pad_collate__right__scatter_by_mask(batch):
    """Right: builds the mask first as arange(T) < lengths[:, None], then writes the concatenated tokens into a zero LongTensor at the mask's positions (row-major order matches)."""
    tokens, labels = _lengths_and_tokens(batch)
    lengths = torch.tensor([len(t) for t in tokens], dtype=torch.long)
    T = int(lengths.max()) if len(tokens) else 0
    mask = torch.arange(T)[None, :] < lengths[:, None]
    ids = torch.zeros(len(tokens), T, dtype=torch.long)
    if len(tokens):
        ids[mask] = torch.cat(tokens)
    return ids, mask, labels


# ---------------------------------------------------------------- 6 class_balanced_weights

def class_balanced_weights__wrong__count_not_inverse(labels):
    """Weights each example by its class's count instead of its inverse: frequent classes get drawn even more often."""
    counts = torch.bincount(labels)
    return counts[labels].double()


def class_balanced_weights__wrong__log_inverse_frequency(labels):
    """Uses the smoothed weight log(N / count) instead of 1 / count: only partly balances (and is 0 when one class holds every example)."""
    counts = torch.bincount(labels).double()
    return torch.log(labels.numel() / counts[labels])


def class_balanced_weights__wrong__effective_number(labels):
    """Uses Cui et al.'s class-balanced-loss weight (1 - beta) / (1 - beta**count), beta = 0.9: between inverse count and uniform, classes not drawn equally."""
    beta = 0.9
    counts = torch.bincount(labels).double()
    w = (1 - beta) / (1 - beta ** counts[labels])
    return w


def class_balanced_weights__wrong__inverse_squared(labels):
    """Uses 1 / count**2: over-corrects, rare classes are drawn more often than frequent ones."""
    counts = torch.bincount(labels).double()
    return 1.0 / counts[labels] ** 2


def class_balanced_weights__right__unique_inverse(labels):
    """Right: torch.unique(return_inverse, return_counts) gives each example's class count; weight N / (classes_present * count), a constant multiple of 1 / count."""
    _, inverse, counts = torch.unique(labels, return_inverse=True, return_counts=True)
    counts = counts.double()
    return labels.numel() / (counts.numel() * counts[inverse])


# ---------------------------------------------------------------- 7 shard_indices

def shard_indices__wrong__plus_one_count(n, world_size, rank):
    """Gives each rank n // world_size + 1 indices, one too many when world_size divides n."""
    per = n // world_size + 1
    idx = [i % n for i in range(per * world_size)]
    return idx[rank::world_size]


def shard_indices__wrong__round_count(n, world_size, rank):
    """Gives each rank round(n / world_size) indices instead of ceil: some examples dropped when the fraction is under one half."""
    per = round(n / world_size)
    idx = [i % n for i in range(per * world_size)]
    return idx[rank::world_size]


def shard_indices__wrong__shuffled_default(n, world_size, rank):
    """Shuffles with randperm under a generator seeded 0, as DistributedSampler's default shuffle=True does, although shuffle=False is asked."""
    g = torch.Generator()
    g.manual_seed(0)
    order = torch.randperm(n, generator=g).tolist()
    per = -(-n // world_size)
    total = per * world_size
    order = (order * (-(-total // n)))[:total]
    return order[rank::world_size]


def shard_indices__wrong__pad_prepended(n, world_size, rank):
    """Puts the padding copies at the front of the list instead of after it, shifting which rank gets which index."""
    per = -(-n // world_size)
    total = per * world_size
    pad = [i % n for i in range(total - n)]
    idx = pad + list(range(n))
    return idx[rank::world_size]


def shard_indices__right__modulo(n, world_size, rank):
    """Right: entry j of rank r is slot r + j * world_size of the padded list, and that list repeats range(n) cyclically, so it is (r + j * world_size) % n."""
    per = -(-n // world_size)
    return [(rank + j * world_size) % n for j in range(per)]


# ---------------------------------------------------------------- 8 weighted_shard

def _total(num_samples, world_size):
    return world_size * (-(-num_samples // world_size))


def weighted_shard__wrong__rank_in_seed(weights, num_samples, world_size, rank, epoch, seed=0):
    """Seeds each rank's generator with seed + epoch + rank, so ranks make different draws instead of sharing one."""
    g = torch.Generator().manual_seed(seed + epoch + rank)
    draws = torch.multinomial(weights, _total(num_samples, world_size), replacement=True, generator=g)
    return draws[rank::world_size].tolist()


def weighted_shard__wrong__per_rank_draw(weights, num_samples, world_size, rank, epoch, seed=0):
    """Each rank draws only its own ceil(num_samples / world_size) indices from the shared seed: every rank gets the same list."""
    g = torch.Generator().manual_seed(seed + epoch)
    per = -(-num_samples // world_size)
    return torch.multinomial(weights, per, replacement=True, generator=g).tolist()


def weighted_shard__wrong__num_samples_per_rank(weights, num_samples, world_size, rank, epoch, seed=0):
    """Reads num_samples as per rank: draws num_samples * world_size and deals num_samples to each rank instead of ceil(num_samples / world_size)."""
    g = torch.Generator().manual_seed(seed + epoch)
    draws = torch.multinomial(weights, num_samples * world_size, replacement=True, generator=g)
    return draws[rank::world_size].tolist()


def weighted_shard__wrong__epoch_one_based(weights, num_samples, world_size, rank, epoch, seed=0):
    """Seeds with seed + epoch + 1, as if epochs counted from 1: every epoch gets the next epoch's draw."""
    g = torch.Generator().manual_seed(seed + epoch + 1)
    draws = torch.multinomial(weights, _total(num_samples, world_size), replacement=True, generator=g)
    return draws[rank::world_size].tolist()


def weighted_shard__right__reshape_columns(weights, num_samples, world_size, rank, epoch, seed=0):
    """Right: the same single draw on weights.double() (as WeightedRandomSampler), reshaped to rows of world_size; rank r's shard is column r."""
    g = torch.Generator()
    g.manual_seed(seed + epoch)
    total = _total(num_samples, world_size)
    draws = torch.multinomial(weights.detach().double(), total, replacement=True, generator=g)
    return [int(v) for v in draws.view(-1, world_size)[:, rank]]


# ---------------------------------------------------------------- 9 train_step

def train_step__wrong__extra_forward_for_loss(model, inputs, targets, loss_fn, optimizer):
    """Measures the returned loss with a separate no_grad forward before the training one: the extra train-mode pass updates BatchNorm's running stats twice and draws other dropout masks."""
    with torch.no_grad():
        before = loss_fn(model(inputs), targets).item()
    optimizer.zero_grad()
    loss = loss_fn(model(inputs), targets)
    loss.backward()
    optimizer.step()
    return before


def train_step__wrong__sum_loss_backward(model, inputs, targets, loss_fn, optimizer):
    """Backpropagates the mean loss times the batch size (a summed loss), so the gradient is batch-size times too large."""
    optimizer.zero_grad()
    loss = loss_fn(model(inputs), targets)
    (loss * inputs.shape[0]).backward()
    optimizer.step()
    return loss.item()


def train_step__wrong__softmax_before_loss(model, inputs, targets, loss_fn, optimizer):
    """Applies softmax to the logits before the loss (CrossEntropyLoss already applies log-softmax): wrong loss and gradients."""
    optimizer.zero_grad()
    loss = loss_fn(torch.softmax(model(inputs), dim=1), targets)
    loss.backward()
    optimizer.step()
    return loss.item()


def train_step__wrong__manual_update_ignores_optimizer(model, inputs, targets, loss_fn, optimizer):
    """Updates the weights by hand as p -= lr * grad with each group's lr, ignoring momentum and Adam's moments (optimizer.step() never runs)."""
    optimizer.zero_grad()
    loss = loss_fn(model(inputs), targets)
    loss.backward()
    with torch.no_grad():
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.sub_(group["lr"] * p.grad)
    return loss.item()


def train_step__right__grads_to_none_by_hand(model, inputs, targets, loss_fn, optimizer):
    """Right: sets every parameter's .grad to None by hand (what zero_grad(set_to_none=True) does), forward, backward, reads loss.item() and then steps."""
    params = {id(p): p for p in model.parameters()}
    for group in optimizer.param_groups:
        for p in group["params"]:
            params[id(p)] = p
    for p in params.values():
        p.grad = None
    loss = loss_fn(model(inputs), targets)
    loss.backward()
    value = float(loss.detach())
    optimizer.step()
    return value

# ---------------------------------------------------------------- 10 adam_step

def adam_step__wrong__eps_scaled_by_correction(param, grad, m, v, t, lr, betas, eps):
    """Adds eps to sqrt(v) before the bias correction, (sqrt(v) + eps) / sqrt(1 - beta2**t), so eps is scaled up on early steps."""
    b1, b2 = betas
    m_new = b1 * m + (1 - b1) * grad
    v_new = b2 * v + (1 - b2) * grad * grad
    m_hat = m_new / (1 - b1 ** t)
    denom = (v_new.sqrt() + eps) / math.sqrt(1 - b2 ** t)
    return param - lr * m_hat / denom, m_new, v_new


def adam_step__wrong__no_sqrt(param, grad, m, v, t, lr, betas, eps):
    """Divides by v_hat + eps without taking the square root of v_hat."""
    b1, b2 = betas
    m_new = b1 * m + (1 - b1) * grad
    v_new = b2 * v + (1 - b2) * grad * grad
    m_hat = m_new / (1 - b1 ** t)
    v_hat = v_new / (1 - b2 ** t)
    return param - lr * m_hat / (v_hat + eps), m_new, v_new


def adam_step__wrong__beta_times_t(param, grad, m, v, t, lr, betas, eps):
    """Bias correction 1 - beta * t instead of 1 - beta ** t (right only at t = 1)."""
    b1, b2 = betas
    m_new = b1 * m + (1 - b1) * grad
    v_new = b2 * v + (1 - b2) * grad * grad
    m_hat = m_new / (1 - b1 * t)
    v_hat = v_new / (1 - b2 * t)
    return param - lr * m_hat / (v_hat.abs().sqrt() + eps), m_new, v_new


def adam_step__wrong__v_from_new_m(param, grad, m, v, t, lr, betas, eps):
    """Second moment tracks the square of the new first moment, v = beta2 * v + (1 - beta2) * m_new**2, instead of grad**2."""
    b1, b2 = betas
    m_new = b1 * m + (1 - b1) * grad
    v_new = b2 * v + (1 - b2) * m_new * m_new
    m_hat = m_new / (1 - b1 ** t)
    v_hat = v_new / (1 - b2 ** t)
    return param - lr * m_hat / (v_hat.sqrt() + eps), m_new, v_new


def adam_step__right__torch_arrangement_in_place(param, grad, m, v, t, lr, betas, eps):
    """Right: PyTorch's own arrangement in place: m.lerp_(grad, 1 - b1), v.mul_(b2).addcmul_(grad, grad, 1 - b2), denom = sqrt(v) / sqrt(bc2) + eps, param.addcdiv_(m, denom, value=-lr / bc1)."""
    b1, b2 = betas
    m.lerp_(grad, 1 - b1)
    v.mul_(b2).addcmul_(grad, grad, value=1 - b2)
    bc1 = 1 - b1 ** t
    bc2 = 1 - b2 ** t
    denom = v.sqrt() / math.sqrt(bc2) + eps
    param.addcdiv_(m, denom, value=-lr / bc1)
    return param, m, v


# ---------------------------------------------------------------- 11 sgd_step_by_hand

def sgd_step_by_hand__wrong__sum_not_mean(W, b, x, t, lr):
    """Differentiates the summed squared error instead of the mean over the outputs: the gradient is `outputs` times too large."""
    r = 2 * (W @ x + b - t)
    return W - lr * torch.outer(r, x), b - lr * r


def sgd_step_by_hand__wrong__residual_sign_flipped(W, b, x, t, lr):
    """Uses t - y as the residual, so the step climbs the loss instead of descending it."""
    r = 2 * (t - (W @ x + b)) / t.numel()
    return W - lr * torch.outer(r, x), b - lr * r


def sgd_step_by_hand__wrong__forward_without_bias(W, b, x, t, lr):
    """The forward pass y = W x forgets the bias, so the residual and both gradients are wrong whenever b != 0."""
    r = 2 * (W @ x - t) / t.numel()
    return W - lr * torch.outer(r, x), b - lr * r


def sgd_step_by_hand__wrong__bias_not_updated(W, b, x, t, lr):
    """Updates W correctly but returns b unchanged (a copy of it)."""
    r = 2 * (W @ x + b - t) / t.numel()
    return W - lr * torch.outer(r, x), b.clone()


def sgd_step_by_hand__right__addr(W, b, x, t, lr):
    """Right: r = 2 (W x + b - t) / outputs; W_new = torch.addr(W, r, x, alpha=-lr), the rank-one update, and b_new = torch.add(b, r, alpha=-lr)."""
    r = (torch.mv(W, x) + b - t) * (2.0 / b.shape[0])
    return torch.addr(W, r, x, alpha=-lr), torch.add(b, r, alpha=-lr)


# ---------------------------------------------------------------- 12 evaluate

def _save_modes(model):
    return [(m, m.training) for m in model.modules()]


def _restore_modes(saved):
    for m, flag in saved:
        m.training = flag


def evaluate__wrong__n_from_first_batch_size(model, loader, loss_fn):
    """Counts examples as the number of batches times the first batch's size, overcounting when the last batch is smaller."""
    saved = _save_modes(model)
    model.eval()
    total_loss, correct, batches, first = 0.0, 0, 0, None
    with torch.no_grad():
        for x, y in loader:
            if first is None:
                first = len(y)
            logits = model(x)
            total_loss += loss_fn(logits, y).item() * len(y)
            correct += int((logits.argmax(1) == y).sum())
            batches += 1
    _restore_modes(saved)
    n = batches * first
    return total_loss / n, correct / n


def evaluate__wrong__accuracy_mean_of_batch_accuracies(model, loader, loss_fn):
    """Loss is averaged per example, but accuracy is the mean of the per-batch accuracies, which overweights a smaller last batch."""
    saved = _save_modes(model)
    model.eval()
    total_loss, n, accs = 0.0, 0, []
    with torch.no_grad():
        for x, y in loader:
            logits = model(x)
            total_loss += loss_fn(logits, y).item() * len(y)
            n += len(y)
            accs.append(int((logits.argmax(1) == y).sum()) / len(y))
    _restore_modes(saved)
    return total_loss / n, sum(accs) / len(accs)


def evaluate__wrong__return_inside_loop(model, loader, loss_fn):
    """The return sits inside the batch loop (indentation slip): only the first batch is evaluated."""
    saved = _save_modes(model)
    model.eval()
    total_loss, correct, n = 0.0, 0, 0
    with torch.no_grad():
        for x, y in loader:
            logits = model(x)
            total_loss += loss_fn(logits, y).item() * len(y)
            correct += int((logits.argmax(1) == y).sum())
            n += len(y)
            _restore_modes(saved)
            return total_loss / n, correct / n


def evaluate__wrong__batch_means_over_examples(model, loader, loss_fn):
    """Adds up the batch *mean* losses and divides that sum by the number of examples (instead of weighting each mean by its batch size), so the loss is about batch-size times too small."""
    saved = _save_modes(model)
    model.eval()
    total_loss, correct, n = 0.0, 0, 0
    with torch.no_grad():
        for x, y in loader:
            logits = model(x)
            total_loss += loss_fn(logits, y).item()
            correct += int((logits.argmax(1) == y).sum())
            n += len(y)
    _restore_modes(saved)
    return total_loss / n, correct / n


def evaluate__right__fsum_lists(model, loader, loss_fn):
    """Right: collects per-batch loss sums and correct counts under inference_mode, restores each module's own flag, then divides math.fsum and the integer count once by the counted total."""
    flags = {m: m.training for m in model.modules()}
    model.eval()
    loss_sums, hits, sizes = [], [], []
    try:
        with torch.inference_mode():
            for inputs, targets in loader:
                logits = model(inputs)
                k = int(targets.shape[0])
                loss_sums.append(float(loss_fn(logits, targets)) * k)
                hits.append(int(torch.eq(logits.argmax(dim=1), targets).sum()))
                sizes.append(k)
    finally:
        for m, f in flags.items():
            m.training = f
    n = sum(sizes)
    return math.fsum(loss_sums) / n, sum(hits) / n


# ---------------------------------------------------------------- 13 dropout

def dropout__wrong__drops_in_eval(x, p, training):
    """Ignores `training`: drops and rescales in evaluation too."""
    if p >= 1:
        return x * 0
    keep = (torch.rand_like(x) >= p).to(x.dtype)
    return x * keep / (1 - p)


def dropout__wrong__exact_fraction(x, p, training):
    """Drops exactly round(p * numel) positions picked by randperm: the right fraction on average but not independent draws (the count never varies)."""
    if not training:
        return x
    if p >= 1:
        return x * 0
    n = x.numel()
    k = int(round(p * n))
    keep = torch.ones(n, dtype=x.dtype, device=x.device)
    keep[torch.randperm(n, device=x.device)[:k]] = 0
    return x * keep.view_as(x) / (1 - p)


def dropout__wrong__divide_by_p(x, p, training):
    """Scales the survivors by 1 / p instead of 1 / (1 - p) (right only at p = 0.5)."""
    if not training or p == 0:
        return x
    if p >= 1:
        return x * 0
    keep = (torch.rand_like(x) >= p).to(x.dtype)
    return x * keep / p


def dropout__wrong__reseeds_each_call(x, p, training):
    """Calls torch.manual_seed(0) before drawing the mask: every call drops the same positions, and torch's global RNG is reset as a side effect."""
    if not training:
        return x
    if p >= 1:
        return x * 0
    torch.manual_seed(0)
    keep = (torch.rand_like(x) >= p).to(x.dtype)
    return x * keep / (1 - p)


def dropout__right__bernoulli_where(x, p, training):
    """Right: keep-mask from torch.empty_like(x).bernoulli_(1 - p); output torch.where(keep, x / (1 - p), 0); p == 1 returns x * 0 (zeros, gradient 0, no division by zero)."""
    if not training:
        return x
    if p >= 1:
        return x * 0
    keep = torch.empty_like(x).bernoulli_(1 - p).bool()
    return torch.where(keep, x / (1 - p), torch.zeros_like(x))


# ---------------------------------------------------------------- 14 rank_metrics

def _layout(tensors):
    """Flatten rank-major lists into sampler slot order r + j * world_size."""
    return torch.stack([t.reshape(-1) for t in tensors], dim=1).reshape(-1)


def rank_metrics__wrong__divides_by_padded_total(losses, correct, n):
    """Sums only the n real slots but divides by world_size * ceil(n / world_size), the padded count."""
    L = _layout(losses)
    C = _layout(correct)
    total = L.numel()
    return float(L[:n].double().sum()) / total, int(C[:n].sum()) / total


def rank_metrics__wrong__accuracy_counts_padding(losses, correct, n):
    """Mean loss drops the padding copies, but accuracy counts every rank's entries, padding included."""
    L = _layout(losses)
    C = _layout(correct)
    return float(L[:n].double().sum()) / n, int(C.sum()) / C.numel()


def rank_metrics__wrong__single_padding_slot(losses, correct, n):
    """Assumes at most one padding copy: when the layout is longer than n it drops only the last rank's last entry (wrong whenever two or more slots are padding)."""
    L = [t.reshape(-1) for t in losses]
    C = [t.reshape(-1) for t in correct]
    if sum(t.numel() for t in L) > n:
        L[-1] = L[-1][:-1]
        C[-1] = C[-1][:-1]
    L = torch.cat(L)
    C = torch.cat(C)
    m = L.numel()
    return float(L.double().sum()) / m, int(C.sum()) / m


def rank_metrics__wrong__pad_count_n_mod_ws(losses, correct, n):
    """Takes the number of padding slots as n % world_size instead of (world_size - n % world_size) % world_size, dropping the wrong number of trailing slots."""
    ws = len(losses)
    L = _layout(losses)
    C = _layout(correct)
    keep = L.numel() - n % ws
    return float(L[:keep].double().sum()) / keep, int(C[:keep].sum()) / keep


def rank_metrics__right__drop_last_entries(losses, correct, n):
    """Right: padding slots are the last entry (j = per - 1) of every rank r with r + (per - 1) * world_size >= n; drop those, sum the rest in float64, count hits as an int."""
    ws = len(losses)
    per = losses[0].numel()
    loss_sum, hits, count = 0.0, 0, 0
    for r in range(ws):
        k = per - 1 if r + (per - 1) * ws >= n else per
        loss_sum += float(losses[r].reshape(-1)[:k].double().sum())
        hits += int(correct[r].reshape(-1)[:k].sum())
        count += k
    assert count == n
    return loss_sum / n, hits / n


# ---------------------------------------------------------------- 15 fixed_loop

def fixed_loop__wrong__sched_per_val_batch(model, optimizer, scheduler, train_loader, val_loader, epochs):
    """Fixes the other bugs but steps the scheduler once per validation batch (indentation slip) instead of once per epoch."""
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


def fixed_loop__wrong__range_1_epochs(model, optimizer, scheduler, train_loader, val_loader, epochs):
    """Fixes the bugs but loops over range(1, epochs): one epoch fewer than asked."""
    losses = []
    for epoch in range(1, epochs):
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


def fixed_loop__wrong__zero_grad_per_epoch(model, optimizer, scheduler, train_loader, val_loader, epochs):
    """Fixes the bugs but hoists optimizer.zero_grad() out of the batch loop to once per epoch, so gradients pile up across the epoch's batches."""
    losses = []
    for epoch in range(epochs):
        model.train()
        optimizer.zero_grad()
        for xb, yb in train_loader:
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
        model.eval()
        with torch.no_grad():
            val_loss = sum(nn.functional.cross_entropy(model(xb), yb).item() for xb, yb in val_loader)
    return losses


def fixed_loop__wrong__zero_grad_after_backward(model, optimizer, scheduler, train_loader, val_loader, epochs):
    """Moves optimizer.zero_grad() between backward() and step(), so every step sees zero gradients and Adam never moves the weights."""
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in train_loader:
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.zero_grad()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
        model.eval()
        with torch.no_grad():
            val_loss = sum(nn.functional.cross_entropy(model(xb), yb).item() for xb, yb in val_loader)
    return losses


def fixed_loop__right__validate_helper(model, optimizer, scheduler, train_loader, val_loader, epochs):
    """Right: per-batch training with loss.item(), validation in eval mode under inference_mode via a helper, and one epoch-based scheduler.step() per epoch (after validation, which does not read the lr)."""
    def validate():
        model.eval()
        total = 0.0
        with torch.inference_mode():
            for xb, yb in val_loader:
                total += nn.functional.cross_entropy(model(xb), yb).item()
        return total

    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in train_loader:
            optimizer.zero_grad(set_to_none=True)
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.detach().item())
        val_loss = validate()
        scheduler.step()
    return losses


# ---------------------------------------------------------------- 16 accumulate_epoch

def _windows(loader, K):
    win = []
    for batch in loader:
        win.append(batch)
        if len(win) == K:
            yield win
            win = []
    if win:
        yield win


def accumulate_epoch__wrong__denominator_K_times_B(model, loader, loss_fn, optimizer, K):
    """Weights each mean loss by its size / (K * batch_size), a full window's count, even for the short last window or a partial batch."""
    model.train()
    B = loader.batch_size
    updates = 0
    for win in _windows(loader, K):
        optimizer.zero_grad()
        for xb, yb in win:
            (loss_fn(model(xb), yb) * (len(xb) / (K * B))).backward()
        optimizer.step()
        updates += 1
    return updates


def accumulate_epoch__wrong__divide_by_window_len(model, loader, loss_fn, optimizer, K):
    """Flushes the short window and divides by the number of micro-batches in the window, but ignores a partial batch's real size."""
    model.train()
    updates = 0
    for win in _windows(loader, K):
        optimizer.zero_grad()
        for xb, yb in win:
            (loss_fn(model(xb), yb) / len(win)).backward()
        optimizer.step()
        updates += 1
    return updates


def accumulate_epoch__wrong__zero_grad_every_batch(model, loader, loss_fn, optimizer, K):
    """Calls zero_grad before every micro-batch, so each update uses only the window's last micro-batch's gradient."""
    model.train()
    updates = 0
    for win in _windows(loader, K):
        total = sum(len(xb) for xb, _ in win)
        for xb, yb in win:
            optimizer.zero_grad()
            (loss_fn(model(xb), yb) * (len(xb) / total)).backward()
        optimizer.step()
        updates += 1
    return updates


def accumulate_epoch__wrong__returns_batch_count(model, loader, loss_fn, optimizer, K):
    """Trains correctly but returns the number of micro-batches instead of the number of updates."""
    model.train()
    batches = 0
    for win in _windows(loader, K):
        total = sum(len(xb) for xb, _ in win)
        optimizer.zero_grad()
        for xb, yb in win:
            (loss_fn(model(xb), yb) * (len(xb) / total)).backward()
            batches += 1
        optimizer.step()
    return batches


def accumulate_epoch__right__sum_then_divide_grads(model, loader, loss_fn, optimizer, K):
    """Right: streams the batches, backpropagates each mean loss times its real size (a sum), counts the window's examples, and divides every gradient by that count just before each step (flushing the short window)."""
    model.train()
    optimizer.zero_grad(set_to_none=True)
    params = [p for g in optimizer.param_groups for p in g["params"]]
    updates, in_window, examples = 0, 0, 0

    def step():
        with torch.no_grad():
            for p in params:
                if p.grad is not None:
                    p.grad.div_(examples)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for xb, yb in loader:
        k = len(xb)
        (loss_fn(model(xb), yb) * k).backward()
        examples += k
        in_window += 1
        if in_window == K:
            step()
            updates += 1
            in_window, examples = 0, 0
    if in_window:
        step()
        updates += 1
    return updates


# ---------------------------------------------------------------- 17 snapshot

def snapshot__wrong__buffers_not_cloned(model):
    """Clones the parameters but keeps the buffers (BatchNorm's running stats) as references, which later training changes."""
    params = {name for name, _ in model.named_parameters()}
    return {k: (v.detach().clone() if k in params else v) for k, v in model.state_dict().items()}


def snapshot__wrong__forces_train_after(model):
    """Switches to eval for the copy, then calls model.train() unconditionally: a model that was in eval mode comes back in train mode."""
    model.eval()
    out = {k: v.detach().clone() for k, v in model.state_dict().items()}
    model.train()
    return out


def snapshot__wrong__grad_mode_forced_on(model):
    """Turns autograd off for the copy, then back on with torch.set_grad_enabled(True) instead of restoring the previous mode: called under no_grad it leaves grad enabled."""
    torch.set_grad_enabled(False)
    out = {k: v.clone() for k, v in model.state_dict().items()}
    torch.set_grad_enabled(True)
    return out


def snapshot__wrong__drops_integer_buffers(model):
    """Copies only floating-point entries, dropping integer buffers such as BatchNorm's num_batches_tracked."""
    return {k: v.detach().clone() for k, v in model.state_dict().items() if v.is_floating_point()}


def snapshot__right__deepcopy_model(model):
    """Right: deep-copies the whole model and returns the copy's state_dict(): same names, dtypes and shapes, detached, sharing no storage with the original, which is left untouched."""
    return copy.deepcopy(model).state_dict()

# ---------------------------------------------------------------- 18 lr_range_test

def _set_lr(optimizer, lr):
    for g in optimizer.param_groups:
        g["lr"] = lr


def _train_one(model, xb, yb, loss_fn, optimizer):
    optimizer.zero_grad()
    loss = loss_fn(model(xb), yb)
    loss.backward()
    optimizer.step()
    return loss


def lr_range_test__wrong__records_old_lr(model, loader, loss_fn, optimizer, start_lr, end_lr):
    """Trains with the right rates but records the group's lr read before setting it, so lrs lags one batch behind (batch 0 reports the optimizer's initial lr)."""
    n = len(loader)
    lrs, losses = [], []
    for i, (xb, yb) in enumerate(loader):
        lrs.append(float(optimizer.param_groups[0]["lr"]))
        _set_lr(optimizer, start_lr * (end_lr / start_lr) ** (i / (n - 1)))
        losses.append(_train_one(model, xb, yb, loss_fn, optimizer).item())
    return lrs, losses


def lr_range_test__wrong__losses_as_tensors(model, loader, loss_fn, optimizer, start_lr, end_lr):
    """Records each loss as a detached 0-d tensor instead of a Python float."""
    n = len(loader)
    lrs, losses = [], []
    for i, (xb, yb) in enumerate(loader):
        lr = start_lr * (end_lr / start_lr) ** (i / (n - 1))
        _set_lr(optimizer, lr)
        losses.append(_train_one(model, xb, yb, loss_fn, optimizer).detach())
        lrs.append(lr)
    return lrs, losses


def lr_range_test__wrong__stops_before_last_batch(model, loader, loss_fn, optimizer, start_lr, end_lr):
    """Zips the loader with range(n - 1) (the n - 1 intervals), so the last batch, the one at end_lr, is never trained."""
    n = len(loader)
    lrs, losses = [], []
    for i, (xb, yb) in zip(range(n - 1), loader):
        lr = start_lr * (end_lr / start_lr) ** (i / (n - 1))
        _set_lr(optimizer, lr)
        losses.append(_train_one(model, xb, yb, loss_fn, optimizer).item())
        lrs.append(lr)
    return lrs, losses


def lr_range_test__wrong__log_interp_missing_start(model, loader, loss_fn, optimizer, start_lr, end_lr):
    """Interpolates in log space as exp(log(start) + i / (n - 1) * log(end)), using log(end) where log(end / start) belongs."""
    n = len(loader)
    lrs, losses = [], []
    for i, (xb, yb) in enumerate(loader):
        lr = math.exp(math.log(start_lr) + i / (n - 1) * math.log(end_lr))
        _set_lr(optimizer, lr)
        losses.append(_train_one(model, xb, yb, loss_fn, optimizer).item())
        lrs.append(lr)
    return lrs, losses


def lr_range_test__right__geomspace(model, loader, loss_fn, optimizer, start_lr, end_lr):
    """Right: the schedule precomputed in float64 with np.geomspace(start_lr, end_lr, len(loader)) (same geometric sequence), set on every group before each batch's step."""
    schedule = np.geomspace(start_lr, end_lr, len(loader), dtype=np.float64)
    lrs, losses = [], []
    for lr, (xb, yb) in zip(schedule, loader):
        lr = float(lr)
        for g in optimizer.param_groups:
            g["lr"] = lr
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        losses.append(float(loss.detach()))
        optimizer.step()
        lrs.append(lr)
    return lrs, losses


# ---------------------------------------------------------------- 19 checkpoint_pair

def _load(path):
    return torch.load(path, weights_only=False)


def checkpoint_pair__wrong__double_increment():
    """Saves epoch + 1 (the next epoch) and load returns the saved value + 1 again: resumes one epoch too late."""
    def save_checkpoint(path, model, optimizer, scheduler, epoch):
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(), "epoch": epoch + 1,
                    "rng": torch.get_rng_state()}, path)

    def load_checkpoint(path, model, optimizer, scheduler):
        ck = _load(path)
        model.load_state_dict(ck["model"])
        optimizer.load_state_dict(ck["optimizer"])
        scheduler.load_state_dict(ck["scheduler"])
        torch.set_rng_state(ck["rng"])
        return ck["epoch"] + 1

    return save_checkpoint, load_checkpoint


def checkpoint_pair__wrong__strict_false_whole_ckpt():
    """Loads the model with model.load_state_dict(checkpoint, strict=False) on the whole checkpoint dict: no key matches, so the weights silently stay the fresh ones."""
    def save_checkpoint(path, model, optimizer, scheduler, epoch):
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(), "epoch": epoch,
                    "rng": torch.get_rng_state()}, path)

    def load_checkpoint(path, model, optimizer, scheduler):
        ck = _load(path)
        model.load_state_dict(ck, strict=False)
        optimizer.load_state_dict(ck["optimizer"])
        scheduler.load_state_dict(ck["scheduler"])
        torch.set_rng_state(ck["rng"])
        return ck["epoch"] + 1

    return save_checkpoint, load_checkpoint


def checkpoint_pair__wrong__fresh_generator_state():
    """Saves torch.Generator().get_state(), the state of a brand-new generator, instead of torch.get_rng_state(): the restored shuffle and dropout stream is not the killed run's."""
    def save_checkpoint(path, model, optimizer, scheduler, epoch):
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(), "epoch": epoch,
                    "rng": torch.Generator().get_state()}, path)

    def load_checkpoint(path, model, optimizer, scheduler):
        ck = _load(path)
        model.load_state_dict(ck["model"])
        optimizer.load_state_dict(ck["optimizer"])
        scheduler.load_state_dict(ck["scheduler"])
        torch.set_rng_state(ck["rng"])
        return ck["epoch"] + 1

    return save_checkpoint, load_checkpoint


def checkpoint_pair__wrong__reseed_with_epoch():
    """Saves no RNG state and reseeds with torch.manual_seed(next epoch) on load: reproducible, but not the stream the uninterrupted run had."""
    def save_checkpoint(path, model, optimizer, scheduler, epoch):
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(), "epoch": epoch}, path)

    def load_checkpoint(path, model, optimizer, scheduler):
        ck = _load(path)
        model.load_state_dict(ck["model"])
        optimizer.load_state_dict(ck["optimizer"])
        scheduler.load_state_dict(ck["scheduler"])
        torch.manual_seed(ck["epoch"] + 1)
        return ck["epoch"] + 1

    return save_checkpoint, load_checkpoint


def checkpoint_pair__right__tuple_rng_first():
    """Right: saves a plain tuple (next epoch, RNG state, model, optimizer, scheduler states); load restores the RNG first with torch.random.set_rng_state (loading state dicts draws no random numbers), then the three state dicts into the given objects."""
    def save_checkpoint(path, model, optimizer, scheduler, epoch):
        payload = (int(epoch) + 1, torch.random.get_rng_state().clone(),
                   model.state_dict(), optimizer.state_dict(), scheduler.state_dict())
        torch.save(payload, path)

    def load_checkpoint(path, model, optimizer, scheduler):
        next_epoch, rng, msd, osd, ssd = torch.load(path, weights_only=False)
        torch.random.set_rng_state(rng)
        model.load_state_dict(msd)
        optimizer.load_state_dict(osd)
        scheduler.load_state_dict(ssd)
        return int(next_epoch)

    return save_checkpoint, load_checkpoint


# ---------------------------------------------------------------- 20 stop_check

def stop_check__wrong__relative_min_delta(losses, patience, min_delta=0.0):
    """Treats min_delta as relative: a check improves if it is below best * (1 - min_delta), not best - min_delta."""
    best, wait = math.inf, 0
    for i, loss in enumerate(losses, 1):
        loss = float(loss)
        if not math.isfinite(loss):
            return i
        if loss < best * (1 - min_delta):
            best, wait = loss, 0
        else:
            wait += 1
            if wait >= patience:
                return i
    return None


def stop_check__wrong__zero_based_index(losses, patience, min_delta=0.0):
    """Applies the rule right but returns the 0-based index of the stopping check instead of its 1-based number."""
    best, wait = math.inf, 0
    for i, loss in enumerate(losses):
        loss = float(loss)
        if not math.isfinite(loss):
            return i
        if loss < best - min_delta:
            best, wait = loss, 0
        else:
            wait += 1
            if wait >= patience:
                return i
    return None


def stop_check__wrong__wait_not_reset(losses, patience, min_delta=0.0):
    """Never resets the wait counter on an improvement: it counts all non-improving checks, not consecutive ones."""
    best, wait = math.inf, 0
    for i, loss in enumerate(losses, 1):
        loss = float(loss)
        if not math.isfinite(loss):
            return i
        if loss < best - min_delta:
            best = loss
        else:
            wait += 1
            if wait >= patience:
                return i
    return None


def stop_check__wrong__abs_change_improves(losses, patience, min_delta=0.0):
    """Counts any change larger than min_delta, |loss - best| > min_delta, as an improvement, so a jump upwards resets patience (and becomes the best)."""
    best, wait = math.inf, 0
    for i, loss in enumerate(losses, 1):
        loss = float(loss)
        if not math.isfinite(loss):
            return i
        if abs(loss - best) > min_delta:
            best, wait = loss, 0
        else:
            wait += 1
            if wait >= patience:
                return i
    return None


def stop_check__right__last_improvement_index(losses, patience, min_delta=0.0):
    """Right: tracks the number of the last improving check instead of a counter; a non-improving check i stops once i - last >= patience (check 0 stands for 'before training')."""
    best, last = math.inf, 0
    for i, loss in enumerate(losses, start=1):
        value = float(loss)
        if math.isnan(value) or math.isinf(value):
            return i
        if value < best - min_delta:
            best, last = value, i
        elif i - last >= patience:
            return i
    return None


# ---------------------------------------------------------------- 21 warmup_cosine_lr

def warmup_cosine_lr__wrong__warmup_denominator_plus_one(update, base_lr, warmup, total):
    """Warmup rises as base_lr * (update + 1) / (warmup + 1), so it never reaches base_lr within the warmup."""
    if update < warmup:
        return base_lr * (update + 1) / (warmup + 1)
    progress = (update - warmup) / (total - warmup)
    return base_lr * (1 + math.cos(math.pi * progress)) / 2


def warmup_cosine_lr__wrong__warmup_zero_as_one(update, base_lr, warmup, total):
    """Guards warmup = 0 by setting warmup = 1, which shifts the cosine by one update (update 0 gets base_lr via warmup, the cosine starts a step late)."""
    if warmup == 0:
        warmup = 1
    if update < warmup:
        return base_lr * (update + 1) / warmup
    progress = (update - warmup) / (total - warmup)
    return base_lr * (1 + math.cos(math.pi * progress)) / 2


def warmup_cosine_lr__wrong__floor_progress(update, base_lr, warmup, total):
    """Computes progress with integer division (update - warmup) // (total - warmup): it stays 0, so the rate stays base_lr after warmup."""
    if update < warmup:
        return base_lr * (update + 1) / warmup
    progress = (update - warmup) // (total - warmup)
    return base_lr * (1 + math.cos(math.pi * progress)) / 2


def warmup_cosine_lr__wrong__returns_tensor(update, base_lr, warmup, total):
    """Computes the cosine with torch in float32 and returns a 0-d tensor instead of a Python float."""
    if update < warmup:
        return torch.tensor(base_lr * (update + 1) / warmup)
    progress = torch.tensor((update - warmup) / (total - warmup))
    return base_lr * (1 + torch.cos(math.pi * progress)) / 2


def warmup_cosine_lr__right__halves(update, base_lr, warmup, total):
    """Right: after the warmup, half of base_lr plus half of base_lr times cos(pi * progress): the same value regrouped (exactly base_lr at progress 0 and 0 at total)."""
    if update < warmup:
        return float(base_lr * (update + 1) / warmup)
    half = base_lr / 2
    progress = (update - warmup) / (total - warmup)
    return float(half + half * math.cos(math.pi * progress))


# ---------------------------------------------------------------- 22 clip_gradients

def _grads(parameters):
    if isinstance(parameters, torch.Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def clip_gradients__wrong__clip_by_value(parameters, max_norm):
    """When the global norm exceeds max_norm it clamps every gradient element to [-max_norm, max_norm] (clip_grad_value_) instead of rescaling by one factor."""
    grads = _grads(parameters)
    total = math.sqrt(sum(float(g.detach().pow(2).sum()) for g in grads))
    if total > max_norm:
        for g in grads:
            g.clamp_(-max_norm, max_norm)
    return total


def clip_gradients__wrong__inverted_scale(parameters, max_norm):
    """Scales by total_norm / max_norm instead of max_norm / total_norm, making large gradients larger."""
    grads = _grads(parameters)
    total = math.sqrt(sum(float(g.detach().pow(2).sum()) for g in grads))
    if total > max_norm:
        for g in grads:
            g.mul_(total / max_norm)
    return total


def clip_gradients__wrong__l1_norm(parameters, max_norm):
    """Uses the global L1 norm (sum of absolute values) instead of the L2 norm, for both the test and the factor."""
    grads = _grads(parameters)
    total = sum(float(g.detach().abs().sum()) for g in grads)
    if total > max_norm:
        for g in grads:
            g.mul_(max_norm / total)
    return total


def clip_gradients__wrong__returns_squared_norm(parameters, max_norm):
    """Clips correctly but returns the sum of squares (the squared norm) instead of the norm."""
    grads = _grads(parameters)
    sq = sum(float(g.detach().pow(2).sum()) for g in grads)
    total = math.sqrt(sq)
    if total > max_norm:
        for g in grads:
            g.mul_(max_norm / total)
    return sq


def clip_gradients__right__float64_dots(parameters, max_norm):
    """Right: one pass collects the gradients, the squared norm is a sum of float64 dot products of the flattened gradients, and each gradient is multiplied in place by max_norm / norm when norm > max_norm."""
    grads = _grads(parameters)
    sq = 0.0
    for g in grads:
        flat = g.detach().reshape(-1).double()
        sq += float(torch.dot(flat, flat))
    norm = math.sqrt(sq)
    if norm > max_norm:
        factor = max_norm / norm
        with torch.no_grad():
            for g in grads:
                g.mul_(factor)
    return float(norm)


# ---------------------------------------------------------------- 23 token_window_losses

def token_window_losses__wrong__raises_on_empty_microbatch(token_losses, masks):
    """Raises ValueError as soon as one micro-batch has no real token, instead of giving it a 0 (only an all-empty window should raise)."""
    tls, ms = list(token_losses), list(masks)
    counts = [int(m.sum()) for m in ms]
    if any(c == 0 for c in counts):
        raise ValueError("micro-batch without real tokens")
    n = sum(counts)
    return [(tl * m.to(tl.dtype)).sum() / n for tl, m in zip(tls, ms)]


def token_window_losses__wrong__skips_empty_microbatch(token_losses, masks):
    """Leaves micro-batches with no real token out of the list, returning fewer than K losses."""
    tls, ms = list(token_losses), list(masks)
    n = sum(int(m.sum()) for m in ms)
    if n == 0:
        raise ValueError("no real token in the window")
    return [(tl * m.to(tl.dtype)).sum() / n for tl, m in zip(tls, ms) if int(m.sum()) > 0]


def token_window_losses__wrong__weights_by_sequences(token_losses, masks):
    """Weights each micro-batch's token mean by its number of sequences over the window's sequences, not by its number of real tokens."""
    tls, ms = list(token_losses), list(masks)
    n = sum(int(m.sum()) for m in ms)
    if n == 0:
        raise ValueError("no real token in the window")
    seqs = sum(tl.shape[0] for tl in tls)
    out = []
    for tl, m in zip(tls, ms):
        c = int(m.sum())
        if c == 0:
            out.append((tl * 0).sum())
        else:
            out.append((tl * m.to(tl.dtype)).sum() / c * (tl.shape[0] / seqs))
    return out


def token_window_losses__wrong__even_split_of_window_mean(token_losses, masks):
    """Gives every micro-batch window_mean / K (built from the whole window): the sum and gradients are right but each loss is not its own micro-batch's share."""
    tls, ms = list(token_losses), list(masks)
    n = sum(int(m.sum()) for m in ms)
    if n == 0:
        raise ValueError("no real token in the window")
    K = len(tls)
    return [sum((tl * m.to(tl.dtype)).sum() for tl, m in zip(tls, ms)) / n / K for _ in range(K)]


def token_window_losses__right__where_python_count(token_losses, masks):
    """Right: materializes both iterables once, counts real tokens as a Python int, and sums torch.where(mask, losses, 0) per micro-batch over that count (an empty micro-batch gives a 0 that still has the losses in its graph)."""
    tls = list(token_losses)
    ms = [torch.as_tensor(m).bool() for m in masks]
    n = sum(int(m.count_nonzero()) for m in ms)
    if n == 0:
        raise ValueError("the window holds no real token")
    out = []
    for tl, m in zip(tls, ms):
        zero = torch.zeros((), dtype=tl.dtype, device=tl.device)
        out.append(torch.where(m.to(tl.device), tl, zero).sum() / n)
    return out


# ---------------------------------------------------------------- 24 race_to_target

def _val_accuracy(model, val_inputs, val_targets):
    model.eval()
    with torch.no_grad():
        pred = model(val_inputs).argmax(dim=1)
    model.train()
    return int((pred == val_targets).sum()) / len(val_targets)


def _update(model, optimizer, xb, yb):
    optimizer.zero_grad()
    F.cross_entropy(model(xb), yb).backward()
    optimizer.step()


def race_to_target__wrong__stale_accuracy(model, optimizer, train_loader, val_inputs, val_targets, target, max_updates):
    """Measures the accuracy before each update and tests it after counting the update: the answer is one update late (the model was already there before it)."""
    updates = 0
    while True:
        for xb, yb in train_loader:
            acc = _val_accuracy(model, val_inputs, val_targets)
            _update(model, optimizer, xb, yb)
            updates += 1
            if acc >= target:
                return updates
            if updates >= max_updates:
                return None


def race_to_target__wrong__no_zero_grad(model, optimizer, train_loader, val_inputs, val_targets, target, max_updates):
    """Never zeroes the gradients, so each update uses the sum of all gradients so far."""
    updates = 0
    while True:
        for xb, yb in train_loader:
            F.cross_entropy(model(xb), yb).backward()
            optimizer.step()
            updates += 1
            if _val_accuracy(model, val_inputs, val_targets) >= target:
                return updates
            if updates >= max_updates:
                return None


def race_to_target__wrong__measure_per_epoch(model, optimizer, train_loader, val_inputs, val_targets, target, max_updates):
    """Measures the accuracy only at the end of each epoch (and at max_updates), so it reports the epoch's last update, not the first that reached the target."""
    updates = 0
    while True:
        for xb, yb in train_loader:
            _update(model, optimizer, xb, yb)
            updates += 1
            if updates >= max_updates:
                break
        if _val_accuracy(model, val_inputs, val_targets) >= target:
            return updates
        if updates >= max_updates:
            return None


def race_to_target__wrong__count_per_epoch(model, optimizer, train_loader, val_inputs, val_targets, target, max_updates):
    """Returns the update's position within its epoch (enumerate restarts every epoch) instead of the count since the start; the max_updates cap itself is right."""
    done = 0
    while True:
        for step, (xb, yb) in enumerate(train_loader, 1):
            _update(model, optimizer, xb, yb)
            done += 1
            if _val_accuracy(model, val_inputs, val_targets) >= target:
                return step
            if done >= max_updates:
                return None


def race_to_target__right__islice_stream(model, optimizer, train_loader, val_inputs, val_targets, target, max_updates):
    """Right: an endless generator re-iterates the loader epoch after epoch (reshuffling each time), itertools.islice caps it at max_updates, and accuracy is an int count of torch.eq divided once after each update."""
    def stream():
        while True:
            yield from train_loader

    n_val = int(val_targets.shape[0])
    for count, (xb, yb) in enumerate(itertools.islice(stream(), max_updates), start=1):
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(model(xb), yb).backward()
        optimizer.step()
        model.eval()
        with torch.inference_mode():
            hits = int(torch.eq(model(val_inputs).argmax(1), val_targets).sum())
        model.train()
        if hits / n_val >= target:
            return count
    return None


# ---------------------------------------------------------------- 25 examples_processed

def examples_processed__wrong__single_epoch_cap(updates, N, B, drop_last=False):
    """Caps the count at one epoch's examples, min(updates * B, epoch size), as if training stopped after the first epoch."""
    epoch = (N // B) * B if drop_last else N
    return int(min(updates * B, epoch))


def examples_processed__wrong__np_ceil_float(updates, N, B, drop_last=False):
    """Counts batches with np.floor / np.ceil, so the arithmetic runs in float64 and returns a numpy float instead of an int."""
    nb = np.floor(N / B) if drop_last else np.ceil(N / B)
    if nb == 0:
        return np.float64(0)
    per_epoch = nb * B if drop_last else np.float64(N)
    full, rem = updates // nb, updates % nb
    return full * per_epoch + rem * B


def examples_processed__wrong__remainder_zero_as_empty_batch(updates, N, B, drop_last=False):
    """Takes an epoch's examples as (batches - 1) * B + N % B, which counts a last batch of 0 (one batch short) when B divides N."""
    if drop_last:
        nb = N // B
        per_epoch = nb * B
    else:
        nb = -(-N // B)
        per_epoch = (nb - 1) * B + N % B
    if nb == 0:
        return 0
    full, rem = divmod(updates, nb)
    return full * per_epoch + rem * B


def examples_processed__wrong__boundary_counts_full_last(updates, N, B, drop_last=False):
    """Splits updates as (updates - 1) // batches full epochs plus 1..batches batches of size B: at an epoch boundary the short last batch is counted as a full one."""
    nb = N // B if drop_last else -(-N // B)
    per_epoch = nb * B if drop_last else N
    if updates == 0 or nb == 0:
        return 0
    full = (updates - 1) // nb
    rem = updates - full * nb
    return full * per_epoch + rem * B


def examples_processed__right__subtract_shortfall(updates, N, B, drop_last=False):
    """Right: every update counted as B examples, minus the shortfall B * batches - epoch_size once per completed epoch (zero under drop_last); 0 when no batch fits."""
    batches = N // B if drop_last else -(-N // B)
    if batches == 0:
        return 0
    epoch_size = batches * B if drop_last else N
    return int(updates * B - (updates // batches) * (batches * B - epoch_size))
