"""Chapter 5: leakage through preprocessing and evaluation memory per batch, checked against real runs."""
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from course_utils.evaluation import eval_bytes_per_batch
from course_utils.leakage import normalisation_leak, selection_leak
from course_utils.memory import GraphMemoryMeter
from course_utils.models import MLP


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_feature_selection_on_train_plus_val_inflates_validation_only(seed):
    runs = selection_leak(seed)
    clean, leaky = runs["train only"], runs["train + val"]
    assert leaky.val_acc > clean.val_acc + 0.1           # the leak lifts the reported score ...
    assert leaky.val_acc > leaky.test_acc + 0.1          # ... above what fresh data shows
    assert abs(leaky.test_acc - 0.5) < 0.06 and abs(clean.test_acc - 0.5) < 0.06   # noise: chance on new data


def test_normalisation_leak_on_the_spiral_is_small():
    runs = normalisation_leak(0)
    assert abs(runs["train only"].val_acc - runs["train + val"].val_acc) < 0.01
    assert runs["train only"].val_acc > 0.9              # the healthy run converges


def test_evaluation_memory_per_batch_grows_only_when_losses_are_kept():
    torch.manual_seed(0)
    model = MLP(2, 16, 3, 2)
    data = TensorDataset(torch.randn(50, 2), torch.randint(0, 3, (50,)))
    loader = DataLoader(data, batch_size=8)                                 # 6 batches of 8, one of 2
    one_batch = []
    for inputs, targets in loader:                                         # oracle: one graph, metered alone
        meter = GraphMemoryMeter()
        with meter:
            loss = torch.nn.functional.cross_entropy(model(inputs), targets)
        one_batch.append(meter.bytes)
        del loss
    assert eval_bytes_per_batch(model, loader, no_grad=True, keep_losses=True) == [0] * 7
    assert eval_bytes_per_batch(model, loader, no_grad=False, keep_losses=False) == one_batch
    kept = eval_bytes_per_batch(model, loader, no_grad=False, keep_losses=True)
    assert kept == [sum(one_batch[:k + 1]) for k in range(7)]
    assert model.training                                                  # the mode it came in with
