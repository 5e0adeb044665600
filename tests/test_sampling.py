"""Chapter 2 engine: compositions, class weights, DistributedSampler shards, pad collate, bucketing."""
import math

import pytest
import torch
from torch.utils.data import DistributedSampler, WeightedRandomSampler

from course_utils.engine.data import PAD_ID, make_imbalanced, make_sequences
from course_utils.chapters.ch02_sampling import (BucketBatchSampler, batch_composition, class_counts, class_weights,
                                   expected_batch_counts, expected_minority, minority_odds, order_experiment,
                                   pad_collate, padding_stats, rank_orders, sample_weights, shard_view)

LABELS = make_imbalanced(900, 100, seed=0).tensors[1]


def test_class_weights_and_expectations():
    counts = class_counts(LABELS)
    assert counts == [900, 100]
    assert class_weights(LABELS) == pytest.approx([1 / 900, 1 / 100])
    assert minority_odds(counts) == pytest.approx(9.0)
    assert expected_batch_counts(counts, 32, weighted=False) == pytest.approx([28.8, 3.2])
    assert expected_batch_counts(counts, 32, weighted=True) == pytest.approx([16.0, 16.0])
    assert expected_minority(900, 100, 32, False) == pytest.approx(3.2)
    w = sample_weights(LABELS)
    assert float(w[LABELS == 0].sum()) == pytest.approx(1.0) and float(w[LABELS == 1].sum()) == pytest.approx(1.0)


def test_compositions():
    seq = batch_composition(LABELS, "sequential", 32)
    assert len(seq.counts) == 32 and seq.counts[0] == [32, 0] and seq.totals == [900, 100]
    shuf = batch_composition(LABELS, "shuffled", 32, seed=1)
    assert shuf.totals == [900, 100] and shuf.distinct == 1000
    assert any(b[1] > 0 for b in shuf.counts[:5])
    weighted = batch_composition(LABELS, "weighted", 32, n_batches=500, seed=0)
    assert len(weighted.counts) == 500
    assert abs(weighted.share(1) - 0.5) < 0.03      # ~50/50 over many batches
    with pytest.raises(ValueError):
        batch_composition(LABELS, "nope", 32)
    with pytest.raises(ValueError):
        batch_composition(LABELS, "shuffled", 32, n_batches=100)


def test_weighted_matches_torch_sampler():
    comp = batch_composition(LABELS, "weighted", 10, n_batches=3, seed=5)
    oracle = list(WeightedRandomSampler(sample_weights(LABELS), 30, generator=torch.Generator().manual_seed(5)))
    expected = [torch.bincount(LABELS[oracle[i:i + 10]], minlength=2).tolist() for i in range(0, 30, 10)]
    assert comp.counts == expected


def test_without_replacement_keeps_totals():
    comp = batch_composition(LABELS, "weighted", 32, replacement=False, seed=0)
    assert comp.totals == [900, 100] and comp.distinct == 1000
    assert comp.counts[-1][1] == 0 and comp.counts[0][1] > 3
    with pytest.raises(ValueError):
        batch_composition(LABELS, "weighted", 32, n_batches=40, replacement=False)


@pytest.mark.parametrize("n,w", [(10, 4), (12, 3), (7, 8), (100, 3)])
@pytest.mark.parametrize("shuffle", [False, True])
def test_shard_view(n, w, shuffle):
    v = shard_view(n, w, shuffle=shuffle, epoch=2)
    for r in range(w):
        s = DistributedSampler(range(n), num_replicas=w, rank=r, shuffle=shuffle, seed=0)
        s.set_epoch(2)
        assert v.shards[r] == list(s)
    assert v.per_rank == math.ceil(n / w)
    assert v.padding == v.per_rank * w - n
    assert v.disjoint_up_to_padding()
    assert {i for s in v.shards for i in s} == set(range(n))


def test_shard_view_every_wth_index_and_drop_last():
    v = shard_view(10, 4, shuffle=False)
    assert v.shards == [[0, 4, 8], [1, 5, 9], [2, 6, 0], [3, 7, 1]]
    assert v.padding == 2 and v.duplicates == [0, 1]
    d = shard_view(10, 4, shuffle=False, drop_last=True)
    assert d.shards == [[0, 4], [1, 5], [2, 6], [3, 7]] and d.dropped == 2 and d.padding == 0


def test_set_epoch_effect():
    frozen = rank_orders(12, 2, 0, 3, call_set_epoch=False)
    moving = rank_orders(12, 2, 0, 3, call_set_epoch=True)
    assert frozen[0] == frozen[1] == frozen[2]
    assert moving[0] == frozen[0] and moving[1] != moving[0] and moving[2] != moving[1]
    assert shard_view(12, 2, epoch=1, call_set_epoch=False).shards == shard_view(12, 2, epoch=0).shards


def test_pad_collate():
    batch = [(torch.tensor([5, 6, 7]), 1), (torch.tensor([8]), 0)]
    out = pad_collate(batch)
    assert set(out) == {"input_ids", "attention_mask", "labels"}
    assert out["input_ids"].tolist() == [[5, 6, 7], [8, PAD_ID, PAD_ID]]
    assert out["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert out["labels"].tolist() == [1, 0]
    with pytest.raises(ValueError):
        pad_collate([])


def test_padding_stats_and_bucketing():
    data = make_sequences(200, 3, 40, 50, seed=0)
    total = sum(len(data[i][0]) for i in range(len(data)))
    plain = padding_stats(data, 16, bucketing=False)
    bucketed = padding_stats(data, 16, bucketing=True)
    assert plain.real_tokens == bucketed.real_tokens == total
    assert bucketed.waste < plain.waste
    lengths = [len(data[i][0]) for i in range(len(data))]
    sampler = BucketBatchSampler(lengths, 16)
    batches = list(sampler)
    assert len(batches) == len(sampler) and sorted(i for b in batches for i in b) == list(range(200))


def test_order_experiment_shuffle_wins():
    sorted_run = order_experiment(False, n=300, epochs=3)
    shuffled_run = order_experiment(True, n=300, epochs=3)
    assert shuffled_run.final_acc > sorted_run.final_acc
    assert max(sorted_run.last_batch_classes) <= 2 and min(shuffled_run.last_batch_classes) >= 2


def test_an_accelerate_prepared_loader_reshuffles_every_epoch_by_itself():
    from course_utils.chapters.ch02_sampling import accelerate_epoch_orders
    r = accelerate_epoch_orders(n=10, epochs=4, seed=3)
    assert r == {"wrapped as": "DataLoaderShard", "every epoch a new order, no set_epoch called": True,
                 "each epoch every example once": True}
