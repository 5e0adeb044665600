"""Chapter 8's scoreboard: beside the quiz progress, no lost runs, damaged files set aside, rows that re-run."""
import json
import multiprocessing
import subprocess
import sys
import warnings
from dataclasses import replace
from pathlib import Path

import pytest

from course_utils.chapters.ch08_arena import Challenge, Knobs, RaceResult, race
from course_utils.infra.quiz import default_progress_path
from course_utils.chapters.ch08_scoreboard import (KEEP, Scoreboard, default_scoreboard_path, reproduces, rerun,
                                                   row_from, scoreboard_text)

ROOT = Path(__file__).resolve().parents[1]
CHALLENGE = Challenge(n_train=240, n_val=120, max_epochs=4)


def fake_result(lr: float, hit: int | None, acc: float = 0.95, challenge: Challenge = CHALLENGE) -> RaceResult:
    """A result with the shape a race returns (no training: the store is what is under test)."""
    knobs = Knobs(batch_size=32, optimizer="adam", lr=lr, schedule="constant", epochs=4)
    return RaceResult(target=challenge.target, knobs=knobs, config=challenge.config(knobs), updates_to_target=hit,
                      final_acc=acc, best_acc=acc, peak_memory=1000, total_updates=32, wall_s=0.5,
                      curve=((1, 0.3),))


def test_the_scoreboard_lives_beside_the_quiz_progress(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_PROGRESS", str(tmp_path / "somewhere" / "progress.json"))
    assert default_scoreboard_path().parent == default_progress_path().parent == tmp_path / "somewhere"
    assert Scoreboard().path == tmp_path / "somewhere" / "scoreboard.json"


def test_rows_are_ranked_deduplicated_and_capped(tmp_path):
    board = Scoreboard(tmp_path / "scoreboard.json")
    assert board.rows(CHALLENGE) == [] and "no runs yet" in scoreboard_text([])
    assert board.record(CHALLENGE, fake_result(0.1, 30))["rank"] == 1
    assert board.record(CHALLENGE, fake_result(0.2, 20))["rank"] == 1
    assert board.record(CHALLENGE, fake_result(0.3, None, acc=0.8))["rank"] == 3
    assert board.record(CHALLENGE, fake_result(0.4, 25))["rank"] == 2
    assert [r["updates_to_target"] for r in board.rows(CHALLENGE)] == [20, 25, 30, None]
    board.record(CHALLENGE, fake_result(0.1, 30))                       # the same config again: one row
    assert len(board.rows(CHALLENGE)) == 4
    other = replace(CHALLENGE, target=0.8)
    board.record(other, fake_result(0.1, 9, challenge=other))
    assert len(board.rows(CHALLENGE)) == 4 and len(board.rows(other)) == 1 and len(board.challenges()) == 2
    for i in range(KEEP + 5):                                           # only the best KEEP survive
        board.record(CHALLENGE, fake_result(1 + i / 100, 100 + i))
    rows = board.rows(CHALLENGE)
    assert len(rows) == KEEP and rows[0]["updates_to_target"] == 20 and rows[-1]["updates_to_target"] == 100 + KEEP - 4
    text = scoreboard_text(rows, top=3, mark=rows[1])
    assert "<- your latest" in text.splitlines()[2] and f"(first 3 of {KEEP} runs)" in text


def test_a_stopped_race_is_not_recorded(tmp_path):
    with pytest.raises(ValueError, match="stopped"):
        Scoreboard(tmp_path / "s.json").record(CHALLENGE, replace(fake_result(0.1, 5), stopped=True))


def _writer(path: str, worker: int, count: int) -> None:
    board = Scoreboard(path)
    for i in range(count):
        board.record(CHALLENGE, fake_result(round(0.001 * (worker * 100 + i + 1), 6), worker * 10 + i))


def test_concurrent_writers_from_several_processes_lose_no_run(tmp_path):
    path = str(tmp_path / "scoreboard.json")
    workers, count = 4, 8
    assert workers * count <= KEEP
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(path, w, count)) for w in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    rows = Scoreboard(path).rows(CHALLENGE)
    assert len(rows) == workers * count
    assert {r["config"]["lr"] for r in rows} == {round(0.001 * (w * 100 + i + 1), 6)
                                                  for w in range(workers) for i in range(count)}
    assert len({r["pid"] for r in rows}) == workers
    assert not list(tmp_path.glob("*.corrupt-*")) and not list(tmp_path.glob("*.tmp"))


def _good_file() -> dict:
    row = row_from(fake_result(0.1, 12))
    return {"version": 1, "challenges": {CHALLENGE.key: {"challenge": {}, "runs": [row]}}}


def _with(change):
    data = _good_file()
    change(data["challenges"][CHALLENGE.key]["runs"][0])
    return json.dumps(data).encode()


CORRUPT = {
    "empty": b"",
    "not utf-8": b"\xff\xfe\x00garbage\x80",
    "truncated json": json.dumps(_good_file()).encode()[:-20],
    "a list": b"[1, 2, 3]",
    "a number": b"42",
    "a string": b'"scoreboard"',
    "challenges is a list": b'{"challenges": []}',
    "runs is a dict": json.dumps({"challenges": {"x": {"challenge": {}, "runs": {}}}}).encode(),
    "run missing a field": _with(lambda r: r.pop("final_acc")),
    "count of the wrong type": _with(lambda r: r.__setitem__("updates_to_target", "twelve")),
    "accuracy not finite": _with(lambda r: r.__setitem__("final_acc", float("nan"))),
    "config torch would reject": _with(lambda r: r["config"].__setitem__("batch_size", 0)),
    "config with an unknown knob": _with(lambda r: r["config"].__setitem__("warp_speed", 9)),
    "knobs of the wrong type": _with(lambda r: r["knobs"].__setitem__("lr", "fast")),
    "deeply nested": b"[" * 100_000 + b"]" * 100_000,
}


@pytest.mark.parametrize("kind", sorted(CORRUPT))
def test_every_kind_of_damaged_file_is_set_aside_with_a_warning(tmp_path, kind):
    path = tmp_path / "scoreboard.json"
    path.write_bytes(CORRUPT[kind])
    board = Scoreboard(path)
    with pytest.warns(RuntimeWarning, match="could not be read|was damaged"):
        assert board.rows(CHALLENGE) == []
    backups = list(tmp_path.glob("scoreboard.json.corrupt-*"))
    assert len(backups) == 1 and backups[0].read_bytes() == CORRUPT[kind]     # kept, byte for byte
    assert board.warnings_seen and "kept as scoreboard.json.corrupt-" in board.warnings_seen[0]
    assert str(tmp_path) not in board.warnings_seen[0]                        # no folder path, no parser text
    with warnings.catch_warnings():
        warnings.simplefilter("error")                                          # a fresh file: no more warnings
        assert board.record(CHALLENGE, fake_result(0.1, 12))["rank"] == 1
        assert len(board.rows(CHALLENGE)) == 1


def test_a_good_file_is_not_set_aside(tmp_path):
    path = tmp_path / "scoreboard.json"
    path.write_bytes(json.dumps(_good_file()).encode())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(Scoreboard(path).rows(CHALLENGE)) == 1


def test_an_unwritable_place_warns_and_never_crashes(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    board = Scoreboard(blocker / "scoreboard.json")
    with pytest.warns(RuntimeWarning):
        row = board.record(CHALLENGE, fake_result(0.1, 12))
    assert row["updates_to_target"] == 12


def test_a_saved_row_re_runs_in_a_fresh_process_and_reproduces_its_count_exactly(tmp_path):
    knobs = Knobs(batch_size=32, optimizer="adam", lr=0.1, schedule="onecycle", epochs=4)
    result = race(CHALLENGE, knobs)
    assert result.reached                                  # a count worth reproducing
    path = tmp_path / "scoreboard.json"
    Scoreboard(path).record(CHALLENGE, result)
    row = Scoreboard(path).rows(CHALLENGE)[0]
    assert reproduces(row, rerun(row))                     # same process
    script = ("import json, sys; from course_utils.chapters.ch08_scoreboard import Scoreboard, rerun; "
              "from course_utils.chapters.ch08_arena import Challenge; "
              f"row = Scoreboard(sys.argv[1]).rows(Challenge(**{CHALLENGE.__dict__!r}))[0]; r = rerun(row); "
              "print(json.dumps([r.updates_to_target, r.total_updates, r.final_acc, r.peak_memory]))")
    out = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, cwd=ROOT,
                         check=True).stdout
    assert json.loads(out) == [row["updates_to_target"], row["total_updates"], row["final_acc"], row["peak_memory"]]
