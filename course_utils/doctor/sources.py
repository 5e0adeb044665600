"""Where the loop's data comes from (chapters 5, 9): DataLoader batches and epochs, seen as they flow.

``DataWatch`` is the part of ``LoopDoctor`` that sees each batch leave a DataLoader iterator (never calling the
dataset), ties a forward to the batch it ran on, counts the training epochs, and turns ``tensor.item()`` after
a forward into a ``Reading`` (``readings.py``). ``keys.py`` turns what it saw into split keys at report time.
"""
from __future__ import annotations

import bisect
import itertools
import weakref
from dataclasses import dataclass, field

import torch
from torch.utils.data import DataLoader

from course_utils.doctor import keys
from course_utils.doctor.gradients import storage_pointer as _pointer
from course_utils.doctor.readings import Reading, _safely, combined, mean_of


SUM_SIZE = 64      # a tensor that sums readings holds a few numbers (yolov5's: 3 losses), not activations


@dataclass(eq=False)
class Source:
    """A dataset as the loop draws from it: batches, epochs, and (if its storage is opaque) keys as they flow."""

    dataset: object
    readable: bool
    batches: int = 0
    epochs: int = 0
    trained: bool = False
    evaluated: bool = False
    flow: list = field(default_factory=list)


class DataWatch:
    """The data side of LoopDoctor (a mixin: the state lives on the doctor, set up in its __init__)."""

    def _source(self, dataset: object) -> Source:
        source = self.sources.get(id(dataset))
        if source is None:
            source = self.sources[id(dataset)] = Source(dataset, keys.readable(dataset))
        return source

    def _next_batch(self, original, iterator):
        try:
            batch = original(iterator)
        except StopIteration:
            self._guarded(self._epoch_end, iterator)
            raise
        self._guarded(self._batch, iterator, batch)
        return batch

    def _batch(self, iterator, batch) -> None:
        self._settle_child_evaluations(trained=False)
        self._exhausted.discard(iterator)          # a persistent-workers iterator is reused epoch after epoch
        source = self._source(iterator._dataset)
        source.batches += 1
        if not source.readable and len(source.flow) < 100_000:
            batch_size = getattr(iterator._index_sampler, "batch_size", None)
            found = keys.batch_keys(batch, keys.batch_second(batch, batch_size))
            if found is not None:
                source.flow.append(found)
        self._serial += 1
        if iterator in self._training_iterators and _delivered_all(iterator):
            self._complete_unended.add(id(iterator))      # its epoch is over, even if nobody asks for one more batch
        tensors = keys.batch_tensors(batch)
        self._fresh = True              # the next forward runs on this batch, even if the loop transformed it
        self._last_batch = (self._serial, id(iterator._dataset), {_pointer(t) for t in tensors},
                            [(t.shape, t.device) for t in tensors], weakref.ref(iterator))

    def _epoch_end(self, iterator) -> None:
        self._complete_unended.discard(id(iterator))
        if iterator in self._exhausted or not iterator._num_yielded:
            return
        self._exhausted.add(iterator)
        source = self._source(iterator._dataset)
        source.epochs += 1
        if iterator not in self._training_iterators:
            return
        self.obs.epochs += 1
        self._epoch_serial = self._serial
        for track in self.tracks:
            if track.pending:
                track.settle("epoch end", self.obs.backward_passes)
            pending = track.unapplied()
            if pending:
                track.epoch_marks.append((self.obs.epochs, pending))

    def _batch_of(self, x: torch.Tensor | None) -> tuple[int | None, object]:
        """(source id, batch identity) of a forward's input: a DataLoader's batch (any forward on its tensors, or
        the first forward since it was drawn on a tensor of its shape, or of its shape but for the batch dimension:
        normalised, moved, its views concatenated), a slice of the data
        given to the doctor, or (no DataLoader in use) a tensor the loop made; (None, None) for anything else."""
        if x is None:
            return None, None
        pointer = _pointer(x)
        if pointer in self._given:
            given = self._given[pointer]
            self._source(given)
            return id(given), ("input", pointer, x.shape, x.data_ptr())
        last = self._last_batch
        if last is not None:
            serial, source, pointers, shapes, iterator = last
            fresh, self._fresh = self._fresh, False
            if pointer in pointers or any(x.shape == s and (fresh or x.device != d) for s, d in shapes) or (
                    fresh and x.dim() > 1 and any(len(s) == x.dim() and x.shape[1:] == s[1:] for s, _ in shapes)):
                return source, ("batch", serial, iterator)    # the last: its views joined (SimCLR's torch.cat)
            return None, None          # not the batch, nor the first forward on its shape since (a GAN's fakes)
        if pointer in self._recent_outputs:
            return None, None
        return None, ("input", pointer)

    # --- evaluation averages -------------------------------------------------------------------------

    def _item(self, original, tensor):
        """tensor.item(): a Reading if it may be an evaluation value (no gradient, or read from a batch of a dataset
        nobody trained on yet); the training loss's .item() stays a plain float."""
        value = original(tensor)
        reading = self._reading
        if reading is not None and type(value) is float and not torch.compiler.is_compiling():
            source = self._reading_source
            if not tensor.requires_grad or (source is not None and not self.sources[source].trained):
                mean = self._mean_loss is not None and self._mean_loss() is tensor
                return Reading(value, reading, self._averaged, reading[3], mean)
        return value

    def _loss_called(self, call, loss, *args, **kwargs):
        """A loss module's call: remember its result if it is one batch's mean (reduction="mean", 0-d)."""
        result = call(loss, *args, **kwargs)
        try:
            mean = isinstance(result, torch.Tensor) and result.dim() == 0 and getattr(loss, "reduction", None) == "mean"
            self._mean_loss = weakref.ref(result) if mean else None
        except Exception:  # noqa: BLE001 - the loop's loss must never fail because of the doctor
            self._mean_loss = None
        return result

    def _mean_taken(self, original, values, *args, **kwargs):
        """np.mean / average / statistics.mean / fmean of a list of readings (or of a loader's per-batch tensors):
        checked as a sum divided by its length."""
        result = original(values, *args, **kwargs)
        if not args and not kwargs:
            _safely(self._list_averaged, values, None)
        return result

    def _list_averaged(self, values: object) -> None:
        if isinstance(values, (list, tuple)) and values and isinstance(values[0], torch.Tensor):
            self._tensors_averaged(values)
        elif not (isinstance(values, (list, tuple)) and values and all(
                isinstance(v, Reading) and (v.terms[0], float(v)) in self.obs.weighted for v in values)):
            mean_of(values)        # (unless every value was also weighed by its batch size: a log line's smoothing)

    def _tensors_averaged(self, values: list | tuple) -> None:
        """k no-gradient 0-d tensors averaged in one call just after a loader's only k forwards (informer's
        `total_loss.append(loss)`, then `np.average(total_loss)`): that loader's per-batch values, as batch means.
        Only when the list is exactly that loader's batches, each value in its own storage: another list of k
        tensors (one tensor's per-class values, per-epoch values) is not matched to forwards it did not come from.""" 
        k = len(values)
        if k < 2 or k > len(self._forward_batches) or not all(
                isinstance(v, torch.Tensor) and v.dim() == 0 and not v.requires_grad for v in values):
            return
        if len({_pointer(v) for v in values}) < k:
            return                                   # views of one tensor (a per-class row unbound): not per batch
        recent = list(itertools.islice(reversed(self._forward_batches), k + 1))
        loaders = {loader for _, loader in recent[:k]}
        if len(loaders) != 1 or None in loaders or (len(recent) > k and recent[k][1] in loaders):
            return                                   # not one loader's forwards, or not all of them
        sizes = [size for size, _ in recent[:k]]
        if min(sizes) != max(sizes):
            self._averaged((self.obs.forwards - k + 1, self.obs.forwards, k, min(sizes), max(sizes)))

    def _tensor_made(self, original, data, *args, **kwargs):
        """torch.tensor / as_tensor / stack of a list of readings (or of 0-d tensors): the newest such tensor is
        remembered, so that its .mean() is checked (one slot: clip_grad_norm_ stacks 0-d norms every update, and a
        store per call would grow with the run)."""
        tensor = original(data, *args, **kwargs)
        if isinstance(data, (list, tuple)) and len(data) > 1 and (
                isinstance(data[0], Reading) or isinstance(data[0], torch.Tensor) and data[0].dim() == 0):
            self._made_from_list = (weakref.ref(tensor), list(data))
        return tensor

    def _tensor_mean(self, original, tensor, *args, **kwargs):
        result = original(tensor, *args, **kwargs)
        made = self._made_from_list
        if made is not None and made[0]() is tensor and not args and not kwargs:
            _safely(self._list_averaged, made[1], None)
        return result

    def _tensor_added(self, original, total, other):
        """total += other: a no-gradient tensor of zeros that gains one no-gradient tensor after each forward sums
        readings, as a float sum of .item()s does (readings.py); anything else ends the record."""
        record = self._tensor_sums.get(id(total))
        known = record is not None and record[0]() is total
        start = (not known and self._reading is not None and isinstance(other, torch.Tensor) and not other.requires_grad
                 and not total.requires_grad and total.numel() <= SUM_SIZE and not torch.compiler.is_compiling()
                 and not total.any())
        result = original(total, other)
        if known:
            terms = record[1]
            if terms is not None:
                terms = combined(terms, self._reading) if isinstance(other, torch.Tensor) else None
            self._tensor_sums[id(total)] = (record[0], terms)
        elif start:
            self._tensor_sums[id(total)] = (weakref.ref(total), self._reading)
        return result

    def _tensor_started(self, original, tensor, other):
        """0 + tensor (a sum that starts as the number 0, as ``dice_score = 0; dice_score += dice`` does): the new
        tensor starts a record of the readings it sums, as a tensor of zeros would."""
        result = original(tensor, other)
        if (isinstance(other, (int, float)) and other == 0 and self._reading is not None and isinstance(result, torch.Tensor)
                and not result.requires_grad and result.numel() <= SUM_SIZE and not torch.compiler.is_compiling()):
            self._tensor_sums[id(result)] = (weakref.ref(result), self._reading)
        return result

    def _tensor_moved(self, original, tensor, *args, **kwargs):
        """tensor.cpu() / .detach(): the copy of a tensor sum keeps its record."""
        result = original(tensor, *args, **kwargs)
        record = self._tensor_sums.get(id(tensor))
        if record is not None and record[0]() is tensor and result is not tensor:
            self._tensor_sums[id(result)] = (weakref.ref(result), record[1])
        return result

    def _tensor_divided(self, original, tensor, other):
        """tensor / k: a tensor sum of k readings divided by k (or by float(k), crnn.pytorch's averager) is their
        mean of batch means."""
        result = original(tensor, other)
        record = self._tensor_sums.get(id(tensor))
        if record is not None and record[0]() is tensor and record[1] is not None and isinstance(other, (int, float)):
            k, smallest, largest = record[1][2:]
            if other == k > 1 and smallest != largest:
                self._averaged(record[1])
        return result

    def _averaged(self, terms: tuple, weighted: float | None = None, over_examples: bool = False) -> None:
        """A mean of batch means over `terms` (or, `over_examples`, batch means summed and divided by the examples),
        or one batch's reading (`weighted`: its value) multiplied by its size."""
        if self.failure is not None:
            return
        if weighted is not None:
            if len(self.obs.weighted) < 100_000:
                self.obs.weighted.add((terms[0], weighted))
        elif len(self.obs.averages) < 1000:
            self.obs.averages.append((*terms, over_examples))

    def _evaluated(self, index: int) -> None:
        """Remember that forward `index` was an evaluation, as runs of consecutive indices."""
        runs = self.obs.evaluation_runs
        at = bisect.bisect_right(runs, [index, float("inf")])
        if at and runs[at - 1][1] >= index - 1:
            runs[at - 1][1] = max(runs[at - 1][1], index)
            if at < len(runs) and runs[at][0] <= index + 1:
                runs[at - 1][1] = runs[at][1]
                del runs[at]
        elif at < len(runs) and runs[at][0] == index + 1:
            runs[at][0] = index
        else:
            runs.insert(at, [index, index])


def _delivered_all(iterator) -> bool:
    """Has a DataLoader iterator yielded every batch of its epoch (an IterableDataset's has no length: no)?"""
    try:
        return iterator._num_yielded == len(iterator)
    except TypeError:
        return False


def _size(x: torch.Tensor | None) -> int:
    return len(x) if x is not None and x.dim() else 1


def _storages(data: object) -> list[int]:
    """Storage addresses of data given to the doctor (tensors, a TensorDataset's, a DataLoader's), so that a
    forward on a slice of it is recognised."""
    if isinstance(data, DataLoader):
        data = data.dataset
    if isinstance(data, torch.utils.data.TensorDataset):
        data = data.tensors
    items = data if isinstance(data, (tuple, list)) else [data]
    return [_pointer(t) for t in items if isinstance(t, torch.Tensor)]
