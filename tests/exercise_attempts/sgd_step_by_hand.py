"""Attempts at Exercise 3.3, sgd_step_by_hand(W, b, x, t, lr) -> (W_new, b_new); x and t are 1-D."""
import torch


def right_outer(W, b, x, t, lr):
    """dL/dy = 2 (y - t) / outputs; dL/dW = outer(dL/dy, x); dL/db = dL/dy."""
    y = W @ x + b
    dy = 2 * (y - t) / y.numel()
    return W - lr * torch.outer(dy, x), b - lr * dy


def right_elementwise(W, b, x, t, lr):
    """The chain rule entry by entry in plain Python loops, results back in tensors of W's dtype."""
    n_out, n_in = W.shape
    y = [sum(W[i, j].item() * x[j].item() for j in range(n_in)) + b[i].item() for i in range(n_out)]
    dy = [2 * (y[i] - t[i].item()) / n_out for i in range(n_out)]
    W_new = [[W[i, j].item() - lr * dy[i] * x[j].item() for j in range(n_in)] for i in range(n_out)]
    b_new = [b[i].item() - lr * dy[i] for i in range(n_out)]
    return torch.tensor(W_new, dtype=W.dtype), torch.tensor(b_new, dtype=b.dtype)


def wrong_no_factor_two(W, b, x, t, lr):
    """Drops the 2 of the square's derivative: half the step, any case with y != t."""
    y = W @ x + b
    dy = (y - t) / len(y)
    return W - lr * torch.outer(dy, x), b - lr * dy


def wrong_sum_not_mean(W, b, x, t, lr):
    """Forgets the mean's 1 / outputs: a step `outputs` times too large whenever there are 2+ outputs."""
    y = W @ x + b
    dy = 2 * (y - t)
    return W - lr * torch.outer(dy, x), b - lr * dy


def wrong_transposed_grad(W, b, x, t, lr):
    """outer(x, dy).T written as outer(x, dy): right shape only when square, and then transposed (the chapter's case)."""
    y = W @ x + b
    dy = 2 * (y - t) / len(y)
    g = torch.outer(x, dy)
    return W - lr * (g if g.shape == W.shape else g.T), b - lr * dy


def wrong_mean_over_inputs(W, b, x, t, lr):
    """Divides by the number of inputs, not outputs: wrong whenever inputs != outputs."""
    y = W @ x + b
    dy = 2 * (y - t) / W.shape[1]
    return W - lr * torch.outer(dy, x), b - lr * dy


def wrong_bias_not_updated(W, b, x, t, lr):
    """Updates W only, returns b unchanged: any case with y != t."""
    y = W @ x + b
    dy = 2 * (y - t) / len(y)
    return W - lr * torch.outer(dy, x), b


def wrong_target_minus_output(W, b, x, t, lr):
    """(t - y) in place of (y - t): steps up the loss, any case with y != t."""
    y = W @ x + b
    dy = 2 * (t - y) / len(y)
    return W - lr * torch.outer(dy, x), b - lr * dy


def wrong_forgets_bias_in_forward(W, b, x, t, lr):
    """Forward as y = W x, without b: wrong whenever b != 0 (the chapter's b = 0 hides it)."""
    y = W @ x
    dy = 2 * (y - t) / len(y)
    return W - lr * torch.outer(dy, x), b - lr * dy
