"""EarlyStopping (chapter 7) with PyTorch Lightning's semantics, as a small stateful object.

Lightning's rule, reproduced: the best score starts at +inf (mode "min") or -inf (mode "max"); a
validation check *improves* only when it beats the best by strictly more than ``min_delta``
(``current + min_delta < best`` for "min", ``current - min_delta > best`` for "max"); otherwise the
wait count grows by one, and the run stops once ``wait_count >= patience``. A non-finite value
(NaN, +-inf) stops at once. Patience counts validation checks, not epochs or steps. The state
(wait count, best score, the check at which it stopped) is saved in every checkpoint.
"""
from __future__ import annotations

import math
from typing import Any


class EarlyStopping:
    """Stop when the monitored metric has not improved for `patience` validation checks (chapter 7)."""

    def __init__(self, patience: int = 3, min_delta: float = 0.0, mode: str = "min", check_finite: bool = True):
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 0:
            raise ValueError(f"patience must be an integer >= 0, got {patience!r}")
        if isinstance(min_delta, bool) or not isinstance(min_delta, (int, float)) or not math.isfinite(min_delta):
            raise ValueError(f"min_delta must be a finite number, got {min_delta!r}")
        if mode not in ("min", "max"):
            raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
        self.patience = patience
        self.min_delta = abs(float(min_delta))   # Lightning takes |min_delta| and applies the sign from mode
        self.mode = mode
        self.check_finite = check_finite
        self.best_score = math.inf if mode == "min" else -math.inf
        self.wait_count = 0
        self.checks = 0                 # validation checks seen
        self.stopped_check = 0          # 1-based check at which it said stop (0: not stopped)
        self.should_stop = False
        self.reason = ""

    def improves(self, current: float) -> bool:
        """Does `current` beat the best by strictly more than min_delta?"""
        if self.mode == "min":   # written as Lightning writes it (current shifted, not best), same rounding
            return current + self.min_delta < self.best_score
        return current - self.min_delta > self.best_score

    def update(self, current: float) -> bool:
        """Record one validation check; returns True when this value is a new best (chapter 7)."""
        current = float(current)
        self.checks += 1
        improved = False
        if self.check_finite and not math.isfinite(current):
            self.should_stop = True
            self.reason = f"the monitored metric is {current}, not a finite number"
        elif self.improves(current):
            self.best_score, self.wait_count, improved = current, 0, True
        else:
            self.wait_count += 1
            if self.wait_count >= self.patience:
                self.should_stop = True
                self.reason = (f"no improvement of more than {self.min_delta:g} for {self.wait_count} validation "
                               f"checks (best {self.best_score:.4g})")
        if self.should_stop and not self.stopped_check:
            self.stopped_check = self.checks
        return improved

    def state_dict(self) -> dict[str, Any]:
        """Plain values (what a checkpoint stores)."""
        return {"patience": self.patience, "min_delta": self.min_delta, "mode": self.mode,
                "best_score": self.best_score, "wait_count": self.wait_count, "checks": self.checks,
                "stopped_check": self.stopped_check, "should_stop": self.should_stop, "reason": self.reason}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what state_dict returned (patience, min_delta and mode come from the current config)."""
        self.best_score = float(state["best_score"])
        self.wait_count = int(state["wait_count"])
        self.checks = int(state["checks"])
        self.stopped_check = int(state["stopped_check"])
        self.should_stop = bool(state["should_stop"])
        self.reason = str(state["reason"])
