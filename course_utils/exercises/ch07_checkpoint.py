"""Exercise 7.1: a resumable checkpoint pair, killed after an epoch and resumed in a rebuilt process (chapter 7)."""
from __future__ import annotations

import tempfile
from pathlib import Path

import torch
from torch import nn
from torch.optim import lr_scheduler
from torch.utils.data import DataLoader

from course_utils.engine.data import spiral_splits
from course_utils.engine.models import MLP
from course_utils.exercises.core import Attempt
from course_utils.exercises.guards import mode_changes, modes
from course_utils.exercises.words import Fail, need_int


# --- save_checkpoint / load_checkpoint ----------------------------------------------------------------------

EPOCHS, CRASH_AFTER = 4, 1       # the run dies after epoch 1 (0-based) and resumes at epoch 2


def _fresh(init_seed: int):
    torch.manual_seed(init_seed)
    model = MLP(hidden=32, dropout=0.2)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    scheduler = lr_scheduler.LambdaLR(optimizer, _warmup)     # stepped per update: its count is not the epoch's
    return model, optimizer, scheduler


def _warmup(update: int) -> float:
    """A warmup over 8 updates, then a slow decay (5 updates an epoch)."""
    return min(1.0, (update + 1) / 8) * 0.95 ** max(0, update - 8)


def _epoch(model, optimizer, scheduler, loader) -> None:
    model.train()
    for inputs, targets in loader:
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(inputs), targets).backward()
        optimizer.step()
        scheduler.step()


def _loader() -> DataLoader:
    """Shuffled by torch's global generator: the data order is part of what a checkpoint must restore."""
    return DataLoader(spiral_splits(160, 1, seed=0).train, batch_size=32, shuffle=True)


def _state(model, optimizer, scheduler) -> dict:
    return {"model": {k: v.clone() for k, v in model.state_dict().items()},
            "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "rng": torch.get_rng_state()}


def _equal(a: object, b: object) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, (torch.Tensor, dict, list, tuple)) or isinstance(b, (torch.Tensor, dict, list, tuple)):
        return False
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - objects that cannot be compared are not equal
        return False


def check_checkpoint_pair(attempt: Attempt) -> str:
    """The oracle: an uninterrupted run. The checked run is killed after an epoch, rebuilt from scratch, resumed."""
    loader = _loader()
    model, optimizer, scheduler = _fresh(0)
    torch.manual_seed(1234)
    for _ in range(EPOCHS):
        _epoch(model, optimizer, scheduler, loader)
    uninterrupted = [p.detach().clone() for p in model.parameters()]

    with tempfile.TemporaryDirectory(prefix="exercise-") as tmp:
        path = str(Path(tmp) / "checkpoint.pt")
        model, optimizer, scheduler = _fresh(0)
        torch.manual_seed(1234)
        for _ in range(CRASH_AFTER + 1):
            _epoch(model, optimizer, scheduler, loader)
        saved = _state(model, optimizer, scheduler)
        what = (f"{EPOCHS} epochs of Adam + a warmup LambdaLR stepped every update, on a model with Dropout, "
                f"shuffled data; the run is killed after "
                f"epoch {CRASH_AFTER} (0-based), after save_checkpoint(path, model, optimizer, scheduler, "
                f"{CRASH_AFTER})")
        attempt.call(what, path, model, optimizer, scheduler, CRASH_AFTER, which=0)
        if not Path(path).exists():
            raise Fail("save_checkpoint wrote no file at the path it was given.",
                       "Write everything with torch.save(..., path).")
        del model, optimizer, scheduler                     # the process dies: nothing in memory survives
        torch.manual_seed(999)
        torch.rand(1000)                                    # a new process starts from other random numbers
        model, optimizer, scheduler = _fresh(7)             # ...and builds its objects anew
        attempt.at(what + "; then load_checkpoint(path, model, optimizer, scheduler) in the new process")
        built = modes(model)
        start = need_int(attempt.call(attempt.case, path, model, optimizer, scheduler, which=1),
                         "load_checkpoint returned")
        switched = mode_changes(model, built)
        if switched:
            raise Fail(f"after load_checkpoint {', '.join(switched[:3])} {'is' if len(switched) == 1 else 'are'} in "
                       f"{'eval' if not model.training else 'another'} mode; the model was built in train mode and "
                       "training resumes: a loop that sets the mode once, before its first epoch, would go on without "
                       "Dropout.", "Restore the state (load_state_dict) and leave the mode alone: model.eval() belongs "
                                   "to loading for inference, not for resuming.")
        if start != CRASH_AFTER + 1:
            raise Fail(f"load_checkpoint returned {start}; the run saved after finishing epoch {CRASH_AFTER} must go on "
                       f"with epoch {CRASH_AFTER + 1}.", "Return the epoch to run next.")
        now = _state(model, optimizer, scheduler)
        missing = [label for key, label in (("model", "the weights"), ("optimizer", "the optimizer's state (Adam's "
                   "moments and step count)"), ("scheduler", "the scheduler's state"), ("rng", "torch's random "
                   "number generator state (next epoch's shuffle and dropout masks)")) if not _equal(now[key], saved[key])]
        if missing:
            _explain_missing(path, saved, now)
        for _ in range(start, EPOCHS):
            _epoch(model, optimizer, scheduler, loader)
        if not all(torch.equal(p, q) for p, q in zip(model.parameters(), uninterrupted)):
            raise Fail("after resuming, the run ended with different weights than the same run without the crash.",
                       "Restore everything the training reads, in the same state it was saved in.")
    return (f"a run killed after epoch {CRASH_AFTER} and resumed from your file in a rebuilt process (new objects, "
            f"other random numbers) ends bit for bit like the run that was never killed, after {EPOCHS} epochs with "
            "Adam, a warmup schedule stepped every update, Dropout and shuffled data.")


_PARTS = (("model", "the weights", "model.load_state_dict"),
          ("optimizer", "the optimizer's state (Adam's moments and step count)", "optimizer.load_state_dict"),
          ("scheduler", "the scheduler's state", "scheduler.load_state_dict"),
          ("rng", "torch's random number generator state (next epoch's shuffle and dropout masks)",
           "torch.set_rng_state"))


def _holds(value: object, target: object, depth: int = 0) -> bool:
    """Does the loaded file hold `target` somewhere (at most three levels down; a pickled object by its state)?"""
    if isinstance(value, (nn.Module, torch.optim.Optimizer, lr_scheduler.LRScheduler)):
        value = value.state_dict()
    if _equal(value, target):
        return True
    if depth >= 3:
        return False
    if isinstance(value, dict):
        return any(_holds(v, target, depth + 1) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_holds(v, target, depth + 1) for v in value)
    return False


def _explain_missing(path: str, saved: dict, now: dict) -> None:
    """Fail naming, for each part that differs after loading, whether the file lacks it or it was not loaded back."""
    try:
        content = torch.load(path, weights_only=False)
    except Exception:  # noqa: BLE001 - an unreadable file: every part is simply missing from it
        content = None
    off = [(key, label, how) for key, label, how in _PARTS if not _equal(now[key], saved[key])]
    in_file = [(label, how) for key, label, how in off if _holds(content, saved[key])]
    lacking = [label for _, label, how in off if (label, how) not in in_file]
    if lacking:
        raise Fail("after loading, these differ from the moment of saving, and your file does not hold them: "
                   + "; ".join(lacking) + ".", "A checkpoint holds everything the next step reads, not only the weights.")
    raise Fail("your file holds everything, but after load_checkpoint these still differ from the moment of saving: "
               + "; ".join(label for label, _ in in_file) + ": they were not loaded into the objects load_checkpoint "
               "was given.", "Load each part into the object passed in (" + ", ".join(how for _, how in in_file)
               + "): building a new object, or rebinding a name inside the function, leaves the caller's unchanged.")
