"""Chapter 7's exact resume: a run SIGKILLed at random moments and resumed ends bitwise identical to an
uninterrupted run (weights, metrics.jsonl line for line, TensorBoard scalars); damaged, unfinished and
unsafe checkpoints are handled as the issue says. The oracle is always the uninterrupted run."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import torch

from course_utils.production import (CheckpointError, FitConfig, NoUsableCheckpointError, UnsafeCheckpointError, fit,
                                     load_checkpoint)
from course_utils.production import checkpoint as ckpt
from tests import killed_runs

ROOT = Path(__file__).resolve().parents[1]
# 10 micro-batches per epoch (the last of 6 examples), windows of 3, 3, 3 and a flushed 1; dropout draws
# from the global RNG; onecycle and AdamW carry scheduler and optimizer state; 4 updates per epoch.
# device="cpu" on a GPU machine too: bitwise claims, and children forked to be killed cannot use CUDA.
BASE = dict(epochs=4, n_train=96, n_val=48, batch_size=10, accum_steps=3, dropout=0.2, optimizer="adamw",
            schedule="onecycle", lr=0.02, hidden=16, checkpoint_every=2, keep=2, threads=1, progress=False,
            device="cpu")


def config(out: Path, **changes) -> FitConfig:
    return FitConfig(out=str(out), **{**BASE, **changes})


def metrics_lines(out: Path) -> list[dict]:
    """metrics.jsonl, wall-clock fields aside."""
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k != "elapsed_s"} for line in lines]


def weights(out: Path) -> dict[str, torch.Tensor]:
    return torch.load(out / "model.pt", weights_only=True)


def assert_same_run(out: Path, reference: Path) -> None:
    got, want = weights(out), weights(reference)
    assert got.keys() == want.keys()
    for name in want:
        assert torch.equal(got[name], want[name]), f"{name} differs from the uninterrupted run"
    assert metrics_lines(out) == metrics_lines(reference)


def _quiet_fit(cfg: FitConfig) -> None:
    import io
    import contextlib
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit(cfg)


def run_and_kill(cfg: FitConfig, delay: float) -> bool:
    """fit(cfg) in a forked child, SIGKILLed after `delay` seconds; True when it was killed before finishing."""
    child = killed_runs.process(_quiet_fit, cfg)
    child.start()
    child.join(delay)
    killed = child.is_alive()
    if killed:
        os.kill(child.pid, signal.SIGKILL)
    child.join()
    return killed


def positions(folder: Path) -> set[tuple[int, int]]:
    return {ckpt._position(p)[:2] for p in ckpt.checkpoint_files(folder)}


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[Path, float]:
    """The uninterrupted run, and how long a forked child takes for it (the window the kills land in)."""
    out = tmp_path_factory.mktemp("reference")
    _quiet_fit(config(out))
    killed_runs.ready()
    start = time.perf_counter()
    assert not run_and_kill(config(tmp_path_factory.mktemp("timed")), 600)
    return out, time.perf_counter() - start


# BASE's onecycle also cycles AdamW's betas, so it reads the guard's verdict every update; warmup_cosine runs on the
# device (the guard, the skip and the learning rate: issue 41), read every 3 updates
@pytest.mark.parametrize("every, changes", [(2, {}), (1, {}), (2, {"schedule": "warmup_cosine", "log_every": 3})])
def test_sigkill_at_random_moments_then_resume_is_bitwise_identical(tmp_path, reference, every, changes):
    ref, duration = reference
    if every != BASE["checkpoint_every"] or changes:
        ref = tmp_path / "reference"
        _quiet_fit(config(ref, checkpoint_every=every, **changes))
    rng = random.Random(1234 + every + len(changes))
    window = duration                                    # kills land uniformly in [0.02 s, window]
    resumed_mid_epoch = kills = 0
    for trial in range(6):
        out = tmp_path / f"trial{trial}"
        cfg = config(out, checkpoint_every=every, resume=True, **changes)
        for k in range(rng.randint(1, 3)):               # one to three kills per trial, the first one sure to land
            if k == 0:
                killed, window = killed_runs.kill_lands(lambda delay: run_and_kill(cfg, delay), out, window, rng)
            else:                                        # a later one may miss: the resumed run got to its end
                killed = run_and_kill(cfg, rng.uniform(0.02, window))
            kills += killed
            resumed_mid_epoch += any(position > 0 for _, position in positions(out / "checkpoints"))
        _quiet_fit(cfg)                                  # resume to the end in this process
        assert_same_run(out, ref)
    assert kills >= 6, "every trial's first kill lands before the run ends"
    assert resumed_mid_epoch >= 1, "at least one kill should leave a mid-epoch checkpoint to resume from"


def test_sigkill_with_two_dataloader_workers(tmp_path, reference):
    ref = tmp_path / "reference"
    _quiet_fit(config(ref, workers=2))
    assert_same_run(ref, reference[0])                   # workers change nothing in the numbers
    rng = random.Random(7)
    for trial in range(3):
        out = tmp_path / f"trial{trial}"
        cfg = config(out, workers=2, resume=True)
        run_and_kill(cfg, rng.uniform(0.3, 2.0))
        _quiet_fit(cfg)
        assert_same_run(out, ref)


def _die_while_saving(cfg: FitConfig, call: int, phase: str) -> None:
    """Run fit but SIGKILL this process during its `call`-th checkpoint write (`phase` of that write)."""
    calls = {"n": 0}
    real_bytes, real_text = ckpt.atomic_write_bytes, ckpt.atomic_write_text

    def writing(path, data, **options):
        calls["n"] += 1
        if calls["n"] == call and phase == "half-written":
            with open(Path(path).with_name(Path(path).name + ".x1y2.tmp"), "wb") as handle:
                handle.write(data[: len(data) // 2])    # what a kill inside atomic_write_bytes leaves
            os.kill(os.getpid(), signal.SIGKILL)
        real_bytes(path, data, **options)

    def checksum(path, text):
        if calls["n"] == call - 1 and phase == "checksum-only":
            real_text(path, text)
            os.kill(os.getpid(), signal.SIGKILL)        # the checksum is in place, the .pt not yet
        real_text(path, text)

    ckpt.atomic_write_bytes, ckpt.atomic_write_text = writing, checksum
    _quiet_fit(cfg)


@pytest.mark.parametrize("phase", ["half-written", "checksum-only"])
def test_killed_during_a_save_resumes_exactly(tmp_path, reference, phase):
    for call in (2, 4):                                  # the end of epoch 1; mid-epoch 2
        out = tmp_path / f"{phase}-{call}"
        cfg = config(out, resume=True)
        child = killed_runs.process(_die_while_saving, cfg, call, phase)
        child.start()
        child.join()
        assert child.exitcode == -signal.SIGKILL
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fit(cfg)
        assert_same_run(out, reference[0])
        assert not [w for w in caught if "checkpoint" in str(w.message)]   # a killed save: nothing refused
        assert not [p for p in (out / "checkpoints").glob("*.sha256") if not p.with_suffix("").exists()]
        assert not list((out / "checkpoints").glob("*.tmp"))


def test_corrupted_newest_checkpoint_falls_back_with_a_warning(tmp_path, reference):
    out = tmp_path / "run"
    _quiet_fit(config(out))
    newest = ckpt.checkpoint_files(out / "checkpoints", "last")[0]
    data = bytearray(newest.read_bytes())
    data[len(data) // 2] ^= 0xFF                         # one flipped byte
    newest.write_bytes(bytes(data))
    with pytest.warns(RuntimeWarning, match=f"{newest.name} is damaged.*set aside"):
        result = fit(config(out, resume=True))
    assert result.resumed_from is not None and Path(result.resumed_from).name != newest.name
    assert_same_run(out, reference[0])
    assert list((out / "checkpoints").glob(newest.name + ".corrupt-*"))   # kept, never deleted


class _RunsCode:
    """A pickle payload that would create a file if unpickled by a full (unsafe) loader."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_malicious_pickle_is_refused_without_running_it(tmp_path):
    out = tmp_path / "run"
    _quiet_fit(config(out, epochs=1))
    marker = tmp_path / "pwned"
    newest = ckpt.checkpoint_files(out / "checkpoints", "last")[0]
    evil = ckpt.serialize({"format": ckpt.FORMAT, "payload": _RunsCode(str(marker))})
    ckpt.write_checkpoint(out / "checkpoints", ckpt.checkpoint_name("last", 9, 0), evil)   # valid checksum
    before = sorted(p.name for p in (out / "checkpoints").iterdir())
    with pytest.raises(UnsafeCheckpointError, match="refusing checkpoint .*last-e0009-s000000.pt") as info:
        fit(config(out, epochs=1, resume=True))
    assert "\n" not in str(info.value)
    assert not marker.exists(), "unpickling ran the attacker's code"
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == before     # nothing moved or started
    assert newest.exists()
    # the command line: one line naming the file, exit code 1, no traceback
    done = subprocess.run([sys.executable, "-m", "course_utils.train", "--out", str(out), "--epochs", "1",
                           "--n-train", "96", "--n-val", "48", "--batch-size", "10", "--accum-steps", "3",
                           "--resume"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip().count("\n") == 0 and "last-e0009-s000000.pt" in done.stderr
    assert "Traceback" not in done.stderr and not marker.exists()


def test_checkpoints_that_all_fail_refuse_instead_of_starting_over(tmp_path):
    out = tmp_path / "run"
    _quiet_fit(config(out, epochs=1))
    names = sorted(p.name for p in ckpt.checkpoint_files(out / "checkpoints"))
    for path in ckpt.checkpoint_files(out / "checkpoints"):
        path.with_name(path.name + ".sha256").write_text("sha256 0 0\n")
    with pytest.raises(NoUsableCheckpointError, match=f"none of the {len(names)} checkpoints"):
        fit(config(out, epochs=1, resume=True))
    kept = sorted(p.name.split(".corrupt-")[0] for p in ckpt.set_aside_files(out / "checkpoints"))
    assert kept == names                                             # every one set aside, none deleted


def test_resume_without_checkpoints_starts_fresh_with_a_notice(tmp_path, reference, capsys):
    out = tmp_path / "run"
    fit(config(out, resume=True))
    assert "no checkpoint" in capsys.readouterr().out
    assert_same_run(out, reference[0])


def test_a_fresh_run_refuses_a_folder_with_checkpoints_and_resume_refuses_other_settings(tmp_path):
    out = tmp_path / "run"
    _quiet_fit(config(out, epochs=1))
    with pytest.raises(CheckpointError, match="already holds checkpoints"):
        fit(config(out, epochs=1))
    with pytest.raises(CheckpointError, match="different run: batch_size=10"):
        fit(config(out, epochs=1, batch_size=12, resume=True))


def test_checkpoints_hold_the_full_state_and_load_with_weights_only(tmp_path):
    out = tmp_path / "run"
    _quiet_fit(config(out, epochs=2, patience=5))
    folder = out / "checkpoints"
    lasts, bests = ckpt.checkpoint_files(folder, "last"), ckpt.checkpoint_files(folder, "best")
    assert len(lasts) == BASE["keep"] and len(bests) == 1          # rolling k, plus the best
    state = load_checkpoint(lasts[0])
    for key in ("model", "optimizer", "scheduler", "scaler", "epoch", "position", "updates", "best",
                "early_stopping", "rng", "history", "running"):
        assert key in state
    assert set(state["rng"]) == {"torch", "cuda", "numpy", "random"}
    assert state["early_stopping"]["checks"] == 2 and state["updates"] == 8
    torch.load(lasts[0], weights_only=True)                          # plain torch.load works too
    assert torch.load(out / "model.pt", weights_only=True).keys() == state["model"].keys()
