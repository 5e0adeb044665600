"""Chapter 7's logged-rate cell: the warmup wrapper, torch's chain and step(epoch), each against an oracle."""
import math

import pytest
import torch

from course_utils.chapters import ch07_logged_lr as m


def cosine(epoch: int) -> float:
    return m.LR * (1 + math.cos(math.pi * epoch / m.T_MAX)) / 2


def test_the_wrapper_gives_the_optimizer_the_schedule_times_the_warmup_factor_and_the_cosine_reports_neither():
    rows = m.wrapped_cosine(epochs=9)
    for epoch, (used, reported) in enumerate(rows):
        assert reported == pytest.approx(cosine(epoch), rel=1e-12)
        assert used == pytest.approx(cosine(epoch) * min(1.0, (epoch + 1) / m.WARMUP), rel=1e-12)
    assert rows[1][1] == pytest.approx(0.0498, abs=5e-5)         # the learner's logged value
    assert all(u < r for u, r in rows[:m.WARMUP - 1]) and all(u == pytest.approx(r) for u, r in rows[m.WARMUP - 1:])


def test_the_wrapper_and_torchs_chained_warmup_train_with_the_same_rates():
    wrapped = [u for u, _ in m.wrapped_cosine()]
    chained = [row[0] for row in m.chained()]
    assert wrapped == pytest.approx(chained, rel=1e-12)
    assert all(row[0] == row[1] for row in m.chained())


def test_the_period_counts_calls_so_a_per_update_wrapper_is_warm_after_five_updates():
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    warmup = m.LinearDampening(optimizer, 5)
    seen = []
    for _ in range(6):
        seen.append(optimizer.param_groups[0]["lr"])
        with warmup.dampening():
            pass
    assert seen == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0, 1.0])


def test_step_with_an_epoch_warns_in_torchs_words_and_overwrites_with_the_closed_form():
    message, used, closed = m.epoch_argument_warning()
    assert "epoch parameter" in message and "deprecated" in message
    assert used == pytest.approx(closed, rel=1e-12) and used != 0.001


def test_the_lines_print_what_the_runs_measured():
    text = "\n".join(m.logged_lr_lines())
    assert "0.0498" in text and "0.0199" in text
    assert "the chain reports the optimizer's lr at every epoch: True" in text


def test_get_lr_outside_step_decays_again_only_at_the_decay_points():
    from course_utils.chapters.ch07_logged_lr import get_lr_lines, get_lr_outside_step

    for step_size, gamma in ((5, 0.5), (3, 0.1)):
        rows, message = get_lr_outside_step(step_size=step_size, gamma=gamma, lr=0.1, reads=12)
        for i, (rule, last, used) in enumerate(rows):
            assert used == pytest.approx(0.1 * gamma ** (i // step_size)) and last == used      # the closed form
            at_decay = i > 0 and i % step_size == 0
            assert rule == pytest.approx(used * gamma if at_decay else used)
        assert "get_last_lr()" in message
    assert "differs at i = [5, 10]: 0.025 against 0.05, 0.0125 against 0.025" in get_lr_lines()[2]
