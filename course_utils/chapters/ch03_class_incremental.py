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

from course_utils.chapters.seed_stack import StackedMLP, per_copy_loss

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
    (torch.func would vectorise the loop; a loop is the definition). x (N, i) and y (N,) for a module; for a
    StackedMLP x (S, N, i) and y (S, N), each copy's own examples, each copy's Fisher in its own slice."""
    stacked = isinstance(model, StackedMLP)
    count = x.shape[1] if stacked else len(x)
    total = [torch.zeros_like(p) for p in model.parameters()]
    for i in range(count):
        model.zero_grad()
        if stacked:
            per_copy_loss(model(x[:, i:i + 1]), y[:, i:i + 1]).backward()
        else:
            F.cross_entropy(model(x[i:i + 1]), y[i:i + 1]).backward()
        for acc, p in zip(total, model.parameters()):
            acc += p.grad.detach() ** 2 / count
    return total


@dataclass(frozen=True)
class Outcome:
    task_accuracy: tuple[float, ...]      # test accuracy on each task's two classes, after the last task
    old_to_last: float                    # of the old tasks' test examples, the share predicted as task 5's classes
    told_task: tuple[float, ...] = ()     # the same, choosing only between the example's own task's two classes


def train_runs(strategy: str, seeds, lam: float = 5000.0, epochs: int = 10, per_class: int = 200,
               stored: int = 10) -> list[Outcome]:
    """One Outcome per seed, the seeds trained at once as the copies of a StackedMLP, each with its own data and its
    own generator drawn in the order a run alone draws it (seed_stack.py)."""
    seeds = list(seeds)
    data = [gaussian_classes(seed, per_class) for seed in seeds]
    x_train, y_train, x_test, y_test = (torch.stack(column) for column in zip(*data))
    model = StackedMLP(seeds, (DIM, 64, CLASSES))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    generators = [torch.Generator().manual_seed(seed) for seed in seeds]
    rows = torch.arange(len(seeds))[:, None]
    fisher = [torch.zeros_like(p) for p in model.parameters()]
    anchor: list[torch.Tensor] | None = None
    memory_x, memory_y = x_train[:, :0], y_train[:, :0]
    for task in range(TASKS):
        mine = (y_train[0] // 2) == task                 # every seed's labels are the same list of classes
        x, y = x_train[:, mine], y_train[:, mine]
        for _ in range(epochs):
            order = torch.stack([torch.randperm(x.shape[1], generator=g) for g in generators])
            for start in range(0, x.shape[1], 32):
                bx, by = x[rows, order[:, start:start + 32]], y[rows, order[:, start:start + 32]]
                if strategy == "replay" and memory_x.shape[1]:
                    pick = torch.stack([torch.randint(memory_x.shape[1], (32,), generator=g) for g in generators])
                    bx, by = torch.cat([bx, memory_x[rows, pick]], 1), torch.cat([by, memory_y[rows, pick]], 1)
                loss = per_copy_loss(model(bx), by)
                if strategy == "EWC" and anchor is not None:
                    loss = loss + lam / 2 * sum((f * (p - a) ** 2).sum()
                                                for f, p, a in zip(fisher, model.parameters(), anchor))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        if strategy == "EWC":                 # 100 of the task's examples, both classes, drawn at random
            pick = torch.stack([torch.randperm(x.shape[1], generator=g)[:100] for g in generators])
            fisher = [f + g for f, g in zip(fisher, _fisher(model, x[rows, pick], y[rows, pick]))]
            anchor = [p.detach().clone() for p in model.parameters()]
        if strategy == "replay":
            keep = torch.cat([(y[0] == c).nonzero().flatten()[:stored] for c in y[0].unique()])
            memory_x, memory_y = torch.cat([memory_x, x[:, keep]], 1), torch.cat([memory_y, y[:, keep]], 1)
    with torch.no_grad():
        all_logits = model(x_test)
    return [_outcome(logits, labels) for logits, labels in zip(all_logits, y_test)]


def _outcome(logits: torch.Tensor, y_test: torch.Tensor) -> Outcome:
    predicted = logits.argmax(1)
    accuracy = tuple((predicted == y_test)[(y_test // 2) == t].float().mean().item() for t in range(TASKS))
    within = 2 * (y_test // 2) + logits.view(-1, TASKS, 2)[torch.arange(len(y_test)), y_test // 2].argmax(1)
    told = tuple((within == y_test)[(y_test // 2) == t].float().mean().item() for t in range(TASKS))
    old = (y_test // 2) < TASKS - 1
    return Outcome(accuracy, ((predicted[old] // 2) == TASKS - 1).float().mean().item(), told)


def train(strategy: str, seed: int, lam: float = 5000.0, epochs: int = 10, per_class: int = 200,
          stored: int = 10) -> Outcome:
    return train_runs(strategy, [seed], lam, epochs, per_class, stored)[0]


def class_incremental(seeds=range(5), lam: float = 5000.0) -> dict[str, list[Outcome]]:
    return {strategy: train_runs(strategy, seeds, lam) for strategy in STRATEGIES}


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
