"""In-place changes to a leaf: refused on the leaf and its views, allowed through .detach() and .data (chapter 3).

A leaf that requires grad (a parameter) refuses an in-place change, and so does a view of it (``c[:] += 1``).
``.detach()`` and ``.data`` both return a tensor sharing the leaf's storage, so a change through them changes the
leaf; only ``.detach()`` shares the leaf's version counter, so a backward whose graph saved the leaf notices the
change and raises, where ``.data`` lets it compute with the changed values. Under ``torch.no_grad()`` the leaf
itself may be changed in place, the way optimizers update parameters.
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from course_utils.chapters.raised import raised


def _refused(change: Callable[[torch.Tensor], object]) -> str:
    return raised(lambda: change(torch.ones(3, requires_grad=True)), sentences=1)


def _through(alias: str) -> dict[str, object]:
    """Square a leaf (the graph saves it), change it in place through `alias`, then backward."""
    leaf = torch.ones(3, requires_grad=True)
    loss = (leaf * leaf).sum()                       # mul saves both inputs: the leaf's values at version 0
    before = leaf._version
    other = leaf.detach() if alias == "detach" else leaf.data
    other += 1
    found = {"changed": bool((leaf == 2).all()), "version": (before, leaf._version)}
    outcome = raised(loss.backward, sentences=1)
    found["backward"] = "ran" if outcome == "no error" else outcome
    if leaf.grad is not None:
        found["gradient"] = leaf.grad.tolist()       # 2 * leaf: computed from the changed values
    return found


def _under_no_grad() -> bool:
    leaf = torch.ones(3, requires_grad=True)
    with torch.no_grad():
        leaf += 1
    return bool((leaf == 2).all()) and leaf.is_leaf


def leaf_inplace_lines() -> list[str]:
    lines = [f"c += 1 on a leaf that requires grad: {_refused(lambda c: c.add_(1))}",
             f"c[:] += 1 (a view of it): {_refused(lambda c: c[:].add_(1))}"]
    for alias, code in (("detach", "d = c.detach(); d += 1"), ("data", "d = c.data; d += 1")):
        found = _through(alias)
        backward = found["backward"] if found["backward"] != "ran" else \
            f"ran, gradient {found['gradient']} (2c from the changed values)"
        lines.append(f"{code}: c changed too: {found['changed']}; c's version {found['version'][0]} -> "
                     f"{found['version'][1]}; a backward that saved c: {backward}")
    lines.append(f"with torch.no_grad(): c += 1 runs, c stays a leaf: {_under_no_grad()}")
    return lines
