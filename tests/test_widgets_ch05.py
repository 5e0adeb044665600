"""Chapter 5's views, driven headless: every toggle changes the run; the game is fair and grades once."""
from course_utils.engine.bugs import LOOP_BUGS
from course_utils.infra.quiz import ProgressStore
from course_utils.widgets.base import RUN_HINT
from course_utils.widgets.bug_detector import BugDetectorView, bug_detector
from course_utils.widgets.mystery_view import PLACEHOLDER, mystery


def test_each_toggle_changes_the_run():
    view = BugDetectorView()
    assert "press Run" in view.text()
    for bug in LOOP_BUGS:
        view.select(bug)
        view.run_button.click()
        assert view.comparison is not None and not view.comparison.identical(), bug
        assert view.plot.value[:4] == b"\x89PNG" and bug in view.summary.value
        assert view.text().startswith("Bug detector\n" + bug)
        assert not view.run_button.disabled and view.run_button.description == "Run"
    assert view._repr_mimebundle_()["text/plain"] == view.text() + "\n" + RUN_HINT


def test_stale_ticks_are_marked_and_same_ticks_say_so():
    view = bug_detector("missing_no_grad")
    view.select("missing_no_grad", "data_leakage")
    assert "previous ticks" in view.message.value and "data_leakage" in view.message.value and view.plot.layout.opacity == "0.45"
    view.select("missing_no_grad")
    assert view.plot.layout.opacity == "1"
    view.run_button.click()
    assert "already shown" in view.message.value
    first = view.message.value
    view.run_button.click()                       # pressed again: still an answer, not a button that looks dead
    assert "already shown" in view.message.value and view.message.value != first


def test_combination_and_every_clash_named_without_losing_the_figure():
    view = bug_detector("graph_attached_logging", "missing_no_grad")
    assert "missing_no_grad + graph_attached_logging" in view.text()
    png = view.plot.value
    view.select("clip_before_backward", "clip_after_step", "missing_zero_grad", "zero_grad_after_backward")
    view.run_button.click()
    message = view.message.value
    assert "cannot be combined" in view.text() and "Traceback" not in message
    assert "clip_before_backward and clip_after_step" in message
    assert "missing_zero_grad and zero_grad_after_backward" in message and "bugs:" not in message
    assert view.plot.value == png                           # the last figure stays (dimmed): no layout jump
    view.run_button.click()                                 # pressed again: an answer that shows the press
    assert "cannot be combined" in view.message.value and view.message.value != message


def test_rows_flagged_differs_differ_as_printed():
    import re
    view = bug_detector("unscaled_accumulation")
    rows = [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in view.summary.value.split("<tr>")]
    rows = [cells for cells in rows if len(cells) == 4]
    assert rows and any(cells[3] == "differs" for cells in rows)
    for label, healthy, bugged, mark in rows:
        assert (mark == "differs") == (healthy != bugged), (label, healthy, bugged, mark)


def test_mystery_reveal_is_right_for_every_bug(tmp_path):
    store = ProgressStore(tmp_path / "p.json")
    view = mystery(store=store)
    assert "Your diagnosis?" in view.text()
    view.check_button.click()
    assert "Choose a diagnosis" in view.feedback.value
    for bug in LOOP_BUGS:
        view.new_round(bug)
        assert view.choice.value == PLACEHOLDER and view.plot.value[:4] == b"\x89PNG"
        view.diagnose(bug)
        view.check_button.click()
        assert view.grade.correct and f"The hidden bug was {bug}" in view.text()
        assert store.chapter("05")[f"mystery-{bug}"]["correct"]


def test_no_guess_counts_after_the_reveal(tmp_path):
    store = ProgressStore(tmp_path / "p.json")
    view = mystery(store=store)
    view.new_round(LOOP_BUGS[0])
    view.diagnose(LOOP_BUGS[1])
    view.check_button.click()
    assert not view.grade.correct and f"The hidden bug was {LOOP_BUGS[0]}" in view.text()
    assert view.check_button.disabled and view.choice.disabled
    view.check()                                             # even called directly: nothing recorded
    assert store.chapter("05")[f"mystery-{LOOP_BUGS[0]}"]["correct"] is False
    assert "already revealed" in view.feedback.value
    view.new_round()
    assert not view.check_button.disabled and not view.choice.disabled


def test_mystery_trains_the_next_round_ahead_in_a_kernel_and_gets_the_same_runs():
    """In an event loop (a kernel), New round's run is trained ahead between turns of the loop; finished or
    interrupted half-way, the round shows exactly the runs a synchronous compare() trains."""
    import asyncio

    from course_utils.chapters import ch05_museum as museum

    config = dict(n_train=60, n_val=30, n_test=30, epochs=2, batch_size=16, accum_steps=2, clip_norm=1.0)

    async def play(turns):
        view = mystery(seed=3, store=ProgressStore(path="/dev/null/none.json"), config=config)
        upcoming = view.game.peek()
        for _ in range(turns):
            await asyncio.sleep(0)
        drawn_ahead = view.ahead.png
        assert (drawn_ahead is not None) == (turns > 100)   # finished ahead: the figure is drawn too
        view.new_round()
        assert view.game.hidden == upcoming and view.ahead.key == view.game.peek()   # the next one is under way
        assert view.plot.value == view._figure(view.game.comparison)    # what is shown is this round's figure
        return view.game.comparison

    for turns in (3, 400):                       # interrupted half-way, and finished ahead
        museum._BUGGED.clear()
        ahead = asyncio.run(play(turns))
        museum._BUGGED.clear()
        fresh = museum.compare(ahead.bugs, **config)
        assert ahead.bugged_session.history == fresh.bugged_session.history
        assert ahead.healthy_session.history == fresh.healthy_session.history
        assert ahead == fresh                    # and the curves drawn from them


def test_detector_trains_the_ticked_bugs_ahead_in_a_kernel_and_shows_the_same_result():
    """Ticking starts the run ahead (in an event loop); Run, early or late, shows exactly compare()'s runs."""
    import asyncio

    from course_utils.chapters import ch05_museum as museum

    config = dict(n_train=60, n_val=30, n_test=30, epochs=2, batch_size=16, accum_steps=2, clip_norm=1.0)

    async def play(turns):
        view = bug_detector("missing_no_grad", **config)
        view.boxes["missing_zero_grad"].value = True
        assert view.ahead.key == view.selected()
        for _ in range(turns):
            await asyncio.sleep(0)
        assert (view.ahead.png is not None) == (turns > 100)
        comp = view.run()
        assert view.ahead.key is None and view.shown == view.selected()
        assert view.plot.value == view._figure(view.selected())
        return comp

    for turns in (3, 400):
        museum._BUGGED.clear()
        ahead = asyncio.run(play(turns))
        museum._BUGGED.clear()
        fresh = museum.compare(ahead.bugs, **config)
        assert ahead.bugged_session.history == fresh.bugged_session.history and ahead == fresh


def test_a_run_ahead_that_fails_half_way_costs_neither_the_round_nor_the_detectors_run():
    """The work ahead is only a head start: should finishing it raise, New round and Run train afresh, and the
    learner gets the round (menu and Check enabled) and the detector's result as if nothing had been ahead."""
    import asyncio

    config = dict(n_train=60, n_val=30, n_test=30, epochs=2, batch_size=16, accum_steps=2, clip_norm=1.0)

    def broken():
        yield
        raise RuntimeError("ahead broke")

    async def play():
        view = mystery(seed=3, store=ProgressStore(path="/dev/null/none.json"), config=config)
        view.diagnose(view.game.hidden)
        view.check()
        upcoming = view.game.peek()
        view.ahead.start(upcoming, broken(), lambda: b"never drawn")
        await asyncio.sleep(0)                              # the first step ran; the error comes when finishing
        view.new_round()
        assert view.game.hidden == upcoming and view.game.round == 2
        assert not view.choice.disabled and not view.check_button.disabled and "round 2" in view.status.value
        assert view.plot.value == view._figure(view.game.comparison)

        detector = bug_detector("missing_no_grad", **config)
        detector.boxes["missing_zero_grad"].value = True
        detector.ahead.start(detector.selected(), broken(), lambda: b"never drawn")
        comp = detector.run()
        assert comp is not None and detector.error is None and detector.shown == detector.selected()
        assert detector.plot.value == detector._figure(detector.selected())

    asyncio.run(play())
