"""The VAE collapse: the KL formula against torch.distributions, and the two reductions' outcomes on seeds."""
import pytest
import torch
from torch.distributions import Normal, kl_divergence

from course_utils.chapters import ch07_vae_collapse as vc


def test_the_kl_is_torch_distributions_kl():
    mu, log_var = torch.randn(5, 4), torch.randn(5, 4)
    ours = vc.kl_per_dimension(mu, log_var)
    theirs = kl_divergence(Normal(mu, (0.5 * log_var).exp()), Normal(0.0, 1.0))
    assert torch.allclose(ours, theirs, atol=1e-5)


def test_a_mean_reduced_reconstruction_collapses_and_a_summed_one_does_not():
    for seed in range(2):
        mean, summed = vc.train_vae("mean", seed), vc.train_vae("sum", seed)
        assert mean.active == 0 and mean.kl < 0.01
        assert abs(mean.reconstruction - mean.variance) < 0.01 * mean.variance       # predicts the data's mean
        assert summed.active == vc.FACTORS and summed.reconstruction < 0.2 * summed.variance
        assert mean.variance == summed.variance                                     # the same data


def test_the_mean_is_the_sum_over_the_value_count():
    x, y = torch.randn(3, vc.DIM), torch.randn(3, vc.DIM)
    squared = torch.nn.functional.mse_loss(x, y, reduction="none")
    assert torch.allclose(squared.sum(1).mean() / vc.DIM, torch.nn.functional.mse_loss(x, y))


def test_a_rising_kl_weight_makes_the_logged_loss_rise_while_the_fixed_weight_loss_falls():
    logged, full = vc.kl_warmup_run(0)
    lowest = logged.index(min(logged))
    assert logged[0] == pytest.approx(full[0], rel=0.2)          # weight 0: only the KL term differs
    assert logged[-1] == pytest.approx(full[-1], rel=1e-6)       # weight 1 at the last epoch: the same quantity
    assert logged[-1] > 1.1 * logged[lowest] and full[-1] < full[lowest]
    assert all(a <= b + 1e-6 for a, b in zip(logged, full))      # weight <= 1: never above the full loss
