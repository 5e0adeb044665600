"""The chapter 3 and 4 views, driven headless: every button, state after each, reset."""
from course_utils.chapters.ch03_anatomy import tiny_step
from course_utils.widgets.base import RUN_HINT
from course_utils.widgets.step_view import StepView, step_through
from course_utils.widgets.train_eval_view import TrainEvalView, train_vs_eval


def test_step_view_every_button_in_order():
    v = step_through()
    assert v.engine.history == [] and "W.grad  = None" in v.text()
    v.buttons["zero_grad"].click()
    assert v.engine.history[-1].operation == "zero_grad"
    v.buttons["forward"].click()
    assert "y       = [-0.1, 1.8]" in v.text()
    v.buttons["loss"].click()
    assert "L       = 2.225" in v.text()
    v.buttons["backward"].click()
    assert "W.grad  = [[-1.1, -2.2], [1.8, 3.6]]" in v.text()
    assert "font-weight:bold" in v.board.value
    v.buttons["clip"].click()
    assert "grads unchanged" in v.text()
    v.buttons["step"].click()
    assert "W       = [[0.511, -0.278], [0.182, 0.764]]" in v.text()
    assert tiny_step().W_new[0][0] == 0.511 or abs(tiny_step().W_new[0][0] - 0.511) < 1e-12
    assert len(v.engine.history) == 6 and "6." in v.log.value


def test_step_view_wrong_order_shows_message_and_reset_works():
    v = StepView()
    v.buttons["backward"].click()
    assert "run forward and loss first" in v.text() and "#8a1c1c" in v.log.value
    v.buttons["forward"].click(); v.buttons["loss"].click(); v.buttons["backward"].click()
    v.reset_button.click()
    assert v.engine.history == [] and "y       = None" in v.text()
    assert "W       = [[0.5, -0.3], [0.2, 0.8]]" in v.text()
    bundle = v._repr_mimebundle_()
    assert bundle["text/plain"] == v.text() + "\n" + RUN_HINT


def test_train_eval_view_forward_in_both_modes():
    v = train_vs_eval()
    assert v.memory["no_grad"] == 0 and v.memory["grad enabled"] > 0
    assert "press forward" in v.mask_html.value
    v.forward_button.click(); v.forward_button.click()
    (m1, o1, d1), (m2, o2, d2) = v.history
    assert m1 == m2 == "train" and o1 != o2 and d1 + d2 > 0
    assert "×" in v.mask_html.value
    v.mode.value = "eval"
    v.forward_button.click(); v.forward_button.click()
    (_, e1, z1), (_, e2, z2) = v.history[2:]
    assert e1 == e2 and z1 == z2 == 0
    assert "pass 4 (eval)" in v.text() and "no_grad: 0 bytes" in v.text()


def test_train_eval_view_reset_replays_the_same_masks():
    v = TrainEvalView()
    first = v.forward()
    v.forward()
    v.reset_button.click()
    assert v.history == [] and v.last_mask is None
    assert v.forward() == first                      # same private RNG stream after reset
    assert v._repr_mimebundle_()["text/plain"] == v.text() + "\n" + RUN_HINT
