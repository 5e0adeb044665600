"""The bug museum's registry (chapter 5): each bug is a declarative variation of one loop operation.

A ``Bug`` names the operation it changes and the variant the loop runs instead:

- step operations (``STEP``) can be skipped (``"skip"``) or moved (``"before:backward"``,
  ``"after:optimizer_step"``): ``make_plan`` rewrites the step's recipe;
- other variants change how an operation runs (``compute_loss: "unscaled"``, ``log: "tensor"``,
  ``no_grad: "skip"`` ...), and the loop's one branch point for that operation consults them.

Exhibit 5's optimizer/parameter truths are not loop variations: their entries carry a ``demo``
that measures what torch 2.13 really does. Symptoms are what the course's tests measured.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import torch
from torch import nn

from course_utils.engine.data import make_spiral
from course_utils.engine.bug_demos import (scheduler_before_optimizer, softmax_before_cross_entropy,
                                          update_schedule_per_epoch)
from course_utils.engine.models import MLP, make_optimizer

# the operations of one training step, in chapter 3's order: the healthy recipe
STEP = ("zero_grad", "forward", "compute_loss", "backward", "clip", "optimizer_step", "scheduler_step")


@dataclass(frozen=True)
class Bug:
    """One exhibit: the operation it changes, the variant the loop runs, what you see, how to fix it."""

    name: str
    title: str
    operation: str
    variant: str | None      # None: not injected into the loop; `demo` measures it instead
    symptom: str
    fix: str
    chapter: int = 5
    demo: Callable[[], object] | None = field(default=None, compare=False)


# --- exhibit 5: optimizer / parameter truths, measured ------------------------------------------

@dataclass(frozen=True)
class FreezeDemo:
    """How far weights frozen after the optimizer was built moved while training went on."""

    optimizer: str
    set_to_none: bool
    frozen_change: float    # largest |change| of a frozen (body) weight after freezing
    trained_change: float   # largest |change| of a still-trained (head) weight meanwhile


@dataclass(frozen=True)
class HeadDemo:
    """A head swapped in after the optimizer was built: does it get gradients, does it move?"""

    head_in_optimizer: bool
    head_grad_norm: float
    head_change: float
    body_change: float


@dataclass(frozen=True)
class CastDemo:
    """model.half() after the optimizer was built: same Parameter objects, and does a step still move them?"""

    same_parameters: bool
    dtype_seen_by_optimizer: str
    weight_change_after_step: float
    overwrite_flag: bool    # torch.__future__.get_overwrite_module_params_on_conversion()
    stateful_step_error: str   # Adam with state from one float32 step, then .half(), then a step: what torch says


def _demo_batch(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    return make_spiral(96, seed=seed).tensors


def _train(model: nn.Module, optimizer: torch.optim.Optimizer, batch, steps: int, set_to_none: bool = True):
    inputs, targets = batch
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=set_to_none)
        nn.functional.cross_entropy(model(inputs), targets).backward()
        optimizer.step()


def _change(before: list[torch.Tensor], module: nn.Module) -> float:
    return max((p.detach() - b).abs().max().item() for b, p in zip(before, module.parameters()))


def _snapshot(module: nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def freeze_after_optimizer(optimizer: str = "adam", set_to_none: bool = True, steps: int = 5,
                           seed: int = 0, weight_decay: float | None = None) -> FreezeDemo:
    """Exhibit 5: train, then freeze the body with requires_grad_(False) and train on; measure what moved.

    weight_decay=None keeps the optimizer's torch default (0.01 for AdamW, 0 for the others)."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = MLP(hidden=16)
    opt = make_optimizer(optimizer, model.parameters(), lr=0.05, weight_decay=weight_decay)
    batch = _demo_batch(seed)
    _train(model, opt, batch, steps, set_to_none)
    model.body.requires_grad_(False)
    body, head = _snapshot(model.body), _snapshot(model.head)
    _train(model, opt, batch, steps, set_to_none)
    return FreezeDemo(optimizer, set_to_none, _change(body, model.body), _change(head, model.head))


def head_after_optimizer(steps: int = 10, seed: int = 0) -> HeadDemo:
    """Exhibit 5: swap in a new head after building the optimizer; it gets gradients but never moves."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = MLP(hidden=16)
        opt = make_optimizer("adam", model.parameters(), lr=0.05)
        model.head = nn.Linear(16, 3)
    body, head = _snapshot(model.body), _snapshot(model.head)
    _train(model, opt, _demo_batch(seed), steps)
    tracked = {id(p) for group in opt.param_groups for p in group["params"]}
    grad_norm = torch.linalg.vector_norm(torch.cat([p.grad.flatten() for p in model.head.parameters()]))
    return HeadDemo(all(id(p) in tracked for p in model.head.parameters()), grad_norm.item(),
                    _change(head, model.head), _change(body, model.body))


def half_after_optimizer(seed: int = 0) -> CastDemo:
    """Exhibit 5: model.half() after building the optimizer: same Parameter objects, fine while the optimizer
    holds no state (SGD before any step); Adam with state from a float32 step then fails (chapter 5)."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = MLP(hidden=16)
    opt = make_optimizer("sgd", model.parameters(), lr=0.1)
    model.half()
    tracked = opt.param_groups[0]["params"]
    same = len(tracked) == len(list(model.parameters())) and all(
        p is q for p, q in zip(tracked, model.parameters()))
    before = _snapshot(model)
    inputs, targets = _demo_batch(seed)
    _train(model, opt, (inputs.half(), targets), 1)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        stateful = MLP(hidden=16)
    adam = make_optimizer("adam", stateful.parameters(), lr=0.01)
    _train(stateful, adam, (inputs, targets), 1)              # Adam now keeps float32 moments
    stateful.half()
    try:
        _train(stateful, adam, (inputs.half(), targets), 1)
        error = "no error"
    except RuntimeError as exc:
        error = f"RuntimeError: {str(exc).splitlines()[0]}"
    return CastDemo(same, str(tracked[0].dtype), _change(before, model),
                    torch.__future__.get_overwrite_module_params_on_conversion(), error)


# --- the registry --------------------------------------------------------------------------------

_ENTRIES = [
    Bug("missing_zero_grad", "Missing zero_grad", "zero_grad", "skip",
        "backward() adds into .grad, so every update uses the sum of all gradients so far: the gradient "
        "norm climbs far above the healthy run's (it grows while the gradients agree, then levels off once new "
        "ones average out). Plain SGD then acts like momentum that never decays: at a small lr it "
        "may even learn faster at first, then the loss oscillates; at a larger lr it swings far above the "
        "healthy run's (without reaching NaN in chapter 5's exhibit). Adam does not "
        "explode (it normalises each update to about lr) but follows stale gradients: the loss stops falling "
        "and climbs back (above its first epoch's in chapter 5's runs), validation accuracy stays far below the "
        "healthy run's.",
        "Call optimizer.zero_grad() once per update, before the next backward()."),
    Bug("zero_grad_after_backward", "zero_grad between backward and step", "zero_grad", "after:backward",
        "The update never sees a gradient: zero_grad() (set_to_none=True) leaves every .grad None and "
        "optimizer.step() skips every parameter. The weights never move, the logged pre-clip gradient norm "
        "reads 0, the loss stays where it started (about log C). With accumulation, the first micro-batch "
        "of every window is thrown away instead. Nothing accumulates here; that is missing_zero_grad.",
        "Clear gradients before forward (or right after step), never between backward and step."),
    Bug("eval_in_train_mode", "Validating in train mode", "eval_mode", "skip",
        "Dropout stays on and BatchNorm normalises with batch statistics: the same validation set gives a "
        "different loss and accuracy on every pass, and each pass moves BatchNorm's running mean and "
        "variance, so validation data seeps into the model's buffers.",
        "Call model.eval() before validating (and model.train() before training again)."),
    Bug("missing_no_grad", "Evaluation without no_grad", "no_grad", "skip",
        "Evaluation builds a graph for every batch and saves its activations: evaluation graph memory is "
        "above 0 (exactly 0 under no_grad). Losses and accuracies are unchanged. It turns into a leak when "
        "the evaluation also keeps its loss tensors (see graph_attached_logging).",
        "Wrap evaluation in torch.no_grad() (or torch.inference_mode())."),
    Bug("graph_attached_logging", "Logging the loss tensor, not its value", "log", "tensor",
        "In training, backward() still frees each step's saved activations while the log holds the loss, "
        "so saved-for-backward memory stays flat. What piles up is the graph's bookkeeping: each kept loss "
        "holds its chain of autograd nodes, and the count grows by the same amount every step until the "
        "log itself is dropped (host memory, not counted as saved bytes). Add evaluation without no_grad, where "
        "no backward frees anything, and every kept validation loss pins its batch's activations: "
        "evaluation memory grows batch by batch.",
        "Log loss.item() (or loss.detach()), never the graph-attached tensor."),
    Bug("missing_train_switch", "Not switching back to train()", "train_mode", "skip",
        "After the first evaluation the model stays in eval mode: from epoch 2 on it trains with dropout "
        "off and BatchNorm frozen on running statistics. No error; with dropout the training loss drops "
        "below the healthy run's, because the regularisation you asked for is silently gone.",
        "Call model.train() at the start of every training epoch."),
    Bug("clip_before_backward", "Clipping before backward", "clip", "before:backward",
        "Clipping runs before this step's gradients exist (zero_grad left them None), so it clips nothing: "
        "the logged pre-clip norm reads 0 and the run is identical to one without clipping. With "
        "accumulation it clips the window's partial sum, before the last micro-batch is added.",
        "Clip after backward() and before optimizer.step()."),
    Bug("clip_after_step", "Clipping after the step", "clip", "after:optimizer_step",
        "Clipping rescales gradients that step() has already used and zero_grad() will discard: the run is "
        "identical, loss for loss, to one without clipping, while the logged norm looks normal.",
        "Clip after backward() and before optimizer.step()."),
    Bug("epoch_schedule_per_batch", "Epoch schedule stepped every batch", "scheduler_step", "every_batch",
        "A schedule counted in epochs advances every batch, len(loader) times too fast: StepLR reaches after "
        "k batches the lr meant for epoch k; CosineAnnealingLR(T_max=epochs) finishes its descent within "
        "T_max batches and then, being periodic, climbs back: the lr follows a cosine wave with a period of "
        "2·T_max batches instead of falling once over the run.",
        "Step an epoch-based scheduler once per epoch, after the batch loop."),
    Bug("unscaled_accumulation", "Accumulating with misweighted losses", "compute_loss", "unscaled",
        "Each window's gradient is the sum of its K micro-batch means, not their mean: the first update's "
        "gradient norm is exactly K times the healthy one (r times in a final window of r). For SGD that "
        "is a K-fold learning rate. Adam barely notices: dividing by the gradient's RMS cancels a constant "
        "factor, up to eps. The mirror image: an epoch's short last window of r micro-batches flushed with "
        "every loss still divided by K is an update with r/K of the weight.",
        "Weight each micro-batch's mean loss by its share of the window's examples, n_i / n_window, before "
        "backward() (1/K only in a full window of equal batches)."),
    Bug("accumulation_without_flush", "Accumulation without the end-of-epoch flush", "optimizer_step",
        "no_flush",
        "With only `if (i + 1) % K == 0: step()`, an epoch of n micro-batches makes floor(n/K) updates "
        "instead of ceil(n/K) (chapter 0's 78 instead of 79). The last partial window's gradients are either "
        "wiped by a zero_grad() at the next epoch's start, and never used (what this registry's variant does), "
        "or, in a loop that clears only after a step, added into the next epoch's first update, which then "
        "sums more than K micro-batches.",
        "Also step after an epoch's last micro-batch: `(i + 1) % K == 0 or i + 1 == len(loader)`."),
    Bug("mean_of_batch_means", "Averaging validation by batch", "average", "batch",
        "The mean of per-batch means weights a small last batch like a full one: validation loss and "
        "accuracy are off whenever the validation set is not a multiple of the batch size (exact when it is).",
        "Weight each batch by its size: sum(mean_loss * n) / sum(n)."),
    Bug("data_leakage", "Data leakage", "data", "overlap",
        "Part of the validation set is copied from the training set: validation accuracy rises toward "
        "training accuracy, while a clean held-out test set scores the very same model no better: the "
        "validation-test gap widens. The model is unchanged; only the measurement flatters it.",
        "Split first, remove duplicates across splits, fit preprocessing on the training split only."),
    Bug("freeze_after_optimizer", "Freezing after building the optimizer", "optimizer", None,
        "Harmless with the default zero_grad(set_to_none=True): frozen parameters keep .grad = None and "
        "every optimizer skips them. With zero_grad(set_to_none=False), once they have had a gradient (frozen "
        "mid-training, after steps), their .grad is a zero tensor and optimizers with state keep moving them: SGD with momentum (its buffer), Adam and AdamW (their "
        "moments), and any optimizer with weight decay, plain SGD included (the decay term lambda*w is not "
        "zero). Plain SGD without weight decay leaves them still.",
        "Freeze first, then build the optimizer over the trainable parameters only.",
        demo=freeze_after_optimizer),
    Bug("head_after_optimizer", "A head added after building the optimizer", "optimizer", None,
        "A head assigned after the optimizer was built gets gradients in backward() but belongs to no "
        "param group: it never moves, and the rest of the model trains around a random head.",
        "Build the optimizer once the model is final (or add_param_group the new parameters).",
        demo=head_after_optimizer),
    Bug("scheduler_before_optimizer", "scheduler.step() before optimizer.step()", "scheduler_step", None,
        "The schedule runs one unit ahead: every update uses the learning rate meant for the next one. The "
        "first value (a warmup's smallest step, or epoch 1's lr) is never used, and a cosine to 0 spends its "
        "last update at lr 0. torch warns only at the first call, and also, wrongly, when AMP skipped a step.",
        "Call scheduler.step() after optimizer.step() (an epoch schedule: after the epoch's batch loop).",
        demo=scheduler_before_optimizer),
    Bug("update_schedule_per_epoch", "Per-update schedule stepped once per epoch", "scheduler_step", None,
        "OneCycleLR (and CyclicLR) count updates: stepped once per epoch, the schedule advances len(loader) "
        "times too slowly. With total_steps sized for the whole run, training ends while the warmup has "
        "barely begun: the lr never comes near max_lr and never anneals (5 epochs of 20 updates here: the "
        "largest lr used is 0.0084 instead of 0.1, and the last is 0.0084 instead of 4e-07).",
        "Step a per-update schedule after every optimizer.step(), inside the batch loop.",
        demo=update_schedule_per_epoch),
    Bug("softmax_before_cross_entropy", "softmax before cross_entropy", "compute_loss", None,
        "cross_entropy applies its own log-softmax, so probabilities get squashed twice: the loss can never "
        "reach 0 and its gradients shrink (about 3 times smaller at the first update here), so training "
        "crawls and stalls above the healthy run's loss.",
        "Pass the raw logits to cross_entropy (or use log_softmax with nll_loss); softmax only for reporting.",
        demo=softmax_before_cross_entropy),
    Bug("half_after_optimizer", "model.half()/.to() after building the optimizer", "optimizer",
        None,
        ".half() and .to() convert parameters in place (their .data is swapped; "
        "torch.__future__.get_overwrite_module_params_on_conversion() is False), so the optimizer still "
        "holds the model's own Parameter objects: harmless while it has no state (SGD, or before the first "
        "step). Once Adam has taken a step, its moments keep the old dtype (and device), and the next "
        "step after .half() raises a dtype error.",
        "Convert the model (dtype, device) before building the optimizer; to convert later, rebuild the "
        "optimizer or cast its state too.",
        demo=half_after_optimizer),
]
BUGS: dict[str, Bug] = {bug.name: bug for bug in _ENTRIES}
LOOP_BUGS = tuple(name for name, bug in BUGS.items() if bug.variant is not None)


def bug_table() -> list[tuple[str, str, str, str]]:
    """Rows (name, operation, symptom, fix) for chapter 5's quick-reference table and chapter 9's cheat sheet."""
    return [(bug.name, bug.operation, bug.symptom, bug.fix) for bug in BUGS.values()]


# --- from bug names to the loop's plan -----------------------------------------------------------

@dataclass(frozen=True)
class Plan:
    """How a run performs each operation: the step's recipe and the variants the active bugs ask for."""

    recipe: tuple[str, ...] = STEP
    variants: dict[str, str] = field(default_factory=dict)

    def variant(self, operation: str) -> str:
        """The active variant of `operation`, or "healthy"."""
        return self.variants.get(operation, "healthy")


def make_plan(bugs: Iterable[str]) -> Plan:
    """Turn bug names into a plan: each bug changes one operation; two may not change the same one (ch. 5, 6)."""
    variants: dict[str, str] = {}
    chosen: dict[str, str] = {}
    for name in bugs:
        if name not in BUGS:
            raise ValueError(f"bugs: unknown bug {name!r}; known loop bugs: {', '.join(LOOP_BUGS)}")
        bug = BUGS[name]
        if bug.variant is None:
            raise ValueError(f"bugs: {name!r} is not a loop variation; run BUGS[{name!r}].demo() instead")
        if bug.operation in chosen:
            raise ValueError(f"bugs: {chosen[bug.operation]!r} and {name!r} both change {bug.operation}; "
                             "pick one")
        chosen[bug.operation], variants[bug.operation] = name, bug.variant
    recipe = list(STEP)
    for operation, variant in variants.items():
        if operation in STEP and (variant == "skip" or ":" in variant):
            recipe.remove(operation)
            if variant != "skip":  # "before:backward", "after:optimizer_step": the operation moves
                where, anchor = variant.split(":")
                recipe.insert(recipe.index(anchor) + (where == "after"), operation)
    return Plan(tuple(recipe), variants)
