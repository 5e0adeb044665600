"""The bug museum: every loop bug's documented signature, measured against the healthy run (same seed)."""
import statistics

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader

from course_utils.engine.bugs import (
    BUGS,
    LOOP_BUGS,
    STEP,
    Bug,
    bug_table,
    freeze_after_optimizer,
    half_after_optimizer,
    head_after_optimizer,
    make_plan,
)
from course_utils.engine.session import Session, TrainConfig

BASE = dict(n_train=300, n_val=150, epochs=3)


def pair(bug: str, **kwargs) -> tuple[Session, Session]:
    """The healthy and the bugged run of one configuration, both trained to the end."""
    healthy, bugged = Session(TrainConfig(**kwargs)), Session(TrainConfig(**kwargs, bugs=(bug,)))
    healthy.run_to_end()
    bugged.run_to_end()
    return healthy, bugged


def params(session: Session) -> list[torch.Tensor]:
    return [p.detach().clone() for p in session.model.parameters()]


# --- the registry ------------------------------------------------------------------------------------

def test_registry_has_the_required_exhibits_with_every_field():
    required = {"missing_zero_grad", "zero_grad_after_backward", "eval_in_train_mode", "missing_no_grad",
                "graph_attached_logging", "missing_train_switch", "clip_before_backward", "clip_after_step",
                "epoch_schedule_per_batch", "unscaled_accumulation", "data_leakage",
                "freeze_after_optimizer", "head_after_optimizer", "half_after_optimizer"}
    assert required <= set(BUGS) and len(BUGS) >= 12
    for name, bug in BUGS.items():
        assert isinstance(bug, Bug) and bug.name == name and bug.chapter == 5
        assert bug.title and len(bug.symptom) > 40 and bug.fix and bug.operation
        assert (bug.variant is None) == (bug.demo is not None)


def test_every_loop_bug_has_a_signature_test_here():
    assert all(f"test_{name}" in globals() for name in LOOP_BUGS)


def test_bug_table_rows():
    rows = bug_table()
    assert len(rows) == len(BUGS)
    assert rows[0] == ("missing_zero_grad", "zero_grad", BUGS["missing_zero_grad"].symptom,
                       BUGS["missing_zero_grad"].fix)


def test_plans_move_skip_or_vary_one_operation():
    assert make_plan([]).recipe == STEP
    assert "zero_grad" not in make_plan(["missing_zero_grad"]).recipe
    assert make_plan(["zero_grad_after_backward"]).recipe[:4] == ("forward", "compute_loss", "backward",
                                                                  "zero_grad")
    assert make_plan(["clip_before_backward"]).recipe[3:5] == ("clip", "backward")
    assert make_plan(["clip_after_step"]).recipe[-3:] == ("optimizer_step", "clip", "scheduler_step")
    plan = make_plan(["unscaled_accumulation", "missing_no_grad"])
    assert plan.recipe == STEP and plan.variant("compute_loss") == "unscaled"
    assert plan.variant("no_grad") == "skip" and plan.variant("clip") == "healthy"


# --- one test per loop bug -------------------------------------------------------------------------

def test_missing_zero_grad():
    # SGD: .grad is the running sum, so its norm climbs step after step; the healthy norm does not
    healthy, bugged = pair("missing_zero_grad", **BASE, optimizer="sgd")
    norms = [e.grad_norm for e in bugged.steps]
    assert all(b > a for a, b in zip(norms[:10], norms[1:11]))
    assert norms[9] > 5 * norms[0]
    last = [e.grad_norm for e in healthy.steps[-10:]]
    assert statistics.mean(norms[-10:]) > 5 * statistics.mean(last)
    # Adam: nothing explodes (each update stays about lr in size), but learning stalls
    healthy, bugged = pair("missing_zero_grad", **{**BASE, "epochs": 10})
    assert max(e.grad_norm for e in bugged.steps) > 10 * max(e.grad_norm for e in healthy.steps)
    assert all(e.loss < 10 for e in bugged.steps)
    assert bugged.epochs[-1].val_acc < healthy.epochs[-1].val_acc - 0.2


def test_zero_grad_after_backward():
    session = Session(TrainConfig(**BASE, bugs=("zero_grad_after_backward",)))
    before = params(session)
    session.run_to_end()
    assert all(torch.equal(a, b) for a, b in zip(before, params(session)))   # the weights never moved
    assert {e.grad_norm for e in session.steps} == {0.0}
    assert session.steps[-1].updates == len(session.steps)                   # step() was called, in vain
    healthy = Session(TrainConfig(**BASE))
    healthy.run_to_end()
    assert healthy.epochs[-1].val_loss < session.epochs[-1].val_loss


@pytest.mark.parametrize("bugs, differs", [((), False), (("eval_in_train_mode",), True)])
def test_eval_in_train_mode(bugs, differs):
    # dropout: two passes over the same validation data disagree only in train mode
    session = Session(TrainConfig(**BASE, dropout=0.3, bugs=bugs))
    session.run_epoch()
    assert (session.evaluate() != session.evaluate()) == differs
    # BatchNorm: a validation pass in train mode moves the running statistics
    session = Session(TrainConfig(**BASE, batchnorm=True, bugs=bugs))
    session.run_epoch()
    norm = session.model.body[1]
    before = norm.running_mean.clone()
    session.evaluate()
    assert (not torch.equal(before, norm.running_mean)) == differs


def test_missing_no_grad():
    healthy, bugged = pair("missing_no_grad", **BASE)
    assert {e.eval_memory for e in healthy.epochs} == {0}
    # peak: one batch's forward graph still held by the previous `logits` while the next forward runs;
    # per batch of 32: input 32*2*4 + two ReLU outputs 2*32*64*4 = 16640 bytes
    assert {e.eval_memory for e in bugged.epochs} == {2 * 16640}
    assert [(e.val_loss, e.val_acc) for e in healthy.epochs] == [(e.val_loss, e.val_acc) for e in bugged.epochs]


def test_graph_attached_logging():
    healthy, bugged = pair("graph_attached_logging", **BASE)
    for epoch in (1, 2, 3):                                       # the epoch's log lives until its end
        nodes = [e.graph_nodes for e in bugged.steps if e.epoch == epoch]
        growth = {b - a for a, b in zip(nodes, nodes[1:])}
        assert len(growth) == 1 and growth.pop() > 0              # the same chain kept every step
    assert {e.graph_nodes for e in healthy.steps} == {0}
    # saved-for-backward memory does not grow: backward frees activations even while the loss is held
    assert [e.memory for e in bugged.steps] == [e.memory for e in healthy.steps]
    # ... but with evaluation outside no_grad the kept losses pin every batch's whole graph:
    # per batch of n: input 8n + ReLU outputs 2*256n + log-probs 12n + targets 8n + total weight 4
    both = Session(TrainConfig(**BASE, bugs=("graph_attached_logging", "missing_no_grad")))
    both.run_to_end()
    sizes = [32, 32, 32, 32, 22]
    assert {e.eval_memory for e in both.epochs} == {sum(540 * n + 4 for n in sizes)}


def test_missing_train_switch():
    healthy, bugged = pair("missing_train_switch", **BASE, dropout=0.5)
    assert all(e.training for e in healthy.steps)
    assert all(e.training == (e.epoch == 1) for e in bugged.steps)
    assert bugged.epochs[0] == healthy.epochs[0]                  # identical until the first evaluation
    for later in (1, 2):                                          # then no dropout: a lower training loss
        assert bugged.epochs[later].train_loss < healthy.epochs[later].train_loss


@pytest.mark.parametrize("bug", ["clip_before_backward", "clip_after_step"])
def test_clipping_in_the_wrong_place_is_the_same_as_no_clipping(bug):
    config = dict(**BASE, optimizer="sgd", lr=0.5)
    unclipped = Session(TrainConfig(**config))
    unclipped.run_to_end()
    healthy, bugged = pair(bug, **config, clip_norm=0.1)
    losses = [e.loss for e in unclipped.steps]
    assert [e.loss for e in bugged.steps] == losses != [e.loss for e in healthy.steps]
    if bug == "clip_before_backward":
        assert {e.grad_norm for e in bugged.steps} == {0.0}       # it saw no gradient at all
    else:
        assert [e.grad_norm for e in bugged.steps] == [e.grad_norm for e in unclipped.steps]


def test_clip_before_backward():
    test_clipping_in_the_wrong_place_is_the_same_as_no_clipping("clip_before_backward")


def test_clip_after_step():
    test_clipping_in_the_wrong_place_is_the_same_as_no_clipping("clip_after_step")


def test_epoch_schedule_per_batch():
    # StepLR(step_size=1, gamma=0.1) over 3 epochs: after k batches the bug is where epoch k should be
    healthy, bugged = pair("epoch_schedule_per_batch", **BASE, schedule="step")
    per_epoch = [next(e.lr for e in healthy.steps if e.epoch == k) for k in (1, 2, 3)]
    assert [e.lr for e in bugged.steps[:3]] == pytest.approx(per_epoch, rel=1e-12)
    batches = len(bugged.state.train_loader)
    assert bugged.epochs[0].lr == pytest.approx(0.01 * 0.1 ** batches, rel=1e-9)   # len(loader)x too fast
    assert healthy.epochs[0].lr == pytest.approx(0.01 * 0.1)
    # CosineAnnealingLR(T_max=3 epochs) done within 3 batches, then periodic: back to the top at batch 6
    _, cosine = pair("epoch_schedule_per_batch", **BASE, schedule="cosine")
    lrs = [e.lr for e in cosine.steps]
    assert lrs[3] == pytest.approx(0.0, abs=1e-12) and lrs[6] == pytest.approx(0.01, rel=1e-9)


def _after_first_update(bug: tuple, optimizer: str) -> tuple[Session, list, list]:
    session = Session(TrainConfig(**BASE, optimizer=optimizer, lr=0.05, accum_steps=4, bugs=bug))
    before = params(session)
    while not session.step().update:
        pass
    return session, before, params(session)


def test_unscaled_accumulation():
    for optimizer in ("sgd", "adam"):
        healthy, h0, h1 = _after_first_update((), optimizer)
        bugged, b0, b1 = _after_first_update(("unscaled_accumulation",), optimizer)
        assert bugged.steps[-1].grad_norm == pytest.approx(4 * healthy.steps[-1].grad_norm, rel=1e-5)
        step_healthy = torch.cat([(a1 - a0).flatten() for a0, a1 in zip(h0, h1)])
        step_bugged = torch.cat([(c1 - c0).flatten() for c0, c1 in zip(b0, b1)])
        if optimizer == "sgd":                                    # SGD: a step 4 times as large
            assert torch.allclose(step_bugged, 4 * step_healthy, rtol=1e-4, atol=1e-6)
        else:                                                     # Adam: the scale cancels, up to eps,
            gap = (step_bugged - step_healthy).norm() / step_healthy.norm()   # which shows only where
            assert gap < 0.05                                     # a gradient is tiny
    # the final window of an epoch holds r = 10 - 2*4 = 2 full micro-batches: r times, not K times
    healthy, bugged = pair("unscaled_accumulation", **{**BASE, "n_train": 320}, accum_steps=4, optimizer="adam")
    flush = [i for i, e in enumerate(healthy.steps) if e.update][2]
    assert bugged.steps[flush].grad_norm == pytest.approx(2 * healthy.steps[flush].grad_norm, rel=1e-3)


def test_accumulation_without_flush():
    healthy, bugged = pair("accumulation_without_flush", **BASE, accum_steps=4)
    counts = TrainConfig(**BASE, accum_steps=4).arithmetic()
    assert (counts.updates_per_epoch, counts.naive_updates_per_epoch) == (3, 2)
    assert [e.updates for e in healthy.epochs] == [3, 6, 9]
    assert [e.updates for e in bugged.epochs] == [2, 4, 6]


def test_mean_of_batch_means():
    healthy, bugged = pair("mean_of_batch_means", **BASE)        # 150 = 4 x 32 + 22
    x, y = healthy.state.splits.val.tensors
    with torch.no_grad():
        full = nn.functional.cross_entropy(healthy.model(x), y).item()
        means = [nn.functional.cross_entropy(bugged.model(bx), by).item()
                 for bx, by in DataLoader(bugged.state.splits.val, batch_size=32)]
    assert healthy.epochs[-1].val_loss == pytest.approx(full, rel=1e-6)
    assert bugged.epochs[-1].val_loss == pytest.approx(statistics.mean(means), rel=1e-6)
    assert abs(bugged.epochs[-1].val_loss - healthy.epochs[-1].val_loss) > 1e-4
    even, also_even = pair("mean_of_batch_means", **{**BASE, "n_val": 128})      # 4 full batches
    assert even.epochs[-1].val_loss == pytest.approx(also_even.epochs[-1].val_loss, rel=1e-6)


def test_data_leakage():
    config = dict(n_train=200, n_val=200, n_test=400, noise=1.0, hidden=256, epochs=30)
    healthy, bugged = pair("data_leakage", **config)
    assert bugged.state.splits.leaked == 100
    h, b = healthy.epochs[-1], bugged.epochs[-1]
    assert (b.test_loss, b.test_acc) == (h.test_loss, h.test_acc)     # the very same model
    assert b.val_acc > h.val_acc + 0.03
    assert b.val_acc - b.test_acc > 2 * (h.val_acc - h.test_acc)


# --- exhibit 5: what torch 2.13 really does -----------------------------------------------------------

def test_freezing_after_building_the_optimizer():
    assert freeze_after_optimizer("adam", set_to_none=True).frozen_change == 0.0
    assert freeze_after_optimizer("momentum", set_to_none=True).frozen_change == 0.0
    assert freeze_after_optimizer("sgd", set_to_none=False).frozen_change == 0.0
    for optimizer in ("momentum", "adam", "adamw"):
        moved = freeze_after_optimizer(optimizer, set_to_none=False)
        assert moved.frozen_change > 1e-3 and moved.trained_change > 0


def test_a_head_added_after_the_optimizer_never_trains():
    demo = head_after_optimizer()
    assert not demo.head_in_optimizer and demo.head_grad_norm > 0
    assert demo.head_change == 0.0 and demo.body_change > 0


def test_half_after_the_optimizer_keeps_the_same_parameters():
    demo = half_after_optimizer()
    assert demo.same_parameters and demo.dtype_seen_by_optimizer == "torch.float16"
    assert demo.weight_change_after_step > 0 and not demo.overwrite_flag


def test_half_after_adam_has_state_fails_at_the_next_step():
    """Review ch.5 item 3: Adam's float32 moments meet half-precision parameters: torch raises."""
    demo = half_after_optimizer()
    assert demo.stateful_step_error.startswith("RuntimeError") and "Half" in demo.stateful_step_error


def test_demos_are_reachable_from_the_registry():
    assert BUGS["freeze_after_optimizer"].demo is freeze_after_optimizer
    assert BUGS["head_after_optimizer"].demo().head_change == 0.0
