"""Independent runs on every core: the chapters' claims over seeds, measured side by side.

A claim the course draws from runs is counted over five seeds or more, and those runs share nothing but their
code: each seeds itself from its arguments. ``map_runs(fn, calls)`` returns ``[fn(*args) for args in calls]``,
in that order, computing them in forked processes, one per core; ``runs`` is ``functools.lru_cache`` for such a
function, with ``.many(calls)``: the results for many arguments at once, computed that way. The results are bitwise
those of the same calls one after another (``tests/test_parallel.py`` compares them, chapter by chapter the
notebooks print the same): nothing a run computes depends on what ran before it in the process.

Forked processes only where forking is safe and cheap: on Linux, where the child starts with the kernel's
torch already imported (a pool of two cost 35-60 ms, measured in a kernel with chapter 7's libraries loaded,
where a fresh interpreter spends ~2.5 s importing torch). Elsewhere (macOS and Windows start processes with spawn), on one core, inside a run that is itself
in a child, or with ``COURSE_WORKERS=1`` in the environment, the runs go one after another. ``COURSE_WORKERS=N``
caps the processes at N.
"""
from __future__ import annotations

import functools
import os
import pickle
import sys
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

VARIABLE = "COURSE_WORKERS"
_in_child = False


def _start_child() -> None:
    """In each child, before its first run: one torch thread (a core each), and no children of its own.

    One thread also keeps the child clear of the OpenMP thread pool it inherited but not its threads: a parallel
    region in a child forked after the parent used several threads waits forever (GNU OpenMP; measured here).
    """
    global _in_child
    _in_child = True
    import torch

    torch.set_num_threads(1)


def workers(tasks: int) -> int:
    """How many processes `tasks` independent runs get here (1: one after another, in this process)."""
    if _in_child or tasks < 2 or not sys.platform.startswith("linux"):
        return 1
    cores = len(os.sched_getaffinity(0))
    text = os.environ.get(VARIABLE, "").strip()
    if text:
        if not text.isdigit() or int(text) < 1:
            raise ValueError(f"{VARIABLE} must be a whole number of processes (1 or more), got {text!r}")
        cores = min(cores, int(text))
    return max(1, min(cores, tasks))


def _call(fn: Callable, args: tuple) -> Any:
    return fn(*args)


def map_runs(fn: Callable, calls: Iterable[tuple]) -> list:
    """``[fn(*args) for args in calls]``, in order, in forked processes where that is safe (see the module).

    `fn`'s result must depend on its arguments only. The children receive it by name: a lambda, or a function
    defined inside another, runs one call after another here. An exception in a run is raised here, as it would
    be one after another; a child that dies (killed, crashed) makes every run go one after another here, with a
    RuntimeWarning saying so.
    """
    calls = [tuple(args) for args in calls]
    n = workers(len(calls))
    if n > 1:
        try:
            pickle.dumps(fn)     # a lambda or a function defined inside another cannot reach a child by name
        except (pickle.PicklingError, AttributeError, TypeError):
            n = 1
    if n == 1:
        return [fn(*args) for args in calls]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    try:
        with warnings.catch_warnings():
            # Python 3.12+ warns that forking a process with threads (a Jupyter kernel has some) may deadlock the
            # child should it take a lock another thread held; a child here only computes and returns its result.
            warnings.simplefilter("ignore", DeprecationWarning)
            pool = ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("fork"), initializer=_start_child)
            try:
                return list(pool.map(_call, [fn] * len(calls), calls))
            finally:   # stopped (an interrupt, an error): the runs not started are dropped, those in flight finish
                pool.shutdown(wait=True, cancel_futures=True)
    except BrokenProcessPool as error:
        # A child was killed (out of memory, a crash in a library): nothing it computed came back, and the results
        # do not depend on where they are computed, so they are all computed again here, and the learner is told.
        warnings.warn(f"a process computing {fn.__name__} stopped abruptly ({error}); its {len(calls)} runs go one "
                      f"after another in this process instead", RuntimeWarning, stacklevel=2)
    return [fn(*args) for args in calls]


def in_groups(results: list, size: int) -> list[list]:
    """`results` cut into consecutive groups of `size`: a product of runs (say, lrs x seeds) back into its rows."""
    if size < 1 or len(results) % size:
        raise ValueError(f"{len(results)} results do not make groups of {size}")
    return [results[i:i + size] for i in range(0, len(results), size)]


def runs(maxsize: int | None = 256) -> Callable[[Callable], Callable]:
    """Like ``functools.lru_cache(maxsize)``, for a pure run function, plus ``.many(calls)``: the results for
    many argument tuples in the order asked, the ones not cached yet computed together by ``map_runs``."""
    def decorate(fn: Callable) -> Callable:
        cache: OrderedDict[tuple, Any] = OrderedDict()

        def keep(args: tuple, result: Any) -> Any:
            cache[args] = result
            cache.move_to_end(args)
            if maxsize is not None and len(cache) > maxsize:
                cache.popitem(last=False)
            return result

        @functools.wraps(fn)
        def one(*args):
            if args in cache:
                cache.move_to_end(args)
                return cache[args]
            return keep(args, fn(*args))

        def many(calls: Iterable[tuple]) -> list:
            calls = [tuple(args) for args in calls]
            missing = [args for args in dict.fromkeys(calls) if args not in cache]
            # the children get `one` by name (the module's attribute): `fn` itself is not reachable by name
            computed = dict(zip(missing, map_runs(one, missing)))
            return [keep(args, computed[args]) if args in computed else one(*args) for args in calls]

        one.many = many
        one.cache_clear = cache.clear
        return one
    return decorate
