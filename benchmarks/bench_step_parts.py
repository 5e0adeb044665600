"""What each piece of the engine's telemetry costs inside a real training step (issue 9, item 8).

The plain step (zero_grad, forward, loss, backward, Adam step, loss.item()) is run over the same
19 batches of the course's default run, and again with ONE addition at a time: the pre-clip gradient
norm, its first torch call alone, the run's private RNG swap, saved-tensor hooks that only wrap each
tensor (in a C-level ``slice``, or in a tuple made by a Python function), the graph-memory meter, and the
engine's whole ``micro_step`` with the meter off and on. Variants are interleaved round by round so
that drift in the machine hits all alike; the minimum CPU time per step is reported, as extra
microseconds over the plain step. Beside it, the norm and the RNG swap are timed alone, outside the
loop, for comparison with what they cost inside it.

Run: .venv/bin/python benchmarks/bench_step_parts.py [--rounds N]
"""
from __future__ import annotations

import argparse
import contextlib
import operator
import time
import timeit

import torch

from course_utils.engine import loop
from course_utils.engine.session import TrainConfig, build


def _wrap(tensor: torch.Tensor) -> tuple:
    return (tensor,)


def _step(state, inputs, targets, extra, hooks):
    optimizer = state.optimizer
    optimizer.zero_grad()
    with hooks or contextlib.nullcontext():
        loss = state.loss_fn(state.model(inputs), targets)
    loss.backward()
    if extra is not None:
        extra(state)
    optimizer.step()
    loss.item()


def variants() -> dict:
    """name -> (measure_memory, function(state, batches)) for every contender."""
    norm = lambda s: loop.clip(s.params, None)                                  # noqa: E731
    first_call = lambda s: torch._foreach_norm([p.grad for p in s.params])      # noqa: E731
    c_wrap = torch.autograd.graph.saved_tensors_hooks(slice, operator.attrgetter("stop"))
    py_wrap = torch.autograd.graph.saved_tensors_hooks(_wrap, operator.itemgetter(0))

    def plain(extra=None, hooks=None, rng=False, meter=False):
        def run(state, batches):
            for inputs, targets in batches:
                if meter:
                    state.meter.reset_peak()
                with state.rng if rng else contextlib.nullcontext():
                    _step(state, inputs, targets, extra, state.meter if meter else hooks)
        return run

    def engine(state, batches):
        sizes = [len(t) for _, t in batches]
        for index, (inputs, targets) in enumerate(batches):
            with state.rng:
                loop.micro_step(state, inputs, targets, index, sizes)

    return {"plain step": (False, plain()),
            "+ pre-clip norm (loop.clip)": (False, plain(extra=norm)),
            "+ its first call (_foreach_norm)": (False, plain(extra=first_call)),
            "+ private RNG swap": (False, plain(rng=True)),
            "+ hooks that wrap in a C slice": (False, plain(hooks=c_wrap)),
            "+ hooks that wrap in a Python tuple": (False, plain(hooks=py_wrap)),
            "+ graph-memory meter": (True, plain(meter=True)),
            "engine micro_step, meter off": (False, engine),
            "engine micro_step, meter on": (True, engine)}


def isolated() -> dict[str, float]:
    """Microseconds per call of the additions, each timed alone (warm caches, nothing else running)."""
    state = build(TrainConfig(measure_memory=False))
    inputs, targets = next(iter(state.train_loader))
    state.loss_fn(state.model(inputs), targets).backward()
    def swap():
        with state.rng:
            pass

    stmts = {"pre-clip norm (loop.clip)": lambda: loop.clip(state.params, None), "private RNG swap": swap}
    return {name: min(timeit.repeat(fn, number=2000, repeat=5)) / 2000 * 1e6 for name, fn in stmts.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100)
    args = parser.parse_args()
    torch.set_num_threads(1)
    contenders = variants()
    runs = {}
    for name, (measure, _) in contenders.items():
        state = build(TrainConfig(measure_memory=measure))
        runs[name] = (state, list(state.train_loader))
    best = {name: float("inf") for name in contenders}
    for _ in range(args.rounds):
        for name, (_, fn) in contenders.items():
            state, batches = runs[name]
            start = time.process_time()
            fn(state, batches)
            best[name] = min(best[name], (time.process_time() - start) / len(batches))
    base = best["plain step"]
    print(f"torch {torch.__version__}, 1 thread; the course's default run's 19 batches (batch 32, hidden 64), "
          f"minimum CPU time per step over {args.rounds} interleaved rounds")
    for name, seconds in best.items():
        extra = "" if name == "plain step" else f"   +{(seconds - base) * 1e6:6.1f} µs"
        print(f"  {name:<36} {seconds * 1e6:7.1f} µs{extra}")
    print("alone, outside the loop:")
    for name, micros in isolated().items():
        print(f"  {name:<36} {micros:7.1f} µs")


if __name__ == "__main__":
    main()
