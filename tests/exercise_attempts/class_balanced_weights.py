"""Attempts at Exercise 2.2, class_balanced_weights(labels)."""
from collections import Counter

import torch


def right_bincount(labels):
    """1 / (examples of my class), gathered from a bincount: a float tensor, one weight per example."""
    counts = torch.bincount(labels)
    return 1.0 / counts[labels].double()


def right_counter(labels):
    """Python Counter, then each example's share of its class: a list of floats."""
    counts = Counter(labels.tolist())
    return [1 / counts[label] for label in labels.tolist()]


def wrong_class_weights(labels):
    """Returns one weight per class, not per example: the sampler then draws only indices 0..C-1, any labels."""
    return 1.0 / torch.bincount(labels).double()


def wrong_proportional(labels):
    """Weight = class count (inverse forgotten): makes the imbalance worse, labels [0, 0, 0, 1]."""
    return torch.bincount(labels)[labels].double()


def wrong_floor_division(labels):
    """N // count in integers: labels [0, 0, 0, 1, 1] give 5 // 3 = 1 and 5 // 2 = 2, totals 3 and 4, not equal."""
    counts = torch.bincount(labels)
    return len(labels) // counts[labels]


def wrong_sqrt_inverse(labels):
    """1 / sqrt(count), the smoothed inverse: classes are drawn unequally, labels [0, 0, 0, 0, 1]."""
    return torch.bincount(labels)[labels].double().rsqrt()


def wrong_unique_counts(labels):
    """torch.unique's counts indexed by the label value: an absent class (labels [0, 0, 2]) raises IndexError."""
    _, counts = torch.unique(labels, return_counts=True)
    return 1.0 / counts[labels].double()


def wrong_one_minus_frequency(labels):
    """Weight = 1 - class frequency: balances two classes only, labels [0, 0, 0, 1, 2] are unequal."""
    counts = torch.bincount(labels).double()
    return 1 - counts[labels] / len(labels)
