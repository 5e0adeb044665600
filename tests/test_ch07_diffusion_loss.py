"""The DDPM whose loss barely moves: the closed-form floor against importance sampling, no trained model below it,
and the printed claims' arithmetic."""
import torch

from course_utils.chapters import ch07_diffusion_loss as dl


def test_the_best_noise_guess_is_the_posterior_mean_found_by_importance_sampling():
    g = torch.Generator().manual_seed(0)
    prior = dl.blobs(400_000, g)
    for level in (20, 35, 49):
        a, b = dl.ALPHAS_BAR[level].sqrt(), (1 - dl.ALPHAS_BAR[level]).sqrt()
        xt = torch.tensor([[1.0, 0.5], [-1.5, -0.2]])
        log_w = -((xt[:, None] - a * prior[None]) ** 2).sum(2) / (2 * b ** 2)       # N(x_t; a x0, b^2 I)
        x0 = (log_w.softmax(1)[:, :, None] * prior[None]).sum(1)
        sampled = (xt - a * x0) / b
        exact = dl.best_noise_guess(xt, torch.full((2,), level))
        assert torch.allclose(exact, sampled, atol=0.02), (level, exact, sampled)


def test_no_trained_model_beats_the_floor_and_training_moves_toward_it():
    runs = dl.train(range(2), steps=400, every=200, window=100)
    lowest = dl.floor()
    for r in runs:
        assert all(f > lowest for f in r["fixed"]) and r["fixed"][-1] < r["fixed"][0]
        assert len(r["losses"]) == 400 and len(r["samples"]) == 2 and r["samples"][0].shape == (1000, 2)


def test_a_copy_samples_the_same_whoever_it_is_stacked_with():
    from course_utils.chapters.seed_stack import StackedMLP

    pair, alone = StackedMLP([0, 1], (3, 8, 2)), StackedMLP([1], (3, 8, 2))
    together = dl.sample(pair, 50, [torch.Generator().manual_seed(7), torch.Generator().manual_seed(8)])
    assert torch.allclose(together[1], dl.sample(alone, 50, [torch.Generator().manual_seed(8)])[0], atol=1e-5)


def test_the_lines_count_what_they_say():
    def run(mean, std, fixed, near):
        return {"step": [1000, 2000], "mean": mean, "std": std, "fixed": fixed, "near": near}
    runs = [run([0.36, 0.33], [0.05, 0.05], [0.35, 0.31], [0.2, 0.4]),      # all three hold
            run([0.40, 0.30], [0.05, 0.05], [0.35, 0.34], [0.2, 0.25])]     # none holds
    lines = dl.diffusion_lines(runs, 0.27)
    assert lines[2].endswith("on 1 of 2") and "on 1 of 2 (the data itself" in lines[4]
    assert "over 15% on 1 of 2" in lines[3] and "over 80% of that loss on 1 of 2" in lines[3]


def test_the_floors_shares_by_level_add_up_and_the_middle_levels_hold_most():
    shares = dl.floor_by_level()
    assert abs(sum(shares) - 1) < 1e-5 and shares[1] == max(shares)
    assert dl.data_near_a_blob() > 0.99
