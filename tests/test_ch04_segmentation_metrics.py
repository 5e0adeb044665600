"""Segmentation metrics: the confusion matrix against per-pixel counting, Dice against IoU, the averages."""
import math

import torch

from course_utils.chapters import ch04_segmentation_metrics as sm


def test_confusion_counts_every_pixel_once_and_matches_a_loop():
    target, predicted = sm.masks(), sm.too_wide(sm.masks())
    matrix = sm.confusion(target, predicted)
    assert matrix.sum().item() == target.numel()
    for t in range(sm.CLASSES):
        for p in range(sm.CLASSES):
            assert matrix[t, p].item() == ((target == t) & (predicted == p)).sum().item()


def test_too_wide_only_grows_objects_into_background():
    target = sm.masks()
    wide = sm.too_wide(target)
    assert torch.equal(wide[target > 0], target[target > 0])
    assert ((wide > 0) & (target == 0)).sum() > 0
    assert target[:, -1, :].sum() == 0 and target[:, :, -1].sum() == 0        # no object wraps around the roll


def test_the_report_against_hand_formulas():
    found = sm.segmentation_report()
    nothing, wide = found["all background"], found["one pixel too wide"]
    assert nothing["accuracy"] == 1 - found["foreground"] and nothing["iou"][1:] == [0.0, 0.0]
    assert abs(nothing["mean_iou"] - nothing["iou"][0] / 3) < 1e-12
    assert wide["dice_from_iou"] and all(d >= i for d, i in zip(wide["dice"], wide["iou"]))
    per_image = wide["class2_per_image"]
    assert sum(math.isnan(v) for v in per_image) == sm.IMAGES // 2                 # the odd images have no class 2
    left_out = sm._mean(per_image, None)
    assert left_out < wide["dice"][2]                                              # small objects pull it down
    assert abs(sm._mean(per_image, 0.0) - left_out / 2) < 1e-12 and abs(sm._mean(per_image, 1.0) - (left_out + 1) / 2) < 1e-12


def test_torchmetrics_agrees_with_the_hand_counts_per_image_and_pooled():
    found = sm.segmentation_report()["one pixel too wide"]
    tm = sm.torchmetrics_dice()
    assert abs(tm["per image"] - sm._mean(found["class2_per_image"], None)) < 1e-6
    assert abs(tm["pooled"] - found["dice"][2]) < 1e-6
    assert abs(tm["default format on index masks"] - tm["per image"]) > 0.05       # misread, silently


def test_false_positives_on_empty_images_score_zero_unless_those_images_are_dropped():
    counted, dropped = sm._false_positive_dice(sm.masks(), sm.too_wide(sm.masks()))
    per_image = sm.segmentation_report()["one pixel too wide"]["class2_per_image"]
    assert abs(counted - sm._mean(per_image, 0.0)) < 1e-12 and abs(dropped - sm._mean(per_image, None)) < 1e-12


def test_the_two_means_rank_the_two_models_in_opposite_orders():
    rank = sm.ranking_example()
    assert (rank["A"][0] > rank["B"][0]) and (rank["A"][1] < rank["B"][1])
