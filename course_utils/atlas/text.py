"""The atlas as the chapters print it: a chapter's "errors you will meet here", chapter 9's whole table."""
from __future__ import annotations

import contextlib
import gc
import html
import io
import logging
import os
import sys
import tempfile
from collections import Counter

from course_utils.atlas import ENTRIES, STAGES
from course_utils.atlas.entry import Entry, fragment
from course_utils.atlas.runner import Outcome, run_entry

NORMALISED = ("addresses, process ids, temporary paths, ports, this machine's CPU count, torch's own source location, "
              "the launcher's time and host (and the width of its rules), a DataLoader worker's traceback frames, "
              "the name of the script pickle searched and the seconds a store waited are replaced by <address>, "
              "<pid>, <tmp>, <port>, <cpus>, <torch source>, <time>, <host>, <the worker's frames>, <the loading "
              "script>, <seconds>")


def outcomes(entries: tuple[Entry, ...]) -> list[Outcome]:
    """Every entry run, what the runs print to the terminal themselves kept out of the chapter (see _terminal_aside)."""
    with _terminal_aside():
        done = [run_entry(entry) for entry in entries]
        gc.collect()          # a DataLoader iterator freed here, not in a later cell, with whatever it prints
    return done


@contextlib.contextmanager
def _terminal_aside():
    """Standard error, Python's and the process's (file descriptor 2, which worker processes inherit), sent to a
    temporary file while the entries run, and so are the loggers' handlers that write to it (torch's launcher logs
    each rank it starts and loses). The chapters show each error's message as torch raised it; a dying worker's
    own traceback or a warning printed at garbage collection reaches the terminal at a moment that depends on the
    machine's load (a fresh-clone CI run printed one into chapter 9's table once), so it is not shown."""
    sys.stderr.flush()
    saved = os.dup(2)
    handlers = [h for logger in [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
                for h in getattr(logger, "handlers", ()) if type(h) is logging.StreamHandler
                and not getattr(h.stream, "closed", False)]   # (one whose stream is closed writes nothing anyway)
    with tempfile.TemporaryFile() as aside, contextlib.redirect_stderr(io.StringIO()):
        os.dup2(aside.fileno(), 2)
        streams = [h.setStream(io.StringIO()) for h in handlers]
        try:
            yield
        finally:
            for handler, stream in zip(handlers, streams):
                handler.setStream(stream)
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


def one_entry(outcome: Outcome) -> str:
    """An entry as a chapter prints it: what was done, torch's words, the fix and what it gave."""
    entry = outcome.entry
    said = f"{outcome.raised}: {outcome.message}" if outcome.raised else "(nothing raised: the atlas is wrong here)"
    lines = [f"[{entry.id}] {entry.title}", *("    " + line for line in said.splitlines())]
    if entry.not_run:
        lines.append(f"    (not run here: {entry.not_run}; the words as real reports print them)")
        return "\n".join(lines)
    fix = fragment(entry.fix, entry.params[0]).strip().splitlines()
    result = f" -> {outcome.shown!r}" if outcome.shown is not None else ""
    lines.append(f"  fix{'' if outcome.fixed else ' (FAILED)'}: {fix[-1].strip() if len(fix) == 1 else '(' + str(len(fix)) + ' lines, below)'}{result}")
    if len(fix) > 1:
        lines += ["      " + line for line in fix]
    return "\n".join(lines)


def chapter_text(chapter: int) -> str:
    """Every entry of `chapter`, run now: torch's message and the fix's result."""
    mine = tuple(e for e in ENTRIES if e.chapter == chapter)
    done = outcomes(mine)
    quoted = sum(bool(o.entry.not_run) for o in done)
    head = (f"{len(done)} errors: {len(done) - quoted} raised just now on torch (only {NORMALISED}), "
            f"{sum(o.ok for o in done)} of them as expected, with their fixes run"
            + (f"; {quoted} quoted from real reports, not run here (each says why)" if quoted else ""))
    return "\n\n".join([head, *(one_entry(o) for o in done)])


def size_by_stage(entries: tuple[Entry, ...] = ENTRIES) -> str:
    counts = Counter(e.stage for e in entries)
    return ", ".join(f"{stage} {counts[stage]}" for stage in STAGES) + f" (all: {len(entries)})"


# JupyterLab right-aligns output tables and lets a wide one run off the page: left-aligned, wrapped, page wide.
TABLE = "width:100%;table-layout:fixed;border-collapse:collapse"
CELL = "text-align:left;vertical-align:top;white-space:normal;overflow-wrap:anywhere;padding:2px 6px"


def table(done: list[Outcome]) -> tuple[str, str]:
    """Chapter 9's reference: (HTML, text) with stage, torch's message (first line), cause, fix, chapter."""
    rows_html, rows_text = [], []
    for o in sorted(done, key=lambda o: (STAGES.index(o.entry.stage), o.entry.chapter, o.entry.id)):
        first = o.message.splitlines()[0] if o.message else ""
        short = first if len(first) <= 160 else first[:157] + "..."
        fix = o.entry.fix_shown
        ran = "not run: " + o.entry.not_run if o.entry.not_run else ("ran" if o.fixed else "FAILED")
        rows_html.append(f"<tr><td>{o.entry.stage}</td><td><code>{html.escape(o.raised)}: {html.escape(short)}</code>"
                         f"</td><td>{html.escape(o.entry.cause)}</td><td><code>{html.escape(fix)}</code> ({ran})</td>"
                         f"<td>{o.entry.chapter}</td></tr>".replace("<td>", f"<td style='{CELL}'>"))
        rows_text.append(f"{o.entry.stage:<12} ch{o.entry.chapter}  {o.raised}: {short}\n{'':<17}fix ({ran}): {fix}")
    head = "".join(f"<th style='{CELL}'>{name}</th>" for name in ("stage", "torch says", "cause", "fix", "chapter"))
    widths = "".join(f"<col style='width:{w}%'>" for w in (8, 34, 33, 20, 5))
    return (f"<table style='{TABLE}'><colgroup>{widths}</colgroup><tr>{head}</tr>{''.join(rows_html)}</table>",
            f"{size_by_stage()}; messages as raised just now ({NORMALISED})\n" + "\n".join(rows_text))
