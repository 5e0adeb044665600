# %% [markdown]
# # Chapter 3 — Anatomy of one training step
#
# By the end of this chapter you will be able to:
#
# - name the operations of one training step in order;
# - say what each one reads and what it writes;
# - do one SGD step by hand and check every number against PyTorch.
#
# We use the smallest model that still has a weight matrix: `TinyLinear`, a `Linear(2, 2)`.

# %%
from course_utils import setup_notebook; setup_notebook()

# %%
import torch
from torch import nn

from course_utils.anatomy import fmt, max_difference, scheduler_before_optimizer_warning, tiny_step, tiny_step_autograd
from course_utils.models import TinyLinear
from course_utils.notebook import sig

# %% [markdown]
# ## The operations, in order
#
# One step is six operations, plus a seventh for the learning rate:
#
# | operation | reads | writes |
# |---|---|---|
# | `optimizer.zero_grad()` | nothing | every `.grad` ← `None` |
# | forward `y = model(x)` | inputs, weights | outputs, and the autograd graph |
# | loss `L = loss_fn(y, t)` | outputs, targets | one scalar with a `grad_fn` |
# | `L.backward()` | the graph | every `.grad` (added to what is there) |
# | clip (optional) | every `.grad` | every `.grad`, rescaled |
# | `optimizer.step()` | weights, `.grad`, lr | weights |
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
# ## Backward fills `.grad`, and a second backward *adds*
#
# `backward()` writes the gradient into each weight's `.grad`.
# It does not overwrite: it adds. Run a second forward and backward without clearing, and the gradient doubles.

# %%
loss.backward()
print("after 1st backward: W.grad =", fmt(model.weight.grad))
nn.functional.mse_loss(model(x), t).backward()
print("after 2nd backward: W.grad =", fmt(model.weight.grad), "(the sum of both)")
print("weights are still", fmt(model.weight), "— backward never moves them")

# %% [markdown]
# ## `zero_grad` clears to `None`
#
# Since torch 2.0 `zero_grad()` sets every `.grad` to `None` (`set_to_none=True` is the default).
# `None` means "no gradient yet"; it is not a tensor of zeros.

# %%
optimizer.zero_grad()
print("after zero_grad: W.grad =", model.weight.grad, "| b.grad =", model.bias.grad)

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
# What matters is only that the gradients are clear before the next `backward()`.

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
# Now the same step done by PyTorch: `TinyLinear`, `mse_loss`, `backward()`, `SGD.step()`.

# %%
auto = tiny_step_autograd(lr=0.01)
for name in ("y", "loss", "dL_dy", "dL_dW", "dL_db", "W_new", "b_new"):
    print(f"{name:7s}", show(getattr(auto, name)))
gap = max_difference(hand, auto)
print("largest difference between hand and autograd, over every number:", "< 1e-6" if gap < 1e-6 else gap)

# %% [markdown]
# They agree to float32 precision (the starting weights are stored in float32).
#
# Did the step help? Run forward again with the new weights.
# The new y₀ is 0.511·1 + (−0.278)·2 + 0.011. The new loss is yours to work out: it is the last quiz question.

# %%
print("new y[0] =", sig(hand.y_new[0]), "| autograd:", sig(auto.y_new[0]))
print("new loss by hand == new loss by autograd (to 1e-6):", abs(hand.loss_new - auto.loss_new) < 1e-6)
print("new loss below the old one,", sig(hand.loss), ":", hand.loss_new < hand.loss)

# %% [markdown]
# ## Where clipping goes
#
# Clipping rescales the gradients so that their global norm is at most `max_norm`.
# It only makes sense between `backward()` (which writes the gradients) and `step()` (which uses them).
# Here the gradient norm is 5.167; we clip to 1.0 in three places.

# %%
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

# %%
print(scheduler_before_optimizer_warning())

# %% [markdown]
# The unit matters too. A `CosineAnnealingLR` with `T_max` counted in epochs must step once per epoch;
# a `OneCycleLR` counts `total_steps` in batches and must step once per batch.
# Below, 3 epochs of 4 batches with a 3-epoch cosine schedule, stepped both ways.

# %%
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
    return seen


print("per epoch (right):", lrs(per_batch=False))
print("per batch (wrong):", lrs(per_batch=True))

# %% [markdown]
# Stepped per batch, the cosine runs its whole 3-"epoch" course in 3 batches, then climbs back up.

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
# Put together, a training loop repeats the step for every batch. Validation is the anti-step:
# forward and loss only, no backward, no step, no graph (chapter 4 explains the switches).
# Here with lr = 0.1, so the loss falls fast.

# %%
model = TinyLinear()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), t)
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        val = nn.functional.mse_loss(model(x), t)
    print(f"step {step + 1}: training loss {sig(loss.item())}, loss after the step {sig(val.item())}")

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
# - Clip between backward and step; step the scheduler after the optimizer, at the cadence of its unit.
