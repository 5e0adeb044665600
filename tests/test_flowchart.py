"""The chapter-7 flowchart's code is the code that runs: every combination compiles; every single component and
the full set are executed on a tiny spiral problem and checked against an oracle (an uninterrupted run, a big
batch, a counted loop, torch's own scheduler, TensorBoard's own reader, a second rank)."""
import inspect
import itertools
import math
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.distributed as dist
from torch.utils.data import Dataset, TensorDataset

from course_utils.engine.arithmetic import training_arithmetic
from course_utils.engine.data import spiral_splits
from course_utils.chapters.ch07_flowchart_costs import one_process_group_env
from course_utils.chapters.ch07_flowchart import (COMPONENTS, KEYS, TEMPLATE_LINES, assemble, code_lines, holds,
                                                  lines_added, load_fit)
from course_utils.chapters.ch07_flowchart_boxes import NODES, active_nodes, flow_text
from course_utils.engine.models import MLP
from course_utils.engine.schedules import lr_curve

SPLITS = spiral_splits(384, 128, seed=0)
EPOCHS = 4


@pytest.fixture(autouse=True)
def single_process_group_env():
    """What torchrun would set, for a one-process group (port 0: the store picks a free one); never leave a group."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with one_process_group_env():
        yield
    torch.set_num_threads(threads)
    if dist.is_initialized():
        dist.destroy_process_group()


def make_model():
    return MLP(hidden=32)


def run(components, out=None, train=SPLITS.train, val=SPLITS.val, init_seed=0, **options):
    """Execute the assembled loop for these components; returns (model, history)."""
    fit = load_fit(components)
    accepted = inspect.signature(fit).parameters
    args = dict(epochs=EPOCHS, batch_size=8 if "accumulation" in components else 32, lr=0.01)  # 32 per update
    if "out" in accepted:
        args["out"] = str(out)
    if "compile_backend" in accepted:
        args["compile_backend"] = "eager"  # Dynamo traces and runs the graph; no C++ code generation in tests
    args.update(options)
    torch.manual_seed(init_seed)
    return fit(make_model, train, val, **args)


def weights(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def assert_trains(history, epochs=EPOCHS):
    assert len(history) == epochs
    losses = [h["val_loss"] for h in history]
    assert all(math.isfinite(x) for x in losses)
    assert losses[-1] < 0.85 * losses[0] and history[-1]["val_acc"] > 0.5, losses  # chance: 1/3


class CrashOnPass(Dataset):
    """A validation set that raises on its `crash_pass`-th pass: a run killed between epochs."""

    def __init__(self, data, crash_pass):
        self.data, self.crash_pass, self.passes = data, crash_pass, 0

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        if index == 0:
            self.passes += 1
            if self.passes == self.crash_pass:
                raise KeyboardInterrupt("killed")
        return self.data[index]


# ----------------------------------------------------------------------------- assembling
def test_every_combination_is_valid_python():
    for r in range(len(KEYS) + 1):
        for combo in itertools.combinations(KEYS, r):
            compile(assemble(combo), "<loop>", "exec")


def test_template_conditions_name_only_components_and_every_component_adds_code():
    for _, condition in TEMPLATE_LINES:
        if condition is not None:
            holds(condition, frozenset())  # raises on an unknown name
    for key in KEYS:
        alone, in_full = lines_added(key)
        assert alone > 0 and in_full > 0, key
    assert code_lines(KEYS) > code_lines(()) + sum(lines_added(k)[0] for k in KEYS) / 2


def test_conditions_and_bad_names():
    on = frozenset({"amp", "clip"})
    assert holds("amp&clip", on) and holds("nan_guard|clip", on) and not holds("amp&!clip", on)
    assert holds("amp&clip|amp&nan_guard", frozenset({"amp", "nan_guard"}))
    with pytest.raises(ValueError, match="unknown component"):
        assemble(["checkpoints"])
    with pytest.raises(ValueError, match="unknown component"):
        holds("warp_drive", on)


def test_minimal_loop_has_no_component_code_and_the_full_loop_has_all():
    minimal, full = assemble(()), assemble(KEYS)
    for needle in ["torch.load", "autocast", "clip_grad_norm_", "DDP(", "SummaryWriter", ".compile(backend",
                   "isfinite(grad_norm)", "loss_weight", "seed_everything", "scheduler.step", "bad_checks"]:
        assert needle not in minimal and needle in full, needle
    assert "weights_only=True" in full and "weights_only=False" not in full


def test_flowchart_nodes_follow_the_components():
    assert {n.component for n in NODES} - {None} == set(KEYS)
    assert all(n.component is None for n in active_nodes(()))
    assert len(active_nodes(KEYS)) == len(NODES)
    text = flow_text(["amp"])
    assert "forward + loss in autocast" in text and "clip" not in text
    assert [c.key for c in COMPONENTS] == list(KEYS)


# ----------------------------------------------------------------------------- running each component
def test_minimal_loop_trains():
    _, history = run(())
    assert_trains(history)
    assert [h["updates"] for h in history] == [12, 24, 36, 48]  # 384 / 32 per epoch, counted


def test_seed_makes_runs_repeatable():
    a, ha = run(["seed"], init_seed=1)
    b, hb = run(["seed"], init_seed=2)  # whatever the global state before, the seeded run is the same
    assert_trains(ha)
    assert torch.equal(weights(a), weights(b)) and ha == hb
    c, _ = run((), init_seed=1)
    d, _ = run((), init_seed=2)
    assert not torch.equal(weights(c), weights(d))  # without it, the start decides


@pytest.mark.parametrize("components", [("checkpoint",), ("checkpoint", "seed", "schedule", "early_stop"), KEYS],
                         ids=["checkpoint", "with-state", "full"])
def test_checkpoint_resume_equals_the_uninterrupted_run(tmp_path, components):
    whole, history = run(components, tmp_path / "whole")
    assert_trains(history)
    assert (tmp_path / "whole" / "checkpoints" / "last.pt").exists()
    with pytest.raises(KeyboardInterrupt):
        run(components, tmp_path / "cut", val=CrashOnPass(SPLITS.val, crash_pass=3))  # dies in epoch 3
    if dist.is_initialized():
        dist.destroy_process_group()
    saved = torch.load(tmp_path / "cut" / "checkpoints" / "last.pt", weights_only=True)
    assert saved["epoch"] == 2
    resumed, resumed_history = run(components, tmp_path / "cut", init_seed=123)
    assert torch.equal(weights(resumed), weights(whole))
    assert resumed_history == history


def test_early_stopping_stops_where_a_counted_loop_says(tmp_path):
    small = spiral_splits(24, 128, seed=0)
    options = dict(train=small.train, val=small.val, epochs=60, lr=0.05, batch_size=8, patience=3)
    _, history = run(["early_stop"], **options)
    _, full = run((), train=small.train, val=small.val, epochs=60, lr=0.05, batch_size=8)
    assert 0 < len(history) < 60
    assert history == full[:len(history)]  # stopping changes nothing before the stop
    best, bad, stop = math.inf, 0, None
    for epoch, row in enumerate(full, start=1):
        if row["val_loss"] < best:
            best, bad = row["val_loss"], 0
        else:
            bad += 1
        if bad >= 3:
            stop = epoch
            break
    assert len(history) == stop


@pytest.mark.parametrize("n_train", [384, 360, 364], ids=["full-windows", "short-window", "partial-batch"])
def test_accumulation_equals_the_big_batch(n_train):
    data = TensorDataset(*[t[:n_train] for t in SPLITS.train.tensors])
    small, history = run(["accumulation"], train=data, batch_size=8, accum_steps=4)
    big, big_history = run((), train=data, batch_size=32)
    assert_trains(history)
    assert [h["updates"] for h in history] == [h["updates"] for h in big_history]
    assert torch.allclose(weights(small), weights(big), atol=2e-5)


def test_amp_bf16_trains_close_to_float32_and_keeps_float32_weights():
    model, history = run(["amp"])
    _, plain = run(())
    assert_trains(history)
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert history != plain and abs(history[-1]["val_loss"] - plain[-1]["val_loss"]) < 0.05


def test_clip_with_infinite_norm_is_the_plain_loop_and_clipping_undoes_an_outlier():
    plain, _ = run(())
    same, _ = run(["clip"], max_norm=math.inf)
    assert torch.equal(weights(plain), weights(same))
    x, y = (t.clone() for t in SPLITS.train.tensors)
    x[5] *= 1000.0  # one wild example: its gradient is ~1000 times the others'
    outlier = TensorDataset(x, y)
    _, clean = run((), epochs=6)
    _, hurt = run((), train=outlier, epochs=6)
    _, clipped = run(["clip"], train=outlier, epochs=6, max_norm=1.0)
    assert_trains(clipped, epochs=6)
    assert hurt[-1]["val_loss"] > clean[-1]["val_loss"] + 0.05      # the outlier costs accuracy
    assert abs(clipped[-1]["val_loss"] - clean[-1]["val_loss"]) < 0.02  # clipping gives it back


def test_nan_guard_skips_a_poisoned_batch_and_stops_on_a_poisoned_run():
    x, y = (t.clone() for t in SPLITS.train.tensors)
    x[5] = float("nan")
    poisoned = TensorDataset(x, y)
    _, unguarded = run((), train=poisoned)
    assert not math.isfinite(unguarded[-1]["val_loss"])  # one NaN example poisons every weight
    model, guarded = run(["nan_guard"], train=poisoned)
    assert_trains(guarded)
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert guarded[-1]["updates"] == unguarded[-1]["updates"] - EPOCHS  # one skipped update per epoch
    with pytest.raises(FloatingPointError, match="3 non-finite updates in a row"):
        run(["nan_guard"], train=TensorDataset(torch.full_like(x, float("nan")), y))


def test_schedule_and_logging_lr_matches_torchs_warmup_cosine(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    _, history = run(["schedule", "logging"], tmp_path)
    assert_trains(history)
    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    logged = [e.value for e in events.Scalars("train/lr")]
    expected = lr_curve("warmup_cosine", 0.01, EPOCHS, 12)[1:] + [0.0]  # logged after each scheduler.step()
    assert logged == pytest.approx(expected, abs=1e-9)
    assert [round(e.value, 5) for e in events.Scalars("val/loss")] == [round(h["val_loss"], 5) for h in history]


def test_logging_writes_events_that_tensorboard_reads(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    _, history = run(["logging", "clip"], tmp_path)
    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    assert {"train/lr", "train/grad_norm", "train/loss", "val/loss", "val/acc"} <= set(events.Tags()["scalars"])
    assert len(events.Scalars("train/grad_norm")) == history[-1]["updates"]
    assert [e.step for e in events.Scalars("val/acc")] == [1, 2, 3, 4]
    assert [e.value for e in events.Scalars("val/acc")] == pytest.approx([h["val_acc"] for h in history], abs=1e-6)


def test_compile_runs_the_same_numbers():
    compiled, history = run(["compile"])
    plain, plain_history = run(())
    assert_trains(history)
    assert torch.allclose(weights(compiled), weights(plain), atol=1e-5)
    assert type(compiled) is MLP and list(compiled.state_dict()) == list(plain.state_dict())  # model.compile(): in place
    assert [h["updates"] for h in history] == [h["updates"] for h in plain_history]


def test_scale_out_in_one_process_trains():
    model, history = run(["scale_out"])
    assert_trains(history)
    assert not dist.is_initialized()  # the loop cleans up its process group


def test_full_set_trains(tmp_path):
    _, history = run(KEYS, tmp_path, epochs=6)
    assert_trains(history, epochs=len(history))
    assert (tmp_path / "checkpoints" / "best.pt").exists() and (tmp_path / "tb").is_dir()


def test_full_set_under_torchrun_two_ranks_end_equal(tmp_path):
    """Two processes (gloo), each on its own shard; DDP keeps their weights bitwise equal."""
    (tmp_path / "loop.py").write_text(assemble(KEYS))
    (tmp_path / "main.py").write_text(textwrap.dedent(f"""
        import json, os, sys, torch
        sys.path.insert(0, {str(tmp_path)!r})
        from loop import fit
        from course_utils.engine.data import spiral_splits
        from course_utils.engine.models import MLP
        torch.set_num_threads(1)
        splits = spiral_splits(384, 128, seed=0)
        seen = []
        class Recording(torch.utils.data.Dataset):
            def __len__(self): return len(splits.train)
            def __getitem__(self, i):
                seen.append(i)
                return splits.train[i]
        model, history = fit(lambda: MLP(hidden=32), Recording(), splits.val, epochs=2, batch_size=16,
                             out={str(tmp_path / 'run')!r}, compile_backend="eager")
        rank = os.environ["RANK"]
        torch.save(model.state_dict(), {str(tmp_path)!r} + f"/rank{{rank}}.pt")
        json.dump({{"seen": seen, "updates": history[-1]["updates"]}}, open({str(tmp_path)!r} + f"/rank{{rank}}.json", "w"))
    """))
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE",
                                                             "LOCAL_RANK", "TORCHELASTIC_USE_AGENT_STORE")}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           str(tmp_path / "main.py")], env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    import json
    a, b = (torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in (0, 1))
    assert all(torch.equal(a[k], b[k]) for k in a)
    ra, rb = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    per_epoch = len(ra["seen"]) // 2
    first_a, first_b = set(ra["seen"][:per_epoch]), set(rb["seen"][:per_epoch])
    assert not first_a & first_b and len(first_a | first_b) == 384  # disjoint shards covering the data
    expected = training_arithmetic(384, 16, 2, 4, world_size=2).total_weight_updates
    assert ra["updates"] == rb["updates"] == expected
    assert (tmp_path / "run" / "checkpoints" / "last.pt").exists()


def test_cost_table_measures_what_each_component_changes():
    from course_utils.chapters.ch07_flowchart_costs import cost_text, measure_costs
    rows = {r.component: r for r in measure_costs(epochs=1, timed=False)}
    minimal = rows["minimal loop"]
    assert minimal.lines_alone == 0 and minimal.disk_bytes == 0 and minimal.graph_bytes > 0
    for key in KEYS:
        assert (rows[key].lines_alone, rows[key].lines_in_full) == lines_added(key)
        assert (rows[key].disk_bytes > 0) == (key in ("checkpoint", "logging")), key
    assert rows["accumulation"].graph_bytes * 3 < minimal.graph_bytes  # micro-batches of 8 instead of 32
    assert rows["amp"].graph_bytes < minimal.graph_bytes
    assert rows["seed"].graph_bytes == minimal.graph_bytes
    assert all(r.seconds is None for r in rows.values())
    assert "prevents" in cost_text(list(rows.values()))


# ----------------------------------------------------------------------------- what review issue 22 asked for
def test_ddp_with_accumulation_all_reduces_once_per_update():
    """A communication hook counts DDP's gradient all-reduces: one per update, not one per micro-batch."""
    from course_utils.chapters.ch07_flowchart_costs import count_allreduces
    traffic = count_allreduces(("accumulation", "scale_out"))
    assert (traffic.allreduces, traffic.updates, traffic.micro_batches) == (12, 12, 48)
    assert count_allreduces(KEYS).allreduces == 12  # with every other component too (amp, compile, ...)
    without = count_allreduces(("accumulation", "scale_out"), no_sync=False)  # the loop as it was: no no_sync
    assert without.allreduces == without.micro_batches == 48 and without.updates == 12
    assert "model.no_sync()" in assemble(("accumulation", "scale_out"))
    assert "no_sync" not in assemble(("accumulation",)) and "no_sync" not in assemble(("scale_out",))


def test_fp16_overflow_is_the_scalers_business_but_a_nan_loss_still_stops():
    x, y = (t.clone() for t in SPLITS.train.tensors)
    loud = TensorDataset(x * 1000.0, y)  # fp16 gradients overflow at the GradScaler's first scales
    model, history = run(["amp", "nan_guard"], train=loud, amp_dtype=torch.float16, epochs=2)
    assert len(history) == 2 and all(torch.isfinite(p).all() for p in model.parameters())
    with pytest.raises(FloatingPointError, match="3 non-finite updates in a row"):
        run(["amp", "nan_guard"], train=TensorDataset(torch.full_like(x, float("nan")), y), amp_dtype=torch.float16)


@pytest.mark.parametrize("components", [("early_stop",), ("early_stop", "checkpoint")], ids=["memory", "best.pt"])
def test_early_stopping_delivers_the_best_weights(tmp_path, components):
    small = spiral_splits(24, 128, seed=0)
    options = dict(train=small.train, val=small.val, lr=0.05, batch_size=8)
    model, history = run(components, out=tmp_path, epochs=60, patience=3, **options)
    best = min(range(len(history)), key=lambda e: history[e]["val_loss"]) + 1
    assert best < len(history)  # it stopped after the best epoch: the last weights are not the best
    at_best, _ = run((), epochs=best, **options)  # the same run, ended at the best epoch
    last, _ = run((), epochs=len(history), **options)
    assert torch.equal(weights(model), weights(at_best)) and not torch.equal(weights(model), weights(last))


def test_every_ddp_the_assembled_loop_builds_is_kept_until_exit():
    """Freeing a one-process gloo group right after a backward can deadlock (course_utils/infra/gloo_groups.py):
    the loop's DDP, and with it its group, outlives `fit` and every later collection."""
    import gc

    from torch.nn.parallel import DistributedDataParallel

    from course_utils.infra import gloo_groups

    fit = load_fit(("scale_out",))
    before = list(gloo_groups._KEPT)
    fit(lambda: MLP(hidden=8), SPLITS.train, SPLITS.val, epochs=1, batch_size=64)
    gc.collect()
    new = gloo_groups._KEPT[len(before):]
    assert len(new) == 1 and isinstance(new[0], DistributedDataParallel) and new[0].process_group is not None
    assert load_fit(()).__globals__.get("DDP") is None       # without scale_out the loop builds no group
