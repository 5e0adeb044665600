"""The chapter 5 quiz keys that describe runs are checked against runs of the course's loop."""
from statistics import median

from course_utils.engine.bugs import half_after_optimizer
from course_utils.infra.quiz import load_bank
from course_utils.engine.session import Session, TrainConfig

SGD = dict(n_train=320, n_val=100, epochs=3, optimizer="sgd", lr=0.05, momentum=0.0, seed=0)


def _run(*bugs):
    session = Session(TrainConfig(**SGD, bugs=bugs))
    session.run_to_end()
    return session.steps


def _key(qid):
    question = load_bank(5).question(qid)
    return next(o.text for o in question.options if o.correct)


def test_a_growing_gradient_norm_is_missing_zero_grad():
    assert "zero_grad() is missing" in _key("read-the-curves-zero-grad")
    healthy, bugged = _run(), _run("missing_zero_grad")
    h, b = [e.grad_norm for e in healthy], [e.grad_norm for e in bugged]
    third = len(b) // 3
    early = b[:2 * third]
    assert all(later > earlier for earlier, later in zip(early[::3], early[3::3]))   # climbs in trend
    assert median(b[-third:]) > 8 * median(h[-third:])                                  # ~10x the healthy norm
    assert bugged[third].loss < healthy[third].loss                                     # at first falls faster
    swing = lambda steps: max(e.loss for e in steps[-third:]) - min(e.loss for e in steps[-third:])
    assert swing(bugged) > 2 * swing(healthy)                                           # then swings
    # the distractors' runs: training curves identical to the healthy run
    for bug in ("missing_no_grad", "graph_attached_logging"):
        assert [e.grad_norm for e in _run(bug)] == h


def test_half_after_adam_steps_raises_a_dtype_error():
    assert "RuntimeError" in _key("half-after-adam-steps")
    error = half_after_optimizer().stateful_step_error
    assert error.startswith("RuntimeError") and "dtype" in error


def test_best_weights_key_is_the_copy_that_restores_the_best_epoch():
    from course_utils.chapters.ch05_curves import best_copies

    assert _key("best-weights-copy") == "best = copy.deepcopy(model.state_dict())"
    runs = best_copies(0)
    assert runs["copy.deepcopy(state_dict())"].restored_exactly
    assert not runs["state_dict()"].restored_exactly and not runs["clone the parameters only"].restored_exactly
