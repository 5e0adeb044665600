"""The production trainer's command line, `python -m course_utils.train` (chapter 7), alone or under torchrun.

    python -m course_utils.train --out runs/demo --epochs 20 --checkpoint-every 50
    python -m course_utils.train --out runs/demo --epochs 20 --checkpoint-every 50 --resume
    python -m course_utils.train --task chars --out runs/chars --epochs 5 --lr 0.003
    python -m course_utils.train --task mytasks:make_task --out runs/mine     # make_task(config) -> Task
    torchrun --nproc_per_node=2 -m course_utils.train --out runs/ddp --epochs 5

Writes DIR/metrics.jsonl, DIR/model.pt, DIR/summary.json, DIR/checkpoints/ and DIR/tb/ (the weights and the
checkpoints hold CPU tensors: a GPU run's files load on a machine without one). Bad flags or
values, a task that cannot be trained, or --resume where checkpoints are and none can be used (each one set
aside, nothing trained, nothing deleted): one line on stderr, exit code 2. A checkpoint that would run code
or belongs to another run, or a run that diverged: one line, exit code 1.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings
from typing import NoReturn

from course_utils.engine.models import OPTIMIZERS
from course_utils.production.config import AMP_MODES, DEVICES, SPIRAL_FIELDS, FitConfig
from course_utils.engine.schedules import SCHEDULES

PROG = "python -m course_utils.train"


class UsageError(Exception):
    """A bad flag or value (exit code 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:   # argparse prints usage + message; we want one line
        raise UsageError(message)


def _none_or(kind):
    def parse(text: str):
        return None if text.lower() in ("none", "off") else kind(text)
    parse.__name__ = kind.__name__
    return parse


def comma_separated_integers(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part.strip())


def build_parser() -> argparse.ArgumentParser:
    """Every flag, with the FitConfig field it sets (chapter 7)."""
    d = FitConfig(out="-")
    p = _Parser(prog=PROG, description="Train a model with the chapter-7 production loop: exact resume from "
                "durable checkpoints, early stopping, mixed precision, gradient clipping, a NaN guard, TensorBoard "
                "and metrics.jsonl logging; run it under torchrun for DDP. The model and data are the course's "
                "spiral MLP, a built-in task (--task chars, --task shapes) or your own (--task MODULE:FUNCTION).",
                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    a = p.add_argument
    a("--out", required=True, help="run folder: metrics.jsonl, model.pt, summary.json, checkpoints/, tb/")
    a("--task", default=d.task, metavar="NAME|MODULE:FUNCTION",
      help="what to train: spiral (the course's MLP), chars (a tiny character-level transformer on the course's "
           "prose), shapes (a small CNN on shapes drawn on the fly), or MODULE:FUNCTION (also path/file.py:FUNCTION), "
           "a function that takes the FitConfig and returns a course_utils.production.Task")
    a("--epochs", type=int, default=d.epochs, help="passes over the training set")
    a("--batch-size", type=int, default=d.batch_size, help="examples per micro-batch (per rank under torchrun)")
    a("--accum-steps", type=int, default=d.accum_steps,
      help="micro-batches per optimizer update; a short last window is flushed at the epoch end")
    a("--lr", type=float, default=d.lr, help="learning rate (peak rate for onecycle / warmup_cosine)")
    a("--optimizer", default=d.optimizer, choices=OPTIMIZERS, help="optimizer (momentum: SGD with momentum)")
    a("--momentum", type=float, default=d.momentum, help="momentum of the 'momentum' optimizer")
    a("--weight-decay", type=_none_or(float), default=None,
      help="weight decay (default: the optimizer's own, 0.01 for adamw, else 0)")
    a("--schedule", default=d.schedule, choices=SCHEDULES,
      help="learning-rate schedule (onecycle and warmup_cosine step per update, the others per epoch)")
    a("--seed", type=int, default=d.seed, help="seed for data, initialisation, dropout and data order")
    for flag, kind, text in [("--n-train", int, "training examples"), ("--n-val", int, "validation examples"),
                             ("--classes", int, "arms (classes)"), ("--noise", float, "angle noise (radians)"),
                             ("--hidden", int, "width of the MLP's hidden layers"),
                             ("--depth", int, "number of the MLP's hidden layers"),
                             ("--dropout", float, "dropout probability after each hidden layer")]:
        default = getattr(d, flag[2:].replace("-", "_"))   # no default here: given or not decides the refusal
        a(flag, type=kind, default=argparse.SUPPRESS, help=f"spiral task only: {text} (default {default})")
    a("--workers", type=int, default=d.workers, help="DataLoader worker processes")
    a("--checkpoint-every", type=int, default=d.checkpoint_every,
      help="also checkpoint every N updates inside an epoch (0: at epoch ends only)")
    a("--keep", type=int, default=d.keep, help="rolling checkpoints to keep (the best one is kept besides)")
    a("--patience", type=_none_or(int), default=None,
      help="stop after this many validation checks without improvement (default: no early stopping); with it, "
           "model.pt holds the best validation checkpoint's weights, whether or not the run stopped early, and "
           "model-last.pt the last weights")
    a("--min-delta", type=float, default=d.min_delta, help="an improvement must beat the best by more than this")
    a("--monitor", default=d.monitor,
      help="metric for early stopping and the best checkpoint: val_loss (lower is better), val_acc (higher; "
           "logged when the outputs are class logits) or a task's own val_NAME (its metric_mode says which way; a "
           "metric object such as MulticlassF1 is computed once over the whole validation set, a plain function is "
           "averaged over batches, which is right only for a mean over examples such as MAE)")
    a("--amp", default=d.amp, choices=AMP_MODES,
      help="mixed precision: bf16 (CPU or CUDA, no scaler) or fp16 (CUDA, with a GradScaler)")
    a("--compile", action="store_true", help="torch.compile the model")
    a("--deterministic", action="store_true",
      help="deterministic kernels for the run (torch.use_deterministic_algorithms, cuDNN's autotuner off): what "
           "bitwise resume needs on a GPU, where it also needs CUBLAS_WORKSPACE_CONFIG=:4096:8 set before the start")
    a("--resume", action="store_true",
      help="continue from the newest valid checkpoint in OUT/checkpoints (none there: start fresh, with a notice; "
           "some there and none usable: set aside, nothing trained, exit code 2); "
           "every setting that changes the numbers must match the checkpoint's, except that --epochs may grow "
           "when --schedule is constant (the other schedules are sized by the run's length)")
    a("--clip-norm", type=_none_or(float), default=None,
      help="clip the gradient norm to this (default: no clipping; the norm is logged either way)")
    a("--max-bad-steps", type=int, default=d.max_bad_steps,
      help="stop after this many non-finite (NaN/Inf) updates in a row; each one is skipped (on the device)")
    a("--log-every", type=int, default=d.log_every,
      help="read the losses, gradient norms and skipped updates on the host every N updates (and at checkpoints and "
           "epoch ends); in between the trainer never waits for the device. A diverged run is noticed at the next "
           "such point")
    a("--device", default=d.device, choices=DEVICES, help="where to train (auto: CUDA when present)")
    a("--threads", type=_none_or(int), default=None, help="torch CPU threads (default: torch's own choice)")
    a("--no-progress", action="store_true", help="no tqdm progress bar (it only shows on a terminal anyway)")
    a("--no-tensorboard", action="store_true", help="do not write TensorBoard event files")
    a("--inject-nan-at", type=comma_separated_integers, default=(), metavar="STEPS",
      help="for demonstrations: comma-separated micro-steps (0-based, whole run) whose loss becomes NaN")
    return p


def config_from_args(argv: list[str] | None = None) -> FitConfig:
    """Parse the command line into a FitConfig; UsageError (one line) for any bad flag or value."""
    args = build_parser().parse_args(argv)
    given = [name for name in SPIRAL_FIELDS if hasattr(args, name)]     # spiral flags have no default here
    if given and args.task != "spiral":
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise UsageError(f"{flags} only describe{'s' if len(given) == 1 else ''} the spiral task; --task "
                         f"{args.task} brings its own model and data")
    fields = {k: v for k, v in vars(args).items() if k not in ("no_progress", "no_tensorboard")}
    fields.update(progress=not args.no_progress, tensorboard=not args.no_tensorboard)
    try:
        return FitConfig(**fields)
    except ValueError as exc:  # name the flag, not the Python field
        message = str(exc)
        name = message.split(" ", 1)[0]
        raise UsageError("--" + name.replace("_", "-") + " " + message.split(" ", 1)[1]) from None


def exit_process(code: int) -> NoReturn:
    """End a command-line run with `code`; a rank under torchrun skips Python's own teardown (chapter 7).

    Why: a gloo worker thread can still hold the last reference to a finished collective (the last barrier keeps
    the ones before it) when the main thread returns, and releasing it needs the GIL: the collective keeps the
    thread state of the backward that started it, which holds a Python object (infra/gloo_groups.py). If Python
    has begun to shut down by then, the thread is stopped inside a C++ destructor and the process aborts ("terminate called
    without an active exception", exit -6) after the run completed: 2 of 87 launches of chapter 7's torchrun
    cell on 2 busy cores (the backtrace read from a core dump). Destroying the process group does not join those
    threads once a DDP model was built: torch keeps the group alive until exit. Everything a run writes is on
    disk before this point, so the rank flushes its streams and leaves with os._exit, which runs no destructor."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        sys.exit(code)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    """Run the trainer; returns the exit code (0 done, 1 refused or diverged, 2 bad usage or nothing to resume)."""
    try:
        config = config_from_args(argv)
    except UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    from course_utils.production import CheckpointError, NoUsableCheckpointError, fit   # torch after the flags

    warnings.formatwarning = lambda message, category, *rest: f"warning: {message}\n"
    main_rank = os.environ.get("RANK", "0") == "0"        # under torchrun every rank meets the same error
    try:
        result = fit(config)
    except NoUsableCheckpointError as exc:    # --resume and no checkpoint can be used: nothing trained
        print(f"{PROG}: error: {exc}", file=sys.stderr) if main_rank else None
        return 2
    except CheckpointError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr) if main_rank else None
        return 1
    except ValueError as exc:    # a task that cannot be trained (TaskError), --amp fp16 or --device cuda without a GPU
        print(f"{PROG}: error: {exc}", file=sys.stderr) if main_rank else None
        return 2
    return 0 if result.completed else 1


if __name__ == "__main__":
    exit_process(main())
