# Mirrors: pyg-team/pytorch_geometric, examples/gcn.py, snapshot at commit 5c6461b2 (2026-08-17), the commit that
# last changed the file.
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: full-batch node classification on one citation-style graph whose features are row-normalized
# (NormalizeFeatures) and whose nodes carry train, validation and test masks; a two-layer GCN (symmetric
# normalization with self-loops) with functional dropout (p 0.5, training=self.training) on its input and hidden
# layer; Adam with weight decay on the first layer's parameter group only; per epoch train(): model.train(),
# zero_grad, a forward over the whole graph, cross-entropy on the training nodes, backward, step, the loss
# returned as a float; test() under a no_grad decorator in eval mode: one forward, accuracy per mask; the test
# accuracy kept at the best validation accuracy. Shrunk: 60 nodes in 3 classes with 12 features, 15 training, 15
# validation and 30 test nodes, hidden width 8, 20 epochs (not 200); GCNConv written out with a dense normalized
# adjacency; no GDC, no wandb, no timing.
# Added: `with watch(model):` around the epochs.
from types import SimpleNamespace

import torch
from torch import nn
from torch.nn import functional as F


def planted_graph(nodes=60, classes=3, features=12, seed=0):
    """A stand-in Planetoid graph: nodes of a class share feature words and link mostly among themselves."""
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(nodes) % classes
    words = torch.rand(classes, features, generator=g) < 0.3
    x = ((torch.rand(nodes, features, generator=g) < 0.15) | (words[y] & (torch.rand(nodes, features, generator=g) < 0.6))).float()
    same = y[:, None] == y[None, :]
    link = torch.rand(nodes, nodes, generator=g) < torch.where(same, 0.15, 0.02)
    link = torch.triu(link, diagonal=1)
    src, dst = link.nonzero(as_tuple=True)
    edge_index = torch.stack((torch.cat((src, dst)), torch.cat((dst, src))))
    order = torch.randperm(nodes, generator=g)
    masks = [torch.zeros(nodes, dtype=torch.bool) for _ in range(3)]
    masks[0][order[:15]], masks[1][order[15:30]], masks[2][order[30:]] = True, True, True
    x = x / x.sum(1, keepdim=True).clamp(min=1)
    return SimpleNamespace(x=x, edge_index=edge_index, edge_attr=None, y=y, train_mask=masks[0], val_mask=masks[1],
                           test_mask=masks[2], num_features=features, num_classes=classes)


class GraphConv(nn.Module):
    """X' = D^-1/2 (A + I) D^-1/2 X W + b."""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.lin = nn.Linear(in_channels, out_channels, bias=False)
        self.bias = nn.Parameter(torch.zeros(out_channels))

    def forward(self, x, edge_index, edge_weight=None):
        n = x.size(0)
        adj = torch.zeros(n, n)
        adj[edge_index[1], edge_index[0]] = 1.0 if edge_weight is None else edge_weight
        adj = adj + torch.eye(n)
        d = adj.sum(1).pow(-0.5)
        return (d[:, None] * adj * d[None, :]) @ self.lin(x) + self.bias


class GCN(nn.Module):
    def __init__(self, in_channels, hidden_channels, out_channels):
        super().__init__()
        self.conv1 = GraphConv(in_channels, hidden_channels)
        self.conv2 = GraphConv(hidden_channels, out_channels)

    def forward(self, x, edge_index, edge_weight=None):
        x = F.dropout(x, p=0.5, training=self.training)
        x = self.conv1(x, edge_index, edge_weight).relu()
        x = F.dropout(x, p=0.5, training=self.training)
        return self.conv2(x, edge_index, edge_weight)


def main(watch):
    torch.manual_seed(12345)
    data = planted_graph()
    model = GCN(data.num_features, 8, data.num_classes)
    optimizer = torch.optim.Adam([dict(params=model.conv1.parameters(), weight_decay=5e-4),
                                  dict(params=model.conv2.parameters(), weight_decay=0)], lr=0.05)

    def train():
        model.train()
        optimizer.zero_grad()
        out = model(data.x, data.edge_index, data.edge_attr)
        loss = F.cross_entropy(out[data.train_mask], data.y[data.train_mask])
        loss.backward()
        optimizer.step()
        return float(loss.detach())

    @torch.no_grad()
    def test():
        model.eval()
        pred = model(data.x, data.edge_index, data.edge_attr).argmax(dim=-1)
        accs = []
        for mask in [data.train_mask, data.val_mask, data.test_mask]:
            accs.append(int((pred[mask] == data.y[mask]).sum()) / int(mask.sum()))
        return accs

    best_val_acc = test_acc = 0
    with watch(model):
        for epoch in range(1, 21):
            loss = train()
            train_acc, val_acc, tmp_test_acc = test()
            if val_acc > best_val_acc:
                best_val_acc, test_acc = val_acc, tmp_test_acc
            print(f"epoch {epoch:03d} loss {loss:.4f} train {train_acc:.3f} val {val_acc:.3f} test {test_acc:.3f}")
    return [model, optimizer]


from tests.doctor_published import variant  # noqa: E402

VARIANTS = [
    variant("test_without_eval", "eval_in_train_mode", ("        model.eval()\n", "")),
    variant("test_without_no_grad", "missing_no_grad", ("    @torch.no_grad()\n", "")),
    variant("train_without_train_switch", "missing_train_switch", ("        model.train()\n", "")),
    variant("no_zero_grad", "missing_zero_grad", ("        optimizer.zero_grad()\n", "")),
    variant("softmax_then_cross_entropy", "softmax_before_cross_entropy",
            ("F.cross_entropy(out[data.train_mask], data.y[data.train_mask])",
             "F.cross_entropy(out.softmax(dim=-1)[data.train_mask], data.y[data.train_mask])")),
]
