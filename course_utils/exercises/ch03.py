"""Exercises of chapter 3: one training step, one Adam step by hand, one SGD step by hand (torch is the oracle)."""
from __future__ import annotations

import copy

import torch
from torch import nn

from course_utils.exercises.core import Attempt, Exercise
from course_utils.exercises.guards import Watch, forbidden, mode_changes, modes
from course_utils.exercises.words import Fail, need_float, need_tensor, need_tuple, pair, values, values_pair
from course_utils.engine.models import MLP


# --- train_step ---------------------------------------------------------------------------------------------

def reference_step(model, inputs, targets, loss_fn, optimizer) -> float:
    """The oracle: one step exactly as chapter 3 orders it."""
    optimizer.zero_grad()
    loss = loss_fn(model(inputs), targets)
    loss.backward()
    optimizer.step()
    return loss.item()


def _weights(model: nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def _close(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return all(torch.allclose(x, y, rtol=1e-5, atol=1e-7) for x, y in zip(a, b))


def _batches(seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(8, 2, generator=g), torch.randint(0, 3, (8,), generator=g)) for _ in range(3)]


def _step_case(attempt: Attempt, name: str, make_optimizer, seed: int, stale: bool = False) -> None:
    torch.manual_seed(seed)
    model = MLP(hidden=16, dropout=0.2, batchnorm=True)
    optimizer = make_optimizer(model.parameters())
    loss_fn = nn.CrossEntropyLoss()
    if stale:            # an earlier backward (a gradient check, a loss looked at) left its gradients in .grad
        loss_fn(model(torch.randn(8, 2)), torch.randint(0, 3, (8,))).backward()
        name += ", the model coming with gradients left in .grad by an earlier backward"
    oracle = copy.deepcopy((model, optimizer))      # the same weights, and an optimizer over the copy's weights
    leaky = copy.deepcopy((model, optimizer))       # what a step that never clears .grad does
    for mine, given in zip(leaky[0].parameters(), model.parameters()):    # deepcopy leaves a Parameter's .grad out
        mine.grad = None if given.grad is None else given.grad.clone()
    for call, (inputs, targets) in enumerate(_batches(seed), start=1):
        what = (f"a model with Dropout and BatchNorm, {name}, call {call} of 3 in a row (batch of 8, "
                "CrossEntropyLoss)")
        before = _weights(model)
        counted = model.body[1].num_batches_tracked.item()
        torch.manual_seed(100 + call)
        watch, flags = Watch(model), modes(model)
        try:
            got = attempt.call(what, model, inputs.clone(), targets.clone(), loss_fn, optimizer)
        finally:
            watch.close()
        torch.manual_seed(100 + call)
        want = reference_step(oracle[0], inputs, targets, loss_fn, oracle[1])
        after_next = _loss_after(oracle[0], inputs, targets, loss_fn)
        torch.manual_seed(100 + call)
        leaky[0].train()
        (loss_fn(leaky[0](inputs), targets)).backward()
        leaky[1].step()
        got = need_float(got)
        forwards = model.body[1].num_batches_tracked.item() - counted
        if forwards > 1:
            raise Fail(f"your step ran the model forward {forwards} times (BatchNorm counted {forwards} batches); one "
                       "step runs it once.", "Compute the loss from one forward pass, and return that loss's value.")
        if not model.training:
            raise Fail("after your step the model is in eval mode; it came in train mode.",
                       "A training step leaves the model's mode alone.")
        moved = [name for name in mode_changes(model, flags) if name != "the model"]
        if moved:
            raise Fail(f"after your step the layers {', '.join(moved[:4])} are in eval mode; every layer came in train "
                       "mode.", "A training step leaves the mode of every layer alone.")
        if any(not f.training for f in watch.forwards):
            raise Fail("your step ran the model forward in eval mode: Dropout dropped nothing and BatchNorm used its "
                       "running statistics, so the loss and the gradients are not those of a training step.",
                       "The model comes in train mode: leave its mode alone.")
        if _close(_weights(model), before):
            raise Fail("the weights did not change: your function made no update.",
                       "backward() fills .grad; optimizer.step() then applies it. In that order, and nothing may "
                       "clear .grad in between.")
        if abs(got - want) > 1e-5 * max(1.0, abs(want)):
            if abs(got - after_next) <= 1e-5 * max(1.0, abs(after_next)):
                mine, right = pair(got, want)
                raise Fail(f"your function returned {mine}, the loss after the update; this step's loss, "
                           f"before the update, is {right}.", "Return the loss that backward() used.")
            mine, right = pair(got, want)
            raise Fail(f"your function returned {mine}; this step's loss (on this batch, before the update) "
                       f"is {right}.", "Return the value of the loss you called backward() on, as a float.")
        if not _close(_weights(model), _weights(oracle[0])):
            if call == 1 and stale and _close(_weights(model), _weights(leaky[0])):
                raise Fail("the model came with gradients left in .grad by an earlier backward, and your step added "
                           "this batch's gradient to them: the update used both.",
                           "Clear the gradients at the start of the step (optimizer.zero_grad() before backward()): "
                           "then it does not matter what the caller left in .grad.")
            if call > 1 and _close(_weights(model), _weights(leaky[0])):
                raise Fail("the weights after this call moved with the gradients of this batch *and* of the previous "
                           "call: gradients leaked from one step into the next.",
                           "backward() adds to .grad. Something must clear it between two steps.")
            raise Fail("the weights after your step differ from one step of the optimizer on this batch.",
                       "One step: clear the gradients, forward, loss, backward, optimizer step, each exactly once.")


def _loss_after(model: nn.Module, inputs, targets, loss_fn) -> float:
    """The loss a second forward right after the update would give (same RNG stream as the learner's)."""
    with torch.no_grad():
        state = {k: v.clone() for k, v in model.state_dict().items()}
        value = loss_fn(model(inputs), targets).item()
        model.load_state_dict(state)
    return value


def _two_groups(parameters) -> torch.optim.Optimizer:
    """Adam with the last two tensors (the output layer) in a group of their own, as fine-tuning code does."""
    params = list(parameters)
    return torch.optim.Adam([{"params": params[:-2]}, {"params": params[-2:], "lr": 0.001}], lr=0.01)


def check_train_step(attempt: Attempt) -> str:
    """The oracle: the same step on a copy of the model and optimizer (same dropout masks), call after call."""
    _step_case(attempt, "SGD with momentum 0.9", lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9), 0)
    _step_case(attempt, "Adam with two parameter groups (the last layer at a tenth of the lr)", _two_groups, 1)
    _step_case(attempt, "SGD with momentum 0.9", lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9), 2, stale=True)
    return ("3 calls in a row with SGD + momentum and with Adam over two parameter groups, on a model with Dropout and "
            "BatchNorm (once coming with gradients left in .grad): the returned loss is each batch's loss before its "
            "update, one forward per step, and the weights match torch's optimizer step by step (no gradient leaks "
            "from one call into the next, nor from before the first).")


# --- adam_step ----------------------------------------------------------------------------------------------

def torch_adam(param, grad, m, v, t, lr, betas, eps):
    """The oracle: torch.optim.Adam, its state set to (t - 1 steps, m, v), stepped once."""
    p = param.clone().requires_grad_(True)
    optimizer = torch.optim.Adam([p], lr=lr, betas=betas, eps=eps, foreach=False)
    optimizer.state[p] = {"step": torch.tensor(float(t - 1)), "exp_avg": m.clone(), "exp_avg_sq": v.clone()}
    p.grad = grad.clone()
    optimizer.step()
    state = optimizer.state[p]
    return p.detach(), state["exp_avg"], state["exp_avg_sq"]


def _adam_case(attempt: Attempt, t: int, seed: int, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, scale=1.0) -> None:
    g = torch.Generator().manual_seed(seed)
    param = torch.randn(5, dtype=torch.double, generator=g)
    grad = scale * torch.randn(5, dtype=torch.double, generator=g)
    grad[0] = 0.0
    m = torch.zeros(5, dtype=torch.double) if t == 1 else 0.1 * torch.randn(5, dtype=torch.double, generator=g)
    v = torch.zeros(5, dtype=torch.double) if t == 1 else 0.01 * torch.rand(5, dtype=torch.double, generator=g)
    what = f"step t={t}, lr={lr:g}, betas={betas}, eps={eps:g}" + (", m and v zero" if t == 1 else "") + \
        (f", gradients about {scale:g}" if scale != 1 else "")
    got = attempt.call(what, param.clone(), grad.clone(), m.clone(), v.clone(), t, lr, betas, eps)
    new_p, new_m, new_v = need_tuple(got, 3, "your function", "param, m, v")
    for label, value in (("the new param", new_p), ("the new m", new_m), ("the new v", new_v)):
        need_tensor(value, label, shape=(5,))
    want_p, want_m, want_v = torch_adam(param, grad, m, v, t, lr, betas, eps)
    b1, b2 = betas
    if not torch.allclose(new_m.double(), want_m, rtol=1e-6, atol=1e-12):
        swapped = torch.allclose(new_m.double(), b1 * grad + (1 - b1) * m)
        mine, right = values_pair(new_m, want_m)
        raise Fail(f"the new m is {mine}; Adam's is {right}"
                   + (": yours keeps beta1 of the gradient instead of beta1 of the old m." if swapped else "."),
                   "m is a running average of the gradient: it keeps beta1 of the old m.")
    if not torch.allclose(new_v.double(), want_v, rtol=1e-6, atol=1e-15):
        unsquared = torch.allclose(new_v.double(), b2 * v + (1 - b2) * grad)
        mine, right = values_pair(new_v, want_v)
        raise Fail(f"the new v is {mine}; Adam's is {right}"
                   + (": yours averages the gradient, not its square." if unsquared else "."),
                   "v is a running average of the squared gradient, with beta2.")
    if torch.allclose(new_p.double(), want_p, rtol=1e-6, atol=1e-12):
        return
    m_hat, v_hat = want_m / (1 - b1 ** t), want_v / (1 - b2 ** t)
    known = {
        "no bias correction": param - lr * want_m / (want_v.sqrt() + eps),
        "eps inside the square root": param - lr * m_hat / (v_hat + eps).sqrt(),
        "the update added instead of subtracted": param + lr * m_hat / (v_hat.sqrt() + eps),
        "the bias correction with t + 1 (t is already 1 at the first step)":
            param - lr * (want_m / (1 - b1 ** (t + 1))) / ((want_v / (1 - b2 ** (t + 1))).sqrt() + eps),
        "the step taken with the old m and v": param - lr * (m / (1 - b1 ** t)) / ((v / (1 - b2 ** t)).sqrt() + eps),
        "sqrt(v) divided by (1 - beta2**t), not by its square root":
            param - lr * m_hat / (want_v.sqrt() / (1 - b2 ** t) + eps),
        "eps added to sqrt(v) before the bias correction (the paper's 'efficient' form)":
            param - lr * (1 - b2 ** t) ** 0.5 / (1 - b1 ** t) * want_m / (want_v.sqrt() + eps),
    }
    named = next((k for k, value in known.items() if torch.allclose(new_p.double(), value, rtol=1e-6, atol=1e-12)), "")
    hints = {"no bias correction": "m and v start at 0, so early averages are too small: divide each by "
                                   "(1 - beta**t) before using them.",
             "eps inside the square root": "eps is added after the square root of v-hat.",
             "the update added instead of subtracted": "A step goes against the gradient.",
             "the bias correction with t + 1 (t is already 1 at the first step)":
                 "t counts steps from 1: the first step divides by (1 - beta**1).",
             "the step taken with the old m and v": "Update m and v with this gradient first, then step with them.",
             "sqrt(v) divided by (1 - beta2**t), not by its square root":
                 "v-hat is v / (1 - beta2**t); its square root is what the step divides by.",
             "eps added to sqrt(v) before the bias correction (the paper's 'efficient' form)":
                 "torch adds eps to the square root of the corrected v-hat; the paper's shortcut moves eps."}
    mine, right = values_pair(new_p, want_p)
    raise Fail(f"the new param is {mine}; torch's Adam gives {right}" + (f" (yours: {named})." if named
               else "."), hints.get(named, "Use the new m and v, corrected for their zero start, then step by lr."))


def check_adam_step(attempt: Attempt) -> str:
    """The oracle: torch.optim.Adam with its state set to the same m, v and step count."""
    _adam_case(attempt, 1, 0)
    _adam_case(attempt, 7, 1)
    _adam_case(attempt, 1000, 2, lr=0.01, betas=(0.8, 0.99))
    _adam_case(attempt, 1, 3, lr=0.1, eps=1e-3, scale=1e-4)
    _adam_case(attempt, 2, 4, lr=0.1, scale=50.0)
    return ("5 cases agree with torch.optim.Adam (state set to the same m, v and step): the first step from m = v = 0 "
            "(about lr times the gradient's sign), a late step, other betas, an eps that matters, a zero gradient.")


# --- sgd_step_by_hand ---------------------------------------------------------------------------------------

def torch_sgd(W, b, x, t, lr):
    """The oracle: autograd's gradient of the mean squared error, applied by torch.optim.SGD."""
    W, b = W.clone().requires_grad_(True), b.clone().requires_grad_(True)
    optimizer = torch.optim.SGD([W, b], lr=lr)
    nn.functional.mse_loss(W @ x + b, t).backward()
    optimizer.step()
    return W.detach(), b.detach()


def _sgd_case(attempt: Attempt, W, b, x, t, lr) -> None:
    what = f"W = {values(W)}, b = {values(b)}, x = {values(x)}, t = {values(t)}, lr={lr:g}"
    autograd = [(torch.autograd, "grad"), (torch.autograd, "backward")]    # torch.func.grad and .backward() call them
    with forbidden(autograd, Fail("your function ran autograd (torch.autograd.grad, .backward() or torch.func.grad); "
                                  "the statement asks for the gradient worked out by hand, without autograd.",
                                  "Write dL/dy from the loss, then the chain rule through y = W x + b for W and b.")):
        got = attempt.call(what, W.clone(), b.clone(), x.clone(), t.clone(), lr)
    new_W, new_b = need_tuple(got, 2, "your function", "W_new, b_new")
    new_W = need_tensor(new_W, "W_new", shape=tuple(W.shape), meaning=" (the shape of W)")
    new_b = need_tensor(new_b, "b_new", shape=tuple(b.shape), meaning=" (the shape of b)")
    for name, got, given in (("W_new", new_W, W), ("b_new", new_b, b)):
        if got.dtype != given.dtype:      # torch.optim.SGD keeps a parameter's dtype: a float64 step would change it
            raise Fail(f"{name} has dtype {str(got.dtype).removeprefix('torch.')}; the parameters are "
                       f"{str(given.dtype).removeprefix('torch.')}, and torch.optim.SGD updates them in their own dtype.",
                       "Compute with the tensors as given (or convert the result back with .to(W.dtype)).")
    graphed = [name for name, got in (("W_new", new_W), ("b_new", new_b)) if got.requires_grad or got.grad_fn]
    if graphed:     # the statement: "with the gradient worked out by hand, without autograd"
        raise Fail(f"{' and '.join(graphed)} {'carries' if len(graphed) == 1 else 'carry'} an autograd graph "
                   "(requires_grad or a grad_fn): this exercise asks for the gradient worked out by hand, without "
                   "autograd.", "Write dL/dy, dL/dW and dL/db as formulas of W, b, x and t: no requires_grad, no "
                   "backward().")
    want_W, want_b = torch_sgd(W, b, x, t, lr)
    if torch.allclose(new_W.double(), want_W.double(), rtol=1e-5, atol=1e-8) and torch.allclose(
            new_b.double(), want_b.double(), rtol=1e-5, atol=1e-8):
        return
    err = W @ x + b - t
    n = len(t)
    grad_W = 2 / n * torch.outer(err, x)
    known = {"the update added instead of subtracted": (W + lr * grad_W, b + lr * 2 / n * err),
             "the gradient of the sum of squares, not their mean": (W - lr * 2 * torch.outer(err, x), b - lr * 2 * err),
             "the factor 2 of the square missing": (W - lr / n * torch.outer(err, x), b - lr / n * err),
             "b left unchanged": (want_W, b),
             "the mean taken over the inputs, not the outputs":
                 (W - lr * 2 / len(x) * torch.outer(err, x), b - lr * 2 / len(x) * err),
             "y computed without b": (W - lr * 2 / n * torch.outer(W @ x - t, x), b - lr * 2 / n * (W @ x - t))}
    if W.shape[0] == W.shape[1]:
        known["the gradient transposed (x times dL/dy, not dL/dy times x)"] = (W - lr * grad_W.T, want_b)
    named = next((k for k, (kw, kb) in known.items() if torch.allclose(new_W.double(), kw.double(), rtol=1e-5)
                  and torch.allclose(new_b.double(), kb.double(), rtol=1e-5)
                  and not (k == "y computed without b" and torch.equal(b, torch.zeros_like(b)))), "")
    wrong = "W_new" if not torch.allclose(new_W.double(), want_W.double(), rtol=1e-5, atol=1e-8) else "b_new"
    shown = (new_W, want_W) if wrong == "W_new" else (new_b, want_b)
    hint = {"the update added instead of subtracted": "A step goes against the gradient: w - lr * g.",
            "b left unchanged": "The bias has a gradient too: dL/db = dL/dy.",
            "the mean taken over the inputs, not the outputs": f"L averages over the {n} outputs: divide by that.",
            "y computed without b": "The forward pass is y = W x + b: the error y - t includes b.",
            "the gradient transposed (x times dL/dy, not dL/dy times x)":
                "dL/dW has W's shape [outputs, inputs]: row i is dL/dy[i] times x.",
            }.get(named, f"With L the mean over the {n} outputs of (y - t)^2, work out dL/dy first; then dL/dW is "
                         "dL/dy times x (one row per output).")
    mine, right = values_pair(shown[0], shown[1])
    raise Fail(f"{wrong} is {mine}; autograd and torch.optim.SGD give {right}"
               + (f" (yours: {named})." if named else "."), hint)


def check_sgd_step_by_hand(attempt: Attempt) -> str:
    """The oracle: autograd's gradient applied by torch.optim.SGD."""
    g = torch.Generator().manual_seed(0)
    chapter_3 = (torch.tensor([[0.5, -0.3], [0.2, 0.8]]), torch.zeros(2), torch.tensor([1.0, 2.0]),
                 torch.tensor([1.0, 0.0]), 0.01)
    cases = [chapter_3]
    for out, inp, lr in ((3, 2, 0.1), (1, 4, 0.05), (2, 3, 0.5)):
        cases.append((torch.randn(out, inp, generator=g), torch.randn(out, generator=g), torch.randn(inp, generator=g),
                      torch.randn(out, generator=g), lr))
    for case in cases:
        _sgd_case(attempt, *case)
    return ("4 cases agree with autograd and torch.optim.SGD: chapter 3's numbers, and layers of 3x2, 1x4 and 2x3 "
            "(one output, more outputs than inputs).")


def exercises() -> list[Exercise]:
    """Chapter 3."""
    return [
        Exercise("train_step", "03", "one complete training step",
                 "train_step(model, inputs, targets, loss_fn, optimizer) -> float", check_train_step, arity=(5,),
                 time_limit=20.0, oracle="the same step on a copy of the model and optimizer, same dropout masks"),
        Exercise("adam_step", "03", "one Adam step by hand",
                 "adam_step(param, grad, m, v, t, lr, betas, eps) -> (param, m, v)", check_adam_step, arity=(8,),
                 oracle="torch.optim.Adam with the same state", forbids=("optim", "Adam", "AdamW")),
        Exercise("sgd_step_by_hand", "03", "one SGD step of a linear layer, gradient by hand",
                 "sgd_step_by_hand(W, b, x, t, lr) -> (W_new, b_new)", check_sgd_step_by_hand, arity=(5,),
                 oracle="autograd and torch.optim.SGD"),
    ]
