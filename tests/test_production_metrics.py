"""Metrics that do not average (issue 43, item 3): F1, precision, recall and AUROC accumulated by update() over
uneven batches, and merged over two gloo ranks, equal the value computed once on the whole set; the per-batch
mean the trainer used to take of any metric does not; update() reads nothing on the host; fit() logs the whole
validation set's F1; a plain function metric is still the example-weighted per-batch mean, to the bit.

The oracles are written here in plain Python and NumPy, independent of the module: a confusion matrix counted
pair by pair, and AUROC as the share of (positive, negative) pairs ordered right, ties counting one half."""
from __future__ import annotations

import contextlib
import io
import json
import queue
import warnings

import numpy as np
import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.data import TensorDataset

from course_utils.engine.host_reads import counting_host_reads
from course_utils.production import (Accuracy, BinaryAUROC, BinaryF1, BinaryPrecision, BinaryRecall, FitConfig,
                                     MetricError, MulticlassF1, MulticlassPrecision, MulticlassRecall, PerBatchMean,
                                     Task, TaskError, fit)
from tests import killed_runs

C = 4
SIZES = [31, 7, 45, 12, 24, 1]             # uneven, the last batch of one; the batch of 7 holds no class 3


# --- the oracles ------------------------------------------------------------------------------------------

def confusion_counts(targets: list[int], predicted: list[int]) -> dict[int, tuple[int, int, int]]:
    """{class: (TP, FP, FN)} for every class that occurs among the targets or the predictions, counted pair by pair."""
    counts = {}
    for label in sorted(set(targets) | set(predicted)):
        tp = sum(1 for t, p in zip(targets, predicted) if t == label and p == label)
        fp = sum(1 for t, p in zip(targets, predicted) if t != label and p == label)
        fn = sum(1 for t, p in zip(targets, predicted) if t == label and p != label)
        counts[label] = (tp, fp, fn)
    return counts


def per_class(kind: str, tp: int, fp: int, fn: int) -> float:
    numerator, denominator = {"f1": (2 * tp, 2 * tp + fp + fn), "precision": (tp, tp + fp),
                              "recall": (tp, tp + fn)}[kind]
    return numerator / denominator if denominator else 0.0


def oracle_macro(kind: str, targets: list[int], predicted: list[int]) -> float:
    counts = confusion_counts(targets, predicted)
    return sum(per_class(kind, *c) for c in counts.values()) / len(counts)


def oracle_binary(kind: str, targets: list[int], predicted: list[int]) -> float:
    return per_class(kind, *confusion_counts(targets, predicted).get(1, (0, 0, 0)))


def oracle_auroc(scores: np.ndarray, labels: np.ndarray) -> float:
    """The share of (positive, negative) pairs in which the positive scores higher, a tie counting one half."""
    positive, negative = scores[labels == 1], scores[labels == 0]
    above = (positive[:, None] > negative[None, :]).sum()
    tied = (positive[:, None] == negative[None, :]).sum()
    return (above + 0.5 * tied) / (len(positive) * len(negative))


def oracle(name: str, logits: torch.Tensor, targets: torch.Tensor) -> float:
    """The metric `name` computed once on the whole set from NumPy arrays."""
    t = targets.numpy().tolist()
    if name.startswith("binary"):
        scores = logits.numpy()
        if name == "binary_auroc":
            return oracle_auroc(scores, targets.numpy())
        return oracle_binary(name.split("_")[1], t, (scores > 0).astype(int).tolist())
    predicted = logits.numpy().argmax(axis=1).tolist()
    if name == "accuracy":
        return sum(a == b for a, b in zip(t, predicted)) / len(t)
    return oracle_macro(name.split("_")[1], t, predicted)


METRICS = {"multiclass_f1": lambda: MulticlassF1(C), "multiclass_precision": lambda: MulticlassPrecision(C),
           "multiclass_recall": lambda: MulticlassRecall(C), "accuracy": Accuracy,
           "binary_f1": BinaryF1, "binary_precision": BinaryPrecision, "binary_recall": BinaryRecall,
           "binary_auroc": BinaryAUROC}


def dataset(name: str, n: int = sum(SIZES), seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits and targets: imbalanced classes (40/30/20/10 %, or 25 % positives), logits that lean towards the
    target; binary scores on a grid of quarters, so that AUROC meets ties between classes."""
    g = torch.Generator().manual_seed(seed)
    if name.startswith("binary"):
        targets = (torch.rand(n, generator=g) < 0.25).long()
        scores = torch.round((torch.randn(n, generator=g) + 1.2 * targets - 0.8) * 4) / 4
        return scores, targets
    targets = torch.multinomial(torch.tensor([0.4, 0.3, 0.2, 0.1]), n, replacement=True, generator=g)
    targets[31:38] = targets[31:38] % 3                                # the batch of 7: no class 3
    logits = torch.randn(n, C, generator=g) + 1.5 * nn.functional.one_hot(targets, C)
    return logits, targets


def accumulated(metric, logits: torch.Tensor, targets: torch.Tensor, sizes=SIZES):
    for part, labels in zip(logits.split(sizes), targets.split(sizes), strict=True):
        metric.update(part, labels)
    return metric


# --- one process: accumulated = the whole set ----------------------------------------------------------------

@pytest.mark.parametrize("name", list(METRICS))
def test_accumulated_over_uneven_batches_equals_the_value_on_the_whole_set(name):
    logits, targets = dataset(name)
    if not name.startswith("binary"):
        assert 3 not in targets[31:38].tolist() and 3 in targets.tolist()       # a batch without a class
    value = accumulated(METRICS[name](), logits, targets).compute()
    assert value.dim() == 0 and value.dtype == torch.float64
    assert abs(float(value) - oracle(name, logits, targets)) < 1e-12
    whole = METRICS[name]()
    whole.update(logits, targets)
    assert torch.equal(value, whole.compute())                         # the same counts, the same float


@pytest.mark.parametrize("name", ["multiclass_f1", "multiclass_precision", "multiclass_recall"])
def test_a_class_that_never_occurs_is_left_out_of_the_macro_average(name):
    """A fifth class never a target and never predicted (its logit -inf): the macro average is over the four that
    occur, as the oracle (and sklearn) count them; a mean over all five would be 4/5 of it."""
    logits, targets = dataset(name)
    five = torch.cat([logits, torch.full((len(logits), 1), float("-inf"))], dim=1)
    metric = {"multiclass_f1": MulticlassF1, "multiclass_precision": MulticlassPrecision,
              "multiclass_recall": MulticlassRecall}[name](C + 1)
    assert abs(float(accumulated(metric, five, targets).compute()) - oracle(name, logits, targets)) < 1e-12


def test_reset_forgets_and_compute_does_not_consume_the_state():
    logits, targets = dataset("multiclass_f1")
    metric = accumulated(MulticlassF1(C), logits, targets)
    first, again = metric.compute(), metric.compute()
    metric.reset()
    accumulated(metric, logits[:50], targets[:50], [30, 20])
    assert torch.equal(first, again)
    assert abs(float(metric.compute()) - oracle("multiclass_f1", logits[:50], targets[:50])) < 1e-12


def test_two_logit_outputs_the_loss_layout_and_ignored_targets():
    """Binary from two class logits (score = logit 1 - logit 0); multiclass in CrossEntropyLoss's (N, C, T) layout
    with targets of -100 left out; the oracle sees only the kept examples."""
    g = torch.Generator().manual_seed(3)
    pair, labels = torch.randn(40, 2, generator=g), torch.randint(0, 2, (40,), generator=g)
    for metric, name in ((BinaryF1(), "binary_f1"), (BinaryAUROC(), "binary_auroc")):
        got = accumulated(metric, pair, labels, [13, 13, 13, 1]).compute()
        assert abs(float(got) - oracle(name, pair[:, 1] - pair[:, 0], labels)) < 1e-12
    sequence, tokens = torch.randn(6, C, 5, generator=g), torch.randint(0, C, (6, 5), generator=g)
    tokens[0, :2] = tokens[4, 3] = -100
    metric = MulticlassF1(C)
    for part, label in zip(sequence.split([4, 1, 1]), tokens.split([4, 1, 1])):
        metric.update(part, label)
    kept = tokens.reshape(-1) >= 0
    flat = sequence.permute(0, 2, 1).reshape(-1, C)
    assert abs(float(metric.compute()) - oracle("multiclass_f1", flat[kept], tokens.reshape(-1)[kept])) < 1e-12


def test_the_example_weighted_mean_of_per_batch_f1_is_not_the_whole_set_f1():
    """Two batches of two. The first: one positive found, one negative left alone (F1 1); the second: no positive,
    one false alarm (F1 0). Their mean is 0.5; over all four examples TP 1, FP 1, FN 0: F1 2/3."""
    scores = torch.tensor([3.0, -3.0, 3.0, -3.0])
    labels = torch.tensor([1, 0, 0, 0])

    def batch_f1(outputs, targets):
        one = BinaryF1()
        one.update(outputs, targets)
        return one.compute()

    per_batch = accumulated(PerBatchMean(batch_f1), scores, labels, [2, 2]).compute()
    protocol = accumulated(BinaryF1(), scores, labels, [2, 2]).compute()
    whole = oracle("binary_f1", scores, labels)
    assert whole == pytest.approx(2 / 3) and float(per_batch) == 0.5
    assert float(protocol) == pytest.approx(whole, abs=1e-15)
    # not a contrived case: the 120 imbalanced examples in batches of 31, 7, 45, 12, 24 and 1
    logits, targets = dataset("multiclass_f1")

    def batch_macro_f1(outputs, targets):
        one = MulticlassF1(C)
        one.update(outputs, targets)
        return one.compute()

    mean = float(accumulated(PerBatchMean(batch_macro_f1), logits, targets).compute())
    assert abs(mean - oracle("multiclass_f1", logits, targets)) > 0.01


# --- no host read while updating -------------------------------------------------------------------------------

# aten operators that read a value on the host (item, bool, float...) or size a result from the data: each a wait
# for the device on a GPU
SYNCING = {"_local_scalar_dense", "nonzero", "masked_select", "unique_dim", "_unique2", "unique_consecutive",
           "bincount", "repeat_interleave", "equal", "is_nonzero", "item"}


class AtenOps(TorchDispatchMode):
    """The aten operators run inside the block, with whether an index was a boolean mask (a nonzero on a GPU)."""

    def __init__(self):
        super().__init__()
        self.seen: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name in ("index", "index_put", "index_put_") and any(
                isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in (args[1] or [])):
            name = f"{name} with a boolean mask"
        self.seen.append(name)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("name", list(METRICS))
def test_update_reads_nothing_on_the_host_and_compute_reads_at_the_end(name):
    logits, targets = dataset(name)
    metric = METRICS[name]()
    with counting_host_reads() as reads, AtenOps() as ops:
        accumulated(metric, logits, targets)
    syncing = [op for op in ops.seen if op in SYNCING or "boolean mask" in op]
    assert sum(reads.values()) == 0 and syncing == [], (dict(reads), syncing)
    with counting_host_reads() as reads, AtenOps() as ops:    # both counters do count: compute() and float() read
        float(metric.compute())
    assert sum(reads.values()) >= 1 and "_local_scalar_dense" in ops.seen


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none on this machine)")
def test_on_cuda_update_never_synchronizes_and_computes_what_the_cpu_computes():
    for name in METRICS:
        logits, targets = dataset(name)
        metric, on_gpu = METRICS[name](), (logits.cuda(), targets.cuda())
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")          # any synchronizing call raises
        try:
            accumulated(metric, *on_gpu)
        finally:
            torch.cuda.set_sync_debug_mode(0)
        on_cpu = accumulated(METRICS[name](), logits, targets).compute()
        assert metric.compute().device.type == "cuda" and float(metric.compute()) == float(on_cpu), name


# --- two ranks (gloo, forked): merged states = the whole set -------------------------------------------------

SHARDED = ("multiclass_f1", "binary_f1", "binary_auroc")
SPLIT = 70                                  # rank 0 holds 70 examples (batches 31, 7, 32), rank 1 the other 50


def _rank(rank: int, store: str, results) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    try:
        out = {}
        for name in SHARDED:
            logits, targets = dataset(name)
            mine = slice(0, SPLIT) if rank == 0 else slice(SPLIT, None)
            sizes = [31, 7, 32] if rank == 0 else [12, 24, 13, 1]
            metric = accumulated(METRICS[name](), logits[mine], targets[mine], sizes)
            out[name] = (float(metric.compute()), float(metric.compute(sync=False)), float(metric.compute()))
        results.put((rank, out))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, whose assertion shows it
        results.put((rank, repr(exc)))
    finally:
        dist.destroy_process_group()


def test_two_gloo_ranks_with_unequal_shards_merge_to_the_whole_set(tmp_path):
    results = killed_runs.context().Queue()
    children = [killed_runs.process(_rank, rank, str(tmp_path / "store"), results) for rank in (0, 1)]
    for child in children:
        child.start()
    try:
        got = dict(results.get(timeout=60) for _ in children)
    except queue.Empty:
        got = {}
    finally:
        for child in children:
            child.join(timeout=10)
            if child.is_alive():
                child.kill()
    assert set(got) == {0, 1} and all(isinstance(v, dict) for v in got.values()), got
    for name in SHARDED:
        logits, targets = dataset(name)
        whole = oracle(name, logits, targets)
        shards = [oracle(name, logits[:SPLIT], targets[:SPLIT]), oracle(name, logits[SPLIT:], targets[SPLIT:])]
        for rank in (0, 1):
            synced, alone, again = got[rank][name]
            assert abs(synced - whole) < 1e-12 and synced == again, (name, rank, synced, whole)
            assert abs(alone - shards[rank]) < 1e-12                   # each rank's own state left as it was
        assert max(abs(s - whole) for s in shards) > 1e-3             # so merging changed something


# --- the trainer -----------------------------------------------------------------------------------------------

def imbalanced_task(metric, name: str = "f1", n_val: int = 50, val_batch_size: int = 7) -> Task:
    """Three classes of 4-d points (60/30/10 %); validation in batches of 7, the last of one."""
    def points(n: int, seed: int) -> TensorDataset:
        g = torch.Generator().manual_seed(seed)
        y = torch.multinomial(torch.tensor([0.6, 0.3, 0.1]), n, replacement=True, generator=g)
        x = torch.randn(n, 4, generator=g) + nn.functional.one_hot(y, 4).float()
        return TensorDataset(x, y)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    return Task(model, points(60, 1), points(n_val, 2), metric=metric, metric_name=name,
                val_batch_size=val_batch_size, name="imbalanced")


def quiet_fit(tmp_path, task: Task, **changes):
    config = FitConfig(out=str(tmp_path / "run"), **{**dict(epochs=2, batch_size=16, lr=0.05, threads=1,
                                                                progress=False, tensorboard=False, device="cpu"),
                                                           **changes})
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit(config, task)


def saved_logits(tmp_path, task: Task) -> tuple[torch.Tensor, torch.Tensor]:
    """The delivered model.pt's logits on the whole validation set, and its targets."""
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    model.load_state_dict(torch.load(tmp_path / "run" / "model.pt", weights_only=True))
    x, y = task.val_data.tensors
    with torch.no_grad():
        return model.eval()(x), y


class ListedF1:
    """A metric object written without the course's base class (the protocol alone): it lists the predictions and
    computes macro F1 with the oracle."""

    def __init__(self):
        self.reset()

    def update(self, outputs, targets):
        self.predicted += outputs.argmax(1).tolist()
        self.targets += targets.tolist()

    def compute(self):
        return oracle_macro("f1", self.targets, self.predicted)

    def reset(self):
        self.predicted, self.targets = [], []


@pytest.mark.parametrize("given", ["object", "factory", "protocol only"])
def test_fit_logs_the_f1_of_the_whole_validation_set(tmp_path, given):
    task = imbalanced_task({"object": MulticlassF1(3), "factory": lambda: MulticlassF1(num_classes=3),
                            "protocol only": ListedF1()}[given])
    result = quiet_fit(tmp_path, task, monitor="val_f1")
    logits, targets = saved_logits(tmp_path, task)
    whole = oracle_macro("f1", targets.tolist(), logits.argmax(1).tolist())
    assert abs(result.final["val_f1"] - whole) < 1e-12
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [line["val_f1"] for line in lines] == [r["val_f1"] for r in result.history]
    assert result.best["metric"] == "val_f1" and result.best["value"] == max(r["val_f1"] for r in result.history)


def test_a_plain_function_metric_is_still_the_example_weighted_batch_mean(tmp_path):
    """The trainer's old formula, redone from the saved model: sum of (batch value x batch size), over N."""
    def batch_f1(outputs, targets):
        one = MulticlassF1(3)
        one.update(outputs, targets)
        return one.compute().float()

    task = imbalanced_task(batch_f1, name="batch_f1")
    assert isinstance(task.validator, PerBatchMean)
    result = quiet_fit(tmp_path, task, epochs=1)
    logits, targets = saved_logits(tmp_path, task)
    total = torch.zeros((), dtype=torch.float64)
    for part, labels in zip(logits.split(7), targets.split(7)):
        total += torch.as_tensor(batch_f1(part, labels)).double() * len(labels)
    assert result.final["val_batch_f1"] == total.item() / len(targets)
    whole = oracle_macro("f1", targets.tolist(), logits.argmax(1).tolist())
    assert abs(result.final["val_batch_f1"] - whole) > 1e-3             # and it is not the whole set's F1


class NoCompute:
    def update(self, outputs, targets): ...
    def reset(self): ...


@pytest.mark.parametrize("metric, named", [
    (NoCompute(), "the metric object .*NoCompute.* has no compute\\(\\): a metric object needs update"),
    (MulticlassF1, "MulticlassF1\\(\\) could not make a metric \\(TypeError: .*num_classes"),
    (lambda: 0.5, "<lambda>\\(\\) returned 0.5, which has no update\\(\\) and no compute\\(\\) and no reset\\(\\)"),
    ("f1", "metric must be a metric object"),
])
def test_a_metric_that_is_not_one_is_refused_by_name(metric, named):
    with pytest.raises(TaskError, match=f"^Task metric: {named}"):
        imbalanced_task(metric)


@pytest.mark.parametrize("metric, named", [
    (MulticlassF1(4), "metric 'f1' cannot measure a validation batch .*MetricError: MulticlassF1\\(num_classes=4\\): "
                      "outputs of shape \\(7, 3\\) do not fit targets of shape \\(7,\\): expected class logits of "
                      "shape \\(7, 4\\)"),
    (BinaryAUROC(), "BinaryAUROC\\(\\): outputs of shape \\(7, 3\\) do not fit targets of shape \\(7,\\): give one "
                    "score per target"),
    (BinaryF1(), "MetricError: BinaryF1\\(threshold=0\\): 2 target\\(s\\) were not a class \\(a binary target is 0 "
                 "or 1\\)"),
])
def test_a_metric_that_does_not_fit_the_batches_stops_fit_before_training(tmp_path, metric, named):
    task = imbalanced_task(metric)
    if isinstance(metric, BinaryF1):           # binary F1 on three classes: the first batch's class-2 targets
        task.val_data.tensors[1][:7] = torch.tensor([0, 1, 2, 2, 0, 1, 0])
        task.model = nn.Sequential(nn.Linear(4, 1))
        task.loss_fn = lambda outputs, targets: outputs.mean()
    with pytest.raises(TaskError, match=named):
        quiet_fit(tmp_path, task)
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_standalone_misuse_is_named():
    with pytest.raises(MetricError, match=r"BinaryF1\(threshold=0\): outputs of shape \(5, 3\) do not fit targets "
                                          r"of shape \(5, 1\)"):
        BinaryF1().update(torch.zeros(5, 3), torch.zeros(5, 1))
    with pytest.raises(MetricError, match=r"targets must be integer class indices, got a tensor of shape \(5,\) "
                                          r"\(float32\)"):
        MulticlassF1(3).update(torch.zeros(5, 3), torch.zeros(5))
    with pytest.raises(MetricError, match="needs num_classes, an integer >= 2"):
        MulticlassF1(1)
    auroc = BinaryAUROC()
    auroc.update(torch.tensor([0.1, float("nan"), 0.3]), torch.tensor([0.0, 1.0, 0.5]))
    with pytest.raises(MetricError, match=r"1 target\(s\) were not 0 or 1 .*; 1 score\(s\) were NaN"):
        auroc.compute()
