"""Chapter 5's engine: healthy vs bugged comparisons and the mystery game."""
import pytest

from course_utils.bugs import LOOP_BUGS
from course_utils.museum import EXHIBITS, MysteryGame, compare, exhibit


def test_every_loop_bug_has_an_exhibit_that_differs_from_healthy():
    assert set(EXHIBITS) == set(LOOP_BUGS)
    for bug in LOOP_BUGS:
        assert not exhibit(bug).identical(), bug


def test_signatures_match_the_registry():
    c = exhibit("zero_grad_after_backward")
    assert set(c.bugged.grad_norm) == {0.0}
    c = exhibit("missing_no_grad")
    assert set(c.healthy.eval_memory) == {0} and min(c.bugged.eval_memory) > 0
    assert "peak eval memory (bytes)" in c.changed()
    c = exhibit("accumulation_without_flush")
    assert c.healthy.updates == [3, 6, 9] and c.bugged.updates == [2, 4, 6]
    assert "differs" in c.text()


def test_same_seed_same_numbers_and_clash_raises():
    assert compare((), **EXHIBITS["mean_of_batch_means"]).identical()
    with pytest.raises(ValueError):
        compare(("clip_before_backward", "clip_after_step"))


def test_mystery_game_is_seeded_and_grades():
    a, b = MysteryGame(seed=3), MysteryGame(seed=3)
    assert [a.new_round() and a.hidden for _ in range(3)] == [b.new_round() and b.hidden for _ in range(3)]
    for bug in LOOP_BUGS:
        game = MysteryGame()
        game.new_round(bug)
        assert game.grade(bug).correct and bug in game.grade(bug).message
        other = next(x for x in LOOP_BUGS if x != bug)
        assert not game.grade(other).correct and game.grade(other).answer == bug
