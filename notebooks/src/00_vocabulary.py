# %% [markdown]
# # Chapter 0: The vocabulary of training
#
# **After this chapter you can** turn "N examples, batch B, E epochs, accumulation K" into exact
# counts of iterations, forward passes, weight updates and examples seen, and say why the word
# "step" is ambiguous.
#
# Every number below is computed by a cell, and most are checked against a real `DataLoader`
# or a counted loop. Nothing is typed in by hand.

# %%
from course_utils import setup_notebook, training_arithmetic
setup_notebook()

import math
import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

# %% [markdown]
# ## The words
#
# | term | meaning |
# |---|---|
# | dataset size **N** | how many examples there are |
# | batch size **B** | how many examples go through the model together |
# | **iteration** (= step) | one batch through forward → loss → backward → update |
# | **epoch** | one pass over all N examples |
# | last (partial) batch | what is left when B does not divide N |
# | `drop_last` | throw that partial batch away |
# | micro-batch | one batch when several are accumulated before an update |
# | accumulation **K** | micro-batches summed into one update |
# | effective batch | B·K examples per update (B·K·W with W data-parallel ranks) |
# | weight update | one `optimizer.step()` call |
#
# "Batch" used to mean the whole dataset (batch gradient descent) and "stochastic" meant one
# example at a time. Today "batch" almost always means a **mini-batch** of B examples.
#
# The smallest example makes it concrete: 10 examples, batch 4.

# %%
tiny = TensorDataset(torch.arange(10))
for i, (batch,) in enumerate(DataLoader(tiny, batch_size=4)):
    print(f"iteration {i}: examples {batch.tolist()}")
print("with drop_last=True:", [b.tolist() for (b,) in DataLoader(tiny, batch_size=4, drop_last=True)])

# %% [markdown]
# Three iterations make the epoch, and the last one holds only 2 examples. With `drop_last=True`
# examples 8 and 9 are never seen in this epoch.
#
# ## The standard example: N = 10,000, B = 32, E = 3
#
# One epoch needs ⌈10,000 / 32⌉ iterations: 312 full batches and one partial batch.

# %%
N, B, E = 10_000, 32, 3
print(f"10,000 / 32 = {N / B}  ->  ceil = {math.ceil(N / B)} iterations, last batch {N - (math.ceil(N / B) - 1) * B}")
plain = training_arithmetic(N, B, E)
print(plain)

# %% [markdown]
# Now accumulate K = 4 micro-batches per update. The effective batch is 32 × 4 = 128. The number
# of forward passes does not change; the number of updates drops to about a quarter.

# %%
accum = training_arithmetic(N, B, E, accum_steps=4)
for name in ["effective_batch_size", "iters_per_epoch", "updates_per_epoch", "total_micro_steps",
             "total_weight_updates", "total_examples_seen"]:
    print(f"{name:<22} K=1: {getattr(plain, name):>6,}   K=4: {getattr(accum, name):>6,}")

# %% [markdown]
# ## Hand calculation: N = 1,000, B = 64, E = 5
#
# Work it out on paper first, then run the cell.
#
# - 1,000 / 64 = 15.6, so 15 full batches (960 examples) and a last batch of 40: 16 iterations.
# - 5 epochs × 16 = 80 iterations, and 80 updates without accumulation.
# - Example-level forward passes: 75 full batches × 64 + 5 last batches × 40.

# %%
n, b, e = 1_000, 64, 5
full, last = divmod(n, b)
iters = full + (last > 0)
by_hand = e * full * b + e * last
print(f"{full} full batches + a last batch of {last} -> {iters} iterations per epoch")
print(f"{e * iters} updates; forward passes {e * full} x {b} + {e} x {last} = {by_hand:,} = {e} x {n:,}")
r = training_arithmetic(n, b, e)
loader_batches = [len(x) for (x,) in DataLoader(TensorDataset(torch.zeros(n)), batch_size=b)]
print("calculator agrees:", (r.iters_per_epoch, r.total_weight_updates, r.total_examples_seen) == (iters, e * iters, by_hand))
print("real DataLoader:  ", len(loader_batches), "batches, sizes", loader_batches[0], "...", loader_batches[-1])

# %% [markdown]
# ## Why "step" is ambiguous
#
# In a hand-written loop `step` is often the loop counter: one per **micro-batch**. In the
# Hugging Face Trainer and PyTorch Lightning the global step counts **weight updates**. With
# K = 4 the two differ by 4×, and everything keyed to "steps" moves with them: warm-up length,
# schedule length, logging and checkpoint intervals.

# %%
K = 4
for when in [100, 1_000]:
    print(f"'every {when:,} steps' = every {when:,} micro-batches ({when // K:,} updates)"
          f"  or  every {when:,} updates ({when * K:,} micro-batches)")

# %% [markdown]
# ## The accumulation remainder
#
# The textbook accumulation loop steps when `(i + 1) % K == 0`. With 313 micro-batches and
# K = 4 that is 78 updates, not 79. The 313th micro-batch's gradient is left in `.grad`:
# it either leaks into the next epoch's first update or is wiped by a `zero_grad()` at the
# epoch start.
#
# The course's loop also steps at the end of the epoch, the **flush** (as Lightning,
# Hugging Face Accelerate and the HF Trainer do). The calculator assumes that loop. Let us
# count real `optimizer.step()` calls to prove both numbers.

# %%
def count_updates(n_examples: int, batch_size: int, k: int, epochs: int, flush: bool):
    """Run a real accumulation loop and count optimizer.step() calls per epoch and micro-batches per update."""
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(TensorDataset(torch.randn(n_examples, 2), torch.randn(n_examples, 1)), batch_size=batch_size)
    steps_per_epoch, window_sizes, pending = [], [], 0
    optimizer.register_step_post_hook(lambda *_: window_sizes.append(pending))
    for _ in range(epochs):
        before = len(window_sizes)
        for i, (x, y) in enumerate(loader):
            loss = torch.nn.functional.mse_loss(model(x), y) / k
            loss.backward()
            pending += 1
            if (i + 1) % k == 0 or (flush and i + 1 == len(loader)):
                optimizer.step()
                optimizer.zero_grad()
                pending = 0
        steps_per_epoch.append(len(window_sizes) - before)
    return steps_per_epoch, window_sizes

naive, naive_windows = count_updates(10_000, 32, 4, epochs=2, flush=False)
flushed, flushed_windows = count_updates(10_000, 32, 4, epochs=2, flush=True)
print("naive loop   : updates per epoch", naive, "| micro-batches in epoch 2's first update:", naive_windows[78])
print("flushing loop: updates per epoch", flushed, "| micro-batches in the last update of an epoch:", flushed_windows[78])
print("calculator   : naive", accum.naive_updates_per_epoch, "| with flush", accum.updates_per_epoch,
      "| last window", accum.last_window_size)

# %% [markdown]
# The naive loop's first update of epoch 2 sums **5** micro-batches: the leftover from epoch 1
# plus a full window. The flushing loop makes 79 updates per epoch, exactly as the calculator says.
#
# One more detail. The flushed window holds r = 1 micro-batch, but every loss was divided by
# K = 4, so that update is **4× too small**. Dividing by the window's real size (as the HF Trainer
# does) fixes it. Compare the gradient of the last micro-batch scaled both ways with the
# gradient of the same batch computed directly:

# %%
torch.manual_seed(0)
model = torch.nn.Linear(2, 1)
x, y = torch.randn(16, 2), torch.randn(16, 1)
def grad_norm(divisor: int) -> float:
    model.zero_grad()
    (torch.nn.functional.mse_loss(model(x), y) / divisor).backward()
    return torch.cat([p.grad.flatten() for p in model.parameters()]).norm().item()
true_norm = grad_norm(1)
print(f"flush window r={accum.last_window_size}: loss/K gives {grad_norm(4) / true_norm:.2f} of the batch's gradient,"
      f" loss/r gives {grad_norm(accum.last_window_size) / true_norm:.2f}")

# %% [markdown]
# The course's loop (`course_utils.loop`) flushes and divides by the window's real size. Here is
# the count from a real training run on the spiral: 600 examples, batch 32, K = 4.

# %%
from course_utils.session import TrainConfig, run
from course_utils.loop import StepEvent

config = TrainConfig(n_train=600, batch_size=32, accum_steps=4, epochs=2, measure_memory=False)
updates = [ev.updates for ev in run(config) if isinstance(ev, StepEvent)]
print("course loop, updates after each epoch:", updates[len(updates) // 2 - 1], updates[-1])
print("calculator, updates per epoch:", config.arithmetic().updates_per_epoch,
      "=", f"ceil({config.arithmetic().iters_per_epoch} / 4)")

# %% [markdown]
# ## Many GPUs: world size W
#
# In data-parallel training each of W ranks (processes) runs the same loop on its own share of
# the data. `DistributedSampler` gives each rank ⌈N / W⌉ indices and, when N does not divide
# evenly, pads by repeating the first indices so every rank runs the same number of steps.

# %%
toy = TensorDataset(torch.arange(10))
for rank in range(4):
    shard = list(DistributedSampler(toy, num_replicas=4, rank=rank, shuffle=False))
    print(f"rank {rank}: indices {shard}")
w4 = training_arithmetic(10, 2, 1, world_size=4)
print(f"calculator: {w4.samples_per_rank} per rank, {w4.padded_samples} padding duplicates, "
      f"{w4.iters_per_epoch} iterations per rank")

# %% [markdown]
# Ranks 2 and 3 see examples 0 and 1 a second time: 2 duplicates per epoch.
#
# ## The calculator
#
# Change any input. The timeline draws the epochs as blocks, then one epoch batch by batch,
# drawn to scale. Green marks are updates, an orange mark is the flush, and grey hatching is
# what `drop_last` throws away. Press ▶ to animate one step. Try B > N, K larger than the epoch,
# W larger than N, and `drop_last` with B > N.

# %%
from course_utils.widgets.calculator import calculator
calculator(dataset_size=10_000, batch_size=32, epochs=3, accum_steps=4)

# %% [markdown]
# ## Quiz

# %%
from course_utils.widgets.quiz_view import quiz
quiz(0)

# %% [markdown]
# Your answers are saved between sessions. This view shows your progress across the whole
# course; press Refresh after answering.

# %%
from course_utils.widgets.quiz_view import course_progress
course_progress()

# %% [markdown]
# ## Summary
#
# - iterations per epoch = ⌈N / B⌉, or ⌊N / B⌋ with `drop_last=True`; micro-steps = E × iterations.
# - updates per epoch = ⌈iterations / K⌉ for a loop that flushes, ⌊iterations / K⌋ for the textbook loop.
# - effective batch = B × K (× W ranks); accumulation changes memory, not the number of updates.
# - "step" means an update in most trainers and a micro-batch in many hand-written loops: check which.
# - `DistributedSampler` pads every rank to ⌈N / W⌉, so a few examples are seen twice per epoch.
