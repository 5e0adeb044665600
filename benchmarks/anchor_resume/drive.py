"""The same task, killed mid-epoch and resumed, in our trainer, Lightning, Accelerate and the HF Trainer.

Each script trains shared.py's task (3-class points, an MLP with dropout, a shuffled DataLoader,
random augmentation in __getitem__ when AUGMENT=1) for 3 epochs with a checkpoint every 4 updates,
through its library's documented resume path. Per library and setting: one uninterrupted run; one
run SIGKILLed inside its 15th training forward pass (epoch 2, after the checkpoint at update 12);
the same command again, which resumes; then the final weights are compared. Also counted: the lines
of user code between the scripts' `--- user code ---` markers (the shared task is not counted).

Run from a scratch environment outside the repository that has the libraries (install torch==2.13.0
first, so nothing pulls CUDA wheels):
    python3.11 -m venv /tmp/anchors && /tmp/anchors/bin/pip install torch==2.13.0
    /tmp/anchors/bin/pip install lightning accelerate transformers numpy
    /tmp/anchors/bin/python benchmarks/anchor_resume/drive.py [--ours-python .venv/bin/python]
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SCRIPTS = {"ours": "ours.py", "Lightning": "lightning_run.py", "Accelerate": "accelerate_run.py",
           "Accelerate, seedable sampler": "accelerate_run.py", "HF Trainer": "hf_run.py"}


def user_lines(script: str) -> int:
    """Non-blank, non-comment lines between the markers."""
    text = (HERE / script).read_text()
    block = re.search(r"# --- user code ---\n(.*?)# --- end ---", text, re.S).group(1)
    return sum(1 for line in block.splitlines() if line.strip() and not line.strip().startswith("#"))


def run(python: str, name: str, out: Path, kill_at: int, workers: int, augment: bool) -> int:
    env = dict(os.environ, KILL_AT=str(kill_at), WORKERS=str(workers), AUGMENT=str(int(augment)),
               OMP_NUM_THREADS="1", PYTHONPATH=f"{HERE}{os.pathsep}{ROOT}", PYTHONWARNINGS="ignore",
               SEEDABLE="1" if "seedable" in name else "0")
    done = subprocess.run([python, SCRIPTS[name], str(out)], cwd=HERE, env=env, capture_output=True, text=True)
    if kill_at == 0 and done.returncode != 0:
        raise SystemExit(f"{name}: {done.stderr[-1500:]}")
    return done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ours-python", default=str(ROOT / ".venv" / "bin" / "python"))
    parser.add_argument("--only", nargs="*", default=list(SCRIPTS))
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="anchor_resume_"))
    versions = {}
    for module in ("lightning", "accelerate", "transformers"):
        try:
            versions[module] = __import__(module).__version__
        except ImportError:
            versions[module] = "not installed"
    print(f"torch {torch.__version__}; " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    print(f"{'library':<30} {'lines':>5}  {'0 workers, no augmentation':<30} {'2 workers, random augmentation':<30}")
    for name in args.only:
        python = args.ours_python if name == "ours" else sys.executable
        cells = []
        for workers, augment in ((0, False), (2, True)):
            base = root / f"{name}-{workers}".replace(" ", "_").replace(",", "")
            run(python, name, base / "whole", 0, workers, augment)
            killed = run(python, name, base / "cut", 15, workers, augment) == -9
            run(python, name, base / "cut", 0, workers, augment)
            a, b = (torch.load(base / run_name / "final.pt", weights_only=True) for run_name in ("whole", "cut"))
            diff = max((a[k] - b[k]).abs().max().item() for k in a)
            cells.append(("NOT KILLED " if not killed else "") +
                         ("bitwise identical" if diff == 0 else f"differs, max |dw| {diff:.2g}"))
        print(f"{name:<30} {user_lines(SCRIPTS[name]):>5}  {cells[0]:<30} {cells[1]:<30}", flush=True)
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
