"""Chapter 4's unseen categories: torch's own IndexError for an index past the table, a reserved row that no
training row uses never moves (its gradient is 0 at every step, counted by a hook), and one that rare categories
use does."""
import pytest
import torch

from course_utils.chapters import ch04_unseen_categories as u


def test_the_refusal_is_torchs_own_message():
    with pytest.raises(IndexError) as raised:
        torch.nn.functional.embedding(torch.tensor([u.SEEN]), torch.zeros(u.SEEN, 1))
    assert u.unseen_lines(range(1))[0].endswith(f"IndexError: {raised.value}")


@pytest.mark.parametrize("seed", [0, 7])
def test_the_reserved_row_moves_only_when_training_rows_use_it(seed, monkeypatch):
    touched = []
    original = u.Model.forward

    def forward(self, index, x):
        out = original(self, index, x)
        if torch.is_grad_enabled():
            self.embedding.weight.register_hook(lambda g: touched.append(bool(g[0].abs().sum() > 0)))
        return out
    monkeypatch.setattr(u.Model, "forward", forward)
    assert u.fit(seed, False, steps=20)["moved"] is False and not any(touched)
    touched.clear()
    assert u.fit(seed, True, steps=20)["moved"] is True and all(touched)
    touched.clear()                  # weight decay moves it with a zero gradient at every step: toward 0
    decayed = u.fit(seed, False, steps=20, decay=0.01)
    assert decayed["moved"] is True and decayed["nearer 0"] is True and touched and not any(touched)


def test_the_lines_count_over_the_seeds_they_name():
    lines = u.unseen_lines()
    assert "moved in training on 0 of 5 seeds" in lines[1] and lines[3].endswith("moved on 5 of 5")
    lower = sum(u.fit(s, True)["error"] < u.fit(s, False)["error"] for s in range(5))
    assert lines[4].endswith(f"on {lower} of 5 seeds") and lower >= 3
    assert "moved on 5 of 5, nearer 0 on 5 of 5" in lines[2]
