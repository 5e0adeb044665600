"""Exercises of chapters 0 and 1: counting updates, weighting a window, two Datasets (checked with real DataLoaders)."""
from __future__ import annotations

import math
import tempfile
from pathlib import Path

import torch
from torch.utils.data import DataLoader, TensorDataset

from course_utils.engine.arithmetic import accumulation_window, loss_weight
from course_utils.exercises.core import Attempt, Exercise
from course_utils.exercises.search import search
from course_utils.exercises.words import Fail, as_numbers, kind, need_int, need_tensor, number, pair, show, values


# --- chapter 0: updates_per_epoch ------------------------------------------------------------------------

def counted_updates(N: int, B: int, K: int, drop_last: bool) -> int:
    """The oracle: a real DataLoader's batch count, then a counted loop that flushes the short last window."""
    batches = len(DataLoader(range(N), batch_size=B, drop_last=drop_last))
    return sum(1 for i in range(batches) if (i + 1) % K == 0 or i + 1 == batches)


def _epoch_words(N: int, B: int, K: int, drop_last: bool) -> str:
    full, rest = divmod(N, B)
    if drop_last and rest:
        batches = full
        kept = f"{full} full batch{'es' if full != 1 else ''} (drop_last drops the last {rest} example{'s' * (rest > 1)})"
    else:
        batches = full + (rest > 0)
        kept = (f"{batches} batch{'es' if batches != 1 else ''}"
                + (f", the last of {rest} example{'s' * (rest > 1)}" if rest and full else ""))
    if batches == 0:
        return f"{kept}: no batch at all, so no update"
    q, r = divmod(batches, K)
    if q and r:
        windows = f"{q} window{'s' * (q > 1)} of {K} and a short last window of {r}"
    elif q:
        windows = f"{q} window{'s' * (q > 1)} of {K}"
    else:
        windows = f"one short window of {r} (K = {K} is more than the epoch's batches)"
    return f"{kept}; with K = {K} that is {windows}"


def _batches(N: int, B: int, drop_last: bool) -> int:
    return len(DataLoader(range(N), batch_size=B, drop_last=drop_last))


_UPDATE_SLIPS = [  # (a common misreading, as a function; the hint it earns when the learner's agrees with it)
    (lambda N, B, K, d: _batches(N, B, d) // K,
     "The short last window still ends with an update: the loop flushes it at the epoch's end."),
    (lambda N, B, K, d: counted_updates(N, B, K, False),
     "drop_last=True throws away the partial last batch before any window is formed."),
    (lambda N, B, K, d: _batches(N, B, d),
     "An update happens once per window of K micro-batches, not once per batch."),
    (lambda N, B, K, d: round(N / (B * K)),
     "Count whole batches first (a partial batch is one batch), then windows of K of them."),
    (lambda N, B, K, d: _batches(N, B, d) // K if d else counted_updates(N, B, K, d),
     "drop_last drops only the partial last batch; a short last window of full batches is still flushed."),
]
_PROBES = [(10, 4, 2, False), (10, 4, 2, True), (9, 2, 1, True), (7, 3, 2, False), (13, 2, 3, False),
           (25, 4, 3, True), (5, 8, 1, False), (12, 4, 3, False), (100, 3, 7, False), (70, 3, 4, True)]


def _singled_out(attempt: Attempt) -> str:
    """The hint of the one misreading the learner's function agrees with on every probe ('' if none or several)."""
    try:
        answers = [attempt.fn(*probe) for probe in _PROBES]
    except Exception:  # noqa: BLE001 - a probe that raises is no evidence
        return ""
    matching = [hint for slip, hint in _UPDATE_SLIPS if all(a == slip(*p) for a, p in zip(answers, _PROBES))]
    return matching[0] if len(matching) == 1 else ""


def check_updates_per_epoch(attempt: Attempt) -> str:
    """Edge cases, then hypothesis; the oracle is a real DataLoader and a counted, flushing loop."""
    def one(case: tuple[int, int, int, bool]) -> None:
        N, B, K, drop_last = case
        got = attempt.call(f"N={N}, B={B}, K={K}, drop_last={drop_last}", N, B, K, drop_last)
        got = need_int(got)
        want = counted_updates(N, B, K, drop_last)
        if got == want:
            return
        hint = _singled_out(attempt) or ("Count the batches first (is the partial last batch kept?), then the "
                                          "windows of K batches.")
        raise Fail(f"your function returned {got}, but the loop makes {want} update{'s' * (want != 1)} per epoch: "
                   f"{_epoch_words(N, B, K, drop_last)}.", hint)

    edge = [(10, 4, 2, False), (10, 4, 2, True), (10_000, 32, 4, False), (12, 4, 3, False), (5, 8, 1, False),
            (5, 8, 1, True), (7, 2, 10, False), (1, 1, 1, False), (600, 32, 4, True),
            (2_999_999, 1000, 7, False), (3_000_001, 1000, 7, True)]      # N "up to a few million"
    for case in edge:
        one(case)
    got = need_int(attempt.call("N=10, B=4, K=2, drop_last not given", 10, 4, 2))
    if got != counted_updates(10, 4, 2, False):
        raise Fail(f"called without drop_last, your function returned {got}; drop_last defaults to False (the partial "
                   f"last batch is kept), which makes {counted_updates(10, 4, 2, False)} updates.",
                   "Keep the stub's signature: `drop_last=False`.")
    from hypothesis import strategies as st
    tried = search(st.tuples(st.integers(1, 5000), st.integers(1, 600), st.integers(1, 16), st.booleans()), one)
    return (f"{len(edge) + tried + 1} cases agree with a real DataLoader and a counted loop: a partial last batch, "
            "drop_last (False when not given), K that does not divide the epoch, K larger than the epoch, B larger "
            "than N.")


# --- chapter 0: loss_weights ------------------------------------------------------------------------------

def check_loss_weights(attempt: Attempt) -> str:
    """The oracle is arithmetic.loss_weight, the one rule the course's loop uses."""
    def one(case: tuple[tuple[int, ...], int]) -> None:
        sizes, K = case
        returned = attempt.call(f"batch sizes {list(sizes)}, K={K}", list(sizes), K)
        got = as_numbers(returned)
        if got is None or len(got) != len(sizes):
            raise Fail(f"your function returned {kind(returned)} ({show(returned)}); it should return a list of "
                       f"{len(sizes)} numbers, one weight per micro-batch.", "One weight for every batch size given.")
        want = [loss_weight(i, list(sizes), K) for i in range(len(sizes))]
        for i, (g, w) in enumerate(zip(got, want)):
            if math.isclose(g, w, rel_tol=1e-6, abs_tol=1e-9):
                continue
            window = accumulation_window(i, len(sizes), K)
            members = [sizes[j] for j in window]
            if math.isclose(g, 1 / len(window), rel_tol=1e-6) and len(window) != K:
                hint = ("Dividing by the number of micro-batches in the window treats a small batch like a full one: "
                        "weight by examples.")
            elif math.isclose(g, 1 / K, rel_tol=1e-6):
                hint = (f"1/K weights every micro-batch the same; the window of micro-batch {i} holds {sum(members)} "
                        "examples, and each example must count once.")
            else:
                hint = "A micro-batch's loss is a mean over its examples: weigh it by its share of its window's examples."
            mine, right = pair(g, w)
            raise Fail(f"weight {i} is {mine}, but it should be {right}: micro-batch {i} has {sizes[i]} "
                       f"examples in a window of batch sizes {members}.", hint)

    edge = [((4, 4, 2), 2), ((4, 4, 4, 4, 4, 2), 4), ((32, 32, 32, 24), 4), ((3,), 4), ((5, 5, 5), 1),
            ((10, 3, 7, 2), 2)]
    for case in edge:
        one(case)
    from hypothesis import strategies as st
    tried = search(st.tuples(st.lists(st.integers(1, 64), min_size=1, max_size=20).map(tuple), st.integers(1, 8)),
                   one, examples=100)
    return (f"{len(edge) + tried} cases agree with the course's loss_weight: full windows, a short last window, a "
            "partial last batch, K larger than the epoch, batches of different sizes.")


# --- chapter 1: SlidingWindows ------------------------------------------------------------------------------

def _same(a: object, b: torch.Tensor) -> bool:
    """Exactly the stored values, broadcast (cut or loaded, nothing is computed): a float64 value rounded through
    float32 is not."""
    try:
        return bool((torch.as_tensor(a, dtype=b.dtype) == b).all())
    except Exception:  # noqa: BLE001 - any strange value is simply not the same
        return False


def _two(got: object, want: torch.Tensor) -> tuple[str, str]:
    """A returned target and the right one, to the digits that differ (any value the learner returned)."""
    try:
        return pair(float(got), float(want))
    except Exception:  # noqa: BLE001 - not one number: show it as it is
        return values(got), number(want)


def _compare_loaders(attempt: Attempt, dataset: object, oracle: TensorDataset, batch_size: int, shuffle: bool,
                     what: str) -> None:
    """Iterate a DataLoader over the learner's dataset and over the oracle, same seed; Fail at the first difference."""
    def loader(ds):
        return DataLoader(ds, batch_size=batch_size, shuffle=shuffle, generator=torch.Generator().manual_seed(0))
    attempt.at(f"{what}, DataLoader(batch_size={batch_size}, shuffle={shuffle})")
    mine = attempt.run(lambda: list(loader(dataset)))
    theirs = list(loader(oracle))
    if len(mine) != len(theirs):
        raise Fail(f"the DataLoader gave {len(mine)} batches; it should give {len(theirs)}.",
                   "A DataLoader asks len(dataset) how many examples there are.")
    for b, (got, want) in enumerate(zip(mine, theirs)):
        if not isinstance(got, (list, tuple)) or len(got) != 2:
            raise Fail(f"batch {b} is {kind(got)} ({show(got)}), not a pair (inputs, targets).",
                       "`__getitem__` returns one example as a tuple: (inputs, target).")
        for part, g, w in (("inputs", got[0], want[0]), ("targets", got[1], want[1])):
            if not isinstance(g, torch.Tensor):
                raise Fail(f"batch {b}'s {part} are {kind(g)} ({show(g)}), not one tensor: the DataLoader could not "
                           "stack your examples.", "Return tensors (or numbers) from `__getitem__`, not lists.")
            if tuple(g.shape) != tuple(w.shape) or not _same(g, w):
                one_slice = tuple(g.shape) == tuple(w.shape) + (1,) and torch.equal(g.squeeze(-1), w)
                raise Fail(f"batch {b}'s {part} are {show(g)}; they should be {show(w)}.",
                           "Each example's target is one value (a 0-d tensor or a float): a slice of length 1 "
                           "stacks into shape (batch, 1)." if one_slice and part == "targets" else "")
            if part == "inputs" and g.dtype != w.dtype:
                mine, right = (str(t.dtype).removeprefix("torch.") for t in (g, w))
                raise Fail(f"batch {b}'s inputs have dtype {mine}; the data's are {right} (a model built for "
                           f"{right} inputs refuses {mine} ones: 'mat1 and mat2 must have the same dtype').",
                           "Cut the inputs from the stored tensor, without rebuilding them from Python numbers.")
            if part == "targets" and not w.dtype.is_floating_point and g.dtype in (torch.int8, torch.int16,
                                                                                torch.int32):
                raise Fail(f"batch {b}'s targets have dtype {str(g.dtype).removeprefix('torch.')}; the data's are "
                           "int64 (CrossEntropyLoss refuses other integer labels: 'expected target dtype to be Long or "
                           "Byte, but got Int').", "Return the stored label as it is (or int(y)), without a cast.")
            if g.dtype.is_floating_point != w.dtype.is_floating_point or g.dtype == torch.bool:
                mine, right = (str(t.dtype).removeprefix("torch.") for t in (g, w))
                kind_of = "whole numbers (class labels)" if not w.dtype.is_floating_point else "real numbers"
                raise Fail(f"batch {b}'s {part} have dtype {mine}; the data's are {right}: {kind_of} (a loss "
                           "refuses the other kind: CrossEntropyLoss given float labels of shape (N,) raises "
                           "'expected target dtype to be Long or Byte, but got Float').",
                           "Return the stored tensors as they are: a Python number (.item(), float()) becomes "
                           "float64 or int64 when the DataLoader collates it.")


def check_sliding_windows(attempt: Attempt) -> str:
    """The oracle: a TensorDataset of the windows, both read through real DataLoaders with the same seed."""
    cases = [(torch.arange(1.0, 7.0), 2), (torch.tensor([3.0, 5.0]), 1), (torch.linspace(0.0, 1.0, 11), 3),
             (torch.tensor([2.0, -1.0, 4.0, 0.5, 7.0]), 4), (torch.tensor([0.25, -0.5, 1.5]), 3),
             (torch.linspace(-1.0, 1.0, 9, dtype=torch.float64) / 3, 2)]     # thirds: float32 cannot hold them
    for series, window in cases:
        what = f"series {values(series)} ({len(series)} values), window {window}"
        dataset = attempt.call(what, series.clone(), window)
        n = len(series) - window
        size = need_int(attempt.run(lambda: len(dataset)), "len(dataset) is")
        if size != n:
            raise Fail(f"len(dataset) is {size}, but a series of {len(series)} values with window {window} has {n} "
                       f"window{'s' * (n != 1)} followed by a value to predict (starting at 0 to {n - 1}).",
                       "The last window must still have one value after it.")
        inputs = torch.stack([series[i:i + window] for i in range(n)]) if n else series.new_zeros(0, window)
        targets = series[window:]
        for i in range(n):
            attempt.at(f"{what}, dataset[{i}]")
            item = attempt.run(lambda: dataset[i])
            if not isinstance(item, (tuple, list)) or len(item) != 2:
                raise Fail(f"dataset[{i}] returned {kind(item)} ({show(item)}), not a pair (inputs, target).",
                           "Return `inputs, target`.")
            if not isinstance(item, tuple):
                raise Fail(f"dataset[{i}] returned {kind(item)}; the statement asks for a tuple (inputs, target), as "
                           "TensorDataset returns (a DataLoader collates a list the same way, other code may not).",
                           "`return inputs, target` makes a tuple.")
            x = need_tensor(item[0], f"the inputs of dataset[{i}]")
            if x.dtype != series.dtype:
                mine, right = (str(t.dtype).removeprefix("torch.") for t in (x, series))
                raise Fail(f"dataset[{i}]'s inputs have dtype {mine}; the data's are {right} (a model built for "
                           f"{right} inputs refuses {mine} ones: 'mat1 and mat2 must have the same dtype').",
                           "Cut the inputs from the stored tensor, without rebuilding them from Python numbers.")
            if tuple(x.shape) != (window,) or not _same(x, inputs[i]):
                raise Fail(f"the inputs of dataset[{i}] are {values(x)}; they should be the {window} values "
                           f"{values(inputs[i])}.", "Item i starts at position i of the series.")
            if not _same(item[1], targets[i]):
                inside = _same(item[1], series[i + window - 1])
                own = " (yours is the window's own last value)" if inside else ""
                mine, right = _two(item[1], targets[i])
                raise Fail(f"the target of dataset[{i}] is {mine}; it should be {right}, the "
                           f"value right after the window{own}.", "The target is the next value, not one inside the window.")
        attempt.at(f"{what}, dataset[{n}] (one past the end)")
        try:
            past = dataset[n]
        except IndexError:
            pass
        except Exception as exc:  # noqa: BLE001
            raise Fail(f"dataset[{n}] raised {type(exc).__name__}; past the end it must raise IndexError, which is "
                       "how `for example in dataset` knows to stop.", "Indexing a tensor past its end raises IndexError.")
        else:
            raise Fail(f"dataset[{n}] returned {show(past)}, but the dataset has only {n} items (0 to {n - 1}); past "
                       "the end it must raise IndexError.", "Indexing a tensor past its end raises IndexError.")
        _compare_loaders(attempt, dataset, TensorDataset(inputs, targets), 3, n > 0, what)
    return ("lengths, every item, an index past the end, and shuffled DataLoader batches (a partial last batch "
            "included, dtypes kept) agree with a TensorDataset of the same windows, for 6 series (one of a single "
            "window, one exactly a window long: no example, one float64).")


# --- chapter 1: FolderDataset -------------------------------------------------------------------------------

_OTHER_FILES = {"usual": "a README.txt, a stats.pt and a 0.txt", "mean": "a stats.pt and a mean.pt"}


def _write_examples(folder: Path, n: int, seed: int, others: str = "usual") -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    xs, ys = torch.randn(n, 2, generator=g), torch.randint(0, 3, (n,), generator=g)
    for i in range(n):
        torch.save({"x": xs[i].clone(), "y": ys[i].clone()}, folder / f"{i}.pt")
    stats = {"mean": xs.mean(0), "std": xs.std(0) if n > 1 else torch.ones(2)}
    if others == "usual":
        (folder / "README.txt").write_text("one example per file: {i}.pt holds {'x': features, 'y': label}\n")
        torch.save(stats, folder / "stats.pt")
        (folder / "0.txt").write_text("notes on example 0\n")
    else:                                     # two .pt files that are not examples
        torch.save(stats, folder / "stats.pt")
        torch.save(stats["mean"], folder / "mean.pt")
    return xs, ys


def check_folder_dataset(attempt: Attempt) -> str:
    """The oracle: a TensorDataset of what was written; files change after the dataset is built (read lazily?)."""
    with tempfile.TemporaryDirectory(prefix="exercise-") as tmp:
        for n, others in ((12, "usual"), (1, "usual"), (5, "mean")):
            folder = Path(tmp) / f"examples{n}"
            folder.mkdir()
            xs, ys = _write_examples(folder, n, seed=n, others=others)
            what = f"a folder with {n} example file{'s' * (n > 1)} (0.pt ... {n - 1}.pt), {_OTHER_FILES[others]}"
            dataset = attempt.call(what, str(folder))
            size = need_int(attempt.run(lambda: len(dataset)), "len(dataset) is")
            if size != n:
                extra = ({n + 1: " (the README.txt, the stats.pt or the 0.txt is not an example)",
                          n + 2: " (two of the README.txt, the stats.pt and the 0.txt were counted)",
                          n + 3: " (the README.txt, the stats.pt and the 0.txt are not examples)"} if others == "usual"
                         else {n + 1: " (the stats.pt or the mean.pt is not an example)",
                               n + 2: " (the stats.pt and the mean.pt are not examples)"}).get(size, "")
                raise Fail(f"len(dataset) is {size}; the folder holds {n} example files{extra}.",
                           "Count only the files that are examples.")
            for i in range(n):
                attempt.at(f"{what}, dataset[{i}]")
                item = attempt.run(lambda: dataset[i])
                if not isinstance(item, (tuple, list)) or len(item) != 2:
                    raise Fail(f"dataset[{i}] returned {kind(item)} ({show(item)}), not a pair (features, label).",
                               "Return `x, y` from the file's dictionary.")
                if not (_same(item[0], xs[i]) and _same(item[1], ys[i])):
                    source = next((j for j in range(n) if _same(item[0], xs[j])), None)
                    as_text = sorted(range(n), key=lambda j: f"{j}.pt")
                    if source is not None and source != i:
                        why = (": sorted as text, '10.pt' comes before '2.pt'" if source == as_text[i] else
                               ": your files are counted from 1, but they start at 0.pt" if source == i + 1 else "")
                        raise Fail(f"dataset[{i}] holds the example of {source}.pt, not {i}.pt{why}.",
                                   "The file name holds the index: example i is in the file named i.pt.")
                    raise Fail(f"dataset[{i}] is {show(item)}; it should be the features and label stored in {i}.pt "
                               f"({show(xs[i])}, {int(ys[i])}).", "Return the file's 'x' and 'y'.")
            _compare_loaders(attempt, dataset, TensorDataset(xs, ys), 5, False, what)
        folder = Path(tmp) / "examples12"
        attempt.at("a folder with 12 example files; 3.pt is rewritten after the dataset was built")
        dataset = attempt.call(attempt.case, str(folder))
        new_x = torch.tensor([9.0, -9.0])
        torch.save({"x": new_x, "y": torch.tensor(2)}, folder / "3.pt")
        item = attempt.run(lambda: dataset[3])
        if isinstance(item, (tuple, list)) and len(item) == 2 and not _same(item[0], new_x):
            raise Fail("3.pt was rewritten after your dataset was built, and dataset[3] still returned the old "
                       "example: your dataset read every file up front.", "Keep only the file names in `__init__`; "
                       "read a file in `__getitem__`, when its example is asked for (so data larger than memory works).")
        attempt.at("the same folder; dataset[3] read, then 3.pt rewritten again, then dataset[3] read again")
        newer_x = torch.tensor([-7.0, 7.0])
        torch.save({"x": newer_x, "y": torch.tensor(1)}, folder / "3.pt")
        item = attempt.run(lambda: dataset[3])
        if isinstance(item, (tuple, list)) and len(item) == 2 and not _same(item[0], newer_x):
            raise Fail("3.pt was rewritten after dataset[3] had been read once, and dataset[3] returned the old "
                       "example: your dataset keeps what it read (a cache), which fills memory with the whole data set "
                       "as an epoch goes by.", "Read the file each time its example is asked for; keep nothing but "
                       "the file names (the OS caches recently read files anyway).")
    return ("lengths, every item, DataLoader batches (a partial last batch included) and a file rewritten after "
            "the dataset was built agree with what was written, for folders of 12 files and of 1 (with a README.txt, a "
            "stats.pt and a 0.txt) and of 5 (with a stats.pt and a mean.pt).")


def exercises() -> list[Exercise]:
    """Chapters 0 and 1."""
    return [
        Exercise("updates_per_epoch", "00", "updates per epoch, with the flush",
                 "updates_per_epoch(N, B, K, drop_last=False) -> int", check_updates_per_epoch, arity=(4,),
                 oracle="a real DataLoader's batch count and a counted loop that flushes"),
        Exercise("loss_weights", "00", "the loss weight of each micro-batch in its window",
                 "loss_weights(sizes, K) -> list[float]", check_loss_weights, arity=(2,),
                 oracle="course_utils.engine.arithmetic.loss_weight"),
        Exercise("SlidingWindows", "01", "a Dataset of sliding windows over a series",
                 "SlidingWindows(series, window): len(ds), ds[i] -> (inputs, target)", check_sliding_windows,
                 arity=(2,), oracle="a TensorDataset of the windows through real DataLoaders"),
        Exercise("FolderDataset", "01", "a Dataset that reads one file per example",
                 "FolderDataset(folder): len(ds), ds[i] -> (x, y) read from i.pt", check_folder_dataset, arity=(1,),
                 oracle="a TensorDataset of the written examples through real DataLoaders"),
    ]
