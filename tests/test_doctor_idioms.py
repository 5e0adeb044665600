"""Loop idioms the doctor reads since round 6 of the published corpus (stop 65), each shown on a small loop with
its healthy twin: evaluating by freezing every parameter, a forward reached through another method of the model,
an averager dividing by float(k), batches keyed by a repeating id, a sigmoid fed to BCE-with-logits, a missing
zero_grad that is not also an accumulation, and a PolynomialLR counted in epochs but stepped per batch."""
from __future__ import annotations

import copy
import io
import pickle

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

from course_utils.doctor import LoopDoctor


def _data(n: int = 60, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 4, generator=g), torch.randint(0, 3, (n,), generator=g)


def _bn_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))


@pytest.mark.parametrize("switch", [False, True])
def test_evaluating_by_freezing_every_parameter_is_an_evaluation(switch):
    """crnn.pytorch's val(): `p.requires_grad = False` for every parameter, gradients left on; without eval() its
    BatchNorm runs in train mode on validation batches."""
    x, y = _data()
    model = _bn_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with LoopDoctor(model, opt) as doctor:
        for epoch in range(2):
            for p in model.parameters():
                p.requires_grad = True
            model.train()
            for i in range(0, 40, 10):
                opt.zero_grad()
                nn.functional.cross_entropy(model(x[i:i + 10]), y[i:i + 10]).backward()
                opt.step()
            for p in model.parameters():
                p.requires_grad = False
            if switch:
                model.eval()
            for i in range(40, 60, 10):
                model(x[i:i + 10])
    report = doctor.report()
    assert report.evaluation_forwards == 4
    assert report.names == (() if switch else ("eval_in_train_mode",)), str(report)


def test_a_frozen_model_whose_features_are_trained_on_is_not_an_evaluation():
    """The same frozen forward followed by a backward (a fixed encoder in front of a trained head): not judged."""
    x, y = _data()
    encoder, head = _bn_model(), nn.Linear(3, 3)
    encoder.requires_grad_(False)
    opt = torch.optim.SGD(head.parameters(), lr=0.1)
    with LoopDoctor([encoder, head], opt) as doctor:
        for i in range(0, 60, 10):
            opt.zero_grad()
            nn.functional.cross_entropy(head(encoder(x[i:i + 10])), y[i:i + 10]).backward()
            opt.step()
    report = doctor.report()
    assert report.names == () and report.evaluation_forwards == 0, str(report)


class Averager:
    """crnn.pytorch's utils.averager: sums tensors, counts their elements, divides by float(count)."""

    def __init__(self):
        self.sum, self.count = 0, 0

    def add(self, v):
        self.count += v.numel()
        self.sum += v.data.sum()

    def val(self):
        return self.sum / float(self.count)


@pytest.mark.parametrize("weighted", [False, True])
def test_a_tensor_sum_divided_by_float_k_is_a_mean_of_batch_means(weighted):
    x, y = _data(50)
    model = _bn_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    val = DataLoader(TensorDataset(x[30:], y[30:]), batch_size=8)      # 8 + 8 + 4
    with LoopDoctor(model, opt) as doctor:
        for i in range(0, 30, 10):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x[i:i + 10]), y[i:i + 10]).backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            average = Averager()
            for xb, yb in val:
                # the averager as meant: a per-example loss vector counts its examples
                average.add(nn.functional.cross_entropy(model(xb), yb, reduction="none" if weighted else "mean"))
            average.val()
    assert doctor.report().names == (() if weighted else ("mean_of_batch_means",))


class Policy(nn.Module):
    """SAC's GaussianPolicy in miniature: callers use sample(), which calls self.forward (no hooks run)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.body, self.mean = nn.Linear(3, 8), nn.Linear(8, 1)

    def forward(self, state):
        return self.mean(torch.relu(self.body(state)))

    def sample(self, state):
        return torch.tanh(self.forward(state))


@pytest.mark.parametrize("no_grad", [False, True])
def test_a_forward_reached_through_another_method_is_seen(no_grad):
    policy = Policy()
    opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
    states = torch.randn(40, 3, generator=torch.Generator().manual_seed(1))
    target = copy.deepcopy(policy)                       # another instance of the class: not the watched model
    with LoopDoctor(policy, opt) as doctor:
        for i in range(0, 40, 8):
            opt.zero_grad()
            (policy.sample(states[i:i + 8]) - 0.5).pow(2).mean().backward()
            opt.step()
            target.sample(states[i:i + 8])
            if no_grad:
                with torch.no_grad():
                    policy.sample(states[i:i + 1])
            else:
                policy.sample(states[i:i + 1]).detach()   # an action for the environment
            pickle.dumps(policy)                          # the watched model still pickles
        buffer = io.BytesIO()
        torch.save(policy, buffer)
    report = doctor.report()
    assert report.training_forwards == 5 and report.evaluation_forwards == 5, str(report)
    assert report.names == (() if no_grad else ("missing_no_grad",)), str(report)
    assert "forward" not in vars(Policy) or Policy.forward.__qualname__ == "Policy.forward"   # the class restored
    assert not hasattr(Policy.forward, "__wrapped__")


class Ratings(Dataset):
    """NCF's (user, item, label) examples, read through __getitem__ (opaque storage: keyed as batches flow)."""

    def __init__(self, users, items, labels):
        self.rows = list(zip(users.tolist(), items.tolist(), labels.tolist()))

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


class Embedder(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.users, self.items = nn.Embedding(10, 4), nn.Embedding(30, 4)

    def forward(self, user, item):
        return (self.users(user) * self.items(item)).sum(-1)


def test_keys_that_repeat_within_a_batch_are_not_compared_as_examples():
    """Every batch repeats its few user ids: a validation user seen in training is no copied example."""
    g = torch.Generator().manual_seed(2)
    train = Ratings(torch.randint(0, 10, (200,), generator=g), torch.randint(0, 30, (200,), generator=g),
                    torch.randint(0, 2, (200,), generator=g))
    val = Ratings(torch.arange(100) % 10, torch.randint(0, 30, (100,), generator=g), torch.zeros(100, dtype=torch.long))
    model = Embedder()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    with LoopDoctor(model, opt) as doctor:
        for user, item, label in DataLoader(train, batch_size=50, shuffle=True, generator=g):
            opt.zero_grad()
            nn.functional.binary_cross_entropy_with_logits(model(user, item), label.float()).backward()
            opt.step()
        with torch.no_grad():
            for user, item, _ in DataLoader(val, batch_size=50):
                model(user, item)
    assert doctor.report().names == (), str(doctor.report())


def test_copied_feature_rows_are_still_leakage():
    """The control: batches whose first tensor holds each example's features, a quarter of validation copied."""
    x, y = _data(80)
    val_x = torch.cat([x[:5], torch.randn(15, 4, generator=torch.Generator().manual_seed(9))])
    model = _bn_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    class Plain(Dataset):
        def __init__(self, a, b):
            self.a, self.b = a, b

        def __len__(self):
            return len(self.a)

        def __getitem__(self, i):
            return self.a[i], self.b[i]
    with LoopDoctor(model, opt) as doctor:
        for xb, yb in DataLoader(Plain(x, y), batch_size=16):
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            for xb, _ in DataLoader(Plain(val_x, y[:20]), batch_size=10):
                model(xb)
    report = doctor.report()
    assert report.names == ("data_leakage",) and "5 of the 20" in str(report), str(report)


@pytest.mark.parametrize("where", ["input", "target", "none"])
def test_a_sigmoid_fed_to_bce_with_logits_is_named(where):
    """Probabilities where logits belong; a sigmoid on the target side (a teacher's soft labels) is fine."""
    x, _ = _data()
    y = (x[:, 0] > 0).float()
    torch.manual_seed(0)
    model, teacher = nn.Linear(4, 1), nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with LoopDoctor(model, opt) as doctor:
        for i in range(0, 60, 10):
            opt.zero_grad()
            logits = model(x[i:i + 10]).squeeze(1)
            target = torch.sigmoid(teacher(x[i:i + 10]).squeeze(1)) if where == "target" else y[i:i + 10]
            inputs = torch.sigmoid(logits) if where == "input" else logits
            nn.BCEWithLogitsLoss()(inputs, target).backward()
            opt.step()
    assert doctor.report().names == (("softmax_before_cross_entropy",) if where == "input" else ())


def test_a_missing_zero_grad_is_not_also_an_undivided_accumulation():
    """Two losses reach one optimizer's parameters per update (SAC's policy loss backpropagates into the critic);
    without the critic's zero_grad every update sums old and new gradients: one bug, named once."""
    x, _ = _data()
    torch.manual_seed(0)
    critic, actor = nn.Linear(5, 1), nn.Linear(4, 1)
    critic_opt, actor_opt = (torch.optim.Adam(m.parameters(), lr=1e-3) for m in (critic, actor))
    with LoopDoctor([critic, actor], [critic_opt, actor_opt]) as doctor:
        for i in range(0, 60, 10):
            s = x[i:i + 10]
            logged = s[:, :1].tanh()                    # the action the replay buffer holds
            critic(torch.cat([s, logged], 1)).pow(2).mean().backward()
            critic_opt.step()
            actor_opt.zero_grad()
            (-critic(torch.cat([s, actor(s)], 1)).mean()).backward()
            actor_opt.step()
    assert doctor.report().names == ("missing_zero_grad",), str(doctor.report())


@pytest.mark.parametrize("per", ["batch", "epoch"])
def test_a_polynomial_schedule_counted_in_epochs_and_stepped_per_batch_is_named(per):
    x, y = _data()
    model = _bn_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    schedule = torch.optim.lr_scheduler.PolynomialLR(opt, total_iters=4, power=0.9)
    loader = DataLoader(TensorDataset(x, y), batch_size=10)
    with LoopDoctor(model, opt) as doctor:
        for _ in range(4):
            for xb, yb in loader:
                opt.zero_grad()
                nn.functional.cross_entropy(model(xb), yb).backward()
                opt.step()
                if per == "batch":
                    schedule.step()
            if per == "epoch":
                schedule.step()
    report = doctor.report()
    assert report.names == (("epoch_schedule_per_batch",) if per == "batch" else ()), str(report)
    if per == "batch":
        assert "reached 0 after 4 batches and stayed there for the other 20 steps" in str(report)
