"""Counter-examples for the statement -> check table (course_utils/exercises/rules.py; issue 40 item 1).

``COUNTER[exercise][label]`` breaks exactly the one sentence (or the one part of it) that the rule with that
label names, and is otherwise the course's own solution: a mutant id of tools/mutate_exercises.py (a string,
the solution changed by one operator), or a function written by hand around the solution (a callable, or a
tuple of callables for an exercise of several functions). tests/test_exercise_rules.py runs each through the
exercise's checker and requires it to fail in the rule's named check, with the rule's phrase in the message.
"""
from __future__ import annotations

import math

import torch

from course_utils.exercises.solutions import SOLUTIONS

S = {name: functions[0] for name, functions in SOLUTIONS.items()}


def _sliding(getitem=None, length=None):
    base = S["SlidingWindows"]

    class Windows(base):
        def __len__(self):
            return length(self) if length else base.__len__(self)

        def __getitem__(self, i):
            return getitem(self, i) if getitem else base.__getitem__(self, i)
    return Windows


def _folder(getitem=None, eager=False):
    base = S["FolderDataset"]

    class Folder(base):
        def __init__(self, folder):
            super().__init__(folder)
            self.cache = [base.__getitem__(self, i) for i in range(self.n)] if eager else None

        def __getitem__(self, i):
            if self.cache is not None:
                if not 0 <= i < self.n:
                    raise IndexError(i)
                return self.cache[i]
            return getitem(self, i) if getitem else base.__getitem__(self, i)
    return Folder


COUNTER: dict[str, dict[str, object]] = {
    "updates_per_epoch": {
        "flush": "updates_per_epoch:arith:L2:batches / K -> batches // K",
        "drop_last": "updates_per_epoch:arith:L1:N // B -> N / B",
        "default": "updates_per_epoch:const:L0:False -> True",
        "millions": lambda N, B, K, drop_last=False: S["updates_per_epoch"](N, B, K, drop_last) + (N > 10**6),
        "int": lambda N, B, K, drop_last=False: float(S["updates_per_epoch"](N, B, K, drop_last)),
    },
    "loss_weights": {
        "short_window": lambda sizes, K: [s / sum(sizes[i - i % K:i - i % K + K]) if len(sizes) - i + i % K >= K
                                          else 1 / K for i, s in enumerate(sizes)],
        "mean": "loss_weights:arith:L4:size / sum(window) -> size",
        "one_per": lambda sizes, K: S["loss_weights"](sizes, K)[:-1],
    },
    "SlidingWindows": {
        "inputs": "SlidingWindows:offbyone:L8:i -> i + 1",
        "target": "SlidingWindows:offbyone:L8:i + self.window -> i + self.window - 1",
        "tuple": _sliding(getitem=lambda self, i: {"x": self.series[i:i + self.window],
                                                   "y": self.series[i + self.window]}),
        "dtype": _sliding(getitem=lambda self, i: (self.series[i:i + self.window].float(),
                                                   self.series[i + self.window])),
        "len": "SlidingWindows:offbyone:L5:len(self.series) -> len(self.series) + 1",
        "index_error": _sliding(getitem=lambda self, i: (self.series[i % len(self) if len(self) else 0:][:self.window],
                                                         self.series[(i % len(self) if len(self) else 0) + self.window
                                                                     if len(self) else -1])),
    },
    "FolderDataset": {
        "len": "FolderDataset:const:L3:1 -> 2",
        "pair": _folder(getitem=lambda self, i: torch.load(self.folder / f"{i}.pt")),
        "file_i": _folder(getitem=lambda self, i: S["FolderDataset"].__getitem__(self, (i + 1) % self.n)),
        "lazy": _folder(eager=True),
        "x_float32": _folder(getitem=lambda self, i: (S["FolderDataset"].__getitem__(self, i)[0].double(),
                                                      S["FolderDataset"].__getitem__(self, i)[1])),
        "y_int64": _folder(getitem=lambda self, i: (S["FolderDataset"].__getitem__(self, i)[0],
                                                    S["FolderDataset"].__getitem__(self, i)[1].float())),
    },
    "pad_collate": {
        "tuple": lambda batch: dict(zip(("input_ids", "mask", "labels"), S["pad_collate"](batch))),
        "longest": lambda batch: tuple(t if k else torch.nn.functional.pad(t, (0, 1)) for k, t in
                                       enumerate(S["pad_collate"](batch)[:1])) + S["pad_collate"](batch)[1:],
        "right": lambda batch: (torch.stack([torch.cat([torch.zeros(max(len(t) for t, _ in batch) - len(t),
                                                                    dtype=torch.long), t]) for t, _ in batch]),)
        + S["pad_collate"](batch)[1:],
        "int64": lambda batch: (S["pad_collate"](batch)[0].int(),) + S["pad_collate"](batch)[1:],
        "mask_bool": lambda batch: (S["pad_collate"](batch)[0], S["pad_collate"](batch)[1].long(),
                                    S["pad_collate"](batch)[2]),
        "mask_true": lambda batch: (S["pad_collate"](batch)[0], ~S["pad_collate"](batch)[1], S["pad_collate"](batch)[2]),
        "labels": lambda batch: S["pad_collate"](batch)[:2] + (S["pad_collate"](batch)[2].flip(0),),
    },
    "class_balanced_weights": {
        "one_per_example": lambda labels: 1.0 / torch.bincount(labels).double(),
        "positive": lambda labels: S["class_balanced_weights"](labels) * 0,
        "finite": lambda labels: S["class_balanced_weights"](labels).index_fill(0, torch.tensor([0]), math.inf),
        "balanced": lambda labels: torch.ones(len(labels)),
    },
    "shard_indices": {
        "sampler": lambda n, W, r: list(range(r * math.ceil(n / W), min(n, (r + 1) * math.ceil(n / W)))) or [0],
        "ints": lambda n, W, r: [float(i) for i in S["shard_indices"](n, W, r)],
        "count": lambda n, W, r: list(range(n))[r::W],
        "padding": lambda n, W, r: (list(range(n)) + [0] * (math.ceil(n / W) * W - n))[r::W],
    },
    "weighted_shard": {
        "ints": lambda *a, **k: [float(i) for i in S["weighted_shard"](*a, **k)],
        "epoch": lambda w, n, W, r, e, seed=0: S["weighted_shard"](w, n, W, r, 0, seed),
        "total": lambda w, n, W, r, e, seed=0: torch.multinomial(
            w, n, replacement=True, generator=torch.Generator().manual_seed(seed + e))[r::W].tolist(),
        "replacement": lambda w, n, W, r, e, seed=0: torch.multinomial(
            w, W * math.ceil(n / W), replacement=W * math.ceil(n / W) > int((w > 0).sum()),
            generator=torch.Generator().manual_seed(seed + e))[r::W].tolist(),
        "deal": lambda w, n, W, r, e, seed=0: (lambda d: d[r * len(d) // W:(r + 1) * len(d) // W])(
            torch.multinomial(w, W * math.ceil(n / W), replacement=True,
                              generator=torch.Generator().manual_seed(seed + e)).tolist()),
        "default_seed": lambda w, n, W, r, e, seed=1: S["weighted_shard"](w, n, W, r, e, seed),
        "weights": lambda w, n, W, r, e, seed=0: (w.div_(w.sum()), S["weighted_shard"](w, n, W, r, e, seed))[1],
        "global_rng": lambda w, n, W, r, e, seed=0: (torch.manual_seed(seed + e),
                                                     torch.multinomial(w, W * math.ceil(n / W), replacement=True)
                                                     [r::W].tolist())[1],
    },
}


def _train_step_in_eval(model, inputs, targets, loss_fn, optimizer):
    loss = S["train_step"](model, inputs, targets, loss_fn, optimizer)
    model.eval()
    return loss


def _train_step_loss_after(model, inputs, targets, loss_fn, optimizer):
    S["train_step"](model, inputs, targets, loss_fn, optimizer)
    with torch.no_grad():
        return loss_fn(model(inputs), targets).item()


def _evaluate_with(mode=None, per_batch=False, graph=False, dataset_len=False):
    def evaluate(model, loader, loss_fn):
        was = model.training
        if mode != "no_eval":
            model.eval()
        total, hits, n, batches = 0.0, 0, 0, 0
        with torch.set_grad_enabled(graph):
            for inputs, targets in loader:
                logits = model(inputs)
                loss = loss_fn(logits, targets)
                total += loss.item() * (1 if per_batch else len(targets))
                hits += int((logits.argmax(dim=1) == targets).sum())
                n += len(targets)
                batches += 1
        if mode != "no_restore":
            model.train(was)
        count = len(loader.dataset) if dataset_len else n
        return total / (batches if per_batch else count), hits / count
    return evaluate


COUNTER.update({
    "train_step": {
        "float": lambda *a: torch.tensor(S["train_step"](*a)),
        "before": _train_step_loss_after,
        "mode": _train_step_in_eval,
        "step": "train_step:drop:L1:optimizer.zero_grad() -> (removed)",
        "stale_grads": lambda model, inputs, targets, loss_fn, optimizer: (   # zero_grad after the step instead
            lambda loss: (loss.backward(), optimizer.step(), optimizer.zero_grad(), loss.item())[-1])(
            loss_fn(model(inputs), targets)),
    },
    "adam_step": {
        "bias": lambda param, grad, m, v, t, lr, betas, eps: S["adam_step"](param, grad, m, v, t + 1, lr, betas, eps),
        "tuple": lambda *a: S["adam_step"](*a)[:2],
        "shape": lambda *a: tuple(x.reshape(-1, 1) for x in S["adam_step"](*a)),
    },
    "sgd_step_by_hand": {
        "value": "sgd_step_by_hand:arith:L2:2 * (y - t) / len(t) -> 2 * (y - t) * len(t)",
        "tuple": lambda *a: S["sgd_step_by_hand"](*a)[:1],
        "no_autograd": lambda W, b, x, t, lr: tuple(z.requires_grad_() * 1 for z in S["sgd_step_by_hand"](W, b, x, t, lr)),
        "dtype": lambda *a: tuple(z.double() for z in S["sgd_step_by_hand"](*a)),
    },
    "evaluate": {
        "floats": lambda *a: tuple(torch.tensor(v) for v in S["evaluate"](*a)),
        "restore_each_layer": lambda model, *a: (lambda training, result: (model.train(training), result)[1])(
            model.training, S["evaluate"](model, *a)),
        "per_example": _evaluate_with(per_batch=True),
        "yielded": _evaluate_with(dataset_len=True),
        "eval_mode": _evaluate_with(mode="no_eval"),
        "no_graph": _evaluate_with(graph=True),
        "restore": _evaluate_with(mode="no_restore"),
    },
    "dropout": {
        "scale": lambda x, p, training: S["dropout"](x, p, training) * (1 - p) if training else x,
        "independent": lambda x, p, training: (x * (torch.randperm(x.numel()).reshape(x.shape) >= round(p * x.numel()))
                                               / (1 - p)) if training and 0 < p < 1 else S["dropout"](x, p, training),
        "eval": lambda x, p, training: S["dropout"](x, p, True),
        "p1": lambda x, p, training: x * 0 / (1 - p) if training and p == 1 else S["dropout"](x, p, training),
        "dtype": lambda x, p, training: S["dropout"](x, p, training).double(),
        "untouched": lambda x, p, training: x.mul_(torch.rand_like(x) >= p).div_(1 - p) if training and 0 < p < 1
        else S["dropout"](x, p, training),
        "gradient": lambda x, p, training: S["dropout"](x.detach(), p, training),
    },
    "stop_check": {
        "one_based": lambda losses, patience, min_delta=0.0: (lambda r: None if r is None else r - 1)(
            S["stop_check"](losses, patience, min_delta)),
        "strict": "stop_check:cmp:L5:loss < best - min_delta -> loss <= best - min_delta",
        "patience": "stop_check:cmp:L9:waited >= patience -> waited > patience",
        "not_finite": lambda losses, patience, min_delta=0.0: S["stop_check"](
            [x if math.isfinite(x) else 1e30 for x in losses], patience, min_delta),
        "patience_zero": lambda losses, patience, min_delta=0.0: (   # `waited == patience`: 0 is never reached again
            None if patience == 0 and all(math.isfinite(x) for x in losses) else S["stop_check"](losses, patience,
                                                                                                  min_delta)),
    },
    "warmup_cosine_lr": {
        "warmup": lambda u, base, w, total: base * u / w if u < w else S["warmup_cosine_lr"](u, base, w, total),
        "cosine": lambda u, base, w, total: base * (1 - (u - w) / (total - w)) if u >= w
        else S["warmup_cosine_lr"](u, base, w, total),
        "zero": lambda u, base, w, total: S["warmup_cosine_lr"](u, base, max(w, 1), total),
        "zero_based": lambda u, base, w, total: S["warmup_cosine_lr"](min(u + 1, total), base, w, total),
        "warmup_formula": lambda u, base, w, total: base * (u + 1) / (w + 1) if u < w
        else S["warmup_cosine_lr"](u, base, w, total),
        "cosine_formula": lambda u, base, w, total: base * (1 + math.cos(math.pi * u / total)) / 2 if u >= w
        else S["warmup_cosine_lr"](u, base, w, total),
        "both_base": lambda u, base, w, total: S["warmup_cosine_lr"](u + (u >= w > 0), base, w, total + 1),
        "float": lambda *a: torch.tensor(S["warmup_cosine_lr"](*a)),
    },
    "clip_gradients": {
        "norm": lambda params, max_norm: S["clip_gradients"]([p for p in params if p.grad is not None][:1], max_norm),
        "in_place": lambda params, max_norm: _clip_not_in_place(params, max_norm),
        "exceeds": lambda params, max_norm: _clip_always(params, max_norm),
        "skip": lambda params, max_norm: _clip_no_skip(params, max_norm),
        "before": lambda params, max_norm: (lambda ps: (S["clip_gradients"](ps, max_norm),
                                                        S["clip_gradients"](ps, math.inf))[1])(list(params)),
        "float": lambda params, max_norm: torch.tensor(S["clip_gradients"](params, max_norm)),
        "generator": lambda params, max_norm: _clip_two_walks(params, max_norm),
    },
    "examples_processed": {
        "epochs": lambda updates, N, B, drop_last=False: updates * B,
        "drop_last": lambda updates, N, B, drop_last=False: S["examples_processed"](updates, N, B, False),
        "zero": lambda updates, N, B, drop_last=False: S["examples_processed"](updates, N, B, drop_last) or 1,
        "int": lambda *a: float(S["examples_processed"](*a)),
    },
})


def _clip_not_in_place(params, max_norm):
    grads = [p.grad for p in params if p.grad is not None]
    total = torch.sqrt(sum((g ** 2).sum() for g in grads)).item()
    for p_grad in grads:
        p_grad = p_grad * min(1.0, max_norm / total)   # noqa: F841 - a new tensor: the parameter's .grad is not changed
    return total


def _clip_no_skip(params, max_norm):
    params = list(params)
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    return S["clip_gradients"](params, max_norm)


def _clip_always(params, max_norm):
    grads = [p.grad for p in params if p.grad is not None]
    total = torch.sqrt(sum((g ** 2).sum() for g in grads)).item()
    for g in grads:
        g.mul_(max_norm / total)        # also when the norm is below max_norm: scales small gradients up
    return total


def _clip_two_walks(params, max_norm):
    total = torch.sqrt(sum((p.grad ** 2).sum() for p in params if p.grad is not None)).item()
    for p in params:                    # a second walk: a generator is empty by now
        if p.grad is not None and total > max_norm:
            p.grad.mul_(max_norm / total)
    return total


from tests.exercise_rule_counterexamples_more import COUNTER_MORE  # noqa: E402 (exercises 4.3 to 8.1, the accuracy rule)

for _name, _table in COUNTER_MORE.items():
    COUNTER.setdefault(_name, {}).update(_table)
