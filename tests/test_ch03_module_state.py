"""Chapter 3's training-state, autograd-mode, clipping and optimizer demonstrations: each result checked."""
import pytest

from course_utils.chapters.ch03_clip_optim import (MARGIN, clipping_rules, optimizer_gallery, optimizer_knobs,
                                                   scaler_knobs)
from course_utils.chapters.ch03_module_state import autograd_modes, checkpoint_rules, freezing_rules, naming_rules


def test_checkpoint_rules():
    r = checkpoint_rules()
    assert r["persistent=False: 'mask' in state_dict"] is False and r["persistent=True: 'mask' in state_dict"]
    assert r["after loading, the mask is the saved 0.5"] is False
    assert r["strict=False: missing_keys"] == ["lin.bias"] and r["strict=False: unexpected_keys"] == ["extra.weight"]
    assert r["strict=False, a weight of another shape: raises"] == "RuntimeError (size mismatch: True)"
    assert r["assign=True: parameters the optimizer holds"] == "0 of 2"
    assert r["assign=True: the model's weights moved"] is False and r["assign=False: the model's weights moved"]


def test_freezing_and_naming():
    f = freezing_rules()
    assert f["frozen layer: .grad stays None"] and f["frozen layer: AdamW(weight_decay=0.1) left it unchanged"]
    assert f["SGD(weight_decay=0.5): a grad of zero shrinks the weight"]
    assert not f["SGD(weight_decay=0.5): a grad of None shrinks the weight"]
    assert f["module.requires_grad = False (no underscore): its weight still gets a .grad"]
    assert f["last layer frozen: the first layer's .grad filled (backward passes through the frozen layer)"]
    assert f["last layer frozen: its own .grad stays None"]
    assert f["last layer run under no_grad instead: its output still leads back to the first layer"] is False
    n = naming_rules()
    assert n["tied: len(list(parameters()))"] == 1
    assert n["tied: named_parameters(remove_duplicate=False)"] == ["embed.weight", "out.weight"]
    assert n["state_dict(keep_vars=True) value type"] == "Parameter" and n["state_dict() value type"] == "Tensor"
    assert n["train(mode=False) gives eval()'s flags"] and n["state_dict(destination=d) returns d itself"]


def test_autograd_modes():
    r = autograd_modes()
    assert r["inference_mode result multiplied by w (mul must save it for backward): at the multiply"] == "RuntimeError"
    assert r["inference_mode result added to w, then backward (add saves nothing)"] == "nothing"
    assert r["no_grad result used in a graph later"] == "nothing"
    assert r["detect_anomaly(check_nan=True)"] == "RuntimeError, names SqrtBackward0: True"
    assert r["set_detect_anomaly(True, check_nan=True)"] == "RuntimeError, names SqrtBackward0: True"
    assert r["backward(inputs=[a]): a.grad, b.grad"] == (3.0, None)
    assert r["x³ at 2, create_graph=True: first, second derivative"] == (12.0, 12.0)


def test_clipping_rules():
    r = clipping_rules()
    assert r["norm_type=2.0: norm before, after"] == (13.0, 1.0)
    assert r["norm_type=1.0: norm before, after"] == (19.0, 1.0)
    assert r["norm_type=inf: norm before, after"] == (12.0, 1.0)
    assert r["NaN grad, error_if_nonfinite=True"] == "RuntimeError"
    assert r["max_norm=0.0: grads after clipping"] == [[0.0, 0.0], [0.0]]
    assert r["max_norm=-1.0: grads after clipping"] == [[-0.2308, 0.3077], [-0.9231]]   # -1/13 of [3, -4], [12]
    assert r["NaN grad, default: every grad NaN after clipping"]
    assert r["foreach=True = foreach=False, bit for bit"]
    assert r["get_total_norm + clip_grads_with_norm_ = clip_grad_norm_, bit for bit"]


def test_optimizer_gallery_margins_hold():
    g = optimizer_gallery()
    assert all(clear for _, clear in g.values()), (MARGIN, g)
    assert g["Adadelta"][0] == 0 and g["LBFGS"][0] == 5


def test_optimizer_knobs_and_scaler():
    k = optimizer_knobs()
    assert k["after add_param_group"] == [0.1, 0.01, 0.001]
    assert k["3 steps, pre hook removed before the third: pre, post calls"] == (2, 3)
    assert k["Adam(maximize=True): the loss over 5 steps"] == "rose every step"
    assert k["Adam(maximize=False): the loss over 5 steps"] == "fell every step"
    assert k["SparseAdam on a dense Embedding's grad"] == "RuntimeError"
    assert k["Muon on all of a Linear's parameters (bias 1-D)"] == "ValueError"
    assert k["Muon on the weight matrix only"] == "builds"
    assert k["LBFGS, the forward outside the closure"] == (
        "RuntimeError: Trying to backward through the graph a second time")          # LBFGS calls it again
    assert k["LBFGS, the forward inside the closure"].endswith(": True")
    s = scaler_knobs()
    assert s["scale after the inf step, then after 3 clean steps"] == [512.0, 512.0, 512.0, 1024.0]
    assert s["update(new_scale=8.0)"] == 8.0
    assert s["clip to 1 after scaler.unscale_(): the step's norm"] == 1.0
    assert s["clip to 1 before scaler.unscale_(): the step's norm"] == round(1 / 1024, 6)   # 1024 times too small


def test_a_helper_writing_one_lr_erases_the_group_ratio_and_scaling_keeps_it():
    from course_utils.chapters.ch03_param_groups import group_lr_helpers
    writes, scales, scheduler, one_cycle, one_cycle_per_group, cyclic = group_lr_helpers().values()
    assert writes == [0.01, 0.01] and scales == scheduler == [0.001, 0.01]
    assert one_cycle[0] == one_cycle[1] and cyclic[0] == cyclic[1]          # one rate for every group
    assert one_cycle_per_group[1] == one_cycle[1] and one_cycle_per_group[0] == pytest.approx(one_cycle[1] / 10,
                                                                                               abs=1e-6)


def test_only_sgd_and_sparse_adam_leave_an_unused_embedding_row_alone():
    from course_utils.chapters.ch03_clip_optim import unused_rows
    assert list(unused_rows().values()) == [False, True, True, False]


def test_sam_under_a_grad_scaler_matches_the_unscaled_update_and_a_second_unscale_is_refused():
    from course_utils.chapters.ch03_clip_optim import sam_with_scaler
    same, twice = sam_with_scaler(seed=1).values()
    assert same is True and twice.startswith("RuntimeError: unscale_() has already been called")


def test_a_train_mode_teacher_gives_noisy_targets_and_drifts_and_eval_does_not_stop_its_graph():
    from course_utils.chapters.ch03_module_state import teacher_lines
    train, evaluated, open_graph, guarded = teacher_lines(steps=3)
    assert train.endswith("same soft targets: False; its BatchNorm running mean moved during 3 distillation steps: True")
    assert evaluated.endswith("same soft targets: True; its BatchNorm running mean moved during 3 distillation steps: False")
    assert open_graph.endswith("teacher's .grad: True") and guarded.endswith("teacher's .grad: False")
