"""Chapters 6 and 8: the right option of a single-choice question cannot be spotted by its length."""
import pytest

from course_utils.chapters.ch06_predictions import prediction_bank
from course_utils.infra.quiz import load_bank

BANKS = {"quiz 06": lambda: load_bank(6), "predictions 06": lambda: prediction_bank(6), "quiz 08": lambda: load_bank(8)}


@pytest.mark.parametrize("name", BANKS)
def test_the_key_is_the_longest_option_in_fewer_than_half_the_questions(name):
    singles = [q for q in BANKS[name]().questions if q.kind == "single"]
    longest = [q.id for q in singles if max(len(o.text) for o in q.options if o.correct)
               > max(len(o.text) for o in q.options if not o.correct)]
    assert singles and len(longest) < len(singles) / 2, longest
