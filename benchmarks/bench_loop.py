"""Overhead of the course's instrumented loop against a plain hand-written PyTorch loop.

Both train the same MLP on the same spiral split with the same seed, data order and optimizer,
log the training loss with .item() and evaluate validation loss and accuracy once per epoch. The
engine also measures its telemetry every step (pre-clip gradient norm, learning rate, graph
memory, counters), keeps its own RNG streams and yields an event per step and per epoch. Prints,
for each contender, the minimum over the repeats of the wall time and of the process CPU time
(the machine is shared: the minimum is the least disturbed run, and CPU time ignores time spent
waiting for a core) and their ratios to the plain loop (goal for the engine: <= 1.10), and the
same for PyTorch Lightning's Trainer when lightning is importable (see README.md).

Run: .venv/bin/python benchmarks/bench_loop.py [--repeats N] [--epochs E]
"""
from __future__ import annotations

import argparse
import logging
import statistics
import time
import warnings
from dataclasses import replace

import torch
from torch import nn
from torch.utils.data import DataLoader

from course_utils.engine.data import spiral_splits
from course_utils.engine.session import TrainConfig, run
from course_utils.engine.memory import GraphMemoryMeter
from course_utils.engine.models import MLP


def plain_loop(config: TrainConfig) -> tuple[float, float]:
    """The loop a learner would write by hand; returns the last epoch's training loss and validation accuracy."""
    splits = spiral_splits(config.n_train, config.n_val, seed=config.seed)
    with torch.random.fork_rng():
        torch.manual_seed(config.seed)
        model = MLP(2, config.hidden, config.classes, config.depth)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    loss_fn = nn.CrossEntropyLoss()
    loader = DataLoader(splits.train, batch_size=config.batch_size, shuffle=True,
                        generator=torch.Generator().manual_seed(config.seed))
    val_loader = DataLoader(splits.val, batch_size=config.batch_size)
    train_loss = accuracy = 0.0
    for _ in range(config.epochs):
        model.train()
        running = 0.0
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(inputs), targets)
            loss.backward()
            optimizer.step()
            running += loss.item() * len(targets)
        model.eval()
        val_loss, correct = 0.0, 0
        with torch.no_grad():
            for inputs, targets in val_loader:
                logits = model(inputs)
                val_loss += loss_fn(logits, targets).item() * len(targets)
                correct += (logits.argmax(dim=1) == targets).sum().item()
        train_loss, accuracy = running / len(splits.train), correct / len(splits.val)
    return train_loss, accuracy


def engine_loop(config: TrainConfig) -> tuple[float, float]:
    """The course's loop, consumed to the end; returns the last epoch's training loss and validation accuracy."""
    last = None
    for event in run(config):
        last = event
    return last.train_loss, last.val_acc


def lightning_loop(config: TrainConfig) -> tuple[float, float]:
    """The same work under PyTorch Lightning's Trainer (only if lightning is importable)."""
    import lightning as L

    for name in list(logging.root.manager.loggerDict):           # no banner on every fit()
        if name.startswith("lightning"):
            logging.getLogger(name).setLevel(logging.ERROR)

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = MLP(2, config.hidden, config.classes, config.depth)
            self.loss_fn = nn.CrossEntropyLoss()

        def training_step(self, batch, _):
            inputs, targets = batch
            loss = self.loss_fn(self.model(inputs), targets)
            self.log("train_loss", loss, on_step=False, on_epoch=True, batch_size=len(targets))
            return loss

        def validation_step(self, batch, _):
            inputs, targets = batch
            logits = self.model(inputs)
            self.log("val_loss", self.loss_fn(logits, targets), batch_size=len(targets))
            self.log("val_acc", (logits.argmax(1) == targets).float().mean(), batch_size=len(targets))

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=config.lr)

    splits = spiral_splits(config.n_train, config.n_val, seed=config.seed)
    torch.manual_seed(config.seed)
    module = Module()
    warnings.filterwarnings("ignore", module="lightning")       # its num_workers tips and deprecations
    trainer = L.Trainer(max_epochs=config.epochs, accelerator="cpu", devices=1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        num_sanity_val_steps=0)
    trainer.fit(module, DataLoader(splits.train, batch_size=config.batch_size, shuffle=True,
                                   generator=torch.Generator().manual_seed(config.seed)),
                DataLoader(splits.val, batch_size=config.batch_size))
    return float(trainer.callback_metrics["train_loss"]), float(trainer.callback_metrics["val_acc"])


def timed(fn, config: TrainConfig) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) of one call."""
    start, cpu = time.perf_counter(), time.process_time()
    fn(config)
    return time.perf_counter() - start, time.process_time() - cpu


def compare(config: TrainConfig, repeats: int, with_lightning: bool) -> None:
    """Time every contender on `config`, interleaved so that machine drift hits all alike; print ratios."""
    contenders = {"plain": (plain_loop, config),
                  "engine (telemetry on)": (engine_loop, config),
                  "engine (memory meter off)": (engine_loop, replace(config, measure_memory=False))}
    if with_lightning:
        contenders["lightning Trainer"] = (lightning_loop, config)
    print(f"\n{config.epochs} epochs, {config.n_train} spiral points, batch {config.batch_size}, MLP hidden "
          f"{config.hidden} x depth {config.depth}, Adam lr {config.lr}: "
          f"{config.arithmetic().total_micro_steps} steps")
    results = {name: fn(cfg) for name, (fn, cfg) in contenders.items()}    # warm-up and a sanity check
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, (fn, cfg) in contenders.items():
            times[name].append(timed(fn, cfg))
    wall0 = min(t[0] for t in times["plain"])
    cpu0 = min(t[1] for t in times["plain"])
    for name in contenders:
        wall, cpu = min(t[0] for t in times[name]), min(t[1] for t in times[name])
        spread = statistics.median(t[0] for t in times[name]) / wall
        train_loss, val_acc = results[name]
        print(f"  {name:<27} min wall {wall * 1000:7.1f} ms (ratio {wall / wall0:5.2f})   min cpu "
              f"{cpu * 1000:7.1f} ms (ratio {cpu / cpu0:5.2f})   median/min {spread:4.2f}   "
              f"last train loss {train_loss:.4f}   val acc {val_acc:.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--epochs", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(1)
    try:
        import lightning  # noqa: F401  (measurement only, never a dependency of the course)
        with_lightning = True
    except ImportError:
        with_lightning = False
        print("lightning is not installed here: its ratio is skipped (see benchmarks/README.md)")
    print(f"torch {torch.__version__}, 1 thread; memory figures are {GraphMemoryMeter().kind}")
    compare(TrainConfig(epochs=args.epochs), args.repeats, with_lightning)          # the course's run
    compare(TrainConfig(epochs=args.epochs, hidden=256, batch_size=128), args.repeats, with_lightning)


if __name__ == "__main__":
    main()
