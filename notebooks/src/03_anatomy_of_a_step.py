# %% [markdown]
# # Chapter 3 — Anatomy of one training step
#
# By the end of this chapter you will be able to:
#
# - name the operations of one training step in order;
# - say what each one reads and what it writes;
# - do one SGD step, and one Adam step, by hand and check every number against PyTorch;
# - write the minimal training loop over a DataLoader.
#
# We use the smallest model that still has a weight matrix: `TinyLinear`, a `Linear(2, 2)`.

# %%
from course_utils import setup_notebook; setup_notebook()

# %%
import torch
from torch import nn

from course_utils.chapters.ch03_anatomy import (fmt, max_difference, scheduler_before_optimizer_warning, tiny_step,
                                                tiny_step_autograd)
from course_utils.engine.models import TinyLinear
from course_utils.infra.notebook import sig

# %% [markdown]
# ## The operations, in order
#
# One step is six operations, plus a seventh for the learning rate:
#
# | operation | reads | writes |
# |---|---|---|
# | `optimizer.zero_grad()` | nothing | `.grad` ← `None` for the optimizer's parameters only |
# | forward `y = model(x)` | inputs, weights | outputs, the autograd graph with the activations it keeps; BatchNorm's running statistics |
# | loss `L = loss_fn(y, t)` | outputs, targets | one scalar with a `grad_fn` |
# | `L.backward()` | the graph | every `.grad` (added to what is there); then frees the graph |
# | clip (optional) | every `.grad` | every `.grad`, rescaled |
# | `optimizer.step()` | weights, `.grad`, lr, its own state (momentum, Adam's moments) | weights, its state |
# | `scheduler.step()` | its counter | the learning rate |
#
# Let us watch each one on real tensors.

# %%
model = TinyLinear()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.tensor([1.0, 2.0])
t = torch.tensor([1.0, 0.0])
print("W =", fmt(model.weight), " b =", fmt(model.bias))
print("W.grad before anything:", model.weight.grad)

# %% [markdown]
# ## Forward and loss: a scalar that remembers how it was made
#
# The forward pass computes `y` and records the operations that made it.
# The loss is one number, and its `grad_fn` is the last recorded operation.

# %%
y = model(x)
loss = nn.functional.mse_loss(y, t)
print("y =", fmt(y))
print("loss =", sig(loss.item()), "| shape:", tuple(loss.shape), "| grad_fn:", type(loss.grad_fn).__name__)
print("weights after forward and loss:", fmt(model.weight), "(unchanged)")

# %% [markdown]
# The graph is real: each `grad_fn` points to the operations that made its inputs. Walking it from the
# loss back to the weights gives the chain that `backward()` follows (the chain rule, one node at a time).
# `AccumulateGrad` is where a gradient lands in a weight's `.grad`.

# %%
def walk(node, depth=0):
    if node is None:
        return
    print("  " * depth + type(node).__name__)
    for child, _ in node.next_functions:
        walk(child, depth + 1)


walk(loss.grad_fn)

# %% [markdown]
# Forward also *keeps* what backward will need: inputs and intermediate results. The more examples in a
# batch, the more it keeps. Measured with the course's meter on the spiral MLP (bytes autograd saved):

# %%
from course_utils.engine.memory import GraphMemoryMeter
from course_utils.engine.models import MLP

torch.manual_seed(0)
mlp = MLP()
for batch in (32, 64):
    meter = GraphMemoryMeter()
    with meter:
        out = nn.functional.cross_entropy(mlp(torch.randn(batch, 2)), torch.randint(0, 3, (batch,)))
    print(f"batch {batch}: {meter.bytes:,} bytes kept for backward")
    del out

# %% [markdown]
# Only operations autograd can differentiate keep that record. An `argmax`, a `.detach()`, a `.item()` turned
# back into a tensor: each gives a loss with no `grad_fn`, and `backward()` refuses it. Forcing
# `requires_grad_(True)` onto such a loss silences the error and trains nothing:

# %% tags=["answers-loss-no-grad-fn"]
torch.manual_seed(0)
net = nn.Linear(4, 3)
inputs, labels = torch.randn(8, 4), torch.randint(0, 3, (8,))
candidate_losses = {
    "cross_entropy(out, y)": lambda out: nn.functional.cross_entropy(out, labels),
    "error rate from out.argmax(1)": lambda out: (out.argmax(1) != labels).float().mean(),
    "cross_entropy(out.detach(), y)": lambda out: nn.functional.cross_entropy(out.detach(), labels),
    "torch.tensor(loss.item())": lambda out: torch.tensor(nn.functional.cross_entropy(out, labels).item()),
}
for name, make in candidate_losses.items():
    candidate = make(net(inputs))
    try:
        candidate.backward()
        print(f"{name:<31} grad_fn {type(candidate.grad_fn).__name__}: backward fills the weights' .grad")
    except RuntimeError as error:
        print(f"{name:<31} grad_fn None: RuntimeError: {error}")
net.zero_grad()
before = net.weight.detach().clone()
forced = (net(inputs).argmax(1) != labels).float().mean().requires_grad_(True)
forced.backward()
torch.optim.SGD(net.parameters(), lr=0.1).step()
print("the error rate with requires_grad_(True): backward runs; weight.grad:", net.weight.grad,
      "| weights moved by step():", not torch.equal(before, net.weight))

# %% [markdown]
# A loss must be built from the model's output by differentiable operations all the way: a Dice or IoU loss
# uses the probabilities (`softmax`), never the predicted classes. Metrics such as the error rate are for
# logging, under `no_grad`.
#
# The same holds for one parameter inside a loss that does have a `grad_fn`: the forward can use a weight and
# autograd still not reach it. A Linear's weight used five ways, beside its bias used normally:

# %% tags=["answers-unreached-parameter"]
from course_utils.chapters.ch03_autograd_extras import unreached_parameter_lines

print("\n".join(unreached_parameter_lines()))

# %% [markdown]
# The loss trains the bias and never the weight, without an error. Under `DistributedDataParallel` the same
# weight is what its "parameters that were not used in producing loss" error names (with the default
# `find_unused_parameters=False`, at the next iteration's forward; chapter 7 runs it), although the forward used
# it: to autograd, a parameter it cannot follow was not used.

# %% [markdown]
# ## Backward fills `.grad`, and a second backward *adds*
#
# `backward()` writes the gradient into each weight's `.grad`.
# It does not overwrite: it adds. Run a second forward and backward without clearing, and the gradient doubles.

# %% tags=["answers-grads-accumulate"]
loss.backward()
print("after 1st backward: W.grad =", fmt(model.weight.grad))
nn.functional.mse_loss(model(x), t).backward()
print("after 2nd backward: W.grad =", fmt(model.weight.grad), "(the sum of both)")
print("weights are still", fmt(model.weight), "— backward never moves them")

# %% [markdown]
# Backward also frees the graph it used: a second `backward()` on the same loss fails.

# %% tags=["answers-graph-freed"]
try:
    loss.backward()
except RuntimeError as exc:
    freed = "second time" in str(exc)
    print(f"{type(exc).__name__}; torch says the graph was already freed: {freed}")

# %% [markdown]
# ## `zero_grad` clears to `None`
#
# Since torch 2.0 `zero_grad()` sets every `.grad` to `None` (`set_to_none=True` is the default).
# `None` means "no gradient yet"; it is not a tensor of zeros.

# %% tags=["answers-zero-grad-none"]
optimizer.zero_grad()
print("after zero_grad: W.grad =", model.weight.grad, "| b.grad =", model.bias.grad)

# %% [markdown]
# Where in the loop it goes matters in one place only. Five SGD-with-momentum steps from the same seed, with
# `zero_grad()` first in the loop (as in this course), right after `step()` (as in some tutorials), and
# between `backward()` and `step()`:

# %% tags=["answers-zero-grad-placement"]
def zero_grad_at(where, steps=5):
    torch.manual_seed(0)
    net = nn.Linear(4, 3)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    start = net.weight.detach().clone()
    for xb, yb in zip(torch.randn(steps, 8, 4), torch.randint(0, 3, (steps, 8))):
        if where == "first in the loop":
            opt.zero_grad()
        nn.functional.cross_entropy(net(xb), yb).backward()
        if where == "between backward and step":
            opt.zero_grad()
        opt.step()
        if where == "right after step":
            opt.zero_grad()
    return start, net.weight.detach()


_, reference = zero_grad_at("first in the loop")
for where in ("first in the loop", "right after step", "between backward and step"):
    start, weights = zero_grad_at(where)
    print(f"zero_grad {where:<26} weights moved: {not torch.equal(start, weights)!s:<5} "
          f"| equal, bit for bit, to zero_grad first: {torch.equal(weights, reference)}")

# %% [markdown]
# First or right after `step()` is the same loop: either way each `backward()` starts from cleared
# gradients, provided the loop starts with none. A step written as a function cannot know what its caller
# left in `.grad` (a gradient check, a loss looked at): it clears first (exercise 3.1 checks it). Between
# `backward()` and `step()` it throws the gradients away before they are used, and the optimizer skips
# every parameter whose grad is `None`: the weights never move.
#
# Clearing to `None` also frees memory. What a step allocates, and when, for a two-layer model with Adam, counted
# in bytes of the tensors themselves:

# %% tags=["answers-first-iteration-memory"]
from course_utils.chapters.ch03_step_memory import step_memory_lines

print("\n".join(step_memory_lines()))

# %% [markdown]
# The gradients (one tensor per weight, as large as the weights) appear at the first `backward()`, and Adam's two
# moments (twice the weights) at the first `step()`: a run's memory steps up during iteration 1 and is level from
# iteration 2 on. Memory that keeps growing after that is something else: chapter 5's logged loss tensors, for one.
# On a GPU, `nvidia-smi` also counts the caching allocator's reserve and the CUDA context on top of these tensors
# (not run here).

# %% [markdown]
# ## Only `step` changes the weights
#
# Now one clean step: forward, loss, backward, then `optimizer.step()`.
# SGD applies `w ← w − lr · grad` to every parameter.

# %%
loss = nn.functional.mse_loss(model(x), t)
loss.backward()
before = model.weight.detach().clone()
optimizer.step()
print("W before step:", fmt(before))
print("W after step: ", fmt(model.weight))
print("b after step: ", fmt(model.bias))

# %% [markdown]
# `zero_grad` may come first in the step or right after `optimizer.step()`.
# What matters is only that the gradients are clear before the next `backward()`. Three steps both ways:

# %%
def three_steps(zero_grad_first):
    m = TinyLinear()
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    for _ in range(3):
        if zero_grad_first:
            opt.zero_grad()
        nn.functional.mse_loss(m(x), t).backward()
        opt.step()
        if not zero_grad_first:
            opt.zero_grad()
    return m.weight.detach().clone()


print("W after 3 steps, zero_grad first:", fmt(three_steps(True)))
print("W after 3 steps, zero_grad last: ", fmt(three_steps(False)))
print("identical:", torch.equal(three_steps(True), three_steps(False)))

# %% [markdown]
# ## The hand calculation
#
# Same model: W = [[0.5, −0.3], [0.2, 0.8]], b = [0, 0]. One example x = [1, 2], target t = [1, 0].
# Loss: MSE (mean over the two outputs). Optimizer: SGD with lr = 0.01.
#
# 1. Forward: y = W x + b.
# 2. Loss: L = ((y₀ − t₀)² + (y₁ − t₁)²) / 2.
# 3. Gradient at the output: ∂L/∂yᵢ = 2(yᵢ − tᵢ)/2 = yᵢ − tᵢ.
# 4. Chain rule through y = W x + b: ∂L/∂Wᵢⱼ = ∂L/∂yᵢ · xⱼ and ∂L/∂bᵢ = ∂L/∂yᵢ.
# 5. Update: W_new = W − 0.01 · ∂L/∂W, b_new = b − 0.01 · ∂L/∂b.
#
# `tiny_step` does exactly this with plain Python arithmetic, no autograd. Here is every number.

# %%
hand = tiny_step(lr=0.01)


def show(v):
    return str([show(z) for z in v]).replace("'", "") if isinstance(v, tuple) else f"{sig(v):g}"


for name in ("y", "loss", "dL_dy", "dL_dW", "dL_db", "W_new", "b_new"):
    print(f"{name:7s}", show(getattr(hand, name)))

# %% [markdown]
# Read it line by line: y = [1·0.5 + 2·(−0.3), 1·0.2 + 2·0.8] = [−0.1, 1.8].
# The loss is ((−1.1)² + 1.8²)/2 = (1.21 + 3.24)/2 = 2.225.
# Each gradient row is ∂L/∂yᵢ times x = [1, 2], so the second column is twice the first.
#
# Now the same step done by PyTorch: `TinyLinear`, `mse_loss`, `backward()`, `SGD.step()`, here in
# float64 (`TinyLinear().double()`), so that only rounding of the starting weights can differ.

# %%
auto = tiny_step_autograd(lr=0.01)
for name in ("y", "loss", "dL_dy", "dL_dW", "dL_db", "W_new", "b_new"):
    print(f"{name:7s}", show(getattr(auto, name)))
gap = max_difference(hand, auto)
print("largest difference between hand and autograd, over every number:", "< 1e-6" if gap < 1e-6 else gap)

# %% [markdown]
# They agree: the only difference is the starting weights, which `TinyLinear` stores in float32
# (0.3 is 0.30000001 in float32). The same step in float32, the dtype you would normally train in:

# %%
m32 = TinyLinear()
nn.functional.mse_loss(m32(x), t).backward()
torch.optim.SGD(m32.parameters(), lr=0.01).step()
gap32 = (m32.weight.detach().double() - torch.tensor(hand.W_new, dtype=torch.float64)).abs().max().item()
print("float32 step: largest |W_new - hand| < 1e-7:", gap32 < 1e-7)

# %% [markdown]
#
# Did the step help? Run forward again with the new weights.
# The new y₀ is 0.511·1 + (−0.278)·2 + 0.011. The new loss is yours to work out: it is the last quiz question.

# %%
print("new y[0] =", sig(hand.y_new[0]), "| autograd:", sig(auto.y_new[0]))
print("new loss by hand == new loss by autograd (to 1e-6):", abs(hand.loss_new - auto.loss_new) < 1e-6)
print("new loss below the old one,", sig(hand.loss), ":", hand.loss_new < hand.loss)

# %% [markdown]
# ## The same step with Adam
#
# Every later chapter trains with Adam, so here is its update rule. For each weight, Adam keeps two running
# averages (its *state*, two numbers per weight): the **first moment** m, an average of recent gradients,
# and the **second moment** v, an average of recent *squared* gradients. At step k, with gradient g:
#
# 1. m ← β₁·m + (1 − β₁)·g, and v ← β₂·v + (1 − β₂)·g² (defaults β₁ = 0.9, β₂ = 0.999; both start at 0);
# 2. bias correction, because both started at 0: m̂ = m / (1 − β₁ᵏ), v̂ = v / (1 − β₂ᵏ);
# 3. w ← w − lr · m̂ / (√v̂ + ε), with ε = 1e-8 against division by zero.
#
# At the first step m̂ = g and v̂ = g², so the update is lr · g / |g| = lr · sign(g): every weight moves
# by about lr, whatever the size of its gradient. A separate fact, true at every step: multiply every
# gradient by a constant c and m̂ grows by c, √v̂ by |c|, so m̂ / √v̂ is unchanged (up to ε). That is why a
# constant factor on the loss barely changes Adam (run after this step). One step on TinyLinear, same gradient
# as above, lr = 0.01:

# %%
from course_utils.chapters.ch03_anatomy import adam_step_by_hand

adam = adam_step_by_hand(lr=0.01)
for name in ("grad", "m", "v", "m_hat", "v_hat", "update", "W_new"):
    print(f"{name:7s}", show(getattr(adam, name)))
gap = max(abs(a - b) for ra, rb in zip(adam.W_new, adam.torch_W_new) for a, b in zip(ra, rb))
print("torch.optim.Adam gives the same W_new (to 1e-6):", gap < 1e-6)
print("first update = lr * sign(g) for every weight (to 1e-6):",
      all(abs(abs(u) - 0.01) < 1e-6 for row in adam.update for u in row))

# %% [markdown]
# Compare with SGD's update of the same gradient: −lr·g = [[0.011, 0.022], [−0.018, −0.036]], four
# different sizes. Adam moves all four weights by 0.01.
#
# The constant factor, run. Summing K micro-batch losses instead of averaging them (chapter 0) multiplies every
# gradient by K; so does any constant on the loss. A small regression MLP, 20 full-batch steps at lr = 0.01 on
# c × its loss against the same steps on the loss itself, 3 seeds; the gap is the largest weight difference
# relative to the largest weight:

# %% tags=["answers-adam-loss-factor"]
from course_utils.chapters.ch03_adam_scale import loss_factor_gaps
from course_utils.chapters.over_seeds import tally


def factor_verdict(values):
    if all(v < 1e-4 for v in values):
        return f"same weights (within 0.01%) on {tally(True for _ in values)} seeds"
    if all(not v < 1e-3 for v in values):                      # a diverged run's NaN counts as apart
        return f"other weights (over 0.1% apart) on {tally(True for _ in values)} seeds"
    return f"within 0.01% on {tally(v < 1e-4 for v in values)}, over 0.1% apart on {tally(not v < 1e-3 for v in values)}"


for optimizer, by_factor in loss_factor_gaps(factors=(4, 1e-6), seeds=range(3)).items():
    print(f"{optimizer:<29}" + " | ".join(f"c = {c:g}: {factor_verdict(v)}" for c, v in by_factor.items()))

# %% [markdown]
# Adam and AdamW end on the same weights with the loss times 4, where SGD's steps are 4 times larger. The
# cancellation has three limits, each in a row above: a factor so small that the gradients come near ε
# (c = 1e-6); gradient clipping, which caps the norm only on the steps above its threshold, so with c = 4
# other steps get capped; and Adam's `weight_decay`, which adds λ·w to the gradient before the moments, so
# the factor shifts the balance between loss and decay (AdamW decays the weights apart from the gradient and
# keeps the cancellation). So with Adam, summed micro-batch losses matter only through clipping, weight
# decay and ε; average them anyway (divide each by K), and the clipping threshold means what it says.
#
# Is Adam's `weight_decay` the same as an L2 penalty added to the loss? Adam adds λ·w to each gradient, and
# λ·w is the gradient of (λ/2)·Σw². The same runs with Adam(weight_decay=0.1) against plain Adam on the loss
# plus a penalty:

# %% tags=["answers-adam-decay-in-loss"]
from course_utils.chapters.ch03_adam_scale import decay_in_the_loss_gaps

for case, gaps in decay_in_the_loss_gaps(decay=0.1, seeds=range(3)).items():
    print(f"Adam(weight_decay=0.1) against Adam with {case}: {factor_verdict(gaps)}")

# %% [markdown]
# The penalty λ/2·Σw² in the loss and Adam's `weight_decay=λ` are one thing. Without the 1/2 the decay is twice
# as strong; a penalty on some weights only (an embedding's norm, the rows of this batch) is another
# regulariser; and AdamW's decoupled decay is a third. A swap that "made results worse" is one of these three.
#
# In torch, "decoupled" means apart from the gradient, not apart from the learning rate: torch's AdamW multiplies
# each weight by 1 − lr·λ at every step. (Loshchilov and Hutter's paper scales the decay by the schedule's
# multiplier alone, not by the base rate; torch ties it to `lr`, so changing `lr` changes the decay too.) A weight whose gradient is always 0, so that only the decay moves it, with λ = 0.1:

# %% tags=["answers-adamw-decay-lr"]
from course_utils.chapters.ch03_adam_scale import adamw_decay_per_step

for label, factors in (("lr 1e-3", adamw_decay_per_step(1e-3)), ("lr 1e-2", adamw_decay_per_step(1e-2)),
                       ("lr 1e-2, 4-step cosine", adamw_decay_per_step(1e-2, schedule=True))):
    print(f"AdamW(weight_decay=0.1), {label + ':':23} shrink per step (1 - w_new / w_old) "
          f"{[sig(1 - f, 3) for f in factors]}")

# %% [markdown]
# The shrink is lr·λ: ten times the rate, ten times the decay, and under a schedule it falls with the rate.
# Change the learning rate or the schedule and you have changed the regularisation too; to keep it, keep
# lr·λ fixed (halve λ when you double lr). torch's three AdamW implementations, the for-loop (the default on the
# CPU, run above), `foreach` (the default on CUDA) and `fused=True`, decay alike (the course's tests check all three).

# %% [markdown]
#
# Adam's step of about lr per weight has a consequence for targets in the hundreds or thousands (prices, counts): a
# network starts near output 0, and Adam moves each weight by about lr per step, so it spends its steps
# walking the shared bias and the output layer towards the targets' mean, and predicts nearly the same value
# for every input. The same regression (targets around 3,000, spread about 2,000), 30 Adam steps at
# lr = 0.05, on raw targets and on standardised ones (predictions mapped back with the training mean and
# standard deviation), 3 seeds:

# %% tags=["answers-regression-target-scale"]
def fit_regression(standardise, seed, steps=30):
    torch.manual_seed(seed)
    features = torch.randn(64, 4)
    targets = 1000 * (3 + features @ torch.randn(4, 1))
    mean, std = targets.mean(), targets.std()
    net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
    opt = torch.optim.Adam(net.parameters(), lr=0.05)
    goal = (targets - mean) / std if standardise else targets
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.mse_loss(net(features), goal).backward()
        opt.step()
    with torch.no_grad():
        predictions = net(features) * std + mean if standardise else net(features)
    spread = (predictions.std() / targets.std()).item()
    r2 = 1 - (((predictions - targets) ** 2).mean() / targets.var()).item()
    return spread, r2


for standardise in (False, True):
    runs = [fit_regression(standardise, seed) for seed in range(3)]
    print(f"{'standardised' if standardise else 'raw':<12} targets: predictions' spread below 5% of the targets' "
          f"on {sum(s < 0.05 for s, _ in runs)} of 3 seeds; R² above 0.9 on {sum(r > 0.9 for _, r in runs)} of 3, "
          f"below 0 on {sum(r < 0 for _, r in runs)} of 3")

# %% [markdown]
# On raw targets the predictions are nearly constant and worse than predicting the mean (R² below 0 on every
# seed);
# standardised, the same network fits. Standardise regression targets with the *training* set's mean and
# standard deviation, and map predictions back; a loss in the millions is the sign to look for.
#
# ## SGD with momentum
#
# Chapters 5 to 8 also train with SGD *with momentum*. It keeps one buffer v per weight, a running sum of
# past gradients that decays by μ (`momentum`, typically 0.9) each step. torch's rule (with its default
# `dampening=0`):
#
# 1. v ← μ·v + g (at the first step, v = g);
# 2. w ← w − lr·v.
#
# So the first step is exactly plain SGD's; from the second on, the old gradients push too. Two steps on
# TinyLinear by hand, on the same example, μ = 0.9, lr = 0.01, checked against `torch.optim.SGD(momentum=0.9)`:

# %%
from course_utils.chapters.ch03_anatomy import momentum_steps_by_hand

mom = momentum_steps_by_hand(lr=0.01, mu=0.9)
for name in ("g1", "v1", "W1", "g2", "v2", "W2"):
    print(f"{name:3s}", show(getattr(mom, name)))
close = lambda a, b: max(abs(p - q) for ra, rb in zip(a, b) for p, q in zip(ra, rb)) < 1e-6
print("step 1 equals plain SGD's W_new:", mom.W1 == hand.W_new)
print("torch.optim.SGD(momentum=0.9) gives W1 and W2 (to 1e-6):", close(mom.W1, mom.torch_W1) and close(mom.W2, mom.torch_W2))

# %% [markdown]
# ## Where clipping goes
#
# Clipping protects a step from one bad batch: a batch that gives a huge gradient (an outlier, or an
# exploding gradient in a deep or recurrent network) would otherwise throw the weights far away.
# It rescales the gradients so that their **global norm**, the length of all gradients laid end to
# end as one long vector, √(Σ g²), is at most `max_norm`. Here:

# %%
grads = torch.tensor([v for row in hand.dL_dW for v in row] + list(hand.dL_db))
print("all gradients end to end:", [sig(v) for v in grads.tolist()])
print("global norm = sqrt(sum of squares) =", sig(torch.linalg.vector_norm(grads).item()),
      "| sum of squares:", sig((grads ** 2).sum().item()))

# %% [markdown]
# Clipping only makes sense between `backward()` (which writes the gradients) and `step()` (which uses
# them). We clip to 1.0 in three places.

# %% tags=["answers-clip-placement"]
def one_step(clip_at):
    m = TinyLinear()
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    opt.zero_grad()
    note = ""
    if clip_at == "before backward":
        note = f"norm seen by clip: {sig(nn.utils.clip_grad_norm_(m.parameters(), 1.0).item())} (grads are None)"
    nn.functional.mse_loss(m(x), t).backward()
    if clip_at == "between backward and step":
        note = f"norm seen by clip: {sig(nn.utils.clip_grad_norm_(m.parameters(), 1.0).item())}"
    opt.step()
    if clip_at == "after step":
        note = f"norm seen by clip: {sig(nn.utils.clip_grad_norm_(m.parameters(), 1.0).item())} (too late)"
    return fmt(m.weight), note


for place in ("no clipping", "before backward", "between backward and step", "after step"):
    weights, note = one_step(place)
    print(f"{place:26s} W_new = {weights}  {note}")

# %% [markdown]
# Before backward, clipping sees no gradients (norm 0): a no-op.
# After step, the weights have already moved: same W_new as no clipping at all.
# Only between backward and step does it change the update.

# %% [markdown]
# ## The scheduler: after the step, at its own cadence
#
# `scheduler.step()` moves the learning rate one unit along its schedule.
# Call it after `optimizer.step()`; the other way round, torch warns:

# %% tags=["answers-scheduler-order-warning"]
print(scheduler_before_optimizer_warning())

# %% [markdown]
# The warning says the first value of the schedule is skipped. Here is what that means for a StepLR that
# halves the lr after every update, over 4 updates:

# %%
def steplr_sequence(scheduler_first):
    opt = torch.optim.SGD(TinyLinear().parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    used = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(4):
            if scheduler_first:
                sched.step()
            used.append(sig(opt.param_groups[0]["lr"]))
            opt.step()
            if not scheduler_first:
                sched.step()
    return used


import warnings
print("lr used by each update, optimizer first (right):", steplr_sequence(False))
print("lr used by each update, scheduler first (wrong):", steplr_sequence(True))

# %% [markdown]
# The unit matters too. A `CosineAnnealingLR` with `T_max` counted in epochs must step once per epoch;
# a `OneCycleLR` counts `total_steps` in optimizer updates and must step once per update (with gradient
# accumulation over K micro-batches, that is once every K micro-batches, not every batch).
# Below, 3 epochs of 4 batches with a 3-epoch cosine schedule, stepped both ways.

# %% tags=["answers-scheduler-cadence"]
def lrs(per_batch):
    opt = torch.optim.SGD(TinyLinear().parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=3)
    seen = []
    for epoch in range(3):
        for batch in range(4):
            seen.append(sig(opt.param_groups[0]["lr"]))
            opt.step()
            if per_batch:
                sched.step()
        if not per_batch:
            sched.step()
    return seen, sched.last_epoch


for label, per_batch in (("per epoch (right):", False), ("per batch (wrong):", True)):
    seen, count = lrs(per_batch)
    print(label, seen, "| last_epoch after 3 epochs of 4 batches:", count)

# %% [markdown]
# Stepped per batch, the cosine runs its whole 3-"epoch" course in 3 batches, then climbs back up. A scheduler
# counts its own `step()` calls in `last_epoch`, whatever you call them: stepped per batch, its "epochs" are
# batches (12 after 3 epochs of 4). A warmup written as `last_epoch / warmup_iters` and stepped per iteration is a
# warmup in iterations, which is what such code intends.
#
# And a OneCycleLR sized for 8 updates, with accumulation over K = 4 micro-batches, stepped per update
# (right) and per micro-batch (wrong): the wrong one runs through its whole cycle 4 times too fast.
# torch lets a scheduler be stepped `total_steps` times and so computes one rate past the cycle's end (the
# ninth below, climbing back up: a rate no update should use); the step after that raises.

# %%
from course_utils.engine.schedules import onecycle_cadence_demo

right, wrong, error = onecycle_cadence_demo(updates=8, accum_steps=4)
print("per update (right), lr at each update:  ", [sig(v, 3) for v in right])
print("per micro-batch (wrong), lr per micro-batch:", [sig(v, 3) for v in wrong])
print("then:", error)

# %% [markdown]
# One scheduler is stepped differently. `ReduceLROnPlateau` cuts the rate when a monitored value stops
# improving, so `step()` takes that value, after each validation; `mode` says whether better is lower
# (`"min"`, a loss) or higher (`"max"`, an accuracy). Here `factor=0.5`, `patience=1`: two epochs without
# improvement halve the rate.

# %% tags=["answers-plateau-step"]
try:
    torch.optim.lr_scheduler.ReduceLROnPlateau(torch.optim.SGD(TinyLinear().parameters(), lr=0.1)).step()
except TypeError as error:
    print("plateau.step(): TypeError:", error)

accuracy = [0.50, 0.60, 0.65, 0.64, 0.65, 0.66, 0.66, 0.65]


def plateau_lrs(metric, **options):
    opt = torch.optim.SGD(TinyLinear().parameters(), lr=0.1)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=1, **options)
    seen = []
    for value in accuracy:
        opt.step()
        plateau.step(metric(value))
        seen.append(sig(opt.param_groups[0]["lr"], 3))
    return seen


print("validation accuracy, epochs 1-8:                   ", accuracy)
print("mode='max', step(accuracy):                  lr    ", plateau_lrs(lambda a: a, mode="max"))
print("mode='min', step(accuracy) (the wrong mode): lr    ", plateau_lrs(lambda a: a, mode="min"))
print("mode='min', step(-accuracy):                 lr    ", plateau_lrs(lambda a: -a, mode="min"))
print("mode='min', threshold_mode='abs', step(-acc): lr   ",
      plateau_lrs(lambda a: -a, mode="min", threshold_mode="abs"))

# %% [markdown]
# In the wrong mode every rise in accuracy counts as getting worse, and the rate is cut while the model
# improves. Passing `-accuracy` in `"min"` mode is a common trick, but not quite `"max"` mode: the default
# `threshold_mode="rel"` asks for a value below `best · (1 − 1e-4)`, and for a negative best that bound lies
# above it, so a tie (0.65 again at epoch 5) counts as progress and the rate is never cut here. With
# `threshold_mode="abs"` the two agree. Say what you mean: `mode="max"` with the accuracy itself.
#
# Warmup has its own trap at the first update. A `LambdaLR` multiplies the base rate by `lambda(step)`, and
# the first update uses `lambda(0)`: with `step / warmup` that is 0, an update that changes nothing.

# %% tags=["answers-warmup-first-lr"]
for name, ramp in (("step / 4", lambda s: s / 4), ("(step + 1) / 4", lambda s: (s + 1) / 4)):
    opt = torch.optim.SGD(TinyLinear().parameters(), lr=0.1)
    warmup = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, ramp(s)))
    used = []
    for _ in range(6):
        used.append(sig(opt.param_groups[0]["lr"], 3))
        opt.step()
        warmup.step()
    print(f"warmup lambda {name:<15} lr of updates 1-6: {used}")

# %% [markdown]
# One wasted update in thousands costs nothing measurable, so libraries that start at 0 are not wrong; the
# `(step + 1)` form reaches the full rate one update earlier and wastes none.

# %% [markdown]
# ## Step through it yourself
#
# Each button runs one operation on `TinyLinear`. Values from the forward pass are blue,
# gradients orange, weights green; the tensors the last operation wrote are bold.
# Try the right order, then try wrong ones: backward twice, step before backward, clip before backward.
# Clipping here uses `max_norm=10`: one gradient (norm 5.167) passes untouched, two accumulated ones (10.33) get scaled.

# %%
from course_utils.widgets.step_view import step_through

view = step_through()
for op in ("zero_grad", "forward", "loss", "backward", "step"):
    view.press(op)
view

# %% [markdown]
# ## The minimal loop, and its anti-step
#
# Put together, a training loop repeats the step for every batch of a DataLoader (chapter 1), epoch
# after epoch. Validation is the anti-step: forward and loss only, in eval mode, no graph, no backward,
# no step (chapter 4 explains the switches). The training loss it prints is the mean over the epoch's
# examples: each batch's mean loss times its size, summed, divided by the examples seen (the last batch
# holds 24, not 32; chapter 4 shows why a plain mean of batch means is off). Here on the spiral, with Adam:

# %%
from torch.utils.data import DataLoader
from course_utils.engine.data import spiral_splits

splits = spiral_splits(600, 300, seed=0)
train_loader = DataLoader(splits.train, batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(0))
val_loader = DataLoader(splits.val, batch_size=100)
torch.manual_seed(0)
model = MLP()
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

for epoch in range(1, 6):
    model.train()
    seen_loss, seen = 0.0, 0
    for inputs, targets in train_loader:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        optimizer.step()
        seen_loss += loss.item() * len(targets)          # each batch weighted by its size (the last holds 24)
        seen += len(targets)
    model.eval()
    with torch.no_grad():
        hits = sum((model(xb).argmax(dim=1) == yb).sum().item() for xb, yb in val_loader)
    print(f"epoch {epoch}: training loss {sig(seen_loss / seen)} (mean over the epoch's {seen} examples), "
          f"validation accuracy {sig(hits / len(splits.val))}")

# %% [markdown]
# ## Three errors of first loops
#
# Each step above touches the graph, the weights or the optimizer. Three mistakes with them show up
# in almost every first loop: two raise an error far from the line that caused it, one raises nothing.
# The cells print the exception's type and what torch reports, over seeds 0 to 4.
#
# ### A hidden state carried across batches
#
# A recurrent model reading a long stream keeps its hidden state `h` from one batch to the next.

# %%
from course_utils.widgets.predict_view import predict
predict(3, "hidden-state")

# %% tags=["answers-error-backward-twice"]
from course_utils.widgets.predict_view import answer

with answer(3, "hidden-state"):
    from course_utils.chapters.ch03_loop_errors import BATCHES, graph_reach, hidden_state_run

    for fix, code in [("none", "h carried over as it is"), ("retain_graph", "backward(retain_graph=True)"),
                      ("detach", "h = h.detach() at each batch start")]:
        outcomes = {hidden_state_run(fix, seed).describe() for seed in range(5)}
        print(f"{code:<36} seeds 0-4: {' | '.join(sorted(outcomes))}")
    print("RNN steps each batch's loss reaches back through, without detach:", graph_reach(detach=False),
          "| with detach:", graph_reach(detach=True))

# %% [markdown]
# The second batch's graph starts from `h`, and `h` was made by the first batch's graph, so backward
# walks on into batch 1, whose saved tensors the first backward freed. `retain_graph=True`, the fix the
# message seems to suggest, only moves the error: the graph of batch 1 now survives, but it saved the
# weights as they were, and `optimizer.step()` has changed them in place since. Even
# without a step, every backward would reach one batch further back (the graph grows: 3, 6, 9, 12 steps).
# `h.detach()` keeps the values and cuts the link: each batch's backward stops at its own first step
# (truncated backpropagation through time). An LSTM carries two tensors: detach both,
# `h, c = h.detach(), c.detach()`, or the error comes back through `c`. The same error comes from any
# tensor that outlives its
# batch and feeds the next one: a running average computed from outputs, a cached embedding.
#
# Code written for older torch can carry the state without either error, and then each epoch takes longer than the
# last. Two habits together do it: `retain_graph=True` keeps every old batch's graph, and an update through
# `p.data` (torch 0.4 tutorials stepped that way) changes the weights without bumping the version counter that
# would have refused those graphs. An LSTM reads 20 batches per epoch for 5 epochs, an L2 loss on its outputs; a
# hook on each batch's final hidden state counts how often a later backward reaches back into it
# (`course_utils/chapters/ch03_slower_epochs.py`):

# %% tags=["answers-slower-epochs"]
from course_utils.chapters.ch03_slower_epochs import run, seconds_lines, slower_lines

carried, cut = run(detach=False), run(detach=True)
print("\n".join(slower_lines(carried, cut)))

# %% [markdown]
# Batch k of the run reaches back into all k − 1 batches before it, so epoch e does 400 more of this work than epoch
# e − 1 (20 × 20 more reaches, the counts above), for the same loss as the detached run; the last line shows the
# `.data` is what kept torch quiet. Those counts are the evidence; the time per epoch follows them on a quiet
# machine. Seconds per epoch on this one (your numbers will differ; nbval does not compare them):

# %% tags=["nbval-ignore-output"]
print("\n".join(seconds_lines(carried, cut)))

# %% [markdown]
# The retained graphs also keep every batch's saved activations alive, and since `.data` changed the weights under
# them, the old graphs' part of each gradient mixes current weights with stale activations: slow and silently
# wrong (neither measured here). Any loop whose epochs
# slow down steadily is worth this check: a tensor that lives from one batch to the next (`h`, `c`, a running
# statistic) with its `grad_fn` still set, `retain_graph=True` anywhere, or `.data` in the update.
#
# Reinforcement learning carries the state further: a recurrent policy acts step by step, with no graph, across
# episodes and across the rollouts it is trained on. Two questions come up: should the state be zeroed when a new
# rollout starts, and does an update from stored states backpropagate through one step only? One LSTM cell, 12 steps
# of one environment whose episodes end after steps 3 and 9 (the state is multiplied by 0 there, as cleanrl's
# `ppo_atari_lstm.py` does with `1 - done`), rollouts of 6 steps, seeds 0 to 4:

# %% tags=["answers-recurrent-rollouts"]
from course_utils.chapters.ch03_recurrent_rollouts import rollout_lines

lines = rollout_lines(0)
print("\n".join(lines))
print("the same lines on seeds 1 to 4:", all(rollout_lines(seed) == lines for seed in range(1, 5)))

# %% [markdown]
# A rollout boundary is not an episode boundary. Carrying the state over reproduces the uninterrupted episode;
# zeroing it at the rollout's start makes the policy act, for the rest of that episode, from a state that has
# forgotten the episode's earlier steps (steps 6 to 9 differ). The reset belongs at the episode's end, where the
# `done` mask puts it. For the update, both libraries replay sequences from a stored state: sb3-contrib's
# `RecurrentPPO` stores every step's state and passes `evaluate_actions` the one stored at each sequence's first
# step (its sequences are cut at episode starts and at minibatch boundaries); cleanrl keeps only the state at the
# rollout's start and replays each environment's whole rollout from it, resets included. Either way the outputs are
# the ones the rollout produced, and the gradient goes back through the sequence, truncated at its start (where the
# stored state is a constant) and at every reset inside it. Evaluating each step from its own stored state also
# reproduces the outputs, but each gradient stops after one step.
#
# ### In-place operations in a forward pass

# %%
predict(3, "inplace")

# %% tags=["answers-error-inplace-saved"]
from course_utils.widgets.predict_view import answer

with answer(3, "inplace"):
    from course_utils.chapters.ch03_loop_errors import inplace_run

    for case in ("exp then +=", "exp then +", "linear then +=", "sigmoid then ReLU(inplace=True)",
                 "linear then ReLU(inplace=True)"):
        runs = [inplace_run(case, seed) for seed in range(5)]
        r = runs[0]
        ended = (f"{r.error} at backward (a saved tensor was modified in place: {r.says_inplace}; "
                 f"the message calls it '{r.names}')" if r.error else "backward works")
        same = all(x == r for x in runs)
        print(f"{case:<32} forward ran: {r.forward_ran}; version {r.version_saved} -> {r.version_at_backward}; "
              f"{ended}; same on seeds 0-4: {same}")

# %% [markdown]
# Every tensor carries a version counter that each in-place operation (`+=`, `.add_`, `x[i] = ...`,
# `ReLU(inplace=True)`) increments. When an operation saves a tensor for its backward, autograd notes
# the version; at backward it compares, and raises if the tensor changed. So the error needs both: an
# in-place change, *and* a tensor some operation saved. `exp` and `sigmoid` save their output (their
# derivatives are computed from it), so changing that output in place breaks backward; a Linear
# layer's output is saved by nobody, so `+=` or an in-place ReLU on it is fine, as long as it comes before any
# operation that saves it. The error is raised at `backward()`, not at the line that did it. Fixes: write it out
# of place (`h = h + 1`, `ReLU(inplace=False)`), or clone before changing. The message says which tensor changed
# by where it came from ("output 0 of Exp": the output exp saved), not which line changed it;
# `torch.autograd.set_detect_anomaly(True)` adds the forward line of the operation whose backward failed, not the
# in-place line that changed it, at a cost in speed: for debugging only. The same error comes from
# `optimizer.step()` run between a forward and a backward that uses its graph, when that graph saved a weight the
# step changed (a layer saves its weight when its input needs a gradient, so a first layer on raw data does not):
# PPO's reused advantages with `retain_graph=True` below, or a GAN that steps one network before the other's
# backward. Two networks, as a GAN
# or an adversarial VAE trains them: a generator G and a discriminator D, with D's loss computed on G's output:

# %% tags=["answers-gan-detach"]
from course_utils.chapters.ch03_loop_errors import two_network_rules

for what, result in two_network_rules().items():
    print(f"{what}: {result}")

# %% [markdown]
# Without `detach()`, D's loss sends gradients into G: wasted work, and wrong updates if they are not zeroed
# before G's own step (they push G the way D wants). Detaching the fake for D's loss stops them there. The error
# comes from reusing D's output for G's loss after D's step: the step changed D's weights in place, and the graph
# of that output had saved them. Run D again on G's output after D's step: that is what the usual GAN loop does.
# (Taking G's backward before D's step also runs, but it adds G's gradients to D's `.grad`, which D's step would
# then apply unless they are zeroed first.)
#
# Code with that order ran without an error before torch 1.5: optimizers wrote new weights through `.data`,
# which autograd's version counters do not see (torch 1.5 "changed optimizers to fix in-place checks for the
# changes made by the optimizer"). The last two rows run D's step that way. G's backward goes through, and its
# gradient is neither G's gradient through D before the step nor after it: it mixes the activations saved before
# the step with the weights after it. The error in newer torch is a silent wrong gradient caught.
#
# `.data` is still there, and so is `.detach()`; both return a tensor that shares the leaf's storage. What differs
# is the version counter, and whether the leaf itself may be changed. A parameter-like leaf `c`, squared (the
# multiplication saves it), then changed in place one way or another before the backward
# (`course_utils/chapters/ch03_leaf_inplace.py`):

# %% tags=["answers-leaf-inplace"]
from course_utils.chapters.ch03_leaf_inplace import leaf_inplace_lines

print("\n".join(leaf_inplace_lines()))

# %% [markdown]
# The leaf and its views refuse in-place changes while gradients are recorded. `detach()` shares the storage
# *and* the version counter: the change goes through, and the backward that saved `c` refuses to use the changed
# values. `.data` shares the storage only: the backward runs and returns 2c from values the forward never saw, a
# wrong gradient without a word. To change a parameter by hand, do it under `torch.no_grad()` (last line), the
# way optimizers do, and never between a forward and the backward that uses it.
#
# Some loops call backward once per loss term (a critic's real and fake terms, a reconstruction loss after an
# adversarial one) where others sum the terms and call it once. Gradients add up in `.grad`, so both give the same
# gradient; what differs is the graph. Terms from separate forwards own separate graphs, each freed by its own
# backward. Terms of one forward share a graph, which the first backward frees: the second call needs
# `retain_graph=True` on the first, or one backward of the sum.

# %% tags=["answers-separate-backward"]
from course_utils.chapters.ch03_loop_errors import separate_backward_rules

runs = [separate_backward_rules(seed) for seed in range(5)]
for what in runs[0]:
    print(f"{what}: {' | '.join(sorted({str(r[what]) for r in runs}))} (seeds 0-4)")

# %% [markdown]
# Summing is the simpler habit: one call, one walk through the graph. Separate calls let each term's graph go
# before the next forward is built, a lower peak for two large forwards (not measured here).
#
# A WGAN-GP critic adds a gradient penalty: the norm of the critic's gradient with respect to its input should be
# 1 for every sample. On images the gradient has the input's shape (B, 1, H, W), and the norm's dimension decides
# what is penalised:

# %% tags=["answers-gradient-penalty-norm"]
from course_utils.chapters.ch03_autograd_extras import gradient_penalty_lines

print("\n".join(gradient_penalty_lines()))

# %% [markdown]
# With one channel, `norm(2, dim=1)` is the absolute value of each pixel's gradient, so the penalty pushes every
# pixel's gradient towards 1: a different constraint from the per-sample norm the method asks for, and a different
# number. Flatten each sample first: `gradients.flatten(1).norm(2, dim=1)`.
#
# The hidden-state error has a twin in reinforcement learning. PPO and its variants compute the advantages
# (returns minus the critic's values) once per batch, then run several mini-epochs of updates on that batch. If
# the advantages still carry the critic's graph, the second mini-epoch's actor loss backpropagates into a graph
# the first backward freed. An actor-critic over 40 mini-epochs, seeds 0 to 4:

# %% tags=["answers-reused-advantage"]
from course_utils.chapters.ch03_loop_errors import reused_advantage_rules

for what, result in reused_advantage_rules().items():
    print(f"{what}: {result}")

# %% [markdown]
# With this one-layer critic `retain_graph=True` silences the error and does harm: every mini-epoch, the actor's
# loss sends the critic a gradient computed from the critic's values *before* the first step, which has nothing to
# do with the critic's own loss, and the critic ends up further from the returns. A critic with a hidden layer
# does not get that far (the last line): its second layer saved its weight, the first step changed it in place,
# and the second mini-epoch raises the in-place error instead. Detaching the advantages does not stop the critic
# from learning: it learns from its own loss, computed from a fresh forward inside the loop. The advantages are a
# weight for the actor's log-probabilities, a constant as far as the actor's update is concerned.
#
# ### An optimizer built before the model changed

# %%
predict(3, "wrong-params")

# %% tags=["answers-error-optimizer-wrong-params"]
from course_utils.widgets.predict_view import answer

with answer(3, "wrong-params"):
    from course_utils.chapters.ch03_loop_errors import wrong_params_run

    for case in ("right", "model rebuilt", "generator used twice"):
        runs = [wrong_params_run(case, seed) for seed in range(5)]
        r = runs[0]
        if r.error:
            print(f"{case:<22} building the optimizer raised {r.error} on seeds 0-4: {all(x.error == r.error for x in runs)}")
            continue
        unchanged = sum(x.loss_after == x.loss_before for x in runs)
        fell = sum(x.loss_after < x.loss_before for x in runs)
        print(f"{case:<22} parameters of the model the optimizer holds: {r.held} of {r.total}; after 30 steps the loss "
              f"is exactly unchanged on {unchanged} of 5 seeds, lower on {fell} of 5")

# %% [markdown]
# These runs train on one fixed batch, so the loss is bit for bit the same step after step. In your own loop,
# over shuffled mini-batches, it is not: the logged loss jitters around a level that never falls, because each
# batch is another sample scored by the same, never-updated weights.
#
# An optimizer holds the Parameter objects it was given when it was built, not the name `model`. Build a
# new model after it (re-running a notebook cell is the usual way), and the optimizer steps the old one
# while the loop trains the new one: nothing moves, nothing complains. `model.parameters()` is a
# generator: if something used it up first (a count of the weights, a first optimizer), the second
# consumer gets nothing, and torch refuses an empty parameter list. A layer replaced or added after the
# optimizer was built is the same bug on part of the model: that layer never trains (chapter 5, exhibit 5).
# The check costs one line, right after building the optimizer: every parameter of the model must be in it.

# %%
from course_utils.chapters.ch03_loop_errors import held_by

model = MLP(hidden=16)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
print("optimizer holds every parameter of the model:", held_by(model, optimizer) == len(list(model.parameters())))

# %% [markdown]
# The opposite mistake: the right parameters, but an optimizer built *again*. Some recipes build a new SGD every
# epoch to set a lower learning rate, and some resume code loads the saved state into one optimizer and then
# builds a new one (a trainer's setup, say) that replaces it. The parameters are the same; the state is not. SGD with momentum 0.9, the rate halved each epoch, both ways, and
# an Adam built again after `load_state_dict`:

# %% tags=["answers-optimizer-rebuilt"]
from course_utils.chapters.ch03_optimizer_rebuilt import rebuilt_lines

print("\n".join(rebuilt_lines()))

# %% [markdown]
# Writing the halved rate kept the first step of each epoch at 0.3 or more of the step before it, about half;
# rebuilding the optimizer cut it below a fifth, because the momentum that made up most of each step was thrown
# away. Change a rate by writing `group["lr"]` (or with a scheduler),
# and build an optimizer once, before loading its state into it.
#
# Federated averaging by hand meets both rules at once. Two clients (Bob's and Alice's data, from two regions of
# one task), each with its own copy of the model and its own SGD with momentum; after every round their weights
# are averaged and sent back. Three ways to send them back, five seeds:

# %% tags=["answers-federated-optimizers"]
from course_utils.chapters.ch03_optimizer_rebuilt import federated_lines

print("\n".join(federated_lines(seeds=range(10))))

# %% [markdown]
# `client.load_state_dict(averaged)` copies the numbers into the client's own Parameter objects, so its
# optimizer still holds them and training goes on. Replacing the client by a copy of the averaged model leaves
# each optimizer stepping a model nobody uses: after round 1 the average never moves again, and nothing
# complains. The momentum a kept optimizer carries into the next round is its client's own direction before the
# averaging; here starting each round with a fresh optimizer, as many federated codebases do, ended over 10%
# lower on 8 of 10 seeds and over 10% higher on 1: a tendency on this problem, not a rule. A fresh optimizer per
# round cannot carry a scheduler's position: compute each
# round's learning rate from the round number and pass it to the new optimizer.
#
# Those two clients held data of one task. Federated benchmarks often deal each client only a few classes (two
# "shards" of one class each: the "pathological non-IID" split), and draw a fraction of the clients per round.
# Ten overlapping classes, 10 clients, 2 drawn per round, each client a fresh SGD(lr=0.1, momentum=0.9) each
# round, the data dealt in shards against the same data dealt at random
# (`course_utils/chapters/ch03_client_drift.py`):

# %% tags=["answers-client-drift"]
from course_utils.chapters.ch03_client_drift import drift_lines

print("\n".join(drift_lines(seeds=range(5), step_counts=(5, 50))))

# %% [markdown]
# A client that holds two classes trains a model for those two: every local step pushes the other classes'
# logits down (softmax's gradient on an absent class is its probability, always positive), and more local steps
# push further. After the last round, the average of two such clients scored over 0.3 better on the classes they
# held than on the rest, and at 50 local steps it had all but lost the rest (the "after the last round" lines). So
# the accuracy swings with which clients the round drew and ends below the random deal, which trains steadily
# on the same data. A curve that jumps or collapses from round to round on a label-skewed split can be this drift
# alone; it needs no bug. Fewer local steps drifted less (last line); what else reduces it (named, not run here):
# more clients per round, a smaller learning rate, and methods built for it, such as FedProx's pull towards the
# global weights or SCAFFOLD's control variates.

# %% [markdown]
# ## What a module carries, and what a checkpoint keeps
#
# A buffer registered with `persistent=False` is not in `state_dict()`, so a checkpoint does not restore it:
# the loaded model keeps its own. `load_state_dict(strict=False)` does not fail on missing or unexpected keys,
# it returns the keys it skipped: read them. It still raises on a key whose tensor has another shape ("size
# mismatch for ..."), so it cannot load a checkpoint whose classifier head has a different number of classes:
# delete those keys from the checkpoint first. `assign=True` puts new Parameter objects in the model, so an optimizer built
# before it steps the old ones: no error, no training. Each line below is run on a tiny model.

# %% tags=["answers-freeze-later-layers"]
from course_utils.chapters.ch03_module_state import autograd_modes, checkpoint_rules, freezing_rules, naming_rules

for rules in (checkpoint_rules, freezing_rules, naming_rules):
    for what, result in rules().items():
        print(f"{what}: {result}")

# %% [markdown]
# A frozen layer (`requires_grad_(False)`) gets no `.grad`, and the optimizer skips a parameter whose grad is
# `None`, weight decay included; a grad of zeros is not skipped, so weight decay still shrinks that weight.
# Mind the underscore: `module.requires_grad = False` freezes nothing. A Module has no such switch, so Python
# just stores a new attribute and every parameter keeps `requires_grad=True` (the row above: its weight still
# gets a `.grad`). The method `requires_grad_(False)`, on the module or on each parameter, is the switch.
# Freezing a layer does not stop the backward pass through it: with the last layer frozen, the first still gets
# its gradient (the layer's weights are constants, its input still carries a graph). Running the later layer
# under `no_grad` is another thing: its output has no graph, and nothing before it can learn.
# Tied weights are one Parameter: `parameters()` counts it once, which is what an optimizer must receive.
#
# "Frozen" has more ways to leak. A part run under `no_grad` gets no gradient, but an optimizer that holds
# it still steps it whenever its grad is a tensor of zeros (left by `zero_grad(set_to_none=False)`, or
# assigned): momentum and Adam's moments keep moving it. And BatchNorm in train mode updates its running
# statistics in the forward pass, `no_grad` or not. Three steps with gradients, then ten without:

# %% tags=["answers-frozen-drift"]
def moves_when_frozen(make_optimizer, frozen_grad):
    torch.manual_seed(0)
    w = nn.Parameter(torch.randn(3))
    opt = make_optimizer([w])
    for _ in range(3):
        w.grad = torch.randn(3)
        opt.step()
    start = w.detach().clone()
    for _ in range(10):
        w.grad = None if frozen_grad == "None" else torch.zeros(3)
        opt.step()
    return not torch.equal(start, w.detach())


makers = {"SGD(momentum=0.9)": lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9),
          "Adam": lambda p: torch.optim.Adam(p, lr=0.01),
          "AdamW(weight_decay=0.01)": lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.01)}
print("3 trained steps, then 10 steps without a gradient: has the weight moved?")
for name, make in makers.items():
    print(f"  {name:<25} grad None: {moves_when_frozen(make, 'None')!s:<5}  "
          f"grad of zeros: {moves_when_frozen(make, 'zeros')}")
bn = nn.BatchNorm1d(3)
with torch.no_grad():
    bn(torch.randn(8, 3) + 5)
print("BatchNorm in train mode, a forward under no_grad: running_mean moved:", bool(bn.running_mean.abs().sum() > 0))

# %% [markdown]
# To freeze a part: `requires_grad_(False)` on its parameters, leave them out of the optimizer (then no grad,
# no state, no decay can touch them), and put its BatchNorm layers in eval mode (chapter 4 shows how, and
# why `model.train()` undoes it).
#
# A teacher in knowledge distillation is a whole frozen network inside someone else's training loop. Its mode and
# its graph, with a dropout and a BatchNorm layer, and a student trained on its soft targets for 10 steps:

# %% tags=["answers-teacher-mode"]
from course_utils.chapters.ch03_module_state import teacher_lines

print("\n".join(teacher_lines()))

# %% [markdown]
# Left in train mode, the teacher gives noisy targets (its dropout samples a new mask at every call) and its
# BatchNorm statistics drift with the student's batches; `teacher.eval()` fixes both. `eval()` does not stop its
# graph: compute the soft targets under `torch.no_grad()` (or freeze the teacher with `requires_grad_(False)`), or
# every student backward also walks the teacher and fills its `.grad`, for nothing.

# %% [markdown]
# ## Autograd's modes
#
# `no_grad` and `inference_mode` both stop recording, but a tensor made under `inference_mode` cannot be
# *saved* for backward later: an operation whose backward needs it (a multiply, a matrix product) raises, while
# one that saves nothing (an addition, a concatenation) accepts it. Which operations save what is autograd's
# detail, so treat an inference tensor as unusable in training and `.clone()` it first. Anomaly mode with `check_nan=True` turns a silent NaN in
# `.grad` into an error that names the backward function that made it (here `SqrtBackward0`: the square root
# at 0); it slows every step, so switch it on to hunt, then off.

# %%
for what, result in autograd_modes().items():
    print(f"{what}: {result}")

# %% [markdown]
# A NaN in `.grad` can come from a value the forward never used. A mask (`torch.where`, a boolean index) hides a
# bad value from the loss, but backward still runs through the hidden branch: the mask sends it a gradient of 0,
# and 0 times that branch's infinite derivative (the square root at 0, a division by 0) is NaN. Loss finite,
# gradients NaN:

# %%
from course_utils.chapters.ch03_autograd_extras import masked_nan_lines

print("\n".join(masked_nan_lines()))

# %% [markdown]
# The fix masks the *input*, so that the hidden branch computes something finite (1 in place of the 0 it must not
# see), and keeps the mask on the output as before: same loss, gradient 0 where masked. Anomaly mode names the
# backward function that made the NaN, not the mask. The last row is a mask of another kind: a batch in which
# every target is `ignore_index` (all padding, say) averages 0 losses over 0 targets, so the logged loss is NaN
# while the gradient is all zero: one such batch makes the epoch's mean loss NaN, though no gradient was.
#
# The same infinite derivative hides in a fractional power. A focal loss multiplies each example's cross-entropy
# by (1 − p)^γ, p = exp(−CE). An example the model gets right with full confidence has a CE that rounds to 0, so
# 1 − p is exactly 0: the forward gives 0 for it, and the backward multiplies the derivative of x^γ at 0, infinite
# for γ < 1, by 0. Two examples, logits [30, 0] (certain and right) and [0.5, 0.2]:

# %% tags=["answers-fractional-power"]
from course_utils.chapters.ch03_autograd_extras import fractional_power_lines

print("\n".join(fractional_power_lines()))

# %% [markdown]
# With γ = 2 the derivative at 0 is 0. With γ < 1 the confident example's row of `logits.grad` is NaN, and through
# it every weight's gradient, since a weight's gradient sums over the batch.
# Two implementations that print the same loss can differ exactly here: one computes the base another way or
# clamps it. If rounding makes the base slightly negative (a CE that comes out a hair below 0), the fractional
# power is NaN already in the forward. Clamp the base away from 0 before the power.

# %% [markdown]
# Grad mode itself is a setting of the running thread, not of a model or a block of code. `no_grad` as a `with`
# block puts it back on exit; `torch.set_grad_enabled(False)` called on its own does not, and some inference
# helpers call it when they are imported or loaded. Training code that runs after such a helper (a frozen
# speech or vision model loaded in the same notebook, say) builds no graph:

# %% tags=["answers-grad-mode-global"]
from course_utils.chapters.ch03_autograd_extras import grad_mode_leak_lines

print("\n".join(grad_mode_leak_lines()))

# %% [markdown]
# The weights still require grad; what is off is recording. When a loss suddenly has no `grad_fn` in code that
# worked before, print `torch.is_grad_enabled()` just before the forward, and run the training step under
# `with torch.enable_grad():` if something you call turns it off.

# %% [markdown]
# Gradient checkpointing (`torch.utils.checkpoint`) trades compute for memory: it keeps no activations inside the
# checkpointed block and reruns its forward during backward. The old `use_reentrant=True` form has a trap: it
# computes gradients for the block's weights only if one of its *inputs* requires grad. A first layer fed the
# raw batch does not, and the memory "saved" is a block that stopped training:

# %% tags=["answers-checkpoint-reentrant"]
import warnings

from torch.utils.checkpoint import checkpoint

for input_needs_grad in (False, True):
    torch.manual_seed(0)
    block, head = nn.Linear(4, 4), nn.Linear(4, 1)
    batch_x = torch.randn(2, 4).requires_grad_(input_needs_grad)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        head(checkpoint(block, batch_x, use_reentrant=True)).sum().backward()
    print(f"use_reentrant=True, input requires_grad={input_needs_grad!s:<5}: block's weight.grad filled: "
          f"{block.weight.grad is not None!s:<5} | head's: {head.weight.grad is not None}",
          "| warning:", "; ".join(str(w.message) for w in caught) or "none")

# %% [markdown]
# The warning is the whole signal; the loss still falls, through the layers outside the block. The fix torch
# recommends is `use_reentrant=False`, which tracks the block's parameters whatever the inputs (its last line
# below); with the reentrant form, make the input require grad (`enable_input_require_grads()` in Hugging Face
# models does exactly that).
#
# The rerun is a second forward of everything in the block, layers with state included. A BatchNorm inside
# updates its running statistics in both forwards, with the same batch's statistics; dropout draws its masks
# again, from the random state checkpoint saved (`preserve_rng_state=True`, the default) or from wherever the
# generator has got to. A block of Linear, BatchNorm1d, Dropout, Linear, 5 steps on the same batches with and
# without checkpointing (the dropout comparison: one step at p = 0.5):

# %% tags=["answers-checkpoint-recompute"]
from course_utils.chapters.ch03_checkpointing import batchnorm_lines, dropout_lines

print("\n".join(batchnorm_lines() + dropout_lines()))

# %% [markdown]
# Each step's statistics enter the running average twice, which is one update at momentum 1 − (1 − m)²: 0.19
# where you asked for 0.1: still an average of real batch statistics, over a window about half as long. Set the
# momentum to 1 − √(1 − m) inside checkpointed blocks to get what you asked for (or keep BatchNorm outside them); a
# cumulative average (`momentum=None`) counts every batch twice and comes out the same. Dropout is safe as long as
# the random state is preserved: the recomputed activations are the ones the forward used. Turning
# `preserve_rng_state` off to save time gives gradients of a different mask than the loss was computed with.

# %% [markdown]
# ## What you can add to autograd: a Function, a gradient hook, a forward hook
#
# Three ways code you did not write (a quantiser, a pruning library, a privacy or explanation tool) changes
# what backward does. A custom `torch.autograd.Function` gives an operation your own backward: here `sign()`,
# whose true gradient is 0 almost everywhere, with a *straight-through* backward that passes the gradient on
# unchanged (how binarised and compressed models train). Its forward takes the tensor and a flag, so backward
# must return two values, one per input, in order: `None` for the flag. Then a gradient reversal layer (the
# identity forward, the gradient times −1 backward, as domain-adversarial training uses), once as a Function and
# once as a Module with a method named `backward`.

# %% tags=["answers-custom-function"]
from course_utils.chapters.ch03_autograd_extras import custom_function_lines, forward_hook_lines, hook_lines

print("\n".join(custom_function_lines()))

# %% [markdown]
# torch accepts more return values than inputs only if the extra ones are `None` (a tutorial's backward that returns
# seven values for six inputs runs for that reason), and counts any other mismatch as an error. A Module's
# `backward` method is an ordinary method nobody calls: autograd differentiates the operations forward ran, and
# `return x` ran none, so the gradient goes through unchanged. A custom backward needs a `torch.autograd.Function`,
# called through `.apply`. The reversal acts on the gradient flowing *back through* it: layers before it (a
# domain-adversarial network's feature extractor) get negated gradients, the layer after it (the domain
# classifier) its ordinary one. `x.view_as(x)` in its forward is a common habit; in torch 2.13 a forward
# that returns `x` itself is reversed just the same.
#
# What backward needs from forward travels on `ctx`. Five questions about it, each run: can
# `save_for_backward` take a number; what a second call does; what happens when the caller changes a saved output
# in place, with the tensors saved through `save_for_backward` or kept as plain attributes; and whether backward
# can tell which gradients `torch.autograd.grad` asked for:

# %% tags=["answers-function-ctx"]
from course_utils.chapters.ch03_function_ctx import function_ctx_lines

print("\n".join(function_ctx_lines()))

# %% [markdown]
# So: tensors (inputs, outputs and intermediates alike) go through `save_for_backward`, once; anything else
# (a flag, a shape, a number) is an attribute, `ctx.how = how`. A tensor kept as an attribute loses the version
# check: the caller's in-place change went unnoticed and the gradient came out ten times too large, where the
# saved one raised torch's error. `ctx.needs_input_grad` is fixed when forward runs, from the inputs'
# `requires_grad`; asking `autograd.grad` for one input does not change it, so a backward that checks it still
# computes both (torch drops the one nobody asked for); detach the other input to skip it.
#
# A gradient hook (`tensor.register_hook(fn)`) receives a tensor's gradient during backward and may return a
# changed one, before it is added to `.grad`. A pruning tool can use it to keep pruned weights at 0: their
# gradient is masked, so no step of plain SGD moves them. (An optimizer that already holds momentum or Adam
# moments for them still moves them on a zero gradient, which is why `torch.nn.utils.prune` masks the weight
# itself before every forward instead.) A frozen parameter never gets a gradient, so torch refuses a hook on it at
# once; hook only the parameters with `requires_grad` True.

# %% tags=["answers-tensor-hooks"]
print("\n".join(hook_lines()))

# %% [markdown]
# A *forward* hook (`module.register_forward_hook(fn)`) runs after every forward call, and `no_grad` does not
# stop it: `no_grad` only stops autograd from recording. A hook that keeps a layer's input whenever the module is
# in train mode (the way tools for per-example gradients collect activations) keeps them during an evaluation
# under `no_grad` too, unless the model is in eval mode. Two layers hooked:

# %% tags=["answers-forward-hook-no-grad"]
print("\n".join(forward_hook_lines()))

# %% [markdown]
# 10 tensors for 5 batches, one per hooked layer per batch, each alive as long as the hook's list: memory that
# grows through the evaluation although nothing records a graph. `model.eval()` is what such hooks read.
#
# Those tools want one gradient per example, which `backward()` never gives: a parameter's `.grad` is the sum
# over the batch. `torch.func` computes them: `grad(loss)` differentiates a function of one example, and `vmap`
# runs it over the batch as if in a loop, so inside it each tensor has lost its batch dimension.

# %% tags=["answers-per-sample-grads"]
from course_utils.chapters.ch03_func_transforms import per_sample_gradient_lines

print("\n".join(per_sample_gradient_lines()))

# %% [markdown]
# Code written for a batch, `h[:, 0]`, indexes the feature dimension as dimension 1 and fails inside `vmap`, where
# dimension 1 no longer exists; `h[..., 0]` counts from the end and works in both. An activation's gradient,
# as a hook sees it, already has a row per example, since example i's loss reaches only row i; a parameter's
# gradient mixes them all, so per-example parameter gradients need `vmap` (or a loop of batch size 1).
#
# BatchNorm under `vmap` is the usual wall. In train mode it normalises with the batch's statistics and updates its
# running ones in place, neither of which exists for one example; in eval mode it applies stored statistics, a
# function of each example alone, but `BatchNorm1d` still checks that its input has a batch dimension, which vmap
# removed. The same model three ways (torch's own messages):

# %% tags=["answers-vmap-batchnorm"]
from course_utils.chapters.ch03_func_transforms import maml_steps_lines, meta_gradient_lines, vmap_batchnorm_lines

print("\n".join(vmap_batchnorm_lines()))

# %% [markdown]
# So per-example gradients of a BatchNorm model are taken in eval mode, with the example given a batch dimension
# of 1 inside the function (`BatchNorm2d` checks for 4 dimensions the same way: the last line). In train mode an
# example's output depends on the whole batch, so "its" gradient is not defined; per-example methods replace
# BatchNorm by GroupNorm or LayerNorm, which normalise each example alone.
#
# Gradients of gradients are the other thing `torch.func` and `autograd.grad` are used for: MAML adapts the weights
# with an inner gradient step, then differentiates the validation loss of the adapted weights with respect to the
# original ones. Whether that meta-gradient includes the inner step's own derivative is one flag. One weight, a
# quadratic inner loss, against the derivatives by hand:

# %% tags=["answers-meta-gradient"]
print("\n".join(meta_gradient_lines()))

# %% [markdown]
# Without `create_graph=True` the inner gradient comes back as a constant, so the meta-gradient drops the factor
# (1 − 2α) that the inner step contributes: that is first-order MAML, whatever the outer code looks like. With it,
# autograd records the inner backward and the meta-gradient is the second-order one, at the cost of keeping that
# graph. Here the two point the same way and differ in size by that factor, 0.8.
#
# Libraries adapt in K inner steps (learn2learn's `MAML(model, lr, first_order=False)`, whose `adapt()` passes
# `create_graph=True` on every call). K = 1, 2, 3 on the same weight; what autograd saves for K steps of a small
# MLP; and the inner loop of a published MAML that calls `loss.backward(retain_graph=True)` before its
# `autograd.grad`:

# %% tags=["answers-maml-steps"]
print("\n".join(maml_steps_lines()))

# %% [markdown]
# With `create_graph` on every step the graph spans all K updates: the meta-gradient carries one factor
# 1 − α·L''(w) per step (here 1 − 2α; I − αH with H the inner loss's Hessian, in general), so it is a product of K
# second-order terms, not a K-th derivative, and what autograd saves grows by the same amount with every step. The extra
# `backward()` is not merely duplicated work: it adds the inner loss's gradient into the original weight's
# `.grad`, where the outer backward then adds the meta-gradient, and the meta-update uses their sum unless `.grad`
# is zeroed in between. `autograd.grad` returns the inner gradient without touching `.grad`: it is the one call
# MAML needs, first- or second-order.
#
# The meta-gradient reaches the model's weights only if the fast weights are computed from them. A library that
# starts the inner loop from a copy cuts that link: `higher.innerloop_ctx(model, opt)` copies the weights by default
# (`copy_initial_weights=True`), and `model.weight.grad` stays empty after the outer backward. One weight of 0.5, one
# SGD step of lr 0.1 on (w − 1)², then the same loss at the fast weight:

# %% tags=["answers-copied-initial-weights"]
from course_utils.chapters.ch03_func_transforms import copied_start_lines

print("\n".join(copied_start_lines()))

# %% [markdown]
# Started from a copy, the meta-gradient is computed, but it lands on the copy, a leaf of its own, and no optimizer
# of the model ever reads it. MAML needs the fast weights to start from the parameters themselves
# (`copy_initial_weights=False` in higher; `functional_call` on the model's own parameters in `torch.func`).
#
# Older MAML code (pytorch-maml's meta-update, for one) computes the meta-gradients with `autograd.grad`, then
# hands them to the optimizer by a detour: a hook on every parameter (`p.register_hook(lambda g: meta[name])`),
# `zero_grad()`, a forward and backward of some dummy loss, `step()`. Does the dummy backward overwrite, add to or
# lose the meta-gradients? A body and a head, meta-gradients summed over 2 tasks, the dummy loss read from the body
# alone:

# %% tags=["answers-hooked-meta-gradients"]
from course_utils.chapters.ch03_func_transforms import hook_injection_lines

print("\n".join(hook_injection_lines()))

# %% [markdown]
# A tensor hook runs when backward reaches that tensor, and what it returns replaces the gradient before it is
# added to `.grad`. So the order works: `zero_grad()` empties `.grad`, the dummy backward reaches each parameter,
# its hook swaps the dummy gradient for the meta-gradient, and that is what lands. The dummy loss exists only to make
# backward visit every parameter; its value never matters. Two ways it goes wrong: without `zero_grad()` the
# meta-gradient is added to whatever `.grad` held, and a parameter the dummy loss does not reach never calls its
# hook, so its meta-gradient is dropped without a word (the head above; it also stays put only because
# `zero_grad()` left its `.grad` None: with zeroed tensors instead, as `zero_grad` made before torch 2.0, weight
# decay or momentum would still move it, without its meta-gradient). Setting `p.grad = meta_gradient` for every
# parameter before `step()` gives the same update with neither risk (the last line), as does the outer loss's own
# backward through the inner steps, earlier in this section.
#
# Meta-learning code also makes a copy of the model per task and differentiates through it with
# `create_graph=True`. Through `backward()` or through `autograd.grad`, once per copy, five copies of a
# `Linear(50, 50)` each dropped after its task:

# %% tags=["answers-create-graph-cycle"]
from course_utils.chapters.ch03_graph_cycles import graph_cycle_lines

print("\n".join(graph_cycle_lines()))

# %% [markdown]
# With `create_graph=True`, `backward()` writes into `.grad` a gradient that carries its graph, and that graph
# refers back to the parameter: a cycle that runs through autograd's C++ graph, which Python's collector cannot
# see, so the dropped copies' parameters are never freed, not even by `gc.collect()` (nor their `.grad` tensors and
# graphs, which the bytes above do not count). On a GPU that is memory
# climbing task after task. `autograd.grad` returns the gradients instead of storing them, and makes no cycle;
# setting each `.grad` to None before dropping the copy breaks it (torch warns about the cycle with this advice,
# once per process: the first such backward in a kernel shows it). An ordinary loop
# keeps its parameters and `zero_grad()` replaces `.grad` with None every step, so there the cycle never outlives
# a step.

# %% [markdown]
# ## Clipping's flags
#
# The same gradients, [3, −4] and [12], measure 13 in L2, 19 in L1 and 12 in max norm: `max_norm` means
# nothing without its `norm_type`. torch does not check `max_norm` itself: 0 sets every gradient to 0 (nothing
# trains) and a negative value multiplies them by a negative factor, so the next step climbs the loss. A NaN
# gradient makes the returned norm NaN and every clipped gradient NaN, silently, unless
# `error_if_nonfinite=True`. `clip_grad_value_` clips each element, not the norm, so it turns the direction.

# %%
from course_utils.chapters.ch03_clip_optim import clipping_rules, optimizer_gallery, optimizer_knobs, scaler_knobs
from course_utils.chapters.ch03_lbfgs import lbfgs_calls, lbfgs_failed_search

for what, result in clipping_rules().items():
    print(f"{what}: {result}")

# %% [markdown]
# What a non-finite gradient does to clipping, in numbers and in torch's words:

# %% tags=["answers-clip-nonfinite"]
w = nn.Parameter(torch.ones(2))
w.grad = torch.tensor([float("inf"), 1.0])
norm = nn.utils.clip_grad_norm_([w], max_norm=1.0)
print(f"grad [inf, 1.0], default: returned norm {norm.item()}, grads after clipping {w.grad.tolist()}")
w.grad = torch.tensor([float("inf"), 1.0])
try:
    nn.utils.clip_grad_norm_([w], max_norm=1.0, error_if_nonfinite=True)
except RuntimeError as error:
    print("error_if_nonfinite=True: RuntimeError:", error)

# %% [markdown]
# Clipping cannot repair an inf: it scales by max_norm / inf = 0, and inf · 0 is NaN, so one bad element
# poisons the update (the finite one becomes 0). Check the returned norm and skip the step when it is not
# finite (chapter 7's NaN guard does, and `GradScaler` skips such steps by itself), or raise to find the cause.

# %% [markdown]
# Clipping acts only where its gradient is used as it is. An optimizer that uses a gradient's direction alone
# undoes it: sharpness-aware minimisation (SAM) takes two passes per update, the first gradient only to find
# a nearby worse point, w + ρ·g/‖g‖, the second, taken there, to make the update. Clipping (at max_norm 0.05,
# below these gradients' norms) before each of the two steps:

# %% tags=["answers-clip-normalised"]
from course_utils.chapters.ch03_clip_optim import sam_clip_placement

for what, same in sam_clip_placement(max_norm=0.05).items():
    print(f"{what}: {same}")

# %% [markdown]
# The first pass divides g by its own norm, and clipping only multiplies g by a positive factor, so it cancels:
# clip before the step that uses the gradient's size, here SAM's second. The same holds wherever a gradient is
# normalised before use.
#
# With mixed precision, SAM meets a rule of `GradScaler`: one `unscale_` per optimizer between two `update()` calls,
# and SAM computes gradients twice. The same cancellation helps: the first pass only needs the gradient's
# direction, which the scale does not change. The two passes with a scaler at 65,536, against the same two passes
# without one:

# %% tags=["answers-sam-scaler"]
from course_utils.chapters.ch03_clip_optim import sam_with_scaler

for what, result in sam_with_scaler().items():
    print(f"{what}: {result}")

# %% [markdown]
# So: take the first step from the scaled gradient, then run the second pass as any scaled step (`unscale_`,
# clip, `scaler.step`, `scaler.update`). A SAM optimizer that insists on a closure (`step(closure)`, as some
# libraries' do, "SAM requires closure") is the LBFGS pattern below: the closure zeroes the gradients and runs the
# forward and backward itself, because the optimizer calls it for the second pass.

# %% [markdown]
# ## The other optimizers, on one problem
#
# A least-squares fit with an exact solution, 50 steps each (LBFGS: 5 calls of `step(closure)`, which
# re-evaluates the loss itself), 5 seeds, each optimizer at a learning rate that suits it. Adadelta's `lr`
# is only a multiplier on a step size it adapts from 0: at its default 1.0 it reaches the line on 0 of 5
# seeds, so it looks broken when it is only slow. `SparseAdam` refuses dense gradients: it is for
# `nn.Embedding(sparse=True)`; `Muon` refuses 1-D parameters (biases, norms): give it the weight matrices
# and another optimizer the rest. A hook registered on `step` runs until its handle's `remove()`. LBFGS calls
# its closure several times per step, so the closure must run the forward itself: one that reuses an output
# computed before it backwards through that graph a second time.

# %% tags=["answers-lbfgs-closure", "answers-lbfgs-calls"]
gallery = optimizer_gallery()
for name, (below, _) in gallery.items():
    steps = 5 if name == "LBFGS" else 50
    print(f"{name:<20} loss below a tenth of its start after {steps} steps on {below} of 5 seeds")
print("every run at least 2× away from that line:", all(clear for _, clear in gallery.values()))
for what, result in optimizer_knobs().items():
    print(f"{what}: {result}")
for what, result in lbfgs_calls().items():
    print(f"{what}: {result}")

# %% [markdown]
# LBFGS's `step(closure)` runs up to `max_iter` iterations, calling the closure at least once per iteration (more
# with a line search), and stops early at `max_eval` closure calls (1.25 × `max_iter` by default) or when the
# gradient, the step or the change in the loss falls below its tolerances (`tolerance_grad`, `tolerance_change`). Its
# curvature history lives in the optimizer's state, so ten calls of 20 iterations continue one run: on the
# Rosenbrock function (6 dimensions, from −1.5) they ended on the very point one call of 200 reached, with more
# closure calls. The closure may be called many times per step, at new weights each time: it must run the
# forward itself (above: a forward made outside it fails).
#
# A line search that fails says nothing. torch's LBFGS has no `max_ls` argument: its strong-Wolfe search gets
# whatever is left of `max_eval` (closure calls per `step()`, by default 5/4 of `max_iter`) after the first call,
# so `max_iter=1`, the common per-batch setting, leaves it a single trial. One iteration at lr 0.01 through the
# public `step()`, with `max_eval` 1 (that default), 2 and 25, on five least-squares seeds:

# %% tags=["answers-lbfgs-failed-search"]
for what, result in lbfgs_failed_search().items():
    print(f"{what}: {result}")

# %% [markdown]
# With one or two trials the first step was too short for the curvature condition and the search ran out of
# trials. It then returned the lower of the starting point and its last trial, checked or not, and `step()` moved
# the parameters there; with 25 calls it found a point that meets the condition. "Failed" means the Wolfe
# conditions were not met, not that nothing moved, and nothing `step()` returns or warns says which happened.
#
# Parameter groups are how a fine-tune gives a pretrained backbone a tenth of the head's rate. Many training
# scripts then set the rate each epoch with their own helper, and the usual helper writes one number into every
# group:

# %% tags=["answers-group-lr-helper"]
from course_utils.chapters.ch03_clip_optim import unused_rows
from course_utils.chapters.ch03_param_groups import group_lr_helpers

for what, lrs in group_lr_helpers().items():
    print(f"{what}: {lrs}")

# %% [markdown]
# The first helper erases the ratio at its first call: from then on the backbone trains at the head's rate. A
# helper must scale each group's own rate, as `LambdaLR` does (each group keeps its `initial_lr`). The schedulers
# that are given the rates themselves, `OneCycleLR` (`max_lr`) and `CyclicLR` (`base_lr`, `max_lr`), write the same
# number into every group, like the first helper, unless given a list with one rate per group.
#
# Why a smaller rate for the backbone at all? A backbone pretrained on task A (8 classes, 2,000 examples), then a
# new head trained on task B (4 other classes read from the same features, only 100 examples) with the backbone
# frozen, at a tenth of the head's rate, and at the head's rate; task A's accuracy, read through the old head,
# measures what the pretraining still knows. Ten seeds:

# %% tags=["answers-backbone-rate"]
from course_utils.chapters.ch03_param_groups import backbone_rate_lines

print("\n".join(backbone_rate_lines(seeds=range(10))))

# %% [markdown]
# Adapting the backbone gained task B over half a point over freezing it on 9 of the 10 seeds, and a tenth of the
# head's rate gained about as much as the full rate (within 2 points) on 9 of 10: how much adapting helps the new
# task depends on the seed. What the full rate costs does not: the backbone's features were rewritten for the 100 new
# examples, and task A's accuracy fell from at least 0.75 to below 0.66 on every seed, where a tenth kept it above
# 0.68. The smaller rate keeps most of the adaptation while protecting what the backbone already knows.
#
# Forgetting is worst when new tasks bring new *classes* into one shared head. Ten classes arrive as five tasks
# of two, each task trained alone (10 epochs of Adam), then every class is tested: plain fine-tuning; EWC, which
# adds lam/2 · Σ F·(w − w_old)² with F the diagonal empirical Fisher (each example's squared gradient of its
# log-likelihood at its true label, averaged over 100 random examples of the task; summed over the tasks and
# anchored at the latest weights, as online EWC does) and lam = 5000 as learners set it; and replay, 10 stored
# examples per old class, 32 drawn from them added to every batch of 32 new ones. The last column scores the same
# models as if the test were told each example's task (choosing only between that task's two classes)
# (`course_utils/chapters/ch03_class_incremental.py`):

# %% tags=["answers-class-incremental"]
from course_utils.chapters.ch03_class_incremental import class_incremental, class_incremental_lines

print("\n".join(class_incremental_lines(class_incremental(seeds=range(5), lam=5000.0))))

# %% [markdown]
# The old tasks are not forgotten slowly; their examples are *claimed* by the newest classes. The loss of a
# batch holding only classes 8 and 9 pushes every other class's logit down (softmax's gradient on an absent
# class is its probability, always positive) and nothing ever pushes them back up, so the last task's two
# classes outscore the rest on most old examples. EWC holds weights that mattered to earlier tasks near their
# old values, but it cannot stop the new classes' outputs from growing past them: in this class-incremental
# setting it stayed below 0.5 on every seed, as fine-tuning did. A few stored examples of every old class put
# those classes back into the loss, and replay kept them all. Told the task, both fine-tuning and EWC keep most
# of the old tasks: the features survived, the competition with the new classes is what was lost. EWC's
# published results are in such settings (the task given at test time, or the same classes in every task), and
# even there its margin over fine-tuning on this small problem held on only some seeds (last line).
#
# Groups carry other settings too, and the most common split is by weight decay: decay the weight matrices, not
# the biases and normalisation gains (nanoGPT splits by dimension, `p.ndim >= 2`; timm by dimension, by a name
# ending in `.bias`, and by the names a model's `no_weight_decay()` lists, such as a ViT's position embedding; the
# Hugging Face Trainer by module type and name). A gain's
# neutral value is 1; decay pulls it towards 0. The split on a small MLP with two LayerNorms, then what goes
# wrong when building groups by hand:

# %% tags=["answers-decay-groups"]
from course_utils.chapters.ch03_param_groups import group_lines, unfreeze_lines

print("\n".join(group_lines()))

# %% [markdown]
# Decay on everything held the mean gain below 1 on every seed; with the split it grew past 1. What that does to
# the loss depends on the model; this cell measures only what decay does to which tensor. Torch refuses a parameter in two groups, but not a parameter in none: a
# split by name that misses a kind of tensor freezes it without a word. Count what the groups hold against
# `model.parameters()`, as for any optimizer.
#
# A backbone frozen at first (`requires_grad_(False)` and left out of the optimizer) and unfrozen later needs
# both halves of that: `requires_grad_(True)` gives it gradients, and only `add_param_group` lets the optimizer
# step it. The checkpoint of the frozen phase then no longer fits:

# %% tags=["answers-unfreeze-later", "answers-param-groups-identity"]
from course_utils.chapters.ch03_param_groups import param_groups_identity_lines

print("\n".join(unfreeze_lines()))
print("\n".join(param_groups_identity_lines()))

# %% [markdown]
# Excluding a part from the optimizer keeps its weights, but autograd still computes its gradients (memory and
# time for nothing): set `requires_grad_(False)` as well. An optimizer's state is stored per group and per
# position, so a checkpoint saved with one group cannot be loaded into two; resume the frozen phase with its own
# optimizer, or build the optimizer as it was in the frozen phase, load its state, then `add_param_group` the
# backbone (the head keeps its momentum: the fourth line). A checkpoint saved after the unfreezing holds two groups
# and loads only into an optimizer built with both.
#
# Loading replaces more than the numbers: `load_state_dict` builds new group dicts in a new `param_groups` list
# (the last two lines). Code that kept a reference to the old list to share the optimizer's settings (older
# versions of apex's LARC wrapper did, NVIDIA/apex#766; it now reads the list through a property), writes into a
# list the optimizer no longer reads. After loading, read `optimizer.param_groups` again, or build the wrapper around the
# loaded optimizer.
#
# Which weights does a step move? Embedding rows 1 and 2 are used by the first batch and row 3 alone by the
# second; is row 1, whose gradient in the second step is 0, moved by that step?

# %% tags=["answers-unused-embedding-rows"]
for what, moved in unused_rows().items():
    print(f"{what}: {moved}")

# %% [markdown]
# A zero gradient stops plain SGD only. Momentum and Adam's moments remember row 1's earlier gradient and keep
# moving it for many steps after its last use (the same holds for any frozen-by-zero-gradient weight; weight
# decay moves it too, chapter 5). `nn.Embedding(sparse=True)` gives a gradient that lists only the rows used, and
# `SparseAdam` updates only those rows and their moments: the way to touch only the rows a batch used.
#
# Until the embedding is shared. Tie it to the output layer (one Parameter for both, as weight-sharing language
# models do) and the output layer's gradient reaches every row:

# %% tags=["answers-tied-sparse"]
from course_utils.chapters.ch03_clip_optim import tied_sparse_rows

for what, result in tied_sparse_rows().items():
    print(f"embedding {what}: {result}")

# %% [markdown]
# Every logit's gradient flows into its row of the output weight, so the shared weight's gradient is dense: torch
# adds the embedding's sparse part into it and hands the optimizer an ordinary tensor, which `SparseAdam`
# refuses. Switching to `Adam` costs nothing here: every row already gets a gradient on every step.
#
# Sparse tensors can be learned, too. A graph layer whose adjacency values and features are both sparse and both
# trained, multiplied with `torch.sparse.mm`, checked against the same product done densely:

# %% tags=["answers-sparse-autograd"]
from course_utils.chapters.ch03_autograd_extras import sparse_sparse_lines

print("\n".join(sparse_sparse_lines()))

# %% [markdown]
# In torch 2.13 a sparse-by-sparse product has a backward, and each operand's gradient is sparse, with values only
# where that operand stores entries: a learned sparse matrix keeps its pattern. A torch operation without a
# derivative still records a node, named `NotImplemented`, and fails only at `backward()`, in torch's words above; a
# `grad_fn` of `None` on an output whose inputs require grad means the computation left autograd (NumPy, `.data`, a
# library's own kernel). Run one `backward()` through a new sparse call before training on it.

# %% [markdown]
# `GradScaler` halves its scale after a step with an inf or NaN gradient (that step is skipped) and doubles it
# after `growth_interval` clean steps in a row; on the CPU it runs the same logic. Chapter 7 trains with it.

# %% tags=["answers-scaler-growth", "answers-clip-before-unscale"]
for what, result in scaler_knobs().items():
    print(f"{what}: {result}")

# %% [markdown]
# Clipping must come after `scaler.unscale_(optimizer)`: before it, the gradient is still multiplied by the scale,
# so `clip_grad_norm_(max_norm=1)` clips a gradient 1024 times too large to norm 1, and the step that divides by
# the scale then moves the weights by 1/1024 (0.000977 above) instead of 1. Clipping silently makes every update
# tiny. The order: `scaler.scale(loss).backward()`, `scaler.unscale_(optimizer)`, clip, `scaler.step(optimizer)`,
# `scaler.update()`.

# %% [markdown]
# ## Losses and files from other people's code
#
# `nn.LinearCrossEntropyLoss` folds the output layer into the loss (given `options`, it computes the loss in chunks
# without building the full logits, which matters for a vocabulary of 100k classes; its docstring says setups the
# chunked path does not support fall back to the full logits with a warning). Its weight is a parameter of the
# loss, so an optimizer built from `model.parameters()` alone never trains it: pass the loss's parameters too. With
# default `options` it computes its gradients during the forward and uses them up in the first backward, so even
# `retain_graph=True` allows one backward only, unless `allow_retain_graph=True` or `reduction="none"` (which
# recomputes).
# `TripletMarginLoss`'s `p` picks the distance, and the same triplet can be satisfied under one and violated
# under another; `eps` is added to the difference before the norm, so a positive identical to its anchor
# still pulls it along the diagonal.

# %%
from course_utils.chapters.ch03_loss_files import (file_and_seed_rules, legacy_loss_flags,
                                                   linear_cross_entropy_rules, triplet_rules)

for rules in (linear_cross_entropy_rules, triplet_rules):
    for what, result in rules().items():
        print(f"{what}: {result}")

# %% [markdown]
# Code written before torch 0.4.1 passes `size_average=False` or `reduce=False` to a loss. Both still work,
# with a warning, and they decide over `reduction`, even one you pass beside them: `size_average=False`
# sums, so the loss and its gradients grow with the number of elements summed (B for one value per example,
# B·H·W per pixel), and for SGD a learning rate tuned for that sum is that many times too small for the mean
# (Adam divides a constant factor out, as this chapter's Adam section shows). `NLLLoss2d` and `clip_grad_norm` are
# old names for `NLLLoss` and `clip_grad_norm_`, same results.

# %%
for what, result in legacy_loss_flags().items():
    print(f"{what}: {result}")

# %% [markdown]
# `torch.load` reads with `weights_only=True` by default, and that reader understands a subset of pickle's
# opcodes, enough for protocol 2, `torch.save`'s default: a checkpoint saved with `pickle_protocol=4` (opcode 149
# is that protocol's FRAME) needs re-saving with protocol 2 from a trusted copy, or `weights_only=False`, which
# runs whatever code the file holds. Passing `pickle_module=pickle`, as older
# code does, switches that safe reader off without a word. `mmap=True` maps a checkpoint from disk
# instead of reading it into memory, so it needs a path. `torch.seed()` does not take a seed: it draws a
# fresh one, different on every run. And `torch.cuda.manual_seed_all` seeds the GPUs only, never the CPU
# generator.

# %%
for what, result in file_and_seed_rules().items():
    print(f"{what}: {result}")

# %% [markdown]
# ## Errors you will meet here
#
# The errors this chapter's mechanisms raise, each produced just now on the pinned torch and shown in torch's
# own words, with its fix run beside it. It stays folded until you need it; chapter 9 holds the whole atlas,
# and a box that finds the entry for a message you paste.

# %%
from course_utils.widgets.explain_view import errors_here

errors_here(3)

# %% [markdown]
# ## Exercises: write it yourself
#
# Each exercise is a stub for you to edit and a check against torch's own optimizers and autograd, on
# cases you do not see.
#
# ### Exercise 3.1: one training step
#
# Write `train_step(model, inputs, targets, loss_fn, optimizer)`: one complete step on one batch, returning
# the loss as a Python float (the loss of this batch, before the update). The check calls it three times
# in a row, with SGD + momentum and with Adam (one of them with two parameter groups), on a model with
# Dropout and BatchNorm that comes in train mode and must stay in it; `targets` are int64 class indices.
# The model may come with gradients left in `.grad` by an earlier backward: the step uses this batch's alone.
# It compares every weight with torch's own step after each call.

# %%
def train_step(model, inputs, targets, loss_fn, optimizer):
    raise NotImplementedError  # replace this line with your code

# %%
from course_utils.exercises import check
check("train_step")

# %% [markdown]
# ### Exercise 3.2: one Adam step by hand
#
# Write `adam_step(param, grad, m, v, t, lr, betas, eps)` without `torch.optim`: the update Adam makes at
# step `t` (1 for the first), given the gradient and the moments `m` and `v` left by step t − 1;
# `betas` is the pair (beta1, beta2). `param`, `grad`, `m` and `v` are float64 tensors of one shape (1-D
# in the check; element-wise torch ops such as `.sqrt()` work for any shape, `math.sqrt` does not);
# `t` is an int ≥ 1, `lr` and `eps` floats. Return the tuple `(new_param, new_m, new_v)` of tensors of
# that shape (new tensors, or the ones passed in, updated in place: either is fine).

# %%
def adam_step(param, grad, m, v, t, lr, betas, eps):
    raise NotImplementedError  # replace this line with your code

# %%
check("adam_step")

# %% [markdown]
# ### Exercise 3.3: one SGD step, the gradient worked out by hand
#
# The layer is y = W x + b (W of shape [outputs, inputs]), the loss the mean over the outputs of
# (y − t)², the optimizer plain SGD. Write `sgd_step_by_hand(W, b, x, t, lr)` returning the tuple
# `(W_new, b_new)` of tensors shaped like W and b and of their dtype (as `torch.optim.SGD` keeps them),
# with the gradient worked out by hand, without autograd.
# `W`, `b`, `x`, `t` are float32 tensors (`x` of shape [inputs], `b` and `t` of shape [outputs]), `lr` a
# float. This chapter's example is one of the cases; the others have other shapes (one output, too).

# %%
def sgd_step_by_hand(W, b, x, t, lr):
    raise NotImplementedError  # replace this line with your code

# %%
check("sgd_step_by_hand")

# %% [markdown]
# ## Quiz

# %%
from course_utils.widgets.quiz_view import quiz
quiz(3)

# %% [markdown]
# ## Summary
#
# - A step is zero_grad → forward → loss → backward → (clip) → optimizer.step → scheduler.step.
# - The loss is a scalar with a `grad_fn`; backward fills `.grad` and *adds* to what is there.
# - Only `optimizer.step()` changes the weights; `zero_grad()` leaves `.grad` as `None`.
# - By hand: y = [−0.1, 1.8], L = 2.225, ∂L/∂W = [[−1.1, −2.2], [1.8, 3.6]], W_new = [[0.511, −0.278], [0.182, 0.764]] — autograd agrees.
# - Adam keeps two moments per weight; its first update is about lr·sign(g) for every weight. SGD with
#   momentum keeps one buffer, v ← μ·v + g, and steps w ← w − lr·v: its first step is plain SGD's.
# - Backward frees the graph; forward keeps more activations for a bigger batch.
# - Three errors of first loops: a state carried across batches without `.detach()` makes the next
#   backward hit a freed graph (`retain_graph=True` only trades it for the next error); an in-place change
#   of a tensor an operation saved fails at backward; an optimizer built over other parameters (a model
#   rebuilt after it) trains nothing, silently: check that it holds every parameter of the model.
# - Clip the global norm between backward and step; step the scheduler after the optimizer, at the cadence
#   of its unit (per epoch for T_max in epochs, once per optimizer update for OneCycleLR).
