"""A Module's training state and autograd's modes, each checked on a tiny model (chapter 3).

``module_state`` covers what a checkpoint holds and what an optimizer sees: buffers that are not saved,
``load_state_dict``'s strict and assign, frozen weights, tied weights counted once, ``apply``, ``train(False)``
and ``state_dict(keep_vars)``. ``autograd_modes`` covers no_grad, inference_mode, set_grad_enabled,
enable_grad, anomaly detection naming the backward op that made a NaN, and backward's arguments. Every result
is a boolean, a count, a list of names or an exception's type name: the same on any CPU.
"""
from __future__ import annotations

import warnings
from collections import OrderedDict

import torch
from torch import nn


class _Masked(nn.Module):
    """Linear(3, 2) times a fixed mask kept as a buffer: `persistent` says whether state_dict saves it."""

    def __init__(self, persistent: bool, mask_value: float = 1.0) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.register_buffer("mask", torch.full((2,), mask_value), persistent=persistent)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) * self.mask


class _Tied(nn.Module):
    """An embedding and an output layer sharing one weight matrix (a language model's usual tie)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(5, 4)
        self.out = nn.Linear(4, 5, bias=False)
        self.out.weight = self.embed.weight


def _held(model: nn.Module, optimizer: torch.optim.Optimizer) -> int:
    ids = {id(p) for g in optimizer.param_groups for p in g["params"]}
    return sum(id(p) in ids for p in model.parameters())


def _step(model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    optimizer.zero_grad()
    model(torch.ones(4, 3)).pow(2).mean().backward()
    optimizer.step()


def checkpoint_rules() -> dict[str, object]:
    """Buffers, strict=False's report and assign=True's new Parameters (chapter 3)."""
    saved = _Masked(persistent=False, mask_value=0.5)
    fresh = _Masked(persistent=False, mask_value=1.0)
    fresh.load_state_dict(saved.state_dict())
    out: dict[str, object] = {
        "persistent=False: 'mask' in state_dict": "mask" in saved.state_dict(),
        "persistent=False: 'mask' in named_buffers": "mask" in dict(saved.named_buffers()),
        "persistent=True: 'mask' in state_dict": "mask" in _Masked(persistent=True).state_dict(),
        "after loading, the mask is the saved 0.5": bool((fresh.mask == 0.5).all()),
    }
    checkpoint = _Masked(persistent=True).state_dict()
    checkpoint["extra.weight"] = torch.zeros(1)
    del checkpoint["lin.bias"]
    report = _Masked(persistent=True).load_state_dict(checkpoint, strict=False)
    out["strict=False: missing_keys"] = list(report.missing_keys)
    out["strict=False: unexpected_keys"] = list(report.unexpected_keys)
    try:
        _Masked(persistent=True).load_state_dict(checkpoint)
        out["strict=True raises"] = "nothing"
    except RuntimeError as e:
        out["strict=True raises"] = type(e).__name__
    resized = _Masked(persistent=True).state_dict()
    resized["lin.weight"] = torch.zeros(3, 3)      # a tensor of another shape under a key the model has
    try:
        _Masked(persistent=True).load_state_dict(resized, strict=False)
        out["strict=False, a weight of another shape: raises"] = "nothing"
    except RuntimeError as e:
        out["strict=False, a weight of another shape: raises"] = f"{type(e).__name__} (size mismatch: {'size mismatch' in str(e)})"
    for assign in (False, True):
        torch.manual_seed(0)
        model = _Masked(persistent=True)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model.load_state_dict(_Masked(persistent=True).state_dict(), assign=assign)
        before = model.lin.weight.detach().clone()
        _step(model, optimizer)
        out[f"assign={assign}: parameters the optimizer holds"] = f"{_held(model, optimizer)} of 2"
        out[f"assign={assign}: the model's weights moved"] = not torch.equal(before, model.lin.weight)
    return out


def freezing_rules() -> dict[str, bool]:
    """requires_grad_(False) on the first layer, and weight decay on a zero grad against a None one (chapter 3)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    model[0].requires_grad_(requires_grad=False)
    frozen = model[0].weight.detach().clone()
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1, weight_decay=0.1)
    optimizer.zero_grad()
    model(torch.ones(4, 3)).pow(2).mean().backward()
    grad_is_none = model[0].weight.grad is None
    optimizer.step()
    out = {"frozen layer: .grad stays None": grad_is_none,
           "frozen layer: AdamW(weight_decay=0.1) left it unchanged": torch.equal(frozen, model[0].weight),
           "trainable layer: .grad filled": model[2].weight.grad is not None}
    torch.manual_seed(0)                         # the other way round: only the first layer trains
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    model[2].requires_grad_(False)
    model(torch.ones(4, 3)).pow(2).mean().backward()
    out["last layer frozen: the first layer's .grad filled (backward passes through the frozen layer)"] = bool(
        model[0].weight.grad is not None and model[0].weight.grad.abs().sum() > 0)
    out["last layer frozen: its own .grad stays None"] = model[2].weight.grad is None
    hidden = model[1](model[0](torch.ones(4, 3)))
    with torch.no_grad():                        # no_grad around the later layer instead: the graph stops there
        output = model[2](hidden)
    out["last layer run under no_grad instead: its output still leads back to the first layer"] = output.requires_grad
    layer = nn.Linear(3, 1)
    layer.requires_grad = False                  # no underscore: a new attribute of the Module, nothing more
    layer(torch.ones(2, 3)).sum().backward()
    out["module.requires_grad = False (no underscore): its weight still gets a .grad"] = layer.weight.grad is not None
    for name, grad in (("zero", torch.zeros(2)), ("None", None)):
        w = nn.Parameter(torch.ones(2))
        w.grad = grad
        torch.optim.SGD([w], lr=0.1, weight_decay=0.5).step()
        out[f"SGD(weight_decay=0.5): a grad of {name} shrinks the weight"] = bool((w < 1).all())
    return out


def naming_rules() -> dict[str, object]:
    """Tied weights counted once, named_parameters' prefix/recurse, apply, train(False), state_dict's forms."""
    tied = _Tied()
    model = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
    visited = []

    def init(module: nn.Module) -> None:
        visited.append(type(module).__name__)
        if isinstance(module, nn.Linear):
            nn.init.zeros_(module.bias)

    model.apply(init)
    model.train(mode=False)
    as_eval = [m.training for m in model.modules()]
    model.train()
    model.eval()
    destination: OrderedDict = OrderedDict()
    returned = model.state_dict(destination=destination, prefix="net.")
    return {
        "tied: len(list(parameters()))": len(list(tied.parameters())),
        "tied: named_parameters(remove_duplicate=False)": [n for n, _ in tied.named_parameters(remove_duplicate=False)],
        "named_parameters(prefix='net') first name": next(model.named_parameters(prefix="net"))[0],
        "Sequential: named_parameters(recurse=False) count": len(list(model.named_parameters(recurse=False))),
        "apply visited (children first)": visited,
        "every bias zero after apply": all(bool((m.bias == 0).all()) for m in model if isinstance(m, nn.Linear)),
        "train(mode=False) gives eval()'s flags": as_eval == [m.training for m in model.modules()],
        "state_dict(destination=d) returns d itself": returned is destination,
        "state_dict(prefix='net.') keys": list(returned)[:2],
        "state_dict() value type": type(model.state_dict()["0.weight"]).__name__,
        "state_dict(keep_vars=True) value type": type(model.state_dict(keep_vars=True)["0.weight"]).__name__,
        "state_dict() value requires_grad": model.state_dict()["0.weight"].requires_grad,
    }


def _error_type(fn) -> str:
    try:
        fn()
    except Exception as e:      # the type's name is what the cell prints
        return type(e).__name__
    return "nothing"


def autograd_modes() -> dict[str, object]:
    """What each grad mode makes of the same multiply, and where anomaly detection points (chapter 3)."""
    w = torch.ones(2, requires_grad=True)
    out: dict[str, object] = {}
    with torch.no_grad():
        plain = w * 2
    with torch.inference_mode():
        inference = w * 2
    with torch.inference_mode(mode=False):
        out["inference_mode(mode=False): requires_grad"] = (w * 2).requires_grad
    out["no_grad: requires_grad / is_inference"] = (plain.requires_grad, plain.is_inference())
    out["inference_mode: requires_grad / is_inference"] = (inference.requires_grad, inference.is_inference())
    out["no_grad result used in a graph later"] = _error_type(lambda: (w * plain).sum().backward())
    out["inference_mode result multiplied by w (mul must save it for backward): at the multiply"] = _error_type(
        lambda: w * inference)
    out["inference_mode result added to w, then backward (add saves nothing)"] = _error_type(
        lambda: (w + inference).sum().backward())
    torch.set_grad_enabled(False)
    off = w * 2
    torch.set_grad_enabled(True)
    with torch.set_grad_enabled(False):
        with torch.enable_grad():
            inner = w * 2
    out["set_grad_enabled(False): requires_grad"] = off.requires_grad
    out["enable_grad inside set_grad_enabled(False): requires_grad"] = inner.requires_grad
    out.update(_anomaly())
    out.update(_backward_arguments())
    return out


def _nan_backward() -> torch.Tensor:
    """sqrt at 0 times 0: the forward is 0, SqrtBackward0 computes 0 / (2·0) = NaN."""
    x = torch.zeros(1, requires_grad=True)
    (x.sqrt() * 0).sum().backward()
    return x


def _anomaly() -> dict[str, object]:
    out: dict[str, object] = {"no anomaly mode: x.grad is NaN, no error": bool(_nan_backward().grad.isnan().all())}
    with warnings.catch_warnings():      # anomaly mode warns that it is on, and prints the forward's traceback
        warnings.simplefilter("ignore")
        for name, mode in (("detect_anomaly(check_nan=True)", lambda: torch.autograd.detect_anomaly(check_nan=True)),
                           ("set_detect_anomaly(True, check_nan=True)",
                            lambda: torch.autograd.set_detect_anomaly(True, check_nan=True))):
            try:
                with mode():
                    _nan_backward()
                out[name] = "nothing"
            except RuntimeError as e:
                out[name] = f"{type(e).__name__}, names SqrtBackward0: {'SqrtBackward0' in str(e)}"
        with torch.autograd.detect_anomaly(check_nan=False):
            out["detect_anomaly(check_nan=False): x.grad is NaN, no error"] = bool(_nan_backward().grad.isnan().all())
    return out


def _backward_arguments() -> dict[str, object]:
    a = torch.tensor(2.0, requires_grad=True)
    b = torch.tensor(3.0, requires_grad=True)
    (a * b).backward(inputs=[a])
    out: dict[str, object] = {"backward(inputs=[a]): a.grad, b.grad": (a.grad.item(), b.grad)}
    v = torch.tensor([1.0, 2.0], requires_grad=True)
    out["non-scalar .backward()"] = _error_type(lambda: (v * 2).backward())
    (v * 2).backward(gradient=torch.tensor([1.0, 10.0]))
    out["backward(gradient=[1, 10]) on 2·v: v.grad"] = v.grad.tolist()
    x = torch.tensor(2.0, requires_grad=True)
    y = x ** 3
    with warnings.catch_warnings():      # torch warns that .grad now references its own graph (a cycle)
        warnings.simplefilter("ignore")
        y.backward(create_graph=True, retain_graph=True)
    first = x.grad.clone()
    (second,) = torch.autograd.grad(x.grad, x)
    x.grad = None                        # breaks that cycle, as torch's warning asks
    out["x³ at 2, create_graph=True: first, second derivative"] = (first.item(), second.item())
    return out


def teacher_lines(steps: int = 10) -> list[str]:
    """A teacher network in knowledge distillation (chapter 3): in train mode its dropout makes two calls on one
    batch give different soft targets and its BatchNorm statistics move with every student batch; in eval mode
    neither happens. eval() does not stop autograd: without no_grad (or requires_grad_(False)) the student's
    backward also fills the teacher's .grad."""
    def teacher_and_student():
        torch.manual_seed(0)
        teacher = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.5), nn.Linear(16, 3))
        return teacher, nn.Linear(8, 3), torch.randn(32, 8)

    lines = []
    for mode in ("train", "eval"):
        teacher, student, x = teacher_and_student()
        teacher.train(mode == "train")
        with torch.no_grad():
            first, second = teacher(x).softmax(1), teacher(x).softmax(1)
        mean_before = teacher[1].running_mean.clone()
        optimizer = torch.optim.SGD(student.parameters(), lr=0.1)
        for _ in range(steps):
            batch = torch.randn(32, 8)
            with torch.no_grad():
                soft = teacher(batch).softmax(1)
            optimizer.zero_grad()
            nn.functional.kl_div(student(batch).log_softmax(1), soft, reduction="batchmean").backward()
            optimizer.step()
        lines.append(f"teacher in {mode} mode: two calls on one batch give the same soft targets: "
                     f"{torch.equal(first, second)}; its BatchNorm running mean moved during {steps} distillation "
                     f"steps: {not torch.equal(mean_before, teacher[1].running_mean)}")
    for guarded in (False, True):
        teacher, student, x = teacher_and_student()
        teacher.eval()
        if guarded:
            with torch.no_grad():
                soft = teacher(x).softmax(1)
        else:
            soft = teacher(x).softmax(1)
        nn.functional.kl_div(student(x).log_softmax(1), soft, reduction="batchmean").backward()
        lines.append(f"teacher in eval mode, soft targets computed {'under torch.no_grad()' if guarded else 'as they are'}: "
                     f"the student's backward fills the teacher's .grad: {teacher[0].weight.grad is not None}")
    return lines
