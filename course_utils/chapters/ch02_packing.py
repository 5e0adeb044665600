"""Padding and packing variable-length sequences with ``torch.nn.utils.rnn`` (chapter 2, collation).

``padding_facts`` pads three sequences of lengths 2, 5 and 3 on either side, packs them (sorted by torch or
refused when unsorted), unpacks them to a fixed length and undoes both. ``rnn_last_state`` runs one GRU over
the same batch padded and packed: packed, its final hidden state is each sequence's last real step; padded, the
GRU keeps running over the padding. Only shapes, booleans and exception types come back (chapter 2).
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import (invert_permutation, pack_padded_sequence, pack_sequence, pad_packed_sequence,
                                pad_sequence, unpack_sequence, unpad_sequence)

LENGTHS = (2, 5, 3)     # unsorted on purpose: a real batch comes in dataset order


def sequences(features: int = 4, seed: int = 0) -> list[torch.Tensor]:
    """Three sequences of LENGTHS steps, each step `features` numbers (chapter 2)."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(n, features, generator=g) for n in LENGTHS]


def padding_facts() -> dict[str, object]:
    """What pad_sequence, pack_padded_sequence, pad_packed_sequence and their inverses do (chapter 2)."""
    seqs = sequences()
    ids = [torch.arange(1, n + 1) for n in LENGTHS]
    lengths = torch.tensor(LENGTHS)
    out: dict[str, object] = {}
    right = pad_sequence(ids, batch_first=True, padding_value=0)
    left = pad_sequence(ids, batch_first=True, padding_value=0, padding_side="left")
    out["pad_sequence batch_first=True"] = tuple(right.shape)
    out["pad_sequence default (time first)"] = tuple(pad_sequence(ids).shape)
    out["first row, padding_side='right'"] = right[0].tolist()
    out["first row, padding_side='left'"] = left[0].tolist()
    padded = pad_sequence(seqs, batch_first=True)
    try:
        pack_padded_sequence(padded, lengths, batch_first=True, enforce_sorted=True)
        out["unsorted lengths, enforce_sorted=True"] = "accepted"
    except RuntimeError as err:
        out["unsorted lengths, enforce_sorted=True"] = type(err).__name__
    packed = pack_padded_sequence(padded, lengths, batch_first=True, enforce_sorted=False)
    out["packed: real steps only"] = f"{packed.data.shape[0]} of {padded.shape[0] * padded.shape[1]} slots"
    out["packed: steps per time"] = packed.batch_sizes.tolist()
    out["sorted_indices (longest first)"] = packed.sorted_indices.tolist()
    out["invert_permutation(sorted) == unsorted_indices"] = torch.equal(
        invert_permutation(packed.sorted_indices), packed.unsorted_indices)
    same = pack_sequence(seqs, enforce_sorted=False)
    out["pack_sequence == pack_padded_sequence"] = torch.equal(same.data, packed.data)
    back, back_lengths = pad_packed_sequence(packed, batch_first=True, padding_value=-1.0, total_length=7)
    out["pad_packed_sequence total_length=7"] = tuple(back.shape)
    out["lengths given back"] = back_lengths.tolist()
    out["padding_value=-1 fills the rest"] = bool((back[0, 2:] == -1).all())
    out["unpad_sequence round trip"] = all(torch.equal(a, b) for a, b in zip(
        unpad_sequence(padded, lengths, batch_first=True), seqs))
    out["unpack_sequence round trip"] = all(torch.equal(a, b) for a, b in zip(unpack_sequence(packed), seqs))
    return out


def rnn_last_state(seed: int = 0, hidden: int = 8) -> dict[str, object]:
    """A GRU's final hidden state on the packed and on the padded batch, against each sequence's last real step."""
    torch.manual_seed(seed)
    gru = nn.GRU(4, hidden, batch_first=True)
    seqs = sequences(seed=seed)
    lengths = torch.tensor(LENGTHS)
    padded = pad_sequence(seqs, batch_first=True)
    with torch.no_grad():
        last_real = torch.stack([gru(s[None])[1][0, 0] for s in seqs])           # each sequence alone
        _, h_packed = gru(pack_padded_sequence(padded, lengths, batch_first=True, enforce_sorted=False))
        _, h_padded = gru(padded)
    gap = (h_padded[0] - last_real).abs().amax(dim=1)
    shorter = [i for i, n in enumerate(LENGTHS) if n < max(LENGTHS)]
    return {"packed h_n == last real step, all 3": bool(torch.allclose(h_packed[0], last_real, atol=1e-5)),
            "padded h_n == last real step": sum(bool(g < 1e-5) for g in gap),
            "shorter sequences off by > 0.01": sum(bool(gap[i] > 1e-2) for i in shorter),
            "shorter sequences": len(shorter)}


def label_padding_lines(lengths=(2, 4, 6), prompt: int = 1, vocab: int = 10, seed: int = 0) -> list[str]:
    """Token labels of an SFT batch padded by a collate, with -100 and with the pad id 0, and the prompt's labels
    masked with -100: how many positions cross_entropy counts, and whether its mean is the mean over the tokens
    meant to count (chapter 2)."""
    from torch.nn import functional as F
    g = torch.Generator().manual_seed(seed)
    labels = [torch.randint(1, vocab, (n,), generator=g) for n in lengths]
    longest = max(lengths)
    logits = torch.randn(len(lengths), longest, vocab, generator=g)
    per_token = [F.cross_entropy(logits[i, :n], labels[i], reduction="none") for i, n in enumerate(lengths)]
    lines = []
    for name, pad in (("-100", -100), ("the pad id 0", 0)):
        padded = pad_sequence(labels, batch_first=True, padding_value=pad)
        loss = F.cross_entropy(logits.reshape(-1, vocab), padded.reshape(-1))       # ignore_index is -100
        counted = int((padded != -100).sum())
        real = torch.cat(per_token).mean()
        lines.append(f"labels padded with {name}: {counted} of {padded.numel()} positions counted; the loss is the "
                     f"mean over the {sum(lengths)} real tokens: {torch.allclose(loss, real)}")
    masked = [lab.clone() for lab in labels]
    for lab in masked:
        lab[:prompt] = -100                                                           # the prompt is not learned
    padded = pad_sequence(masked, batch_first=True, padding_value=-100)
    loss = F.cross_entropy(logits.reshape(-1, vocab), padded.reshape(-1))
    response = torch.cat([t[prompt:] for t in per_token]).mean()
    first = "first label" if prompt == 1 else f"first {prompt} labels"
    lines.append(f"each sequence's {first} (its prompt) set to -100 as well: {int((padded != -100).sum())} "
                 f"positions counted; the loss is the mean over the response tokens: {torch.allclose(loss, response)}")
    return lines


def segment_sum_lines(sizes=(0, 3, 0)) -> list[str]:
    """Graphs batched the usual way (graph neural network libraries): every node's features stacked, and a batch
    vector giving each node its graph's index. Pooling per graph sums the rows of each index; an output sized from
    the largest index present (batch.max() + 1) loses trailing graphs with no nodes, and one sized from the number
    of graphs keeps them (chapter 2)."""
    batch = torch.cat([torch.full((n,), i) for i, n in enumerate(sizes)])
    x = torch.ones(len(batch), 2)
    from_max = torch.zeros(int(batch.max()) + 1, 2).index_add_(0, batch, x)
    from_count = torch.zeros(len(sizes), 2).index_add_(0, batch, x)
    return [f"{len(sizes)} graphs of {list(sizes)} nodes: batch vector {batch.tolist()}",
            f"sum per graph, output sized batch.max() + 1: {from_max.shape[0]} rows; sized by the number of graphs: "
            f"{from_count.shape[0]} rows, {from_count[:, 0].tolist()}",
            f"torch.bincount(batch): {torch.bincount(batch).tolist()}; with minlength={len(sizes)}: "
            f"{torch.bincount(batch, minlength=len(sizes)).tolist()}"]
