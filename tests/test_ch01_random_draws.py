"""Chapter 1's generator audit: the orders match the draws that make them, and the audit counts real draws."""
import torch
from torch.utils.data import DataLoader

from course_utils.chapters import ch01_random_draws as rd


def test_each_order_is_explained_by_its_draws_over_seeds_and_sizes():
    for seed in range(4):
        for n in (5, 9):
            rows = rd.sampler_orders(n, seed)
            assert all(agree for *_, agree in rows), (seed, n)
            assert all(sorted(order) == list(range(n)) for _, order, _, _ in rows)


def test_the_learners_orders_are_reproduced():
    orders = [order for _, order, _, _ in rd.sampler_orders(5, 1)]
    assert orders == [[0, 4, 2, 3, 1], [1, 3, 4, 0, 2], [4, 1, 3, 0, 2]]


def test_the_audit_counts_draws_against_a_hand_count():
    assert rd.global_draws(lambda: None) == 0
    assert rd.global_draws(lambda: torch.empty((), dtype=torch.int64).random_()) == 1
    assert rd.global_draws(lambda: [torch.empty((), dtype=torch.int64).random_() for _ in range(3)]) == 3
    assert rd.global_draws(lambda: torch.rand(1000)) == "moved"          # a float fill: not whole 64-bit draws
    assert rd.global_draws(lambda: iter(DataLoader(range(5)))) == 1
    assert rd.global_draws(lambda: iter(DataLoader(range(5), shuffle=True))) == 1       # the sampler is lazy
    assert rd.global_draws(lambda: next(iter(DataLoader(range(5), shuffle=True)))) == 2
    assert rd.global_draws(lambda: DataLoader(range(5), shuffle=True)) == 0


def test_the_audit_leaves_the_callers_stream_alone():
    torch.manual_seed(123)
    before = torch.get_rng_state()
    lines = rd.random_draw_lines()
    assert torch.equal(before, torch.get_rng_state())
    said = {line.split("  ")[1].strip(): line.rsplit("  ", 1)[1].strip() for line in lines if line.startswith("  ")
            and "[" not in line}
    assert said["DataLoader(data, shuffle=True), built"] == "no"
    assert said["iter(DataLoader(data)): no shuffle, no worker"] == "yes, 1 draw of 64 bits"
    assert said["Dropout, eval mode"] == "no" and said["Dropout, training mode"] == "yes"
    assert said["a second iter(), unshuffled persistent_workers loader"] == "no"
    assert said["nn.BatchNorm1d(4) and nn.ReLU(), built"] == "no"
    assert said["nn.Conv2d(1, 2, 3) and nn.Embedding(10, 4), built"] == "yes"
