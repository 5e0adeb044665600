"""Chapter 7's scale-out: the same command under `torchrun --nproc_per_node=2` (DDP over gloo on the CPU).

Both ranks end with identical weights (each rank's digest is gathered into summary.json), the update
count is the one chapter 0's calculator predicts for world size 2, and a run resumed by both ranks from
a mid-epoch checkpoint ends identical to the uninterrupted one."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from course_utils.engine.arithmetic import training_arithmetic
from course_utils.engine.models import MLP
from course_utils.production import checkpoint as ckpt
from course_utils.production import weights_digest

ROOT = Path(__file__).resolve().parents[1]
N, B, K, E = 50, 8, 2, 2          # 25 examples per rank: batches 8, 8, 8, 1 -> windows of 2 and 2


def train_args(out: Path, device: str) -> list[str]:
    """The course_utils.train command line every run here shares."""
    return ["-m", "course_utils.train", "--out", str(out), "--epochs", str(E), "--n-train", str(N), "--n-val", "30",
            "--batch-size", str(B), "--accum-steps", str(K), "--hidden", "8", "--dropout", "0.1",
            "--checkpoint-every", "1", "--keep", "20", "--threads", "1", "--no-tensorboard", "--device", device]


def torchrun(out: Path, *extra: str, backend_device: str = "cpu", ranks: int = 2) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={ranks}", "--standalone",
               *train_args(out, backend_device), *extra]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done


def model_digest(path: Path) -> str:
    model = MLP(2, 8, 3, 2, dropout=0.1)
    model.load_state_dict(torch.load(path, weights_only=True))
    return weights_digest(model)


def test_two_ranks_agree_match_the_calculator_and_resume_exactly(tmp_path):
    whole = tmp_path / "whole"
    torchrun(whole)
    summary = json.loads((whole / "summary.json").read_text())
    digests = summary["weights_sha256_per_rank"]
    assert summary["world_size"] == 2 and len(digests) == 2 and digests[0] == digests[1]
    assert summary["backend"] == "gloo" and summary["device"] == "cpu"
    assert model_digest(whole / "model.pt") == digests[0]
    counts = training_arithmetic(N, B, E, K, world_size=2)
    assert summary["updates"] == counts.total_weight_updates == 4
    lines = (whole / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["updates"] for line in lines] == [2, 4]          # rank 0 alone wrote, once per epoch

    # As if killed mid-epoch 2: keep only the checkpoints up to epoch 1, batch 2; both ranks resume from it.
    cut = tmp_path / "cut"
    shutil.copytree(whole, cut)
    for path in ckpt.checkpoint_files(cut / "checkpoints"):
        if ckpt._position(path)[:2] > (1, 2):
            path.unlink()
    done = torchrun(cut, "--resume")
    assert "resumed from" in done.stdout and "last-e0001-s000002.pt" in done.stdout
    resumed = json.loads((cut / "summary.json").read_text())
    assert resumed["weights_sha256_per_rank"] == digests
    strip = lambda text: [{k: v for k, v in json.loads(line).items() if k != "elapsed_s"}  # noqa: E731
                          for line in text.splitlines()]
    assert strip((cut / "metrics.jsonl").read_text()) == strip((whole / "metrics.jsonl").read_text())


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs for nccl (none on this machine)")
def test_two_ranks_over_nccl_on_cuda(tmp_path):
    torchrun(tmp_path / "run", backend_device="cuda")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["backend"] == "nccl"
    assert summary["weights_sha256_per_rank"][0] == summary["weights_sha256_per_rank"][1]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none on this machine)")
def test_one_process_under_torchrun_on_cuda_runs_alone_and_ends_like_the_run_without_it(tmp_path):
    """World size 1 joins no process group (nccl refuses two ranks on one GPU, so one GPU cannot show nccl):
    the run under torchrun must end bit for bit like the same command without torchrun."""
    torchrun(tmp_path / "ranked", backend_device="cuda", ranks=1)
    ranked = json.loads((tmp_path / "ranked" / "summary.json").read_text())
    assert ranked["backend"] is None and ranked["device"] == "cuda" and ranked["world_size"] == 1
    command = [sys.executable, *train_args(tmp_path / "alone", "cuda")]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    alone = json.loads((tmp_path / "alone" / "summary.json").read_text())
    assert alone["backend"] is None and alone["device"] == "cuda"
    assert alone["weights_sha256_per_rank"] == ranked["weights_sha256_per_rank"]


def test_a_task_of_a_test_file_under_torchrun_all_reduces_once_per_update_and_resumes_exactly(tmp_path):
    """tests.test_production_tasks:noisy_task (dropout, random augmentation in 2 workers per rank) on 2 ranks:
    45 examples per rank in micro-batches of 10, 10, 10, 10, 5; K = 2 gives windows 2, 2, 1: 3 updates an epoch.
    DDP's all-reduce runs once per update (no_sync inside a window), counted by a communication hook."""
    flags = ["--task", "tests.test_production_tasks:counted_noisy_task", "--epochs", "2", "--batch-size", "10",
             "--accum-steps", "2", "--checkpoint-every", "1", "--keep", "20", "--workers", "2", "--threads", "1",
             "--no-tensorboard", "--no-progress"]
    whole = tmp_path / "whole"
    task_run(whole, flags)
    summary = json.loads((whole / "summary.json").read_text())
    digests = summary["weights_sha256_per_rank"]
    assert summary["world_size"] == 2 and digests[0] == digests[1] and summary["task"] == "jittered"
    counts = training_arithmetic(90, 10, 2, 2, world_size=2)
    assert summary["updates"] == counts.total_weight_updates == 6
    micro_batches = 2 * counts.iters_per_epoch
    assert [int((whole / f"allreduces-{rank}").read_text()) for rank in (0, 1)] == [6, 6] != [micro_batches] * 2
    cut = tmp_path / "cut"                     # as if killed in epoch 2 after its first update (batch 2)
    shutil.copytree(whole, cut)
    for path in ckpt.checkpoint_files(cut / "checkpoints"):
        if ckpt._position(path)[:2] > (1, 2):
            path.unlink()
    done = task_run(cut, flags + ["--resume"])
    assert "last-e0001-s000002.pt" in done.stdout
    assert json.loads((cut / "summary.json").read_text())["weights_sha256_per_rank"] == digests


def task_run(out: Path, flags: list[str]) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--standalone",
               "-m", "course_utils.train", "--out", str(out), "--device", "cpu", *flags]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done


@pytest.mark.parametrize("world_size", ["1", "2"])
def test_a_torchrun_rank_leaves_without_pythons_teardown_and_keeps_its_exit_code(world_size):
    """exit_process: under torchrun (WORLD_SIZE > 1) no atexit handler runs (so no gloo thread can meet a Python
    that is shutting down), yet what was printed is flushed and the code is kept; alone, a normal exit."""
    script = ("import atexit, sys\n"
              "from course_utils.production.cli import exit_process\n"
              "atexit.register(lambda: print('teardown ran'))\n"
              "sys.stdout.write('written before the exit')\n"
              "exit_process(3)\n")
    env = {**os.environ, "WORLD_SIZE": world_size, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 3
    assert done.stdout.startswith("written before the exit")
    assert ("teardown ran" in done.stdout) == (world_size == "1")
