"""In-place changes to a leaf: torch's refusals, and what .detach() and .data share."""
from course_utils.chapters import ch03_leaf_inplace as li


def test_the_leaf_and_its_view_refuse():
    assert "leaf Variable that requires grad" in li._refused(lambda c: c.add_(1))
    assert "view of a leaf Variable" in li._refused(lambda c: c[:].add_(1))
    assert li._refused(lambda c: c + 1) == "no error"                      # out of place is fine


def test_detach_shares_the_version_counter_and_data_does_not():
    detached, data = li._through("detach"), li._through("data")
    assert detached["changed"] and data["changed"]
    assert detached["version"] == (0, 1) and "modified by an inplace operation" in detached["backward"]
    assert data["version"] == (0, 0) and data["backward"] == "ran"
    assert data["gradient"] == [4.0, 4.0, 4.0]                               # 2c at c = 2: the changed values
    assert li._under_no_grad()
