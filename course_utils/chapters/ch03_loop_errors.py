"""Chapter 3: three errors learners hit in their first loops, each run, caught and fixed.

- ``hidden_state_run``: a recurrent state carried from batch to batch without ``.detach()`` makes the
  second batch's backward walk into the first batch's freed graph (RuntimeError); ``retain_graph=True``
  trades it for another RuntimeError, because ``optimizer.step()`` changed weights that graph saved;
  ``.detach()`` at each batch start is the fix.
- ``inplace_run``: an in-place change of a tensor autograd saved for backward fails at backward, not
  where it happened; autograd notices through the tensor's version counter.
- ``wrong_params_run``: an optimizer built over parameters the loop does not use trains nothing, silently.

Every function returns facts (exception type names, booleans, counts), never an error message's text.
"""
from __future__ import annotations

import copy
import re
from dataclasses import dataclass

import torch
from torch import nn

from course_utils.engine.models import MLP

BATCHES = 4          # batches of the hidden-state run
SEQ = 3              # time steps per batch


@dataclass(frozen=True)
class Outcome:
    """How a run ended: the batch (1-based) whose backward raised and the exception's type name, or no error."""

    error: str = ""            # "" when every batch trained
    at_batch: int = 0          # the batch whose backward raised (0: none)
    says_freed: bool = False   # torch's message reports the graph as already freed
    says_inplace: bool = False  # torch's message reports a saved tensor modified in place
    updates: int = 0           # optimizer steps taken

    def describe(self) -> str:
        """One line: what happened, in facts (never torch's own words)."""
        if not self.error:
            return f"no error, {self.updates} updates"
        reason = "the graph was already freed" if self.says_freed else \
            "a saved tensor was modified in place" if self.says_inplace else "another reason"
        return f"{self.error} at batch {self.at_batch}'s backward ({reason})"


def _outcome(exc: Exception, batch: int, updates: int) -> Outcome:
    text = str(exc)
    return Outcome(type(exc).__name__, batch, "second time" in text or "already been freed" in text,
                   "modified by an inplace operation" in text, updates)


def hidden_state_run(fix: str = "none", seed: int = 0) -> Outcome:
    """A small RNN trained on consecutive batches with its hidden state carried over (chapter 3).

    fix: "none" (the bug), "detach" (``h = h.detach()`` at each batch start), or "retain_graph"
    (``backward(retain_graph=True)``, the fix the first error seems to ask for).
    """
    if fix not in ("none", "detach", "retain_graph"):
        raise ValueError(f"fix must be 'none', 'detach' or 'retain_graph', got {fix!r}")
    torch.manual_seed(seed)
    cell, head = nn.RNNCell(2, 8), nn.Linear(8, 1)
    optimizer = torch.optim.SGD([*cell.parameters(), *head.parameters()], lr=0.1)
    g = torch.Generator().manual_seed(seed)
    h = torch.zeros(4, 8)
    for batch in range(1, BATCHES + 1):
        x, target = torch.randn(SEQ, 4, 2, generator=g), torch.randn(4, 1, generator=g)
        if fix == "detach":
            h = h.detach()                      # keep the values, cut the link to the previous batch's graph
        for step in range(SEQ):
            h = cell(x[step], h)
        loss = nn.functional.mse_loss(head(h), target)
        optimizer.zero_grad()
        try:
            loss.backward(retain_graph=fix == "retain_graph")
        except RuntimeError as exc:
            return _outcome(exc, batch, batch - 1)
        optimizer.step()
    return Outcome(updates=BATCHES)


def graph_reach(detach: bool, batches: int = BATCHES, seed: int = 0) -> list[int]:
    """How many RNN-cell steps each batch's loss reaches back through, with or without detach (chapter 3)."""
    torch.manual_seed(seed)
    cell = nn.RNNCell(2, 8)
    g = torch.Generator().manual_seed(seed)
    h, reach = torch.zeros(4, 8), []
    for _ in range(batches):
        if detach:
            h = h.detach()
        for _ in range(SEQ):
            h = cell(torch.randn(4, 2, generator=g), h)
        reach.append(_count(h.grad_fn, "TanhBackward0"))
    return reach


def _count(node, name: str) -> int:
    """Distinct nodes called `name` reachable from `node` in the autograd graph."""
    seen, stack = set(), [node]
    while stack:
        n = stack.pop()
        if n is None or n in seen:
            continue
        seen.add(n)
        stack.extend(child for child, _ in n.next_functions)
    return sum(type(n).__name__ == name for n in seen)


@dataclass(frozen=True)
class InplaceResult:
    """One in-place case: did forward pass, did backward raise, and the saved tensor's version counter."""

    forward_ran: bool
    error: str                 # exception type name at backward, "" if none
    says_inplace: bool
    version_saved: int         # the tensor's version when autograd saved it
    version_at_backward: int
    names: str = ""            # how torch's message names the changed tensor ("output 0 of Exp")


def inplace_run(case: str, seed: int = 0) -> InplaceResult:
    """Change a tensor in place after an operation (chapter 3) and try backward.

    case: "exp then +=" (exp saves its output: fails), "exp then +" (out of place: fine),
    "linear then +=" (a Linear does not save its output: fine), "sigmoid then ReLU(inplace=True)"
    (sigmoid saves its output: fails), "linear then ReLU(inplace=True)" (fine).
    """
    torch.manual_seed(seed)
    layer = nn.Linear(3, 3)
    x = torch.randn(4, 3)
    first, second = case.split(" then ")
    z = layer(x)
    h = torch.exp(z) if first == "exp" else torch.sigmoid(z) if first == "sigmoid" else z
    saved = h._version
    if second == "+=":
        h += 1
    elif second == "+":
        h = h + 1
    elif second == "ReLU(inplace=True)":
        h = nn.ReLU(inplace=True)(h)
    else:
        raise ValueError(f"unknown case {case!r}")
    after = h._version
    try:
        h.sum().backward()
    except RuntimeError as exc:
        named = re.search(r"which is (output \d+ of \w+)", str(exc))
        return InplaceResult(True, type(exc).__name__, "modified by an inplace operation" in str(exc), saved, after,
                             named.group(1) if named else "")
    return InplaceResult(True, "", False, saved, after)


@dataclass(frozen=True)
class WrongParams:
    """An optimizer over the wrong parameters: how much of the model it holds and what training did."""

    held: int                  # the model's parameters the optimizer holds
    total: int                 # the model's parameters
    loss_before: float
    loss_after: float
    error: str = ""            # exception type name when building the optimizer failed


def held_by(model: nn.Module, optimizer: torch.optim.Optimizer) -> int:
    """How many of the model's parameters the optimizer updates (the check to print after building it; chapter 3)."""
    ids = {id(p) for group in optimizer.param_groups for p in group["params"]}
    return sum(id(p) in ids for p in model.parameters())


def wrong_params_run(case: str, seed: int = 0, steps: int = 30) -> WrongParams:
    """Train the spiral MLP on one fixed batch with an optimizer built one of three ways (chapter 3).

    case: "right" (built over the model the loop trains); "model rebuilt" (``model = MLP()`` again after
    the optimizer, like re-running a notebook cell); "generator used twice" (``params = model.parameters()``
    passed to a first consumer, then to the optimizer: it gets nothing).
    """
    from course_utils.engine.data import make_spiral

    x, y = make_spiral(96, seed=seed).tensors
    torch.manual_seed(seed)
    model = MLP(hidden=16)
    if case == "right":
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    elif case == "model rebuilt":
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
        model = MLP(hidden=16)                               # a new model; the optimizer holds the old one
    elif case == "generator used twice":
        params = model.parameters()
        sum(p.numel() for p in params)                        # e.g. counting the parameters: uses the generator up
        try:
            optimizer = torch.optim.Adam(params, lr=0.01)
        except ValueError as exc:
            return WrongParams(0, len(list(model.parameters())), float("nan"), float("nan"), type(exc).__name__)
    else:
        raise ValueError(f"unknown case {case!r}")
    with torch.no_grad():
        before = nn.functional.cross_entropy(model(x), y).item()
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    with torch.no_grad():
        after = nn.functional.cross_entropy(model(x), y).item()
    return WrongParams(held_by(model, optimizer), len(list(model.parameters())), before, after)



def two_network_rules(seed: int = 0) -> dict[str, object]:
    """A generator G and a discriminator D, as a GAN or an adversarial VAE trains them (chapter 3): what D's loss does
    to G with and without detach, and G's loss reusing D's output after D's step, against one from a fresh forward."""
    torch.manual_seed(seed)
    G, D = nn.Linear(2, 3), nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    opt_d = torch.optim.Adam(D.parameters(), lr=0.01)
    z, real = torch.randn(8, 2), torch.randn(8, 3)
    bce = nn.functional.binary_cross_entropy_with_logits
    out: dict[str, object] = {}
    for detach in (False, True):
        G.zero_grad()
        fake = G(z)
        d_loss = bce(D(fake.detach() if detach else fake), torch.zeros(8, 1)) + bce(D(real), torch.ones(8, 1))
        d_loss.backward()
        shown = "G(z).detach()" if detach else "G(z)"
        out[f"D's loss on {shown}, backward: G's .grad filled"] = G.weight.grad is not None
    G.zero_grad()
    D.zero_grad()
    fake = G(z)
    d_fake = D(fake)                                  # one forward, used for both losses
    d_loss = bce(d_fake, torch.zeros(8, 1)) + bce(D(real), torch.ones(8, 1))
    d_loss.backward(retain_graph=True)
    opt_d.step()                                      # changes D's weights in place: the graph of d_fake saved them
    message = ""
    try:
        bce(d_fake, torch.ones(8, 1)).backward()      # G's loss through the old D output
    except RuntimeError as exc:
        message = f"{type(exc).__name__}: {str(exc).split(':')[0]}"
    out["G's loss on the same D(G(z)) after D's step (retain_graph=True)"] = message or "ran"
    G.zero_grad()
    bce(D(G(z)), torch.ones(8, 1)).backward()         # G's loss through a fresh forward of the stepped D
    out["G's loss on a fresh D(G(z)) after D's step: G's .grad filled"] = G.weight.grad is not None
    out.update(_silent_old_order(seed))
    return out


def _silent_old_order(seed: int) -> dict[str, object]:
    """What the same order computed before torch 1.5, whose optimizers wrote the new weights through `.data`, which
    autograd's version counters do not see: D's step is applied here through `.data`, so G's backward runs, with
    the activations saved by the forward before D's step and D's weights after it. Its gradient is compared with
    G's gradient through D before its step (G's backward first) and after it (a fresh forward)."""
    torch.manual_seed(seed)
    G, D = nn.Linear(2, 3), nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    z, real = torch.randn(8, 2), torch.randn(8, 3)
    bce = nn.functional.binary_cross_entropy_with_logits

    def g_grad(forward) -> torch.Tensor:
        G.zero_grad()
        bce(forward(), torch.ones(8, 1)).backward()
        return G.weight.grad.clone()

    before = g_grad(lambda: D(G(z)))
    stepped = copy.deepcopy(D)
    opt = torch.optim.Adam(stepped.parameters(), lr=0.01)
    opt.zero_grad()
    (bce(stepped(G(z).detach()), torch.zeros(8, 1)) + bce(stepped(real), torch.ones(8, 1))).backward()
    opt.step()
    d_fake = D(G(z))                                   # the forward before D's step
    for p, q in zip(D.parameters(), stepped.parameters()):
        p.data.copy_(q.detach())                       # D's step as torch <= 1.4 wrote it: unseen by autograd
    mixed = g_grad(lambda: d_fake)
    after = g_grad(lambda: D(G(z)))
    return {"the same, D's step written through .data (what torch <= 1.4 did): G's backward": "ran, silently",
            "  its gradient equals G's gradient through D before the step / after it":
                f"{torch.allclose(mixed, before)} / {torch.allclose(mixed, after)}"}


def separate_backward_rules(seed: int = 0) -> dict[str, object]:
    """Two losses, one backward each, against one backward of their sum (chapter 3): gradients add up in `.grad`,
    so both give the same gradient; two losses that share a forward need `retain_graph=True` on the first call, two
    losses from separate forwards (a critic on real and on fake images) do not."""
    torch.manual_seed(seed)
    D = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1))
    real, fake = torch.randn(16, 3), torch.randn(16, 3)

    def grads(backward) -> list[torch.Tensor]:
        D.zero_grad()
        backward()
        return [p.grad.clone() for p in D.parameters()]

    def same(a, b) -> bool:
        return all(torch.allclose(x, y, rtol=1e-5, atol=1e-7) for x, y in zip(a, b))

    summed = grads(lambda: (D(fake).mean() - D(real).mean()).backward())
    two = grads(lambda: (D(fake).mean().backward(), (-D(real).mean()).backward()))
    out: dict[str, object] = {
        "critic: backward of fake and of real apart (two forwards) = one backward of fake - real": same(summed, two)}
    D.zero_grad()
    shared = D(real)
    shared.pow(2).mean().backward(retain_graph=True)
    shared.abs().mean().backward()
    apart = [p.grad.clone() for p in D.parameters()]
    together = grads(lambda: (D(real).pow(2).mean() + D(real).abs().mean()).backward())
    out["two losses of one forward, backward each (the first with retain_graph=True) = backward of the sum"] = \
        same(apart, together)
    D.zero_grad()
    shared = D(real)
    shared.pow(2).mean().backward()
    try:
        shared.abs().mean().backward()
        out["  the same without retain_graph"] = "ran"
    except RuntimeError as exc:
        out["  the same without retain_graph"] = f"{type(exc).__name__} (graph freed: {'freed' in str(exc)})"
    return out


def reused_advantage_run(fix: str, seed: int, mini_epochs: int = 40, hidden: bool = False) -> dict[str, object]:
    """An actor-critic update with several mini-epochs over one batch (PPO, MAPPO): the advantages, returns minus
    the critic's values, are computed once before the mini-epoch loop; inside it, the actor's loss weighs its
    log-probabilities by them and the critic's loss comes from a fresh forward. fix: 'none' (advantages used as
    computed), 'retain_graph' (every backward keeps the graph), 'detach' (advantages detached). The outcome and,
    where it ran, the critic's loss after the loop as a fraction of its loss before. The critic is one Linear on the
    raw states (whose forward saves no weight: its input needs no gradient), or with `hidden` a layer of 16 before
    it (the second layer saves its weight, which the optimizer's step then changes in place)."""
    torch.manual_seed(seed)
    actor = nn.Linear(4, 2)
    critic = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1)) if hidden else nn.Linear(4, 1)
    optimizer = torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=0.05)
    states = torch.randn(64, 4)
    returns = states @ torch.tensor([1.0, -2.0, 0.5, 0.0]) + 1.0
    actions = torch.randint(0, 2, (64,))
    advantages = returns - critic(states).squeeze(1)             # once, before the loop: it carries the critic's graph
    if fix == "detach":
        advantages = advantages.detach()
    value_loss_before = advantages.pow(2).mean().item()
    for epoch in range(mini_epochs):
        log_probs = actor(states).log_softmax(1).gather(1, actions[:, None]).squeeze(1)
        actor_loss = -(log_probs * advantages).mean()
        value_loss = (returns - critic(states).squeeze(1)).pow(2).mean()
        optimizer.zero_grad()
        try:
            (actor_loss + value_loss).backward(retain_graph=fix == "retain_graph")
        except RuntimeError as exc:
            kind = "graph freed" if "freed" in str(exc) else "modified in place" if "inplace" in str(exc) else "other"
            return {"outcome": f"{type(exc).__name__} at mini-epoch {epoch + 1} ({kind})"}
        optimizer.step()
    value_loss_after = (returns - critic(states).squeeze(1)).pow(2).mean().item()
    return {"outcome": f"all {mini_epochs} mini-epochs ran", "critic's loss after / before": value_loss_after /
            value_loss_before}


def reused_advantage_rules(seeds=range(5)) -> dict[str, str]:
    """`reused_advantage_run` for each fix over seeds: the outcomes, and where the loop ran, how far the critic's
    loss fell, against the detached run's on the same seed (chapter 3)."""
    runs = {fix: [reused_advantage_run(fix, s) for s in seeds] for fix in ("none", "retain_graph", "detach")}
    out = {}
    for fix, label in (("none", "advantages as computed"), ("retain_graph", "backward(retain_graph=True)"),
                       ("detach", "advantages.detach()")):
        line = " | ".join(sorted({r["outcome"] for r in runs[fix]}))
        ratios = [r.get("critic's loss after / before") for r in runs[fix]]
        if None not in ratios:
            line += f"; the critic's loss fell below a twentieth of its start on {sum(q < 0.05 for q in ratios)} " \
                    f"of {len(ratios)} seeds"
            if fix != "detach":
                worse = sum(q > 2 * r["critic's loss after / before"] for q, r in zip(ratios, runs["detach"]))
                line += f", ended over twice the detached run's loss on {worse}"
        out[label] = line
    deeper = sorted({reused_advantage_run("retain_graph", s, hidden=True)["outcome"] for s in seeds})
    out["backward(retain_graph=True), a critic with a hidden layer of 16"] = " | ".join(deeper)
    return out
