# %% [markdown]
# # Chapter 0: The vocabulary of training
#
# **How to run this notebook.** In the menu, choose **Run > Run All Cells** (or click into the first cell and
# press Shift+Enter, cell after cell). It takes about 10 seconds. Every code cell then shows what it prints, and
# the views near the end come alive: the calculator recomputes when you change a number and press Enter, and
# the quiz checks your answers and keeps them. Before the run, and whenever you reopen the notebook later, the
# views show only text or a line asking you to run the cells: run all cells again. The same holds for every
# chapter.
#
# **After this chapter you can** turn "N examples, batch B, E epochs, accumulation K" into exact
# counts of iterations, forward passes, weight updates and examples seen, and say why the word
# "step" is ambiguous.
#
# Every number in the prose is checked by the cell that follows it, most of them against a real
# `DataLoader` or a counted loop.

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
# | **iteration** (= step) | one batch through forward → loss → backward (→ update, but with K > 1 only at a window's end) |
# | **epoch** | one pass over all N examples |
# | last (partial) batch | what is left when B does not divide N |
# | `drop_last` | throw that partial batch away |
# | micro-batch | one batch when several are accumulated before an update |
# | accumulation **K** | micro-batches summed into one update |
# | effective batch | B·K examples per update (B·K·W with W data-parallel ranks) |
# | weight update | one `optimizer.step()` call |
#
# Three words for one idea, from the history of optimisation: **batch** gradient descent used the
# whole dataset for every update (B = N), **stochastic** gradient descent used one example
# (B = 1), and **mini-batch** gradient descent uses B examples in between. Today "batch" almost
# always means a mini-batch, and "SGD" names the optimizer whatever B is.
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
# The same run as a picture: the three epochs, then one epoch batch by batch with its updates
# (drawn here with K = 4, the setting of the next cell). The calculator at the end of the chapter
# draws this for any input.

# %%
import matplotlib.pyplot as plt
from course_utils.widgets.calculator import timeline_figure
timeline_figure(training_arithmetic(N, B, E, accum_steps=4))
plt.show()

# %% [markdown]
# Now accumulate K = 4 micro-batches per update. The effective batch is 32 × 4 = 128. The number
# of forward passes does not change; the number of updates drops to about a quarter.

# %% tags=["answers-count-updates"]
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
# A learning-rate schedule shows the cost. A **schedule** changes the learning rate as training goes on,
# one `scheduler.step()` call at a time; a cosine schedule lowers it along half a cosine, from its start
# value to near zero at the last step it was sized for (chapter 3 shows the API). Here one is sized for
# the run's 237 updates, but the loop calls `scheduler.step()` after every micro-batch instead of after
# every update:

# %% tags=["answers-step-ambiguous"]
def lr_after(calls: int, total_updates: int) -> float:
    """The lr of a cosine schedule sized for `total_updates`, after `calls` scheduler steps."""
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total_updates)
    for _ in range(calls):
        opt.step()
        sched.step()
    return sched.get_last_lr()[0]

total = accum.total_weight_updates
print(f"schedule sized for {total} updates; after 1/4 of the run ({total // 4} updates):")
print(f"  stepped per update     : lr = {lr_after(total // 4, total):.4f}")
print(f"  stepped per micro-batch: lr = {lr_after(K * (total // 4), total):.4f}  (already at the bottom of the cosine)")
print(f"the reverse, sized for {K * total} micro-batches, stepped per update: lr at the run's end = "
      f"{lr_after(total, K * total):.4f} of 0.1  (it never decays to the bottom)")

# %% [markdown]
# The same drift comes with several processes (chapter 7): this course sizes a schedule in the updates
# each process makes. Hugging Face Accelerate's prepared scheduler instead steps once per process at
# every call, W steps for W processes, since it expects a schedule sized for one process; a schedule sized
# in per-process updates then ends W times too early, exactly like the micro-batch case above.

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
# count real `optimizer.step()` calls, with a plain counter beside each call, for all three
# loops: naive (the leftover leaks), naive with `zero_grad()` at each epoch start (the leftover
# is wiped), and flushing.

# %% tags=["answers-accum-remainder"]
def count_updates(n_examples: int, batch_size: int, k: int, epochs: int, ending: str):
    """Run a real accumulation loop; return updates per epoch and how many micro-batches each update summed."""
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(TensorDataset(torch.randn(n_examples, 2), torch.randn(n_examples, 1)), batch_size=batch_size)
    updates_per_epoch, summed, pending = [], [], 0
    for _ in range(epochs):
        if ending == "wipe":
            optimizer.zero_grad()      # the leftover gradient of the last epoch is thrown away
            pending = 0
        n_updates = 0
        for i, (x, y) in enumerate(loader):
            loss = torch.nn.functional.mse_loss(model(x), y) / k
            loss.backward()
            pending += 1
            if (i + 1) % k == 0 or (ending == "flush" and i + 1 == len(loader)):
                optimizer.step()
                n_updates += 1         # the plain counter
                summed.append(pending)
                optimizer.zero_grad()
                pending = 0
        updates_per_epoch.append(n_updates)
    return updates_per_epoch, summed

for ending in ["leak", "wipe", "flush"]:
    per_epoch, summed = count_updates(10_000, 32, 4, epochs=2, ending=ending)
    print(f"{ending:<5}: updates per epoch {per_epoch} | micro-batches summed by update 79 (epoch 2's first "
          f"for leak/wipe, epoch 1's flush): {summed[78]} | micro-batches never applied: {2 * 313 - sum(summed)}")
print("calculator: naive", accum.naive_updates_per_epoch, "| with flush", accum.updates_per_epoch,
      "| last window", accum.last_window_size)

# %% [markdown]
# The leaking loop's first update of epoch 2 sums **5** micro-batches: the leftover from epoch 1
# plus a full window (and epoch 2's own leftover is still waiting at the end). The wiping loop
# makes 78 updates and throws away one micro-batch's gradient per epoch. The flushing loop makes
# 79 updates per epoch, exactly as the calculator says.
#
# ## Weighting a window: equal to one big batch, exactly (for per-example layers)
#
# Accumulating a window of micro-batches should give the same gradient as one big batch of the
# same examples (the next section asks whether that holds for every model). Each micro-batch's loss is a *mean*, so it must be weighted by its share of the
# window's **examples**: `course_utils.engine.arithmetic.loss_weight` is that rule, used by the course's
# loop. The hard case is the end of an epoch: 600 examples, batch 32, K = 4 gives 19 batches, and
# the last window holds 3 of them, with 32, 32 and 24 examples. Dividing every loss by K makes that
# update too small; dividing by the number of micro-batches (3) over-weights the 24 examples by 4/3.

# %% tags=["answers-accum-weighting"]
from course_utils.engine.arithmetic import accumulation_window, batch_sizes, loss_weight

sizes = batch_sizes(600, 32)
last = accumulation_window(len(sizes) - 1, len(sizes), 4)
print("batch sizes of the last window:", [sizes[i] for i in last])
torch.manual_seed(0)
xs, ys = torch.randn(600, 2, dtype=torch.double), torch.randn(600, 1, dtype=torch.double)
model = torch.nn.Linear(2, 1).double()
starts = [sum(sizes[:i]) for i in range(len(sizes))]

def window_grad(weight) -> torch.Tensor:
    """Accumulate the last window with each micro-batch's mean loss scaled by weight(i)."""
    model.zero_grad()
    for i in last:
        sl = slice(starts[i], starts[i] + sizes[i])
        (torch.nn.functional.mse_loss(model(xs[sl]), ys[sl]) * weight(i)).backward()
    return model.weight.grad.clone()

model.zero_grad()
big = slice(starts[last[0]], 600)
torch.nn.functional.mse_loss(model(xs[big]), ys[big]).backward()
one_big_batch = model.weight.grad.clone()
for name, weight in [("loss_weight (examples)", lambda i: loss_weight(i, sizes, 4)),
                     ("divide by K = 4", lambda i: 1 / 4), ("divide by 3 micro-batches", lambda i: 1 / len(last))]:
    diff = (window_grad(weight) - one_big_batch).abs().max().item()
    shown = "< 1e-12 (equal)" if diff < 1e-12 else f"{diff:.1e}"
    print(f"{name:<27} max |difference from one big batch of {big.stop - big.start}| = {shown}")

# %% [markdown]
# Only the example-weighted window equals the big batch (to float64 rounding). This
# matters most when batches differ in size (a partial last batch, or variable-length batches
# weighted by tokens), which is why the HF Trainer divides by the number of items in the window
# when it knows it.
#
# ### Accumulation and the layers between
#
# The equality above holds for this MLP. Real models have more layers between the Linears: normalisation
# layers (LayerNorm, GroupNorm, BatchNorm) and dropout. Does the window still equal the big batch with them?

# %%
from course_utils.widgets.predict_view import predict
predict(0, "accum-batchnorm")

# %% [markdown]
# The test: 32 examples as 2 micro-batches of 16, each mean loss weighted ½, against one batch of 32, in
# float64, for a small MLP with each kind of layer after its first Linear, on five seeds. The gap is the
# largest difference over all gradients, relative to the big batch's largest gradient. With dropout, each
# side is also averaged over 50 fresh masks.

# %% tags=["answers-accum-batchnorm"]
from course_utils.widgets.predict_view import answer

with answer(0, "accum-batchnorm"):
    from course_utils.chapters.ch00_accumulation_norms import accumulation_gap, dropout_average_gap

    seeds = range(5)
    for norm in ["none", "layernorm", "groupnorm", "batchnorm", "dropout"]:
        gaps = [accumulation_gap(norm, s) for s in seeds]
        equal = sum(g < 1e-12 for g in gaps)
        far = sum(g > 0.1 for g in gaps)
        print(f"{norm:<9}: equal to the big batch (gap < 1e-12) on {equal} of 5 seeds, off by more than 10% on {far}")
    single = [accumulation_gap("dropout", s) for s in seeds]
    averaged = [dropout_average_gap(s, draws=50) for s in seeds]
    print("dropout, each side averaged over 50 masks: gap below half the one-mask gap on",
          sum(a < g / 2 for a, g in zip(averaged, single)), "of 5 seeds")

# %% [markdown]
# The equality needs every example's loss to depend on that example alone. Without a normalisation layer,
# and with LayerNorm or GroupNorm (which normalise each example over its own features), it does, and the
# window equals the big batch. **BatchNorm** normalises each example with the mean and variance of *its
# batch* (chapter 4), so two micro-batches of 16 are normalised with other statistics than one batch of 32:
# the window differs on every seed. **Dropout** draws a new random mask on every forward pass, so two runs of
# the same batch already differ. Accumulating K micro-batches of B with BatchNorm is *not* training with batch
# B·K: BatchNorm still sees batches of B. The gap closes only when one micro-batch is the whole window, which is
# no accumulation (larger micro-batches tend to narrow it, on average, not run by run; not shown here); GroupNorm
# or LayerNorm in place of BatchNorm avoids it. Accumulation also changes what eval mode will use: BatchNorm's running statistics take one
# momentum step per train-mode forward, so K steps per update. With dropout the two differ on every draw, and agree only on average, as two noisy
# estimates of one gradient do: averaging over more masks shrinks the gap.
#
# The course's own training loop (`course_utils.engine.session.run`, built in chapters 3 and 5: it
# yields one `StepEvent` per micro-batch) flushes and weights windows this way. Here is its count
# from a real training run on the spiral: 600 examples, batch 32, K = 4.

# %%
from course_utils.engine.session import TrainConfig, run
from course_utils.engine.loop import StepEvent

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
# evenly, pads by repeating the first indices of the epoch's order (its default, `drop_last=False`; with
# `drop_last=True` each rank gets ⌊N / W⌋ and the tail is dropped) so every rank runs the same number of steps.

# %% tags=["answers-world-size"]
toy = TensorDataset(torch.arange(10))
for rank in range(4):
    shard = list(DistributedSampler(toy, num_replicas=4, rank=rank, shuffle=False))
    print(f"rank {rank}: indices {shard}")
w4 = training_arithmetic(10, 2, 1, world_size=4)
print(f"calculator: {w4.samples_per_rank} per rank, {w4.padded_samples} padding duplicates, "
      f"{w4.iters_per_epoch} iterations per rank")
big = training_arithmetic(10_000, 32, 3, 4, world_size=8)
print(f"N=10,000, B=32, K=4 on W=8 ranks: {big.iters_per_epoch} iterations per rank per epoch, "
      f"{big.updates_per_epoch} updates, effective batch B*K*W = {big.effective_batch_size}")

# %% [markdown]
# Ranks 2 and 3 see examples 0 and 1 a second time: 2 duplicates per epoch. The calculator's
# "examples seen, all ranks" counts those duplicates too: it is the number of example-level
# forward passes, not the number of distinct examples.
#
# ## The calculator
#
# Change any input and press Enter (the boxes take whole numbers; "1e3" and "1,000" work too).
# The timeline draws the epochs as blocks, then one epoch batch by batch, drawn to scale. Green
# marks are updates, an orange mark is the flush, and grey hatching is what `drop_last` throws
# away. Press ▶ to animate one step. Try B > N, K larger than the epoch, W larger than N, and
# `drop_last` with B > N. "Effective batch" is nominal (B·K·W); the row below it counts the
# examples that really go into the largest update.

# %%
from course_utils.widgets.calculator import calculator
calculator(dataset_size=10_000, batch_size=32, epochs=3, accum_steps=4)

# %% [markdown]
# ## Exercises: write it yourself
#
# The quiz below tests recognition; these test the skill. Each exercise is two cells: a stub that is
# yours to edit (it raises `NotImplementedError` until you replace it) and a check. The check runs your
# function on cases you do not see, edge cases first and then many generated ones, compares it with an
# oracle (here a real `DataLoader` and a counted loop), and names the first case it gets wrong, with a
# hint that is not the answer. When it passes, it says what it checked. Every check is saved with your
# quiz answers, and the progress table at the end of the chapter counts the exercises you solved.
# Write plain Python and torch, without `course_utils` (it would hand you the answer). Stuck for good?
# The course's own solutions are in `course_utils/exercises/solutions.py`.
#
# ### Exercise 0.1: updates per epoch, with the flush
#
# Write `updates_per_epoch(N, B, K, drop_last=False)`: how many times `optimizer.step()` runs in one
# epoch over N examples in batches of B, with K micro-batches accumulated per update, in a loop that also
# steps at the end of the epoch when a short window is left (the flush). N, B and K are positive ints
# (N up to a few million, so `N / B` is exact in floating point); return an `int`.

# %%
def updates_per_epoch(N, B, K, drop_last=False):
    raise NotImplementedError  # replace this line with your code

# %%
from course_utils.exercises import check
check("updates_per_epoch")

# %% [markdown]
# ### Exercise 0.2: the weight of each micro-batch
#
# `sizes` lists the batch sizes of one epoch in order (the last may be smaller). Windows of K
# consecutive micro-batches make one update, and the epoch's last window may be short. Write
# `loss_weights(sizes, K)`: for every micro-batch, the number its *mean* loss is multiplied by before
# `backward()` so that each window's accumulated gradient equals the gradient of one big batch of the
# window's examples. Return a list of floats, one per micro-batch (a 1-D tensor or array of them is
# accepted too).

# %%
def loss_weights(sizes, K):
    raise NotImplementedError  # replace this line with your code

# %%
check("loss_weights")

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
# - effective batch = B × K (× W ranks). B = 32 with K = 4 makes the same updates as B = 128 with
#   K = 1, with a quarter of the activation memory; against B = 32 alone it makes 4× fewer updates.
# - a window's losses are weighted by its share of the window's examples: then it equals one big
#   batch, the short last window included, for layers that treat each example on its own. With BatchNorm
#   each micro-batch is normalised with its own statistics (measured: off by more than 10% on 5 of 5
#   seeds); with dropout the two agree only on average.
# - "step" means an update in most trainers and a micro-batch in many hand-written loops: check which.
# - `DistributedSampler` pads every rank to ⌈N / W⌉ (unless `drop_last=True`), so a few examples are seen twice per
#   epoch (more often when W is larger than N).
