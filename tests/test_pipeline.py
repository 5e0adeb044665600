"""Chapter 1 engine: the pipeline trace against real DataLoaders, defaults, the on-disk dataset."""
import inspect
import math

import pytest
import torch
from torch.utils.data import DataLoader

from course_utils.chapters.ch01_pipeline import (IndexDataset, NumberStream, OnDiskDataset, dataloader_defaults,
                                                 time_one_epoch, trace_pipeline, worker_error_conclusion,
                                                 write_on_disk_dataset)


def _oracle(n, b, shuffle, drop_last, seed, epochs):
    """What a plain DataLoader(shuffle=...) with the same seeded generator yields, epoch by epoch."""
    loader = DataLoader(IndexDataset(n), batch_size=b, shuffle=shuffle, drop_last=drop_last,
                        generator=torch.Generator().manual_seed(seed))
    return [[t.tolist() for t in loader] for _ in range(epochs)]


@pytest.mark.parametrize("n,b", [(100, 16), (96, 16), (7, 3), (5, 8), (1, 1)])
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("drop_last", [False, True])
def test_trace_matches_real_dataloader(n, b, shuffle, drop_last):
    trace = trace_pipeline(n, b, shuffle, drop_last, seed=3, epochs=3)
    assert [e.batches for e in trace.epochs] == _oracle(n, b, shuffle, drop_last, 3, 3)
    expected = n // b if drop_last else math.ceil(n / b)
    assert trace.num_batches == expected
    for e in trace.epochs:
        assert sorted(e.sampler_order) == list(range(n))       # the sampler yields every index once
        assert len(e.skipped) == (n % b if drop_last else 0)
        assert sorted(e.skipped + [i for batch in e.batches for i in batch]) == list(range(n))
        assert e.collated_shapes == [(len(batch),) for batch in e.batches]


def test_hand_calculation_100_16():
    assert trace_pipeline(100, 16, True, False).batch_sizes == [16] * 6 + [4]
    dropping = trace_pipeline(100, 16, True, True, epochs=3)
    assert dropping.num_batches == 6 and dropping.skipped_per_epoch == 4
    assert len({frozenset(e.skipped) for e in dropping.epochs}) == 3  # a different 4 each epoch
    fixed = trace_pipeline(100, 16, False, True, epochs=2)
    assert [e.skipped for e in fixed.epochs] == [[96, 97, 98, 99]] * 2


def test_trace_rejects_bad_input():
    for kwargs in ({"n": 0}, {"batch_size": 0}, {"epochs": 0}, {"batch_size": True}):
        with pytest.raises(ValueError):
            trace_pipeline(**{"n": 10, "batch_size": 2, **kwargs})


def test_defaults_read_from_signature():
    d = dataloader_defaults()
    params = inspect.signature(DataLoader.__init__).parameters
    assert d["batch_size"] == 1 and d["num_workers"] == 0 and d["drop_last"] is False
    assert d["pin_memory"] is False and d["persistent_workers"] is False
    assert all(d[k] == params[k].default for k in d)


def test_on_disk_dataset_roundtrip(tmp_path):
    folder = write_on_disk_dataset(tmp_path / "data", n=12, seed=0)
    ds = OnDiskDataset(folder)
    assert len(ds) == 12 and len(list(folder.glob("*.pt"))) == 12
    from course_utils.engine.data import make_spiral
    x, y = make_spiral(12, seed=0).tensors
    for i in (0, 5, 11):
        xi, yi = ds[i]
        assert torch.equal(xi, x[i]) and int(yi) == int(y[i])
    batches = list(DataLoader(ds, batch_size=5))
    assert [len(b[1]) for b in batches] == [5, 5, 2]


def test_on_disk_dataset_with_workers(tmp_path):
    ds = OnDiskDataset(write_on_disk_dataset(tmp_path, n=8))
    serial = torch.cat([b[0] for b in DataLoader(ds, batch_size=3)])
    parallel = torch.cat([b[0] for b in DataLoader(ds, batch_size=3, num_workers=2)])
    assert torch.equal(serial, parallel)
    assert time_one_epoch(ds, num_workers=0, batch_size=4) > 0


def test_on_disk_dataset_empty_folder(tmp_path):
    with pytest.raises(ValueError):
        OnDiskDataset(tmp_path)


@pytest.mark.parametrize("n, workers", [(12, 2), (7, 3), (1, 2), (0, 2)])
@pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")   # 3 workers on a 2-core machine
def test_a_stream_is_copied_by_every_worker_unless_sharded(n, workers):
    """Oracle: a real DataLoader with workers; each worker replays the stream, sharding splits it."""
    def seen(sharded):
        loader = DataLoader(NumberStream(n, sharded=sharded), batch_size=4, num_workers=workers)
        return sorted(int(v) for batch in loader for v in batch)
    assert seen(False) == sorted(list(range(n)) * workers)
    assert seen(True) == list(range(n))
    assert [int(v) for b in DataLoader(NumberStream(n, sharded=True), batch_size=3) for v in b] == list(range(n))


def test_a_stream_takes_no_sampler():
    with pytest.raises(ValueError, match="shuffle"):
        DataLoader(NumberStream(5), shuffle=True)
    with pytest.raises(ValueError):
        NumberStream(-1)



# The worker's last traceback line as Python 3.11 and 3.12-3.13 word it (recorded from each), and 3.13 in colour.
WORKER_SAYS = {
    "3.11": "AttributeError: Can't get attribute 'NotebookSquares' on <module '__main__' (built-in)>",
    "3.13": "AttributeError: Can't get attribute 'NotebookSquares' on <module '__main__' "
            "(<class '_frozen_importlib.BuiltinImporter'>)>",
    "3.13 in colour": "\x1b[1;35mAttributeError\x1b[0m: \x1b[35mCan't get attribute 'NotebookSquares' on <module "
                      "'__main__' (<class '_frozen_importlib.BuiltinImporter'>)>\x1b[0m",
}


@pytest.mark.parametrize("python", sorted(WORKER_SAYS))
def test_the_spawned_worker_conclusion_is_the_same_on_every_python(python):
    stderr = f"Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\n{WORKER_SAYS[python]}\n"
    assert worker_error_conclusion(stderr, "NotebookSquares") == "AttributeError: it cannot find NotebookSquares in __main__"
    assert worker_error_conclusion(stderr, "OtherSet") == "AttributeError, not about OtherSet in __main__"
    assert worker_error_conclusion("", "NotebookSquares") == "(the worker printed no error)"


def test_a_spawned_worker_leaves_no_resource_tracker_behind():
    """The spawn demonstration stops the tracker it started: it ignores SIGINT and SIGTERM, so a kernel that still
    has it waits ~2 s at shutdown before killing it (chapter 1's kernel: 2.6 s instead of 0.3)."""
    from multiprocessing import resource_tracker

    from course_utils.chapters.ch01_pipeline import try_spawned_workers

    seen, _ = try_spawned_workers(IndexDataset(4))          # importable: the spawned worker loads the batch
    assert seen == "the batch loaded"
    assert resource_tracker._resource_tracker._pid is None
    resource_tracker.ensure_running()                       # and another spawn later still gets one
    assert resource_tracker._resource_tracker._pid is not None
    resource_tracker._resource_tracker._stop()
