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
# component below is shown doing its job on a real run of it.

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
import subprocess
import sys
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
from IPython.display import display
from torch.utils.data import TensorDataset

from course_utils.data import spiral_splits
from course_utils.flowchart import KEYS, assemble, load_fit
from course_utils.flowchart_costs import one_process_group_env
from course_utils.models import MLP
from course_utils.notebook import sig
from course_utils.production import FitConfig, UnsafeCheckpointError, fit, load_checkpoint

RUNS = Path("runs/ch07")  # every run of this chapter writes here (relative: printed paths stay short)
shutil.rmtree(RUNS, ignore_errors=True)
SPLITS = spiral_splits(384, 128, seed=0)


def quiet_fit(**config):
    """The production trainer, its progress notices kept out of the way (we print what matters)."""
    with contextlib.redirect_stdout(io.StringIO()) as said:
        result = fit(FitConfig(threads=1, progress=False, tensorboard=False, **config))
    return result, said.getvalue()


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
# flowchart assembles with every component switched off. Read it once: every component below adds a
# few lines to it.

# %%
print(assemble(()))

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
from course_utils.flowchart import code_lines
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

# %%
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
# On a GPU there is one more switch: `torch.backends.cudnn.benchmark = True` picks the fastest
# convolution algorithm per shape (fast, not repeatable), while `torch.use_deterministic_algorithms(True)`
# and `cudnn.deterministic = True` trade some speed for the same result every time.
#
# ## 4. Checkpoints, and a resume that changes nothing
#
# **Problem:** a crash or a time limit throws away hours of work. A checkpoint must hold *everything*
# the next update depends on, or the resumed run quietly differs from the one that was not
# interrupted. The trainer writes each checkpoint durably (temporary file in the same folder, fsync,
# `os.replace`; then its checksum the same way; then an fsync of the folder) and keeps the last few plus
# the best. Training does not wait for the disk: it copies the state in memory, and a second thread
# serialises and writes it.
#
# The experiment: the same configuration twice. Once uninterrupted. Once as a separate process
# (`python -m course_utils.train`), killed with `SIGKILL` as soon as a checkpoint is on disk (mid-epoch),
# then resumed.

# %%
CONFIG = dict(epochs=3, n_train=300, n_val=150, batch_size=16, accum_steps=2, dropout=0.1, optimizer="adamw",
              schedule="onecycle", checkpoint_every=3)
whole, _ = quiet_fit(out=str(RUNS / "whole"), **CONFIG)

flags = ["--epochs", "3", "--n-train", "300", "--n-val", "150", "--batch-size", "16", "--accum-steps", "2",
         "--dropout", "0.1", "--optimizer", "adamw", "--schedule", "onecycle", "--checkpoint-every", "3",
         "--threads", "1", "--no-progress", "--no-tensorboard"]
env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path.cwd().parent)}
process = subprocess.Popen([sys.executable, "-m", "course_utils.train", "--out", str(RUNS / "cut"), *flags],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
checkpoints = RUNS / "cut" / "checkpoints"
while process.poll() is None and not list(checkpoints.glob("last-*.pt.sha256")):
    time.sleep(0.01)
process.kill()
process.wait()
print("the second run was killed:", process.returncode == -9)
print("a checkpoint was on disk:", bool(list(checkpoints.glob("last-*.pt.sha256"))))
print("it had not finished:", not (RUNS / "cut" / "model.pt").exists())

resumed, said = quiet_fit(out=str(RUNS / "cut"), resume=True, **CONFIG)
print("resumed from a checkpoint:", said.startswith("resumed from"))

# %%
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
state = load_checkpoint(newest)
print(sorted(k for k in state if k != "model"))
print("random streams saved per rank:", sorted(state["ranks"][0]["rng"]))

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


# %%
class Payload:
    """What an attacker (or a corrupted tool) can put in a .pt file: a call that runs while loading."""

    def __reduce__(self):
        return (Path.write_text, (Path(RUNS / "pwned.txt"), "this ran while loading a checkpoint"))


torch.save({"model": MLP().state_dict(), "extra": Payload()}, RUNS / "evil.pt")
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

# %%
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
print("the delivered weights are better than the last:", delivered < last)

# %% [markdown]
# ## 7. Gradient accumulation
#
# **Problem:** the batch you want does not fit in memory. **Lines:** run K micro-batches, weight each
# micro-batch's mean loss by its share of the window's examples, step once per window, and flush a
# short last window at the end of the epoch. With 200 examples, micro-batches of 8 and K=4, the epoch
# ends with a window of one micro-batch. Against one big batch of 32 on the same examples in the same
# order:

# %%
small, _ = quiet_fit(out=str(RUNS / "accumulated"), epochs=2, n_train=200, batch_size=8, accum_steps=4)
big, _ = quiet_fit(out=str(RUNS / "big-batch"), epochs=2, n_train=200, batch_size=32)
a, b = final_weights(RUNS / "accumulated" / "model.pt"), final_weights(RUNS / "big-batch" / "model.pt")
print("updates:", small.updates, "accumulated vs", big.updates, "big batch")
print("largest weight difference < 1e-5:", max((a[k] - b[k]).abs().max().item() for k in a) < 1e-5)

# %% [markdown]
# ## 8. Mixed precision (bf16 autocast on the CPU)
#
# **Problem:** float32 everywhere costs time and memory. **Lines:** run the forward pass and the loss
# under `torch.autocast(device, dtype=torch.bfloat16)`. bf16 keeps float32's exponent range, so it needs no
# `GradScaler`; fp16 (CUDA) needs one, with `scaler.unscale_(optimizer)` before clipping. The weights stay
# float32. Memory here is what autograd keeps for backward (the course's meter), the same work both times:

# %%
from course_utils.memory import GraphMemoryMeter

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
from course_utils import gpu_figures

print(gpu_figures.provenance())
print("\n".join(gpu_figures.precision_lines()))

# %% [markdown]
# - Plain float32 does not use tensor cores. TF32 (`torch.backends.cuda.matmul.allow_tf32 = True`) does,
#   with a shorter mantissa; bf16 and fp16 autocast are faster still. The weights stay float32.
# - What backward keeps shrinks only when activations dominate (batch 32,768, width 1,024). At batch = width
#   it does not shrink: the 16-bit activations save half of what float32 keeps, and autocast's 16-bit weight
#   copies take that much back. No precision mode lowers the float32 weights, gradients and AdamW state,
#   which is why, at width 4,096, the step's peak does not move at all.
# - fp16 without a scaler: a small loss gives gradients that underflow to exactly zero, so nothing learns.
#   GradScaler multiplies the loss by 65,536 first, and almost every gradient survives.
#
# ## 9. Gradient clipping
#
# **Problem:** one huge gradient throws the weights far away. **Lines:** `clip_grad_norm_` after
# `backward()` and before `step()`; it returns the norm *before* clipping, which is worth logging. One wild
# example (its input scaled by 1000) in the training set, with the flowchart's loop:

# %%
x, y = (t.clone() for t in SPLITS.train.tensors)
x[5] *= 1000.0
outlier = TensorDataset(x, y)
for name, components, data in [("clean data", (), SPLITS.train), ("one outlier", (), outlier),
                               ("one outlier, clipped", ("clip",), outlier)]:
    _, h = flow_run(components, train=data, epochs=6)
    print(f"{name:<22} final val loss {sig(h[-1]['val_loss'], 3)}, val accuracy {sig(h[-1]['val_acc'], 3)}")

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

# %%
guarded, said = quiet_fit(out=str(RUNS / "nan-once"), epochs=2, n_train=200, inject_nan_at=(5,))
print("skipped updates:", guarded.skipped_updates, "| stop reason:", guarded.stop_reason,
      "| final val loss finite:", math.isfinite(guarded.final["val_loss"]))
diverged, said = quiet_fit(out=str(RUNS / "nan-many"), epochs=2, n_train=200, inject_nan_at=(5, 6, 7))
print("three in a row:", diverged.stop_reason.split(":")[0], "| completed:", diverged.completed)

# %% [markdown]
# ## 11. Learning-rate schedules: the gallery
#
# Each scheduler expects a **cadence**: per epoch, per update, or per validation with the metric. Every
# curve below comes from torch's own scheduler driving a real optimizer. ReduceLROnPlateau is fed the
# validation losses of the over-fitting run of section 6 (`scheduler.step(val_loss)`; in torch 2.13 it has
# no `verbose` argument).

# %%
from course_utils.scheduler_gallery import GALLERY, curve, gallery_figure, gallery_table

plateau_metric = [row["val_loss"] for row in stopped.history] + [stopped.history[-1]["val_loss"]] * 12
for entry in GALLERY:
    print(f"{entry.name:<28} {entry.call}")
print()
print(f"{'scheduler':<28}{'cadence':>8}{'first':>10}{'peak':>10}{'middle':>10}{'last':>10}")
for name, cadence, first, peak, middle, last in gallery_table(metric=plateau_metric):
    print(f"{name:<28}{cadence:>8}{sig(first, 3):>10}{sig(peak, 3):>10}{sig(middle, 3):>10}{sig(last, 3):>10}")
fig = gallery_figure(metric=plateau_metric)
display(fig)
plt.close(fig)

# %% [markdown]
# The cadence is not a detail. Stepped at the wrong one, the same schedulers do something else:

# %%
onecycle = curve("OneCycleLR", cadence="epoch")
cosine = curve("CosineAnnealingLR", cadence="update")
print("OneCycleLR stepped per epoch: highest LR", sig(max(onecycle), 3), "of max_lr 0.1")
print("CosineAnnealingLR stepped per update: climbs back up",
      sum(b > a for a, b in zip(cosine, cosine[1:])), "times (the cosine is periodic past T_max)")

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
# **Problem:** Python overhead and many small kernels slow each step. **Lines:** one,
# `model = torch.compile(model)`, before wrapping in DDP; checkpoints keep the plain module's
# `state_dict` (the compiled one prefixes every key with `_orig_mod.`). With its default backend
# (inductor) the first step pays a one-off code generation that, on this CPU, costs more than all of this
# chapter's runs together, so it pays off only on long runs of big models, mostly on GPUs. Here the
# flowchart's compiled loop runs with the `eager` backend: Dynamo captures the model's graph and runs it
# without generating code. Same numbers as the plain loop:

# %%
compiled_model, compiled = flow_run(["compile"], compile_backend="eager")
print("compiled val losses:", [sig(r["val_loss"]) for r in compiled])
print("plain    val losses:", [sig(r["val_loss"]) for r in minimal_history], "(section 1's run)")
print("the loop returns (and saves) the plain module, keys like", list(compiled_model.state_dict())[0])
print("a compiled module's own keys look like", list(torch.compile(MLP()).state_dict())[0])

# %% [markdown]
# With inductor on a GPU (the same record as section 8): this chapter's spiral run through `fit()`,
# 5 epochs, each compiled run starting with an empty compile cache. On a model this small each step is a
# few tiny kernels, so compiling costs seconds up front and saves nothing afterwards:

# %%
print("\n".join(gpu_figures.compile_lines()))

# %% [markdown]
# ## 14. Scale-out: `torchrun` and DistributedDataParallel
#
# **Problem:** one process is too slow. **Lines:** `init_process_group` (gloo on CPU, nccl on GPU), a
# `DistributedSampler` with `set_epoch(epoch)`, `DDP(model)`, and rank 0 alone writing checkpoints and logs.
# The same trainer, two processes, launched from this notebook:

# %%
env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path.cwd().parent)}
launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
          "-m", "course_utils.train", "--out", str(RUNS / "ddp"), "--epochs", "2", "--n-train", "200",
          "--threads", "1", "--no-tensorboard", "--no-progress"]
done = subprocess.run(launch, capture_output=True, text=True, env=env, timeout=300)
summary = json.loads((RUNS / "ddp" / "summary.json").read_text())
print("exit code:", done.returncode, "| world size:", summary["world_size"], "| stop:", summary["stop_reason"])
digests = summary["weights_sha256_per_rank"]
print("final weights identical on both ranks:", len(digests) == 2 and digests[0] == digests[1])

from course_utils.arithmetic import training_arithmetic
predicted = training_arithmetic(200, 32, 2, 1, world_size=2).total_weight_updates
print("updates:", summary["updates"], "| chapter 0's calculator for W=2:", predicted)

# %% [markdown]
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
# ## 15. What each component costs
#
# Each component alone on the flowchart's loop, against the minimal loop: the lines it adds (alone, and
# what switching it off removes from the full loop), the memory this machine can measure exactly (bytes
# autograd keeps for backward, peak; bytes written to disk), and what it prevents.

# %%
from course_utils.flowchart_costs import cost_text, measure_costs

costs = measure_costs(epochs=1, repeats=2)
print(cost_text(costs))

# %% [markdown]
# Accumulation keeps a quarter of the activations (micro-batches of 8 instead of 32); bf16 keeps smaller
# saved tensors; checkpoints and logging are the only ones that write to disk. The speed column is wall-clock
# time relative to the minimal loop, on this shared 2-core machine: read differences below about 30% as
# noise. The production trainer's own overhead is measured in `benchmarks/bench_production.py`.

# %% tags=["nbval-ignore-output"]
print(cost_text(costs, epochs=1, repeats=2, with_time=True))

# %% [markdown]
# ## 16. Choosing the loss
#
# Each value is the loss computed on the same small batch by the loss itself:

# %%
from course_utils.loop_tables import DEBUG_TABLE, double_softmax_floor, initial_loss_check, loss_table

for row in loss_table():
    print(f"{row.task:<34} {row.loss:<42} = {sig(row.value, 3)}\n{'':<34} takes {row.prediction}; "
          f"targets {row.target}")
right, wrong = double_softmax_floor()
print(f"\nconfident, correct logits: loss {sig(right, 3)}; the same after a softmax (a softmax too many): {sig(wrong, 3)}")

# %% [markdown]
# `CrossEntropyLoss` applies log-softmax itself: feed it logits. With a softmax in front, even a perfect
# prediction cannot push the loss below about 0.55 for three classes, and the gradients shrink.
#
# ## 17. When a run looks sick
#
# Check the first loss before anything else: a model that knows nothing gives each of C classes
# probability 1/C, so its cross-entropy is log C.

# %%
for classes in (3, 5):
    measured, expected = initial_loss_check(classes=classes)
    print(f"{classes} classes: fresh MLP's loss {sig(measured, 3)}, log C = {sig(expected, 3)}, "
          f"within 5%: {abs(measured - expected) < 0.05 * expected}")
print()
for row in DEBUG_TABLE:
    print(f"{row.symptom}\n  likely: {row.likely_causes}\n  first check: {row.first_check}")

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
# `metric=`, `collate_fn=` and `unpack=` cover the rest. Every guarantee of this chapter holds for it:
# exact resume, durable checkpoints, `weights_only` loading, early stopping with the best weights,
# accumulation weighted by examples, bf16, the NaN guard, DDP.
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
# mid-epoch as a separate process with two DataLoader workers, then resumed:

# %%
from course_utils.train import main as train_main

SHAPES = ["--task", "shapes", "--epochs", "2", "--checkpoint-every", "40", "--workers", "2", "--threads", "1",
          "--no-progress", "--no-tensorboard"]
with contextlib.redirect_stdout(io.StringIO()):
    shapes_whole = fit(FitConfig(out=str(RUNS / "shapes-whole"), task="shapes", epochs=2, checkpoint_every=40,
                                 workers=2, threads=1, progress=False))
process = subprocess.Popen([sys.executable, "-m", "course_utils.train", "--out", str(RUNS / "shapes-cut"), *SHAPES],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
shapes_checkpoints = RUNS / "shapes-cut" / "checkpoints"
while process.poll() is None and not list(shapes_checkpoints.glob("last-*.pt.sha256")):
    time.sleep(0.01)
process.kill()
process.wait()
print("killed before the end:", process.returncode == -9 and not (RUNS / "shapes-cut" / "model.pt").exists())
with contextlib.redirect_stdout(io.StringIO()) as said:        # the same command, run in this process
    code = train_main(["--out", str(RUNS / "shapes-cut"), *SHAPES, "--resume"])
print("resumed from a checkpoint:", code == 0 and said.getvalue().startswith("resumed from"))
a, b = final_weights(RUNS / "shapes-whole" / "model.pt"), final_weights(RUNS / "shapes-cut" / "model.pt")
print("final weights bitwise identical:", all(torch.equal(a[k], b[k]) for k in a))
print("metrics.jsonl identical, line for line:", metrics("shapes-whole") == metrics("shapes-cut"))

# %% [markdown]
# The character model, three epochs, and both tasks' loss curves: the loss of every update, read back from
# TensorBoard, and the validation loss at each epoch's end. The character model's accuracy is the share of
# next characters it guesses right; its validation text is the last tenth of the prose, never trained on.

# %%
from collections import Counter

from course_utils.production.builtin import course_text

with contextlib.redirect_stdout(io.StringIO()):
    chars = fit(FitConfig(out=str(RUNS / "chars"), task="chars", epochs=3, batch_size=16, threads=1, progress=False))
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
# ## Quiz

# %%
from course_utils.widgets.quiz_view import quiz
quiz(7)

# %% [markdown]
# ## Summary
#
# - A checkpoint holds everything the next update depends on (optimizer, scheduler, scaler, counters,
#   early-stopping state, every random stream and the data order); resumed, the run is bitwise the same.
# - Load with `weights_only=True`; store NumPy's RNG state as plain lists instead of loosening it.
# - Early stopping counts validation checks without strict improvement; accumulation weights each
#   micro-batch by its window's examples and equals the big batch; bf16 needs no GradScaler.
# - Clip after `backward()`, guard against NaN before `step()`, step each scheduler at its cadence.
# - Log to TensorBoard from rank 0; scale out with `torchrun` and DDP: same weights on every rank.
