"""StackedMLP: S seeds' networks trained at once are the S separate runs (up to a batched matmul's last bits)."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_utils.chapters import ch03_class_incremental as ci
from course_utils.chapters.seed_stack import StackedMLP, per_copy_loss

SEEDS = (0, 3, 7)


def separate(seed: int, deep: bool = False) -> nn.Sequential:
    torch.manual_seed(seed)
    if deep:
        return nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 6), nn.ReLU(), nn.Linear(6, 3))
    return nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3))


@pytest.mark.parametrize("deep", [False, True])
def test_each_copy_starts_as_the_network_built_after_its_seed(deep):
    stacked = StackedMLP(SEEDS, (5, 8, 6, 3) if deep else (5, 8, 3))
    x = torch.randn(len(SEEDS), 4, 5)
    for i, seed in enumerate(SEEDS):
        alone = separate(seed, deep)
        assert all(torch.equal(a, b) for a, b in zip(stacked.copy(i).parameters(), alone.parameters()))
        assert torch.allclose(stacked(x)[i], alone(x[i]), atol=1e-6)


@pytest.mark.parametrize("make", [lambda p: torch.optim.Adam(p, lr=0.05),
                                  lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=1e-3)],
                         ids=["Adam", "SGD momentum"])
def test_training_the_stack_is_training_each_copy_alone(make):
    generator = torch.Generator().manual_seed(1)
    x, y = torch.randn(len(SEEDS), 20, 16, 5, generator=generator), torch.randint(3, (len(SEEDS), 20, 16), generator=generator)
    stacked = StackedMLP(SEEDS, (5, 8, 3))
    optimizer = make(stacked.parameters())
    for step in range(20):
        optimizer.zero_grad()
        per_copy_loss(stacked(x[:, step]), y[:, step]).backward()
        optimizer.step()
    for i, seed in enumerate(SEEDS):
        alone = separate(seed)
        optimizer = make(alone.parameters())
        for step in range(20):
            optimizer.zero_grad()
            F.cross_entropy(alone(x[i, step]), y[i, step]).backward()
            optimizer.step()
        moved = max((a - b).abs().max().item() for a, b in zip(alone.parameters(), separate(seed).parameters()))
        gap = max((a - b).abs().max().item() for a, b in zip(stacked.copy(i).parameters(), alone.parameters()))
        assert moved > 0.05 and gap < 1e-5, (moved, gap)


def test_the_stacked_fisher_is_each_copys_own():
    stacked = StackedMLP(SEEDS, (5, 8, 3))
    x, y = torch.randn(len(SEEDS), 6, 5), torch.randint(3, (len(SEEDS), 6))
    got = ci._fisher(stacked, x, y)
    for i in range(len(SEEDS)):
        alone = ci._fisher(stacked.copy(i), x[i], y[i])
        pairs = [(got[0][i], alone[0].T), (got[1][i, 0], alone[1]), (got[2][i], alone[2].T), (got[3][i, 0], alone[3])]
        assert all(torch.allclose(a, b, atol=1e-7) for a, b in pairs)
        assert alone[0].abs().sum() > 0


def test_no_seed_and_no_layer_are_refused():
    with pytest.raises(ValueError, match="at least one seed"):
        StackedMLP([], (2, 2, 2))
    with pytest.raises(ValueError, match="an input and an output size"):
        StackedMLP([0], (2,))
