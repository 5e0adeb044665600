"""Losses and their targets (chapter 7, section 16): what each torch loss class takes, and what a wrong target does.

Every row builds a real ``torch.nn`` loss on a 4-example batch (3 classes), with ``reduction="none"``, ``"mean"``
and ``"sum"``, and then feeds it the target a learner commonly gets wrong (a float class index, a (N, 1)
column, 0/1 where the loss wants -1/+1): torch either raises (its exception type is kept), or broadcasts, or
accepts it silently. ``knob_checks`` measures what the constructor's options change. Only shapes, dtypes,
exception types and booleans with a wide margin are returned: nothing depends on a CPU's last bit.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

N, C = 4, 3


@dataclass(frozen=True)
class LossCase:
    """One loss: how to build it for a reduction, its right arguments, and a common wrong target."""

    label: str
    make: Callable[[str], nn.Module]
    args: Callable[[], tuple]            # (input, ..., target): the arguments it expects
    wrong: Callable[[], tuple]           # the same with the common wrong target
    mistake: str                         # what the wrong target is, in words


def _batch() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(N, C, generator=g)
    return {"logits": logits, "score": torch.randn(N, generator=g), "other": torch.randn(N, generator=g),
            "emb": torch.randn(N, 5, generator=g), "emb2": torch.randn(N, 5, generator=g),
            "emb3": torch.randn(N, 5, generator=g), "value": torch.randn(N, generator=g),
            "classes": torch.tensor([0, 2, 1, 0]), "binary": torch.tensor([1.0, 0.0, 1.0, 0.0]),
            "signs": torch.tensor([1.0, -1.0, 1.0, -1.0]), "counts": torch.tensor([0.0, 2.0, 1.0, 3.0]),
            "multi": torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 1.0]]),
            "pixels": torch.randn(N, C, 2, 2, generator=g), "mask": torch.randint(0, C, (N, 2, 2), generator=g)}


def loss_cases() -> list[LossCase]:
    """The loss classes of the table, each with its right arguments and its common wrong target (chapter 7)."""
    b = _batch()
    lg, s, y, y01, pm = b["logits"], b["score"], b["classes"], b["binary"], b["signs"]
    w = torch.tensor([1.0, 2.0, 0.5])
    labels = torch.tensor([[0, 2, -1], [1, -1, 0], [0, 1, -1], [2, -1, 0]])   # MultiLabelMarginLoss: indices, -1 ends
    return [
        LossCase("CrossEntropyLoss", lambda r: nn.CrossEntropyLoss(reduction=r),
                 lambda: (lg, y), lambda: (lg, y.float()), "class index as float"),
        LossCase("CrossEntropyLoss", lambda r: nn.CrossEntropyLoss(reduction=r),
                 lambda: (lg, y), lambda: (lg, y[:, None]), "index as a (N, 1) column"),
        LossCase("CrossEntropyLoss, per pixel", lambda r: nn.CrossEntropyLoss(reduction=r),
                 lambda: (b["pixels"], b["mask"]), lambda: (b["pixels"].permute(0, 2, 3, 1), b["mask"]),
                 "logits (N, H, W, C)"),
        LossCase("NLLLoss(weight)", lambda r: nn.NLLLoss(weight=w, reduction=r),
                 lambda: (lg.log_softmax(1), y), lambda: (lg.log_softmax(1), y.float()), "class index as float"),
        LossCase("MultiMarginLoss(weight)", lambda r: nn.MultiMarginLoss(weight=w, reduction=r),
                 lambda: (lg, y), lambda: (lg, y.float()), "class index as float"),
        LossCase("BCELoss(weight)", lambda r: nn.BCELoss(weight=torch.full((N,), 2.0), reduction=r),
                 lambda: (s.sigmoid(), y01), lambda: (3 * s, y01), "logits, not probabilities"),
        LossCase("BCELoss", lambda r: nn.BCELoss(reduction=r),
                 lambda: (s.sigmoid(), y01), lambda: (s.sigmoid(), y01.long()), "0/1 labels as long"),
        LossCase("BCEWithLogitsLoss", lambda r: nn.BCEWithLogitsLoss(reduction=r),
                 lambda: (s, y01), lambda: (s, y01.long()), "0/1 labels as long"),
        LossCase("BCEWithLogitsLoss", lambda r: nn.BCEWithLogitsLoss(reduction=r),
                 lambda: (s[:, None], y01[:, None]), lambda: (s[:, None], y01), "output (N, 1), target (N,)"),
        LossCase("MultiLabelSoftMarginLoss(weight)", lambda r: nn.MultiLabelSoftMarginLoss(weight=w, reduction=r),
                 lambda: (lg, b["multi"]), lambda: (lg, b["multi"].long()), "multi-hot as long"),
        LossCase("MultiLabelMarginLoss", lambda r: nn.MultiLabelMarginLoss(reduction=r),
                 lambda: (lg, labels), lambda: (lg, b["multi"].long()), "multi-hot, not indices"),
        LossCase("MSELoss", lambda r: nn.MSELoss(reduction=r),
                 lambda: (s, b["value"]), lambda: (s, b["value"][:, None]), "target (N, 1), output (N,)"),
        LossCase("L1Loss", lambda r: nn.L1Loss(reduction=r),
                 lambda: (s, b["value"]), lambda: (s[:, None], b["value"]), "output (N, 1), target (N,)"),
        LossCase("SmoothL1Loss", lambda r: nn.SmoothL1Loss(reduction=r),
                 lambda: (s, b["value"]), lambda: (s, b["value"][:, None]), "target (N, 1), output (N,)"),
        LossCase("HuberLoss", lambda r: nn.HuberLoss(reduction=r),
                 lambda: (s, b["value"]), lambda: (s, b["value"].long()), "target as long"),
        LossCase("PoissonNLLLoss", lambda r: nn.PoissonNLLLoss(reduction=r),
                 lambda: (s, b["counts"]), lambda: (s, b["counts"][:3]), "3 targets for 4 outputs"),
        LossCase("GaussianNLLLoss", lambda r: nn.GaussianNLLLoss(reduction=r),
                 lambda: (s, b["value"], torch.ones(N)), lambda: (s, b["value"], -torch.ones(N)),
                 "a negative variance"),
        LossCase("KLDivLoss", lambda r: nn.KLDivLoss(reduction=r),
                 lambda: (lg.log_softmax(1), lg.softmax(1)), lambda: (lg.softmax(1), lg.softmax(1)),
                 "probabilities as input"),
        LossCase("MarginRankingLoss", lambda r: nn.MarginRankingLoss(reduction=r),
                 lambda: (s, b["other"], pm), lambda: (s, b["other"], y01), "0/1 instead of -1/+1"),
        LossCase("HingeEmbeddingLoss", lambda r: nn.HingeEmbeddingLoss(reduction=r),
                 lambda: (s.abs(), pm), lambda: (s.abs(), y01), "0/1 instead of -1/+1"),
        LossCase("SoftMarginLoss", lambda r: nn.SoftMarginLoss(reduction=r),
                 lambda: (s, pm), lambda: (s, y01), "0/1 instead of -1/+1"),
        LossCase("CosineEmbeddingLoss", lambda r: nn.CosineEmbeddingLoss(reduction=r),
                 lambda: (b["emb"], b["emb2"], pm), lambda: (b["emb"], b["emb2"], pm[:, None]), "target (N, 1)"),
        LossCase("TripletMarginLoss", lambda r: nn.TripletMarginLoss(reduction=r),
                 lambda: (b["emb"], b["emb2"], b["emb3"]), lambda: (b["emb"], b["emb2"], b["emb3"][:, :4]),
                 "negative of another width"),
        LossCase("TripletMarginWithDistanceLoss",
                 lambda r: nn.TripletMarginWithDistanceLoss(distance_function=nn.PairwiseDistance(), reduction=r),
                 lambda: (b["emb"], b["emb2"], b["emb3"]), lambda: (b["emb"], b["emb2"], b["emb3"][:3]),
                 "3 negatives for 4 anchors"),
    ]


def _shape(t: torch.Tensor) -> str:
    dtype = str(t.dtype).removeprefix("torch.")
    return f"{tuple(t.shape)} {dtype}"


def _attempt(loss: nn.Module, args: tuple) -> str:
    """What the loss does with `args`: torch's exception type, or 'accepted' with the output shape and a warning."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = loss(*args)
        except Exception as err:                    # torch's own type is the point: RuntimeError, ValueError, ...
            return type(err).__name__
    warned = ", " + caught[0].category.__name__ if caught else ""
    return f"accepted, 'none' {tuple(out.shape)}{warned}"


@dataclass(frozen=True)
class LossRow:
    label: str
    inputs: str          # the shapes and dtypes of the right arguments, target last
    none_shape: tuple[int, ...]
    mean_is_average: bool   # reduction="mean" equals the plain average of reduction="none"
    sum_is_total: bool
    mistake: str
    outcome: str


def loss_table() -> list[LossRow]:
    """One row per loss case: the arguments it takes, reductions compared, the wrong target's outcome (chapter 7)."""
    rows = []
    for case in loss_cases():
        args = case.args()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")          # KLDivLoss warns about 'mean': knob_checks shows why
            none, mean, total = (case.make(r)(*args) for r in ("none", "mean", "sum"))
        rows.append(LossRow(case.label, " | ".join(_shape(a) for a in args), tuple(none.shape),
                            bool(torch.isclose(mean, none.mean(), rtol=1e-4)),
                            bool(torch.isclose(total, none.sum(), rtol=1e-4)),
                            case.mistake, _attempt(case.make("none"), case.wrong())))
    return rows


def knob_checks() -> dict[str, bool | int]:
    """What the constructor options change, each checked against the plain loss (chapter 7, section 16)."""
    b = _batch()
    lg, s, y, y01 = b["logits"], b["score"], b["classes"], b["binary"]
    out: dict[str, bool | int] = {}
    # ignore_index: padded tokens (-100) give 0 in 'none' and leave the mean's denominator
    tokens = torch.tensor([0, 2, -100, 1, -100, -100])
    many = torch.randn(6, C, generator=torch.Generator().manual_seed(1))
    per = nn.CrossEntropyLoss(ignore_index=-100, reduction="none")(many, tokens)
    real = int((tokens != -100).sum())
    out["real tokens"] = real
    out["ignored give 0"] = bool((per[tokens == -100] == 0).all())
    mean = nn.CrossEntropyLoss(ignore_index=-100)(many, tokens)
    out["mean = sum / real tokens"] = bool(torch.isclose(mean, per.sum() / real))
    out["mean = sum / all tokens"] = bool(torch.isclose(mean, per.sum() / len(tokens)))
    nll = nn.NLLLoss(ignore_index=1, reduction="sum")(lg.log_softmax(1), y)
    out["NLLLoss ignore_index=1 drops class 1"] = bool(torch.isclose(
        nll, nn.NLLLoss(reduction="none")(lg.log_softmax(1), y)[y != 1].sum()))
    # weight: the mean is a weighted mean, sum(w_y * l) / sum(w_y)
    w = torch.tensor([1.0, 2.0, 0.5])
    plain = nn.NLLLoss(reduction="none")(lg.log_softmax(1), y)
    weighted = nn.NLLLoss(weight=w)(lg.log_softmax(1), y)
    out["weighted mean = sum(w*l)/sum(w)"] = bool(torch.isclose(weighted, (w[y] * plain).sum() / w[y].sum()))
    # pos_weight multiplies the positives' term only
    base = nn.BCEWithLogitsLoss(reduction="none")(s, y01)
    pos = nn.BCEWithLogitsLoss(pos_weight=torch.tensor(3.0), reduction="none")(s, y01)
    out["pos_weight=3: positives x3, negatives x1"] = bool(
        torch.allclose(pos[y01 == 1], 3 * base[y01 == 1]) and torch.allclose(pos[y01 == 0], base[y01 == 0]))
    per_example = nn.BCEWithLogitsLoss(weight=torch.tensor([2.0, 1.0, 1.0, 1.0]), reduction="none")(s, y01)
    out["weight scales each example"] = bool(torch.isclose(per_example[0], 2 * base[0]))
    # SmoothL1Loss(beta) and HuberLoss(delta): the same curve, scaled by beta
    v = b["value"] * 3
    out["HuberLoss(delta=0.5) = 0.5 * SmoothL1Loss(beta=0.5)"] = bool(torch.allclose(
        nn.HuberLoss(delta=0.5, reduction="none")(s, v), 0.5 * nn.SmoothL1Loss(beta=0.5, reduction="none")(s, v)))
    # KLDivLoss: 'mean' divides by every element, 'batchmean' by the batch; log_target takes log-probabilities
    kl = nn.KLDivLoss(reduction="batchmean")
    logp, q = lg.log_softmax(1), torch.randn(N, C, generator=torch.Generator().manual_seed(2)).softmax(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")              # torch warns that 'mean' is not the KL divergence: this is why
        elementwise = nn.KLDivLoss(reduction="mean")(logp, q)
    out["KLDivLoss 'mean' = 'batchmean' / C"] = bool(torch.isclose(elementwise, kl(logp, q) / C))
    out["log_target=True on log q = plain on q"] = bool(torch.isclose(
        nn.KLDivLoss(reduction="batchmean", log_target=True)(logp, q.log()), kl(logp, q)))
    # margins: a wide margin makes an already-right pair cost something
    far = torch.tensor([3.0]), torch.tensor([0.0]), torch.tensor([1.0])
    out["MarginRankingLoss: right by 3, margin 0 -> 0"] = float(nn.MarginRankingLoss()(*far)) == 0.0
    out["MarginRankingLoss: right by 3, margin 5 -> > 0"] = float(nn.MarginRankingLoss(margin=5.0)(*far)) > 1.0
    out["HingeEmbeddingLoss(margin=2): y=-1, distance 1 costs 1"] = float(
        nn.HingeEmbeddingLoss(margin=2.0)(torch.tensor([1.0]), torch.tensor([-1.0]))) == 1.0
    # a 0 label where -1/+1 is expected: no preference for two losses, both branches for the third
    x = torch.tensor([0.2, 0.5, 1.5, 3.0], requires_grad=True)
    zero = torch.zeros(4)
    for name, loss in (("MarginRankingLoss", lambda: nn.MarginRankingLoss(reduction="none")(x, torch.zeros(4), zero)),
                       ("SoftMarginLoss", lambda: nn.SoftMarginLoss(reduction="none")(x, zero))):
        value = loss()
        (grad,) = torch.autograd.grad(value.sum(), x)
        out[f"{name}: label 0 gives every score the same loss and a zero gradient"] = bool(
            (value == value[0]).all() and (grad == 0).all())
    hinge = nn.HingeEmbeddingLoss(margin=1.0, reduction="none")(x, zero)
    out["HingeEmbeddingLoss(margin=1): label 0 costs max(x, margin), both branches"] = bool(
        torch.equal(hinge.detach(), torch.maximum(x.detach(), torch.tensor(1.0))))
    out["CosineEmbeddingLoss(margin=0.5): orthogonal pair, y=-1, costs 0"] = float(nn.CosineEmbeddingLoss(margin=0.5)(
        torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]]), torch.tensor([-1.0]))) == 0.0
    a, p, n = b["emb"], b["emb2"], b["emb3"]
    swapped = nn.TripletMarginLoss(margin=1.0, swap=True, reduction="none")(a, p, n)
    out["TripletMarginLoss swap=True never lower"] = bool((swapped >= nn.TripletMarginLoss(
        margin=1.0, reduction="none")(a, p, n) - 1e-6).all())
    distance = nn.TripletMarginWithDistanceLoss(margin=1.0, swap=True, reduction="none")(a, p, n)
    out["TripletMarginWithDistanceLoss swap=True never lower"] = bool((distance >= nn.TripletMarginWithDistanceLoss(
        margin=1.0, reduction="none")(a, p, n) - 1e-6).all())
    # variance and rate floors: eps keeps log(0) out; full adds the constant term
    zero_var = nn.GaussianNLLLoss(eps=1e-3)(s, b["value"], torch.zeros(N))
    out["GaussianNLLLoss: variance 0 is clamped to eps, finite"] = bool(torch.isfinite(zero_var))
    out["GaussianNLLLoss full=True adds 0.5*log(2*pi)"] = bool(torch.isclose(
        nn.GaussianNLLLoss(full=True)(s, b["value"], torch.ones(N)) - nn.GaussianNLLLoss()(s, b["value"], torch.ones(N)),
        torch.tensor(0.9189385)))
    rate = torch.tensor([0.0, 2.0, 1.0, 3.0])
    poisson = nn.PoissonNLLLoss(log_input=False, eps=1e-8, reduction="none")(rate, b["counts"])
    out["PoissonNLLLoss(log_input=False): rate 0 finite via eps"] = bool(torch.isfinite(poisson).all())
    out["PoissonNLLLoss full=True adds Stirling for counts > 1 only"] = bool(
        (nn.PoissonNLLLoss(full=True, reduction="none")(s, b["counts"])
         - nn.PoissonNLLLoss(reduction="none")(s, b["counts"]) != 0).tolist() == [False, True, False, True])
    out["MultiMarginLoss p=2, margin=2 costs more than p=1, margin=1"] = bool(
        nn.MultiMarginLoss(p=2, margin=2.0)(lg, y) > nn.MultiMarginLoss(p=1, margin=1.0)(lg, y))
    return out


def ctc_checks() -> dict[str, bool | str]:
    """CTCLoss: a target longer than the input is impossible (loss inf), zero_infinity turns it into 0 (chapter 7)."""
    g = torch.Generator().manual_seed(3)
    log_probs = torch.randn(5, 2, 4, generator=g).log_softmax(2)          # (T=5, N=2, C=4), blank 0
    targets = torch.tensor([[1, 2, 3, 1, 2, 3], [1, 2, 0, 0, 0, 0]])
    input_lengths, target_lengths = torch.tensor([5, 5]), torch.tensor([6, 2])
    plain = nn.CTCLoss(blank=0, reduction="none")(log_probs, targets, input_lengths, target_lengths)
    zeroed = nn.CTCLoss(blank=0, reduction="none", zero_infinity=True)(log_probs, targets, input_lengths,
                                                                        target_lengths)
    return {"'none' shape": str(tuple(plain.shape)),
            "6 labels in 5 steps: inf": bool(torch.isinf(plain[0])), "2 labels in 5 steps: finite": bool(
                torch.isfinite(plain[1])), "zero_infinity=True: the impossible one becomes 0": bool(zeroed[0] == 0),
            "zero_infinity=True: the possible one unchanged": bool(torch.isclose(zeroed[1], plain[1]))}


def ctc_length_lines(batch: int = 4, steps: int = 5) -> list[str]:
    """CTCLoss on a short last batch (2 of a loader's 4) with input_lengths built once for the full batch, as a
    CRNN loop that preallocates `preds_size` does, then built from the batch itself (chapter 7)."""
    g = torch.Generator().manual_seed(3)
    log_probs = torch.randn(steps, 2, 5, generator=g).log_softmax(2)          # (T, N=2: the last batch, C)
    targets, target_lengths = torch.tensor([[1, 2], [3, 4]]), torch.tensor([2, 2])
    lines = []
    for label, lengths in ((f"input_lengths of the full batch ({batch})", torch.full((batch,), steps)),
                           ("input_lengths from log_probs.shape", torch.full((log_probs.shape[1],), log_probs.shape[0]))):
        try:
            loss = nn.CTCLoss()(log_probs, targets, lengths, target_lengths)
            lines.append(f"CTCLoss on a last batch of 2, {label}: loss finite: {bool(torch.isfinite(loss))}")
        except RuntimeError as error:
            lines.append(f"CTCLoss on a last batch of 2, {label}: RuntimeError: {error}")
    return lines


def broadcast_checks() -> dict[str, bool]:
    """Elementwise losses broadcast a target whose shape differs from the prediction's, with a UserWarning: harmless
    when only a dimension of size 1 differs ([] against [1]); a different loss when one target is broadcast over
    several predictions (80 predicted modes against one true trajectory: the mean over modes, every mode pulled to
    the target, not the best mode's loss) (chapter 7)."""
    g = torch.Generator().manual_seed(3)
    out: dict[str, bool] = {}
    pred, target = torch.tensor(0.7), torch.tensor([0.2])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = nn.functional.mse_loss(pred, target)
    out["mse_loss of a [] prediction and a [1] target: warns"] = any("target size" in str(w.message) for w in caught)
    out["  equal to the loss with matching shapes"] = bool(value == nn.functional.mse_loss(pred.reshape(1), target))
    modes, truth = torch.randn(4, 80, 8, 3, generator=g), torch.randn(4, 1, 8, 3, generator=g)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        broadcast = nn.functional.l1_loss(modes, truth)
    per_mode = (modes - truth).abs().mean(dim=(2, 3))                        # (batch, mode)
    out["l1_loss of (4, 80, 8, 3) modes and a (4, 1, 8, 3) target: warns"] = any(
        "target size" in str(w.message) for w in caught)
    out["  equal to the mean over the 80 modes of each mode's loss"] = bool(torch.isclose(broadcast, per_mode.mean()))
    out["  the best mode's loss (min over modes) is smaller"] = bool(per_mode.min(1).values.mean() < broadcast)
    return out


def contrastive_scale_lines(batch: int = 4) -> list[str]:
    """An in-batch contrastive loss (InfoNCE, MultipleNegativesRankingLoss): cross-entropy over scale * the cosine
    similarities of each anchor with every positive in the batch, its own as the target. At scale 0 every logit
    is 0, so the loss is log(batch) whatever the embeddings and no gradient reaches them (chapter 7)."""
    g = torch.Generator().manual_seed(4)
    lines = [f"batch {batch}: log({batch}) = {math.log(batch):.4f}"]
    for scale in (0.0, 20.0):
        for aligned in (True, False):
            anchors = torch.randn(batch, 16, generator=g, requires_grad=True)
            positives = (anchors.detach() + 0.1 * torch.randn(batch, 16, generator=g) if aligned
                         else torch.randn(batch, 16, generator=g))
            logits = scale * nn.functional.normalize(anchors, dim=1) @ nn.functional.normalize(positives, dim=1).T
            loss = nn.functional.cross_entropy(logits, torch.arange(batch))
            loss.backward()
            lines.append(f"scale {scale:>4g}, positives {'close to' if aligned else 'unrelated to'} their anchors: "
                         f"loss {loss.item():.{4 if scale == 0 else 2}f}; every gradient on the anchors 0: "
                         f"{bool((anchors.grad == 0).all())}")
    return lines


def distillation_kl_lines(temperature: float = 2.0) -> list[str]:
    """Knowledge distillation's KL term, F.kl_div(input, target): torch reads `input` as log-probabilities and
    `target` as probabilities (log-probabilities with log_target=True) and sums target * (log target - input).
    Student log_softmax against teacher softmax is the KL divergence, never negative; softmax on both reads the
    student's probabilities as logs and can go negative. One batch of 4 over 5 classes against the KL by hand."""
    g = torch.Generator().manual_seed(0)
    student, teacher = torch.randn(4, 5, generator=g), torch.randn(4, 5, generator=g)
    t = temperature
    p_teacher, log_student = (teacher / t).softmax(1), (student / t).log_softmax(1)
    by_hand = (p_teacher * (p_teacher.log() - log_student)).sum(1).mean()
    right = nn.functional.kl_div(log_student, p_teacher, reduction="batchmean")
    logs = nn.functional.kl_div(log_student, (teacher / t).log_softmax(1), reduction="batchmean", log_target=True)
    wrong = nn.functional.kl_div((student / t).softmax(1), p_teacher, reduction="batchmean")
    norms = []
    for each in (1.0, 2.0, 4.0):
        leaf = student.clone().requires_grad_(True)
        nn.functional.kl_div((leaf / each).log_softmax(1), (teacher / each).softmax(1), reduction="batchmean").backward()
        norms.append((each, leaf.grad.norm().item()))
    return [f"KL(teacher || student) by hand, temperature {t:g}, mean over 4 examples: {by_hand.item():.4f}",
            f"kl_div(student log_softmax, teacher softmax, 'batchmean'):                  {right.item():.4f}",
            f"kl_div(student log_softmax, teacher log_softmax, log_target=True):          {logs.item():.4f}",
            f"kl_div(student softmax, teacher softmax): {wrong.item():.4f}, negative: {wrong.item() < 0}",
            "the KL term's gradient on the student's logits at T = 1, 2, 4: norm "
            + ", ".join(f"{n:.3f}" for _, n in norms) + "; times T²: " + ", ".join(f"{n * e * e:.2f}" for e, n in norms)]


def smoothing_index_lines(vocab: int = 1000, ignore_index: int = -100) -> list[str]:
    """A hand-written label-smoothing loss that zeroes `buffer[ignore_index]` to keep padding out: Python reads
    -100 as the 100th entry from the end, a real token. torch's CrossEntropyLoss(label_smoothing=..., ignore_index)
    skips the targets equal to ignore_index instead; a hand-written one must mask those positions itself."""
    buffer = torch.full((vocab,), 0.1 / (vocab - 2))
    buffer[ignore_index] = 0
    zeroed = (buffer == 0).nonzero().flatten().tolist()
    g = torch.Generator().manual_seed(1)
    logits, targets = torch.randn(4, vocab, generator=g), torch.tensor([3, 7, ignore_index, ignore_index])
    smoothed = torch.full((4, vocab), 0.1 / (vocab - 2))
    try:
        smoothed.scatter_(1, targets[:, None], 0.9)          # the usual hand-written loss: the target's share
        scatter = "ran"
    except RuntimeError as error:
        scatter = f"RuntimeError: {error}"
    ce = nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=ignore_index)(logits, targets)
    real = nn.CrossEntropyLoss(label_smoothing=0.1)(logits[:2], targets[:2])
    return [f"buffer of {vocab} smoothed probabilities, buffer[{ignore_index}] = 0: the entry zeroed is {zeroed}, "
            f"token {zeroed[0]} of the vocabulary",
            f"scatter_ of the targets' share with padded targets of {ignore_index}: {scatter}",
            f"CrossEntropyLoss(label_smoothing=0.1, ignore_index={ignore_index}) on 2 real and 2 padded targets "
            f"equals the loss of the 2 real ones alone: {torch.allclose(ce, real)}"]


def box_normaliser_lines(boxes=(1, 5, 0)) -> list[str]:
    """Detection losses summed over the boxes of a batch and divided by a count from the data (the batch's boxes):
    each box weighs the same, so an image weighs by its number of boxes; a batch with no boxes divides 0 by 0.
    Clamping the count to at least 1 is the usual guard (chapter 7)."""
    total = sum(int(n) for n in boxes)
    weights = [n / total for n in boxes]
    empty = torch.zeros(0).sum() / torch.tensor(0.0)
    guarded = torch.zeros(0).sum() / torch.tensor(0.0).clamp(min=1)
    with_boxes = sum(1 for n in boxes if n)
    per_image = [round(1 / with_boxes, 3) if n else 0.0 for n in boxes]
    grads = {}
    for how in ("selected by indexing", "masked by multiplying"):
        out = torch.randn(4, generator=torch.Generator().manual_seed(0), requires_grad=True)   # 4 box predictions
        present = torch.zeros(4, dtype=torch.bool)                                            # none is a box
        terms = out[present].abs() if how == "selected by indexing" else out.abs() * present
        loss = terms.sum() / present.sum()
        loss.backward()
        grads[how] = (loss.item(), "NaN" if out.grad.isnan().any() else "all 0" if (out.grad == 0).all() else "finite")
    return [f"a batch of {len(boxes)} images with {list(boxes)} boxes, divided by its {total} boxes: the images weigh "
            f"{[round(w, 3) for w in weights]} of the loss",
            f"a batch whose images hold no box: 0 / 0 = {empty.item()}; with the count clamped to at least 1: "
            f"{guarded.item()}",
            f"each image's loss divided by its own boxes, then averaged over the images that have some: the images "
            f"weigh {per_image}",
            *(f"no box in the batch, box terms {how}: loss {value}, gradient {grad}" for how, (value, grad) in
              grads.items())]
