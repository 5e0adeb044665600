"""Chapter 5: leakage through preprocessing and evaluation memory per batch, checked against real runs."""
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from course_utils.chapters.ch04_evaluation import eval_bytes_per_batch
from course_utils.chapters.ch05_leakage import LeakEffect, LeakRun, leak_effect, normalisation_leak, selection_leak
from course_utils.engine.memory import GraphMemoryMeter
from course_utils.engine.models import MLP


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


def test_normalisation_leak_with_few_training_points_moves_validation_and_test_together():
    """The leak changes the model (not a vacuous comparison), yet adds no more on validation than on test,
    unlike the label-reading selection leak, measured the same way."""
    normalise = leak_effect(lambda seed: normalisation_leak(seed, n_train=20), range(5))
    assert max(abs(v) for v in normalise.changes("val")) > 0.03
    assert abs(normalise.inflation) < 0.03
    select = leak_effect(selection_leak, range(5))
    assert select.inflation > 0.15 and select.inflation > 5 * abs(normalise.inflation)


def test_leak_effect_arithmetic():
    runs = ({"train only": LeakRun(0.5, 0.5), "train + val": LeakRun(0.9, 0.6)},
            {"train only": LeakRun(0.8, 0.7), "train + val": LeakRun(0.6, 0.7)})
    effect = LeakEffect(runs)
    assert effect.changes("val") == pytest.approx([0.4, -0.2]) and effect.changes("test") == pytest.approx([0.1, 0.0])
    assert effect.val_change == pytest.approx(0.1) and effect.test_change == pytest.approx(0.05)
    assert effect.inflation == pytest.approx(0.05)
    assert effect.largest == pytest.approx((0.4, 0.1))
    assert leak_effect(lambda seed: runs[seed], [1]).runs == (runs[1],)
    with pytest.raises(ValueError, match="seeds"):
        leak_effect(lambda seed: runs[0], [])


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
    healthy = eval_bytes_per_batch(model, loader, no_grad=True, keep_losses=True)
    assert healthy.after == healthy.peak == [0] * 7
    flat = eval_bytes_per_batch(model, loader, no_grad=False, keep_losses=False)
    assert flat.after == one_batch                                         # one graph held between batches
    assert flat.peak == [one_batch[0]] + [a + b for a, b in zip(one_batch, one_batch[1:])]   # two while the next runs
    kept = eval_bytes_per_batch(model, loader, no_grad=False, keep_losses=True)
    assert kept.after == kept.peak == [sum(one_batch[:k + 1]) for k in range(7)]
    assert model.training                                                  # the mode it came in with
