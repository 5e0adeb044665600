# %% [markdown]
# # Chapter 5: The bug museum
#
# **After this chapter you can** recognise each silent training bug by what it does to the loss,
# gradient-norm, memory and metric curves, and fix it.
#
# Every exhibit below is a real bug injected into the course's real loop (`course_utils.loop`). The
# same configuration runs twice with the same seed, once healthy and once with the bug, and we print
# what differs. None of the numbers is typed in: each one is measured.

# %%
from course_utils import setup_notebook
setup_notebook()

import torch
from torch import nn
from course_utils.bugs import BUGS, LOOP_BUGS, bug_table
from course_utils.session import Session, TrainConfig
from course_utils.museum import EXHIBITS, compare, comparison_figure, exhibit
from course_utils.notebook import sig
import matplotlib.pyplot as plt
from IPython.display import display


def draw(comp, title=None):
    """Show the four curves once, then close the figure."""
    fig = comparison_figure(comp, title)
    display(fig)
    plt.close(fig)


def show(bug, **config):
    """Run healthy vs bugged, print the signature, draw the four curves, print the fix."""
    comp = compare((bug,), **config) if config else exhibit(bug)
    print(comp.text())
    print("fix:", BUGS[bug].fix)
    draw(comp)
    return comp

# %% [markdown]
# ## Exhibit 1: missing `zero_grad`
#
# `backward()` adds into `.grad`. Without `zero_grad()` the gradient used at step n is the sum of every
# gradient so far. With plain SGD its norm keeps growing:

# %%
c = show("missing_zero_grad")
h, b = c.healthy.grad_norm, c.bugged.grad_norm
print("bugged grad norm, steps 1-10:", [sig(x, 3) for x in b[:10]])
print("norm grows every one of the first 10 steps:", all(y > x for x, y in zip(b[:10], b[1:11])))
print("step 10 / step 1:", sig(b[9] / b[0]))

# %% [markdown]
# With Adam the picture is different. Adam divides each update by the gradient's running RMS, so the
# step size stays about lr and nothing explodes. The gradient norm still grows, but the updates follow
# stale gradients and learning stalls:

# %%
adam = compare(("missing_zero_grad",), **{**EXHIBITS["missing_zero_grad"], "optimizer": "adam", "epochs": 10})
print("max grad norm      healthy", sig(max(adam.healthy.grad_norm)), " bugged", sig(max(adam.bugged.grad_norm)))
print("max loss           healthy", sig(max(adam.healthy.loss)), " bugged", sig(max(adam.bugged.loss)))
print("final val accuracy healthy", sig(adam.healthy.val_acc[-1]), " bugged", sig(adam.bugged.val_acc[-1]))
draw(adam, "missing_zero_grad with Adam")

# %% [markdown]
# ## Exhibit 2: validating in train mode
#
# Without `model.eval()` dropout stays on during validation. Two passes over the same validation set
# disagree, and with BatchNorm each pass moves the running statistics.

# %%
c = show("eval_in_train_mode")
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
# during evaluation: 0 under `no_grad`.

# %%
c = show("missing_no_grad")
print("eval memory per epoch, healthy:", c.healthy.eval_memory, " bugged:", c.bugged.eval_memory)
print("val losses identical:", c.healthy.val_loss == c.bugged.val_loss)

# %% [markdown]
# ## Exhibit 4: logging the loss tensor (`losses.append(loss)`, `total += loss`)
#
# Each logged tensor keeps its chain of autograd nodes alive. In training, `backward()` still frees the
# activations, so what grows is the node count, by the same amount every step, until the log is dropped.
# Combined with evaluation outside `no_grad`, every kept validation loss pins a whole batch's graph.

# %%
c = show("graph_attached_logging")
nodes = c.bugged.graph_nodes
print("graph nodes kept, first 6 steps:", nodes[:6], " healthy:", sorted(set(c.healthy.graph_nodes)))
print("growth per step in epoch 1:", sorted({y - x for x, y in zip(nodes[:9], nodes[1:10])}))
both = compare(("graph_attached_logging", "missing_no_grad"), **EXHIBITS["graph_attached_logging"])
print("eval memory with both bugs:", both.bugged.eval_memory, "bytes; with no_grad only the log:",
      compare(("missing_no_grad",), **EXHIBITS["graph_attached_logging"]).bugged.eval_memory)
print("fix: log loss.item() or loss.detach()")

# %% [markdown]
# ## Exhibit 5: optimizer and parameters out of step (what torch 2.13 really does)
#
# Three claims you will read online, measured. First, freezing after building the optimizer:

# %%
for opt in ["sgd", "momentum", "adam", "adamw"]:
    for set_to_none in (True, False):
        d = BUGS["freeze_after_optimizer"].demo(opt, set_to_none=set_to_none)
        print(f"{opt:<9} zero_grad(set_to_none={set_to_none!s:<5}) frozen weights moved {sig(d.frozen_change):<10}"
              f" trained weights moved {sig(d.trained_change)}")

# %% [markdown]
# With the default `set_to_none=True` frozen weights have `.grad = None` and every optimizer skips them.
# With zero tensors instead, the stateful optimizers (momentum, Adam, AdamW) keep moving them.
#
# Second, a head added after the optimizer was built:

# %%
d = BUGS["head_after_optimizer"].demo()
print(d)
print("the head gets gradients but never moves:", d.head_grad_norm > 0 and d.head_change == 0.0)

# %% [markdown]
# Third, `model.half()` (or `.to()`) after building the optimizer:

# %%
d = BUGS["half_after_optimizer"].demo()
print(d)
print("not a bug by default: same Parameter objects and the step moves them:",
      d.same_parameters and d.weight_change_after_step > 0)

# %% [markdown]
# ## Exhibit 6: data leakage
#
# Half the validation set is copied from the training set. The model is the same; only the measurement
# changes. A clean held-out test set shows the truth.

# %%
c = show("data_leakage")
print("leaked validation examples:", c.bugged_session.state.splits.leaked)
for name, run in [("healthy", c.healthy), ("leaky", c.bugged)]:
    print(f"{name:<8} val acc {sig(run.val_acc[-1])}  test acc {sig(run.test_acc[-1])}  "
          f"gap {sig(run.val_acc[-1] - run.test_acc[-1])}")

# %% [markdown]
# ## Exhibit 7: the wrong device
#
# With a GPU, mixing a CPU tensor and a CUDA tensor in one operation raises an error: it is not silent.
# The silent costs are host syncs: `.item()` or `.cpu()` every step makes the CPU wait for the GPU.

# %%
print("GPU present:", torch.cuda.is_available())
if not torch.cuda.is_available():
    print("No GPU here: the device-mix error and GPU sync stalls cannot be shown; we time .item() on the CPU.")

# %% [markdown]
# The timing below varies from run to run, so its output is not checked. On the CPU `.item()` has no
# device to wait for, so the difference is small; on a GPU each call stalls the pipeline.

# %% tags=["nbval-ignore-output"]
from course_utils.museum import sync_cost
with_item, without = sync_cost()
print(f"per step: .item() every step {with_item * 1e6:.1f} µs, tensor kept on device {without * 1e6:.1f} µs")

# %% [markdown]
# ## The misplacement table
#
# Each row moves or drops one operation of the step.
#
# **`zero_grad` between `backward` and `step`**: the update never sees a gradient.

# %%
c = show("zero_grad_after_backward")
s = c.bugged_session
print("logged grad norms:", sorted(set(c.bugged.grad_norm)), " updates called:", c.bugged.updates[-1])

# %% [markdown]
# **Clipping before `backward` or after `step`**: the run is the run without clipping.

# %%
unclipped = Session(TrainConfig(**{**EXHIBITS["clip_after_step"], "clip_norm": None}))
unclipped.run_to_end()
for bug in ["clip_before_backward", "clip_after_step"]:
    c = show(bug)
    print(f"{bug}: losses equal to the unclipped run: {c.bugged.loss == [e.loss for e in unclipped.steps]}; "
          f"equal to the correctly clipped run: {c.bugged.loss == c.healthy.loss}")

# %% [markdown]
# **An epoch schedule stepped every batch**: StepLR reaches after k batches the lr meant for epoch k.

# %%
c = show("epoch_schedule_per_batch")
print("healthy lr by epoch:", [sig(c.healthy.lr[i]) for i in (0, 10, 20)])
print("bugged lr, first 3 batches:", [sig(x) for x in c.bugged.lr[:3]])
print("lr after epoch 1: healthy", sig(c.healthy_session.epochs[0].lr), " bugged", sig(c.bugged_session.epochs[0].lr))

# %% [markdown]
# **Forgetting `model.train()` after evaluation**: from epoch 2 on the model trains with dropout off.

# %%
c = show("missing_train_switch")
print("trained in train mode, by epoch:", [all(e.training for e in c.bugged_session.steps if e.epoch == k) for k in (1, 2, 3)])
print("train loss healthy:", [sig(x) for x in c.healthy.train_loss], " bugged:", [sig(x) for x in c.bugged.train_loss])

# %% [markdown]
# **Accumulating K = 4 micro-batches without dividing the loss by K**: the first update's gradient
# is exactly 4 times the healthy one (an SGD learning rate × 4).

# %%
c = show("unscaled_accumulation")
first = next(i for i, e in enumerate(c.healthy_session.steps) if e.update)
print("first update's grad norm ratio:", sig(c.bugged.grad_norm[first] / c.healthy.grad_norm[first]))

# %% [markdown]
# Two more from the registry: accumulation without the end-of-epoch flush, and averaging validation by batch.

# %%
c = show("accumulation_without_flush")
print("updates so far, after each epoch:", c.healthy.updates, "vs", c.bugged.updates)
c = show("mean_of_batch_means")

# %% [markdown]
# ## The intentional version: gradient accumulation
#
# Accumulation is "missing zero_grad" done on purpose: K micro-batches, each loss divided by K, one
# step. The gradient equals that of one big batch.

# %%
from course_utils.data import make_spiral
from course_utils.models import MLP

x, y = make_spiral(128, seed=0).tensors
torch.manual_seed(0)
model = MLP(hidden=16)
model.zero_grad()
nn.functional.cross_entropy(model(x), y).backward()
big = [p.grad.clone() for p in model.parameters()]
model.zero_grad()
K = 4
for xb, yb in zip(x.chunk(K), y.chunk(K)):
    (nn.functional.cross_entropy(model(xb), yb) / K).backward()
diff = max((p.grad - g).abs().max().item() for p, g in zip(model.parameters(), big))
print("max |accumulated - big batch| < 1e-6:", diff < 1e-6)

# %% [markdown]
# ## The bug detector
#
# Tick one or more bugs and press **Run**: both runs train on the course's loop and the four curves are
# drawn against the healthy run. Bugs that change the same operation cannot be combined; the detector
# says so. It opens with two bugs combined.

# %%
from course_utils.widgets.bug_detector import bug_detector
bug_detector("graph_attached_logging", "missing_no_grad")

# %% [markdown]
# ## The mystery bug
#
# The game hides one bug (a seeded choice) and shows only the curves. Choose a diagnosis and press
# **Check**; your answers are kept with your quiz progress.

# %%
from course_utils.widgets.mystery_view import mystery
mystery()

# %% [markdown]
# ## Quick reference: bug → signature → fix

# %%
for name, operation, symptom, fix in bug_table():
    print(f"{name} [{operation}]\n  signature: {symptom}\n  fix: {fix}\n")

# %% [markdown]
# ## Bring your own loop: the loop doctor
#
# The exhibits above injected bugs into the course's loop. On Monday you will write your own loop, and its
# bugs will be just as silent. `LoopDoctor` watches a loop you do not change: wrap it in a `with` block,
# hand the doctor your model, optimizer (and, if you have them, scheduler and data), and read its report.
#
# It only observes: hooks on the model's forward and on the optimizer's step, and thin wrappers around
# `backward`, gradient clipping and your scheduler's `step`. Each wrapper calls the original and changes
# nothing; all are removed when the block ends, even if your loop raises. Each finding carries the bug's
# name from the table above, what the doctor measured, and the fix.
#
# First, what a script builds before its loop:

# %%
from torch.utils.data import DataLoader
from course_utils.data import spiral_splits
from course_utils.doctor import LoopDoctor
from course_utils.models import MLP


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
with LoopDoctor(model, optimizer, scheduler, train_data=train, val_data=val) as doctor:
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
# Now a loop as it often comes out on a first try: the scheduler sits inside the batch loop, validation
# forgets `model.eval()` and `no_grad`, and the loss tensors go into a list for a plot later. It runs
# without an error, and its validation accuracy is worse.

# %%
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
with LoopDoctor(model, optimizer, scheduler, train_data=train, val_data=val) as doctor:
    monday_loop(model, optimizer, scheduler, train, val)
print(doctor.report())
print("validation accuracy:", accuracy(model, val))

# %% [markdown]
# Gradient accumulation as the articles print it: the loss divided by K, a step every K micro-batches, no
# flush at the epoch's end. With 10 micro-batches an epoch and K = 4, the last two of each epoch spill
# into the next epoch's first window. Then the same loop with the flush, and a split that leaks.

# %%
def accumulation_loop(model, optimizer, train, epochs=3, K=4, flush=False):
    model.train()
    for epoch in range(epochs):
        for i, (xb, yb) in enumerate(train):
            loss = nn.functional.cross_entropy(model(xb), yb) / K
            loss.backward()
            if (i + 1) % K == 0 or (flush and i + 1 == len(train)):
                optimizer.step()
                optimizer.zero_grad()


for flush in (False, True):
    model, optimizer, scheduler, train, val = fresh()
    with LoopDoctor(model, optimizer, train_data=train) as doctor:
        accumulation_loop(model, optimizer, train, flush=flush)
    print(f"flush={flush}:", doctor.report(), "\n")

model, optimizer, scheduler, train, val = fresh(leak=0.3)
with LoopDoctor(model, optimizer, scheduler, train_data=train, val_data=val) as doctor:
    articles_loop(model, optimizer, scheduler, train, val)
print(doctor.report())

# %% [markdown]
# ## Quiz

# %%
from course_utils.widgets.quiz_view import quiz
quiz(5)

# %% [markdown]
# ## Summary
#
# - Missing `zero_grad`: gradient norm grows step by step (SGD); Adam stalls instead of exploding.
# - Train-mode validation: noisy metrics, BatchNorm statistics moved by validation data.
# - No `no_grad` in evaluation: graph memory during evaluation; metrics unchanged.
# - Logging loss tensors: autograd nodes pile up; with evaluation outside `no_grad`, memory too. Log `.item()`.
# - Freezing late is harmless with `set_to_none=True`; a head added late never trains; `.half()` late is fine.
# - Leakage: validation flatters, a clean test set does not.
# - Misplaced `zero_grad`, clip, scheduler, `train()`, unscaled accumulation: each has a measured signature.
