"""Chapter 3: backward(create_graph=True) ties each parameter to its own gradient, and what that keeps alive.

With create_graph=True the gradient written into ``.grad`` carries a graph, and that graph refers back to the
parameter (its AccumulateGrad node): a reference cycle that runs through autograd's C++ graph, where Python's
cycle collector cannot see it. A parameter thrown away with such a ``.grad`` is never freed, not even by
``gc.collect()``. Meta-learning code meets it when it makes a copy of the model per task and calls backward on
it; ``torch.autograd.grad``, which returns the gradients instead of writing ``.grad``, makes no cycle, and setting
each ``.grad`` to None before dropping the copy breaks it. An ordinary loop keeps its parameters and replaces
``.grad`` every step (``zero_grad`` sets it to None), so the cycle never outlives a step there.
"""
from __future__ import annotations

import copy
import gc
import warnings
import weakref

import torch
from torch import nn

WAYS = ("backward(create_graph=True)", "autograd.grad(create_graph=True)",
        "backward(create_graph=True), then p.grad = None")


def throwaway_copies(how: str, tasks: int = 5) -> dict[str, int]:
    """`tasks` copies of one Linear(50, 50), each given one backward `how` and dropped: how many copies' parameters
    are still alive after the loop and after gc.collect(), and the bytes they hold. (torch warns about the cycle
    once per process, so whether a call sees the warning depends on what ran before it: not counted here.)"""
    if how not in WAYS:
        raise ValueError(f"how must be one of {WAYS}, not {how!r}")
    torch.manual_seed(0)
    base = nn.Linear(50, 50)
    refs: list[list[weakref.ref]] = []
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()                  # the counts below may not depend on when Python's collector happens to run
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(tasks):
                model = copy.deepcopy(base)
                loss = model(torch.randn(4, 50)).pow(2).sum()
                if how == WAYS[1]:
                    torch.autograd.grad(loss, list(model.parameters()), create_graph=True)
                else:
                    loss.backward(create_graph=True)
                    if how == WAYS[2]:
                        for parameter in model.parameters():
                            parameter.grad = None
                        del parameter         # the loop's name would keep the last one alive
                refs.append([weakref.ref(p) for p in model.parameters()])
                del model, loss

        def alive() -> list[list[torch.Tensor]]:
            return [[p for p in (r() for r in copy_refs) if p is not None] for copy_refs in refs]
        after_loop = sum(bool(a) for a in alive())
        gc.collect()
        left = alive()
    finally:
        if was_enabled:
            gc.enable()
    return {"alive after the loop": after_loop, "alive after gc.collect()": sum(bool(a) for a in left),
            "bytes held": sum(p.numel() * p.element_size() for a in left for p in a)}


def graph_cycle_lines(tasks: int = 5) -> list[str]:
    lines = []
    for how in WAYS:
        r = throwaway_copies(how, tasks)
        lines.append(f"{how}: copies alive after the loop {r['alive after the loop']} of {tasks}, after gc.collect() "
                     f"{r['alive after gc.collect()']} ({r['bytes held']:,} bytes of parameters held)")
    return lines
