# %% [markdown]
# # Chapter 2 — Shuffling, samplers and collation
#
# By the end of this chapter you will be able to:
#
# - explain why training data is shuffled, and what a shuffle really is;
# - pick a sampler for ordered, shuffled, imbalanced and multi-GPU data;
# - compute what a weighted sampler puts in a batch, before you run it;
# - write a collate function that pads sequences and returns an attention mask.

# %%
from course_utils import setup_notebook, sig
setup_notebook()

# %% [markdown]
# ## 1. Why shuffle: sorted data teaches the wrong lesson
#
# Our spiral dataset comes grouped by class: first all of class 0, then class 1, then class 2.
# Without shuffling, almost every batch holds a single class.

# %%
import torch
from torch.utils.data import DataLoader

from course_utils.engine.data import make_spiral

spiral = make_spiral(600, seed=0)
for shuffle in (False, True):
    loader = DataLoader(spiral, batch_size=32, shuffle=shuffle, generator=torch.Generator().manual_seed(0))
    first = [sorted(set(y.tolist())) for _, y in list(loader)[:4]]
    print(f"shuffle={shuffle!s:<5} classes in the first 4 batches: {first}")

# %% [markdown]
# Each single-class batch pulls the model towards "everything is class k". The next class undoes it.
# The gradients are biased, batch after batch.
#
# We train the same MLP, with the same seed, for 5 epochs on the 600 points: once in sorted order,
# once shuffled. Then we measure loss and accuracy on the whole training set.

# %% tags=["answers-why-shuffle"]
import math

import matplotlib.pyplot as plt

from course_utils.chapters.ch02_sampling import order_experiment, order_over_seeds

runs = {shuffle: order_experiment(shuffle, n=600, epochs=5, batch_size=32, seed=0) for shuffle in (False, True)}
for shuffle, r in runs.items():
    print(f"{'shuffled' if shuffle else 'sorted':<8}: classes per batch in the last epoch: {r.last_batch_classes}")

fig, ax = plt.subplots()
for shuffle, r in runs.items():
    ax.plot(r.batch_losses, label="shuffled" if shuffle else "sorted by class")
ax.set_xlabel("batch")
ax.set_ylabel("batch loss")
ax.set_title("Same model, same data, different order (seed 0)")
ax.axhline(math.log(3), color="grey", linestyle=":", label="ln 3: guessing")
ax.legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# In its first epoch the sorted run's loss falls inside each class block (one class alone is easy to
# predict) and jumps at every class boundary. After that it hovers near ln 3 = 1.099, the loss of a
# model that guesses among 3 classes. The shuffled run ends far lower on the *whole* set.
#
# Why is the sorted run's accuracy then well above 1/3? Accuracy only asks which class scores
# highest. The weights keep a rough split of the plane from block to block, so the top guess is often
# right even when the probabilities are close to uniform (hence the loss near ln 3). But the
# guesses are lopsided: the most and least predicted classes are far apart, and some class's accuracy is poor
# (the table's two rows).
#
# One seed could be luck, so we count each of these claims on five seeds:

# %%
print(order_over_seeds(range(5)).text())

# %% [markdown]
# Seed 0's own figures, for a feel of the sizes. Training on sorted data is chaotic: another CPU,
# whose float32 sums round differently in the last bit, ends with slightly different digits here,
# so only the counts above are checked.

# %% tags=["nbval-ignore-output"]
print("seed 0 on this machine (an illustration: its last digits are this CPU's)")
for shuffle, r in runs.items():
    print(f"  {'shuffled' if shuffle else 'sorted':<8}: final loss {sig(r.final_loss, 3)}, accuracy {sig(r.final_acc, 3)}, "
          f"accuracy per class {[sig(a, 3) for a in r.class_accuracy]}, "
          f"share of predictions per class {[sig(a, 3) for a in r.predicted_share]}")
per_epoch = math.ceil(600 / 32)
print(f"  sorted, mean batch loss of its last epoch ({per_epoch} batches): "
      f"{sig(sum(runs[False].batch_losses[-per_epoch:]) / per_epoch, 3)}")

# %% [markdown]
# ## 2. A shuffle is one permutation per epoch
#
# `RandomSampler` draws one random permutation of all indices at the start of each epoch.
# Batches are consecutive slices of it. So within an epoch every example appears exactly once,
# and the next epoch uses a new permutation.

# %%
from torch.utils.data import RandomSampler

sampler = RandomSampler(range(10), generator=torch.Generator().manual_seed(0))
for epoch in (1, 2):
    order = list(sampler)
    print(f"epoch {epoch}: {order}  each index once: {sorted(order) == list(range(10))}")

# %% [markdown]
# "Every example once per epoch" shows in the loss curve. Within epoch 1 each batch is new to the model; the
# first batch of epoch 2 is made of examples it has already fitted. A model big enough to memorise its data
# (a fine-tuned language model often is) then drops its training loss in a step at each epoch boundary. The
# extreme case: 256 examples whose 4 labels are random, so nothing can be learned, only memorised; an MLP with
# 256 hidden units, batches of 32 (8 per epoch), Adam, 2 epochs, 3 seeds. Compared: the mean loss of epoch
# 1's last 3 batches and of epoch 2's first 3, and the change over as many batches inside epoch 1.

# %% tags=["answers-epoch-stairs"]
def epoch_stairs(seed, n=256, batch=32, epochs=2):
    torch.manual_seed(seed)
    x, y = torch.randn(n, 32), torch.randint(0, 4, (n,))
    held_x, held_y = torch.randn(64, 32), torch.randint(0, 4, (64,))
    net = torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(), torch.nn.Linear(256, 4))
    opt = torch.optim.Adam(net.parameters(), lr=0.01)
    losses, held = [], []
    order = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        for idx in torch.randperm(n, generator=order).split(batch):
            loss = torch.nn.functional.cross_entropy(net(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        with torch.no_grad():
            held.append(torch.nn.functional.cross_entropy(net(held_x), held_y).item())
    return losses, held


per_epoch = 8
across, inside, held_flat = 0, 0, 0
with torch.random.fork_rng():
    for seed in range(3):
        losses, held = epoch_stairs(seed)
        mean = lambda values: sum(values) / len(values)
        across += mean(losses[5:8]) - mean(losses[8:11]) > 0.2     # epoch 1's last 3 batches, epoch 2's first 3
        inside += abs(mean(losses[0:3]) - mean(losses[5:8])) < 0.2  # epoch 1's first 3, its last 3
        held_flat += min(held) > 1.3
print(f"training loss, epoch 1's last 3 batches to epoch 2's first 3: falls by more than 0.2 on {across} of 3 seeds")
print(f"over 3 batches inside epoch 1 it moves by less than 0.2 on {inside} of 3 seeds")
print(f"held-out loss never below 1.3 (log 4 = 1.39: chance): {held_flat} of 3 seeds")

# %% [markdown]
# The stairs are memorisation: the loss falls when the model meets examples it has seen, while the held-out loss,
# on examples it never sees, stays at chance at every epoch's end (measured there only). Real data mixes both: the part of the curve that generalises
# falls smoothly, the part that memorises falls at the boundaries. Stairs with a flat or rising validation loss
# are a warning of overfitting, not a bug in the loader.

# %% [markdown]
# ## 3. The samplers
#
# - `SequentialSampler`: 0, 1, 2, … (what `shuffle=False` uses).
# - `RandomSampler`: a new permutation each epoch (what `shuffle=True` uses).
# - `WeightedRandomSampler`: draws indices with chosen probabilities (imbalanced data).
# - `DistributedSampler`: gives each of W processes its own share (multi-GPU).
#
# A `BatchSampler` wraps any of them and cuts its indices into groups:

# %%
from torch.utils.data import BatchSampler, SequentialSampler

print("sequential:     ", list(SequentialSampler(range(10))))
print("batches of 4:   ", list(BatchSampler(SequentialSampler(range(10)), batch_size=4, drop_last=False)))
print("with drop_last: ", list(BatchSampler(SequentialSampler(range(10)), batch_size=4, drop_last=True)))

# %% [markdown]
# Three more, and what trips people with them. `SubsetRandomSampler(indices)` shuffles only the indices you
# give it, anew each epoch (a validation split drawn from one dataset). A sampler takes the place of
# `shuffle=`: passing both is refused. `RandomSampler(replacement=True)` draws each index independently, so an
# "epoch" of 10 draws misses some examples and repeats others; without replacement, `num_samples` larger than
# the dataset chains whole permutations. A `Sampler` you write needs `__len__` only if someone asks for the
# loader's length, as a progress bar or a scheduler sized in batches does:

# %%
from course_utils.chapters.ch01_dataset_tools import sampler_knobs

for what, result in sampler_knobs().items():
    print(f"{what}: {result}")

# %% [markdown]
# A sampler is the place for any order you want, a curriculum for instance: every example scored for
# difficulty, and each epoch running from easy to hard. Sort the indices by difficulty, break ties at random
# with a generator seeded by the epoch (so epochs differ, and a resumed run repeats them), and on several
# processes deal the sorted order out round-robin, so that every rank climbs at the same pace.
# `CurriculumSampler` in `course_utils/chapters/ch02_custom_samplers.py` does this in 20 lines; 64 examples at 4
# levels, through a real `DataLoader`:

# %% tags=["answers-curriculum-sampler"]
from course_utils.chapters.ch02_custom_samplers import curriculum_lines

print("\n".join(curriculum_lines()))

# %% [markdown]
# The order is the sampler's; the loader's `shuffle=True` would replace it with a permutation, which is why a
# `DataLoader` refuses both together (section 4 runs it). A trainer that builds its own shuffled sampler has to
# be given this one instead. Shuffling inside a difficulty level is what keeps the batches of one level from
# repeating epoch after epoch; call `set_epoch(epoch)` before each epoch, as with `DistributedSampler`.

# %% [markdown]
# ## 4. Imbalanced data: 900 dogs, 100 cats
#
# Label 0 plays the dogs (900 examples) and label 1 the cats (100).
#
# Shuffled, a batch of 32 is a random 32 of the 1,000. Cats are 10% of the data, so a batch holds
# 32 × 0.1 = 3.2 cats and 28.8 dogs on average. The model hears about cats only now and then.

# %%
from course_utils.engine.data import make_imbalanced
from course_utils.chapters.ch02_sampling import class_counts, class_weights, expected_batch_counts, minority_odds

labels = make_imbalanced(n_major=900, n_minor=100, seed=0).tensors[1]
counts = class_counts(labels)
print("class counts:", counts)
print("expected per batch of 32, shuffled:", [sig(v) for v in expected_batch_counts(counts, 32, weighted=False)])

# %% [markdown]
# ### The weighted sampler
#
# Give each example the weight 1 / (size of its class): 1/900 for a dog, 1/100 for a cat.
#
# A cat is then 9 times as likely to be drawn as any one dog. There are 9 times fewer cats, so the two
# classes carry the same total weight, and a batch is 50/50 in expectation: 16 cats and 16 dogs.

# %%
weights = class_weights(labels)
print("class weights:", [sig(w) for w in weights])
print("a cat vs one dog:", sig(minority_odds(counts)), "times as likely")
print("total weight per class:", [sig(w * c) for w, c in zip(weights, counts)])
print("expected per batch of 32, weighted:", [sig(v) for v in expected_batch_counts(counts, 32, weighted=True)])

# %% [markdown]
# ### Writing it yourself: per-example weights and `DataLoader(sampler=...)`
#
# `WeightedRandomSampler` wants **one weight per example**, not one per class. You build it by
# indexing the class weights with the labels, and hand the sampler to the `DataLoader`:

# %% tags=["answers-weighted-epoch", "answers-imbalanced-sampler"]
from torch.utils.data import WeightedRandomSampler

from course_utils.chapters.ch02_sampling import sample_weights

class_w = torch.tensor([1 / c for c in counts], dtype=torch.double)   # [1/900, 1/100]
example_w = class_w[labels]                                           # one weight per example: 1,000 of them
print("per-example weights:", example_w.shape[0], "| same as course_utils:", torch.equal(example_w, sample_weights(labels)))
sampler = WeightedRandomSampler(example_w, num_samples=len(labels), replacement=True,
                                generator=torch.Generator().manual_seed(0))
balanced = DataLoader(make_imbalanced(n_major=900, n_minor=100, seed=0), batch_size=32, sampler=sampler)
cats = [int(y.sum()) for _, y in balanced]
print(f"one epoch: {len(cats)} batches, cats per batch {cats[:8]} ... mean {sig(sum(cats) / len(cats), 3)}")
replay = list(WeightedRandomSampler(example_w, num_samples=len(labels), replacement=True,
                                   generator=torch.Generator().manual_seed(0)))     # the same draws again
ys, seen = labels.tolist(), set(replay)
print(f"distinct examples in that epoch: {len(seen)} of {len(ys)} (dogs {sum(ys[i] == 0 for i in seen)} of "
      f"{counts[0]}, cats {sum(ys[i] == 1 for i in seen)} of {counts[1]}); cats drawn {sum(ys[i] for i in replay)} times")
drawn = torch.multinomial(example_w, len(labels), replacement=True, generator=torch.Generator().manual_seed(0))
print("torch.multinomial(weights, len(labels), replacement=True) from the same generator: the same indices:",
      drawn.tolist() == replay)

# %% [markdown]
# `num_samples` is *your* choice of epoch length: the sampler draws that many indices and the
# epoch ends. Here it is `len(labels)` = 1,000 draws (32 batches); below we ask for 500 batches'
# worth (16,000 draws) to measure averages, and call that "500 batches", not an epoch. Drawn with
# replacement, such an "epoch" is not one pass over the data: half its draws are the 100 cats, so each comes back
# about five times, while most dogs are not drawn at all (the last line). The model sees every dog only over
# several epochs; the weights trade passes over the majority for balanced batches.
#
# The sampler is one call to `torch.multinomial` (the last line: the same indices). Third-party "imbalanced
# dataset" samplers (torchsampler's `ImbalancedDatasetSampler`, and the copies of it in many repositories) make
# that same call after computing the weights themselves: 1 / the count of each example's class, counted over the
# examples they may draw (`indices`, all by default), as many draws as those examples unless `num_samples` says
# otherwise, with replacement. They are this sampler with the weights computed for you; `labels` or
# `callback_get_label` say where the labels come from. One difference: they pass no generator, so their draws
# follow torch's global random state, where `WeightedRandomSampler` takes a `generator`.
#
# Two mistakes people make first, run here. Passing both a sampler and `shuffle=True`:

# %%
try:
    DataLoader(range(1000), batch_size=32, sampler=sampler, shuffle=True)
except ValueError as err:
    print("ValueError:", err)

# %% [markdown]
# And passing the two **class** weights where per-example weights belong. Nothing fails: the
# sampler reads `[1/900, 1/100]` as the weights of examples 0 and 1, and draws only those two.

# %% tags=["answers-weighted-sampler"]
wrong = WeightedRandomSampler(class_w, num_samples=1000, replacement=True, generator=torch.Generator().manual_seed(0))
print("indices drawn with class weights:", sorted(set(wrong)))

# %% [markdown]
# Expectations are averages. We measure them with the real samplers over many batches:
# one shuffled epoch (32 batches) and 500 weighted batches.

# %%
from course_utils.chapters.ch02_sampling import batch_composition

shuffled = batch_composition(labels, "shuffled", batch_size=32, seed=0)
weighted = batch_composition(labels, "weighted", batch_size=32, n_batches=500, seed=0)
for c in (shuffled, weighted):
    print(f"{c.strategy:<8}: {len(c.counts)} batches, {sum(c.totals)} draws, cat share {sig(c.share(1))} "
          f"-> per 32 draws: {sig(32 * c.share(1))} cats, {sig(32 * c.share(0))} dogs")
print("shuffled: cats per batch ranged from", min(b[1] for b in shuffled.counts), "to", max(b[1] for b in shuffled.counts))
print("weighted: each cat drawn", sig(weighted.totals[1] / counts[1]), "times on average, each dog",
      sig(weighted.totals[0] / counts[0]), "times")

# %% [markdown]
# The weighted sampler draws *with replacement*: the same 100 cats come back again and again, about
# 9 times as often as each dog. That repetition is the price of balance: a model can memorise the
# few minority examples (overfit them). This chapter does not train on this data, so that risk is
# stated here, not shown.
#
# `replacement=True` is the usual choice, not a rule. With `replacement=False` every example is drawn at
# most once. Over a full epoch (1,000 draws) the weights can then only change the *order*: heavy cats come
# early, and the last batches are all dogs.

# %%
no_repl = batch_composition(labels, "weighted", batch_size=32, n_batches=None, replacement=False, seed=0)
print("replacement=False, one epoch:", len(no_repl.counts), "batches")
print("first 3 batches [dogs, cats]:", no_repl.counts[:3])
print("last 3 batches  [dogs, cats]:", no_repl.counts[-3:])
print("totals:", no_repl.totals, "| distinct examples:", no_repl.distinct)

# %% [markdown]
# ### Segmentation: one label per pixel, one weight per image
#
# A segmentation mask has many classes per image, so "the class of an example" does not exist and the recipe above
# needs one more step: give each class the weight 1 / (the images showing it), and each image the largest weight
# among its classes (`segmentation_weights` in `course_utils/chapters/ch02_custom_samplers.py`). 400 masks, a rare class
# 2 as a small blob in a tenth of them, 300 batches of 16 drawn each way (uniformly, then with the weights):

# %% tags=["answers-segmentation-sampler"]
from course_utils.chapters.ch02_custom_samplers import segmentation_sampler_lines

print("\n".join(segmentation_sampler_lines()))

# %% [markdown]
# The per-image weights balance the *images*: half of each batch now shows class 2, five times as many as uniform
# draws give.
# They cannot balance the *pixels*: class 2 fills a small corner of the images that show it, so its share of the
# pixels stays a few percent. Pixel imbalance inside an image is the loss's job (class weights in
# `CrossEntropyLoss(weight=...)`, or a Dice loss); the sampler decides which images a batch holds. The sampler goes
# to `DataLoader(sampler=...)` without `shuffle=True`, as above.

# %% [markdown]
# ### Try it: sampling strategies
#
# The three samplers side by side. Change the batch size, the number of batches, and replacement.

# %%
from course_utils.widgets.sampling_view import sampling_strategies

sampling_strategies(batch_size=32, n_batches=30)

# %% [markdown]
# ## 5. DistributedSampler: one shard per process
#
# With W processes (ranks), each must see a different part of the data. `DistributedSampler` makes one
# shared order, and rank r takes every W-th index starting at r.
#
# Take N = 10 and W = 4. Each rank must get the same count: ceil(10 / 4) = 3. That is 12 slots for
# 10 examples, so the sampler pads by repeating the first 2 indices: they are seen twice this epoch. When
# more padding is needed than there are examples, it repeats the whole list as often as needed: N = 1 and
# W = 3 give [0], [0], [0] (printed below).
#
# In a real multi-GPU script each process builds its own sampler with its rank, and calls
# `set_epoch` before each epoch. Here one process plays the four ranks:

# %% tags=["answers-distributed-padding"]
from torch.utils.data import DistributedSampler

for rank in range(4):
    dist_sampler = DistributedSampler(range(10), num_replicas=4, rank=rank, shuffle=False)
    rank_loader = DataLoader(range(10), batch_size=2, sampler=dist_sampler)
    print(f"rank {rank}: batches {[b.tolist() for b in rank_loader]}")

# %% [markdown]
# `course_utils.chapters.ch02_sampling.shard_view` asks the same sampler for every rank and counts the padding:

# %%
from course_utils.chapters.ch02_sampling import shard_view

ordered = shard_view(10, 4, shuffle=False)
for r, shard in enumerate(ordered.shards):
    print(f"rank {r}: {shard}")
print("indices per rank:", ordered.per_rank, "| padding copies:", ordered.padding,
      "| seen twice:", ordered.duplicates)
print("disjoint except for the padding copies:", ordered.disjoint_up_to_padding())
print("N = 1, W = 3:", shard_view(1, 3, shuffle=False).shards)

# %% [markdown]
# With `drop_last=True` it drops instead of padding: 2 per rank, and 2 examples left out.

# %%
dropping = shard_view(10, 4, shuffle=False, drop_last=True)
print("drop_last=True:", dropping.shards, "| dropped:", dropping.dropped, "| padding:", dropping.padding)

# %% [markdown]
# ### set_epoch: a new shuffle needs your call
#
# With `shuffle=True` the order is seeded by `seed + epoch`. The sampler cannot know the epoch:
# you tell it with `sampler.set_epoch(epoch)` before each epoch. Forget it, and every epoch repeats
# the first epoch's order. Rank 0 of 2, 12 examples, 3 epochs:

# %% tags=["answers-set-epoch"]
from course_utils.chapters.ch02_sampling import rank_orders

for call in (False, True):
    print(f"set_epoch called={call!s:<5}:", rank_orders(12, 2, rank=0, epochs=3, call_set_epoch=call))

# %% [markdown]
# ### A weighted sampler on several ranks
#
# A `DataLoader` takes one sampler. With imbalanced data on W ranks you want both: the weights of section 4
# and one share per rank. A common first attempt builds the same `WeightedRandomSampler` on every rank, with
# `num_samples` divided by W and the script's seed, since every rank runs the same script.

# %%
from course_utils.widgets.predict_view import predict
predict(2, "weighted-ranks")

# %% [markdown]
# The 900/100 dogs and cats again, 1,000 draws per epoch on 4 ranks, five seeds. First the attempt above;
# then `DistributedWeightedSampler` (in `course_utils.engine.rank_shards`), which draws one weighted
# sample of 1,000 from a generator every rank seeds with `seed + epoch` (like `DistributedSampler`), and
# deals it out: rank r keeps draws r, r + 4, r + 8, ...

# %% tags=["answers-weighted-distributed-sampler"]
from course_utils.widgets.predict_view import answer

with answer(2, "weighted-ranks"):
    from course_utils.chapters.ch02_weighted_ranks import one_process_draw, same_seed_weighted, sharded_weighted

    seeds = range(5)
    naive = [same_seed_weighted(example_w, 1000, 4, seed) for seed in seeds]
    dealt = [sharded_weighted(example_w, 1000, 4, seed) for seed in seeds]
    print("same WeightedRandomSampler on every rank: all 4 ranks drew the same 250 indices on",
          sum(d.identical for d in naive), "of 5 seeds")
    print("  distinct examples per epoch, all ranks together:", [len(set(d.together)) for d in naive])
    print("DistributedWeightedSampler: ranks drew the same indices on", sum(d.identical for d in dealt), "of 5 seeds")
    print("  distinct examples per epoch, all ranks together:", [len(set(d.together)) for d in dealt])
    share = [len(set(a.together)) / len(set(b.together)) for a, b in zip(naive, dealt)]
    print("  the same-seed ranks' distinct examples, as a share of the dealt sampler's: between 1/4 and 1/2 on",
          sum(0.25 < x < 0.5 for x in share), "of 5 seeds")
    print("  the 4 shares together are one process's draw of 1,000 (as a multiset) on",
          sum(sorted(d.together) == sorted(one_process_draw(example_w, 1000, seed)) for d, seed in zip(dealt, seeds)),
          "of 5 seeds")
    shares = [float(labels[d.together].double().mean()) for d in dealt]
    print("  cat share of all draws between 0.45 and 0.55 on", sum(0.45 < x < 0.55 for x in shares), "of 5 seeds")
    print("  set_epoch(1) draws a new sample on", sum(sharded_weighted(example_w, 1000, 4, seed, epoch=1).together
                                                   != d.together for d, seed in zip(dealt, seeds)), "of 5 seeds")

# %% [markdown]
# The same sampler on every rank draws the same 250 indices on every rank: four processes compute the same
# batches, and the epoch holds about 185 different examples instead of about 485. (A generator seeded
# once per rank with `seed + rank` also makes the draws independent: with replacement, W independent draws of
# N/W are distributed like one draw of N.) The sharded sampler makes one draw for all ranks and deals it
# out, so its first N draws are one process's draws whatever the number of ranks (the ranks draw W·⌈N/W⌉ in
# all, a few more when W does not divide N), with no seed to keep per rank;
# together the ranks follow the weights (half cats) exactly as one process would, and each rank computes
# its own share. Exercise 2.4 asks you to write it.
#
# Hugging Face Accelerate does the dealing for you, per batch: `accelerator.prepare(loader)` wraps the
# loader's batch sampler so that process p takes batches p, p + W, p + 2W, ... of one sampler whose generator
# it keeps alike on every process (it copies process 0's generator state to the others as each epoch starts,
# seeded or not). Then `num_samples` must be the whole epoch's, not divided by W: divided as in
# the attempt above, the epoch shrinks W-fold once more. Is there a `set_epoch` to call with a prepared loader?
# A shuffled loader prepared by Accelerate (one process here), three epochs, nothing called between them:

# %% tags=["answers-accelerate-set-epoch"]
from course_utils.chapters.ch02_sampling import accelerate_epoch_orders

for what, value in accelerate_epoch_orders().items():
    print(f"{what}: {value}")

# %% [markdown]
# With one process, `prepare` leaves the sampling alone: the new order each epoch comes from torch's global
# generator, as with a plain `DataLoader(shuffle=True)`, so this run shows torch's behaviour, not Accelerate's.
# Across processes Accelerate gives the sampler a generator of its own, synchronises it at each epoch's start and
# calls `set_epoch` itself (read from its source, not run here), so no call is needed there either. `set_epoch` stays your job only for a `DistributedSampler` you
# build yourself and keep out of `prepare`.

# %% [markdown]
# ### Try it: the DistributedSampler view
#
# Change N and W, press **Next epoch**, and untick `set_epoch` to see the shards freeze.

# %%
from course_utils.widgets.sampling_view import distributed

distributed(n=10, world_size=4)

# %% [markdown]
# ## 6. Collation: from a list of examples to a batch
#
# `default_collate` stacks examples. That only works when every example has the same shape.

# %%
from torch.utils.data import default_collate

equal = default_collate([(torch.tensor([1.0, 2.0]), 0), (torch.tensor([3.0, 4.0]), 1)])
print("equal shapes:", equal)
try:
    default_collate([(torch.tensor([1, 2, 3]), 0), (torch.tensor([4, 5]), 1)])
except RuntimeError as err:
    print("different lengths -> RuntimeError:", str(err).split(",")[0])

# %% [markdown]
# What `default_collate` does with an example depends on what it is made of. It looks at the first example and
# recurses: numbers, NumPy arrays and tensors are stacked into one tensor; strings and bytes are left alone; a
# dict is collated key by key, a tuple or a list field by field. Two examples of each kind
# (`course_utils/chapters/ch02_collate_rules.py`); watch the dtypes too: Python floats and NumPy's default arrays
# arrive as float64, which a float32 model refuses until they are cast (`.float()`, or `np.float32` data):

# %% tags=["answers-collate-rules"]
from course_utils.chapters.ch02_collate_rules import collate_lines, word_list_lines

print("\n".join(collate_lines()))

# %% [markdown]
# The `lists` row is the surprise. A list example is read as a record whose fields are its positions, like a
# tuple `(x, y)`: position 0 of every example is collated together, then position 1, and strings grouped by
# `zip` come out as tuples. A dataset whose `__getitem__` returns a sentence as a list of four words therefore
# gets four tuples of one word each at `batch_size=1`, and refuses sentences of different lengths. To keep each
# example a list, batch with `collate_fn=list` (the batch is then a list of examples), or turn batching off with
# `batch_size=None` (each example then goes through `default_convert` only: NumPy arrays become tensors, the rest,
# a list of words included, comes through as it was):

# %%
print("\n".join(word_list_lines()))

# %% [markdown]
# Words usually become token ids before the loader (a tokenizer in `__getitem__`, or in the `collate_fn`, which
# then pads them as the next cells do); a `collate_fn` that keeps strings is for the few places that still need
# them, such as the raw text logged beside a prediction.

# %% [markdown]
# Text and other sequences come in different lengths. A **pad collate** fills each sequence up to the
# longest one *in the batch* with a padding id (0 here), and returns:
#
# - `input_ids`: the padded tokens, shape (batch, longest);
# - `attention_mask`: 1 for a real token, 0 for padding. It is for the **model**: attention and
#   pooling use it to skip padding. A token-level loss ignores padding differently: its labels at
#   padded positions are set to -100, which `CrossEntropyLoss(ignore_index=-100)` skips;
# - `labels`: one label per sequence (here one per sequence, so no padding in the labels).
#
# Here it is, written out: the function you pass as `collate_fn`.

# %% tags=["answers-pad-collate"]
from course_utils.engine.data import PAD_ID, make_sequences


def my_pad_collate(examples):
    """A list of (tokens, label) pairs -> padded input_ids, attention_mask and labels."""
    longest = max(len(tokens) for tokens, _ in examples)
    input_ids = torch.full((len(examples), longest), PAD_ID, dtype=torch.long)
    attention_mask = torch.zeros((len(examples), longest), dtype=torch.long)
    for row, (tokens, _) in enumerate(examples):
        input_ids[row, :len(tokens)] = tokens
        attention_mask[row, :len(tokens)] = 1
    labels = torch.tensor([int(label) for _, label in examples])
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


sequences = make_sequences(200, min_len=3, max_len=40, vocab=50, seed=0)
small = make_sequences(3, min_len=2, max_len=6, vocab=50, seed=1)
print("lengths:", [len(small[i][0]) for i in range(3)])
batch = next(iter(DataLoader(small, batch_size=3, collate_fn=my_pad_collate)))
for key, value in batch.items():
    print(f"{key}:\n{value}")

# %% [markdown]
# The package's `pad_collate`, which the rest of the chapter uses, is the same function (imported as
# `course_pad_collate`, so that exercise 2.1's `pad_collate` below does not collide with it):

# %%
from course_utils.chapters.ch02_sampling import pad_collate as course_pad_collate

theirs = course_pad_collate([small[i] for i in range(3)])
print("identical to course_utils.chapters.ch02_sampling.pad_collate:",
      all(torch.equal(batch[k], theirs[k]) for k in batch))

# %% [markdown]
# For a token-level loss the labels are padded too, and with what decides what the loss learns. An SFT batch
# (three sequences of 2, 4 and 6 tokens, padded to 6) whose labels are padded with -100, then with the pad id,
# then with the prompt's labels masked as well; `cross_entropy`'s `ignore_index` is -100 by default.
# Hugging Face's `DataCollatorForSeq2Seq` pads labels with its `label_pad_token_id`, -100 by default (its
# documentation; transformers is not installed here):

# %% tags=["answers-label-padding"]
from course_utils.chapters.ch02_packing import label_padding_lines

print("\n".join(label_padding_lines()))

# %% [markdown]
# Padded with -100, the pad positions drop out of the mean; padded with the pad id, they are 6 more targets, and
# the model is trained to predict padding. The prompt is masked the same way, in the dataset, before the
# collate pads: the two together leave only the response tokens in the loss. `attention_mask` is a separate
# matter, for the model's attention; it does not touch the loss.
#
# Which positions count as padding matters most when the pad token *is* the end-of-sequence token, the usual
# move when a tokenizer has none (`tokenizer.pad_token = tokenizer.eos_token`). Then the common idiom
# `labels[labels == pad_id] = -100` masks every real end token along with the padding. Four short sequences,
# each ending with the end token and padded with it, a tiny GRU language model trained on each masking rule, then
# greedy generation from each sequence's first letter (at most 12 tokens; `course_utils/chapters/ch02_pad_eos.py`):

# %% tags=["answers-pad-eos-labels"]
from course_utils.chapters.ch02_pad_eos import pad_eos_lines

print("\n".join(pad_eos_lines(seeds=range(5))))

# %% [markdown]
# Masked by id, the end token never appeared as a target, so the model never learned to emit it (every other
# class's logit is pushed down at each target, the end token's included), and generation runs until its length
# limit, looping. Masked by the attention mask, the first end token of each sequence stays in the loss and every
# generation stopped where its training sequence did. Mask the labels with the attention mask (or, with right
# padding, a mask of the positions after each sequence's first end token), not by the token's id, whenever the pad
# and end tokens share an id; or give the tokenizer a pad token of its own. The id idiom is also what transformers'
# `DataCollatorForLanguageModeling(mlm=False)` does (read from its source, not run: transformers is not installed
# here), so that collator with `pad_token = eos_token` trains this bug. And check that your sequences end with the
# end token at all: a tokenizer that does not append it gives either mask nothing to keep.
#
# Graphs are collated without padding: PyTorch Geometric stacks every graph's node features into one tensor and
# keeps a batch vector, each node's graph index (DGL keeps each graph's node count instead). Whatever reduces per graph (pooling, a loss per
# graph) needs the number of graphs, and a reduction that reads it from the largest index loses the graphs at the
# end that have no nodes. Three graphs of 0, 3 and 0 nodes:

# %% tags=["answers-segment-count"]
from course_utils.chapters.ch02_packing import segment_sum_lines

print("\n".join(segment_sum_lines()))

# %% [markdown]
# Sized from the index, the batch of 3 graphs pools to 2 rows and no longer lines up with its 3 labels. Pass the
# number of graphs (PyTorch Geometric's pooling functions take it as `size=`, `torch.bincount` as `minlength=`),
# or keep empty graphs out of the dataset.

# %% [markdown]
# ### Padding waste, and bucketing
#
# Padding slots cost compute and memory but carry nothing. We run one epoch of 200 sequences
# (3 to 40 tokens) through a DataLoader with `pad_collate`, batch size 16, and count real tokens
# against all slots, read from the attention masks.
#
# **Bucketing** groups sequences of similar length into the same batch: shuffle, take a pool of
# 8 batches' worth, sort the pool by length, cut it into batches, then shuffle the batches.

# %% tags=["answers-bucketing"]
from course_utils.chapters.ch02_sampling import padding_stats

for bucketing in (False, True):
    s = padding_stats(sequences, batch_size=16, bucketing=bucketing, seed=0)
    print(f"{'bucketed' if bucketing else 'shuffled':<8}: {len(s.masks)} batches, {s.real_tokens} real tokens in "
          f"{s.padded_tokens} slots -> {s.pad_tokens} padding, waste {sig(100 * s.waste)}%")

# %% [markdown]
# ### Try it: the padding view
#
# Dark cells are tokens, light cells padding, every batch on the same length scale. Tick **bucket by
# length** and watch the light cells shrink.

# %%
from course_utils.widgets.sampling_view import padding

padding(batch_size=16, max_len=40)

# %% [markdown]
# ### Padding and packing for an RNN
#
# `torch.nn.utils.rnn` does the padding for you, and **packing** goes further: a `PackedSequence` holds only the
# real steps, so an RNN stops at each sequence's own end. Three sequences of lengths 2, 5 and 3, in dataset order
# (unsorted), then one GRU over the same batch, padded and packed, 5 seeds:

# %% tags=["answers-pack-unsorted"]
from course_utils.chapters.ch02_packing import padding_facts, rnn_last_state

for fact, value in padding_facts().items():
    print(f"{fact}: {value}")
runs = [rnn_last_state(seed) for seed in range(5)]
print(f"GRU, 5 seeds: packed, final hidden state = last real step for all 3 sequences on "
      f"{sum(r['packed h_n == last real step, all 3'] for r in runs)} of 5;",
      f"padded, the 2 shorter sequences are off by more than 0.01 on "
      f"{sum(r['shorter sequences off by > 0.01'] for r in runs)} of {sum(r['shorter sequences'] for r in runs)}")

# %% [markdown]
# `pack_padded_sequence` refuses unsorted lengths unless you pass `enforce_sorted=False` (then it sorts and
# remembers the order: `unsorted_indices` puts the outputs back in yours). On a plain padded batch the GRU's
# final state is the state after the padding, not after the last word: only the longest sequence is unaffected.

# %% [markdown]
# ### Targets of different sizes
#
# In object detection every image has its own number of boxes: a [k, 4] tensor of corners and k labels,
# with k = 0 for an empty image.

# %%
predict(2, "collate-boxes")

# %% [markdown]
# `BoxesDataset` holds 8 small images, image i with i % 4 boxes. The default collate against a
# `collate_fn` that stacks the images and keeps the targets as a list, one dict per image:

# %% tags=["answers-collate-variable-targets"]
from course_utils.widgets.predict_view import answer

with answer(2, "collate-boxes"):
    from course_utils.chapters.ch02_weighted_ranks import BoxesDataset, detection_collate

    boxes = BoxesDataset(8)
    try:
        next(iter(DataLoader(boxes, batch_size=4)))
    except RuntimeError as err:
        print("default_collate:", type(err).__name__, "| boxes per image:", [len(boxes[i][1]["boxes"]) for i in range(4)])
    for images, targets in DataLoader(boxes, batch_size=4, collate_fn=detection_collate):
        print("detection_collate: images", tuple(images.shape), "| targets: a list of", len(targets),
              "dicts, boxes per image", [tuple(t["boxes"].shape) for t in targets])
    print("every box arrives once:", sum(len(t["boxes"]) for _, ts in DataLoader(boxes, batch_size=4, collate_fn=detection_collate)
                                         for t in ts) == sum(len(boxes[i][1]["boxes"]) for i in range(len(boxes))))

# %% [markdown]
# `detection_collate` is two lines: `default_collate` on the images, a plain list for the targets (images of
# different sizes cannot be stacked either: then they become a list too, as torchvision's reference scripts
# collate with `tuple(zip(*batch))`). The
# empty image keeps its [0, 4] tensor, and the loss is then computed image by image (torchvision's
# detection models take such a list). Padding the boxes to a fixed count works too, but then every
# loss must skip the padded boxes, as a token loss skips padded tokens.
#
# ### Graphs: a batch of seed nodes carries their neighbours
#
# A graph network predicts a node from its neighbourhood: after two rounds of message passing, from every node
# within two hops. So a mini-batch of seed nodes must also hold those neighbours, and a neighbour of seeds in
# several batches is in each of them. A 200-node random graph, seeds in batches of 32 in index order
# (`shuffle=False`), every neighbour up to 2 hops taken, as PyG's `NeighborLoader` does with
# `num_neighbors=[-1, -1]` (`course_utils/chapters/ch02_neighbour_batches.py`, checked against powers of the
# adjacency matrix):

# %% tags=["answers-neighbour-batches"]
from course_utils.chapters.ch02_neighbour_batches import neighbour_batch_lines

print("\n".join(neighbour_batch_lines()))

# %% [markdown]
# An epoch of neighbour batches returns several times more rows than the graph has nodes, and almost every node
# comes back in more than one batch: collecting `batch.x` over an epoch gives more rows than nodes by design. Only
# the seeds are the batch's own predictions; the other rows are context. PyG's `NeighborLoader` lists the seeds
# first (its documentation: the first `batch.batch_size` nodes of each sampled subgraph are the input nodes; their
# ids are `batch.n_id[:batch.batch_size]`), so compute the loss and metrics on `out[:batch.batch_size]`. A loss on
# every row counts a well-connected node in most of the batches and an isolated one once (the third line): it
# weighs nodes by how connected they are. Worse, when the seeds are the training nodes (`input_nodes=train_mask`), the context
# rows include validation and test nodes (the last line), and a loss on every row trains on their labels.

# %% [markdown]
# ## Errors you will meet here
#
# The errors this chapter's mechanisms raise, each produced just now on the pinned torch and shown in torch's
# own words, with its fix run beside it. It stays folded until you need it; chapter 9 holds the whole atlas,
# and a box that finds the entry for a message you paste.

# %%
from course_utils.widgets.explain_view import errors_here

errors_here(2)

# %% [markdown]
# ## Exercises: write it yourself
#
# Each exercise is a stub for you to edit and a check against torch's own tools (`pad_sequence`,
# `WeightedRandomSampler`, `DistributedSampler`) on cases you do not see. Write them without those tools: the
# check compares with them, so calling one passes it, but then the exercise has taught you nothing.
#
# ### Exercise 2.1: a padding collate function with its mask
#
# A batch is a list of `(tokens, label)` pairs: `tokens` is a 1-D LongTensor of ids (1 and up: 0 is kept
# for padding), `label` an int or a 0-d int64 tensor. Write `pad_collate(batch)` returning the tuple
# `(input_ids, mask, labels)` of three tensors: `input_ids`, a LongTensor [B, T] with T the longest
# sequence's length, each row padded with 0 on the right; `mask`, a BoolTensor [B, T], True on real
# tokens; `labels`, a LongTensor [B]. This differs from the chapter's `my_pad_collate` above on purpose:
# a tuple instead of a dict, and a bool mask (what `masked_fill` and indexing take) instead of the 0/1
# `attention_mask` a transformer model reads. (The course's own is imported as `course_pad_collate`, so
# yours does not replace it.)

# %%
def pad_collate(batch):
    raise NotImplementedError  # replace this line with your code

# %%
from course_utils.exercises import check
check("pad_collate")

# %% [markdown]
# ### Exercise 2.2: weights that balance the classes
#
# Write `class_balanced_weights(labels)`, for a 1-D LongTensor (int64) of class labels 0, 1, 2, ... (some
# may be absent): one weight per example, finite and > 0 (a 1-D tensor or a list) such that
# `WeightedRandomSampler(weights, ...)` draws every class present equally often.

# %%
def class_balanced_weights(labels):
    raise NotImplementedError  # replace this line with your code

# %%
check("class_balanced_weights")

# %% [markdown]
# ### Exercise 2.3: one rank's shard
#
# Write `shard_indices(n, world_size, rank)`: the list of indices that rank `rank` of `world_size` ranks
# gets from `DistributedSampler` over n examples with `shuffle=False` (and `drop_last=False`), as a list of
# ints (a 1-D integer tensor is accepted too). Every rank gets ceil(n / world_size) indices; the padding repeats the list from its start, as many
# times as needed (section 5: n = 1, world_size = 3 gives [0] to every rank).

# %%
def shard_indices(n, world_size, rank):
    raise NotImplementedError  # replace this line with your code

# %%
check("shard_indices")

# %% [markdown]
# ### Exercise 2.4: a weighted sampler shared out between ranks
#
# Write `weighted_shard(weights, num_samples, world_size, rank, epoch, seed=0)`: the list of indices (ints)
# that rank `rank` of `world_size` ranks draws in epoch `epoch` (a 1-D int64 tensor of them is accepted too).
# `weights` is a 1-D float32 or float64 tensor, one weight per example; `num_samples ≥ 1`. Every rank makes
# the same draw: `total = world_size * ceil(num_samples / world_size)` indices, with replacement, in
# proportion to the weights, by `torch.multinomial(weights, total, replacement=True, generator=g)` with
# `g = torch.Generator().manual_seed(seed + epoch)`. (`WeightedRandomSampler` makes this call on
# `weights.double()`; on float32 weights the two can differ in a rare draw, and the check accepts either.)
# Rank r keeps draws r, r + world_size, r + 2·world_size, ..., as `DistributedSampler` deals indices out.
# Leave `weights` and torch's global random state untouched.

# %%
def weighted_shard(weights, num_samples, world_size, rank, epoch, seed=0):
    raise NotImplementedError  # replace this line with your code

# %%
check("weighted_shard")

# %% [markdown]
# ## Quiz

# %%
from course_utils.widgets.quiz_view import quiz
quiz(2)

# %% [markdown]
# ## Summary
#
# - Shuffle ordered data: sorted batches bias every gradient; a shuffle is one new permutation per epoch.
# - The sampler is the lever: sequential, random, weighted, distributed; `BatchSampler` groups its output.
# - 900/100 data: a shuffled batch of 32 holds 3.2 cats on average; per-example weights (1/900 for
#   each dog, 1/100 for each cat) make it 16. Pass them with `DataLoader(sampler=...)` and no
#   `shuffle`; class weights in their place silently draw only examples 0 and 1. Weighted sampling
#   needs `replacement=True` to rebalance a whole epoch, and `num_samples` sets the epoch length.
# - `DistributedSampler` gives each rank a disjoint shard, up to a few padding copies (the first indices,
#   repeated as a whole only when more copies are needed than there are examples); call `set_epoch(epoch)`
#   every epoch.
# - With weights on W ranks, draw one weighted sample from `seed + epoch` on every rank and deal it out;
#   the same `WeightedRandomSampler` on every rank draws the same indices everywhere.
# - Targets of different sizes (boxes per image) cannot be stacked: a `collate_fn` keeps them a list.
# - `default_collate` stacks equal shapes; variable lengths need a pad collate with an attention mask
#   (for the model; a token loss skips padding through labels of -100), and bucketing by length cuts
#   the padding.
