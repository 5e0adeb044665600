"""Chapter 6's experiments, each measured on five seeds: what the chapter concludes, and how far the seeds agree.

Experiments 1, 4, 5 and 6 are here; the learning-rate experiments 2 and 3 (the range test's suggestion,
SGD against Adam) are in ``ch06_lr_races.py``, on the same cached runs. Every function runs real runs of the
course's loop (``session.build`` + ``loop.stream``), one per seed
(another spiral, initialisation and shuffle each time), and returns a small record whose ``text()`` is
what the notebook prints: counts of seeds and medians of figures that every CPU computes alike.
``raw_text()`` gives the chaotic figures (losses and accuracies of failing runs), which move in their
last digits from one CPU to another: the notebook shows them in cells nbval does not compare.
``claims()`` names each conclusion the chapter draws, as a bool; ``tests/test_simulator_seeds.py``
fails when one stops holding. Runs are cached by configuration, so cells that share runs pay once.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace

import torch

from course_utils.chapters.ch08_arena import race_config
from course_utils.engine.loop import EpochEvent, StepEvent, stream
from course_utils.infra.notebook import one_thread
from course_utils.infra.parallel import in_groups, runs
from course_utils.chapters.over_seeds import SEEDS, Spread, tally
from course_utils.engine.session import TrainConfig, build

TARGET = 0.9          # the races' validation accuracy
NORM_STEPS = (1, 20, 40, 60, 100, 190)   # where the zero_grad experiment reads the gradient norm


# --- one run, watched ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Watched:
    """One finished run: per-step losses and gradient norms, per-epoch figures, and two end-of-run probes."""

    config: TrainConfig
    losses: tuple[float, ...]
    grad_norms: tuple[float, ...]
    epochs: tuple[EpochEvent, ...]
    dead: float          # share of hidden ReLU units that output 0 on every training example, at the end
    max_move: float      # the largest change of one weight in one update, in units of that update's lr

    @property
    def any_nan(self) -> bool:
        return any(math.isnan(x) for x in self.losses)

    @property
    def max_loss(self) -> float:
        return max(self.losses)

    @property
    def final_acc(self) -> float:
        return self.epochs[-1].val_acc

    @property
    def final_train_loss(self) -> float:
        return self.epochs[-1].train_loss

    def last_spread(self, n: int = 5) -> int:
        """Validation examples between the best and worst of the last `n` epochs (how much the run still jumps)."""
        last = [round(e.val_acc * self.config.n_val) for e in self.epochs[-n:]]
        return max(last) - min(last)

    def last_loss_jump(self, n: int = 5) -> float:
        """The largest change of the validation loss from one of the last `n` epochs to the next, as a share of the
        lowest of them (a steady rise, overfitting, moves a little each epoch; a run that jumps, a lot at once)."""
        last = [e.val_loss for e in self.epochs[-n:]]
        return max(abs(b - a) for a, b in zip(last, last[1:])) / min(last)


def dead_fraction(model: torch.nn.Module, inputs: torch.Tensor) -> float:
    """Share of the hidden ReLU units that output 0 for every one of `inputs` (chapter 6; eval mode, no_grad)."""
    was_training = model.training
    model.eval()
    dead = units = 0
    try:
        with torch.no_grad():
            x = inputs
            for layer in model.body:
                x = layer(x)
                if isinstance(layer, torch.nn.ReLU):
                    alive = (x > 0).any(dim=0)
                    dead, units = dead + int((~alive).sum()), units + alive.numel()
    finally:
        model.train(was_training)
    return dead / units if units else 0.0


@runs(maxsize=64)
def watched(config: TrainConfig) -> Watched:
    """Train `config` to the end (no memory meter) and record what chapter 6's experiments read (cached)."""
    config = replace(config, measure_memory=False)
    state = build(config)
    losses, norms, epochs, max_move = [], [], [], 0.0
    before = torch.cat([p.detach().flatten() for p in state.params])
    with warnings.catch_warnings(), one_thread():   # the scheduler-order warning is a bug's symptom, not news
        warnings.simplefilter("ignore", UserWarning)
        for event in stream(state):
            if isinstance(event, StepEvent):
                losses.append(event.loss)
                norms.append(event.grad_norm)
                if event.update:
                    after = torch.cat([p.detach().flatten() for p in state.params])
                    max_move = max(max_move, float((after - before).abs().max()) / event.lr)
                    before = after
            else:
                epochs.append(event)
    inputs = state.splits.train.tensors[0]
    return Watched(config, tuple(losses), tuple(norms), tuple(epochs), dead_fraction(state.model, inputs), max_move)


@runs(maxsize=128)
def hits(config: TrainConfig, target: float = TARGET) -> int | None:
    """Updates until validation accuracy first reaches `target`, checked after every update (cached)."""
    with one_thread():
        return race_config(replace(config, measure_memory=False), target, stop_at_target=True).updates_to_target


def on_seeds(seeds, **changes) -> list[TrainConfig]:
    """The default run with `changes`, once per seed, without the memory meter (chapter 6)."""
    return [TrainConfig(seed=s, measure_memory=False, **changes) for s in seeds]


def first_adam_move(lr: float, seed: int = 0) -> float:
    """Chapter 6's quiz key: how far a weight with a nonzero gradient moves in Adam's first update (median)."""
    state = build(TrainConfig(lr=lr, seed=seed, measure_memory=False))
    before = torch.cat([p.detach().flatten() for p in state.params])
    next(stream(state))
    after = torch.cat([p.detach().flatten() for p in state.params])
    grads = torch.cat([p.grad.flatten() for p in state.params])
    return float((after - before).abs()[grads.abs() > 1e-6].median())


# --- experiment 1: Adam at lr 1.0 ------------------------------------------------------------------

# what experiment 1 reads from each run, as (row label, test)
LR_ONE_ROWS = (("runs with a NaN loss", lambda w: w.any_nan),
               ("largest batch loss above 100 (start: ln 3 = 1.1)", lambda w: w.max_loss > 100),
               ("final validation accuracy at least 0.9", lambda w: w.final_acc >= 0.9),
               ("final validation accuracy below 0.7", lambda w: w.final_acc < 0.7),
               ("more than half the hidden ReLUs dead at the end", lambda w: w.dead > 0.5),
               ("every weight's move in every update <= 3.2 x lr", lambda w: w.max_move <= 3.2))


@dataclass(frozen=True)
class LrOne:
    """Adam at lr 1.0 against the default lr 0.01, one run each per seed (chapter 6, experiment 1)."""

    lr: float
    good: tuple[Watched, ...]
    bad: tuple[Watched, ...]

    def counts(self) -> dict[str, tuple[int, int]]:
        """For each row, on how many seeds it held: (at lr 0.01, at the high lr)."""
        return {label: (sum(map(test, self.good)), sum(map(test, self.bad))) for label, test in LR_ONE_ROWS}

    def claims(self) -> dict[str, bool]:
        c, n = self.counts(), len(self.bad)
        return {"no NaN on any seed": c["runs with a NaN loss"] == (0, 0),
                "largest loss > 100 at the high lr only": c[LR_ONE_ROWS[1][0]] == (0, n),
                "healthy >= 0.9, high lr < 0.7 on every seed": (c[LR_ONE_ROWS[2][0]][0], c[LR_ONE_ROWS[3][0]][1])
                == (n, n),
                "most ReLUs dead at the high lr on every seed": c[LR_ONE_ROWS[4][0]][1] == n,
                "a step is a few lr at most": c[LR_ONE_ROWS[5][0]] == (n, n)}

    def text(self) -> str:
        n = len(self.bad)
        lines = [f"{f'Adam, {n} seeds, on how many:':<50}{'lr 0.01':<10}lr {self.lr:g}"]
        lines += [f"{label:<50}{f'{g} of {n}':<10}{b} of {n}" for label, (g, b) in self.counts().items()]
        return "\n".join(lines)

    def raw_text(self) -> str:
        rows = [("largest batch loss", lambda w: w.max_loss, 3),
                ("final validation accuracy", lambda w: w.final_acc, 2),
                ("share of hidden ReLUs dead", lambda w: w.dead, 2), ("largest move / lr", lambda w: w.max_move, 2)]
        return "\n".join(f"{label:<27} lr 0.01: {Spread(tuple(f(w) for w in self.good)).text(d)}   "
                         f"lr {self.lr:g}: {Spread(tuple(f(w) for w in self.bad)).text(d)}" for label, f, d in rows)


def lr_one(seeds=SEEDS, lr: float = 1.0) -> LrOne:
    """Chapter 6, experiment 1: Adam at `lr` and at the default 0.01 on every seed."""
    good, bad = in_groups(watched.many((c,) for c in on_seeds(seeds) + on_seeds(seeds, lr=lr)), len(seeds))
    return LrOne(lr, tuple(good), tuple(bad))


# --- experiment 4: missing zero_grad --------------------------------------------------------------

@dataclass(frozen=True)
class ZeroGrad:
    """Missing zero_grad against the healthy run, on each seed (chapter 6, experiment 4)."""

    healthy: tuple[Watched, ...]
    bugged: tuple[Watched, ...]

    @staticmethod
    def norm_at(w: Watched, step: int) -> float:
        return w.grad_norms[step - 1]

    def early_growth(self) -> Spread:
        """How many times the norm grew over steps 1-60, seed by seed."""
        return Spread(tuple(self.norm_at(w, 60) / self.norm_at(w, 1) for w in self.bugged))

    def late_growth(self) -> Spread:
        """How many times it grew over the remaining steps, 60 to the last."""
        return Spread(tuple(w.grad_norms[-1] / self.norm_at(w, 60) for w in self.bugged))

    def _flags(self) -> dict[str, list[bool]]:
        b, h = self.bugged, self.healthy
        return {"norm at step 60 > 10x the healthy run's largest":
                    [self.norm_at(x, 60) > 10 * max(y.grad_norms) for x, y in zip(b, h)],
                "grew > 10x more over steps 1-60 than after":
                    [e > 10 * l for e, l in zip(self.early_growth().values, self.late_growth().values)],
                "final accuracy > 0.2 below the healthy run's": [x.final_acc < y.final_acc - 0.2 for x, y in zip(b, h)],
                "runs with a NaN loss": [x.any_nan for x in b]}

    def claims(self) -> dict[str, bool]:
        flags = self._flags()
        return {name: (not any(v)) if name.startswith("runs with a NaN") else all(v) for name, v in flags.items()}

    def trace(self, seed_index: int = 0) -> str:
        """The bugged run's gradient norm at a few steps, against the healthy run's largest (one seed)."""
        b, h = self.bugged[seed_index], self.healthy[seed_index]
        steps = "  ".join(f"{s}: {self.norm_at(b, s):.3g}" for s in NORM_STEPS)
        return (f"seed {b.config.seed}, gradient norm at step  {steps}\n"
                f"  (the healthy run's largest: {max(h.grad_norms):.3g})")

    def text(self) -> str:
        lines = [f"missing zero_grad, Adam lr 0.01, {len(self.bugged)} seeds:",
                 f"  norm multiplied over steps 1-60:    {self.early_growth().text(2, 'x')}",
                 f"  norm multiplied over steps 60-190:  {self.late_growth().text(2, 'x')}"]
        lines += [f"  {name + ':':<49}{tally(v)}" for name, v in self._flags().items()]
        return "\n".join(lines)


def zero_grad(seeds=SEEDS, **changes) -> ZeroGrad:
    """Chapter 6, experiment 4: missing zero_grad and the healthy run, on every seed."""
    configs = on_seeds(seeds, **changes) + on_seeds(seeds, bugs=("missing_zero_grad",), **changes)
    healthy, bugged = (tuple(group) for group in in_groups(watched.many((c,) for c in configs), len(seeds)))
    return ZeroGrad(healthy, bugged)


# --- experiment 5: evaluation without no_grad -----------------------------------------------------

@dataclass(frozen=True)
class NoGrad:
    """Evaluation with and without no_grad: graph memory per evaluation, one batch's graph (chapter 6)."""

    healthy_memory: tuple[int, ...]
    bugged_memory: tuple[int, ...]
    one_batch: int            # bytes one validation batch's forward graph keeps (chapter 5's measurement)
    batch_size: int
    same_results: bool        # validation losses and accuracies identical

    def text(self) -> str:
        peak = max(self.bugged_memory)
        return "\n".join([
            f"evaluation graph memory per epoch, bytes: healthy {list(self.healthy_memory)}, "
            f"without no_grad {[f'{b:,}' for b in self.bugged_memory]}",
            f"one validation batch's forward graph ({self.batch_size} examples): {self.one_batch:,} bytes; "
            f"the peak is {peak / self.one_batch:g} of them",
            f"same at every evaluation: {len(set(self.bugged_memory)) == 1}",
            f"validation losses and accuracies identical: {self.same_results}"])


def no_grad(epochs: int = 3, seed: int = 0) -> NoGrad:
    """Chapter 6, experiment 5: `epochs` epochs with and without no_grad in evaluation (memory metered)."""
    from course_utils.engine.memory import GraphMemoryMeter
    from course_utils.chapters.ch06_simulator import compare_runs

    with one_thread():
        runs = compare_runs(healthy=dict(epochs=epochs, seed=seed),
                            bugged=dict(epochs=epochs, seed=seed, bugs=("missing_no_grad",)))
    healthy, bugged = runs["healthy"], runs["bugged"]
    loader, model = bugged.state.val_loader, bugged.model
    inputs, _ = next(iter(loader))
    meter, was_training = GraphMemoryMeter(), model.training
    model.eval()
    with meter:                                   # one batch's forward graph, as chapter 5 measures it
        logits = model(inputs)
    one = meter.peak
    del logits
    model.train(was_training)
    same = [(e.val_loss, e.val_acc) for e in healthy.epochs] == [(e.val_loss, e.val_acc) for e in bugged.epochs]
    return NoGrad(tuple(e.eval_memory for e in healthy.epochs), tuple(e.eval_memory for e in bugged.epochs), one,
                  bugged.config.batch_size, same)


# --- experiment 6: cosine against a constant learning rate ----------------------------------------

JUMP = 0.5    # a validation loss that changes by over half its lowest from one epoch to the next jumps


@dataclass(frozen=True)
class Schedules:
    """A constant and a cosine learning rate, same lr and epochs, on each seed (chapter 6, experiment 6)."""

    lr: float
    epochs: int
    constant: tuple[Watched, ...]
    cosine: tuple[Watched, ...]

    def claims(self) -> dict[str, bool]:
        pairs = list(zip(self.constant, self.cosine))
        return {"cosine lower final train loss on every seed": all(c.final_train_loss < k.final_train_loss
                                                                   for k, c in pairs),
                "cosine settles (within 1%) on every seed": all(c.last_spread() <= c.config.n_val // 100
                                                                for c in self.cosine),
                "constant jumps more than cosine on every seed": all(k.last_spread() > c.last_spread()
                                                                     for k, c in pairs),
                "constant's val loss jumps more than cosine's on every seed": all(
                    k.last_loss_jump() > c.last_loss_jump() for k, c in pairs),
                "constant's val loss jumps by over half its lowest on every seed, cosine's on none": all(
                    k.last_loss_jump() > JUMP >= c.last_loss_jump() for k, c in pairs)}

    def text(self) -> str:
        pairs, n = list(zip(self.constant, self.cosine)), len(self.cosine)
        return "\n".join([
            f"lr {self.lr:g}, {self.epochs} epochs, {n} seeds                           constant   cosine",
            f"lower final training loss than the other schedule     "
            f"{tally(k.final_train_loss < c.final_train_loss for k, c in pairs):<10} "
            f"{tally(c.final_train_loss < k.final_train_loss for k, c in pairs)}",
            f"last 5 epochs' val accuracy within 1% (settled)      "
            f"{tally(k.last_spread() <= k.config.n_val // 100 for k in self.constant):<10} "
            f"{tally(c.last_spread() <= c.config.n_val // 100 for c in self.cosine)}",
            f"{'last 5 epochs: val loss jumps by > half its lowest':<53}"
            f"{tally(k.last_loss_jump() > JUMP for k in self.constant):<10} "
            f"{tally(c.last_loss_jump() > JUMP for c in self.cosine)}"])

    def raw_text(self) -> str:
        return "\n".join(f"{name:<9} final train loss {Spread(tuple(w.final_train_loss for w in runs)).text(2)}; "
                         f"last 5 epochs' accuracy spread {Spread(tuple(w.last_spread() for w in runs)).text(2)} "
                         f"of {runs[0].config.n_val} examples; largest val loss jump "
                         f"{Spread(tuple(100 * w.last_loss_jump() for w in runs)).text(2)}% of its lowest"
                         for name, runs in (("constant", self.constant), ("cosine", self.cosine)))


def schedules(seeds=SEEDS, lr: float = 0.03, epochs: int = 20) -> Schedules:
    """Chapter 6, experiment 6: constant and cosine at `lr` for `epochs`, on every seed."""
    configs = on_seeds(seeds, lr=lr, epochs=epochs) + on_seeds(seeds, lr=lr, epochs=epochs, schedule="cosine")
    constant, cosine = in_groups(watched.many((c,) for c in configs), len(seeds))
    return Schedules(lr, epochs, tuple(constant), tuple(cosine))


def adam_step_under_growing_gradient(growth: float = 1.05, updates: int = 400) -> float:
    """Chapter 6: torch's Adam (default betas) on one weight whose gradient grows by `growth` per update; max step / lr."""
    weight = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.Adam([weight], lr=1.0)
    largest, gradient = 0.0, 1.0
    for _ in range(updates):
        before = weight.item()
        weight.grad = torch.tensor([gradient])
        optimizer.step()
        largest, gradient = max(largest, abs(weight.item() - before)), gradient * growth
    return largest
