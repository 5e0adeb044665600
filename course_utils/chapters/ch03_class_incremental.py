"""Class-incremental training: one head over every class, each task's loss over its own two classes (chapter 3).

Ten Gaussian classes in 20 dimensions arrive as five tasks of two (0-1, 2-3, ..., 8-9); a 20-64-10 MLP with one
softmax over all ten trains 10 epochs of Adam on each task in turn, then is tested on every class. Three ways:
plain fine-tuning; EWC (a penalty lam/2 * sum F (w - w_old)^2, F the diagonal Fisher: per-example squared
gradients of the log-likelihood at the true labels, on 100 random examples of each task, summed over the tasks so
far and anchored at the latest weights, as online EWC does); and replay (10 stored examples per old class, 32 drawn
from them added to every batch of 32). What each keeps of the old tasks, and where the old tasks' predictions go.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

CLASSES, DIM, TASKS = 10, 20, 5
STRATEGIES = ("fine-tuning", "EWC", "replay")


def gaussian_classes(seed: int, per_class: int, spread: float = 1.0, noise: float = 0.7,
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Training and test sets (`per_class` and 100 examples of each class): ten Gaussian classes in 20 dimensions,
    centres drawn with scale `spread`, each example its centre plus Gaussian noise of scale `noise`."""
    generator = torch.Generator().manual_seed(seed)
    centres = spread * torch.randn(CLASSES, DIM, generator=generator)

    def draw(count: int):
        y = torch.arange(CLASSES).repeat_interleave(count)
        return centres[y] + noise * torch.randn(len(y), DIM, generator=generator), y

    return (*draw(per_class), *draw(100))


def _fisher(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
    """The diagonal empirical Fisher: each example's gradient of -log p(y|x), squared, averaged over the examples
    (torch.func would vectorise the loop; a loop is the definition)."""
    total = [torch.zeros_like(p) for p in model.parameters()]
    for xi, yi in zip(x, y):
        model.zero_grad()
        F.cross_entropy(model(xi[None]), yi[None]).backward()
        for acc, p in zip(total, model.parameters()):
            acc += p.grad.detach() ** 2 / len(x)
    return total


@dataclass(frozen=True)
class Outcome:
    task_accuracy: tuple[float, ...]      # test accuracy on each task's two classes, after the last task
    old_to_last: float                    # of the old tasks' test examples, the share predicted as task 5's classes
    told_task: tuple[float, ...] = ()     # the same, choosing only between the example's own task's two classes


def train(strategy: str, seed: int, lam: float = 5000.0, epochs: int = 10, per_class: int = 200,
          stored: int = 10) -> Outcome:
    x_train, y_train, x_test, y_test = gaussian_classes(seed, per_class)
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, CLASSES))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    generator = torch.Generator().manual_seed(seed)
    fisher = [torch.zeros_like(p) for p in model.parameters()]
    anchor: list[torch.Tensor] | None = None
    memory_x, memory_y = x_train[:0], y_train[:0]
    for task in range(TASKS):
        mine = (y_train // 2) == task
        x, y = x_train[mine], y_train[mine]
        for _ in range(epochs):
            order = torch.randperm(len(x), generator=generator)
            for start in range(0, len(x), 32):
                bx, by = x[order[start:start + 32]], y[order[start:start + 32]]
                if strategy == "replay" and len(memory_x):
                    pick = torch.randint(len(memory_x), (32,), generator=generator)
                    bx, by = torch.cat([bx, memory_x[pick]]), torch.cat([by, memory_y[pick]])
                loss = F.cross_entropy(model(bx), by)
                if strategy == "EWC" and anchor is not None:
                    loss = loss + lam / 2 * sum((f * (p - a) ** 2).sum()
                                                for f, p, a in zip(fisher, model.parameters(), anchor))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        if strategy == "EWC":                 # 100 of the task's examples, both classes, drawn at random
            pick = torch.randperm(len(x), generator=generator)[:100]
            fisher = [f + g for f, g in zip(fisher, _fisher(model, x[pick], y[pick]))]
            anchor = [p.detach().clone() for p in model.parameters()]
        if strategy == "replay":
            keep = torch.cat([(y == c).nonzero().flatten()[:stored] for c in y.unique()])
            memory_x, memory_y = torch.cat([memory_x, x[keep]]), torch.cat([memory_y, y[keep]])
    with torch.no_grad():
        logits = model(x_test)
    predicted = logits.argmax(1)
    accuracy = tuple((predicted == y_test)[(y_test // 2) == t].float().mean().item() for t in range(TASKS))
    within = 2 * (y_test // 2) + logits.view(-1, TASKS, 2)[torch.arange(len(y_test)), y_test // 2].argmax(1)
    told = tuple((within == y_test)[(y_test // 2) == t].float().mean().item() for t in range(TASKS))
    old = (y_test // 2) < TASKS - 1
    return Outcome(accuracy, ((predicted[old] // 2) == TASKS - 1).float().mean().item(), told)


def class_incremental(seeds=range(5), lam: float = 5000.0) -> dict[str, list[Outcome]]:
    return {strategy: [train(strategy, seed, lam) for seed in seeds] for strategy in STRATEGIES}


def class_incremental_lines(outcomes: dict[str, list[Outcome]], lam: float = 5000.0) -> list[str]:
    """Per strategy: the old tasks' mean accuracy (worst and best seed), the last task's, where the old tasks'
    predictions went, and the old tasks' accuracy when the test is told each example's task; then the seed counts
    the chapter's claims rest on."""
    def old_mean(values) -> float:
        return sum(values[:-1]) / (TASKS - 1)

    seeds = len(next(iter(outcomes.values())))
    lines = [f"{seeds} seeds, tasks 1-4 then 5 ({CLASSES} classes, 2 per task), one head; EWC lam={lam:g}; replay: "
             f"10 stored examples per old class, 32 of them added to every batch of 32:"]
    for strategy, runs in outcomes.items():
        olds = [old_mean(o.task_accuracy) for o in runs]
        told = [old_mean(o.told_task) for o in runs]
        lines.append(f"  {strategy:12} tasks 1-4: mean accuracy {sum(olds) / seeds:.2f} (seeds {min(olds):.2f} to "
                     f"{max(olds):.2f}) | task 5: {sum(o.task_accuracy[-1] for o in runs) / seeds:.2f} | old "
                     f"examples predicted as task 5's classes: {sum(o.old_to_last for o in runs) / seeds:.0%} | "
                     f"told the task: tasks 1-4 {sum(told) / seeds:.2f}")
    tune, ewc, replay = ([old_mean(o.task_accuracy) for o in outcomes[s]] for s in STRATEGIES)
    tune_told, ewc_told = ([old_mean(o.told_task) for o in outcomes[s]] for s in STRATEGIES[:2])
    lines.append(f"  tasks 1-4 below 0.5 on every seed: fine-tuning {all(v < 0.5 for v in tune)}, EWC "
                 f"{all(v < 0.5 for v in ewc)}; replay above both on {sum(r > max(a, b) for r, a, b in zip(replay, tune, ewc))}"
                 f" of {seeds}")
    lines.append(f"  told the task: above 0.6 on every seed: fine-tuning {all(v > 0.6 for v in tune_told)}, EWC "
                 f"{all(v > 0.6 for v in ewc_told)}; EWC above fine-tuning by over 0.02 on "
                 f"{sum(e > t + 0.02 for e, t in zip(ewc_told, tune_told))} of {seeds}")
    return lines
