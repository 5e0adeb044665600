"""Chapter 8's arena engine, checked against the course's own loop run without anyone watching."""
import math

import pytest

from course_utils.chapters.ch08_arena import (BASELINE, Challenge, Knobs, Progress, race, race_config, rank_key)
from course_utils.engine.loop import StepEvent
from course_utils.engine.session import Session

SHORT = Challenge(n_train=240, n_val=120, max_epochs=6)
FAST = Knobs(batch_size=32, optimizer="adam", lr=0.03, schedule="onecycle", epochs=6)


def unwatched(challenge, knobs):
    session = Session(challenge.config(knobs))
    session.run_to_end()
    return session


def test_watching_every_update_does_not_change_the_run():
    result = race(SHORT, FAST)
    plain = unwatched(SHORT, FAST)
    # the arena's accuracy at each epoch's last update equals the loop's own epoch-end evaluation
    by_update = dict(result.curve)
    assert [by_update[e.updates] for e in plain.epochs] == [e.val_acc for e in plain.epochs]
    assert result.final_acc == plain.epochs[-1].val_acc
    assert result.peak_memory == max(e.memory for e in plain.steps) > 0
    assert result.total_updates == plain.epochs[-1].updates == SHORT.config(FAST).arithmetic().total_weight_updates


def test_updates_to_target_is_the_first_update_at_or_above_target():
    result = race(SHORT, FAST)
    assert [u for u, _ in result.curve] == list(range(1, result.total_updates + 1))
    first = next((u for u, a in result.curve if a >= SHORT.target), None)
    assert result.updates_to_target == first
    assert result.best_acc == max(a for _, a in result.curve)


def test_accuracy_is_counted_exactly_so_a_hit_of_exactly_the_target_counts():
    result = race(SHORT, FAST)
    n = SHORT.n_val
    assert all(abs(a * n - round(a * n)) < 1e-9 for _, a in result.curve)   # hits / n, not a float32 mean
    exact = [u for u, a in result.curve if round(a * n) * 10 == 9 * n]       # exactly 90 %
    if exact:
        assert result.updates_to_target <= exact[0]


def test_progress_is_reported_every_update_and_stop_ends_the_race():
    seen: list[Progress] = []
    result = race(SHORT, FAST, progress=seen.append, stop=lambda: len(seen) >= 5)
    assert result.stopped and result.total_updates == 5 and [p.updates for p in seen] == [1, 2, 3, 4, 5]
    assert seen[0].planned_updates == SHORT.config(FAST).arithmetic().total_weight_updates


def test_cap_marks_a_probe_and_keeps_its_prefix():
    full, capped = race(SHORT, FAST), race(SHORT, FAST, max_updates=7)
    assert capped.capped and capped.total_updates == 7 and capped.curve == full.curve[:7]


def test_same_config_same_counts():
    a, b = race(SHORT, FAST), race_config(SHORT.config(FAST), SHORT.target)
    assert (a.updates_to_target, a.curve, a.peak_memory) == (b.updates_to_target, b.curve, b.peak_memory)


def test_baseline_is_sgd_lr_001_batch_32_and_slower_than_adam():
    assert (BASELINE.optimizer, BASELINE.lr, BASELINE.batch_size) == ("sgd", 0.01, 32)
    base, adam = race(SHORT, Knobs(**{**BASELINE.__dict__, "epochs": 6})), race(SHORT, FAST)
    assert rank_key(adam) < rank_key(base)


@pytest.mark.parametrize("knobs, words", [
    (Knobs(batch_size=0), "batch size B"), (Knobs(batch_size=10_000), "batch size B"),
    (Knobs(optimizer="lion"), "optimizer"), (Knobs(lr=0.0), "learning rate"), (Knobs(lr=math.nan), "learning rate"),
    (Knobs(schedule="linear"), "schedule"), (Knobs(epochs=21), "epochs"), (Knobs(epochs=0), "epochs"),
])
def test_bad_knobs_are_named_in_the_learners_words(knobs, words):
    with pytest.raises(ValueError, match=words):
        Challenge().config(knobs)


def test_bad_challenges():
    with pytest.raises(ValueError, match="target accuracy"):
        Challenge(target=1.5)
    with pytest.raises(ValueError, match="max epochs"):
        Challenge(max_epochs=50)
    assert Challenge().key != Challenge(target=0.95).key != Challenge(n_train=300).key


def test_the_race_uses_the_loops_step_events():
    # the race's peak memory is the loop's own per-step meter, not an estimate
    session = Session(SHORT.config(FAST))
    first = session.step()
    assert isinstance(first, StepEvent) and first.memory > 0


def test_stop_at_target_ends_at_the_first_hit():
    full, short = race(SHORT, FAST), race(SHORT, FAST, stop_at_target=True)
    assert full.reached and short.total_updates == short.updates_to_target == full.updates_to_target
    assert short.capped and "(ended at the target)" in short.summary() and short.curve == full.curve[:short.total_updates]
