"""The loop doctor's verdict (chapters 5, 9): findings named after the bug registry, with measured evidence."""
from __future__ import annotations

from dataclasses import dataclass

from course_utils.engine.bugs import BUGS


@dataclass(frozen=True)
class Finding:
    """One silent bug the doctor saw: its registry name, what it measured, how to fix it, how often it saw it."""

    name: str
    evidence: str
    fix: str
    count: int = 1

    @property
    def title(self) -> str:
        """The registry's short title for this bug (chapter 5's exhibit name)."""
        return BUGS[self.name].title


def finding(name: str, evidence: str, count: int = 1) -> Finding:
    """A Finding whose fix comes from the registry, so the doctor and chapter 5 give the same advice."""
    return Finding(name, evidence, BUGS[name].fix, count)


@dataclass(frozen=True)
class Report:
    """What the doctor counted and found; str() is the readable form notebooks print (chapters 5, 9)."""

    findings: tuple[Finding, ...]
    training_forwards: int
    evaluation_forwards: int
    backward_passes: int
    updates: int
    scheduler_steps: int | None     # None: no scheduler was given to the doctor
    notes: tuple[str, ...] = ()     # what limited the checks, or what the doctor saw and did not count as a bug

    @property
    def names(self) -> tuple[str, ...]:
        """The registry names of the findings, in the order they were first seen."""
        return tuple(f.name for f in self.findings)

    def __str__(self) -> str:
        schedule = "" if self.scheduler_steps is None else f", {self.scheduler_steps} scheduler steps"
        lines = [f"Loop doctor: {self.training_forwards} training forwards, {self.evaluation_forwards} evaluation "
                 f"forwards, {self.backward_passes} backward passes, {self.updates} updates{schedule}."]
        if not self.findings:
            lines.append("No silent bug found.")
        for item in self.findings:
            times = "" if item.count == 1 else f" (seen {item.count} times)"
            lines += [f"* {item.name}: {item.title}{times}",
                      f"    evidence: {item.evidence}",
                      f"    fix: {item.fix}"]
        lines += [f"Note: {note}" for note in self.notes]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)
