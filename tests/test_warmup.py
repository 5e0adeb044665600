"""Chapter 7's warmup section: Adam's first update is its largest, and the steps settle within tens of updates."""
from __future__ import annotations

import torch

from course_utils.chapters.ch07_warmup import adam_steps, warmup


def test_every_claim_holds_on_seeds_0_to_4():
    result = warmup()
    assert all(result.claims().values()), result.claims()


def test_adams_first_step_is_the_learning_rate_for_every_weight_with_a_gradient():
    run = adam_steps(0, lr=0.05, updates=3)
    assert abs(run.full_share[0] - run.first_with_gradient) < 1e-9 and run.full_share[0] > 0.5
    assert run.full_share[2] < run.full_share[0]


def test_the_settling_count_reads_the_first_update_below_the_fraction():
    from course_utils.chapters.ch07_warmup import AdamSteps
    steps = AdamSteps((1.0, 0.5, 0.3, 0.2, 0.1), (1.0,) * 5, 1.0)
    assert steps.settled_after(0.25) == 4 and steps.settled_after(0.05) is None


def test_sgd_would_not_show_it():
    # the claim is about Adam: plain SGD's first step is lr * |grad|, far below lr for this model
    torch.manual_seed(0)
    w = torch.nn.Linear(2, 3)
    opt = torch.optim.SGD(w.parameters(), lr=1.0)
    before = w.weight.detach().clone()
    torch.nn.functional.cross_entropy(w(torch.randn(32, 2)), torch.randint(0, 3, (32,))).backward()
    opt.step()
    assert ((w.weight.detach() - before).abs() > 0.99).float().mean() < 0.5
