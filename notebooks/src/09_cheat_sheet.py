# %% [markdown]
# # Chapter 9: Cheat sheet
#
# **After this chapter you can** keep the whole course on two printed pages: the terms and the counting
# formulas, the update rules, the first checks of a new run, the operations of a step in order, the
# evaluation loop, a training-loop template that works, the lines that save and resume a run, the bugs and
# what they look like, the schedulers' cadences, the DataLoader's arguments and a production checklist.
#
# Every number and default on the sheet is computed from the code the course runs, and its code is
# executed: below, and in the course's tests. The words (terms, descriptions, signatures, the checklist) are
# written by hand; the tests check them against runs wherever a run can.
#
# **Print it**: `make cheatsheet` writes `build/cheatsheet.html` (one standalone file) and
# `build/cheatsheet.pdf` (two A4 pages, printed by headless Chromium).

# %%
from course_utils import setup_notebook
setup_notebook()

from course_utils.chapters import ch09_cheatsheet as cheatsheet
from course_utils.engine.session import Session, TrainConfig, build

# %% [markdown]
# ## The final quiz, before the sheet
#
# Answer from memory first: the sheet below holds the answers to several of these questions, so answering
# after reading it would test your reading, not what you know. Among them, the question the course started
# with: 20,000 examples, batch 64, K = 4, 10 epochs. Work it out on paper; the sheet's worked example uses
# other numbers on purpose. Your answers are saved; the progress table is at the end of the chapter.

# %%
from course_utils.widgets.quiz_view import course_progress, quiz
quiz(9)

# %% [markdown]
# ## Formulas, with a worked example
#
# N examples, batch size B, E epochs, K micro-batches per update, W ranks. The right-hand column is
# computed by the chapter-0 calculator for N = 50,000, B = 128, E = 3, K = 4 (and W = 2); the memory line
# adds activations measured by the chapter-4 meter to the weights, gradients and Adam state of the course's
# MLP. First, the words: a *step* in PyTorch code is often a micro-step, and an *update* is what changes the
# weights.

# %%
cheatsheet.terms()

# %%
cheatsheet.formulas()

# %% [markdown]
# ## First checks, before a long run
#
# Each figure below is computed now, on the course's spiral MLP.

# %%
cheatsheet.first_checks()

# %% [markdown]
# ## The operations of one step, in order
#
# The order of the course's loop (`course_utils/engine/loop.py`), described by that loop's own docstrings.

# %%
cheatsheet.operations()

# %% [markdown]
# ## The evaluation loop

# %%
cheatsheet.evaluation_loop()

# %% [markdown]
# ## The training-loop template
#
# Gradient accumulation included: `windows` hands out the batches K at a time, each micro-batch's loss is
# weighted by its share of the window's examples, and the epoch's last, shorter window is an update too (the
# flush). It works with any loader, a `batch_sampler` too. `fit` takes a clipping threshold, a per-update
# scheduler and a per-epoch one (ReduceLROnPlateau is handed the validation loss), and `evaluate` leaves the
# model in the mode it found.

# %%
cheatsheet.template()

# %% [markdown]
# The code shown above and the evaluation loop are one string, `cheatsheet.TEMPLATE`. The next cell
# executes it and trains with it: 600 spiral points, B = 64 (the last batch has 24), K = 3 (the
# last window has a single batch), Adam, 3 epochs. Then the course's own loop trains the same
# configuration from the same seed. Then both again, with clipping at 0.5 and a schedule of each cadence.

# %%
exec(cheatsheet.TEMPLATE)          # defines evaluate, windows, train_one_epoch and fit: the code shown above
config = TrainConfig(n_train=600, batch_size=64, accum_steps=3, epochs=3, optimizer="adam", lr=0.01,
                     measure_memory=False)
state = build(config)              # model, loaders and optimizer from the config's seed
history = fit(state.model, state.train_loader, state.val_loader, state.loss_fn, state.optimizer,
              config.epochs, "cpu", config.accum_steps)
course = Session(config)
course.run_to_end()
for epoch, (mine, theirs) in enumerate(zip(history, course.epochs), 1):
    print(f"epoch {epoch}: template val acc {mine[2]:.4f}, course loop val acc {theirs.val_acc:.4f}")
same = [h[:3] for h in history] == [(e.train_loss, e.val_loss, e.val_acc) for e in course.epochs]  # h[3]: the top norm
print("every epoch's losses and accuracy identical to the course's loop:", same)
for schedule in ("onecycle", "cosine"):
    clipped = TrainConfig(n_train=300, batch_size=32, accum_steps=2, epochs=3, optimizer="momentum", lr=0.05,
                          clip_norm=0.5, schedule=schedule, measure_memory=False)
    check = cheatsheet.run_template(clipped)
    print(f"clip 0.5, {schedule} ({'per update' if schedule == 'onecycle' else 'per epoch'}): identical losses, "
          f"accuracies and weights: {check.identical}")

# %% [markdown]
# ## Save and resume
#
# The lines to copy when a run must survive a crash (chapter 7 says why each piece is there). The course's
# tests run them: two epochs, save, then fresh objects after other random draws, resume, two more epochs,
# against four epochs that never stopped:

# %%
cheatsheet.save_resume()

# %%
from course_utils.chapters.ch09_cheatsheet_code import run_save_resume

weights_same, lr_same = run_save_resume()
print("resumed run's weights bitwise equal to the uninterrupted run's:", weights_same, "| same LR:", lr_same)

# %% [markdown]
# ## Check your own loop: the loop doctor
#
# `LoopDoctor` (chapter 5) watches a loop you do not change and names the silent bugs it observes. The
# template above passes, and the doctor changes nothing about the run:

# %%
from course_utils.doctor import LoopDoctor
import torch

state = build(config)
with LoopDoctor(state.model, state.optimizer, train_data=state.train_loader, val_data=state.val_loader) as doctor:
    watched = fit(state.model, state.train_loader, state.val_loader, state.loss_fn, state.optimizer,
                  config.epochs, "cpu", config.accum_steps)
print(doctor.report())
print("same history as without the doctor:", watched == history)

# %% [markdown]
# Now a first-try loop with two classic slips. Put your own loop in its place: the same `with` block
# around it, then `print(doctor.report())`.

# %%
def my_first_loop(model, loader, optimizer, epochs=2):
    losses = []
    for epoch in range(epochs):
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()                # no zero_grad: gradients pile up
            optimizer.step()
            losses.append(loss)            # the tensor, not loss.item()
    return losses


state = build(config)
with LoopDoctor(state.model, state.optimizer, train_data=state.train_loader) as doctor:
    my_first_loop(state.model, state.train_loader, state.optimizer)
print(doctor.report())

# %% [markdown]
# ## The bugs
#
# From the bug registry of chapter 5: what you see first (chapter 5's signatures), and the fix.

# %%
cheatsheet.bug_section()

# %% [markdown]
# ## Scheduler cadences (chapter 7)

# %%
cheatsheet.scheduler_section()

# %% [markdown]
# ## DataLoader arguments
#
# The defaults are read from the installed torch's own `DataLoader` signature; the arguments you will rarely
# set are listed under the table.

# %%
cheatsheet.dataloader_section()

# %% [markdown]
# ## Production checklist (chapter 7)

# %%
cheatsheet.checklist_section()

# %% [markdown]
# ## What you see → why → where the course shows it
#
# The questions learners ask most about their own runs start from a symptom. The course keeps a corpus of
# such questions, collected from public forums and issue trackers, each pointing at the cell whose run
# answers it; this index is generated from it, in chapter order. Find what you see, read why, and go to the
# section that shows it.

# %%
from course_utils.chapters.ch09_symptoms import symptom_section
symptom_section()

# %% [markdown]
# ## The error atlas: paste your error
#
# Every error below that is not marked "not run" was raised just now on the pinned torch by a few lines of a
# training loop, and its fix was run beside it; the entries marked "not run" need a GPU or NCCL, and quote the
# message from the sources they list. torch's words are kept as printed, except what changes from run to run or
# machine to machine (the table's first line names each placeholder: addresses, process ids, temporary paths,
# ports, the CPU count, torch's own source location, a DataLoader worker's traceback frames, and the rest). Each entry is also at the end of
# the chapter whose mechanism it belongs to.

# %%
from course_utils.widgets.explain_view import ExplainView, atlas_reference

atlas_reference()

# %% [markdown]
# Paste a message, or a whole traceback, into the box: it finds the entry whatever your shapes, sizes,
# dtypes, devices, names and paths were, and says so when none fits. From a terminal,
# `python -m course_utils.explain < error.txt` does the same.

# %%
ExplainView()

# %% [markdown]
# ## Your progress through the course
#
# Correct answers per chapter, kept between sessions (press Refresh after answering).

# %%
course_progress()

# %% [markdown]
# ## Summary
#
# - Count: iterations = ceil(N/B) (floor with drop_last), updates per epoch = ceil(iterations/K) with
#   the flush, effective batch = B·K, and B·K·W over W ranks.
# - Step: zero_grad, forward, loss, backward, clip, step, schedule. Evaluate in eval() under no_grad(),
#   averaging per example, and put the mode back.
# - The template above is the loop of the whole course, checked against it with clipping and schedules;
#   the save/resume lines resume bitwise; `make cheatsheet` prints the sheet.
