"""Chapter 3: a custom Function's gradient count, gradient hooks, forward hooks under no_grad, AdamW's lr-coupled decay."""
import pytest
import torch
from torch import nn

from course_utils.chapters.ch03_adam_scale import adamw_decay_per_step
from course_utils.chapters.ch03_autograd_extras import (SignSTE, _pruned_run, custom_function_lines,
                                                        forward_hook_lines, hook_lines)


def test_the_straight_through_sign_passes_the_upstream_gradient_and_the_short_backward_is_refused():
    x = torch.randn(6, requires_grad=True)
    (SignSTE.apply(x, False) * torch.arange(6.0)).sum().backward()
    assert torch.equal(x.grad, torch.arange(6.0))
    lines = custom_function_lines()
    assert lines[0].startswith("torch.sign's own gradient: [0.0, 0.0, 0.0, 0.0]")
    assert lines[2].endswith("returned an incorrect number of gradients (expected 2, got 1)")


def test_the_gradient_hook_is_what_keeps_pruned_weights_at_zero():
    for hooked in (False, True):
        model, mask, start = _pruned_run(hooked)
        pruned = model[0].weight.detach()[mask == 0]
        assert bool((pruned == 0).all()) is hooked
        assert (model[0].weight.detach()[mask == 1] != start[mask == 1]).all()
    assert hook_lines()[2].endswith("cannot register a hook on a tensor that doesn't require gradient")


def test_a_forward_hook_keeps_activations_under_no_grad_in_train_mode_only():
    train, evaluation = forward_hook_lines(batches=3)
    assert "kept 6 tensors" in train and "kept 0 tensors, 0 KiB" in evaluation


@pytest.mark.parametrize("kind", [{"foreach": False}, {"foreach": True}, {"fused": True}])
def test_adamw_shrinks_by_lr_times_decay_in_every_implementation(kind):
    w = torch.nn.Parameter(torch.ones(3))
    opt = torch.optim.AdamW([w], lr=0.02, weight_decay=0.3, **kind)
    w.grad = torch.zeros(3)
    opt.step()
    assert 1 - w[0].item() == pytest.approx(0.02 * 0.3, rel=1e-5)


def test_the_decay_follows_the_learning_rate_and_its_schedule():
    assert [1 - f for f in adamw_decay_per_step(1e-3, decay=0.2)] == pytest.approx([2e-4] * 4, rel=1e-4)
    cosine = [1 - f for f in adamw_decay_per_step(1e-2, decay=0.1, steps=4, schedule=True)]
    expected = [1e-2 * 0.1 * (1 + torch.cos(torch.tensor(torch.pi * t / 4)).item()) / 2 for t in range(4)]
    assert cosine == pytest.approx(expected, rel=1e-4)


def test_a_helper_that_turns_grad_mode_off_breaks_later_training_until_enable_grad_and_the_mode_is_restored():
    from course_utils.chapters.ch03_autograd_extras import grad_mode_leak_lines
    assert torch.is_grad_enabled()
    lines = grad_mode_leak_lines()
    assert lines[1].startswith("after: False") and "does not have a grad_fn" in lines[2] and lines[3].endswith("True")
    assert torch.is_grad_enabled()
    with torch.no_grad():
        grad_mode_leak_lines()
        assert not torch.is_grad_enabled()        # put back as it was found, off here


def test_a_masked_branch_sends_nan_into_grad_and_masking_the_input_does_not():
    """The chapter's rows against the calculus: where a mask keeps a value, its gradient is the derivative (1 / (2
    sqrt 4) = 0.25; d(a/b)/db = -a / b^2 = -0.25); where it hides one, NaN, unless the input was masked first."""
    import math

    from course_utils.chapters.ch03_autograd_extras import _grad_after, _nan_maker, masked_nan_lines

    def where(x, safe):
        inner = torch.where(x > 0, x, torch.ones_like(x)) if safe else x
        return torch.where(x > 0, inner.sqrt(), torch.zeros_like(x)).sum()

    for safe in (False, True):
        loss, [grad] = _grad_after(lambda x: where(x, safe), [0.0, 4.0])
        assert loss == 2.0 and grad[1] == 0.25 and (grad[0] == 0.0 if safe else math.isnan(grad[0]))
    assert _nan_maker(lambda x: where(x, False), [0.0, 4.0]) == "SqrtBackward0"
    assert _nan_maker(lambda x: where(x, True), [0.0, 4.0]) == "nothing (no NaN)"
    lines = masked_nan_lines()
    assert "b.grad [nan, -0.25]" in lines[1] and "b.grad [0.0, -0.25]" in lines[3]
    assert "loss nan" in lines[-1] and lines[-1].endswith("True")


def test_extra_none_gradients_are_dropped_and_a_module_backward_is_never_called():
    from course_utils.chapters.ch03_autograd_extras import GradReverse, ReverseModule, SignSTEExtra, SignSTELong
    x = torch.randn(5, requires_grad=True)
    SignSTELong.apply(x, True).sum().backward()
    assert torch.equal(x.grad, torch.ones(5))
    with pytest.raises(RuntimeError, match=r"incorrect number of gradients \(expected 2, got 3\)"):
        SignSTEExtra.apply(x, True).sum().backward()
    x.grad = None
    (GradReverse.apply(x, 0.5) * torch.arange(5.0)).sum().backward()      # oracle: -0.5 × d(x·arange)/dx
    assert torch.equal(x.grad, -0.5 * torch.arange(5.0))
    module = ReverseModule()
    x.grad = None
    (module(x) * 3).sum().backward()
    assert module.backward_calls == 0 and torch.equal(x.grad, torch.full((5,), 3.0))
    lines = custom_function_lines()
    assert any(line.startswith("the same through GradReverse") and line.endswith("(reversed: True)") for line in lines)
    assert any("called 0 times (reversed: False)" in line for line in lines)
    assert any(line.startswith("GradReverse whose forward returns x itself") and line.endswith("(reversed: True)")
               for line in lines)
    after = lines[-1].split("weight.grad ")[1]
    assert after.split(" without it, ")[0] == after.split(" without it, ")[1].removesuffix(" with it")


def test_per_sample_gradients_match_one_backward_per_example():
    """The chapter's vmap lines against an independent oracle: backward on each example alone."""
    from torch import nn
    from course_utils.chapters.ch03_func_transforms import per_sample_gradient_lines
    lines = per_sample_gradient_lines(batch=6)
    assert "shape (1,) (one example), outside (6, 1)" in lines[0]
    assert "(6, 5, 4); equal to a loop over the examples: True; their mean is the batch's .grad: True" in lines[1]
    assert lines[2].startswith("h[:, 0] += 3 inside vmap: IndexError")
    assert "sees shape (6, 5)" in lines[3] and "has shape (5, 4)" in lines[3]
    # the oracle for "equal to a loop": plain backward per example, outside torch.func
    from torch.func import functional_call, grad, vmap
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    x, y = torch.randn(6, 3), torch.randn(6, 1)
    params = {k: v.detach() for k, v in model.named_parameters()}
    per = vmap(grad(lambda p, xi, yi: nn.functional.mse_loss(functional_call(model, p, (xi,)), yi)),
               in_dims=(None, 0, 0))(params, x, y)
    for i in range(6):
        model.zero_grad()
        nn.functional.mse_loss(model(x[i:i + 1]), y[i:i + 1]).backward()
        assert torch.allclose(per["0.weight"][i], model[0].weight.grad, atol=1e-6)


def test_a_weight_autograd_cannot_reach_gets_no_grad_and_the_penalty_norm_is_per_pixel_over_dim_one():
    from course_utils.chapters.ch03_autograd_extras import gradient_penalty_lines, unreached_parameter_lines
    lines = unreached_parameter_lines()
    assert "weight.grad is None: False" in lines[0]
    assert all("weight.grad is None: True; bias.grad is None: False" in line for line in lines[1:])
    shape, per_pixel, per_sample, equal = gradient_penalty_lines(batch=4)
    assert "(4, 32, 32), equal to |gradient| pixel by pixel: True" in per_pixel and "(4,)" in per_sample
    assert equal.endswith("False")


def test_a_fractional_power_at_zero_nans_the_gradient_and_a_clamp_or_gamma_2_does_not():
    from course_utils.chapters.ch03_autograd_extras import fractional_power_lines
    lines = fractional_power_lines()
    assert lines[0].endswith("loss finite: True; NaN in logits.grad: True")
    assert lines[1].endswith("NaN in logits.grad: False") and lines[2].endswith("NaN in logits.grad: False")
    assert "at x = 0: inf" in lines[3] and "= nan" in lines[3]


@pytest.mark.parametrize("a, b, alpha, w0", [(1.0, 3.0, 0.1, 0.5), (-2.0, 0.5, 0.3, 1.5)])
def test_the_meta_gradient_is_first_order_without_create_graph_and_second_order_with_it(a, b, alpha, w0):
    from course_utils.chapters.ch03_func_transforms import meta_gradient_lines
    adapted = w0 - alpha * 2 * (w0 - a)
    lines = meta_gradient_lines(a, b, alpha, w0)
    assert f"create_graph=False): {2 * (adapted - b):.4f}" in lines[1]
    assert f"create_graph=True):  {2 * (adapted - b) * (1 - 2 * alpha):.4f}" in lines[2]


def test_eval_mode_per_example_gradients_of_a_batchnorm_model_equal_a_loop_of_batches_of_one():
    """The oracle for the one line that runs: each example's own backward, in eval mode, as a batch of one."""
    from torch.func import functional_call, grad, vmap

    from course_utils.chapters.ch03_func_transforms import vmap_batchnorm_lines
    lines = vmap_batchnorm_lines()
    assert lines[0].startswith("train mode") and "RuntimeError" in lines[0]
    assert "ValueError: expected 2D or 3D input" in lines[1] and lines[2].endswith("(8, 5, 4)")
    assert "expected 4D input" in lines[3]
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 1))
    model.train()
    model(torch.randn(16, 3))                                  # statistics that are not the defaults
    model.eval()
    x, y = torch.randn(5, 3), torch.randn(5, 1)
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss_one(p, xi, yi):
        return nn.functional.mse_loss(functional_call(model, (p, dict(model.named_buffers())), (xi[None],)), yi[None])

    per = vmap(grad(loss_one), in_dims=(None, 0, 0))(params, x, y)
    for i in range(5):
        model.zero_grad()
        nn.functional.mse_loss(model(x[i:i + 1]), y[i:i + 1]).backward()
        assert torch.allclose(per["0.weight"][i], model[0].weight.grad, atol=1e-6)
