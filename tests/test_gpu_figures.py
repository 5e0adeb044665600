"""The recorded GPU figures (course_utils/chapters/results/cuda_h100.json) and the chapters' words about them.

The chapters print the record and then explain it; these tests check that every sentence of that
explanation holds in the record, so re-recording on another GPU either keeps the text true or fails here.
On a CUDA machine the quick parts of benchmarks/bench_cuda.py also run live and must agree."""
from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest
import torch

from course_utils.chapters import gpu_figures

ROOT = Path(__file__).resolve().parents[1]


def numbers(value):
    if isinstance(value, dict):
        for item in value.values():
            yield from numbers(item)
    elif isinstance(value, list):
        for item in value:
            yield from numbers(item)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield value


def test_the_record_is_whole_and_every_figure_finite():
    figures = gpu_figures.recorded()
    for key in ("gpu", "torch", "cuda", "date", "precision", "underflow", "pinned_copy", "loader_pins",
                "device_mix", "sync_stall", "spiral"):
        assert key in figures, key
    assert all(math.isfinite(x) and x >= 0 for x in numbers(figures))
    for lines in (gpu_figures.pinned_lines(), gpu_figures.device_lines(), gpu_figures.precision_lines(),
                  gpu_figures.compile_lines()):
        assert lines and all(isinstance(line, str) and line for line in lines)
    assert figures["gpu"] in gpu_figures.provenance() and figures["date"] in gpu_figures.provenance()


def test_chapter_1_pinned_copies_are_faster_and_do_not_block():
    pins, copy = gpu_figures.recorded()["loader_pins"], gpu_figures.recorded()["pinned_copy"]
    assert pins["batch_pinned"] is True and pins["warnings"] == []
    assert copy["pageable"]["ms"] > 2 * copy["pinned"]["ms"]
    overlaps, waits = copy["non_blocking_from_pinned"], copy["non_blocking_from_pageable"]
    assert overlaps["call_returned_ms"] < 0.1 * overlaps["copy_done_ms"]
    assert waits["call_returned_ms"] > 0.9 * waits["copy_done_ms"]


def test_chapter_5_device_mix_and_sync_stall():
    mix, stall = gpu_figures.recorded()["device_mix"], gpu_figures.recorded()["sync_stall"]
    assert "same device" in mix["error"] and mix["zero_dim_cpu_times_cuda_device"].startswith("cuda")
    small, wide = stall["small MLP"], stall["wide MLP + CPU batch prep"]
    assert 0.9 < small["item_every_step"] / small["sum_on_gpu"] < 1.1          # nothing queued: no cost
    assert wide["item_every_step"] / wide["sum_on_gpu"] > 1.3                  # the overlap is lost


def check_moved_and_copies(moved: dict | None, copies: dict | None) -> None:
    """Chapter 5's words on a model moved after an Adam step and on the 0-d CPU tensor's copies (None: not recorded)."""
    if moved is not None:
        assert moved["error"].startswith("RuntimeError") and "device" in moved["error"]
        assert moved["weights_on"].startswith("cuda") and moved["moments_on"] == "cpu"
    if copies is not None:
        assert copies["cuda_x * 2.0"]["host_to_device_copies"] == 0
        assert copies["cuda_x * torch.tensor(2.0)"]["host_to_device_copies"] == 0       # read as a number
        assert copies["cuda_x * torch.tensor(2.0).cuda()"]["host_to_device_copies"] == copies["calls"]


def test_chapter_5_moved_model_and_zero_dim_copies_as_recorded_or_said_missing(monkeypatch):
    figures = gpu_figures.recorded()
    check_moved_and_copies(figures.get("moved_after_step"), figures.get("zero_dim_copies"))
    lines = gpu_figures.device_lines()
    for key, words in (("moved_after_step", "model.cuda()"), ("zero_dim_copies", "host-to-device copies")):
        line = next(line for line in lines if words in line)
        assert (gpu_figures.NOT_YET in line) == (key not in figures), line
    made = {"moved_after_step": {"error": "RuntimeError: Expected all tensors to be on the same device", "weights_on":
                                 "cuda:0", "moments_on": "cpu"},
            "zero_dim_copies": {"calls": 10, "cuda_x * 2.0": {"host_to_device_copies": 0},
                                "cuda_x * torch.tensor(2.0)": {"host_to_device_copies": 0},
                                "cuda_x * torch.tensor(2.0).cuda()": {"host_to_device_copies": 10}}}
    monkeypatch.setattr(gpu_figures, "recorded", lambda: {**figures, **made})     # a record that has them
    lines = gpu_figures.device_lines()
    assert not any(gpu_figures.NOT_YET in line for line in lines)
    assert any("cuda_x * torch.tensor(2.0).cuda() 10" in line for line in lines)
    assert any("Adam's moments on cpu" in line for line in lines)


def test_chapter_7_precision_claims():
    rows = {(r["batch"], r["width"], r["mode"], r["tf32"]): r for r in gpu_figures.recorded()["precision"]}
    for batch, width in [(4096, 4096), (32768, 1024)]:
        fp32 = rows[batch, width, "none", False]
        tf32, bf16, fp16 = rows[batch, width, "none", True], rows[batch, width, "bf16", False], rows[batch, width, "fp16", False]
        assert fp32["ms_per_step"] > tf32["ms_per_step"] > bf16["ms_per_step"]
        assert fp32["ms_per_step"] > 2 * fp16["ms_per_step"]
        assert all(r["weights_dtype"] == "torch.float32" for r in (bf16, fp16))
        assert bf16["logits_dtype"] == "torch.bfloat16" and fp16["logits_dtype"] == "torch.float16"
        assert fp32["peak_mib"] >= fp32["graph_mib"]
    assert rows[32768, 1024, "bf16", False]["graph_mib"] < 0.7 * rows[32768, 1024, "none", False]["graph_mib"]
    assert rows[4096, 4096, "bf16", False]["graph_mib"] > 0.95 * rows[4096, 4096, "none", False]["graph_mib"]
    wide = {mode: rows[4096, 4096, mode, False] for mode in ("none", "bf16", "fp16")}
    params = wide["none"]["params"]
    # at batch = width: half of float32's activations plus the 16-bit weight copies, to within 5 %
    assert abs(wide["bf16"]["graph_mib"] - (wide["none"]["graph_mib"] / 2 + 2 * params / 2**20)) < 0.05 * wide["bf16"]["graph_mib"]
    assert wide["bf16"]["peak_mib"] == wide["fp16"]["peak_mib"] == wide["none"]["peak_mib"]    # the peak does not move
    assert all(r["peak_mib"] > 16 * r["params"] / 2**20 for r in rows.values())              # above the float32 state
    zeros = gpu_figures.recorded()["underflow"]["zero_fraction_of_weight_grads"]
    assert zeros["fp32"] < 0.01 and zeros["fp16, no scaler"] == 1.0 and zeros["fp16, GradScaler"] < 0.01


def test_chapter_7_compile_costs_up_front_and_saves_nothing_on_the_spiral():
    runs = {(r["compile"], r["amp"]): r for r in gpu_figures.recorded()["spiral"]}
    for amp in ("none", "bf16", "fp16"):
        eager, compiled = runs[False, amp], runs[True, amp]
        assert compiled["epoch_elapsed_s"][0] > 10 * eager["epoch_elapsed_s"][0]
        per_epoch = [(r["epoch_elapsed_s"][-1] - r["epoch_elapsed_s"][0]) / 4 for r in (eager, compiled)]
        assert per_epoch[1] > 0.8 * per_epoch[0]                              # no saving afterwards
        assert abs(eager["final_val_loss"] - compiled["final_val_loss"]) < 0.01


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none on this machine)")
def test_the_quick_measurements_agree_live_on_this_gpu():
    spec = importlib.util.spec_from_file_location("bench_cuda", ROOT / "benchmarks" / "bench_cuda.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.loader_pins() == {"batch_pinned": True, "warnings": []}
    live = bench.device_mix()
    assert "same device" in live["error"] and live["zero_dim_cpu_times_cuda_device"].startswith("cuda")
    zeros = bench.underflow()["zero_fraction_of_weight_grads"]
    assert zeros["fp16, no scaler"] == 1.0 and zeros["fp16, GradScaler"] < 0.01
    check_moved_and_copies(bench.moved_after_step(), bench.zero_dim_copies())
