"""Chapter 7: losses whose value is not an error. Two that learners misread: a multi-task loss with learned
uncertainty weights (Kendall et al.), which goes negative by design, and a policy-gradient loss, whose sign makes
the optimizer raise the probability of good actions and whose value scales with the returns. Each is run, and
the claims are counts over seeds."""
from __future__ import annotations

import math

import torch
from torch import nn

from course_utils.infra.parallel import map_runs

SEEDS = range(5)


def uncertainty_run(seed: int, steps: int = 2000) -> dict[str, float]:
    """Two regression tasks, one with noise 0.1, one with noise 1.0, a shared linear model with a head per task,
    trained on sum_i exp(-s_i) * L_i + s_i with s_i learned (log variances). The total's last value, whether each
    task loss reached the least-squares optimum, and how far each s_i ends from log L_i (the value that minimises
    the total for that L_i)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(256, 4, generator=g)
    w = torch.randn(4, 2, generator=g)
    y = x @ w + torch.randn(256, 2, generator=g) * torch.tensor([0.1, 1.0])
    torch.manual_seed(seed)
    model = nn.Linear(4, 2)
    log_vars = nn.Parameter(torch.zeros(2))
    optimizer = torch.optim.Adam([*model.parameters(), log_vars], lr=0.05)
    for _ in range(steps):
        task = ((model(x) - y) ** 2).mean(0)                         # one MSE per task
        total = (torch.exp(-log_vars) * task + log_vars).sum()
        optimizer.zero_grad()
        total.backward()
        optimizer.step()
    task = ((model(x) - y) ** 2).mean(0).detach()
    total = (torch.exp(-log_vars) * task + log_vars).sum().item()
    xb = torch.cat([x, torch.ones(len(x), 1)], 1)                    # the least-squares fit: the best any can do
    best = ((xb @ torch.linalg.lstsq(xb, y).solution - y) ** 2).mean(0)
    # within 10%: Adam at 0.05 keeps jittering around the low-noise task's tiny optimum (0.01), by up to 3% on
    # another CPU code path, so a tighter bound would be one machine's digits
    return {"total": total, "near best": bool((task < 1.1 * best).all()),
            "low-noise s negative": bool(task[0] < 1 and log_vars[0] < 0),
            "s off log L": float((log_vars.detach() - task.log()).abs().max())}


def uncertainty_lines(seeds=SEEDS) -> list[str]:
    runs = map_runs(uncertainty_run, [(s,) for s in seeds])
    n = len(runs)
    return [f"final total loss negative on {sum(r['total'] < 0 for r in runs)} of {n} seeds",
            f"both task losses within 10% of their least-squares optimum on {sum(r['near best'] for r in runs)} of {n}",
            f"each learned s_i within 0.05 of log(task loss_i) on {sum(r['s off log L'] < 0.05 for r in runs)} of {n}",
            f"the low-noise task's loss below 1 and its s negative on {sum(r['low-noise s negative'] for r in runs)} of {n}"]


def policy_gradient_lines() -> list[str]:
    """One batch of actions from a uniform 4-way softmax policy, advantages +1 for actions 0 and 1 and -1 for 2 and
    3: one SGD step on -log_prob * advantage; then the REINFORCE loss of one policy and batch with returns ten
    times larger."""
    logits = nn.Parameter(torch.zeros(4))
    actions = torch.tensor([0, 1, 2, 3, 0, 2])
    advantage = torch.tensor([1.0, 1.0, -1.0, -1.0, 1.0, -1.0])
    before = logits.softmax(0).detach()
    (-(logits.log_softmax(0)[actions] * advantage).mean()).backward()
    with torch.no_grad():
        logits -= 1.0 * logits.grad
    after = logits.softmax(0).detach()
    lines = [f"one step on -log_prob * advantage: p(actions with advantage +1) {before[:2].sum():.2f} -> "
             f"{after[:2].sum():.2f}, p(advantage -1) {before[2:].sum():.2f} -> {after[2:].sum():.2f}"]
    log_probs = torch.full((6,), math.log(0.25))
    returns = torch.tensor([3.0, 5.0, 1.0, 2.0, 4.0, 1.0])
    for scale in (1, 10):
        lines.append(f"REINFORCE loss -mean(log_prob * return), the same policy, returns x{scale}: "
                     f"{-(log_probs * returns * scale).mean():.2f}")
    return lines


def entropy_bonus_line(steps: int = 20) -> str:
    """Minimising -0.1 * entropy alone (no advantage): the policy's entropy rises toward log 4."""
    logits = nn.Parameter(torch.tensor([2.0, 0.0, -1.0, -2.0]))
    optimizer = torch.optim.SGD([logits], lr=1.0)

    def entropy() -> torch.Tensor:
        p = logits.log_softmax(0)
        return -(p.exp() * p).sum()
    start = entropy().item()
    for _ in range(steps):
        optimizer.zero_grad()
        (-0.1 * entropy()).backward()
        optimizer.step()
    return (f"{steps} steps on -0.1 * entropy alone: entropy {start:.2f} -> {entropy().item():.2f} "
            f"(its maximum, log 4, is {math.log(4):.2f})")


def gan_saturation_lines(logits=(-8.0, -4.0, 0.0)) -> list[str]:
    """A GAN's generator loss on one fake, as the discriminator's logit on it falls (the discriminator winning, its
    loss on fakes going to 0): the minimax generator loss log(1 - D(G(z))) and the non-saturating -log D(G(z)),
    each one's gradient with respect to that logit, which is all the generator receives. Exact sigmoid arithmetic."""
    lines = [f"{'logit of D on a fake':>20} {'D(G(z))':>8} {'loss of D on it':>16}   generator's gradient on the logit:",
             f"{'':>20} {'':>8} {'-log(1 - D)':>16}   {'minimax log(1 - D)':>19} {'non-saturating -log D':>22}"]
    for value in logits:
        grads = []
        for loss_of in (lambda z: torch.log(1 - torch.sigmoid(z)), lambda z: -torch.log(torch.sigmoid(z))):
            z = torch.tensor(value, requires_grad=True)
            loss_of(z).backward()
            grads.append(z.grad.item())
        d = torch.sigmoid(torch.tensor(value)).item()
        lines.append(f"{value:>20g} {d:>8.4f} {-math.log(1 - d):>16.4f}   {grads[0]:>+19.4f} {grads[1]:>+22.4f}")
    return lines
