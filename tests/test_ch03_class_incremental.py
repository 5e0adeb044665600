"""Class-incremental training: the loss over two classes lowers the others, EWC's Fisher is the definition's,
and the three strategies order as chapter 3 says on every seed it prints."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_utils.chapters import ch03_class_incremental as ci


def test_a_two_class_batch_lowers_every_absent_class_logit():
    logits = torch.randn(6, ci.CLASSES, requires_grad=True)
    F.cross_entropy(logits, torch.tensor([8, 9, 8, 9, 8, 9])).backward()
    absent = [c for c in range(ci.CLASSES) if c not in (8, 9)]
    assert (logits.grad[:, absent] > 0).all()          # gradient descent moves them down


def test_fisher_is_the_mean_of_per_example_squared_gradients():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    x, y = torch.randn(5, 3), torch.tensor([0, 1, 1, 0, 1])
    got = ci._fisher(model, x, y)
    from torch.func import functional_call, grad, vmap

    params = {k: v.detach() for k, v in model.named_parameters()}
    per_example = vmap(grad(lambda p, xi, yi: F.cross_entropy(functional_call(model, p, (xi[None],)), yi[None])),
                       in_dims=(None, 0, 0))(params, x, y)
    for g, (name, _) in zip(got, model.named_parameters()):
        assert torch.allclose(g, per_example[name].pow(2).mean(0), atol=1e-7)


def test_the_strategies_order_on_every_seed():
    outcomes = ci.class_incremental(seeds=range(3))
    for tune, ewc, replay in zip(*(outcomes[s] for s in ci.STRATEGIES)):
        old = lambda o: sum(o.task_accuracy[:-1]) / (ci.TASKS - 1)       # noqa: E731
        old_told = lambda o: sum(o.told_task[:-1]) / (ci.TASKS - 1)      # noqa: E731
        assert old(tune) < 0.5 and old(ewc) < 0.5 < 0.9 < old(replay)
        assert tune.old_to_last > 0.5 and replay.old_to_last < 0.1
        assert min(o.task_accuracy[-1] for o in (tune, ewc, replay)) > 0.9
        assert old_told(tune) > 0.6 and old_told(ewc) > 0.6 and old_told(replay) > 0.9   # the features survived
    lines = ci.class_incremental_lines(outcomes)
    assert "replay above both on 3 of 3" in lines[-2]


def test_replay_of_nothing_is_fine_tuning():
    assert ci.train("replay", seed=0, stored=0) == ci.train("fine-tuning", seed=0)
