"""What the loop doctor costs: the same loop with and without ``LoopDoctor`` around it (goal: <= 1.3x).

Two loops, each timed bare and watched, runs interleaved, best of N and median printed:

- **course default run**: ``stream(build(TrainConfig()))`` consumed to the end (the course's instrumented
  loop, 10 epochs of 600 spiral points, batch 32, Adam, validation every epoch);
- **plain loop**: the same training written by hand (zero_grad, forward, loss, backward, step,
  ``loss.item()``, validation under ``no_grad``): less work per step, so the doctor's share is larger.

Times are the process's CPU time (``time.process_time``, one thread): on a shared, loaded machine wall time
mostly measures the neighbours. The final weights of the bare and watched runs are compared bitwise.

Last, the cost of the leakage check on CIFAR-sized data (issue 23: the old doctor hashed every example through
``__getitem__`` when it was built, 3.3 s for 50,000): building and entering the doctor with a 50,000-image
training set and a 10,000-image validation set, and the report that keys their raw ``.data`` arrays.
Run: .venv/bin/python benchmarks/bench_doctor.py [--repeats N]
"""
from __future__ import annotations

import argparse
import statistics
import time
import warnings

import torch
from torch import nn
from torch.utils.data import DataLoader

from course_utils.doctor import LoopDoctor
from course_utils.engine.loop import stream
from course_utils.engine.session import TrainConfig, build

STEPS = TrainConfig().arithmetic().total_micro_steps   # training steps of the default run (190)


def course_run(watched: bool) -> tuple[float, list[torch.Tensor]]:
    """The course's default run; returns the wall time of the loop and the final weights."""
    state = build(TrainConfig())
    start = time.process_time()
    if watched:
        with LoopDoctor(state.model, state.optimizer, state.scheduler, state.train_loader, state.val_loader) as doc:
            for _ in stream(state):
                pass
        assert not doc.report().findings, doc.report()
    else:
        for _ in stream(state):
            pass
    return time.process_time() - start, [p.detach().clone() for p in state.model.parameters()]


def plain_run(watched: bool) -> tuple[float, list[torch.Tensor]]:
    """A hand-written loop on the same data and model; returns the loop's wall time and the final weights."""
    state = build(TrainConfig(measure_memory=False))
    model, optimizer, loss_fn = state.model, state.optimizer, nn.CrossEntropyLoss()
    train, val = state.train_loader, DataLoader(state.splits.val, batch_size=256)
    torch.manual_seed(0)

    def loop():
        for _ in range(10):
            model.train()
            for xb, yb in train:
                optimizer.zero_grad()
                loss = loss_fn(model(xb), yb)
                loss.backward()
                optimizer.step()
                loss.item()
            model.eval()
            with torch.no_grad():
                for xb, yb in val:
                    (model(xb).argmax(1) == yb).sum().item()

    start = time.process_time()
    if watched:
        with LoopDoctor(model, optimizer, None, train, val):
            loop()
    else:
        loop()
    return time.process_time() - start, [p.detach().clone() for p in model.parameters()]


class CifarSized(torch.utils.data.Dataset):
    """torchvision's CIFAR-10 layout: n raw uint8 images in .data (N, 32, 32, 3); __getitem__ is never called."""

    def __init__(self, n: int, seed: int):
        g = torch.Generator().manual_seed(seed)
        self.data = torch.randint(0, 256, (n, 32, 32, 3), dtype=torch.uint8, generator=g).numpy()

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index):
        raise AssertionError("the doctor must not call __getitem__")


def leakage_cost() -> tuple[float, float, int]:
    """CPU seconds to build and enter a doctor given 50,000 + 10,000 CIFAR-sized images, and for its report."""
    train, val = CifarSized(50_000, 1), CifarSized(10_000, 2)
    val.data[:7] = train.data[100:107]                    # seven copies: the report must find them
    model = nn.Linear(4, 2)
    start = time.process_time()
    with LoopDoctor(model, train_data=train, val_data=val) as doctor:
        built = time.process_time() - start
    start = time.process_time()
    report = doctor.report()
    keyed = time.process_time() - start
    evidence = report.findings[0].evidence if report.findings else ""
    return built, keyed, int(evidence.split()[0]) if evidence else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    repeats = parser.parse_args().repeats
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    print(f"torch {torch.__version__}, 1 thread, CPU time, best and median of {repeats} interleaved runs")
    for label, runner in [("course default run", course_run), ("plain hand-written loop", plain_run)]:
        times: dict[bool, list[float]] = {False: [], True: []}
        same = True
        for _ in range(repeats):
            bare_seconds, bare_weights = runner(False)
            watched_seconds, watched_weights = runner(True)
            times[False].append(bare_seconds)
            times[True].append(watched_seconds)
            same = same and all(torch.equal(a, b) for a, b in zip(bare_weights, watched_weights))
        bare, doc = min(times[False]), min(times[True])
        print(f"{label:24}: bare {bare:.3f} s, with doctor {doc:.3f} s -> {doc / bare:.2f}x (best), "
              f"{(doc - bare) / STEPS * 1e6:+.0f} us per training step; "
              f"median {statistics.median(times[True]) / statistics.median(times[False]):.2f}x; "
              f"weights bitwise equal: {same}")
    built, keyed, copies = leakage_cost()
    print(f"leakage check on 50,000 + 10,000 CIFAR-sized images: doctor built and entered in {built * 1e3:.1f} ms "
          f"(nothing read up front), report keyed them in {keyed:.2f} s and found {copies} of the 7 copies")


if __name__ == "__main__":
    main()
