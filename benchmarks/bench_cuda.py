"""The course's CUDA claims, measured on a real GPU: precision, GradScaler, pinned memory, syncs, compile.

Needs a CUDA GPU (CI has none). Writes one JSON file of figures; chapters 1, 5 and 7 print them
(`course_utils.chapters.gpu_figures`) with the GPU, torch version and date they were measured on.

1. precision: one training step of a wide MLP (batch 4096 with 4 x 4096 hidden, and batch 32768 with
   4 x 1024 hidden) in float32, bf16 autocast and fp16 autocast + GradScaler, through the trainer's own
   `Precision` policy: time per step (CUDA events, median of 50 after 10 warm-ups), peak allocated memory
   over the step, and the memory the forward pass leaves for backward (the course's meter, reading the
   allocator). float32 is run with TF32 off (torch's default for matmul) and on.
2. underflow: a loss so small that its float16 gradients underflow; the fraction of gradient entries that
   come out exactly zero without a scaler, and with GradScaler's first scale (65,536).
3. pinned memory: a 64 MiB host-to-device copy from pageable and from pinned memory, and whether a
   non_blocking copy from pinned memory returns before the copy is done (it overlaps with the host).
4. chapter 1's pinned DataLoader batch; chapter 5's device mix and the cost of `loss.item()` every step
   (minimum of 5 interleaved runs of 60 steps: a small MLP, and a wide one that prepares batches on the CPU);
   chapter 5's model moved to the GPU after an Adam step on the CPU (the next step's error), and the
   host-to-device copies torch's profiler counts for three ways of scaling a CUDA tensor by 2.
5. the course's spiral run through `fit()` on the GPU, eager and compiled, each precision: seconds per
   epoch and final validation loss (a tiny model: launch-bound, where the GPU does not help). Each compiled
   run starts with an empty compile cache, so its first epoch holds the whole code generation.

Run on a CUDA machine: python benchmarks/bench_cuda.py  (rewrites course_utils/chapters/results/cuda_h100.json)
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from course_utils.chapters.gpu_figures import RECORDED
from course_utils.engine.memory import GraphMemoryMeter
from course_utils.production import FitConfig, fit
from course_utils.production.amp import Precision


def cuda_ms(work, repeats: int = 50, warmup: int = 10) -> float:
    """Median milliseconds of work() on the GPU, timed with CUDA events."""
    for _ in range(warmup):
        work()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        work()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


DEPTH = 4          # hidden layers of the wide MLP


def wide_mlp(width: int, depth: int = DEPTH, classes: int = 10) -> nn.Module:
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(width, classes))


def precision_step(mode: str, tf32: bool, batch: int, width: int) -> dict:
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.manual_seed(0)
    device = torch.device("cuda")
    model = wide_mlp(width).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    policy = Precision(mode, device)
    x = torch.randn(batch, width, device=device)
    y = torch.randint(0, 10, (batch,), device=device)

    def step():
        optimizer.zero_grad(set_to_none=True)
        with policy.autocast():
            loss = nn.functional.cross_entropy(model(x), y)
        policy.backward(loss)
        policy.unscale(optimizer)
        policy.step(optimizer)

    step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    ms = cuda_ms(step)
    peak = torch.cuda.max_memory_allocated()
    optimizer.zero_grad(set_to_none=True)
    meter = GraphMemoryMeter("cuda")                            # what the forward pass leaves for backward
    with meter, policy.autocast():
        loss = nn.functional.cross_entropy(model(x), y)
    graph = meter.bytes
    del loss
    weights = sum(p.numel() for p in model.parameters() if p.dim() == 2)
    flops = 6 * batch * weights                               # forward 2, backward 4 per multiply-add
    with policy.autocast():
        logits_dtype = str(model(x[:8]).dtype)
    result = dict(mode=mode, tf32=tf32, batch=batch, width=width, depth=DEPTH,
                  params=sum(p.numel() for p in model.parameters()), ms_per_step=round(ms, 3), tflops=round(flops / ms / 1e9, 1),
                  peak_mib=round(peak / 2**20, 1), graph_mib=round(graph / 2**20, 1), logits_dtype=logits_dtype,
                  weights_dtype=str(next(model.parameters()).dtype))
    torch.backends.cuda.matmul.allow_tf32 = False
    del model, optimizer, x, y
    torch.cuda.empty_cache()
    return result


def underflow() -> dict:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)).cuda()
    x, y = torch.randn(512, 256, device="cuda"), torch.randint(0, 10, (512,), device="cuda")
    out = {}
    for name, scale in [("fp32", None), ("fp16, no scaler", 1.0), ("fp16, GradScaler", 65536.0)]:
        model.zero_grad(set_to_none=True)
        context = torch.autocast("cuda", dtype=torch.float16) if scale else contextlib.nullcontext()
        with context:
            loss = nn.functional.cross_entropy(model(x), y) * 1e-6   # a loss this small: late in training
        (loss * (scale or 1.0)).backward()
        grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.dim() == 2])
        out[name] = round((grads == 0).float().mean().item(), 4)
    return {"loss_scale_factor": 1e-6, "zero_fraction_of_weight_grads": out}


def pinned_copy(mib: int = 64) -> dict:
    n = mib * 2**20 // 4
    pageable, pinned = torch.randn(n), torch.randn(n).pin_memory()
    target = torch.empty(n, device="cuda")
    result = {"bytes_mib": mib}
    for name, source in [("pageable", pageable), ("pinned", pinned)]:
        ms = cuda_ms(lambda: target.copy_(source, non_blocking=True), repeats=30, warmup=5)
        result[name] = {"ms": round(ms, 3), "gb_per_s": round(mib * 2**20 / ms / 1e6, 1)}
    torch.cuda.synchronize()
    start = time.perf_counter()
    target.copy_(pinned, non_blocking=True)
    returned = time.perf_counter() - start
    torch.cuda.synchronize()
    done = time.perf_counter() - start
    result["non_blocking_from_pinned"] = {"call_returned_ms": round(returned * 1e3, 3),
                                          "copy_done_ms": round(done * 1e3, 3)}
    start = time.perf_counter()
    target.copy_(pageable, non_blocking=True)
    returned = time.perf_counter() - start
    torch.cuda.synchronize()
    result["non_blocking_from_pageable"] = {"call_returned_ms": round(returned * 1e3, 3),
                                            "copy_done_ms": round((time.perf_counter() - start) * 1e3, 3)}
    return result


def loader_pins() -> dict:
    """Chapter 1: with a GPU, DataLoader(pin_memory=True) hands out page-locked batches, and says nothing."""
    data = TensorDataset(torch.arange(8.0).reshape(8, 1), torch.arange(8))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        x, y = next(iter(DataLoader(data, batch_size=4, pin_memory=True)))
    return {"batch_pinned": x.is_pinned() and y.is_pinned(), "warnings": [str(w.message) for w in caught]}


def device_mix() -> dict:
    """Chapter 5, exhibit 7: a CPU tensor and a CUDA tensor in one operation; and the 0-d exception."""
    gpu = torch.ones(3, device="cuda")
    try:
        gpu + torch.ones(3)
        error = None
    except RuntimeError as exc:
        error = str(exc).splitlines()[0]
    scalar = gpu * torch.tensor(2.0)                     # a 0-d CPU tensor passes as a number
    return {"error": error, "zero_dim_cpu_times_cuda_device": str(scalar.device)}


def moved_after_step() -> dict:
    """Chapter 5, exhibit 3: one Adam step on the CPU, then `model.cuda()` and a step. The parameters move in
    place (the optimizer still holds them), Adam's two moments stay on the CPU."""
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step() -> None:
        optimizer.zero_grad()
        model(torch.randn(8, 4, device=model.weight.device)).sum().backward()
        optimizer.step()

    step()
    model.cuda()
    try:
        step()
        error = None
    except RuntimeError as exc:
        error = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    return {"error": error, "weights_on": str(model.weight.device),
            "moments_on": str(optimizer.state[model.weight]["exp_avg"].device)}


def zero_dim_copies(calls: int = 10) -> dict:
    """Chapter 5, exhibit 7: host-to-device copies (torch's profiler, CUDA activity) in `calls` calls of three ways
    to scale a CUDA tensor by 2: a Python number, a 0-d CPU tensor, and a 0-d tensor moved to the GPU each time."""
    from torch.profiler import ProfilerActivity, profile

    x = torch.ones(1024, device="cuda")
    forms = {"cuda_x * 2.0": lambda: x * 2.0,
             "cuda_x * torch.tensor(2.0)": lambda: x * torch.tensor(2.0),
             "cuda_x * torch.tensor(2.0).cuda()": lambda: x * torch.tensor(2.0).cuda()}
    result: dict = {"calls": calls}
    for name, work in forms.items():
        work()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                work()
            torch.cuda.synchronize()
        names = [event.name for event in prof.events()]
        result[name] = {"host_to_device_copies": sum("HtoD" in n for n in names)}   # kineto: "Memcpy HtoD (...)"
    return result


def sync_stall(steps: int = 60) -> dict:
    """Chapter 5: `loss.item()` every step makes the CPU wait for the GPU; summing on the GPU does not.

    Two loops: a small MLP (the GPU finishes each kernel before the CPU launches the next: nothing queued,
    nothing to wait for) and a wide one whose CPU prepares the next batch (random numbers, pinned, copied
    non_blocking) while the GPU computes the current one, the overlap that a sync every step destroys.
    """
    result: dict = {"steps": steps, "unit": "us per step"}
    for name, width, batch, prepare in [("small MLP", 256, 256, False), ("wide MLP + CPU batch prep", 2048, 4096, True)]:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(256, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                              nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 3)).cuda()
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
        x, y = torch.randn(batch, 256, device="cuda"), torch.randint(0, 3, (batch,), device="cuda")

        def run(read_every_step: bool) -> float:
            nonlocal x
            total = torch.zeros((), device="cuda")
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(steps):
                optimizer.zero_grad(set_to_none=True)
                loss = nn.functional.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
                if read_every_step:
                    loss.item()
                else:
                    total += loss.detach()
                if prepare:                               # the next batch, made on the CPU meanwhile
                    x = torch.randn(batch, 256).pin_memory().to("cuda", non_blocking=True)
            total.item()
            torch.cuda.synchronize()
            return (time.perf_counter() - start) / steps * 1e6

        run(True)                                         # warm-up
        times: dict[str, list[float]] = {"item_every_step": [], "sum_on_gpu": []}
        for _ in range(5):
            times["item_every_step"].append(run(True))
            times["sum_on_gpu"].append(run(False))
        result[name] = {key: round(min(values), 1) for key, values in times.items()}
    return result


def spiral_runs(epochs: int = 5) -> list[dict]:
    rows = []
    for compile_ in (False, True):
        for amp in ("none", "bf16", "fp16"):
            with tempfile.TemporaryDirectory() as folder, tempfile.TemporaryDirectory() as cache:
                os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache          # every compiled run starts cold
                torch._dynamo.reset()
                config = FitConfig(out=folder, epochs=epochs, device="cuda", amp=amp, compile=compile_,
                                   progress=False, tensorboard=False)
                start = time.perf_counter()
                with contextlib.redirect_stdout(io.StringIO()):
                    result = fit(config)
                seconds = time.perf_counter() - start
            times = [row.get("elapsed_s") for row in result.history]
            rows.append(dict(amp=amp, compile=compile_, seconds=round(seconds, 2), epoch_elapsed_s=times,
                             final_val_loss=round(result.final["val_loss"], 4),
                             final_val_acc=round(result.final["val_acc"], 4), updates=result.updates,
                             skipped_updates=result.skipped_updates))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(RECORDED))
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench_cuda: no CUDA GPU here")
    figures = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
               "date": time.strftime("%Y-%m-%d")}
    sections = {
        "precision": lambda: [precision_step(mode, tf32, batch, width)
                              for batch, width in [(4096, 4096), (32768, 1024)]
                              for mode, tf32 in [("none", False), ("none", True), ("bf16", False), ("fp16", False)]],
        "underflow": underflow, "pinned_copy": pinned_copy, "loader_pins": loader_pins, "device_mix": device_mix,
        "moved_after_step": moved_after_step, "zero_dim_copies": zero_dim_copies, "sync_stall": sync_stall,
        "spiral": spiral_runs}
    for name, measure in sections.items():   # the record is rewritten after each: a run cut short keeps the rest
        figures[name] = measure()
        Path(args.out).write_text(json.dumps(figures, indent=1) + "\n")
        print(f"{name}: done", flush=True)
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
