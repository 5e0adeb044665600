"""Chapter 3: gradients that backward() alone does not give. Per-example gradients with torch.func (vmap over grad),
what BatchNorm does under vmap and jacrev, and MAML's meta-gradient with and without create_graph."""
from __future__ import annotations

import torch
from torch import nn


def per_sample_gradient_lines(batch: int = 10) -> list[str]:
    """Per-example gradients with torch.func (what differential-privacy and data-attribution tools need): vmap runs
    the loss of ONE example per call, so inside it the batch dimension is gone; the results equal a Python loop
    over the examples, and their mean is the batch's gradient. A forward written for a batch (indexing dim 1 as
    features) breaks under vmap; indexing from the end works both ways. A gradient hook on an activation already
    sees one row per example; a parameter's .grad is the sum over the batch."""
    from torch.func import functional_call, grad, vmap
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 1))
    params = {k: v.detach() for k, v in model.named_parameters()}
    x, y = torch.randn(batch, 4), torch.randn(batch, 1)
    seen: list[tuple[int, ...]] = []

    def loss_one(p, xi, yi, shift):
        h = functional_call(model, p, (xi,))
        seen.append(tuple(h.shape))
        h = shift(h)
        return nn.functional.mse_loss(h, yi)

    def batch_indexing(h):
        h = h.clone()
        h[:, 0] += 3                # written for a (batch, features) tensor
        return h

    def end_indexing(h):
        h = h.clone()
        h[..., 0] += 3              # the feature dimension counted from the end: any batch shape
        return h

    per_sample = vmap(grad(loss_one), in_dims=(None, 0, 0, None))(params, x, y, end_indexing)
    loop = [grad(loss_one)(params, x[i], y[i], end_indexing) for i in range(batch)]
    same = all(torch.allclose(per_sample[k][i], loop[i][k], atol=1e-6) for k in params for i in range(batch))
    model.zero_grad()
    nn.functional.mse_loss(end_indexing(model(x)), y).backward()
    mean_is_batch = torch.allclose(per_sample["0.weight"].mean(0), model[0].weight.grad, atol=1e-6)
    lines = [f"inside vmap the model's output has shape {seen[0]} (one example), outside {tuple(model(x).shape)}",
             f"vmap(grad(loss)) over {batch} examples: '0.weight' gradients of shape "
             f"{tuple(per_sample['0.weight'].shape)}; equal to a loop over the examples: {same}; their mean is the "
             f"batch's .grad: {mean_is_batch}"]
    try:
        vmap(grad(loss_one), in_dims=(None, 0, 0, None))(params, x, y, batch_indexing)
        lines.append("h[:, 0] += 3 inside vmap: ran")
    except IndexError as error:
        lines.append(f"h[:, 0] += 3 inside vmap: IndexError: {error}")
    rows: list[tuple[int, ...]] = []
    hidden = model[0](x)
    hidden.register_hook(lambda g: rows.append(tuple(g.shape)))
    nn.functional.mse_loss(model[2](model[1](hidden)), y).backward()
    lines.append(f"a gradient hook on the hidden activation sees shape {rows[0]} (a row per example); "
                 f"model[0].weight.grad has shape {tuple(model[0].weight.grad.shape)} (summed over the batch)")
    return lines


def meta_gradient_lines(a: float = 1.0, b: float = 3.0, alpha: float = 0.1, w0: float = 0.5) -> list[str]:
    """MAML's meta-gradient on one weight: an inner step w' = w - alpha * dL_train/dw with L_train = (w - a)^2, then
    L_val(w') = (w' - b)^2 differentiated with respect to w. torch.autograd.grad without create_graph returns the
    inner gradient as a constant: the first-order meta-gradient. With create_graph=True autograd differentiates
    through it: the second-order one. Both against the hand-derived values."""
    grads = {}
    for create_graph in (False, True):
        w = torch.tensor(w0, requires_grad=True)
        (inner,) = torch.autograd.grad((w - a) ** 2, w, create_graph=create_graph)
        ((w - alpha * inner - b) ** 2).backward()
        grads[create_graph] = w.grad.item()
    adapted = w0 - alpha * 2 * (w0 - a)
    first, second = 2 * (adapted - b), 2 * (adapted - b) * (1 - 2 * alpha)
    return [f"inner step w' = w - {alpha}·2(w - {a}) from w = {w0}; meta-gradient d(w' - {b})²/dw:",
            f"  autograd.grad(..., create_graph=False): {grads[False]:.4f}; first-order by hand, 2(w' - b): {first:.4f}",
            f"  autograd.grad(..., create_graph=True):  {grads[True]:.4f}; second-order by hand, 2(w' - b)(1 - 2·{alpha}): "
            f"{second:.4f}"]


def vmap_batchnorm_lines() -> list[str]:
    """Per-example gradients (torch.func) of a model with BatchNorm: in train mode BatchNorm updates its running
    statistics in place, which a function transform refuses; in eval mode it applies stored statistics, and works,
    once the one example vmap hands over is given back a batch dimension of 1 (BatchNorm1d checks its input's
    dimensions). torch's own messages."""
    from torch.func import functional_call, grad, vmap
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 5), nn.BatchNorm1d(5), nn.Linear(5, 1))
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = dict(model.named_buffers())
    x, y = torch.randn(8, 4), torch.randn(8, 1)

    def loss_one(p, xi, yi, batch_of_one):
        if batch_of_one:
            xi, yi = xi.unsqueeze(0), yi.unsqueeze(0)
        return nn.functional.mse_loss(functional_call(model, (p, buffers), (xi,)), yi)

    lines = []
    for mode, batch_of_one in (("train", True), ("eval", False), ("eval", True)):
        model.train(mode == "train")
        label = f"{mode} mode, {'x.unsqueeze(0)' if batch_of_one else 'x as vmap hands it'}"
        try:
            out = vmap(grad(loss_one), in_dims=(None, 0, 0, None))(params, x, y, batch_of_one)
            lines.append(f"{label:<32}: per-example gradients of shape {tuple(out['0.weight'].shape)}")
        except (RuntimeError, ValueError) as error:
            lines.append(f"{label:<32}: {type(error).__name__}: {str(error).split('. ')[0]}")
    conv = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2)).eval()
    try:
        vmap(torch.func.jacrev(conv))(torch.randn(4, 1, 5, 5))
        lines.append("Conv2d + BatchNorm2d, eval, jacrev under vmap: ran")
    except ValueError as error:
        lines.append(f"Conv2d + BatchNorm2d, eval, jacrev under vmap: ValueError: {error}")
    return lines


def maml_steps_lines(a: float = 1.0, b: float = 3.0, alpha: float = 0.1, w0: float = 0.5) -> list[str]:
    """K inner steps with create_graph=True on the same one-weight problem: the meta-gradient is 2(w_K - b)(1 -
    2·alpha)^K, a product of K first derivatives of the inner steps (second derivatives of the inner loss), not a
    K-th derivative; the graph kept grows with K (tensors autograd saves for backward, counted on a small MLP).
    Then the inner loop of a published MAML with an extra `loss.backward(retain_graph=True)` before its
    autograd.grad: the inner loss's gradient is added into the original weight's .grad, beside the meta-gradient."""
    lines = []
    for k in (1, 2, 3):
        w = torch.tensor(w0, requires_grad=True)
        fast = w
        for _ in range(k):
            (g,) = torch.autograd.grad((fast - a) ** 2, fast, create_graph=True)
            fast = fast - alpha * g
        ((fast - b) ** 2).backward()
        by_hand = 2 * ((1 - 2 * alpha) ** k * (w0 - a) + a - b) * (1 - 2 * alpha) ** k
        lines.append(f"{k} inner step{'s' if k > 1 else ' '} (create_graph=True): meta-gradient {w.grad.item():.4f}; "
                     f"by hand 2(w_K - b)(1 - 2·{alpha})^{k}: {by_hand:.4f}")
    saved = {}
    for k in (1, 2, 4):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
        x, y = torch.randn(8, 4), torch.randn(8, 1)
        storages = {}

        def pack(t, storages=storages):
            storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes() // t.element_size()
            return t
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            params = dict(model.named_parameters())
            for _ in range(k):
                loss = nn.functional.mse_loss(torch.func.functional_call(model, params, (x,)), y)
                grads = torch.autograd.grad(loss, list(params.values()), create_graph=True)
                params = {n: p - 0.1 * g for (n, p), g in zip(params.items(), grads)}
            nn.functional.mse_loss(torch.func.functional_call(model, params, (x,)), y)
        saved[k] = sum(storages.values())
    lines.append(f"elements saved for backward (each storage once), MLP 4-16-1, K = 1, 2, 4 inner steps: {saved[1]:,}, "
                 f"{saved[2]:,}, "
                 f"{saved[4]:,}; each step adds the same: {saved[2] - saved[1] == (saved[4] - saved[2]) / 2}")
    w = torch.tensor(w0, requires_grad=True)
    inner_loss = (w - a) ** 2
    inner_loss.backward(retain_graph=True)                 # the extra call
    (g,) = torch.autograd.grad(inner_loss, w, create_graph=True)
    ((w - alpha * g - b) ** 2).backward()
    meta = 2 * ((1 - 2 * alpha) * (w0 - a) + a - b) * (1 - 2 * alpha)
    lines.append(f"with loss.backward(retain_graph=True) before autograd.grad: w.grad {w.grad.item():.4f} = the "
                 f"meta-gradient {meta:.4f} + the inner loss's gradient {2 * (w0 - a):.4f}: "
                 f"{abs(w.grad.item() - meta - 2 * (w0 - a)) < 1e-5}")
    return lines


def copied_start_lines(w0: float = 0.5, lr: float = 0.1) -> list[str]:
    """One SGD inner step on a 1x1 linear layer (no bias) on (w - 1)² (0.5 to 0.6 at the defaults), then an outer
    loss of the fast weight: where the meta-gradient lands. Fast weights started from a copy (what
    `higher.innerloop_ctx` does by default, copy_initial_weights=True) are a leaf of their own, so model.weight.grad
    stays None; started from the model's own parameter (functional_call on it, or copy_initial_weights=False) the
    meta-gradient reaches it, 2(w_1 - 1)(1 - 2·lr) with create_graph=True, 2(w_1 - 1) without (first order)."""
    from torch.func import functional_call
    x, y = torch.ones(1, 1), torch.ones(1, 1)
    lines = []
    for start, second_order in (("a copy", True), ("the parameter itself", True), ("the parameter itself", False)):
        model = nn.Linear(1, 1, bias=False)
        with torch.no_grad():
            model.weight.fill_(w0)
        weight = model.weight.detach().clone().requires_grad_() if start == "a copy" else model.weight
        inner = nn.functional.mse_loss(functional_call(model, {"weight": weight}, (x,)), y)
        (g,) = torch.autograd.grad(inner, weight, create_graph=second_order)
        fast = weight - lr * g
        nn.functional.mse_loss(functional_call(model, {"weight": fast}, (x,)), y).backward()
        got = "None" if model.weight.grad is None else f"{model.weight.grad.item():.4f}"
        on_copy = f"; the copy's .grad {weight.grad.item():.4f}" if weight is not model.weight else ""
        lines.append(f"started from {start} (create_graph={second_order}): fast weight {fast.item():.2f}, "
                     f"model.weight.grad {got}{on_copy}")
    w1 = w0 - lr * 2 * (w0 - 1.0)
    lines.append(f"by hand: 2(w_1 - 1)(1 - 2·{lr}) = {2 * (w1 - 1) * (1 - 2 * lr):.4f}; first order 2(w_1 - 1) = "
                 f"{2 * (w1 - 1):.4f}")
    return lines



class _MetaNet(nn.Module):
    """head(body(x)): a dummy loss on the body's output reaches the body's parameters and not the head's."""

    def __init__(self):
        super().__init__()
        self.body, self.head = nn.Linear(3, 2), nn.Linear(2, 1)

    def forward(self, x):
        return self.head(self.body(x))


def _meta_gradients(model: nn.Module, tasks: int = 2, lr: float = 0.1) -> dict[str, torch.Tensor]:
    """Meta-gradients of `tasks` random regression tasks (one SGD inner step each, first order), summed per
    parameter; autograd.grad only, so nothing lands in .grad."""
    from torch.func import functional_call
    g = torch.Generator().manual_seed(1)
    params = dict(model.named_parameters())
    total = {name: torch.zeros_like(p) for name, p in params.items()}
    for _ in range(tasks):
        x, y = torch.randn(8, 3, generator=g), torch.randn(8, 1, generator=g)
        inner = nn.functional.mse_loss(functional_call(model, params, (x,)), y)
        fast = {n: p - lr * d for (n, p), d in zip(params.items(), torch.autograd.grad(inner, list(params.values())))}
        outer = nn.functional.mse_loss(functional_call(model, fast, (x,)), y)
        for name, d in zip(params, torch.autograd.grad(outer, list(params.values()))):
            total[name] += d
    return total


def hook_injection_lines(optimizer: str = "Adam") -> list[str]:
    """A published MAML's meta-update (pytorch-maml's): meta-gradients collected per task, then a tensor hook on
    every parameter returning its meta-gradient, zero_grad, a dummy loss's backward and a step; against setting
    .grad directly. The dummy loss here reads the body's output only, as a dummy pass that misses a branch would."""
    import copy
    torch.manual_seed(0)
    model = _MetaNet()
    meta = _meta_gradients(model)
    untouched = all(p.grad is None for p in model.parameters())
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(2))
    stale, direct = copy.deepcopy(model), copy.deepcopy(model)

    def dummy_pass(net: nn.Module, zero: bool) -> dict[str, int]:
        calls = dict.fromkeys(meta, 0)

        def returning(name):
            def hook(grad):
                calls[name] += 1
                return meta[name]
            return hook
        handles = [p.register_hook(returning(n)) for n, p in net.named_parameters()]
        if zero:
            net.zero_grad()
        net.body(x).sum().backward()                 # the dummy loss: its value and gradient are never used
        for handle in handles:
            handle.remove()
        return calls

    own = torch.autograd.grad(model.body(x).sum(), list(model.body.parameters()))
    calls = dummy_pass(model, zero=True)
    body = list(model.body.named_parameters())
    exact = all(torch.equal(p.grad, meta[f"body.{n}"]) for n, p in body)
    replaced = not any(torch.equal(d, meta[f"body.{n}"]) for d, (n, _) in zip(own, body))
    earlier = torch.autograd.grad(stale.body(x).pow(2).mean(), list(stale.body.parameters()))
    stale.body(x).pow(2).mean().backward()            # an earlier backward, never zeroed
    dummy_pass(stale, zero=False)
    added = all(torch.equal(p.grad, e + meta[f"body.{n}"]) for e, (n, p) in zip(earlier, stale.body.named_parameters()))

    for name, p in direct.named_parameters():
        p.grad = meta[name].clone()
    start = copy.deepcopy(model)
    for net in (model, direct):
        getattr(torch.optim, optimizer)(net.parameters(), lr=0.01).step()
    same_body = all(torch.equal(a, b) for a, b in zip(model.body.parameters(), direct.body.parameters()))
    head_still = all(torch.equal(a, b) for a, b in zip(model.head.parameters(), start.head.parameters()))
    head_moved = not any(torch.equal(a, b) for a, b in zip(direct.head.parameters(), start.head.parameters()))
    head_meta = all(bool(meta[f"head.{n}"].abs().sum() > 0) for n, _ in model.head.named_parameters())
    return [f"meta-gradients of 2 tasks from autograd.grad: every .grad still None: {untouched}",
            f"a hook returning each, zero_grad, then a dummy loss's backward: the body's .grad equals its meta-gradient "
            f"exactly: {exact} (the dummy loss's own gradient differs: {replaced}: the hook's return value replaces "
            f"it before it is added to .grad)",
            f"the same without zero_grad, after an earlier backward: .grad = that gradient + the meta-gradient: {added}",
            f"the head, which the dummy loss does not reach: its hooks ran {calls['head.weight'] + calls['head.bias']} "
            f"times, .grad {model.head.weight.grad}, its meta-gradient non-zero: {head_meta}; {optimizer} left it "
            f"unchanged: {head_still}",
            f"setting p.grad = meta-gradient instead, no hooks, no dummy pass: the body's step identical: {same_body}; "
            f"the head moved: {head_moved}"]
