"""Issue 40 item 3: the cases a check generates reach every corner its statement allows.

Each exercise's check is run on the course's solution wrapped in a recorder, so every call the check makes (edge
cases and hypothesis draws alike) is kept; each corner the statement allows is a predicate that some recorded call must
satisfy. Precision: no statement admits float16 or bfloat16 inputs (the dtypes they admit are float32 and float64 for
values, int and bool for masks, and those are corners below), so no half-precision corner is asked for.
"""
from __future__ import annotations

import functools
import inspect
import math
import types

import pytest
import torch
from torch.utils.data import SequentialSampler

from course_utils.exercises import EXERCISES
from course_utils.exercises.solutions import SOLUTIONS


def _record(fn, calls: list):
    """fn, recording its arguments; a generator argument is read into a list, kept, and passed on as a generator."""
    @functools.wraps(fn)
    def recorder(*args, **kwargs):
        args = tuple(iter(list(a)) if isinstance(a, types.GeneratorType) else a for a in args)
        kept = tuple(_kept(a) for a in args)
        calls.append((kept, dict(kwargs), inspect.signature(fn).bind(*args, **kwargs).arguments.keys()))
        return fn(*args, **kwargs)
    return recorder


def _kept(a):
    """What a corner needs of an argument: a copy of a tensor, the list behind a generator, the loader's shape."""
    if isinstance(a, list_iterator):
        items = list(a.__reduce__()[1][0])
        return ("generator", [t.clone() for t in items])
    if isinstance(a, torch.Tensor):
        return a.detach().clone()
    if isinstance(a, list):
        return [t.clone() if isinstance(t, torch.Tensor) else t for t in a]
    if isinstance(a, torch.utils.data.DataLoader):
        return {"loader": True, "batches": len(a), "dataset": len(a.dataset),
                "yields": sum(len(t) for _, t in a) if a.batch_size else None,
                "sampler": not isinstance(a.sampler, SequentialSampler)}
    if isinstance(a, torch.nn.Module):
        return {"training": a.training}
    return a


list_iterator = type(iter([]))


def record(name: str) -> list:
    calls: list = []
    verdict = EXERCISES[name].check(*(_record(fn, calls) for fn in SOLUTIONS[name]), record=False)
    assert verdict.passed, verdict.message
    return calls


def _upe(c):            # updates_per_epoch(N, B, K, drop_last=False)
    N, B, K = c[0][:3]
    return N, B, K, (c[0][3] if len(c[0]) > 3 else c[1].get("drop_last", False))


def _ep(c):             # examples_processed(updates, N, B, drop_last=False)
    u, N, B = c[0][:3]
    return u, N, B, (c[0][3] if len(c[0]) > 3 else c[1].get("drop_last", False))


def _losses(c):
    return [float(v) for v in c[0][0]]


CORNERS: dict[str, dict[str, object]] = {
    "updates_per_epoch": {
        "B > N, drop_last=False": lambda c: _upe(c)[1] > _upe(c)[0] and not _upe(c)[3],
        "B > N, drop_last=True": lambda c: _upe(c)[1] > _upe(c)[0] and _upe(c)[3],
        "a partial last batch dropped": lambda c: _upe(c)[0] % _upe(c)[1] and _upe(c)[3] and _upe(c)[1] < _upe(c)[0],
        "K larger than the epoch's batches": lambda c: _upe(c)[2] > math.ceil(_upe(c)[0] / _upe(c)[1]),
        "K = 1": lambda c: _upe(c)[2] == 1,
        "N in the millions": lambda c: _upe(c)[0] >= 10**6,
        "drop_last not given": lambda c: len(c[0]) == 3 and "drop_last" not in c[1],
    },
    "examples_processed": {
        "B > N, drop_last=False": lambda c: _ep(c)[2] > _ep(c)[1] and not _ep(c)[3],
        "B > N, drop_last=True": lambda c: _ep(c)[2] > _ep(c)[1] and _ep(c)[3],
        "0 updates": lambda c: _ep(c)[0] == 0,
        "updates across several epochs, mid-epoch": lambda c: _ep(c)[0] > 2 * math.ceil(_ep(c)[1] / _ep(c)[2])
        and _ep(c)[0] % math.ceil(_ep(c)[1] / _ep(c)[2]),
        "a partial last batch": lambda c: _ep(c)[1] % _ep(c)[2] and _ep(c)[2] < _ep(c)[1],
        "drop_last not given": lambda c: len(c[0]) == 3 and "drop_last" not in c[1],
    },
    "stop_check": {
        "min_delta > 0 with losses far above 1": lambda c: c[0][2:] and c[0][2] > 0 and min(
            (v for v in _losses(c) if math.isfinite(v)), default=0) > 4,
        "min_delta > 0 with losses far below 1": lambda c: c[0][2:] and c[0][2] > 0 and 0 < max(
            (v for v in _losses(c) if math.isfinite(v)), default=1) < 0.25,
        "a NaN": lambda c: any(math.isnan(v) for v in _losses(c)),
        "an inf": lambda c: any(math.isinf(v) for v in _losses(c)),
        "a tie with the best, min_delta 0": lambda c: c[0][2:] and c[0][2] == 0 and any(
            v == min(_losses(c)[:i]) for i, v in enumerate(_losses(c)) if i and math.isfinite(v)),
        "patience 1": lambda c: c[0][1] == 1,
        "min_delta not given": lambda c: len(c[0]) == 2 and "min_delta" not in c[1],
    },
    "loss_weights": {
        "a short last window": lambda c: len(c[0][0]) % c[0][1] != 0,
        "a smaller last batch": lambda c: len(c[0][0]) > 1 and c[0][0][-1] < c[0][0][0],
        "K larger than the epoch": lambda c: c[0][1] > len(c[0][0]),
        "K = 1": lambda c: c[0][1] == 1,
    },
    "dropout": {
        "p = 0 in training": lambda c: c[0][1] == 0 and c[0][2],
        "p = 1 in training": lambda c: c[0][1] == 1 and c[0][2],
        "p = 1 in evaluation": lambda c: c[0][1] == 1 and not c[0][2],
        "float64 input": lambda c: c[0][0].dtype == torch.float64,
        "float32 input": lambda c: c[0][0].dtype == torch.float32,
    },
    "shard_indices": {
        "fewer examples than ranks": lambda c: c[0][0] < c[0][1],
        "world_size divides n": lambda c: c[0][0] % c[0][1] == 0 and c[0][1] > 1,
        "one rank": lambda c: c[0][1] == 1,
    },
    "rank_metrics": {
        "fewer examples than ranks": lambda c: c[0][2] < len(c[0][0]),
        "world_size divides n": lambda c: c[0][2] % len(c[0][0]) == 0 and len(c[0][0]) > 1,
        "one rank": lambda c: len(c[0][0]) == 1,
    },
    "warmup_cosine_lr": {
        "no warm-up": lambda c: c[0][2] == 0,
        "the last warm-up update": lambda c: c[0][2] > 0 and c[0][0] == c[0][2] - 1,
        "the first cosine update": lambda c: c[0][2] > 0 and c[0][0] == c[0][2],
        "the last update": lambda c: c[0][0] == c[0][3] - 1,
    },
    "evaluate": {
        "a model in train mode": lambda c: c[0][0]["training"],
        "a model in eval mode": lambda c: not c[0][0]["training"],
        "a sampler over part of the dataset": lambda c: c[0][1]["sampler"] and c[0][1]["yields"] < c[0][1]["dataset"],
        "one batch larger than the data": lambda c: c[0][1]["batches"] == 1,
    },
    "accumulate_epoch": {
        "K larger than the epoch": lambda c: c[0][4] > c[0][1]["batches"],
        "K = 1": lambda c: c[0][4] == 1,
        "a short last window": lambda c: c[0][1]["batches"] % c[0][4] != 0 and c[0][4] <= c[0][1]["batches"],
    },
    "token_window_losses": {
        "int masks": lambda c: any(not m.dtype == torch.bool for m in _items(c[0][1])),
        "bool masks": lambda c: all(m.dtype == torch.bool for m in _items(c[0][1])),
        "generators": lambda c: isinstance(c[0][0], tuple) or isinstance(c[0][1], tuple),
        "a micro-batch with no real token": lambda c: any(int(m.sum()) == 0 for m in _items(c[0][1]))
        and sum(int(m.sum()) for m in _items(c[0][1])) > 0,
        "a window with no real token": lambda c: sum(int(m.sum()) for m in _items(c[0][1])) == 0,
    },
}


def _items(a):
    return a[1] if isinstance(a, tuple) else a


@pytest.mark.parametrize("name", sorted(CORNERS))
def test_the_check_s_cases_reach_every_corner_the_statement_allows(name):
    calls = record(name)
    missing = []
    for corner, holds in CORNERS[name].items():
        if not any(_safe(holds, c) for c in calls):
            missing.append(corner)
    assert not missing, f"{name}: {len(calls)} calls, none reaches {missing}"


def _safe(holds, call) -> bool:
    try:
        return bool(holds(call))
    except (IndexError, TypeError, KeyError, AttributeError):
        return False
