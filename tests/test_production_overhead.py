"""What fit's loop costs the device (issue 33, item 3), proved where a CPU can prove it: one host sync per update
(the NaN guard reads the norm and the window's losses in one go), checkpoints copied on the training thread and
written on a writer thread, one at a time, holding the state at their position however slow the disk."""
from __future__ import annotations

import contextlib
import importlib
import io
import threading
import time
import warnings
from pathlib import Path

import pytest
import torch

from course_utils.production import checkpoint as ckpt
from course_utils.production import data_order, load_checkpoint
from course_utils.production.logs import RunLog
from course_utils.production.writer import BackgroundWriter, snapshot
from tests.test_production_resume import _quiet_fit, config

fit_module = importlib.import_module("course_utils.production.fit")
# Every way a tensor's value reaches Python (a host sync on a GPU), and an explicit synchronize
READS = ["item", "tolist", "numpy", "cpu", "__bool__", "__float__", "__int__", "__index__", "nonzero"]


def _marked(monkeypatch, events: list, reads: list[str]) -> None:
    """Record, on the training thread, each host read and each update, epoch start and validation.

    Reads of the optimizer's step counters are left out: torch keeps them on the CPU (a GPU run reads them
    without a sync) unless the optimizer is capturable or fused.
    """
    main, optimizers = threading.get_ident(), []

    def wrap(owner, name, label):
        original = getattr(owner, name)

        def recorded(*args, **kwargs):
            counter = args and any(args[0] is state.get("step") for o in optimizers for state in o.state.values())
            if threading.get_ident() == main and not counter:
                events.append(label)
            return original(*args, **kwargs)
        monkeypatch.setattr(owner, name, recorded)
    real_optimizer = fit_module.make_optimizer
    monkeypatch.setattr(fit_module, "make_optimizer", lambda *a, **k: optimizers.append(real_optimizer(*a, **k))
                        or optimizers[-1])
    for name in reads:
        wrap(torch.Tensor, name, name)
    wrap(torch.cuda, "synchronize", "synchronize")
    wrap(RunLog, "update", "UPDATE")
    wrap(BackgroundWriter, "save", "CHECKPOINT")
    wrap(data_order, "start_epoch", "EPOCH")
    wrap(fit_module, "evaluate", "EVAL")


def per_update(events: list[str]) -> list[list[str]]:
    """The host reads between consecutive updates of one epoch (one update's work, a checkpoint included)."""
    spans, current = [], None
    for event in events:
        if event == "UPDATE":
            if current is not None:
                spans.append(current)
            current = []
        elif event in ("EPOCH", "EVAL"):
            current = None
        elif current is not None:
            current.append(event)
    return spans


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("accum", [1, 3])
def test_fit_reads_the_device_once_per_update(tmp_path, monkeypatch, accum, device):
    """The NaN guard's one read per update, nothing else; an update that takes a checkpoint adds, on a GPU, one
    wait for the state's copies to reach the host (the snapshot the writer thread then saves)."""
    events: list[str] = []
    _marked(monkeypatch, events, READS)
    _quiet_fit(config(tmp_path / "run", accum_steps=accum, epochs=2, checkpoint_every=2, device=device))
    spans = per_update(events)
    assert len(spans) >= (10 if accum == 1 else 4)
    checkpoint = ["CHECKPOINT", "synchronize"] if device == "cuda" else ["CHECKPOINT"]
    assert all(span in (["tolist"], [*checkpoint, "tolist"]) for span in spans), spans
    assert any(span[0] == "CHECKPOINT" for span in spans), spans    # the count saw checkpoints taken mid-epoch


def test_the_counter_sees_a_second_read(tmp_path, monkeypatch):
    """The same count on a loop that reads the loss apart from the norm, as fit did before: two per update."""
    events: list[str] = []
    _marked(monkeypatch, events, READS)
    real = fit_module.on_host
    monkeypatch.setattr(fit_module, "on_host", lambda tensors: [t.item() for t in tensors])
    _quiet_fit(config(tmp_path / "run", accum_steps=1, epochs=1, checkpoint_every=0))
    assert per_update(events) and all(span == ["item", "item"] for span in per_update(events))
    values = [torch.tensor(0.1, dtype=torch.float32), torch.tensor(float("nan")), torch.tensor(3.0)]
    assert real(values)[0] == values[0].item() and real(values)[2] == 3.0      # the same floats .item() gives
    assert real([torch.tensor(0.1, dtype=torch.bfloat16), values[0]]) == [torch.tensor(0.1, dtype=torch.bfloat16)
                                                                          .item(), values[0].item()]


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b or (a != a and b != b)


def test_a_slow_writer_still_writes_the_state_at_its_position_one_at_a_time(tmp_path, monkeypatch):
    reference = tmp_path / "reference"
    _quiet_fit(config(reference, epochs=2, keep=20))
    active, most = [0], [0]
    real_serialize, real_write = ckpt.serialize, ckpt.write_checkpoint

    def slow_serialize(state):
        time.sleep(0.15)                                # training moves on meanwhile, changing every tensor
        return real_serialize(state)

    def counted_write(*args):
        active[0] += 1
        most[0] = max(most[0], active[0])
        try:
            return real_write(*args)
        finally:
            active[0] -= 1
    monkeypatch.setattr(ckpt, "serialize", slow_serialize)
    monkeypatch.setattr(ckpt, "write_checkpoint", counted_write)
    out = tmp_path / "slow"
    _quiet_fit(config(out, epochs=2, keep=20))
    names = sorted(p.name for p in ckpt.checkpoint_files(out / "checkpoints"))   # all there when fit returned
    assert names == sorted(p.name for p in ckpt.checkpoint_files(reference / "checkpoints")) and len(names) >= 5
    for name in names:
        got, want = (load_checkpoint(folder / "checkpoints" / name) for folder in (out, reference))
        for state in (got, want):                       # the clock and the folder differ, by design
            state.pop("elapsed_s"), state["config"].pop("out")
            for record in state["history"]:
                record.pop("elapsed_s")
        assert _same(got, want), f"{name} does not hold the state at its position"
    assert most[0] == 1


def test_a_failed_write_stops_the_run_with_its_error(tmp_path, monkeypatch):
    def full(*args):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(ckpt, "write_checkpoint", full)
    with pytest.raises(OSError, match="No space left"):
        _quiet_fit(config(tmp_path / "run", epochs=2))


def test_a_snapshot_is_a_copy_that_keeps_shared_memory_shared():
    weight = torch.arange(6.0).reshape(2, 3)
    state = {"model": {"w": weight, "w_t": weight.t(), "row": weight[1]}, "history": [{"loss": 1.0}],
             "betas": (0.9, 0.999)}
    copied = snapshot(state)
    weight.add_(100)
    state["history"].append({"loss": 2.0})
    assert torch.equal(copied["model"]["w"], torch.arange(6.0).reshape(2, 3)) and copied["history"] == [{"loss": 1.0}]
    assert copied["model"]["w_t"].untyped_storage().data_ptr() == copied["model"]["w"].untyped_storage().data_ptr()
    assert torch.equal(copied["model"]["row"], torch.tensor([3.0, 4.0, 5.0])) and copied["betas"] == (0.9, 0.999)
    writer = BackgroundWriter()
    writer.wait()                                       # nothing written yet: returns at once


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_on_cuda_an_update_synchronises_once(tmp_path, monkeypatch):
    """torch's own sync debug mode counts the synchronising CUDA calls between two updates of one epoch."""
    marks: list[int] = []
    original = RunLog.update
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        monkeypatch.setattr(RunLog, "update", lambda self, *args: (marks.append(len(caught)), original(self, *args)))
        torch.cuda.set_sync_debug_mode("warn")
        try:
            with contextlib.redirect_stdout(io.StringIO()):        # warnings shown: they are what is counted
                fit_module.fit(config(tmp_path / "run", device="cuda", epochs=2, checkpoint_every=0))
        finally:
            torch.cuda.set_sync_debug_mode(0)
    syncs = [i for i, w in enumerate(caught) if "synchronizing CUDA operation" in str(w.message)]
    marks = [sum(1 for i in syncs if i < mark) for mark in marks]      # syncs before each update's log line
    per_epoch = 4                                       # updates an epoch (validation follows the last)
    gaps = [marks[i + 1] - marks[i] for i in range(len(marks) - 1) if (i + 1) % per_epoch]
    assert len(marks) == 2 * per_epoch and gaps and all(gap == 1 for gap in gaps), gaps
