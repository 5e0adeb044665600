"""How a loop averages its evaluation batches (chapters 5, 9): a float that remembers which batches it sums.

While the doctor watches, ``tensor.item()`` after a forward returns a ``Reading`` when the value may come from
an evaluation (the tensor has no gradient, or the batch came from a dataset nobody has trained on yet; a
training loss's ``.item()`` stays a plain float): a ``float`` with the same value that also remembers which
forwards it was read after and how large their batches were. Adding readings keeps that record
(``total += loss.item()``, ``sum(losses)``), and so does multiplying by 1 (an average meter's ``val * n`` with the
default n = 1); any other arithmetic returns a plain float. Dividing a sum of k
readings by k is the mean of batch means, wrong when the batches differ in size; the doctor is told (and at
report time checks that those forwards were evaluations), and the quotient is a plain float. A reading multiplied
by its own batch's size is a batch weighed by its examples, and the doctor is told that too: a list of readings
averaged plainly in one call whose every value was also weighed by its batch's size (DETR's meters: a weighted
global average for the result, a plain mean of the recent values for the log line) is a side figure, not the
result. Only the very values count: a loss meter left unweighted beside a weighted accuracy meter is still found.
A value read from a loss module's result with reduction="mean" is a batch's mean; k of them summed and divided
by the number of examples those batches held (``test_loss /= len(loader.dataset)`` after ``+= loss.item()``)
is about 1/B of the mean, and is reported as the same bug. With reduction="sum" that division is right, and a
loss computed by a function (``F.cross_entropy``) says nothing about its reduction here: neither is reported.

A Reading pickles, copies and prints as the plain float it equals, so nothing the loop saves or prints
changes. A list of readings averaged outside Python's arithmetic, by ``np.mean``, ``statistics.mean`` /
``fmean`` or ``torch.tensor(list).mean()`` (makemore's evaluation), gets the same check (``mean_of``; the
doctor wraps those calls). A tensor can sum them too, as yolov5's validation does (``loss = torch.zeros(3)``, then
``loss += loss_items`` after each forward, then ``loss.cpu() / len(dataloader)``): a no-gradient tensor of zeros
(or the number 0 that a tensor is added to: ``total = 0; total += dice``) that gains one no-gradient tensor after
each forward keeps the same record (``sources.py``: ``_tensor_added``, ``_tensor_started``), through ``.cpu()``
and ``.detach()``, until it is divided by its count. What it cannot follow: ``np.array(list).mean()`` and other
array methods, ``float(tensor)``, which Python forces back to a plain float, and a tensor sum copied any other way.
"""
from __future__ import annotations

from collections.abc import Callable


class Reading(float):
    """A float read from forward outputs: which forwards (first..last, k of them) and their batch sizes (lo..hi);
    how many examples they held (`examples`) and whether every value is a loss module's batch mean (`means`)."""

    __slots__ = ("terms", "sink", "examples", "means")

    def __new__(cls, value: float, terms: tuple[int, int, int, int, int] | None = None,
                sink: Callable | None = None, examples: int = 0, means: bool = False) -> float:
        if terms is None:                 # Reading(x), as statistics.mean converts its result: a plain float
            return float(value)
        self = super().__new__(cls, value)
        self.terms, self.sink = terms, sink          # (first forward, last forward, k, smallest, largest batch)
        self.examples, self.means = examples, means
        return self

    def __reduce__(self):
        return float, (float(self),)

    def __reduce_ex__(self, protocol):
        return float, (float(self),)

    def __copy__(self) -> float:
        return float(self)

    def __deepcopy__(self, memo) -> float:
        return float(self)

    def _plus(self, other: object, value: float) -> float:
        if isinstance(other, Reading):
            terms = combined(self.terms, other.terms)
            if terms is None:
                return value                                                  # one forward read twice
            return Reading(value, terms, self.sink, self.examples + other.examples, self.means and other.means)
        if isinstance(other, (int, float)) and other == 0:
            return Reading(value, self.terms, self.sink, self.examples, self.means)
        return value

    def __add__(self, other):
        value = float.__add__(self, other)
        return value if value is NotImplemented else _safely(self._plus, other, value)

    def __radd__(self, other):
        value = float.__radd__(self, other)
        return value if value is NotImplemented else _safely(self._plus, other, value)

    def __mul__(self, other):           # a meter's `val * n` with n = 1 (one unweighted batch) keeps the record
        value = float.__mul__(self, other)
        if value is NotImplemented or not isinstance(other, (int, float)):
            return value
        if other == 1:
            return Reading(value, self.terms, self.sink, self.examples, self.means)
        k, smallest, largest = self.terms[2:]
        if k == 1 and other == smallest == largest > 1:      # one batch's mean times its size: weighted by size
            _safely(lambda terms: self.sink(terms, float(self)), self.terms, None)
        return value

    __rmul__ = __mul__

    def __truediv__(self, other):
        value = float.__truediv__(self, other)
        k, smallest, largest = self.terms[2:]
        if value is NotImplemented or not isinstance(other, (int, float)):
            return value
        if other == k > 1 and smallest != largest:
            _safely(self.sink, self.terms, None)
        elif self.means and k > 1 and other == self.examples > k:      # batch means summed, divided by examples
            _safely(lambda terms: self.sink(terms, None, True), self.terms, None)
        return value


def mean_of(values: object) -> None:
    """A list of readings averaged in one call (np.mean, statistics.mean, torch.tensor(list).mean()): the same
    check as adding them up and dividing by how many there are."""
    if isinstance(values, (list, tuple)) and len(values) > 1 and all(isinstance(v, Reading) for v in values):
        total = values[0]
        for value in values[1:]:
            total = total + value
        if isinstance(total, Reading):
            total / len(values)           # noqa: B018 (the division tells the doctor, as `sum(...) / k` does)


def combined(earlier: tuple, later: tuple) -> tuple | None:
    """The terms of a sum of two readings' terms, or None when they overlap (the same forward counted twice)."""
    a, b = (earlier, later) if earlier[0] <= later[0] else (later, earlier)
    if a[1] >= b[0]:
        return None
    return a[0], b[1], a[2] + b[2], min(a[3], b[3]), max(a[4], b[4])


def _safely(fn: Callable, argument: object, value: float | None) -> object:
    """The loop's arithmetic must never fail because of the doctor: on any trouble, the plain value."""
    try:
        return fn(argument, value) if value is not None else fn(argument)
    except Exception:  # noqa: BLE001
        return value
