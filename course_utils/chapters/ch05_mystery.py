"""Chapter 5's mystery game: one loop bug hidden per round in the shared MYSTERY run, named from the curves."""
from __future__ import annotations

import random
from dataclasses import dataclass

from course_utils.engine.bugs import BUGS, LOOP_BUGS
from course_utils.chapters.ch05_museum import MYSTERY, SIGNATURE_PANEL, Comparison, compare


@dataclass(frozen=True)
class Grade:
    correct: bool
    guess: str
    answer: str
    message: str


class MysteryGame:
    """Rounds hide one loop bug each in the one shared MYSTERY run; the learner names it from the curves.

    Rounds are dealt without replacement (a seeded shuffle of the bugs; a fresh shuffle once all were
    shown); a round takes one diagnosis, and no guess counts once the bug has been revealed.
    """

    def __init__(self, seed: int = 0, choices: tuple[str, ...] = LOOP_BUGS, config: dict | None = None):
        self.seed = seed
        self.choices = tuple(choices)
        self.config = dict(config or MYSTERY)
        self.round = 0
        self.hidden: str | None = None
        self.comparison: Comparison | None = None
        self.revealed = False
        self._deck: list[str] = []
        self._decks = 0

    def _deal(self) -> str:
        self.peek()
        return self._deck.pop()

    def peek(self) -> str:
        """The bug the next round will hide (dealing a new seeded deck when this one is used up)."""
        if not self._deck:
            self._deck = list(self.choices)
            random.Random(self.seed * 1000 + self._decks).shuffle(self._deck)
            self._decks += 1
        return self._deck[-1]

    def new_round(self, bug: str | None = None) -> Comparison:
        """Start a round: hide `bug` (or the next of the seeded deck) and return its healthy-vs-bugged curves."""
        if bug is None:
            bug = self._deal()
        elif bug not in self.choices:
            raise ValueError(f"unknown mystery bug {bug!r}")
        self.comparison = compare((bug,), **self.config)     # museum's run cache: each pair is trained once
        self.round += 1
        self.hidden, self.revealed = bug, False
        return self.comparison

    def setup_text(self) -> str:
        """The run's settings: the same for every round, so they say nothing about the hidden bug."""
        return "same run every round: " + ", ".join(f"{k}={v}" for k, v in self.config.items()
                                                    if k != "measure_memory")

    def grade(self, guess: str) -> Grade:
        """Grade a diagnosis once; the message reveals the bug, its signature and fix. ValueError after the reveal."""
        if self.hidden is None:
            raise ValueError("start a round first")
        if self.revealed:
            raise ValueError("this round's bug is already revealed: start a new round")
        self.revealed = True
        bug = BUGS[self.hidden]
        ok = guess == self.hidden
        verdict = "Correct" if ok else f"Not quite: you said {guess}"
        return Grade(ok, guess, self.hidden,
                     f"{verdict}. The hidden bug was {bug.name} ({bug.title}); look at the panel "
                     f"'{SIGNATURE_PANEL[bug.name]}'. Signature: {bug.symptom} Fix: {bug.fix}")
