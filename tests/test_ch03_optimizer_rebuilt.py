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


def test_federated_averaging_replacing_the_clients_orphans_their_optimizers_and_load_state_dict_does_not():
    """The oracle for 'orphaned': the replaced run's averaged weights never change after round 1, bit for bit."""
    from course_utils.chapters.ch03_optimizer_rebuilt import federated_lines, federated_run
    replaced = federated_run(seed=7, way="replaced", rounds=3)
    assert replaced[1] == replaced[2] == replaced[3] and replaced[1] < replaced[0]
    for way in ("kept", "fresh"):
        run = federated_run(seed=7, way=way, rounds=3)
        assert run[0] > run[1] > run[3] and run[1] == replaced[1]       # round 1 is the same for all three
    lines = federated_lines(seeds=range(2), rounds=3)
    assert lines[3].endswith("on 2 of 2")
