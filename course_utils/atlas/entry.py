"""One entry of the error atlas (issue 39): an error a training loop raises, the fragment that raises it, the fix.

A fragment is Python run in a fresh namespace holding ``torch``, ``nn``, ``F``, ``np``, ``math``, ``warnings``,
``torch.utils.data``'s ``DataLoader``, ``Dataset``, ``TensorDataset``, ``IterableDataset``, ``random_split``,
``WeightedRandomSampler``, ``default_collate``, ``os``, ``signal`` and ``tmp`` (a fresh folder, a ``Path``).
``$name`` in ``code`` and ``fix`` is replaced by ``params[i][name]``: ``params[0]`` is the run the atlas
shows; every other set is a variant whose message ``explain`` must still recognise (other shapes, names,
values). ``fix`` may set ``shown`` to a value the chapter prints as the fix's result.
"""
from __future__ import annotations

import difflib
import string
import textwrap

from dataclasses import dataclass

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
    fix_line: str = ""              # the line a learner writes, where the one read off the fragments misleads
    wordings: tuple[str, ...] = ()  # the same error as older torch (or a GPU) words it, copied from a `sources` thread
    reports_another: bool = False   # its message only says that another error came first (ranked after the rest)

    @property
    def fix_shown(self) -> str:
        """The fix in one line, as a summary table shows it: `fix_line`, else the line the fix changed (see
        `changed_line`), else the run fix's last line."""
        code, fix = (string.Template(text).substitute(self.params[0]) for text in (self.code, self.fix))
        return self.fix_line or changed_line(code, fix) or fix.strip().splitlines()[-1].strip()

    def __post_init__(self) -> None:
        if self.stage not in STAGES:
            raise ValueError(f"entry {self.id}: stage must be one of {STAGES}, got {self.stage!r}")
        if not self.params:
            raise ValueError(f"entry {self.id}: params needs at least one set")
        if self.not_run and not self.message:
            raise ValueError(f"entry {self.id}: an entry that is not run must give torch's message")
        if self.wordings and not self.sources:
            raise ValueError(f"entry {self.id}: another wording must come from a thread in its sources")

    @property
    def is_warning(self) -> bool:
        return self.expect.endswith("Warning")


def fragment(code: str, params: dict) -> str:
    """An entry's code (or fix) with one of its params sets filled in."""
    return string.Template(code).substitute(params)


def source(*parts: str) -> str:
    """A fragment written indented in an entries file (in one or more parts), as the code it is."""
    return "\n".join(textwrap.dedent(part).strip("\n") + "\n" for part in parts)


def logical_lines(text: str) -> list[str]:
    """The statements of a fragment, one per line: a call spread over lines is joined into one."""
    lines, pending, depth = [], "", 0
    for physical in text.splitlines():
        code, _, comment = physical.partition("  #")
        pending = f"{pending} {code.strip()}" if pending else code.rstrip()
        depth += sum(code.count(o) - code.count(c) for o, c in ("()", "[]", "{}"))
        if depth <= 0:
            lines.append(pending + (f"  #{comment}" if comment else ""))
            pending, depth = "", 0
    return lines + ([pending] if pending else [])


def changed_line(code: str, fix: str) -> str:
    """The line a learner changes, read off the two fragments, in this order: a changed or added line the fix
    annotates with a comment; a changed line with a new statement; an added one; a deleted statement ("delete:
    ..."); a line only moved in or out of a block. The fix's own bookkeeping (``shown = ...``) never counts."""
    before, after = logical_lines(code), logical_lines(fix)

    def statement(line: str) -> str:
        return line.partition("  #")[0].rstrip()
    matcher = difflib.SequenceMatcher(a=[statement(line) for line in before], b=[statement(line) for line in after],
                                      autojunk=False)
    changed, added, deleted = [], [], []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        changed += after[j1:j2] if tag == "replace" else []
        added += after[j1:j2] if tag == "insert" else []
        deleted += before[i1:i2] if tag in ("replace", "delete") else []
    old = {statement(line).strip() for line in before}
    new = {statement(line).strip() for line in after}

    def useful(line: str) -> bool:
        return bool(line.strip()) and not line.strip().startswith(("shown", "#"))
    for candidates in ([line for line in changed + added if "  #" in line],
                       [line for line in changed if statement(line).strip() not in old], added):
        if kept := [line.strip() for line in candidates if useful(line)]:
            return kept[0]
    if kept := [statement(line).strip() for line in deleted if useful(line) and statement(line).strip() not in new]:
        return f"delete: {kept[0]}"
    return next((line.strip() for line in changed if useful(line)), "")
