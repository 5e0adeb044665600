"""Segmentation metrics by hand: pixel accuracy, IoU and Dice per class, and how averaging them changes them (ch. 4).

Twelve 32x32 masks, background (class 0) and two object classes: a square of class 1 in every image (side 4
to 9), a square of class 2 in half of them (side 2 to 7), so objects cover a few percent of the pixels, as in most segmentation sets.
Two predictions: all background (a model that learned the majority class), and a model that finds every object
but draws it one pixel too wide on two sides (boundary errors). Every metric comes from one confusion matrix
(``torch.bincount``), or from one per image; Dice is also computed from its own definition, 2|A and B| / (|A| +
|B|), to check Dice = 2 IoU / (1 + IoU).
"""
from __future__ import annotations

import math

import torch

SIZE, IMAGES, CLASSES = 32, 12, 3


def masks() -> torch.Tensor:
    """(IMAGES, SIZE, SIZE) int64 labels: class 1 a square of side 4 to 9 in every image, class 2 a square of side
    2 to 7 in the even ones (small and large objects, as real sets have)."""
    out = torch.zeros(IMAGES, SIZE, SIZE, dtype=torch.long)
    for i in range(IMAGES):
        r, c, one, two = 2 + (5 * i) % 12, 3 + (7 * i) % 12, 4 + i % 6, 2 + (i // 2) % 6
        out[i, r:r + one, c:c + one] = 1
        if i % 2 == 0:
            out[i, r + 11:r + 11 + two, c + 10:c + 10 + two] = 2      # off the last row and column
    return out


def too_wide(labels: torch.Tensor) -> torch.Tensor:
    """Every object drawn one pixel too wide to the right and downwards (background pixels next to it take its
    class), the typical boundary error."""
    out = labels.clone()
    for shift in ((0, 1), (1, 0)):
        moved = torch.roll(labels, shifts=shift, dims=(1, 2))
        out = torch.where((out == 0) & (moved > 0), moved, out)
    return out


def confusion(target: torch.Tensor, predicted: torch.Tensor) -> torch.Tensor:
    """confusion[t, p] = pixels of true class t predicted as p."""
    return torch.bincount(target.flatten() * CLASSES + predicted.flatten(), minlength=CLASSES ** 2).reshape(
        CLASSES, CLASSES)


def iou_per_class(matrix: torch.Tensor) -> list[float]:
    """Intersection over union for each class; NaN where the class appears in neither target nor prediction."""
    hit = matrix.diag().double()
    union = matrix.sum(0).double() + matrix.sum(1).double() - hit
    return [(h / u).item() if u > 0 else math.nan for h, u in zip(hit, union)]


def dice(target: torch.Tensor, predicted: torch.Tensor, cls: int) -> float:
    """2|A and B| / (|A| + |B|) for one class; NaN when the class is in neither."""
    a, b = target == cls, predicted == cls
    total = a.sum().item() + b.sum().item()
    return 2 * (a & b).sum().item() / total if total else math.nan


def segmentation_report() -> dict[str, object]:
    target = masks()
    found: dict[str, object] = {"foreground": (target > 0).double().mean().item()}
    for name, predicted in (("all background", torch.zeros_like(target)), ("one pixel too wide", too_wide(target))):
        matrix = confusion(target, predicted)
        iou = iou_per_class(matrix)
        whole = [dice(target, predicted, c) for c in range(CLASSES)]
        per_image = [[dice(t, p, 2) for t, p in zip(target, predicted)]]
        found[name] = {
            "accuracy": (matrix.diag().sum() / matrix.sum()).item(), "iou": iou,
            "mean_iou": sum(iou) / CLASSES, "mean_iou_objects": sum(iou[1:]) / (CLASSES - 1), "dice": whole,
            "dice_from_iou": all(abs(d - 2 * i / (1 + i)) < 1e-12 for d, i in zip(whole, iou) if i == i),
            "class2_per_image": per_image[0],
        }
    return found


def _mean(values, empty: float | None) -> float:
    """The mean of per-image values; NaN ones (the class absent from target and prediction) dropped (empty=None)
    or counted as `empty`."""
    kept = [v for v in values if v == v] if empty is None else [v if v == v else empty for v in values]
    return sum(kept) / len(kept)


def _false_positive_dice(target: torch.Tensor, predicted: torch.Tensor) -> tuple[float, float]:
    """Class 2's per-image Dice when one pixel of class 2 is painted on every image without it: averaged over all
    images (the 0/0 case is gone: those images score 0), and with every image whose mask lacks the class dropped
    (a rule some libraries apply by default), which hides the false positives."""
    painted = predicted.clone()
    empty = [(t == 2).sum().item() == 0 for t in target]
    for image, is_empty in enumerate(empty):
        if is_empty:
            painted[image, 0, 0] = 2
    scores = [dice(t, p, 2) for t, p in zip(target, painted)]
    kept = [score for score, is_empty in zip(scores, empty) if not is_empty]
    return sum(scores) / len(scores), sum(kept) / len(kept)


def ranking_example() -> dict[str, tuple[float, float]]:
    """Two models scored from counts on two classes of 100 pixels: (mean IoU, mean Dice) of each. A: one class
    perfect, the other poor (20 hit, 80 missed, 50 false); B: both middling (70 hit, 30 missed, 30 false)."""
    def scores(counts):
        iou = [tp / (tp + fn + fp) for tp, fn, fp in counts]
        dice_ = [2 * tp / (2 * tp + fn + fp) for tp, fn, fp in counts]
        return sum(iou) / len(iou), sum(dice_) / len(dice_)
    return {"A": scores([(100, 0, 0), (20, 80, 50)]), "B": scores([(70, 30, 30), (70, 30, 30)])}


def torchmetrics_dice() -> dict[str, float]:
    """torchmetrics' DiceScore for class 2 on the one-pixel-too-wide masks: its default per-image aggregation, its
    pooled one, and its default input format applied to index masks (which it reads as one-hot without a word)."""
    from torchmetrics.segmentation import DiceScore

    target = masks()
    predicted = too_wide(target)
    found = {}
    for name, args in (("per image", dict(average="none", input_format="index")),
                       ("pooled", dict(average="none", input_format="index", aggregation_level="global"))):
        metric = DiceScore(num_classes=CLASSES, **args)
        metric.update(predicted, target)
        found[name] = metric.compute()[2].item()
    metric = DiceScore(num_classes=CLASSES)
    metric.update(predicted, target)
    found["default format on index masks"] = metric.compute().item()
    return found


def segmentation_lines() -> list[str]:
    found = segmentation_report()
    lines = [f"{IMAGES} masks of {SIZE}x{SIZE}, objects on {found['foreground']:.1%} of the pixels:"]
    for name in ("all background", "one pixel too wide"):
        r = found[name]
        lines.append(f"  {name:20} pixel accuracy {r['accuracy']:.3f} | IoU per class (background, 1, 2) "
                     + ", ".join(f"{v:.3f}" for v in r["iou"]) + f" | mean IoU {r['mean_iou']:.3f}, objects only "
                     f"{r['mean_iou_objects']:.3f} | Dice per class " + ", ".join(f"{v:.3f}" for v in r["dice"]))
    wide = found["one pixel too wide"]
    per_image = wide["class2_per_image"]
    counted, dropped = _false_positive_dice(masks(), too_wide(masks()))
    rank = ranking_example()
    tm = torchmetrics_dice()
    lines += [f"  Dice = 2 IoU / (1 + IoU) for every class: {wide['dice_from_iou']}",
              f"  class 2, one pixel too wide: Dice over all pixels {wide['dice'][2]:.3f}; averaged per image, images "
              f"without it left out {_mean(per_image, None):.3f}, counted as 1 (empty and empty agree) "
              f"{_mean(per_image, 1.0):.3f}, as 0 {_mean(per_image, 0.0):.3f}",
              f"  the same with one false pixel of class 2 on each image without it: per image {counted:.3f} (those "
              f"images score 0 under every convention); images with an empty mask dropped {dropped:.3f} (unseen)",
              f"  two models from counts: mean IoU A {rank['A'][0]:.3f}, B {rank['B'][0]:.3f}; mean Dice A "
              f"{rank['A'][1]:.3f}, B {rank['B'][1]:.3f}: the two means rank them in opposite orders",
              f"  torchmetrics DiceScore, class 2, input_format='index': per image (its default) {tm['per image']:.3f}, "
              f"aggregation_level='global' {tm['pooled']:.3f}; its default input_format on these index masks "
              f"{tm['default format on index masks']:.3f}, without an error"]
    return lines
