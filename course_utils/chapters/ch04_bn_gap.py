"""BatchNorm's train-mode and eval-mode outputs after its running statistics have converged (chapter 4).

Train mode divides by the batch's biased variance, while the running variance tracks the unbiased one: for the very
batch the buffers hold, eval outputs are sqrt((n-1)/n) times the train outputs. On fresh batches that factor is no
part of the gap; the gap is each batch normalised by its own statistics, measured here against buffers converged
as cumulative averages.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def converged_gap(batch=(0.0, 1.0), passes: int = 200) -> dict[str, object]:
    """The same batch through BatchNorm1d(1) in train mode `passes` times, until the running statistics have
    converged to the batch's; then its train-mode and eval-mode outputs, and the two variances (chapter 4)."""
    bn = nn.BatchNorm1d(1, affine=False)
    x = torch.tensor(batch).reshape(-1, 1)
    with torch.no_grad():
        bn.train()
        for _ in range(passes):
            train_out = bn(x)
        bn.eval()
        eval_out = bn(x)
    return {"running": (round(bn.running_mean.item(), 6), round(bn.running_var.item(), 6)),
            "biased": float(x.var(unbiased=False)), "unbiased": float(x.var(unbiased=True)),
            "train": [round(v, 4) for v in train_out.flatten().tolist()],
            "eval": [round(v, 4) for v in eval_out.flatten().tolist()], "n": len(batch)}


def varying_batches_gap(sizes=(2, 8, 32), warm: int = 2000, fresh: int = 1000, seed: int = 0) -> list[dict]:
    """Real batches vary: BatchNorm1d(1, momentum=None) run on `warm` batches of N(0, 1) values of each size (its
    buffers the cumulative averages, converged), then frozen; `fresh` new batches normalised by their own statistics (train mode's rule, computed without touching
    the buffers) and by the buffers (eval mode). Per size: the RMS of each mode's outputs, the mean |train - eval|
    per value, and the same gap had the buffers held the biased variance, (n-1)/n of theirs (chapter 4)."""
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for n in sizes:
        bn = nn.BatchNorm1d(1, affine=False, momentum=None)     # a cumulative average: converged, not an EMA's noise
        with torch.no_grad():
            bn.train()
            for _ in range(warm):
                bn(torch.randn(n, 1, generator=generator))
            x = torch.cat([torch.randn(n, 1, generator=generator) for _ in range(fresh)]).view(fresh, n, 1)
            train_out = torch.cat([F.batch_norm(b, None, None, training=True, eps=bn.eps) for b in x])
            bn.eval()
            eval_out = bn(x.reshape(-1, 1))
            biased = F.batch_norm(x.reshape(-1, 1), bn.running_mean, bn.running_var * (n - 1) / n, training=False,
                                  eps=bn.eps)
        rows.append({"n": n, "rms_train": train_out.pow(2).mean().sqrt().item(),
                     "rms_eval": eval_out.pow(2).mean().sqrt().item(),
                     "gap": (train_out - eval_out).abs().mean().item(),
                     "gap_biased": (train_out - biased).abs().mean().item()})
    return rows
