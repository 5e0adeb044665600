"""The calculator against oracles: a real DataLoader (over a DistributedSampler) and a counted loop."""
import math

import pytest
import torch
from hypothesis import given, settings, strategies as st
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from course_utils.engine.arithmetic import epoch_timeline, training_arithmetic


def real_batches(n, b, drop_last, world_size, rank=0):
    """Batch sizes a real DataLoader yields for one rank."""
    ds = TensorDataset(torch.arange(n))
    sampler = DistributedSampler(ds, num_replicas=world_size, rank=rank, shuffle=False) if world_size > 1 else None
    return [len(x) for (x,) in DataLoader(ds, batch_size=b, drop_last=drop_last, sampler=sampler)]


def counted_updates(n_batches, k):
    """A real optimizer driven by the flushing accumulation loop; its step() calls are counted."""
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=0.1)
    calls = []
    opt.register_step_post_hook(lambda *_: calls.append(1))
    for i in range(n_batches):
        (p * 1.0).sum().backward()
        if (i + 1) % k == 0 or i + 1 == n_batches:
            opt.step()
            opt.zero_grad()
    return len(calls)


configs = st.tuples(st.integers(1, 400), st.integers(1, 80), st.integers(1, 4), st.integers(1, 12),
                    st.booleans(), st.integers(1, 9))


@settings(max_examples=250, deadline=None)
@given(configs)
def test_calculator_matches_dataloader_and_counted_loop(cfg):
    n, b, e, k, drop_last, w = cfg
    r = training_arithmetic(n, b, e, k, drop_last=drop_last, world_size=w)
    for rank in sorted({0, w - 1}):
        sizes = real_batches(n, b, drop_last, w, rank)
        assert r.iters_per_epoch == len(sizes)
        assert r.last_batch_size == (sizes[-1] if sizes else 0)
        assert r.examples_per_epoch == sum(sizes)
    assert r.total_micro_steps == e * len(sizes)
    assert r.total_examples_seen == e * sum(sizes)
    assert r.updates_per_epoch == counted_updates(len(sizes), k)
    assert r.total_weight_updates == e * r.updates_per_epoch
    assert r.naive_updates_per_epoch == sum(1 for i in range(len(sizes)) if (i + 1) % k == 0)
    assert r.effective_batch_size == b * k * w
    assert r.padded_samples == sum(len(DistributedSampler(TensorDataset(torch.arange(n)), num_replicas=w, rank=q))
                                   for q in range(w)) - n if w > 1 else r.padded_samples == 0
    timeline = epoch_timeline(r)
    assert [size for _, size, _, _ in timeline] == sizes
    assert sum(update for _, _, update, _ in timeline) == r.updates_per_epoch


@pytest.mark.parametrize("args, kwargs, expected", [
    ((10_000, 32, 3), {}, dict(iters_per_epoch=313, last_batch_size=16, total_micro_steps=939, total_examples_seen=30_000)),
    ((10_000, 32, 3, 4), {}, dict(effective_batch_size=128, updates_per_epoch=79, total_weight_updates=237,
                                  naive_updates_per_epoch=78, last_window_size=1)),
    ((1_000, 64, 5), {}, dict(iters_per_epoch=16, last_batch_size=40, total_weight_updates=80, total_examples_seen=5_000)),
    ((20_000, 64, 10, 4), {}, dict(total_weight_updates=790)),
    ((50_000, 256, 1), {}, dict(iters_per_epoch=196)),
    ((5, 10, 2), {}, dict(iters_per_epoch=1, last_batch_size=5)),                      # B > N
    ((5, 10, 2), {"drop_last": True}, dict(iters_per_epoch=0, updates_per_epoch=0, total_examples_seen=0,
                                            dropped_per_epoch=5, last_window_size=0)),  # nothing left
    ((100, 10, 1, 50), {}, dict(updates_per_epoch=1, last_window_size=10)),             # K > epoch
    ((3, 1, 1), {"world_size": 8}, dict(samples_per_rank=1, padded_samples=5, iters_per_epoch=1)),  # W > N
])
def test_course_figures_and_edge_cases(args, kwargs, expected):
    r = training_arithmetic(*args, **kwargs)
    assert {k: getattr(r, k) for k in expected} == expected


@pytest.mark.parametrize("kwargs, name", [
    (dict(dataset_size=0, batch_size=1, epochs=1), "dataset_size"),
    (dict(dataset_size=10, batch_size=0, epochs=1), "batch_size"),
    (dict(dataset_size=10, batch_size=2, epochs=0), "epochs"),
    (dict(dataset_size=10, batch_size=2, epochs=1, accum_steps=0), "accum_steps"),
    (dict(dataset_size=10, batch_size=2, epochs=1, world_size=0), "world_size"),
    (dict(dataset_size=10.5, batch_size=2, epochs=1), "dataset_size"),
    (dict(dataset_size="10", batch_size=2, epochs=1), "dataset_size"),
    (dict(dataset_size=10, batch_size=True, epochs=1), "batch_size"),
    (dict(dataset_size=10, batch_size=2, epochs=1, drop_last="yes"), "drop_last"),
])
def test_invalid_input_names_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=name):
        training_arithmetic(**kwargs)


def test_table_lists_every_count():
    text = training_arithmetic(10_000, 32, 3, 4, world_size=2).table()
    for label in ["iterations per epoch", "updates per epoch (with flush)", "examples seen, all ranks",
                  "padding duplicates per epoch"]:
        assert label in text
    assert math.ceil(10_000 / 2 / 32) == 157 and " 157" in text


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 40), b=st.integers(1, 9), k=st.integers(1, 5), drop_last=st.booleans())
def test_accumulated_windows_equal_one_big_batch_each(n, b, k, drop_last):
    """Oracle: every window (the short last one and a partial last batch included), weighted by
    loss_weight, gives the gradient of one batch holding the same examples."""
    from course_utils.engine.arithmetic import accumulation_window, batch_sizes, loss_weight
    torch.manual_seed(0)
    x, y = torch.randn(n, 3), torch.randint(0, 2, (n,))
    model = torch.nn.Linear(3, 2, dtype=torch.float64)
    sizes = batch_sizes(n, b, drop_last)
    assert sizes == [len(t) for (t,) in DataLoader(TensorDataset(y), batch_size=b, drop_last=drop_last)]
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    loss_fn = torch.nn.CrossEntropyLoss()
    for first in range(0, len(sizes), k):
        window = accumulation_window(first, len(sizes), k)
        model.zero_grad()
        for i in window:
            sl = slice(starts[i], starts[i] + sizes[i])
            (loss_fn(model(x[sl].double()), y[sl]) * loss_weight(i, sizes, k)).backward()
        accumulated = model.weight.grad.clone()
        model.zero_grad()
        sl = slice(starts[window[0]], starts[window[-1]] + sizes[window[-1]])
        loss_fn(model(x[sl].double()), y[sl]).backward()
        torch.testing.assert_close(accumulated, model.weight.grad, rtol=1e-12, atol=1e-12)



_ARGS = ("dataset_size", "batch_size", "epochs", "accum_steps", "world_size")


@settings(max_examples=300, deadline=None)
@given(values=st.tuples(*[st.integers(1, 10**400)] * 5), drop_last=st.booleans())
def test_huge_integers_are_counted_exactly(values, drop_last):
    """No OverflowError: the counts use integer arithmetic, so any size of int works (issue 9.6)."""
    n, b, e, k, w = values
    r = training_arithmetic(n, b, e, k, drop_last=drop_last, world_size=w)
    per_rank = -(-n // w)
    assert r.samples_per_rank == per_rank and r.iters_per_epoch in (per_rank // b, per_rank // b + 1)
    assert r.updates_per_epoch == -(-r.iters_per_epoch // k) and r.total_weight_updates == e * r.updates_per_epoch
    assert r.table()


@settings(max_examples=300, deadline=None)
@given(position=st.sampled_from(_ARGS),
       bad=st.one_of(st.integers(max_value=0), st.floats(), st.text(max_size=5), st.none(), st.booleans(),
                     st.lists(st.integers(), max_size=2), st.complex_numbers(), st.binary(max_size=3)))
def test_any_bad_value_of_any_type_is_a_value_error_naming_the_argument(position, bad):
    kwargs = dict(dataset_size=100, batch_size=10, epochs=1, accum_steps=1, world_size=1)
    kwargs[position] = bad
    with pytest.raises(ValueError, match=position):
        training_arithmetic(**kwargs)


@pytest.mark.parametrize("bad", [1, "yes", None, 0.0])
def test_drop_last_must_be_a_bool(bad):
    with pytest.raises(ValueError, match="drop_last"):
        training_arithmetic(10, 2, 1, drop_last=bad)
