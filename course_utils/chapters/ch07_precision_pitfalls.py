"""Chapter 7: two fp16 pitfalls a GradScaler does not remove, run on the CPU (fp16 autocast, GradScaler("cpu")).

1. A forward pass that overflows fp16 (a value above 65,504 becomes inf, then NaN): the loss is not finite
   whatever the scale, so the scaler skips every step and halves its scale each time; nothing learns.
   bf16 (float32's range) or running that layer in float32 fixes it.
2. A step the scaler skips in a correct loop (its first scale, 65,536, overflows the fp16 gradients) makes
   the first ``scheduler.step()`` warn "before optimizer.step()": the loop's order is right, and the only
   effect is a schedule one step ahead of the updates made.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

SEEDS = (0, 1, 2, 3, 4)
FP16_MAX = float(torch.finfo(torch.float16).max)   # 65,504
STEPS = 8


def _model_and_data(seed: int, input_scale: float, norm: bool = False) -> tuple[nn.Sequential, torch.Tensor, torch.Tensor]:
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 32), nn.LayerNorm(32) if norm else nn.Identity(), nn.ReLU(), nn.Linear(32, 3))
    return model, torch.randn(64, 8) * input_scale, torch.randint(0, 3, (64,))


def _train(model: nn.Module, x: torch.Tensor, y: torch.Tensor, dtype: torch.dtype | None, first_fp32: bool = False,
           scheduler: bool = False, guard: bool = False) -> dict:
    """STEPS updates of SGD under autocast(dtype) with a GradScaler (None: float32, no scaler); what happened."""
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.StepLR(optimizer, step_size=100) if scheduler else None
    scaler = torch.amp.GradScaler("cpu", enabled=dtype is torch.float16)
    before = [p.detach().clone() for p in model.parameters()]
    losses, skipped, scheduled = [], 0, 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(STEPS):
            optimizer.zero_grad()
            with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
                if first_fp32:
                    with torch.autocast("cpu", enabled=False):
                        hidden = model[1](model[0](x.float()))      # the big sums in float32, then normalised
                    logits = model[3](model[2](hidden))
                else:
                    logits = model(x)
                loss = F.cross_entropy(logits, y)
            losses.append(loss.item())
            scale = scaler.get_scale() if scaler.is_enabled() else 1.0
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            step_skipped = scaler.is_enabled() and scaler.get_scale() < scale
            skipped += step_skipped
            if sched is not None and not (guard and step_skipped):
                sched.step()
                scheduled += 1
    warned = sum("lr_scheduler.step()" in str(w.message) and "optimizer.step()" in str(w.message) for w in caught)
    moved = any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    return {"losses": losses, "skipped": skipped, "moved": moved, "warned": warned, "scheduled": scheduled,
            "scale": scaler.get_scale() if scaler.is_enabled() else None}


@dataclass(frozen=True)
class Overflow:
    """Per seed: the first layer's largest output, and each precision's run (fp16 + scaler, bf16, fp16 + fp32 layer)."""

    input_scale: float
    largest: dict[int, float]
    runs: dict[str, dict[int, dict]]
    input_share: dict[int, float]      # the share of the inputs beyond fp16's largest finite value

    def claims(self) -> dict[str, bool]:
        fp16, bf16, mixed = (self.runs[k] for k in ("fp16 + GradScaler", "bf16", "fp16, first layer float32"))
        return {
            "more than a third of the inputs exceed fp16's 65,504 (inf once autocast casts them), on every seed":
                min(self.input_share.values()) > 1 / 3,
            "the first layer's output exceeds fp16's 65,504 on every seed": min(self.largest.values()) > FP16_MAX,
            "fp16: the loss is inf or NaN at every step, on every seed":
                all(not any(map(_finite, r["losses"])) for r in fp16.values()),
            f"GradScaler skips all {STEPS} steps and the weights never move, on every seed":
                all(r["skipped"] == STEPS and not r["moved"] for r in fp16.values()),
            "bf16: a finite loss at every step and the weights move, on every seed":
                all(all(map(_finite, r["losses"])) and r["moved"] for r in bf16.values()),
            "fp16 with the first layer in float32: a finite loss at every step and the weights move, on every seed":
                all(all(map(_finite, r["losses"])) and r["moved"] for r in mixed.values()),
        }

    def text(self) -> str:
        scales = sorted({r["scale"] for r in self.runs["fp16 + GradScaler"].values()})
        lines = [f"inputs of standard deviation {self.input_scale:g}, {STEPS} updates, seeds {SEEDS[0]}-{SEEDS[-1]}:",
                 *(f"  {claim}: {'yes' if ok else 'NO'}" for claim, ok in self.claims().items()),
                 f"  the scaler's scale after {STEPS} skipped steps: {scales[0]:g} (it started at 65536)"]
        return "\n".join(lines)


def _finite(x: float) -> bool:
    return x == x and abs(x) != float("inf")


def forward_overflow(input_scale: float = 100_000.0) -> Overflow:
    """Chapter 7: fp16 forward overflow against GradScaler, bf16 and a float32 layer, on seeds 0-4."""
    largest, share, runs = {}, {}, {"fp16 + GradScaler": {}, "bf16": {}, "fp16, first layer float32": {}}
    for seed in SEEDS:
        model, x, y = _model_and_data(seed, input_scale, norm=True)
        share[seed] = (x.abs() > FP16_MAX).float().mean().item()
        with torch.no_grad():
            largest[seed] = model[0](x).abs().max().item()
        for name, dtype, first in (("fp16 + GradScaler", torch.float16, False), ("bf16", torch.bfloat16, False),
                                   ("fp16, first layer float32", torch.float16, True)):
            model, x, y = _model_and_data(seed, input_scale, norm=True)
            runs[name][seed] = _train(model, x, y, dtype, first_fp32=first)
    return Overflow(input_scale, largest, runs, share)


@dataclass(frozen=True)
class SkipWarning:
    """Per seed: a correct fp16 loop with a scheduler, unguarded and with the scheduler step guarded."""

    plain: dict[int, dict]
    guarded: dict[int, dict]
    calm: dict[int, dict]

    def claims(self) -> dict[str, bool]:
        return {
            "the scaler skips the first update on every seed": all(r["skipped"] >= 1 for r in self.plain.values()),
            "the correct loop warns 'lr_scheduler.step() before optimizer.step()' once, on every seed":
                all(r["warned"] == 1 for r in self.plain.values()),
            "without a skipped step (inputs of standard deviation 1): no warning, on every seed":
                all(r["skipped"] == 0 and r["warned"] == 0 for r in self.calm.values()),
            "the schedule ran ahead of the updates by the skipped steps, on every seed":
                all(r["scheduled"] - (STEPS - r["skipped"]) == r["skipped"] for r in self.plain.values()),
            "stepping the scheduler only when the scale did not fall: no warning, schedule = updates":
                all(r["warned"] == 0 and r["scheduled"] == STEPS - r["skipped"] for r in self.guarded.values()),
        }

    def text(self) -> str:
        skipped = sorted({r["skipped"] for r in self.plain.values()})
        told = str(skipped[0]) if len(skipped) == 1 else f"{skipped[0]} to {skipped[-1]}"
        return "\n".join([f"fp16 autocast + GradScaler('cpu'), inputs of standard deviation 10, {STEPS} updates, "
                          f"seeds {SEEDS[0]}-{SEEDS[-1]}: {told} update(s) skipped per run",
                          *(f"  {claim}: {'yes' if ok else 'NO'}" for claim, ok in self.claims().items())])


def scheduler_warning(input_scale: float = 10.0) -> SkipWarning:
    """Chapter 7: the scheduler warning a skipped fp16 step causes in a correct loop, on seeds 0-4."""
    runs: dict[str, dict[int, dict]] = {"plain": {}, "guarded": {}, "calm": {}}
    for seed in SEEDS:
        for name, scale, guard in (("plain", input_scale, False), ("guarded", input_scale, True), ("calm", 1.0, False)):
            model, x, y = _model_and_data(seed, scale)
            runs[name][seed] = _train(model, x, y, torch.float16, scheduler=True, guard=guard)
    return SkipWarning(**runs)
