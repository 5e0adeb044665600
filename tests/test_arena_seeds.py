"""Chapter 8's trade-offs hold on all five seeds: each test fails when a conclusion the chapter draws stops holding.

Real races of the arena (one torch thread, cached between tests): about 8 s in all on one core.
"""
from course_utils.chapters import ch08_arena_seeds as arena_seeds
from course_utils.chapters.ch08_arena import BASELINE, Challenge, Knobs
from course_utils.chapters.ch08_arena_search import saved_search, seeds_check
from course_utils.engine.arithmetic import batch_sizes, examples_after
from course_utils.infra.notebook import one_thread
from course_utils.chapters.over_seeds import SEEDS

CHALLENGE = Challenge()


def test_examples_after_counts_a_dataloaders_batches():
    """Oracle: the batch sizes of a DataLoader, epoch after epoch, summed one by one."""
    from itertools import cycle, islice
    for updates, n, b, drop in [(0, 600, 32, False), (19, 600, 32, False), (25, 600, 64, False), (14, 600, 128, False),
                                (7, 10, 3, True), (5, 5, 8, False)]:
        assert examples_after(updates, n, b, drop) == sum(islice(cycle(batch_sizes(n, b, drop)), updates))
    assert examples_after(3, 5, 8, drop_last=True) == 0


def test_the_baseline_never_reaches_90_percent_in_380_updates():
    row = arena_seeds.row(CHALLENGE, BASELINE)
    assert row.reached == 0 and row.max_updates == 380


def test_bigger_batches_need_fewer_updates_more_examples_and_proportional_memory():
    c = arena_seeds.batch_trade(CHALLENGE).claims()
    assert c == {name: True for name in c}, c


def test_the_learning_rate_must_follow_the_batch_for_sgd_and_hardly_for_adam():
    c = arena_seeds.scaling(CHALLENGE).claims()
    assert c == {name: True for name in c}, c


def test_within_50_updates_the_schedule_makes_no_consistent_difference_but_step_hurts():
    race = arena_seeds.schedule_race(CHALLENGE, saved_search().best.knobs)
    c = race.claims()
    assert c == {name: True for name in c}, c


def test_plain_sgds_closest_configurations_never_get_there_within_50_on_any_seed():
    search = saved_search()
    closest = sorted((p for p in search.probes if p.optimizer == "sgd"), key=lambda p: -p.acc_at_end)[:3]
    for p in closest:
        assert seeds_check(CHALLENGE, p.knobs, SEEDS, search.budget) == [None] * len(SEEDS)


def test_the_winner_is_near_the_target_on_fresh_data_at_its_hit_and_above_it_by_the_budget():
    held = arena_seeds.held_out(CHALLENGE, saved_search().best.knobs)
    c = held.claims()
    assert c == {name: True for name in c}, c
    assert held.knobs == saved_search().best.knobs and held.n == 3000


def test_at_hit_sees_the_model_once_and_leaves_the_race_unchanged():
    from course_utils.chapters.ch08_arena import race
    knobs = Knobs(64, "adam", 0.03, "constant", 5)
    seen = []
    with one_thread():
        watched = race(CHALLENGE, knobs, at_hit=lambda model: seen.append(model.training))
        plain = race(CHALLENGE, knobs)
    assert seen == [True] and watched.curve == plain.curve
