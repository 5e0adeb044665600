"""Chapter 3's engine: the hand calculation equals autograd; the step-through engine records each operation."""
import pytest
import torch

from course_utils.chapters.ch03_anatomy import (OPERATIONS, StepThrough, fmt, max_difference,
                                                scheduler_before_optimizer_warning, tiny_step, tiny_step_autograd)


def test_hand_numbers_are_the_course_figures():
    s = tiny_step()
    assert s.y == pytest.approx((-0.1, 1.8))
    assert s.loss == pytest.approx(2.225)
    assert s.dL_dy == pytest.approx((-1.1, 1.8))
    assert [list(r) for r in s.dL_dW] == [pytest.approx([-1.1, -2.2]), pytest.approx([1.8, 3.6])]
    assert s.dL_db == pytest.approx((-1.1, 1.8))
    assert [list(r) for r in s.W_new] == [pytest.approx([0.511, -0.278]), pytest.approx([0.182, 0.764])]
    assert s.b_new == pytest.approx((0.011, -0.018))
    assert s.y_new[0] == pytest.approx(-0.034)
    assert s.loss_new == pytest.approx(1.96601)


@pytest.mark.parametrize("lr", [0.01, 0.1, 0.5])
def test_hand_numbers_equal_autograd(lr):
    assert max_difference(tiny_step(lr), tiny_step_autograd(lr)) < 1e-6


def test_step_through_in_order_reproduces_the_hand_step():
    e = StepThrough()
    for op in ("zero_grad", "forward", "loss", "backward", "clip", "step"):
        assert e.run(op).ok
    hand = tiny_step()
    assert torch.allclose(e.model.weight, torch.tensor(hand.W_new))
    assert torch.allclose(e.model.bias, torch.tensor(hand.b_new))
    assert e.grad_norm == pytest.approx(26.7 ** 0.5, rel=1e-5)   # below max_norm=10: not clipped
    assert e.changed == {"W", "b"}


def test_wrong_orders_are_recorded_not_raised():
    e = StepThrough()
    assert not e.run("loss").ok                       # no forward yet
    assert not e.run("backward").ok                   # no loss yet
    assert not e.run("clip").ok                       # grads are None
    assert not e.run("step").ok                       # nothing to apply
    assert fmt(e.model.weight) == "[[0.5, -0.3], [0.2, 0.8]]"
    e.run("forward"); e.run("loss"); e.run("backward")
    assert not e.run("backward").ok                   # graph freed
    assert len(e.history) == 8


def test_second_backward_adds_and_clip_scales_it():
    e = StepThrough()
    for _ in range(2):
        e.run("forward"); e.run("loss"); e.run("backward")
    assert fmt(e.model.weight.grad) == "[[-2.2, -4.4], [3.6, 7.2]]"
    e.run("clip")
    total = torch.cat([e.model.weight.grad.reshape(-1), e.model.bias.grad])
    assert torch.linalg.vector_norm(total).item() == pytest.approx(10.0, rel=1e-5)


def test_zero_grad_sets_none_and_reset_restores():
    e = StepThrough()
    e.run("forward"); e.run("loss"); e.run("backward"); e.run("step")
    e.run("zero_grad")
    assert e.model.weight.grad is None and e.model.bias.grad is None
    e.reset()
    assert e.history == [] and e.y is None and fmt(e.model.weight) == "[[0.5, -0.3], [0.2, 0.8]]"
    with pytest.raises(ValueError):
        e.run("nonsense")
    assert set(OPERATIONS) == {"zero_grad", "forward", "loss", "backward", "clip", "step"}


def test_scheduler_warning_is_torchs():
    assert "before `optimizer.step()`" in scheduler_before_optimizer_warning()


def test_adam_first_step_by_hand_matches_torch_and_is_lr_times_sign():
    from course_utils.chapters.ch03_anatomy import adam_step_by_hand
    step = adam_step_by_hand(lr=0.01)
    for hand_row, torch_row, grad_row, update_row in zip(step.W_new, step.torch_W_new, step.grad, step.update):
        for hand, ref, g, u in zip(hand_row, torch_row, grad_row, update_row):
            assert abs(hand - ref) < 1e-6
            assert abs(u - 0.01 * (1 if g > 0 else -1)) < 1e-6


def test_onecycle_stepped_per_micro_batch_runs_k_times_too_fast_and_torch_refuses():
    import torch
    from course_utils.engine.schedules import onecycle_cadence_demo
    right, wrong, error = onecycle_cadence_demo(updates=8, accum_steps=4, lr=0.1)
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    oracle = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=8)
    expected = []
    for _ in range(8):
        expected.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        oracle.step()
    assert right == expected
    assert wrong[:8] == expected and "total steps is 8" in error      # the whole cycle in 8 micro-batches


def test_step_through_marks_outputs_stale_after_a_step():
    from course_utils.widgets.step_view import StepView
    view = StepView()
    for op in ("zero_grad", "forward", "loss", "backward", "step"):
        view.press(op)
    assert view.engine.stale == {"y", "L"} and "stale" in view.board.value and "stale" in view.text()
    view.press("forward")
    assert view.engine.stale == set() and "stale" not in view.board.value


def test_a_constant_on_the_loss_cancels_in_adam_and_adamw_only():
    """Adam's m/sqrt(v) cancels a factor of 4 on the loss (AdamW too); SGD, clipping and Adam's L2 decay do not, and
    a factor small enough to bring the gradients near eps does not cancel either."""
    from course_utils.chapters.ch03_adam_scale import loss_factor_gaps

    gaps = loss_factor_gaps(factors=(4, 1e-6), seeds=range(2), steps=10)
    for optimizer in ("Adam", "AdamW(weight_decay=0.1)"):
        assert max(gaps[optimizer][4]) < 1e-4 and min(gaps[optimizer][1e-6]) > 1e-3
    for optimizer in ("SGD", "Adam + clip_grad_norm_(5.0)", "Adam(weight_decay=0.1)"):
        assert min(gaps[optimizer][4]) > 1e-3


def test_adams_weight_decay_is_half_its_value_times_the_squared_weights_in_the_loss():
    """Adam(weight_decay=d) adds d*w to the gradient: the same weights as d/2 * sum(w**2) in the loss; the penalty
    without the 1/2, and AdamW's decoupled decay, end elsewhere."""
    from course_utils.chapters.ch03_adam_scale import decay_in_the_loss_gaps

    gaps = decay_in_the_loss_gaps(decay=0.1, seeds=range(2), steps=10)
    half, whole, decoupled = gaps.values()
    assert max(half) < 1e-5 and min(whole) > 1e-3 and min(decoupled) > 1e-3


def test_two_networks_detach_keeps_d_out_of_g_and_reusing_ds_output_after_its_step_raises():
    from course_utils.chapters.ch03_loop_errors import two_network_rules

    r = two_network_rules(seed=1)
    assert r["D's loss on G(z), backward: G's .grad filled"]
    assert not r["D's loss on G(z).detach(), backward: G's .grad filled"]
    assert r["G's loss on the same D(G(z)) after D's step (retain_graph=True)"].startswith(
        "RuntimeError: one of the variables needed for gradient computation has been modified by an inplace")
    assert r["G's loss on a fresh D(G(z)) after D's step: G's .grad filled"]


def test_a_step_written_through_data_goes_unseen_and_gives_a_gradient_of_neither_d():
    """torch <= 1.4's optimizers wrote through .data: G's backward then mixes old activations with new weights."""
    from course_utils.chapters.ch03_loop_errors import _silent_old_order

    for seed in (1, 2):
        r = _silent_old_order(seed)
        assert r["the same, D's step written through .data (what torch <= 1.4 did): G's backward"] == "ran, silently"
        assert r["  its gradient equals G's gradient through D before the step / after it"] == "False / False"
    w = torch.nn.Parameter(torch.ones(2))
    version = w._version
    w.data.add_(1.0)
    assert w._version == version          # the write autograd's version counter does not count
