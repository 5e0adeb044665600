"""The instrumented loop: validation, counted updates, determinism, telemetry, evaluation, Session."""
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torch.utils.data import DataLoader

from course_utils.engine.arithmetic import training_arithmetic
from course_utils.engine.bugs import STEP
from course_utils.engine.data import spiral_splits
from course_utils.engine.loop import EpochEvent, StepEvent, clip, evaluate, global_norm, schedule_due
from course_utils.engine.session import Session, TrainConfig, run
from course_utils.engine.models import MLP
from course_utils.engine.schedules import SCHEDULES, lr_curve

SMALL = dict(n_train=120, n_val=40, hidden=16, epochs=2)


# --- bad configuration ---------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, name", [
    ({"optimizer": "rmsprop"}, "optimizer"), ({"lr": 0}, "lr"), ({"lr": -0.1}, "lr"),
    ({"lr": float("nan")}, "lr"), ({"batch_size": 0}, "batch_size"), ({"accum_steps": 0}, "accum_steps"),
    ({"bugs": ("no_such_bug",)}, "no_such_bug"), ({"schedule": "linear"}, "schedule"),
    ({"bugs": "missing_zero_grad"}, "bugs"), ({"epochs": 0}, "epochs"), ({"dropout": 1.0}, "dropout"),
    ({"clip_norm": 0.0}, "clip_norm"), ({"leak": 2.0}, "leak"), ({"n_train": 2.5}, "n_train"),
    ({"bugs": ("missing_zero_grad", "zero_grad_after_backward")}, "zero_grad"),
    ({"bugs": ("freeze_after_optimizer",)}, "freeze_after_optimizer"),
    ({"batchnorm": True, "n_train": 33, "batch_size": 32}, "batch_size"),
    ({"bugs": ("epoch_schedule_per_batch",), "schedule": "onecycle", "accum_steps": 2}, "onecycle"),
])
def test_bad_configuration_raises_value_error_naming_it(kwargs, name):
    with pytest.raises(ValueError, match=name):
        TrainConfig(**kwargs)


def test_bugs_given_as_a_list_become_a_tuple():
    assert TrainConfig(bugs=["missing_no_grad"]).bugs == ("missing_no_grad",)


# --- counted updates match chapter 0's arithmetic -------------------------------------------------

@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 70), batch=st.integers(1, 24), accum=st.integers(1, 6), drop_last=st.booleans(),
       epochs=st.integers(1, 2))
def test_counted_optimizer_steps_equal_the_arithmetic(n, batch, accum, drop_last, epochs):
    config = TrainConfig(n_train=n, n_val=3, hidden=4, depth=1, batch_size=batch, accum_steps=accum,
                         drop_last=drop_last, epochs=epochs, measure_memory=False)
    session = Session(config)
    calls = []
    session.state.optimizer.register_step_post_hook(lambda *_: calls.append(session.state.epoch))
    session.run_to_end()
    expected = training_arithmetic(n, batch, epochs, accum, drop_last=drop_last)
    for epoch in range(1, epochs + 1):
        assert calls.count(epoch) == expected.updates_per_epoch
        assert sum(e.epoch == epoch for e in session.steps) == expected.iters_per_epoch
    assert session.epochs[-1].updates == expected.total_weight_updates
    assert [e.batch_size for e in session.steps if e.epoch == 1][-1:] == (
        [expected.last_batch_size] if expected.iters_per_epoch else [])


# --- determinism -----------------------------------------------------------------------------------

def test_same_seed_gives_identical_telemetry_run_after_run():
    config = TrainConfig(**SMALL, dropout=0.3, schedule="onecycle", accum_steps=2, clip_norm=0.5)
    assert list(run(config)) == list(run(config))


def test_interleaved_runs_match_runs_alone():
    config = TrainConfig(**SMALL, dropout=0.3)
    alone = list(run(config))
    left, right = run(config), run(TrainConfig(**SMALL, dropout=0.5, seed=1))
    interleaved = []
    for event in left:
        interleaved.append(event)
        next(right, None)
        torch.rand(10)                                  # the notebook drawing numbers in between
    assert interleaved == alone


def test_a_different_seed_gives_different_telemetry():
    assert list(run(TrainConfig(**SMALL))) != list(run(TrainConfig(**SMALL, seed=1)))


# --- telemetry ---------------------------------------------------------------------------------------

def test_step_events_carry_measured_telemetry():
    session = Session(TrainConfig(n_train=96, n_val=32, epochs=1))
    first = session.step()
    assert isinstance(first, StepEvent)
    assert (first.epoch, first.batch, first.step, first.updates, first.batch_size) == (1, 1, 1, 1, 32)
    assert first.lr == 0.01 and first.update and first.training and first.graph_nodes == 0
    assert first.loss == pytest.approx(math.log(3), abs=0.1)        # a fresh classifier: about log C
    assert first.grad_norm > 0
    # saved for backward by MLP(hidden=64, depth=2) on 32 examples: the input, two ReLU outputs,
    # the log-probabilities, the targets and a 0-d total weight (see test_memory.py)
    assert first.memory == 32 * 2 * 4 + 2 * 32 * 64 * 4 + 32 * 3 * 4 + 32 * 8 + 4 == 17284


def test_epoch_events_and_no_grad_evaluation_memory():
    events = list(run(TrainConfig(**SMALL, n_test=30)))
    epochs = [e for e in events if isinstance(e, EpochEvent)]
    assert [e.epoch for e in epochs] == [1, 2] and isinstance(events[-1], EpochEvent)
    assert all(e.eval_memory == 0 and 0 <= e.val_acc <= 1 and e.test_acc is not None for e in epochs)
    steps = [e for e in events if isinstance(e, StepEvent) and e.epoch == 1]
    mean = sum(e.loss * e.batch_size for e in steps) / sum(e.batch_size for e in steps)
    assert epochs[0].train_loss == pytest.approx(mean, rel=1e-12)


def test_measure_memory_off_reports_zero():
    assert {e.memory for e in run(TrainConfig(**SMALL, measure_memory=False)) if isinstance(e, StepEvent)} == {0}


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_the_loop_steps_each_schedule_at_its_cadence(schedule):
    config = TrainConfig(**SMALL, schedule=schedule, accum_steps=2, lr=0.05)
    lrs = [e.lr for e in run(config) if isinstance(e, StepEvent) and e.update]
    per_epoch = config.arithmetic().updates_per_epoch
    assert lrs == pytest.approx(lr_curve(schedule, 0.05, config.epochs, per_epoch), rel=1e-12)


def test_schedule_due_rule():
    assert schedule_due("update", "healthy", True, False) and not schedule_due("update", "healthy", False, True)
    assert schedule_due("epoch", "healthy", False, True) and not schedule_due("epoch", "healthy", True, False)
    assert schedule_due("epoch", "every_batch", False, False)


def test_accumulated_micro_batches_equal_one_big_batch():
    big = Session(TrainConfig(**SMALL, optimizer="sgd", lr=0.5, batch_size=32))
    small = Session(TrainConfig(**SMALL, optimizer="sgd", lr=0.5, batch_size=16, accum_steps=2))
    big.step()
    small.step()
    small.step()
    assert small.steps[-1].updates == 1 and not small.steps[0].update
    assert small.steps[-1].grad_norm == pytest.approx(big.steps[0].grad_norm, rel=1e-5)
    for a, b in zip(big.model.parameters(), small.model.parameters()):
        assert torch.allclose(a, b, atol=1e-6)


# --- operations --------------------------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(shapes=st.lists(st.lists(st.integers(1, 40), min_size=0, max_size=3), min_size=0, max_size=8),
       scale=st.floats(1e-30, 1e30), mixed=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_global_norm_is_bitwise_torchs_get_total_norm(shapes, scale, mixed, seed):
    generator = torch.Generator().manual_seed(seed)
    grads = [torch.randn(shape, generator=generator) * scale for shape in shapes]
    if mixed and grads:                                   # two dtypes: the fallback to torch's own function
        grads[0] = grads[0].double()
    expected = nn.utils.get_total_norm(grads) if grads else torch.zeros(())
    assert torch.equal(global_norm(grads), expected)


def test_clip_returns_the_pre_clip_norm_and_clips_like_torch():
    torch.manual_seed(0)
    model, twin = MLP(hidden=8), MLP(hidden=8)
    twin.load_state_dict(model.state_dict())
    x, y = torch.randn(16, 2), torch.randint(0, 3, (16,))
    for m in (model, twin):
        nn.functional.cross_entropy(m(x), y).backward()
    norm = clip(list(model.parameters()), 0.01)
    assert norm == nn.utils.clip_grad_norm_(twin.parameters(), 0.01).item()      # bitwise: same arithmetic
    for a, b in zip(model.parameters(), twin.parameters()):
        assert torch.equal(a.grad, b.grad)
    assert clip(list(model.parameters()), None) == pytest.approx(0.01, rel=1e-4)


def test_recipe_order_is_chapter_3():
    assert STEP == ("zero_grad", "forward", "compute_loss", "backward", "clip", "optimizer_step",
                    "scheduler_step")


# --- evaluation --------------------------------------------------------------------------------------

def test_evaluate_averages_per_example_whatever_the_batching():
    torch.manual_seed(0)
    model = MLP(hidden=8)
    val = spiral_splits(20, 50, seed=2).val
    x, y = val.tensors
    with torch.no_grad():
        logits = model(x)
    full_loss = nn.functional.cross_entropy(logits, y).item()
    full_acc = (logits.argmax(1) == y).float().mean().item()
    loss, acc = evaluate(model, DataLoader(val, batch_size=16))       # batches 16, 16, 16, 2
    assert loss == pytest.approx(full_loss, rel=1e-6) and acc == pytest.approx(full_acc)
    assert not model.training


def test_evaluate_by_batch_is_the_mean_of_batch_means():
    torch.manual_seed(0)
    model = MLP(hidden=8)
    val = spiral_splits(20, 50, seed=2).val
    loader = DataLoader(val, batch_size=16)
    with torch.no_grad():
        means = [nn.functional.cross_entropy(model(x), y).item() for x, y in loader]
    loss, _ = evaluate(model, loader, average="batch")
    assert loss == pytest.approx(sum(means) / len(means), rel=1e-6)


# --- Session -----------------------------------------------------------------------------------------

def test_session_pulls_one_step_at_a_time_and_evaluates_at_epoch_end():
    session = Session(TrainConfig(n_train=64, n_val=16, hidden=8, epochs=2))
    assert session.step().batch == 1 and len(session.history) == 1
    event = session.step()                              # batch 2 of 2 ends the epoch: evaluation runs
    assert event.batch == 2 and isinstance(session.history[-1], EpochEvent)
    last = session.run_epoch()
    assert isinstance(last, EpochEvent) and last.epoch == 2
    assert session.step() is None and session.done
    first_run = list(session.history)
    session.reset()
    assert session.history == [] and not session.done
    assert session.run_to_end() == first_run[-1] and session.history == first_run


def test_session_evaluate_restores_the_training_mode():
    session = Session(TrainConfig(**SMALL, dropout=0.5))
    session.step()
    loss, acc = session.evaluate()
    assert session.model.training and 0 <= acc <= 1 and loss > 0
