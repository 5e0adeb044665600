"""Datasets: the spiral and its splits (with the leakage exhibit), the imbalanced set, sequences."""
import pytest
import torch

from torch.utils.data import DataLoader

from course_utils.engine.data import PAD_ID, batch_loader, make_imbalanced, make_sequences, make_spiral, spiral_splits


def test_spiral_shapes_dtypes_and_balanced_grouped_classes():
    x, y = make_spiral(100, classes=3).tensors
    assert x.shape == (100, 2) and x.dtype == torch.float32 and y.dtype == torch.int64
    assert torch.bincount(y).tolist() == [34, 33, 33]      # sizes differ by at most one
    assert torch.equal(y, torch.sort(y).values)           # grouped by class, as documented
    assert x.norm(dim=1).max() < 1.0                      # radius t in [0, 1)


def test_spiral_is_a_function_of_its_seed():
    a, b, c = make_spiral(50, seed=1), make_spiral(50, seed=1), make_spiral(50, seed=2)
    assert torch.equal(a.tensors[0], b.tensors[0])
    assert not torch.equal(a.tensors[0], c.tensors[0])


def test_spiral_noise_zero_puts_points_exactly_on_their_arm():
    x, y = make_spiral(30, classes=2, noise=0.0).tensors
    radius = x.norm(dim=1)
    angle = torch.atan2(x[:, 0], x[:, 1])
    expected = torch.pi * y + 4.0 * radius                 # angle = 2*pi*k/C + 4t with t = radius
    assert torch.allclose(torch.remainder(angle - expected + torch.pi, 2 * torch.pi) - torch.pi,
                          torch.zeros(30), atol=1e-4)


@pytest.mark.parametrize("kwargs, name", [({"n": 0}, "n"), ({"n": 10, "classes": 1}, "classes"),
                                          ({"n": 10, "noise": -0.1}, "noise")])
def test_spiral_rejects_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        make_spiral(**kwargs)


def _rows(dataset):
    return {tuple(row.tolist()) for row in dataset.tensors[0]}


def test_splits_are_disjoint_and_sized():
    splits = spiral_splits(60, 30, 20, seed=3)
    assert (len(splits.train), len(splits.val), len(splits.test), splits.leaked) == (60, 30, 20, 0)
    train, val, test = _rows(splits.train), _rows(splits.val), _rows(splits.test)
    assert not train & val and not train & test and not val & test


def test_leak_copies_that_share_of_validation_from_training_and_leaves_test_clean():
    clean, leaky = spiral_splits(60, 30, 20, seed=3), spiral_splits(60, 30, 20, seed=3, leak=0.4)
    assert leaky.leaked == 12
    assert len(_rows(leaky.val) & _rows(leaky.train)) == 12
    assert torch.equal(clean.test.tensors[0], leaky.test.tensors[0])
    assert torch.equal(clean.train.tensors[0], leaky.train.tensors[0])
    assert torch.equal(clean.val.tensors[0][12:], leaky.val.tensors[0][12:])


@pytest.mark.parametrize("kwargs, name", [({"leak": 1.5}, "leak"), ({"n_val": 0}, "n_val"),
                                          ({"n_train": 5, "n_val": 20, "leak": 0.5}, "leak")])
def test_splits_reject_bad_arguments(kwargs, name):
    args = {"n_train": 20, "n_val": 10, **kwargs}
    with pytest.raises(ValueError, match=name):
        spiral_splits(args.pop("n_train"), args.pop("n_val"), **args)


def test_imbalanced_counts_and_labels():
    x, y = make_imbalanced().tensors
    assert x.shape == (1000, 2) and torch.bincount(y).tolist() == [900, 100]
    assert y[:900].eq(0).all() and y[900:].eq(1).all()
    assert x[900:].mean(0)[0] > x[:900].mean(0)[0]         # the two blobs sit apart


def test_sequences_lengths_tokens_and_labels():
    data = make_sequences(200, min_len=2, max_len=9, vocab=11, seed=4)
    lengths = [len(tokens) for tokens, _ in data]
    assert len(data) == 200 and min(lengths) == 2 and max(lengths) == 9
    for tokens, label in data:
        assert tokens.dtype == torch.int64 and PAD_ID not in tokens.tolist()
        assert tokens.min() >= 1 and tokens.max() <= 10
        assert label == int(tokens.float().mean() > 5.5)
    assert {label for _, label in data} == {0, 1}
    again = make_sequences(200, min_len=2, max_len=9, vocab=11, seed=4)
    assert all(torch.equal(a[0], b[0]) for a, b in zip(data, again))


def test_sequences_reject_max_below_min():
    with pytest.raises(ValueError, match="max_len"):
        make_sequences(10, min_len=5, max_len=4)


@pytest.mark.parametrize("n, batch_size, shuffle, drop_last", [(300, 32, True, False), (300, 32, True, True),
                                                                (10, 32, True, False), (10, 32, True, True),
                                                                (64, 16, False, False), (65, 16, False, True)])
def test_batch_loader_deals_what_a_dataloader_deals(n, batch_size, shuffle, drop_last):
    """The oracle is torch's own DataLoader: the same batches bitwise, in order, over epochs, the same draws."""
    data = make_spiral(n, seed=3)
    mine, theirs = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    fast = batch_loader(data, batch_size, shuffle=shuffle, drop_last=drop_last, generator=mine)
    real = DataLoader(data, batch_size, shuffle=shuffle, drop_last=drop_last, generator=theirs)
    outer = torch.get_rng_state()
    assert len(fast) == len(real)
    for _ in range(3):
        got, want = list(fast), list(real)
        assert len(got) == len(want)
        for (x, y), (x0, y0) in zip(got, want):
            assert x.dtype == x0.dtype and y.dtype == y0.dtype
            assert torch.equal(x, x0) and torch.equal(y, y0)
    assert torch.equal(mine.get_state(), theirs.get_state())
    assert torch.equal(outer, torch.get_rng_state())       # neither touched the global stream here
