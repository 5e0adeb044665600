"""Chapter 7's library defaults: each Lightning and Accelerate probe against a count made without the library."""
import math

import pytest
import torch

from course_utils.chapters import ch07_library_defaults as lib


@pytest.fixture(scope="module")
def lightning():
    return lib.lightning_defaults(epochs=2)


@pytest.fixture(scope="module")
def accelerate():
    return lib.accelerate_resume(epochs_done=2, epochs=5)


def test_a_listed_scheduler_steps_per_epoch_and_a_step_interval_per_batch(lightning):
    batches = len(lib._data())                                   # the loader's own count
    assert lightning["batches"] == batches == 10
    assert lightning["scheduler_steps_alone"] == 2
    assert lightning["scheduler_steps_step"] == 2 * batches


def test_the_refusals_are_the_libraries_own(lightning):
    assert lightning["error_plateau"].startswith("MisconfigurationException: ") and "monitor" in lightning[
        "error_plateau"]
    assert "train_loss which is not available" in lightning["error_plateau_unlogged"]
    assert "['val_metric']" in lightning["error_plateau_unlogged"]          # the metrics that exist are named
    assert lightning["error_two"].startswith("RuntimeError: ") and "manual optimization" in lightning["error_two"]


def test_a_skipped_batch_moves_the_counters_but_not_adam(lightning):
    skip = lightning["skip"]
    assert skip["adam_steps"] == [lightning["batches"] - 1]                  # one state per parameter, all at 9
    assert skip["global_step"] == skip["scheduler_steps"] == lightning["batches"]


def test_a_frozen_norm_stays_frozen_and_the_sanity_check_runs_first(lightning):
    assert lightning["frozen_norm_modes"] == [False]
    assert "eval mode" in lightning["eval_mode_warning"]
    assert lightning["validation_batches"] == 3                # more than the sanity check's 2: they are told apart
    assert lightning["validation_calls"] == 2 + lightning["epochs"] * lightning["validation_batches"]


def test_a_checkpoint_resume_is_exact_and_a_weights_only_one_is_not(lightning):
    assert lightning["resumed_same"] is True and lightning["resumed_at"] == (4, 40)
    assert lightning["reloaded_same"] is False and lightning["reloaded_gap"] > 1e-3
    assert lightning["reloaded_at"] == (2, 20)
    assert lightning["shuffled_same"] is False                # no random stream in the checkpoint
    assert lightning["shuffled_restored_same"] is True        # the stream put back: exact again
    whole, resumed, reloaded = lightning["first_rates"]
    assert whole == resumed == pytest.approx(0.01 * 0.5 ** 20) and reloaded == 0.01     # StepLR halves per update


def test_last_ckpt_holds_the_best_epoch_and_memory_the_last(lightning):
    metric = lightning["metric"]
    best_epoch = metric.index(min(metric))
    assert lightning["best_file"].startswith(f"epoch={best_epoch}-")
    assert lightning["last_epoch"] == best_epoch != len(metric) - 1
    assert lightning["in_memory_epoch"] == len(metric) - 1 and lightning["in_memory_is_best"] is False
    assert lightning["latest_epoch"] == len(metric) - 1
    lines = lib.lightning_default_lines(lightning)
    assert any("last.ckpt holds epoch 1" in line for line in lines)


def test_accelerate_restores_the_schedule_but_not_the_epoch(accelerate):
    batches, total = accelerate["batches"], 5 * accelerate["batches"]
    assert accelerate["total"] == total
    assert accelerate["restored_schedule_steps"] == accelerate["restored_adam_steps"] == 2 * batches
    assert accelerate["updates_after"] == total                      # range(5) again: 7 epochs in all
    assert accelerate["final_schedule_steps"] == total
    oracle = torch.optim.lr_scheduler.OneCycleLR(torch.optim.Adam([torch.zeros(1, requires_grad=True)], lr=0.01),
                                                 max_lr=0.01, total_steps=total)
    with pytest.warns(UserWarning):                                  # no optimizer.step(): torch says so
        for _ in range(total):                                       # the most steps torch allows
            oracle.step()
    assert accelerate["final_lr"] == pytest.approx(oracle.get_last_lr()[0])
    designed = torch.optim.lr_scheduler.OneCycleLR(torch.optim.Adam([torch.zeros(1, requires_grad=True)], lr=0.01),
                                                   max_lr=0.01, total_steps=total)
    with pytest.warns(UserWarning):
        for _ in range(total - 1):
            designed.step()
    assert accelerate["designed_final_lr"] == pytest.approx(designed.get_last_lr()[0]) == pytest.approx(0.01 / 25 / 1e4)
    extra = total // 5                                         # the cosine's closed form, past T_max
    assert accelerate["cosine"][0] == pytest.approx(0.0, abs=1e-12)
    assert accelerate["cosine"][1] == pytest.approx(0.01 * (1 + math.cos(math.pi * (total + extra) / total)) / 2)
    assert accelerate["torch_alone"] == f"ValueError: Tried to step {total + 1} times. The specified number of " \
                                        f"total steps is {total}"
    lines = lib.accelerate_resume_lines(accelerate)
    assert f"ran {total} more updates ({total + 2 * batches} in all)" in lines[1]


def test_with_one_batch_per_epoch_the_training_loss_is_the_last_epochs_validation_loss():
    lines = lib.overfit_lag_lines(epochs=4)
    train = [float(v) for v in lines[0].split("train_loss ")[1].split(", ")]
    val = [float(v) for v in lines[1].split("val_loss ")[1].split(", ")]
    assert train[1:] == val[:-1] and train[0] > val[0] > val[-1]
    assert "bit for bit: 3 of 3" in lines[2]
