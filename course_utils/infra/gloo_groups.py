"""Freeing an in-process gloo process group without a deadlock: keep what holds it until the interpreter exits.

On torch 2.13 every backward stashes a Python object (a copy of its ``contextvars`` context) in the thread's
state, and every gloo work started during a backward (DDP's gradient all-reduces) copies that state. The
thread that lets go of the last such work frees the Python object and needs the GIL for it; that is one of
gloo's worker threads whenever the main thread let go of its own reference first, and the worker does it
holding the group's work lock. Freeing the group (when the last DDP, Reducer or namespace holding it goes,
by reference count or by the garbage collector, in any thread) takes that lock while holding the GIL: if a
worker is still letting go of a work at that moment, each waits for the other forever. Seen once in CI
(``ProcessGroupGloo::~ProcessGroupGloo`` under ``Reducer::~Reducer`` against a worker in
``AsyncWork::~AsyncWork`` waiting for the GIL) and reproduced here with gloo's workers slowed down.

No sleep makes that safe: how long a worker takes to get from finishing a work to letting it go depends on
the machine's load. What is safe is freeing the group when its workers are certainly idle, which they are
long before the interpreter exits. So every process group the course builds and lets go of (the atlas's
fragments, chapter 7's assembled loop and its late group, the trainer's ranks when they leave) is kept, with
whatever holds it, until its process exits: 3 idle threads and 5 file descriptors each (measured), for the
few dozen groups a test session or a kernel builds. (A rank under torchrun leaves with os._exit,
production/cli.py, so its group is never freed at all.)
"""
from __future__ import annotations

from typing import Any

_KEPT: list[Any] = []


def keep_until_exit(*holders: Any) -> None:
    """Keep these (a DDP model, a namespace that held a process group) alive until the interpreter exits."""
    _KEPT.extend(holders)



def destroy_kept(group: Any = None) -> None:
    """``dist.destroy_process_group(group)`` (the default group when None), the group's object kept until exit."""
    import torch.distributed as dist

    keep_until_exit(dist.group.WORLD if group is None else group)
    dist.destroy_process_group(group)
