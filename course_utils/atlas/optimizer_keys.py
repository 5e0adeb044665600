"""The names torch's optimizers keep in their state, read from torch: what a KeyError names when a state saved by
one optimizer class is loaded into another (``KeyError: 'betas'``, ``'momentum'``, ``'square_avg'``, ...).

One step of each optimizer in ``torch.optim`` on a tiny model (every option that adds state switched on) gives its per-parameter state keys (``step``,
``exp_avg``, ``momentum_buffer``, ...) and its group's hyperparameters; the hyperparameters fewer than half the
classes have (``betas``, ``momentum``, ``rho``, ...) tell a class, the common ones (``lr``, ``eps``,
``weight_decay``, the ``foreach``/``capturable`` flags) do not. LBFGS (a line search whose state keys are
generic words such as ``d`` and ``t``) and the optimizers that refuse a dense linear layer are left out.
"""
from __future__ import annotations

import functools
import inspect
import json
from pathlib import Path

SKIPPED = ("LBFGS",)
# what optimizer_state_names() gave on the pinned torch, written by `python tools/atlas.py sync` (which checks it):
# the lookup reads this file, so that a command that only looks an error up never imports torch or steps an
# optimizer (the first step imports torch._dynamo: about 2.5 s of a 3 s answer)
RECORDED = Path(__file__).with_name("optimizer_state_names.json")
# the options that give a parameter more state, each switched on where a class has it: SGD's and RMSprop's
# momentum_buffer, Adam's max_exp_avg_sq, RMSprop's grad_avg
STATEFUL = {"momentum": 0.9, "amsgrad": True, "centered": True}


def _one_step(cls) -> tuple[set[str], set[str]] | None:
    """(per-parameter state keys, group keys) after one step of `cls`, or None if it refuses this model."""
    import torch
    from torch import nn

    model = nn.Linear(3, 2)
    options = {k: v for k, v in STATEFUL.items() if k in inspect.signature(cls).parameters}
    try:
        optimizer = cls(model.parameters(), lr=0.01, **options)
        model(torch.ones(4, 3)).pow(2).sum().backward()
        optimizer.step()
    except (ValueError, RuntimeError, TypeError):     # Muon wants 2-D parameters only, SparseAdam sparse gradients
        return None
    state = set().union(*(set(s) for s in optimizer.state.values()))
    return state, set(optimizer.param_groups[0]) - {"params"}


@functools.cache
def optimizer_state_names() -> frozenset[str]:
    """The state keys of torch's optimizers and the hyperparameters that only some of them have."""
    import torch

    classes = [cls for name, cls in sorted(vars(torch.optim).items())
               if inspect.isclass(cls) and issubclass(cls, torch.optim.Optimizer)
               and cls is not torch.optim.Optimizer and name not in SKIPPED]
    steps = [step for step in map(_one_step, classes) if step is not None]
    state = set().union(*(keys for keys, _ in steps))
    groups = [group for _, group in steps]
    telling = {key for key in set().union(*groups) if 2 * sum(key in group for group in groups) < len(groups)}
    return frozenset(name for name in state | telling if len(name) >= 3)


@functools.cache
def recorded_state_names() -> frozenset[str]:
    """optimizer_state_names() as recorded on the pinned torch (RECORDED; `tools/atlas.py check` compares them)."""
    return frozenset(json.loads(RECORDED.read_text(encoding="utf-8")))
