"""The runs behind chapters 0, 1 and 4's new answers (issue 31), their prediction keys, and the answering cells."""
import re
from pathlib import Path

import pytest
import torch

from course_utils.chapters.ch00_accumulation_norms import accumulation_gap, dropout_average_gap
from course_utils.chapters.ch01_workers import child_error_type, run_spawn_script, worker_draws, worker_outcomes
from course_utils.chapters.ch04_eval_pitfalls import bn_collapse, recalibrate_batchnorm, shuffle_effect
from course_utils.chapters.ch06_predictions import prediction_bank
from course_utils.engine.data import spiral_splits
from course_utils.engine.models import MLP

SRC = Path(__file__).resolve().parents[1] / "notebooks" / "src"
ANCHORS = {"00": ["accum-batchnorm"],
           "01": ["workers-main-guard", "workers-hang", "worker-rng-dataset-generator"],
           "02": ["weighted-distributed-sampler", "collate-variable-targets"],
           "04": ["eval-ddp-padding-duplicates", "eval-allreduce-sums", "eval-shuffle", "eval-bn-collapse"]}


def test_accumulation_equals_the_big_batch_only_without_batchnorm_or_dropout():
    for seed in range(5):
        for norm in ("none", "layernorm", "groupnorm"):
            assert accumulation_gap(norm, seed) < 1e-12
        assert accumulation_gap("batchnorm", seed) > 0.1
        assert accumulation_gap("dropout", seed) > 0.1
        assert dropout_average_gap(seed, 50) < accumulation_gap("dropout", seed) / 2


def test_the_unguarded_script_fails_in_its_child_and_the_guarded_one_runs():
    bad, good = run_spawn_script(False), run_spawn_script(True)
    assert bad.printed == ["exit code 1"] and bad.child_error == "RuntimeError"
    assert good.printed == ["child computed 9", "exit code 0"] and good.child_error == ""


def test_the_child_error_is_named_the_same_on_every_python():
    """Python 3.13 colours a traceback when it may (FORCE_COLOR, which a Jupyter kernel's children can inherit);
    the chapter's printed conclusion must not carry the colour codes (found by the Debian 13 check)."""
    message = "\n        An attempt has been made to start a new process before the\n        current process has finished"
    plain = f"Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\nRuntimeError: {message}\n"
    coloured = ("\x1b[1;35mTraceback\x1b[0m (most recent call last):\n  File \x1b[35m\"train.py\"\x1b[0m, line 9\n"
                f"\x1b[1;35mRuntimeError\x1b[0m: \x1b[35m{message}\x1b[0m\n")
    assert child_error_type(plain) == child_error_type(coloured) == "RuntimeError"
    assert child_error_type("") == ""


def test_a_real_dataloader_script_without_the_guard_fails_with_spawn(tmp_path):
    """The claim the chapter makes about DataLoader itself (its cell uses a plain process to stay fast)."""
    import subprocess
    import sys
    body = ("import multiprocessing as mp\nfrom torch.utils.data import DataLoader\n"
            "mp.set_start_method('spawn', force=True)\n{}")
    run = "print([b.tolist() for b in DataLoader(list(range(4)), batch_size=2, num_workers=1)])"
    for guarded in (False, True):
        code = body.format("if __name__ == '__main__':\n    " + run if guarded else run)
        (tmp_path / "train.py").write_text(code)
        done = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
        if guarded:
            assert done.returncode == 0 and done.stdout.strip() == "[[0, 1], [2, 3]]"
        else:
            assert done.returncode != 0 and "exited unexpectedly" in done.stderr.splitlines()[-1]


def test_worker_outcomes_name_what_the_loop_sees():
    outcomes = worker_outcomes(slow_seconds=0.3, timeout=0.05)
    got = {o.case.split(",")[0]: o for o in outcomes}
    default, limited = [o for o in outcomes if o.case.startswith("slow")]
    assert default.error == "" and default.seconds >= 0.3
    assert limited.error == "RuntimeError" and limited.detail.endswith("True")
    assert got["a worker killed"].error == "RuntimeError" and got["a bug in __getitem__"].error == "KeyError"


def test_a_generator_the_dataset_holds_repeats_across_workers_and_epochs_until_reseeded():
    plain = worker_draws(own_generator=True, init_fn=False)
    assert plain.workers_agree and plain.epochs_agree
    unseeded = [worker_draws(own_generator=True, init_fn=False, seed=None) for _ in range(2)]
    assert all(d.workers_agree for d in unseeded)                  # no loader generator: the same (review 01.1)
    assert not worker_draws(own_generator=True, init_fn=True, seed=None).workers_agree   # the reseed still fixes it
    assert not worker_draws(own_generator=False, init_fn=False).workers_agree
    fixed = worker_draws(own_generator=True, init_fn=True)
    assert not fixed.workers_agree and not fixed.epochs_agree
    assert worker_draws(True, True, seed=1).epochs == worker_draws(True, True, seed=1).epochs    # reproducible


def test_shuffling_evaluation_changes_only_what_is_already_wrong():
    torch.manual_seed(0)
    e = shuffle_effect(MLP(), spiral_splits(600, 300).val, batch_size=64, seeds=range(3))
    assert all(acc == e.ordered[1] and abs(loss - e.ordered[0]) < 1e-6 for loss, acc in e.shuffled)
    assert all(abs(m - e.ordered[0]) > 1e-5 for m in e.batch_mean_losses)
    assert e.drop_last_counted == 256


def test_batchnorm_collapses_in_eval_mode_and_recovers_when_its_statistics_are_re_estimated():
    for seed in range(5):
        r = bn_collapse(seed)
        assert r.train_mode_accuracy > 0.7 and r.eval_mode_accuracy < 0.6 and r.recalibrated_accuracy > 0.7
        assert r.gap_before > 0.5 and r.gap_after < 0.05


def test_recalibrate_restores_momentum_and_mode():
    model = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.BatchNorm1d(4)).eval()
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(20, 2) + 5, torch.zeros(20)),
                                       batch_size=5)
    recalibrate_batchnorm(model, data)
    with torch.no_grad():
        pre = model[0](torch.cat([x for x, _ in data]))
    assert not model.training and model[1].momentum == 0.1
    assert torch.allclose(model[1].running_mean, pre.mean(0), atol=1e-5)


@pytest.mark.parametrize("chapter", sorted(ANCHORS))
def test_every_prediction_card_exists_and_every_anchor_tags_a_checked_code_cell(chapter):
    text = next(SRC.glob(f"{chapter}_*.py")).read_text()
    bank = {q.id for q in prediction_bank(int(chapter)).questions}
    shown = set(re.findall(rf'predict\({int(chapter)}, "([\w-]+)"\)', text))
    assert {f"predict-{q}" for q in shown} == bank
    for anchor in ANCHORS[chapter]:
        cells = re.findall(r'# %% tags=\[([^\]]*)\]\n', text)
        tagged = [c for c in cells if f'"answers-{anchor}"' in c]
        assert tagged and all("nbval-ignore-output" not in c for c in tagged), anchor


def test_prediction_keys_are_what_the_runs_measure():
    from course_utils.chapters.ch04_ranks import padding_layout
    key = {q.id: next(o.text for o in q.options if o.correct) for c in (0, 1, 2, 4) for q in prediction_bank(c).questions}
    assert key["predict-ddp-padding"] == str(sum(len(s) for s in padding_layout(100, 8)))
    assert "BatchNorm" in key["predict-accum-batchnorm"] and accumulation_gap("batchnorm", 0) > 0.1
    assert "RuntimeError" in key["predict-collate-boxes"]
    assert "same" in key["predict-dataset-rng"] and worker_draws(True, False, epochs=1).workers_agree
