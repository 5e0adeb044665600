"""Right and wrong solutions of exercise 7.5, token_window_losses (chapter 7): the shared tables import them."""
import torch

from course_utils.exercises.ch07_token_accum import reference_token_window_losses


# --- right, in other styles -----------------------------------------------------------------------------

def twl_indexing(token_losses, masks):
    pairs = [(loss, mask.bool()) for loss, mask in zip(token_losses, masks)]
    total = sum(mask.sum().item() for _, mask in pairs)
    if not total:
        raise ValueError("no real token")
    return [loss[mask].sum() / total for loss, mask in pairs]


def twl_weights(token_losses, masks):
    """Each micro-batch's own mean, weighted by its share of the window's tokens (empty ones weigh 0)."""
    losses, masks = list(token_losses), [m.bool() for m in masks]
    counts = [int(m.sum()) for m in masks]
    if sum(counts) == 0:
        raise ValueError("all padding")
    return [(l[m].mean() * (n / sum(counts))) if n else l.sum() * 0 for l, m, n in zip(losses, masks, counts)]


RIGHTS = [(reference_token_window_losses,), (twl_indexing,), (twl_weights,)]


# --- wrong, the way learners write them ------------------------------------------------------------------

def twl_mean_of_means(token_losses, masks):
    losses, masks = list(token_losses), [m.bool() for m in masks]
    return [l[m].mean() / len(losses) for l, m in zip(losses, masks)]


def twl_with_padding(token_losses, masks):
    losses = list(token_losses)
    return [l.mean() / len(losses) for l in losses]


def twl_by_examples(token_losses, masks):
    losses, masks = list(token_losses), [m.bool() for m in masks]
    rows = sum(len(m) for m in masks)
    return [l[m].mean() * len(m) / rows for l, m in zip(losses, masks)]


def twl_twice_through(token_losses, masks):
    total = sum(int(m.sum()) for m in masks)           # a generator is empty after this line
    return [(l * m).sum() / total for l, m in zip(token_losses, masks)]


def twl_int_index(token_losses, masks):
    losses, masks = list(token_losses), list(masks)
    total = sum(int(m.sum()) for m in masks)
    return [l[m].sum() / total for l, m in zip(losses, masks)]   # an int mask indexes rows 0 and 1


def twl_item(token_losses, masks):
    losses, masks = list(token_losses), [m.bool() for m in masks]
    total = sum(int(m.sum()) for m in masks)
    return [torch.tensor(l[m].sum().item() / total) for l, m in zip(losses, masks)]


def twl_no_empty_check(token_losses, masks):
    losses, masks = list(token_losses), [m.bool() for m in masks]
    total = max(1, sum(int(m.sum()) for m in masks))
    return [l[m].sum() / total for l, m in zip(losses, masks)]


WRONGS = [("mean of means", (twl_mean_of_means,), "own mean divided by K"),
          ("padding counted", (twl_with_padding,), "Padding positions"),
          ("weighted by examples", (twl_by_examples,), "by its examples"),
          ("generator read twice", (twl_twice_through,), "generator"),
          ("int mask as an index", (twl_int_index,), "pick rows 0 and 1"),
          ("loss through .item()", (twl_item,), "carries no gradient"),
          ("empty window accepted", (twl_no_empty_check,), "should raise ValueError")]
