"""Chapter 6's conclusions hold on all five seeds: each test fails when one stops holding.

The runs are real runs of the course's loop, on whatever CPU path this machine takes (the notebooks pin
one; these tests do not), so they also check that the conclusions do not hang on one CPU's rounding.
Runs are shared through simulator_seeds' caches: about 10 s in all on one core.
"""
import math

import pytest

from course_utils.chapters import ch06_lr_races as lr_races, ch06_simulator_seeds as seeds
from course_utils.chapters.over_seeds import SEEDS, Spread, ratios, tally
from course_utils.engine.session import TrainConfig


def test_spread_and_tally_say_what_they_measured():
    assert Spread((3, 1, 2)).text() == "median 2 (range 1-3)"
    assert Spread((5.0, None, 6.8)).text(2, "x") == "on 2 of 3 seeds: median 5.9x (range 5-6.8x)"
    assert Spread((None, None)).text() == "on none of 2 seeds"
    assert tally([True, False, True]) == "2 of 3"
    assert ratios([10, None, 9], [2, 3, 3]).values == (5.0, None, 3.0)
    with pytest.raises(ValueError):
        Spread(())


def test_adam_at_lr_one_fails_without_a_nan_on_every_seed():
    c = seeds.lr_one().claims()
    assert c == {name: True for name in c}, c


def test_dead_fraction_counts_units_that_never_fire():
    import torch
    from course_utils.engine.models import MLP
    model = MLP(2, 4, 3, depth=1)
    with torch.no_grad():
        model.body[0].weight.zero_()
        model.body[0].bias.copy_(torch.tensor([1.0, -1.0, 1.0, -1.0]))
    assert seeds.dead_fraction(model, torch.randn(10, 2)) == 0.5
    assert model.training                                   # the mode is restored


def test_the_range_test_suggests_an_order_of_magnitude_not_a_number():
    adam = lr_races.suggestions("adam")
    assert adam.factor() > 3                                 # it moves several times from seed to seed
    assert all(s.suggested < s.min_loss_lr for s in adam.sweeps)


def test_the_suggestion_and_the_default_sit_on_one_plateau():
    """Prose: the suggestion on every seed, 0.01 on most; 30 times off either way on none."""
    p = lr_races.plateau(lr_races.sweep("adam", 0).suggested)
    c = p.claims()
    assert c["suggested reaches 90% on every seed"]
    assert c["30x the suggestion never reaches 90%"] and c["suggestion / 30 never reaches 90%"]
    assert sum(p.reached(p.labels.index("default"))) >= 4


def test_at_one_shared_rate_the_winner_depends_on_the_rate():
    low = lr_races.race({"sgd": 0.01, "adam": 0.01}, epochs=10)
    high = lr_races.race({"sgd": 0.3, "adam": 0.3}, epochs=15)
    assert (low.reached("sgd"), low.reached("adam")) == (0, len(SEEDS))
    assert high.reached("sgd") == len(SEEDS) and high.reached("adam") < len(SEEDS)     # "fails on some"


def test_each_at_its_own_range_test_rate_adam_needs_several_times_fewer_updates():
    one_sweep, own_sweeps = lr_races.fair_race(), lr_races.fair_race(sweep_seed=None)
    for race in (one_sweep, own_sweeps):
        assert race.reached("sgd") == race.reached("adam") == len(SEEDS)
        assert all(r > 1 for r in race.ratio.values)         # Adam wins on every seed
    assert all(4 <= r <= 8 for r in one_sweep.ratio.values)   # the prediction's key: "4 to 8"
    assert own_sweeps.ratio.high / own_sweeps.ratio.low > one_sweep.ratio.high / one_sweep.ratio.low


def test_missing_zero_grad_norm_grows_fast_then_slowly_and_the_run_fails():
    z = seeds.zero_grad()
    c = z.claims()
    assert c == {name: True for name in c}, c
    assert z.early_growth().low > 50                         # "about a hundredfold over the first 60 steps"


def test_missing_no_grad_costs_two_batches_graphs_on_every_seed_and_never_grows():
    for seed in SEEDS:
        n = seeds.no_grad(epochs=3, seed=seed)
        assert set(n.healthy_memory) == {0} and n.same_results
        assert set(n.bugged_memory) == {2 * n.one_batch}


def test_cosine_settles_and_ends_lower_than_a_constant_rate_on_every_seed():
    c = seeds.schedules().claims()
    assert c == {name: True for name in c}, c


def test_watched_records_what_the_run_did():
    w = seeds.watched(TrainConfig(n_train=64, n_val=32, epochs=2))
    assert len(w.losses) == len(w.grad_norms) == 4 and len(w.epochs) == 2
    assert not w.any_nan and 0 <= w.dead <= 1 and 0 < w.max_move <= 3.2
    assert w.last_spread(2) == abs(round(w.epochs[0].val_acc * 32) - round(w.epochs[1].val_acc * 32))
    losses = [e.val_loss for e in w.epochs]
    assert math.isclose(w.last_loss_jump(2), abs(losses[1] - losses[0]) / min(losses))
    assert math.isclose(seeds.first_adam_move(0.003), 0.003, rel_tol=1e-3)


def test_adams_3_2_lr_is_no_limit_for_a_growing_gradient():
    """Review 06.3: Kingma and Ba's lr(1-b1)/sqrt(1-b2) is the sparse case; a growing gradient goes past it."""
    from course_utils.chapters.ch06_simulator_seeds import adam_step_under_growing_gradient
    assert adam_step_under_growing_gradient(1.0) < 1.0 + 1e-6          # a constant gradient: steps of lr at most
    assert 3.2 < adam_step_under_growing_gradient(1.05) < adam_step_under_growing_gradient(1.10)
    assert round(adam_step_under_growing_gradient(1.05), 1) == 3.9 and round(adam_step_under_growing_gradient(1.10), 1) == 4.2
