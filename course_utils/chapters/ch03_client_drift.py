"""Federated averaging on clients that each hold two classes, against the same data dealt at random (chapter 3).

Ten overlapping Gaussian classes (``ch03_class_incremental.gaussian_classes``), 100 training examples each, dealt to
10 clients either at random (IID) or in shards of one class, two shards per client (the "pathological non-IID"
split of federated benchmarks). Each round 2 clients are drawn; each starts from the averaged model, takes
``steps`` steps of SGD (lr 0.1, momentum 0.9, batches of 32 from its own data) and the two are averaged. The
averaged model's test accuracy after every round; how much it moves between rounds; and, after the last round,
its accuracy on the classes that round's clients held against the others.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import torch

from course_utils.chapters.ch03_class_incremental import CLASSES, DIM, gaussian_classes
from course_utils.chapters.seed_stack import StackedMLP, per_copy_loss

CLIENTS, PER_ROUND, ROUNDS = 10, 2, 20


@dataclass(frozen=True)
class DriftRun:
    accuracy: tuple[float, ...]      # after each round
    held: float                      # last round: accuracy on the classes its clients held
    others: float                    # on the other classes

    @property
    def swing(self) -> float:
        """Mean absolute change of accuracy between consecutive rounds over the last ten."""
        last = self.accuracy[-11:]
        return sum(abs(a - b) for a, b in zip(last[1:], last)) / (len(last) - 1)


def _split(labels: torch.Tensor, iid: bool, generator: torch.Generator) -> list[torch.Tensor]:
    if iid:
        return list(torch.randperm(len(labels), generator=generator).chunk(CLIENTS))
    shards = torch.argsort(labels, stable=True).chunk(2 * CLIENTS)          # one class per shard
    dealt = torch.randperm(2 * CLIENTS, generator=generator)
    return [torch.cat([shards[dealt[2 * c]], shards[dealt[2 * c + 1]]]) for c in range(CLIENTS)]


def federated_runs(runs: list[tuple[bool, int]], steps: int, rounds: int = ROUNDS) -> list[DriftRun]:
    """One DriftRun per (iid, seed) in `runs`, all trained at once as the copies of a StackedMLP: each its own data,
    its own deal, its own generator drawn in the order a run alone draws it (seed_stack.py)."""
    data = [gaussian_classes(seed, 100, spread=0.5, noise=1.0) for _, seed in runs]
    x_train, y_train, x_test, y_test = (torch.stack(column) for column in zip(*data))
    generators = [torch.Generator().manual_seed(seed) for _, seed in runs]
    parts = [_split(labels, iid, g) for labels, (iid, _), g in zip(y_train, runs, generators)]
    model = StackedMLP([seed for _, seed in runs], (DIM, 64, CLASSES))
    rows = torch.arange(len(runs))[:, None]
    accuracy: list[list[float]] = [[] for _ in runs]
    for _ in range(rounds):
        chosen = [torch.randperm(CLIENTS, generator=g)[:PER_ROUND].tolist() for g in generators]
        states = []
        for slot in range(PER_ROUND):
            local = copy.deepcopy(model)
            optimizer = torch.optim.SGD(local.parameters(), lr=0.1, momentum=0.9)
            mine = [p[c[slot]] for p, c in zip(parts, chosen)]
            for _ in range(steps):
                batch = torch.stack([m[torch.randint(len(m), (32,), generator=g)] for m, g in zip(mine, generators)])
                optimizer.zero_grad()
                per_copy_loss(local(x_train[rows, batch]), y_train[rows, batch]).backward()
                optimizer.step()
            states.append(local.state_dict())
        model.load_state_dict({k: sum(s[k] for s in states) / len(states) for k in states[0]})
        with torch.no_grad():
            right = model(x_test).argmax(2) == y_test
        for run, hits in zip(accuracy, right):
            run.append(hits.float().mean().item())
    done = []
    for i, c in enumerate(chosen):               # the last round's clients: the classes they held
        held = torch.zeros(CLASSES, dtype=torch.bool)
        held[torch.cat([y_train[i][parts[i][client]] for client in c]).unique()] = True
        in_held = held[y_test[i]]
        done.append(DriftRun(tuple(accuracy[i]), right[i][in_held].float().mean().item(),
                             right[i][~in_held].float().mean().item()))
    return done


def federated(iid: bool, seed: int, steps: int, rounds: int = ROUNDS) -> DriftRun:
    return federated_runs([(iid, seed)], steps, rounds)[0]


def drift_lines(seeds=range(5), step_counts=(5, 50)) -> list[str]:
    """Seed counts only: a run's accuracies are sums of argmax decisions that another CPU's last bits can flip."""
    n = len(seeds)
    lines = [f"{CLIENTS} clients, {PER_ROUND} drawn per round, each a fresh SGD(lr=0.1, momentum=0.9), {ROUNDS} rounds, "
             f"{n} seeds; the averaged model's test accuracy:"]
    finals = {}
    for steps in step_counts:
        both = federated_runs([(iid, s) for iid in (True, False) for s in seeds], steps)
        iid, shards = both[:n], both[n:]
        finals[steps] = [b.accuracy[-1] for b in shards]
        lower = sum(b.accuracy[-1] < a.accuracy[-1] - 0.05 for a, b in zip(iid, shards))
        wider = sum(b.swing > 2 * a.swing for a, b in zip(iid, shards))
        lines.append(f"  {steps:2} local steps: two classes per client ended over 0.05 below the random deal on {lower} "
                     f"of {n} seeds, moving between rounds over twice as much on {wider} of {n}")
        lines.append(f"     after the last round: more accurate by over 0.3 on the classes that round's clients held "
                     f"(up to 4) than on the others on {sum(b.held > b.others + 0.3 for b in shards)} of {n}; on the "
                     f"others below 0.1 (chance) on {sum(b.others < 0.1 for b in shards)} of {n}")
    few, many = step_counts[0], step_counts[-1]
    lines.append(f"  two classes per client: {many} local steps ended over 0.05 below {few} local steps on "
                 f"{sum(m < f - 0.05 for f, m in zip(finals[few], finals[many]))} of {n} seeds")
    return lines
