"""Client drift: the shard split gives each client two classes, and the drift shows on seeds."""
import torch

from course_utils.chapters import ch03_client_drift as cd
from course_utils.chapters.ch03_class_incremental import gaussian_classes


def test_the_shard_split_gives_each_client_at_most_two_classes_and_deals_every_example_once():
    _, labels, _, _ = gaussian_classes(0, 100, spread=0.5, noise=1.0)
    for iid in (True, False):
        parts = cd._split(labels, iid, torch.Generator().manual_seed(0))
        assert sorted(torch.cat(parts).tolist()) == list(range(len(labels)))
        if not iid:
            assert all(len(labels[p].unique()) <= 2 for p in parts)
        else:
            assert all(len(labels[p].unique()) > 5 for p in parts)


def test_drift_on_two_seeds():
    for seed in range(2):
        iid, shards = cd.federated(True, seed, 50), cd.federated(False, seed, 50)
        assert len(iid.accuracy) == cd.ROUNDS
        assert shards.accuracy[-1] < iid.accuracy[-1] - 0.05 and shards.swing > 2 * iid.swing
        assert shards.held > shards.others + 0.3


def test_gaussian_classes_defaults_are_the_class_incremental_data():
    a = gaussian_classes(3, 20)
    b = gaussian_classes(3, 20, spread=1.0, noise=0.7)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
