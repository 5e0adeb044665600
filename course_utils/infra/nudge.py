"""The nudge: a perturbation every host can run, to prove a printed output is a conclusion, not a trajectory's digits.

Another CPU rounds float32 differently in the last bit (issue 38); a chaotic run (high learning rate, many steps,
a bug) grows that into different printed digits. A host can only imitate the CPUs whose code paths it has, so the
course makes the same kind of difference on purpose: with ``COURSE_NUDGE=1e-6`` in the environment, every
parameter that torch's own initialisers (``torch.nn.init``) fill at random, and every point of the course's
generated data, is multiplied by ``1 + 1e-6 * s`` with ``s`` a fixed pattern in [-1, 1). Nothing random is drawn,
so every seeded stream (shuffles, dropout masks, the data's own noise) is exactly what it was; only the digits
move, by about ten float32 ulps, as a slower and wider version of what another CPU does. A printed output that
nbval compares must survive it (the "nudged" pass of ``tools/nbval_perturbed.py``).

Without the variable nothing is patched and ``nudge`` returns its input itself: the course computes exactly what
it computes everywhere else. ``course_utils`` installs it on import, so a trainer or worker process started by a
chapter is nudged too.
"""
from __future__ import annotations

import functools
import math
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

VARIABLE = "COURSE_NUDGE"
# torch.nn.init's random fillers: every built-in layer initialises through one of these (nn.Linear through
# kaiming_uniform_ and uniform_, nn.Embedding through normal_, ...). Constant fillers (ones_, zeros_) stay exact.
INITIALISERS = ("uniform_", "normal_", "trunc_normal_", "kaiming_uniform_", "kaiming_normal_", "xavier_uniform_",
                "xavier_normal_", "orthogonal_", "sparse_")
_ORIGINAL = "__course_nudge_original__"


def size() -> float:
    """The relative size asked for by ``COURSE_NUDGE`` (0.0 when unset; a negative size flips the pattern's signs);
    ValueError naming the variable if it is not a number below 0.01 in size."""
    text = os.environ.get(VARIABLE, "").strip()
    if not text:
        return 0.0
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{VARIABLE} must be a small relative size such as 1e-6, got {text!r}") from None
    if not (math.isfinite(value) and abs(value) < 1e-2):
        raise ValueError(f"{VARIABLE} must be a relative size between -0.01 and 0.01, got {text!r}")
    return value


def pattern(count: int) -> torch.Tensor:
    """A fixed float64 pattern in [-1, 1) of `count` values (a multiplicative hash of the index; no RNG drawn)."""
    import torch
    index = torch.arange(count, dtype=torch.int64)
    return ((index * 2654435761 + 12345) % 65536).double() / 32768.0 - 1.0


def nudge(tensor: torch.Tensor, relative: float | None = None) -> torch.Tensor:
    """`tensor` scaled element by element by 1 + relative * pattern (chapters' data and weights); itself if 0."""
    relative = size() if relative is None else relative
    if not relative or not tensor.is_floating_point() or tensor.numel() == 0 or tensor.device.type == "meta":
        return tensor                      # a meta tensor (also a fake one on meta) holds no values to nudge
    factor = 1.0 + relative * pattern(tensor.numel()).reshape(tensor.shape).to(tensor.device)
    return (tensor.double() * factor).to(tensor.dtype)


def _nudged(fill):
    @functools.wraps(fill)
    def wrapper(tensor, *args, **kwargs):
        import torch
        result = fill(tensor, *args, **kwargs)
        with torch.no_grad():
            tensor.copy_(nudge(tensor.detach()))
        return result
    setattr(wrapper, _ORIGINAL, fill)
    return wrapper


def install() -> bool:
    """Wrap torch.nn.init's random fillers when ``COURSE_NUDGE`` asks for it (course_utils does, on import).

    Returns whether the nudge is now in force. Idempotent; ``uninstall`` puts torch's functions back.
    """
    if not size():
        return False
    import torch       # only now: without the variable, importing course_utils does not import torch
    for name in INITIALISERS:
        fill = getattr(torch.nn.init, name, None)
        if fill is not None and not hasattr(fill, _ORIGINAL):
            setattr(torch.nn.init, name, _nudged(fill))
    return True


def uninstall() -> None:
    """Put torch.nn.init's own fillers back (tests)."""
    import torch
    for name in INITIALISERS:
        fill = getattr(torch.nn.init, name, None)
        if fill is not None and hasattr(fill, _ORIGINAL):
            setattr(torch.nn.init, name, getattr(fill, _ORIGINAL))
