"""One entry of the error atlas (issue 39): an error a training loop raises, the fragment that raises it, the fix.

A fragment is Python run in a fresh namespace holding ``torch``, ``nn``, ``F``, ``np``, ``math``, ``warnings``,
``torch.utils.data``'s ``DataLoader``, ``Dataset``, ``TensorDataset``, ``IterableDataset``, ``random_split``,
``WeightedRandomSampler``, ``default_collate``, ``os``, ``signal`` and ``tmp`` (a fresh folder, a ``Path``).
``$name`` in ``code`` and ``fix`` is replaced by ``params[i][name]``: ``params[0]`` is the run the atlas
shows; every other set is a variant whose message ``explain`` must still recognise (other shapes, names,
values). ``fix`` may set ``shown`` to a value the chapter prints as the fix's result.
"""
from __future__ import annotations

import string
import textwrap

from dataclasses import dataclass, field

STAGES = ("data", "step", "precision", "evaluation", "checkpoint", "distributed")


@dataclass(frozen=True)
class Entry:
    id: str                         # a short slug, unique
    stage: str                      # one of STAGES
    chapter: int                    # the chapter whose mechanism it belongs to (its "errors you will meet here")
    title: str                      # what the learner did, in a few words
    code: str                       # raises the error (or warns) on the pinned torch
    fix: str                        # the same fragment fixed: runs without the error
    cause: str                      # one or two sentences
    expect: str                     # the exception's type name ("RuntimeError") or the warning's ("UserWarning")
    params: tuple[dict, ...] = ({},)
    sources: tuple[str, ...] = ()   # real threads where the error recurs
    not_run: str = ""               # why it cannot be run here (then `message` is torch's text, from its source)
    message: str = ""               # only with not_run: the message as torch words it
    python_note: str = ""           # where Python's own words differ between versions, what is normalised
    fix_line: str = ""              # the line a learner writes, where the run fix is a stand-in (no GPU here)

    @property
    def fix_shown(self) -> str:
        """The fix in one line, as a summary table shows it: `fix_line`, else the run fix's last line."""
        return self.fix_line or string.Template(self.fix).substitute(self.params[0]).strip().splitlines()[-1].strip()

    def __post_init__(self) -> None:
        if self.stage not in STAGES:
            raise ValueError(f"entry {self.id}: stage must be one of {STAGES}, got {self.stage!r}")
        if not self.params:
            raise ValueError(f"entry {self.id}: params needs at least one set")
        if self.not_run and not self.message:
            raise ValueError(f"entry {self.id}: an entry that is not run must give torch's message")

    @property
    def is_warning(self) -> bool:
        return self.expect.endswith("Warning")


def source(*parts: str) -> str:
    """A fragment written indented in an entries file (in one or more parts), as the code it is."""
    return "\n".join(textwrap.dedent(part).strip("\n") + "\n" for part in parts)
