"""The error atlas (issue 39): errors a training loop raises, each run on the pinned torch with its fix, and a lookup.

``ENTRIES`` is the data (``entries_*.py``, one file per group of stages); ``runner.run_entry`` runs one;
``lookup.lookup`` finds entries from a pasted message (``python -m course_utils.explain``); ``text`` renders
a chapter's "errors you will meet here" and chapter 9's whole table.
"""
from __future__ import annotations

from course_utils.atlas.entry import STAGES, Entry

from course_utils.atlas.entries_data import ENTRIES as _DATA  # noqa: E402
from course_utils.atlas.entries_saving import ENTRIES as _SAVING  # noqa: E402
from course_utils.atlas.entries_step import ENTRIES as _STEP  # noqa: E402

ENTRIES: tuple[Entry, ...] = _DATA + _STEP + _SAVING

__all__ = ["ENTRIES", "STAGES", "Entry"]
