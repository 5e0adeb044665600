"""Chapter 7's trainer on tasks that are not the spiral: tasks defined here (not in the package), trained through
`fit(config, task)` and through `--task tests.test_production_tasks:FUNCTION`, killed and resumed bitwise with two
DataLoader workers drawing random augmentation; the built-in chars and shapes tasks resumed bitwise from the
command line; every guarantee (durable fallback, weights_only, early stopping delivering the best weights,
accumulation weighted by examples, bf16, the NaN guard) on a non-spiral task; a bad --task gives one line and
exit code 2. The oracle is always the uninterrupted run (or one big batch)."""
from __future__ import annotations

import contextlib
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import Dataset, DistributedSampler

from course_utils.engine.arithmetic import training_arithmetic
from course_utils.production import FitConfig, Task, fit, load_checkpoint
from course_utils.production import checkpoint as ckpt
from course_utils.production.task import TaskError, loss_on_cpu_copies
from course_utils.production.cli import main
from tests import killed_runs

ROOT = Path(__file__).resolve().parents[1]
HERE = "tests.test_production_tasks"


# --- tasks a learner might write: defined here, outside the package ---------------------------------

class Jittered(Dataset):
    """Three classes of 4-d points; with `augment`, each load adds noise (torch), rescales (NumPy), maybe flips
    (`random`): the random augmentation inside __getitem__ that DataLoader workers run."""

    def __init__(self, n: int, seed: int, augment: bool):
        generator = torch.Generator().manual_seed(seed)
        self.y = torch.arange(n) % 3
        self.x = torch.randn(n, 4, generator=generator) + self.y[:, None].float()
        self.augment = augment

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, index: int):
        x = self.x[index]
        if self.augment:
            x = (x + 0.3 * torch.randn(4)) * float(np.random.uniform(0.8, 1.2))
            if random.random() < 0.5:
                x = x.flip(0)
        return x, self.y[index]


def noisy_task(config: FitConfig) -> Task:
    """Classification with dropout and random augmentation: 90 training points, 9 micro-batches of 10."""
    torch.manual_seed(config.seed)
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 3))
    return Task(model, Jittered(90, 1, augment=True), Jittered(40, 2, augment=False), name="jittered")


class Curve(Dataset):
    """Regression, one dict per item: {"t": input, "target": sin(3t)}."""

    def __init__(self, n: int, seed: int):
        self.t = torch.rand(n, 1, generator=torch.Generator().manual_seed(seed)) * 2 - 1
        self.target = torch.sin(3 * self.t[:, 0])

    def __len__(self) -> int:
        return len(self.t)

    def __getitem__(self, index: int) -> dict:
        return {"t": self.t[index], "target": self.target[index]}


def stack_dicts(items: list[dict]) -> dict:
    """A custom collate function: a dict of stacked tensors."""
    return {key: torch.stack([item[key] for item in items]) for key in items[0]}


class TwoHeads(nn.Module):
    """A model returning a tuple: (prediction, hidden features)."""

    def __init__(self):
        super().__init__()
        self.body, self.head = nn.Sequential(nn.Linear(1, 32), nn.Tanh()), nn.Linear(32, 1)

    def forward(self, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = self.body(t)
        return self.head(hidden).squeeze(-1), hidden


def first_mse(outputs, target):
    return F.mse_loss(outputs[0], target)


def first_mae(outputs, target):
    return (outputs[0] - target).abs().mean()


def curve_task(config: FitConfig, n_train: int = 47) -> Task:
    """Regression with dict batches, a custom collate, a tuple output and its own metric (lower is better)."""
    torch.manual_seed(config.seed)
    return Task(TwoHeads(), Curve(n_train, 1), Curve(30, 2), loss_fn=first_mse, metric=first_mae, metric_name="mae",
                metric_mode="min", collate_fn=stack_dicts, name="curve")


def counted_noisy_task(config: FitConfig) -> Task:
    """noisy_task, and under DDP a communication hook counting this rank's all-reduces into OUT/allreduces-RANK."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    from course_utils.production import distributed
    real_wrap, counter = distributed.wrap, {"n": 0}
    record = Path(config.out) / f"allreduces-{os.environ.get('RANK', '0')}"

    def counting(state, bucket):
        counter["n"] += 1
        record.write_text(str(counter["n"]))
        return allreduce_hook(None, bucket)

    def wrap(model, ranks):
        wrapped = real_wrap(model, ranks)
        if wrapped is not model:
            wrapped.register_comm_hook(None, counting)
        return wrapped
    distributed.wrap = wrap
    return noisy_task(config)


def returns_a_dict(config):
    return {"model": nn.Linear(2, 2)}


def broadcasting_task(config):
    """MSELoss on outputs (N, 1) against targets (N,): torch broadcasts them to (N, N) with only a warning."""
    return Task(nn.Linear(4, 1), Jittered(20, 1, False), Jittered(10, 2, False), loss_fn=nn.MSELoss(), name="bad")


def too_few_logits_task(config):
    """Two logits for three classes: CrossEntropyLoss meets target 2."""
    return Task(nn.Linear(4, 2), Jittered(20, 1, False), Jittered(10, 2, False), name="bad")


# --- helpers -----------------------------------------------------------------------------------------

# device="cpu" on a GPU machine too: bitwise claims, and children forked to be killed cannot use CUDA.
BASE = dict(epochs=3, batch_size=10, accum_steps=2, lr=0.02, optimizer="adamw", schedule="onecycle",
            checkpoint_every=2, keep=2, threads=1, progress=False, tensorboard=False, device="cpu")


def config(out: Path, **changes) -> FitConfig:
    return FitConfig(out=str(out), **{**BASE, **changes})


def quiet(cfg: FitConfig, task: Task | None = None):
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit(cfg, task)


def metrics_lines(out: Path) -> list[dict]:
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k != "elapsed_s"} for line in lines]


def assert_same_run(out: Path, reference: Path) -> None:
    got = torch.load(out / "model.pt", weights_only=True)
    want = torch.load(reference / "model.pt", weights_only=True)
    assert got.keys() == want.keys()
    for name in want:
        assert torch.equal(got[name], want[name]), f"{name} differs from the uninterrupted run"
    assert metrics_lines(out) == metrics_lines(reference)


def _fit_task_in_child(cfg: FitConfig, make, kill_at_call: int | None, after: str | None) -> None:
    """fit(cfg, make(cfg)); with kill_at_call, SIGKILL this process inside that training micro-step (1-based),
    once the checkpoint file `after` is complete on disk (the writer thread is then done with it)."""
    task = make(cfg)
    if kill_at_call is not None:
        calls = {"n": 0}
        real = task.loss_fn
        done = Path(cfg.out) / "checkpoints" / after            # written last: its checksum is already there

        def loss_then_die(outputs, targets):
            calls["n"] += torch.is_grad_enabled()          # training micro-steps only (not the checks, not validation)
            if calls["n"] == kill_at_call:
                deadline = time.monotonic() + 30
                while not done.exists() and time.monotonic() < deadline:
                    time.sleep(0.001)
                os.kill(os.getpid(), signal.SIGKILL)
            return real(outputs, targets)
        task.loss_fn = loss_then_die
    quiet(cfg, task)


def run_in_child(cfg: FitConfig, make, delay: float = 600, kill_at_call: int | None = None,
                 after: str | None = None) -> bool:
    """The Python API in a forked child, SIGKILLed after `delay` s or at a loss call; True if it was killed."""
    child = killed_runs.process(_fit_task_in_child, cfg, make, kill_at_call, after)
    child.start()
    child.join(delay)
    if child.is_alive():
        os.kill(child.pid, signal.SIGKILL)
    child.join()
    return child.exitcode == -signal.SIGKILL


def cli(out: Path, task: str, *flags: str) -> list[str]:
    return [sys.executable, "-m", "course_utils.train", "--task", task, "--out", str(out), "--epochs",
            str(BASE["epochs"]), "--batch-size", "10", "--accum-steps", "2", "--lr", "0.02", "--optimizer", "adamw",
            "--schedule", "onecycle", "--checkpoint-every", "2", "--keep", "2", "--threads", "1", "--no-progress",
            "--no-tensorboard", "--device", "cpu", *flags]                  # as BASE: compared with its runs


def positions(folder: Path) -> set[tuple[int, int]]:
    return {ckpt._position(p)[:2] for p in ckpt.checkpoint_files(folder)}


@pytest.fixture(scope="module")
def noisy_reference(tmp_path_factory) -> Path:
    """The uninterrupted run of noisy_task, in this process, without workers."""
    out = tmp_path_factory.mktemp("noisy") / "reference"
    quiet(config(out), noisy_task(config(out)))
    return out


# --- bitwise resume with workers and random augmentation ------------------------------------------------

def test_two_workers_give_the_run_without_workers(tmp_path, noisy_reference):
    """Each batch's draws come from (seed, epoch, indices): two workers change no number."""
    out = tmp_path / "workers"
    quiet(config(out, workers=2), noisy_task(config(out)))
    assert_same_run(out, noisy_reference)


def test_api_killed_mid_window_mid_epoch_and_at_random_moments_resumes_bitwise(tmp_path, noisy_reference):
    # deterministic kills inside a micro-step, mid-window (K = 2), after a mid-epoch checkpoint (every 2 updates):
    # micro-step 5 of epoch 1 (checkpoint after its 4th), micro-step 7 of epoch 2 (the 16th; checkpoint after its 6th)
    for call, after in ((5, "last-e0000-s000004.pt"), (16, "last-e0001-s000006.pt")):
        out = tmp_path / f"at-call-{call}"
        cfg = config(out, workers=2, resume=True)
        assert run_in_child(cfg, noisy_task, kill_at_call=call, after=after)
        assert any(position > 0 for _, position in positions(out / "checkpoints")), "a mid-epoch checkpoint"
        run_in_child(cfg, noisy_task)                                   # resume to the end, workers again
        assert_same_run(out, noisy_reference)
    killed_runs.ready()
    start = time.perf_counter()
    assert not run_in_child(config(tmp_path / "timed", workers=2), noisy_task)
    window = time.perf_counter() - start                                # how long a whole run takes in a child
    rng = random.Random(24)
    kills = 0
    for trial in range(3):                                              # and at random moments in it
        out = tmp_path / f"random-{trial}"
        cfg = config(out, workers=2, resume=True)
        landed, window = killed_runs.kill_lands(lambda delay: run_in_child(cfg, noisy_task, delay=delay), out,
                                                window, rng)                # the first kill sure to land, any load
        kills += landed + run_in_child(cfg, noisy_task, delay=rng.uniform(0.02, window))
        quiet(cfg, noisy_task(cfg))
        assert_same_run(out, noisy_reference)
    assert kills >= 3


def _die_while_saving(cfg: FitConfig, call: int, phase: str) -> None:
    """fit(noisy_task) that SIGKILLs itself during its `call`-th checkpoint write (`phase` of it)."""
    calls = {"n": 0}
    real_bytes, real_text = ckpt.atomic_write_bytes, ckpt.atomic_write_text

    def writing(path, data, **options):
        calls["n"] += 1
        if calls["n"] == call and phase == "half-written":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).with_name(Path(path).name + ".x1y2.tmp").write_bytes(data[: len(data) // 2])
            os.kill(os.getpid(), signal.SIGKILL)
        real_bytes(path, data, **options)

    def checksum(path, text):
        if calls["n"] == call - 1 and phase == "checksum-only":
            real_text(path, text)
            os.kill(os.getpid(), signal.SIGKILL)        # the checksum is in place, the .pt not yet
        real_text(path, text)

    ckpt.atomic_write_bytes, ckpt.atomic_write_text = writing, checksum
    quiet(cfg, noisy_task(cfg))


@pytest.mark.parametrize("phase", ["half-written", "checksum-only"])
def test_killed_mid_save_falls_back_and_resumes_bitwise(tmp_path, noisy_reference, phase):
    for call in (1, 3):                      # the very first checkpoint, and one with an older one to fall back to
        out = tmp_path / f"{phase}-{call}"
        cfg = config(out, workers=2, resume=True)
        child = killed_runs.process(_die_while_saving, cfg, call, phase)
        child.start()
        child.join()
        assert child.exitcode == -signal.SIGKILL
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            quiet_resume = contextlib.redirect_stdout(io.StringIO())
            with quiet_resume:
                fit(cfg, noisy_task(cfg))
        assert_same_run(out, noisy_reference)
        assert not [w for w in caught if "checkpoint" in str(w.message)]   # a killed save: nothing refused
        assert not [p for p in (out / "checkpoints").glob("*.sha256") if not p.with_suffix("").exists()]
        assert not list((out / "checkpoints").glob("*.tmp"))


def test_the_command_line_trains_a_task_from_this_file_and_resumes_bitwise_after_sigkill(tmp_path, noisy_reference):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for trial in range(2):                     # killed once the first (then the second) checkpoint is on disk
        out = tmp_path / f"cli-{trial}"
        process = subprocess.Popen(cli(out, f"{HERE}:noisy_task", "--workers", "2"), cwd=ROOT, env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while process.poll() is None and len(list((out / "checkpoints").glob("last-*.pt"))) <= trial:
            time.sleep(0.002)
        process.kill()
        assert process.wait() == -signal.SIGKILL and not (out / "model.pt").exists(), "killed before the end"
        resume = cli(out, f"{HERE}:noisy_task", "--workers", "2", "--resume")
        if trial == 0:                         # resumed by a new process, then by main() in this one
            done = subprocess.run(resume, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stderr[-2000:]
            said = done.stdout
        else:
            with contextlib.redirect_stdout(io.StringIO()) as printed, warnings.catch_warnings():
                warnings.simplefilter("ignore")
                assert main(resume[3:]) == 0
            said = printed.getvalue()
        assert "resumed from" in said
        assert_same_run(out, noisy_reference)


def test_without_seeded_batches_two_workers_would_not_resume_exactly(tmp_path):
    """The negative control: the same run with seed_batches=False changes after a mid-epoch resume."""
    def unseeded(cfg):
        task = noisy_task(cfg)
        task.seed_batches = False
        return task

    results = {}
    for seeded, make in (("seeded", noisy_task), ("unseeded", unseeded)):
        whole, cut = tmp_path / seeded / "whole", tmp_path / seeded / "cut"
        quiet(config(whole, workers=2, keep=20), make(config(whole)))
        shutil.copytree(whole, cut)
        for path in ckpt.checkpoint_files(cut / "checkpoints"):        # as if killed mid-epoch 2
            if ckpt._position(path)[:2] > (1, 2):
                path.unlink()
        (cut / "model.pt").unlink()
        resumed = quiet(config(cut, workers=2, keep=20, resume=True), make(config(cut)))
        assert resumed.resumed_from.endswith("last-e0001-s000002.pt")
        a, b = (torch.load(p / "model.pt", weights_only=True) for p in (whole, cut))
        results[seeded] = all(torch.equal(a[k], b[k]) for k in a)
    assert results == {"seeded": True, "unseeded": False}


# --- the built-in tasks, from the command line ------------------------------------------------------------

@pytest.mark.parametrize("name, flags", [("chars", ["--epochs", "1", "--checkpoint-every", "8"]),
                                         ("shapes", ["--epochs", "1", "--checkpoint-every", "16", "--workers", "2"])])
def test_built_in_tasks_resume_bitwise_after_sigkill(tmp_path, name, flags):
    base = ["--batch-size", "32", "--lr", "0.003", "--threads", "1", "--no-progress", "--no-tensorboard",
            "--device", "cpu", *flags]                                  # bitwise: the CPU, on a GPU machine too
    whole = tmp_path / "whole"
    assert main(["--task", name, "--out", str(whole), *base]) == 0
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = tmp_path / "cut"
    command = [sys.executable, "-m", "course_utils.train", "--task", name, "--out", str(out), *base]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while process.poll() is None and not list((out / "checkpoints").glob("last-*.pt")):
        time.sleep(0.005)
    process.kill()
    assert process.wait() == -signal.SIGKILL and not (out / "model.pt").exists()
    with contextlib.redirect_stdout(io.StringIO()) as said, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["--task", name, "--out", str(out), "--resume", *base]) == 0
    assert "resumed from" in said.getvalue()
    assert_same_run(out, whole)
    record = metrics_lines(whole)[0]
    assert "val_acc" in record and record["val_loss"] < 3.5           # class logits: next character, or shape


# --- the other guarantees, on tasks that are not the spiral ------------------------------------------------

def test_a_regression_task_with_dict_batches_logs_its_metric_not_accuracy_and_stops_early_with_the_best(tmp_path):
    out = tmp_path / "curve"
    cfg = FitConfig(out=str(out), epochs=40, batch_size=8, lr=0.05, patience=3, monitor="val_mae", threads=1,
                    progress=False, tensorboard=True)
    result = quiet(cfg, curve_task(cfg))
    records = metrics_lines(out)
    assert set(records[0]) == {"epoch", "updates", "train_loss", "val_loss", "val_mae", "lr", "skipped_updates"}
    assert result.stop_reason.startswith("early stopping") and result.epochs_completed < 40
    maes = [r["val_mae"] for r in records]                             # the rule, counted over the history
    best_epoch = 1 + maes.index(min(maes))
    assert result.best["epoch"] == best_epoch and result.delivered == "best"
    assert len(maes) == best_epoch + 3
    # model.pt holds the best checkpoint's weights; model-last.pt the last ones; the object holds the best
    delivered = torch.load(out / "model.pt", weights_only=True)
    best = load_checkpoint(out / "checkpoints" / ckpt.checkpoint_name("best", best_epoch, 0))["model"]
    last = load_checkpoint(ckpt.checkpoint_files(out / "checkpoints", "last")[0])["model"]
    assert all(torch.equal(delivered[k], best[k]) for k in best)
    assert all(torch.equal(torch.load(out / "model-last.pt", weights_only=True)[k], last[k]) for k in last)
    assert not all(torch.equal(best[k], last[k]) for k in best)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["delivered"] == "best" and summary["best"]["epoch"] == best_epoch
    from tests.test_production_parts import scalars
    assert {"val/loss", "val/mae"} <= set(scalars(out / "tb")) and "val/acc" not in scalars(out / "tb")


def test_accumulation_on_dict_batches_equals_one_big_batch(tmp_path):
    """47 examples, micro-batches of 5, K = 4: windows of 20, 20 and a short 7 (with a partial batch of 2)."""
    epochs, lr = 2, 0.3
    cfg = FitConfig(out=str(tmp_path / "run"), epochs=epochs, batch_size=5, accum_steps=4, optimizer="sgd", lr=lr,
                    threads=1, progress=False, tensorboard=False, device="cpu")        # the oracle is on the CPU
    result = quiet(cfg, curve_task(cfg))
    oracle = curve_task(cfg)                                    # the same initial weights (seeded by the task)
    optimizer = torch.optim.SGD(oracle.model.parameters(), lr=lr)
    sampler = DistributedSampler(oracle.train_data, num_replicas=1, rank=0, shuffle=True, seed=0)
    data = oracle.train_data
    updates = 0
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        order = list(sampler)
        for start in range(0, len(order), 20):
            window = order[start:start + 20]
            optimizer.zero_grad()
            first_mse(oracle.model(data.t[window]), data.target[window]).backward()
            optimizer.step()
            updates += 1
    assert result.updates == updates == training_arithmetic(47, 5, epochs, 4).total_weight_updates
    got = torch.load(tmp_path / "run" / "model.pt", weights_only=True)
    for name, want in oracle.model.state_dict().items():
        torch.testing.assert_close(got[name], want, rtol=1e-5, atol=1e-6)


def test_bf16_on_the_cnn_resumes_bitwise(tmp_path):
    from course_utils.production.builtin import shapes_task
    make = lambda cfg: shapes_task(cfg, n_train=96, n_val=32)           # noqa: E731
    options = dict(epochs=2, batch_size=16, amp="bf16", checkpoint_every=2, keep=20, threads=1, progress=False,
                   tensorboard=False)
    whole = FitConfig(out=str(tmp_path / "whole"), **options)
    result = quiet(whole, make(whole))
    assert result.completed and all(np.isfinite(r["val_loss"]) for r in result.history)
    cut = tmp_path / "cut"
    shutil.copytree(tmp_path / "whole", cut)
    for path in ckpt.checkpoint_files(cut / "checkpoints"):
        if ckpt._position(path)[:2] > (1, 2):
            path.unlink()
    resumed = FitConfig(out=str(cut), resume=True, **options)
    assert quiet(resumed, make(resumed)).resumed_from.endswith("last-e0001-s000002.pt")
    assert_same_run(cut, tmp_path / "whole")


def test_the_nan_guard_on_a_task(tmp_path):
    cfg = config(tmp_path / "once", epochs=2, schedule="constant", inject_nan_at=(3,))
    once = quiet(cfg, noisy_task(cfg))
    assert once.completed and once.skipped_updates == 1
    cfg = config(tmp_path / "many", epochs=2, schedule="constant", inject_nan_at=(3, 5, 7), max_bad_steps=3)
    many = quiet(cfg, noisy_task(cfg))
    assert many.stop_reason.startswith("diverged") and not (tmp_path / "many" / "model.pt").exists()


def test_a_task_checkpoint_loads_with_weights_only_and_a_damaged_one_falls_back(tmp_path, noisy_reference):
    out = tmp_path / "run"
    quiet(config(out), noisy_task(config(out)))
    for path in ckpt.checkpoint_files(out / "checkpoints"):
        torch.load(path, weights_only=True)                              # plain torch.load, no allowlist
    newest = ckpt.checkpoint_files(out / "checkpoints", "last")[0]
    data = bytearray(newest.read_bytes())
    data[len(data) // 2] ^= 0xFF
    newest.write_bytes(bytes(data))
    with pytest.warns(RuntimeWarning, match="damaged"):
        with contextlib.redirect_stdout(io.StringIO()):
            fit(config(out, resume=True), noisy_task(config(out)))
    assert_same_run(out, noisy_reference)


def test_a_task_run_refuses_a_checkpoint_that_would_run_code(tmp_path):
    from tests.test_production_resume import _RunsCode
    out, marker = tmp_path / "run", tmp_path / "pwned"
    quiet(config(out, epochs=1), noisy_task(config(out)))
    evil = ckpt.serialize({"format": ckpt.FORMAT, "payload": _RunsCode(str(marker))})
    ckpt.write_checkpoint(out / "checkpoints", ckpt.checkpoint_name("last", 9, 0), evil)     # a valid checksum
    with pytest.raises(ckpt.UnsafeCheckpointError, match="refusing checkpoint .*last-e0009-s000000.pt"):
        quiet(config(out, epochs=1, resume=True), noisy_task(config(out)))
    assert not marker.exists(), "unpickling ran the attacker's code"


def test_resume_refuses_another_task_in_the_same_folder(tmp_path):
    out = tmp_path / "run"
    quiet(config(out, epochs=1), noisy_task(config(out)))
    with pytest.raises(ckpt.CheckpointError, match="different run: task name 'jittered' \\(now 'curve'\\)"):
        quiet(config(out, epochs=1, resume=True), curve_task(config(out)))


# --- accuracy only where it means something -----------------------------------------------------------------

@pytest.mark.parametrize("outputs, targets, expected", [
    (torch.zeros(8, 3), torch.zeros(8, dtype=torch.long), 1),                 # class logits
    (torch.zeros(4, 6, 10), torch.zeros(4, 6, dtype=torch.long), 2),          # a language model: (B, T, V)
    (torch.zeros(4, 10, 6), torch.zeros(4, 6, dtype=torch.long), 1),          # CrossEntropyLoss's (N, C, T)
    ((torch.zeros(8, 3), torch.zeros(8, 5)), torch.zeros(8, dtype=torch.long), 1),   # a tuple: its first element
    (torch.zeros(8, 1), torch.zeros(8, 1), None),                            # regression
    (torch.zeros(8), torch.zeros(8, dtype=torch.long), None),                # one score per example
    (torch.zeros(8, 3), torch.zeros(8, 3), None),                            # soft / multi-label targets
    ({"logits": torch.zeros(8, 3)}, torch.zeros(8, dtype=torch.long), None),
])
def test_accuracy_is_logged_only_for_class_logits(outputs, targets, expected):
    from course_utils.production.task import class_dim
    assert class_dim(outputs, targets) == expected


# --- a bad task: one clear line, exit code 2 ---------------------------------------------------------------

@pytest.mark.parametrize("spec, message", [
    ("no_such_module_xyz:make", "cannot import no_such_module_xyz (ModuleNotFoundError"),
    (f"{HERE}:no_such_function", "has no function no_such_function"),
    (f"{HERE}:returns_a_dict", "must return a course_utils.production.Task, it returned a dict"),
    (f"{HERE}:broadcasting_task", "the model's output does not fit the loss: MSELoss got outputs a tensor of "
                                  "shape (10, 1) (float32) and targets a tensor of shape (10,) (int64)"),
    (f"{HERE}:too_few_logits_task", "the model's output does not fit the loss: CrossEntropyLoss got outputs a "
                                    "tensor of shape (10, 2) (float32) and targets a tensor of shape (10,) (int64): "
                                    "IndexError: Target 2 is out of bounds."),
    ("chars:make", "cannot import chars"),
    ("spiral2", "--task must be one of spiral, chars, shapes or MODULE:FUNCTION"),
])
def test_a_bad_task_gives_one_line_and_exit_code_2(tmp_path, capsys, spec, message):
    assert main(["--task", spec, "--out", str(tmp_path / "run"), "--epochs", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err, err
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_a_bad_task_through_the_real_command_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "course_utils.train", "--task", f"{HERE}:too_few_logits_task", "--out",
                           str(tmp_path / "run")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "does not fit the loss" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_first_batchs_loss_is_tried_on_cpu_copies_where_a_gpu_would_assert():
    """What a GPU turns into a device-side assert (a dead CUDA context), CPU copies turn into torch's own error."""
    logits, bad = torch.randn(10, 2, dtype=torch.float16), torch.tensor([0, 1, 2] + [0] * 7)
    with pytest.raises(IndexError, match="Target 2 is out of bounds"):
        loss_on_cpu_copies(nn.CrossEntropyLoss(), logits, bad)
    with pytest.raises(RuntimeError, match="between 0 and 1"):              # BCELoss given logits, not probabilities
        loss_on_cpu_copies(nn.BCELoss(), torch.tensor([1.5, -0.2]), torch.tensor([1.0, 0.0]))
    weighted = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0]))
    weight = weighted.weight
    assert loss_on_cpu_copies(weighted, logits, bad % 2) is None and weighted.weight is weight   # a copy is moved
    assert loss_on_cpu_copies(lambda o, t: F.cross_entropy(o["logits"], t[0]), {"logits": logits}, [bad % 2]) is None

    def keeps_its_own_tensors_on_the_gpu(outputs, targets):
        raise RuntimeError("Expected all tensors to be on the same device, but found at least two devices")
    assert loss_on_cpu_copies(keeps_its_own_tensors_on_the_gpu, logits, bad) is None     # left to the GPU


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none on this machine)")
def test_on_cuda_a_bad_task_is_one_line_and_the_gpu_still_works(tmp_path, capsys):
    spec = f"{HERE}:too_few_logits_task"
    assert main(["--task", spec, "--out", str(tmp_path / "run"), "--epochs", "1", "--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "IndexError: Target 2 is out of bounds." in err, err
    assert torch.ones(3, device="cuda").sum().item() == 3.0                 # no device-side assert happened


def test_spiral_flags_are_refused_with_a_task(tmp_path, capsys):
    assert main(["--task", "shapes", "--out", str(tmp_path / "run"), "--hidden", "64"]) == 2
    assert "--hidden only describes the spiral task; --task shapes brings its own model" in capsys.readouterr().err
    with pytest.raises(TaskError, match="hidden describes only the spiral task"):
        fit(FitConfig(out=str(tmp_path / "api"), hidden=8), noisy_task(config(tmp_path)))
    with pytest.raises(TaskError, match="monitor val_acc is not logged by task 'curve'"):
        quiet(FitConfig(out=str(tmp_path / "acc"), monitor="val_acc", progress=False), curve_task(config(tmp_path)))


@pytest.mark.parametrize("fields, named", [
    (dict(model="not a model"), "model must be a torch.nn.Module"),
    (dict(train_data=[1, 2, 3].__iter__()), "train_data must be a map-style dataset"),
    (dict(val_data=Jittered(0, 1, False)), "val_data must hold at least one example"),
    (dict(metric_mode="up"), "metric_mode must be 'min' or 'max'"),
    (dict(metric_name="acc"), "metric_name must be a name"),
])
def test_task_fields_are_checked_by_name(fields, named):
    good = dict(model=nn.Linear(4, 3), train_data=Jittered(10, 1, False), val_data=Jittered(10, 2, False))
    with pytest.raises(TaskError, match=named):
        Task(**{**good, **fields})


def _bn_task(frozen: bool, given_in_eval: bool = False) -> Task:
    """A classifier whose BatchNorm is frozen (eval mode inside a training model, as when fine-tuning a pretrained
    backbone), or not; or the whole model handed over in eval mode."""
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(96, 4, generator=g), torch.randint(0, 3, (96,), generator=g)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 3))
    model[1].running_mean.fill_(0.5)                        # statistics "from pretraining"
    if frozen:
        model[1].eval()
    if given_in_eval:
        model.eval()
    data = torch.utils.data.TensorDataset(x, y)
    return Task(model, torch.utils.data.Subset(data, range(64)), torch.utils.data.Subset(data, range(64, 96)),
                name="bn")


def test_a_frozen_batchnorm_stays_frozen_through_training_and_validation(tmp_path):
    """Layers frozen in eval mode inside the training model stay so, through every epoch and after each validation
    (Lightning keeps them too, measured with 2.6.6): the frozen BatchNorm's running statistics come out bitwise as
    they went in, and fit names the frozen layer once; the same model not frozen learns its statistics."""
    outputs = {}
    for frozen in (True, False):
        task = _bn_task(frozen)
        before = task.model[1].running_mean.clone()
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            fit(FitConfig(out=str(tmp_path / f"run{frozen}"), epochs=3, batch_size=16, threads=1, progress=False,
                          tensorboard=False), task)
        outputs[frozen] = out.getvalue()
        bn = task.model[1]
        assert bn.training is (not frozen) and task.model.training and task.model[3].training
        assert torch.equal(bn.running_mean, before) is frozen
    said = [line for line in outputs[True].splitlines() if "stay so, as given" in line]
    assert len(said) == 1 and said[0].endswith(": 1"), said
    assert "stay so, as given" not in outputs[False]


def test_a_model_given_in_eval_mode_is_trained_in_train_mode_and_fit_says_so(tmp_path):
    task = _bn_task(frozen=False, given_in_eval=True)
    seen = []
    task.model.register_forward_pre_hook(lambda module, _: seen.append(module.training))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = fit(FitConfig(out=str(tmp_path / "run"), epochs=2, batch_size=16, threads=1, progress=False,
                               tensorboard=False), task)
    assert result.updates == 8 and seen.count(True) == 8            # every training forward in train mode
    assert out.getvalue().count("the model came in eval mode") == 1
