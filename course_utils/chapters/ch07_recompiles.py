"""Chapter 7: when torch.compile compiles again. Dynamo compiles a graph for the input shapes it sees and guards on
them; a new shape fails the guard and compiles again. Counted with a backend that records each compilation and
runs the captured graph as it is (no code generation), so each count is exactly what inductor would compile, at
none of its cost. The batches: sequences of varying lengths, or a loader whose last batch is smaller."""
from __future__ import annotations

import torch
from torch import nn

LENGTHS = (32, 17, 45, 32, 8, 64, 3, 32, 50, 21, 40, 12)      # twelve batches, ten distinct batch sizes


def compilations(batch_sizes, dynamic: bool | None = None, mark_dynamic: bool = False) -> dict[str, int]:
    """Train steps of a small MLP compiled with `dynamic` over batches of these sizes: how many times Dynamo
    compiled, and how many batches ran without a compiled graph (past the recompile limit Dynamo stops compiling
    that function and runs it eagerly), and how many warnings about that limit Dynamo logged (counted here, kept
    off this process's stderr)."""
    import logging

    import torch._dynamo
    torch._dynamo.reset()
    compiled, ran = [], []

    def counting_backend(graph, example_inputs):
        compiled.append(1)

        def run(*args):
            ran.append(1)
            return graph.forward(*args)
        return run

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    step = torch.compile(model, backend=counting_backend, dynamic=dynamic)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING:
                warned.append(record.getMessage())

    warned: list[str] = []
    dynamo_log = logging.getLogger("torch._dynamo")
    handlers, dynamo_log.handlers = dynamo_log.handlers, [Keep()]   # its warnings counted, not on stderr
    uncompiled = []
    try:
        for n in batch_sizes:
            x = torch.randn(n, 8)
            if mark_dynamic:
                torch._dynamo.mark_dynamic(x, 0)
            before = len(ran)
            optimizer.zero_grad()
            step(x).pow(2).mean().backward()
            optimizer.step()
            if len(ran) == before:
                uncompiled.append(n)
    finally:
        dynamo_log.handlers = handlers
        torch._dynamo.reset()
    return {"compilations": len(compiled), "batches run uncompiled": len(uncompiled),
            "recompile-limit warnings": sum("recompile_limit" in m for m in warned), "sizes run uncompiled": uncompiled}


def recompile_lines() -> list[str]:
    import torch._dynamo
    lines = [f"batch sizes {list(LENGTHS)} ({len(set(LENGTHS))} distinct); recompile limit "
             f"{torch._dynamo.config.recompile_limit}"]
    for label, kwargs in (("torch.compile(model) (default)", {}),
                          ("torch.compile(model, dynamic=False)", {"dynamic": False}),
                          ("torch.compile(model, dynamic=True)", {"dynamic": True}),
                          ("default, torch._dynamo.mark_dynamic(x, 0) on each batch", {"mark_dynamic": True})):
        r = compilations(LENGTHS, **kwargs)
        lines.append(f"{label:<56} compilations: {r['compilations']}; batches run uncompiled: "
                     f"{r['batches run uncompiled']}; limit warnings: {r['recompile-limit warnings']}")
    last = compilations([32] * 5 + [7])
    lines.append(f"five batches of 32, then a last batch of 7 (default): compilations: {last['compilations']}")
    again = (32, 17, 77)
    after = compilations(LENGTHS + again, dynamic=False)["sizes run uncompiled"][-len(again):]
    lines.append(f"dynamic=False, past the limit, then sizes {list(again)}: run uncompiled: "
                 f"{[n for n in again if n in after]} (sizes compiled before the limit keep their code)")
    ones = [32, 17, 45, 1]
    lines.append(f"default, batches of {ones}: compilations: {compilations(ones)['compilations']} (sizes 0 and 1 are "
                 "specialised: a last batch of 1 compiles once more)")
    return lines
