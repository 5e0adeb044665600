"""The trainer's NaN guard on the device (issue 41): a skipped update is exactly no update, with no host read."""
from __future__ import annotations

import contextlib
import io
import warnings

import pytest
import torch
from torch import nn

from course_utils.engine.models import make_optimizer
from course_utils.engine.schedules import make_scheduler
from course_utils.production import FitConfig, fit
from course_utils.production.amp import Precision
from course_utils.production.guard import APPLIED, SKIPPED, DeviceSchedule, UpdateGuard, can_fuse, why_reads_per_update, \
    zero_momentum
from tests.test_production_overhead import _same   # bitwise equality of nested state

OPTIMIZERS = ["sgd", "momentum", "adam", "adamw"]


def _batches(seed: int, n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(8, 5, generator=g), torch.randint(0, 3, (8,), generator=g)) for _ in range(n)]


def _train(name: str, batches, bad_at: set[int], schedule: str = "step", epochs: int = 2):
    """The guard's update on each batch (a batch in bad_at made NaN); the model, optimizer and scheduler after."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 3))
    params = list(model.parameters())
    optimizer = make_optimizer(name, params, lr=0.05, weight_decay=0.01, fused=True)
    zero_momentum(optimizer)
    scheduler, cadence = make_scheduler(schedule, optimizer, epochs=epochs, steps_per_epoch=len(batches))
    guard = UpdateGuard(optimizer, Precision("none", torch.device("cpu")), 1, on_device=True)
    outcomes = []
    for epoch in range(epochs):
        for i, (x, y) in enumerate(batches):
            loss = nn.functional.cross_entropy(model(x), y)
            if (epoch, i) in bad_at:
                loss = loss * float("nan")
            loss.backward()
            norm = torch.nn.utils.get_total_norm([p.grad for p in params])
            guard.step(norm, [loss.detach()], [len(y)], epoch, i)
            optimizer.zero_grad(set_to_none=True)
        outcomes += [s.outcome for s in guard.settle()]
        scheduler.step()
    return model, optimizer, scheduler, outcomes


@pytest.mark.parametrize("name", OPTIMIZERS)
@pytest.mark.parametrize("where", ["first update", "mid-run"])
def test_a_skipped_update_is_bitwise_no_update(name, where):
    """A run with a poisoned batch equals, bit for bit, the run that never saw that batch: weights, optimizer state
    (momentum, Adam's moments and step counts), the schedule; the verdict is known only when the host settles."""
    batches = _batches(1, 6)
    bad = 0 if where == "first update" else 3
    poisoned = batches[:bad] + [batches[bad]] + batches[bad:]      # one extra batch, poisoned, before batch `bad`
    with_bad = _train(name, poisoned, {(0, bad)}, epochs=1)
    clean = _train(name, batches, set(), epochs=1)               # the same batches in the same order, less that one
    assert with_bad[3].count(SKIPPED) == 1 and with_bad[3].count(APPLIED) == len(batches)
    assert _same(with_bad[0].state_dict(), clean[0].state_dict())
    assert _same(with_bad[1].state_dict(), clean[1].state_dict())
    assert with_bad[2].state_dict() == clean[2].state_dict()     # the schedule, stepped at the epoch's end


def test_without_the_skip_the_poisoned_run_differs():
    """The comparison can fail: the same poisoned batch stepped on (no found_inf) leaves NaN weights."""
    batches = _batches(1, 6)
    model, optimizer, _, _ = _train("adam", batches, set())
    x, y = batches[0]
    (nn.functional.cross_entropy(model(x), y) * float("nan")).backward()
    optimizer.step()
    assert not all(torch.isfinite(p).all() for p in model.parameters())


def test_zeroed_momentum_makes_a_skipped_first_step_exact():
    """Why zero_momentum exists (torch 2.13): fused SGD's first step skipped leaves its buffers unwritten, and the
    run no longer equals the one without the bad batch; with the buffers zeroed it does (the test above)."""
    def run(bad: bool, zeroed: bool):
        torch.manual_seed(0)
        layer = nn.Linear(64, 64)
        opt = torch.optim.SGD(layer.parameters(), lr=0.1, momentum=0.9, fused=True)
        if zeroed:
            zero_momentum(opt)
        g = torch.Generator().manual_seed(3)
        if bad:
            for p in layer.parameters():
                p.grad = torch.full_like(p, float("nan"))
            opt.found_inf = torch.ones(())
            opt.step()
            del opt.found_inf
        for _ in range(3):
            for p in layer.parameters():
                p.grad = torch.randn(p.shape, generator=g)
            opt.step()
        return layer.weight.detach().clone()

    # torch.empty_like may happen to return zeroed memory; fill the allocator's free blocks with a pattern first
    torch.full((64 * 64 * 8,), 7.0)
    assert torch.equal(run(True, zeroed=True), run(False, zeroed=True))
    assert torch.equal(run(False, zeroed=True), run(False, zeroed=False))   # zeros change nothing without a skip


def test_what_needs_a_read_per_update():
    cpu = torch.device("cpu")
    assert why_reads_per_update(True, "epoch", Precision("none", cpu), None) is None
    assert why_reads_per_update(True, "epoch", Precision("bf16", cpu), None) is None
    assert "momentum" in why_reads_per_update(True, "update", Precision("none", cpu), None)
    assert "fused" in why_reads_per_update(False, "epoch", Precision("none", cpu), None)
    assert can_fuse([torch.zeros(2, requires_grad=True)]) and not can_fuse([torch.zeros(2, dtype=torch.long)])


def _quiet(cfg: FitConfig):
    with contextlib.redirect_stdout(io.StringIO()) as out, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit(cfg), out.getvalue()


TINY = dict(n_train=60, n_val=30, batch_size=10, hidden=8, threads=1, progress=False, tensorboard=False)


@pytest.mark.parametrize("log_every", [1, 4, 1000])
def test_fit_reports_skipped_updates_by_number_at_its_log_points(tmp_path, log_every):
    """The same run, read every update or rarely: the same weights, counts and the same skipped-update lines."""
    results = {}
    for every in sorted({log_every, 1}):
        result, printed = _quiet(FitConfig(out=str(tmp_path / f"run{every}"), epochs=3, inject_nan_at=(4, 9),
                                           log_every=every, **TINY))
        lines = [line for line in printed.splitlines() if line.startswith("skipped update")]
        results[every] = (result, lines, (tmp_path / f"run{every}" / "model.pt").read_bytes())
    result, lines, weights = results[log_every]
    assert result.skipped_updates == 2 and len(lines) == 2
    # 6 batches an epoch: micro-steps 4 and 9 close updates 5 and 10 (counting the skipped ones)
    assert lines[0].startswith("skipped update 5 at epoch 1, batch 5") and lines[1].startswith("skipped update 10 "
                                                                                              "at epoch 2, batch 4")
    assert weights == results[1][2] and result.history == [
        {**r, "elapsed_s": h["elapsed_s"]} for r, h in zip(results[1][0].history, result.history)]


def test_a_diverged_run_is_stopped_at_the_next_log_point(tmp_path):
    result, printed = _quiet(FitConfig(out=str(tmp_path / "run"), epochs=2, inject_nan_at=(1, 2, 3, 4), log_every=50,
                                       max_bad_steps=3, **TINY))
    assert result.stop_reason.startswith("diverged: 3 updates in a row") and "epoch 1, batch 4" in result.stop_reason
    assert not (tmp_path / "run" / "model.pt").exists()


@pytest.mark.parametrize("optimizer, schedule", [("adamw", "warmup_cosine"), ("sgd", "onecycle"),
                                                 ("momentum", "warmup_cosine")])
def test_a_schedule_stepped_per_update_runs_on_the_device_exactly(tmp_path, monkeypatch, optimizer, schedule):
    """The learning rate picked on the device by the count of applied updates equals torch's scheduler stepped on
    the host after each applied update (the oracle: the same run made to read every update), a skip included."""
    import importlib

    fit_module = importlib.import_module("course_utils.production.fit")

    def run(name: str):
        return _quiet(FitConfig(out=str(tmp_path / name), epochs=3, optimizer=optimizer, schedule=schedule,
                                inject_nan_at=(4,), log_every=1000, **TINY))
    on_device, said = run("device")
    assert "once per update" not in said and on_device.skipped_updates == 1
    monkeypatch.setattr(fit_module, "why_reads_per_update", lambda *args: "forced for the comparison")
    on_host, said = run("host")
    assert "once per update: forced for the comparison" in said
    assert (tmp_path / "device" / "model.pt").read_bytes() == (tmp_path / "host" / "model.pt").read_bytes()
    assert [{**r, "elapsed_s": 0} for r in on_device.history] == [{**r, "elapsed_s": 0} for r in on_host.history]
    assert len({r["lr"] for r in on_device.history}) == 3                  # the schedule did move the rate


def test_a_schedule_that_cycles_momentum_stays_on_the_host():
    model = nn.Linear(3, 2)
    for name, expect in [("adam", None), ("sgd", DeviceSchedule)]:
        opt = make_optimizer(name, model.parameters(), lr=0.1, fused=True)
        built = DeviceSchedule.build(lambda o: make_scheduler("onecycle", o, epochs=2, steps_per_epoch=5).scheduler,
                                     opt, 10, torch.device("cpu"))
        assert (built is None) if expect is None else isinstance(built, expect)
        if built is not None:   # the table is torch's own curve
            assert [row[0] for row in built.rows] == pytest.approx(
                [lr for lr in _curve("onecycle", 0.1, 2, 5)] + [built.rows[-1][0]], rel=0, abs=0)


def _curve(name, lr, epochs, steps):
    from course_utils.engine.schedules import lr_curve
    return lr_curve(name, lr, epochs, steps)
