"""infra/parallel.py: runs side by side give bitwise the results of the same runs one after another."""
from __future__ import annotations

import os
import sys

import pytest
import torch

from course_utils.infra import parallel
from course_utils.infra.parallel import in_groups, map_runs, runs, workers

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux") or len(os.sched_getaffinity(0)) < 2,
                                reason="runs are forked side by side on Linux with two cores or more")


def train(seed: int, steps: int) -> tuple[list[float], int]:
    """A small seeded run (a real optimizer, a real model) and the process that ran it."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    x, y = torch.randn(64, 4), torch.randint(0, 3, (64,))
    losses = []
    for _ in range(steps):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses, os.getpid()


def nested(seed: int) -> tuple[int, int]:
    """A run that asks for runs side by side itself: inside a child they go one after another, in the child."""
    return seed, len({pid for _, pid in map_runs(train, [(seed, 2), (seed + 1, 2)])})


def fails(seed: int) -> int:
    if seed == 1:
        raise ValueError(f"seed {seed} failed")
    return seed


def dies_in_a_child(seed: int) -> tuple[int, int]:
    """A run that kills its process when it is a child (as the out-of-memory killer would), and runs here."""
    if parallel._in_child and seed == 1:
        os._exit(9)
    return seed, os.getpid()


CALLS: list[tuple] = []


@runs(maxsize=4)
def counted(seed: int) -> tuple[list[float], int]:
    CALLS.append(seed)
    return train(seed, 3)


@linux_only
def test_side_by_side_equals_one_after_another_bitwise(monkeypatch):
    calls = [(seed, 30) for seed in range(5)]
    together = map_runs(train, calls)
    monkeypatch.setenv(parallel.VARIABLE, "1")
    alone = map_runs(train, calls)
    assert [losses for losses, _ in together] == [losses for losses, _ in alone]       # floats compared exactly
    assert len({pid for _, pid in together} - {os.getpid()}) >= 2, "the runs did not go to other processes"
    assert {pid for _, pid in alone} == {os.getpid()}


@linux_only
def test_a_child_runs_its_own_runs_one_after_another():
    assert map_runs(nested, [(0,), (10,)]) == [(0, 1), (10, 1)]


@linux_only
def test_an_error_in_a_run_is_raised_here():
    with pytest.raises(ValueError, match="seed 1 failed"):
        map_runs(fails, [(0,), (1,), (2,)])
    assert map_runs(fails, [(0,), (2,)]) == [0, 2]


@linux_only
def test_a_child_that_dies_leaves_the_runs_to_this_process_and_says_so():
    with pytest.warns(RuntimeWarning, match="dies_in_a_child stopped abruptly.*its 3 runs go one after another"):
        results = map_runs(dies_in_a_child, [(0,), (1,), (2,)])
    assert results == [(0, os.getpid()), (1, os.getpid()), (2, os.getpid())]


def test_functions_a_child_cannot_reach_by_name_run_here():
    assert map_runs(lambda s: (s, os.getpid()), [(1,), (2,)]) == [(1, os.getpid()), (2, os.getpid())]


def test_workers_follow_the_cores_the_tasks_and_the_variable(monkeypatch):
    monkeypatch.delenv(parallel.VARIABLE, raising=False)
    assert workers(1) == 1
    if sys.platform.startswith("linux"):
        assert workers(100) == len(os.sched_getaffinity(0))
        monkeypatch.setenv(parallel.VARIABLE, "1")
        assert workers(100) == 1
        for bad in ("0", "two", "-3", "1.5"):
            monkeypatch.setenv(parallel.VARIABLE, bad)
            with pytest.raises(ValueError, match=parallel.VARIABLE):
                workers(5)
    else:
        assert workers(100) == 1


@linux_only
def test_many_fills_the_cache_that_single_calls_read():
    counted.cache_clear()
    CALLS.clear()
    first = counted.many([(0,), (1,), (0,), (2,)])
    assert CALLS == []                                     # computed in children, none here
    assert first[0] is first[2]                             # one run per distinct argument
    assert counted(1) is first[1] and CALLS == []          # a single call reads what many computed
    assert counted(3)[0] == train(3, 3)[0] and CALLS == [3]
    assert counted.many([(3,), (1,)]) == [counted(3), first[1]] and CALLS == [3]
    counted.many([(10,), (11,), (12,), (13,)])              # maxsize 4: the oldest make way
    counted(0)
    assert CALLS == [3, 0]


def test_in_groups_gives_back_the_rows_of_a_product():
    assert in_groups([1, 2, 3, 4, 5, 6], 3) == [[1, 2, 3], [4, 5, 6]]
    assert in_groups([], 5) == []
    for results, size in (([1, 2, 3], 2), ([1], 0)):
        with pytest.raises(ValueError, match="do not make groups"):
            in_groups(results, size)
