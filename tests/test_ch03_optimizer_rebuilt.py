"""Chapter 3: an optimizer built again starts from no state."""
import torch

from course_utils.chapters.ch03_optimizer_rebuilt import rebuilt_lines, sgd_epochs


def test_a_new_sgd_restarts_momentum_and_writing_the_lr_keeps_it_on_unprinted_seeds():
    for seed in (5, 6):
        kept, rebuilt = sgd_epochs(seed, False), sgd_epochs(seed, True)
        assert min(kept) >= 0.3 and max(rebuilt) < 0.2


def test_the_first_update_of_a_new_sgd_is_plain_sgd():
    """With empty momentum buffers, SGD(momentum=0.9)'s first step is exactly lr * grad."""
    w = torch.nn.Parameter(torch.ones(3))
    w.grad = torch.tensor([1.0, -2.0, 0.5])
    torch.optim.SGD([w], lr=0.1, momentum=0.9).step()
    assert torch.allclose(w.detach(), torch.ones(3) - 0.1 * torch.tensor([1.0, -2.0, 0.5]))


def test_the_lines_report_the_adam_state_counts():
    assert rebuilt_lines(seeds=(4,))[-1].startswith("Adam: parameters with state after load_state_dict: 2; in an Adam "
                                                  "built again after that: 0")
