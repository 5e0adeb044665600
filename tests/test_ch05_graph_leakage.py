"""Chapter 5's graph leak: the splits, the encoder's input graph and the leak's effect, against plain oracles."""
import pytest
import torch

from course_utils.chapters import ch05_graph_leakage as gl


@pytest.mark.parametrize("seed", [0, 3])
def test_the_splits_partition_the_edges_and_the_negatives_are_no_edges(seed):
    split = gl.edge_split(seed)
    edges = [tuple(e) for e in split.all_edges.tolist()]
    assert len(edges) == len(set(edges)) and all(u < v for u, v in edges)
    assert (len(split.test), len(split.val)) == (len(edges) // 5, len(edges) // 10)
    negatives = {tuple(p) for p in split.negatives.tolist()}
    assert len(negatives) == len(split.test) and not negatives & set(edges)
    assert all(u != v for u, v in negatives)


def test_the_mean_adjacency_averages_each_node_with_its_neighbours():
    split = gl.edge_split(1)
    neighbours = {u: {u} for u in range(gl.NODES)}
    for u, v in split.train.tolist():
        neighbours[u].add(v)
        neighbours[v].add(u)
    x = split.features
    expected = torch.stack([x[sorted(neighbours[u])].mean(dim=0) for u in range(gl.NODES)])
    torch.testing.assert_close(gl.mean_adjacency(split.train) @ x, expected)


def test_a_test_pair_reaches_its_own_score_only_through_the_leaky_graph():
    """Moving v's features moves u's representation exactly when the input graph links u and v or a neighbour."""
    split = gl.edge_split(0)
    encoder = gl.LinkEncoder()
    known = torch.cat([split.train, split.val])
    u, v = split.test[0].tolist()
    moved = split.features.clone()
    moved[v] += 1.0
    for graph, expect in ((split.all_edges, True), (known, None)):
        a = gl.mean_adjacency(graph)
        with torch.no_grad():
            changed = not torch.equal(encoder(split.features, a)[u], encoder(moved, a)[u])
        two_hops = bool(((a @ a)[u, v] > 0).item())
        assert changed == (two_hops if expect is None else expect)


def test_the_lookup_predictor_is_at_chance_without_the_test_edges_and_perfect_with_them():
    split = gl.edge_split(2)
    known = torch.cat([split.train, split.val])
    assert gl.lookup_auc(split, known) == 0.5
    assert gl.lookup_auc(split, split.all_edges) == 1.0


def test_auc_counts_wins_and_half_ties():
    assert gl.auc(torch.tensor([2.0, 1.0]), torch.tensor([1.0, 0.0])) == pytest.approx((1 + 1 + 0.5 + 1) / 4)


def test_a_disjoint_view_supervises_edges_kept_out_of_the_input():
    train = gl.edge_split(0).train
    g = torch.Generator().manual_seed(0)
    supervised, inputs = gl.training_view(train, 0.3, g)
    s, i = ({tuple(e) for e in t.tolist()} for t in (supervised, inputs))
    assert not s & i and s | i == {tuple(e) for e in train.tolist()} and len(s) == int(len(train) * 0.3)
    supervised, inputs = gl.training_view(train, 0.0, g)
    assert supervised is train and inputs is train


def test_the_leaky_graph_flatters_the_same_encoder_on_every_seed_and_disjoint_training_helps():
    runs = [gl.graph_leak_run(seed) for seed in range(10)]
    assert all(r["shared, all edges"] > r["shared, train + val"] + 0.1 for r in runs)
    assert all(r["disjoint, all edges"] > r["disjoint, train + val"] for r in runs)
    change = [r["disjoint, train + val"] - r["shared, train + val"] for r in runs]
    assert sum(c > 0.025 for c in change) >= 6 and not any(c < -0.025 for c in change)
    lines = gl.graph_leak_lines()
    assert "by over 0.15 on 10 of 10" in lines[3] and "below it by over 0.025 on 0 of 10" in lines[4]
