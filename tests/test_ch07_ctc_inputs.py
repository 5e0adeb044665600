"""CTCLoss given raw outputs or log_softmax over the wrong dimension: what chapter 7 prints, on two seeds."""
import torch
import torch.nn.functional as F

from course_utils.chapters import ch07_ctc_inputs as ci


def test_greedy_decoding_merges_repeats_and_drops_blanks():
    frames = torch.tensor([[0, 2, 2, 0, 2, 3, 3, 0]])          # one utterance: 2, blank, 2, 3
    assert ci.greedy(F.one_hot(frames, ci.C).float().transpose(0, 1)) == [[2, 2, 3]]


def test_each_utterance_spells_its_targets_read_frame_by_frame():
    x, y = ci.utterances(torch.Generator().manual_seed(0))
    assert x.shape == (ci.T, ci.N, ci.C)
    right = sum(d == t for d, t in zip(ci.greedy(x), y.tolist()))
    assert right >= 0.9 * ci.N                   # the frames themselves decode: noise 0.2 seldom flips a best class


def test_the_raw_gradient_is_not_the_values_derivative_by_finite_differences():
    x = torch.randn(6, 1, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0)).requires_grad_()
    args = (torch.tensor([[1, 2]]), torch.tensor([6]), torch.tensor([2]))
    loss = lambda z: torch.nn.CTCLoss(reduction="sum")(z, *args)   # noqa: E731
    grad, = torch.autograd.grad(loss(x), x)
    step = torch.zeros_like(x)
    step[0, 0, 0] = 1e-6
    numeric = (loss(x + step) - loss(x - step)) / 2e-6
    assert abs(numeric - grad[0, 0, 0]) > 0.01
    checks = {case: ci.gradient_matches_value(case) for case in ci.GRADCHECKS}
    assert list(checks.values()) == [False, False, True], checks


def test_two_seeds_agree_with_the_printed_table():
    for seed in range(2):
        raw, good, time = (ci.train(w, seed) for w in list(ci.WAYS)[:3])
        assert raw["first"] < 0 < good["first"] and good["last"] < 0.1 and good["decoded"] >= 0.8
        assert 8 < time["last"] < 10 and time["decoded"] >= 0.8 and raw["decoded"] < 0.8
    assert ci._between([0.3, 0.5]) == "0.1 to 1" and ci._between([8.5, 9.9]) == "8 to 10"
