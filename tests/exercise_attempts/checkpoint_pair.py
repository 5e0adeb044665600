"""Attempts at Exercise 7.1: each attempt is the pair (save_checkpoint, load_checkpoint), a tuple.

save_checkpoint(path, model, optimizer, scheduler, epoch); load_checkpoint(path, model, optimizer, scheduler) -> next epoch.
"""
import os
import random

import numpy as np
import torch

DOCS: dict[str, str] = {}
"""Each pair's one-line docstring (a tuple has no __doc__ of its own), keyed by the attempt's name."""


def _save_full(path, model, optimizer, scheduler, epoch):
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "epoch": epoch, "torch_rng": torch.get_rng_state()}, path)


def _load_full(path, model, optimizer, scheduler):
    state = torch.load(path, weights_only=True)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    torch.set_rng_state(state["torch_rng"])
    return state["epoch"] + 1


right_state_dicts_and_rng = (_save_full, _load_full)
DOCS["right_state_dicts_and_rng"] = """Model, optimizer and scheduler state dicts, torch's global RNG state, and the finished epoch (+1 on load)."""


def _save_atomic(path, model, optimizer, scheduler, epoch):
    np_state = np.random.get_state()
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
             "next_epoch": epoch + 1,
             "rng": {"torch": torch.get_rng_state(), "python": list(random.getstate()[1]),
                     "python_version": random.getstate()[0], "python_gauss": random.getstate()[2],
                     "numpy": [np_state[0], np_state[1].tolist(), *np_state[2:]]}}
    tmp = f"{path}.tmp"
    torch.save(state, tmp)
    os.replace(tmp, path)


def _load_atomic(path, model, optimizer, scheduler):
    state = torch.load(path, weights_only=True)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    rng = state["rng"]
    torch.set_rng_state(rng["torch"])
    random.setstate((rng["python_version"], tuple(rng["python"]), rng["python_gauss"]))
    numpy = rng["numpy"]
    np.random.set_state((numpy[0], np.array(numpy[1], dtype=np.uint32), *numpy[2:]))
    return state["next_epoch"]


right_every_rng_atomic = (_save_atomic, _load_atomic)
DOCS["right_every_rng_atomic"] = """Stores the next epoch, every RNG (NumPy's as plain lists), and writes through a temporary file and os.replace."""


def _save_no_rng(path, model, optimizer, scheduler, epoch):
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "epoch": epoch}, path)


def _load_no_rng(path, model, optimizer, scheduler):
    state = torch.load(path, weights_only=True)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    return state["epoch"] + 1


wrong_no_rng_state = (_save_no_rng, _load_no_rng)
DOCS["wrong_no_rng_state"] = """No RNG state: the resumed epoch shuffles and drops out differently (any resume with shuffle or Dropout)."""


def _load_same_epoch(path, model, optimizer, scheduler):
    return _load_full(path, model, optimizer, scheduler) - 1


wrong_returns_saved_epoch = (_save_full, _load_same_epoch)
DOCS["wrong_returns_saved_epoch"] = """load returns the saved epoch, not the next: the finished epoch is trained twice."""


def _save_next(path, model, optimizer, scheduler, epoch):
    _save_full(path, model, optimizer, scheduler, epoch + 1)


wrong_double_increment = (_save_next, _load_full)
DOCS["wrong_double_increment"] = """Saves epoch + 1 and load adds 1 again: one epoch is skipped on resume."""


def _save_model_only(path, model, optimizer, scheduler, epoch):
    torch.save({"model": model.state_dict(), "scheduler": scheduler.state_dict(), "epoch": epoch,
                "torch_rng": torch.get_rng_state()}, path)


def _load_model_only(path, model, optimizer, scheduler):
    state = torch.load(path, weights_only=True)
    model.load_state_dict(state["model"])
    scheduler.load_state_dict(state["scheduler"])
    torch.set_rng_state(state["torch_rng"])
    return state["epoch"] + 1


wrong_no_optimizer_state = (_save_model_only, _load_model_only)
DOCS["wrong_no_optimizer_state"] = """No optimizer state: momentum / Adam's moments and step count restart at zero after the resume."""


def _save_no_sched(path, model, optimizer, scheduler, epoch):
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch,
                "torch_rng": torch.get_rng_state()}, path)


def _load_no_sched(path, model, optimizer, scheduler):
    state = torch.load(path, weights_only=True)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["torch_rng"])
    return state["epoch"] + 1


wrong_no_scheduler_state = (_save_no_sched, _load_no_sched)
DOCS["wrong_no_scheduler_state"] = """No scheduler state: the fresh scheduler's counter restarts; wrong with StepLR(step_size=2), LambdaLR, OneCycleLR.

(StepLR with step_size=1 happens to survive: the optimizer's state dict brings back the current lr and the chained
rule multiplies it by gamma at every step.)"""


def _save_pickled(path, model, optimizer, scheduler, epoch):
    torch.save({"model": model, "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                "epoch": epoch, "torch_rng": torch.get_rng_state()}, path)


def _load_pickled(path, model, optimizer, scheduler):
    state = torch.load(path, weights_only=False)
    model = state["model"]  # rebinds the local name: the caller's model keeps its fresh weights
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    torch.set_rng_state(state["torch_rng"])
    return state["epoch"] + 1


wrong_rebinds_model = (_save_pickled, _load_pickled)
DOCS["wrong_rebinds_model"] = """Pickles the whole model and rebinds `model` on load: the caller's fresh model is never restored."""

