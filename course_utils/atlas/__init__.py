"""The error atlas (issue 39): errors a training loop raises, each run on the pinned torch with its fix, and a lookup.

``ENTRIES`` is the data (``entries_*.py``, one file per group of errors); ``runner.run_entry`` runs one;
``lookup.lookup`` finds entries from a pasted message (``python -m course_utils.explain``); ``text`` renders
a chapter's "errors you will meet here" and chapter 9's whole table.
"""
from __future__ import annotations

from course_utils.atlas.entry import STAGES, Entry

from course_utils.atlas import (entries_arrays, entries_autograd, entries_checkpoint,  # noqa: E402
                                 entries_checkpoint_keys, entries_data, entries_ddp, entries_distributed,
                                 entries_evaluation, entries_gpu, entries_layers, entries_loss_dtypes, entries_losses,
                                 entries_module, entries_optim, entries_params, entries_precision, entries_rendezvous,
                                 entries_resume, entries_samplers, entries_samples, entries_saving, entries_sizes,
                                 entries_step, entries_workers)

ENTRIES: tuple[Entry, ...] = tuple(entry for part in (  # the atlas's order: the data, the step, saving and ranks
    entries_samples, entries_data, entries_workers, entries_arrays, entries_samplers, entries_evaluation,
    entries_step, entries_losses, entries_loss_dtypes, entries_layers, entries_sizes, entries_module, entries_params,
    entries_autograd, entries_optim, entries_precision, entries_checkpoint, entries_checkpoint_keys, entries_saving,
    entries_resume, entries_distributed, entries_rendezvous,
    entries_ddp, entries_gpu) for entry in part.ENTRIES)

__all__ = ["ENTRIES", "STAGES", "Entry"]
