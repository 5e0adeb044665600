"""Chapter 2: batch composition under each sampler, class weights, DistributedSampler shards, pad collate.

Every figure comes from torch's own samplers driven by seeded generators, never a re-implementation.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

import torch
from torch import nn
from torch.utils.data import (DataLoader, Dataset, DistributedSampler, RandomSampler, Sampler, SequentialSampler,
                              WeightedRandomSampler)

from course_utils.engine.data import PAD_ID, make_spiral
from course_utils.engine.loop import backward, compute_loss, evaluate, forward, optimizer_step, zero_grad
from course_utils.engine.models import MLP

STRATEGIES = ("sequential", "shuffled", "weighted")


def _positive_int(name: str, value: int, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


# --- class weights and expectations -----------------------------------------------------------------

def class_counts(labels: torch.Tensor) -> list[int]:
    """How many examples each class has (chapter 2)."""
    return torch.bincount(torch.as_tensor(labels)).tolist()


def class_weights(labels: torch.Tensor) -> list[float]:
    """One weight per class: 1 / (examples of that class) (chapter 2)."""
    return [1.0 / c if c else 0.0 for c in class_counts(labels)]


def sample_weights(labels: torch.Tensor) -> torch.Tensor:
    """One weight per example, its class's weight: what WeightedRandomSampler takes (chapter 2)."""
    labels = torch.as_tensor(labels)
    return torch.tensor(class_weights(labels), dtype=torch.double)[labels]


def expected_batch_counts(counts: Sequence[int], batch_size: int, weighted: bool) -> list[float]:
    """Expected examples of each class in one random batch (chapter 2): B * share, or B / classes if weighted."""
    _positive_int("batch_size", batch_size)
    present = [c for c in counts if c > 0]
    if weighted:  # every class carries the same total weight, 1
        return [batch_size / len(present) if c > 0 else 0.0 for c in counts]
    total = sum(counts)
    return [batch_size * c / total for c in counts]


def expected_minority(n_major: int = 900, n_minor: int = 100, batch_size: int = 32, weighted: bool = False) -> float:
    """Expected minority examples in one batch of the n_major / n_minor dataset (chapter 2 quiz key)."""
    return expected_batch_counts([n_major, n_minor], batch_size, weighted)[1]


def minority_odds(counts: Sequence[int]) -> float:
    """With 1/count weights: how many times as likely one minority example is as one majority example."""
    return max(counts) / min(c for c in counts if c > 0)


# --- batch composition ---------------------------------------------------------------------------------

def make_sampler(labels: torch.Tensor, strategy: str, num_samples: int | None = None, replacement: bool = True,
                 seed: int = 0) -> Sampler[int]:
    """A real torch sampler for `strategy`: sequential, shuffled or weighted (chapter 2)."""
    labels = torch.as_tensor(labels)
    generator = torch.Generator().manual_seed(int(seed))
    if strategy == "sequential":
        return SequentialSampler(range(len(labels)))
    if strategy == "shuffled":
        return RandomSampler(range(len(labels)), generator=generator)
    if strategy == "weighted":
        n = len(labels) if num_samples is None else num_samples
        return WeightedRandomSampler(sample_weights(labels), n, replacement=replacement, generator=generator)
    raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")


@dataclass(frozen=True)
class Composition:
    """Per-batch class counts of a sampler (chapter 2)."""

    strategy: str
    batch_size: int
    counts: list[list[int]]       # counts[b][c]: examples of class c in batch b
    distinct: int                 # distinct examples drawn across all batches

    @property
    def totals(self) -> list[int]:
        return [sum(col) for col in zip(*self.counts)]

    def share(self, cls: int = 1) -> float:
        """Share of class `cls` among everything drawn."""
        return self.totals[cls] / sum(self.totals)

    def mean_count(self, cls: int = 1) -> float:
        """Mean examples of class `cls` per batch."""
        return self.totals[cls] / len(self.counts)


def batch_composition(labels: torch.Tensor, strategy: str, batch_size: int = 32, n_batches: int | None = None,
                      replacement: bool = True, seed: int = 0) -> Composition:
    """Class counts of each batch a DataLoader yields with `strategy`'s sampler (chapter 2).

    n_batches=None means one epoch: len(labels) examples. Weighted sampling draws batch_size * n_batches.
    """
    _positive_int("batch_size", batch_size)
    labels = torch.as_tensor(labels)
    n = len(labels)
    num_samples = n if n_batches is None else batch_size * n_batches
    if strategy != "weighted" or not replacement:  # these draw each example at most once: one epoch at most
        if num_samples >= n + batch_size:
            what = "without replacement" if strategy == "weighted" else f"{strategy} sampling"
            raise ValueError(f"{what} covers one epoch ({n} examples); ask for at most "
                             f"{-(-n // batch_size)} batches")
        num_samples = min(num_samples, n)
    sampler = make_sampler(labels, strategy, num_samples, replacement, seed)
    loader = DataLoader(range(n), batch_size=batch_size, sampler=sampler)
    classes = int(labels.max()) + 1
    counts, seen, drawn = [], set(), 0
    for batch in loader:
        counts.append(torch.bincount(labels[batch], minlength=classes).tolist())
        seen.update(batch.tolist())
        drawn += len(batch)
        if drawn >= num_samples:
            break
    return Composition(strategy, batch_size, counts, len(seen))


# --- DistributedSampler ---------------------------------------------------------------------------

@dataclass(frozen=True)
class ShardView:
    """What each of W ranks gets from DistributedSampler in one epoch (chapter 2)."""

    n: int
    world_size: int
    shuffle: bool
    drop_last: bool
    epoch: int
    shards: list[list[int]]       # shards[r]: the indices rank r iterates
    padding: int                  # examples added so every rank has the same count (0 with drop_last)
    dropped: int                  # examples left out (drop_last=True)

    @property
    def per_rank(self) -> int:
        return len(self.shards[0])

    @property
    def duplicates(self) -> list[int]:
        """Indices that appear more than once across the ranks this epoch."""
        seen: dict[int, int] = {}
        for shard in self.shards:
            for i in shard:
                seen[i] = seen.get(i, 0) + 1
        return sorted(i for i, k in seen.items() if k > 1)

    def disjoint_up_to_padding(self) -> bool:
        """True when the only indices shared between ranks are the padding copies."""
        total = sum(len(s) for s in self.shards)
        return total - len({i for s in self.shards for i in s}) == self.padding


def shard_view(n: int, world_size: int, shuffle: bool = True, seed: int = 0, epoch: int = 0,
               drop_last: bool = False, call_set_epoch: bool = True) -> ShardView:
    """Ask a real DistributedSampler, once per rank, for its indices (chapter 2)."""
    _positive_int("n", n)
    _positive_int("world_size", world_size)
    dataset = range(n)
    shards = []
    for rank in range(world_size):
        sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=shuffle, seed=seed,
                                     drop_last=drop_last)
        if call_set_epoch:
            sampler.set_epoch(epoch)
        shards.append(list(sampler))
    total = sum(len(s) for s in shards)
    return ShardView(n, world_size, shuffle, drop_last, epoch, shards, max(total - n, 0), max(n - total, 0))


def rank_orders(n: int, world_size: int, rank: int = 0, epochs: int = 3, call_set_epoch: bool = True,
                seed: int = 0) -> list[list[int]]:
    """One rank's order over several epochs from ONE sampler, with or without set_epoch (chapter 2)."""
    sampler = DistributedSampler(range(n), num_replicas=world_size, rank=rank, shuffle=True, seed=seed)
    orders = []
    for epoch in range(epochs):
        if call_set_epoch:
            sampler.set_epoch(epoch)
        orders.append(list(sampler))
    return orders


# --- collation -------------------------------------------------------------------------------------

def pad_collate(batch: list[tuple[torch.Tensor, int]]) -> dict[str, torch.Tensor]:
    """Pad variable-length token sequences to the batch's longest (chapter 2).

    Returns input_ids (B, L) padded with PAD_ID, attention_mask (B, L) with 1 for real tokens, labels (B,).
    """
    if not batch:
        raise ValueError("pad_collate needs at least one example")
    longest = max(len(tokens) for tokens, _ in batch)
    input_ids = torch.full((len(batch), longest), PAD_ID, dtype=torch.long)
    attention_mask = torch.zeros((len(batch), longest), dtype=torch.long)
    for row, (tokens, _) in enumerate(batch):
        input_ids[row, :len(tokens)] = tokens
        attention_mask[row, :len(tokens)] = 1
    labels = torch.tensor([int(label) for _, label in batch], dtype=torch.long)
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


class BucketBatchSampler(Sampler[list[int]]):
    """Bucketing (chapter 2): shuffle, cut into pools of `pool` batches, sort each pool by length, batch, shuffle batches."""

    def __init__(self, lengths: Sequence[int], batch_size: int, pool: int = 8, seed: int = 0):
        _positive_int("batch_size", batch_size)
        _positive_int("pool", pool)
        self.lengths, self.batch_size, self.pool = list(lengths), batch_size, pool
        self.generator = torch.Generator().manual_seed(int(seed))

    def __len__(self) -> int:
        return -(-len(self.lengths) // self.batch_size) if self.lengths else 0

    def __iter__(self) -> Iterator[list[int]]:
        order = torch.randperm(len(self.lengths), generator=self.generator).tolist()
        span = self.batch_size * self.pool
        batches = []
        for start in range(0, len(order), span):
            pool = sorted(order[start:start + span], key=lambda i: self.lengths[i])
            batches += [pool[j:j + self.batch_size] for j in range(0, len(pool), self.batch_size)]
        for k in torch.randperm(len(batches), generator=self.generator).tolist():
            yield batches[k]


@dataclass(frozen=True)
class PaddingStats:
    """Tokens a padded epoch holds, measured from the attention masks a real DataLoader produced (chapter 2)."""

    bucketing: bool
    batch_size: int
    real_tokens: int
    padded_tokens: int          # every slot: real + pad
    batch_shapes: list[tuple[int, int]]
    masks: list[torch.Tensor]   # the attention masks, for drawing

    @property
    def pad_tokens(self) -> int:
        return self.padded_tokens - self.real_tokens

    @property
    def waste(self) -> float:
        """Share of the padded slots that are padding."""
        return self.pad_tokens / self.padded_tokens


def padding_stats(dataset: Dataset, batch_size: int = 16, bucketing: bool = False, seed: int = 0) -> PaddingStats:
    """One epoch with pad_collate, shuffled or bucketed: real vs padded tokens (chapter 2)."""
    _positive_int("batch_size", batch_size)
    if bucketing:
        lengths = [len(dataset[i][0]) for i in range(len(dataset))]
        loader = DataLoader(dataset, batch_sampler=BucketBatchSampler(lengths, batch_size, seed=seed),
                            collate_fn=pad_collate)
    else:
        loader = DataLoader(dataset, batch_size=batch_size, shuffle=True, collate_fn=pad_collate,
                            generator=torch.Generator().manual_seed(int(seed)))
    real = slots = 0
    shapes, masks = [], []
    for batch in loader:
        mask = batch["attention_mask"]
        real += int(mask.sum())
        slots += mask.numel()
        shapes.append(tuple(mask.shape))
        masks.append(mask)
    return PaddingStats(bucketing, batch_size, real, slots, shapes, masks)


# --- why shuffle: sorted vs shuffled training -------------------------------------------------------

@dataclass(frozen=True)
class OrderRun:
    """Training on the class-sorted spiral with or without shuffling (chapter 2)."""

    shuffle: bool
    batch_losses: list[float]     # every batch's training loss, in order
    final_loss: float             # loss over the whole training set after training
    final_acc: float              # accuracy over the whole training set after training
    last_batch_classes: list[int] # the classes present in each batch of the last epoch (sorted: one each)
    class_accuracy: list[float] = ()  # accuracy on each class's examples after training
    predicted_share: list[float] = () # share of all predictions that name each class


def order_experiment(shuffle: bool, n: int = 600, epochs: int = 5, batch_size: int = 32, lr: float = 0.01,
                     seed: int = 0) -> OrderRun:
    """Train the course MLP on make_spiral's class-grouped data, shuffled or not (chapter 2)."""
    torch.manual_seed(seed)
    data = make_spiral(n, seed=seed)
    model = MLP(2, 64, 3, depth=2)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    loader = DataLoader(data, batch_size=batch_size, shuffle=shuffle,
                        generator=torch.Generator().manual_seed(seed))
    losses, classes = [], []
    for epoch in range(epochs):
        model.train()
        classes = []
        for inputs, targets in loader:
            zero_grad(optimizer)
            loss = compute_loss(loss_fn, forward(model, inputs), targets)
            backward(loss)
            optimizer_step(optimizer)
            losses.append(loss.item())
            classes.append(len(targets.unique()))
    final_loss, final_acc = evaluate(model, data)
    inputs, targets = data.tensors
    model.eval()
    with torch.no_grad():
        predicted = model(inputs).argmax(dim=1)
    n_classes = int(targets.max()) + 1
    class_accuracy = [(predicted[targets == c] == c).float().mean().item() for c in range(n_classes)]
    predicted_share = [(predicted == c).float().mean().item() for c in range(n_classes)]
    return OrderRun(shuffle, losses, final_loss, final_acc, classes, class_accuracy, predicted_share)


@dataclass(frozen=True)
class OrderSeeds:
    """order_experiment sorted and shuffled on several seeds, and on how many of them each claim holds (chapter 2).

    Training on sorted data is chaotic: one seed's loss and accuracies move in their last digits between CPUs, so
    chapter 2 compares these counts and shows one seed's digits as an illustration only.
    """

    sorted_runs: tuple[OrderRun, ...]
    shuffled_runs: tuple[OrderRun, ...]
    per_epoch: int                     # batches in one epoch (the sorted run's last epoch is averaged over them)

    def last_epoch_loss(self, run: OrderRun) -> float:
        """The mean batch loss of a run's last epoch."""
        return sum(run.batch_losses[-self.per_epoch:]) / self.per_epoch

    def claims(self) -> dict[str, tuple[int, int]]:
        """Each claim: (seeds where it holds for the sorted run, for the shuffled run)."""
        import math

        def count(test) -> tuple[int, int]:
            return sum(map(test, self.sorted_runs)), sum(map(test, self.shuffled_runs))

        return {
            "last epoch's mean batch loss within 0.25 of ln 3 (guessing)":
                count(lambda r: abs(self.last_epoch_loss(r) - math.log(3)) < 0.25),
            "accuracy on the whole set above 1/3": count(lambda r: r.final_acc > 1 / 3),
            "accuracy on the whole set above 0.9": count(lambda r: r.final_acc > 0.9),
            "some class's accuracy below 0.6": count(lambda r: min(r.class_accuracy) < 0.6),
            "most and least predicted class 10 points or more apart":
                count(lambda r: max(r.predicted_share) - min(r.predicted_share) >= 0.1),
        }

    def shuffled_lower_loss(self) -> int:
        """On how many seeds the shuffled run ends with the lower loss on the whole set."""
        return sum(h.final_loss < s.final_loss for s, h in zip(self.sorted_runs, self.shuffled_runs))

    def text(self) -> str:
        n = len(self.sorted_runs)
        lines = [f"{n} seeds, the same MLP and data, sorted vs shuffled:            sorted   shuffled"]
        lines += [f"  {claim:<62} {s} of {n}   {h} of {n}" for claim, (s, h) in self.claims().items()]
        lines.append(f"  shuffled ends with the lower loss on the whole set: {self.shuffled_lower_loss()} of {n} seeds")
        return "\n".join(lines)


def order_over_seeds(seeds: Sequence[int] = range(5), n: int = 600, epochs: int = 5,
                     batch_size: int = 32) -> OrderSeeds:
    """order_experiment sorted and shuffled on each seed (chapter 2's conclusions)."""
    runs = {shuffle: tuple(order_experiment(shuffle, n, epochs, batch_size, seed=s) for s in seeds)
            for shuffle in (False, True)}
    return OrderSeeds(runs[False], runs[True], -(-n // batch_size))


def accelerate_epoch_orders(n: int = 12, epochs: int = 3, seed: int = 0) -> dict[str, object]:
    """A shuffled loader prepared by Hugging Face Accelerate (one process, on the CPU), iterated for `epochs` epochs
    with nothing called between them: does each epoch get a new order, and does every example come once per
    epoch (chapter 2)."""
    import os
    os.environ.setdefault("ACCELERATE_DISABLE_RICH", "1")
    from accelerate import Accelerator
    from torch.utils.data import DataLoader, TensorDataset
    torch.manual_seed(seed)
    loader = Accelerator(cpu=True).prepare(DataLoader(TensorDataset(torch.arange(n)), batch_size=4, shuffle=True))
    orders = [[int(v) for (batch,) in loader for v in batch] for _ in range(epochs)]
    return {"wrapped as": type(loader).__name__,
            "every epoch a new order, no set_epoch called": len({tuple(o) for o in orders}) == epochs,
            "each epoch every example once": all(sorted(o) == list(range(n)) for o in orders)}
