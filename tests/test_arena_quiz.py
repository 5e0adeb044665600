"""Chapter 8's quiz states measured facts: each claim is checked here against the engine or the saved search."""
from course_utils.arena import BASELINE, Challenge, race
from course_utils.arena_search import saved_search, seeds_check
from course_utils.quiz import load_bank


def test_bank_loads_with_at_least_four_questions():
    assert len(load_bank(8).questions) >= 4


def test_memory_about_doubles_from_batch_64_to_128():
    memory = {p.batch_size: p.peak_memory for p in saved_search().probes}
    assert 1.9 < memory[128] / memory[64] < 2.1


def test_the_search_claims():
    search = saved_search()
    assert len(search.winners) > 100 and search.best.updates_to_target < 20
    assert search.best_by("optimizer")["sgd"] is None                      # plain SGD: never within 50
    assert min(search.grid.lrs) == 0.003 and max(search.grid.lrs) == 1.0
    other = seeds_check(search.challenge, search.best.knobs, range(1, 6), search.budget)
    assert all(h is not None and h < search.budget for h in other)


def test_the_baseline_does_not_reach_90_percent_in_380_updates():
    result = race(Challenge(), BASELINE)
    assert result.total_updates == 380 and not result.reached
