"""TrainConfig rejects any bad value of any type with a ValueError naming the argument; evaluation has
its own random stream, so validating never changes training (issue 9, items 2 and 6)."""
import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_utils.engine.session import Session, TrainConfig

FIELDS = [f.name for f in dataclasses.fields(TrainConfig)]
ANY_VALUE = st.one_of(st.none(), st.booleans(), st.integers(-10**30, 10**30), st.floats(allow_nan=True),
                      st.text(max_size=5), st.binary(max_size=3), st.lists(st.integers(), max_size=3),
                      st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
                      st.tuples(st.lists(st.integers(), max_size=1)))


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(FIELDS), value=ANY_VALUE)
def test_any_value_of_any_type_is_accepted_or_a_value_error_naming_the_field(name, value):
    try:
        config = TrainConfig(**{name: value})
    except ValueError as exc:
        assert name in str(exc) or "batch" in str(exc)      # BatchNorm's batch-of-one rule names batch_size
    else:
        assert getattr(config, name) == value or name == "bugs"


@pytest.mark.parametrize("value", [5, None, 2.5, [[1]], [1], b"x", ("missing_no_grad", 3)])
def test_bugs_that_are_not_names_raise_value_error(value):
    with pytest.raises(ValueError, match="bugs"):
        TrainConfig(bugs=value)


def _train_losses(bugs, dropout=0.3):
    session = Session(TrainConfig(n_train=120, n_val=40, hidden=16, epochs=3, dropout=dropout, bugs=bugs,
                                  measure_memory=False))
    session.run_to_end()
    return [e.loss for e in session.steps], session


def test_validating_in_train_mode_never_changes_training():
    """Train-mode evaluation draws dropout masks from evaluation's own stream, not training's."""
    healthy, h = _train_losses(())
    bugged, b = _train_losses(("eval_in_train_mode",))
    assert healthy == bugged                                    # every training loss identical
    assert [e.val_loss for e in h.epochs] != [e.val_loss for e in b.epochs]   # only validation changes


def test_extra_evaluations_never_change_training():
    plain, _ = _train_losses(("eval_in_train_mode",))
    session = Session(TrainConfig(n_train=120, n_val=40, hidden=16, epochs=3, dropout=0.3,
                                  bugs=("eval_in_train_mode",), measure_memory=False))
    while not session.done:
        session.step()
        session.evaluate()                                      # validate after every step
    assert [e.loss for e in session.steps] == plain
