# %% [markdown]
# # Chapter 6: The training simulator
#
# **After this chapter you can** predict what a knob of a training run will do (learning rate,
# optimizer, schedule, batch size, accumulation, dropout, a bug) and then check your prediction on a
# real run that you step through, break and repair while you watch.
#
# Everything below runs the course's own loop (`course_utils.engine.loop`) on the 3-class spiral: the same
# operations as chapter 3, the same bugs as chapter 5. The chapter opens with the simulator. Then six
# experiments, each set as a task for the simulator and a question: **answer it before you read the
# next cell's measurement**. Run All is fine: a measurement stays hidden until you press **Check** on its
# question (or **Show the measurement**, if you would rather not predict), and opens at once later if
# your saved progress already holds your prediction. Each measurement runs on five seeds (seeds 0 to 4: each
# another spiral, another initialisation, another shuffle), and the conclusion is stated only as far
# as the five agree.

# %%
from course_utils import setup_notebook
setup_notebook()

import matplotlib.pyplot as plt
from IPython.display import display
from course_utils.chapters.ch06_lr_find import sweep_figure
from course_utils.engine.session import Session, TrainConfig
from course_utils.chapters.ch06_simulator import run_figure
from course_utils.chapters import ch06_lr_races as lr_races, ch06_simulator_seeds as seeds
from course_utils.widgets.predict_view import answer, predict

# %% [markdown]
# ## The simulator
#
# The run it starts from: 600 training and 300 validation points, a two-hidden-layer MLP (64 units),
# Adam at lr 0.01, batch size 32, ten epochs.
#
# Set the knobs, then **Step** (one micro-batch), **Train epoch** (to the end of the current epoch) or
# **Train to end**; **Stop** ends a running epoch. Move the learning-rate slider while it trains: the
# run goes on with the new rate. Any other setting starts a new run, and the view says so; **Reset**
# starts the same settings again from step 0. Tick a bug: the faint dashed curves are the healthy ghost
# with the same seed. Ticking two bugs that change the same operation is refused, with a message.
#
# Below, the view opens after three steps. Its memory readout is one full micro-batch of 32 examples;
# the last micro-batch of an epoch is smaller (600 = 18 × 32 + 24), so it keeps less.

# %%
from course_utils.widgets.simulator import simulator
base = TrainConfig()
print(base.arithmetic().iters_per_epoch, "micro-batches per epoch,", base.arithmetic().total_weight_updates,
      "updates in", base.epochs, "epochs")
sim = simulator()
for _ in range(3):
    sim.step()
sim

# %% [markdown]
# ## Experiment 1: Adam at lr = 1.0
#
# **Task.** In the simulator, drag the learning rate to 1 (log₁₀ = 0), press **Reset**, then
# **Train to end**. Watch the loss panel and the decision boundary.

# %%
predict(6, "adam-lr-one")

# %% tags=["answers-adam-lr-one"]
lr_one = seeds.lr_one()
with answer(6, "adam-lr-one"):
    print(lr_one.text())

# %% [markdown]
# The raw figures behind those counts. A run at lr 1.0 is chaotic: the last bit of one rounding grows
# into a different run, so these figures differ from one CPU to another (nbval does not compare this
# cell). The counts above hold on every CPU the course was checked on.

# %% tags=["nbval-ignore-output"]
with answer(6, "adam-lr-one"):
    print(lr_one.raw_text())

# %% [markdown]
# No NaN on any seed, although a popular article says that with Adam at lr = 1.0 "the loss becomes NaN".
# Adam divides each update by a running estimate of the gradient's size, so a
# weight's step does not grow with the gradient. The first step is lr · g / (|g| + ε), which is lr · sign(gradient) for any
# gradient far above ε = 1e-8; later ones stay within a few times lr. Kingma and Ba's lr · (1 − β₁)/√(1 − β₂) ≈ 3.2 · lr is not a
# general limit: it is the step after a long run of zero gradients. A gradient that keeps growing, as in
# a diverging run, goes past it (torch's Adam on one weight):

# %%
from course_utils.chapters.ch06_simulator_seeds import adam_step_under_growing_gradient

for growth in (1.05, 1.10):
    step = adam_step_under_growing_gradient(growth)
    print(f"gradient growing {100 * (growth - 1):.0f}% per update, 400 updates: largest step {step:.1f} x lr, "
          f"above 3.2 x lr: {step > 3.2}")

# %% [markdown]
# The last row of the table measures these runs: every weight, every update, within 3.2 · lr. At
# lr = 1.0 those steps are huge but finite, and the
# loss jumps into the hundreds (it starts near ln 3 = 1.1). Most hidden ReLUs end up *dead*: they output
# 0 for every training point, so no training point sends a gradient to the weights that feed them, and
# they rarely come back. The run fails, far
# below the healthy one, and nothing overflows. A NaN needs an undefined operation, such as 0/0,
# ∞ − ∞ or 0 · ∞, usually after an overflow to ∞; nothing here comes near float32's limit (about 3.4e38).
#
# Where the error feeds on itself, it does overflow. Gradient descent on least squares (a linear model, mean
# squared error) converges only for lr below 2/λ, λ the loss's largest curvature; past that limit it multiplies
# the error along one direction by the same factor at every step. Just past the limit, and at half of it:

# %% tags=["answers-lr-overflow-nan"]
from course_utils.chapters.ch06_overflow import overflow_lines

print("\n".join(overflow_lines()))

# %% [markdown]
# The loss was enormous by step 50, yet finite for a hundred steps and more: a loop that only checks for NaN
# learns of the problem over a hundred steps late, so watch the loss itself. The inf came first, when the squared
# errors passed float32's limit while the weights were still finite; the NaN came over a hundred steps later, when
# the weights overflowed too and a prediction added +∞ to −∞. The fix is the learner's own: an lr below the
# limit. Chapter 7's guard skips a NaN update and stops a run whose updates keep failing; it cannot make a run
# that diverges at every step converge.
#
# ## Experiment 2: the LR range test
#
# How do you find a good learning rate without training a run per candidate? The range test trains
# the run it tunes (here the simulator's: 600 examples, batch 32) for 100 micro-batches, about five
# epochs at most, multiplying the learning rate by the same factor at every micro-batch, from 1e-5 up
# until the loss blows up. The loss first does nothing (lr too small), then falls, then explodes. The
# suggestion is where the smoothed loss falls fastest, before its minimum.
#
# **Task.** In the view below, press **Sweep** for Adam, then for SGD.

# %%
from course_utils.widgets.lr_find_view import lr_range_test as lr_range_view   # exercise 6.1: your own
finder = lr_range_view("adam")
finder

# %% [markdown]
# The same sweep, frozen for the page (the view's figure needs a running kernel):

# %%
fig = sweep_figure(finder.result)
display(fig)
plt.close(fig)

# %% [markdown]
# This follows fastai's `lr_find` with a few choices of its own: it starts at 1e-5 (fastai 1e-7), smooths
# with β = 0.9 (fastai 0.98), suggests the steepest point (fastai's default suggestion is `valley`; its
# `minimum` rule takes the lowest loss's rate divided by 10), and trains a fresh copy of the run instead
# of restoring your model's weights afterwards. Like fastai, it runs on the run's own data and batch
# size, across epochs when one epoch has fewer than 100 micro-batches.
#
# Is the suggestion a number, or an order of magnitude? The same sweep on each of the five seeds:

# %% tags=["answers-lr-range-test"]
for optimizer in ("adam", "sgd"):
    print(lr_races.suggestions(optimizer).text())

# %% [markdown]
# **Task.** Train the default run for 5 epochs at the suggested rate, 30 times below it, 30 times above
# it, and at the default 0.01.

# %%
predict(6, "lr-plateau")

# %%
plateau = lr_races.plateau(finder.result.suggested)
with answer(6, "lr-plateau"):
    print(plateau.text())

# %% tags=["nbval-ignore-output"]
with answer(6, "lr-plateau"):
    print(plateau.raw_text())

# %% [markdown]
# The suggestion lands on a wide plateau of good rates, and the default 0.01 sits on it too (on one seed
# it is still just short of 90% after 5 epochs). Thirty times off either way falls off the plateau: too
# slow below, diverging above. So read the suggestion as an order of magnitude: from one seed to the
# next it moved by up to ten times for Adam (the sweeps above), and a rate ten times below it, the
# default, trains almost as well.
#
# ## Experiment 3: SGD against Adam
#
# "Adam converges 3 to 5 times faster than SGD." Faster in what unit? Here: weight updates until the
# validation accuracy first reaches 90%, checked after every update.
#
# **Task.** In the simulator, set epochs to 15 and the learning rate to 0.3 (log₁₀ ≈ −0.52), press
# **Reset** and **Train to end**; then choose SGD, and do the same.

# %%
predict(6, "same-lr")

# %%
with answer(6, "same-lr"):
    print(lr_races.race({"sgd": 0.01, "adam": 0.01}, epochs=10).text())
    high = lr_races.race({"sgd": 0.3, "adam": 0.3}, epochs=15)
    print(f"same lr 0.3, 15 epochs: SGD reaches 90% on {high.reached('sgd')} of 5 seeds; Adam on fewer of them:",
          high.reached("adam") < high.reached("sgd"))

# %% [markdown]
# At one shared rate the comparison measures the rate, not the optimizer. At 0.01, this run's Adam rate (torch's
# own default is 0.001), plain SGD never gets there. At 0.3 it is the other way round: SGD gets there on
# every seed, and Adam, thirty times above that rate, fails on some. How many is not printed: at that rate Adam's runs are
# chaotic, and the count moves with the last bits of the arithmetic (another CPU's kernels change it). A fair race gives each optimizer its own good
# rate, and the range test above finds one.

# %%
predict(6, "fair-race")

# %% tags=["answers-sgd-vs-adam"]
with answer(6, "fair-race"):
    print(lr_races.fair_race().text())
    print(lr_races.fair_race(sweep_seed=None).text())

# %% [markdown]
# Each at its own range-test rate, Adam needs fewer updates on every seed. With the rates of one sweep
# (seed 0's, as you would run it once on your problem), SGD needs 5 to 7 times as many updates here; the ratio
# belongs to the rates that sweep picked, and another sweep's rates give another ratio.
# With a fresh sweep on each seed the ratio scatters more, because the suggestion itself moves (one
# seed's steepest point for Adam, 0.012, is far below the others'), but Adam still wins on every seed.
# So the article's "3 to 5 times" is roughly right for this problem, but only at tuned rates; at one
# shared rate, any ratio, or the opposite winner, can come out.
#
# ## Experiment 4: the missing `zero_grad`
#
# With a bug ticked, the simulator runs a healthy twin with the same seed in lockstep: the *ghost*.
#
# **Task.** Tick *Missing zero_grad* and press **Train to end**. Watch the gradient-norm panel.

# %%
predict(6, "zero-grad")

# %%
bugged = Session(TrainConfig(bugs=("missing_zero_grad",)), ghost=True)
bugged.run_to_end()
zero_grad = seeds.zero_grad()
healthy = zero_grad.healthy[0]                      # seed 0's healthy run, trained on its own
with answer(6, "zero-grad"):
    print("ghost identical to a separate healthy run:", [e.loss for e in bugged.ghost.steps] == list(healthy.losses))
    print(zero_grad.trace())
    print(zero_grad.text())

# %% [markdown]
# Every backward adds the new gradient to the sum of all the earlier ones. While the new gradients point
# the same way, the sum grows fast: about a hundredfold over the first 60 steps. Once the model stops
# improving along that direction, the new gradients partly cancel, and the sum grows slowly for the rest
# of the run (how much depends on the seed, see the range). Adam keeps every step within a few times lr,
# so nothing explodes, but it steps along the sign of the whole gradient history, not the current
# gradient: the accuracy stays far below the ghost's. With plain SGD, which steps by lr times the summed
# gradient itself, the same bug acts differently (the quiz asks you to predict how).
#
# ## Experiment 5: evaluation without `no_grad`
#
# The evaluation forgets `torch.no_grad()`. The meter counts the bytes autograd saves for backward during evaluation (on the CPU; on a
# GPU it would read the allocator).
#
# **Task.** Tick *Evaluation without no_grad*, train three epochs and watch the evaluation readout.

# %%
predict(6, "no-grad")

# %%
with answer(6, "no-grad"):
    print(seeds.no_grad().text())

# %% [markdown]
# An article warns: "watch the memory bar climb with every evaluation step … out of memory within
# minutes". It is wrong here. A missing `no_grad` makes every evaluation forward build a graph, but the
# graph of a batch is freed as soon as nothing references it. While batch k+1 runs forward, the variable
# `logits` still holds batch k's output, and with it batch k's graph: the peak is two batches' forward
# graphs (chapter 5, exhibit 3), the same at every evaluation. Memory grows only when something keeps
# each graph alive, such as logging the loss tensor instead of `loss.item()` (chapter 5, exhibit 4). The
# metrics are unchanged: the cost is memory, and compute for graphs nobody uses.
#
# ## Experiment 6: cosine against a constant learning rate
#
# **Task.** Set the learning rate to 0.03 (log₁₀ ≈ −1.52), epochs to 20, and train to the end, once
# with the constant schedule and once with cosine, which lowers the rate to 0 by the end.

# %%
predict(6, "schedules")

# %% tags=["answers-lr-schedule-settles"]
schedules = seeds.schedules()
with answer(6, "schedules"):
    print(schedules.text())

# %% tags=["nbval-ignore-output"]
with answer(6, "schedules"):
    print(schedules.raw_text())

# %% [markdown]
# With a constant rate the last epochs still take large steps around the minimum, so each epoch ends
# somewhere else in the valley: the validation accuracy keeps jumping, and the validation loss jumps
# with it, by more than half its lowest from one epoch to the next, on every seed. Overfitting looks
# different: the validation loss climbs from its lowest point and ends above it (chapter 5, "Validation loss
# and accuracy rising together"), rather than jumping back and forth. The cosine run takes ever smaller steps,
# settles and ends with the lower training loss, on every seed. A validation loss that jumps up and down
# late in training calls for a decaying schedule or a lower rate, not for early stopping.
#
# ## A run, frozen for the page
#
# The live panels need a running kernel. Here is experiment 4's run with *missing zero_grad* against its
# healthy ghost, drawn once, so the chapter also reads on GitHub.

# %%
fig = run_figure(bugged, "missing zero_grad against its healthy ghost, Adam lr 0.01, seed 0")
display(fig)
plt.close(fig)

# %% [markdown]
# ## Exercise: write it yourself
#
# ### Exercise 6.1: the LR range test
#
# Write `lr_range_test(model, loader, loss_fn, optimizer, start_lr, end_lr)`: one pass over `loader`, one
# update per batch, batch i of n trained with the learning rate start_lr · (end_lr / start_lr)^(i / (n − 1)),
# so the rate grows by the same factor from batch to batch: batch 0 uses start_lr, batch n − 1 end_lr
# (n ≥ 2: the formula needs two batches, and the check's loaders have 2 or more). Set the rate of every
# parameter group: the check's optimizer may have two. Return the tuple `(lrs, losses)`: two lists of
# Python floats, the rate each batch was trained with and its loss before its own update. The check reads
# the rate each update really used from inside the optimizer.

# %%
def lr_range_test(model, loader, loss_fn, optimizer, start_lr, end_lr):
    raise NotImplementedError  # replace this line with your code

# %%
from course_utils.exercises import check
check("lr_range_test")

# %% [markdown]
# ## Quiz
#
# The questions ask about settings this chapter did not run: predict, then check them in the simulator.

# %%
from course_utils.widgets.quiz_view import quiz
quiz(6)

# %% [markdown]
# ## Summary
#
# Each line held on all five seeds.
#
# - Adam at lr = 1.0: no NaN (Adam's steps stay within a few times lr); the loss spikes into the
#   hundreds, most hidden ReLUs die, and the run ends far below a healthy one.
# - The LR range test suggests an order of magnitude, not a number; it lands on a wide plateau of good
#   rates, and rates 30 times off either way fail.
# - At one shared rate, SGD against Adam measures the rate: at 0.01 Adam wins, at 0.3 SGD is the
#   reliable one. Each at its own range-test rate, Adam needs fewer updates on every seed; how many times fewer
#   depends on the rates the range test picked (5 to 7 at one sweep's rates).
# - Missing `zero_grad`: the summed gradient grows about a hundredfold in 60 steps, then slowly; Adam
#   stays finite but ends far below its ghost.
# - Missing `no_grad`: same numbers, and two batches' graphs of memory during evaluation, not a leak.
# - A cosine schedule lets a run settle where a constant rate keeps jumping.
