"""Exercise of chapter 7: token-weighted gradient accumulation over padded micro-batches.

``token_window_losses(token_losses, masks)`` gets the K micro-batches of one accumulation window: per-token
losses (B_i x T_i, padding positions hold any finite number) and their masks (1/True = a real token, int or
bool). It returns K scalar losses; ``backward()`` on each in turn must accumulate the gradient of the
window's mean loss over its real tokens, the loss of one big batch. The oracle: that mean, over the real
tokens of the whole window, and its gradient (mask / window tokens at every position).
"""
from __future__ import annotations

from collections.abc import Iterable

import torch

from course_utils.exercises.core import Attempt, Exercise
from course_utils.exercises.words import Fail, number, pair, show

NAME = "token_window_losses"


def reference_token_window_losses(token_losses: Iterable[torch.Tensor], masks: Iterable[torch.Tensor]) -> list:
    """The course's solution: each micro-batch's real-token sum over the window's real-token count."""
    token_losses, masks = list(token_losses), [m.bool() for m in masks]
    total = sum(int(m.sum()) for m in masks)
    if total == 0:
        raise ValueError("the window has no real token: there is no mean loss to take")
    return [torch.where(m, loss, torch.zeros_like(loss)).sum() / total for loss, m in zip(token_losses, masks)]


def _case(lengths: list[list[int]], width: list[int], seed: int, dtype: torch.dtype = torch.bool,
          garbage: float = 50.0) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Per-token losses (leaves needing grad; padding holds `garbage`) and masks of `dtype`, for K micro-batches."""
    g = torch.Generator().manual_seed(seed)
    losses, masks = [], []
    for rows, t in zip(lengths, width):
        mask = torch.tensor([[j < n for j in range(t)] for n in rows])
        real = torch.rand(len(rows), t, generator=g) * 3
        losses.append(torch.where(mask, real, torch.full_like(real, garbage)).requires_grad_(True))
        masks.append(mask.to(dtype))
    return losses, masks


def _run_case(attempt: Attempt, what: str, lengths: list[list[int]], width: list[int], seed: int,
              dtype: torch.dtype = torch.bool, generators: bool = False) -> None:
    losses, masks = _case(lengths, width, seed, dtype)
    before = [m.clone() for m in masks], [l.detach().clone() for l in losses]
    bool_masks = [m.bool() for m in masks]
    tokens = [int(m.sum()) for m in bool_masks]
    total = sum(tokens)
    want = [(l.detach() * m).sum().item() / total for l, m in zip(losses, bool_masks)]
    args = ((l for l in losses), (m for m in masks)) if generators else (losses, masks)
    try:
        got = attempt.call(what, *args)
    except Fail as failure:
        if dtype is torch.bool or not _runs_with_bool(attempt, lengths, width, seed):
            raise
        raise Fail(failure.problem, f"The masks here are {str(dtype).removeprefix('torch.')} (0 and 1), and your "
                   "function runs on the same case with bool masks: `~`, masked_fill and indexing treat an int mask "
                   "differently. Turn each mask into bool first (`m.bool()`), or multiply by it.") from None
    if isinstance(got, torch.Tensor) and got.dim() == 1:
        raise Fail("your function returned one tensor of losses; the loop needs one scalar loss per micro-batch "
                   "to call backward() on after each forward.", "Return a list of K 0-d tensors.")
    try:
        got = list(got)
    except TypeError:
        raise Fail(f"your function returned {show(got)}, not a list of K losses.",
                   "Return a list with one 0-d tensor per micro-batch.") from None
    if len(got) != len(losses):
        hint = ("`masks` may be a generator, read once: turn it into a list before you count and use it."
                if generators else "One loss per micro-batch of the window, in order.")
        raise Fail(f"your function returned {len(got)} losses for a window of {len(losses)} micro-batches.", hint)
    for i, loss in enumerate(got):
        if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
            raise Fail(f"loss {i} is {show(loss)}, not a 0-d tensor.", "Each loss must be a scalar tensor.")
        if not loss.requires_grad or loss.grad_fn is None:
            cut = ("carries no gradient (requires_grad is False)" if not loss.requires_grad else
                   "is a new leaf tensor (no grad_fn): backward() on it stops there and never reaches the token losses")
            empty = ("A micro-batch with no real token still needs a loss made from its token losses, one whose "
                     "value and gradient are 0: `(token_losses * 0).sum()`, or the masked sum. "
                     if not tokens[i] else "")
            raise Fail(f"loss {i} {cut}.", empty + "Compute it from the token losses with tensor operations: no "
                       ".item(), no torch.tensor(...).")
    if [m.tolist() for m in masks] != [m.tolist() for m in before[0]] or any(
            not torch.equal(l.detach(), b) for l, b in zip(losses, before[1])):
        raise Fail("your function changed its inputs (a mask or a token loss).", "Compute new tensors; leave the "
                   "inputs as they came.")
    values = [loss.item() for loss in got]
    for i, (g, w) in enumerate(zip(values, want)):
        if not abs(g - w) <= 1e-5 * max(1.0, abs(w)):          # (a NaN is never close)
            mean_i = want[i] * total / tokens[i] if tokens[i] else float("nan")
            rows = sum(len(m) for m in bool_masks)
            if g != g:
                hint = ("A micro-batch with no real token has no mean (0 / 0 is NaN): its share of the window's loss "
                        "is 0." if not tokens[i] else "A NaN: was something divided by a count of 0?")
            elif tokens[i] and abs(g - mean_i * len(bool_masks[i]) / rows) < 1e-5 * max(1.0, abs(g)):
                hint = ("That weights micro-batch i by its examples (rows). With padding, rows hold different "
                        "numbers of real tokens: weight by real tokens instead.")
            elif tokens[i] and abs(g - mean_i / len(losses)) < 1e-5 * max(1.0, abs(g)):
                hint = ("That is micro-batch i's own mean divided by K: a micro-batch with few real tokens then "
                        "weighs as much as one with many. Weight every token the same, across the window.")
            elif dtype is not torch.bool and _indexed(losses[i], masks[i], total, g):
                hint = ("These masks are integers (0 and 1): as an index they pick rows 0 and 1, not the real "
                        "tokens. Turn a mask into bool first, or multiply by it.")
            elif abs(g - want[i] * total / sum(l.numel() for l in losses)) < 1e-5 * max(1.0, abs(g)):
                hint = (f"That divides by all {sum(l.numel() for l in losses)} positions of the window, padding "
                        f"included: divide by its {total} real tokens.")
            elif abs(g) > 10:
                hint = "Padding positions hold arbitrary numbers: leave them out (the mask says which are real)."
            else:
                hint = ("The window's loss is the sum of its real tokens' losses over the number of real tokens in "
                        "the whole window (all K micro-batches).")
            shown = pair(g, w)
            raise Fail(f"loss {i} is {shown[0]}; it should be {shown[1]} (micro-batch {i} has {tokens[i]} real "
                       f"tokens of {total} in the window).", hint)
    for loss in got:
        loss.backward()
    for i, (l, m) in enumerate(zip(losses, bool_masks)):
        expected = m.float() / total
        if l.grad is None or not torch.allclose(l.grad, expected, atol=1e-7, rtol=1e-5):
            raise Fail(f"after backward() on every loss, micro-batch {i}'s token losses have the gradient "
                       f"{show(l.grad)}; one big batch gives {number(1 / total)} at each real token and 0 at "
                       "padding.", "Build each loss from its own micro-batch's token losses only.")


def _runs_with_bool(attempt: Attempt, lengths: list[list[int]], width: list[int], seed: int) -> bool:
    """Does the learner's function return without raising on this case given bool masks (probe, no verdict)?"""
    try:
        attempt.functions[0](*_case(lengths, width, seed, torch.bool))
    except Exception:  # noqa: BLE001 - it raises either way: the masks' dtype is not singled out
        return False
    return True


def _indexed(loss: torch.Tensor, mask: torch.Tensor, total: int, got: float) -> bool:
    """Is `got` what an int mask used as an index gives (rows 0 and 1 summed)?"""
    try:
        return abs(loss.detach()[mask].sum().item() / total - got) < 1e-5 * max(1.0, abs(got))
    except Exception:  # noqa: BLE001 - a mask that cannot index: not this mistake
        return False


def check_token_window_losses(attempt: Attempt) -> str:
    """The oracle: the mean over the window's real tokens, and its gradient."""
    _run_case(attempt, "3 micro-batches, uneven padding (3+1, 5+5+4, 2+0 real tokens of width 5), bool masks",
              [[3, 1], [5, 5, 4], [2, 0]], [5, 5, 5], 0)
    _run_case(attempt, "2 micro-batches of different widths (6 and 3), int64 masks of 0 and 1",
              [[6, 2, 1], [3, 3]], [6, 3], 1, dtype=torch.int64)
    _run_case(attempt, "token losses and masks given as generators, 3 micro-batches",
              [[4, 2], [1, 1], [3, 4]], [4, 4, 4], 2, generators=True)
    _run_case(attempt, "the epoch's short last window: one micro-batch", [[2, 5, 1]], [5], 3)
    _run_case(attempt, "a micro-batch that is all padding inside a window of 3",
              [[3, 3], [0, 0], [1, 2]], [3, 3, 3], 4, dtype=torch.int32)
    losses, masks = _case([[0, 0], [0]], [3, 2], 5)
    attempt.at("a window with no real token at all (all padding): ValueError expected")
    try:
        attempt.functions[0](losses, masks)
    except ValueError:
        pass
    except Exception as exc:  # noqa: BLE001 - anything else is the wrong signal
        raise Fail(f"your function raised {type(exc).__name__}; a window with no real token should raise ValueError.",
                   "Count the window's real tokens first; if there are none, raise ValueError.") from None
    else:
        raise Fail("your function returned for a window with no real token; it should raise ValueError.",
                   "Count the window's real tokens first; if there are none, raise ValueError.")
    return ("6 cases agree with one big batch's mean over real tokens, value and gradient: uneven padding, "
            "different widths, int and bool masks, generators, a short last window, an all-padding micro-batch, "
            "an all-padding window.")


def exercises() -> list[Exercise]:
    return [Exercise(NAME, "07", "token-weighted losses for gradient accumulation",
                     "token_window_losses(token_losses, masks) -> list of K 0-d tensors", check_token_window_losses,
                     arity=(2,), oracle="the mean over the window's real tokens and its gradient")]
