"""Session (chapter 6's engine): mid-run learning rate, stop flag, ghost twin, Step/epoch/end, reset."""
import math

import pytest

from course_utils.engine.bugs import LOOP_BUGS
from course_utils.engine.schedules import SCHEDULES
from course_utils.engine.session import Session, TrainConfig

SMALL = dict(n_train=200, n_val=64, epochs=3, measure_memory=False)


def telemetry(session):
    return [(type(e).__name__, vars(e)) for e in session.history]


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_set_lr_mid_run_scales_the_rest_of_the_schedule(schedule):
    """Oracle: an untouched run of the same config; after set_lr every lr is new/old times its lr."""
    changed, plain = Session(TrainConfig(schedule=schedule, **SMALL)), Session(TrainConfig(schedule=schedule, **SMALL))
    for _ in range(9):
        changed.step(), plain.step()
    changed.set_lr(0.05)
    changed.run_to_end(), plain.run_to_end()
    assert [e.lr for e in changed.steps[:9]] == [e.lr for e in plain.steps[:9]]
    assert [e.lr for e in changed.steps[9:]] == pytest.approx([5 * e.lr for e in plain.steps[9:]], rel=1e-9)
    assert changed.lr_changes == [(9, 0.05)] and changed.base_lr == 0.05


def test_set_lr_changes_what_the_next_update_does():
    a, b = Session(TrainConfig(**SMALL)), Session(TrainConfig(**SMALL))
    a.step(), b.step()
    a.set_lr(0.5)
    assert a.step().lr == 0.5 and b.step().lr == 0.01
    assert a.steps[-1].loss == b.steps[-1].loss                  # this step's loss came before the update
    assert a.step().loss != b.step().loss


@pytest.mark.parametrize("bad", [0, -1.0, math.nan, math.inf, "0.1", True])
def test_set_lr_rejects_bad_values_naming_the_learning_rate(bad):
    s = Session(TrainConfig(**SMALL))
    with pytest.raises(ValueError, match="learning rate"):
        s.set_lr(bad)
    assert s.lr_changes == [] and s.lr == 0.01


def test_stop_request_ends_the_epoch_early_and_the_run_goes_on_unchanged():
    """Oracle: an uninterrupted run; stopping mid-epoch and carrying on gives the same events."""
    stopped, whole = Session(TrainConfig(**SMALL)), Session(TrainConfig(**SMALL))
    for i, _ in enumerate(stopped.epoch_steps()):
        if i == 2:
            stopped.request_stop()
    assert stopped.state.step == 3 and stopped.epochs == []
    stopped.run_epoch()                                          # the stop flag does not linger
    assert len(stopped.epochs) == 1
    stopped.run_to_end(), whole.run_to_end()
    assert telemetry(stopped) == telemetry(whole)


def test_step_epoch_end_counts_match_the_arithmetic():
    config = TrainConfig(**SMALL, accum_steps=3)
    s = Session(config)
    arithmetic = config.arithmetic()
    assert s.step().batch == 1 and s.state.step == 1
    epoch = s.run_epoch()
    assert epoch.epoch == 1 and epoch.steps == arithmetic.iters_per_epoch
    assert s.run_to_end().updates == arithmetic.total_weight_updates and s.done
    assert s.epochs_done == len(s.epochs) == config.epochs
    assert s.step() is None and s.run_epoch() is None


def test_last_step_of_an_epoch_also_evaluates():
    s = Session(TrainConfig(**SMALL))
    for _ in range(len(s.state.train_loader)):
        s.step()
    assert len(s.epochs) == 1 and s.epochs[0].steps == len(s.state.train_loader)


@pytest.mark.parametrize("bug", LOOP_BUGS)
def test_ghost_is_the_healthy_run_with_the_same_seed(bug):
    config = TrainConfig(**{**SMALL, "dropout": 0.3, "accum_steps": 3, "schedule": "step"}, bugs=(bug,))
    bugged = Session(config, ghost=True)
    bugged.step()
    bugged.run_epoch()
    bugged.run_to_end()
    healthy = Session(TrainConfig(**{**SMALL, "dropout": 0.3, "accum_steps": 3, "schedule": "step"}))
    healthy.run_to_end()
    assert telemetry(bugged.ghost) == telemetry(healthy)
    assert bugged.ghost.ghost is None


def test_ghost_follows_lr_changes_and_reset():
    s = Session(TrainConfig(**SMALL, bugs=("missing_zero_grad",)), ghost=True)
    s.step()
    s.set_lr(0.1)
    s.step()
    assert s.ghost.lr_changes == [(1, 0.1)] and s.ghost.steps[-1].lr == 0.1
    s.reset(TrainConfig(**SMALL))
    assert s.ghost is None                                       # no bug: no ghost
    assert Session(TrainConfig(**SMALL, bugs=("missing_zero_grad",))).ghost is None   # ghost=False


def test_reset_replays_the_same_run():
    s = Session(TrainConfig(**SMALL, dropout=0.2))
    s.run_to_end()
    first = telemetry(s)
    s.reset()
    assert s.history == [] and not s.done and s.state.step == 0
    s.run_to_end()
    assert telemetry(s) == first
