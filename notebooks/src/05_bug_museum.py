# %% [markdown]
# # Chapter 5: The bug museum
#
# **After this chapter you can** recognise each silent training bug by what it does to the loss,
# gradient-norm, learning-rate, memory and metric curves, and fix it.
#
# Every exhibit below is a real bug injected into the course's real loop (`course_utils.engine.loop`). The
# same configuration runs twice with the same seed, once healthy and once with the bug. The eight panels
# show both runs' curves; the printed lines state what the bug did as claims checked on this run
# ("final val accuracy: bugged lower by more than 0.3 ... yes"). Why claims and not the raw numbers: a
# run that a bug makes unstable amplifies the last-bit rounding differences between CPUs, so its exact
# digits differ from one computer to the next, while what it shows does not. Each claim also holds on
# seeds 0 to 4 (the course's tests check every one). Counts, bytes and identical runs are exact, and are
# printed as numbers. The healthy runs are trained until they converge, so a bug cannot hide behind an
# under-trained baseline: they end above 0.8 validation accuracy, most near 0.9. Four end lower by design,
# between 0.55 and 0.85: the two clipping exhibits (SGD at lr 3.0, where the clip is what keeps training
# stable) and the two on noisy data, where the classes overlap (not switching back to `train()`, noise 0.8;
# data leakage, noise 1.0). None of the numbers is typed in: each is measured (the course's tests hold
# these bounds to the runs).
#
# A few words we use: a **param group** is a set of parameters the optimizer updates with the same
# settings (lr, weight decay); **stateful** optimizers (SGD with momentum, Adam) keep tensors per
# parameter between steps; Adam divides each update by the **RMS** (root mean square) of recent
# gradients, plus a tiny **eps** against division by zero; **buffers** are tensors a module keeps that
# are not trained (BatchNorm's running mean); a **host sync** is the CPU waiting for the GPU to finish
# (`.item()` does one).

# %%
from course_utils import setup_notebook
setup_notebook()

import math
import torch
from torch import nn
from course_utils.engine.bugs import BUGS, LOOP_BUGS
from course_utils.engine.session import Session, TrainConfig
from course_utils.chapters.ch05_museum import BASE, EXHIBITS, VARIATIONS, compare, exhibit, reference_markdown
from course_utils.chapters.ch05_museum_figure import comparison_figure
from course_utils.infra.notebook import sig
import matplotlib.pyplot as plt
from IPython.display import Markdown, display


def draw(comp, title=None):
    """Show the eight panels once, then close the figure."""
    fig = comparison_figure(comp, title)
    display(fig)
    plt.close(fig)


def show(bug, figure=True, **config):
    """Run healthy vs bugged, print the bug's harm as checked claims, draw the panels, print the fix."""
    comp = compare((bug,), **config) if config else exhibit(bug)
    print(comp.verdict_text())
    print("fix:", BUGS[bug].fix)
    if figure:
        draw(comp)
    return comp

# %% [markdown]
# ## Two checks before any exhibit
#
# Two cheap diagnostics catch many bugs before a long run. First, the loss at initialisation: a fresh
# classifier guesses about uniformly, so its cross-entropy is close to ln C for C classes. Second, a
# healthy loop can overfit one small batch until its loss is near 0; if it cannot, the loop is broken.

# %%
base = Session(TrainConfig(**BASE))
first = base.step()
print(f"loss at the first step {sig(first.loss)}   ln 3 = {sig(math.log(3))}")
torch.manual_seed(0)
from course_utils.engine.models import MLP
model, batch = MLP(), next(iter(base.state.train_loader))
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
for step in range(300):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(batch[0]), batch[1])
    loss.backward()
    optimizer.step()
print(f"one batch of {len(batch[1])}, 300 steps: loss {sig(loss.item(), 2)} (near 0: the loop can learn)")

# %% [markdown]
# ## Exhibit 1: missing `zero_grad`
#
# `backward()` adds into `.grad`. Without `zero_grad()` the gradient used at step n is the sum of every
# gradient so far. With plain SGD (lr 0.5) its norm climbs in trend, with dips, to several times the
# healthy run's largest (more than 4 times on every seed 0-4), and the loss swings far above the healthy
# run's; nothing overflows to NaN:

# %% tags=["answers-missing-zero-grad"]
c = show("missing_zero_grad")
b = c.bugged.grad_norm
print("bugged grad norm, steps 1-8:", [sig(x, 3) for x in b[:8]])
print("step 8 / step 1:", sig(b[7] / b[0]))
print("the norm also falls at some steps (dips):", any(y < x for x, y in zip(b, b[1:])),
      "| a NaN loss:", any(math.isnan(v) for v in c.bugged.loss))

# %% [markdown]
# At a tiny learning rate the same bug can pass for an improvement. The summed gradient acts like
# momentum that never decays, i.e. a larger step, and a model trained with steps that are too small
# (SGD at lr 0.01 is far from converged after 12 epochs) profits from larger steps. At the lr you would
# really use, the harm appears (the run above):

# %%
bugs, config, claims = VARIATIONS["tiny lr"]
cmp = compare(bugs, **config)
print("SGD lr", config["lr"], "| the healthy run is under-trained (val accuracy below 0.7):", cmp.healthy.val_acc[-1] < 0.7)
print(cmp.verdict_text(claims))

# %% [markdown]
# With Adam the picture is different. Adam divides each update by the gradient's RMS, so every step
# stays about lr in size and nothing explodes; but the updates follow a stale sum of old gradients:

# %%
bugs, config, claims = VARIATIONS["adam"]
print(compare(bugs, **config).verdict_text(claims))

# %% [markdown]
# ## Exhibit 2: validating in train mode
#
# Without `model.eval()` dropout stays on during validation. The validation numbers get noisier and
# worse; two passes over the same validation set disagree; with BatchNorm each pass moves the running
# statistics. In the course's loop training itself is untouched: its evaluation draws dropout masks from a
# random stream of its own (`course_utils/engine/loop.py`), so the training losses are identical, step for step.
# In an ordinary loop, train-mode validation draws from the global generator, and every later training dropout
# mask, and the shuffle of a `DataLoader` given no `generator`, shift with it.

# %% tags=["answers-eval-train-mode"]
c = show("eval_in_train_mode")
print("training losses identical, all", len(c.healthy.loss), "steps:", c.healthy.loss == c.bugged.loss)
for bugs in [(), ("eval_in_train_mode",)]:
    s = Session(TrainConfig(**EXHIBITS["eval_in_train_mode"], bugs=bugs))
    s.run_epoch()
    first, second = s.evaluate(), s.evaluate()
    bn = Session(TrainConfig(**{**EXHIBITS["eval_in_train_mode"], "dropout": 0.0}, batchnorm=True, bugs=bugs))
    bn.run_epoch()
    before = bn.model.body[1].running_mean.clone()
    bn.evaluate()
    moved = (bn.model.body[1].running_mean - before).abs().max().item()
    print(f"{bugs or 'healthy'}: two val passes {sig(first[0])} vs {sig(second[0])} (equal: {first == second}); "
          f"BatchNorm running mean moved by {sig(moved)}")

# %% [markdown]
# ## Exhibit 3: evaluation without `no_grad`
#
# The metrics are the same; the evaluation keeps a graph. The meter counts the bytes saved for backward
# during evaluation: 0 under `no_grad`. Why twice one batch? While batch k+1 runs forward, the variable
# `logits` still holds batch k's output, and with it batch k's whole graph.

# %% tags=["answers-eval-no-grad"]
from course_utils.chapters.ch04_evaluation import eval_graph_bytes
c = show("missing_no_grad", figure=False)
print("eval memory per epoch (bytes), healthy:", sorted(set(c.healthy.eval_memory)),
      " bugged:", sorted(set(c.bugged.eval_memory)))
from course_utils.engine.memory import GraphMemoryMeter
model = c.bugged_session.model
xb, yb = next(iter(c.bugged_session.state.val_loader))
meter = GraphMemoryMeter()
with meter:
    logits = model(xb)
print(f"the forward graph of one validation batch of {len(yb)} keeps {meter.peak:,} bytes; "
      f"bugged peak / one batch = {sig(max(c.bugged.eval_memory) / meter.peak)}")
del logits
print("val losses identical:", c.healthy.val_loss == c.bugged.val_loss)

# %% [markdown]
# ## Exhibit 4: logging the loss tensor (`losses.append(loss)`, `total += loss`)
#
# Each logged tensor keeps its chain of autograd nodes alive. In training, `backward()` still frees the
# activations, so the saved bytes do not grow: what grows is the node count, by the same amount every
# step, until the log is dropped (the panel "graph nodes kept by the loss log"). Combined with evaluation
# outside `no_grad`, every kept validation loss pins a whole batch's activations.

# %% tags=["answers-loss-tensor-logging"]
c = show("graph_attached_logging")
nodes = c.bugged.graph_nodes
print("graph nodes kept, first 6 steps:", nodes[:6], " healthy:", sorted(set(c.healthy.graph_nodes)))
print("growth per step in epoch 1:", sorted({y - x for x, y in zip(nodes[:9], nodes[1:10])}))
both = compare(("graph_attached_logging", "missing_no_grad"), **EXHIBITS["graph_attached_logging"])
print("peak eval memory, both bugs (log keeps tensors, no no_grad):", f"{max(both.bugged.eval_memory):,}", "bytes")
print("peak eval memory, only no_grad missing (exhibit 3):         ",
      f"{max(exhibit('missing_no_grad').bugged.eval_memory):,}", "bytes")

# %% [markdown]
# Batch by batch: the evaluation loop written out (`eval_bytes_per_batch`), for this exhibit's trained
# model, with the bytes autograd holds once each validation batch is done (`after`) and the most it held
# while that batch ran (`peak`).

# %%
from course_utils.chapters.ch04_evaluation import eval_bytes_per_batch
model, val_loader = c.bugged_session.model, c.bugged_session.state.val_loader
print("validation batch sizes:", [len(targets) for _, targets in val_loader], "| KiB held for backward, per batch:")
for label, no_grad, keep in [("no_grad, log loss.item()", True, False),
                             ("no no_grad, log loss.item()", False, False),
                             ("no no_grad, log the loss tensor", False, True)]:
    held = eval_bytes_per_batch(model, val_loader, no_grad=no_grad, keep_losses=keep)
    for row, values in [("after", held.after), ("peak", held.peak)]:
        print(f"{label if row == 'after' else '':<33}{row:<5}", "".join(f"{b / 1024:>6.1f}" for b in values))

# %% [markdown]
# Missing `no_grad` alone does not grow. Once a batch is done, one batch's graph is held (the variables
# `logits` and `loss` point at it; the last batch is smaller). While the next batch runs forward the old
# graph is still referenced, so the peak is two batches' graphs: exhibit 3's "twice one batch", and the
# same at batch 2 as at batch 6. Growth needs both bugs: log the loss tensors as well and every batch's
# graph stays, one more batch's worth per batch, until the whole validation set's activations are held
# (the last figure is the both-bugs peak printed above, in KiB).

# %% [markdown]
# ## Exhibit 5: optimizer and parameters out of step (what torch 2.13 really does)
#
# Three claims you will read online, measured. First, freezing part of the model after the optimizer was built
# and has stepped (5 steps, then the freeze, then 5 more; frozen before the first backward, the weights have no
# `.grad` yet, and nothing moves them either way):

# %% tags=["answers-freeze-after-optimizer"]
for opt in ["sgd", "momentum", "adam", "adamw"]:
    for set_to_none in (True, False):
        d = BUGS["freeze_after_optimizer"].demo(opt, set_to_none=set_to_none)
        print(f"{opt:<9} zero_grad(set_to_none={set_to_none!s:<5}) frozen weights moved {sig(d.frozen_change):<10}"
              f" trained weights moved {sig(d.trained_change)}")
for set_to_none in (True, False):
    d = BUGS["freeze_after_optimizer"].demo("sgd", set_to_none=set_to_none, weight_decay=0.01)
    print(f"sgd, weight_decay=0.01, zero_grad(set_to_none={set_to_none!s:<5}) frozen weights moved "
          f"{sig(d.frozen_change)}")

# %% [markdown]
# With the default `set_to_none=True` frozen weights have `.grad = None` and every optimizer skips them.
# With zero tensors instead, the stateful optimizers (momentum, Adam, AdamW) keep moving them. Weight decay
# moves them too, in any optimizer: its term λ·w does not need a gradient. AdamW has it by default (torch's
# 0.01), which is why its row differs from Adam's; plain SGD has none by default, and the last two lines give
# it λ = 0.01: now plain SGD moves zero-gradient weights as well (and skips them, like every optimizer, when
# their `.grad` is `None`).
#
# The same rule decides what happens when one optimizer serves two heads trained in turns on one backbone
# (multi-task, a GAN's two losses through shared layers): the idle head is a frozen part for that update.

# %% tags=["answers-shared-optimizer"]
from course_utils.chapters.ch05_shared_optimizer import turns_lines

print("\n".join(turns_lines()))

# %% [markdown]
# `zero_grad()` clears gradients only: Adam's moments and step counts carry over from update to update, and
# from one batch size to the next (nothing in them is per example, so one optimizer serves every batch size).
# With the default `set_to_none=True`, a head idle in an update has no `.grad` and Adam skips it: its own
# step count counts only its own updates, which is what its bias correction needs. With zeros instead, the
# idle head moves on its stale momentum during the other head's updates, and its step count runs on.
#
# Second, a head added after the optimizer was built:

# %% tags=["answers-optimizer-params-replaced"]
d = BUGS["head_after_optimizer"].demo()
print(f"head in the optimizer: {d.head_in_optimizer}; head grad norm {sig(d.head_grad_norm)}; "
      f"head moved {sig(d.head_change)}; body moved {sig(d.body_change)}")
print("the head gets gradients but never moves:", d.head_grad_norm > 0 and d.head_change == 0.0)

# %% [markdown]
# Third, `model.half()` (or `.to()`) after building the optimizer. torch converts the parameters in
# place, so the optimizer still holds the same Parameter objects: fine while it has no state. But after
# one Adam step its two moments exist, in float32, and the next step after `.half()` fails. The same
# goes for the device: after one Adam step on the CPU, `model.cuda()` and a step raise a RuntimeError
# (tensors on two devices; the exact message depends on Adam's implementation), because the moments stay on the
# CPU. That case needs a GPU, so it is not run
# here (this notebook must print the same on a CPU): `benchmarks/bench_cuda.py` runs it, and exhibit 7
# below prints its record.

# %%
d = BUGS["half_after_optimizer"].demo()
print("same Parameter objects after .half():", d.same_parameters, "| optimizer sees", d.dtype_seen_by_optimizer)
print("stateless SGD, no step yet: the step after .half() moves the weights:", d.weight_change_after_step > 0)
print("Adam after one float32 step, then .half(), then a step ->", d.stateful_step_error)

# %% [markdown]
# ## Exhibit 6: data leakage
#
# Half the validation set is copied from the training set. The model is the same; only the measurement
# changes. A model scores better on examples it trained on than on new ones, so the copied half lifts
# the validation accuracy; a clean held-out test set shows the truth.

# %% tags=["answers-data-leakage"]
c = show("data_leakage")
print("leaked validation examples:", c.bugged_session.state.splits.leaked, "of", len(c.bugged_session.state.splits.val))
print("the leaky run's validation accuracy is above its own test accuracy:",
      c.bugged.val_acc[-1] > c.bugged.test_acc[-1])

# %% [markdown]
# Leakage also comes through preprocessing: a step fitted on all the data, validation included, has
# seen the rows the validation score judges. How much that flatters the score depends on what the step
# learns. Three cases (`course_utils/chapters/ch05_leakage.py`), each trained twice per seed, with the step fitted on
# train only and on train + val, and each scored on validation and on a clean test set:
#
# - normalising the spiral with mean and standard deviation, with 150 training points;
# - the same with only 20 training points, whose statistics the 150 validation points move more;
# - for contrast, keeping the 20 of 1,000 features most correlated with the labels, on data that is
#   pure noise (chance is 0.5).

# %%
from course_utils.engine.data import spiral_splits
from course_utils.chapters.ch05_leakage import leak_effect, normalisation_leak, selection_leak
print("statistics of the 2 features, fitted on train only -> on train + val (150 validation points, seed 0):")
for n in (150, 20):
    sp = spiral_splits(n, 150, seed=0)
    train_x, val_x = sp.train.tensors[0], sp.val.tensors[0]
    pooled = torch.cat([train_x, val_x])
    for stat in ("mean", "std"):
        before, after = ([sig(v, 3) for v in getattr(t, stat)(0).tolist()] for t in (train_x, pooled))
        print(f"{f'{n} train points' if stat == 'mean' else '':<17}{stat:<5} {before} -> {after}")
print(f"\n{'fitted on train + val':<24}{'mean change, seeds 0-4':<26}{'seed moved most':<17}seed 0, leaked")
print(f"{'instead of train only':<24}{'val':>7}{'test':>7}{'inflation':>11}{'val':>8}{'test':>7}{'val':>9}{'test':>7}")
for case, leak in [("normalise, 150 train", normalisation_leak),
                   ("normalise, 20 train", lambda seed: normalisation_leak(seed, n_train=20)),
                   ("select features, noise", selection_leak)]:
    e = leak_effect(leak, seeds=range(5))
    leaked = e.runs[0]["train + val"]
    print(f"{case:<24}{e.val_change:>+7.3f}{e.test_change:>+7.3f}{e.inflation:>+11.3f}"
          f"{e.largest[0]:>+8.3f}{e.largest[1]:>+7.3f}{sig(leaked.val_acc, 3):>9}{sig(leaked.test_acc, 3):>7}")

# %% [markdown]
# Inflation is what the leak added to the validation score beyond what it added on new data. The
# normalisation leak is real (the statistics above differ), but its inflation is close to 0, next to
# feature selection's. With 150 training points neither accuracy moves. With 20 the leak does change the
# trained model (the seed it moved most), but the test score moves with it, so validation still tells
# the truth about new data. Why: the statistics are one shift m and one scale s per feature, computed
# without labels and applied to every split alike, and the first Linear layer can absorb them:
# W(x - m)/s + b is the same layer with its weights divided by s and its bias shifted by -Wm/s. The leak
# changes where training starts, not what the model can learn about the validation labels. (Measured
# here on splits drawn at random from one distribution.)
#
# Feature selection reads the labels: chosen on train + validation, it keeps features that happen to
# fit the validation labels, and validation climbs far above chance while test stays at chance. Fit
# every preprocessing step on the training split only: here only the label-reading step was caught, but
# how much a step leaks shows only against a clean split.

# %% [markdown]
# In link prediction the leak can sit in the model's input. A graph encoder builds each node's
# representation from the edges it is given; if that graph holds the test edges, node u's representation
# already contains v's features when the pair (u, v) is scored. The run below
# (`course_utils/chapters/ch05_graph_leakage.py`): a 200-node graph of 4 communities with random node
# features, its edges split 70/10/20, a two-layer mean-aggregation encoder scoring a pair by a dot product,
# trained on the training edges; test AUC against as many pairs that are no edge, the same trained encoder
# given two input graphs. A predictor that learns nothing and only looks the pair up shows the ceiling of
# the leak.

# %% tags=["answers-graph-leakage"]
from course_utils.chapters.ch05_graph_leakage import graph_leak_lines
print("\n".join(graph_leak_lines()))

# %% [markdown]
# The look-up predictor scores chance (0.50) on the right graph and is perfect on the leaky one: every test
# edge is in its input. The trained encoder was never taught to look pairs up, yet the leaky graph lifts
# its test AUC far above the honest figure on every seed (the fourth line): the score measures the input, not
# the model. Each split's input graph should hold only what is known before it: validation edges predicted
# from the training edges, test edges from training + validation (how PyG's `RandomLinkSplit` builds its
# three splits). With time-stamped edges the same rule is a time cutoff: a temporal sampler (PyG's `time_attr`,
# with `edge_label_time` for `LinkNeighborLoader`) keeps only edges up to each prediction's time, *inclusive*, so
# a predicted edge stamped with that very time stays in the input unless the cutoff is set strictly before it;
# count the predicted edges in the input, as above, rather than assume they are gone.
#
# Training has the same shortcut: every supervised edge sat in the encoder's input, so "connected in my
# input" paid off. Supervising, at each step, 30% of the training edges kept out of the input
# (`RandomLinkSplit(disjoint_train_ratio=0.3)` does it once, not every step) raised the honest test AUC clearly
# (by over 0.025) on 7 of the 10 seeds and lowered it by that much on none (the other 3 within 0.025 either way), and
# shrank, without removing, what the leaky graph adds, on every seed.

# %% [markdown]
# ## Exhibit 7: the wrong device
#
# With a GPU, mixing a CPU tensor and a CUDA tensor in one operation usually raises an error. Not always:
# a 0-dimensional CPU tensor passes as a plain number (`cuda_x * torch.tensor(2.0)` works). It should cost
# no copy: the kernel reads the value as an argument, as it does for `cuda_x * 2.0`, where
# `torch.tensor(2.0).cuda()` copies once per call. `benchmarks/bench_cuda.py` counts the copies with
# torch's profiler; the record below prints the counts, or says they are not measured yet. The silent
# costs are elsewhere: host syncs (`.item()` or `.cpu()` every
# step makes the CPU wait for the GPU), and tensors made or moved to the GPU every step
# (`torch.tensor(..., device="cuda")`, `.to("cuda")` from unpinned memory), copies that cannot overlap
# with compute.

# %% tags=["answers-wrong-device"]
from course_utils.chapters import gpu_figures

print("GPU present here:", torch.cuda.is_available(), "| the figures below were", gpu_figures.provenance())
print("\n".join(gpu_figures.device_lines()))

# %% [markdown]
# A sync every step costs nothing when the GPU has nothing queued: the small MLP's kernels finish before
# the CPU launches the next, so the CPU never waits. It costs when the GPU has work to do while the CPU
# could be preparing the next batch: then `.item()` turns "at the same time" into "one after the other".
# Chapter 1 (section 9) has the pinned-copy figures.

# %% [markdown]
# ## The misplacement table
#
# Each row moves or drops one operation of the step.
#
# **`zero_grad` between `backward` and `step`**: the update never sees a gradient.

# %% tags=["answers-zero-grad-after-backward"]
c = show("zero_grad_after_backward")
print("logged grad norms:", sorted(set(c.bugged.grad_norm)), " step() calls:", c.bugged.updates[-1])

# %% [markdown]
# **Clipping before `backward` or after `step`**: the run is the run without clipping. At SGD lr 3.0 the
# clipping (to norm 0.5) is what keeps training stable, so losing it shows as loss spikes.

# %% tags=["answers-clip-after-step"]
unclipped = Session(TrainConfig(**{**EXHIBITS["clip_after_step"], "clip_norm": None}))
unclipped.run_to_end()
for bug in ["clip_before_backward", "clip_after_step"]:
    c = show(bug, figure=bug == "clip_after_step")
    print(f"{bug}: losses equal to the unclipped run: {c.bugged.loss == [e.loss for e in unclipped.steps]}; "
          f"equal to the correctly clipped run: {c.bugged.loss == c.healthy.loss}\n")

# %% [markdown]
# **An epoch schedule stepped every batch**: StepLR (÷10 every 4 epochs here) reaches after k batches the
# lr meant for epoch k, and training stalls. A cosine schedule stepped per batch instead follows a wave
# of period 2·T_max batches (chapter 3).

# %%
c = show("epoch_schedule_per_batch")
print("healthy lr at epochs 1, 5, 9:", [sig(c.healthy.lr[i]) for i in (0, 60, 120)])
print("bugged lr, first 8 batches:", [sig(x) for x in c.bugged.lr[:8]])

# %% [markdown]
# **Forgetting `model.train()` after evaluation**: from epoch 2 on the model trains with dropout off.
# This one passes for an improvement. The training loss drops below the healthy run's, and on this small
# 2-D problem the accuracy does not reliably suffer either: dropout was not buying accuracy here, and over
# seeds 0 to 4 the bugged run's test accuracy comes out higher at least as often as lower (a course test
# checks it). What the bug breaks on every one of those seeds is the run itself: it is not the model you configured, and
# without dropout it ends overconfident on examples it has not seen, so its validation *loss* is clearly
# higher (the last line: how sure each model is of the validation predictions it gets wrong). Don't
# judge this bug by the score; check the mode (the first line reads it from the loop).

# %% tags=["answers-missing-train-switch"]
from course_utils.chapters.ch05_curves import confidence_on_wrong
c = show("missing_train_switch")
print("trained in train mode, by epoch 1-3:",
      [all(e.training for e in c.bugged_session.steps if e.epoch == k) for k in (1, 2, 3)])
sure = {run: confidence_on_wrong(s.model, s.state.splits.val) for run, s in
        (("healthy", c.healthy_session), ("bugged", c.bugged_session))}
print(f"mean probability given to its wrong validation predictions: bugged about {sig(sure['bugged'], 1)}, "
      f"healthy about {sig(sure['healthy'], 1)}; bugged higher by more than 0.15: {sure['bugged'] > sure['healthy'] + 0.15}")

# %% [markdown]
# **Accumulating K = 4 micro-batches without dividing the loss**: the first update's gradient is exactly
# 4 times the healthy one, an SGD learning rate × 4 (0.3 → 1.2): on seeds 0-4 training breaks down (on other
# seeds it is hurt less; the bug always costs accuracy, not always this much). With Adam the factor nearly
# cancels (it divides by the gradient's RMS; nearly, because a short last window is scaled by its own count),
# and at a tiny lr the bigger step could even look like a gain, as with exhibit 1.

# %% tags=["answers-unscaled-accumulation"]
c = show("unscaled_accumulation")
first = next(i for i, e in enumerate(c.healthy_session.steps) if e.update)
print("first update's grad norm ratio:", sig(c.bugged.grad_norm[first] / c.healthy.grad_norm[first]))

# %% [markdown]
# Two more: accumulation without the end-of-epoch flush (15 micro-batches, K = 4: 4 updates an epoch
# become 3, and the last 3 micro-batches of each epoch are thrown away: this loop wipes them with the next
# epoch's first `zero_grad()`; a loop that clears only after a step adds them into the next epoch's first
# update instead, as chapter 0 shows), and averaging validation by
# batch (122 validation examples in batches of 20: the last batch of 2 counts like a full one).

# %% tags=["answers-accumulation-flush"]
c = show("accumulation_without_flush", figure=False)
print("updates so far, after epochs 1-3:", c.healthy.updates[:3], "vs", c.bugged.updates[:3], "\n")
c = show("mean_of_batch_means", figure=False)

# %% [markdown]
# ## Reading the curves: two patterns learners ask about
#
# Two curves that often alarm learners, each measured here on five seeds.
#
# ### Training loss against validation loss
#
# A loop prints the mean of its training batch losses, then a validation loss. How do the two compare?

# %%
from course_utils.widgets.predict_view import predict
predict(5, "val-below-train")

# %% tags=["answers-val-below-train"]
from course_utils.widgets.predict_view import answer

with answer(5, "val-below-train"):
    from course_utils.chapters.ch05_curves import val_below_train

    below = val_below_train()
    n, counts = len(below.ends), below.counts()
    print(f"spiral MLP with dropout 0.5, Adam, 3 epochs on seeds 0-4: {n} epoch ends")
    print(f"logged training loss (mean over the epoch, dropout on) above validation loss: {counts['logged above val']} of {n}")
    print(f"  1. dropout: the same batches, same weights, measured in eval mode, give less: "
          f"{counts['dropout: logged above the same batches in eval mode']} of {n}")
    print(f"  2. lag: that epoch average is above the end-of-epoch model's loss on the training set: "
          f"{counts['lag: epoch average above the end-of-epoch model']} of {n}")
    print(f"measured the way validation is (end of epoch, eval mode), training loss above validation loss: "
          f"{counts['like validation: train above val']} of {n}")

# %% [markdown]
# The two losses are not measured alike. The training loss is taken with dropout on, which on average makes
# the predictions worse; and it is an average over the epoch, while the model improved through it, so most of it
# describes earlier, worse weights. Validation is measured once, at the end of the epoch, in eval mode. Take
# both away and the training loss sits below the validation loss at most epoch ends, as one expects. What
# remains is the real gap, and here it is small: early in training, 300 training and 300 validation points
# from one spiral are about equally hard. Other causes push the same way: augmentation applied to training
# data only, any regulariser active in train mode, or a validation set that happens to be easier. Compare
# like with like before you conclude: re-measure the training set in eval mode at the epoch's end.
#
# ### Validation loss and accuracy rising together

# %%
predict(5, "loss-and-accuracy")

# %% tags=["answers-loss-and-accuracy-rise"]
from course_utils.widgets.predict_view import answer

with answer(5, "loss-and-accuracy"):
    from course_utils.chapters.ch05_curves import rising_together

    rises = rising_together()
    count = lambda test: f"{sum(test(x) for x in rises)} of {len(rises)}"
    print("full-batch Adam on 150 points of a noisy spiral, validated every 10 steps; "
          "seeds 0-4, from the lowest validation loss to the end of training:")
    print("  validation loss rose:", count(lambda x: x.last.loss > x.lowest_loss.loss))
    print(f"  accuracy rose by more than {rises[0].MARGIN:g} after the loss minimum, at a higher loss:",
          count(lambda x: x.rose_together))
    print("  the loss on the predictions it gets right fell:", count(lambda x: x.last.loss_right < x.lowest_loss.loss_right),
          "| on those it gets wrong, rose:", count(lambda x: x.last.loss_wrong > x.lowest_loss.loss_wrong))
    print("  its mean confidence in its wrong predictions rose:",
          count(lambda x: x.last.confidence_wrong > x.lowest_loss.confidence_wrong))

# %% [markdown]
# One run up close: seed 0's two evaluations, as this machine computed them. Which evaluation step has the
# best accuracy is decided by a few of the 300 validation points, and another CPU's last bits can move it
# (an AMD EPYC host printed another accuracy here), so nbval compares the counts above, not these digits:

# %% tags=["nbval-ignore-output"]
with answer(5, "loss-and-accuracy"):
    r = rises[0]
    print("seed 0, on this machine:")
    for label, e in [("lowest validation loss", r.lowest_loss), ("best accuracy after it", r.best_after)]:
        print(f"  {label:<23} step {e.step:>3}: loss {sig(e.loss, 2):<5} accuracy {sig(e.accuracy, 2):<5} "
              f"loss on the right ones {sig(e.loss_right, 2):<5} on the wrong ones {sig(e.loss_wrong, 2)}")

# %% [markdown]
# Accuracy reads only which class wins. The loss reads the probability given to the right class, and a
# wrong answer given with more confidence costs more, without limit (−log p grows as p → 0). So training on
# can get more examples right and, at once, grow more sure on the ones it gets wrong, which on noisy data
# are many: the average loss rises with the accuracy. It is the start of overfitting; which curve to stop on
# depends on what you need. If you need calibrated probabilities, the loss; if you need decisions, the
# metric itself. Either way, keep the best weights when the chosen curve improves (next section).
#
# ## Keeping the best weights in memory
#
# Early stopping keeps the weights of the best validation epoch and restores them at the end. The obvious
# line to keep them is `best = model.state_dict()`.

# %%
predict(5, "best-weights")

# %% tags=["answers-best-weights-references"]
from course_utils.widgets.predict_view import answer

with answer(5, "best-weights"):
    import copy
    from course_utils.chapters.ch05_curves import KEEPS, best_copies

    demo = MLP(hidden=8, batchnorm=True)
    state = demo.state_dict()
    print("state_dict()['head.weight'] uses the weight's own memory:",
          state["head.weight"].data_ptr() == demo.head.weight.data_ptr())
    with torch.no_grad():
        demo.head.weight.add_(1.0)                      # what optimizer.step() does: change the weights in place
    print("after an in-place change of the weight, the 'saved' one equals it:", torch.equal(state["head.weight"], demo.head.weight))
    buffers = [name for name, _ in demo.named_buffers()]
    print(f"state_dict holds {len(state)} tensors: {len(list(demo.parameters()))} parameters and {len(buffers)} buffers "
          f"({', '.join(b.split('.')[-1] for b in buffers[:3])})")
    runs = [best_copies(seed) for seed in range(5)]
    print("\nBatchNorm MLP, 25 epochs on a noisy spiral, seeds 0-4; best validation epoch before the last on every seed:",
          all(r[KEEPS[0]].best_epoch < r[KEEPS[0]].epochs for r in runs))
    for how in KEEPS:
        got = [r[how] for r in runs]
        print(f"  best kept by {how:<28} shares memory with the live weights: {sum(x.shares_memory for x in got)} of 5; "
              f"restored, it validates exactly like the best epoch: {sum(x.restored_exactly for x in got)} of 5, "
              f"like the last: {sum(x.restored_val == x.last_val for x in got)} of 5")

# %% [markdown]
# So the obvious line keeps nothing. `state_dict()` returns the model's tensors themselves (detached, same
# memory), so every
# `optimizer.step()` changes the "best" too, and loading it at the end restores the last epoch. Copy it:
# `copy.deepcopy(model.state_dict())`, or `{k: v.detach().clone() for k, v in model.state_dict().items()}`.
# Cloning only `model.parameters()` misses the buffers: BatchNorm's running mean and variance move on with
# training, and in eval mode the model uses them, so the restored model is neither the best nor the last.
# `torch.save(model.state_dict(), path)` writes a copy to disk, which is why a checkpoint on disk never has
# this bug. Exercise 5.3 below asks you to write the copy.

# %% [markdown]
# ## The intentional version: gradient accumulation
#
# Accumulation is "missing zero_grad" done on purpose: each micro-batch's loss weighted, one step per
# window. The weight is the micro-batch's share of its window's *examples*
# (`course_utils.engine.arithmetic.loss_weight`), so a window, even the short last one with a partial batch,
# gives exactly the gradient of one big batch of the same examples, for a model that treats each example on
# its own (with BatchNorm or dropout it does not: chapter 0 measures both). Dividing by K instead is right
# only when every micro-batch is full. Here: 120 examples in batches of 32, K = 4, so the one window holds
# 32 + 32 + 32 + 24 examples.

# %%
from course_utils.engine.arithmetic import batch_sizes, loss_weight
from course_utils.engine.data import make_spiral

x, y = make_spiral(120, seed=0).tensors
torch.manual_seed(0)
model = MLP(hidden=16)
model.zero_grad()
nn.functional.cross_entropy(model(x), y).backward()
big = [p.grad.clone() for p in model.parameters()]
sizes = batch_sizes(120, 32, False)
for rule in ("examples", "divide by K"):
    model.zero_grad()
    for i, (xb, yb) in enumerate(zip(x.split(32), y.split(32))):
        weight = loss_weight(i, sizes, 4) if rule == "examples" else 1 / 4
        (nn.functional.cross_entropy(model(xb), yb) * weight).backward()
    diff = max((p.grad - g).abs().max().item() for p, g in zip(model.parameters(), big))
    print(f"batch sizes {sizes}, weights by {rule:<11}: max |accumulated - big batch| "
          f"{'< 1e-6' if diff < 1e-6 else sig(diff, 2)}")

# %% [markdown]
# ## The bug detector
#
# Tick one or more bugs and press **Run**: both runs train on the course's loop and the eight panels are
# drawn against the healthy run. It uses the same run as the mystery game below: dropout, SGD with
# momentum, accumulation over 2 micro-batches, clipping, a cosine schedule and a clean test set. Bugs
# that change the same operation cannot be combined; the detector says so. It opens with two bugs combined.

# %%
from course_utils.widgets.bug_detector import bug_detector
bug_detector("graph_attached_logging", "missing_no_grad")

# %% [markdown]
# ## The mystery bug
#
# Each round hides one bug in the same run (its settings never change, so they give nothing away) and
# shows only the panels. Every bug appears once before any repeats. Choose a diagnosis and press
# **Check**: one diagnosis per round, then the bug is revealed. Your rounds count in the course progress
# view (chapter 0).

# %%
from course_utils.widgets.mystery_view import mystery
mystery()

# %% [markdown]
# ## Quick reference: bug → signature → fix

# %%
display(Markdown(reference_markdown()))

# %% [markdown]
# ## Bring your own loop: the loop doctor
#
# The exhibits above injected bugs into the course's loop. On Monday you will write your own loop, and its
# bugs will be just as silent. `LoopDoctor` watches a loop you do not change: wrap it in a `with` block,
# hand the doctor your model (optimizers and schedulers are found as they are built or stepped; give your
# data only if the loop has no DataLoader), and read its report. Each finding carries the bug's name from
# the table above, what the doctor measured, and the fix.
#
# It only observes: a hook on the model's forward, torch's optimizer-step hooks, and thin wrappers around
# `backward`, clipping, GradScaler, scheduler steps, DataLoader iteration and `tensor.item()`. Each wrapper
# calls the original and changes nothing; it never calls your dataset or draws a random number, so the
# weights come out bit for bit the same. All of it is removed when the block ends, even if your loop raises.
#
# Its assumptions, which decide when it can be wrong:
#
# - a **micro-batch** is one batch of data (the first forward after a DataLoader hands out a batch). Several
#   backward passes on one batch, like a GAN's real and fake losses, are one micro-batch. Accumulation follows
#   chapter 0's rule: each micro-batch's mean loss is weighted by its share of the window's examples,
#   n_i / n_window, so every update carries the same weight (dividing by K is that rule only in a full window
#   of equal batches);
# - an **evaluation** is a forward under `no_grad`, or one that no backward ever reaches; train mode matters
#   only if the model has a layer that behaves differently in eval mode (dropout, BatchNorm);
# - a graph is **kept** when it is still alive two updates after its forward, two of them at once;
# - **leakage** is the same example, byte for byte, in both splits.
#
# First, what a script builds before its loop:

# %%
from torch.utils.data import DataLoader
from course_utils.engine.data import spiral_splits
from course_utils.doctor import LoopDoctor
from course_utils.engine.models import MLP


def fresh(leak=0.0):
    """A new model (with dropout), optimizer, epoch schedule and loaders, all from seed 0."""
    splits = spiral_splits(300, 150, seed=0, leak=leak)
    torch.manual_seed(0)
    model = MLP(hidden=64, dropout=0.1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=4, gamma=0.5)
    train = DataLoader(splits.train, batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(0))
    val = DataLoader(splits.val, batch_size=64)
    return model, optimizer, scheduler, train, val


def accuracy(model, loader):
    """Validation accuracy, measured the right way (eval mode, no graph), whatever the loop did."""
    model.eval()
    with torch.no_grad():
        hits = sum((model(xb).argmax(dim=1) == yb).sum().item() for xb, yb in loader)
    return round(hits / len(loader.dataset), 3)

# %% [markdown]
# The source articles' loop, in our words: zero_grad, forward, loss, backward, step for every batch; the
# epoch schedule stepped after the batch loop; validation in eval mode under `no_grad`, then back to train.

# %%
def evaluate(model, loader):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for xb, yb in loader:
            total += nn.functional.cross_entropy(model(xb), yb).item() * len(yb)
    model.train()
    return total / len(loader.dataset)


def articles_loop(model, optimizer, scheduler, train, val, epochs=8):
    model.train()
    for epoch in range(epochs):
        for xb, yb in train:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
        scheduler.step()
        evaluate(model, val)


model, optimizer, scheduler, train, val = fresh()
with LoopDoctor(model) as doctor:
    articles_loop(model, optimizer, scheduler, train, val)
print(doctor.report())
print("validation accuracy:", accuracy(model, val))
healthy = [p.detach().clone() for p in model.parameters()]

# %% [markdown]
# The doctor only watches: the same loop without it ends with bit-for-bit the same weights.

# %%
model, optimizer, scheduler, train, val = fresh()
articles_loop(model, optimizer, scheduler, train, val)
print("weights bitwise equal with and without the doctor:",
      all(torch.equal(a, b) for a, b in zip(healthy, model.parameters())))

# %% [markdown]
# And it leaves nothing behind, even when the loop raises: below, a loop stops with an error in its second
# epoch. After the block, `backward`, `tensor.item()` and the model's hooks are torch's own again, and torch's
# random generator is where the same loop left it without the doctor.

# %%
def loop_that_raises(model, optimizer, train):
    for epoch in range(2):
        for i, (xb, yb) in enumerate(train):
            if epoch == 1 and i == 3:
                raise ValueError("a bug in the loop")
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            optimizer.step()


originals = (torch.autograd.backward, torch.Tensor.item)
model, optimizer, scheduler, train, val = fresh()
try:
    loop_that_raises(model, optimizer, train)
except ValueError:
    bare_rng = torch.get_rng_state()
model, optimizer, scheduler, train, val = fresh()
try:
    with LoopDoctor(model):
        loop_that_raises(model, optimizer, train)
except ValueError as error:
    print("the loop's own error came through:", type(error).__name__)
print("backward and item are torch's own again:", (torch.autograd.backward, torch.Tensor.item) == originals)
print("hooks left on the model:", len(model._forward_hooks))
print("torch's random generator where the bare loop left it:", torch.equal(torch.get_rng_state(), bare_rng))

# %% [markdown]
# Now a loop as it often comes out on a first try: the scheduler sits inside the batch loop, validation
# forgets `model.eval()` and `no_grad`, and the loss tensors go into a list for a plot later. It runs
# without an error, and its validation accuracy is worse.

# %% tags=["answers-doctor"]
def monday_loop(model, optimizer, scheduler, train, val, epochs=8):
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in train:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss)
        val_loss = sum(nn.functional.cross_entropy(model(xb), yb).item() for xb, yb in val)


model, optimizer, scheduler, train, val = fresh()
with LoopDoctor(model) as doctor:
    monday_loop(model, optimizer, scheduler, train, val)
print(doctor.report())
print("validation accuracy:", accuracy(model, val))

# %% [markdown]
# Gradient accumulation as the articles print it: the loss divided by K, a step every K micro-batches, no
# flush at the epoch's end. With 10 micro-batches an epoch and K = 4, the last two of each epoch spill
# into the next epoch's first window. The flush alone is not the fix: its short window (32 + 12 examples)
# still divides by 4 and carries half the weight of a full one. Weighting by the window's examples is.
# Then a split that leaks.

# %%
def accumulation_loop(model, optimizer, train, epochs=3, K=4, flush=False, by_examples=False):
    model.train()
    n, B = len(train.dataset), train.batch_size
    for epoch in range(epochs):
        for i, (xb, yb) in enumerate(train):
            window = min(K * B, n - (i - i % K) * B)          # examples in this micro-batch's window
            weight = len(yb) / window if by_examples else 1 / K
            loss = nn.functional.cross_entropy(model(xb), yb) * weight
            loss.backward()
            if (i + 1) % K == 0 or (flush and i + 1 == len(train)):
                optimizer.step()
                optimizer.zero_grad()


for flush, by_examples in ((False, False), (True, False), (True, True)):
    model, optimizer, scheduler, train, val = fresh()
    with LoopDoctor(model) as doctor:
        accumulation_loop(model, optimizer, train, flush=flush, by_examples=by_examples)
    print(f"flush={flush}, weighted by examples={by_examples}:", doctor.report(), "\n")

model, optimizer, scheduler, train, val = fresh(leak=0.3)
with LoopDoctor(model) as doctor:
    articles_loop(model, optimizer, scheduler, train, val)
print(doctor.report())

# %% [markdown]
# ### A published loop: PyTorch's quickstart tutorial
#
# The course's tests run the doctor on the training loops of public repositories (PyTorch's examples and
# tutorials, nanoGPT, minGPT, a popular CIFAR repository, d2l, Hugging Face accelerate; `tests/doctor_published`),
# each re-expressed in our own code with its structure intact, as published and with realistic bugs written in,
# and check that the weights come out bitwise the same. Some of the published loops have a real bug. Here is a
# small one, in the shape of PyTorch's own *Quickstart* tutorial (`beginner_source/basics/quickstart_tutorial.py`):
# its test function adds up each batch's mean loss and divides by the number of batches. (Its training function
# clears the gradients after the step, which is correct: chapter 3 showed that order.) Written in our own code, on
# our spiral:

# %%
def tutorial_style_train(loader, model, loss_fn, optimizer):
    model.train()
    for xb, yb in loader:
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()                             # cleared after the step, ready for the next batch


def tutorial_style_test(loader, model, loss_fn):
    model.eval()
    loss_sum, right = 0, 0
    with torch.no_grad():
        for xb, yb in loader:
            scores = model(xb)
            loss_sum += loss_fn(scores, yb).item()        # one mean per batch, whatever its size
            right += (scores.argmax(1) == yb).float().sum().item()
    return loss_sum / len(loader)                         # divided by the number of batches


model, optimizer, scheduler, train, val = fresh()
with LoopDoctor(model) as doctor:
    for epoch in range(5):
        tutorial_style_train(train, model, nn.functional.cross_entropy, optimizer)
        tutorial_style_test(val, model, nn.functional.cross_entropy)
print(doctor.report())
print("validation batch sizes:", [len(yb) for _, yb in val])

# %% [markdown]
# The tutorial's test loss is the mean of its batch means: with 150 validation points in batches of 64, the last
# batch of 22 counts as much as a full one. How much that moves the number follows from the batch sizes alone:
# the mean of k batch means minus the per-example mean is c · (last batch's mean − the full batches' mean), with
# c = 1/k − n_last/N. Checked on the spiral, then c for the tutorial's own test set:

# %% tags=["answers-last-batch-average"]
def mean_of_means_gap(sizes):
    """c in: mean of batch means - per-example mean = c * (last batch's mean - full batches' mean)."""
    return 1 / len(sizes) - sizes[-1] / sum(sizes)


sizes = [len(yb) for _, yb in val]
model.eval()
with torch.no_grad():
    means = [nn.functional.cross_entropy(model(xb), yb).item() for xb, yb in val]
gap = sum(means) / len(means) - sum(m * n for m, n in zip(means, sizes)) / sum(sizes)
c = mean_of_means_gap(sizes)
print(f"spiral, batches {sizes}: c = {c:.3f}; the gap equals c x (last - full):",
      abs(gap - c * (means[-1] - sum(means[:-1]) / len(means[:-1]))) < 1e-9)
print(f"FashionMNIST's 10,000 test images in batches of 64 (the last of {10_000 % 64}): "
      f"c = {mean_of_means_gap([64] * 156 + [16]):.4f}, half a percent of the gap between its last batch and the rest")

# %% [markdown]
# Weighting each batch by its size is the fix, and the doctor then finds nothing:

# %%
def tutorial_style_test_weighted(loader, model, loss_fn):
    model.eval()
    loss_sum = 0
    with torch.no_grad():
        for xb, yb in loader:
            loss_sum += loss_fn(model(xb), yb).item() * len(yb)     # each batch weighted by its size
    return loss_sum / len(loader.dataset)


model, optimizer, scheduler, train, val = fresh()
with LoopDoctor(model) as doctor:
    for epoch in range(5):
        tutorial_style_train(train, model, nn.functional.cross_entropy, optimizer)
        tutorial_style_test_weighted(val, model, nn.functional.cross_entropy)
print(doctor.report())

# %% [markdown]
# What the doctor supports (each row is shown by tests of the course; the README names them):

# %%
from course_utils.doctor.support import support_table
display(Markdown(support_table(shown_by=False)))

# %% [markdown]
# What it cannot see: a submodule called from one of the model's own methods other than `forward`, with gradients
# on (`self.encoder(x)` inside an `encode()`; `model.forward(x)` and `self.forward(x)` are seen); averages taken with
# `np.array(list).mean()` or `float(tensor)` instead of `.item()` values summed or averaged in one call; leakage
# hidden behind a dataset with no raw storage whose copies are augmented differently per split; clipping written
# by hand. Training with the whole model in eval
# mode on purpose is reported as a missing `train()` (freezing only the BatchNorm layers is not). A loss that ends
# in its own division by a tensor (a hand-written mean such as `sum / mask.sum()`) hides an undivided accumulation.
# And one false alarm it can raise: a GAN trained without a DataLoader and watched on the discriminator alone is
# charged misweighted accumulation, since each batch of fakes looks like a micro-batch; watch both models. The
# report says when it could not run a check (no data seen, no optimizer step, no epoch ended).

# %% [markdown]
# ## Errors you will meet here
#
# The errors this chapter's mechanisms raise, each produced just now on the pinned torch and shown in torch's
# own words, with its fix run beside it. It stays folded until you need it; chapter 9 holds the whole atlas,
# and a box that finds the entry for a message you paste.

# %%
from course_utils.widgets.explain_view import errors_here

errors_here(5)

# %% [markdown]
# ## Exercises: write it yourself
#
# ### Exercise 5.1: fix a loop
#
# The loop below is a first try with silent bugs in it: it runs without an error. Fix it, changing what
# is wrong and nothing else. The check runs your loop under the loop doctor on a fresh model with Dropout,
# Adam and an epoch-based StepLR, then compares the final weights with a healthy loop from the same
# seeds (so train every batch of every one of the `epochs` epochs, and validate after each). What it
# returns is not checked. Run the check once before you change anything.

# %%
def fixed_loop(model, optimizer, scheduler, train_loader, val_loader, epochs):
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in train_loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss)
        val_loss = sum(nn.functional.cross_entropy(model(xb), yb).item() for xb, yb in val_loader)
    return losses

# %%
from course_utils.exercises import check
check("fixed_loop")

# %% [markdown]
# ### Exercise 5.2: accumulation that equals big batches
#
# Write `accumulate_epoch(model, loader, loss_fn, optimizer, K)`: one epoch of training with gradient
# accumulation over windows of K micro-batches, in which every update equals one step on a big batch of
# the window's examples: the epoch's short last window is flushed, and a partial last batch counts by
# its real size. `loss_fn` returns a batch's mean loss. `loader` is a DataLoader (`len(loader)` is its
# number of batches; its last batch may be smaller); K ≥ 1 may be larger than the epoch. The model comes
# with no gradients, in the mode it was left in (eval, after a validation): the epoch trains in train mode.
# Return the number of updates made, an int.

# %%
def accumulate_epoch(model, loader, loss_fn, optimizer, K):
    raise NotImplementedError  # replace this line with your code

# %%
check("accumulate_epoch")

# %% [markdown]
# ### Exercise 5.3: a true copy of the best weights
#
# Write `snapshot(model)`: return a copy of the model's state dict (every parameter *and* buffer, under
# the names `model.state_dict()` uses, and no other: a buffer registered with `persistent=False` is not in
# it) that later training does not change, so that `model.load_state_dict(snapshot(model))` after more
# training brings back the weights of the moment of the call. A `dict` or the `OrderedDict` that
# `state_dict()` returns, of detached tensors (no `grad_fn`), are both fine. Leave the model as it was (its
# mode, its weights, the grad mode). The check takes snapshots between steps of SGD with momentum of models
# with BatchNorm and Dropout, a float64 layer and a buffer that is not saved, trains on, and compares every
# tensor, its dtype and shape included, with what the model held at the time.

# %%
def snapshot(model):
    raise NotImplementedError  # replace this line with your code

# %%
check("snapshot")

# %% [markdown]
# ## Quiz

# %%
from course_utils.widgets.quiz_view import quiz
quiz(5)

# %% [markdown]
# ## Summary
#
# - Start with two checks: loss at init ≈ ln C, and the loop can overfit one batch.
# - Missing `zero_grad`: gradient norm climbs in trend, with dips, to several times the healthy maximum;
#   SGD's loss swings far above the healthy run's; Adam does not explode, but its loss swings above the
#   healthy run's and it ends far below it.
# - Train-mode validation: noisy, lower metrics, BatchNorm statistics moved by validation data.
# - No `no_grad` in evaluation: graph memory during evaluation (two batches' worth); metrics unchanged.
# - Logging loss tensors: autograd nodes pile up; with evaluation outside `no_grad`, memory too. Log `.item()`.
# - Freezing late is harmless with `set_to_none=True`; a head added late never trains; `.half()`/`.to()`
#   late fails once Adam has state: convert the model first, then build the optimizer.
# - Leakage: validation flatters, a clean test set does not. Fit preprocessing on train only: normalisation
#   fitted on train + val barely inflated validation here; feature selection, which reads the labels, did.
# - Not bugs: a logged training loss above the validation loss (dropout on, and an average over an epoch
#   that improved: measure both alike before concluding); validation loss rising with accuracy (more
#   confident mistakes). Keep the best weights with `copy.deepcopy(model.state_dict())`: `state_dict()`
#   alone returns the live tensors, and the parameters alone miss BatchNorm's buffers.
# - Misplaced `zero_grad`, clip, scheduler, `train()`, unscaled accumulation: each has a measured signature;
#   several can pass for an improvement on an under-trained or non-overfitting run, so compare at convergence.
# - Accumulation weighted by each window's examples equals one big batch, partial last batch included
#   (without BatchNorm or dropout, chapter 0).
# - Your own loop: wrap it, unchanged, in `with LoopDoctor(model):` (add your data if the loop has no
#   DataLoader); it names these bugs with the evidence it measured, and the weights come out bit for bit the same.
#   It found a real one in PyTorch's own quickstart tutorial: a test loss averaged over batches of unequal size.
