"""Chapter 7's clipping claims, checked over the same five seeds the chapter prints: each must hold on every seed."""
import pytest

from course_utils.chapters.ch07_clipping import (MAX_NORM, OPTIMIZERS, SPIKE_AT, VARIANTS, claims, claims_text,
                                                 spike_run, spike_study)


@pytest.fixture(scope="module")
def study():
    return spike_study(range(5))


def test_every_claim_the_chapter_prints_holds_on_every_seed(study):
    rows = claims(study)
    assert len(rows) == 11
    assert all(held == n == 5 for _, held, n in rows), claims_text(rows)


def test_the_study_is_what_it_says(study):
    assert set(study) == {(o, v, s) for o in OPTIMIZERS for v in VARIANTS for s in range(5)}
    clipped = study["SGD", "spike, clipped", 0]
    assert clipped.norms[SPIKE_AT] > MAX_NORM  # the norm logged is the one before clipping
    assert clipped.steps[SPIKE_AT] < 0.02 * study["SGD", "spike", 0].steps[SPIKE_AT]  # the throw is clipped away
    assert study["SGD", "spike", 0].adam_v_growth is None and study["AdamW", "spike", 0].adam_v_growth > 1


def test_a_run_is_repeatable_and_bad_names_are_refused(study):
    assert spike_run(3, "AdamW", True, None) == study["AdamW", "spike", 3]
    with pytest.raises(ValueError, match="optimizer must be one of"):
        spike_run(0, "Adam", False, None)


def test_clipping_before_a_step_that_normalises_the_gradient_changes_nothing():
    """SAM's first pass uses g / ||g||: a clip there cancels; before the second pass it changes the update,
    and a threshold above the norms changes nothing anywhere."""
    from course_utils.chapters.ch03_clip_optim import sam_clip_placement

    for seed in (2, 3):
        assert list(sam_clip_placement(max_norm=0.05, seed=seed).values()) == [True, True, False]
        assert list(sam_clip_placement(max_norm=100.0, seed=seed).values()) == [True, True, True]


@pytest.mark.parametrize("start", [-1.5, 2.5])
def test_lbfgs_calls_continue_one_run_from_any_start(start):
    from course_utils.chapters.ch03_lbfgs import lbfgs_calls
    for result in lbfgs_calls(start=start, dims=4).values():
        assert result.startswith("same final point: True; final loss below 1e-9: True")


def test_a_line_search_out_of_trials_still_moves_to_its_best_point():
    """One trial (max_iter=1's default max_eval) or two: the parameters move through step() to a point that fails the
    curvature condition; with 25 closure calls the point meets it."""
    from course_utils.chapters.ch03_lbfgs import lbfgs_failed_search
    lines = lbfgs_failed_search(seeds=3, budgets=(1, 2, 25))
    assert lines["max_ls among LBFGS's arguments"] == "False"
    assert lines["max_eval by default for max_iter=1"] == "1"
    for budget in (1, 2):
        assert lines[f"max_iter=1, max_eval={budget}"].startswith(
            "parameters moved on 3 of 3 seeds; the loss fell on 3; the new point fails the curvature condition on 3")
    assert "fails the curvature condition on 0;" in lines["max_iter=1, max_eval=25"]
