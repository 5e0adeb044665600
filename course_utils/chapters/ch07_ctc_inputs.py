"""What CTCLoss is given: raw outputs, log_softmax over the classes, or log_softmax over the wrong dimension (ch. 7).

``nn.CTCLoss`` reads log-probabilities (T, N, C). A toy speech task: 16 frames per utterance, 3 symbols out of 4
(blank is 0), each symbol spoken for 3 frames with silence between, every frame its one-hot symbol plus Gaussian
noise 0.2; a per-frame MLP (5-16-5), Adam 0.05, 70 batches of 32, then greedy decoding (best class per frame,
repeats merged, blanks dropped) of 128 held-out utterances. The outputs go to the loss four ways; with
anything but log_softmax over the classes, the loss no longer is what it claims: the value goes negative, or sits
high while the model decodes well, or sits high while what the model decodes is left to chance. And torch's CTC
backward returns the gradient as if a log_softmax over the classes sat in the graph before it (the extra term it
carries cancels in that log_softmax's backward): without one in the graph, on raw outputs and even on normalised
log-probabilities passed in as a leaf, the gradient is not the derivative of the value (``gradcheck``; pytorch/pytorch
issues 52241 and 181534).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

T, N, C, L = 16, 32, 5, 3
HELD_OUT = 128
WAYS = {"raw outputs": lambda out: out,
        "log_softmax over classes (dim 2)": lambda out: out.log_softmax(2),
        "log_softmax over time (dim 0)": lambda out: out.log_softmax(0),
        "log_softmax over the batch (dim 1)": lambda out: out.log_softmax(1)}
ERRATIC = ("log_softmax over the batch (dim 1)",)      # its decoding swung from 0% to 85% across seeds and CPU paths


def utterances(generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(frames (T, N, C), targets (N, L)): symbol i on frames 5i+1 to 5i+3, blank elsewhere, plus noise."""
    targets = torch.randint(1, C, (N, L), generator=generator)
    frames = torch.zeros(N, T, dtype=torch.long)
    for i in range(L):
        frames[:, 5 * i + 1:5 * i + 4] = targets[:, i:i + 1]
    x = F.one_hot(frames, C).float() + 0.2 * torch.randn(N, T, C, generator=generator)
    return x.transpose(0, 1), targets


def greedy(scores: torch.Tensor) -> list[list[int]]:
    """Best class per frame, repeats merged, blanks dropped: one list of symbols per utterance."""
    decoded = []
    for row in scores.argmax(2).T.tolist():
        symbols, previous = [], 0
        for c in row:
            if c != previous and c != 0:
                symbols.append(c)
            previous = c
        decoded.append(symbols)
    return decoded


def train(way: str, seed: int, steps: int = 70) -> dict[str, float]:
    """First and last-10 mean loss as CTCLoss reported it, and the share of held-out utterances decoded exactly."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(C, 16), nn.ReLU(), nn.Linear(16, C))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    generator = torch.Generator().manual_seed(seed)
    lengths, target_lengths = torch.full((N,), T), torch.full((N,), L)
    losses = []
    for _ in range(steps):
        x, y = utterances(generator)
        loss = nn.CTCLoss()(WAYS[way](model(x)), y, lengths, target_lengths)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    held_out = torch.Generator().manual_seed(1000 + seed)
    right = 0
    with torch.no_grad():
        for _ in range(HELD_OUT // N):
            x, y = utterances(held_out)
            right += sum(d == t for d, t in zip(greedy(model(x)), y.tolist()))
    right /= HELD_OUT
    return {"first": losses[0], "last": sum(losses[-10:]) / 10, "decoded": right}


def _same(x: torch.Tensor) -> torch.Tensor:
    return x


def _classes(x: torch.Tensor) -> torch.Tensor:
    return x.log_softmax(2)


GRADCHECKS = {                         # case: (applied before the tensor gradcheck differentiates, applied inside)
    "raw outputs": (_same, _same),
    "log-probabilities computed before, passed in as a leaf": (_classes, _same),
    "log_softmax over the classes in the graph": (_same, _classes),
}


def gradient_matches_value(case: str) -> bool:
    """torch.autograd.gradcheck of CTCLoss for a GRADCHECKS case, in float64: is the gradient the derivative of the
    value with respect to what CTCLoss is given (or, in the graph, to the outputs before the log_softmax)?"""
    before, inside = GRADCHECKS[case]
    x = before(torch.randn(6, 1, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0)))
    loss = lambda z: nn.CTCLoss(reduction="sum")(inside(z), torch.tensor([[1, 2]]),   # noqa: E731
                                                   torch.tensor([6]), torch.tensor([2]))
    return torch.autograd.gradcheck(loss, (x.requires_grad_(),), raise_exception=False)


LADDER = (-10, 0, 0.1, 1, 8, 10, 12, 13, 20)


def _between(values: list[float]) -> str:
    """The narrowest rungs of LADDER holding every value ("between 8 and 10"): a range that last-bit differences
    between CPUs do not move, where each seed's own digits would."""
    low = max(r for r in LADDER if r <= min(values))
    high = min(r for r in LADDER if r >= max(values))
    return f"{low:g} to {high:g}"


def ctc_input_lines(seeds=range(5), steps: int = 70) -> list[str]:
    n = len(seeds)
    runs = {way: [train(way, s, steps) for s in seeds] for way in WAYS}
    lines = [f"{n} seeds, {steps} batches of {N}; CTCLoss given:{'':5} first loss   last-10 mean   held-out "
             f"utterances decoded exactly: at least 80%"]
    for way, rs in runs.items():
        decoded = (f"on {sum(r['decoded'] >= 0.8 for r in rs)} of {n}" if way not in ERRATIC else
                   "not counted: it swings from seed to seed and from one CPU code path to another")
        lines.append(f"  {way:36} {_between([r['first'] for r in rs]):>10}   {_between([r['last'] for r in rs]):>12}"
                     f"   {decoded}")
    torch.manual_seed(0)
    out = nn.Linear(C, C)(utterances(torch.Generator().manual_seed(0))[0])
    sums = {way: bool(torch.allclose(f(out).exp().sum(2), torch.ones(T, N), atol=1e-5)) for way, f in WAYS.items()}
    lines.append("the check to run on real outputs, log_probs.exp().sum(dim=2) is 1 at every frame: "
                 + ", ".join(f"{way.split(' (')[0]} {ok}" for way, ok in sums.items()))
    lines.append("gradcheck (is CTCLoss's gradient the derivative of its value?): " + "; ".join(
        f"{case} {gradient_matches_value(case)}" for case in GRADCHECKS))
    return lines
