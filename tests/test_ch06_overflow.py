"""Chapter 6's overflow run: the stable limit is where gradient descent on least squares starts to diverge."""
import math

import numpy as np
import torch

from course_utils.chapters.ch06_overflow import least_squares_run, stable_limit


def test_the_stable_limit_is_two_over_the_largest_curvature():
    """Oracle: NumPy's eigenvalues of the mean squared error's Hessian, 2 [X 1]^T [X 1] / n."""
    x = torch.randn(64, 3, generator=torch.Generator().manual_seed(1))
    design = np.hstack([x.numpy().astype(np.float64), np.ones((64, 1))])
    hessian = 2 * design.T @ design / 64
    assert math.isclose(stable_limit(x), 2 / np.linalg.eigvalsh(hessian).max(), rel_tol=1e-9)


def test_just_under_the_limit_converges_and_just_over_it_overflows():
    for seed in range(3):
        under, over = least_squares_run(seed, 0.95, steps=3000), least_squares_run(seed, 1.05, steps=3000)
        assert under.first_inf is None and under.final < 0.05
        assert over.first_inf is not None and over.first_nan is not None and over.first_nan > over.first_inf
