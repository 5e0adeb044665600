"""The loop doctor's support matrix (README, chapter 5): each row that the corpora do not already cover."""
from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

from course_utils.doctor import LoopDoctor
from course_utils.doctor.gradients import Track
from course_utils.doctor.readings import Reading


def _mlp(dropout: float = 0.0, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(dropout), nn.Linear(8, 3))


class Augmented(Dataset):
    """torchvision-style: raw examples in .data (reads counted), random noise drawn in __getitem__."""

    def __init__(self, n: int, seed: int):
        g = torch.Generator().manual_seed(seed)
        self._data, self.targets = torch.randn(n, 4, generator=g), torch.randint(0, 3, (n,), generator=g)
        self.gets = self.reads = 0

    @property
    def data(self):
        self.reads += 1
        return self._data

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, i):
        self.gets += 1
        return self._data[i] + 0.1 * torch.randn(4), self.targets[i]


def _train(model, loader, epochs=2, val=None):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(epochs):
        model.train()
        for x, y in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        if val is not None:
            model.eval()
            with torch.no_grad():
                for x, _ in val:
                    model(x)
    return opt


def _run(watched: bool, **given):
    train, val = Augmented(64, 1), Augmented(32, 2)
    model = _mlp(0.2)
    loaders = (DataLoader(train, batch_size=16, shuffle=True, generator=torch.Generator().manual_seed(0)),
               DataLoader(val, batch_size=16))
    torch.manual_seed(5)
    if watched:
        with LoopDoctor(model, train_data=train if given else None, val_data=val if given else None) as doctor:
            reads_before_loop = train.reads + val.reads
            _train(model, *loaders[:1], val=loaders[1])
        report = doctor.report()
    else:
        _train(model, *loaders[:1], val=loaders[1])
        reads_before_loop, report = 0, None
    return model, train, val, torch.get_rng_state(), reads_before_loop, report


def test_no_getitem_no_rng_draw_no_upfront_pass_with_random_augmentation():
    bare_model, bare_train, bare_val, bare_rng, _, _ = _run(False)
    model, train, val, rng, reads, report = _run(True, given=True)
    assert (train.gets, val.gets) == (bare_train.gets, bare_val.gets)      # no extra __getitem__ call
    assert torch.equal(rng, bare_rng)                                       # the global RNG drew the same
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), bare_model.parameters()))
    assert reads == 0                     # nothing read up front: storage is hashed when the report is asked for
    assert report.names == () and train.reads and val.reads


def test_compiled_module_is_watched_and_unchanged():
    def run(watched):
        model = _mlp(0.1)
        compiled = torch.compile(model, backend="aot_eager")
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        x, y = torch.randn(56, 4, generator=torch.Generator().manual_seed(0)), torch.arange(56) % 3

        def loop():
            for i in range(6):
                opt.zero_grad()
                nn.functional.cross_entropy(compiled(x[i * 8:(i + 1) * 8]), y[i * 8:(i + 1) * 8]).backward()
                opt.step()
            with torch.no_grad():
                compiled(x[48:])                 # evaluated in train mode: the bug to find
        if not watched:
            loop()
            return model, None
        with LoopDoctor(compiled, opt) as doctor:
            loop()
        return model, doctor.report()
    bare, _ = run(False)
    model, report = run(True)
    assert report.names == ("eval_in_train_mode",) and report.training_forwards == 6
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), bare.parameters()))


def test_a_hand_written_update_without_optimizer_is_watched():
    def loop(zero: bool):
        model = _mlp()
        x, y = torch.randn(40, 4, generator=torch.Generator().manual_seed(1)), torch.arange(40) % 3
        with LoopDoctor(model) as doctor:
            for i in range(5):
                loss = nn.functional.cross_entropy(model(x[i * 8:(i + 1) * 8]), y[i * 8:(i + 1) * 8])
                loss.backward()
                with torch.no_grad():                      # d2l.sgd
                    for p in model.parameters():
                        p -= 0.1 * p.grad / 8
                        if zero:
                            p.grad.zero_()
        return doctor.report()
    healthy, forgotten = loop(zero=True), loop(zero=False)
    assert healthy.names == () and any("changed by hand 5 times" in n for n in healthy.notes)
    assert forgotten.names == ("missing_zero_grad",)


def test_the_report_says_what_it_could_not_observe():
    model = _mlp()
    with LoopDoctor(model) as doctor:
        model(torch.randn(2, 4)).sum().backward()
    notes = " ".join(doctor.report().notes)
    assert "no optimizer.step() and no change of the parameters" in notes
    assert "no data was seen through a DataLoader and none was given" in notes


@pytest.mark.parametrize("dropout, finding", [(0.0, ()), (0.3, ("eval_in_train_mode",))])
def test_eval_mode_is_judged_by_what_the_model_contains(dropout, finding):
    model, x = _mlp(dropout), torch.randn(16, 4)
    loader = DataLoader(TensorDataset(x, torch.arange(16) % 3), batch_size=8)
    with LoopDoctor(model) as doctor:
        _train(model, loader, epochs=1)
        model.train()
        with torch.no_grad():
            for xb, _ in loader:
                model(xb)
    report = doctor.report()
    assert report.names == finding
    if dropout:
        assert "Dropout(p=0.3)" in report.findings[0].evidence and "BatchNorm" not in report.findings[0].evidence
    else:
        assert any("no effect on Sequential" in n and "it will bite once you add one" in n for n in report.notes)


def test_emptiness_of_grads_changed_in_place_costs_one_device_read():
    params = [nn.Parameter(torch.randn(3)) for _ in range(20)]
    for p in params:
        p.grad = torch.randn(3)
    track = Track("SGD", params)
    track.remember(empty=False)
    assert not track.empty()                       # unchanged since remembered: no device read at all
    for p in params:
        p.grad.zero_()
    reads = []
    original = torch.Tensor.item
    torch.Tensor.item = lambda t: reads.append(1) or original(t)
    try:
        assert track.empty()
    finally:
        del torch.Tensor.item
    assert len(reads) == 1


def test_dict_batches_model_kwargs_numpy_and_token_streams():
    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed, self.head = nn.Embedding(50, 8), nn.Linear(8, 2)

        def forward(self, input_ids, attention_mask, labels):
            pooled = (self.embed(input_ids) * attention_mask[..., None]).sum(1) / attention_mask.sum(1, keepdim=True)
            return {"loss": nn.functional.cross_entropy(self.head(pooled), labels)}

    def rows(n, seed):
        g = torch.Generator().manual_seed(seed)
        return [{"input_ids": torch.randint(1, 50, (int(torch.randint(3, 7, (1,), generator=g)),), generator=g),
                 "labels": int(torch.randint(0, 2, (1,), generator=g))} for _ in range(n)]

    def collate(items):
        ids = nn.utils.rnn.pad_sequence([r["input_ids"] for r in items], batch_first=True)
        return {"input_ids": ids, "attention_mask": (ids != 0).long(), "labels": torch.tensor([r["labels"] for r in items])}

    def run(val_rows):
        torch.manual_seed(0)
        model, train = Classifier(), rows(40, 1)
        opt = torch.optim.AdamW(model.parameters(), lr=0.01)
        stream = np.random.default_rng(3).integers(0, 50, 600).astype(np.uint16)
        with LoopDoctor(model) as doctor:
            for batch in DataLoader(train, batch_size=8, collate_fn=collate):
                opt.zero_grad()
                model(**batch)["loss"].backward()
                opt.step()
            model.eval()
            with torch.no_grad():
                for batch in DataLoader(val_rows, batch_size=8, collate_fn=collate):
                    model(**batch)
        with LoopDoctor(model, train_data=stream[:500], val_data=stream[500:]) as tokens:
            pass
        with LoopDoctor(model, train_data=torch.from_numpy(stream[:500].astype(np.int64)),
                        val_data=torch.from_numpy(stream[:100].astype(np.int64))) as leaky:
            pass
        return doctor.report(), tokens.report(), leaky.report()
    clean, streams, leak = run(rows(16, 2))
    assert clean.names == () and clean.training_forwards == 5 and streams.names == ()
    assert leak.names == ("data_leakage",) and "100%" in leak.findings[0].evidence
    copied, _, _ = run(rows(40, 1)[:16])
    assert copied.names == ("data_leakage",) and "16 of the 16" in copied.findings[0].evidence


def test_readings_stay_plain_floats_to_the_loop():
    seen = []
    reading = Reading(0.25, (1, 1, 1, 32, 32), seen.append) + Reading(0.5, (2, 2, 1, 10, 10), seen.append)
    assert reading == 0.75 and isinstance(reading, float) and reading / 2 == 0.375 and seen
    assert type(pickle.loads(pickle.dumps(reading))) is float and json.dumps(reading) == "0.75"
    assert f"{reading:.2f}" == "0.75" and repr(reading) == "0.75"


def test_one_doctor_at_a_time_and_internal_errors_never_break_the_loop(monkeypatch):
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with LoopDoctor(model, opt):
        with pytest.raises(RuntimeError, match="already watching"):
            with LoopDoctor(model, opt):
                pass
    from course_utils.doctor import checks
    monkeypatch.setattr(checks, "scheduler_order", lambda *a: 1 / 0)
    with LoopDoctor(model, opt) as doctor:
        for _ in range(3):
            opt.zero_grad()
            model(torch.randn(4, 4)).sum().backward()
            opt.step()
    assert any(n.startswith("the doctor stopped observing after an error of its own (ZeroDivisionError")
               for n in doctor.report().notes)


def test_a_watched_model_saves_whole_and_deep_copies_without_the_doctor():
    import copy
    import io
    model = _mlp(0.2)
    with LoopDoctor(model) as doctor:
        twin = copy.deepcopy(model)                 # a "best model" copy, as published loops make
        buffer = io.BytesIO()
        torch.save(model, buffer)                   # pickling the whole module (pytorch/examples' checkpoints)
        buffer.seek(0)
        loaded = torch.load(buffer, weights_only=False)
        twin(torch.randn(2, 4))
    assert len(model._forward_hooks) == 0 and "__getstate__" not in vars(model)
    for other in (twin, loaded):
        assert len(other._forward_hooks) == 0 and "__getstate__" not in vars(other)
        assert all(torch.equal(a, b) for a, b in zip(other.parameters(), model.parameters()))
    assert doctor.report().evaluation_forwards == 0 and doctor.failure is None


def test_support_matrix_names_real_tests_and_the_readme_holds_it():
    from pathlib import Path

    from course_utils.doctor.support import SUPPORT, support_table
    from tests.doctor_corpus import CASES as LEARNER
    from tests import test_doctor_devices, test_doctor_idioms
    from tests.doctor_published import LOOPS
    readme = Path(__file__).parents[1].joinpath("README.md").read_text()
    assert "\n".join("  " + line for line in support_table().split("\n")) in readme
    learner = {case.name for case in LEARNER}
    for _, _, tests in SUPPORT:
        for name in tests:
            if name.startswith("learner "):
                assert name.split(" ", 1)[1] in learner, name
            elif name.startswith("test_"):
                found = [globals().get(name)] + [getattr(m, name, None) for m in (test_doctor_devices, test_doctor_idioms)]
                assert any(callable(f) for f in found), name
            else:
                assert name in LOOPS, name


def test_batchnorm_frozen_on_purpose_and_mc_dropout_are_not_mode_bugs():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.2), nn.Linear(8, 3))
    loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.arange(32) % 3), batch_size=8)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with LoopDoctor(model) as doctor:
        model.train()
        model[1].eval()                             # fine-tuning with BatchNorm statistics frozen
        model[3].eval()
        for x, y in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        model.eval()
        model[3].train()                            # Monte Carlo dropout at evaluation
        with torch.no_grad():
            for x, _ in loader:
                model(x)
    assert doctor.report().names == ()


@pytest.mark.parametrize("workers", [0, 1])
def test_prefetching_loaders_and_persistent_workers_keep_epochs_right(workers):
    def prefetching(loader):                        # accelerate's DataLoaderShard looks one batch ahead
        it = iter(loader)
        current = next(it)
        for following in it:
            yield current, False
            current = following
        yield current, True

    def run(flush):
        model = _mlp(0.1)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        loader = DataLoader(TensorDataset(torch.randn(80, 4), torch.arange(80) % 3), batch_size=8, shuffle=True,
                            num_workers=workers, persistent_workers=workers > 0)
        with LoopDoctor(model) as doctor:
            for _ in range(3):
                for step, ((x, y), last) in enumerate(prefetching(loader)):
                    window = 4 if step < 8 else 2          # equal batches: the examples rule is 1 / (batches in it)
                    (nn.functional.cross_entropy(model(x), y) / window).backward()
                    if (step + 1) % 4 == 0 or (flush and last):
                        opt.step()
                        opt.zero_grad()
        return doctor.report().names
    assert run(flush=True) == () and run(flush=False) == ("accumulation_without_flush",)


def test_autograd_still_catches_an_in_place_change_of_a_saved_tensor():
    """Why the doctor counts no saved tensors with saved_tensors_hooks (issue 23's suggestion, and the course's
    GraphMemoryMeter): with such hooks on, autograd no longer raises when a saved tensor was changed in place,
    so a broken loop would run on with wrong gradients. The doctor uses none, and the error still comes."""
    def broken(hooks: bool):
        x = torch.randn(3, requires_grad=True)
        with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t) if hooks else torch.enable_grad():
            y = x.sigmoid()                        # sigmoid saves its output
            y.mul_(2)                              # ... which is then changed in place
        y.sum().backward()
    broken(hooks=True)                             # silently wrong with saved-tensor hooks
    model = _mlp()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        with LoopDoctor(model):
            broken(hooks=False)


@pytest.mark.parametrize("average", ["np.mean", "np.average", "np.nanmean", "statistics.mean", "statistics.fmean",
                                     "torch.tensor(list).mean()", "torch.mean(torch.as_tensor(list))"])
def test_a_mean_of_readings_taken_in_one_call_is_checked(average):
    """Per-batch validation losses collected with .item() and averaged in one call (makemore averages with
    torch.tensor(losses).mean()): the mean of batch means is named when the batches differ in size (10 examples
    in batches of 4: 4, 4, 2), not when they are equal (12), and every wrapped function is put back on exit."""
    import statistics
    means = {"np.mean": lambda values: np.mean(values), "statistics.mean": lambda values: statistics.mean(values),
             "np.average": lambda values: np.average(values), "np.nanmean": lambda values: np.nanmean(values),
             "statistics.fmean": lambda values: statistics.fmean(values),
             "torch.tensor(list).mean()": lambda values: torch.tensor(values).mean().item(),
             "torch.mean(torch.as_tensor(list))": lambda values: torch.mean(torch.as_tensor(values)).item()}
    originals = (np.mean, np.average, np.nanmean, statistics.mean, statistics.fmean, torch.tensor, torch.as_tensor,
                 torch.Tensor.mean, torch.mean)
    found = {}
    for n_val in (10, 12):
        model, train = _mlp(), Augmented(32, 1)
        val = TensorDataset(torch.randn(n_val, 4), torch.randint(0, 3, (n_val,)))
        with LoopDoctor(model) as doctor:
            _train(model, DataLoader(train, batch_size=8), epochs=1)
            model.eval()
            with torch.no_grad():
                losses = [nn.functional.cross_entropy(model(x), y).item() for x, y in DataLoader(val, batch_size=4)]
            assert abs(float(means[average](losses)) - sum(map(float, losses)) / len(losses)) < 1e-6
        found[n_val] = "mean_of_batch_means" in doctor.report().names
    assert found == {10: True, 12: False}
    assert (np.mean, np.average, np.nanmean, statistics.mean, statistics.fmean, torch.tensor, torch.as_tensor,
            torch.Tensor.mean, torch.mean) == originals


@pytest.mark.parametrize("average", ["np.average", "np.mean", "torch.stack(list).mean()", "torch.tensor(list).mean()"])
def test_a_loaders_per_batch_tensors_averaged_in_one_call_are_checked(average):
    """Per-batch validation losses kept as tensors (informer's `total_loss.append(loss)`, then `np.average`): the
    mean of batch means is named when the loader's batches differ in size (10 examples: 4, 4, 2), not when they are
    equal (12); and not for a list that is not that loader's batches (two of its three, or one value per class)."""
    means = {"np.average": lambda values: np.average(values), "np.mean": lambda values: np.mean(values),
             "torch.stack(list).mean()": lambda values: torch.stack(values).mean(),
             "torch.tensor(list).mean()": lambda values: torch.tensor(values).mean()}
    found = {}
    for n_val, which in ((10, "all"), (12, "all"), (10, "two of three"), (10, "per class")):
        model, train = _mlp(), Augmented(32, 1)
        val = TensorDataset(torch.randn(n_val, 4), torch.randint(0, 3, (n_val,)))
        with LoopDoctor(model) as doctor:
            _train(model, DataLoader(train, batch_size=8), epochs=1)
            model.eval()
            with torch.no_grad():
                losses, logits = [], []
                for x, y in DataLoader(val, batch_size=4):
                    out = model(x)
                    logits.append(out)
                    losses.append(nn.functional.cross_entropy(out, y))
                per_class = list(torch.cat(logits).mean(0).unbind())          # 3 values, one per class
            chosen = {"all": losses, "two of three": losses[1:], "per class": per_class}[which]
            value = float(means[average](chosen))
            assert abs(value - sum(float(v) for v in chosen) / len(chosen)) < 1e-5
        found[n_val, which] = "mean_of_batch_means" in doctor.report().names
    assert found == {(10, "all"): True, (12, "all"): False, (10, "two of three"): False, (10, "per class"): False}


@pytest.mark.parametrize("n_val", [10, 12])
def test_batch_means_summed_and_divided_by_the_examples_are_named_only_for_a_mean_reduced_loss_module(n_val):
    """`test_loss += criterion(out, y).item()` then `test_loss /= len(loader.dataset)` (pytorch-cifar100's
    eval_training): with nn.CrossEntropyLoss() (reduction="mean") each term is a batch's mean, so the result is
    about 1/B of the mean loss, named whether or not the batches are equal; with reduction="sum" (pytorch/examples'
    MNIST) it is the right mean; with F.cross_entropy the reduction is not seen, and nothing is named."""
    found = {}
    for how in ("module mean", "module sum", "function"):
        criterion = {"module mean": nn.CrossEntropyLoss(), "module sum": nn.CrossEntropyLoss(reduction="sum"),
                     "function": nn.functional.cross_entropy}[how]
        model, train = _mlp(), Augmented(32, 1)
        val = TensorDataset(torch.randn(n_val, 4), torch.randint(0, 3, (n_val,)))
        loader = DataLoader(val, batch_size=4)
        with LoopDoctor(model) as doctor:
            _train(model, DataLoader(train, batch_size=8), epochs=1)
            model.eval()
            total = 0.0
            with torch.no_grad():
                for x, y in loader:
                    total += criterion(model(x), y).item()
            total / len(loader.dataset)
        found[how] = doctor.report().names
    assert found == {"module mean": ("mean_of_batch_means",), "module sum": (), "function": ()}
    assert nn.CrossEntropyLoss.__call__ is nn.Module.__call__      # the wrapper is gone after the doctor


class _EncoderHead(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.encoder = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.5))
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        return self.head(self.encoder(x))


@pytest.mark.parametrize("case", ["validation through the child", "frozen features for a trained head",
                                  "validation through the model"])
def test_a_child_called_on_its_own_under_no_grad_is_an_evaluation_unless_a_backward_follows(case):
    """`model.encoder(x)` under no_grad, outside the model's forward: in a validation left in train mode it is
    named; as a frozen stage whose features a head is then trained on (SupContrast's linear stage), in train mode
    too, it is not; a child called inside the model's own forward is the model's forward. A deep copy of the
    watched model carries no doctor hook."""
    import copy
    model = _EncoderHead()
    train, val = Augmented(32, 1), TensorDataset(torch.randn(12, 4), torch.randint(0, 3, (12,)))
    with LoopDoctor(model) as doctor:
        _train(model, DataLoader(train, batch_size=8), epochs=1)
        model.train()                                          # left in train mode below
        if case == "frozen features for a trained head":
            opt = torch.optim.SGD(model.head.parameters(), lr=0.1)
            for x, y in DataLoader(train, batch_size=8):
                with torch.no_grad():
                    features = model.encoder(x)
                opt.zero_grad()
                nn.functional.cross_entropy(model.head(features), y).backward()
                opt.step()
        else:
            with torch.no_grad():
                for x, _ in DataLoader(val, batch_size=4):
                    model.encoder(x) if case == "validation through the child" else model(x)
        copied = copy.deepcopy(model)
    names = doctor.report().names
    assert names == (() if case == "frozen features for a trained head" else ("eval_in_train_mode",))
    assert not copied.encoder._forward_hooks and not copied._forward_hooks and not copied._forward_pre_hooks
