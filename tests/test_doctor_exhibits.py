"""The measured demos behind the two registry entries the loop doctor added (chapter 5)."""
from course_utils.bugs import BUGS
from course_utils.doctor_exhibits import scheduler_before_optimizer, softmax_before_cross_entropy


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
