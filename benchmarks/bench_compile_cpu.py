"""What `torch.compile` (inductor) costs on this CPU, for chapter 7: the spiral run through `fit()`, eager and compiled.

Each run is a fresh Python process with an empty inductor cache, 5 epochs, one thread. From the trainer's
`metrics.jsonl` (wall-clock time at each epoch's end): the first epoch's seconds (for the compiled run, the
whole code generation), the later epochs' mean, and the final validation loss. Too slow for a notebook
(the compiled first epoch alone takes longer than the whole chapter), so chapter 7 prints this record.

Run: python benchmarks/bench_compile_cpu.py  (rewrites course_utils/chapters/results/compile_cpu.json)
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "course_utils" / "chapters" / "results" / "compile_cpu.json"
EPOCHS = 5
CHILD = """
import contextlib, io, sys
from course_utils.production import FitConfig, fit
with contextlib.redirect_stdout(io.StringIO()):
    fit(FitConfig(out=sys.argv[1], epochs={epochs}, compile=sys.argv[2] == "compiled", threads=1, progress=False,
                  tensorboard=False))
"""


def cpu_name() -> str:
    """The CPU's model name (Linux), else the platform's processor string."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def one_run(mode: str) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(Path(folder) / "inductor"), "OMP_NUM_THREADS": "1",
               "PYTHONPATH": str(ROOT)}
        subprocess.run([sys.executable, "-c", CHILD.format(epochs=EPOCHS), str(Path(folder) / "run"), mode],
                       check=True, env=env, cwd=ROOT)
        rows = [json.loads(line) for line in (Path(folder) / "run" / "metrics.jsonl").read_text().splitlines()]
    elapsed = [row["elapsed_s"] for row in rows]
    return {"mode": mode, "first_epoch_s": elapsed[0], "later_epoch_s": (elapsed[-1] - elapsed[0]) / (len(elapsed) - 1),
            "final_val_loss": rows[-1]["val_loss"]}


def main() -> None:
    load = os.getloadavg()[0]
    runs = [one_run(mode) for mode in ("eager", "compiled")]
    record = {"cpu": cpu_name(), "cores": os.cpu_count(), "load_average_1min": round(max(load, os.getloadavg()[0]), 2),
              "torch": torch.__version__, "date": datetime.date.today().isoformat(), "epochs": EPOCHS, "threads": 1,
              "runs": runs}
    RECORD.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
