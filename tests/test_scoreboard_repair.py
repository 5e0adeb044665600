"""Issue 27: a damaged scoreboard is repaired row by row, like quiz progress; the arena's buttons never point at
rows that are gone; what happened is said in one line, without a folder path, parser text or a RuntimeWarning."""
import json
import warnings

import pytest

from course_utils.chapters.ch08_arena import Challenge, Knobs
from course_utils.chapters.ch08_scoreboard import Scoreboard, repair_scoreboard, valid_scoreboard
from course_utils.widgets.arena_view import arena
from tests.test_scoreboard import fake_result

CHALLENGES = [Challenge(n_train=240, n_val=120, max_epochs=4, target=t) for t in (0.8, 0.85, 0.9)]


def _full_board(path):
    """18 runs in 3 challenges, written by the scoreboard itself."""
    board = Scoreboard(path)
    for c in CHALLENGES:
        for i in range(6):
            board.record(c, fake_result(0.01 * (i + 1), 10 + i, challenge=c))
    return json.loads(path.read_text())


def _quiet(call):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return call()


def test_one_bad_field_costs_one_row_not_eighteen(tmp_path):
    path = tmp_path / "scoreboard.json"
    data = _full_board(path)
    first = next(iter(data["challenges"].values()))
    first["runs"][2]["final_acc"] = "abc"
    raw = json.dumps(data).encode()
    path.write_bytes(raw)
    board = Scoreboard(path, quiet=True)
    assert _quiet(lambda: sum(len(board.rows(c)) for c in CHALLENGES)) == 17
    assert board.warnings_seen == [board.warnings_seen[0]] and "17 of 18 saved runs were kept" in board.warnings_seen[0]
    assert str(tmp_path) not in board.warnings_seen[0]
    backups = list(tmp_path.glob("scoreboard.json.corrupt-*"))
    assert [b.read_bytes() for b in backups] == [raw]                      # set aside byte for byte
    assert valid_scoreboard(json.loads(path.read_text()))                  # and the file is clean again


@pytest.mark.parametrize("keep", [0.3, 0.6, 0.9])
def test_a_file_cut_off_keeps_every_row_before_the_cut(tmp_path, keep):
    path = tmp_path / "scoreboard.json"
    _full_board(path)
    raw = path.read_bytes()
    cut = raw[:int(len(raw) * keep)]
    path.write_bytes(cut)
    board = Scoreboard(path, quiet=True)
    kept = sum(len(board.rows(c)) for c in CHALLENGES)
    complete = cut.count(b'"recorded"')                                  # rows written out completely, at most
    assert complete - 1 <= kept <= complete and kept > 0
    assert "that could still be read were kept" in board.warnings_seen[0]
    assert [b.read_bytes() for b in tmp_path.glob("scoreboard.json.corrupt-*")] == [cut]


def test_repair_drops_only_what_is_broken():
    row = {"knobs": {}, "config": {}}
    assert repair_scoreboard({"challenges": {"x": {"challenge": {}, "runs": [row]}}}) == {"version": 1,
                                                                                         "challenges": {}}
    assert repair_scoreboard([1, 2]) == {"version": 1, "challenges": {}}


QUICK = Knobs(batch_size=64, optimizer="adam", lr=0.1, schedule="constant", epochs=3)


def test_rerun_buttons_of_rows_that_are_gone_disappear(tmp_path):
    """The report's case: the view shows rows, the file is damaged meanwhile, a Re-run click finds the row gone."""
    path = tmp_path / "scoreboard.json"
    view = arena(QUICK, board=Scoreboard(path), background=False)
    view.set_knobs(Knobs(batch_size=128, optimizer="sgd", lr=0.1, epochs=2))
    view.run()
    buttons = [c for c in view.table.children if getattr(c, "description", "") == "Re-run this row"]
    assert len(buttons) == 2
    path.write_bytes(path.read_bytes()[:40])                               # truncated behind the view's back
    _quiet(buttons[1].click)
    buttons = [c for c in view.table.children if getattr(c, "description", "") == "Re-run this row"]
    assert buttons == [] and "no runs yet" in view.text()
    assert "could not be read, so a fresh one was started" in view.message.value and "char" not in view.message.value


def test_the_table_keeps_its_height_and_shows_your_latest_run_with_its_rank(tmp_path):
    path = tmp_path / "scoreboard.json"
    board = Scoreboard(path)
    challenge = Challenge()
    for i in range(10):
        board.record(challenge, fake_result(0.01 * (i + 1), 5 + i, challenge=challenge))
    view = arena(QUICK, board=Scoreboard(path), background=False)          # this run ranks below the ten
    cells = [getattr(c, "value", "") for c in view.table.children]
    assert view.table.layout.height and any("← latest" in c for c in cells)
    assert any("the top 7 and your latest of 11 runs" in c for c in cells)
    assert "#11 of 11 on your scoreboard" in view.summary.value
    assert "0.5 s" in "".join(cells)                                        # one time, one rounding
    empty = arena(QUICK, board=Scoreboard(tmp_path / "other.json"), run=False)
    notice = [c for c in empty.table.children if "no runs yet" in getattr(c, "value", "")]
    assert notice and notice[0].layout.grid_column == "1 / -1"             # spans the table: no stretched column


def test_every_header_cell_is_a_line_high_so_its_rule_lines_up(tmp_path):
    """The blank header over the Re-run buttons holds a no-break space: an empty cell would draw its rule at the top."""
    import re

    view = arena(QUICK, board=Scoreboard(tmp_path / "scoreboard.json"), run=False)
    headers = [c.value for c in view.table.children if "border-bottom" in getattr(c, "value", "")]
    assert len(headers) == 11
    assert all(re.search(r">[^<]+</div>$", h) for h in headers), headers
