"""A language model that never stops: padding with the end-of-sequence token, then masking the labels by id (ch. 2).

Four short sequences over the letters a-f, each ending with the end-of-sequence token, padded to 8 with the same
token (``pad_token = eos_token``, the usual move when a tokenizer has no pad token). A tiny GRU language model
learns next-token prediction with CrossEntropyLoss(ignore_index=-100), the padding's labels set to -100 one of two
ways: by id (``labels[labels == pad_id] = -100``, a common idiom), which masks every end-of-sequence label too, or
by the attention mask, which masks only the padding after it. Then greedy generation from each sequence's first
letter, at most 12 tokens: does the model ever emit the end token?
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

EOS = PAD = 0
SEQUENCES = ([1, 2, 3, EOS], [4, 5, 6, 5, 4, EOS], [2, 3, 1, EOS], [6, 4, 6, 4, 6, 4, EOS])
LENGTH, VOCAB, LIMIT = 8, 7, 12
RULES = ("labels == pad id", "attention mask")


def padded() -> tuple[torch.Tensor, torch.Tensor]:
    """(input ids, attention mask), each (4, 8): the sequences padded with the end token."""
    ids = torch.full((len(SEQUENCES), LENGTH), PAD)
    mask = torch.zeros(len(SEQUENCES), LENGTH, dtype=torch.long)
    for row, sequence in enumerate(SEQUENCES):
        ids[row, :len(sequence)] = torch.tensor(sequence)
        mask[row, :len(sequence)] = 1
    return ids, mask


def labels_for(rule: str) -> torch.Tensor:
    """Next-token labels (4, 7) with -100 where the loss must not look, by `rule`."""
    ids, mask = padded()
    labels = ids[:, 1:].clone()
    if rule == RULES[0]:
        labels[labels == PAD] = -100
    else:
        labels[mask[:, 1:] == 0] = -100
    return labels


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed, self.gru, self.out = nn.Embedding(VOCAB, 16), nn.GRU(16, 32, batch_first=True), nn.Linear(32, VOCAB)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.out(self.gru(self.embed(ids))[0])


def train_and_generate(rule: str, seed: int, steps: int = 120) -> list[list[int]]:
    """Adam on the four sequences for `steps` full-batch steps, then greedy generation from each first letter."""
    torch.manual_seed(seed)
    model = TinyLM()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    ids, _ = padded()
    labels = labels_for(rule)
    for _ in range(steps):
        loss = F.cross_entropy(model(ids[:, :-1]).reshape(-1, VOCAB), labels.reshape(-1), ignore_index=-100)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    generated = []
    with torch.no_grad():
        for sequence in SEQUENCES:
            tokens = [sequence[0]]
            for _ in range(LIMIT):
                tokens.append(int(model(torch.tensor([tokens]))[0, -1].argmax()))
                if tokens[-1] == EOS:
                    break
            generated.append(tokens)
    return generated


def _text(tokens: list[int]) -> str:
    return " ".join("<eos>" if t == EOS else "abcdef"[t - 1] for t in tokens)


def pad_eos_lines(seeds=range(5)) -> list[str]:
    lines = []
    for rule in RULES:
        runs = [train_and_generate(rule, seed) for seed in seeds]
        right = sum(g == list(s) for run in runs for g, s in zip(run, SEQUENCES))
        stopped = sum(g[-1] == EOS for run in runs for g in run)
        lines.append(f"labels masked by {rule}: end-token labels left in the loss {int((labels_for(rule) == EOS).sum())}"
                     f" of {len(SEQUENCES)}; generations that stopped {stopped} of {len(SEQUENCES) * len(runs)}, "
                     f"exactly the training sequence {right} ({len(runs)} seeds)")
        lines.append("  seed 0: " + " | ".join(_text(g) for g in runs[0]))
    return lines
