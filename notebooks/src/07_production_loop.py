# %% [markdown]
# # Chapter 7: The production loop
#
# **After this chapter you can** build the training loop that survives real runs, one component at a
# time, and say what each component costs and what it prevents: checkpoints that resume exactly, safe
# loading, early stopping, gradient accumulation, mixed precision, clipping, a NaN guard, seeding,
# logging, learning-rate schedules, `torch.compile` and scale-out with `torchrun`.
#
# Two tools carry the chapter. The **flowchart** assembles the loop's code from the components you
# switch on, and that exact code runs. The course's **production trainer**
# (`course_utils.production.fit`, also `python -m course_utils.train`) is the full loop; every
# component below is shown doing its job on a real run of it. A few sections start with a question,
# "Predict before you run the next cell": the measurement under it stays hidden until you press **Check**
# (or **Show the measurement**), so Run All does not give it away.

# %%
from course_utils import setup_notebook
setup_notebook()

import contextlib
import io
import json
import math
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
from IPython.display import display
from torch.utils.data import TensorDataset

from course_utils.engine.data import spiral_splits
from course_utils.chapters.ch07_flowchart import KEYS, assemble, load_fit
from course_utils.chapters.ch07_flowchart_costs import one_process_group_env
from course_utils.engine.models import MLP
from course_utils.infra.notebook import sig
from course_utils.production import FitConfig, UnsafeCheckpointError, fit
from course_utils.production import load_checkpoint as course_load_checkpoint   # exercise 7.1: your own
from course_utils.widgets.predict_view import answer, predict

RUNS = Path("runs/ch07")  # every run of this chapter writes here (relative: printed paths stay short)
shutil.rmtree(RUNS, ignore_errors=True)
SPLITS = spiral_splits(384, 128, seed=0)


def quiet_fit(**config):
    """The production trainer, its notices kept out of the way (we print what matters).

    Returns (result, what it said): its printed lines, then its warnings (a resume after a kill that landed
    mid-save warns that it set the half-written checkpoint aside; whether a kill lands there is chance).
    """
    with contextlib.redirect_stdout(io.StringIO()) as said, warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        result = fit(FitConfig(threads=1, progress=False, tensorboard=False, **config))
    return result, "\n".join([said.getvalue().rstrip("\n"), *(f"warning: {w.message}" for w in warned)])


def flow_run(components, train=SPLITS.train, **options):
    """Run the flowchart's assembled loop for these components on the spiral; returns (model, history)."""
    fit_loop = load_fit(components)
    options.setdefault("epochs", 4)
    options.setdefault("batch_size", 32)
    torch.manual_seed(0)
    with one_process_group_env():
        return fit_loop(lambda: MLP(hidden=32), train, SPLITS.val, **options)


def final_weights(path):
    return torch.load(path, weights_only=True)

# %% [markdown]
# ## 1. Where we start: the minimal loop
#
# This is chapter 3's loop plus chapter 4's validation, written as a function. It is what the
# flowchart assembles with every component switched off. Its `evaluate` is chapter 4's (eval mode, no graph,
# the loss averaged per example, then back to train mode); here is `fit`, the part every component below
# adds a few lines to:

# %%
minimal_loop = assemble(())
print(minimal_loop[minimal_loop.index("def fit("):])

# %% [markdown]
# It trains. The code above is executed as printed (`load_fit` runs the assembled text):

# %%
_, minimal_history = flow_run(())
for row in minimal_history:
    print(f"epoch {row['epoch']}: updates {row['updates']}, val loss {sig(row['val_loss'])}, "
          f"val accuracy {sig(row['val_acc'])}")

# %% [markdown]
# ## 2. The flowchart
#
# Tick a component: its boxes light up in the flowchart, and its lines appear in the code, tinted in
# its colour. Grey dashed boxes are components that are off. The code under the flowchart is exactly
# the code that runs for that combination; the course's tests execute it for every single component and
# for all of them together.

# %%
from course_utils.widgets.flowchart_view import flowchart_view
flowchart_view("seed", "checkpoint")

# %% [markdown]
# With every component on, the loop is more than three times as long. It still runs; here it is
# on the spiral, in one process (scale-out with a single rank, `torch.compile` with its `eager` backend so
# the cell stays fast):

# %%
from course_utils.chapters.ch07_flowchart import code_lines
print(f"{code_lines(KEYS)} lines with all {len(KEYS)} components, {code_lines(())} in the minimal loop "
      f"(blank lines not counted)")
_, history = flow_run(KEYS, out=str(RUNS / "flowchart-full"), batch_size=8, epochs=6, lr=0.02,
                      compile_backend="eager")
print("epochs run:", len(history), " final val accuracy:", sig(history[-1]["val_acc"]))
print("files written:", sorted(p.name for p in (RUNS / "flowchart-full" / "checkpoints").iterdir()))

# %% [markdown]
# ## 3. Seeding
#
# **Problem:** two runs of the same code give different numbers, so nobody can check a result.
# **Lines:** `seed_everything(seed)` (Python's `random`, NumPy, torch and every GPU) and a `torch.Generator`
# for the shuffle. Whatever happened before the call, the seeded loop gives the same run:

# %% tags=["answers-seeding"]
runs = []
for before in (1, 2):
    torch.manual_seed(before)  # some earlier, different use of the random streams
    runs.append(load_fit(["seed"])(lambda: MLP(hidden=32), SPLITS.train, SPLITS.val, epochs=1))
print("seeded runs identical:", runs[0][1] == runs[1][1])
unseeded = []
for before in (1, 2):
    torch.manual_seed(before)
    unseeded.append(load_fit(())(lambda: MLP(hidden=32), SPLITS.train, SPLITS.val, epochs=1))
print("unseeded runs identical:", unseeded[0][1] == unseeded[1][1])

# %% [markdown]
# "Everything is seeded" is a claim about three streams. torch draws initial weights, shuffles and dropout
# masks from its own; augmentation libraries and helpers often draw from NumPy's global stream or from Python's
# `random`. A tiny run whose augmentation uses all three (noise from torch, a scale from NumPy, a flip from
# `random`), run twice for every choice of streams seeded, the others starting as two different processes would:

# %% tags=["answers-seed-streams"]
from course_utils.chapters.ch07_seed_streams import seed_stream_lines

print("\n".join(seed_stream_lines()))

# %% [markdown]
# Only all three together repeat the run (in the main process: DataLoader workers seed Python's `random` and
# NumPy from torch's seed themselves). When seeded runs still differ on the CPU, look for the stream you did not
# seed (a library's own `random.random()`, a NumPy call in code the main process runs) before suspecting the
# kernels; `seed_everything` seeds all three. (A NumPy `Generator` from `default_rng()` has a seed of its own.) On a GPU, non-deterministic kernels are a further cause (below).

# %% [markdown]
# One trap hides in every DataLoader. Starting an epoch draws a base seed for the workers, from the
# loader's own `generator` if it has one, else from torch's **global** stream, even with `shuffle=False`
# and no workers. So a validation pass through a loader without a generator moves the global stream, and
# the next epoch's shuffle and dropout masks change whenever you add, remove or move an evaluation. That is
# why the trainer gives its validation loader a generator of its own:

# %%
val_set = SPLITS.val
for name, generator in [("no generator", None), ("its own generator", torch.Generator().manual_seed(0))]:
    before = torch.get_rng_state()
    for _ in torch.utils.data.DataLoader(val_set, batch_size=64, shuffle=False, generator=generator):
        pass
    print(f"one unshuffled pass, {name:<17}: torch's global stream moved: {not torch.equal(before, torch.get_rng_state())}")

# %% [markdown]
# On a GPU there are more switches. `torch.backends.cudnn.benchmark = True` times several convolution
# algorithms for each input shape and keeps the fastest: quick, but the winner can differ from one run (or
# one restart) to the next. `torch.use_deterministic_algorithms(True)` makes every operation either
# deterministic or raise an error naming it; on CUDA it also needs the environment variable
# `CUBLAS_WORKSPACE_CONFIG=:4096:8`, set before CUDA starts, or cuBLAS matrix multiplies raise.
# `cudnn.deterministic = True` is the older, convolution-only switch. Deterministic kernels can be slower.
#
# Such a kernel changes a result in its last bit, and two runs that agree for their first iterations then drift
# apart. How far a last-bit difference travels depends on the run, as a CPU shows: the first layer's weights moved
# to the next float32 (each a change under 1e-7), the same batches, SGD with momentum at two learning rates, 800 steps,
# 5 seeds, counted at steps 1, 10, 100 and 800:

# %% tags=["answers-last-bit-drift"]
from course_utils.chapters.ch07_last_bit_drift import drift_counts

for lr in (0.05, 0.2):
    d = drift_counts(lr)
    print(f"lr {lr}: both runs trained on {d['trained']} of {d['seeds']} seeds")
    print(f"  losses equal to 4 decimals (seeds, by step): {d['same printed loss']}")
    print(f"  largest weight difference under 1e-4: {d['weights apart by < 1e-4']}; over 1e-2: "
          f"{d['weights apart by > 1e-2']}")

# %% [markdown]
# At lr 0.05 the difference stays small: the training pulls the two runs together about as fast as the rounding
# pushes them apart. At lr 0.2, also a run that trains, the steps amplify it: the losses agree to every printed
# digit for 100 steps, and by step 800 the weights differ by more than 1e-2. Bitwise-equal runs need every
# operation deterministic; a run that is not will drift, and how fast says how chaotic its training is, not that
# something is broken.
#
# ## 4. Checkpoints, and a resume that changes nothing
#
# **Problem:** a crash or a time limit throws away hours of work. A checkpoint must hold *everything*
# the next update depends on, or the resumed run quietly differs from the one that was not
# interrupted. The trainer writes each checkpoint durably (its checksum first, then the file: each a temporary
# file in the same folder, fsync, `os.replace`, an fsync of the folder), so a kill leaves the new checkpoint
# whole or absent, and keeps the last few plus the best. Training does not wait for the disk: it copies the
# state in memory, and a second thread serialises and writes it. A `--resume` that finds checkpoints and can
# use none of them stops (exit code 2) instead of starting over: it sets them aside and says why.
#
# The experiment: the same configuration twice, side by side. Once as a separate process
# (`python -m course_utils.train`), which a watching thread kills with `SIGKILL` as soon as a checkpoint is
# on disk (mid-epoch); meanwhile once in this kernel, uninterrupted. Then the killed run is resumed.

# %%
CONFIG = dict(epochs=3, n_train=300, n_val=150, batch_size=16, accum_steps=2, dropout=0.1, optimizer="adamw",
              schedule="onecycle", checkpoint_every=3)


def kill_once_checkpointed(process, folder):
    """SIGKILL `process` as soon as a checkpoint is in `folder`; its exit code (-9 when killed).

    While we look, the process is frozen (SIGSTOP), so it cannot run to its end between our look and the kill.
    """
    while process.poll() is None:
        os.kill(process.pid, signal.SIGSTOP)
        if list(folder.glob("last-*.pt")):
            process.kill()                        # SIGKILL: no handler runs, nothing is cleaned up
            return process.wait()
        os.kill(process.pid, signal.SIGCONT)
        time.sleep(0.01)
    return process.returncode


flags = ["--epochs", "3", "--n-train", "300", "--n-val", "150", "--batch-size", "16", "--accum-steps", "2",
         "--dropout", "0.1", "--optimizer", "adamw", "--schedule", "onecycle", "--checkpoint-every", "3",
         "--threads", "1", "--no-progress", "--no-tensorboard"]
env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path.cwd().parent)}
process = subprocess.Popen([sys.executable, "-m", "course_utils.train", "--out", str(RUNS / "cut"), *flags],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
checkpoints = RUNS / "cut" / "checkpoints"
watcher = ThreadPoolExecutor(1).submit(kill_once_checkpointed, process, checkpoints)   # at its first checkpoint
whole, _ = quiet_fit(out=str(RUNS / "whole"), **CONFIG)             # meanwhile, in this kernel: never interrupted
print("the second run was killed:", watcher.result() == -signal.SIGKILL)
print("a checkpoint was on disk:", bool(list(checkpoints.glob("last-*.pt"))))
print("it had not finished:", not (RUNS / "cut" / "model.pt").exists())

resumed, said = quiet_fit(out=str(RUNS / "cut"), resume=True, **CONFIG)
# the resume's own line (a kill that lands mid-save also gets a line about the half-written file it removed)
resumed_at = next((line for line in said.splitlines() if line.startswith("resumed from")), "")
print("resumed from a checkpoint:", resumed_at.startswith("resumed from"))
print("in the middle of an epoch:", " after 0 batches" not in resumed_at and " batches" in resumed_at)

# %% tags=["nbval-ignore-output"]
print(resumed_at)  # where exactly depends on how far the killed run got: here, and on your machine

# %% tags=["answers-resume-exact"]
def metrics(run):
    """metrics.jsonl, wall-clock time aside."""
    lines = (RUNS / run / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k != "elapsed_s"} for line in lines]


a, b = final_weights(RUNS / "whole" / "model.pt"), final_weights(RUNS / "cut" / "model.pt")
print("final weights bitwise identical:", all(torch.equal(a[k], b[k]) for k in a))
print("metrics.jsonl identical, line for line:", metrics("whole") == metrics("cut"))
for row in metrics("cut"):
    print(f"epoch {row['epoch']}: updates {row['updates']}, val loss {sig(row['val_loss'])}, "
          f"val accuracy {sig(row['val_acc'])}")

# %% [markdown]
# What made that possible is in the checkpoint. Besides the weights:

# %%
newest = sorted(checkpoints.glob("last-*.pt"))[-1]
state = course_load_checkpoint(newest)
print(sorted(k for k in state if k != "model"))
print("random streams saved per rank:", sorted(state["ranks"][0]["rng"]))

# %% [markdown]
# Leave one of them out and the resumed run is another run. The weights alone, with a fresh optimizer, is the
# most common partial checkpoint: a fresh Adam has no moments, so its first update moves every weight it moves
# by the whole learning rate, whatever the gradient's size, and throws a converged model back up its valley. Full-batch
# Adam on the spiral, 150 updates, then 200 more three ways, over five seeds:

# %% tags=["answers-resume-partial"]
from course_utils.chapters.ch07_checkpoint_travel import resume_without_optimizer_lines

print("\n".join(resume_without_optimizer_lines(seeds=range(5))))

# %% [markdown]
# Here a fresh Adam cost a detour, not the run: the loss climbed to at least twice the uninterrupted run's, then
# came back to within a factor 3 of it on every seed. Where it lands is not the uninterrupted run's point, and the
# line counts only a bound that does not depend on a seed's last bits. How long the detour lasts depends on the
# learning rate and the model; only this spiral was run. Keeping the optimizer's state avoids the question.
#
# The schedule's position is the next piece people leave out: the scheduler is built again in the resumed script,
# and its state is not loaded. Full-batch Adam on the spiral under the usual hand-written LambdaLR (10 updates of
# warmup, then a cosine to 0 at update 300, peak lr 0.05), a checkpoint after 250 updates, the last 50 three
# ways, five seeds:

# %% tags=["answers-resume-schedule"]
from course_utils.chapters.ch07_checkpoint_travel import schedule_resume_lines

print("\n".join(schedule_resume_lines(seeds=range(5))))

# %% [markdown]
# A scheduler built anew starts its warmup again and climbs back to the peak, so a run that was annealing gets
# the full learning rate on a model near its minimum: on the seeds counted above the loss shot up by 10x or more
# (what learners report as "the loss got worse right after resuming"). Here the scheduler is built before
# `optimizer.load_state_dict`, so the first resumed update still used the saved rate (the load restores each
# group's `lr`) and the rebuilt scheduler's first `step()` overwrote it; built after the load, the scheduler's
# constructor sets the restarted warmup's rate at once (the fifth line). A lower final training loss on some seeds is no comfort: the extra updates at a high rate fit
# the training set further, and it is no longer the run that was planned. Passing `last_epoch=249` instead of
# loading the state needs `initial_lr` in each group and raises a KeyError on a fresh optimizer (the
# `scheduler-last-epoch-without-initial-lr` entry in this chapter's errors). Stepped past its end, the same
# LambdaLR climbs back up: a finished cosine run resumed for more updates needs a new schedule, not more steps of
# the old one. What leaving out the scaler's scale or the random streams does is not run here; the trainer saves
# them all, which is why its resume above changed nothing.
#
# **What "bitwise" needs on a GPU.** This chapter proves exact resume on a CPU. On a GPU the same guarantee
# needs four more things. The notebooks run on a CPU; the GPU figures later in this chapter are a record
# of `benchmarks/bench_cuda.py`, which times steps and has no kill-and-resume run, so none of these four
# was measured by the course:
#
# - the same hardware and software: GPU model, driver, CUDA, cuDNN and torch versions (other kernels round
#   differently);
# - `torch.backends.cudnn.benchmark = False`, because after a restart the autotuner runs again and may pick
#   another convolution algorithm;
# - deterministic kernels, `torch.use_deterministic_algorithms(True)` with `CUBLAS_WORKSPACE_CONFIG=:4096:8`
#   in the environment: operations built on atomic adds otherwise sum in a different order on every run;
# - the same world size: it decides each rank's shard and the order of the all-reduce sums (the trainer
#   refuses to resume with another one).
#
# The trainer's `--deterministic` (`FitConfig(deterministic=True)`) does the second and third for the run
# and puts the settings back when it returns; on CUDA it refuses to start, in one line and with exit code 2,
# unless `CUBLAS_WORKSPACE_CONFIG` is set, since cuBLAS reads it only once.
#
# ### Checkpoints that travel
#
# A checkpoint records the device of every tensor it holds. This CPU cannot write a GPU checkpoint, so the
# next cell writes one the way a GPU machine's `torch.save` does, every tensor tagged `cuda:0` (torch's
# `serialization.register_package` chooses the tag), and loads it here. Then the optimizer: its
# `load_state_dict` moves each state tensor to its parameter's device and dtype *when it loads*. A CPU has
# one device, so dtype stands in for it (the same line of torch converts both): weights moved to float64
# before or after loading float32 state.

# %%
predict(7, "ckpt-travel")

# %% tags=["answers-ckpt-map-location", "answers-ckpt-optimizer-device"]
from course_utils.chapters.ch07_checkpoint_travel import travel

with answer(7, "ckpt-travel"):
    print(travel().text())

# %% [markdown]
# - `torch.load` puts every tensor back on the device its tag names, and a machine without CUDA refuses
#   (`RuntimeError`). `map_location="cpu"` (or `"cuda:1"`, or a dict from tag to device) remaps each tensor
#   as it loads; the values are unchanged. The trainer always loads with `map_location="cpu"`, then moves
#   what it needs.
# - The order that works: build the model, **move it** to its device, build the optimizer over its
#   parameters, **then** `optimizer.load_state_dict(...)`, which puts the state beside each parameter.
#   Moved after loading, the weights leave their Adam moments behind, and the next step fails. On a GPU
#   that is a CPU moment beside a CUDA weight; this machine showed the same mismatch in dtype, and the GPU
#   case was not run here.

# %% [markdown]
# ## 5. Safe loading: `weights_only=True`
#
# The source article saves NumPy's random state as it comes (a tuple holding an `ndarray`) and then
# loads with `weights_only=False`. Since torch 2.6 the default is `weights_only=True`, which only
# accepts tensors and plain Python values. Such a checkpoint fails to load:

# %%
seed_style = RUNS / "seed-style.pt"
torch.save({"model": MLP().state_dict(), "numpy_rng": np.random.get_state()}, seed_style)
try:
    torch.load(seed_style, weights_only=True)
except pickle.UnpicklingError as error:
    print("weights_only=True refuses it:", type(error).__name__, "| mentions numpy:", "numpy" in str(error))

# %% [markdown]
# Why not just pass `weights_only=False`? Because unpickling can run any code. A file is all it takes:


# %% tags=["answers-weights-only"]
class Payload:
    """What an attacker (or a corrupted tool) can put in a .pt file: a call that runs while loading."""

    def __reduce__(self):
        return (Path.write_text, (Path(RUNS / "pwned.txt"), "this ran while loading a checkpoint"))


torch.save({"model": MLP().state_dict(), "extra": Payload()}, RUNS / "evil.pt")
try:
    torch.load(RUNS / "evil.pt")                  # no weights_only: torch 2.6 made True the default
except pickle.UnpicklingError:
    print("torch.load(path), weights_only not given: refused (the default is True); code ran:",
          (RUNS / "pwned.txt").exists())
try:
    torch.load(RUNS / "evil.pt", weights_only=True)
except pickle.UnpicklingError:
    print("weights_only=True: refused; code ran:", (RUNS / "pwned.txt").exists())
torch.load(RUNS / "evil.pt", weights_only=False)
print("weights_only=False: loaded;  code ran:", (RUNS / "pwned.txt").exists())

# %% [markdown]
# The fix is to store NumPy's state as plain lists (the trainer does), so `weights_only=True` needs no
# allowlist. And when `--resume` meets such a file, the trainer refuses with one line naming it, and
# runs nothing from it:

# %%
folder = RUNS / "refused" / "checkpoints"
folder.mkdir(parents=True)
import hashlib
payload = (RUNS / "evil.pt").read_bytes()
(folder / "last-e0000-s000003.pt").write_bytes(payload)
(folder / "last-e0000-s000003.pt.sha256").write_text(f"sha256 {hashlib.sha256(payload).hexdigest()} {len(payload)}\n")
(RUNS / "pwned.txt").unlink()
try:
    quiet_fit(out=str(RUNS / "refused"), resume=True, epochs=1, n_train=60)
except UnsafeCheckpointError as error:
    print(str(error).splitlines()[0][:160])
print("code ran:", (RUNS / "pwned.txt").exists())

# %% [markdown]
# ### Loading into another model, and what a checkpoint file holds
#
# Three more things a checkpoint meets when it leaves the run that wrote it. A head with more classes: a
# tensor of another shape is an error even with `strict=False` (which only forgives missing and unexpected
# keys), so leave those keys out. A whole model saved with `torch.save(model)`: the file names the model's
# class by module and name, and loading must find that class. And an optimizer's `state_dict` (tensors,
# numbers, lists): plain data, which `weights_only=True` loads.

# %% tags=["answers-ckpt-head-size", "answers-ckpt-whole-model", "answers-ckpt-optimizer-weights-only"]
from torch import nn


class Classifier(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.body, self.head = nn.Linear(8, 16), nn.Linear(16, classes)

    def forward(self, x):
        return self.head(self.body(x).relu())


torch.manual_seed(0)
old, bigger = Classifier(23), Classifier(26)
try:
    bigger.load_state_dict(old.state_dict(), strict=False)
except RuntimeError as error:
    print("strict=False, head of 23 into 26: RuntimeError:", error)
shapes = {k: v.shape for k, v in bigger.state_dict().items()}
same_shape = {k: v for k, v in old.state_dict().items() if shapes.get(k) == v.shape}
print("filtered to the tensors of equal shape:", bigger.load_state_dict(same_shape, strict=False),
      "| body copied:", torch.equal(bigger.body.weight, old.body.weight))

whole = io.BytesIO()
torch.save(old, whole)
del Classifier                                   # what a script that does not define or import it sees
try:
    torch.load(io.BytesIO(whole.getvalue()))
except pickle.UnpicklingError as error:
    print("torch.save(model), loaded with the default weights_only=True:",
          next(line.strip() for line in str(error).splitlines() if "Unsupported global" in line).split(" Please")[0])
try:
    torch.load(io.BytesIO(whole.getvalue()), weights_only=False)
except AttributeError as error:
    print("the same with weights_only=False: AttributeError:", error)

optimizer = torch.optim.Adam(old.parameters(), lr=1e-3)
old(torch.randn(4, 8)).sum().backward()
optimizer.step()
saved = io.BytesIO()
torch.save({"model": old.state_dict(), "optimizer": optimizer.state_dict()}, saved)
back = torch.load(io.BytesIO(saved.getvalue()), weights_only=True)["optimizer"]
state = optimizer.state_dict()
print("weights_only=True: the optimizer's state loads, every tensor equal:",
      all(torch.equal(back["state"][i][k], state["state"][i][k]) for i in state["state"] for k in state["state"][i]),
      "| param_groups equal:", back["param_groups"] == state["param_groups"])

# %% [markdown]
# A fine-tuned head starts from its new random initialisation while the body keeps its weights; that is what
# the filtered `state_dict` gives (`missing_keys` lists exactly the head). `torch.save(model)` stores a
# reference to `__main__.Classifier`, not its code: loaded from a script, a notebook or a machine where that name
# does not resolve (a class defined in a notebook, a library such as timm not installed), it fails, and
# `weights_only=True` refuses any class not on its allowlist first. Save `model.state_dict()` and rebuild the
# model in code: it loads anywhere the code runs.

# %% [markdown]
# ## 6. Early stopping
#
# **Problem:** training goes on after validation stopped improving, wasting time and over-fitting.
# **Lines:** keep the best metric and count validation checks without a strict improvement (by more than
# `min_delta`); stop after `patience` of them, or at once on a NaN/Inf metric (PyTorch Lightning's rules).
# A small training set over-fits fast:

# %%
stopped, _ = quiet_fit(out=str(RUNS / "early"), epochs=60, n_train=40, n_val=200, lr=0.03, patience=3)
print("stop reason:", stopped.stop_reason.split(":")[0], "| epochs run:", stopped.epochs_completed, "of 60")
best, waited, expected = math.inf, 0, None  # the rule, counted by hand over the run's own history
for row in stopped.history:
    if row["val_loss"] < best:
        best, waited = row["val_loss"], 0
    else:
        waited += 1
    if waited == 3:
        expected = row["epoch"]
        break
print("a counted loop stops at the same epoch:", expected == stopped.epochs_completed)
print("best val loss", sig(best), "at epoch", stopped.best["epoch"],
      "| last val loss", sig(stopped.history[-1]["val_loss"]))

# %% [markdown]
# Stopping is half the job: the last weights are the over-fitted ones, three checks past the best. So the
# trainer **delivers the best**: with early stopping on, `model.pt` holds the weights of the best
# validation checkpoint (whether or not the run stopped early), `model-last.pt` the last weights, and
# `fit()` says which one it delivered (Keras calls this `restore_best_weights`; Lightning leaves it to a
# `ModelCheckpoint` callback and `ckpt_path="best"`). Evaluated afresh on the validation set:

# %% tags=["answers-early-stopping"]
def val_loss_of(path, n_val=200):
    """Validation loss of saved MLP weights on the run's validation set (chapter 4's evaluation)."""
    model = MLP()
    model.load_state_dict(final_weights(path))
    model.eval()
    x, y = spiral_splits(40, n_val, seed=0).val.tensors
    with torch.no_grad():
        return torch.nn.functional.cross_entropy(model(x), y).item()


delivered, last = val_loss_of(RUNS / "early" / "model.pt"), val_loss_of(RUNS / "early" / "model-last.pt")
print("fit delivered:", stopped.delivered, "| model.pt's val loss is the best one:", math.isclose(delivered, best,
                                                                                               rel_tol=1e-5))
print("model-last.pt's val loss is the last epoch's:", math.isclose(last, stopped.history[-1]["val_loss"],
                                                                     rel_tol=1e-5))
print("the delivered weights are better than the last on this validation set:", delivered < last)

# %% [markdown]
# That last line cannot fail: validation chose `model.pt` because its loss there was the lowest. Choosing by
# validation makes the validation score optimistic. Whether the choice generalises shows on data that played
# no part in it. The same run on five seeds, each scored on a fresh draw of 3,000 spiral points:

# %%
def fresh_scores(path, seed):
    """(loss, accuracy) of saved MLP weights on 3,000 fresh spiral points (another seed's draw)."""
    model = MLP()
    model.load_state_dict(final_weights(path))
    model.eval()
    x, y = spiral_splits(40, 3000, seed=seed).val.tensors
    with torch.no_grad():
        logits = model(x)
    return torch.nn.functional.cross_entropy(logits, y).item(), (logits.argmax(1) == y).float().mean().item()


epochs_run, best_at, lower_loss, accuracy_gap = [], [], 0, []
for seed in range(5):
    folder = RUNS / ("early" if seed == 0 else f"early-seed{seed}")
    run = stopped if seed == 0 else quiet_fit(out=str(folder), epochs=60, n_train=40, n_val=200, lr=0.03,
                                              patience=3, seed=seed)[0]
    epochs_run.append(run.epochs_completed)
    best_at.append(run.best["epoch"])
    (best_loss, best_acc), (last_loss, last_acc) = (fresh_scores(folder / name, 100 + seed)
                                                    for name in ("model.pt", "model-last.pt"))
    lower_loss += best_loss < last_loss
    accuracy_gap.append(best_acc - last_acc)
print("seeds 0-4: stopped after epoch", epochs_run, "| best validation loss at epoch", best_at)
print(f"on fresh points the delivered weights have the lower loss: {lower_loss} of 5")
print(f"fresh accuracy, delivered against last: higher by more than 1 point on "
      f"{sum(g > 0.01 for g in accuracy_gap)} of 5, within 1 point on {sum(abs(g) <= 0.01 for g in accuracy_gap)}, "
      f"lower by more than 1 point on {sum(g < -0.01 for g in accuracy_gap)}")

# %% [markdown]
# On fresh points the delivered weights keep the lower loss on every seed, but the accuracy, which validation
# did not choose by, goes either way. The first line is a warning of its own: seed 0
# trained for 22 epochs, the other four stopped within 6, their best check at epoch 3 or earlier. With 40
# examples an epoch is 2 updates; the validation loss wobbles by more than it improves while the training loss
# keeps falling, so a patience of 3 checks stopped those runs before they had learned much. Patience is counted
# in validation checks: size it in updates, and look at more than one seed. A final figure to report needs a test set
# that no choice ever looked at (chapter 8 scores its runs that way).

# %% [markdown]
# ## 7. Gradient accumulation
#
# **Problem:** the batch you want does not fit in memory. **Lines:** run K micro-batches, weight each
# micro-batch's mean loss by its share of the window's examples, step once per window, and flush a
# short last window at the end of the epoch. With 200 examples, micro-batches of 8 and K=4, the epoch
# ends with a window of one micro-batch. Against one big batch of 32 on the same examples in the same
# order:

# %% tags=["answers-accumulation-trainer"]
small, _ = quiet_fit(out=str(RUNS / "accumulated"), epochs=2, n_train=200, batch_size=8, accum_steps=4)
big, _ = quiet_fit(out=str(RUNS / "big-batch"), epochs=2, n_train=200, batch_size=32)
a, b = final_weights(RUNS / "accumulated" / "model.pt"), final_weights(RUNS / "big-batch" / "model.pt")
print("updates:", small.updates, "accumulated vs", big.updates, "big batch")
print("largest weight difference < 1e-5:", max((a[k] - b[k]).abs().max().item() for k in a) < 1e-5)

# %% [markdown]
# ### Tokens, not examples: accumulation with padding
#
# Weighting by examples is right when the loss is a mean over examples. A language model's loss is a mean
# over *tokens*: sequences of different lengths, padded to the longest in their micro-batch, the padding
# left out (`ignore_index`). One big batch then averages over every real token of the window. Four
# micro-batches of four sequences, 1 to 24 tokens each:

# %%
predict(7, "token-accum")

# %% tags=["answers-accum-token-weighted"]
from course_utils.chapters.ch07_token_weighting import token_weighting

with answer(7, "token-accum"):
    print(token_weighting().text())

# %% [markdown]
# Each micro-batch's mean gives each of its tokens the weight 1/(its own token count): a token of a short
# micro-batch counts more than a token of a long one. The fix needs the window's token count *before* the
# first backward: count the real tokens of all K micro-batches (their masks are enough), then backward
# each micro-batch's summed token loss divided by that count (`reduction="sum"`). Or, without the count
# in advance (fairseq's way, the last line): backward each micro-batch's token sum as it is, and divide the
# gradients by the window's token count once, after the last backward and before the step (before clipping, so
# that the clip sees the mean's gradient). Nothing is divided by K anywhere. The trainer weights by
# examples, so for a token loss over padded sequences it is not the big batch; neither is any
# accumulation with BatchNorm, whose statistics see one micro-batch at a time (chapter 0). Exercise 7.5
# below has you write the token rule.
#
# Under DDP the same bias comes back across ranks: DDP averages the W ranks' gradients, so a rank that divides
# by its own window's token count makes each update a mean of per-rank means (chapter 4's bias). All-reduce the
# window's token count first (N, over every rank), and backward each rank's token sum times W / N: the W
# undoes DDP's averaging (the Hugging Face Trainer's `average_tokens_across_devices` does this).

# %% [markdown]
# ## 8. Mixed precision (bf16 autocast on the CPU)
#
# **Problem:** float32 everywhere costs time and memory. **Lines:** run the forward pass and the loss
# under `torch.autocast(device, dtype=torch.bfloat16)`. bf16 keeps float32's exponent range, so it needs no
# `GradScaler`; fp16 (CUDA) needs one, with `scaler.unscale_(optimizer)` before clipping. The weights stay
# float32. Memory here is what autograd keeps for backward (the course's meter), the same work both times:

# %%
from course_utils.engine.memory import GraphMemoryMeter

precision = {}
for batch, hidden in [(16, 64), (512, 128)]:
    for amp in ("none", "bf16"):
        meter = GraphMemoryMeter()
        start = time.perf_counter()
        with meter:
            result, _ = quiet_fit(out=str(RUNS / f"amp-{amp}-{batch}"), epochs=2, n_train=1024, n_val=256,
                                  batch_size=batch, hidden=hidden, amp=amp)
        precision[batch, amp] = (time.perf_counter() - start, meter.peak, result.final)
for (batch, amp), (_, peak, final) in precision.items():
    print(f"batch {batch:>3}, {amp:>4}: graph memory peak {sig(peak / 1024, 3)} KiB, "
          f"final val loss {sig(final['val_loss'], 2)}")
for batch in (16, 512):
    print(f"batch {batch}: bf16 keeps {sig(precision[batch, 'bf16'][1] / precision[batch, 'none'][1], 2)} "
          f"of float32's bytes for backward")

# %% tags=["nbval-ignore-output"]
for (batch, amp), (seconds, _, _) in precision.items():
    print(f"batch {batch:>3}, {amp:>4}: {seconds:.2f} s for the run (this machine's CPU, 1 thread, shared with others)")

# %% [markdown]
# With a big batch, bf16 activations halve what backward keeps. With a tiny batch there is no saving:
# autocast also keeps the bf16 copies of the weights it made, and those outweigh the small activations.
# Whether bf16 is faster on a CPU depends on the processor's bf16 support.
#
# On a GPU the point of lower precision is speed: tensor cores. One training step of a wide MLP through
# the trainer's own precision policy (`course_utils.production.amp.Precision`), measured on a GPU machine
# by `benchmarks/bench_cuda.py` (this notebook runs on a CPU, so it prints the record):

# %%
from course_utils.chapters import gpu_figures

print(gpu_figures.provenance())
print("\n".join(gpu_figures.precision_lines()))

# %% [markdown]
# - Plain float32 matrix multiplies do not use tensor cores: TF32 (a 10-bit mantissa) is off for them by
#   default. Allow it with `torch.set_float32_matmul_precision("high")`, the spelling torch's own messages
#   suggest (or the older `torch.backends.cuda.matmul.allow_tf32 = True`); bf16 and fp16 autocast are faster
#   still. The weights stay float32. Since torch 2.9 the CUDA notes document a newer spelling per backend,
#   `torch.backends.cuda.matmul.fp32_precision = "tf32"` (or `"ieee"`) and `torch.backends.cudnn.conv.fp32_precision`,
#   and say the `allow_tf32` flags will be deprecated; the cell below prints both spellings.
# - float32 **convolutions** are different: cuDNN may run them in TF32 by default, so a "float32" CNN on an
#   Ampere or later GPU already computes its convolutions with the shorter mantissa. Read from this torch:
# %%
print("cuDNN convolutions may use TF32 (torch.backends.cudnn.allow_tf32):", torch.backends.cudnn.allow_tf32)
print("matrix multiplies may use TF32 (torch.backends.cuda.matmul.allow_tf32):", torch.backends.cuda.matmul.allow_tf32,
      "| float32 matmul precision:", torch.get_float32_matmul_precision())
print("the newer settings: torch.backends.cuda.matmul.fp32_precision =", repr(torch.backends.cuda.matmul.fp32_precision),
      "| torch.backends.cudnn.conv.fp32_precision =", repr(torch.backends.cudnn.conv.fp32_precision))

# %% [markdown]
# - What backward keeps shrinks only when activations dominate (batch 32,768, width 1,024). At batch = width
#   it does not shrink: the 16-bit activations save half of what float32 keeps, and autocast's 16-bit weight
#   copies take that much back. No precision mode lowers the float32 weights, gradients and AdamW state,
#   which is why, at width 4,096, the step's peak does not move at all.
# - fp16 without a scaler: a small loss gives gradients that underflow to exactly zero, so nothing learns.
#   GradScaler multiplies the loss by 65,536 first, and almost every gradient survives.
# - With accumulation, scale every micro-batch's loss (`scaler.scale(loss).backward()`), then unscale, clip,
#   step and update the scaler once per window, at the update. Tick accumulation and mixed precision in the
#   flowchart to see that order.
#
# ### A GradScaler and very large values
#
# fp16's largest finite value is 65,504. The scaler multiplies the *loss*, after the forward pass, so it
# guards the gradients against underflow. What does it do with a forward pass whose values are too large?
# This CPU runs fp16 autocast and `torch.amp.GradScaler("cpu")`, so the whole story runs here: a small
# network (Linear, LayerNorm, ReLU, Linear) on unnormalised inputs (standard deviation 100,000), eight SGD
# updates.

# %%
predict(7, "fp16-overflow")

# %% tags=["answers-fp16-forward-overflow"]
from course_utils.chapters.ch07_precision_pitfalls import forward_overflow, scheduler_warning

with answer(7, "fp16-overflow"):
    print(forward_overflow().text())

# %% [markdown]
# A GradScaler cannot fix a forward value that overflows. Here the overflow comes before the first layer:
# many of these inputs already exceed 65,504 (the first line), and autocast's cast to fp16 turns them into
# inf. (In real networks it is more often an activation that grows inside the network from inputs that fit;
# the cure is the same.) An inf turns into NaN in the normalisation, and a NaN loss has no finite scale: the
# scaler skips the step, halves its scale, and does so at every step. The weights never move, and no warning
# says so: only the loss and the scale do. Three fixes: bf16, whose range is float32's; the overflowing
# operation in float32
# (`with torch.autocast(device, enabled=False):` around it, inputs `.float()`), as the cell did for the first
# layer; or inputs that are normalised in the first place.
#
# ### A correct fp16 loop with a scheduler
#
# GradScaler starts at a scale of 65,536. A loop in the right order, `scaler.step(optimizer)`,
# `scaler.update()`, then `scheduler.step()`, on inputs of standard deviation 10:

# %%
predict(7, "scaler-warning")

# %% tags=["answers-scaler-skip-scheduler-warning"]
with answer(7, "scaler-warning"):
    print(scheduler_warning().text())

# %% [markdown]
# The first scale is often too large: the first fp16 update is skipped while the scaler finds its level.
# The scheduler warns when its first step comes before any `optimizer.step()`, and a skipped step never
# called it. In this loop the warning is harmless: the schedule is one step ahead of the updates made,
# which over thousands of updates does not matter. To keep them equal, and the log quiet, step the
# scheduler only when the scale did not fall (`if scaler.get_scale() >= scale_before: scheduler.step()`),
# as the last line did. On a GPU each `get_scale()` waits for the device (its docstring says it syncs), the
# per-step cost chapter 5 measures: read the scale once per update, after `update()`, and compare with the
# value you kept from the update before. The warning is worth reading in a loop *without* a scaler: there it
# means the calls really are in the wrong order.
#
# Code from before torch 2.4 imports `from torch.cuda.amp import autocast, GradScaler`. That spelling still
# runs but is deprecated; the current one names the device, `torch.autocast("cuda", dtype=...)` and
# `torch.amp.GradScaler("cuda")`. Torch says so itself, even on this CPU:

# %% tags=["answers-autocast-warnings"]
import warnings

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    torch.cuda.amp.GradScaler()
print("torch.cuda.amp.GradScaler() is deprecated, torch says:",
      any("deprecated" in str(w.message) and "torch.amp.GradScaler('cuda'" in str(w.message) for w in caught))

# %% [markdown]
# ### fp16 against bf16: small numbers, and who needs a scaler
#
# fp16's smallest positive number is about 6e-8, and below about 6e-5 it keeps fewer digits; bf16 has
# float32's range (to about 1e-38) with fewer digits everywhere. What that does to small gradients, to Adam's
# `eps`, and to a model converted with `.half()`:

# %% tags=["answers-fp16-underflow", "answers-half-model-scaler"]
print("torch.autocast without a dtype: on cuda", torch.get_autocast_dtype("cuda"), "| on cpu", torch.get_autocast_dtype("cpu"))
small = torch.tensor([1e-3, 1e-6, 1e-8])
print("gradients 1e-3, 1e-6, 1e-8 stored in fp16:", [sig(v, 3) for v in small.half().tolist()],
      "| in bf16:", [sig(v, 3) for v in small.bfloat16().tolist()],
      "| fp16 after the scaler's x65,536:", [sig(v, 3) for v in (small * 65536).half().tolist()])
print("Adam's eps = 1e-8 in fp16:", torch.tensor(1e-8).half().item(), "| in bf16:", sig(torch.tensor(1e-8).bfloat16().item(), 3))
for eps in (1e-8, 1e-4):
    w = nn.Parameter(torch.ones(3, dtype=torch.float16))
    adam = torch.optim.Adam([w], lr=1e-3, eps=eps)
    for _ in range(3):
        w.grad = torch.tensor([1e-2, 1e-4, 0.0], dtype=torch.float16)
        adam.step()
    print(f"fp16 weights, Adam(eps={eps}), gradients [1e-2, 1e-4, 0], 3 steps: weights {w.tolist()}")
with torch.autocast("cpu", dtype=torch.float16):
    autocast_net = nn.Linear(3, 1)
    autocast_net(torch.ones(2, 3)).float().sum().backward()
half_net = nn.Linear(3, 1).half()
half_net(torch.ones(2, 3, dtype=torch.float16)).float().sum().backward()
print("grad dtype: under autocast", autocast_net.weight.grad.dtype, "| after model.half()", half_net.weight.grad.dtype)
half_scaler = torch.amp.GradScaler("cpu")
half_scaler.scale(torch.zeros((), requires_grad=True))   # the scaler starts when it first scales a loss
try:
    half_scaler.unscale_(torch.optim.SGD(half_net.parameters(), lr=0.1))
except ValueError as error:
    print("GradScaler.unscale_ on the .half() model's gradients: ValueError:", error)

# %% [markdown]
# A gradient of 1e-8 is exactly 0 in fp16 and kept in bf16: fp16 without a `GradScaler` loses such gradients
# silently, and autocast on CUDA picks fp16 unless given a dtype. The scaler multiplies the loss so they land
# in fp16's range, then divides before the step; bf16 needs none of it, which is why bf16 recipes (and
# Accelerate) create no scaler. Adam's `eps` is 0 in fp16, so a zero second moment (a gradient of 0, or one
# of 1e-4 whose square underflows) divides by zero: NaN and -inf weights (measured with the default
# implementation). Autocast avoids the last two by keeping weights, `.grad` and optimizer state in float32 and
# casting per operation; with fp16 it still needs a GradScaler for the activations' gradients. `.half()` makes the
# weights and gradients fp16: `GradScaler` refuses to unscale them (keep float32 weights), and Adam's `eps` must be
# raised to mean anything.

# %% [markdown]
# Small numbers are one half of the story; the other is small *changes*. A format with few significant bits has
# wide gaps between neighbouring numbers, and an update smaller than half the gap rounds back to where it
# started. Where does that bite? Store the weights themselves in bf16 (`model.to(torch.bfloat16)`, as
# some fine-tuning scripts do to save memory) and train a Linear-LayerNorm-ReLU-Linear model with AdamW, whose
# every update is about the learning rate in size; then the same in float32 under bf16 autocast:

# %% tags=["answers-bf16-stored-weights"]
from course_utils.chapters.ch07_bf16_weights import bf16_weight_lines

print("\n".join(bf16_weight_lines()))

# %% [markdown]
# A LayerNorm weight starts at exactly 1.0, where bf16's neighbours are 0.0039 below and 0.0078 above: an
# update of 1e-4, or even 1e-3, rounds back to 1.0, every time, so those weights never train. Weights near 0
# have finer gaps and some of them move, which is why the run still looks alive while it learns far less.
# fp16 has the same problem at smaller rates. Under autocast the weights were never cast: they stay float32, and
# only eligible operations (matrix products, convolutions) run in bf16 on temporary copies, so every update lands
# on a float32 weight. If memory forces bf16 weights, keep a float32 copy of them for the optimizer to update (a
# *master copy*); raising the learning rate until updates clear the gap changes the training, not the gap.

# %% [markdown]
#
# ## 9. Gradient clipping
#
# **Problem:** one batch with a huge gradient throws the weights far away. **Lines:** `clip_grad_norm_` after
# `backward()` and before `step()`. It returns the norm *before* clipping: log it. It tells you what an
# ordinary norm looks like, and so where to put `max_norm`.
#
# The experiment: the spiral MLP, 72 updates of 32 examples. At update 31 one batch arrives with its inputs
# multiplied by 1000 (a unit mix-up in one file of the data). Each run is made clean, with that wild batch,
# and with the wild batch clipped at `max_norm` 2.5, for SGD with momentum and for AdamW, on five seeds. Every
# update logs the pre-clip norm and the size of its step. Seed 0, then what holds on all five seeds:

# %% tags=["answers-clipping-spikes"]
from course_utils.chapters.ch07_clipping import claims, claims_text, figures_text, spike_study, trace_figure

spikes = spike_study(range(5))
fig = trace_figure(spikes, seed=0)
display(fig)
plt.close(fig)
print(claims_text(claims(spikes)))

# %% tags=["nbval-ignore-output"]
print(figures_text(spikes))  # the raw figures behind those claims (a thrown run's digits vary between CPUs)

# %% [markdown]
# What a spike does depends on the optimizer:
#
# - **SGD** steps by lr times the gradient. A gradient hundreds of times the ordinary one moves the weights
#   hundreds of times farther, and momentum keeps pushing that way for the next updates: the run is thrown
#   far from where it was.
# - **AdamW** divides each coordinate by the root of its running mean square, so the spike's own step is about
#   as large as any other: Adam's step is bounded near lr. The damage goes into its two moment estimates
#   instead. The first points along the spike for a while (β1 = 0.9); the second jumps and forgets slowly
#   (β2 = 0.999, a half-life of about 690 updates), so every later gradient is divided by an inflated number
#   and learning slows down. Adam is not immune; it is hurt differently.
# - **Clipping** at a threshold above every ordinary norm changes nothing on clean data (bitwise) and cuts the
#   spike down to an ordinary step. It does not undo all of it: the clipped batch still points the wrong way,
#   and AdamW's second moment still grows.
#
# So: log the pre-clip norm for a while, then put `max_norm` a few times above its typical value. A threshold
# below the typical norm clips almost every update: it no longer guards against spikes but rescales every step,
# and what that does depends on the optimizer (the quiz's question 10).
#
# %% [markdown]
# ## 10. The NaN/Inf guard
#
# **Problem:** one NaN gradient makes every weight NaN, for good. Without a guard, one poisoned example:

# %%
x, y = (t.clone() for t in SPLITS.train.tensors)
x[5] = float("nan")
_, h = flow_run((), train=TensorDataset(x, y))
print("no guard, final val loss:", h[-1]["val_loss"])

# %% [markdown]
# **Lines:** check that the gradient norm is finite before `step()`; if not, skip the update; after too
# many in a row, stop with a clear message and keep the last good checkpoint. The trainer can inject a
# NaN loss at chosen micro-steps to show it:

# %% tags=["answers-nan-guard"]
guarded, said = quiet_fit(out=str(RUNS / "nan-once"), epochs=2, n_train=200, inject_nan_at=(5,))
print("skipped updates:", guarded.skipped_updates, "| stop reason:", guarded.stop_reason,
      "| final val loss finite:", math.isfinite(guarded.final["val_loss"]))
diverged, said = quiet_fit(out=str(RUNS / "nan-many"), epochs=2, n_train=200, inject_nan_at=(5, 6, 7))
print("three in a row:", diverged.stop_reason.split(":")[0], "| completed:", diverged.completed)

# %% [markdown]
# With fp16 and a `GradScaler`, non-finite gradients are part of normal life: the scaler starts at 65,536
# and, each time the scaled gradients overflow, skips that step and lowers its scale. A guard that counted
# those as bad updates would stop a healthy run. So with mixed precision on, the flowchart's guard counts an
# update as bad only when the loss itself was not finite, and leaves overflows to `scaler.step`, as the
# trainer does. fp16 autocast on the CPU, inputs x1000 to force overflows early, then inputs that are NaN:

# %%
x, y = (t.clone() for t in SPLITS.train.tensors)
_, h = flow_run(["amp", "nan_guard"], train=TensorDataset(x * 1000.0, y), amp_dtype=torch.float16)
print("fp16 overflows, guard on: ran all", len(h), "epochs; final val loss finite:", math.isfinite(h[-1]["val_loss"]))
try:
    flow_run(["amp", "nan_guard"], train=TensorDataset(torch.full_like(x, float("nan")), y), amp_dtype=torch.float16)
except FloatingPointError as error:
    print("NaN losses still stop it:", str(error).split(";")[0])

# %% [markdown]
# **Where the guard reads.** To decide whether to step, the guard needs the gradient norm and the loss. Read
# on the host, that is one `.tolist()` per update, and on a GPU every read waits until the update's kernels have
# finished, so the GPU idles while Python fetches the next batch. Chapter 5's H100 record, for a loop that also
# prepares its batches on the CPU:

# %%
print(gpu_figures.device_lines()[-1])

# %% [markdown]
# The trainer decides on the device instead. `not finite(norm) or not finite(loss)` is a 0-dim tensor handed to
# the **fused** optimizer (`Adam`, `AdamW`, `SGD` with `fused=True`, on the CPU and on CUDA) as `found_inf`, the
# flag `GradScaler` uses: when it is 1 the kernel leaves weights, moments and step counts exactly as they were.
# The losses and norms stay on the device until a **log point** (`log_every` updates, 50 by default; a
# checkpoint; the epoch's end), where one read brings them all, the skipped updates' numbers with them. A
# schedule stepped per update must know which updates happened: its learning rates become a table on the
# device, indexed by a count of applied updates. The same run (a NaN at micro-step 5, warmup + cosine, AdamW),
# read every update and every 50, its reads counted on the training thread:

# %% tags=["answers-device-guard"]
from course_utils.chapters.ch07_device_guard import guard_runs, guard_text

print(guard_text(guard_runs(RUNS / "guard")))

# %% [markdown]
# The difference is the per-update reads; the others (the epoch ends and the run's end) are the same in both.
# What a rare read costs: a run that diverges is noticed at the next log point, up to `log_every - 1` updates
# later, and those updates were all skipped, so only time is lost. Three things still need a read per update,
# and the trainer says which at its start: fp16 (its `GradScaler` decides each skip and lowers its scale), a
# schedule that also cycles momentum or Adam's betas (OneCycleLR with Adam), and parameters with no fused
# kernel. One torch detail the tests found: fused SGD with momentum whose very first step is skipped leaves its
# momentum buffers unwritten, so the trainer creates them as zeros first (with torch's default dampening 0 that
# changes no bit of a normal run).

# %% [markdown]
# ## 11. Learning-rate schedules: the gallery
#
# Each scheduler expects a **cadence**: per epoch, per update, or per validation with the metric. Every
# curve below comes from torch's own scheduler driving a real optimizer, 10 updates per epoch.
# ReduceLROnPlateau is fed the validation loss of every epoch of a real run: the small training set of
# section 6, 60 epochs, no early stopping. Near its floor that loss is noisy and new bests get rare, which is
# what the scheduler waits for (`scheduler.step(val_loss)`; in torch 2.13 it has no `verbose` argument). The
# gallery builds it with factor 0.5 and patience 2; torch's defaults are factor 0.1 and patience 10, with a
# relative threshold of 1e-4.

# %%
from course_utils.chapters.ch07_scheduler_gallery import GALLERY, curve, gallery_figure, gallery_table

long_run, _ = quiet_fit(out=str(RUNS / "long-run"), epochs=60, n_train=40, n_val=200, lr=0.03)
plateau_metric = [row["val_loss"] for row in long_run.history]
width = max(len(entry.built) for entry in GALLERY)
for entry in GALLERY:
    print(f"{entry.built:<{width}}  {entry.call}")
print()
print(f"{'scheduler':<28}{'cadence':>8}{'first':>10}{'peak':>10}{'middle':>10}{'last':>10}")
for name, cadence, first, peak, middle, last in gallery_table(metric=plateau_metric):
    print(f"{name:<28}{cadence:>8}{sig(first, 3):>10}{sig(peak, 3):>10}{sig(middle, 3):>10}{sig(last, 3):>10}")
fig = gallery_figure(metric=plateau_metric)
display(fig)
plt.close(fig)

plateau = curve("ReduceLROnPlateau", metric=plateau_metric)
print("every one of the", len(plateau_metric), "validation losses was fed to it:", len(plateau) == 10 * len(plateau_metric))
defaults = torch.optim.lr_scheduler.ReduceLROnPlateau(torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1))
cuts = 0
for value in plateau_metric:
    lr_before = defaults.optimizer.param_groups[0]["lr"]
    defaults.step(value)
    cuts += defaults.optimizer.param_groups[0]["lr"] < lr_before
halvings = round(math.log2(plateau[0] / plateau[-1]))
print(f"factor 0.5, patience 2: the LR was cut at least 3 times: {halvings >= 3};",
      f"torch's defaults, same values: cut fewer times: {cuts < halvings}")

# %% [markdown]
# The plateau rule is about the metric, not the epoch: with patience 2, the LR halves once the validation loss
# has failed to improve on its best for three epochs in a row, and again three epochs later while it stays
# worse. Warm restarts end near the bottom of a cycle (cycles of T_0, 2 T_0 and 4 T_0 cover the run), so the
# last updates use a small learning rate.
#
# %% [markdown]
# The cadence is not a detail. Stepped at the wrong one, the same schedulers do something else:

# %% tags=["answers-schedule-gallery", "answers-cosine-period"]
onecycle = curve("OneCycleLR", cadence="epoch")
cosine = curve("CosineAnnealingLR", cadence="update")
print("OneCycleLR stepped per epoch: highest LR", sig(max(onecycle), 3), "of max_lr 0.1")
print("CosineAnnealingLR stepped per update: climbs back up",
      sum(b > a for a, b in zip(cosine, cosine[1:])), "times (the cosine is periodic past T_max)")
for t_max in (1, 3):
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=t_max, eta_min=1e-4)
    rates = []
    for _ in range(8):
        rates.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    print(f"CosineAnnealingLR(T_max={t_max}, eta_min=1e-4) from lr 1, steps 0-7:", [sig(r, 2) for r in rates])

# %% [markdown]
# `CosineAnnealingLR` goes down half a cosine in `T_max` calls of `step()`, reaches `eta_min`, and does not stop
# there: the next `T_max` calls climb back, one full cycle every 2·`T_max` calls. `T_max=1` flips between the two
# ends at every call. For one decay over the run, `T_max` is the number of times `step()` will be called (updates
# when stepped per update, epochs when per epoch); for restarts that jump back to the top, `CosineAnnealingWarmRestarts`.

# %% [markdown]
# ### The other schedulers, epoch by epoch
#
# Ten more of `torch.optim.lr_scheduler`'s classes, each stepped once per epoch from lr 0.1: the LR each of
# the first 8 epochs uses. The numbers are exact products, the same on every machine.

# %%
from course_utils.chapters.ch07_more_schedulers import lr_curve, schedulers, traps

for name, (built, _) in schedulers().items():
    print(f"{name:<17}" + "".join(f"{sig(v, 3):>8}" for v in lr_curve(name)) + f"   {built}")
for trap, value in traps().items():
    print(f"{trap}: {value}")

# %% [markdown]
# `LambdaLR` *sets* lr = 0.1 * f(epoch); `MultiplicativeLR` *multiplies* the current LR by f(epoch) each step, so
# the same lambda compounds. `ConstantLR` and `LinearLR` end after `total_iters` and hand back the full LR.
# `SequentialLR` switches schedulers at the milestone; `ChainedScheduler` applies all of them at every step, so
# their factors multiply. `CyclicLR` is an update scheduler that also cycles momentum unless you pass
# `cycle_momentum=False`: on an SGD built without momentum it switches momentum on.
#
# Two of them on one optimizer, or a warmup wrapper on top of a schedule, and the logged learning rate can be
# wrong while the training is right. A learner's report: `CosineAnnealingLR(T_max=23)` under a 5-step linear
# warmup wrapper (lr 0.05), both stepped once per epoch, and the logged rate "jumped to 0.0498 and stayed there"
# through the warmup. A wrapper with `pytorch_warmup`'s rule (written out in
# `course_utils/chapters/ch07_logged_lr.py`: the optimizer gets the schedule's rate times a factor rising to 1),
# torch's own `ChainedScheduler` doing the same warmup, and a `step(epoch)` with a fractional epoch:

# %% tags=["answers-logged-lr", "answers-get-lr"]
from course_utils.chapters.ch07_logged_lr import get_lr_lines, logged_lr_lines

print("\n".join(logged_lr_lines() + get_lr_lines(step_size=5, gamma=0.5, lr=0.1, reads=12)))

# %% [markdown]
# `get_last_lr()` is what that scheduler wrote at its last step. The wrapper multiplies the rate after the cosine
# has written it, so the cosine's report is the undamped schedule (0.0498 at epoch 1) while the optimizer used
# 0.0199: the warmup ran, the log did not see it. Log `optimizer.param_groups[0]["lr"]`, the rate the next
# `step()` uses, or the chain's report, which reads it back. A wrapper's period counts its calls: stepped once
# per epoch, 5 means five epochs of warmup, not five updates. `step(epoch)` still works on torch 2.13 but warns,
# and for the schedulers that have a closed form (CosineAnnealingLR here; not MultiplicativeLR, which multiplies the
# current rate) it sets the rate from that form at the epoch, computed from the initial rate: whatever
# wrote the rate before it is overwritten (0.001 became 0.0495, the cosine's own value at 1.5). To warm up per update, step the wrapper and the
# schedule once per update and size both in updates.
#
# And `get_lr()` is not a reading at all (the last four lines). It is the rule `step()` applies to the current
# rate, and for `StepLR` that rule is "times gamma at a multiple of `step_size`": called outside `step()` just
# after a decay, it decays the already-decayed rate again, so it disagrees with the rate used exactly at the
# decay points, and torch warns. Read `get_last_lr()` or the param group.

# %% [markdown]
# ### Warmup: why, and for how long
#
# Many recipes start the learning rate near zero and ramp it up over the first updates (exercise 7.3 below
# builds warmup + cosine). Why would the start need a smaller rate than the middle? Adam's own steps say.

# %%
predict(7, "warmup")

# %% tags=["answers-warmup-why"]
from course_utils.chapters.ch07_warmup import warmup

with answer(7, "warmup"):
    print(warmup().text())

# %% [markdown]
# Adam moves each weight by lr · m / √v. At the first update both running averages hold one gradient, so the
# ratio is ±1: every weight with a gradient moves by the full learning rate, however small or noisy its
# gradient. Those first steps are the largest of the run and the least informed. Warmup scales them down
# until the averages hold some history.
#
# How long? Here, the mean step fell below a quarter of the first one within 10 to 80 updates on every seed:
# that is the scale of warmup this run needs. In general it grows with Adam's memory: β₂ = 0.999 averages
# about 1 / (1 − β₂) = 1,000 squared gradients, which is why recipes for long runs often warm up for
# hundreds to thousands of updates. Measure it on your run as above, and warm up for about as long as the steps take to settle.
#
# And how much does it change the result? At lr 0.01 the first steps are too small to hurt: the run above
# needs no warmup. At lr 0.3 they are not. The same model trained with no warmup and with a linear warmup
# (`LambdaLR`, the rate times min(1, (u + 1) / W) at update u) over 10 and over 40 updates:

# %% tags=["answers-warmup-how-long"]
from course_utils.chapters.ch07_warmup import warmup_effect

print("\n".join(warmup_effect(range(5), warmups=(10, 40), lr=0.3)))

# %% [markdown]
# Without warmup the first updates blow the loss up ten-fold and more; ten updates of warmup are enough to
# prevent it, and forty do no better. The end of the run is another matter: after 200 updates at a rate this
# high, the final validation loss is decided by the rate's own noise, and no warmup wins on every seed. Warmup
# protects the start; it does not rescue a rate too high for the rest of the run (a schedule that decays it
# does: chapter 6's cosine experiment measures it).

# %% [markdown]
# ### Averaging the weights: EMA and SWA
#
# `torch.optim.swa_utils.AveragedModel` keeps a copy of the model whose weights are an average of the weights
# the run has passed through: the plain mean (SWA) or an exponential moving average (EMA). Below: what each
# averaging function keeps after the weights 1, 2, 3, 4; the LR `SWALR` hands the optimizer; then a BatchNorm MLP
# trained with a noisy lr 0.3 for 12 epochs, its last weights against their EMA (decay 0.9) on 400 fresh points,
# 5 seeds.

# %% tags=["answers-ema-never-feeds-back"]
from course_utils.chapters.ch07_weight_averaging import (averaging_rules, ema_leaves_the_run_alone, ema_runs,
                                                          swalr_curve)

for rule, value in averaging_rules().items():
    print(f"{rule}: {value}")
for strategy in ("cos", "linear"):
    print(f"SWALR(swa_lr=0.01, anneal_epochs=3, anneal_strategy={strategy!r}) from lr 0.1:",
          [sig(v, 3) for v in swalr_curve(strategy)])
ema = ema_runs()
print(f"EMA (after update_bn) below the last weights' validation loss by more than 0.05 on "
      f"{ema['EMA (+ update_bn) below the last weights by > 0.05']} of {ema['seeds']} seeds")
synced = ema["BN mean = the live model's"]
print(f"use_buffers=False: the EMA's BatchNorm running mean is the live model's on {synced} of 5;",
      f"update_bn recomputed it for the averaged weights on {ema['update_bn recomputed it']} of 5;",
      f"use_buffers=True averaged it on {ema['use_buffers=True averages it']} of 5")
print(f"the trained model after 2 epochs, with an EMA updated every step and without: bitwise the same on "
      f"{ema_leaves_the_run_alone()} of 5 seeds")

# %% [markdown]
# With `use_buffers=False` (the default) the average covers the parameters only, and the BatchNorm statistics are
# copied from the live model: statistics of other weights. `update_bn(loader, ema_model)` runs the training data
# through the averaged model once to recompute them; `use_buffers=True` averages them with the weights instead.
# Evaluate, checkpoint and ship the averaged model, not the one the optimizer holds. The EMA never feeds back: the
# run it watches is bitwise the run without it, so "EMA speeds up training" can only mean that the averaged copy
# reaches a given validation loss sooner than the live weights do; training itself is unchanged.
#
# The other common complaint: the EMA "never learns". An EMA with decay d keeps d to the power t of whatever it
# held t updates ago, so it averages over roughly 1 / (1 - d) updates, and a copy that starts from random weights
# or from weights the model no longer holds keeps them for that long. The spiral MLP from random weights, 5 seeds:

# %% tags=["answers-ema-lags"]
from course_utils.chapters.ch07_weight_averaging import ema_follow_lines

print("\n".join(ema_follow_lines()))

# %% [markdown]
# At decay 0.999 the EMA is still three quarters its starting point after 300 updates: a short fine-tune, or an EMA
# that starts late, shows nothing of the training in the EMA copy. A warmup of the decay (small at first, reaching
# d later, as run above; look for such an option in the EMA helper you use) lets it follow from the start. An EMA copied from the model
# before the weights were loaded averages from the wrong starting point; `AveragedModel` is immune because its
# first `update_parameters` copies the live weights. A helper that copies at construction must be built after the
# model is loaded.
#
# A checkpoint-averaging script does the same by hand: it loads the last few checkpoints and averages every
# floating tensor, BatchNorm's running statistics included. Which statistics should go with averaged weights?
# The same noisy run, its checkpoints of the last 6 of 12 epochs averaged, evaluated with the averaged
# statistics, with the last checkpoint's (what an average of the parameters alone keeps), and with statistics
# `update_bn` recomputed; then an evaluation in the middle of training, done on a separate copy and done by
# swapping the averaged weights into the training model and back, 5 seeds:

# %% tags=["answers-averaged-bn"]
from course_utils.chapters.ch07_weight_averaging import averaged_bn_counts

counts = averaged_bn_counts()
for what, n in list(counts.items())[1:]:
    print(f"{what}: {n} of {counts['seeds']} seeds")

# %% [markdown]
# Statistics recomputed for the weights they normalise are the safe choice; averaged statistics come close here
# (a validation loss within 0.1 on every seed), and the last checkpoint's do worse than recomputed ones on every
# seed, because they describe other weights. `update_bn` writes into the model it is given: on a copy (an `AveragedModel`, or a
# `deepcopy`) the training model is untouched; on the training model itself, swapping the weights back is not
# enough, its BatchNorm buffers now hold the averaged model's statistics. Save and restore the buffers too, or
# evaluate a copy.

# %% [markdown]
# ## 12. Logging: TensorBoard
#
# **Problem:** you cannot see what a run is doing. **Lines:** a `SummaryWriter(DIR/tb)` on rank 0 and one
# `add_scalar` per curve. It writes event files, offline. Written by the trainer and read back with
# TensorBoard's own reader:

# %%
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

logged = fit(FitConfig(out=str(RUNS / "logged"), epochs=3, n_train=200, threads=1, progress=False))
events = EventAccumulator(str(RUNS / "logged" / "tb"))
events.Reload()
print("curves:", sorted(events.Tags()["scalars"]))
print("val/loss points:", len(events.Scalars("val/loss")), "| train/lr points:", len(events.Scalars("train/lr")),
      "(one per update:", logged.updates, ")")
print("val/loss in TensorBoard = metrics.jsonl:",
      [sig(e.value) for e in events.Scalars("val/loss")] == [sig(r["val_loss"]) for r in logged.history])

# %% [markdown]
# To look at the curves: `tensorboard --logdir notebooks/runs/ch07` in a terminal, then open the address it
# prints; or inside JupyterLab, `%load_ext tensorboard` and `%tensorboard --logdir runs/ch07`. The trainer
# also writes `metrics.jsonl` (one line per epoch) and shows a tqdm progress bar when run in a terminal.
#
# ## 13. `torch.compile`
#
# **Problem:** Python overhead and many small kernels slow each step. **Lines:** one, `model.compile()`,
# before wrapping in DDP. It compiles in place: the module stays your module and its `state_dict` keys stay
# plain. The older spelling `model = torch.compile(model)` returns a wrapper whose keys all start with
# `_orig_mod.`, so checkpoints then need the unwrapped module; PyTorch's guide "Where to apply
# torch.compile?" recommends `model.compile()`. With its default backend (inductor) the first step pays a
# one-off code generation, measured below. Here the flowchart's compiled loop runs with the `eager` backend:
# Dynamo captures the model's graph and runs it without generating code. Same numbers as the plain loop:

# %% tags=["answers-compile-prefix"]
compiled_model, compiled = flow_run(["compile"], compile_backend="eager")
print("compiled val losses:", [sig(r["val_loss"]) for r in compiled])
print("plain    val losses:", [sig(r["val_loss"]) for r in minimal_history], "(section 1's run)")
print("model.compile() keeps the module:", type(compiled_model).__name__, "with keys like",
      list(compiled_model.state_dict())[0])
wrapped = torch.compile(MLP(), backend="eager")      # the same wrapper whatever the backend
print("torch.compile(model) wraps it:", type(wrapped).__name__, "with keys like", list(wrapped.state_dict())[0])

# %% [markdown]
# `DataParallel` and `DistributedDataParallel` wrap the same way: both keep your model as `.module`, so their
# keys start with `module.`. A checkpoint saved from the wrapper does not load into the plain model:

# %% tags=["answers-ckpt-module-prefix"]
from course_utils.chapters.ch07_checkpoint_travel import prefix_lines

print("\n".join(prefix_lines({"nn.DataParallel(model)": torch.nn.DataParallel(MLP()), "torch.compile(model)": wrapped},
                             MLP)))

# %% [markdown]
# Is `strict=False` the fix? It silences the error and loads nothing whose name differs, which here is every
# key: the model keeps its random weights, and only the value `load_state_dict` returns says so.

# %%
from course_utils.chapters.ch07_checkpoint_travel import strict_false_line

print(strict_false_line(torch.nn.DataParallel(MLP()), MLP))

# %% [markdown]
# Save the unwrapped model (`model.module.state_dict()`, or `getattr(model, "_orig_mod", model)`; the trainer
# saves the unwrapped module), or strip the prefix of a file you were given with
# `torch.nn.modules.utils.consume_prefix_in_state_dict_if_present(state, "module.")`. Keep `strict=False` for
# keys you expect to differ (a new head), and check what it returns.

# %% [markdown]
# What inductor costs on a CPU like this one: the trainer's spiral run, 5 epochs, eager and compiled, each in
# a fresh process with an empty compile cache (too slow to run in this notebook, so it prints the record of
# `benchmarks/bench_compile_cpu.py`; the machine was shared, so read the seconds as an order of magnitude):

# %%
from course_utils.chapters.ch07_flowchart_costs import compile_record_lines

print("\n".join(compile_record_lines()))

# %% [markdown]
# The first compiled epoch (code generation) takes tens of seconds where eager takes milliseconds, and later
# epochs are no faster: a model this small is a few tiny kernels per step. On a GPU (the same record as section 8), the same run, each compiled
# run starting with an empty compile cache: seconds up front, nothing saved afterwards. Compiling pays off on
# long runs of big models.

# %%
print("\n".join(gpu_figures.compile_lines()))

# %% [markdown]
# That up-front cost is paid again at every *recompilation*. Dynamo compiles for the shapes it sees and guards on
# them; a batch of another shape fails the guard and compiles again. By default the second shape makes it compile
# a version with the batch dimension symbolic, which then serves every size but 0 and 1 (Dynamo specialises
# those); `dynamic=False` compiles once per new shape until `recompile_limit`; past it, a shape not compiled yet
# runs uncompiled, while the shapes compiled before keep their code. Counted exactly with a backend that
# records each compilation and generates no code (twelve batches of varying size, as sequences of varying length
# or a smaller last batch give):

# %% tags=["answers-compile-recompiles"]
from course_utils.chapters.ch07_recompiles import recompile_lines

print("\n".join(recompile_lines()))

# %% [markdown]
# With inductor each compilation generates code again (the first took tens of seconds above; recompilations were
# not timed here), so a first epoch over many shapes can crawl; past the limit every new shape runs uncompiled,
# and Dynamo's log says so once (the warning counted above). Pad or bucket the lengths to
# a few sizes, `drop_last=True`, or declare the dimension dynamic (`dynamic=True`, or `mark_dynamic`);
# `TORCH_LOGS=recompiles` prints each recompilation and the guard that failed.

# %% [markdown]
# ## 14. Scale-out: `torchrun` and DistributedDataParallel
#
# **Problem:** one process is too slow. **Lines:** `init_process_group` (gloo on CPU, nccl on GPU), a
# `DistributedSampler` with `set_epoch(epoch)`, `DDP(model)`, and rank 0 alone writing checkpoints and logs.
# The same trainer, two processes, launched from this notebook:

# %% tags=["answers-ddp-run"]
env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path.cwd().parent)}
launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
          "-m", "course_utils.chapters.ch07_ddp_ranks", "--out", str(RUNS / "ddp"), "--epochs", "2", "--n-train", "200",
          "--threads", "1", "--no-tensorboard", "--no-progress"]
done = subprocess.run(launch, capture_output=True, text=True, env=env, timeout=300)
summary = json.loads((RUNS / "ddp" / "summary.json").read_text())
print("exit code:", done.returncode, "| world size:", summary["world_size"], "| stop:", summary["stop_reason"])
if done.returncode:
    print(done.stderr[-3000:])   # what went wrong, should it ever
digests = summary["weights_sha256_per_rank"]
print("final weights identical on both ranks:", len(digests) == 2 and digests[0] == digests[1])

from course_utils.engine.arithmetic import training_arithmetic
predicted = training_arithmetic(200, 32, 2, 1, world_size=2).total_weight_updates
print("updates:", summary["updates"], "| chapter 0's calculator for W=2:", predicted)

# %% [markdown]
# One exit you may meet with your own script: the run completes, then a rank prints `terminate called without an
# active exception` and dies with exit code -6, and torchrun reports the whole job failed. It is a race in
# the last second, not in training. On torch 2.13 each backward leaves a Python object (its `contextvars`
# context) in the thread's state, every gloo collective started during a backward (DDP's all-reduces) keeps a
# copy of that state, and the gloo worker thread that lets go of the last one must take the GIL to free it. If
# Python is already shutting down, the thread is stopped inside that C++ destructor. This machine hit it in 2 of
# 87 launches of the cell above before the trainer changed (seen in a core dump, not reproducible on demand, so
# not run here); the trainer's ranks now end with `os._exit` once everything is written (`exit_process` in
# `production/cli.py`), which skips that shutdown. The same race has a second face: freeing a process group
# right after a backward (the last DDP model holding it goes out of scope, after `destroy_process_group`) can
# hang forever, the main thread holding the GIL while it waits for the group's work lock, the worker holding
# the lock while it waits for the GIL. `tools/gloo_stress.py` reproduces that in seconds with gloo's threads
# slowed down (not run here: 2 tries of 2 hung); the course keeps every process group it builds in one process
# until that process exits (`course_utils/infra/gloo_groups.py`).
#
# Each rank trains on its own shard. The trainer's sampler (torch's `DistributedSampler` underneath) deals
# the shuffled indices out; here are epoch 1's shards:

# %%
from course_utils.production.data_order import ResumableSampler

train_set = spiral_splits(200, 300, seed=0).train
shards = []
for rank in (0, 1):
    sampler = ResumableSampler(train_set, world_size=2, rank=rank, seed=0)
    sampler.start_epoch(0)
    shards.append(list(sampler))
    print(f"rank {rank}: {len(shards[-1])} examples, first ten {shards[-1][:10]}")
print("disjoint:", not set(shards[0]) & set(shards[1]), "| together all 200:", len(set(shards[0]) | set(shards[1])) == 200)

# %% [markdown]
# **Accumulation under DDP: `no_sync`.** DDP all-reduces the gradients during every `backward()`. With K
# micro-batches per update that is K all-reduces where one would do: the first K-1 sums are thrown away.
# `model.no_sync()` skips the all-reduce inside its `with` block; the window's last micro-batch runs outside
# it and sends the accumulated sum once. The forward pass must be inside the block too (DDP decides at the
# forward whether the coming backward will reduce). The flowchart's loop, as one gloo rank, with a
# communication hook counting DDP's all-reduces (micro-batches of 8, K = 4):

# %% tags=["answers-no-sync"]
from course_utils.chapters.ch07_flowchart_costs import count_allreduces

with_sync = count_allreduces(("accumulation", "scale_out"))
without = count_allreduces(("accumulation", "scale_out"), no_sync=False)
print(f"with no_sync:    {with_sync.allreduces} all-reduces for {with_sync.updates} updates "
      f"({with_sync.micro_batches} micro-batches)")
print(f"without no_sync: {without.allreduces} all-reduces for {without.updates} updates: "
      f"{without.allreduces // without.updates}x the traffic, same weights")

# %% [markdown]
# **The effective batch is B·K·W.** Each update averages the gradients of W ranks, each over K micro-batches
# of B: the run above updates on 32 x 1 x 2 examples, not 32. Chapter 0's calculator:

# %%
ddp_counts = training_arithmetic(200, 32, 2, 1, world_size=2)
print("examples per update, B x K x W =", ddp_counts.effective_batch_size, "| updates per epoch:",
      ddp_counts.updates_per_epoch, "(each rank: ceil(ceil(200 / 2) / 32) micro-batches, K = 1)")
print("one process alone, same B and K:", training_arithmetic(200, 32, 2, 1).updates_per_epoch, "updates per epoch")

# %% [markdown]
# So adding ranks changes the optimisation, not only its speed: twice the ranks, twice the examples per update,
# half the updates per epoch. The trainer keeps `--lr` as you give it. The usual starting points: for SGD,
# scale the learning rate with the effective batch (the linear rule, with a warmup); for Adam, scale it more
# gently (about the square root). Then check with a range test. nanoGPT takes the other way out: it divides K
# by W, so B·K·W, and with it the learning rate, stays the same whatever the number of GPUs.
#
# A schedule is sized, as everywhere in this course, in the updates each rank makes: above, 4 per epoch, not
# the 7 one process would make. One library counts otherwise: a scheduler passed through Accelerate's
# `accelerator.prepare` steps W times at every call (once per process, unless `split_batches=True`), because
# it expects a schedule sized for one process. Size that one in one process's updates, or a schedule sized in
# per-rank updates ends W times too early (Accelerate's `step_scheduler_with_optimizer=False` turns the
# multiple stepping off).
#
# The same counting decides what to do with a milestone schedule when the batch changes. Detectron2's 3x
# detection schedule was tuned at 16 images per update; run at 4 per update (one small GPU), it needs four times
# the updates, but where do its two LR drops go? torch's `MultiStepLR` stepped through each variant
# (`course_utils/chapters/ch07_milestone_scaling.py`; counted in thousands of updates, the same proportions):

# %% tags=["answers-milestone-scaling"]
from course_utils.chapters.ch07_milestone_scaling import milestone_lines

print("\n".join(milestone_lines()))

# %% [markdown]
# A milestone marks how much data the model has seen, so it moves with `MAX_ITER`: scale the updates, the
# milestones and the warmup by 16/4 and the LR by 4/16 (the linear rule), and the LR per image is the same at
# every point of the run. Scaling `MAX_ITER` alone leaves the drops where 4x fewer images have passed: the run
# then spends most of its images at the smallest LR instead of the last few percent (the fourth line). The 3x
# schedule is not the 1x one stretched
# (its drops come later in the run); that is its own design, and scaling keeps whichever schedule you picked.
# Detectron2's `DefaultTrainer` (`tools/train_net.py`) does this arithmetic itself when the config names the
# number of GPUs it was tuned for (`SOLVER.REFERENCE_WORLD_SIZE`, 0 by default, which turns it off): its
# `auto_scale_workers` keeps the images per GPU and moves `IMS_PER_BATCH`, `BASE_LR`, `MAX_ITER`, `STEPS`,
# `WARMUP_ITERS`, the evaluation and checkpoint periods together, by the number of GPUs you launch against that
# reference. For 4 images on one GPU, declare the 16 as 4 per GPU on 4 GPUs (`REFERENCE_WORLD_SIZE: 4`). (The LR
# per image above leaves the warmup out.)
#
# Three more choices the course's trainer makes, and why:
#
# - **The same seed on every rank.** Every rank starts from the same weights (DDP would also broadcast rank
#   0's) and draws the same random numbers, so dropout masks repeat across ranks. Is that harmless? In a plain
#   loop it reaches further than dropout: a DataLoader draws its workers' seeds from the process's generator,
#   so with one seed on every rank the workers of every rank are seeded alike. Measured on 2 ranks (each run
#   from the state its own process starts in), one epoch of 16 examples per rank, `DistributedSampler`, two
#   workers, a random draw in `__getitem__` standing for an augmentation, three seeds:

# %%
from course_utils.chapters.ch07_rank_seeds import rank_seed_lines

print("\n".join(rank_seed_lines(range(3), world_size=2, num_workers=2)))

# %% [markdown]
#   The ranks load different examples and apply the same augmentation to each rank's k-th one: W ranks then
#   see one augmentation stream, not W. The trainer avoids it without a seed per rank: each batch's draws come
#   from (seed, epoch, the batch's indices), and the ranks' indices differ. nanoGPT offsets the seed by the
#   rank (independent masks too); Lightning's `seed_everything` gives every rank the same seed, and with
#   `workers=True` it adds a `worker_init_fn` that mixes the rank into each worker's seed; Accelerate's
#   `set_seed` gives every rank the same seed unless `device_specific=True`. The DDP run's last checkpoint keeps
#   each rank's stream:

# %%
ddp_state = course_load_checkpoint(sorted((RUNS / "ddp" / "checkpoints").glob("last-*.pt"))[-1])
streams = [rank["rng"]["torch"] for rank in ddp_state["ranks"]]
print("ranks in the checkpoint:", len(streams), "| their torch random streams identical:", torch.equal(*streams))

# %% [markdown]
# - **Rank 0 alone writes checkpoints and logs.** The weights are the same on every rank, so one file is
#   enough, and W processes writing one path would race. The flowchart's loop then stops every rank at a
#   barrier, so that no rank moves on (or, at the end, reads `best.pt`) before the file is complete. The
#   trainer needs no barrier there: every rank first hands rank 0 its random streams (a gather, which all ranks
#   must reach), then rank 0 writes while the others train on, and a resume reads only checkpoints whose
#   bytes match their checksum file.
# - **Every rank evaluates the whole validation set.** That is W times the work, but each rank gets the full
#   metric without an all-reduce, and early stopping takes the same decision everywhere. Lightning shards
#   validation instead and averages the metric across ranks (`sync_dist=True`; biased the two ways chapter 4
#   measures, padding copies and a mean of per-rank means, where torchmetrics' metrics sync sums); nanoGPT evaluates on rank 0
#   only.
#
# The same duties in the libraries you will meet, as they document them under DDP (the runs after the table
# check their counts and their checkpoints on one process):
#
# | duty | this trainer | nanoGPT | Lightning | Accelerate |
# |---|---|---|---|---|
# | accumulation under DDP | `no_sync` inside each window | `require_backward_grad_sync` only on the last micro-step (what `no_sync` sets) | `accumulate_grad_batches=K` | `with accelerator.accumulate(model):` |
# | effective batch | B·K·W, LR as given | K divided by W: B·K·W fixed | B·K·W | B·K·W |
# | seed per rank | the same; batch draws keyed by the batch's indices | seed + rank | the same (`seed_everything`); workers get the rank mixed in with `workers=True` | the same (`set_seed`; `device_specific=True` adds the rank) |
# | checkpoint | rank 0 (after a gather of every rank's random streams) | rank 0 | rank 0 writes, every rank waits (`Trainer.save_checkpoint`) | `save_state` (weights written by the main process); `wait_for_everyone()` is its barrier |
# | validation | whole set on every rank | rank 0 only | sharded; `self.log` per rank unless `sync_dist=True` | sharded, `gather_for_metrics` |

# %% [markdown]
# **Lightning and Accelerate, run.** Both are pinned in the course's lock (Lightning 2.6.6, Accelerate
# 1.15.0), so these runs print the same everywhere. First Lightning, on the counts of a question learners
# ask: 14,905 training and 3,726 validation examples at batch 64, "about 233 steps per epoch were expected,
# but the progress bar runs to 292". A `Linear(2, 1)` stands for the model, `accumulate_grad_batches=4`, and
# the schedule is sized the way Lightning's documentation shows, by `trainer.estimated_stepping_batches`
# read in `configure_optimizers`. A hook counts the optimizer's real steps; the progress bar draws nowhere
# and reports its totals (`course_utils/chapters/ch07_libraries.py`; Accelerate's run, below, in
# `ch07_accelerate_run.py`):

# %% tags=["answers-lightning-bar", "answers-lightning-global-step"]
from course_utils.chapters.ch07_accelerate_run import accelerate_lines, run_accelerate
from course_utils.chapters.ch07_libraries import checkpoint_lines, lightning_lines, run_lightning

lightning_run = run_lightning(n_train=14_905, n_val=3_726, batch_size=64, accumulate=4, epochs=1)
print("\n".join(lightning_lines(lightning_run)))

# %% [markdown]
# `estimated_stepping_batches` is chapter 0's count of updates: ceil(batches / K) per epoch, the short last
# window included. It reads one rank's loader, so under DDP it shrinks with the number of ranks, like the
# updates each rank makes. The 292: Lightning 1.x drew one bar per epoch, and its total added the validation
# batches to the training batches. Since 2.0 (pull request #16695) the training bar counts training batches
# only and validation gets a bar of its own. Neither bar counts updates: 233 batches made 59 of them.
# `global_step` does count updates, so every batch of an accumulation window reads the same value: a periodic
# task keyed on it inside `training_step` ran K = 4 times at each multiple, step 0 included (the last line).
# Key it in a hook that runs once per update, `on_before_optimizer_step`, and skip step 0 if it is not wanted.
#
# When Lightning validates is counted in batches too. Four small fits (20 batches of 16 per epoch), each
# validation run recorded as (epoch, training batches seen, `global_step`):

# %% tags=["answers-lightning-validation"]
from course_utils.chapters.ch07_libraries import lightning_validation_runs

for setting, runs in lightning_validation_runs().items():
    print(f"{setting}\n  validation runs at (epoch, batches, global_step): {runs}")

# %% [markdown]
# A fraction in `val_check_interval` splits each epoch's batches; an integer counts training *batches*, not
# updates: with `accumulate_grad_batches=4`, validating "every 5" happened after 5, 10, 15 and 20 batches, at
# `global_step` 1, 2, 3 and 5: to validate every N updates, give N × K. The count starts again in each epoch
# (four runs in each of the two); with `check_val_every_n_epoch=None` it runs on across epochs (every 30
# batches of 20-batch epochs: after batches 30 and 60, in epochs 2 and 3), which is how to validate every N
# batches of a long run. `check_val_every_n_epoch=2` validates every second epoch, and `EarlyStopping`'s
# patience counts validation runs: `patience=2` on a loss that never improved stopped the run after epoch 6 of
# 30 (the first run at epoch 2 set the best, the next two did not beat it). Size patience in validation runs:
# with two runs per epoch (`val_check_interval=0.5`), the same 2 is one epoch.
#
# What Lightning reports for an epoch is an average too, and which one matters when the last batch is short. A
# loss logged with `self.log(..., on_epoch=True)` in `validation_step`, 100 points in batches of 32, against the
# step values averaged by hand:

# %% tags=["answers-lightning-epoch-mean"]
from course_utils.chapters.ch07_libraries import lightning_epoch_lines, lightning_epoch_mean

print("\n".join(lightning_epoch_lines(lightning_epoch_mean())))

# %% [markdown]
# Lightning weights each step's value by its batch size (read from the batch, or given as `batch_size=`), so the
# epoch value is the per-example mean, the one chapter 4 asks for; stacking the step outputs in an `*_epoch_end`
# hook and taking `.mean()` gives every batch the same weight, the 4-point batch as much as a 32-point one. The two
# differ whenever the batches do. When Lightning cannot read a batch size from the batch (a dict of lists, say),
# give it `batch_size=`.
#
# Next, Accelerate's documented accumulation loop on the same counts: `prepare` the model, optimizer, loader
# and scheduler; then, for every batch, inside `with accelerator.accumulate(model):`, `accelerator.backward`,
# `optimizer.step()`, `scheduler.step()` and `optimizer.zero_grad()`. The loop calls all three on every
# batch; the wrappers act only when a window closes (and at the loader's end). The line that steps the
# scheduler is read from the installed source:

# %% tags=["answers-accelerate-accumulate"]
accelerate_run = run_accelerate(n_train=14_905, batch_size=64, accumulate=4)
print("\n".join(accelerate_lines(accelerate_run, world_size=2)))

# %% [markdown]
# On one process the prepared scheduler steps once per update, as the course's does. On W processes that
# loop steps it W times per update, because Accelerate expects a schedule sized in the updates one process
# would make alone. Run, not only read: two processes forked here join one gloo group, as `accelerate launch`
# would set them up, and each calls `scheduler.step()` three times, with Accelerate's defaults and with each of
# its two switches. Then, in one process, batches that the loop cuts into two pieces inside
# `accelerator.accumulate(model)`, each piece with its own backward and `optimizer.step()`:

# %% tags=["answers-accelerate-ranks"]
from course_utils.chapters.ch07_accelerate_ranks import last_batch_steps, ranks_lines, scheduler_steps_on_ranks

ranks_run = scheduler_steps_on_ranks(world_size=2, calls=3)
print("\n".join(ranks_lines(ranks_run, last_batch_steps(batches=5, accumulate=2, pieces=2))))

# %% [markdown]
# With the defaults each rank's scheduler advanced twice per call: once per process. Lightning, the Hugging
# Face Trainer and this course size a schedule in each rank's updates; such a schedule, prepared, ends W times
# too early (a warmup too). Three ways out: size it for one process (W times the per-rank updates and warmup
# steps), or pass `step_scheduler_with_optimizer=False` (then each `scheduler.step()` is one step: call it once
# per update yourself), or leave the scheduler out of `prepare`. `split_batches=True` also steps once per call,
# because it changes what a batch is: the loader's batch is divided among the processes instead of each taking
# a whole one.
#
# Inside `accumulate`, every `optimizer.step()` of a batch that syncs is a real update: the batches that close
# a window (and the loader's last batch, which closes a short one) made one update per piece, not one per
# window. To accumulate pieces, give each piece its own `accumulate` block and count pieces in
# `gradient_accumulation_steps`.
#
# Clipping belongs to the window too. Inside `accumulate`, `.grad` holds a running sum until the window closes,
# so `accelerator.clip_grad_norm_` on every batch clips a partial sum, and the next batch adds to the clipped
# value. The same data, clipped on every batch and only when `accelerator.sync_gradients` is true, against plain
# torch clipping each window's whole gradient once; then torch's `GradScaler`, which Accelerate's fp16 clipping
# calls first, unscaling on two micro-batches of one window:

# %% tags=["answers-accelerate-clip"]
from course_utils.chapters.ch07_accelerate_ranks import clip_in_accumulate, clip_lines

print("\n".join(clip_lines(clip_in_accumulate())))

# %% [markdown]
# Clip under `if accelerator.sync_gradients:`, between `accelerator.backward` and `optimizer.step()`: that is the
# oracle's update. On every batch it is another update, and with fp16 a `GradScaler` may unscale once per update,
# so the second micro-batch raises. `clip_grad_norm_` returns the window's norm before clipping: log it once per
# update, as the course's trainer does.
#
# `save_state` keeps each process's random streams (`random_states_<rank>.pkl`), but no epoch or update
# count. Save your own counters with `accelerator.register_for_checkpointing(obj)` (any object with
# `state_dict` and `load_state_dict`), and on resume skip the batches already seen with
# `accelerator.skip_first_batches`. What each checkpoint holds, read from the files the runs wrote (the
# course's trainer: the DDP run's last checkpoint):

# %%
print("\n".join(checkpoint_lines(ddp_state, lightning_run.checkpoint_keys, accelerate_run.files)))

# %% [markdown]
# Lightning's checkpoint has no random stream: a resumed run does not continue the dropout masks and
# shuffles of the run it resumes. Accelerate's has no counter: its loop must keep its own.
#
# **Defaults that change a run.** A library decides some of the loop for you, and learners' questions about
# Lightning and Accelerate are mostly about those decisions. Each line below is one small fit (a
# `Linear(2, 1)` after a `BatchNorm1d`, 80 fixed points in batches of 8) that changes one thing and counts what
# the library did; the errors are the libraries' own messages (`course_utils/chapters/ch07_library_defaults.py`):

# %% tags=["answers-lightning-defaults", "answers-lightning-resume"]
from course_utils.chapters.ch07_library_defaults import lightning_default_lines, lightning_defaults

print("\n".join(lightning_default_lines(lightning_defaults(epochs=2))))

# %% [markdown]
# Read them as rules. A scheduler returned in a list steps once per *epoch*: a schedule sized in updates (a
# warmup, `T_max`, `total_steps`) barely moves unless it sits in a dict with `"interval": "step"`.
# `ReduceLROnPlateau` needs a `"monitor"` naming a metric that has been logged by the time it steps; the second
# error lists the metrics that exist, which is where a metric that went missing (never logged, or logged under
# another name) shows. Two optimizers need manual optimization (`self.automatic_optimization = False`, then
# `manual_backward` and each optimizer's `step()` yourself). Returning `None` from `training_step` skips that
# batch's update, but the skipped batch still advances `global_step` and a per-step schedule, so both run ahead
# of the optimizer's own count. A module you put in eval mode stays in eval mode through training and
# validation (this version restores each module's mode, and its model summary warns about it at the start; a
# plain loop's `model.train()` would switch it back), and the sanity check runs `validation_step` on two batches
# before the first training batch: code there with side effects (a counter, a metric object, a list) sees them.
#
# Resuming is where a curve jumps. `fit(ckpt_path=...)` restores the weights, the optimizer's moments, the
# schedule, the epoch and `global_step`, and the resumed fit ended bitwise on the uninterrupted one, here where the
# loader does not shuffle and nothing else draws random numbers; with `shuffle=True` the resumed epochs drew other
# orders and the weights ended elsewhere, since the checkpoint holds no random stream. Saving torch's random state
# at the stop and restoring it before the resumed fit made even the shuffled resume exact (in Lightning, a
# module's `on_save_checkpoint` and `on_load_checkpoint` hooks are the place to carry `torch.get_rng_state()` and a
# loader generator's state; not run here). Loading only
# `state_dict` into a new fit starts Adam's moments and the schedule from zero and counts epochs from 0 again:
# the rate jumps back to its start, and the weights end elsewhere. And `ModelCheckpoint` only *saves* the best:
# the model `fit()` leaves in memory is the last epoch's, so evaluate or ship
# `Model.load_from_checkpoint(checkpoint.best_model_path)` (or `trainer.test(ckpt_path="best")`; for a module
# whose `__init__` takes arguments, Lightning's documentation asks for `self.save_hyperparameters()` so that
# loading can rebuild it). Nor is its `last.ckpt` the last epoch once a metric is monitored: 2.6.6's
# `ModelCheckpoint` writes it only in a step that also wrote a top-k file, so here it held the best epoch. For
# the final weights, add a second `ModelCheckpoint()` without a monitor (it held epoch 3), or call
# `trainer.save_checkpoint(path)` after `fit()`.
#
# Logged curves that seem out of step are the same arithmetic. With `overfit_batches=1` an epoch is one batch and
# one update; `self.log(..., on_step=False, on_epoch=True)` in `training_step` records the loss computed *before*
# that update, and validation, which runs after it, sees the updated weights. Training and validation on one
# loader, so that the two should agree:

# %% tags=["answers-lightning-epoch-lag"]
from course_utils.chapters.ch07_library_defaults import overfit_lag_lines

print("\n".join(overfit_lag_lines(epochs=5)))

# %% [markdown]
# The training curve is the validation curve shifted one epoch to the right: nothing runs out of order (the
# sanity check's validation before the first epoch is not logged). With many batches per epoch the same holds
# in part: an epoch's mean training loss averages over weights from the whole epoch, validation sees only the
# last ones, which is one reason a training curve can sit above the validation curve early on.
#
# Accelerate's `save_state`/`load_state` restore the prepared objects, not the loop around them. Stopped after 2
# of 10 epochs and resumed by a script that loops `for epoch in range(10)` again:

# %% tags=["answers-accelerate-resume"]
from course_utils.chapters.ch07_library_defaults import accelerate_resume, accelerate_resume_lines

print("\n".join(accelerate_resume_lines(accelerate_resume(epochs_done=2, epochs=10))))

# %% [markdown]
# The schedule and the optimizer came back at update 20, but the epoch count did not, so the run trained 12
# epochs, and a schedule sized for 10 ran out. torch's `OneCycleLR` alone refuses the extra steps; Accelerate's
# wrapper skips the calls past `total_steps`, but only for schedulers that have that attribute (`OneCycleLR`),
# so the extra epochs trained at the rate one step past its end, well above its designed last rate; a cosine or
# linear schedule is not stopped at all, and a cosine climbs back up (last line). Save the epoch (and the batch
# within it) yourself: `accelerator.register_for_checkpointing(obj)` takes any object with `state_dict()` and
# `load_state_dict()` (a three-line class holding the epoch will do), then start the loop at the saved epoch and
# call `accelerator.skip_first_batches` inside it.
#
# The Hugging Face Trainer is not pinned: its package alone (transformers 5.23.0, 13.3 MB) weighs more to
# download than Lightning and Accelerate with all their dependencies (12.2 MB). What follows is read from
# the source of transformers 5.23.0 (`trainer.py`), not run:
#
# | knob | Hugging Face Trainer (transformers 5.23.0) |
# |---|---|
# | steps per epoch | `num_update_steps_per_epoch` = ceil(len(train loader) / `gradient_accumulation_steps`) on each rank's loader: updates, the short last window included (the calculator's `updates_per_epoch`) |
# | progress bar | counts updates: its total is `max_steps` |
# | scheduler | built by the Trainer for `max_steps` updates, not passed to `accelerator.prepare` (DeepSpeed's aside), stepped once per update: no W-fold stepping |
# | effective batch, learning rate | `per_device_train_batch_size` x `gradient_accumulation_steps` x world size; `learning_rate` as given |
# | checkpoint | a folder `checkpoint-<global_step>/`: `model.safetensors`, `optimizer.pt`, `scheduler.pt`, `scaler.pt` (with a scaler), `rng_state.pth` (`rng_state_<rank>.pth` on several processes), `trainer_state.json` (global step, log history, callbacks' state), `training_args.bin` |
# | resume | restores the random streams and skips the batches of the updates already made in the epoch |

# %% [markdown]
# One production duty the trainer leaves to its checkpoints: **preemption.** Clusters often send SIGTERM (or,
# on SLURM with `--signal`, SIGUSR1) shortly before killing a job. Lightning's SLURM support catches the
# signal, saves a checkpoint and requeues the job. The trainer does not catch it: it checkpoints every
# `--checkpoint-every` updates and loses at most that much work, as section 4's SIGKILL showed.

# %% [markdown]
# **DDP's flags and the collectives, on the same two ranks.** Before training, each rank of the run above ran
# checks with tiny models (`course_utils/chapters/ch07_ddp_ranks.py`, which then starts the trainer). First, torchrun starts one process per rank and each runs the whole script: a file
# the loop writes (a checkpoint hook's extra files, a log) is written once per rank unless the write sits under
# `if dist.get_rank() == 0:` (in Lightning, `trainer.is_global_zero` or `@rank_zero_only`). A collective never
# goes in such a branch: the other ranks never reach it. Each rank also builds its own DataLoader and starts its own
# workers, so `num_workers` counts per process: W ranks with `num_workers=N` run W·N workers beside the W ranks;
# size N by the cores per rank, not by the machine's. A collective works in place and returns `None` (a `Work` to `wait()` on with
# `async_op=True`), so `x = dist.all_reduce(t)` leaves `x` None; `reduce` defines the result on `dst` only. A
# barrier one rank never reaches raises on the others after its timeout (by default 30 minutes with gloo, 10
# with nccl, as below): a rank 0
# evaluating alone for longer than that takes the run down. `init_sync=False` skips the broadcast of rank 0's
# weights, so ranks seeded apart train apart. `broadcast_buffers=False` (deprecated) also keeps each rank's
# buffers at construction; its replacement `forward_sync_buffers=False` does not, as torch's warning says. A
# parameter that gets no gradient breaks the second step unless `find_unused_parameters=True` or
# `static_graph=True` (the old `check_reduction=True` only warns). Buckets are laid out again after the first
# backward, in the order the gradients became ready. Two sections answer questions about the learning rate and
# about hangs. One batch of 8 split over the two ranks, 4 each, one SGD step: with a mean loss DDP's averaged
# gradient is the whole batch's, and the weights come out as one process's on all 8. So the learning rate
# belongs to the total batch (B·K·W), not to the per-GPU one, and at a fixed total batch the number of GPUs
# does not change the step. With `reduction="sum"` the average over ranks is 1/W of the whole batch's
# gradient. Then uneven batch counts (random per-rank data, or a stream of shards that does not divide by W):
# the rank with a batch left waits in DDP's all-reduce for a rank that has already finished. Here a group with a
# 0.5 s timeout makes it raise; with the default (30 minutes for gloo; nccl's, 10 minutes in torch's source, is
# not in a CPU build) the job hangs that long.
# `Join([ddp])` lets a finished rank answer the others' all-reduces with zeros, and the ranks end with the same
# weights. In a process group `SyncBatchNorm` refuses to train on the CPU (outside one, its source shows, it falls
# back to a plain BatchNorm), so its arithmetic is written out by hand beside a plain `BatchNorm1d` in DDP: one
# batch of 4 rows, 2 on each rank. The record carries a hash of the course modules that wrote it, checked before it
# is printed, so the lines are what this code did on two real ranks:

# %% tags=["answers-rank-predictions", "answers-every-rank-runs-every-line", "answers-ddp-batch-split", "answers-ddp-uneven-batches", "answers-workers-per-rank", "answers-ddp-batchnorm"]
from course_utils.chapters.ch07_ddp_ranks import rank_trap_lines, record_rank_traps

print("\n".join(rank_trap_lines(RUNS / "ddp", recorded_by=record_rank_traps)))

# %% [markdown]
# The last section is evaluation on every rank. Each rank predicts only its `DistributedSampler` shard, so rank 0
# alone holds 6 of the 11 predictions. To get them all, gather `(index, prediction)` pairs with
# `all_gather_object` (or tensors with `all_gather`) and key them by index: the sampler pads the shards to equal
# length with a repeated example, so 12 pairs hold 11 examples. With `drop_last=True` the shards are cut
# instead, and one example is never predicted at all. Counts that add up (chapter 4's metrics) need only an
# `all_reduce`; per-example outputs need the gather.
#
# BatchNorm is the one built-in layer that normalises with statistics across the batch, so DDP does not make it
# equal to one process on the whole batch (nothing else coupling a batch's examples is either: in-batch negatives,
# one seed's dropout masks on every rank). Its gradients are averaged, but each rank normalises its rows with its
# own rows' statistics: with 2 rows per rank the outputs
# are not one process's on all 4, and with 1 row per rank `BatchNorm1d` refuses to train (a `BatchNorm2d` on one
# image per rank trains, normalising over that image's pixels alone). Its running statistics are each rank's own
# rows' until the next forward, when DDP copies rank 0's to every rank (its default buffer sync): the checkpoint rank 0 saves holds
# statistics estimated from rank 0's batches only. Reducing the row counts and sums over the ranks first gives
# the whole batch's normalisation and running statistics (equal to one process's to 1e-6). That is the arithmetic
# `SyncBatchNorm` does on GPUs, where it gathers every rank's mean, inverse standard deviation and count at each
# BatchNorm layer's forward and reduces two sums in its backward; its own kernels have no CPU version, so it was
# not run here. Convert with
# `nn.SyncBatchNorm.convert_sync_batchnorm(model)` before wrapping in DDP. Whether that changes the result
# depends on the per-rank batch: small per-GPU batches (detection's 1 or 2 images) normalise with noisy
# statistics, which is where it is used; its cost, a collective per BatchNorm layer each way, is not timed here.

# %% [markdown]
# ## 15. What each component costs
#
# Each component alone on the flowchart's loop, against the minimal loop: the lines it adds (alone, and
# what switching it off removes from the full loop), the memory this machine can measure exactly (bytes
# autograd keeps for backward, peak; bytes written to disk), and what it prevents.

# %%
from course_utils.chapters.ch07_flowchart_costs import cost_text, measure_costs, seed_comparison_text

costs = measure_costs(epochs=1, repeats=2)
print(cost_text(costs))

# %% [markdown]
# Accumulation keeps a quarter of the activations (micro-batches of 8 instead of 32); bf16 keeps smaller
# saved tensors; checkpoints and logging are the only ones that write to disk. The course's source article
# gives a cost table of its own. Its claims beside what this machine measures or counts, and the GPU record:

# %%
print(seed_comparison_text(costs))

# %% [markdown]
# The checkpoint is several times the weights because it also holds AdamW's two moments, the random streams
# and the counters (on a big model the moments dominate: about 3x the weights). The memory claims hold in
# direction. The speed claims need conditions: accumulation is the same arithmetic, but 4x the steps, and a
# small model pays a fixed cost per step; bf16's gain on a GPU depends on what you compare it with. Wall-clock
# time relative to the minimal loop, on this shared 2-core machine (read differences below about 30% as noise;
# the production trainer's own overhead is measured in `benchmarks/bench_production.py`):

# %% tags=["nbval-ignore-output"]
print(cost_text(costs, epochs=1, repeats=2, with_time=True))
times = {r.component: r.seconds for r in costs}
print(f"accumulation: {times['accumulation'] / times['minimal loop']:.2f}x the minimal loop's time "
      "(the article: ~same)")

# %% [markdown]
# ## 16. Choosing the loss
#
# Each value is the loss computed on the same small batch by the loss itself:

# %%
from course_utils.chapters.ch07_loop_tables import (debug_view, double_softmax_floor, double_softmax_training,
                                                    initial_loss_check, loss_view)

display(loss_view())
right, wrong = double_softmax_floor()
print(f"confident, correct logits: loss {sig(right, 3)}; the same after a softmax (a softmax too many): {sig(wrong, 3)}")

# %% [markdown]
# `CrossEntropyLoss` applies log-softmax itself: feed it logits. With a softmax in front, even a perfect
# prediction cannot push the loss below about 0.55 for three classes, and the gradients shrink. With many
# classes they shrink so much that the loss looks stuck at log C, where a fresh model starts. Ten classes,
# ten epochs, the same model and data with and without a softmax before the loss:

# %% tags=["answers-double-softmax"]
ends = double_softmax_training(range(3), classes=10, epochs=10)
n = len(ends[False])
print(f"10 classes, log 10 = {sig(math.log(10), 3)}; the last epoch's mean loss, {n} seeds:")
print(f"  logits into the loss:         below 1.9 on {sum(v < 1.9 for v in ends[False])} of {n}")
print(f"  a softmax before the loss:    within 0.1 of log 10 on {sum(abs(v - math.log(10)) < 0.1 for v in ends[True])} "
      f"of {n}; above the logits run on {sum(b > a for a, b in zip(ends[False], ends[True]))} of {n}")

# %% [markdown]
# A loss stuck at exactly log C has the same cause in contrastive training. An in-batch contrastive loss (InfoNCE,
# sentence-transformers' `MultipleNegativesRankingLoss`) is a cross-entropy whose logits are the similarities of
# each anchor with every positive in the batch, times a scale (one over the temperature); the target is the
# anchor's own positive. A batch of 4:

# %% tags=["answers-contrastive-scale"]
from course_utils.chapters.ch07_loss_targets import contrastive_scale_lines

print("\n".join(contrastive_scale_lines()))

# %% [markdown]
# At scale 0 every logit is 0: the loss is log(batch) whatever the embeddings, and no gradient reaches them, so
# nothing trains. The scale sets how sharply the softmax separates the positive from the negatives: at scale 20
# close positives cost almost nothing and unrelated ones several nats.
#
# SimCLR's NT-Xent makes two views of each of N examples: 2N embeddings, and each one is an anchor whose
# softmax runs over the 2N − 1 others (never itself). Its numerator is its own other view; everything else in
# the batch is a negative, views of examples of the same class included. SupCon (supervised contrastive) takes
# labels and gives every same-class view its own term, each over the same denominator, averaged. Both written
# out in `course_utils/chapters/ch07_infonce.py`, temperature 0.5:

# %% tags=["answers-infonce-terms"]
from course_utils.chapters.ch07_infonce import batch_lines, denominator_lines

print("\n".join(denominator_lines()))

# %% [markdown]
# So a library whose denominator seems to hold "only the negatives" is usually summing over all 2N − 1 others,
# the positive among them (a softmax's denominator contains its numerator's term). A same-class pair is pushed
# apart by NT-Xent and pulled together by SupCon (as long as that positive's share of the softmax is below one over
# the anchor's number of positives, the usual case): with many examples per class in a batch, that is the difference.
#
# The batch is the pool of negatives, so its size is part of the loss. Embeddings with nothing learned score about
# log(2N − 1), and InfoNCE's guarantee (the mutual information is at least log(2N − 1) minus the loss) can never
# certify more than log(2N − 1) nats. Gradient accumulation does not make the pool bigger: each micro-batch's
# anchors see only its own negatives. Five seeds, 16-dimensional embeddings:

# %% tags=["answers-infonce-batch"]
print("\n".join(batch_lines()))

# %% [markdown]
# The accumulated run optimises another, easier loss (127 candidates per anchor instead of 511): lower by
# about log(511/127), with a gradient of its own, not the big batch's. What the batch size then does to the
# learned embeddings is not measured here; SimCLR's paper reports its largest gains from big batches in short
# training, shrinking with longer training. To get more negatives than fit in memory, MoCo keeps a queue of
# embeddings from earlier batches (made by a slowly moving copy of the encoder, no gradient) as its negatives,
# and gradient caching computes the big batch's loss in chunks: both change the pool, which accumulation cannot.
#
# How low can the loss go? With temperature T, even perfect embeddings (each view identical to its partner, every
# other example unrelated) pay for the negatives in the denominator, so the floor depends on N and T. Perfect pairs
# with random negatives, close to that floor (negatives spread more evenly than at random score a little lower):

# %% tags=["answers-infonce-floor"]
from course_utils.chapters.ch07_infonce import floor_lines

print("\n".join(floor_lines()))

# %% [markdown]
# Read a contrastive curve against both ends of its row. At T = 0.5 a batch of 512 starts near 6.93 and even
# perfect pairs score about 4.95, so a run at 5 is close to done; at T = 0.07 the same batch can approach 0, and 5
# would be early. More training helps only while the loss is well above its row's floor, and the floor says nothing about
# how useful the features are: that is measured downstream (a linear probe, k-NN accuracy), not by the loss.
#
# Under DDP each rank holds a slice of the batch, and implementations gather every rank's embeddings so that each
# anchor meets all the negatives. `dist.all_gather` copies the tensors into its output list, and a copy made by a
# collective has no graph. In a one-process gloo group (so the list has one slot, this rank's):

# %% tags=["answers-gathered-negatives"]
from course_utils.chapters.ch07_infonce import gathered_negatives_lines

print("\n".join(gathered_negatives_lines()))

# %% [markdown]
# A loss on the gathered copies alone would train nothing. The common shortcut puts the local tensor back in its
# own slot: each rank's loss covers its anchors against every rank's embeddings and sends gradient into its own
# embeddings only, the other ranks' slices acting as constants. That drops the part of the gradient that flows
# through the other slices, an approximation many implementations accept; the exact gradient needs an all_gather
# whose backward sums, for each slice, what every rank sent it (a small custom autograd Function, or
# `torch.distributed.nn.functional.all_gather`, deprecated in torch 2.13; neither is run here). Either way each rank
# computes a different gradient, so DDP's averaging is still what combines them. Gathering to one master rank
# instead would leave the other ranks nothing to compute their part with.
#
# A triplet loss, max(0, d(anchor, positive) − d(anchor, negative) + margin), has a value that looks like
# progress at the worst place: when every input maps to one point, every distance is 0 and the loss is exactly
# the margin. Batch-hard mining takes, per anchor, its farthest positive and its nearest negative. Eight Gaussian
# classes, an MLP to 16 normalised dimensions, 5 seeds, margin 0.01 (`ch07_metric_mining.py`):

# %% tags=["answers-triplet-collapse"]
from course_utils.chapters.ch07_metric_mining import collapse_lines, mining_lines

print("\n".join(collapse_lines() + mining_lines()))

# %% [markdown]
# Here (8 overlapping classes, batches of 64) a quarter or more of the anchors in a batch have their farthest
# positive beyond their nearest negative even in a good embedding, and batch-hard mining takes exactly those
# pairs, so it scores that embedding several times above the margin, and a collapsed network, at exactly the
# margin, lower. Batch-hard's objective prefers the collapse; the mean over all triplets prefers the good
# embedding. A preference does not force a fall: these batch-hard runs, from these starts at Adam 0.01, kept their
# spread. A run that has fallen shows the signature: the hardest positive and negative distances both near 0 and
# the loss at the margin. The usual remedies keep the hardest triplets from deciding alone (not measured here):
# semi-hard negatives (farther than the positive but within the margin), or easier mining for the first epochs.
#
# Two more losses whose value is not an error to drive to 0. A multi-task loss with learned uncertainty weights
# (Kendall et al.) adds, per task, `exp(-s) * L + s` with `s` a learned log variance; for a given task loss L the
# best `s` is log L, where the term is 1 + log L: `s` is negative for any L < 1, the whole term once L < 1/e
# (about 0.37). A policy-gradient loss,
# `-log_prob * advantage` (REINFORCE with the return, actor-critic with an advantage), is a surrogate whose gradient
# is the one wanted; the entropy bonus is subtracted because the optimizer minimises. Two tasks with noise 0.1 and
# 1.0, 5 seeds; a 4-way policy; a skewed policy under the entropy term alone:

# %% tags=["answers-surrogate-losses"]
from course_utils.chapters.ch07_surrogate_losses import entropy_bonus_line, policy_gradient_lines, uncertainty_lines

print("\n".join(uncertainty_lines()))
print("\n".join(policy_gradient_lines()))
print(entropy_bonus_line())

# %% [markdown]
# The uncertainty-weighted total goes negative while both tasks end within 10% of the best fit there is: the
# negative part is `s` tracking log L of the low-noise task, whose loss is below 1, not a term "decreased blindly"
# at the tasks' expense. In the
# policy loss the minus sign is what makes a descent step raise the probability of actions with a positive advantage
# (0.50 to 0.62) and lower the others; minus the entropy makes the step raise the entropy, which keeps the policy
# exploring. The value of a REINFORCE loss scales with the returns: the same policy on returns ten times larger
# reports a loss ten times larger, so as a policy improves and its episodes grow longer, its "loss" can rise. Judge
# such runs by the reward, not by the loss.
#
# A GAN's losses are read the other way round: a discriminator whose loss reaches 0 is a failure, not a success.
# It has won: it scores every fake near 0, and the generator learns only through the discriminator's gradient on
# its fakes. That gradient, on the discriminator's logit for one fake, for the original minimax generator loss and
# for the non-saturating one most GAN code uses:

# %% tags=["answers-gan-saturation"]
from course_utils.chapters.ch07_surrogate_losses import gan_saturation_lines

print("\n".join(gan_saturation_lines()))

# %% [markdown]
# As the discriminator's loss on a fake falls to 0.0003, the minimax generator's gradient falls with it, to
# 0.0003: the generator stops learning exactly when it is worst. The non-saturating loss keeps a gradient near 1
# there; that is why it replaced the minimax form. With the minimax loss, a discriminator loss stuck at 0 starves
# the generator. With the non-saturating one the logit's gradient survives, but a discriminator that wins outright
# is still a failure: the gradient it gives with respect to the generator's samples tends to be unstable or
# uninformative (Arjovsky and Bottou, 2017), which this cell does not measure. The usual remedies weaken the
# discriminator (fewer of its updates, smoothed labels) or replace the loss by one that cannot saturate (WGAN's
# critic, whose output is not a probability); neither is run here.
#
# ### What each loss takes as a target
#
# Every `torch.nn` loss class below on a batch of 4 (3 classes), with the arguments it expects (target
# last), the shape `reduction="none"` returns, whether `"mean"` and `"sum"` are the plain average and total
# of it, and what the loss does with the target a learner most often gets wrong. Half of the mistakes raise;
# the other half are accepted and compute something else.

# %% tags=["answers-loss-target-shapes", "answers-loss-broadcast-warning"]
from course_utils.chapters.ch07_loss_targets import broadcast_checks, ctc_checks, knob_checks, loss_table

print(f"{'loss':<33}{'arguments, target last':<49}{'none':>11}  mean=avg sum=total  {'mistake':<27}what happens")
for row in loss_table():
    print(f"{row.label:<33}{row.inputs:<49}{str(row.none_shape):>11}  {str(row.mean_is_average):<8} "
          f"{str(row.sum_is_total):<9}  {row.mistake:<27}{row.outcome}")
print()
for check, value in knob_checks().items():
    print(f"{check}: {value}")
print("CTCLoss:", "; ".join(f"{k}: {v}" for k, v in ctc_checks().items()))
for check, value in broadcast_checks().items():
    print(f"{check}: {value}")

# %% [markdown]
# The per-pixel row is segmentation's form: torch reads the classes from dimension 1, so logits are (N, C, H, W)
# and the target is a (N, H, W) mask of class indices, one loss per pixel with `"none"`. Logits left channels-last,
# (N, H, W, C) as an image library hands them over, raise a size mismatch; `permute(0, 3, 1, 2)` fixes them.
#
# Three of the silent ones change the numbers without a word. A (N, 1) output against a (N,) target broadcasts
# to (N, N) in `MSELoss`, `L1Loss` and `SmoothL1Loss`: 16 pairs instead of 4, with only a `UserWarning`.
# 0/1 labels where a margin loss wants -1/+1: `MarginRankingLoss` and `SoftMarginLoss` read a 0 as "no
# preference" (the same loss for every score, no gradient), while `HingeEmbeddingLoss` applies both of its branches
# to it and charges max(x, margin), pushing every distance down to the margin. And with `weight` or
# `ignore_index`, `"mean"` divides by the summed weights of the counted targets (3 real tokens, not 6), so it is
# not the average of `"none"`: average padded tokens yourself and the loss is wrong by the padding share.
#
# The same warning is harmless when the shapes differ only by a dimension of size 1 in the same place, a 0-d
# prediction against a target of shape [1]: the value is the one the matching shapes give; `squeeze` or `reshape`
# one side to silence it. One target broadcast over several predictions, 80 predicted trajectories against the
# one true trajectory, is another loss: the mean over the 80, which pulls every mode towards the target, where a
# multi-modal model usually wants the best mode's loss (the minimum over modes), a smaller number.
#
# `CTCLoss` reads log-probabilities shaped (T, N, C), time first, and one input length and one target length per
# example. A loop that builds the input lengths once, for the loader's batch size, meets the short last batch:

# %% tags=["answers-ctc-lengths"]
from course_utils.chapters.ch07_loss_targets import ctc_length_lines

print("\n".join(ctc_length_lines()))

# %% [markdown]
# The lengths must be as many as the examples in *this* batch: build them from `log_probs.shape` (or the batch's
# own size) every iteration, not once from the configured batch size. The error appears only on an epoch's last
# batch, and only when the dataset's size is not a multiple of the batch size (and `drop_last` is off), so changing
# either makes it appear or vanish.
#
# The other half of the contract is the values: log-probabilities over the classes, each frame's summing to 1 once
# exponentiated. A toy speech task (16 frames, 3 spoken symbols of 4, a per-frame MLP; `ch07_ctc_inputs.py`)
# trained with its outputs handed to `CTCLoss` four ways. The loss columns give the range that holds every seed:

# %% tags=["answers-ctc-inputs"]
from course_utils.chapters.ch07_ctc_inputs import ctc_input_lines

print("\n".join(ctc_input_lines()))

# %% [markdown]
# - **Raw outputs**: their exponentials are not probabilities, so the sum over alignments can exceed 1 and the
#   "loss" starts negative. Worse, torch's CTC backward returns the gradient as if a log_softmax over the classes
#   sat in the graph before it: its extra term cancels only in that log_softmax's backward. Without one in the
#   graph the gradient is not the derivative of the printed value (gradcheck above), and normalising is not enough:
#   log-probabilities computed elsewhere and passed in as a leaf fail the check too (pytorch/pytorch issues 52241
#   and 181534). The raw run decoded far worse than the normalised one on every seed.
# - **Over time** (`dim=0` of a (T, N, C) tensor): each class's scores sum to 1 across the frames instead of each
#   frame's across the classes. The reported loss stays between 8 and 10 while greedy decoding, which reads each
#   frame's best class, gets at least 80% of the utterances right: the number measures nothing.
# - **Over the batch** (`dim=1`, the habit from (N, C) classification outputs): the loss stays between 12 and 13
#   on every seed; what the model then decodes is left to chance (while this was written it swung between seeds,
#   and moved again on another of the CPU's code paths, so the table does not count it).
#
# A positive loss that will not move is therefore not yet a diagnosis of the model: check the normalisation's
# dimension on your own outputs first (the sum of `exp` over the classes, 1 at every frame), then the lengths.

# %% [markdown]
# Two more targets that a loss reads in its own way. Knowledge distillation's `F.kl_div(input, target)` reads
# `input` as log-probabilities and `target` as probabilities (or log-probabilities with `log_target=True`), and
# sums target × (log target − input). And a label-smoothing loss written by hand that zeroes
# `buffer[padding_idx]` to keep the pad token out of the smoothed target, handed the default `ignore_index`, -100. A student and a teacher over 5 classes, a
# vocabulary of 1,000:

# %% tags=["answers-kl-div-inputs", "answers-smoothing-index"]
from course_utils.chapters.ch07_loss_targets import distillation_kl_lines, smoothing_index_lines

print("\n".join(distillation_kl_lines()))
print("\n".join(smoothing_index_lines()))

# %% [markdown]
# The student's side takes `log_softmax`, the teacher's `softmax`: the two arguments are not symmetric, because
# torch computes the teacher's log itself from a probability and takes the student's as given. Softmax on both
# hands kl_div probabilities where it expects logs, and the result is not a divergence (negative here). Multiply
# the term by T² when it is mixed with a hard-label loss, as Hinton et al. do: its gradient shrinks as 1/T² (the
# fifth line), and the factor gives it back the same size at every T. Zeroing `buffer[padding_idx]` is meant for a
# real pad id: it keeps the pad token's class out of the smoothed target. Given -100, Python counts from the end and
# zeroes token 900's share instead, and the padded rows still need their own mask: the usual `scatter_` of each
# target's share raises on a target of -100. torch's loss compares each target with `ignore_index` and drops those
# rows; a hand-written one must compare and mask them itself.
#
# Detection losses divide by a count the data decides: the box losses of a batch are summed and divided by the
# number of boxes in it. Three images holding 1, 5 and 0 boxes, every box's loss set to 1 to read the weights:

# %% tags=["answers-box-normaliser"]
from course_utils.chapters.ch07_loss_targets import box_normaliser_lines

print("\n".join(box_normaliser_lines()))

# %% [markdown]
# Divided by the batch's boxes, every box weighs the same, so an image weighs by its box count: the crowded image
# takes five sixths of the loss. Divided per image, every image with boxes weighs the same. Neither is wrong; they
# are different losses, and the choice is the mean's denominator again (chapter 4). A batch with no box at all
# divides 0 by 0: the loss is NaN (and a logged epoch mean with it), and if the box terms were masked by
# multiplying, the gradient is NaN too, which the next step writes into every weight (the last two lines); selected
# by indexing, the gradient is 0. Clamp the count to at least 1. Multiplying
# a loss by the batch size (a sum over images instead of a mean) is a constant factor: SGD's steps grow with it
# and Adam's do not (chapter 3), and any loss term added to it must carry the same factor to keep its share.

# %% [markdown]
# ## 17. When a run looks sick
#
# Check the first loss before anything else: a model that knows nothing gives each of C classes
# probability 1/C, so its cross-entropy is log C.

# %% tags=["answers-sick-run"]
for classes in (3, 5):
    measured, expected = initial_loss_check(classes=classes)
    print(f"{classes} classes: fresh MLP's loss {sig(measured, 3)}, log C = {sig(expected, 3)}, "
          f"within 5%: {abs(measured - expected) < 0.05 * expected}")
display(debug_view())

# %% [markdown]
# The same arithmetic reads a run that predicts one class for every input. A model that gets nothing from its
# inputs can still learn how often each label occurs: its best guess is those frequencies for every example, so
# its loss settles at the prior's cross-entropy (below log C: the first line below) and its accuracy at the
# majority class's share, which looks like learning. Three classes with those frequencies,
# trained on 300 examples and measured on 300 others, healthy and with the inputs lost on the way (every example
# arrives as the same row, as a loader that indexes the wrong thing or a normalisation that flattens everything
# would do), five seeds:

# %% tags=["answers-prior-collapse"]
from course_utils.chapters.ch07_loop_tables import collapse_lines

print("\n".join(collapse_lines(seeds=range(5))))

# %% [markdown]
# So a classifier that predicts one class, with a loss stuck near the cross-entropy of the label frequencies,
# has learned the frequencies and nothing else: look for what keeps the inputs from it (features and labels read
# apart, a constant input, dead units after too high a learning rate) before tuning anything.

# Every loss has such values. A loss that stops and stays put is often sitting exactly on what a model that
# learned nothing would score: equal logits, the label frequencies, the targets' mean, every embedding the same
# point. Each of torch's losses (every `_Loss` it exports), on fixed targets, computed by torch beside the closed
# form computed without it (`course_utils/chapters/ch07_stuck_values.py`), so a number in a log can be looked up:

# %% tags=["answers-stuck-values"]
from course_utils.chapters.ch07_stuck_values import stuck_lines

print("\n".join(stuck_lines()))

# %% [markdown]
# Read your plateau against its row. Cross-entropy at log C (2.3026 for ten classes, 0.6931 for a binary or
# multi-label output) means the outputs carry no information; at the entropy of your label frequencies, that the
# model learned only how common each class is (with balanced labels the two are the same number). An MSE at the
# targets' variance (1.0 on standardised targets: R² and explained variance 0) means it predicts the mean, which is
# how a reconstruction or value loss that "stays at about 1" reads. The L1 and Huber rows depend on how the
# targets are spread (uniformly here): compute mean |y − median(y)| (L1) or the loss of the best constant (Huber)
# on your own targets before reading them. A
# triplet loss at exactly its margin means every input is mapped to one point (collapse; the mining cell above
# shows batch-hard mining scoring a collapsed network at exactly the margin, lower than a good embedding); a
# ranking loss at its margin means equal scores, no order learned. A loss that will not go below a value even when
# every prediction is right may be an activation too many: probabilities fed to `BCEWithLogitsLoss` or
# `CrossEntropyLoss`, which apply their own (the "x2" rows). A head written `nn.Sequential(nn.Linear(d, 1),
# nn.Sigmoid())` and indexed `head[0](x)` is not that case: `[0]` is the Linear alone, whose outputs are logits (last
# line). The label-frequency entropy is a plateau, not a
# floor: hard-label cross-entropy can go below it, to 0. One floor is not 0: a cross-entropy against soft targets
# (label smoothing, mixup, distillation) bottoms out at the targets' entropy, where only KL divergence reaches 0.
# Then look for the cause as above: the inputs not reaching the model, a learning rate that killed the units, or
# a collapse.

# A VAE's KL term that falls to 0 while the reconstruction stays high is the same story, and one of its common
# causes is a reduction. `F.mse_loss(recon, x)` averages over every value of an example; the KL is usually summed
# over the latent dimensions. The average divides the reconstruction by the number of values, which weighs the KL
# that many times more. The same VAE on 32-value data made from 4 factors, once with each reduction
# (`course_utils/chapters/ch07_vae_collapse.py`):

# %% tags=["answers-vae-kl-collapse"]
from course_utils.chapters.ch07_vae_collapse import vae_lines

print("\n".join(vae_lines(seeds=range(5))))

# %% [markdown]
# With the mean, every latent dimension switched off (posterior collapse): the encoder says nothing, the decoder
# outputs the data's mean for every input, and the reconstruction sits on the MSE row of the table above, the
# data's variance. Summed over the values, the same model uses all four dimensions and reconstructs well. An
# averaged reconstruction is a beta-VAE with beta equal to the number of values, chosen by accident; sum it (or
# choose beta on purpose). A second cause is not run here: a decoder strong enough to model the data without z
# (an autoregressive one, as in text and SMILES VAEs) also drives the KL to 0, whatever the reduction; the usual
# remedies are a KL weight annealed from 0, a floor of "free bits" per dimension, or a weaker decoder.

# %% [markdown]
# An annealed KL weight changes what the logged loss means. The summed VAE again, its KL weight raised linearly from
# 0 at the first epoch to 1 at the last:

# %% tags=["answers-kl-warmup-rising-loss"]
from course_utils.chapters.ch07_vae_collapse import kl_warmup_lines

print("\n".join(kl_warmup_lines(seeds=range(5))))

# %% [markdown]
# The loss the optimizer minimises is a different function every epoch: once the reconstruction has been learned,
# each raise of the weight adds more KL than training removes, and the total ends above its lowest epoch, while the
# model judged at the final weight (reconstruction + KL) ends better than it was at that epoch, on every seed here. A loss that rises steadily under
# a schedule of its own weights (KL annealing, a growing regulariser, curriculum terms) is read term by term, or at
# fixed weights; a rise at a fixed weight is a real one.

# A diffusion model's loss is the opposite puzzle: it barely moves while the samples get better. The model learns
# to predict the noise added to an example at a random noise level, and part of that noise cannot be told apart
# from the data: at the lowest levels it is as small as the data's own spread, and in the middle it depends on
# which of several likely examples was noised. That part is a floor no training removes, and each example's random
# level makes every batch's loss scatter widely around it. A small DDPM on 8 blobs in the plane, where the best
# possible prediction has a closed form, so the floor is computed, not guessed (`ch07_diffusion_loss.py`):

# %% tags=["answers-diffusion-flat-loss"]
from course_utils.chapters.ch07_diffusion_loss import diffusion_figure, diffusion_lines, floor, train as train_ddpm

ddpm_runs, ddpm_floor = train_ddpm(seeds=range(3)), floor()
fig = diffusion_figure(ddpm_runs[0], ddpm_floor)
display(fig)
plt.close(fig)
print("\n".join(diffusion_lines(ddpm_runs, ddpm_floor)))

# %% [markdown]
# Most of the floor comes from the middle levels, where which blob an example came from is uncertain; the nearly
# pure noise at the top levels is the easiest part to predict. Over the second thousand steps the batch losses
# fell by less than one batch's scatter, so a curve of single batches looks like a flat band, while more samples
# landed near the blobs (still far from the data's own share). What moved is the part of the loss above the floor,
# a fifth of the fixed set's loss or less. To judge such a model, fix what the loss is averaged over (the same
# evaluation examples at the same noise levels with the same noise, every time: the "fixed set" above, ideally
# reported per noise level), read it against its floor where one is known, and score samples with a measure of
# the outputs themselves (here the share near a blob; for images, FID and its relatives, not run here). A running
# mean over many batches shows the trend too (the figure's blue line); single batches do not.

# %% [markdown]
# ## 18. Your own model: a `Task`
#
# Everything above trained the spiral MLP, but nothing in the trainer depends on it. A **task** is your
# model and your data:
#
# ```python
# from course_utils.production import FitConfig, Task, fit
# task = Task(model, train_data, val_data)           # loss_fn=nn.CrossEntropyLoss() unless you pass one
# fit(FitConfig(out="runs/mine", epochs=10, checkpoint_every=50), task)
# ```
#
# or, from a terminal, a function that takes the `FitConfig` and returns the `Task`:
# `python -m course_utils.train --task mytasks:make_task --out runs/mine` (also under `torchrun`).
# A batch may be `(inputs, targets)` or a dict with a `labels` entry; the model may return a tuple;
# `metric=`, `collate_fn=` and `unpack=` cover the rest. The chapter's machinery holds for it: exact
# resume, durable checkpoints, `weights_only` loading, early stopping with the best weights, accumulation
# weighted by examples, bf16, the NaN guard, DDP. With two limits. A random generator your dataset keeps
# as an attribute (`self.rng = np.random.default_rng(0)` in `__init__`) is not reseeded by the trainer,
# so its draws are not exact on resume (and every DataLoader worker gets a copy of it, chapter 1): draw
# from torch's generator, or seed yours from `torch.utils.data.get_worker_info().seed`. And weighting by
# examples equals the big batch only for a loss that is a mean over examples: not for a token loss over
# padded sequences, nor with BatchNorm (section 7).
#
# Random augmentation needs one more idea. A DataLoader worker draws from its own random streams, which
# depend on which batches it loaded before; after a mid-epoch resume the workers start over, and every
# draw would change. So the trainer seeds each batch's draws from (seed, epoch, the batch's indices)
# before loading it: the same batch gets the same augmentation, whichever worker loads it and whether or
# not the run was interrupted. Nothing is replayed at resume, and the seeding itself is cheap
# (`benchmarks/bench_production.py` measures it).
#
# Two tasks come built in: `--task chars`, a tiny GPT-style character model trained on this course's own
# prose, and `--task shapes`, a small CNN telling discs, squares, triangles and crosses apart in images
# drawn on the fly and augmented at random (shifted, flipped, rescaled, noised). The shapes run, killed
# mid-epoch as a separate process with two DataLoader workers, then resumed, against the same run made whole in
# this kernel with no workers at all (each batch loaded here): if any draw depended on which process loaded the
# batch, the weights would differ.

# %%
from course_utils.production.cli import main as train_main

SHAPES = ["--task", "shapes", "--epochs", "2", "--checkpoint-every", "40", "--workers", "2", "--threads", "1",
          "--no-progress", "--no-tensorboard"]
process = subprocess.Popen([sys.executable, "-m", "course_utils.train", "--out", str(RUNS / "shapes-cut"), *SHAPES],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
watcher = ThreadPoolExecutor(1).submit(kill_once_checkpointed, process, RUNS / "shapes-cut" / "checkpoints")
with contextlib.redirect_stdout(io.StringIO()):      # meanwhile, in this kernel: never interrupted
    shapes_whole = fit(FitConfig(out=str(RUNS / "shapes-whole"), task="shapes", epochs=2, checkpoint_every=40,
                                 workers=0, threads=1, progress=False))
killed = watcher.result() == -signal.SIGKILL
print("killed before the end:", killed and not (RUNS / "shapes-cut" / "model.pt").exists())
# the same command, run in this process (a warning, if the kill landed mid-save, is kept with what it said)
with contextlib.redirect_stdout(io.StringIO()) as said, warnings.catch_warnings(record=True):
    warnings.simplefilter("always")
    code = train_main(["--out", str(RUNS / "shapes-cut"), *SHAPES, "--resume"])
print("resumed from a checkpoint:", code == 0 and any(line.startswith("resumed from")
                                                      for line in said.getvalue().splitlines()))
a, b = final_weights(RUNS / "shapes-whole" / "model.pt"), final_weights(RUNS / "shapes-cut" / "model.pt")
print("final weights bitwise identical:", all(torch.equal(a[k], b[k]) for k in a))
print("metrics.jsonl identical, line for line:", metrics("shapes-whole") == metrics("shapes-cut"))

# %% [markdown]
# The character model, two epochs, and both tasks' loss curves: the loss of every update, read back from
# TensorBoard, and the validation loss at each epoch's end. The character model's accuracy is the share of
# next characters it guesses right; its validation text is the last tenth of the prose, never trained on.

# %%
from collections import Counter

from course_utils.production.builtin import course_text

with contextlib.redirect_stdout(io.StringIO()):
    chars = fit(FitConfig(out=str(RUNS / "chars"), task="chars", epochs=2, batch_size=32, threads=1, progress=False))
fig, axes = plt.subplots(1, 2, figsize=(8.8, 3.2))
for ax, (name, run) in zip(axes, [("chars", "chars: transformer LM, loss per character"),
                                  ("shapes-whole", "shapes: CNN, augmented images")]):
    events = EventAccumulator(str(RUNS / name / "tb"))
    events.Reload()
    steps = events.Scalars("train/loss_step")
    ax.plot([e.step for e in steps], [e.value for e in steps], lw=0.8, alpha=0.7, label="train (each update)")
    val = events.Scalars("val/loss")
    ax.plot([e.step for e in val], [e.value for e in val], "s--", label="validation (each epoch)")
    ax.set(title=run, xlabel="update", ylabel="cross-entropy")
    ax.legend()
fig.tight_layout()
display(fig)
plt.close(fig)

text = course_text()
counts, seen = Counter(text[:len(text) * 9 // 10]), len(text) * 9 // 10
frequency_guess = -sum(math.log(counts.get(c, 0.5) / seen) for c in text[seen:]) / (len(text) - seen)
losses = [row["val_loss"] for row in chars.history]
print("chars: validation loss fell every epoch:", all(b < a for a, b in zip(losses, losses[1:])))
print(f"chars: below the best guess that ignores context (each character's frequency: {frequency_guess:.2f}):",
      losses[-1] < frequency_guess)
print("chars: validation accuracy above 25%:", chars.final["val_acc"] > 0.25)
print("shapes: validation accuracy above 90%:", shapes_whole.final["val_acc"] > 0.9)

# %% [markdown]
# A task of your own is a few lines. A regression task, with its own metric (mean absolute error, lower
# is better), watched by early stopping: `val_acc` would mean nothing here, so the trainer does not log it.

# %%
from torch import nn
from course_utils.production import Task

xs = torch.linspace(-2, 2, 200).unsqueeze(1)
wave = TensorDataset(xs, torch.sin(2 * xs))
torch.manual_seed(0)
regression = Task(nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 1)), wave, wave, loss_fn=nn.MSELoss(),
                  metric=lambda out, y: (out - y).abs().mean(), metric_name="mae", metric_mode="min", name="wave")
with contextlib.redirect_stdout(io.StringIO()):
    waved = fit(FitConfig(out=str(RUNS / "wave"), epochs=30, lr=0.02, patience=5, monitor="val_mae", threads=1,
                          progress=False, tensorboard=False), regression)
print("logged per epoch:", sorted(waved.history[0]))
print("early stopping watched val_mae; model.pt holds the best:", waved.delivered == "best")

# %% [markdown]
# ## Errors you will meet here
#
# The errors this chapter's mechanisms raise, each produced just now on the pinned torch and shown in torch's
# own words, with its fix run beside it. It stays folded until you need it; chapter 9 holds the whole atlas,
# and a box that finds the entry for a message you paste.

# %% tags=["answers-ddp-unused-parameters"]
from course_utils.widgets.explain_view import errors_here

errors_here(7)

# %% [markdown]
# ## Exercises: write it yourself
#
# Each exercise is a stub for you to edit and a check against an oracle: an uninterrupted run, the
# course's `EarlyStopping`, torch's schedulers, torch's `clip_grad_norm_`, one big batch's token mean.
#
# ### Exercise 7.1: a checkpoint that resumes exactly
#
# Write `save_checkpoint(path, model, optimizer, scheduler, epoch)`, called when epoch `epoch` (0-based)
# has finished, and `load_checkpoint(path, model, optimizer, scheduler)`, which restores freshly built
# objects from the file and returns the epoch to run next. The check trains a model with Dropout on
# shuffled data, kills the run after an epoch, builds everything anew as a new process would, and
# resumes from your file: the resumed run must end bit for bit like the run that was never killed.
# Load into the objects you are given (`model.load_state_dict(...)` and the like): a new object built
# inside `load_checkpoint` is not the one training goes on with. Loading restores state and changes no mode:
# the model stays in the mode it was built in (training resumes). The check's DataLoader has no generator
# of its own: it shuffles with torch's global one, so `torch.get_rng_state()` in the file restores the
# next epoch's order and dropout masks. A loader with its own generator needs that generator's state
# saved too: chapter 9 keeps one (`order`) for exactly this.

# %%
def save_checkpoint(path, model, optimizer, scheduler, epoch):
    raise NotImplementedError  # replace this line with your code


def load_checkpoint(path, model, optimizer, scheduler):
    raise NotImplementedError  # replace this line with your code

# %%
from course_utils.exercises import check
check("checkpoint_pair")

# %% [markdown]
# ### Exercise 7.2: the early-stopping rule
#
# Write `stop_check(losses, patience, min_delta=0.0)`: given the validation losses of successive checks,
# return the number (1-based) of the check at which training stops, or None if it never does. The rule is
# Lightning's, as in `EarlyStopping` above: a check improves only if it beats the best so far by strictly
# more than `min_delta`; training stops once `patience` checks have passed without an improvement, and at
# once on a value that is not finite. `patience` may be 0 (Keras's default): then the first check without an
# improvement stops.

# %%
def stop_check(losses, patience, min_delta=0.0):
    raise NotImplementedError  # replace this line with your code

# %%
check("stop_check")

# %% [markdown]
# ### Exercise 7.3: warmup + cosine
#
# Write `warmup_cosine_lr(update, base_lr, warmup, total)`: the learning rate that update number `update`
# (0-based, of `total`) uses. Over the first `warmup` updates it rises in equal steps from base_lr / warmup
# to base_lr (reached at update warmup − 1); then it follows half a cosine from base_lr down to 0 at
# update `total`. With `warmup` 0 it is the cosine alone. As a formula, for `update` < `warmup`:
# `base_lr * (update + 1) / warmup`; from update `warmup` on, with `progress = (update − warmup) / (total −
# warmup)`: `base_lr * (1 + cos(π · progress)) / 2`. So updates warmup − 1 and warmup both use base_lr
# (torch's `LinearLR` then `CosineAnnealingLR`, chained by `SequentialLR`). Return a Python float.
# `transformers`' `get_cosine_schedule_with_warmup` differs: it rises from 0 and reaches base_lr at update
# `warmup`.

# %%
def warmup_cosine_lr(update, base_lr, warmup, total):
    raise NotImplementedError  # replace this line with your code

# %%
check("warmup_cosine_lr")

# %% [markdown]
# ### Exercise 7.4: clipping by the global norm
#
# Write `clip_gradients(parameters, max_norm)` without `clip_grad_norm_`: if the norm of all the
# gradients together exceeds `max_norm`, scale every gradient in place by one factor so that it equals
# `max_norm`; skip parameters without a gradient; return the norm before clipping, as a float.
# `parameters` is any iterable of tensors, as for `clip_grad_norm_`: usually `model.parameters()`, a
# generator that can be walked only once.

# %%
def clip_gradients(parameters, max_norm):
    raise NotImplementedError  # replace this line with your code

# %%
check("clip_gradients")

# %% [markdown]
# ### Exercise 7.5: token-weighted accumulation
#
# Write `token_window_losses(token_losses, masks)` for one accumulation window of K micro-batches.
# `token_losses` holds K tensors of per-token losses (shape B_i × T_i; padding positions hold arbitrary
# finite numbers), `masks` K tensors of the same shapes, 1 or True at a real token (int or bool). Either
# may be a generator. Return a list of K scalar tensors, loss i = micro-batch i's sum over its real tokens
# divided by the number of real tokens in the whole window, so that they add up to the window's mean loss
# and `.backward()` on each in turn accumulates one big batch's gradient (the check compares both the values
# and the gradients). A micro-batch with no real token gives a 0 built from its token losses (so its
# `.backward()` runs); a window with no real token at all raises `ValueError`. Leave the inputs unchanged.

# %%
def token_window_losses(token_losses, masks):
    raise NotImplementedError  # replace this line with your code

# %%
check("token_window_losses")

# %% [markdown]
# ## Quiz

# %%
from course_utils.widgets.quiz_view import quiz
quiz(7)

# %% [markdown]
# ## Summary
#
# - A checkpoint holds everything the next update depends on (optimizer, scheduler, scaler, counters,
#   early-stopping state, every random stream and the data order); resumed, the run is bitwise the same on
#   this CPU. On a GPU that also needs the same hardware and software, `cudnn.benchmark` off, deterministic
#   algorithms with `CUBLAS_WORKSPACE_CONFIG`, and the same world size.
# - Load with `weights_only=True`; store NumPy's RNG state as plain lists instead of loosening it. Give every
#   DataLoader its own generator, the validation loader too.
# - A checkpoint from another machine: `map_location`; move the model to its device before
#   `optimizer.load_state_dict`; save the unwrapped module (no `module.` or `_orig_mod.` prefix).
# - Early stopping counts validation checks without strict improvement, and validation's choice needs a
#   test set for an unbiased figure. Accumulation weighting each micro-batch by its window's examples equals
#   the big batch for a per-example mean loss; a token loss over padded sequences needs the window's real
#   tokens as the divisor. bf16 needs no GradScaler; fp16's scaler guards the gradients, not a forward value
#   above 65,504, and a first step it skips makes a harmless scheduler warning.
# - Log the pre-clip norm, and clip a few times above its typical value: a spike throws SGD far away (momentum
#   carries it on) and damps Adam's next steps (its second moment jumps); clipping above the ordinary norms
#   changes nothing else. Guard against NaN before `step()`,
#   leaving fp16 overflows to the scaler. Step each scheduler at its cadence.
# - Scale out with `torchrun` and DDP: `no_sync` inside each accumulation window (one all-reduce per update),
#   B·K·W examples per update (size the LR for it), rank 0 alone writes, same weights on every rank.
