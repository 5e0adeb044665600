"""`python -m course_utils.explain`: paste an error message or a whole traceback on stdin, get the atlas's entry.

    python -m course_utils.explain < error.txt
    pbpaste | python -m course_utils.explain

Prints the best entries (torch's message as the atlas raised it, the cause, the fix, the chapter), or says
that nothing matches well and which stage the message points to. Exit code 0: an entry found; 1: none; 2: no
input.
"""
from __future__ import annotations

import os
import sys

from course_utils.atlas.lookup import Found, lookup
from course_utils.atlas.entry import fragment

__all__ = ["explain", "explain_text", "main"]

CHAPTERS = {"data": 1, "step": 3, "precision": 7, "evaluation": 4, "checkpoint": 7, "distributed": 7}


def explain(text: str) -> Found:
    """The atlas entries for a pasted message or traceback, best first (`Found.matches`; empty: no good match)."""
    return lookup(text)


def explain_text(text: str) -> str:
    """The answer as text (what the command prints and chapter 9's box shows)."""
    if not text.strip():
        return "nothing to explain: paste an error message or a traceback"
    found = explain(text)
    if not found.matches:
        closest = found.closest
        where = (f"it looks like a {found.stage} error: see chapter {CHAPTERS[found.stage]}'s \"Errors you will meet "
                 f"here\"" if found.stage else "no stage of a training loop is recognisable in it")
        near = f" (the closest entry, {closest[0].id}, scores {closest[1]:.2f})" if closest else ""
        return f"no entry of the atlas matches this message well{near}; {where}"
    parts = []
    for rank, (entry, value) in enumerate(found.matches, 1):
        fix = fragment(entry.fix, entry.params[0]).strip()
        parts.append(f"{rank}. {entry.title}  [{entry.id}: {entry.stage}, chapter {entry.chapter}; match {min(value, 1.0):.2f}]\n"
                     f"   cause: {entry.cause}\n"
                     f"   fix:   " + fix.replace("\n", "\n          ") +
                     (f"\n   (not run here: {entry.not_run})" if entry.not_run else ""))
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    text = sys.stdin.read()
    if not text.strip():
        print("explain: no input on stdin; paste an error message or a traceback", file=sys.stderr)
        return 2
    answer = explain_text(text)
    try:
        print(answer, flush=True)
    except BrokenPipeError:            # the reader left early (`| head`): what it read is all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # and Python's flush at exit finds no pipe
    return 0 if not answer.startswith("no entry") else 1


if __name__ == "__main__":
    sys.exit(main())
