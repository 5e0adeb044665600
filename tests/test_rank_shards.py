"""engine.rank_shards and chapter 4's rank demos against torch's own DistributedSampler, WeightedRandomSampler and a
real gloo all_reduce."""
import math

import pytest
import torch
from torch.utils.data import DistributedSampler, WeightedRandomSampler

from course_utils.chapters.ch02_weighted_ranks import (BoxesDataset, detection_collate, one_process_draw,
                                                       same_seed_weighted, sharded_weighted)
from course_utils.chapters.ch04_ranks import all_reduce_sum, padding_layout, sharded_metrics
from course_utils.engine.models import MLP
from course_utils.engine.rank_shards import (DistributedWeightedSampler, metric_without_padding, real_slots,
                                             weighted_shard)


@pytest.mark.parametrize("n,W", [(10, 4), (12, 4), (1, 3), (7, 1), (100, 8), (3, 8)])
@pytest.mark.parametrize("shuffle", [False, True])
def test_real_slots_mark_exactly_the_padding_copies(n, W, shuffle):
    shards = [list(DistributedSampler(range(n), num_replicas=W, rank=r, shuffle=shuffle, seed=3)) for r in range(W)]
    kept = [i for r in range(W) for i, real in zip(shards[r], real_slots(n, W, r)) if real]
    assert sorted(kept) == list(range(n))                       # every example once, from the real slots alone
    assert sum(len(s) for s in shards) - len(kept) == W * math.ceil(n / W) - n


def test_real_slots_refuses_bad_input():
    for args in [(0, 2, 0), (4, 0, 0), (4, 2, 2), (4, 2, -1)]:
        with pytest.raises(ValueError):
            real_slots(*args)


def test_metric_without_padding_equals_one_process():
    g = torch.Generator().manual_seed(0)
    n, W = 23, 4
    losses, hits = torch.rand(n, generator=g), torch.rand(n, generator=g) < 0.5
    idx = [list(DistributedSampler(range(n), num_replicas=W, rank=r, shuffle=False)) for r in range(W)]
    loss, acc = metric_without_padding([losses[i] for i in idx], [hits[i] for i in idx], n)
    assert loss == pytest.approx(float(losses.double().mean()), rel=1e-9)
    assert acc == pytest.approx(float(hits.double().mean()), rel=1e-12)


def test_all_reduce_sum_is_a_real_sum_on_every_rank():
    tensors = [torch.tensor([float(r), 1.0], dtype=torch.double) for r in range(5)]
    out = all_reduce_sum(tensors)
    assert len(out) == 5 and all(torch.equal(t, torch.tensor([10.0, 5.0], dtype=torch.double)) for t in out)
    assert torch.equal(tensors[0], torch.tensor([0.0, 1.0], dtype=torch.double))   # inputs untouched


def test_sharded_metrics_only_the_reduced_sums_agree_with_one_process():
    from course_utils.engine.data import spiral_splits
    models = []
    for seed in range(3):
        torch.manual_seed(seed)
        models.append(MLP())
    for r in sharded_metrics(models, *spiral_splits(600, 100).val.tensors, world_size=8):
        assert r.duplicates == 4 and r.real_per_rank == [13] * 4 + [12] * 4
        assert r.reduced_sums[0] == pytest.approx(r.single[0], rel=1e-6)
        assert r.reduced_sums[1] == pytest.approx(r.single[1], abs=1e-12)
        assert abs(r.with_padding[0] - r.single[0]) > 1e-5 * r.single[0]
        assert abs(r.mean_of_means[1] - r.single[1]) > 1e-9


def test_padding_layout_is_distributed_samplers():
    assert padding_layout(10, 4) == [[0, 4, 8], [1, 5, 9], [2, 6, 0], [3, 7, 1]]


@pytest.mark.parametrize("num_samples,W", [(1000, 4), (10, 4), (2, 3), (5, 1)])
def test_weighted_shards_are_one_weighted_draw_dealt_out(num_samples, W):
    weights = torch.tensor([0.9] * 9 + [0.1] * 3, dtype=torch.double)
    shards = [weighted_shard(weights, num_samples, W, r, epoch=2, seed=5) for r in range(W)]
    total = W * math.ceil(num_samples / W)
    oracle = list(WeightedRandomSampler(weights, total, generator=torch.Generator().manual_seed(7)))
    assert all(len(s) == total // W for s in shards)
    assert [shards[k % W][k // W] for k in range(total)] == oracle


def test_distributed_weighted_sampler_follows_set_epoch_and_the_weights():
    weights = torch.tensor([1.0] * 90 + [9.0] * 10)
    s = DistributedWeightedSampler(weights, 4000, num_replicas=4, rank=1, seed=0)
    first = list(s)
    assert len(first) == len(s) == 1000 and list(s) == first
    s.set_epoch(1)
    assert list(s) != first
    together = [i for r in range(4) for i in DistributedWeightedSampler(weights, 4000, 4, r)]
    share = sum(i >= 90 for i in together) / len(together)
    assert abs(share - 0.5) < 4 * math.sqrt(0.25 / 4000)
    with pytest.raises(ValueError):
        DistributedWeightedSampler(weights, 10, num_replicas=2, rank=2)


def test_same_seed_weighted_sampler_repeats_itself_on_every_rank_and_the_sharded_one_does_not():
    labels = torch.tensor([0] * 900 + [1] * 100)
    weights = torch.where(labels == 1, 1 / 100, 1 / 900).double()
    naive, dealt = same_seed_weighted(weights, 1000, 4, 0), sharded_weighted(weights, 1000, 4, 0)
    assert naive.identical and not dealt.identical
    assert len(set(naive.together)) < len(set(dealt.together)) / 2
    assert sorted(dealt.together) == sorted(one_process_draw(weights, 1000, 0))


def test_boxes_cannot_be_default_collated_and_detection_collate_keeps_every_box():
    from torch.utils.data import DataLoader
    boxes = BoxesDataset(8)
    with pytest.raises(RuntimeError):
        next(iter(DataLoader(boxes, batch_size=4)))
    batches = list(DataLoader(boxes, batch_size=4, collate_fn=detection_collate))
    assert [tuple(images.shape) for images, _ in batches] == [(4, 3, 8, 8)] * 2
    got = [t["boxes"] for _, targets in batches for t in targets]
    assert all(torch.equal(a, boxes[i][1]["boxes"]) for i, a in enumerate(got))
