"""Chapter 7's Lightning and Accelerate runs agree with chapter 0's calculator, and leave the caller as it was."""
import random
import warnings

import numpy as np
import torch

from course_utils.chapters import ch07_accelerate_run as acc
from course_utils.chapters import ch07_libraries as lib
from course_utils.engine.arithmetic import training_arithmetic


def test_lightning_counts_match_the_calculator_over_two_epochs():
    run = lib.run_lightning(n_train=100, n_val=30, batch_size=16, accumulate=3, epochs=2)
    counts = training_arithmetic(100, 16, 2, 3)           # 7 batches a epoch, windows 3 + 3 + 1: 3 updates
    assert (run.train_batches, run.val_batches) == (7, 2)
    assert run.estimated_stepping_batches == run.optimizer_steps == run.global_step == run.scheduler_steps \
        == counts.total_weight_updates == 6
    assert run.train_bar_totals == (7, 7) and run.val_bar_totals == (2, 2)
    assert {"state_dict", "optimizer_states", "lr_schedulers", "loops", "global_step"} <= set(run.checkpoint_keys)
    lines = lib.lightning_lines(run, 100, 30, 16, 3, 2)
    assert "all agree: True" in lines[3] and "7 + 2 = 9" in lines[4]
    # global_step counts updates: each of a window's batches reads the same value (windows 3, 3, 1 per epoch)
    assert run.steps_seen_in_training_step == (0, 0, 0, 1, 1, 1, 2, 3, 3, 3, 4, 4, 4, 5)
    assert run.steps_seen_before_update == tuple(range(6))
    assert "ran 7 times, at global_step 0 (3 times), 2 (once), 4 (3 times); in on_before_optimizer_step it ran 3 " \
        "times" in lib.periodic_task_line(run, every=2)


def test_accelerate_steps_the_scheduler_once_per_update_on_one_process():
    run = acc.run_accelerate(n_train=100, batch_size=16, accumulate=3)
    assert run.processes == 1 and run.micro_batches == 7
    assert run.optimizer_steps == run.scheduler_steps == training_arithmetic(100, 16, 1, 3).updates_per_epoch == 3
    assert {"model.safetensors", "optimizer.bin", "scheduler.bin", "random_states_0.pkl"} <= set(run.files)
    assert run.accelerator_step == 0                      # reset at the end of the loader
    assert acc.run_accelerate(n_train=100, batch_size=16, accumulate=3) == run   # the state is reset between runs
    number, line = acc.scheduler_source_line()
    assert line.startswith("for _ in range(num_processes)") and number > 0
    assert "agree: True" in acc.accelerate_lines(run, 100, 16, 3)[1]


def test_the_runs_leave_warning_filters_and_random_streams_as_they_were():
    filters = list(warnings.filters)
    torch.manual_seed(1), random.seed(1), np.random.seed(1)
    acc.run_accelerate(n_train=40, batch_size=16, accumulate=2)
    lib.run_lightning(n_train=40, n_val=16, batch_size=16, accumulate=2)
    after = (torch.rand(1).item(), random.random(), np.random.rand())
    torch.manual_seed(1), random.seed(1), np.random.seed(1)
    assert after == (torch.rand(1).item(), random.random(), np.random.rand())
    assert warnings.filters == filters


def test_checkpoint_table_reads_presence_from_the_keys():
    lines = lib.checkpoint_lines(["model", "optimizer"], ["state_dict"], ["model.safetensors", "random_states_0.pkl"])
    rows = {line.split("  ")[0]: line for line in lines}
    assert "state_dict" in rows["weights"] and rows["optimizer"].split()[-1] == "-"
    assert rows["random streams"].split()[-1] == "random_states_0.pkl"
    assert len(lines) == 1 + len(lib.CHECKPOINT_PARTS)


def test_lightning_validates_by_batches_and_patience_counts_validation_runs():
    """The oracle is Lightning itself: each validation run recorded from inside the module."""
    runs = lib.lightning_validation_runs()
    fraction, count, across, early = runs.values()
    assert fraction == [(1, 10, 10), (1, 20, 20), (2, 30, 30), (2, 40, 40)]
    assert [batches for _, batches, _ in count] == [5, 10, 15, 20, 25, 30, 35, 40]     # batches, not updates
    assert [epoch for epoch, _, _ in count] == [1] * 4 + [2] * 4            # counted again within each epoch
    assert [step for _, _, step in count] == [batches // 4 for _, batches, _ in count]   # updates made so far
    assert [batches for _, batches, _ in across] == [30, 60]                # a count that runs over epochs
    assert [epoch for epoch, _, _ in early] == [2, 4, 6]                     # stopped 2 runs after the best


def test_lightnings_epoch_value_is_the_batch_size_weighted_mean_and_batch_size_1_makes_it_the_plain_one():
    from course_utils.chapters.ch07_libraries import lightning_epoch_lines, lightning_epoch_mean
    run = lightning_epoch_mean(n_val=70, batch_size=16, seed=2)
    assert run["sizes"] == [16, 16, 16, 16, 6]
    assert abs(run[None] - run["weighted"]) < 1e-6 and abs(run[1] - run["plain"]) < 1e-6
    assert abs(run["plain"] - run["weighted"]) > 1e-4                      # the data makes the two differ
    lines = lightning_epoch_lines(run)
    assert lines[1].endswith("True") and lines[2].endswith("True")
