"""Chapter 4's dropout cell: torch scales while training, so the eval-mode loss of a batch is the lower one."""
import torch
from torch import nn

from course_utils.chapters.ch04_dropout_gap import dropout_gap, dropout_gap_lines
from course_utils.engine.models import MLP


def test_eval_mode_logits_are_the_average_of_train_mode_logits_when_dropout_feeds_the_last_linear():
    torch.manual_seed(3)
    model, x = MLP(hidden=16, depth=1, dropout=0.7), torch.randn(8, 2)
    model.eval()
    evaluated = model(x).detach()
    model.train()
    with torch.no_grad():
        averaged = torch.stack([model(x) for _ in range(20000)]).mean(0)
    assert torch.allclose(averaged, evaluated, atol=0.01)
    assert (torch.stack([model(x) for _ in range(2)]).std(0) > 0.01).any()   # the train passes do differ


def test_kept_values_are_scaled_by_one_over_one_minus_p_while_training_only():
    drop = nn.Dropout(0.7)
    out = drop(torch.ones(10000))
    assert set(out.unique().tolist()) == {0.0, torch.tensor(1 / 0.3).item()}
    assert torch.equal(drop.eval()(torch.ones(5)), torch.ones(5))


def test_the_eval_mode_loss_is_below_the_train_mode_loss_on_seeds_the_chapter_does_not_print():
    for seed in (11, 12):
        for depth in (1, 2):
            r = dropout_gap(seed, p=0.7, depth=depth, updates=50)
            assert r.eval_loss[0] < r.train_loss[0] and r.eval_loss[1] < r.train_loss[1]
            assert abs(r.zeroed - 0.7) < 0.01 and abs(r.kept_scale - 1 / 0.3) < 1e-5


def test_the_lines_count_what_the_runs_measured():
    lines = dropout_gap_lines(p=0.5, seeds=range(2), updates=20)
    assert lines[0].startswith("Dropout(p=0.5) in train mode: 0.50 of the values zeroed") and "2.000" in lines[0]
    assert "of 2 seeds" in lines[1] and "of 2" in lines[3]
