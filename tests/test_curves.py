"""Chapter 5's curve readings and best-weights runs: the counts the chapter prints hold on seeds 0-4, far from ties."""

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader

from course_utils.chapters.ch05_curves import KEEPS, best_copies, epoch_ends, evaluations, rising_together, val_below_train
from course_utils.chapters.ch05_museum import ONE_LINE, reference_markdown
from course_utils.chapters.ch06_predictions import prediction_bank
from course_utils.engine.data import spiral_splits
from course_utils.engine.models import MLP

SEEDS = range(5)


def key(bank, qid):
    return next(o.text for o in bank.question(qid).options if o.correct)


def test_logged_training_loss_sits_above_validation_for_two_measurement_reasons():
    below = val_below_train()
    assert len(below.ends) == 15
    assert below.counts() == {"logged above val": 15, "dropout: logged above the same batches in eval mode": 15,
                              "lag: epoch average above the end-of-epoch model": 15,
                              "like validation: train above val": 2}
    assert below.smallest_margin() > 0.003          # no count hangs on a near tie


def test_the_extra_eval_forwards_leave_training_as_it_was():
    """Oracle: the same seed trained by a plain loop logs the very same losses."""
    splits = spiral_splits(300, 300, seed=1)
    torch.manual_seed(1)
    model = MLP(hidden=64, dropout=0.5)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    loader = DataLoader(splits.train, batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(1))
    logged = []
    for _ in range(2):
        total = 0.0
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            total += loss.item() * len(yb)
        logged.append(total / 300)
    assert [e.logged for e in epoch_ends(1, epochs=2)] == logged


@pytest.mark.parametrize("seed", SEEDS)
def test_loss_rises_on_the_wrong_ones_while_the_right_ones_improve(seed):
    ev = evaluations(seed)
    rise = rising_together([seed])[0]
    low, last = rise.lowest_loss, rise.last
    assert last.loss > low.loss + 0.1
    assert last.loss_right < low.loss_right and last.loss_wrong > 1.5 * low.loss_wrong
    assert last.confidence_wrong > low.confidence_wrong + 0.05
    later = [e.accuracy for e in ev if e.step > low.step]
    if rise.rose_together:       # by 3 validation points more than the margin, so a near tie cannot flip it
        assert rise.best_after.accuracy >= low.accuracy + rise.MARGIN + 3 / 300 - 1e-6
        assert rise.best_after.loss > low.loss + 0.05
    else:                        # 3 points short of the margin at most
        assert max(later) <= low.accuracy + rise.MARGIN - 3 / 300 + 1e-6
    others = sorted(e.loss for e in ev)
    assert others[1] - others[0] > 1e-3             # the minimum is not a near tie


def test_four_seeds_of_five_rise_together_and_seed_0_fits_the_prediction_card():
    """The card says "from about 0.6 to a little higher", loss rising too: true of seed 0's run on any CPU, whose
    exact digits (issue 38: 0.63 on an AMD EPYC, 0.64 here) the chapter shows only as this machine's."""
    rises = rising_together()
    assert sum(r.rose_together for r in rises) == 4
    r = rises[0]
    assert r.rose_together and abs(r.lowest_loss.accuracy - 0.6) < 0.05 and r.best_after.accuracy < 0.7
    prompt = prediction_bank(5).question("predict-loss-and-accuracy").prompt
    assert "about 0.6 to a little higher" in prompt and not any(d in prompt for d in ("0.61", "0.64", "0.99"))


@pytest.mark.parametrize("seed", SEEDS)
def test_only_a_real_copy_brings_back_the_best_epoch(seed):
    runs = best_copies(seed)
    refs, deep, params = (runs[how] for how in KEEPS)
    assert refs.best_epoch < refs.epochs and refs.last_val - refs.best_val > 1e-3
    assert refs.shares_memory and refs.restored_val == refs.last_val != refs.best_val
    assert not deep.shares_memory and deep.restored_exactly
    assert not params.shares_memory and not params.restored_exactly and params.restored_val != params.last_val


def test_every_row_of_the_quick_reference_has_a_signature_and_a_copyable_flush_fix():
    table = reference_markdown()
    assert "(exhibit 5)" in table and "arithmetic.is_update_step" not in table
    for row in table.splitlines()[2:]:
        name = row.split("`")[1]
        assert ONE_LINE[name] in row
    assert "wiped, or added into the next" in ONE_LINE["accumulation_without_flush"]
    assert "`(i + 1) % K == 0 or i + 1 == len(loader)`" in table


def test_chapter_5_prediction_keys_are_what_the_runs_show():
    bank = prediction_bank(5)
    assert [q.id for q in bank.questions] == ["predict-val-below-train", "predict-loss-and-accuracy",
                                              "predict-best-weights"]
    assert key(bank, "predict-val-below-train") == "At every epoch end, on every seed"
    assert key(bank, "predict-loss-and-accuracy").startswith("From the examples it gets wrong")
    assert key(bank, "predict-best-weights") == "The last epoch's"
