"""Chapter 3's cells on what autograd keeps and reruns: gradient checkpointing's second forward (BatchNorm's running
statistics, dropout's masks), a custom Function's ctx, MAML over K inner steps, a sparse embedding tied to the
output layer. Each line's claim is checked against its own oracle (a plain run, the derivative by hand)."""
import re

import pytest

from course_utils.chapters.ch03_checkpointing import batchnorm_lines, dropout_lines
from course_utils.chapters.ch03_clip_optim import tied_sparse_rows
from course_utils.chapters.ch03_func_transforms import maml_steps_lines
from course_utils.chapters.ch03_function_ctx import function_ctx_lines


def test_a_checkpointed_batchnorm_updates_twice_which_is_a_larger_momentum():
    lines = batchnorm_lines(momentum=0.1)
    for line in lines[:2]:                       # reentrant and not
        assert "num_batches_tracked 10 after 5 steps (plain: 5)" in line
        assert line.endswith("at momentum 0.1: False, at 0.19: True")
    assert lines[2].endswith("equal to the plain run's at 0.1: True")
    assert lines[3].endswith("equal to the plain run's: True")


@pytest.mark.parametrize("momentum", [0.3, 0.05])
def test_the_compensating_momentum_holds_for_other_momentums(momentum):
    assert batchnorm_lines(momentum)[2].endswith(f"equal to the plain run's at {momentum}: True")


def test_dropout_masks_are_replayed_only_with_the_rng_state():
    assert dropout_lines() == ["dropout 0.5, preserve_rng_state=True: gradients equal to the plain run's: True",
                               "dropout 0.5, preserve_rng_state=False: gradients equal to the plain run's: False",
                               "use_reentrant=False, input without requires_grad: block's weight.grad filled: True"]


def test_ctx_rules():
    lines = function_ctx_lines()
    assert lines[0] == "save_for_backward(a, 3): TypeError: save_for_backward can only save variables, but argument 1 " \
                       "is of type int"
    assert lines[1].endswith("backward received a * 3: True")
    assert "RuntimeError: one of the variables needed for gradient computation has been modified" in lines[2]
    wrong, true = re.findall(r"\[([^\]]*)\]", lines[3])
    assert wrong != true and [float(v) for v in true.split(",")] == [20.0, 20.0]
    assert lines[4] == ("autograd.grad(out, a) only: needs_input_grad (True, True), b's gradient computed: True; "
                        "with b detached: (True, False), computed: False")


@pytest.mark.parametrize("alpha", [0.1, 0.3])
def test_maml_meta_gradient_over_k_steps_is_the_derivative_by_hand(alpha):
    lines = maml_steps_lines(alpha=alpha)
    for line in lines[:3]:
        autograd_value, by_hand = re.findall(r"-?\d+\.\d{4}", line)[-2:]
        assert autograd_value == by_hand, line
    assert lines[3].endswith("each step adds the same: True")
    assert lines[4].endswith(": True")


def test_a_tied_sparse_embedding_gets_a_dense_gradient():
    rows = tied_sparse_rows(vocab=12)
    assert rows["alone"] == "rows with a gradient 3 of 12, sparse: True; SparseAdam: steps"
    assert rows["tied to the output layer"].startswith("rows with a gradient 12 of 12, sparse: False; "
                                                       "SparseAdam: RuntimeError: SparseAdam does not support dense")


def test_ctc_lengths_of_the_full_batch_fail_on_the_last_one():
    from course_utils.chapters.ch07_loss_targets import ctc_length_lines
    full, own = ctc_length_lines(batch=6)
    assert full.endswith("RuntimeError: input_lengths must be of size batch_size")
    assert own.endswith("loss finite: True")


@pytest.mark.parametrize("n", [6, 15])
def test_a_sparse_by_sparse_product_has_a_sparse_backward_equal_to_the_dense_one(n):
    from course_utils.chapters.ch03_autograd_extras import sparse_sparse_lines
    first, second, lacking = sparse_sparse_lines(n)
    assert first.endswith("grad_fn SparseSparseMatmulBackward0")
    assert second == ("gradients: both sparse True; equal to the dense product's gradient at the stored entries: "
                      "True; zero elsewhere: True")
    assert lacking.endswith("grad_fn NotImplemented, requires_grad True; backward: RuntimeError: derivative for "
                            "aten::hspmm is not implemented")


@pytest.mark.parametrize("rows,virtual", [(101, 10), (97, 8), (100, 10)])
def test_ghost_batches_tensor_split_never_leaves_a_lone_row(rows, virtual):
    import math
    from course_utils.chapters.ch04_bn_single_image import ghost_batch_lines
    by_chunk, by_split = ghost_batch_lines(rows, virtual)[:2]
    assert by_split.endswith("every chunk normalised")
    lone = rows - virtual * (math.ceil(rows / virtual) - 1) == 1
    assert by_chunk.endswith("every chunk normalised") != lone


@pytest.mark.parametrize("w0, lr", [(0.5, 0.1), (-1.5, 0.3)])
def test_the_meta_gradient_reaches_the_weights_only_when_the_fast_weights_start_from_them(w0, lr):
    """Oracle: a central difference of the outer loss as a function of the starting weight."""
    from course_utils.chapters.ch03_func_transforms import copied_start_lines

    def outer(w):
        w1 = w - lr * 2 * (w - 1.0)
        return (w1 - 1.0) ** 2
    h = 1e-4
    derivative = (outer(w0 + h) - outer(w0 - h)) / (2 * h)
    copy, itself, first_order, _ = copied_start_lines(w0, lr)
    assert "model.weight.grad None" in copy
    assert float(copy.rsplit(" ", 1)[1]) == pytest.approx(derivative, abs=1e-3)   # it lands on the copy
    assert float(itself.rsplit(" ", 1)[1]) == pytest.approx(derivative, abs=1e-3)
    w1 = w0 - lr * 2 * (w0 - 1.0)
    assert float(first_order.rsplit(" ", 1)[1]) == pytest.approx(2 * (w1 - 1.0), abs=1e-4)



def test_the_meta_gradients_are_first_order_maml_computed_with_plain_backward():
    """Oracle: each task on a copy of the model, the inner step taken by hand under no_grad, the outer loss's backward."""
    import copy

    import torch

    from course_utils.chapters import ch03_func_transforms as ft
    torch.manual_seed(0)
    model = ft._MetaNet()
    meta = ft._meta_gradients(model)
    g = torch.Generator().manual_seed(1)
    expected = {n: torch.zeros_like(p) for n, p in model.named_parameters()}
    for _ in range(2):
        x, y = torch.randn(8, 3, generator=g), torch.randn(8, 1, generator=g)
        net = copy.deepcopy(model)
        torch.nn.functional.mse_loss(net(x), y).backward()
        with torch.no_grad():
            for p in net.parameters():
                p -= 0.1 * p.grad
                p.grad = None
        torch.nn.functional.mse_loss(net(x), y).backward()
        for n, p in net.named_parameters():
            expected[n] += p.grad
    for n in expected:
        torch.testing.assert_close(meta[n], expected[n])


@pytest.mark.parametrize("optimizer", ["Adam", "SGD"])
def test_hooked_meta_gradients_replace_the_dummy_gradient_and_miss_what_it_does_not_reach(optimizer):
    from course_utils.chapters.ch03_func_transforms import hook_injection_lines
    lines = hook_injection_lines(optimizer)
    assert len(lines) == 5
    assert not any("False" in line for line in lines)
    assert "its hooks ran 0 times, .grad None" in lines[3]


def test_a_recurrent_rollout_against_an_lstm_run_episode_by_episode_and_inputs_perturbed():
    """Oracles: torch's nn.LSTM with the cell's weights, run on each episode alone from zeros (the uninterrupted
    stream with its resets), and which outputs move when one input is moved (no autograd)."""
    import torch
    from torch import nn

    from course_utils.chapters import ch03_recurrent_rollouts as r
    assert r.rollout_lines(3)[0].endswith(f"at {r.STEPS} of {r.STEPS} steps")
    torch.manual_seed(3)
    cell = nn.LSTMCell(3, 4)
    xs = torch.randn(r.STEPS, 3)
    lstm = nn.LSTM(3, 4)
    with torch.no_grad():
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(lstm, f"{name}_l0").copy_(getattr(cell, name))
        starts = [0, *(e + 1 for e in r.ENDS)]
        episodes = [lstm(xs[a:b])[0] for a, b in zip(starts, [*starts[1:], r.STEPS])]
        zeros = (torch.zeros(1, 4), torch.zeros(1, 4))
        first, stored = r._stream(cell, xs[:r.ROLLOUT], 0, zeros)
        carried, stored_2 = r._stream(cell, xs[r.ROLLOUT:], r.ROLLOUT, stored[-1])
        assert torch.allclose(torch.cat([first, carried]), torch.cat(episodes), atol=1e-6)

        def moved(t: int, own: bool) -> bool:
            """Does step 9's output change when step t's input moves (the update on rollout 2)?"""
            nudged = xs.clone()
            nudged[t] += 1.0
            if own:      # from its own stored state, which acting computed from the unmoved inputs
                return not torch.equal(cell(nudged[9][None], stored_2[9 - r.ROLLOUT])[0], carried[9 - r.ROLLOUT][None])
            out, _ = r._stream(cell, nudged[r.ROLLOUT:], r.ROLLOUT, stored[-1])
            return not torch.equal(out[9 - r.ROLLOUT], carried[9 - r.ROLLOUT])
    lines = r.rollout_lines(3)
    replay = [t for t in range(r.ROLLOUT, r.STEPS) if moved(t, own=False)]
    own = [t for t in range(r.ROLLOUT, r.STEPS) if moved(t, own=True)]
    assert replay == [6, 7, 8, 9] and own == [9]
    assert lines[2].endswith(f"inputs of steps {replay}") and lines[3].endswith(f"inputs of steps {own}")
