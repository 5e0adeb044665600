"""Chapter 7: checkpoints that travel to another machine or another wrapper, shown on a CPU.

- A GPU checkpoint on a CPU machine: the file's storages carry the location tag "cuda:0" (written here by
  tagging them the way a GPU machine's torch.save does); loading it needs ``map_location``.
- Optimizer state after loading: ``Optimizer.load_state_dict`` casts each state tensor to its parameter's
  device and dtype *at load time*. Move the model after loading and the state stays behind. The CPU shows it
  with dtype (float32 state, float64 weights), the same line of torch that moves devices.
- The ``module.`` prefix of ``DataParallel`` and DDP (both keep your model as ``.module``), beside
  ``_orig_mod.`` of ``torch.compile``: a plain model refuses those keys; strip the prefix or save the
  unwrapped module.
"""
from __future__ import annotations

import io
import math
from dataclasses import dataclass

import torch
from torch import nn, serialization
from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present


def _trained(seed: int = 0) -> tuple[nn.Linear, torch.optim.Adam]:
    torch.manual_seed(seed)
    model = nn.Linear(4, 3)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.randn(8, 4)).pow(2).mean().backward()
    optimizer.step()
    return model, optimizer


def gpu_tagged_checkpoint(state: dict, location: str = "cuda:0") -> bytes:
    """torch.save's bytes for `state` with every storage tagged `location`, as a machine with that device writes it."""
    entry = (0, lambda storage: location, lambda storage, tag: None)
    serialization.register_package(*entry)
    try:
        buffer = io.BytesIO()
        torch.save(state, buffer)
    finally:
        serialization._package_registry.remove(entry)
    return buffer.getvalue()


def _load(data: bytes, map_location) -> tuple[str, dict | None]:
    try:
        return "loaded", torch.load(io.BytesIO(data), map_location=map_location, weights_only=True)
    except Exception as error:  # noqa: BLE001 - the type is what the chapter prints
        return type(error).__name__, None


@dataclass(frozen=True)
class Travel:
    """What each load did: a GPU-tagged file with and without map_location; optimizer state in two orders."""

    without_map: str
    with_map: str
    devices_after_map: set[str]
    equal_after_map: bool
    state_dtype_right: torch.dtype
    state_dtype_wrong: torch.dtype
    step_wrong: str

    def text(self) -> str:
        return "\n".join([
            "a checkpoint whose tensors are tagged cuda:0, on this CPU machine:",
            f"  torch.load(path, weights_only=True): {self.without_map}",
            f"  torch.load(path, map_location='cpu', weights_only=True): {self.with_map}, every tensor on "
            f"{'/'.join(sorted(self.devices_after_map))}, equal to what was saved: {self.equal_after_map}",
            "optimizer state saved in float32, for a model in float64 (dtype standing in for the device):",
            f"  model moved, then optimizer.load_state_dict: exp_avg is {_name(self.state_dtype_right)}",
            f"  optimizer.load_state_dict, then model moved: exp_avg is {_name(self.state_dtype_wrong)}; "
            f"the next step: {self.step_wrong}",
        ])


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _try(action) -> str:
    try:
        action()
        return "works"
    except Exception as error:  # noqa: BLE001 - the type is what the chapter prints
        return type(error).__name__


def travel() -> Travel:
    """Chapter 7: map_location and the optimizer state after loading, on the CPU."""
    model, optimizer = _trained()
    saved = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
    data = gpu_tagged_checkpoint(saved)
    without_map, _ = _load(data, None)
    with_map, loaded = _load(data, "cpu")
    tensors = [*loaded["model"].values(), *(t for s in loaded["optimizer"]["state"].values() for t in s.values())]
    equal = all(torch.equal(loaded["model"][k], v) for k, v in saved["model"].items())

    right_model = nn.Linear(4, 3).double()                      # move first, then load: state follows
    right = torch.optim.Adam(right_model.parameters(), lr=0.01)
    right.load_state_dict(saved["optimizer"])
    wrong_model = nn.Linear(4, 3)                               # load first, then move: state stays behind
    wrong = torch.optim.Adam(wrong_model.parameters(), lr=0.01)
    wrong.load_state_dict(saved["optimizer"])
    wrong_model.double()
    wrong_model(torch.randn(8, 4, dtype=torch.float64)).pow(2).mean().backward()
    return Travel(without_map, with_map, {str(t.device) for t in tensors}, equal,
                  right.state[right_model.weight]["exp_avg"].dtype, wrong.state[wrong_model.weight]["exp_avg"].dtype,
                  _try(wrong.step))


def prefix_lines(wrapped: dict[str, nn.Module], make_plain) -> list[str]:
    """Chapter 7: each wrapper's key prefix, and whether a plain model (``make_plain()``) loads its keys."""
    lines = []
    for name, wrapper in wrapped.items():
        keys = wrapper.state_dict()
        prefix = next(iter(keys)).split(".")[0] + "."
        plain = _try(lambda: make_plain().load_state_dict(keys))
        copy = dict(keys)
        consume_prefix_in_state_dict_if_present(copy, prefix)
        every = all(k.startswith(prefix) for k in keys)
        lines.append(f"{name}: every key starts with {prefix!r}: {every}; a plain model's load_state_dict: {plain}; "
                     f"with the prefix stripped: {_try(lambda: make_plain().load_state_dict(copy))}")
    return lines


def strict_false_line(wrapper: nn.Module, make_plain) -> str:
    """Chapter 7: what load_state_dict(strict=False) does with a wrapper's prefixed keys: no error, nothing loaded."""
    plain = make_plain()
    before = [p.detach().clone() for p in plain.parameters()]
    result = plain.load_state_dict(wrapper.state_dict(), strict=False)
    unchanged = all(torch.equal(a, b) for a, b in zip(before, plain.parameters()))
    total = len(plain.state_dict())
    return (f"strict=False: no error; weights unchanged: {unchanged}; it returns {len(result.missing_keys)} of "
            f"{total} keys missing and {len(result.unexpected_keys)} unexpected")


def _resumed_runs(seed: int, before: int = 150, after: int = 10, lr: float = 0.01) -> dict[str, tuple]:
    """Full-batch Adam on a spiral for `before` updates, then `after` more three ways: uninterrupted, resumed
    from the weights and the optimizer's state, resumed from the weights alone (a fresh Adam). Each: the losses
    of the `after` updates and the final weights."""
    from course_utils.engine.data import spiral_splits
    from course_utils.engine.models import MLP
    x, y = spiral_splits(300, 300, seed=seed).train.tensors

    def step(model: nn.Module, optimizer: torch.optim.Optimizer) -> float:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.item()

    torch.manual_seed(seed)
    model = MLP(hidden=64)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(before):
        step(model, optimizer)
    saved = serialize_state({"model": model.state_dict(), "optimizer": optimizer.state_dict()})
    runs = {"uninterrupted": (model, optimizer)}
    for case in ("weights and optimizer state", "weights alone"):
        state = torch.load(io.BytesIO(saved), weights_only=True)        # each resume reads the file afresh
        resumed = MLP(hidden=64)
        resumed.load_state_dict(state["model"])
        fresh = torch.optim.Adam(resumed.parameters(), lr=lr)
        if case == "weights and optimizer state":
            fresh.load_state_dict(state["optimizer"])
        runs[case] = (resumed, fresh)
    out = {}
    for case, (m, o) in runs.items():
        start = [p.detach().clone() for p in m.parameters()]
        losses = [step(m, o)]
        moved = torch.cat([(p.detach() - s).abs().flatten() for p, s in zip(m.parameters(), start)])
        losses += [step(m, o) for _ in range(after - 1)]
        out[case] = (losses, [p.detach().clone() for p in m.parameters()], moved / lr)
    return out


def serialize_state(state: dict) -> bytes:
    """torch.save into bytes: a checkpoint file in memory."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def resume_without_optimizer_lines(seeds=range(5)) -> list[str]:
    """A resume that leaves the optimizer's state out, against one that keeps it, over seeds (chapter 7)."""
    from course_utils.infra.parallel import map_runs
    runs = map_runs(_resumed_runs, [(seed, 150, 200) for seed in seeds])   # side by side, one seed per process
    n = len(runs)

    def same(run: dict, case: str) -> bool:
        return all(torch.equal(a, b) for a, b in zip(run["uninterrupted"][1], run[case][1]))

    first = [r["weights alone"][0][1] / r["uninterrupted"][0][1] for r in runs]
    def lr_sized(moved: torch.Tensor) -> bool:       # of the weights that moved at all, 90% by lr (within 1%)
        moved = moved[moved > 0]
        return bool(((moved - 1).abs() < 0.01).float().mean() > 0.9)

    fresh_lr = sum(lr_sized(r["weights alone"][2]) for r in runs)
    small = sum(bool(r["uninterrupted"][2].median() < 0.1) for r in runs)
    tenth_above = sum(r["weights alone"][0][9] > r["uninterrupted"][0][9] for r in runs)
    peak = min(max(r["weights alone"][0]) / max(r["uninterrupted"][0]) for r in runs)
    last = [r["weights alone"][0][-1] / r["uninterrupted"][0][-1] for r in runs]
    after = len(runs[0]["uninterrupted"][0])
    return [f"weights and optimizer state: {after} more updates, weights bitwise those of the uninterrupted run on "
            f"{sum(same(r, 'weights and optimizer state') for r in runs)} of {n} seeds",
            f"the next update: the uninterrupted run moves the median weight by less than lr/10 on {small} of {n}; "
            f"a fresh Adam moves 90% or more of the weights it moves by lr (within 1%) on {fresh_lr} of {n}",
            f"weights alone (a fresh Adam): bitwise equal on {sum(same(r, 'weights alone') for r in runs)} of {n}; "
            f"the loss after its first update 25% or more above the uninterrupted run's on {sum(f > 1.25 for f in first)} "
            f"of {n}, still above after the 10th on {tenth_above} of {n}",
            f"  its highest loss {int(peak)} times the uninterrupted run's or more on {n} of {n}; after {after} updates "
            f"within a factor 3 of it on {sum(1 / 3 < v < 3 for v in last)} of {n}"]


def _warmup_cosine(warmup: int, total: int):
    """The usual hand-written LambdaLR: linear warmup, then a half cosine to 0 at `total` (and beyond it, the cosine
    goes on: back up)."""
    def factor(update: int) -> float:
        if update < warmup:
            return (update + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (update - warmup) / (total - warmup)))
    return factor


def _schedule_resumes(seed: int, before: int = 250, total: int = 300, warmup: int = 10, lr: float = 0.05) -> dict:
    """Full-batch Adam on a spiral under warmup + cosine over `total` updates; after `before`, the rest three ways:
    uninterrupted, resumed with the scheduler's state, resumed with the scheduler built anew (its position lost).
    Each: the learning rate of every remaining update, the final loss and the final weights."""
    from course_utils.engine.data import spiral_splits
    from course_utils.engine.models import MLP
    x, y = spiral_splits(300, 300, seed=seed).train.tensors

    def build(model: nn.Module):
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, _warmup_cosine(warmup, total))

    def step(model, optimizer, scheduler) -> float:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        scheduler.step()
        return loss.item()

    torch.manual_seed(seed)
    model = MLP(hidden=64)
    optimizer, scheduler = build(model)
    for _ in range(before):
        step(model, optimizer, scheduler)
    saved = serialize_state({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                             "scheduler": scheduler.state_dict()})
    runs = {"uninterrupted": (model, optimizer, scheduler)}
    for case in ("scheduler state loaded", "scheduler built anew"):
        state = torch.load(io.BytesIO(saved), weights_only=True)
        resumed = MLP(hidden=64)
        resumed.load_state_dict(state["model"])
        fresh_optimizer, fresh_scheduler = build(resumed)
        fresh_optimizer.load_state_dict(state["optimizer"])
        if case == "scheduler state loaded":
            fresh_scheduler.load_state_dict(state["scheduler"])
        runs[case] = (resumed, fresh_optimizer, fresh_scheduler)
    at_checkpoint = nn.functional.cross_entropy(model(x), y).item()
    out = {}
    for case, (m, o, s) in runs.items():
        rates, losses = [], []
        for _ in range(total - before):
            rates.append(o.param_groups[0]["lr"])
            losses.append(step(m, o, s))
        final = nn.functional.cross_entropy(m(x), y).item()
        out[case] = (rates, final, [p.detach().clone() for p in m.parameters()], max(losses) / at_checkpoint)
    past = [lr * _warmup_cosine(warmup, total)(update) for update in (total, total + 20, total + 50)]
    out["stepped past the end"] = past
    return out


def _first_resumed_rate(built_after_load: bool, before: int = 250, total: int = 300, warmup: int = 10,
                        lr: float = 0.05) -> float:
    """The rate of the first update after a resume whose LambdaLR is built anew (its state not loaded), built before
    or after optimizer.load_state_dict: the load restores each group's lr, the constructor sets its own."""
    weight = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.Adam([weight], lr=lr)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _warmup_cosine(warmup, total))
    for _ in range(before):
        optimizer.step()
        scheduler.step()
    state = optimizer.state_dict()
    fresh = torch.optim.Adam([torch.zeros(1, requires_grad=True)], lr=lr)
    if built_after_load:
        fresh.load_state_dict(state)
        torch.optim.lr_scheduler.LambdaLR(fresh, _warmup_cosine(warmup, total))
    else:
        torch.optim.lr_scheduler.LambdaLR(fresh, _warmup_cosine(warmup, total))
        fresh.load_state_dict(state)
    return fresh.param_groups[0]["lr"]


def schedule_resume_lines(seeds=range(5), before: int = 250, total: int = 300) -> list[str]:
    """A resume that loses the scheduler's position, against one that keeps it, over seeds (chapter 7)."""
    from course_utils.infra.parallel import map_runs
    runs = map_runs(_schedule_resumes, [(seed,) for seed in seeds])
    n, first = len(runs), runs[0]
    same = sum(all(torch.equal(a, b) for a, b in zip(r["uninterrupted"][2], r["scheduler state loaded"][2]))
               for r in runs)
    kept, lost = first["uninterrupted"][0], first["scheduler built anew"][0]
    below = sum(r["scheduler built anew"][1] < r["uninterrupted"][1] for r in runs)
    past = first["stepped past the end"]

    def spiked(case: str) -> int:      # the loss rose to 10x or more its value at the checkpoint
        return sum(r[case][3] >= 10 for r in runs)
    return [f"scheduler state loaded: the last {total - before} updates bitwise those of the uninterrupted run on "
            f"{same} of {n} seeds",
            f"learning rate at update {before + 1}, {before + 11}, {total}: uninterrupted "
            f"{', '.join(f'{v:.2g}' for v in (kept[0], kept[10], kept[-1]))}; scheduler built anew "
            f"{', '.join(f'{v:.2g}' for v in (lost[0], lost[10], lost[-1]))} (a second warmup, then the peak again)",
            f"the loss within the last {total - before} updates 10x or more its value at the checkpoint: scheduler "
            f"built anew on {spiked('scheduler built anew')} of {n} seeds, uninterrupted on {spiked('uninterrupted')}",
            f"scheduler built anew: final training loss below the uninterrupted run's on {below} of {n} (the extra "
            f"updates at a high rate go on fitting the training set: another run, not the one planned)",
            f"update {before + 1}'s rate with the scheduler built anew before optimizer.load_state_dict (above): "
            f"{_first_resumed_rate(False, before, total):.2g}, the saved one; built after it: "
            f"{_first_resumed_rate(True, before, total):.2g}, the restarted warmup's first",
            f"the same LambdaLR stepped past its {total} updates: lr {', '.join(f'{v:.2g}' for v in past)} at updates "
            f"{total}, {total + 20}, {total + 50} (the cosine climbs back up)"]
