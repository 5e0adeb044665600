# Mirrors: pytorch/examples, regression/main.py, snapshot at commit 77f55b912142 (2025-08-25); the file last
# changed in a4b0aba (2020-05-28).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: a random degree-4 polynomial to fit with one linear layer on the features x, x^2, x^3, x^4; no optimizer
# and no DataLoader: each step draws 32 fresh points, zeroes the gradients with the layer's zero_grad(), reads the
# smooth-L1 loss with .item(), backwards and moves each parameter's data by -0.1 times its gradient, until the
# loss is below 1e-3. Shrunk: at most 300 steps (the stop test also ends at step 300).
# Added: `with watch(layer):` around the steps.
import itertools

import torch
from torch.nn import functional as F

DEGREE = 4


def powers(t: torch.Tensor) -> torch.Tensor:
    """One row per value: t, t^2, ..., t^DEGREE."""
    return torch.stack([t ** k for k in range(1, DEGREE + 1)], dim=1)


def main(watch):
    torch.manual_seed(0)
    true_w = torch.randn(DEGREE, 1) * 5
    true_b = torch.randn(1) * 5

    def fresh_points(n=32):
        feats = powers(torch.randn(n))
        return feats, feats @ true_w + true_b.item()

    layer = torch.nn.Linear(DEGREE, 1)
    with watch(layer):
        for step in itertools.count(1):
            feats, y = fresh_points()
            layer.zero_grad()
            err = F.smooth_l1_loss(layer(feats), y)
            err_value = err.item()
            err.backward()
            for w in layer.parameters():
                w.data.add_(-0.1 * w.grad)
            if err_value < 1e-3 or step == 300:
                break
    print(f"smooth-L1 {err_value:.6f} after {step} steps")
    return [layer]


from tests.doctor_published import variant  # noqa: E402

VARIANTS = [
    variant("no_zero_grad", "missing_zero_grad", ("            layer.zero_grad()\n", "")),
    variant("losses_kept_for_a_plot", "graph_attached_logging",
            ("    with watch(layer):\n", "    curve = []\n    with watch(layer):\n"),
            ("            err.backward()\n", "            err.backward()\n            curve.append(err)\n")),
]
