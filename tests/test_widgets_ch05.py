"""Chapter 5's views, driven headless: every toggle changes the run; the game reveals every bug."""
from course_utils.bugs import LOOP_BUGS
from course_utils.quiz import ProgressStore
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
    assert view._repr_mimebundle_()["text/plain"] == view.text()


def test_combination_and_clash():
    view = bug_detector("graph_attached_logging", "missing_no_grad")
    assert "missing_no_grad + graph_attached_logging" in view.text()
    view.select("clip_before_backward", "clip_after_step")
    view.run_button.click()
    assert "cannot be combined" in view.text() and "Traceback" not in view.message.value
    assert view.plot.value == b""


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
    view.new_round(LOOP_BUGS[0])
    view.diagnose(LOOP_BUGS[1])
    view.check_button.click()
    assert not view.grade.correct and f"The hidden bug was {LOOP_BUGS[0]}" in view.text()
