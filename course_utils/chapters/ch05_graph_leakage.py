"""Chapter 5: leakage through the graph in link prediction, measured.

A link predictor scores a pair of nodes from their representations, and a message-passing encoder builds each
node's representation from the edges of the graph it is given. If that graph holds the very edges being
predicted, node u's representation already contains v's features when the pair (u, v) is scored: the answer is
in the input. The right input graph for each split holds only what is known before it: validation edges are
predicted from the training edges, test edges from the training and validation edges (PyG's RandomLinkSplit
builds its splits this way, 10% validation and 20% test by default). In training too, an edge supervised while
it sits in the encoder's input teaches the encoder that "connected in my input" means "an edge"; keeping a share
of the training edges out of the input at each step and supervising only those (RandomLinkSplit's
``disjoint_train_ratio``; 0.3 here, drawn afresh every step) removes that shortcut.

Data: a 200-node graph of 4 communities (edge probability 0.08 inside one, 0.004 across), random node features
of width 32 that say nothing about the communities; the edges split 70/10/20 at random. Encoder: two layers of
mean aggregation over each node and its neighbours, a Linear before each, a ReLU between; a pair's score is the
dot product of its two nodes' outputs. Adam at 0.01, 200 full-graph steps, one random pair per supervised edge
as its negative. Scored by the test edges' AUC against as many node pairs that are no edge of the graph.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from course_utils.infra.parallel import map_runs
from course_utils.production.classification_metrics import auroc_by_ranks

NODES, COMMUNITIES, WIDTH = 200, 4, 32
DISJOINT = 0.3


@dataclass(frozen=True)
class EdgeSplit:
    """Undirected edges as (u, v) rows with u < v, split at random; `negatives` are non-edges scored beside `test`."""

    features: torch.Tensor
    train: torch.Tensor
    val: torch.Tensor
    test: torch.Tensor
    negatives: torch.Tensor

    @property
    def all_edges(self) -> torch.Tensor:
        return torch.cat([self.train, self.val, self.test])


def edge_split(seed: int) -> EdgeSplit:
    g = torch.Generator().manual_seed(seed)
    community = torch.arange(NODES) % COMMUNITIES
    p = torch.where(community[:, None] == community[None, :], 0.08, 0.004)
    edges = torch.triu(torch.rand(NODES, NODES, generator=g) < p, diagonal=1).nonzero()
    order = edges[torch.randperm(len(edges), generator=g)]
    n_test, n_val = len(edges) // 5, len(edges) // 10
    taken = set(map(tuple, edges.tolist()))
    negatives = []
    while len(negatives) < n_test:
        u, v = sorted(torch.randint(NODES, (2,), generator=g).tolist())
        if u != v and (u, v) not in taken:
            taken.add((u, v))
            negatives.append((u, v))
    return EdgeSplit(torch.randn(NODES, WIDTH, generator=g), order[n_test + n_val:], order[n_test:n_test + n_val],
                     order[:n_test], torch.tensor(negatives))


def mean_adjacency(edges: torch.Tensor) -> torch.Tensor:
    """The graph as a dense matrix averaging each node with its neighbours (self-loops added, rows sum to 1)."""
    a = torch.eye(NODES)
    a[edges[:, 0], edges[:, 1]] = 1.0
    a[edges[:, 1], edges[:, 0]] = 1.0
    return a / a.sum(dim=1, keepdim=True)


class LinkEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.first, self.second = nn.Linear(WIDTH, WIDTH), nn.Linear(WIDTH, WIDTH)

    def forward(self, x: torch.Tensor, graph: torch.Tensor) -> torch.Tensor:
        return graph @ self.second(torch.relu(graph @ self.first(x)))


def pair_scores(z: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
    return (z[pairs[:, 0]] * z[pairs[:, 1]]).sum(dim=1)


def auc(positive: torch.Tensor, negative: torch.Tensor) -> float:
    """The share of (edge, non-edge) pairs the edge wins, a tie counting half (the course's AUROC, by ranks)."""
    is_edge = torch.cat([torch.ones(len(positive), dtype=torch.bool), torch.zeros(len(negative), dtype=torch.bool)])
    return auroc_by_ranks(torch.cat([positive, negative]), is_edge).item()


def lookup_auc(split: EdgeSplit, graph_edges: torch.Tensor) -> float:
    """A predictor with nothing learned: 1 if the pair is an edge of its input graph, else 0."""
    a = torch.zeros(NODES, NODES)
    a[graph_edges[:, 0], graph_edges[:, 1]] = 1.0
    return auc(a[split.test[:, 0], split.test[:, 1]], a[split.negatives[:, 0], split.negatives[:, 1]])


def training_view(train: torch.Tensor, disjoint: float, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(edges supervised, edges in the encoder's input) for one step: all of them both ways, or with `disjoint`
    > 0 that share of them drawn afresh to be supervised, the rest the input."""
    if not disjoint:
        return train, train
    order = train[torch.randperm(len(train), generator=g)]
    cut = int(len(order) * disjoint)
    return order[:cut], order[cut:]


def train_encoder(split: EdgeSplit, seed: int, disjoint: float = 0.0, steps: int = 200) -> LinkEncoder:
    """Trained on the training edges; with `disjoint` > 0 each step supervises that share of them, kept out of the
    encoder's input graph, the rest being its input."""
    g = torch.Generator().manual_seed(seed + 1000)
    torch.manual_seed(seed)
    encoder = LinkEncoder()
    optimizer = torch.optim.Adam(encoder.parameters(), lr=0.01)
    for _ in range(steps):
        supervised, inputs = training_view(split.train, disjoint, g)
        z = encoder(split.features, mean_adjacency(inputs))
        negatives = torch.randint(NODES, (len(supervised), 2), generator=g)
        logits = torch.cat([pair_scores(z, supervised), pair_scores(z, negatives)])
        target = torch.cat([torch.ones(len(supervised)), torch.zeros(len(negatives))])
        loss = nn.functional.binary_cross_entropy_with_logits(logits, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return encoder


def scored_auc(encoder: LinkEncoder, split: EdgeSplit, graph_edges: torch.Tensor) -> float:
    with torch.no_grad():
        z = encoder(split.features, mean_adjacency(graph_edges))
        return auc(pair_scores(z, split.test), pair_scores(z, split.negatives))


def graph_leak_run(seed: int) -> dict[str, float]:
    """Test AUC of the encoder trained both ways, each read with the right input graph and with every edge."""
    split = edge_split(seed)
    known = torch.cat([split.train, split.val])
    out = {}
    for training, disjoint in (("shared", 0.0), ("disjoint", DISJOINT)):
        encoder = train_encoder(split, seed, disjoint)
        out[f"{training}, train + val"] = scored_auc(encoder, split, known)
        out[f"{training}, all edges"] = scored_auc(encoder, split, split.all_edges)
    return out


def _present(pairs: torch.Tensor, edges: torch.Tensor) -> int:
    inside = set(map(tuple, edges.tolist()))
    return sum(pair in inside for pair in map(tuple, pairs.tolist()))


def graph_leak_lines(seeds=range(10)) -> list[str]:
    split = edge_split(0)
    known = torch.cat([split.train, split.val])
    runs = map_runs(graph_leak_run, [(s,) for s in seeds])
    n = len(runs)

    def count(better, worse, by: float = 0.0):
        """Seeds on which `better` beat `worse` by over `by`: AUCs on 95 test edges, where a seed's difference near 0
        changed sign under a last-bit nudge, so the claims count differences with a margin, not signs."""
        return f"{sum(r[better] - r[worse] > by for r in runs)} of {n}"

    def gap(r, kind):
        return r[f"{kind}, all edges"] - r[f"{kind}, train + val"]

    test = len(split.test)
    return [f"seed 0: {len(split.all_edges)} edges; {len(split.train)} train, {len(split.val)} val, {test} test",
            f"test edges inside the encoder's input graph: train + val edges {_present(split.test, known)} of {test}, "
            f"all edges {_present(split.test, split.all_edges)} of {test}",
            f"a predictor that only looks the pair up in its input graph: test AUC {lookup_auc(split, known):.2f} "
            f"with train + val edges, {lookup_auc(split, split.all_edges):.2f} with all edges",
            f"the trained encoder, seeds {seeds[0]}-{seeds[-1]}: test AUC higher with all edges than with train + val "
            f"edges by over 0.15 on {count('shared, all edges', 'shared, train + val', 0.15)}",
            f"trained with {DISJOINT:.0%} of its edges kept out of its input each step: the train + val AUC above the "
            f"shared training's by over 0.025 on {count('disjoint, train + val', 'shared, train + val', 0.025)} "
            f"seeds, below it by over 0.025 on {count('shared, train + val', 'disjoint, train + val', 0.025)}; what "
            f"the leaky graph adds smaller than with shared training on "
            f"{sum(gap(r, 'disjoint') < gap(r, 'shared') - 0.03 for r in runs)} of {n} (by over 0.03), still over "
            f"0.05 on {sum(gap(r, 'disjoint') > 0.05 for r in runs)} of {n}"]
