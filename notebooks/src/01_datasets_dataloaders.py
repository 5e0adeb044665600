# %% [markdown]
# # Chapter 1 — Datasets and DataLoaders
#
# By the end of this chapter you will be able to:
#
# - write a `Dataset`: a class with `__len__` and `__getitem__`;
# - wrap it in a `DataLoader` and know what each of its settings does by default;
# - predict, before running anything, how many batches an epoch has and which examples each one holds;
# - decide whether `num_workers` and `pin_memory` will help you.

# %%
from course_utils import setup_notebook, sig
setup_notebook()

# %% [markdown]
# ## 1. A Dataset answers two questions
#
# A `Dataset` knows how many examples it has (`__len__`) and what example `i` is (`__getitem__`).
# That is the whole contract.
#
# It does not batch, shuffle or load in parallel. Those are the `DataLoader`'s job.
#
# Here is a dataset of 100 examples: example `i` is the input `i` and its target `i²`.

# %%
import torch
from torch.utils.data import Dataset


class SquaresDataset(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        x = torch.tensor([float(i)])
        return x, x ** 2


squares = SquaresDataset(100)
print("len(squares) =", len(squares))
print("squares[7]   =", squares[7])

# %% [markdown]
# ## 2. A DataLoader turns examples into batches
#
# The `DataLoader` asks the dataset for examples by index, groups them into batches and stacks
# each batch into tensors. Its settings, with the defaults read from torch's own signature:

# %% tags=["answers-dataloader-defaults"]
from course_utils.chapters.ch01_pipeline import dataloader_defaults

for name, default in dataloader_defaults().items():
    print(f"{name:<24} {default!r}")

# %% [markdown]
# Three of these need a word, and are checked in the next cell.
#
# - `shuffle=None` means *no shuffling* (the same as `False`).
# - `collate_fn=None` means torch's `default_collate`, which stacks equal-shaped examples.
# - `prefetch_factor=None` means *2 batches per worker* as soon as `num_workers > 0`.
#
# The rest, one line each (sections 5 and 8 and chapter 7 come back to several):
#
# - `batch_size=1`, `drop_last=False`: one example per batch, and a short last batch is kept.
# - `sampler` / `batch_sampler`: your own order or your own grouping (chapter 2).
# - `num_workers=0`: the main process loads every batch itself.
# - `pin_memory=False`: page-locked batches for faster copies to an accelerator. `pin_memory_device=''` is
#   deprecated in torch 2.13: the current accelerator is used.
# - `timeout=0`: how long to wait for a worker's batch before raising (0 = forever).
# - `worker_init_fn=None`: a function each worker runs at start. torch already seeds `random`, NumPy's global
#   state and torch itself differently in every worker; use it for other libraries and for a random generator
#   your dataset holds (section 8 shows why).
# - `multiprocessing_context=None`: how workers start (fork, spawn, forkserver); section 8 shows why it matters.
# - `generator=None`: the random generator the sampler draws from, and the one that draws the workers' base
#   seed; pass a seeded one for a reproducible order and reproducible worker seeds (chapter 7).
# - `persistent_workers=False`: workers are started again every epoch; `True` keeps them (section 8).
# - `in_order=True` (new in torch 2.6): batches come back in sampler order even if a later worker
#   finishes first; `False` hands them over as soon as they are ready.

# %%
from torch.utils.data import DataLoader, default_collate

plain = DataLoader(squares)
with_workers = DataLoader(squares, num_workers=2)
print("sampler with default shuffle:  ", type(plain.sampler).__name__)
print("collate_fn is default_collate: ", plain.collate_fn is default_collate)
print("prefetch_factor, no workers:   ", plain.prefetch_factor)
print("prefetch_factor, 2 workers:    ", with_workers.prefetch_factor)
print("first batch with batch_size=1: ", next(iter(plain)))

# %% [markdown]
# The first batch printed above is a **list** `[x, y]`, although `__getitem__` returns a tuple
# `(x, y)`: `default_collate` keeps the structure of one example but returns tuples as lists.
#
# `next(iter(loader))` is the way to look at one batch, and a trap in a training loop: each `iter()` starts a new
# pass (with workers, it starts them again, unless `persistent_workers=True` keeps them) and `next()` takes its
# first batch. A loop whose every "epoch" is
# `x, y = next(iter(loader))`, on 640 examples in batches of 64:

# %% tags=["answers-next-iter-epoch"]
from course_utils.chapters.ch01_dataset_tools import one_batch_epochs

for what, count in one_batch_epochs().items():
    print(f"{what}: {count}")

# %% [markdown]
# Each such epoch is one batch. Without shuffling it is the same 64 examples every time; with shuffling ten of
# them reach only part of the 640 (640 draws, fewer distinct examples: some came twice). Iterate the loader
# (`for x, y in loader:`) for an epoch.
#
# ## 3. The pipeline, stage by stage
#
# One epoch takes four steps, and the Dataset is *called* in the third:
#
# **Sampler → BatchSampler → fetch (`dataset[i]`, in the workers) → collate → model.**
#
# 1. The **sampler** decides the *order*: it yields indices (0, 1, 2, … or a random permutation).
# 2. The **batch sampler** cuts that stream into groups of `batch_size` indices.
# 3. The **workers** (the main process when `num_workers=0`) call `dataset[i]` for each index.
# 4. **collate** merges the examples of a group into batch tensors. With `num_workers > 0` this
#    also happens inside the worker, which then sends the whole collated batch back to the main
#    process.
#
# `shuffle=True` simply swaps the sampler:

# %%
for shuffle in (False, True):
    loader = DataLoader(squares, batch_size=16, shuffle=shuffle)
    print(f"shuffle={shuffle!s:<5} sampler={type(loader.sampler).__name__:<17} "
          f"batch_sampler={type(loader.batch_sampler).__name__}")

# %% [markdown]
# ## 4. Hand calculation: how many batches?
#
# Take N = 100 examples and a batch size B = 16.
#
# 6 batches of 16 hold 96 examples. The 4 left over make a 7th, smaller batch.
#
# So one epoch has ceil(100 / 16) = 7 batches. Let us compute it, then ask a real DataLoader.

# %% tags=["answers-batch-count"]
import math

from course_utils.chapters.ch01_pipeline import trace_pipeline

N, B = 100, 16
print("by hand: full batches =", N // B, "| left over =", N % B, "| batches =", math.ceil(N / B))
trace = trace_pipeline(N, B, shuffle=True, drop_last=False, seed=0)
print("DataLoader: batches =", trace.num_batches, "| sizes =", trace.batch_sizes)
print("every index seen once:", sorted(i for b in trace.epochs[0].batches for i in b) == list(range(N)))

# %% [markdown]
# `trace_pipeline` does not re-implement anything: it runs a real `DataLoader` over a dataset whose
# example `i` is just the number `i`, and records what the sampler produced and what each batch holds.

# %%
e = trace.epochs[0]
print("sampler order (first 20):", e.sampler_order[:20])
for k, (batch, shape) in enumerate(zip(e.batches, e.collated_shapes), 1):
    if k <= 2 or k == len(e.batches):
        print(f"batch {k}: collated shape {shape}, indices {batch}")
print("(the pipeline view in section 6 shows every batch)")

# %% [markdown]
# ## 5. drop_last: a different 4 each epoch
#
# With `drop_last=True` the small last batch is thrown away: 6 batches of 16, and 4 examples unused.
#
# With shuffling, *which* 4 are unused changes every epoch, because every epoch draws a new
# permutation. Over many epochs an example is very likely to be seen: it sits out a given epoch
# with probability 4/100, so all E epochs with probability 0.04^E. Three epochs of one loader:

# %% tags=["answers-drop-last"]
dropping = trace_pipeline(N, B, shuffle=True, drop_last=True, seed=0, epochs=3)
print("batches per epoch:", dropping.num_batches, "| sizes:", dropping.batch_sizes)
for e in dropping.epochs:
    print(f"epoch {e.epoch}: skipped {sorted(e.skipped)}")
skipped_sets = [frozenset(e.skipped) for e in dropping.epochs]
print("all three skipped sets different:", len(set(skipped_sets)) == 3)
seen = {i for e in dropping.epochs for batch in e.batches for i in batch}
print(f"examples seen at least once in 3 epochs: {len(seen)} of {N}")

# %% [markdown]
# Without shuffling, the sampler's order never changes, so the *same* last 4 examples are skipped
# in every epoch and the model never sees them:

# %%
fixed = trace_pipeline(N, B, shuffle=False, drop_last=True, epochs=3)
for e in fixed.epochs:
    print(f"epoch {e.epoch}: skipped {sorted(e.skipped)}")

# %% [markdown]
# ## 6. Try it: the pipeline view
#
# Change the batch size, switch shuffle and drop_last, and press **Next epoch** to see the same
# loader's next pass. Each cell is one example in the sampler's order, with its batch number under
# it; striped cells are dropped. Changing a setting builds a new loader, so the view starts again at
# epoch 1.

# %%
from course_utils.widgets.pipeline_view import pipeline_view

pipeline_view(n=100, batch_size=16, shuffle=True, drop_last=True)

# %% [markdown]
# ## 7. Datasets that live on disk
#
# The squares dataset holds everything in memory. Real datasets are often too big for that: each
# example is a file, and `__getitem__` reads it when asked.
#
# `write_on_disk_dataset` writes 200 spiral examples as one `.pt` file each, into a temporary folder.
# `OnDiskDataset` lists the files and loads one in `__getitem__`.

# %%
import tempfile
from pathlib import Path

from course_utils.chapters.ch01_pipeline import OnDiskDataset, write_on_disk_dataset

tmp = tempfile.TemporaryDirectory()
folder = write_on_disk_dataset(Path(tmp.name) / "spiral", n=200, seed=0)
on_disk = OnDiskDataset(folder)
print("files written:", len(list(folder.glob("*.pt"))), "| first:", on_disk.files[0].name)
x0, y0 = on_disk[0]
print("example 0: x =", [sig(v) for v in x0.tolist()], "y =", int(y0))
first = next(iter(DataLoader(on_disk, batch_size=16)))
print("first batch shapes:", tuple(first[0].shape), tuple(first[1].shape))

# %% [markdown]
# ## 8. num_workers: measure, do not guess
#
# With `num_workers=k`, k worker processes call `__getitem__` in parallel while your model trains.
# Starting them costs time, and every batch must travel back to the main process.
#
# We time one epoch of the on-disk dataset with 0 and 2 workers, twice: reading the files as they
# are, and with an extra 2 ms per example that stands in for costly decoding (JPEG, audio, tokenising). The stand-in
# is a sleep, which uses no CPU: it shows the overlap workers buy, not the limit real decoding meets when the
# workers outnumber the free cores.
# Your timings will differ from run to run and machine to machine.

# %% tags=["nbval-ignore-output"]
from course_utils.chapters.ch01_pipeline import time_one_epoch

for decode_ms in (0.0, 2.0):
    dataset = OnDiskDataset(folder, decode_ms=decode_ms)
    times = {k: time_one_epoch(dataset, num_workers=k, batch_size=16, repeats=1) for k in (0, 2)}
    print(f"decode {decode_ms} ms/example: " + ", ".join(f"num_workers={k}: {sig(t, 3)} s" for k, t in times.items())
          + f" -> 2 workers are {sig(times[0] / times[2], 3)}x as fast")

# %% [markdown]
# How to read it: workers have a **fixed cost** (starting each process, and setting up the queues
# that carry every batch back) and a **per-batch saving** (loading overlaps with everything else).
#
# - When each example is cheap to load, the fixed cost and the hand-over of every batch can cost
#   as much as they save, or more. Small or in-memory data rarely needs workers.
# - When loading an example is slow, workers overlap that work, and the gain approaches the number
#   of workers (up to the CPU cores you have).
# - `persistent_workers=True` keeps workers alive between epochs, so the start-up is paid once.
#   Three epochs of the in-memory squares both ways, where start-up is most of the cost (timings, so
#   their exact values vary):

# %% tags=["nbval-ignore-output"]
import time


def three_epochs(persistent: bool) -> float:
    loader = DataLoader(squares, batch_size=16, num_workers=2, persistent_workers=persistent)
    start = time.perf_counter()
    for _ in range(3):
        for _batch in loader:
            pass
    return time.perf_counter() - start


fresh, kept = three_epochs(False), three_epochs(True)
print(f"3 epochs, 2 workers: started every epoch {sig(fresh, 2)} s, persistent {sig(kept, 2)} s")

# %% [markdown]
# The times vary; what causes them does not. Count the worker processes each loader starts (a
# `worker_init_fn` leaves a mark in every new worker). Every start is a new process, and under spawn
# (macOS, Windows, or `multiprocessing_context="spawn"`) a new process also unpickles the whole dataset:
# a large dataset pays that once per worker per epoch, unless the workers persist.

# %% tags=["answers-persistent-workers"]
from course_utils.chapters.ch01_workers import worker_starts

for persistent in (False, True):
    print(f"persistent_workers={persistent!s:<5} 3 epochs, num_workers=2: "
          f"{worker_starts(persistent, epochs=3, num_workers=2)} worker processes started")

# %% [markdown]
# Persistence has a price. Each worker holds its own copy of the dataset, made when the worker starts. A dataset
# whose `__getitem__` depends on something the main process changes between epochs (`dataset.set_epoch(epoch)`
# for a per-epoch augmentation or sampling mapping, a curriculum stage) changes only the main process's copy.
# Here each example reports the epoch its copy believes it is, with `set_epoch(epoch)` called before each epoch:

# %% tags=["answers-persistent-worker-state"]
from course_utils.chapters.ch01_worker_state import worker_state_lines

print("\n".join(worker_state_lines()))

# %% [markdown]
# Workers started every epoch copy the dataset again, so they see the new value; persistent workers keep the copy
# they started with and replay epoch 0 for ever, without a word. A tensor in shared memory (`share_memory_()`
# when the dataset is built, before the loader's first epoch; written in place with `fill_`) is one block of
# memory that every worker maps, so a write in the main process reaches them all. The other fix is to keep per-epoch randomness out of the dataset: a sampler
# runs in the main process, which is why `DistributedSampler.set_epoch` (chapter 2) works with any workers.

# %% [markdown]
# A worker is also a process with its own torch settings. The DataLoader sets `torch.set_num_threads(1)` in each
# worker, so that k workers do not each start as many threads as the machine has cores: a transform written
# with torch operations runs on one thread there, whatever the main process uses.

# %% tags=["answers-worker-threads"]
from course_utils.chapters.ch01_workers import threads_where_loaded

for what, result in threads_where_loaded(num_workers=2).items():
    print(f"{what}: {result}")

# %% [markdown]
# Only torch's own setting is changed. Libraries with thread pools of their own (OpenCV, a NumPy linked to a
# threaded BLAS) keep theirs in every worker; limit them in a `worker_init_fn` (not measured here).

# %% [markdown]
# What does a loader that cannot keep up look like from the loop? Each worker builds a whole batch. When that
# takes longer than a training step, all k workers finish at about the same moment, the loop takes their k
# batches at once, then waits a whole batch's loading time for the next round. Four workers, a dataset that
# takes 0.1 s per example (reading and decoding an image), and a loop that does nothing with its batches (a
# fast GPU):

# %% tags=["answers-loader-bottleneck-rhythm"]
from course_utils.chapters.ch01_worker_rhythm import rhythm_lines

print("\n".join(rhythm_lines(num_workers=4)))

# %% [markdown]
# Bursts of k batches, then a pause: that rhythm, with a GPU mostly idle, says the loop is waiting for data, not
# computing. The cure is on the loading side: cheaper examples (decode once and cache, smaller files), or more
# workers if there are free cores. A larger `prefetch_factor` does not help here: a queue the workers cannot fill
# is empty at every wait (it only absorbs uneven loading times when the workers keep up on average).

# %% [markdown]
# One trap: workers started with **spawn** (the default on macOS and Windows, and Python 3.14 makes
# forkserver the Linux default) begin as fresh interpreters and must *import* the dataset's class.
# A class defined in a notebook lives in `__main__`, which they cannot import, so the loader fails.
# Linux uses fork by default, but we can ask for spawn and watch it fail:

# %% tags=["answers-workers-start-method"]
import torch.multiprocessing as mp

print("worker start method here:", mp.get_start_method())


class NotebookSquares(Dataset):   # defined in the notebook, i.e. in __main__
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return torch.tensor([float(i)])


from course_utils.chapters.ch01_pipeline import try_spawned_workers

cell_sees, worker_says = try_spawned_workers(NotebookSquares())
print("the cell sees:     ", cell_sees)
print("the worker's error:", worker_says)

# %% [markdown]
# The exception the loop gets says only that a worker died. The cause is in the worker's own
# traceback, printed to the error stream (`try_spawned_workers` caught it to show its type and what
# it is about; in your own notebook it appears as a long red traceback): the worker could not find
# `NotebookSquares` in its `__main__`. The fix: put datasets in a module (as `OnDiskDataset` lives
# in `course_utils.chapters.ch01_pipeline`).
#
# ### In a script: the `if __name__ == "__main__":` guard
#
# In a script the same mechanism bites the other way. A spawned (or forkserver) worker starts as a fresh
# interpreter and first re-runs your script's top level, under the name `__mp_main__`, to find your
# functions and classes. If the top level itself builds the DataLoader and loops over it, that runs again
# inside every worker, which tries to start workers of its own while it is still starting.

# %%
from course_utils.widgets.predict_view import predict
predict(1, "main-guard")

# %% [markdown]
# `run_spawn_script` writes a six-line `train.py` that starts one spawned process, and runs it with
# `python train.py`, once as it is and once with the start moved under the guard. It starts a plain
# `multiprocessing` process, which is what a DataLoader worker is, so that the demo does not pay torch's
# import in every child (the course's tests run the same script with a real `DataLoader(num_workers=2)`).

# %% tags=["answers-workers-main-guard"]
from course_utils.widgets.predict_view import answer

with answer(1, "main-guard"):
    from course_utils.chapters.ch01_workers import run_spawn_script

    for guarded in (False, True):
        run = run_spawn_script(guarded)
        print(f"guard {'present' if guarded else 'missing'}: the script printed {run.printed}, "
              f"the child raised: {run.child_error or 'nothing'}")

# %% [markdown]
# Without the guard the child raised a `RuntimeError` (Python's message says the process tried to start a
# new process before finishing its bootstrapping phase), and the parent saw it exit with code 1. With a
# DataLoader, the loop gets a `RuntimeError` saying that a worker exited unexpectedly. With the guard, the
# child re-runs only the definitions and does its work. Write every script that uses workers as
#
# ```python
# def main():
#     loader = DataLoader(dataset, batch_size=32, num_workers=4)
#     ...
#
# if __name__ == "__main__":
#     main()
# ```
#
# Linux starts workers with fork (a copy of the running process, nothing re-run), so an unguarded script
# works there until it runs on macOS or Windows, or under Python 3.14, whose Linux default is forkserver.
#
# ### A worker that hangs, dies or raises
#
# A worker can get stuck (a network file system that stops answering), be killed (by the out-of-memory
# killer), or hit a bug in `__getitem__`. What does the training loop see?

# %%
predict(1, "worker-hang")

# %% [markdown]
# Four loaders, each with one worker: example 0 takes 0.5 s to load, first with the default `timeout=0` and
# then with `timeout=0.1`; a worker that kills itself on example 1; a dataset whose lookup fails on example 2.

# %% tags=["answers-workers-hang"]
from course_utils.widgets.predict_view import answer

with answer(1, "worker-hang"):
    from course_utils.chapters.ch01_workers import worker_outcomes

    for outcome in worker_outcomes(slow_seconds=0.5, timeout=0.1):
        waited = f", waited at least 0.5 s: {outcome.seconds >= 0.5}" if outcome.case.endswith("(the default)") else ""
        print(f"{outcome.case:<38} -> {outcome.error or 'no error'}; {outcome.detail}{waited}")

# %% [markdown]
# - With `timeout=0` the loop waits as long as the worker takes: a worker that never returns stalls
#   training with no message at all. `timeout=` (seconds) turns that silence into a `RuntimeError`.
#   Set it well above your slowest honest batch.
# - A killed worker also gives a `RuntimeError`, saying the worker exited unexpectedly; look for the
#   reason in the system's log (for example the out-of-memory killer) and lower `num_workers` or the
#   memory each one holds.
# - A bug in `__getitem__` comes back with **its own type** (here `KeyError`; an exception that cannot be rebuilt
#   from its message alone, such as `UnicodeDecodeError`, arrives as a `RuntimeError` that names it), re-raised in the main
#   process, and its message names the worker and shows the worker's traceback. To debug it, set
#   `num_workers=0`: the same error then happens in your process, where a debugger can stop at it.
# - To find where a stuck worker is: `py-spy dump --pid <the worker's pid>` prints a live process's stack,
#   and `faulthandler.dump_traceback_later(60)` called at the start of `__getitem__` (each call re-arms the timer)
#   makes a worker print its own stack once one item has taken 60 s. (Called once in a `worker_init_fn`, it fires
#   60 s after the worker starts, stuck or not, and never again.) Two common causes of stuck or dying workers: a full `/dev/shm` in a
#   container (workers pass batches through shared memory; torch's error then says the bus error "might be
#   caused by insufficient shared memory (shm)": raise the container's `--shm-size`),
#   and threads started before the workers are forked. A worker killed by a signal: read the cause chained
#   to the `RuntimeError`, where torch names the signal (Killed usually means the out-of-memory killer).
#
# ### Memory that grows in every worker: copy-on-read
#
# A forked worker shares its parent's memory until either writes to a page; then that page is copied. Python
# writes to an object each time it is read (its reference count goes up and down), so a worker that reads
# every example of a dataset held as a list of Python objects (file names, dicts, floats) ends up with its own
# copy of all of them: `num_workers` copies, which looks like a leak as each epoch touches more. One forked
# worker reads 500,000 floats once, as a list and as one NumPy array; the memory it has written to since the
# fork (Linux's Private_Dirty: the pages it now holds a copy of) is measured after each tenth:

# %% tags=["answers-copy-on-read"]
import sys

from course_utils.chapters.ch01_workers import copy_on_read

grown = copy_on_read(500_000)
objects = sys.getsizeof(1.0) * 500_000 / 2**20
print(f"a list of 500,000 Python floats ({objects:.1f} MiB of float objects): the worker's private memory grew "
      f"by more than half of that: {grown['list'] > objects / 2}")
print(f"the same numbers in one NumPy array: it grew by under 2 MiB: {grown['array'] < 2}")

# %% [markdown]
# Keep a big dataset's index in arrays or tensors (NumPy, `torch.tensor`, an Arrow table), not in lists
# or dicts of Python objects; strings go into one byte array plus offsets. Under spawn each worker
# unpickles its own copy from the start, so the memory is per worker either way.
#
# ### A file opened in `__init__`: forked workers share it
#
# Under spawn, a Dataset holding an open file cannot even reach its workers (chapter 9's atlas shows the pickling
# error). Under fork it gets there, and that is the trap: the workers inherit the same open file, and its position
# lives in the kernel, shared by every process that inherited it. A Dataset of 64 int32 records, record i holding
# i, read with `seek` then `read` (a 5 ms pause between them standing in for decoding), two forked workers:

# %% tags=["answers-shared-file-handle"]
from course_utils.chapters.ch01_shared_handle import shared_handle_lines

print("\n".join(shared_handle_lines()))

# %% [markdown]
# Alone, the reads are right; with two workers, one worker's `seek` moves the position the other is about to
# `read` from, and records come back as other records, with no error at all. Open the file on the first read
# instead (`self.file = None` in `__init__`, opened in `__getitem__` when it is None): each worker then has its
# own. A library handle inherited the same way shares more than a position: an LMDB environment's lock table and
# memory map, an HDF5 file's library state, a database connection's socket. Their documentation says to use them
# only in the process that opened them, and a forked worker that does not can crash now and then (a worker
# "killed by signal: Segmentation fault", as learners report; not run here: no LMDB in the course's environment).
# The same fix applies: open in each worker, on the first read.
#
# A memory-mapped array is the opposite case: shared on purpose, yet it can look copied into every worker. A
# process's **Rss** (what `top`, `htop` and most monitors show) counts every page it maps, shared or not; its
# **Pss** divides each shared page among the processes that map it; **Private_Dirty** is what the process alone
# has written. Two forked workers, each reading all of a 64 MiB `.npy` file opened with
# `np.load(path, mmap_mode="r")` on the first read, measured from `/proc/self/smaps_rollup`:

# %% tags=["answers-mapped-file-memory"]
from course_utils.chapters.ch01_shared_handle import mapped_file_lines

print("\n".join(mapped_file_lines(mib=64, workers=2)))

# %% [markdown]
# Each worker "uses" the whole file by Rss, so the monitor's total says two copies; Pss adds up to one, and
# nothing is private. The pages belong to the kernel's page cache, one copy for every process, which the kernel
# can drop and read again when memory runs short (not run here). So "every worker uses as much RAM as my
# memory-mapped dataset" is usually Rss counting shared pages; read Pss (`smem`, or `/proc/<pid>/smaps_rollup`)
# before concluding anything. Copy-on-read, in the previous section, is the case where the memory really is per
# worker.
#
# ### Random numbers in workers: a generator the dataset holds
#
# Random augmentation often draws from a generator the dataset keeps, the modern NumPy idiom
# `self.rng = np.random.default_rng(seed)` in `__init__`. What do two workers draw from it?

# %%
predict(1, "dataset-rng")

# %% [markdown]
# `NoisyDataset` returns one random number per example, from its own generator or from NumPy's global one.
# Two workers, batches of 2, two epochs; batch k comes from worker k % 2.

# %% tags=["answers-worker-rng-dataset-generator"]
from course_utils.widgets.predict_view import answer

with answer(1, "dataset-rng"):
    from course_utils.chapters.ch01_workers import worker_draws

    cases = [("the dataset's own generator", dict(own_generator=True, init_fn=False)),
             ("the same, the loader unseeded", dict(own_generator=True, init_fn=False, seed=None)),
             ("NumPy's global np.random", dict(own_generator=False, init_fn=False, epochs=1)),
             ("own generator + worker_init_fn", dict(own_generator=True, init_fn=True))]
    for name, kwargs in cases:
        draws = worker_draws(**kwargs)
        again = "" if len(draws.epochs) < 2 else f" | epoch 2 repeats epoch 1: {draws.epochs_agree}"
        print(f"{name:<31}: the 2 workers drew the same numbers: {draws.workers_agree}{again}")

# %% [markdown]
# The dataset's generator is copied into both workers in the same state, so both draw the same "random"
# augmentations, whether the loader has a seeded `generator` or none (the second line: the loader's seed never
# reaches a generator the dataset holds); and because workers are started afresh every epoch (without `persistent_workers`), every
# epoch repeats them too. NumPy's global state is fine: torch reseeds `random`, NumPy's global generator and
# torch in every worker (NumPy's since torch 1.9: older forum answers that print the same `np.random` numbers
# in every worker predate it). The fix is a `worker_init_fn` that gives the worker's copy its own generator, from
# the seed torch chose for that worker (different per worker and per epoch, as the last line shows; the
# loader's `generator` draws those seeds, so a seeded one makes them reproducible):
#
# ```python
# def reseed_dataset_generator(worker_id):
#     info = torch.utils.data.get_worker_info()
#     info.dataset.rng = np.random.default_rng(info.seed)
#
# DataLoader(dataset, num_workers=2, worker_init_fn=reseed_dataset_generator)
# ```
#
# `info.dataset` is whatever the loader holds. A `Subset` (what `random_split` returns) wraps the dataset,
# and the line above would set an attribute on the wrapper, leaving the inner generator alone: reseed the
# object that owns it (`info.dataset.dataset.rng` for a `Subset`), or draw in `__getitem__` from a generator
# seeded with `(get_worker_info().seed, index)`, which works through any wrapper, with two conditions: with
# `persistent_workers=True` a worker's seed stays the same from epoch to epoch, so every example would get the
# same augmentation every epoch (mix the epoch number in, as the course's trainer does), and with
# `num_workers=0` there is no worker info (`get_worker_info()` returns None).
#
# A seed fixes a sequence of draws, not each draw. After one `torch.manual_seed`, three calls give three different
# values; seeding again gives the same three; one extra draw first shifts every draw after it:

# %% tags=["answers-seed-sequence"]
torch.manual_seed(9999)
first = [torch.rand(2) for _ in range(3)]
torch.manual_seed(9999)
again = [torch.rand(2) for _ in range(3)]
torch.manual_seed(9999)
torch.rand(1)                                    # one extra draw, as an added dropout layer or worker would make
shifted = [torch.rand(2) for _ in range(3)]
print("three calls after one seed, all different:", len({tuple(t.tolist()) for t in first}) == 3)
print("seeded again, the same three:", all(torch.equal(a, b) for a, b in zip(first, again)))
print("one extra draw first, none of the three repeats:", not any(torch.equal(a, b) for a, b in zip(first, shifted)))

# %% [markdown]
# So a run repeats when it makes the same draws in the same order, and anything that adds or moves one (a
# layer, a worker, a shuffle) changes everything after it. Which calls draw, and from which generator? First a
# seeded generator `G` given to the sampler, to the loader, or to both (three orders learners find puzzling),
# each matched with the draws that produce it; then one call at a time after `torch.manual_seed(0)`, and
# whether torch's global stream moved (`course_utils/chapters/ch01_random_draws.py`):

# %% tags=["answers-random-draws"]
from course_utils.chapters.ch01_random_draws import random_draw_lines

print("\n".join(random_draw_lines(n=5, seed=1)))

# %% [markdown]
# A sampler given its own generator draws its permutation from it, and a loader's `generator` then only seeds
# workers. A `RandomSampler` without one seeds itself from the global stream when iterated, so the loader's `G`
# does not decide the order at all. Given both, `G` is drawn twice: every `iter()` of a loader first draws a
# base seed for its workers from the loader's generator (even with no worker), then the sampler draws its
# permutation from what is left. The audit says the same from the other side: building a loader or a sampler
# draws nothing; every `iter()` draws the workers' base seed, shuffled or not, even with no worker; a shuffling
# sampler without a generator of its own draws once more, at the first batch (at `iter()` itself when workers
# prefetch); a loader with `persistent_workers` draws its base seed at its first `iter()` only (a shuffled one
# still draws each epoch's permutation). `random_split` without a generator draws too, and so do layers
# built with random weights (Linear, Conv, Embedding; not normalisation layers or activations) and dropout in
# training mode. So a loader that is built and never iterated changes nothing; one iterated once, or a
# `random_split` or a layer added before the training loop, shifts every draw after it. For a run that survives
# such edits, give each random consumer its own seeded generator (the loader, `random_split`), and seed right
# before building the model.
#
# Workers also change the main process's random stream. `AugmentedRange` draws one `torch.rand` per example
# (an augmentation); `shuffle=True` without a loader `generator` draws each epoch's permutation from the global
# generator. The same `torch.manual_seed(0)`, two epochs, with no worker and with one:

# %% tags=["answers-workers-seed-stream", "answers-worker-shared-memory"]
from course_utils.chapters.ch01_workers import AugmentedRange


def epoch_orders(num_workers, generator=None):
    with torch.random.fork_rng():
        torch.manual_seed(0)
        loader = DataLoader(AugmentedRange(8), batch_size=4, shuffle=True, num_workers=num_workers,
                            generator=generator)
        orders, shared = [], []
        for _ in range(2):
            batches = list(loader)
            orders.append([i for indices, _ in batches for i in indices.tolist()])
            shared.append(batches[0][0].is_shared())
    return orders, shared


(main_1, main_2), in_main = epoch_orders(0)
(work_1, work_2), in_workers = epoch_orders(1)
print(f"no loader generator: the same order with 0 and 1 workers? epoch 1: {main_1 == work_1} | epoch 2: {main_2 == work_2}")
(main_1, main_2), _ = epoch_orders(0, torch.Generator().manual_seed(0))
(work_1, work_2), _ = epoch_orders(1, torch.Generator().manual_seed(0))
print(f"generator=torch.Generator().manual_seed(0):          epoch 1: {main_1 == work_1} | epoch 2: {main_2 == work_2}")
print(f"batches in shared memory (tensor.is_shared()): num_workers=0: {in_main[0]} | num_workers=1: {in_workers[0]}")

# %% [markdown]
# With no worker, `__getitem__` runs in the main process and its `torch.rand` draws advance the generator the
# next epoch's shuffle is drawn from; with workers those draws happen in the workers' own generators. So epoch 1
# agrees and epoch 2 does not, and every `num_workers > 0` agrees with every other. A loader `generator` gives
# the shuffle a stream of its own: the orders agree at any worker count. (The augmentations themselves still
# differ: each worker seeds its own generator, as above.)
#
# The last line is how worker batches travel: each worker writes its batches into **shared memory**
# (`/dev/shm` on Linux), up to `num_workers × prefetch_factor` of them at once, and the main process maps
# them. Docker gives a container 64 MB of `/dev/shm` unless told otherwise, so a worker writing large batches
# dies with a "Bus error" while the machine has plenty of RAM. The fixes: a larger `--shm-size` (or
# `--ipc=host`), fewer workers or a smaller `prefetch_factor`, or `num_workers=0`, whose batches stay in the
# main process's memory (`is_shared()` False). A worker "killed by signal: Killed" is another matter: the
# kernel's out-of-memory killer, when host RAM runs out (`dmesg` names it). Neither limit is reached here.

# %% [markdown]
# ## 9. pin_memory matters only for CPU → GPU copies
#
# `pin_memory=True` puts each batch in page-locked memory, so copying it to a CUDA GPU is faster and
# can run in the background with `batch.to("cuda", non_blocking=True)`. Without an accelerator
# there is no such copy: torch ignores the flag and says so.

# %% tags=["answers-pin-memory"]
import warnings

device = "cuda" if torch.cuda.is_available() else "cpu"
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    x, y = next(iter(DataLoader(squares, batch_size=4, pin_memory=True)))
x = x.to(device, non_blocking=True)   # the copy pinning speeds up (a no-op on the CPU)
print("device:", device, "| batch pinned:", y.is_pinned())
for w in caught:
    print("warning:", str(w.message))

# %% [markdown]
# On a CPU-only machine the batch is not pinned and torch warns. What pinning buys on a GPU was measured
# with `benchmarks/bench_cuda.py` on a GPU machine (the course itself runs on a CPU); the record:

# %%
from course_utils.chapters import gpu_figures

print(gpu_figures.provenance())
print("\n".join(gpu_figures.pinned_lines()))

# %% [markdown]
# A copy from pageable memory goes through a pinned staging buffer inside the driver, so it is slower and
# the `non_blocking` call waits for it. From pinned memory the call returns at once and the copy runs
# while the CPU prepares the next batch.

# %% [markdown]
# ## 10. A stream has no indices: `IterableDataset`
#
# Data read from a file or a network as it arrives has no `__getitem__`: an `IterableDataset` has
# only `__iter__`, and the stream decides the order. So there is nothing for a sampler to shuffle,
# and every worker runs its own copy of `__iter__`. `NumberStream(12)` streams 0 to 11; load it with
# 2 workers, then with each worker keeping only its share (`get_worker_info()` tells a worker its
# `id` and the number of workers; in the main process it returns None).

# %% tags=["answers-iterable-workers-duplicate"]
from collections import Counter

from course_utils.chapters.ch01_pipeline import NumberStream

for sharded in (False, True):
    batches = [b.tolist() for b in DataLoader(NumberStream(12, sharded=sharded), batch_size=4, num_workers=2)]
    counts = Counter(v for batch in batches for v in batch)
    print(f"sharded={sharded!s:<5}: {sum(counts.values())} items, {sum(c > 1 for c in counts.values())} of 12 "
          f"numbers loaded more than once | batches {batches}")
for ordering in (dict(shuffle=True), dict(sampler=range(12))):
    try:
        DataLoader(NumberStream(12), **ordering)
    except ValueError as error:
        print(error)

# %% [markdown]
# Unsharded, each of the 2 workers streamed all 12 numbers: an epoch is 24 items, every example
# twice, and the batches alternate between the workers. Sharded by worker id, worker 0 streamed the
# even numbers and worker 1 the odd ones: 12 items, each once. Any shuffling must happen inside the
# stream (a shuffle buffer, or shuffled file shards), never through `shuffle=` or `sampler=`.
#
# Count the batches: 4, where chapter 0's rule gives ⌈12 / 4⌉ = 3. Each worker batches its own stream, so
# each worker ends with its own short batch (here [8, 10] and [9, 11]), and `drop_last=True` would drop
# one per worker. With workers, chapter 0's counts hold for map-style datasets, not for streams.
#
# A stream may report a length (`__len__`), and `len(DataLoader)` then trusts it: ⌈length / batch_size⌉
# batches, not examples. With workers and no sharding, the stream yields more than it reported:

# %% tags=["answers-iterable-len"]
from course_utils.chapters.ch01_pipeline import SizedNumberStream

loader = DataLoader(SizedNumberStream(300), batch_size=128)
print(f"len(stream) = 300, batch_size=128: len(DataLoader) = {len(loader)}, batches it yields: {sum(1 for _ in loader)}")
loader = DataLoader(SizedNumberStream(300), batch_size=128, num_workers=2)
reported = len(loader)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    batches = list(loader)
print(f"2 workers, unsharded: len(DataLoader) = {reported}, batches yielded: {len(batches)}, "
      f"items: {sum(len(b) for b in batches)} | torch warned: {any('IterableDataset' in str(w.message) for w in caught)}")

# %% [markdown]
# Twice the batches `len()` promised, and no warning: torch's check ("Length of IterableDataset ... was
# reported to be ...") compares the *batches* yielded with the *examples* reported, so with batches it fires
# only past 300 batches. A progress bar or a schedule sized by `len(loader)` is then wrong by the number of
# workers. Sharded, every example comes once, but each worker still ends with its own short batch, so the
# batch count can pass `len()` (the cell above counted 4 batches for ⌈12 / 4⌉ = 3).

# %%
tmp.cleanup()

# %% [markdown]
# ## 11. Splitting and joining datasets
#
# `random_split` draws its permutation from the global generator unless you give it one, so one more random
# draw earlier in a script changes which examples end up in validation. Fractions are rounded down and the
# leftover examples go one each to the first splits, not to the largest. The splits are `Subset`s of one
# dataset: a transform set through `train.dataset` is set for validation too, and the wrapped dataset's
# attributes are not on the `Subset`. Assigning one on the `Subset` (`val.transform = ...`) raises nothing and
# changes nothing: it is a new attribute that `__getitem__` never reads. For a validation split without
# augmentation, build a second dataset object with its own transform and take a `Subset` of each with the
# same indices. `ConcatDataset` joins map-style datasets end to end, `ChainDataset`
# streams, `StackDataset` zips datasets of equal length. `default_convert` turns NumPy arrays into tensors
# without stacking them: it is what a loader with `batch_size=None` applies to each single example.

# %% tags=["answers-subset-transform"]
from course_utils.chapters.ch01_dataset_tools import composition_rules, loader_knobs

for what, result in composition_rules().items():
    print(f"{what}: {result}")

# %% [markdown]
# Three rarer loader knobs. `prefetch_factor` (batches each worker prepares ahead) exists only with workers.
# `pin_memory_device` is deprecated: pinning now targets the current accelerator. `in_order=False` hands out
# batches as workers finish them: one slow batch no longer holds the others back, but predictions gathered in
# loader order no longer line up with the dataset's labels. Here worker 0's first batch waits until the loop
# has received another one:

# %%
for what, result in loader_knobs().items():
    print(f"{what}: {result}")

# %% [markdown]
# ## Errors you will meet here
#
# The errors this chapter's mechanisms raise, each produced just now on the pinned torch and shown in torch's
# own words, with its fix run beside it. It stays folded until you need it; chapter 9 holds the whole atlas,
# and a box that finds the entry for a message you paste.

# %% tags=["answers-collate-unsupported-type"]
from course_utils.widgets.explain_view import errors_here

errors_here(1)

# %% [markdown]
# ## Exercises: write it yourself
#
# Each exercise is a stub for you to edit and a check that reads your dataset through real
# `DataLoader`s (shuffled, with a partial last batch) on data you do not see, and names the first thing
# that differs. Your checks are saved with your quiz answers.
#
# ### Exercise 1.1: a Dataset of sliding windows
#
# A time series is a 1-D tensor `series`. Write the class `SlidingWindows(series, window)`: example `i`
# is the pair (`series[i : i + window]`, `series[i + window]`), a window of values and the value that
# comes next, returned as a tuple. The inputs are cut from `series`, so they keep its dtype (float32 or
# float64: a model refuses inputs of another dtype); the target may be the 0-d tensor or a Python float.
# `1 ≤ window ≤ len(series)`; `len(dataset)` is the number of such examples (0 for a series exactly
# `window` long), and an index past the end raises `IndexError` (that is how `for example in dataset`
# knows where to stop).

# %%
class SlidingWindows(Dataset):
    def __init__(self, series, window):
        raise NotImplementedError  # replace these lines with your code

    def __len__(self):
        raise NotImplementedError

    def __getitem__(self, i):
        raise NotImplementedError

# %%
from course_utils.exercises import check
check("SlidingWindows")

# %% [markdown]
# ### A label's dtype is part of the contract
#
# A `__getitem__` that returns `float(y)` instead of the stored integer label looks harmless: the
# DataLoader collates it into a float64 tensor of shape (N,). `CrossEntropyLoss` accepts two kinds of
# target: class indices, an int64 tensor of shape (N,) (uint8 too, but not int32), or class *probabilities*,
# a float tensor shaped like the logits, (N, C). A float tensor of shape (N,) is neither, and torch says so
# (older versions word it "expected scalar type Long but found Float"); int32 labels, from an int32 NumPy
# array through `torch.from_numpy`, are refused the same way:

# %% tags=["answers-ce-target-forms"]
logits = torch.tensor([[2.0, 0.5, -1.0], [0.1, 1.5, 0.3]])
labels = torch.tensor([0, 1])
for name, target in [("int64 labels, shape (2,)", labels),
                     ("float labels, shape (2,)", labels.float()),
                     ("int32 labels, shape (2,)", labels.int()),
                     ("float one-hot rows, shape (2, 3)", torch.nn.functional.one_hot(labels, 3).float())]:
    try:
        print(f"{name:<33} loss {torch.nn.functional.cross_entropy(logits, target).item():.4f}")
    except RuntimeError as error:
        print(f"{name:<33} RuntimeError: {error}")

# %% [markdown]
# One-hot probabilities give the same loss as the labels they encode; a float or int32 label of shape (N,) is
# refused. Return the label as an int64 tensor (`torch.as_tensor(y, dtype=torch.long)`, or `int(y)`, which
# collates to int64), never as a float.
#
# A **multi-label** task (an example may be "happy" and "surprised" at once) has a multi-hot target, one 0/1
# per class. `CrossEntropyLoss` is for exactly one class per example: its softmax makes the classes compete,
# so two true labels can get at most 0.5 each. `BCEWithLogitsLoss` gives every class its own sigmoid, a yes/no
# per class, and wants the target as floats shaped like the logits. One example, logits [4, −4, 4], labels 0
# and 2 both true:

# %% tags=["answers-multilabel-loss"]
import math

logits = torch.tensor([[4.0, -4.0, 4.0]])
multi_hot = torch.tensor([[1, 0, 1]])
for name, call in [("cross_entropy(logits, multi_hot int64)", lambda: torch.nn.functional.cross_entropy(logits, multi_hot)),
                   ("nll_loss(log_softmax, multi_hot int64)",
                    lambda: torch.nn.functional.nll_loss(logits.log_softmax(1), multi_hot))]:
    try:
        call()
    except RuntimeError as error:
        print(f"{name}: RuntimeError: {error}")
ce = torch.nn.functional.cross_entropy(logits, multi_hot.float())
bce = torch.nn.functional.binary_cross_entropy_with_logits(logits, multi_hot.float())
print(f"cross_entropy, multi-hot float: {sig(ce.item(), 3)} (2·log 2 = {sig(2 * math.log(2), 3)} is its floor); "
      f"softmax {[sig(p, 2) for p in logits.softmax(1)[0].tolist()]}")
print(f"BCEWithLogitsLoss, multi-hot float: {sig(bce.item(), 3)}; sigmoid {[sig(p, 2) for p in logits.sigmoid()[0].tolist()]}"
      f" -> predicted labels (sigmoid > 0.5): {(logits.sigmoid() > 0.5).int()[0].tolist()}")
for shape, loss_fn in [((4, 1), torch.nn.BCEWithLogitsLoss()), ((4, 1), torch.nn.BCELoss()),
                       ((4, 2), torch.nn.BCEWithLogitsLoss())]:
    try:
        loss_fn(torch.zeros(shape).sigmoid(), torch.ones(4))
    except ValueError as error:
        print(f"{type(loss_fn).__name__}, output {shape}, target (4,): ValueError: {error}")
out = torch.zeros(4, 1)
print("output (4, 1), target (4,): .view_as(out) on the target and .squeeze(1) on the output give the same loss:",
      torch.nn.BCEWithLogitsLoss()(out, torch.ones(4).view_as(out)).item() ==
      torch.nn.BCEWithLogitsLoss()(out.squeeze(1), torch.ones(4)).item())

# %% [markdown]
# The integer multi-hot is refused (older torch said "multi-target not supported": `nll_loss`'s words, still
# there); the float one is *accepted* as class probabilities summing to 2, and its loss can never fall below
# 2·log 2. For a binary or multi-label output, make the target the logits' shape: a (N, 1) output with a (N,)
# target is a `ValueError` in both BCE losses (the regression losses broadcast it, with only a `UserWarning`,
# chapter 7). Two
# outputs per example with one class index is a two-class `CrossEntropyLoss`, not BCE.
#
# Both losses take weights, and they mean different things. `CrossEntropyLoss(weight=w)` has one weight per
# class, applied to the true class's term, and `"mean"` divides by the summed weights (for class-index targets;
# with probability targets it divides by N, so one-hot probabilities and their labels no longer give the same
# loss once `weight` is set). `BCEWithLogitsLoss`'s
# `weight` rescales each element and broadcasts to the input: shape (C,) weighs classes, (N, C) any element;
# its `pos_weight` (C,) multiplies only the positive term of each class. On one batch:

# %% tags=["answers-loss-weights"]
scores = torch.randn(6, 3, generator=torch.Generator().manual_seed(0))
classes = torch.tensor([0, 0, 0, 0, 1, 2])
w = torch.tensor([0.5, 2.0, 4.0])
per_example = torch.nn.functional.cross_entropy(scores, classes, reduction="none")
weighted = torch.nn.functional.cross_entropy(scores, classes, weight=w)
print("CrossEntropyLoss(weight=w) = sum(w[y]·loss) / sum(w[y]):",
      torch.allclose(weighted, (w[classes] * per_example).sum() / w[classes].sum()))
hot = torch.nn.functional.one_hot(classes, 3).float()
as_probabilities = torch.nn.functional.cross_entropy(scores, hot, weight=w)
print("the same targets one-hot, as probabilities: divided by N instead:",
      torch.allclose(as_probabilities, (w[classes] * per_example).sum() / len(classes)),
      "| equal to the index targets' loss:", torch.allclose(as_probabilities, weighted))
plain = torch.nn.functional.binary_cross_entropy_with_logits(scores, hot, reduction="none")
by_class = torch.nn.functional.binary_cross_entropy_with_logits(scores, hot, weight=w, reduction="none")
by_element = torch.nn.functional.binary_cross_entropy_with_logits(scores, hot, weight=hot + 1, reduction="none")
positive = torch.nn.functional.binary_cross_entropy_with_logits(scores, hot, pos_weight=w, reduction="none")
print("BCEWithLogitsLoss(weight=w, shape (3,)): every element of class c times w[c]:", torch.allclose(by_class, plain * w))
print("BCEWithLogitsLoss(weight of shape (6, 3)): element by element:", torch.allclose(by_element, plain * (hot + 1)))
print("BCEWithLogitsLoss(pos_weight=w): positives times w[c]:", torch.allclose(positive[hot == 1], (plain * w)[hot == 1]),
      "| negatives unchanged:", torch.allclose(positive[hot == 0], plain[hot == 0]))

# %% [markdown]
# Where do class weights come from? From counts: w_c = N / (C · n_c), so a class with a tenth of the average
# count weighs 10. Three classes with 900, 90 and 10 examples (overlapping 2-D clusters), a linear classifier
# trained by 60 full-batch gradient-descent steps (lr 1.0) without and with those weights, 3 seeds:

# %% tags=["answers-class-weights"]
counts = torch.tensor([900, 90, 10])
balanced = counts.sum() / (len(counts) * counts)
print("weights N / (C · n_c):", [sig(v, 3) for v in balanced.tolist()])


def recalls(weight, seed, steps=60):
    generator = torch.Generator().manual_seed(seed)
    y = torch.repeat_interleave(torch.arange(3), counts)
    x = torch.tensor([[0.0, 0.0], [1.5, 0.0], [0.0, 1.5]])[y] + torch.randn(len(y), 2, generator=generator)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        net = torch.nn.Linear(2, 3)
    for _ in range(steps):
        net.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y, weight=weight).backward()
        with torch.no_grad():
            for parameter in net.parameters():
                parameter -= 1.0 * parameter.grad
    predicted = net(x).argmax(1)
    return [((predicted == c) & (y == c)).sum().item() / counts[c].item() for c in range(3)]


for name, weight in (("unweighted", None), ("weighted", balanced)):
    runs = [recalls(weight, seed) for seed in range(3)]
    print(f"{name:<10}: recall of the 10-example class above 0.5 on {sum(r[2] > 0.5 for r in runs)} of 3 seeds; "
          f"of the 900-example class above 0.9 on {sum(r[0] > 0.9 for r in runs)} of 3")

# %% [markdown]
# Unweighted, the rare class is never predicted: the loss is dominated by the 900. Weighted, it is found, and
# the majority class pays (its recall falls): weights move the decision boundary, they do not add
# information. Choose them by the metric you report (per-class recall, macro F1) on validation data; plain
# accuracy rewards ignoring the rare class. For segmentation the counts are pixels per class over the
# training set.
#
# Label smoothing changes the target itself: with ε = 0.1 and C classes, the true class gets 1 − ε + ε/C and
# every other ε/C. The loss is a cross-entropy against that target, so its floor is the target's entropy, not
# 0. Ten classes, the true class ahead of the others by a margin:

# %% tags=["answers-label-smoothing-floor"]
C, eps = 10, 0.1
smoothed = torch.full((C,), eps / C)
smoothed[0] += 1 - eps
floor = -(smoothed * smoothed.log()).sum().item()
print(f"floor (the smoothed target's entropy): {sig(floor, 4)}")
for margin in (0.0, math.log(smoothed[0] / smoothed[1]), 10.0):
    z = torch.zeros(1, C)
    z[0, 0] = margin
    plain_loss = torch.nn.functional.cross_entropy(z, torch.tensor([0])).item()
    smooth_loss = torch.nn.functional.cross_entropy(z, torch.tensor([0]), label_smoothing=eps).item()
    print(f"margin {sig(margin, 3):>5}: plain loss {sig(plain_loss, 3):<8} label_smoothing=0.1: {sig(smooth_loss, 4)}")

# %% [markdown]
# The smoothed loss is lowest, at its floor, when the margin is log(0.91 / 0.01) ≈ 4.51, and rises again for a
# more confident model, while the plain loss keeps falling towards 0. A smoothed loss that stalls well above 0
# at high accuracy is working as designed: compare it with its floor, or log the plain loss beside it.
#
# ### Exercise 1.2: a Dataset that reads one file per example
#
# A folder holds one file per example, named `0.pt`, `1.pt`, `2.pt`, ... (and maybe other files, such as a
# README, the features' statistics in `stats.pt` or notes in `0.txt`). Each was written with `torch.save({"x": features,
# "y": label}, path)`. Write `FolderDataset(folder)`: `len(dataset)` is the number of examples, and
# `dataset[i]` returns the pair `(x, y)` from the file `i.pt` (a tuple, as `TensorDataset` returns; a list
# `[x, y]` collates the same way and is accepted too), read when it is asked for, in `__getitem__`, so
# that data larger than memory works. Keep the stored dtypes: `x` float32, `y` an int64 class label
# (`int(y)` is fine too; a float label is not: the cell above shows what `CrossEntropyLoss` does with
# one).

# %%
class FolderDataset(Dataset):
    def __init__(self, folder):
        raise NotImplementedError  # replace these lines with your code

    def __len__(self):
        raise NotImplementedError

    def __getitem__(self, i):
        raise NotImplementedError

# %%
check("FolderDataset")

# %% [markdown]
# ## Quiz

# %%
from course_utils.widgets.quiz_view import quiz
quiz(1)

# %% [markdown]
# ## Summary
#
# - A `Dataset` has `__len__` and `__getitem__`; a `DataLoader` does the batching, ordering and loading.
# - The sampler decides the order, the batch sampler groups indices, workers load, collate stacks.
# - N = 100 with B = 16 gives 7 batches (six of 16, one of 4); `drop_last=True` gives 6, and with
#   shuffling a different 4 examples sit out each epoch.
# - Defaults: batch size 1, no shuffling, no workers, `default_collate`, nothing dropped or pinned.
# - Measure `num_workers` on your own data: workers cost start-up time before they save any.
# - `pin_memory` only helps copies from the CPU to an accelerator; on a CPU-only machine torch ignores it and warns.
# - An `IterableDataset` streams in its own order and takes no sampler; with workers, shard it with
#   `get_worker_info()` or every worker loads everything.
# - Notebook-defined datasets fail with spawned workers: keep datasets in an importable module. In a script,
#   start workers under `if __name__ == "__main__":`, or spawned workers fail with a `RuntimeError`.
# - A stuck worker stalls the loop silently unless `timeout=` is set; a bug in `__getitem__` comes back with
#   its own exception type; `num_workers=0` makes it debuggable.
# - torch seeds `random`, NumPy's global state and torch in each worker; a generator your dataset holds is
#   copied identically into every worker and every epoch: reseed it in a `worker_init_fn`.
