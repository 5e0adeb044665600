"""Chapter 7: what an in-batch contrastive loss (SimCLR's NT-Xent, InfoNCE) computes per anchor, and what the batch
size does to it.

Two views of N examples make 2N embeddings. For each one, the anchor, the loss is a cross-entropy over its
similarities (cosine / temperature) with the 2N - 1 others: the target is its other view; every other embedding of
the batch is a negative, including views of examples of the same class. SupCon (Khosla et al., 2020) takes labels:
each anchor's positives are all views of its class, each one a term of its own over the same denominator, averaged.
"""
from __future__ import annotations

import math

import torch
from torch.nn import functional as F

TEMPERATURE = 0.5


def similarities(views: torch.Tensor) -> torch.Tensor:
    """(2N, 2N) cosine similarities of the embeddings."""
    z = F.normalize(views, dim=1)
    return z @ z.T


def _logits(similarity: torch.Tensor, temperature: float) -> torch.Tensor:
    """Similarities over the temperature, each embedding's own -inf (an anchor is never its own candidate)."""
    own = torch.eye(len(similarity), dtype=torch.bool)
    return (similarity / temperature).masked_fill(own, float("-inf"))


def nt_xent_of(similarity: torch.Tensor, temperature: float = TEMPERATURE) -> torch.Tensor:
    """SimCLR's loss from the similarities: rows 0..N-1 are first views, N..2N-1 second views; each row's target
    is its other view."""
    n = len(similarity) // 2
    target = torch.cat([torch.arange(n, 2 * n), torch.arange(n)])
    return F.cross_entropy(_logits(similarity, temperature), target)


def supcon_of(similarity: torch.Tensor, labels: torch.Tensor, temperature: float = TEMPERATURE) -> torch.Tensor:
    """SupCon's L_out from the similarities: for each anchor, the mean over its positives p (same label, not itself)
    of -log(exp(s_p) / sum over every other embedding a of exp(s_a)); then the mean over anchors."""
    log_prob = torch.log_softmax(_logits(similarity, temperature), dim=1)
    positive = (labels[:, None] == labels[None, :]) & ~torch.eye(len(labels), dtype=torch.bool)
    return (-(log_prob.masked_fill(~positive, 0).sum(1)) / positive.sum(1)).mean()


def nt_xent(first: torch.Tensor, second: torch.Tensor, temperature: float = TEMPERATURE) -> torch.Tensor:
    """SimCLR's loss of two views of a batch."""
    return nt_xent_of(similarities(torch.cat([first, second])), temperature)


def _pairs(n: int, generator: torch.Generator, noise: float = 0.3) -> tuple[torch.Tensor, torch.Tensor]:
    first = torch.randn(n, 16, generator=generator)
    return first, first + noise * torch.randn(n, 16, generator=generator)


def denominator_lines() -> list[str]:
    """One anchor's term written out against torch's cross-entropy; then a batch where two examples share a class:
    which way each loss moves that pair."""
    g = torch.Generator().manual_seed(0)
    first, second = _pairs(4, g)
    similarity = similarities(torch.cat([first, second]))
    row = _logits(similarity, TEMPERATURE)[0]
    terms = int(torch.isfinite(row).sum())
    by_hand = -row[4] + torch.logsumexp(row[torch.isfinite(row)], 0)
    torch_row = F.cross_entropy(row[None], torch.tensor([4]))
    lines = [f"4 examples, 8 views: anchor 0's softmax has {terms} terms (its other view, the positive, and "
             f"{terms - 1} negatives; itself left out)",
             f"  -s(0, its view) + log sum over the {terms} of exp(s): equal to torch's cross-entropy for that row: "
             f"{torch.allclose(by_hand, torch_row)}"]
    labels = torch.tensor([0, 0, 1, 2] * 2)            # examples 0 and 1 share a class
    for name, loss_of in (("NT-Xent", nt_xent_of), ("SupCon", lambda s: supcon_of(s, labels))):
        leaf = similarity.detach().requires_grad_(True)
        (grad,) = torch.autograd.grad(loss_of(leaf), leaf)
        push = grad[0, 1] + grad[1, 0]
        lines.append(f"{name}: examples 0 and 1 share a class; d loss / d similarity(0, 1) = {push.item():+.2f}: "
                     f"{'pushes them apart' if push > 0 else 'pulls them together'}")
    return lines


def batch_lines(seeds=range(5), sizes=(8, 64, 256)) -> list[str]:
    """Unrelated embeddings (nothing learned) score about log(2N - 1): the batch sets the scale of the loss and
    the most it can certify. Then one batch of 256 against 4 accumulated micro-batches of 64, over seeds."""
    lines = []
    n_seeds = len(list(seeds))
    for n in sizes:
        near = 0
        for seed in seeds:
            g = torch.Generator().manual_seed(seed)
            loss = nt_xent(torch.randn(n, 16, generator=g), torch.randn(n, 16, generator=g))
            near += abs(loss.item() - math.log(2 * n - 1)) < 0.5
        lines.append(f"batch {n:>3}: unrelated pairs score within 0.5 of log(2N - 1) = {math.log(2 * n - 1):.2f} "
                     f"on {near} of {n_seeds} seeds")
    lower = differs = 0
    for seed in seeds:
        g = torch.Generator().manual_seed(seed)
        first, second = _pairs(256, g)
        first.requires_grad_(True)
        big = nt_xent(first, second)
        (whole,) = torch.autograd.grad(big, first)
        small = sum(nt_xent(first[i:i + 64], second[i:i + 64]) for i in range(0, 256, 64)) / 4
        (accumulated,) = torch.autograd.grad(small, first)
        lower += abs(big.item() - small.item() - math.log(511 / 127)) < 0.1
        differs += ((whole - accumulated).norm() / whole.norm()).item() > 0.25
    lines.append(f"256 close pairs as one batch against 4 accumulated micro-batches of 64 (the same pairs): the "
                 f"accumulated loss lower by log(511/127) = {math.log(511 / 127):.2f} (within 0.1) on {lower} of "
                 f"{n_seeds} seeds, its gradient off the whole batch's by over a quarter of its size on "
                 f"{differs} of {n_seeds}")
    return lines


def floor_lines(sizes=(64, 256, 512), temperatures=(0.07, 0.1, 0.2, 0.5, 1.0), dim: int = 128) -> list[str]:
    """Close to the lowest NT-Xent a batch can reach: each pair's two views identical (cosine 1), the other examples
    random unit vectors in `dim` dimensions (cosines near 0), by batch size N and temperature; beside it
    log(2N - 1), the score of embeddings that learned nothing, and the closed form with every negative at cosine 0,
    log(1 + (2N - 2) exp(-1/temperature)). Not the exact minimum: negatives spread more evenly than at random (a
    simplex, cosines -1/(2N - 1)) score a little lower, most visibly when 2N is below the dimension."""
    g = torch.Generator().manual_seed(0)
    lines = [f"NT-Xent of perfect pairs with random negatives ({dim} dimensions), by temperature:",
             f"{'batch N':>8} {'learned nothing':>16}  " + "".join(f"{f'T={t:g}':>8}" for t in temperatures)]
    close = total = 0
    for n in sizes:
        z = torch.randn(n, dim, generator=g, dtype=torch.float64)      # float64: printed digits no CPU moves
        values = [nt_xent(z, z, t).item() for t in temperatures]
        formula = [math.log(1 + (2 * n - 2) * math.exp(-1 / t)) for t in temperatures]
        close += sum(abs(v - f) < 0.1 for v, f in zip(values, formula))
        total += len(values)
        lines.append(f"{n:>8} {math.log(2 * n - 1):>16.2f}  " + "".join(f"{v:>8.2f}" for v in values))
    lines.append(f"within 0.1 of log(1 + (2N - 2) exp(-1/T)), every negative at cosine 0: {close} of {total}")
    return lines


def gathered_negatives_lines() -> list[str]:
    """Negatives from every rank: `dist.all_gather` fills its output list with copies that carry no graph, so the
    loss on gathered embeddings sends no gradient back through them, not even to this rank's own. Putting the local
    tensor back in its own slot keeps this rank's part of the graph (each rank then trains its own embeddings, and
    DDP averages those gradients). Run in a one-process gloo group (an in-memory store), so every list has one
    slot. (torch.distributed.nn.functional.all_gather, which keeps the graph through the collective, is not run:
    with it, this process aborted at exit on some runs.)"""
    import torch.distributed as dist
    if dist.is_initialized():
        raise RuntimeError("gathered_negatives_lines needs a process with no default process group")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        local = torch.randn(4, 8, generator=torch.Generator().manual_seed(0), requires_grad=True)
        gathered = [torch.empty(4, 8) for _ in range(dist.get_world_size())]
        dist.all_gather(gathered, local)
        lines = [f"dist.all_gather: the gathered copy requires grad: {gathered[0].requires_grad}; a loss on it could "
                 f"reach this rank's embeddings: {gathered[0].grad_fn is not None}"]
        gathered[dist.get_rank()] = local                   # this rank's slot: the tensor with its graph
        nt_xent(torch.cat(gathered), torch.cat(gathered) + 0.1).backward()
        lines.append(f"the local tensor put back in its own slot: this rank's embeddings get a gradient: "
                     f"{local.grad is not None and bool(local.grad.abs().sum() > 0)}")
        return lines
    finally:
        dist.destroy_process_group()
