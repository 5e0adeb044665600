"""Chapter 3: parameter groups, and what each parameter gets from them.

Weight decay on the weight matrices only (the split nanoGPT and most fine-tuning scripts make), a parameter given
to two groups, a parameter given to none, a frozen part unfrozen later (``add_param_group``) and the checkpoint of
the optimizer from before that; and a learning-rate helper or scheduler that writes one rate into every group
(``group_lr_helpers``). Every error is torch's own, raised here.
"""
from __future__ import annotations

from collections import Counter

import torch
from torch import nn
from torch.nn import functional as F

TASK_B_HELD_OUT = 1000      # task B's held-out examples: accuracies are counts of these


def _net() -> nn.Sequential:
    return nn.Sequential(nn.Linear(8, 32), nn.LayerNorm(32), nn.ReLU(), nn.Linear(32, 32), nn.LayerNorm(32),
                         nn.ReLU(), nn.Linear(32, 1))


def decay_split(model: nn.Module, weight_decay: float) -> list[dict]:
    """Two groups: tensors of 2 or more dimensions (weight matrices, embeddings) decayed; biases and normalisation
    gains (1-D) not."""
    params = [p for p in model.parameters() if p.requires_grad]
    return [{"params": [p for p in params if p.ndim >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}]


def decay_run(seed: int, split: bool, weight_decay: float = 0.1, steps: int = 300) -> tuple[float, float]:
    """AdamW(lr=0.01) on a small regression with two LayerNorms, decay on every parameter or on the matrices
    only: (the final loss, the mean LayerNorm gain at the end; gains start at 1). The losses of the two ways are
    not compared in the chapter: on this model their order changes with the thread count (the last bits of the
    sums), the gains' side of 1 does not."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(256, 8, generator=g)
    y = 3 * x[:, :1] + torch.sin(x[:, 1:2])
    torch.manual_seed(seed)
    model = _net()
    groups = decay_split(model, weight_decay) if split else [{"params": model.parameters(),
                                                               "weight_decay": weight_decay}]
    optimizer = torch.optim.AdamW(groups, lr=0.01)
    for _ in range(steps):
        optimizer.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
    gains = torch.cat([model[1].weight, model[4].weight]).detach()
    return loss.item(), gains.mean().item()


def _error(make) -> str:
    try:
        make()
    except ValueError as error:
        return f"ValueError: {error}"
    return "no error"


def group_lines(seeds=range(5)) -> list[str]:
    """What chapter 3 prints."""
    n = len(seeds)
    model = _net()
    decayed, plain = decay_split(model, 0.1)
    shapes = sorted({tuple(p.shape) for p in decayed["params"]})
    undecayed = Counter(f"{type(m).__name__}.{name}" for m in model.modules()
                        for name, p in m.named_parameters(recurse=False) if p.ndim < 2)
    lines = [f"the split: decayed {len(decayed['params'])} tensors of shapes {shapes}; not decayed "
             f"{len(plain['params'])}: " + ", ".join(f"{n} {k}" for k, n in sorted(undecayed.items()))]
    everything = [decay_run(s, split=False) for s in seeds]
    split = [decay_run(s, split=True) for s in seeds]
    lines.append(f"AdamW(weight_decay=0.1), 300 steps, {n} seeds: LayerNorm gains (start 1) end below 1 with decay on "
                 f"everything on {sum(g < 1 for _, g in everything)} of {n}, above 1 with the split on "
                 f"{sum(g > 1 for _, g in split)} of {n}")
    a, b = nn.Linear(2, 2), nn.Linear(2, 2)
    lines.append("a parameter in two groups: " + _error(
        lambda: torch.optim.AdamW([{"params": a.parameters()}, {"params": [*a.parameters(), *b.parameters()]}])))
    by_name = [p for name, p in model.named_parameters() if "bias" in name or p.ndim >= 2]   # forgets the gains
    held = {id(p) for p in by_name}
    lines.append(f"groups built by name ('bias' or a matrix): they hold {len(held)} of "
                 f"{len(list(model.parameters()))} parameters; the LayerNorm gains are in none, so nothing moves them")
    return lines


def unfreeze_lines(lr: float = 0.1) -> list[str]:
    """A backbone frozen and left out of the optimizer, then unfrozen: without and with add_param_group; then the
    optimizer state saved before the unfreezing, loaded into the optimizer after it."""
    torch.manual_seed(0)
    backbone, head = nn.Linear(4, 4), nn.Linear(4, 1)
    backbone.requires_grad_(False)
    optimizer = torch.optim.SGD(head.parameters(), lr=lr, momentum=0.9)
    x, y = torch.randn(16, 4), torch.randn(16, 1)

    def step() -> bool:
        before = backbone.weight.detach().clone()
        optimizer.zero_grad()
        F.mse_loss(head(backbone(x)), y).backward()
        optimizer.step()
        return not torch.equal(before, backbone.weight)

    step()
    saved = optimizer.state_dict()                              # the checkpoint of the frozen phase
    backbone.requires_grad_(True)
    moved = step()
    lines = [f"unfrozen (requires_grad_(True)) but not in the optimizer: the backbone has a .grad: "
             f"{backbone.weight.grad is not None}; one step moved it: {moved}"]
    optimizer.add_param_group({"params": backbone.parameters(), "lr": lr / 10})
    lines.append(f"after optimizer.add_param_group(backbone, lr/10): one step moved it: {step()}")
    lines.append("the frozen phase's optimizer state loaded into it: " + _error(lambda: optimizer.load_state_dict(saved)))
    rebuilt = torch.optim.SGD(head.parameters(), lr=lr, momentum=0.9)       # as in the frozen phase
    rebuilt.load_state_dict(saved)
    rebuilt.add_param_group({"params": backbone.parameters(), "lr": lr / 10})
    lines.append(f"built as in the frozen phase, its state loaded, then add_param_group(backbone): groups "
                 f"{len(rebuilt.param_groups)}, the head's momentum kept: {len(rebuilt.state) == 2}")
    return lines


def param_groups_identity_lines() -> list[str]:
    """`optimizer.load_state_dict` puts NEW group dicts in a new `param_groups` list. Anything that kept the old
    list (an optimizer wrapper such as LARS or Lookahead that shares it, a helper that stored it) no longer reaches
    the optimizer: a rate written through it changes nothing."""
    model = nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    saved = optimizer.state_dict()
    kept = optimizer.param_groups                     # what a wrapper holds: the list object itself
    optimizer.load_state_dict(saved)
    kept[0]["lr"] = 0.001                             # a scheduler or helper writing through the old list
    return [f"after load_state_dict: the list kept before is optimizer.param_groups: {kept is optimizer.param_groups}",
            f"lr written through the kept list: 0.001; the optimizer's lr: {optimizer.param_groups[0]['lr']}"]


def backbone_rate_run(seed: int, ratios=(0.0, 0.1, 1.0), lr: float = 3e-3, steps: int = 200) -> dict:
    """A backbone pretrained on task A (8 classes read from a random teacher's features, 2,000 examples), then a new
    head trained on task B (4 other classes from the same features, 100 examples) with Adam, the backbone at `lr`
    times each ratio (0: frozen). Per ratio: task B's accuracy on 1,000 held-out examples, and task A's accuracy of
    the backbone with its old head (what the pretraining still knows)."""
    import copy
    g = torch.Generator().manual_seed(seed)
    teacher = nn.Sequential(nn.Linear(10, 32), nn.Tanh())
    with torch.no_grad():
        for p in teacher.parameters():
            p.copy_(torch.randn(p.shape, generator=g))
    read_a, read_b = torch.randn(32, 8, generator=g), torch.randn(32, 4, generator=g)

    def task(n: int, readout: torch.Tensor):
        x = torch.randn(n, 10, generator=g)
        with torch.no_grad():
            return x, (teacher(x) @ readout).argmax(1)

    (xa, ya), (xb, yb), (xt, yt) = task(2000, read_a), task(100, read_b), task(TASK_B_HELD_OUT, read_b)
    torch.manual_seed(seed)
    backbone = nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
    head_a = nn.Linear(64, 8)
    optimizer = torch.optim.Adam([*backbone.parameters(), *head_a.parameters()], lr=3e-3)
    for _ in range(600):
        i = torch.randint(0, 2000, (128,))
        optimizer.zero_grad()
        F.cross_entropy(head_a(backbone(xa[i])), ya[i]).backward()
        optimizer.step()
    with torch.no_grad():
        before = (head_a(backbone(xa)).argmax(1) == ya).float().mean().item()
    out = {"task A before": before}
    for ratio in ratios:
        tuned = copy.deepcopy(backbone)
        torch.manual_seed(seed + 100)
        head = nn.Linear(64, 4)
        groups = [{"params": head.parameters(), "lr": lr}]
        if ratio:
            groups.append({"params": tuned.parameters(), "lr": lr * ratio})
        optimizer = torch.optim.Adam(groups)
        for _ in range(steps):
            optimizer.zero_grad()
            F.cross_entropy(head(tuned(xb)), yb).backward()
            optimizer.step()
        with torch.no_grad():
            out[ratio] = ((head(tuned(xt)).argmax(1) == yt).float().mean().item(),
                          (head_a(tuned(xa)).argmax(1) == ya).float().mean().item())
    return out


def backbone_rate_lines(seeds=range(5)) -> list[str]:
    """The runs over seeds, as chapter 3 prints them."""
    from course_utils.infra.parallel import map_runs
    runs = map_runs(backbone_rate_run, [(s,) for s in seeds])
    n = len(runs)
    return [f"task A accuracy after pretraining at least 0.75 on {sum(r['task A before'] >= 0.75 for r in runs)} of {n}; "
            f"then, after fine-tuning on task B:",
            f"  frozen backbone:            task A accuracy unchanged on {sum(r[0.0][1] == r['task A before'] for r in runs)} of {n}",
            f"  backbone at lr/10:          task A accuracy above 0.68 on {sum(r[0.1][1] > 0.68 for r in runs)} of {n}",
            f"  backbone at the head's lr:  task A accuracy below 0.66 on {sum(r[1.0][1] < 0.66 for r in runs)} of {n}",
            f"task B accuracy ({TASK_B_HELD_OUT:,} held-out examples): at lr/10 and at the head's lr both above the frozen "
            f"backbone's by more than 5 examples on {sum(min(right(r, 0.1), right(r, 1.0)) - right(r, 0.0) > 5 for r in runs)}"
            f" of {n}; the two within 20 examples of each other on "
            f"{sum(abs(right(r, 0.1) - right(r, 1.0)) <= 20 for r in runs)} of {n}"]


def right(run: dict, rate: float) -> int:
    """Task B's held-out examples classified right at a backbone rate (counts, not float accuracies: another CPU
    moves an example or two, and a threshold stated in examples keeps a margin of several)."""
    return round(run[rate][0] * TASK_B_HELD_OUT)


def group_lr_helpers() -> dict[str, list[float]]:
    """A backbone at lr/10 and a head at lr: a helper that writes one lr into every group erases the ratio; scaling
    each group's own lr (as LambdaLR does from each group's initial_lr) keeps it. OneCycleLR given one max_lr
    writes the same rate into every group too; given one per group it keeps the ratio."""
    out = {}
    for how in ("a helper writes lr * 0.5 into every group", "a helper multiplies every group's lr by 0.5",
                "LambdaLR(0.5 ** epoch), one step", "OneCycleLR(max_lr=0.02, total_steps=4), two steps",
                "OneCycleLR(max_lr=[0.002, 0.02], total_steps=4), two steps",
                "CyclicLR(base_lr=0.001, max_lr=0.02, step_size_up=4), two steps"):
        backbone, head = nn.Linear(2, 2), nn.Linear(2, 1)
        optimizer = torch.optim.SGD([{"params": backbone.parameters(), "lr": 0.002},
                                     {"params": head.parameters()}], lr=0.02)
        if how.startswith("LambdaLR"):
            scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda epoch: 0.5 ** epoch)
            optimizer.step()
            scheduler.step()
        if how.startswith(("OneCycleLR", "CyclicLR")):
            peak = [0.002, 0.02] if "[" in how else 0.02
            scheduler = (torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=peak, total_steps=4)
                         if how.startswith("OneCycleLR") else
                         torch.optim.lr_scheduler.CyclicLR(optimizer, base_lr=0.001, max_lr=peak, step_size_up=4))
            for _ in range(2):
                optimizer.step()
                scheduler.step()
        for group in optimizer.param_groups:
            if "writes" in how:
                group["lr"] = 0.02 * 0.5          # adjust_learning_rate(optimizer, lr * decay)
            elif "multiplies" in how:
                group["lr"] *= 0.5
        out[f"groups at lr [0.002, 0.02], then {how}"] = [round(g["lr"], 6) for g in optimizer.param_groups]
    return out
