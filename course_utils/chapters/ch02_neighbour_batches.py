"""Chapter 2: mini-batches of a graph, each a set of seed nodes plus the neighbours their prediction reads.

A node's prediction after k rounds of message passing reads its k-hop neighbourhood, so a mini-batch of seed
nodes must carry those neighbours too (what PyG's NeighborLoader samples; here every neighbour is taken, as its
``num_neighbors=[-1, -1]`` does). The batch lists its seeds first, then the neighbours in the order they were
reached: the first ``batch_size`` rows are the nodes this batch predicts. A neighbour of seeds in several batches
is in each of them, so an epoch returns more rows than the graph has nodes, and when the seeds are the training
nodes the other rows include validation and test nodes, whose labels a loss over every row would train on.
Graph: 200 nodes, each pair linked with probability 0.02, seeds in batches of 32 in index order (shuffle=False).
"""
from __future__ import annotations

import torch

NODES = 200


def random_graph(seed: int = 0, p: float = 0.02) -> list[set[int]]:
    """Each node's neighbours in an undirected graph where each pair is linked with probability p."""
    g = torch.Generator().manual_seed(seed)
    linked = torch.triu(torch.rand(NODES, NODES, generator=g) < p, diagonal=1).nonzero().tolist()
    neighbours: list[set[int]] = [set() for _ in range(NODES)]
    for u, v in linked:
        neighbours[u].add(v)
        neighbours[v].add(u)
    return neighbours


def neighbour_batch(seeds: list[int], neighbours: list[set[int]], hops: int = 2) -> list[int]:
    """The nodes one mini-batch holds: its seeds first, then every node within `hops`, in the order reached."""
    rows, known, frontier = list(seeds), set(seeds), list(seeds)
    for _ in range(hops):
        reached = []
        for node in frontier:
            for other in sorted(neighbours[node]):
                if other not in known:
                    known.add(other)
                    reached.append(other)
        rows += reached
        frontier = reached
    return rows


def epoch_batches(neighbours: list[set[int]], batch_size: int = 32, hops: int = 2,
                  seeds: list[int] | None = None) -> list[list[int]]:
    """Mini-batches over `seeds` (every node by default) in order, `batch_size` seeds each."""
    seeds = list(range(NODES)) if seeds is None else seeds
    return [neighbour_batch(seeds[start:start + batch_size], neighbours, hops)
            for start in range(0, len(seeds), batch_size)]


def neighbour_batch_lines(batch_size: int = 32, hops: int = 2) -> list[str]:
    neighbours = random_graph()
    batches = epoch_batches(neighbours, batch_size, hops)
    rows = sum(len(b) for b in batches)
    appearances = torch.bincount(torch.tensor([n for b in batches for n in b]), minlength=NODES)
    degree = torch.tensor([len(n) for n in neighbours])
    by_degree = ", ".join(f"{d}: {appearances[degree == d].float().mean().item():.1f}"
                          for d in sorted(set(degree.tolist())) if d in (0, 1, 2, 4, int(degree.max())))
    held = set(range(0, NODES, 5))                          # every fifth node: validation and test
    train = [n for n in range(NODES) if n not in held]
    train_batches = epoch_batches(neighbours, batch_size, hops, seeds=train)
    context = sum(len(b) - len(b[:batch_size]) for b in train_batches)
    leaked = sum(n in held for b in train_batches for n in b[batch_size:])
    return [f"{NODES} nodes, {int(degree.sum()) // 2} edges; seeds in batches of {batch_size}, all neighbours up to "
            f"{hops} hops: {len(batches)} batches, {rows:,} rows in the epoch",
            f"nodes in more than one batch: {int((appearances > 1).sum())}; the most, in {int(appearances.max())} of "
            f"{len(batches)}",
            f"times a node is in the epoch's rows, by its degree (mean): {by_degree}; as seed rows, every node once",
            f"seeds = the {len(train)} training nodes only: {leaked} of the {context:,} context rows are validation or "
            f"test nodes ({len(held)} held out)"]
