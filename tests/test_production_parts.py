"""Chapter 7's components, each against an oracle: Lightning's early-stopping rule on crafted sequences,
the accumulation window against one big batch and chapter 0's counts, TensorBoard read back with its own
reader, the NaN guard, clipping, bf16, the command line. CUDA paths skip without a GPU."""
from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import DistributedSampler

from course_utils.engine.arithmetic import training_arithmetic
from course_utils.engine.data import spiral_splits
from course_utils.engine.models import MLP
from course_utils.infra.notebook import seed_everything
from course_utils.engine.session import TrainConfig
from course_utils.production import CheckpointError, EarlyStopping, FitConfig, fit, load_checkpoint
from course_utils.production import checkpoint as ckpt
from course_utils.production.cli import build_parser, main
from tests import killed_runs

ROOT = Path(__file__).resolve().parents[1]
# On the CPU wherever a GPU is present too: these tests compare with CPU oracles bit for bit and fork children that
# train (a forked child cannot use CUDA once its parent has); the GPU's own tests below name device="cuda".
TINY = dict(n_val=30, hidden=8, threads=1, progress=False, tensorboard=False, device="cpu")
NEEDS_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none on this machine)")


def quiet(config: FitConfig):
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        result = fit(config)
    return result, printed.getvalue()


# --- early stopping: Lightning's semantics ------------------------------------------------------

def stop_check(values, **options) -> int:
    """The 1-based validation check at which EarlyStopping says stop (0: never)."""
    stopper = EarlyStopping(**options)
    for value in values:
        stopper.update(value)
        if stopper.should_stop:
            return stopper.checks
    return 0


@pytest.mark.parametrize("values, options, expected", [
    # equal is not better: improvement must be strict
    ([1.0, 0.9, 0.9, 0.95], dict(patience=2), 4),
    # beyond min_delta: 0.95 is not < 1.0 - 0.1, 0.89 is; patience counts checks since the last improvement
    ([1.0, 0.95, 0.89, 0.85, 0.84], dict(patience=2, min_delta=0.1), 5),
    ([1.0, 0.95, 0.89, 0.85], dict(patience=3, min_delta=0.1), 0),
    # a negative min_delta means the same as a positive one (Lightning takes its absolute value)
    ([1.0, 0.95, 0.89, 0.85, 0.84], dict(patience=2, min_delta=-0.1), 5),
    # mode max: higher is better
    ([0.5, 0.6, 0.6, 0.59], dict(patience=2, mode="max"), 4),
    ([0.5, 0.6, 0.7, 0.8], dict(patience=1, mode="max"), 0),
    # a non-finite value stops at once, whatever the patience
    ([1.0, 0.9, float("nan")], dict(patience=100), 3),
    ([float("inf")], dict(patience=100), 1),
    ([0.5, float("-inf")], dict(patience=100, mode="max"), 2),
    # ... unless check_finite is off: then NaN is just "not an improvement"
    ([1.0, float("nan"), float("nan")], dict(patience=2, check_finite=False), 3),
    # patience 0: the first check without improvement stops
    ([1.0, 1.0], dict(patience=0), 2),
    # the first finite value always improves on the starting +inf
    ([1e30], dict(patience=0), 0),
])
def test_early_stopping_follows_lightning(values, options, expected):
    assert stop_check(values, **options) == expected


def test_early_stopping_state_round_trips_mid_sequence():
    values = [1.0, 0.8, 0.81, 0.79, 0.80, 0.80, 0.78, 0.9, 0.9]
    whole = stop_check(values, patience=2, min_delta=0.005)
    first = EarlyStopping(patience=2, min_delta=0.005)
    for value in values[:4]:
        first.update(value)
    second = EarlyStopping(patience=2, min_delta=0.005)
    second.load_state_dict(first.state_dict())
    for value in values[4:]:
        second.update(value)
        if second.should_stop:
            break
    assert whole and second.stopped_check == whole


def test_early_stopping_rejects_bad_arguments():
    for options, name in [(dict(patience=-1), "patience"), (dict(mode="up"), "mode"),
                          (dict(min_delta=float("nan")), "min_delta"), (dict(patience=True), "patience")]:
        with pytest.raises(ValueError, match=name):
            EarlyStopping(**options)


def test_early_stopping_against_lightning_itself_when_importable():
    """Differential test on random sequences (ties, NaN, both modes) against Lightning's own class."""
    lightning = pytest.importorskip("lightning.pytorch.callbacks", reason="lightning is not installed here")
    import random
    rng = random.Random(0)
    for trial in range(300):
        mode = rng.choice(["min", "max"])
        patience, delta = rng.randint(0, 3), rng.choice([0.0, 0.125, 0.25])
        # multiples of 1/8: exact in float32 (Lightning's tensors) and float64, so ties are real ties
        values = [float("nan") if rng.random() < 0.04 else rng.randint(0, 8) / 8 for _ in range(12)]
        theirs = lightning.EarlyStopping(monitor="m", patience=patience, min_delta=delta, mode=mode)
        expected = 0
        for check, value in enumerate(values, start=1):
            stop, _ = theirs._evaluate_stopping_criteria(torch.tensor(value))
            if stop:
                expected = check
                break
        assert stop_check(values, patience=patience, min_delta=delta, mode=mode) == expected, (values, mode)


def test_fit_stops_early_and_keeps_the_state_in_its_checkpoint(tmp_path):
    # min_delta larger than any change: the first check improves on +inf, the next two do not -> stop at 3
    result, _ = quiet(FitConfig(out=str(tmp_path / "run"), epochs=10, n_train=40, patience=2, min_delta=10.0,
                                **TINY))
    assert result.epochs_completed == 3 and result.stop_reason.startswith("early stopping after epoch 3")
    newest = ckpt.checkpoint_files(tmp_path / "run" / "checkpoints", "last")[0]
    state = load_checkpoint(newest)["early_stopping"]
    assert state["wait_count"] == 2 and state["should_stop"] and state["stopped_check"] == 3
    again, _ = quiet(FitConfig(out=str(tmp_path / "run"), epochs=10, n_train=40, patience=2, min_delta=10.0,
                               resume=True, **TINY))
    assert again.epochs_completed == 3 and again.updates == result.updates     # resuming does not train on


# --- accumulation: every window equals one big batch; the counts equal chapter 0's ----------------

def big_batch_oracle(n_train: int, batch_size: int, accum: int, epochs: int, lr: float) -> dict:
    """SGD on one big batch per window, the windows cut from torch's own sampler order (the flush included)."""
    seed_everything(0)
    splits = spiral_splits(n_train, 30, seed=0)
    model = MLP(2, 8, 3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    sampler = DistributedSampler(splits.train, num_replicas=1, rank=0, shuffle=True, seed=0)
    x, y = splits.train.tensors
    updates = 0
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        order = list(sampler)
        batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
        for start in range(0, len(batches), accum):
            window = [i for batch in batches[start:start + accum] for i in batch]
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x[window]), y[window]).backward()
            optimizer.step()
            updates += 1
    return {"state": model.state_dict(), "updates": updates}


@pytest.mark.parametrize("n_train, batch_size, accum", [(47, 5, 4), (40, 8, 2), (33, 10, 3)])
def test_every_window_equals_one_big_batch_and_the_counts_match_chapter_0(tmp_path, n_train, batch_size, accum):
    epochs, lr = 2, 0.5
    result, _ = quiet(FitConfig(out=str(tmp_path / "run"), epochs=epochs, n_train=n_train, batch_size=batch_size,
                                accum_steps=accum, optimizer="sgd", lr=lr, **TINY))
    oracle = big_batch_oracle(n_train, batch_size, accum, epochs, lr)
    counts = training_arithmetic(n_train, batch_size, epochs, accum)
    assert result.updates == oracle["updates"] == counts.total_weight_updates
    got = torch.load(tmp_path / "run" / "model.pt", weights_only=True)
    for name, want in oracle["state"].items():
        torch.testing.assert_close(got[name], want, rtol=1e-5, atol=1e-6)


def test_dividing_a_short_window_by_k_would_differ_from_the_big_batch(tmp_path):
    """The negative control: the test above can fail. Lightning/Accelerate's loss/K on the short window."""
    seed_everything(0)
    splits = spiral_splits(47, 30, seed=0)
    model = MLP(2, 8, 3, 2)
    x, y = splits.train.tensors
    last = list(range(40, 47))                       # a short window: 7 examples, K = 4
    big = torch.autograd.grad(nn.functional.cross_entropy(model(x[last]), y[last]), list(model.parameters()))
    by_k = torch.autograd.grad(nn.functional.cross_entropy(model(x[last]), y[last]) / 4, list(model.parameters()))
    assert not torch.allclose(big[0], by_k[0])


# --- TensorBoard, read back with tensorboard's own reader ------------------------------------------

def scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def _killed_after_checkpoints(config: FitConfig, writes: int) -> None:
    real = ckpt.atomic_write_bytes
    count = {"n": 0}

    def writing(path, data, **options):
        real(path, data, **options)
        count["n"] += 1
        if count["n"] == writes:
            os.kill(os.getpid(), signal.SIGKILL)
    ckpt.atomic_write_bytes = writing
    with contextlib.redirect_stdout(io.StringIO()):
        fit(config)


def test_tensorboard_files_read_back_and_survive_a_kill(tmp_path):
    options = dict(TINY, tensorboard=True, epochs=3, n_train=60, batch_size=10, accum_steps=2, dropout=0.2,
                   checkpoint_every=2, schedule="warmup_cosine")
    result, _ = quiet(FitConfig(out=str(tmp_path / "whole"), **options))
    whole = scalars(tmp_path / "whole" / "tb")
    assert set(whole) == {"train/loss_step", "train/lr", "train/grad_norm", "train/loss", "val/loss", "val/acc"}
    assert [step for step, _ in whole["train/lr"]] == list(range(1, result.updates + 1))
    assert [step for step, _ in whole["val/loss"]] == [r["updates"] for r in result.history]
    for key, tag in [("train_loss", "train/loss"), ("val_loss", "val/loss"), ("val_acc", "val/acc")]:
        assert [v for _, v in whole[tag]] == pytest.approx([r[key] for r in result.history], rel=1e-6)
    # killed after the fourth checkpoint file, then resumed: the reader shows no duplicated or missing step
    cut = FitConfig(out=str(tmp_path / "cut"), resume=True, **options)
    child = killed_runs.process(_killed_after_checkpoints, cut, 4)
    child.start()
    child.join()
    assert child.exitcode == -signal.SIGKILL
    quiet(cut)
    assert scalars(tmp_path / "cut" / "tb") == whole


# --- the NaN guard, clipping, precision ---------------------------------------------------------------

def test_nan_guard_skips_a_bad_update_and_carries_on(tmp_path):
    result, printed = quiet(FitConfig(out=str(tmp_path / "run"), epochs=2, n_train=40, batch_size=10,
                                      inject_nan_at=(5,), **TINY))
    counts = training_arithmetic(40, 10, 2)
    assert result.completed and result.skipped_updates == 1 and result.updates == counts.total_weight_updates - 1
    assert "skipped update 6 at epoch 2, batch 2" in printed  # 4 updates an epoch, the 2nd of epoch 2
    assert all(math.isfinite(r["train_loss"]) for r in result.history)
    weights = torch.load(tmp_path / "run" / "model.pt", weights_only=True)
    assert all(torch.isfinite(t).all() for t in weights.values())


def test_nan_guard_stops_after_n_in_a_row_losing_nothing_saved(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["--out", str(out), "--epochs", "3", "--n-train", "40", "--n-val", "30", "--batch-size", "10",
                 "--hidden", "8", "--threads", "1", "--no-tensorboard", "--max-bad-steps", "3",
                 "--inject-nan-at", "5,6,7"])
    printed = capsys.readouterr().out
    assert code == 1 and "diverged: 3 updates in a row had a non-finite loss" in printed
    assert not (out / "model.pt").exists()
    lines = (out / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 1                                           # epoch 1 finished and was kept
    newest = ckpt.checkpoint_files(out / "checkpoints", "last")[0]
    assert newest.name == "last-e0001-s000000.pt"                    # the last good state, intact
    state = load_checkpoint(newest)
    assert all(torch.isfinite(t).all() for t in state["model"].values())


def test_clipping_bounds_the_step_and_logs_the_pre_clip_norm(tmp_path):
    out = tmp_path / "run"
    seed_everything(0)
    before = MLP(2, 8, 3, 2).state_dict()
    result, _ = quiet(FitConfig(out=str(out), epochs=1, n_train=10, batch_size=10, optimizer="sgd", lr=1.0,
                                clip_norm=1e-3, **dict(TINY, tensorboard=True)))
    after = torch.load(out / "model.pt", weights_only=True)
    step = torch.sqrt(sum(((after[k] - before[k]) ** 2).sum() for k in before))
    assert result.updates == 1 and float(step) == pytest.approx(1e-3, rel=1e-4)    # lr x clipped norm
    (_, logged), = scalars(out / "tb")["train/grad_norm"]
    assert logged > 0.01                                             # the norm before clipping, not after


def test_bf16_autocast_runs_on_the_cpu_without_a_scaler(tmp_path):
    result, _ = quiet(FitConfig(out=str(tmp_path / "run"), epochs=2, n_train=40, amp="bf16", **TINY))
    assert result.completed and math.isfinite(result.final["val_loss"])
    assert load_checkpoint(ckpt.checkpoint_files(tmp_path / "run" / "checkpoints", "last")[0])["scaler"] is None


def test_fp16_is_refused_on_the_cpu_with_a_clear_message(tmp_path, capsys):
    device = [] if not torch.cuda.is_available() else ["--device", "cpu"]   # auto is the CPU here; else name it
    assert main(["--out", str(tmp_path / "run"), "--amp", "fp16", *device]) == 2
    assert "amp fp16 needs a CUDA GPU" in capsys.readouterr().err


@NEEDS_CUDA
def test_fp16_with_grad_scaler_on_cuda_resumes_exactly(tmp_path):
    options = dict(TINY, epochs=2, n_train=60, amp="fp16", device="cuda", checkpoint_every=2, clip_norm=1.0)
    whole, _ = quiet(FitConfig(out=str(tmp_path / "whole"), **options))
    assert whole.completed
    state = load_checkpoint(ckpt.checkpoint_files(tmp_path / "whole" / "checkpoints", "last")[0])
    assert state["scaler"] and state["scaler"]["scale"] > 0
    folder = tmp_path / "cut" / "checkpoints"
    quiet(FitConfig(out=str(tmp_path / "cut"), **options))
    for path in ckpt.checkpoint_files(folder)[:2]:                    # as if killed two checkpoints early
        path.unlink()
    quiet(FitConfig(out=str(tmp_path / "cut"), resume=True, **options))
    a = torch.load(tmp_path / "whole" / "model.pt", weights_only=True)
    b = torch.load(tmp_path / "cut" / "model.pt", weights_only=True)
    assert all(torch.equal(a[k], b[k]) for k in a)


@NEEDS_CUDA
def test_compile_and_pinned_memory_on_cuda(tmp_path):
    result, _ = quiet(FitConfig(out=str(tmp_path / "run"), epochs=1, n_train=60, compile=True, workers=1,
                                **dict(TINY, device="cuda")))
    assert result.completed and math.isfinite(result.final["val_loss"])


@NEEDS_CUDA
def test_a_gpu_runs_model_pt_loads_where_there_is_no_gpu(tmp_path):
    """model.pt and model-last.pt of a CUDA run hold CPU tensors, as the checkpoints do: a plain torch.load in a
    process that sees no GPU reads them (a file of cuda:0 tensors raises there without map_location)."""
    quiet(FitConfig(out=str(tmp_path / "run"), epochs=6, n_train=40, lr=0.03, patience=2,
                    **dict(TINY, device="cuda")))
    for name in ("model.pt", "model-last.pt"):
        if (tmp_path / "run" / name).exists():
            assert all(t.device.type == "cpu" for t in torch.load(tmp_path / "run" / name, weights_only=True).values())
    code = ("import sys, torch; assert not torch.cuda.is_available(); "
            "s = torch.load(sys.argv[1], weights_only=True); print(len(s), {str(t.device) for t in s.values()})")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "run" / "model.pt")], capture_output=True,
                          text=True, env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
    assert done.returncode == 0 and "{'cpu'}" in done.stdout, done.stderr[-2000:]


@NEEDS_CUDA
def test_a_cpu_run_on_a_gpu_machine_never_touches_the_gpu(tmp_path):
    """No CUDA context for a CPU run (its RNG states are the CPU's alone): none of the GPU's memory, and the run
    can train in a forked process, which CUDA forbids once a context exists."""
    code = ("import sys, torch; from course_utils.production import FitConfig, fit; "
            "fit(FitConfig(out=sys.argv[1], epochs=2, n_train=40, n_val=30, hidden=8, checkpoint_every=1, "
            "progress=False, device='cpu')); fit(FitConfig(out=sys.argv[1], epochs=3, n_train=40, n_val=30, "
            "hidden=8, progress=False, device='cpu', resume=True)); print('cuda initialized:', torch.cuda.is_initialized())")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "run")], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1], timeout=300)
    assert done.returncode == 0 and "cuda initialized: False" in done.stdout, done.stderr[-2000:]


# --- configuration and the command line ------------------------------------------------------------

@pytest.mark.parametrize("field, value", [("epochs", 0), ("batch_size", 2.5), ("lr", float("nan")),
                                          ("optimizer", "lion"), ("amp", "fp8"), ("keep", 0), ("patience", -1),
                                          ("monitor", "loss"), ("checkpoint_every", -1), ("resume", "yes"),
                                          ("dropout", 1.0), ("inject_nan_at", (-1,)), ("out", "")])
def test_fit_config_names_the_bad_field(field, value):
    with pytest.raises(ValueError, match=f"^{field} must be"):
        FitConfig(**{"out": "x", field: value})


def test_every_issue_flag_is_there_with_help():
    parser = build_parser()
    flags = {option: action for action in parser._actions for option in action.option_strings}
    for flag in ["--out", "--epochs", "--batch-size", "--accum-steps", "--lr", "--optimizer", "--schedule", "--seed",
                 "--n-train", "--dropout", "--workers", "--checkpoint-every", "--keep", "--patience", "--amp",
                 "--compile", "--resume", "--clip-norm", "--max-bad-steps", "--min-delta"]:
        assert flag in flags and flags[flag].help and len(flags[flag].help) > 10, flag


@pytest.mark.parametrize("argv, named", [(["--lr", "abc"], "--lr"), (["--epochs", "0"], "--epochs"),
                                         (["--amp", "fp8"], "--amp"), (["--frobnicate"], "--frobnicate"),
                                         (["--keep", "0"], "--keep"), (["--dropout", "1.5"], "--dropout"),
                                         ([], "--out")])
def test_bad_flags_give_one_line_and_exit_code_2(argv, named, capsys, tmp_path):
    argv = argv if argv == [] else ["--out", str(tmp_path / "run")] + argv
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and named in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_the_real_command_line_exits_2_on_a_bad_value(tmp_path):
    done = subprocess.run([sys.executable, "-m", "course_utils.train", "--out", str(tmp_path), "--batch-size", "-3"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--batch-size" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_command_line_writes_every_file(tmp_path):
    out = tmp_path / "run"
    assert main(["--out", str(out), "--epochs", "2", "--n-train", "40", "--n-val", "30", "--hidden", "8",
                 "--threads", "1", "--no-progress"]) == 0
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in lines] == [1, 2]
    assert {"epoch", "updates", "train_loss", "val_loss", "val_acc", "lr"} <= set(lines[0])
    assert torch.load(out / "model.pt", weights_only=True)
    assert list((out / "tb").glob("events.out.tfevents.*"))
    assert ckpt.checkpoint_files(out / "checkpoints", "last") and ckpt.checkpoint_files(out / "checkpoints", "best")


# --- early stopping delivers the best weights; a run may grow; no field overflows -------------------------

def test_early_stopping_delivers_the_best_checkpoints_weights_and_keeps_the_last_beside_them(tmp_path):
    out = tmp_path / "run"
    result, _ = quiet(FitConfig(out=str(out), epochs=60, n_train=40, lr=0.03, patience=3, **dict(TINY, n_val=200)))
    losses = [r["val_loss"] for r in result.history]
    best_epoch = 1 + losses.index(min(losses))
    assert result.stop_reason.startswith("early stopping") and len(losses) == best_epoch + 3
    assert result.delivered == "best" and result.best["epoch"] == best_epoch and min(losses) < losses[-1]
    best = load_checkpoint(out / "checkpoints" / ckpt.checkpoint_name("best", best_epoch, 0))["model"]
    last = load_checkpoint(ckpt.checkpoint_files(out / "checkpoints", "last")[0])["model"]
    delivered = torch.load(out / "model.pt", weights_only=True)
    kept_last = torch.load(out / "model-last.pt", weights_only=True)
    assert all(torch.equal(delivered[k], best[k]) for k in best)
    assert all(torch.equal(kept_last[k], last[k]) for k in last)
    # the delivered weights give the best validation loss again (evaluated afresh, not read from the history)
    model = MLP(2, 8, 3, 2)
    model.load_state_dict(delivered)
    x, y = spiral_splits(40, 200, seed=0).val.tensors
    with torch.no_grad():
        assert nn.functional.cross_entropy(model(x), y).item() == pytest.approx(min(losses), rel=1e-5)
    # without early stopping: the last weights, and no model-last.pt
    plain, _ = quiet(FitConfig(out=str(tmp_path / "plain"), epochs=2, n_train=40, **TINY))
    assert plain.delivered == "last" and not (tmp_path / "plain" / "model-last.pt").exists()


def test_a_constant_schedule_run_can_be_extended_and_equals_the_longer_run(tmp_path):
    options = dict(TINY, n_train=40, batch_size=10, dropout=0.2, checkpoint_every=1)
    quiet(FitConfig(out=str(tmp_path / "long"), epochs=3, **options))
    quiet(FitConfig(out=str(tmp_path / "grown"), epochs=2, **options))
    grown, printed = quiet(FitConfig(out=str(tmp_path / "grown"), epochs=3, resume=True, **options))
    assert "resumed from" in printed and grown.epochs_completed == 3
    a, b = (torch.load(tmp_path / run / "model.pt", weights_only=True) for run in ("long", "grown"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    strip = lambda run: [{k: v for k, v in json.loads(line).items() if k != "elapsed_s"}   # noqa: E731
                         for line in (tmp_path / run / "metrics.jsonl").read_text().splitlines()]
    assert strip("long") == strip("grown")
    quiet(FitConfig(out=str(tmp_path / "cosine"), epochs=2, schedule="cosine", **options))
    with pytest.raises(CheckpointError, match="epochs=2 \\(now 3: the cosine schedule is sized by the run's length"):
        fit(FitConfig(out=str(tmp_path / "cosine"), epochs=3, schedule="cosine", resume=True, **options))
    with pytest.raises(CheckpointError, match="epochs=3 \\(now 2\\)"):
        fit(FitConfig(out=str(tmp_path / "long"), epochs=2, resume=True, **options))
    assert "--epochs may grow when --schedule is constant" in " ".join(build_parser().format_help().split())


def _float_fields(cls) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if "float" in str(f.type)]


@pytest.mark.parametrize("cls, fields", [(FitConfig, dict(out="x")), (TrainConfig, {})])
def test_every_float_field_refuses_a_huge_integer_by_name(cls, fields):
    names = _float_fields(cls)
    assert len(names) >= 6
    for name in names:
        for huge in (10**400, -10**400):
            with pytest.raises(ValueError, match=f"^{name} must be") as info:
                cls(**fields, **{name: huge})
            assert len(str(info.value)) < 200                    # the 401 digits are shortened
    with pytest.raises(ValueError, match="^seed must be"):
        cls(**fields, seed=10**400)
