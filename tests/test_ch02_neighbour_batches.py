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


def test_an_epoch_returns_more_rows_than_nodes_and_counts_high_degree_nodes_more():
    lines = nb.neighbour_batch_lines()
    rows = int(lines[0].rsplit(", ", 1)[1].split()[0].replace(",", ""))
    assert rows > nb.NODES
    assert lines[2].endswith("over the seed rows, every node once")
