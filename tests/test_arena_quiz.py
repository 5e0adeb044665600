"""Chapter 8's quiz: every key is what real races measure, on all five seeds where the question says so."""
from dataclasses import replace

from course_utils.chapters import ch08_arena_seeds as arena_seeds
from course_utils.chapters.ch08_arena import Challenge, Knobs
from course_utils.chapters.ch08_arena_search import probe, saved_search, seeds_check
from course_utils.engine.arithmetic import examples_after
from course_utils.chapters.over_seeds import SEEDS
from course_utils.infra.quiz import check, load_bank

CHALLENGE = Challenge()


def key(qid: str) -> str:
    return next(o.text for o in load_bank(8).question(qid).options if o.correct)


def test_bank_loads_with_at_least_four_questions():
    assert len(load_bank(8).questions) >= 4


def test_gpu_question_numbers_are_the_races_and_its_key_follows():
    q = load_bank(8).question("gpu-sooner")
    counts = {b: arena_seeds.to_target(CHALLENGE, Knobs(b, "adam", 0.03)).updates_to_target for b in (64, 300)}
    assert counts == {64: 25, 300: 15} and "25 updates" in q.prompt and "after 15" in q.prompt
    assert examples_after(25, 600, 64) < examples_after(15, 600, 300)
    assert key("gpu-sooner") == "Batch 300 sooner; batch 64 on fewer examples"


def test_memory_about_doubles_from_batch_64_to_128():
    assert key("memory-doubles") == "It about doubles"
    memory = {p.batch_size: p.peak_memory for p in saved_search().probes}
    assert 1.9 < memory[128] / memory[64] < 2.1


def test_sgd_from_batch_16_to_64_wants_four_times_the_rate():
    assert key("sgd-batch-16-to-64") == "1.2 (four times)"
    reached = {(b, lr): arena_seeds.row(CHALLENGE, Knobs(b, "sgd", lr)).reached
               for b, lr in [(16, 0.3), (64, 0.075), (64, 0.3), (64, 1.2), (64, 5.0)]}
    n = len(SEEDS)
    assert reached[16, 0.3] == n and reached[64, 1.2] == n
    assert max(reached[64, 0.075], reached[64, 0.3], reached[64, 5.0]) < n


def test_the_winner_passes_95_percent_within_50_updates_on_every_seed():
    assert key("target-95").startswith("Every seed still gets there within 50")
    winner = saved_search().best.knobs
    for seed in SEEDS:
        at_90 = probe(replace(CHALLENGE, seed=seed), winner, 50).updates_to_target
        at_95 = probe(replace(CHALLENGE, seed=seed, target=0.95), winner, 50).updates_to_target
        assert at_90 is not None and at_95 is not None and at_90 < at_95 < 50


def test_examples_at_14_updates_counts_the_short_last_batch():
    q = load_bank(8).question("examples-at-14")
    assert q.answer == 1712 == examples_after(14, 600, 128) and check(q, "1,712").correct
    assert not check(q, str(14 * 128)).correct


def test_the_search_claims_the_chapter_prints():
    search = saved_search()
    assert len(search.winners) > 100 and search.best.updates_to_target < 20
    assert search.best_by("optimizer")["sgd"] is None                      # plain SGD: never within 50 (seed 0)
    assert min(search.grid.lrs) == 0.003 and max(search.grid.lrs) == 1.0
    other = seeds_check(search.challenge, search.best.knobs, range(1, 6), search.budget)   # "not by luck"
    assert all(h is not None and h < search.budget for h in other)
