"""The measured demos behind the registry entries the loop doctor added (chapter 5)."""
import pytest
import torch

from course_utils.engine.bugs import BUGS
from course_utils.engine.bug_demos import (scheduler_before_optimizer, softmax_before_cross_entropy,
                                          update_schedule_per_epoch)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """One intra-op thread: on a shared, loaded 2-core machine two spinning threads made the softmax demo 60x
    slower (9.9 s against 0.14 s); the figures are the same either way."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_scheduler_first_runs_the_schedule_one_update_ahead():
    demo = BUGS["scheduler_before_optimizer"].demo()
    assert demo == scheduler_before_optimizer()
    healthy, bugged = demo.healthy, demo.scheduler_first
    assert bugged[:-1] == healthy[1:]             # every update used the next update's lr
    assert healthy[0] not in bugged               # the first warmup value is never used
    assert bugged[-1] == 0.0 < healthy[-1]        # the cosine's end (0) is used for a whole update


def test_softmax_before_cross_entropy_shrinks_gradients_and_stalls():
    demo = BUGS["softmax_before_cross_entropy"].demo()
    assert demo == softmax_before_cross_entropy()
    assert 2.5 < demo.first_grad_norm_logits / demo.first_grad_norm_softmax < 4    # "about 3 times smaller"
    assert demo.final_loss_softmax > 3 * demo.final_loss_logits
    assert demo.accuracy_softmax < demo.accuracy_logits


def test_one_cycle_stepped_per_epoch_never_leaves_its_warmup():
    demo = BUGS["update_schedule_per_epoch"].demo()
    assert demo == update_schedule_per_epoch()
    assert demo.peak_healthy == demo.max_lr and demo.last_healthy < demo.max_lr / 1e4    # up, then annealed
    assert demo.peak_per_epoch < demo.max_lr / 10 and demo.last_per_epoch == demo.peak_per_epoch   # still rising
    assert f"{demo.peak_per_epoch:.2g}" in BUGS["update_schedule_per_epoch"].symptom
