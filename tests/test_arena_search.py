"""Chapter 8's search for "90% in under 50 updates": checked against uncapped races and the engine itself."""
import random

import pytest

from course_utils.chapters.ch08_arena import Challenge, Knobs, race
from course_utils.chapters.ch08_arena_search import (FULL_GRID, SMALL_GRID, Grid, Probe, SearchResult, horizon_epochs,
                                                     probe, saved_search, search_under)

TINY = Challenge(n_train=240, n_val=120, max_epochs=6)
TINY_GRID = Grid(batch_sizes=(32, 240), optimizers=("sgd", "adam"), lrs=(0.01, 0.1), schedules=("constant", "onecycle"))


def test_the_search_finds_the_fastest_configuration_an_uncapped_race_confirms():
    budget = 20
    result = search_under(TINY, budget, TINY_GRID)
    assert len(result.probes) == len(TINY_GRID) == 16
    hits = {}
    for b, o, lr, s in TINY_GRID:                                   # oracle: full races, first hit read off the curve
        knobs = Knobs(b, o, lr, s, horizon_epochs(TINY, b, budget))
        full = race(TINY, knobs)
        first = next((u for u, a in full.curve if a >= TINY.target), None)
        hits[knobs] = first if first is not None and first <= budget else None
    assert {p.knobs: p.updates_to_target for p in result.probes} == hits
    fastest = min((h for h in hits.values() if h is not None), default=None)
    assert (result.best.updates_to_target if result.best else None) == fastest
    assert result.answer == any(h is not None and h < budget for h in hits.values())
    assert [p.rank() for p in result.probes] == sorted(p.rank() for p in result.probes)
    assert "searched 16 configurations" in result.text()


def test_a_budget_nobody_meets_is_answered_no():
    result = search_under(TINY, 1, Grid(batch_sizes=(32,), optimizers=("sgd",), lrs=(0.01,), schedules=("constant",)))
    assert not result.answer and "answer: NO" in result.text()


def test_horizon_covers_the_budget_within_the_epoch_limit():
    c = Challenge()
    assert horizon_epochs(c, 32, 50) == 3 and horizon_epochs(c, 600, 50) == 20 and horizon_epochs(c, 128, 50) == 10
    with pytest.raises(ValueError, match="budget"):
        search_under(TINY, 0, TINY_GRID)


def test_the_saved_full_grid_covers_every_combination_once():
    saved = saved_search()
    assert saved.grid == FULL_GRID and saved.budget == 50 and saved.challenge == Challenge()
    combos = [(p.batch_size, p.optimizer, p.lr, p.schedule) for p in saved.probes]
    assert sorted(combos) == sorted(FULL_GRID) and len(set(combos)) == len(FULL_GRID)
    assert all(p.epochs == horizon_epochs(saved.challenge, p.batch_size, saved.budget) for p in saved.probes)
    assert [p.rank() for p in saved.probes] == sorted(p.rank() for p in saved.probes)
    assert SearchResult.from_json(saved.to_json()) == saved


def test_the_saved_rows_are_what_the_engine_measures_now():
    """Re-race the saved best rows and a seeded sample of the rest: every count and accuracy must match."""
    saved = saved_search()
    sample = saved.probes[:6] + tuple(random.Random(8).sample(saved.probes[6:], 18))
    for row in sample:
        assert probe(saved.challenge, row.knobs, saved.budget) == row, row


def test_the_small_grid_is_a_subset_of_the_full_one():
    full = {p.knobs: p for p in saved_search().probes}
    small_knobs = {Knobs(b, o, lr, s, horizon_epochs(Challenge(), b, 50)) for b, o, lr, s in SMALL_GRID}
    assert small_knobs <= set(full)
    assert isinstance(next(iter(full.values())), Probe)
