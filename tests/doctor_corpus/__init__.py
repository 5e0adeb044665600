"""The loop doctor's corpus (chapters 5, 9): learner-style loops, each with the findings it must get.

``CASES`` pairs a setup, an optional script step before the loop (``prepare``) and a loop with the set
of registry names the doctor must report, no more and no fewer. ``run_case`` runs one with or without
the doctor; ``scorecard`` gives precision and recall per finding over the whole corpus
(``python -m tests.doctor_corpus`` prints it).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import torch

from course_utils.doctor import LoopDoctor, Report
from tests.doctor_corpus import buggy, correct
from tests.doctor_corpus.correct import SCHEDULES
from tests.doctor_corpus.setups import Setup, make_setup, regression_setup


@dataclass(frozen=True)
class Case:
    """One loop of the corpus and what the doctor must say about it."""

    name: str
    loop: Callable[[Setup], None]
    expected: frozenset[str] = frozenset()
    setup: dict = field(default_factory=dict)
    prepare: Callable[[Setup], Setup] | None = None
    give: tuple[str, ...] = ("scheduler", "train", "val")    # what the learner hands to the doctor
    regression: bool = False


def _case(name, loop, *expected, prepare=None, give=("scheduler", "train", "val"), regression=False, **setup):
    return Case(name, loop, frozenset(expected), setup, prepare, give, regression)


ACCUM = dict(n_train=88, batch_size=8)          # 11 micro-batches an epoch: windows of 4, 4, 3
CORRECT = [
    _case("seed_template", correct.seed_template, scheduler=SCHEDULES["step100"], dropout=0.2),
    _case("seed_clip_cosine", correct.seed_clip_cosine, scheduler=SCHEDULES["cosine_epochs"], optimizer="adamw",
          epochs=3, dropout=0.1),
    _case("seed_onecycle", correct.seed_onecycle, scheduler=SCHEDULES["onecycle"], optimizer="momentum"),
    _case("seed_plateau", correct.seed_plateau, scheduler=SCHEDULES["plateau"], optimizer="adam", epochs=3),
    _case("accumulation_with_flush", correct.accumulation_with_flush, epochs=3, **ACCUM),
    _case("accumulation_weighted", correct.accumulation_weighted, epochs=2, **ACCUM),
    _case("amp_cpu_scaler_accumulation", correct.amp_cpu_scaler_accumulation, scheduler=SCHEDULES["cosine_epochs"],
          optimizer="adam", **ACCUM),
    _case("seed_amp_inference", correct.seed_amp_inference, optimizer="adam", batchnorm=True),
    _case("seed_zero_after_forward", correct.seed_zero_after_forward, optimizer="adam", dropout=0.2),
    _case("while_mid_epoch_eval", correct.while_mid_epoch_eval, batchnorm=True, dropout=0.1),
    _case("warmup_zero_after_step", correct.warmup_zero_after_step, scheduler=SCHEDULES["warmup"], batchnorm=True,
          dropout=0.2, optimizer="momentum"),
    _case("freeze_then_build", correct.freeze_then_build, prepare=correct.prepare_frozen_body),
    _case("new_head_then_build", buggy.plain_training, prepare=correct.prepare_new_head_first),
    _case("freeze_after_build_set_to_none", correct.freeze_after_build_set_to_none, optimizer="adam", epochs=3),
    _case("manual_zero_regression", correct.manual_zero_regression, regression=True),
    _case("accumulation_clip_per_update", correct.accumulation_clip_per_update,
          scheduler=lambda opt, n, e: torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=-(-n // 3) * e), **ACCUM),
    _case("per_update_cosine", correct.per_update_cosine, scheduler=SCHEDULES["cosine_updates"]),
    _case("nothing_given_but_model", correct.seed_zero_after_forward, give=(), dropout=0.2),
    # written after the doctor, to probe for false alarms
    _case("amp_fp16_skipped_steps", correct.amp_fp16_skipped_steps,
          scheduler=lambda opt, n, e: torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=n * e)),
    _case("two_views_label_smoothing", correct.two_views_label_smoothing, dropout=0.1, optimizer="adam"),
    _case("regularised_accumulation", correct.regularised_accumulation, **ACCUM),
    _case("last_loss_and_train_accuracy", correct.last_loss_and_train_accuracy, batchnorm=True),
    _case("pair_lists_log_softmax_nll", buggy.plain_training, prepare=correct.prepare_pair_lists),
]

BUGGY = [
    _case("no_zero_grad", buggy.no_zero_grad, "missing_zero_grad"),
    _case("zero_grad_once_per_epoch", buggy.zero_grad_once_per_epoch, "missing_zero_grad", optimizer="adam"),
    _case("zero_between_backward_and_step", buggy.zero_between_backward_and_step, "zero_grad_after_backward"),
    _case("model_zero_before_clip", buggy.model_zero_before_clip, "zero_grad_after_backward", optimizer="momentum"),
    _case("validate_without_eval", buggy.validate_without_eval, "eval_in_train_mode", dropout=0.3),
    _case("mid_epoch_inference_in_train_mode", buggy.mid_epoch_inference_in_train_mode, "eval_in_train_mode",
          batchnorm=True),
    _case("eval_without_no_grad", buggy.eval_without_no_grad, "missing_no_grad", dropout=0.2),
    _case("accuracy_helper_with_graph", buggy.accuracy_helper_with_graph, "missing_no_grad", give=("train",),
          batchnorm=True),
    _case("append_loss_tensor", buggy.append_loss_tensor, "graph_attached_logging"),
    _case("running_total_tensor", buggy.running_total_tensor, "graph_attached_logging", optimizer="adam"),
    _case("train_called_once", buggy.train_called_once, "missing_train_switch", dropout=0.3),
    _case("mid_epoch_eval_no_switch", buggy.mid_epoch_eval_no_switch, "missing_train_switch", batchnorm=True),
    _case("clip_right_after_zero", buggy.clip_right_after_zero, "clip_before_backward"),
    _case("clip_value_before_backward", buggy.clip_value_before_backward, "clip_before_backward",
          prepare=buggy.prepare_gradient_smoke_test),
    _case("clip_after_step", buggy.clip_after_step, "clip_after_step", optimizer="adam"),
    _case("clip_after_step_then_schedule", buggy.clip_after_step_then_schedule, "clip_after_step",
          scheduler=SCHEDULES["onecycle"], optimizer="momentum"),
    _case("cosine_epochs_every_batch", buggy.epoch_schedule_every_batch, "epoch_schedule_per_batch",
          scheduler=SCHEDULES["cosine_epochs"], epochs=3),
    _case("steplr_every_batch", buggy.epoch_schedule_every_batch, "epoch_schedule_per_batch",
          scheduler=SCHEDULES["step2"], optimizer="adam"),
    _case("multistep_every_batch", buggy.epoch_schedule_every_batch, "epoch_schedule_per_batch",
          scheduler=SCHEDULES["multistep"], epochs=3),
    _case("scheduler_before_step", buggy.scheduler_before_step, "scheduler_before_optimizer",
          scheduler=SCHEDULES["warmup"]),
    _case("scheduler_at_epoch_start", buggy.scheduler_at_epoch_start, "scheduler_before_optimizer",
          scheduler=SCHEDULES["step2"], epochs=3),
    _case("accumulation_undivided", buggy.accumulation_undivided, "unscaled_accumulation", **ACCUM),
    # added with issue 33: the epoch's short last window flushed with every loss still divided by K
    _case("flush_divided_by_k", partial(correct.accumulation_with_flush, by_k=True), "unscaled_accumulation",
          epochs=3, **ACCUM),
    _case("amp_cpu_scaler_flush_divided_by_k", partial(correct.amp_cpu_scaler_accumulation, by_k=True),
          "unscaled_accumulation", scheduler=SCHEDULES["cosine_epochs"], optimizer="adam", **ACCUM),
    _case("regularised_flush_divided_by_k", partial(correct.regularised_accumulation, by_k=True),
          "unscaled_accumulation", **ACCUM),
    _case("amp_scaler_accumulation_undivided", buggy.amp_scaler_accumulation_undivided, "unscaled_accumulation",
          optimizer="adam", **ACCUM),
    _case("seed_accumulation_no_flush", buggy.seed_accumulation_no_flush, "accumulation_without_flush", epochs=3,
          **ACCUM),
    _case("accumulation_zero_at_window_start", buggy.accumulation_zero_at_window_start,
          "accumulation_without_flush", epochs=3, **ACCUM),
    _case("head_after_optimizer", buggy.plain_training, "head_after_optimizer",
          prepare=buggy.prepare_head_after_optimizer, optimizer="adam"),
    _case("wrapped_after_optimizer", buggy.plain_training, "head_after_optimizer",
          prepare=buggy.prepare_wrapped_after_optimizer),
    _case("freeze_mid_training_zero_fill", buggy.freeze_mid_training_zero_fill, "freeze_after_optimizer",
          optimizer="momentum", epochs=3),
    _case("freeze_after_build_zero_fill", buggy.freeze_zero_fill, "freeze_after_optimizer",
          prepare=buggy.prepare_freeze_after_optimizer, optimizer="adam"),
    _case("leaky_spiral_split", buggy.plain_training, "data_leakage", leak=0.25),
    _case("val_concat_train_slice", buggy.plain_training, "data_leakage", prepare=buggy.prepare_val_from_train),
    _case("softmax_head_module", buggy.plain_training, "softmax_before_cross_entropy", softmax_head=True),
    _case("softmax_in_loop_amp", buggy.softmax_in_loop_amp, "softmax_before_cross_entropy", optimizer="adam"),
    _case("no_eval_no_grad_log_tensor", buggy.no_eval_no_grad_log_tensor, "eval_in_train_mode", "missing_no_grad",
          "graph_attached_logging", dropout=0.2),
    # added with issue 23
    _case("validate_mean_of_batch_means", buggy.validate_mean_of_batch_means, "mean_of_batch_means", n_val=50),
    _case("accuracy_mean_of_batch_accuracies", buggy.accuracy_mean_of_batch_accuracies, "mean_of_batch_means",
          n_val=50, dropout=0.1),
    _case("onecycle_per_epoch", buggy.per_update_schedule_per_epoch, "update_schedule_per_epoch",
          scheduler=SCHEDULES["onecycle"], optimizer="momentum", epochs=3),
    _case("cyclic_per_epoch", buggy.per_update_schedule_per_epoch, "update_schedule_per_epoch",
          scheduler=lambda opt, n, e: torch.optim.lr_scheduler.CyclicLR(opt, 0.01, 0.1, step_size_up=n), epochs=3),
]
CASES = CORRECT + BUGGY


def build_case(case: Case) -> Setup:
    """The case's setup, after the script's steps before the loop."""
    setup = regression_setup() if case.regression else make_setup(**case.setup)
    return case.prepare(setup) if case.prepare else setup


def run_case(case: Case, doctor: bool = True) -> tuple[Setup, Report | None]:
    """Run the case's loop from a fresh setup, inside a LoopDoctor or bare; returns the setup and the report."""
    setup = build_case(case)
    if not doctor:
        case.loop(setup)
        return setup, None
    given = {"scheduler": setup.scheduler if "scheduler" in case.give else None,
             "train_data": setup.train_loader if "train" in case.give else None,
             "val_data": setup.val_loader if "val" in case.give else None}
    with LoopDoctor(setup.model, setup.optimizer, **given) as watching:
        case.loop(setup)
    return setup, watching.report()


def scorecard(reports: dict[str, Report] | None = None) -> list[tuple[str, int, int, int, float, float]]:
    """(finding, true positives, false positives, false negatives, precision, recall) over the corpus."""
    reports = reports or {case.name: run_case(case)[1] for case in CASES}
    names = sorted({name for case in CASES for name in case.expected} |
                   {name for report in reports.values() for name in report.names})
    rows = []
    for name in names:
        tp = sum(name in case.expected and name in reports[case.name].names for case in CASES)
        fp = sum(name not in case.expected and name in reports[case.name].names for case in CASES)
        fn = sum(name in case.expected and name not in reports[case.name].names for case in CASES)
        rows.append((name, tp, fp, fn, tp / (tp + fp) if tp + fp else float("nan"), tp / (tp + fn)))
    return rows
