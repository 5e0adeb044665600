"""Chapter 4: what an evaluation keeps until its metric runs. Concatenating every batch's logits (what a trainer
that hands all predictions to one metric function does) holds examples × positions × vocabulary numbers; reducing
each batch first (its argmax, or the metric's counts) holds a tiny fraction, and the metric comes out the same."""
from __future__ import annotations

import torch
from torch import nn


def kept_outputs(batches: int = 8, batch: int = 16, length: int = 64, vocab: int = 2000, seed: int = 0) -> dict:
    """A token head (vocab → vocab logits, fixed weights that mostly copy the input token) evaluated on `batches`
    batches, 15% of positions labelled (-100 elsewhere), three ways: every batch's logits kept and concatenated before the accuracy; each batch reduced
    to its argmax ids first; each batch reduced to (correct, counted). Bytes held at the end, and the accuracies."""
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = nn.Embedding(vocab, vocab)                      # a stand-in for a trained head: it mostly copies
    with torch.no_grad():
        model.weight.copy_(3 * torch.eye(vocab) + torch.randn(vocab, vocab, generator=g))
    data = []
    for _ in range(batches):
        tokens = torch.randint(0, vocab, (batch, length), generator=g)
        labelled = torch.rand(batch, length, generator=g) < 0.15
        labels = torch.where(labelled, tokens, torch.tensor(-100))
        data.append((tokens, labels))
    logits_kept, ids_kept, counts, labels_kept = [], [], torch.zeros(2, dtype=torch.int64), []
    with torch.no_grad():
        for tokens, labels in data:
            logits = model(tokens)
            logits_kept.append(logits)                       # all of it, until the metric
            ids_kept.append(logits.argmax(-1))               # reduced per batch (preprocess the logits)
            mask = labels != -100
            counts += torch.stack([(logits.argmax(-1)[mask] == labels[mask]).sum(), mask.sum()])
            labels_kept.append(labels)
    labels = torch.cat(labels_kept)
    mask = labels != -100

    def accuracy(predicted: torch.Tensor) -> float:
        return (predicted[mask] == labels[mask]).float().mean().item()
    everything = torch.cat(logits_kept)
    return {"shape": tuple(everything.shape),
            "bytes": {"logits": everything.numel() * everything.element_size(),
                      "argmax ids": sum(t.numel() * t.element_size() for t in ids_kept),
                      "counts": counts.numel() * counts.element_size()},
            "accuracy": {"logits": accuracy(everything.argmax(-1)), "argmax ids": accuracy(torch.cat(ids_kept)),
                         "counts": counts[0].item() / counts[1].item()}}


def scaled_bytes(examples: int, length: int, vocab: int) -> dict[str, float]:
    """Gigabytes an evaluation holds for examples × length × vocab logits (float32, float16) and for the argmax ids
    (int64)."""
    n = examples * length
    return {"float32 logits": n * vocab * 4 / 1e9, "float16 logits": n * vocab * 2 / 1e9, "int64 ids": n * 8 / 1e9}
