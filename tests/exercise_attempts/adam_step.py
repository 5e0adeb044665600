"""Attempts at Exercise 3.2, adam_step(param, grad, m, v, t, lr, betas, eps) -> (new_param, new_m, new_v)."""
import math

import torch


def right_textbook(param, grad, m, v, t, lr, betas, eps):
    """The paper's Algorithm 1: moments, bias-corrected moments, update."""
    beta1, beta2 = betas
    new_m = beta1 * m + (1 - beta1) * grad
    new_v = beta2 * v + (1 - beta2) * grad * grad
    m_hat = new_m / (1 - beta1 ** t)
    v_hat = new_v / (1 - beta2 ** t)
    return param - lr * m_hat / (v_hat.sqrt() + eps), new_m, new_v


def right_torch_order(param, grad, m, v, t, lr, betas, eps):
    """torch's own arrangement: lerp for m, addcmul for v, step size lr / bc1, denominator sqrt(v) / sqrt(bc2) + eps."""
    beta1, beta2 = betas
    new_m = m.lerp(grad, 1 - beta1)
    new_v = (v * beta2).addcmul(grad, grad, value=1 - beta2)
    step_size = lr / (1 - beta1 ** t)
    denom = new_v.sqrt() / math.sqrt(1 - beta2 ** t) + eps
    return param.addcdiv(new_m, denom, value=-step_size), new_m, new_v


def wrong_no_bias_correction(param, grad, m, v, t, lr, betas, eps):
    """No bias correction: at t=1 with m = v = 0 the step is lr * (1 - b1) / sqrt(1 - b2), ~3x lr, not lr."""
    beta1, beta2 = betas
    new_m = beta1 * m + (1 - beta1) * grad
    new_v = beta2 * v + (1 - beta2) * grad ** 2
    return param - lr * new_m / (new_v.sqrt() + eps), new_m, new_v


def wrong_eps_inside_sqrt(param, grad, m, v, t, lr, betas, eps):
    """eps inside the square root: wrong where |grad| is near sqrt(eps), e.g. grad 1e-4 with eps 1e-8."""
    beta1, beta2 = betas
    new_m = beta1 * m + (1 - beta1) * grad
    new_v = beta2 * v + (1 - beta2) * grad ** 2
    return param - lr * (new_m / (1 - beta1 ** t)) / torch.sqrt(new_v / (1 - beta2 ** t) + eps), new_m, new_v


def wrong_t_plus_one(param, grad, m, v, t, lr, betas, eps):
    """Reads t as 0-based and corrects with t + 1: t=1 with m = v = 0 steps about 0.74 lr instead of lr."""
    beta1, beta2 = betas
    new_m = beta1 * m + (1 - beta1) * grad
    new_v = beta2 * v + (1 - beta2) * grad ** 2
    m_hat, v_hat = new_m / (1 - beta1 ** (t + 1)), new_v / (1 - beta2 ** (t + 1))
    return param - lr * m_hat / (v_hat.sqrt() + eps), new_m, new_v


def wrong_old_moments(param, grad, m, v, t, lr, betas, eps):
    """Updates the parameter with the old m and v, then the moments: t=1 with m = v = 0 moves nothing."""
    beta1, beta2 = betas
    new_param = param - lr * (m / (1 - beta1 ** t)) / ((v / (1 - beta2 ** t)).sqrt() + eps)
    return new_param, beta1 * m + (1 - beta1) * grad, beta2 * v + (1 - beta2) * grad ** 2


def wrong_returns_corrected(param, grad, m, v, t, lr, betas, eps):
    """Returns the bias-corrected m_hat, v_hat as the new moments: the next step corrects them twice, t >= 1."""
    beta1, beta2 = betas
    m_hat = (beta1 * m + (1 - beta1) * grad) / (1 - beta1 ** t)
    v_hat = (beta2 * v + (1 - beta2) * grad ** 2) / (1 - beta2 ** t)
    return param - lr * m_hat / (v_hat.sqrt() + eps), m_hat, v_hat


def wrong_paper_efficient_eps(param, grad, m, v, t, lr, betas, eps):
    """The paper's "more efficient" form, lr_t = lr sqrt(1-b2^t)/(1-b1^t) with eps uncorrected: off for grad ~ 1e-8."""
    beta1, beta2 = betas
    new_m = beta1 * m + (1 - beta1) * grad
    new_v = beta2 * v + (1 - beta2) * grad ** 2
    lr_t = lr * math.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)
    return param - lr_t * new_m / (new_v.sqrt() + eps), new_m, new_v


def wrong_correction_without_sqrt(param, grad, m, v, t, lr, betas, eps):
    """Divides sqrt(v) by (1 - b2^t) instead of its square root: any step with t small."""
    beta1, beta2 = betas
    new_m = beta1 * m + (1 - beta1) * grad
    new_v = beta2 * v + (1 - beta2) * grad ** 2
    return param - lr * (new_m / (1 - beta1 ** t)) / (new_v.sqrt() / (1 - beta2 ** t) + eps), new_m, new_v


def wrong_ascent(param, grad, m, v, t, lr, betas, eps):
    """Sign slip, param + lr * ...: climbs the loss, any nonzero grad."""
    beta1, beta2 = betas
    new_m = beta1 * m + (1 - beta1) * grad
    new_v = beta2 * v + (1 - beta2) * grad ** 2
    return param + lr * (new_m / (1 - beta1 ** t)) / ((new_v / (1 - beta2 ** t)).sqrt() + eps), new_m, new_v
