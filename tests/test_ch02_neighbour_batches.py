"""Chapter 2's neighbour mini-batches against the k-hop neighbourhoods read off powers of the adjacency matrix."""
import pytest
import torch

from course_utils.chapters import ch02_neighbour_batches as nb


@pytest.mark.parametrize("hops", [1, 2])
def test_each_batch_is_its_seeds_then_exactly_their_k_hop_neighbourhood(hops):
    neighbours = nb.random_graph(3)
    a = torch.eye(nb.NODES)
    for u, others in enumerate(neighbours):
        a[u, list(others)] = 1.0
    reach = torch.linalg.matrix_power(a, hops) > 0
    batches = nb.epoch_batches(neighbours, batch_size=32, hops=hops)
    for i, rows in enumerate(batches):
        seeds = list(range(32 * i, min(32 * i + 32, nb.NODES)))
        assert rows[:len(seeds)] == seeds and len(rows) == len(set(rows))
        assert set(rows) == set(reach[seeds].any(dim=0).nonzero().flatten().tolist())


def test_an_epoch_returns_more_rows_than_nodes_and_counts_connected_nodes_more():
    lines = nb.neighbour_batch_lines()
    rows = int(lines[0].rsplit(", ", 1)[1].split()[0].replace(",", ""))
    assert rows > nb.NODES
    neighbours = nb.random_graph()
    batches = nb.epoch_batches(neighbours)
    count = [sum(n in b for b in batches) for n in range(nb.NODES)]
    isolated = [c for n, c in enumerate(count) if not neighbours[n]]
    connected = [c for n, c in enumerate(count) if len(neighbours[n]) >= 4]
    assert isolated and set(isolated) == {1} and min(connected) > 1          # each isolated node: its seed row only
    assert sum(connected) / len(connected) > 5


def test_training_seeds_pull_held_out_nodes_into_the_context_rows():
    neighbours = nb.random_graph()
    held = set(range(0, nb.NODES, 5))
    train = [n for n in range(nb.NODES) if n not in held]
    batches = nb.epoch_batches(neighbours, seeds=train)
    assert all(set(b[:32]) <= set(train) for b in batches)                     # the seed rows: training nodes only
    assert any(n in held for b in batches for n in b[32:])                     # the context rows: not
    assert nb.neighbour_batch_lines()[3].startswith(f"seeds = the {len(train)} training nodes only")
