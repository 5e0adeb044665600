"""Models: the MLP's structure and the chapter-3 hand calculation on TinyLinear."""
import pytest
import torch
from torch import nn

from course_utils.engine.models import MLP, OPTIMIZERS, TinyLinear, make_optimizer


def test_mlp_shapes_and_layers():
    model = MLP(hidden=16, depth=3, dropout=0.2, batchnorm=True)
    assert model(torch.randn(5, 2)).shape == (5, 3)
    kinds = [type(m) for m in model.body]
    assert kinds == [nn.Linear, nn.BatchNorm1d, nn.ReLU, nn.Dropout] * 3
    assert model.head.in_features == 16 and model.head.out_features == 3


def test_mlp_parameter_count():
    # depth 2, hidden 64: (2*64 + 64) + (64*64 + 64) + (64*3 + 3) = 192 + 4160 + 195 = 4547
    assert sum(p.numel() for p in MLP().parameters()) == 4547


def test_mlp_depth_zero_is_a_linear_classifier():
    model = MLP(depth=0)
    assert len(model.body) == 0 and model.head.in_features == 2


@pytest.mark.parametrize("kwargs, name", [({"hidden": 0}, "hidden"), ({"depth": -1}, "depth"),
                                          ({"dropout": 1.0}, "dropout")])
def test_mlp_rejects_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        MLP(**kwargs)


def test_tiny_linear_reproduces_the_chapter_3_hand_calculation():
    model = TinyLinear()
    x, target = torch.tensor([1.0, 2.0]), torch.tensor([1.0, 0.0])
    y = model(x)
    assert torch.allclose(y, torch.tensor([-0.1, 1.8]))
    loss = nn.functional.mse_loss(y, target)
    assert loss.item() == pytest.approx(2.225)
    loss.backward()
    assert torch.allclose(model.weight.grad, torch.tensor([[-1.1, -2.2], [1.8, 3.6]]))
    assert torch.allclose(model.bias.grad, torch.tensor([-1.1, 1.8]))
    torch.optim.SGD(model.parameters(), lr=0.01).step()
    assert torch.allclose(model.weight, torch.tensor([[0.511, -0.278], [0.182, 0.764]]))
    assert torch.allclose(model.bias, torch.tensor([0.011, -0.018]))
    y_new = model(x)
    assert y_new[0].item() == pytest.approx(-0.034, abs=1e-6)
    assert nn.functional.mse_loss(y_new, target).item() == pytest.approx(1.96601, abs=1e-5)


def test_make_optimizer_kinds():
    params = [nn.Parameter(torch.zeros(2))]
    kinds = {name: make_optimizer(name, params, lr=0.1) for name in OPTIMIZERS}
    assert isinstance(kinds["sgd"], torch.optim.SGD) and kinds["sgd"].defaults["momentum"] == 0
    assert kinds["momentum"].defaults["momentum"] == 0.9
    assert type(kinds["adam"]) is torch.optim.Adam and type(kinds["adamw"]) is torch.optim.AdamW
    with pytest.raises(ValueError, match="optimizer"):
        make_optimizer("rmsprop", params, lr=0.1)


def test_adamw_keeps_torch_default_weight_decay_and_differs_from_adam():
    """Review ch.5 item 4: "adamw" must not be a second name for "adam"."""
    import torch
    from course_utils.engine.models import make_optimizer
    w = [torch.zeros(2, requires_grad=True)]
    reference = torch.optim.AdamW(w, lr=0.1).defaults["weight_decay"]
    assert make_optimizer("adamw", w, lr=0.1).defaults["weight_decay"] == reference > 0
    assert make_optimizer("adam", w, lr=0.1).defaults["weight_decay"] == 0
    assert make_optimizer("adamw", w, lr=0.1, weight_decay=0.0).defaults["weight_decay"] == 0
