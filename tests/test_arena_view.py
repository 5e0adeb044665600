"""Chapter 8's arena view, driven headless: Run records a row, Stop stops, bad knobs say so, rows re-run."""
import warnings

import pytest

from course_utils.chapters.ch08_arena import Challenge, Knobs
from course_utils.chapters.ch08_scoreboard import Scoreboard
from course_utils.widgets.arena_view import ArenaView, arena
from course_utils.widgets.base import RUN_HINT

QUICK = Knobs(batch_size=64, optimizer="adam", lr=0.1, schedule="constant", epochs=3)


@pytest.fixture
def board(tmp_path):
    return Scoreboard(tmp_path / "scoreboard.json")


def test_opens_on_a_result_and_the_run_is_on_the_scoreboard(board):
    view = arena(QUICK, board=board)
    assert view.result is not None and view.result.knobs == QUICK
    rows = board.rows(Challenge())
    assert len(rows) == 1 and rows[0]["knobs"]["lr"] == 0.1
    text = view.text()
    assert text.startswith("Arena: spiral N=600") and "baseline  sgd lr=0.01 B=32" in text
    assert "your run  adam lr=0.1 B=64" in text and "<- your latest" in text
    assert view.plot.value[:4] == b"\x89PNG" and "★ 1" in view.table.children[11].value
    assert view._repr_mimebundle_()["text/plain"] == text + "\n" + RUN_HINT


def test_run_in_the_background_with_live_progress_then_stop(board):
    view = ArenaView(Knobs(batch_size=16, optimizer="sgd", lr=0.01, epochs=20), board=board)
    assert view.stop_button.disabled and not view.run_button.disabled
    view.run_button.click()
    assert view.running and view.stop_button.disabled is False and view.batch.disabled   # busy state at once
    view.run_button.click()                                          # a second click while running: ignored
    view.stop_button.click()
    view.wait()
    assert not view.running and view.result.stopped and "Stopped" in view.summary.value
    assert board.rows(view.challenge()) == []                       # a stopped run is not recorded
    assert view.stop_button.disabled and not view.run_button.disabled and not view.batch.disabled


def test_a_finished_background_run_is_recorded_and_highlighted(board):
    view = ArenaView(QUICK, board=board)
    view.run_button.click()
    view.wait()
    assert not view.result.stopped and view.progress.value == view.progress.max == view.result.total_updates
    assert "#1 of 1 on your scoreboard" in view.summary.value
    view.set_knobs(Knobs(batch_size=128, optimizer="sgd", lr=0.01, epochs=2))
    view.run_button.click()
    view.wait()
    assert len(board.rows(view.challenge())) == 2
    lines = view.text().splitlines()
    latest = [line for line in lines if "<- your latest" in line]
    assert len(latest) == 1 and " 128  " in latest[0]


@pytest.mark.parametrize("value, words", [(0, "batch size B must be"), (5000, "batch size B must be")])
def test_bad_batch_size_shows_a_message_not_a_traceback(board, value, words):
    view = ArenaView(QUICK, board=board)
    view.batch.value = str(value)
    view.run_button.click()
    assert words in view.message.value and "Traceback" not in view.message.value
    assert not view.running and not view.run_button.disabled and words in view.text()


def test_rerun_this_row_reproduces_its_count(board):
    view = arena(QUICK, board=board)
    view.background = False
    buttons = [c for c in view.table.children if getattr(c, "description", "") == "Re-run this row"]
    assert len(buttons) == 1
    buttons[0].click()
    assert "reproduced it exactly" in view.rerun_status.value and "reproduced it exactly" in view.text()
    assert "Re-run of row 1" in view.summary.value and "reproduced it exactly" in view.summary.value
    assert any("← re-run" in getattr(c, "value", "") for c in view.table.children)
    view.rerun_row(5)
    assert "no longer on your scoreboard" in view.message.value


def test_changing_the_challenge_shows_its_own_scoreboard(board):
    view = arena(QUICK, board=board)
    view.target.value = 0.8
    assert view.challenge().target == 0.8 and "no runs yet" in view.text() and view.result is None
    view.target.value = 0.9
    assert "<- your latest" in view.text()


def test_a_damaged_scoreboard_is_reported_in_the_view_in_one_line_without_a_warning(tmp_path):
    path = tmp_path / "scoreboard.json"
    path.write_text("{ not json")
    with warnings.catch_warnings():
        warnings.simplefilter("error")                      # no RuntimeWarning reaches the learner's cell
        view = arena(QUICK, board=Scoreboard(path))
    assert "could not be read, so a fresh one was started" in view.message.value
    assert str(tmp_path) not in view.message.value and "char" not in view.message.value
    assert list(tmp_path.glob("scoreboard.json.corrupt-*")) and len(Scoreboard(path).rows(Challenge())) == 1


def test_learning_rates_are_exact_values_and_a_new_one_is_added(board):
    view = ArenaView(QUICK, board=board)
    assert view.knobs().lr == 0.1
    view.set_knobs(Knobs(lr=0.05))
    assert view.knobs().lr == 0.05 and 0.05 in view._rates and 0.03 in view._rates
