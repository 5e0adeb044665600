# %% [markdown]
# # Chapter 6: The training simulator
#
# **After this chapter you can** predict what a knob of a training run will do (learning rate,
# optimizer, schedule, batch size, accumulation, dropout, a bug) and then check your prediction on a
# real run that you step through, break and repair while you watch.
#
# Everything below runs the course's own loop (`course_utils.loop`) on the 3-class spiral: the same
# operations as chapter 3, the same bugs as chapter 5. First five experiments, each a real run whose
# measured outcome is printed. Then the simulator itself, and an LR range test.

# %%
from course_utils import setup_notebook
setup_notebook()

import math
import matplotlib.pyplot as plt
from IPython.display import display
from course_utils.notebook import sig
from course_utils.session import Session, TrainConfig
from course_utils.simulator import compare_runs, lr_outcome, outcome_of, run_figure, sgd_vs_adam

# %% [markdown]
# ## The run we start from
#
# 600 training and 300 validation points, a two-hidden-layer MLP (64 units), Adam at lr 0.01,
# batch size 32, ten epochs: 19 micro-batches an epoch, 190 updates in all.

# %%
base = TrainConfig()
print(base.arithmetic().iters_per_epoch, "micro-batches per epoch,", base.arithmetic().total_weight_updates, "updates")
healthy = Session(base)
healthy.run_to_end()
print("final validation accuracy:", sig(healthy.epochs[-1].val_acc))

# %% [markdown]
# ## Experiment 1: lr = 1.0 with Adam
#
# A popular article says that with Adam at lr = 1.0 "the loss becomes NaN". Predict, then measure.

# %%
for o in (outcome_of(healthy), lr_outcome(1.0, "adam")):
    lr = o.lr
    print(f"Adam lr={lr:<5} any NaN: {o.any_nan!s:<5}  largest batch loss {sig(o.max_loss):<7g}  "
          f"epoch-1 train loss {sig(o.first_epoch_train_loss):<7g}  final val accuracy {sig(o.final_val_acc)}")
print("chance level for 3 classes:", sig(1 / 3))

# %% [markdown]
# No NaN here. Adam divides each update by a running estimate of the gradient's size, so every weight
# moves by about lr per step whatever the gradient: at lr = 1.0 that is a huge step, but a finite one.
# The loss jumps far above its starting value (about log 3 = 1.1) in the first epoch and the model
# never recovers: its final accuracy is far below the healthy run's, not far above chance. The run
# fails; nothing overflows.
#
# ## Experiment 2: SGD vs Adam at the same learning rate
#
# "Adam converges 3 to 5 times faster." Faster in what unit? Here: weight updates until validation
# accuracy first reaches 90 %, checked after every update.

# %%
for lr, epochs in ((0.01, 10), (0.3, 15)):
    race = sgd_vs_adam(lr, target=0.9, epochs=epochs)
    sgd = race.sgd if race.sgd is not None else f"not within {race.max_updates}"
    ratio = f"SGD needs {sig(race.ratio(), 3)}x as many updates" if race.ratio() else "no ratio: SGD never got there"
    print(f"lr={lr}: updates to 90% val accuracy  SGD {sgd}, Adam {race.adam}  ->  {ratio}")

# %% [markdown]
# At the same learning rate the comparison depends on the rate itself: at 0.01 plain SGD does not
# reach 90 % at all within 10 epochs, at 0.3 it does,
# several times slower than Adam. "3 to 5 times"
# is one point on a curve, not a constant: compare optimizers each at its own good learning rate
# (the LR range test below finds one).
#
# ## Experiment 3: the missing `zero_grad`
#
# With a bug ticked, the simulator runs a healthy twin with the same seed in lockstep: the *ghost*.

# %%
bugged = Session(TrainConfig(bugs=("missing_zero_grad",)), ghost=True)
bugged.run_to_end()
g = bugged.ghost
print("                      healthy ghost   missing zero_grad")
print(f"final val accuracy    {sig(g.epochs[-1].val_acc):<15g} {sig(bugged.epochs[-1].val_acc):g}")
print(f"largest grad norm     {sig(max(e.grad_norm for e in g.steps)):<15g} "
      f"{sig(max(e.grad_norm for e in bugged.steps)):g}")
print(f"final train loss      {sig(g.epochs[-1].train_loss):<15g} {sig(bugged.epochs[-1].train_loss):g}")
print("ghost identical to a separate healthy run:", [e.loss for e in g.steps] == [e.loss for e in healthy.steps])

# %% [markdown]
# The summed gradient grows step after step (the norm column), Adam keeps each update near lr so
# nothing explodes, but it follows stale directions: accuracy ends far below the ghost's.
#
# ## Experiment 4: evaluation without `no_grad`
#
# Same losses, same accuracies; the difference is memory. The meter counts the bytes autograd saves
# for backward during evaluation (on the CPU; on a GPU it would read the allocator).

# %%
runs = compare_runs(healthy=dict(epochs=2), bugged=dict(epochs=2, bugs=("missing_no_grad",)))
for label, s in runs.items():
    print(f"{label:<8} eval graph memory per epoch (bytes): {[e.eval_memory for e in s.epochs]}  "
          f"val accuracy {[sig(e.val_acc) for e in s.epochs]}")
print("validation losses identical:",
      [e.val_loss for e in runs["healthy"].epochs] == [e.val_loss for e in runs["bugged"].epochs])

# %% [markdown]
# ## Experiment 5: cosine vs constant learning rate
#
# At lr 0.03, 20 epochs: a cosine schedule lowers the learning rate to 0 by the end.

# %%
runs = compare_runs(constant=dict(lr=0.03, epochs=20, measure_memory=False),
                    cosine=dict(lr=0.03, epochs=20, schedule="cosine", measure_memory=False))
for label, s in runs.items():
    last5 = [e.val_acc for e in s.epochs[-5:]]
    print(f"{label:<8} final train loss {sig(s.epochs[-1].train_loss):<8g} last 5 val accuracies "
          f"{[sig(a, 3) for a in last5]}  spread {sig(max(last5) - min(last5), 3):g}")

# %% [markdown]
# With a constant rate the last epochs still jump around (the steps stay large near the minimum);
# the cosine run settles: lower training loss and a steady validation accuracy.
#
# ## The simulator
#
# Set the knobs, then **Step** (one micro-batch), **Train epoch** or **Train to end**; **Stop** ends a
# running epoch. Move the learning-rate slider while it trains: the run goes on with the new rate.
# Any other setting starts a new run, and the view says so. Tick a bug: the faint dashed curves are
# the healthy ghost with the same seed. Ticking two bugs that change the same operation is refused,
# with a message. Below, the view opens after three steps and one epoch.

# %%
from course_utils.widgets.simulator import simulator
sim = simulator()
for _ in range(3):
    sim.step()
sim.train_epoch()
sim

# %% [markdown]
# Try: raise the learning rate to 1 (log₁₀ = 0) mid-run; switch to SGD; tick *Missing zero_grad* and
# press **Train to end**; set accumulation steps to 4 and tick *Accumulating without dividing the loss*.
#
# ## The LR range test
#
# One pass over a larger spiral (100 micro-batches), the learning rate multiplied by the same factor
# at every micro-batch, from 1e-5 up until the loss blows up. The loss first does nothing (lr too
# small), then falls, then explodes. A good rate is where it falls fastest.

# %%
from course_utils.widgets.lr_find_view import lr_range_test
finder = lr_range_test("adam")
finder

# %% [markdown]
# Does the suggestion hold up? Train the default run at the suggested rate, 30 times lower and
# 30 times higher:

# %%
suggested = finder.result.suggested
for factor in (1 / 30, 1, 30):
    o = lr_outcome(suggested * factor, "adam", epochs=5)
    print(f"lr {sig(suggested * factor, 3):<8g} final val accuracy after 5 epochs {sig(o.final_val_acc)}")

# %% [markdown]
# ## A run, frozen for the page
#
# The live panels need a running kernel. Here is the simulator's run with *missing zero_grad*
# against its healthy ghost, drawn once, so the chapter also reads on GitHub.

# %%
fig = run_figure(bugged, "missing zero_grad (solid) against its healthy ghost (dashed), Adam lr 0.01")
display(fig)
plt.close(fig)

# %% [markdown]
# ## Exercise: write it yourself
#
# ### Exercise 6.1: the LR range test
#
# Write `lr_range_test(model, loader, loss_fn, optimizer, start_lr, end_lr)`: one pass over `loader`, one
# update per batch, batch i of n trained with the learning rate start_lr · (end_lr / start_lr)^(i / (n − 1)),
# so the rate grows by the same factor from batch to batch. Return `(lrs, losses)`: two lists of floats,
# the rate each batch was trained with and its loss before its own update. The check reads the rate each
# update really used from inside the optimizer.

# %%
def lr_range_test(model, loader, loss_fn, optimizer, start_lr, end_lr):
    raise NotImplementedError  # replace this line with your code

# %%
from course_utils.exercises import check
check("lr_range_test")

# %% [markdown]
# ## Quiz

# %%
from course_utils.widgets.quiz_view import quiz
quiz(6)

# %% [markdown]
# ## Summary
#
# - Adam at lr = 1.0 on the spiral: no NaN; the loss spikes and the run ends far below a healthy one.
# - Optimizer comparisons depend on the learning rate: compare each optimizer at its own good rate.
# - Missing `zero_grad`: the gradient norm grows; Adam stays finite but ends far below its ghost.
# - Missing `no_grad`: same numbers, graph memory during evaluation.
# - A cosine schedule lets a run settle where a constant rate keeps jumping.
# - The LR range test finds a good rate in one pass: where the loss falls fastest.
