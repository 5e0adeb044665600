"""Chapter 3: what a learner adds to autograd. A custom ``torch.autograd.Function`` (a straight-through sign, the
binarizer of quantised and compression models) must return one gradient per forward input; a gradient hook
(``Tensor.register_hook``) edits a gradient on its way to ``.grad`` and exists only for tensors that require grad;
a forward hook runs on every call, ``no_grad`` or not, so a hook that keeps activations in train mode (as
per-example-gradient tools do) keeps them during a no_grad evaluation too."""
from __future__ import annotations

import warnings

import torch
from torch import nn


class SignSTE(torch.autograd.Function):
    """sign() forward; backward passes the gradient straight through (its true derivative is 0 almost everywhere)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, training: bool) -> torch.Tensor:
        return x.sign()

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        return grad_output, None        # one value per forward input: None for the flag


class SignSTEShort(SignSTE):
    """The same with backward returning one value for two inputs."""

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        return grad_output


class SignSTELong(SignSTE):
    """The same with backward returning a third value, None, for an input forward does not have."""

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        return grad_output, None, None


class SignSTEExtra(SignSTE):
    """The same with a third value that is not None."""

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        return grad_output, None, grad_output


class GradReverse(torch.autograd.Function):
    """A gradient reversal layer (domain-adversarial training): the identity forward, the gradient times -scale
    backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.scale = scale
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        return -ctx.scale * grad_output, None


class GradReverseSame(GradReverse):
    """The same, forward returning its input itself rather than x.view_as(x)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.scale = scale
        return x


class ReverseModule(nn.Module):
    """The same idea written as a Module with a `backward` method: autograd never calls it (it differentiates what
    forward did, and forward returned x unchanged)."""

    def __init__(self) -> None:
        super().__init__()
        self.backward_calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def backward(self, grad_output: torch.Tensor) -> torch.Tensor:
        self.backward_calls += 1
        return -grad_output


def _layer_grads(middle) -> tuple[list[float], list[float]]:
    """Linear(2, 1) -> middle -> Linear(1, 1), one backward of the output: the first and the last layer's weight
    gradients."""
    torch.manual_seed(0)
    first, last = nn.Linear(2, 1), nn.Linear(1, 1)
    last(middle(first(torch.ones(1, 2)))).sum().backward()
    return ([round(g, 4) for g in first.weight.grad.flatten().tolist()],
            [round(g, 4) for g in last.weight.grad.flatten().tolist()])


def custom_function_lines() -> list[str]:
    x = torch.tensor([-1.5, -0.2, 0.3, 2.0], requires_grad=True)
    x.sign().sum().backward()
    true_grad = x.grad.tolist()
    x.grad = None
    SignSTE.apply(x, True).sum().backward()
    lines = [f"torch.sign's own gradient: {true_grad} (nothing would train through it)",
             f"SignSTE (straight through), backward returns (grad_output, None): x.grad = {x.grad.tolist()}"]
    try:
        SignSTEShort.apply(x, True).sum().backward()
    except RuntimeError as error:
        lines.append(f"backward returning grad_output alone: RuntimeError: {error}")
    x.grad = None
    SignSTELong.apply(x, True).sum().backward()
    lines.append(f"backward returning (grad_output, None, None), one value too many: accepted, x.grad = "
                 f"{x.grad.tolist()} (torch drops extra values that are None)")
    try:
        SignSTEExtra.apply(x, True).sum().backward()
    except RuntimeError as error:
        lines.append(f"backward returning (grad_output, None, grad_output): RuntimeError: {error}")
    plain, plain_after = _layer_grads(lambda h: h)
    reversed_, reversed_after = _layer_grads(lambda h: GradReverse.apply(h, 1.0))
    module = ReverseModule()
    as_module, _ = _layer_grads(module)
    lines.append(f"first layer's weight.grad, Linear -> identity -> Linear: {plain}")
    lines.append(f"the same through GradReverse (a Function): {reversed_} (reversed: {reversed_ == [-g for g in plain]})")
    lines.append(f"the same through a Module with a backward() method: {as_module}, that method called "
                 f"{module.backward_calls} times (reversed: {as_module == [-g for g in plain]})")
    same, _ = _layer_grads(lambda h: GradReverseSame.apply(h, 1.0))
    lines.append(f"GradReverse whose forward returns x itself, not x.view_as(x): {same} (reversed: "
                 f"{same == [-g for g in plain]})")
    lines.append(f"the layer after the reversal (a domain classifier): weight.grad {plain_after} without it, "
                 f"{reversed_after} with it")
    return lines


def _pruned_run(hooked: bool) -> tuple[nn.Sequential, torch.Tensor, torch.Tensor]:
    """Layer 0 of a small model pruned to every other weight, trained 5 SGD steps with its head frozen; with
    `hooked`, a gradient hook masks the pruned weights' gradients. (model, mask, layer 0's weights at the start)"""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    mask = (torch.arange(16).reshape(4, 4) % 2 == 0).float()
    with torch.no_grad():
        model[0].weight.mul_(mask)
    start = model[0].weight.detach().clone()
    if hooked:
        model[0].weight.register_hook(lambda grad: grad * mask)
    model[2].requires_grad_(False)
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    for _ in range(5):
        optimizer.zero_grad()
        model(torch.randn(8, 4)).pow(2).mean().backward()
        optimizer.step()
    return model, mask, start


def hook_lines() -> list[str]:
    lines = []
    for hooked in (False, True):
        model, mask, start = _pruned_run(hooked)
        weight = model[0].weight.detach()
        lines.append(f"{'with a gradient hook masking' if hooked else 'without a hook on':28} layer 0, 5 SGD steps: "
                     f"pruned weights still 0: {int((weight[mask == 0] == 0).sum())} of {int((mask == 0).sum())}; "
                     f"kept weights that moved: {int((weight[mask == 1] != start[mask == 1]).sum())} of "
                     f"{int(mask.sum())}")
    try:
        model[2].weight.register_hook(lambda grad: grad)
    except RuntimeError as error:
        lines.append(f"register_hook on the frozen head's weight: RuntimeError: {error}")
    return lines


def forward_hook_lines(batches: int = 5) -> list[str]:
    """A forward hook that keeps each layer's input while the module is in train mode, as a per-example-gradient
    tool does, and an evaluation under no_grad in each mode."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2))
    kept: list[torch.Tensor] = []

    def keep_input(module, inputs, output):
        if module.training:
            kept.append(inputs[0])

    for layer in (model[0], model[2]):
        layer.register_forward_hook(keep_input)
    lines = []
    for mode in ("train", "eval"):
        kept.clear()
        model.train(mode == "train")
        with torch.no_grad():
            for _ in range(batches):
                model(torch.randn(256, 64))
        lines.append(f"no_grad evaluation of {batches} batches in {mode} mode: the hook kept {len(kept)} tensors, "
                     f"{sum(t.numel() * t.element_size() for t in kept) // 1024} KiB")
    return lines


def _library_setup() -> None:
    """What some inference helpers do when they are imported or loaded: switch grad mode off for the process
    (the thread), not inside a `with` block."""
    torch.set_grad_enabled(False)


def grad_mode_leak_lines() -> list[str]:
    """Grad mode is a setting of the thread, not of a model: a library that turns it off leaves it off for the
    training code that runs after it; `with torch.enable_grad():` (or set_grad_enabled(True)) turns it back on."""
    was = torch.is_grad_enabled()
    lines = []
    try:
        torch.manual_seed(0)
        model, x, y = nn.Linear(3, 1), torch.randn(8, 3), torch.randn(8, 1)
        lines.append(f"grad mode before loading the helper: {torch.is_grad_enabled()}")
        _library_setup()
        lines.append(f"after: {torch.is_grad_enabled()}; the model's weight still requires grad: "
                     f"{model.weight.requires_grad}")
        try:
            nn.functional.mse_loss(model(x), y).backward()
        except RuntimeError as error:
            lines.append(f"the training step's backward: RuntimeError: {error}")
        with torch.enable_grad():
            nn.functional.mse_loss(model(x), y).backward()
        lines.append(f"the same step under `with torch.enable_grad():`: weight.grad filled: {model.weight.grad is not None}")
    finally:
        torch.set_grad_enabled(was)
    return lines


def _grad_after(make_loss, *values: list[float]) -> tuple[float, list[list[float]]]:
    """(the loss, each input's .grad as a list) for a loss built from fresh leaves holding `values`."""
    leaves = [torch.tensor(v, requires_grad=True) for v in values]
    loss = make_loss(*leaves)
    loss.backward()
    return loss.item(), [leaf.grad.tolist() for leaf in leaves]


def _nan_maker(make_loss, *values: list[float]) -> str:
    """The backward function anomaly mode names for the first NaN of this loss's backward."""
    import re
    import warnings
    leaves = [torch.tensor(v, requires_grad=True) for v in values]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")           # anomaly mode warns that it is on, and warns the forward's trace
        with torch.autograd.detect_anomaly(check_nan=True):
            try:
                make_loss(*leaves).backward()
            except RuntimeError as error:
                found = re.search(r"Function '(\w+)' returned nan", str(error))
                return found.group(1) if found else "another error"
    return "nothing (no NaN)"


def masked_nan_lines() -> list[str]:
    """A value masked out of the forward still takes part in the backward: the mask sends it a gradient of 0, and
    0 times its infinite derivative is NaN. torch.where, boolean indexing and a division masked afterwards all do
    it; masking the INPUT (so the hidden branch computes something finite) is the fix."""
    def sqrt_where(x):
        return torch.where(x > 0, x.sqrt(), torch.zeros_like(x)).sum()

    def sqrt_where_safe(x):
        safe = torch.where(x > 0, x, torch.ones_like(x))           # the masked branch never sees 0
        return torch.where(x > 0, safe.sqrt(), torch.zeros_like(x)).sum()

    def ratio_indexed(a, b):
        return (a / b)[b != 0].sum()

    def ratio_indexed_safe(a, b):
        return (a / torch.where(b != 0, b, torch.ones_like(b)))[b != 0].sum()

    x, a, b = [0.0, 4.0], [1.0, 1.0], [0.0, 2.0]
    lines = []
    for label, loss_fn, values in [
            ("torch.where(x > 0, x.sqrt(), 0), x = [0, 4]", sqrt_where, (x,)),
            ("(a / b)[b != 0], a = [1, 1], b = [0, 2]", ratio_indexed, (a, b)),
            ("fixed: sqrt of torch.where(x > 0, x, 1), then the same where", sqrt_where_safe, (x,)),
            ("fixed: a / torch.where(b != 0, b, 1), then the same index", ratio_indexed_safe, (a, b))]:
        loss, grads = _grad_after(loss_fn, *values)
        shown = " | ".join(f"{name}.grad {g}" for name, g in zip(("x",) if len(values) == 1 else ("a", "b"), grads))
        lines.append(f"{label:<62} loss {loss:g} (finite) | {shown}")
    lines.append(f"anomaly mode (check_nan=True) on the first: the NaN is made by {_nan_maker(sqrt_where, x)}, "
                 "a backward whose forward was finite")
    logits = torch.zeros(3, 4, requires_grad=True)
    loss = nn.functional.cross_entropy(logits, torch.full((3,), -100))      # every target ignored
    loss.backward()
    lines.append(f"cross_entropy with every target = ignore_index (-100): loss {loss.item()} (0 over 0 targets), "
                 f"logits.grad all zero: {bool((logits.grad == 0).all())}")
    return lines


def unreached_parameter_lines() -> list[str]:
    """A parameter the forward uses but autograd cannot reach gets no .grad (and DDP reports it as unused): read
    through .data or .detach(), under no_grad, or through NumPy. One Linear's weight used four ways, each beside a
    bias that is reached normally."""
    import numpy as np

    def through(name: str, use) -> str:
        torch.manual_seed(0)
        layer = nn.Linear(3, 2)
        x = torch.randn(4, 3)
        (use(layer, x) + layer.bias).sum().backward()
        return (f"weight used {name:<42} weight.grad is None: {layer.weight.grad is None}; "
                f"bias.grad is None: {layer.bias.grad is None}")

    def numpy_path(layer, x):
        return torch.from_numpy(x.numpy() @ layer.weight.detach().numpy().T)

    def no_grad_path(layer, x):
        with torch.no_grad():
            return x @ layer.weight.T

    return [through("normally, x @ weight.T", lambda layer, x: x @ layer.weight.T),
            through("as weight.data", lambda layer, x: x @ layer.weight.data.T),
            through("as weight.detach()", lambda layer, x: x @ layer.weight.detach().T),
            through("inside torch.no_grad()", no_grad_path),
            through("through NumPy (weight.detach().numpy())", numpy_path)]


def gradient_penalty_lines(batch: int = 8) -> list[str]:
    """WGAN-GP's gradient penalty on images: the gradient of the critic's output with respect to a (B, 1, H, W)
    input. Its norm over dim=1, the channel dimension of size 1, is the absolute value of each pixel's gradient,
    one number per pixel; the Lipschitz penalty wants one norm per sample, over the flattened gradient."""
    torch.manual_seed(0)
    critic = nn.Sequential(nn.Flatten(), nn.Linear(32 * 32, 1))
    x = torch.randn(batch, 1, 32, 32, requires_grad=True)
    g, = torch.autograd.grad(critic(x).sum(), x, create_graph=True)
    per_pixel = g.norm(2, dim=1)
    per_sample = g.flatten(1).norm(2, dim=1)
    return [f"gradient shape {tuple(g.shape)}",
            f"gradients.norm(2, dim=1): shape {tuple(per_pixel.shape)}, equal to |gradient| pixel by pixel: "
            f"{torch.allclose(per_pixel, g.abs().squeeze(1))}",
            f"gradients.flatten(1).norm(2, dim=1): shape {tuple(per_sample.shape)}, one norm per sample",
            f"the two penalties ((norm - 1) ** 2).mean() are equal: "
            f"{torch.allclose(((per_pixel - 1) ** 2).mean(), ((per_sample - 1) ** 2).mean())}"]


def fractional_power_lines() -> list[str]:
    """A focal loss, (1 - p)^gamma * CE with p = exp(-CE), on a batch holding one example the model already gets
    right with full confidence (its CE rounds to 0, so 1 - p is exactly 0). The forward is finite either way;
    the derivative of x^gamma at 0 is infinite for gamma < 1, and the chain rule multiplies it by 0: NaN. A base
    that rounding makes slightly negative is NaN in the forward too. Clamping the base away from 0 is the fix."""
    def focal(logits: torch.Tensor, gamma: float, clamp: bool) -> torch.Tensor:
        ce = nn.functional.cross_entropy(logits, torch.tensor([0, 1]), reduction="none")
        base = 1 - torch.exp(-ce)
        return ((base.clamp(min=1e-6) if clamp else base) ** gamma * ce).mean()

    lines = []
    for gamma, clamp in ((0.5, False), (2.0, False), (0.5, True)):
        logits = torch.tensor([[30.0, 0.0], [0.5, 0.2]], requires_grad=True)
        loss = focal(logits, gamma, clamp)
        loss.backward()
        how = "(1 - p).clamp(min=1e-6)" if clamp else "(1 - p)"
        lines.append(f"gamma {gamma}, {how:<23}: loss finite: {bool(loss.isfinite())}; NaN in logits.grad: "
                     f"{bool(logits.grad.isnan().any())}")
    zero = torch.zeros(1, requires_grad=True)
    (zero ** 0.5).backward()
    lines.append(f"d/dx x**0.5 at x = 0: {zero.grad.item()}; (-1e-7) ** 0.5 = {(torch.tensor(-1e-7) ** 0.5).item()}, "
                 f"(-1e-7) ** 2 = {(torch.tensor(-1e-7) ** 2).item():.0e}")
    return lines


def sparse_sparse_lines(n: int = 6) -> list[str]:
    """A learnable sparse adjacency times a learnable sparse feature matrix (a GCN layer with both sparse) through
    torch.sparse.mm: its backward, the gradients' layout, and their values against the dense product's gradient at
    the stored entries; and an operation torch has no derivative for (torch.hspmm): its node, and backward's error
    (chapter 3). Warnings (sparse support in beta) are kept out of the output."""
    g = torch.Generator().manual_seed(0)
    dense_a = torch.randn(n, n, generator=g) * (torch.rand(n, n, generator=g) < 0.4)
    dense_b = torch.randn(n, 3, generator=g) * (torch.rand(n, 3, generator=g) < 0.5)
    a, b = dense_a.to_sparse().requires_grad_(), dense_b.to_sparse().requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = torch.sparse.mm(a, b)
        out.to_dense().pow(2).sum().backward()
    ref_a, ref_b = dense_a.clone().requires_grad_(), dense_b.clone().requires_grad_()
    (ref_a @ ref_b).pow(2).sum().backward()
    mask_a, mask_b = dense_a != 0, dense_b != 0
    same = (torch.allclose(a.grad.to_dense()[mask_a], ref_a.grad[mask_a], atol=1e-5)
            and torch.allclose(b.grad.to_dense()[mask_b], ref_b.grad[mask_b], atol=1e-5))
    lacking = torch.hspmm(a.detach().requires_grad_(), dense_b.requires_grad_())     # an op with no derivative
    try:
        lacking.to_dense().sum().backward()
        failed = "ran"
    except RuntimeError as error:
        failed = f"RuntimeError: {error}"
    return [f"torch.sparse.mm(sparse, sparse): output sparse {out.is_sparse}, grad_fn {type(out.grad_fn).__name__}",
            f"gradients: both sparse {a.grad.is_sparse and b.grad.is_sparse}; equal to the dense product's gradient at "
            f"the stored entries: {same}; zero elsewhere: "
            f"{bool((a.grad.to_dense()[~mask_a] == 0).all() and (b.grad.to_dense()[~mask_b] == 0).all())}",
            f"torch.hspmm(sparse, dense), which has no derivative: grad_fn {type(lacking.grad_fn).__name__}, "
            f"requires_grad {lacking.requires_grad}; backward: {failed}"]
