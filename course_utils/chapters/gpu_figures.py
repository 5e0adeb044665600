"""Figures measured on a real GPU, for chapters that learners run on a CPU (1, 5 and 7).

`benchmarks/bench_cuda.py` measures them on a CUDA machine and writes `results/cuda_h100.json`; the
functions here turn that record into the lines a notebook prints, each figure computed from the record,
with the GPU, torch version and date it was measured on.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from course_utils.infra.notebook import sig

RECORDED = Path(__file__).parent / "results" / "cuda_h100.json"


@lru_cache(maxsize=1)
def recorded() -> dict[str, Any]:
    """The record bench_cuda.py wrote."""
    return json.loads(RECORDED.read_text())


def provenance() -> str:
    """Where and when the record was measured; says so when that torch is not the one installed here."""
    import torch

    figures = recorded()
    line = (f"measured on an {figures['gpu']}, torch {figures['torch']} with CUDA {figures['cuda']}, "
            f"{figures['date']} (benchmarks/bench_cuda.py)")
    here = torch.__version__.split("+")[0]
    if figures["torch"].split("+")[0] != here:
        line += f"; not yet re-measured with torch {here}, the version this course pins"
    return line


def pinned_lines() -> list[str]:
    """Chapter 1: a pinned batch, and a 64 MiB copy to the GPU from pageable and from pinned memory."""
    figures = recorded()
    pins, copy = figures["loader_pins"], figures["pinned_copy"]
    pageable, pinned = copy["pageable"], copy["pinned"]
    waits, overlaps = copy["non_blocking_from_pageable"], copy["non_blocking_from_pinned"]
    return [
        f"DataLoader(pin_memory=True) batch pinned: {pins['batch_pinned']}, warnings: {len(pins['warnings'])}",
        f"{copy['bytes_mib']} MiB to the GPU: pageable {sig(pageable['ms'], 3)} ms ({sig(pageable['gb_per_s'], 3)} GB/s), "
        f"pinned {sig(pinned['ms'], 3)} ms ({sig(pinned['gb_per_s'], 3)} GB/s): "
        f"{sig(pageable['ms'] / pinned['ms'], 2)}x faster",
        f"non_blocking from pinned: the call returns after {sig(overlaps['call_returned_ms'], 2)} ms, "
        f"the copy ends at {sig(overlaps['copy_done_ms'], 3)} ms (the CPU is free meanwhile)",
        f"non_blocking from pageable: the call returns after {sig(waits['call_returned_ms'], 3)} ms, "
        f"only when the copy is done ({sig(waits['copy_done_ms'], 3)} ms)",
    ]


NOT_YET = "not in this record yet (added to benchmarks/bench_cuda.py after the record was made; no GPU run since)"


def device_lines() -> list[str]:
    """Chapter 5, exhibits 3 and 7: a model moved after an Adam step, the device-mix error, the 0-d exception and
    its copies, the cost of a sync every step."""
    figures = recorded()
    mix, stall = figures["device_mix"], figures["sync_stall"]
    lines = [f"cuda tensor + cpu tensor: RuntimeError: {mix['error']}",
             f"cuda tensor * torch.tensor(2.0) (0-d, on the CPU): no error, result on {mix['zero_dim_cpu_times_cuda_device']}"]
    copies = figures.get("zero_dim_copies")
    if copies is None:
        lines.append(f"host-to-device copies of the three ways to scale by 2: {NOT_YET}")
    else:
        lines.append(f"host-to-device copies in {copies['calls']} calls (torch's profiler): " + "; ".join(
            f"{name} {copies[name]['host_to_device_copies']}" for name in copies if name != "calls"))
    moved = figures.get("moved_after_step")
    if moved is None:
        lines.append(f"Adam step on the CPU, then model.cuda() and a step: {NOT_YET}")
    else:
        lines.append(f"Adam step on the CPU, then model.cuda() and a step: {moved['error'] or 'no error'} "
                     f"(weights on {moved['weights_on']}, Adam's moments on {moved['moments_on']})")
    for name in ("small MLP", "wide MLP + CPU batch prep"):
        every, summed = stall[name]["item_every_step"], stall[name]["sum_on_gpu"]
        lines.append(f"{name}: loss.item() every step {sig(every / 1000, 3)} ms/step, summed on the GPU "
                     f"{sig(summed / 1000, 3)} ms/step ({sig(every / summed, 3)}x)")
    return lines


def precision_lines() -> list[str]:
    """Chapter 7, section 8: one training step in float32, TF32, bf16 and fp16 + GradScaler."""
    figures = recorded()
    lines = []
    for batch, width in sorted({(row["batch"], row["width"]) for row in figures["precision"]}, reverse=True):
        rows = [row for row in figures["precision"] if (row["batch"], row["width"]) == (batch, width)]
        base = next(row for row in rows if row["mode"] == "none" and not row["tf32"])
        params = base["params"]
        lines.append(f"batch {batch}, {base['depth']} hidden layers of {width} ({sig(params / 1e6, 3)}M parameters): "
                     f"float32 weights, gradients and AdamW's two moments {16 * params / 2**20:.0f} MiB in every mode; "
                     f"autocast's 16-bit weight copies {2 * params / 2**20:.0f} MiB")
        for row in rows:
            name = {"none": "float32 + TF32" if row["tf32"] else "float32", "bf16": "bf16 autocast",
                    "fp16": "fp16 autocast + GradScaler"}[row["mode"]]
            lines.append(f"  {name:<27} {sig(row['ms_per_step'], 3):>5} ms/step "
                         f"({sig(base['ms_per_step'] / row['ms_per_step'], 2)}x float32), "
                         f"backward keeps {row['graph_mib']:.0f} MiB (step peak {row['peak_mib']:.0f}), "
                         f"logits {row['logits_dtype'].removeprefix('torch.')}, "
                         f"weights {row['weights_dtype'].removeprefix('torch.')}")
    zeros = figures["underflow"]["zero_fraction_of_weight_grads"]
    lines.append(f"a loss x {figures['underflow']['loss_scale_factor']:g}: share of weight gradients exactly 0: "
                 + ", ".join(f"{name} {sig(100 * share, 2)}%" for name, share in zeros.items()))
    return lines


def compile_lines() -> list[str]:
    """Chapter 7, section 13: the spiral run through fit() on the GPU, eager and compiled, cold cache."""
    lines = []
    for row in recorded()["spiral"]:
        elapsed = row["epoch_elapsed_s"]
        later = (elapsed[-1] - elapsed[0]) / (len(elapsed) - 1)
        name = f"{'compiled' if row['compile'] else 'eager'}, amp {row['amp']}"
        lines.append(f"{name:<20} first epoch {sig(elapsed[0], 2)} s, later epochs {sig(later * 1000, 2)} ms each, "
                     f"final val loss {sig(row['final_val_loss'], 3)}")
    return lines
