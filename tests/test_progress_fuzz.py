"""The progress store survives a progress file of ANY content, and never loses the learner's valid answers (issue 9.6)."""
import json
import warnings

from hypothesis import HealthCheck, given, settings, strategies as st

from course_utils.infra.quiz import ProgressStore, _repair_progress, _valid_progress
from course_utils.infra.storage import JsonStore

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=20)
records = st.fixed_dictionaries({"attempts": st.integers(1, 10**30), "correct": st.booleans(),
                                 "answer": st.none() | st.text(max_size=10) | st.lists(st.integers(0, 5), max_size=4)
                                 | st.integers()})
good_chapters = st.dictionaries(st.sampled_from(["00", "01", "02", "05"]),
                                st.dictionaries(st.text(min_size=1, max_size=8), records, min_size=1, max_size=3),
                                max_size=3)


def _quiet(call):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return call()


def _backups(folder):
    return sorted(folder.glob("p.json.corrupt-*"))


@SETTINGS
@given(content=st.binary(max_size=300))
def test_any_bytes_never_crash_and_are_kept(tmp_path_factory, content):
    folder = tmp_path_factory.mktemp("bytes")
    path = folder / "p.json"
    path.write_bytes(content)
    store = ProgressStore(path)
    assert isinstance(_quiet(lambda: store.chapter("00")), dict)
    if not _backups(folder):           # nothing set aside: the bytes were a valid progress file, untouched
        assert path.read_bytes() == content
    else:                              # set aside: the exact bytes are kept in the copy
        assert [b.read_bytes() for b in _backups(folder)] == [content]
    _quiet(lambda: store.record("00", "q", "196", True))
    assert ProgressStore(path).chapter("00")["q"]["correct"]


@SETTINGS
@given(data=json_values)
def test_valid_json_of_any_shape_never_crashes(tmp_path_factory, data):
    folder = tmp_path_factory.mktemp("json")
    path = folder / "p.json"
    path.write_text(json.dumps(data))
    store = ProgressStore(path)
    _quiet(lambda: (store.chapter("00"), store.summary([]), store.games()))
    entry = _quiet(lambda: store.record("01", "new", 3, False))
    assert entry["attempts"] >= 1
    assert _valid_progress(json.loads(path.read_text()))      # what is on disk now is a clean progress file


@SETTINGS
@given(good=good_chapters, junk=json_values, where=st.sampled_from(["record", "chapter", "top", "attempts"]))
def test_damage_costs_only_the_damaged_records(tmp_path_factory, good, junk, where):
    folder = tmp_path_factory.mktemp("mixed")
    path = folder / "p.json"
    damaged = {"version": 1, "chapters": json.loads(json.dumps(good))}
    if where == "record":
        damaged["chapters"].setdefault("03", {})["broken"] = junk if not isinstance(junk, dict) else {"correct": junk}
    elif where == "chapter":
        damaged["chapters"]["04"] = junk if not isinstance(junk, dict) else [junk]
    elif where == "top":
        damaged["extra"] = junk
    else:
        damaged["chapters"].setdefault("03", {})["bad-attempts"] = {"attempts": "many", "correct": True}
    raw = json.dumps(damaged)
    path.write_text(raw)
    store = ProgressStore(path)
    _quiet(lambda: store.chapter("00"))
    for chapter, kept in good.items():
        assert _quiet(lambda: store.chapter(chapter)) == kept      # every valid record survives
    backups = _backups(folder)
    assert len(backups) <= 1 and all(b.read_text() == raw for b in backups)   # a copy, never a loss
    assert _valid_progress(json.loads(path.read_text()))


def test_repair_keeps_a_record_with_a_damaged_attempt_count():
    repaired = _repair_progress({"chapters": {"00": {"q": {"attempts": "x", "correct": True, "answer": {"a": 1}}}}})
    assert repaired["chapters"]["00"]["q"] == {"attempts": 1, "correct": True, "answer": None}


def test_json_store_api_without_repair_still_sets_aside(tmp_path):
    """The arena's scoreboard uses JsonStore(path, valid=..., what=...): a damaged file is moved aside, whole."""
    path = tmp_path / "board.json"
    path.write_text("[1, 2, 3]")
    store = JsonStore(path, valid=lambda d: "runs" in d or not d, what="scoreboard")
    assert _quiet(store.read) == {}
    assert [p.read_text() for p in tmp_path.glob("board.json.corrupt-*")] == ["[1, 2, 3]"]
    assert store.update(lambda d: d.setdefault("runs", []).append(1)) is None
    assert json.loads(path.read_text()) == {"runs": [1]}
