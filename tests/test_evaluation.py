"""Chapter 4's engines: dropout, BatchNorm, inference_mode restrictions, graph memory, budget, averaging."""
import pytest
import torch

from course_utils.chapters.ch04_evaluation import (average_losses, batchnorm_demo, dropout_demo, eval_graph_bytes,
                                     inference_mode_errors, memory_budget, memory_budget_mb, time_evaluation,
                                     tiny_batch_outputs)
from course_utils.engine.models import MLP


def test_dropout_scales_survivors_by_two_and_eval_is_identity():
    d = dropout_demo()
    assert d.train_passes[0] != d.train_passes[1]
    for out in d.train_passes:
        for x, y in zip(d.inputs, out):
            assert y == 0 or y == pytest.approx(2 * x)
    assert all(p == d.inputs for p in d.eval_passes)


def test_batchnorm_batch_vs_running():
    bn = batchnorm_demo()
    assert bn.batch_mean == 5.0 and bn.batch_var == 5.0
    assert bn.eval_out == (-0.5, 0.5, 1.5, 2.5)
    assert bn.train_out[0] == pytest.approx(-3 / 5 ** 0.5, abs=1e-3)
    assert tiny_batch_outputs((1.0, 5.0)) == (-1.0, 1.0)
    message = tiny_batch_outputs((3.0,))
    with pytest.raises(ValueError) as torch_says:                         # torch's own words, not a paraphrase
        torch.nn.BatchNorm1d(1).train()(torch.tensor([[3.0]]))
    assert message == f"ValueError: {torch_says.value}" and "more than 1 value per channel" in message


def test_one_example_is_refused_only_with_one_value_per_channel():
    from course_utils.chapters.ch04_evaluation import one_example_in_train_mode
    found = {shape: (per_channel, what) for shape, per_channel, what in one_example_in_train_mode()}
    assert found[(1, 3)][0] == found[(1, 3, 1, 1)][0] == 1 and found[(1, 3, 4, 4)] == (16, "trains")
    assert all(what.startswith("ValueError: Expected more than 1 value per channel")
               for shape, (n, what) in found.items() if n == 1)


def test_inference_tensors_have_the_three_restrictions_and_only_a_clone_made_outside_is_normal():
    r = inference_mode_errors()
    assert r["no_grad/save_for_backward"] == "ok" and r["no_grad/inplace_outside"] == "ok"
    assert r["no_grad/requires_grad_ (nn.Parameter)"] == "ok"
    assert "cannot be saved for backward" in r["inference_mode/save_for_backward"]
    assert "Inplace update to inference tensor outside InferenceMode" in r["inference_mode/inplace_outside"]
    assert "Setting requires_grad=True on inference tensor" in r["inference_mode/requires_grad_ (nn.Parameter)"]
    assert (r["clone() inside the block: inference"], r["clone() after it: inference"]) == ("True", "False")


def test_eval_graph_memory_is_zero_under_no_grad():
    torch.manual_seed(0)
    model, x, y = MLP(), torch.randn(32, 2), torch.randint(0, 3, (32,))
    assert eval_graph_bytes(model, x, y, no_grad=True) == 0
    assert eval_graph_bytes(model, x, y, no_grad=False) == 17284   # the hand count of test_memory (depth 2)


def test_timing_returns_positive_seconds_and_rejects_bad_mode():
    model = MLP()
    assert time_evaluation(model, torch.randn(8, 2), "no_grad", repeats=3) > 0
    with pytest.raises(ValueError):
        time_evaluation(model, torch.randn(8, 2), "fast")


def test_budget_figures():
    b = memory_budget(100_000_000)
    assert (b.weights, b.grads, b.optimizer_state, b.total) == (400e6, 400e6, 800e6, 1600e6)
    assert memory_budget_mb(1e8)["total"] == 1600
    assert memory_budget(7e9, 4).weights == 28e9 and memory_budget(7e9, 2).weights == 14e9
    assert memory_budget(7e9, 4).total == 112e9
    assert memory_budget(7e9, 2, state_bytes=4, master_weights=True).total == 112e9
    assert memory_budget(1e6, 4, "sgd").optimizer_state == 0
    assert memory_budget(1e6, 4, "momentum").optimizer_state == 4e6
    for bad in [dict(params=0), dict(params=10, optimizer="lion"), dict(params=10, dtype_bytes=3)]:
        with pytest.raises(ValueError):
            memory_budget(**bad)


def test_averaging():
    a = average_losses([1.0, 1.0, 4.0], [4, 4, 1])
    assert a.per_example == pytest.approx(12 / 9) and a.per_batch == 2.0
    assert average_losses([2.0, 2.0], [5, 1]).per_example == average_losses([2.0, 2.0], [5, 1]).per_batch
    with pytest.raises(ValueError):
        average_losses([1.0], [1, 2])


def test_eval_graph_bytes_restores_the_callers_mode():
    import torch
    from course_utils.chapters.ch04_evaluation import eval_graph_bytes
    from course_utils.engine.models import MLP
    model = MLP(dropout=0.5).train()
    x, y = torch.randn(8, 2), torch.randint(0, 3, (8,))
    eval_graph_bytes(model, x, y, no_grad=False)
    assert model.training
    model.eval()
    eval_graph_bytes(model, x, y, no_grad=True)
    assert not model.training


def test_modules_reading_training_include_the_families_and_exclude_linear():
    from course_utils.chapters.ch04_evaluation import modules_reading_training
    found = set(modules_reading_training())
    assert {"Dropout", "BatchNorm1d", "SyncBatchNorm", "LSTM", "MultiheadAttention", "RReLU",
            "TransformerEncoderLayer", "InstanceNorm2d"} <= found   # InstanceNorm reads it in a helper forward calls
    assert not {"Linear", "ReLU", "LayerNorm"} & found


def test_batchnorm_running_statistics_move_in_train_mode_only():
    from course_utils.chapters.ch04_evaluation import batchnorm_running_update
    rs = batchnorm_running_update((2.0, 4.0, 6.0, 8.0))
    assert rs.after_train == (round(0.9 * 0 + 0.1 * 5.0, 6), round(0.9 * 1 + 0.1 * rs.batch_var_unbiased, 6))
    assert rs.after_eval == rs.after_train


def test_train_eval_view_numbers_passes_and_shows_a_mode_change_at_once():
    from course_utils.widgets.train_eval_view import TrainEvalView
    view = TrainEvalView()
    for _ in range(10):
        view.forward()
    assert "pass 10." in view.history_html.value and "pass 3." in view.history_html.value
    assert "pass 2." not in view.history_html.value
    view.mode.value = "eval"
    assert "mode is now <b>eval</b>" in view.mask_html.value


def test_converged_running_statistics_still_scale_eval_outputs_by_the_bessel_factor():
    import math

    from course_utils.chapters.ch04_bn_gap import converged_gap

    for batch in ((0.0, 1.0), (2.0, 4.0, 6.0, 8.0), tuple(float(v) for v in range(8))):
        gap = converged_gap(batch=batch, passes=200)
        n = len(batch)
        assert gap["running"][1] == pytest.approx(gap["unbiased"], rel=1e-4)        # converged, to n - 1
        for train, evaluated in zip(gap["train"], gap["eval"]):
            assert evaluated == pytest.approx(train * math.sqrt((n - 1) / n), abs=2e-4)


def test_on_fresh_batches_the_unbiased_buffers_keep_the_scale_and_the_gap_shrinks():
    from course_utils.chapters.ch04_bn_gap import varying_batches_gap

    rows = varying_batches_gap(sizes=(2, 8, 32), warm=500, fresh=300)
    assert all(abs(row["rms_train"] - row["rms_eval"]) < 0.08 for row in rows)
    assert rows[0]["gap_biased"] > rows[0]["gap"] + 0.1                    # the biased variance would widen it
    assert rows[0]["gap"] > rows[1]["gap"] > rows[2]["gap"]
