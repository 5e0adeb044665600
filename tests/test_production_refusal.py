"""`--resume` never turns into a fresh start by itself (issue 33, item 2): when checkpoints are there and
none can be used, fit raises NoUsableCheckpointError and the command line exits 2 with one line saying how
many there were, what is wrong with each, where they were set aside and that running without --resume starts
over; nothing is deleted and nothing is trained. A mix with one good checkpoint resumes from it exactly."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from course_utils.production import NoUsableCheckpointError, fit
from course_utils.production import checkpoint as ckpt
from tests.test_production_resume import _quiet_fit, assert_same_run, config

ROOT = Path(__file__).resolve().parents[1]
SMALL = dict(epochs=2, keep=3)      # 4 updates an epoch, a checkpoint every 2: three 'last' files and the best
FLAGS = ["--epochs", "2", "--keep", "3", "--n-train", "96", "--n-val", "48", "--batch-size", "10", "--accum-steps",
         "3", "--dropout", "0.2", "--optimizer", "adamw", "--schedule", "onecycle", "--lr", "0.02", "--hidden", "16",
         "--checkpoint-every", "2", "--threads", "1", "--no-progress", "--device", "cpu"]     # as BASE (the CPU)


def _replace(path: Path, data: bytes) -> None:
    """New bytes under `path` in a new file (a hard-linked twin keeps the old ones)."""
    path.unlink()
    path.write_bytes(data)


def breaks(path: Path, how: str) -> str:
    """Damage one checkpoint `how`; returns what the refusal must say about it."""
    sidecar = path.with_name(path.name + ".sha256")
    if how == "checksum missing":
        sidecar.unlink()
        return "checksum file is missing"
    if how == "checksum unreadable":
        sidecar.unlink()
        sidecar.mkdir()                                   # there, and cannot be read as a file
        return "checksum file is unreadable"
    if how == "checksum garbled":
        _replace(sidecar, b"\xff\xfe not a checksum \x00")
        return "checksum file is unreadable (it holds no 'sha256 DIGEST SIZE' line)"
    if how == "checksum mismatching":
        _replace(sidecar, f"sha256 {'0' * 64} {path.stat().st_size}\n".encode())
        return "its bytes do not match its checksum file"
    if how == "truncated":
        _replace(path, path.read_bytes()[: path.stat().st_size // 2])
        return "cut short to"
    if how == "replaced":                                 # another complete torch file: the run's model.pt
        _replace(path, (path.parents[1] / "model.pt").read_bytes())
        return "replaced by another file"
    raise ValueError(how)


MODES = ["checksum missing", "checksum unreadable", "checksum garbled", "checksum mismatching", "truncated",
         "replaced"]


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("finished") / "run"
    _quiet_fit(config(out, **SMALL))
    return out


def _snapshot(out: Path) -> dict[str, bytes]:
    """Every file of a run folder outside checkpoints/ (what a training run would rewrite)."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and "checkpoints" not in p.parts}


def _refused(out: Path, files: list[str], said: str, before: dict[str, bytes]) -> None:
    folder = out / "checkpoints"
    assert not ckpt.checkpoint_files(folder), "a checkpoint stayed where the next --resume would read it"
    kept = sorted(p.name.split(".corrupt-")[0] for p in ckpt.set_aside_files(folder))
    assert kept == sorted(files), "every checkpoint set aside, none deleted"
    assert _snapshot(out) == before, "something was trained or logged"
    for part in (f"none of the {len(files)} checkpoints", "set aside", "nothing was deleted",
                 "run without --resume to start over", str(folder)):
        assert part in said
    assert "\n" not in said.strip()


@pytest.mark.parametrize("how", MODES)
def test_every_checkpoint_unusable_refuses_with_one_line_and_trains_nothing(tmp_path, finished, how):
    out = tmp_path / "run"
    shutil.copytree(finished, out)
    files = [p.name for p in ckpt.checkpoint_files(out / "checkpoints")]
    assert len(files) == 4
    reasons = [breaks(out / "checkpoints" / name, how) for name in files]
    before = _snapshot(out)
    with pytest.raises(NoUsableCheckpointError) as info:
        fit(config(out, resume=True, **SMALL))
    said = str(info.value)
    _refused(out, files, said, before)
    for name, reason in zip(files, reasons):              # each file named with what is wrong with it
        assert f"{name} " in said and reason in said.split(f"{name} ", 1)[1].split(";")[0]


@pytest.mark.parametrize("how", ["checksum unreadable", "truncated"])
def test_the_command_line_exits_2_then_again_then_starts_over_without_resume(tmp_path, finished, how):
    out = tmp_path / "run"
    shutil.copytree(finished, out)
    files = [p.name for p in ckpt.checkpoint_files(out / "checkpoints")]
    reason = [breaks(out / "checkpoints" / name, how) for name in files][0]
    before = _snapshot(out)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    run = [sys.executable, "-m", "course_utils.train", "--out", str(out), *FLAGS]
    done = subprocess.run(run + ["--resume"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr and reason in done.stderr
    _refused(out, files, done.stderr, before)
    again = subprocess.run(run + ["--resume"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 2 and "set aside earlier" in again.stderr, again.stderr   # still no silent restart
    assert _snapshot(out) == before
    fresh = subprocess.run(run, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert fresh.returncode == 0, fresh.stderr
    assert_same_run(out, finished)                        # started over: the same run again
    assert len(ckpt.set_aside_files(out / "checkpoints")) == len(files)   # the old ones still kept


def test_a_mix_resumes_from_the_one_good_checkpoint_exactly(tmp_path, finished):
    out = tmp_path / "run"
    shutil.copytree(finished, out)
    folder = out / "checkpoints"
    files = ckpt.checkpoint_files(folder)                 # newest first: the end (last and best), mid epoch 2, epoch 1
    good = files[-1]
    reasons = {p.name: breaks(p, how) for p, how in zip(files[:-1], ["truncated", "checksum unreadable",
                                                                      "checksum mismatching"])}
    (out / "model.pt").unlink()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fit(config(out, resume=True, **SMALL))
    assert Path(result.resumed_from).name == good.name
    messages = [str(w.message) for w in caught if "checkpoint" in str(w.message)]
    for name, reason in reasons.items():
        assert any(name in m and reason in m and "set aside" in m and good.name in m for m in messages), name
    assert_same_run(out, finished)
    assert sorted(p.name.split(".corrupt-")[0] for p in ckpt.set_aside_files(folder)) == sorted(reasons)
