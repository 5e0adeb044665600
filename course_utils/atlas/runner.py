"""Running the atlas (issue 39): each fragment raises its error on the pinned torch, its fix runs."""
from __future__ import annotations

import contextlib
import math
import os
import random
import re
import signal
import sys
import tempfile
import threading
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import (DataLoader, Dataset, IterableDataset, TensorDataset, WeightedRandomSampler,
                              default_collate, random_split)

from course_utils.atlas.entry import Entry, fragment
from course_utils.infra.gloo_groups import keep_until_exit

# What varies between two runs of the same fragment, replaced in the message the atlas shows (and said so)
RUN_NORMALISATION = (
    (re.compile(r"\b0x[0-9a-fA-F]{4,}"), "0x<address>"),
    (re.compile(r"pid\(s\) [\d, ]+"), "pid(s) <pid>"),
    (re.compile(r"\(pid(:?) \d+\)"), r"(pid\1 <pid>)"),
    (re.compile(r"(by PID )\d+"), r"\1<pid>"),
    (re.compile(r"^(\s*(time|host)\s*: ).*$", re.MULTILINE), r"\1<\2>"),   # torchrun's summary: when, and where
    (re.compile(r"^([=-])\1{9,}$", re.MULTILINE), lambda rule: rule.group(1) * 60),   # ... and its rules' width
    (re.compile(r"/tmp/[\w./-]+/"), "<tmp>/"),
    (re.compile(r"(port:? )\d{4,5}"), r"\1<port>"),
    (re.compile(r"\(Triggered internally at [^)]*\)"), "(Triggered internally at <torch source>)"),
    (re.compile(r"(max number of worker in current system is )\d+"), r"\1<cpus>"),
    (re.compile(r"(Timed out after )\d+( seconds waiting for clients)"), r"\1<seconds>\2"),   # how long it waited
    # an open file refuses pickling as "cannot pickle '_io.BufferedReader' object" in 3.11 and, in CPython's newer
    # _io (read in its source), as "cannot pickle 'BufferedReader' instances": shown in 3.11's words
    (re.compile(r"cannot pickle '(?:_io\.)?(BufferedReader|BufferedWriter|BufferedRandom|FileIO|TextIOWrapper)' "
                r"(?:object|instances)"), r"cannot pickle '_io.\1' object"),
    # Python's pickle words a local function "Can't pickle local object" up to 3.12, "Can't get local object" in 3.13
    (re.compile(r"Can't (?:pickle|get) local object"), "Can't pickle local object"),
    # pickle names the module it searched by its repr, which depends on how the loading script was started: "from
    # 'predict.py'", "(built-in)" at a prompt, nothing in IPython, 'pytest.__main__' under `python -m pytest`
    (re.compile(r"<module '(?:[\w.]+\.)?__main__'(?: from '[^']*'| \(built-in\))?>"),
     "<module '__main__' from <the loading script>>"),
    # an error raised in a DataLoader worker carries the worker's traceback: its frames (paths, line numbers, and
    # frames that differ between Python versions) are replaced by one line; the first and last lines stay
    (re.compile(r"(Original Traceback \(most recent call last\):\n)(?:.*\n)*?(?=\S)", re.MULTILINE),
     r"\1  <the worker's frames>\n"),
)


@dataclass(frozen=True)
class Outcome:
    """What running one entry's fragment and its fix gave."""

    entry: Entry
    raised: str            # the exception's (or warning's) type name, "" if nothing
    message: str           # torch's message as printed, only RUN_NORMALISATION applied
    fixed: bool            # the fix ran without the error
    shown: Any = None      # what the fix set as `shown`

    @property
    def ok(self) -> bool:
        return self.raised == self.entry.expect and bool(self.message) and self.fixed


def normalise_run(message: str) -> str:
    """What changes from one run, machine or Python to the next, replaced (RUN_NORMALISATION)."""
    for pattern, replacement in RUN_NORMALISATION:
        message = pattern.sub(replacement, message)
    return message.strip()


def _namespace(folder: Path) -> dict[str, Any]:
    return {"torch": torch, "nn": nn, "F": F, "np": np, "math": math, "warnings": warnings, "os": os,
            "signal": signal, "DataLoader": DataLoader, "Dataset": Dataset, "TensorDataset": TensorDataset,
            "IterableDataset": IterableDataset, "random_split": random_split,
            "WeightedRandomSampler": WeightedRandomSampler, "default_collate": default_collate, "tmp": folder,
            "__name__": "__main__"}


def _run(code: str, entry: Entry, folder: Path) -> tuple[str, str, dict]:
    """(raised type, message, namespace) of running `code`: the first warning of the entry's kind, or the exception."""
    namespace = _namespace(folder)
    if "init_process_group" in code:     # its group is freed only at exit, never racing gloo's workers
        keep_until_exit(namespace)
    compiled = compile(code, f"<atlas {entry.id}>", "exec")
    hooks = sys.excepthook, threading.excepthook    # init_process_group wraps them (a "[rank0]:" prefix each time)
    with warnings.catch_warnings(record=True) as caught, _restored(hooks), _same_random_streams(), _own_imports(folder):
        warnings.simplefilter("always")
        try:
            exec(compiled, namespace)  # noqa: S102 - the atlas's own fragments
        except Exception as exc:  # noqa: BLE001 - recorded: that is the point
            traceback.clear_frames(exc.__traceback__)   # a worker's error keeps its DataLoader (and worker) alive
            return type(exc).__name__, str(exc), namespace
    for warning in caught:
        if entry.is_warning and warning.category.__name__ == entry.expect:
            return warning.category.__name__, str(warning.message), namespace
    return "", "", namespace


_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT") if hasattr(signal, name))


@contextlib.contextmanager
def _restored(hooks):
    """The exception hooks, and the signal handlers, as they were: torchrun's launcher (elastic_launch, the
    torchrun-child-failed entry) sets SIGINT, SIGTERM, SIGHUP and SIGQUIT to a handler that raises its own
    SignalException and never puts them back, so a kernel that ran that entry would answer JupyterLab's "Interrupt"
    with SignalException (an Exception, which `except Exception` swallows) instead of KeyboardInterrupt."""
    handlers = {}
    if threading.current_thread() is threading.main_thread():     # only the main thread may set them
        handlers = {number: signal.getsignal(number) for number in _SIGNALS}
    try:
        yield
    finally:
        sys.excepthook, threading.excepthook = hooks
        for number, handler in handlers.items():
            if handler is not None and signal.getsignal(number) is not handler:
                signal.signal(number, handler)


@contextlib.contextmanager
def _own_imports(folder: Path):
    """A fragment may put its folder on sys.path and import modules it wrote there (a dataset's module): afterwards
    sys.path is as it was and those modules are forgotten, so the next fragment's module of the same name is read."""
    path, known = list(sys.path), set(sys.modules)
    try:
        yield
    finally:
        sys.path[:] = path
        for name in set(sys.modules) - known:      # only a module imported during the fragment can be its own
            if str(getattr(sys.modules[name], "__file__", None) or "").startswith(str(folder)):
                del sys.modules[name]


@contextlib.contextmanager
def _same_random_streams():
    """A fragment may seed torch, NumPy or random: the caller's streams are as they were afterwards."""
    states = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        try:
            yield
        finally:
            random.setstate(states[0])
            np.random.set_state(states[1])


def run_entry(entry: Entry, variant: int = 0) -> Outcome:
    """Run the entry's fragment (with params[variant]) and its fix."""
    if entry.not_run:
        return Outcome(entry, entry.expect, entry.message, False)
    params = entry.params[variant]
    with tempfile.TemporaryDirectory() as folder:
        raised, message, _ = _run(fragment(entry.code, params), entry, Path(folder))
    with tempfile.TemporaryDirectory() as folder:
        fixed_raised, _, namespace = _run(fragment(entry.fix, params), entry, Path(folder))
    return Outcome(entry, raised, normalise_run(message), fixed_raised == "", namespace.get("shown"))
