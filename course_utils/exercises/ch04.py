"""Exercises of chapter 4: the evaluation function (checked with the memory meter) and inverted dropout."""
from __future__ import annotations

import copy

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from course_utils.exercises.core import Attempt, Exercise
from course_utils.exercises.guards import forbidden, mode_changes, modes
from course_utils.exercises.words import (ACCURACY_HINT, Fail, accuracy_close, float32_rounded, need_float, need_tensor,
                                          need_tuple, number, pair)
from course_utils.engine.memory import GraphMemoryMeter
from course_utils.engine.models import MLP


# --- evaluate -----------------------------------------------------------------------------------------------

def _oracle(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, loss_fn) -> tuple[float, float]:
    """Loss and accuracy of one big batch of every example, on a copy in eval mode under no_grad."""
    twin = copy.deepcopy(model).eval()
    with torch.no_grad():
        logits = twin(inputs)
        return loss_fn(logits, targets).item(), (logits.argmax(dim=1) == targets).sum().item() / len(targets)


def _batch_means(model: nn.Module, loader: DataLoader, loss_fn) -> list[float]:
    twin = copy.deepcopy(model).eval()
    with torch.no_grad():
        return [loss_fn(twin(x), y).item() for x, y in loader]


def _eval_case(attempt: Attempt, n: int, batch_size: int, start_training: bool, seed: int,
               part_of: int = 0, frozen_norm: bool = False, drop_last: bool = False) -> None:
    g = torch.Generator().manual_seed(seed)
    everything = torch.randn(n + part_of, 2, generator=g), torch.randint(0, 3, (n + part_of,), generator=g)
    torch.manual_seed(seed)
    model = MLP(hidden=16, dropout=0.3, batchnorm=True).train(start_training)
    if frozen_norm:      # fine-tuning's frozen BatchNorm: in eval mode inside a model that trains
        for layer in model.modules():
            if isinstance(layer, nn.BatchNorm1d):
                layer.eval()
                layer.requires_grad_(False)          # and its weight and bias, as fine-tuning freezes them
    chosen = list(range(part_of, n + part_of))       # a sampler over part of the dataset (a validation split)
    loader = DataLoader(TensorDataset(*everything), batch_size=batch_size, sampler=chosen if part_of else None,
                        drop_last=drop_last)
    if drop_last:                                    # what it yields: the full batches only
        chosen, n = chosen[:n // batch_size * batch_size], n // batch_size * batch_size
    inputs, targets = everything[0][chosen], everything[1][chosen]
    loss_fn = nn.CrossEntropyLoss()
    sizes = [len(y) for _, y in loader]
    mode = ("train" if start_training else "eval") + (" mode, its BatchNorm frozen in eval" if frozen_norm else "")
    what = (f"{n} examples in batches of {batch_size} (sizes {sizes})"
            + (f", drawn by a sampler from a dataset of {n + part_of}" if part_of else "")
            + (f", the loader dropping its last, partial batch (drop_last=True)" if drop_last else "")
            + f", a model with Dropout and BatchNorm that comes in {mode} mode")
    buffers = {k: v.clone() for k, v in model.state_dict().items()}
    flags = modes(model)
    trainable = {name: p.requires_grad for name, p in model.named_parameters()}
    meter = GraphMemoryMeter()
    with torch.enable_grad():
        with meter:
            got = attempt.call(what, model, loader, loss_fn)
        grad_still_on = torch.is_grad_enabled()
    if not grad_still_on:
        raise Fail("after your function returned, gradients were still switched off for everything that runs next "
                   "(torch.set_grad_enabled(False) is global).", "Use `with torch.no_grad():` around the loop, so it "
                   "switches back by itself.")
    loss, accuracy = need_tuple(got, 2, "your function", "mean_loss, accuracy")
    loss, accuracy = need_float(loss, "the loss you returned is"), need_float(accuracy, "the accuracy you returned is")
    if meter.peak > 0:
        raise Fail(f"your evaluation built an autograd graph: {meter.peak:,} bytes of activations were saved for a "
                   "backward pass that never comes.", "Evaluation needs no gradients: switch the graph off around "
                                                      "the whole loop.")
    if model.training != start_training:
        now = "train" if model.training else "eval"
        raise Fail(f"the model came in {mode} mode and your function left it in {now} mode.",
                   "Remember the mode it came in (model.training) and restore exactly that at the end.")
    changed_modes = [name for name in mode_changes(model, flags) if name != "the model"]
    if changed_modes and frozen_norm:
        raise Fail(f"the model came in {mode} mode; after your function its layers {', '.join(changed_modes[:4])} "
                   "are in another mode than they came in: model.train() switched the frozen BatchNorm back to train.",
                   "Remember every layer's mode ({name: m.training for name, m in model.named_modules()}) and put "
                   "each one back.")
    if changed_modes:
        raise Fail(f"the model came in {mode} mode; after your function the model says {mode} but its layers "
                   f"{', '.join(changed_modes[:4])} are in {'eval' if start_training else 'train'} mode.",
                   "Setting model.training flips only the top module's flag: model.train(flag) sets every layer's.")
    flipped = [name for name, p in model.named_parameters() if p.requires_grad != trainable[name]]
    if flipped:
        raise Fail(f"after your function, requires_grad of {', '.join(flipped[:4])} is "
                   f"{dict(model.named_parameters())[flipped[0]].requires_grad}; it came "
                   f"{trainable[flipped[0]]}: your evaluation changed which parameters train.",
                   "Switch the graph off with torch.no_grad() around the loop instead of touching requires_grad.")
    changed = [k for k, v in model.state_dict().items() if not torch.equal(v, buffers[k])]
    if any("running" in k or "num_batches" in k for k in changed):
        raise Fail("BatchNorm's running statistics changed during your evaluation: the model ran in train mode, "
                   "so Dropout dropped units and BatchNorm learned from the evaluation data.",
                   "Switch the layers to their evaluation behaviour before the loop.")
    if changed:
        raise Fail(f"your evaluation changed the model's weights ({', '.join(changed[:3])}).",
                   "Evaluation only runs forward: no backward, no optimizer step.")
    want_loss, want_acc = _oracle(model, inputs, targets, loss_fn)
    if abs(loss - want_loss) > 1e-5 * max(1.0, abs(want_loss)):
        means = _batch_means(model, loader, loss_fn)
        per_batch = sum(means) / len(means)
        if abs(loss - per_batch) <= 1e-5 * max(1.0, abs(per_batch)) and len(set(sizes)) > 1:
            mine, right = pair(loss, want_loss)
            raise Fail(f"your function returned a loss of {mine} (the mean of the {len(sizes)} batch means), "
                       f"but the mean over the {n} examples is {right}: the last batch holds "
                       f"{sizes[-1]} examples, not {sizes[0]}.", "Weight each batch's mean loss by its number of "
                                                                   "examples, then divide by the number of examples.")
        if abs(loss - want_loss * n) <= 1e-5 * max(1.0, abs(want_loss * n)):
            mine, right = pair(loss, want_loss)
            raise Fail(f"your function returned a loss of {mine}, the total over the {n} examples; the mean "
                       f"per example is {right}.", "Divide the total by the number of examples.")
        mine, right = pair(loss, want_loss)
        whole = len(loader.dataset)
        slots = len(sizes) * sizes[0]
        if slots != n and abs(loss - want_loss * n / slots) <= 1e-5 * max(1.0, abs(want_loss)):
            raise Fail(f"your function returned a loss of {mine}: the total over the {n} examples divided by "
                       f"len(loader) x batch size = {slots}; the last batch holds {sizes[-1]}, so the mean per example "
                       f"is {right}.", "Count the examples of every batch (len(targets)), not batches times their size.")
        if whole != n and abs(loss - want_loss * n / whole) <= 1e-5 * max(1.0, abs(want_loss)):
            raise Fail(f"your function returned a loss of {mine}: the total over the {n} examples the loader yields, "
                       f"divided by len(loader.dataset) = {whole}; the mean per example is {right}.",
                       "Count the examples the loader really yields (a sampler may draw only part of the dataset).")
        sampled = len(loader.sampler)
        if sampled not in (n, whole) and abs(loss - want_loss * n / sampled) <= 1e-5 * max(1.0, abs(want_loss)):
            raise Fail(f"your function returned a loss of {mine}: the total over the {n} examples the loader yields, "
                       f"divided by len(loader.sampler) = {sampled}; drop_last=True drops the last, partial batch, so "
                       f"the mean per example is {right}.", "Count the examples as the batches come (len(targets)).")
        raise Fail(f"your function returned a loss of {mine}; the mean loss per example is {right}.",
                   "Sum each example's loss over every batch, then divide by the number of examples.")
    if not accuracy_close(accuracy, want_acc):     # the course's accuracy rule (words.ACCURACY_RTOL)
        hits = round(want_acc * n)
        if float32_rounded(accuracy, want_acc):
            mine, right = pair(accuracy, want_acc)
            raise Fail(f"your accuracy is {mine}, {hits} of {n} rounded to float32; the course's rule compares "
                       f"accuracies to within 1e-9, and {hits}/{n} is {right}.", ACCURACY_HINT)
        if abs(accuracy - 100 * want_acc) <= 1e-4:
            mine, right = pair(accuracy, want_acc)
            raise Fail(f"your accuracy is {mine}, a percentage; return the fraction {right}.",
                       "Accuracy here is a fraction between 0 and 1.")
        mine, right = pair(accuracy, want_acc)
        if len(loader.dataset) != n and accuracy_close(accuracy, hits / len(loader.dataset)):
            raise Fail(f"your accuracy is {mine}: {hits} right divided by len(loader.dataset) = {len(loader.dataset)}; "
                       f"the loader yields {n} examples, so it is {right}.",
                       "Count the examples the loader really yields (a sampler may draw only part of the dataset).")
        raise Fail(f"your accuracy is {mine}; {hits} of the {n} examples are classified right: "
                   f"{right}.", "Count the right predictions (the arg-max of the logits equals the target) "
                                           "over every batch, then divide by the number of examples.")


def check_evaluate(attempt: Attempt) -> str:
    """The oracle: one big batch on a copy in eval mode under no_grad; the memory meter watches for a graph."""
    _eval_case(attempt, 10, 4, True, 0)
    _eval_case(attempt, 10, 4, False, 1)
    _eval_case(attempt, 7, 1, True, 2)
    _eval_case(attempt, 10, 64, True, 3)
    _eval_case(attempt, 33, 8, True, 4)
    _eval_case(attempt, 12, 5, False, 5, part_of=20)
    _eval_case(attempt, 10, 4, True, 6, frozen_norm=True)
    _eval_case(attempt, 14, 4, False, 7, drop_last=True)
    return ("8 loaders (a partial last batch, batches of 1, one batch larger than the data, a sampler over part of "
            "the dataset, a loader dropping its last batch) on a model with Dropout "
            "and BatchNorm: the loss is the mean per example and the accuracy a fraction, as one big batch in eval "
            "mode gives them; no graph was built (memory meter: 0 bytes); the model and every layer left in the mode "
            "they came in (a BatchNorm frozen in eval inside a training model too), its BatchNorm statistics "
            "untouched; gradients switched on again afterwards.")


# --- dropout ------------------------------------------------------------------------------------------------

def _dropout_case(attempt: Attempt, p: float, training: bool, shape: tuple[int, ...], seed: int,
                  dtype: torch.dtype = torch.float32, grad: bool = False) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(*shape, generator=g, dtype=torch.float64) + 3.0).to(dtype)   # no zeros: a 0 was dropped
    source = x.requires_grad_(grad)
    what = f"x of shape {shape}" + ("" if dtype == torch.float32 else f" ({str(dtype).removeprefix('torch.')})") + \
        f", p={p:g}, training={training}" + (", x requiring grad (a layer's output)" if grad else "")
    kept_x = x.clone()
    torch.manual_seed(seed)
    with forbidden(TORCH_DROPOUT, Fail("your function called torch's own dropout (nn.Dropout or F.dropout); the "
                                       "statement asks you to write it without them.",
                                       "Draw the random numbers yourself (torch.rand_like(x) or torch.bernoulli): the "
                                       "rest is a comparison and a multiplication.")):
        got = attempt.call(what, x, p, training)
    out = need_tensor(got, "the output", shape=shape, meaning=" (the shape of x)")
    if not torch.equal(x, kept_x):
        raise Fail("your function changed x in place; nn.Dropout returns a new tensor and leaves its input alone.",
                   "Build the output as a new tensor.")
    if out.dtype != x.dtype:
        need_tensor(out, "the output", dtype=x.dtype)
    if training and p == 1:
        if not torch.equal(out, torch.zeros_like(x)):
            bad = int((~torch.isfinite(out)).sum())
            raise Fail(f"with p=1 every value is dropped: nn.Dropout returns all zeros; yours has "
                       + (f"{bad} values that are NaN or infinite." if bad else f"{int((out != 0).sum())} values "
                          "that are not 0."), "With p=1, 1/(1-p) divides by zero: return zeros before scaling."
                       if bad else "With p=1 nothing survives.")
        return out
    if not training or p == 0:
        if not torch.allclose(out, x):
            why = "in evaluation (training=False)" if not training else "with p=0"
            raise Fail(f"{why} dropout must return x unchanged; yours changed {int((out != x).sum())} of "
                       f"{x.numel()} values.", "Dropout only acts in training, and p=0 drops nothing.")
        return out
    dropped = out == 0
    if out.dim() == 2 and min(out.shape) >= 100:
        for dim, lines in ((1, "rows"), (0, "columns")):
            uniform = (dropped.all(dim=dim) | (~dropped).all(dim=dim)).float().mean().item()
            if uniform > 0.1:
                raise Fail(f"in {number(100 * uniform)}% of the {lines} your function dropped all values or none: "
                           "values were dropped together, not each on its own.", "Draw one random number per value "
                                                                                 "(a mask of x's shape).")
    share = dropped.float().mean().item()
    tolerance = 6 * (p * (1 - p) / x.numel()) ** 0.5 + 0.002     # six standard deviations of a fair draw
    if abs(share - p) > tolerance:
        flipped = abs(share - (1 - p)) <= tolerance
        raise Fail(f"your function zeroed {number(100 * share)}% of the values; with p={p:g} about {number(100 * p)}% "
                   "should be dropped" + (" (yours keeps a share p instead)." if flipped else "."),
                   "Each value is dropped with probability p, independently.")
    kept = ~dropped
    if grad:                  # in a model, dropout passes gradients: d out / d x = mask / (1 - p)
        if not out.requires_grad:
            raise Fail("no gradient reaches x through your output: in a model, nothing before the dropout would learn.",
                       "Compute the output from x itself (x * mask / (1 - p)), not from x.detach() or x.data.")
        (g,) = torch.autograd.grad(out.sum(), source)
        if not torch.allclose(g.double(), kept.double() / (1 - p)):
            raise Fail("the gradient reaching x is not the mask scaled by 1/(1-p), what nn.Dropout passes back.",
                       "Compute the output from x with differentiable operations: x * mask / (1 - p).")
    scale = out[kept].double() / x[kept].double()
    rtol = max(1e-5, 2 * torch.finfo(x.dtype).eps)         # bfloat16 rounds x / (1 - p) to 8 bits
    if not torch.allclose(scale, torch.full_like(scale, 1 / (1 - p)), rtol=rtol):
        seen, right = pair(scale.mean().item(), 1 / (1 - p))
        raise Fail(f"the values you kept are multiplied by {seen}; nn.Dropout multiplies them by 1/(1-p) = "
                   f"{right}.", "Scale the survivors so the expected output equals x: then evaluation "
                                              "needs no change.")
    return out


TORCH_DROPOUT = [(nn.functional, "dropout"), (nn.functional, "dropout1d"), (nn.functional, "dropout2d"),
                 (nn.functional, "dropout3d"), (nn.functional, "alpha_dropout"), (torch, "dropout")]


def check_dropout(attempt: Attempt) -> str:
    """The oracle: nn.Dropout's contract (each value dropped with probability p, survivors scaled by 1/(1-p),
    the identity in evaluation)."""
    _dropout_case(attempt, 0.5, False, (4, 5), 0)
    for p, seed in ((0.5, 2), (0.2, 3), (0.8, 4), (0.35, 10)):     # 0.35: p as given, not rounded
        _dropout_case(attempt, p, True, (200, 500), seed)
    _dropout_case(attempt, 0.0, True, (1000,), 1)
    a = _dropout_case(attempt, 0.5, True, (50, 40), 5)
    torch.manual_seed(6)
    b = attempt.call("two calls on the same x, p=0.5, training=True", a.new_ones(50, 40), 0.5, True)
    c = attempt.call("two calls on the same x, p=0.5, training=True", a.new_ones(50, 40), 0.5, True)
    if isinstance(b, torch.Tensor) and isinstance(c, torch.Tensor) and torch.equal(b, c):
        raise Fail("two calls in training mode dropped exactly the same values; each forward pass draws a new mask.",
                   "Draw the random mask inside the function, every call.")
    _dropout_case(attempt, 0.5, True, (100, 100), 8, dtype=torch.float64)
    _dropout_case(attempt, 0.5, True, (100, 100), 11, dtype=torch.bfloat16)
    _dropout_case(attempt, 0.3, True, (50, 40), 12, grad=True)
    _dropout_case(attempt, 1.0, True, (10, 10), 7)
    _dropout_case(attempt, 1.0, True, (10, 10), 13, dtype=torch.float64)     # all zeros, of x's dtype
    _dropout_case(attempt, 1.0, False, (10, 10), 9)             # evaluation wins over p = 1: x unchanged
    _drop_counts_vary(attempt)
    return ("the contract of nn.Dropout holds for p = 0, 0.2, 0.35, 0.5, 0.8 and 1 on 100,000 values: about p of them "
            "dropped (all with p = 1), survivors scaled by 1/(1-p), x's dtype kept (float32, float64 and bfloat16), the gradient passed back as mask / (1-p), x unchanged "
            "in evaluation (p = 1 included) and left untouched in place, a new mask each call, and the number "
            "dropped varying from call to call as independent drops do.")


DRAWS, VALUES = 30, 400     # calls, and values per call: a fair count has standard deviation sqrt(400 * 0.25) = 10


def _drop_counts_vary(attempt: Attempt) -> None:
    """Independent drops make the count a binomial draw: its spread over calls must be about sqrt(n p (1-p))."""
    x = torch.full((VALUES,), 2.0)
    torch.manual_seed(10)
    counts = []
    for _ in range(DRAWS):
        got = attempt.call(f"{DRAWS} calls on the same {VALUES} values, p=0.5, training=True", x.clone(), 0.5, True)
        counts.append(int((need_tensor(got, "the output", shape=(VALUES,)) == 0).sum()))
    mean = sum(counts) / DRAWS
    spread = (sum((c - mean) ** 2 for c in counts) / (DRAWS - 1)) ** 0.5
    if not 0.3 * 10 <= spread <= 2.0 * 10:      # a fair draw lands outside these only once in far over a million
        shown = ", ".join(str(c) for c in counts[:8])
        raise Fail(f"over {DRAWS} calls your function dropped {shown}, ... values of {VALUES}: the count spreads by "
                   f"{number(spread)} from call to call, where independent drops with p=0.5 spread by about 10"
                   + (" (the same count every call: a fixed number of values is chosen, not each value drawn on "
                      "its own)." if spread < 3 else "."),
                   "Draw one random number per value and drop the value when it falls below p; do not fix how many "
                   "are dropped.")


def exercises() -> list[Exercise]:
    """Chapter 4."""
    return [
        Exercise("evaluate", "04", "the evaluation function",
                 "evaluate(model, loader, loss_fn) -> (mean_loss, accuracy)", check_evaluate, arity=(3,),
                 time_limit=20.0, oracle="one big batch in eval mode under no_grad; GraphMemoryMeter"),
        Exercise("dropout", "04", "inverted dropout by hand",
                 "dropout(x, p, training) -> Tensor", check_dropout, arity=(3,),
                 oracle="nn.Dropout's contract, measured on 100,000 values"),
    ]
