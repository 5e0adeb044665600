# %% [markdown]
# # Chapter 4 — The evaluation loop
#
# By the end of this chapter you will be able to:
#
# - write a correct evaluation function;
# - name its three switches — `model.eval()`, `torch.no_grad()`, no optimizer step — and say why each is needed;
# - work out how much memory training and evaluation need.

# %%
from course_utils import setup_notebook; setup_notebook()

# %%
import torch
from torch import nn
from torch.utils.data import DataLoader

from course_utils.engine.data import spiral_splits
from course_utils.chapters.ch04_evaluation import (average_losses, batchnorm_demo, batchnorm_running_update,
                                                   dropout_demo, eval_graph_bytes, inference_mode_errors, memory_budget,
                                                   modules_reading_training, one_example_in_train_mode, time_evaluation,
                                                   tiny_batch_outputs, train_eval_differ)
from course_utils.engine.loop import evaluate as course_evaluate
from course_utils.engine.models import MLP
from course_utils.infra.notebook import sig

# %% [markdown]
# ## Switch 1: `model.eval()` changes the layers that read `training`
#
# `model.eval()` sets a flag, `training = False`, on every module. Which layers read it? Ask torch itself:
# here are the public `torch.nn` modules whose code reads `self.training` (their `forward`, or a helper it
# calls in the same class or a torch.nn base class).

# %%
readers = modules_reading_training()
print(len(readers), "modules:", ", ".join(readers))

# %% [markdown]
# They fall into a few families: every **dropout** variant (also the dropout inside RNN, LSTM, GRU and
# MultiheadAttention); **BatchNorm** and SyncBatchNorm (batch statistics vs running statistics);
# **InstanceNorm**, but only when built with `track_running_stats=True` (off by default: then it normalises
# each example with its own statistics in both modes); **RReLU**, whose negative slope is random in training and fixed in eval; and
# TransformerEncoderLayer, which takes a faster code path only in eval mode with gradients off. Layers such as Linear,
# ReLU or LayerNorm ignore the flag. RReLU, for instance:

# %%
print("RReLU: two train passes differ, two eval passes differ:",
      train_eval_differ(nn.RReLU(), -torch.ones(6)))
print("Linear: two train passes differ, two eval passes differ:", train_eval_differ(nn.Linear(3, 2), torch.ones(3)))

# %% [markdown]
# The two you meet in every model are Dropout and BatchNorm. Dropout first. Input [0.8, 1.2, 0.3, 0.9], p = 0.5. In train mode each value is zeroed with
# probability 0.5, and the survivors are scaled by 1/(1 − p) = 2 so the expected sum stays the same.

# %% tags=["answers-eval-dropout"]
demo = dropout_demo((0.8, 1.2, 0.3, 0.9), p=0.5, passes=2)
for i, out in enumerate(demo.train_passes, 1):
    print(f"train pass {i}: {list(out)}")
for i, out in enumerate(demo.eval_passes, 1):
    print(f"eval pass {i}:  {list(out)}")
print("two train passes differ:", demo.train_passes[0] != demo.train_passes[1],
      "| two eval passes identical:", demo.eval_passes[0] == demo.eval_passes[1])

# %% [markdown]
# Every surviving value is exactly twice its input (0.3 → 0.6, 0.9 → 1.8). In eval mode the input passes through.
#
# Dropout written from scratch is three lines: draw a mask that keeps each value with probability 1 − p,
# zero the rest, and scale the survivors by 1/(1 − p).

# %%
torch.manual_seed(1)
x4, p = torch.tensor([0.8, 1.2, 0.3, 0.9]), 0.5
mask = (torch.rand(4) > p).float()
print("mask", mask.tolist(), "-> output", [sig(v) for v in (x4 * mask / (1 - p)).tolist()])

# %% [markdown]
# So torch scales while *training* (this is called inverted dropout): evaluation does not divide by 1 − p or
# multiply by anything. Which way does that move a loss? Take p = 0.7, the spiral MLP, and the same 300 training
# examples and weights measured both ways: the eval-mode loss once, the train-mode loss averaged over 100 masks.

# %% tags=["answers-dropout-loss-gap"]
from course_utils.chapters.ch04_dropout_gap import dropout_gap_lines

print("\n".join(dropout_gap_lines(p=0.7)))

# %% [markdown]
# Evaluation gives the *lower* loss, on every seed here. With the dropout straight before the last Linear layer
# it has to: the eval-mode logits are exactly the average of the train-mode logits over all masks, and the average of a
# convex loss is at least the loss of the average. Deeper in, before another ReLU, no rule forces it, and on
# these seeds it held anyway. So when a validation loss is several times the training loss from the first
# batches, dropout's scaling is not why (certain for a dropout before the last layer, measured here for deeper
# ones). Compare like with like: evaluate a few *training* batches in eval mode.
# If they are low too, the validation data differ (another distribution, other preprocessing); if they are
# high, something else changes in eval mode, such as BatchNorm's running statistics (below), or the two losses
# are not averaged alike (the averages further down this chapter).

# %% [markdown]
#
# BatchNorm next. In train mode it normalises with the mean and variance *of this batch*.
# In eval mode it uses the running averages it collected during training.

# %% tags=["answers-eval-batchnorm"]
bn = batchnorm_demo(batch=(2.0, 4.0, 6.0, 8.0), running_mean=3.0, running_var=4.0)
print("batch statistics:   mean", bn.batch_mean, " var", bn.batch_var, "-> train-mode output", list(bn.train_out))
print("running statistics: mean", bn.running_mean, " var", bn.running_var, "-> eval-mode output ", list(bn.eval_out))

# %% [markdown]
# Where do the running statistics come from? Each train-mode pass moves them a step towards the batch's
# statistics: new = (1 − momentum)·old + momentum·batch, with momentum 0.1 and, for the variance, the
# unbiased batch variance (divided by n − 1). An eval-mode pass leaves them alone:

# %%
rs = batchnorm_running_update((2.0, 4.0, 6.0, 8.0))
print("batch mean", rs.batch_mean, "| unbiased batch var", sig(rs.batch_var_unbiased), "| momentum", rs.momentum)
print("running (mean, var) at start:       ", rs.start)
print("after one train pass:               ", rs.after_train,
      "= 0.9*start + 0.1*batch:", rs.after_train == (round(0.9 * rs.start[0] + 0.1 * rs.batch_mean, 6),
                                                      round(0.9 * rs.start[1] + 0.1 * rs.batch_var_unbiased, 6)))
print("after one more pass, in eval mode:  ", rs.after_eval, "(unchanged)")

# %% [markdown]
# Does eval mode give train mode's output once the running statistics have converged? The same two-value batch
# [0, 1] through `BatchNorm1d(1)` 200 times in train mode, then once in eval mode:

# %% tags=["answers-bn-converged-gap"]
from course_utils.chapters.ch04_bn_gap import converged_gap, varying_batches_gap

gap = converged_gap(batch=(0.0, 1.0), passes=200)
print("running (mean, var) after 200 train passes:", gap["running"],
      "| the batch's variance: biased", gap["biased"], "unbiased", gap["unbiased"])
print("train-mode output", gap["train"], "| eval-mode output", gap["eval"])
for row in varying_batches_gap(sizes=(2, 8, 32)):
    print(f"fresh N(0, 1) batches of {row['n']:2}: train and eval outputs of the same overall size (RMS within 0.05): "
          f"{abs(row['rms_train'] - row['rms_eval']) < 0.05} | mean |train - eval| per value {row['gap']:.2f}; "
          f"had the buffers held the biased variance {row['gap_biased']:.2f}")

# %% [markdown]
# Not the same, and not because anything is unconverged. Train mode divides by the batch's *biased* variance
# (over n), while the running variance tracks the *unbiased* one (over n − 1), so for the very batch whose
# statistics the buffers hold, eval outputs are sqrt((n − 1)/n) times the train outputs: 0.7071 at n = 2, a
# factor that approaches 1 as batches grow. On fresh batches, as in real training, that factor is no part of the
# gap: the unbiased running variance is what gives eval outputs the train outputs' overall size (the last three
# lines, with buffers converged as cumulative averages), and buffers holding the biased variance would widen the
# gap. The gap itself is each batch being normalised by its own mean and variance in train mode; it shrinks with
# the batch, and at tiny batches a model evaluates on quite other activations than it trained on.
#
# Same input, two different outputs. In eval mode one example's output no longer depends on the *values* of the
# others in its batch. It can still move in its last bits with the batch's *size*: another size may take other
# kernel paths and sum in another order, and float32 rounds each order differently. Both causes, measured on
# the spiral MLP with BatchNorm, the same 300 validation points in batches of 2, 7 and 64 against one batch:

# %%
from course_utils.chapters.ch04_eval_pitfalls import batch_dependence, last_bits

print("\n".join(batch_dependence(batch_sizes=(2, 7, 64))))

# %% [markdown]
# Whether the last bits really move depends on the code your CPU runs: on some code paths another batch size
# changes them, on others it does not (the course's tests run ATen's generic kernels, what a CPU without AVX2
# runs, and find them moved there; the predictions never change). Your machine's answer, in a cell nbval does not
# compare:

# %% tags=["nbval-ignore-output"]
print(last_bits(batch_sizes=(1, 2, 7, 64)))

# %% [markdown]
# In train mode the batch changes the answer; in eval mode it changes only float rounding, far below anything
# a metric can see (one example's prediction could flip only where two classes tie to the last bit).
#
# That is why tiny batches hurt in train mode. With 2 examples the outputs are always −1 and +1
# (up to BatchNorm's eps, which is why [100, 100.5] gives ±0.9999), whatever the values; with 1 example
# this `BatchNorm1d` has a single value per channel and torch refuses it (its own message, below). A last
# batch of 1–3 examples gives unreliable statistics: `DataLoader(..., drop_last=True)` skips it.

# %%
for batch in [(1.0, 5.0), (100.0, 100.5), (3.0,)]:
    print(f"train-mode BatchNorm on {list(batch)}: {tiny_batch_outputs(batch)}")

# %% [markdown]
# Is one example always refused? No: torch counts the values *per channel*, and a `BatchNorm2d` gets one
# value per pixel. One 4×4 image trains (each channel is normalised over its own 16 pixels, so the
# "batch statistics" are that image's alone); one 1×1 image is refused like the `BatchNorm1d` above:

# %%
for shape, per_channel, what in one_example_in_train_mode():
    layer = "BatchNorm1d" if len(shape) == 2 else "BatchNorm2d"
    print(f"{layer} on one example of shape {tuple(shape)}: {per_channel:>2} value(s) per channel -> {what}")

# %% [markdown]
# *Ghost* batch norm (TabNet's, for one) normalises a large batch in virtual batches: it cuts the batch into
# ceil(N / size) chunks with `chunk` and runs BatchNorm on each. `chunk` makes pieces of ceil(N / chunks) rows, as
# many as fit, so the last piece holds what is left. 101 rows in virtual batches of 10 (a size chosen to show the
# failure), cut two ways, and the smallest batch that fails at two virtual sizes:

# %% tags=["answers-ghost-batch"]
from course_utils.chapters.ch04_bn_single_image import ghost_batch_lines

print("\n".join(ghost_batch_lines()))

# %% [markdown]
# Here `chunk` left a single row last, which train-mode BatchNorm refuses. It takes a batch whose size leaves one
# row over and is large enough: with TabNet's default virtual batch of 128, 16,257 rows or more, so its default
# batch of 1,024 never meets it. `tensor_split` into the same number of pieces spreads the remainder (9 or 10 rows
# each) and every piece is normalised; skipping normalisation for a one-row chunk would instead pass that row
# through a different function from the rest.

# %% [markdown]
# "Trains" is not "works". Evaluate a trained BatchNorm CNN one image at a time and forget `model.eval()`: each
# image is normalised with its own statistics, so whatever it says through the overall level of a channel
# (brightness, a colour cast, how strongly a feature fired) is subtracted before the next layer sees it. A small
# CNN whose classes differ in the level of one channel, trained, then tested three ways:

# %% tags=["answers-bn-single-image"]
from course_utils.chapters.ch04_bn_single_image import single_image_lines

print("\n".join(single_image_lines()))

# %% [markdown]
# The weights are fine: in eval mode, or in train mode with a large, shuffled batch whose statistics are the
# data's, the same model is right (a large batch of one class would subtract the class as one image does). A
# published model that scores far below its figure when you evaluate it with `batch_size=1` is very often one left
# in train mode: check `model.training` first. Each of those forwards also moved the running
# statistics towards one image; call `model.eval()` before evaluating, never after.

# %% [markdown]
# ## Switch 2: `torch.no_grad()` stops the graph — and, but for one layer family, only that
#
# The two switches are independent. `eval()` does not stop gradients:

# %% tags=["answers-no-grad-vs-eval"]
torch.manual_seed(0)
model = MLP(dropout=0.5)
splits = spiral_splits(600, 300)
xs, ys = splits.val.tensors
model.eval()
loss = nn.functional.cross_entropy(model(xs), ys)
print("after model.eval(): loss.grad_fn =", type(loss.grad_fn).__name__, "| requires_grad:", loss.requires_grad)
loss.backward()
print("backward still works: head.weight.grad is set:", model.head.weight.grad is not None)

# %% [markdown]
# And `no_grad` does not change what dropout or BatchNorm do: in train mode, dropout still drops under `no_grad`,
# and BatchNorm still updates its running statistics. The one family it does change is the Transformer's:
# `MultiheadAttention`, `TransformerEncoderLayer` and `TransformerEncoder` take a fused fast path only in eval mode
# *and* with gradients off (the last lines: a `TransformerEncoder` with a padding mask returns exact zeros at the
# padded positions on that path only; elsewhere its outputs move in the last bits).

# %%
model.train()
with torch.no_grad():
    a, b = model(xs[:1]), model(xs[:1])
print("train mode + no_grad: model.training =", model.training, "| two passes equal:", torch.equal(a, b))
model.eval()
with torch.no_grad():
    a, b = model(xs[:1]), model(xs[:1])
print("eval mode + no_grad:  model.training =", model.training, "| two passes equal:", torch.equal(a, b))
norm = nn.BatchNorm1d(1).train()
with torch.no_grad():
    norm(torch.tensor([[0.0], [10.0]]))
print("BatchNorm in train mode + no_grad: running_mean 0 ->", sig(norm.running_mean.item()),
      "| num_batches_tracked:", int(norm.num_batches_tracked))
from course_utils.chapters.ch04_evaluation import transformer_fast_path

for case, zeros in transformer_fast_path().items():
    print(f"TransformerEncoder with a padding mask, {case}: padded positions' outputs all exactly 0: {zeros}")

# %% [markdown]
# BatchNorm in train mode also keeps updating its running statistics under `no_grad`: an evaluation without
# `eval()` moves them towards the validation batches (0.1 × the batch mean 5 = 0.5 here), so it changes the
# model it measures, a mild leak of validation data into the weights you keep.
#
# You need both. The third switch is simply what you leave out: no `backward()`, no `optimizer.step()`.

# %% [markdown]
# ## What no_grad saves: memory, measured
#
# With gradients on, the forward pass keeps activations for a backward that evaluation never runs.
# `eval_graph_bytes` counts the bytes autograd saves while evaluating the 300 validation examples.

# %%
model = MLP()
with_grad = eval_graph_bytes(model, xs, ys, no_grad=False)
without = eval_graph_bytes(model, xs, ys, no_grad=True)
print(f"evaluation with gradients on: {with_grad:,} bytes saved for backward")
print(f"evaluation under no_grad:     {without:,} bytes")

# %% [markdown]
# Exactly zero under `no_grad`. (On a GPU you would compare `torch.cuda.memory_allocated()` instead.)
#
# Where does that number come from? It is exactly the tensors autograd keeps to run backward later, for
# 300 examples through Linear(2, 64) → ReLU → Linear(64, 64) → ReLU → Linear(64, 3) and cross-entropy.
# Each tensor is counted once, even when two operations save it (a ReLU output is saved by the ReLU and
# by the next Linear); the weights are not counted, they live anyway.

# %% tags=["answers-no-grad-memory"]
n = len(ys)
parts = [("input x (by the first Linear)", n * 2 * 4), ("ReLU output, layer 1", n * 64 * 4),
         ("ReLU output, layer 2", n * 64 * 4), ("log-probabilities (log_softmax)", n * 3 * 4),
         ("targets (int64, by nll_loss)", n * 8), ("total weight (a 0-d float32)", 4)]
for name, nbytes in parts:
    print(f"  {name:34s} {nbytes:>8,} bytes")
print(f"  {'sum':34s} {sum(b for _, b in parts):>8,} bytes | measured {with_grad:,}")

# %% [markdown]
# `no_grad` keeps nothing for backward, but each layer's output still exists while the next layer reads it, and
# its size is batch × width. Pass a whole validation set through the model in one call and that batch is the
# whole set: training in batches of 64 fits, evaluation runs out of memory. Forward hooks record every layer's
# output bytes on 10,000 validation examples, in one call and in batches of 256, each batch's summed loss
# added up and divided once by the number of examples:

# %% tags=["answers-eval-peak-memory"]
from course_utils.engine.data import make_spiral

torch.manual_seed(0)
eval_model = MLP().eval()
big_x, big_y = make_spiral(10_000, seed=2).tensors


def evaluate_in_batches(batch_size):
    sizes = []
    hooks = [m.register_forward_hook(lambda m, i, o: sizes.append(o.numel() * o.element_size()))
             for m in eval_model.modules() if not list(m.children())]
    total = 0.0
    with torch.no_grad():
        for xb, yb in zip(big_x.split(batch_size), big_y.split(batch_size)):
            total += nn.functional.cross_entropy(eval_model(xb), yb, reduction="sum").item()
    for hook in hooks:
        hook.remove()
    return max(sizes), total / len(big_y)


(one_call, loss_one), (batched, loss_batched) = evaluate_in_batches(10_000), evaluate_in_batches(256)
print(f"largest layer output: one call of 10,000: {one_call:,} bytes | batches of 256: {batched:,} bytes "
      f"({one_call // batched}x less)")
print("loss, size-weighted over the batches = loss of the one call (to 1e-6):", abs(loss_one - loss_batched) < 1e-6)

# %% [markdown]
# Evaluate with a `DataLoader` as you train, in batches (often twice the training batch fits, as nothing is
# kept for backward), and add up sums and counts: the batched loss is the one-call loss, exactly as the
# averaging section below shows. On a GPU the same figure is `torch.cuda.max_memory_allocated()`, not run here.

# %% [markdown]
# ## `no_grad` vs `inference_mode`
#
# `torch.inference_mode()` is a stricter `no_grad`: it also skips autograd's bookkeeping on the tensors it makes.
# The price: those *inference tensors* have three real restrictions outside the block. Here are the actual errors.

# %% tags=["answers-inference-mode"]
for case, outcome in inference_mode_errors().items():
    print(f"{case:45s} {outcome}")

# %% [markdown]
# A tensor made under `no_grad` is a normal tensor: every use works. An inference tensor cannot be saved for
# backward, modified in place outside inference mode, or given `requires_grad` (so it cannot become an
# `nn.Parameter`). `.clone()` turns it into a normal tensor, but only outside the block: a clone made inside is
# an inference tensor too (the last two lines).
#
# Is it faster? Measure instead of trusting a quoted number (your times will differ; the cell is not compared).

# %% tags=["nbval-ignore-output"]
big = MLP(hidden=256, depth=3)
batch = torch.randn(512, 2)
times = {mode: time_evaluation(big, batch, mode, repeats=30) for mode in ("grad", "no_grad", "inference_mode")}
for mode, seconds in times.items():
    print(f"{mode:15s} {sig(seconds * 1e3)} ms per forward")
print("inference_mode / no_grad:", sig(times["inference_mode"] / times["no_grad"]))

# %% [markdown]
# On a small CPU model the difference is small: the bookkeeping `inference_mode` skips is a small
# fixed cost per operation.

# %% [markdown]
# ## The memory budget of training
#
# Evaluation needs the weights. Training also needs gradients (one number per weight) and optimizer state
# (Adam: its two moments per weight, chapter 3), plus activations that depend on batch and architecture.
# A 100M-parameter model in FP32 (4 bytes per number):

# %%
for name, value in memory_budget(100_000_000, dtype_bytes=4, optimizer="adam").rows(1e6, "MB"):
    print(f"{name:16s} {value}")

# %% [markdown]
# Scale to 7B parameters. Weights alone are 28 GB in FP32 but 14 GB in FP16 — a precision difference,
# not a graph-vs-no-graph difference. The full training budgets, activations excluded:

# %%
cases = {
    "7B weights only, FP32": memory_budget(7e9, 4).weights,
    "7B weights only, FP16": memory_budget(7e9, 2).weights,
    "7B training, FP32 + Adam": memory_budget(7e9, 4, "adam").total,
    "7B training, FP16 + FP32 master + FP32 Adam": memory_budget(7e9, 2, "adam", state_bytes=4,
                                                                 master_weights=True).total,
}
for name, b in cases.items():
    print(f"{name:45s} {b / 1e9:g} GB")

# %% [markdown]
# **Mixed precision** means computing in 16-bit floats where it is safe and keeping 32-bit where it is
# not. Two schemes give the same total here. With PyTorch's own AMP (`torch.autocast`), weights,
# gradients and Adam's moments all stay FP32 (4 + 4 + 8 bytes per parameter) and only the computations
# run in FP16. The last row is the Apex/DeepSpeed style: FP16 weights and gradients plus an FP32 master
# copy of the weights and FP32 moments (2 + 2 + 4 + 8 bytes). Both come to 16 bytes per parameter, 112 GB.
# Autocast adds one thing: the 16-bit copies of the weights it casts, 2 bytes per parameter, saved for
# backward. Backward frees them layer by layer as it writes the gradients, so with `zero_grad()`'s default
# (the gradients are `None` during the forward) copies and gradients never take their full size together,
# and the peak stays at 16 bytes per parameter: chapter 7's GPU record (width 4,096) shows a step's peak unchanged by
# autocast. (These counts leave out the optimizer step's own temporaries: Adam's default implementation on a GPU,
# `foreach`, briefly holds one more FP32 tensor the size of the parameters, about 4 bytes per parameter more, which
# `fused=True` avoids; read from torch's source, not measured here.) They add 2 bytes per parameter when the gradients already exist during the forward: every
# micro-batch after the first of an accumulation window, or `zero_grad(set_to_none=False)` (printed below).
# Evaluating in FP16 under `no_grad` needs 14 GB plus a batch's activations. Mixed precision saves activation memory and
# time, not optimizer state.

# %%
plain_amp = memory_budget(7e9, 4, "adam").total
print(f"7B training with torch.autocast, gradients None during the forward: {plain_amp / 1e9:g} GB at the peak")
print(f"  with accumulation (gradients alive while the forward saves the 16-bit weight copies): {plain_amp / 1e9:g} GB"
      f" + {7e9 * 2 / 1e9:g} GB = {(plain_amp + 7e9 * 2) / 1e9:g} GB")

# %% [markdown]
# ## Averaging: weight by batch size
#
# A loader returns the mean loss of each batch. The mean of those means is biased when the last batch is smaller.
# By hand: batch means 1.0, 1.0, 4.0 with sizes 4, 4, 1.

# %% tags=["answers-eval-average"]
avg = average_losses([1.0, 1.0, 4.0], [4, 4, 1])
print("per example (weighted):", sig(avg.per_example), "| mean of batch means:", sig(avg.per_batch))

# %% [markdown]
# On the spiral: 300 examples in batches of 128 leave a last batch of 44. `make_spiral` keeps examples
# grouped by class, so the small last batch is all class 2 — and the untrained model's loss on it differs.

# %%
from course_utils.engine.data import make_spiral

torch.manual_seed(0)
model = MLP()
ordered = make_spiral(300, seed=1)
loader = DataLoader(ordered, batch_size=128)
print("batch sizes:", [len(t) for _, t in loader], "| classes in the last batch:", sorted(set(list(loader)[-1][1].tolist())))
for average in ("example", "batch"):
    loss, acc = course_evaluate(model, loader, average=average)
    print(f"average={average!r:10s} loss {sig(loss)}  accuracy {sig(acc)}")
full, _ = course_evaluate(model, DataLoader(ordered, batch_size=300))
print("one batch of all 300:     loss", sig(full))

# %% [markdown]
# The per-example average matches the loss of one big batch; the mean of batch means does not. A reset in the
# wrong place is worse than either: written inside the batch loop, `total = 0.0` keeps only the last batch's
# loss, and dividing by `len(loader)` shrinks it again. The same model and loader:

# %% tags=["answers-eval-reset-inside"]
def val_loss_reset_inside(model, loader):
    model.eval()
    with torch.no_grad():
        for x, y in loader:
            total = 0.0                                  # the bug: reset for every batch
            total += nn.functional.cross_entropy(model(x), y).item()
    return total / len(loader)


shown = val_loss_reset_inside(model, loader)
right, _ = course_evaluate(model, loader)
last_x, last_y = list(loader)[-1]
with torch.no_grad():
    last = nn.functional.cross_entropy(model(last_x), last_y).item()
print(f"reset inside the loop: {sig(shown, 2)} | per example: {sig(right, 2)} | {len(loader)} batches")
print("it is the last batch's loss divided by the number of batches:", shown == last / len(loader))
print("below half the real loss, with nothing learned:", shown < right / 2)

# %% [markdown]
# A validation loss far below the training loss from such a loop is the loop's arithmetic, not a good model.
#
# Each batch's loss is itself an average over B examples, so it scatters around the epoch's loss with a spread
# of σ/√B (σ: the spread of the per-example losses): a per-batch training curve is noisy even when nothing is
# wrong, and four times noisier at a sixteenth of the batch. The same rule sizes a validation set. One fixed
# model, the per-example losses of 16,384 examples, cut into batches:

# %% tags=["answers-loss-noise-batch"]
import math

torch.manual_seed(0)
fixed = MLP().eval()
sample_x, sample_y = make_spiral(16_384, seed=3).tensors
with torch.no_grad():
    per_example = nn.functional.cross_entropy(fixed(sample_x), sample_y, reduction="none")
shuffled = per_example[torch.randperm(len(per_example), generator=torch.Generator().manual_seed(0))]
sigma = per_example.std().item()
spreads = {}
for size in (8, 32, 128):
    spreads[size] = shuffled.view(-1, size).mean(1).std().item()
    print(f"batch {size:>3}: spread of the batch losses {sig(spreads[size], 2)} | σ/√B = {sig(sigma / math.sqrt(size), 2)}")
print(f"batch 8 against batch 128: {sig(spreads[8] / spreads[128], 2)}x as noisy (√16 = 4)")
print(f"a validation loss over 100 examples varies by about {sig(sigma / 10, 2)}, over 10,000 by {sig(sigma / 100, 2)}")

# %% [markdown]
# Spikes in a per-batch curve are this noise; judge a run by epoch means and the validation curve, or smooth
# the batch curve over many steps. σ/√n is the spread of one validation loss: a small validation set is a noisy
# measurement of the model, so keep the best checkpoint by the metric and trust differences only well above the
# noise. Two checkpoints scored on the *same* examples are a paired comparison, though: the noise of their
# difference is the spread of the per-example differences over √n, usually several times smaller than σ/√n,
# since an example that is hard for one checkpoint is hard for the other.
#
# Accuracy has arithmetic of its own, and when it goes wrong the loss does not show it: the loss function checks
# the shapes it is given, a comparison broadcasts whatever it gets. 300 predictions of 3 classes, 270 of them
# right by construction, counted four ways:

# %%
from course_utils.chapters.ch04_accuracy_counts import accuracy_count_lines

print("\n".join(accuracy_count_lines()))

# %% [markdown]
# Labels kept as a column (a Dataset that returns `[label]`, or `y.view(-1, 1)` for a loss that wanted it) turn
# `pred == y` into a table of every prediction against every label: its mean says how often a prediction and a
# label picked at random agree (1/3 here, with balanced classes), whatever the model predicts, so the accuracy sits
# at chance while the loss falls; its sum over the batch size is not even a fraction. Floor division of two
# integers prints 0 for any model short of perfect. One-hot labels (mixup, label smoothing written by hand)
# against class indices do not broadcast, and torch names the two sizes, except when the batch size equals the
# number of classes or is 1 (a last batch of one): then (N,) against (N, C) broadcasts to a table without a word. Check `pred.shape == y.shape` once, and
# divide as floats: `(pred == y).float().mean()`.
#
# A metric object is one pool of counts: everything `update()` was given since its last `reset()`. Shared between
# training and validation, the pool mixes them, and whichever phase resets first empties it for the other. The
# course's `Accuracy` and torchmetrics' own, 270 of 300 training predictions right and 210 of 300 validation
# ones, called in the order Lightning calls its hooks when validation runs at the end of each training epoch (the
# validation hooks before `on_train_epoch_end`; Lightning itself is not run here):

# %% tags=["answers-shared-metric"]
from course_utils.chapters.ch04_accuracy_counts import shared_metric_lines

print("\n".join(shared_metric_lines()))

# %% [markdown]
# Shared, validation reports the mixture of both phases' counts, and training reports an empty pool: `nan` from the
# course's metric, 0.00 from torchmetrics, which looks like a real and terrible accuracy, with only a warning. Give
# each phase its own metric object (`self.train_acc`, `self.val_acc`), each reset by its own phase.

# %% [markdown]
# ## Shuffling the evaluation data
#
# The training loader shuffles. Should the validation loader shuffle too?

# %%
from course_utils.widgets.predict_view import predict
predict(4, "eval-shuffle")

# %% [markdown]
# One model, 300 validation examples in batches of 64 (the last holds 44), evaluated in order and then
# shuffled with five seeds: per example, as a mean of batch means, and shuffled with `drop_last=True`.

# %% tags=["answers-eval-shuffle"]
from course_utils.widgets.predict_view import answer

with answer(4, "eval-shuffle"):
    from course_utils.chapters.ch04_eval_pitfalls import shuffle_effect

    torch.manual_seed(0)
    effect = shuffle_effect(MLP(), splits.val, batch_size=64, seeds=range(5))
    print("per example: accuracy identical on", sum(acc == effect.ordered[1] for _, acc in effect.shuffled),
          "of 5 shuffles; loss within 1e-6 on", sum(abs(l - effect.ordered[0]) < 1e-6 for l, _ in effect.shuffled))
    print("mean of batch means: differs from the per-example loss by more than 1e-4 on",
          sum(abs(m - effect.ordered[0]) > 1e-4 for m in effect.batch_mean_losses), "of 5 shuffles")
    print(f"drop_last=True: {effect.drop_last_counted} of 300 examples counted; the accuracy changes from shuffle to shuffle:",
          len(set(effect.drop_last_accuracies)) > 1)

# %% [markdown]
# Shuffled or not, the per-example loss and accuracy are the same (the loss up to float rounding): in eval mode
# each example's output depends on that example alone (up to float rounding, measured above), and the
# per-example average is the same sum in another order. Shuffling
# changes the metric only where the metric is already wrong: a mean of batch means weighs the short batch
# differently depending on which examples land in it, and `drop_last=True` drops different examples each
# time. Keep evaluation unshuffled, with `drop_last=False`: results are then comparable run to run, and the
# same example is in the same place when you look at the worst predictions.
#
# Randomness in the validation *transform* does the same damage. One fixed model (its weights never change),
# its 300 validation examples evaluated five times with a random jitter in the transform (a stand-in for a
# random crop or warp), and five times with it off:

# %% tags=["answers-eval-random-transform"]
torch.manual_seed(0)
frozen = MLP().eval()


def accuracy_with(jitter, seed):
    noise = torch.randn(xs.shape, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        return (frozen(xs + jitter * noise).argmax(1) == ys).float().mean().item()


for name, jitter in (("random jitter in the transform", 0.2), ("deterministic transform", 0.0)):
    values = [accuracy_with(jitter, seed) for seed in range(5)]
    print(f"{name:<31}: distinct accuracies in 5 evaluations of one model: {len(set(values))}")

# %% [markdown]
# With a random transform the metric measures the model *and* the dice; a checkpoint compared with itself
# changes score. Validation and test transforms are deterministic (resize, centre crop, normalise). If an
# evaluation must be random (test-time augmentation), average several draws and seed them, as the cell did
# with its generator.
#
# Deterministic is not enough: it must also be the preprocessing the model was trained with. A checkpoint learned
# its first layer on inputs standardised with its training set's mean and standard deviation; give it inputs
# made another way and it scores inputs it never saw. The spiral, moved away from 0 and stretched as raw
# features are, a model trained on standardised inputs, and its validation set prepared four ways:

# %% tags=["answers-eval-preprocessing"]
from course_utils.chapters.ch04_preprocessing import normalisation_lines

print("\n".join(normalisation_lines()))

# %% [markdown]
# The validation set's own statistics come close here only because it is drawn from the same distribution as the
# training set; use the training constants anyway (per-set statistics hide a shift, and one image has none of its
# own). Constants the model was not trained with (ImageNet's mean and std given to a model trained on inputs scaled
# to [-1, 1], or a model zoo's constants left out) or none at all leave the model guessing. When a downloaded model scores far
# below its published figure, check the preprocessing it was trained with before anything else; to fine-tune it,
# start from that preprocessing, since its first layer was fitted to it.
#
# A categorical column has a preprocessing of its own: the map from category to embedding row, fitted on the training
# set. New rows bring categories it never saw (a new user, a new product ID). Forty categories, 30 of them in
# training, 10 only at prediction; one embedding value per row plus a linear term, seeds 0 to 4:

# %% tags=["answers-unseen-categories"]
from course_utils.chapters.ch04_unseen_categories import unseen_lines

print("\n".join(unseen_lines()))

# %% [markdown]
# An index past the table is torch's `IndexError` on the CPU (on a GPU the same index trips a device-side assert,
# often reported at a later line; not run here), so the map needs somewhere to put an unknown category. Some
# encoders map it to an index the user reserves (scikit-learn's `OrdinalEncoder(handle_unknown="use_encoded_value",
# unknown_value=...)`); `OneHotEncoder(handle_unknown="infrequent_if_exist", min_frequency=...)` sends it to the
# column of the training set's infrequent categories, which is the rare-to-unknown scheme run here. A reserved row is
# trained only by the training rows that use it: never used, it keeps its random initialisation (with Adam and no
# weight decay; the third line: AdamW's decay moves it toward 0, which is still no learning from data), and the
# category's part of every unseen category's prediction is noise. Mapping the training set's rare categories to it (a
# minimum frequency, as vocabularies do with rare words) trains it on categories that are seen little, the closest
# stand-in for those never seen; here that lowered the error on the new categories on 4 of the 5 seeds, not all.
# Whatever a library does with unknowns, the question is the same: which training rows moved that vector?
#
# ## Evaluating on several ranks
#
# With W processes (chapter 2's `DistributedSampler`, with `shuffle=False` for evaluation: it shuffles by
# default), each rank evaluates its shard and the results are combined with `torch.distributed.all_reduce`,
# which adds a tensor over the ranks. Two things can go wrong: what the sampler does when N is not a
# multiple of W, and how the ranks' results are combined.

# %%
predict(4, "ddp-padding")

# %% [markdown]
# Where the copies sit: the sampler lays out W·⌈N / W⌉ slots in one order, the last ones copies of the
# first indices, and deals them out, so rank r's j-th example is slot r + j·W and it is a copy exactly when
# r + j·W ≥ N. For N = 10, W = 4:

# %%
from course_utils.widgets.predict_view import answer

with answer(4, "ddp-padding"):
    from course_utils.chapters.ch04_ranks import padding_layout
    from course_utils.engine.rank_shards import real_slots

    for r, shard in enumerate(padding_layout(10, 4)):
        print(f"rank {r}: indices {shard}, real (r + j*W < N): {real_slots(10, 4, r)}")
    layout = padding_layout(100, 8)
    print("N = 100, W = 8:", sum(len(s) for s in layout), "slots, padding copies of", layout[4][-1], "to", layout[7][-1])

# %% [markdown]
# Now the four ways of combining, measured. `sharded_metrics` runs every rank's evaluation loader
# (100 validation examples, 8 ranks), then a real `all_reduce` over 8 gloo ranks (one thread per rank,
# the collective a `torchrun` job calls): sums over every slot, duplicates included; the ranks' means,
# averaged; and sums and counts over the real examples only. Five untrained models (seeds 0-4), each
# against one process evaluating all 100.

# %%
predict(4, "mean-of-means")

# %% tags=["answers-eval-allreduce-sums", "answers-eval-ddp-padding-duplicates"]
from course_utils.widgets.predict_view import answer

with answer(4, "mean-of-means"):
    from course_utils.chapters.ch04_ranks import sharded_metrics

    models = []
    for seed in range(5):
        torch.manual_seed(seed)
        models.append(MLP())
    small_val = spiral_splits(600, 100).val.tensors
    results = sharded_metrics(models, *small_val, world_size=8)
    print("examples counted:", 100 + results[0].duplicates, "slots for 100 examples | real examples per rank:",
          results[0].real_per_rank)
    for name in ("with_padding", "mean_of_means", "reduced_sums"):
        loss_off = sum(abs(getattr(r, name)[0] - r.single[0]) > 1e-6 * r.single[0] for r in results)
        acc_off = sum(abs(getattr(r, name)[1] - r.single[1]) > 1e-9 for r in results)
        print(f"{name:<13}: loss differs from one process on {loss_off} of 5 models, accuracy on {acc_off}")

# %% [markdown]
# The sampler (with its default `drop_last=False`) pads every rank to ⌈N / W⌉ examples by repeating the first
# indices of the epoch's order (its permutation, with `shuffle=True`), so some examples count
# twice, and an average of per-rank averages weights the ranks, not the examples. Counting the duplicates
# biases both numbers on every model; so does averaging the 8 ranks' means, although
# it counts each example once, because the ranks hold 13 or 12 real examples. All-reducing the sums and the
# counts over the real examples gives one process's numbers exactly:
#
# ```python
# keep = torch.tensor([rank + j * world_size < len(val_set) for j in range(len(losses))])
# totals = torch.stack([losses[keep].sum(), correct[keep].sum(), keep.sum()]).double()
# dist.all_reduce(totals)                       # default op: SUM over the ranks
# mean_loss, accuracy = (totals[0] / totals[2]).item(), (totals[1] / totals[2]).item()
# ```
#
# The bias is small here (4 copies in 104 slots) and larger when N is small against W. Two other fixes: give
# the evaluation loader of every rank but one nothing and evaluate on rank 0 alone (fine for a small
# validation set; evaluate `model.module`, the model inside the DDP wrapper: the wrapper's forward
# broadcasts buffers such as BatchNorm's running statistics from rank 0, and with the other ranks not
# calling it, rank 0 waits until the process group's timeout), or use a sampler that does not pad, with uneven shards (the sums above handle those too).
# Exercise 4.3 asks you to write the metric.

# %% [markdown]
# ## Metrics that do not average: F1
#
# Loss and accuracy are means over examples, so batch means weighted by size give the whole set's value. F1 is
# not a mean: it is 2·TP / (2·TP + FP + FN), one ratio of counts over the whole set. With one example in ten
# positive, a batch of 16 often holds no positive at all (the cell below counts those batches), and that batch's F1
# is 0 whatever the model does.
#
# One fixed linear model scores 1,000 such validation examples, on five seeds. The F1 of the positive class is
# computed three ways: once on the whole set; as the mean of each batch's F1, weighted by its examples (what a
# loop that averages every metric does); and with `BinaryF1`, whose `update()` adds each batch's TP, FP and FN
# counts and whose `compute()` divides once.

# %%
from course_utils.chapters.ch04_f1_batches import f1_batches_conclusion, f1_over_batches

runs = [f1_over_batches(seed, batch_sizes=(16, 32)) for seed in range(5)]
print("\n".join(f1_batches_conclusion(runs, gaps={16: 0.05, 32: 0.005})))

# %% [markdown]
# The mean of per-batch F1 is biased low, and more so the smaller the batch: more averaging does not remove it.
# Counts add up exactly, so `update()` and `compute()` give the whole set's F1 at every batch size. Precision,
# recall and macro F1 work the same way: keep the counts, divide at the end. AUROC ranks every score against
# every other, so its state is the scores themselves, concatenated (torchmetrics' default, `thresholds=None`; given
# a number of thresholds it keeps a fixed-size confusion matrix per threshold instead, an approximation).
#
# This is torchmetrics' protocol, and the course's trainer (chapter 7) takes it as `Task(metric=...)`:
#
# ```python
# from course_utils.production import MulticlassF1
#
# f1 = MulticlassF1(num_classes=3)
# for inputs, targets in val_loader:
#     f1.update(model(inputs), targets)   # adds counts on the device: no .item(), no wait
# print(f1.compute())                     # divides once; on W ranks it sums the ranks' counts first
# f1.reset()
# ```
#
# On W ranks `compute()` all-reduces the counts (and all-gathers AUROC's scores) before it divides: the rule of
# the section above, sum the counts and never average the ratios. A plain function given as the trainer's
# metric is still averaged over batches, which is right only for a mean over examples such as MAE.
#
# Which average matters as much as when it is taken. With one label per example, every wrong prediction is one
# false positive (for the class predicted) and one false negative (for the true class): summed over the
# classes, FP = FN = the errors. So *micro* averaging (add TP, FP and FN over the classes, then divide) gives
# precision = recall = F1 = accuracy, every epoch; only the *macro* average (each class's ratio, then their
# mean) weighs a rare class as much as a common one. Three classes, 300 examples, the rarest class predicted
# worst:

# %% tags=["answers-micro-macro"]
from course_utils.production import MulticlassF1, MulticlassPrecision, MulticlassRecall

g = torch.Generator().manual_seed(0)
targets = torch.multinomial(torch.tensor([0.6, 0.3, 0.1]), 300, replacement=True, generator=g)
hit = torch.rand(300, generator=g) < torch.tensor([0.9, 0.7, 0.3])[targets]       # how often each class is right
predicted = torch.where(hit, targets, (targets + 1 + torch.randint(0, 2, (300,), generator=g)) % 3)
confusion = torch.zeros(3, 3, dtype=torch.int64).index_put_((targets, predicted), torch.tensor(1), accumulate=True)
tp = confusion.diagonal().sum().item()
fp = (confusion.sum(0) - confusion.diagonal()).sum().item()
fn = (confusion.sum(1) - confusion.diagonal()).sum().item()
print(f"accuracy {tp / 300:.4f} | errors {300 - tp}: FP summed over classes {fp}, FN summed {fn}")
print(f"micro: precision {tp / (tp + fp):.4f}, recall {tp / (tp + fn):.4f}, F1 {2 * tp / (2 * tp + fp + fn):.4f}")
logits = torch.nn.functional.one_hot(predicted, 3).float()
macro = {}
for name, Metric in (("precision", MulticlassPrecision), ("recall", MulticlassRecall), ("F1", MulticlassF1)):
    metric = Metric(num_classes=3)
    metric.update(logits, targets)
    macro[name] = f"{metric.compute().item():.4f}"
print("macro (the course's MulticlassF1 and its neighbours):", ", ".join(f"{k} {v}" for k, v in macro.items()))

# %% [markdown]
# Precision, recall and F1 that come out identical to each other and to accuracy are micro averages of a
# single-label task, not a bug in the metric; to see the rare class, ask for the macro average (or per class).
#
# Segmentation is the same story one pixel at a time, with the background as the common class. Twelve masks,
# objects on a few percent of the pixels, scored two ways: a model that predicts background everywhere, and one
# that finds every object but draws it one pixel too wide. Pixel accuracy, then IoU (intersection over union)
# and Dice for each class, from one confusion matrix (`course_utils/chapters/ch04_segmentation_metrics.py`):

# %% tags=["answers-segmentation-metrics"]
from course_utils.chapters.ch04_segmentation_metrics import segmentation_lines

print("\n".join(segmentation_lines()))

# %% [markdown]
# Pixel accuracy is a micro average, so the background carries it: the model that found nothing scores above
# 0.9, and a training log's pixel accuracy ("acc_seg") can look excellent while every object class sits at IoU 0.
# (Micro-averaged Dice over all classes is pixel accuracy again, as micro F1 was accuracy above.) Read IoU or Dice
# per class, and say whether the background is in the mean (here it lifts "mean IoU" from 0.000 to 0.315 for a
# model that found nothing). For one class Dice and IoU rank models alike (Dice = 2 IoU / (1 + IoU): never lower,
# equal at 0 and 1), but their *means* over classes or images can rank two models in opposite orders (the
# two-model line), and a Dice figure and an IoU figure are not comparable numbers.
#
# *How* they are averaged changes them the way F1 changed above: over all pixels at once (counts summed, one
# ratio), or per image and then averaged, where here a one-pixel border cost the small objects more than the large
# ones and the per-image mean fell below the pooled value. An image where neither mask nor prediction has the
# class contributes 0/0: left out, counted as a perfect 1, or as 0, three conventions and three numbers. An image
# where only the prediction has it scores 0 under all three, which is how over-prediction shows, unless the
# metric drops every image whose mask lacks the class (MONAI's `DiceMetric` does by default, `ignore_empty=True`:
# read from its source, not run), which hides those false positives. torchmetrics averages per image by
# default and pools with `aggregation_level="global"`; its default `input_format="one-hot"` applied to index
# masks returns a number without an error (last line): pass `input_format="index"` for class-index masks. Labels
# that mean "ignore" (255 in VOC and Cityscapes) must be dropped before any of these counts. A validation "Dice"
# computed per batch or per patch during training and the final one over whole volumes are different averages of
# the same predictions; compare like with like.
#
# The smaller the batch, the coarser each per-batch value. Ten predictions, 7 of them right, in batches of 2:

# %% tags=["answers-batch-metric-values"]
right = torch.tensor([1, 1, 0, 1, 1, 0, 1, 1, 1, 0])
per_batch = [batch.float().mean().item() for batch in right.split(2)]
print("per-batch accuracy:", per_batch, "| the only values possible:", sorted({0.0, 0.5, 1.0}))
print(f"correct predictions summed over the epoch: {right.sum().item()}; divided by the examples (10): "
      f"{right.sum().item() / 10} | divided by len(loader), the batches (5): {right.sum().item() / 5}")

# %% [markdown]
# With batches of 2 an accuracy can only be 0, 0.5 or 1 per batch, and an F1 a handful of values: that is
# the arithmetic, not the model. Add the counts over the epoch and divide once by the number of *examples*.
# Dividing by `len(loader)`, the number of batches, gives an "accuracy" of 1.4 here: above 1 whenever more
# than one example per batch is right, and it grows with the batch size.
#
# A metric that needs every prediction at once (AUROC, or a `compute_metrics(predictions, labels)` called once
# after the last batch, as Hugging Face's `Trainer` calls it by default; `batch_eval_metrics=True` makes it call the
# function per batch, which must then keep its own counts) makes the loop keep every batch's outputs until then.
# For a token model those outputs are logits: examples × positions × vocabulary numbers. A token head on 128
# sequences of 64 positions over a vocabulary of 2,000, evaluated three ways:

# %% tags=["answers-kept-logits"]
from course_utils.chapters.ch04_kept_outputs import kept_outputs, scaled_bytes

kept = kept_outputs()
size = kept["bytes"]
print(f"every batch's logits kept, then concatenated {kept['shape']}: {size['logits']:,} bytes")
print(f"each batch reduced to its argmax ids first: {size['argmax ids']:,} bytes "
      f"({size['logits'] // size['argmax ids']:,} times less)")
print(f"each batch reduced to (correct, counted): {size['counts']} bytes")
accuracy = kept["accuracy"]
print(f"accuracy on the labelled 15%: {accuracy['logits']:.4f}, the same all three ways:",
      max(accuracy.values()) - min(accuracy.values()) < 1e-6)
big = scaled_bytes(1000, 512, 30522)
print("1,000 sequences x 512 positions x 30,522 tokens:", ", ".join(f"{k} {v:.4g} GB" for k, v in big.items()))

# %% [markdown]
# Reduce each batch to what the metric needs before keeping it: its argmax ids (the Hugging Face `Trainer` calls
# a `preprocess_logits_for_metrics(logits, labels)` you pass on each batch's logits before it keeps them), or the
# metric's own counts (the `update()` / `compute()` protocol above). Moving what is kept to the CPU every few
# steps (the `Trainer`'s `eval_accumulation_steps`) frees the GPU, not the total. The `Trainer` itself is not run
# here; the arithmetic is the same.

# %% [markdown]
# ## A BatchNorm model, train mode against eval mode
#
# A BatchNorm model scores well in train mode. Eval mode swaps the batch's statistics for the running
# averages, which move a tenth of the way (momentum 0.1) at every train-mode forward. What does that do to a
# model trained briefly on raw features?

# %%
predict(4, "bn-collapse")

# %% [markdown]
# `bn_collapse` trains the MLP with a BatchNorm after each hidden layer for 30 updates (batch 32, plain SGD)
# on spiral inputs shifted by 10, as raw unnormalised features often are. It scores the validation set in
# train mode (each batch's own statistics) and in eval mode (the running statistics), then re-estimates the
# running statistics with one pass over the training data in train mode under `no_grad` and scores again.
# Five seeds. What to look at: how far the first BatchNorm's running mean is from the real mean of its input,
# in standard deviations.

# %% tags=["answers-eval-bn-collapse"]
from course_utils.widgets.predict_view import answer

with answer(4, "bn-collapse"):
    from course_utils.chapters.ch04_eval_pitfalls import bn_collapse

    runs = [bn_collapse(seed) for seed in range(5)]
    print("train mode (batch statistics): accuracy above 0.7 on", sum(r.train_mode_accuracy > 0.7 for r in runs), "of 5")
    print("eval mode (running statistics): accuracy below 0.6 on", sum(r.eval_mode_accuracy < 0.6 for r in runs), "of 5")
    print("eval mode after re-estimating:  accuracy above 0.7 on", sum(r.recalibrated_accuracy > 0.7 for r in runs), "of 5")
    print("running mean off by more than 0.5 std on", sum(r.gap_before > 0.5 for r in runs),
          "of 5; after re-estimating, below 0.05 std on", sum(r.gap_after < 0.05 for r in runs))

# %% [markdown]
# A common report: "my model does well in training, and predicts nonsense after `model.eval()`". With
# BatchNorm the usual cause is this one. The model is fine; its running statistics are not. Compare `running_mean` and `running_var` of each
# BatchNorm with the mean and variance of its input on a training batch: a gap of a standard deviation or
# more explains the collapse.
#
# Why the gap? The running averages *lag* the weights. The first BatchNorm's input mean is about
# offset × (sum of the weights) + bias, so with inputs around 10 every update moves it ten times as far as
# with centred inputs, and an average over the last ten or so forwards trails far behind. Does training
# longer let it catch up? Only once the weights stop moving. Measured, against the two other fixes:

# %%
from course_utils.chapters.ch04_eval_pitfalls import bn_collapse_fixes

print("\n".join(bn_collapse_fixes(range(5))))

# %% [markdown]
# So the fixes, in the order the data supports: normalise the inputs (centre and scale the features);
# re-estimate the statistics after training, as here (`recalibrate_batchnorm`: reset them, set
# `momentum=None` for a plain average, one pass in train mode under `no_grad`; torch has the same built in
# as `torch.optim.swa_utils.update_bn(loader, model)`); and avoid training batches of one class or of a few
# examples. Training longer helps only once the weights settle.
#
# Why is eval mode the right one to report, when train mode scored higher? A train-mode score depends on
# which examples share the batch (here all 300 validation points formed one batch), so it is not a
# measurement of the model alone. Chapter 5's exhibits show the related bug of a forgotten `model.eval()`.
#
# With batches of one, a `BatchNorm1d` (one value per channel) cannot train: one value has no variance. A
# convolutional BatchNorm does train on one image, normalising each channel over its pixels (the ghost-batch lines
# above counted the values per channel), but with statistics from a single image, noisy and unlike the next one's:
# that is why 3D segmentation and detection with one or two images per GPU freeze it. Freezing it means putting
# only the BatchNorm layers in eval mode, so they use their running statistics and stop updating them. Three SGD steps by hand (w ← w − 0.1·grad) on batches of one, BatchNorm
# layers in eval mode:

# %% tags=["answers-bn-freeze"]
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
try:
    net(torch.randn(1, 4))
except ValueError as error:
    print("train mode, a batch of one: ValueError:", error)


def freeze_batchnorm(model):
    for layer in model.modules():
        if isinstance(layer, nn.modules.batchnorm._BatchNorm):
            layer.eval()


freeze_batchnorm(net)
before = {k: v.clone() for k, v in net.state_dict().items()}
for _ in range(3):
    net.zero_grad()
    nn.functional.cross_entropy(net(torch.randn(1, 4)), torch.tensor([1])).backward()
    with torch.no_grad():
        for parameter in net.parameters():
            parameter -= 0.1 * parameter.grad
changed = [k for k, v in net.state_dict().items() if not torch.equal(before[k], v)]
print("BatchNorm layers in eval mode, 3 steps at batch size 1: changed:", changed)
net.train()
print("after net.train() (the next epoch's first line): BatchNorm in train mode again:", net[1].training)

# %% [markdown]
# In eval mode the running mean and variance stop moving, but BatchNorm's own weight and bias (`1.weight`,
# `1.bias`) still train: freeze them with `requires_grad_(False)` too if you want the layer fixed. And
# `model.train()` at the start of every epoch puts BatchNorm back in train mode: call `freeze_batchnorm`
# after it, each epoch. With frozen statistics, batch size 1 trains; the statistics are the pretrained ones,
# which suits fine-tuning, not training from scratch (there, `GroupNorm` or `SyncBatchNorm` over several GPUs).
#
# Some fine-tuning scripts do the reverse: `model.eval()` for the whole network, then one BatchNorm (often the
# last) back in `train()`. Three BatchNorm layers and a Dropout, the model in eval mode but for the last
# BatchNorm, three SGD steps on data shifted away from what the statistics were built on:

# %% tags=["answers-one-bn-train"]
torch.manual_seed(0)
deep = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.5),
                     nn.Linear(8, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 8), nn.BatchNorm1d(8), nn.ReLU(),
                     nn.Linear(8, 2))
deep.eval()
deep[8].train()
shifted = torch.randn(16, 4) + 3
print("Dropout active:", deep[3].training, "| two forwards of one batch equal:",
      torch.equal(deep(shifted), deep(shifted)))
before = {k: v.clone() for k, v in deep.state_dict().items()}
step = torch.optim.SGD(deep.parameters(), lr=0.1)
for _ in range(3):
    step.zero_grad()
    nn.functional.cross_entropy(deep(shifted), torch.randint(0, 2, (16,))).backward()
    step.step()
moved = [k for k, v in deep.state_dict().items() if not torch.equal(before[k], v)]
print("buffers that moved:", [k for k in moved if "running" in k or "num_batches" in k])
print("parameters that trained:", sum("running" not in k and "num_batches" not in k for k in moved), "of",
      len(list(deep.parameters())))

# %% [markdown]
# Eval mode is a switch per layer, not a switch on training: every weight still trains, Dropout is off, and
# only the BatchNorm in train mode re-estimates its statistics, from the new data's batches. The rest keep the
# pretrained statistics. So such a script trains every weight without Dropout, keeps the pretrained statistics
# everywhere but in one layer, and lets that one adapt to the new data. Call `model.eval()` and that layer's
# `train()` again after anything that resets the mode (an evaluation that ends with `model.train()`).
#
# Train mode couples the examples of a batch: each one is normalised with statistics that every other one helped
# compute. Example 1 moved by 5 in every feature, and how far example 0's output moves, for a batch of 8, 64 and
# 512 (the global batch a `SyncBatchNorm` over 8 ranks of 64 would see):

# %% tags=["answers-bn-coupling"]
for size in (8, 64, 512):
    torch.manual_seed(0)
    norm = nn.BatchNorm1d(4)
    batch = torch.randn(size, 4)
    moved = batch.clone()
    moved[1] += 5.0
    shifts = []
    for mode in ("train", "eval"):
        norm.train(mode == "train")
        with torch.no_grad():
            shifts.append((norm(moved)[0] - norm(batch)[0]).abs().max().item())
    print(f"batch {size:>3}: example 0's output moved by {sig(shifts[0], 2)} in train mode, {sig(shifts[1], 2)} in eval mode")

# %% [markdown]
# The coupling shrinks as the batch grows and is never 0 in train mode: one example's normalised output carries a
# little of every other example in its batch. A model can learn to use that channel: MoCo's authors found their
# contrastive model "cheating" through it, and shuffle the batch across GPUs before the key encoder's BatchNorm, so
# that a key is normalised with other examples than its query. `SyncBatchNorm` does not close the channel; it
# dilutes it over a larger batch. In eval mode the channel is closed.
#
# An evaluation function unfreezes it the same way when it puts the mode back with `model.train(was)`: that
# sets every layer to the model's flag. Put back each layer's own flag instead, as chapter 9's `evaluate`
# does:

# %%
freeze_batchnorm(net)
was = net.training
net.eval()
net.train(was)                                            # the usual way to put the mode back
print("evaluation that ends with net.train(was): BatchNorm in train mode:", net[1].training)
freeze_batchnorm(net)
modes = [(layer, layer.training) for layer in net.modules()]
net.eval()
for layer, training in modes:                             # each layer's own flag
    layer.training = training
print("evaluation that puts back each layer's flag: BatchNorm still frozen:", not net[1].training)

# %% [markdown]
# ## Forgetting `model.train()`
#
# `course_evaluate` (the engine's `evaluate`) leaves the model in eval mode. If the next epoch starts
# without `model.train()`, dropout stays off and the model trains without the regularisation you asked for.

# %% tags=["answers-forgot-train"]
torch.manual_seed(0)
model = MLP(dropout=0.5)
course_evaluate(model, splits.val)
print("after evaluate: model.training =", model.training)
a, b = model(xs[:4]), model(xs[:4])
print("forgot model.train(): two 'training' passes equal ->", torch.equal(a, b), "(dropout is off)")
model.train()
a, b = model(xs[:4]), model(xs[:4])
print("after model.train():  two training passes equal ->", torch.equal(a, b), "(dropout is on)")

# %% [markdown]
# ## Train mode vs eval mode, side by side
#
# Press **forward** in train mode a few times: different units are dropped (grey ×) and the output changes.
# Switch to eval and press again: nothing is dropped and the output stays fixed. The bars show the graph memory
# of evaluating 256 examples with gradients on and under `no_grad`, measured.

# %%
from course_utils.widgets.train_eval_view import train_vs_eval

view = train_vs_eval()
view.forward()
view.forward()
view.mode.value = "eval"
view.forward()
view.forward()
view

# %% [markdown]
# ## Errors you will meet here
#
# The errors this chapter's mechanisms raise, each produced just now on the pinned torch and shown in torch's
# own words, with its fix run beside it. It stays folded until you need it; chapter 9 holds the whole atlas,
# and a box that finds the entry for a message you paste.

# %%
from course_utils.widgets.explain_view import errors_here

errors_here(4)

# %% [markdown]
# ## Exercises: write it yourself
#
# Each exercise is a stub for you to edit and a check on cases you do not see. The evaluation function's
# check watches more than numbers: the graph-memory meter of this chapter, the model's mode, BatchNorm's
# running statistics.
#
# ### Exercise 4.1: the evaluation function
#
# Write `evaluate(model, loader, loss_fn)` returning `(mean_loss, accuracy)` as Python floats: the loss
# averaged per example (not per batch) and the fraction of examples classified right (the arg-max of the
# logits equals the target), over the examples `loader` yields: every batch of it. It may draw only part
# of its dataset (a sampler, or one rank's shard), so count what it yields, not `len(loader.dataset)`.
# Accuracy, as in every exercise: count the right predictions as an integer and divide once by the number
# of examples, in Python floats; the check compares it to within 1e-9 (a float32 mean is off by up to
# 6e-8: 232 of 300 is 0.77333331 in float32, below 232/300).
# `loader` yields `(inputs, targets)` batches, targets int64 class indices, and its last batch may be smaller; `loss_fn(logits, targets)` returns the
# batch's *mean* loss (`CrossEntropyLoss()`). It switches the layers to their evaluation behaviour, builds
# no graph, takes no step, and leaves the model, and every layer in it, in the mode it found it in
# (`model.training` may be True or False). All of it fits in about ten lines. (The course's own
# `evaluate`, used above, is imported as `course_evaluate`, so yours does not replace it.)

# %%
def evaluate(model, loader, loss_fn):
    raise NotImplementedError  # replace this line with your code

# %%
from course_utils.exercises import check
check("evaluate")

# %% [markdown]
# ### Exercise 4.2: dropout by hand
#
# Write `dropout(x, p, training)` without `nn.Dropout` (or `F.dropout`): in training, zero each value
# with probability p, independently, and scale the survivors so that the expected output equals x;
# otherwise return x unchanged. `p` is a float from 0 to 1: with p = 0 nothing is dropped, with p = 1
# everything (all zeros, never NaN). Return a tensor of x's shape and dtype, and leave x itself untouched.
# Gradients flow through it to x, as through `nn.Dropout`.

# %%
def dropout(x, p, training):
    raise NotImplementedError  # replace this line with your code

# %%
check("dropout")

# %% [markdown]
# ### Exercise 4.3: a metric over ranks, each example once
#
# Each of `world_size` ranks evaluated its shard of `DistributedSampler(val_set, num_replicas=world_size,
# rank=r)` (with `drop_last=False`) over n examples. `losses[r]` is a 1-D float32 tensor of rank r's
# per-example losses and `correct[r]` a 1-D bool tensor (True where the prediction was right), both in the
# order of rank r's sampler; every rank has ⌈n / world_size⌉ entries, and `world_size = len(losses)`.
# Write `rank_metrics(losses, correct, n)` returning the tuple `(mean_loss, accuracy)` as Python floats over
# the n distinct examples, each counted once: rank r's entry j sits at slot r + j·world_size of the sampler's
# layout, and the slots from n on are padding copies. n ≥ 1 and may be smaller than world_size (then whole
# ranks hold only copies). The loss is compared to within 1e-5 relative (a float32 sum is fine).
# Accuracy, as in every exercise: count the right predictions as an integer and divide once by the number
# of examples, in Python floats; the check compares it to within 1e-9 (a float32 mean is off by up to
# 6e-8: 232 of 300 is 0.77333331 in float32, below 232/300).
# Leave the tensors as they are.

# %%
def rank_metrics(losses, correct, n):
    raise NotImplementedError  # replace this line with your code

# %%
check("rank_metrics")

# %% [markdown]
# ## Quiz

# %%
from course_utils.widgets.quiz_view import quiz
quiz(4)

# %% [markdown]
# ## Summary
#
# - `model.eval()` flips `training`; the torch.nn modules that read it are the dropout variants, BatchNorm,
#   InstanceNorm with `track_running_stats=True`, RNN/attention dropout, RReLU and the Transformer fast path.
#   It does not stop gradients.
# - `torch.no_grad()`: no graph — 0 bytes saved for backward; it changes no layer but the Transformer family's fast
#   path (eval mode and no gradients together).
# - `inference_mode` is stricter: its tensors cannot be saved for backward or modified in place outside it.
# - 100M parameters in FP32 with Adam: 400 MB weights + 400 MB grads + 800 MB state. 7B: 28 GB (FP32) or 14 GB (FP16) of weights; 112 GB to train with Adam.
# - Average per example, weighted by batch size. Call `model.train()` before training again.
# - In train mode BatchNorm updates its running statistics under `no_grad` too: evaluate in eval mode.
# - Shuffling evaluation data changes nothing in a per-example metric; with `drop_last=True` or a mean of
#   batch means it does. Evaluate unshuffled, nothing dropped.
# - On W ranks, `DistributedSampler` repeats a few examples; leave the copies out (slot r + j·W ≥ N) and
#   all-reduce sums and counts, never means.
# - F1, precision, recall and AUROC are not means over examples: a mean of per-batch F1 is biased low when a
#   class is rare. Accumulate counts (or, for AUROC, scores) with `update()` and compute once with `compute()`.
# - A BatchNorm model that collapses in eval mode has running statistics that lag the data: compare them with
#   a batch's, normalise the inputs or re-estimate them (`torch.optim.swa_utils.update_bn`).
