"""The loop doctor on its corpus: every bug named, no finding on correct loops, weights bitwise unchanged."""
from __future__ import annotations

import functools
import warnings

import pytest
import torch

from course_utils.engine.bugs import BUGS
from course_utils.doctor import LoopDoctor
from tests.doctor_corpus import BUGGY, CASES, CORRECT, run_case, scorecard

ISSUE_FINDINGS = {
    "missing_zero_grad", "zero_grad_after_backward", "eval_in_train_mode", "missing_no_grad",
    "graph_attached_logging", "missing_train_switch", "clip_before_backward", "clip_after_step",
    "epoch_schedule_per_batch", "scheduler_before_optimizer", "unscaled_accumulation",
    "accumulation_without_flush", "head_after_optimizer", "freeze_after_optimizer", "data_leakage",
    "softmax_before_cross_entropy", "mean_of_batch_means", "update_schedule_per_epoch"}


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """One intra-op thread: on a shared 2-core machine, spinning threads only burn CPU (same result either way)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _state(setup) -> list[bytes]:
    tensors = list(setup.model.state_dict().values())
    for state in setup.optimizer.state.values():
        tensors += [v for v in state.values() if torch.is_tensor(v)]
    return [t.detach().contiguous().numpy().tobytes() for t in tensors]


@functools.cache
def _both(name: str):
    """Run a corpus case bare and under the doctor: (report, state bare, state watched)."""
    case = next(c for c in CASES if c.name == name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bare, _ = run_case(case, doctor=False)
        watched, report = run_case(case, doctor=True)
    return report, _state(bare), _state(watched)


def test_corpus_covers_every_finding_twice_and_ten_correct_loops():
    assert len(CORRECT) >= 10
    for name in ISSUE_FINDINGS:
        assert name in BUGS
        assert sum(name in case.expected for case in BUGGY) >= 2, name
    assert {n for case in BUGGY for n in case.expected} == ISSUE_FINDINGS


@pytest.mark.parametrize("name", [case.name for case in CASES])
def test_doctor_names_exactly_the_bugs_of_each_loop(name):
    report, _, _ = _both(name)
    expected = next(c for c in CASES if c.name == name).expected
    assert set(report.names) == expected, str(report)
    for finding in report.findings:
        assert finding.fix == BUGS[finding.name].fix and finding.evidence


@pytest.mark.parametrize("name", [case.name for case in CASES])
def test_doctor_never_changes_weights_or_optimizer_state(name):
    _, bare, watched = _both(name)
    assert bare == watched


def test_precision_and_recall_per_finding_are_one():
    rows = scorecard({case.name: _both(case.name)[0] for case in CASES})
    assert {row[0] for row in rows} == ISSUE_FINDINGS
    for name, tp, fp, fn, precision, recall in rows:
        assert (fp, fn) == (0, 0) and tp >= 2, name


def test_report_reads_well():
    report, _, _ = _both("seed_template")
    assert str(report).endswith("No silent bug found.")
    report, _, _ = _both("no_zero_grad")
    text = str(report)
    assert "* missing_zero_grad: Missing zero_grad" in text and "update 2: .grad still held 1 backward pass" in text


# --- hooks and patches are gone on exit ----------------------------------------------------------

def _originals(setup):
    from torch.nn.utils import clip_grad
    from torch.optim import lr_scheduler, optimizer
    from torch.utils.data import dataloader
    cells = [f.__closure__[0].cell_contents for f in (clip_grad.clip_grad_norm_, clip_grad.clip_grad_value_,
                                                      clip_grad._clip_grads_with_norm_)]
    return (torch.autograd.backward, *cells, torch.amp.GradScaler.step, torch.amp.GradScaler.scale,
            torch.amp.GradScaler.unscale_, "item" in vars(torch.Tensor), torch.optim.Optimizer.__init__,
            dataloader._BaseDataLoaderIter.__next__, lr_scheduler.LRScheduler.step, lr_scheduler.ReduceLROnPlateau.step,
            len(optimizer._global_optimizer_pre_hooks), len(optimizer._global_optimizer_post_hooks),
            "step" in vars(setup.scheduler) if setup.scheduler else None)


def _assert_clean(setup, before, kept_outputs=()):
    assert _originals(setup) == before
    assert not setup.model._forward_hooks and not setup.model._forward_hooks_with_kwargs
    assert not setup.optimizer._optimizer_step_pre_hooks and not setup.optimizer._optimizer_step_post_hooks
    for p in setup.model.parameters():
        assert not p._post_accumulate_grad_hooks
    for out in kept_outputs:
        assert not out._backward_hooks


def test_everything_removed_on_normal_exit():
    from tests.doctor_corpus.setups import make_setup
    from tests.doctor_corpus.correct import SCHEDULES
    setup = make_setup(scheduler=SCHEDULES["step100"])
    before = _originals(setup)
    with LoopDoctor(setup.model, setup.optimizer, setup.scheduler, setup.train_loader, setup.val_loader):
        xb, yb = next(iter(setup.train_loader))
        kept = setup.model(xb)
        setup.loss_fn(kept, yb).backward()
        setup.optimizer.step()
        setup.scheduler.step()
        assert torch.autograd.backward is not before[0]
    _assert_clean(setup, before, [kept])


def test_everything_removed_when_the_loop_raises():
    from tests.doctor_corpus.setups import make_setup
    from tests.doctor_corpus.correct import SCHEDULES
    setup = make_setup(scheduler=SCHEDULES["cosine_epochs"])
    before = _originals(setup)
    kept = []
    with pytest.raises(ZeroDivisionError):
        with LoopDoctor(setup.model, setup.optimizer, setup.scheduler):
            for xb, yb in setup.train_loader:
                kept.append(setup.model(xb))      # forwards left open when the loop dies
                1 / 0
    _assert_clean(setup, before, kept)


def test_a_doctor_watches_one_loop():
    from tests.doctor_corpus.setups import make_setup
    setup = make_setup()
    doctor = LoopDoctor(setup.model, setup.optimizer)
    with doctor:
        pass
    with pytest.raises(RuntimeError, match="one loop"):
        with doctor:
            pass


@pytest.mark.parametrize("kwargs, argument", [
    (dict(model="net"), "model"), (dict(optimizer="adam"), "optimizer"),
    (dict(scheduler=3), "scheduler"), (dict(train_data=42), "train_data")])
def test_bad_arguments_name_the_argument(kwargs, argument):
    from tests.doctor_corpus.setups import make_setup
    setup = make_setup()
    arguments = dict(model=setup.model, optimizer=setup.optimizer) | kwargs
    with pytest.raises(ValueError, match=argument):
        LoopDoctor(**arguments)


# --- an independent oracle: the course's own loop with the registry's bugs injected ----------------

COURSE_LOOP_BUGS = {
    "missing_zero_grad": {}, "zero_grad_after_backward": {}, "eval_in_train_mode": {"dropout": 0.2},
    "mean_of_batch_means": {},
    "missing_no_grad": {}, "graph_attached_logging": {}, "missing_train_switch": {"dropout": 0.2},
    "epoch_schedule_per_batch": {"schedule": "cosine"}, "unscaled_accumulation": {"accum_steps": 4},
    "accumulation_without_flush": {"accum_steps": 4}, "data_leakage": {}}


@pytest.mark.parametrize("bug", [None, *COURSE_LOOP_BUGS])
def test_doctor_names_the_bug_injected_into_the_course_loop(bug):
    from course_utils.engine.loop import stream
    from course_utils.engine.session import TrainConfig, build
    options = COURSE_LOOP_BUGS.get(bug, {"accum_steps": 4, "schedule": "onecycle", "batchnorm": True})
    state = build(TrainConfig(n_train=150, n_val=60, epochs=2, measure_memory=False,
                              bugs=(bug,) if bug else (), **options))
    with LoopDoctor(state.model, state.optimizer, state.scheduler, state.train_loader, state.val_loader) as doc:
        for _ in stream(state):
            pass
    assert doc.report().names == ((bug,) if bug else ()), str(doc.report())


def _course_accumulation(n: int, batch: int, k: int, weighting: str) -> tuple[str, ...]:
    """Chapter 0's quiz loop and chapter 5's flush loop: windows of k, the epoch's short last window flushed;
    each loss weighted by 1/k ("k") or by its share of the window's examples ("examples")."""
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset
    g = torch.Generator().manual_seed(0)
    loader = DataLoader(TensorDataset(torch.randn(n, 2, generator=g), torch.arange(n) % 3), batch_size=batch,
                        shuffle=True, generator=g)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with LoopDoctor(model) as doctor:
        for _ in range(2):
            for i, (x, y) in enumerate(loader):
                window = min(k * batch, n - (i - i % k) * batch)
                weight = 1 / k if weighting == "k" else len(y) / window
                (torch.nn.functional.cross_entropy(model(x), y) * weight).backward()
                if (i + 1) % k == 0 or i + 1 == len(loader):
                    optimizer.step()
                    optimizer.zero_grad()
    return doctor.report().names


@pytest.mark.parametrize("n, batch, k", [(1000, 100, 3), (300, 32, 4)], ids=["chapter0_quiz", "chapter5_flush"])
def test_the_course_accumulation_rule_judges_short_flushed_windows(n, batch, k):
    assert _course_accumulation(n, batch, k, "k") == ("unscaled_accumulation",)     # 1/3 and 1/2 of a full update
    assert _course_accumulation(n, batch, k, "examples") == ()
    assert _course_accumulation(12 * batch, batch, k, "k") == ()                       # full windows: 1/k is right


def _budgeted_accumulation(budget: int, per_epoch: int = 12, k: int = 3, flush: bool = False, count: str = "run"):
    """A loop over a cycling DataLoader (epochs of `per_epoch` batches) that stops after `budget` micro-batches;
    its windows count micro-batches over the run (litgpt's iter_num) or within each epoch (enumerate(loader))."""
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset
    torch.manual_seed(0)
    loader = DataLoader(TensorDataset(torch.randn(per_epoch * 4, 2), torch.randint(0, 3, (per_epoch * 4,))),
                        batch_size=4, shuffle=True)
    model = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with LoopDoctor(model) as doctor:
        drawn, batches, i = 0, iter(loader), 0
        while drawn < budget:
            try:
                x, y = next(batches)
            except StopIteration:
                batches, i = iter(loader), 0
                x, y = next(batches)
            drawn, i = drawn + 1, i + 1
            (torch.nn.functional.cross_entropy(model(x), y) / k).backward()
            if (drawn if count == "run" else i) % k == 0 or (flush and i == per_epoch):
                optimizer.step()
                optimizer.zero_grad()
    return doctor.report()


def test_a_loop_that_stops_inside_an_epoch_loses_no_epoch_tail():
    """litgpt's CycleIterator run: it stops after drawing the next epoch's first batch, so that batch's backward is
    never applied. Wasted, and said so in a note, but no epoch's last micro-batches were lost: not the flush bug."""
    report = _budgeted_accumulation(25)                    # epochs of 12 = 4 windows of 3; batch 25 opens epoch 3
    assert report.names == ()
    assert any("stopped inside an epoch with 1 backward pass" in note for note in report.notes)
    assert _budgeted_accumulation(24).names == ()          # stops at a window's end: nothing pending, no note
    assert not any("stopped inside" in note for note in _budgeted_accumulation(24).notes)
    # epochs of 10 batches, windows of 3 counted within each epoch: each epoch's last batch is carried into the
    # next epoch's first update (4 micro-batches), and the run ends inside no epoch, so the rule still applies
    assert "accumulation_without_flush" in _budgeted_accumulation(30, per_epoch=10, count="epoch").names
    # flushed, it is cured; its 1-batch window still divided by 3 is the course rule's other finding
    assert _budgeted_accumulation(30, per_epoch=10, count="epoch", flush=True).names == ("unscaled_accumulation",)
    assert _budgeted_accumulation(30, per_epoch=10).names == ()   # counted over the run: every window holds 3


def _validation_sum(average: str) -> tuple[str, ...]:
    """A model evaluated on 10 examples in batches of 4 (4, 4, 2), its losses summed in a tensor (yolov5's way)."""
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset
    torch.manual_seed(0)
    model = nn.Linear(2, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    train = DataLoader(TensorDataset(torch.randn(8, 2), torch.randint(0, 3, (8,))), batch_size=4)
    val = DataLoader(TensorDataset(torch.randn(10, 2), torch.randint(0, 3, (10,))), batch_size=4)
    with LoopDoctor(model) as doctor:
        for x, y in train:
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
        model.eval()
        total = 0 if average == "batches, from 0" else torch.zeros(2)       # Pytorch-UNet's dice_score = 0
        with torch.no_grad():
            for x, y in val:
                out = model(x)
                items = torch.stack([torch.nn.functional.cross_entropy(out, y), (out.argmax(1) == y).float().mean()])
                total += items if average.startswith("batches") else items * len(y)
        mean = (total.cpu() / len(val)) if average.startswith("batches") else total / len(val.dataset)
        assert mean.shape == (2,)
    return doctor.report().names


def test_a_validation_mean_summed_in_a_tensor_is_checked():
    assert _validation_sum("batches") == ("mean_of_batch_means",)      # (l1 + l2 + l3) / 3 with batches of 4, 4, 2
    assert _validation_sum("batches, from 0") == ("mean_of_batch_means",)
    assert _validation_sum("examples") == ()                           # sum(l_i * n_i) / 10


def _scheduled(make_scheduler, per: str, epochs: int = 3, kept: bool = False):
    """`epochs` epochs of 5 updates, the scheduler `make_scheduler(optimizer, updates_per_epoch)` stepped per update
    or per epoch; the doctor's findings. kept=True: the batches come from one iterator the loop keeps, len(loader)
    per epoch (sentence-transformers' way), so the last epoch never raises StopIteration; then the whole report."""
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset
    torch.manual_seed(0)
    model = nn.Linear(2, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(torch.randn(20, 2), torch.randint(0, 3, (20,))), batch_size=4)
    scheduler = make_scheduler(optimizer, len(loader))

    def kept_epoch(batches):
        for _ in range(len(loader)):
            try:
                yield next(batches[0])
            except StopIteration:
                batches[0] = iter(loader)
                yield next(batches[0])

    with LoopDoctor(model) as doctor:
        batches = [iter(loader)]
        for _ in range(epochs):
            for x, y in (kept_epoch(batches) if kept else loader):
                optimizer.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                optimizer.step()
                if per == "update":
                    scheduler.step()
            if per == "epoch":
                scheduler.step()
    return doctor.report() if kept else doctor.report().names


def _lambda_schedule(per: str, counts: str) -> tuple[str, ...]:
    """A LambdaLR whose lambda counts `epochs` (yolov5's shape) or epochs * steps_per_epoch."""
    def make(optimizer, steps_per_epoch):
        epochs = 3
        if counts == "epochs":
            return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda x: 1 - x / (epochs + 1))
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda x: 1 - x / (epochs * steps_per_epoch + 1))
    return _scheduled(make, per)


def test_a_lambda_that_counts_epochs_is_read_as_an_epoch_schedule():
    assert _lambda_schedule("update", "epochs") == ("epoch_schedule_per_batch",)
    assert _lambda_schedule("epoch", "epochs") == ()
    assert _lambda_schedule("update", "steps") == ()        # epochs * steps_per_epoch: a schedule in updates


def test_a_sequential_schedule_sized_in_updates_stepped_per_epoch_is_found():
    """litgpt: LambdaLR warmup, then a cosine over max_steps - warmup, joined by SequentialLR: sized in updates."""
    from torch.optim import lr_scheduler

    def make(optimizer, steps_per_epoch):
        warmup, total = 2, 3 * steps_per_epoch
        return lr_scheduler.SequentialLR(optimizer, [lr_scheduler.LambdaLR(optimizer, lambda s: (s + 1) / warmup),
                                                     lr_scheduler.CosineAnnealingLR(optimizer, total - warmup)],
                                         milestones=[warmup])

    def run(per: str) -> tuple[str, ...]:
        return _scheduled(make, per)

    assert run("epoch") == ("update_schedule_per_epoch",)
    assert run("update") == ()


@pytest.mark.parametrize("epochs, horizon, expected", [
    (3, "one epoch", ("update_schedule_per_epoch",)),    # 5 iterations for 3 epochs: under twice the epochs, caught
    (2, "one epoch", ("update_schedule_per_epoch",)),
    (4, "one epoch", ()),        # 5 iterations, 4 epochs: could be a 5-epoch schedule stopped early, not judged
    (3, "the epochs", ()),       # a warmup counted in epochs (3), stepped per epoch: right
])
def test_a_warmup_over_one_epochs_iterations_stepped_per_epoch_is_found(epochs, horizon, expected):
    """weiaicunzai's CIFAR-100 WarmUpLR: total_iters = len(loader) * warm, stepped once per epoch instead of per
    batch. Its length is one epoch's updates, and longer than the run is in epochs: sized in updates, even when
    under twice the epochs (391 iterations against 200 epochs in the published run)."""
    from torch.optim import lr_scheduler

    def make(optimizer, steps_per_epoch):
        total = steps_per_epoch if horizon == "one epoch" else epochs
        return lr_scheduler.LinearLR(optimizer, start_factor=0.01, total_iters=total)

    assert _scheduled(make, "epoch", epochs=epochs) == expected
    assert _scheduled(make, "update", epochs=epochs) == ()


def _iterations(make_scheduler, iterations: int = 30) -> tuple[str, ...]:
    """detectron2's shape: batches drawn from an endless iterator (no epoch ever ends), the scheduler stepped after
    every update; the doctor's findings."""
    import itertools

    from torch import nn
    torch.manual_seed(0)
    model = nn.Linear(2, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = make_scheduler(optimizer)
    batches = ((torch.randn(4, 2), torch.randint(0, 3, (4,))) for _ in itertools.count())
    with LoopDoctor(model) as doctor:
        for _, (x, y) in zip(range(iterations), batches):
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            scheduler.step()
    return doctor.report().names


@pytest.mark.parametrize("make, expected", [
    (lambda o: torch.optim.lr_scheduler.MultiStepLR(o, milestones=[2]), ("epoch_schedule_per_batch",)),
    (lambda o: torch.optim.lr_scheduler.MultiStepLR(o, milestones=[1, 3]), ("epoch_schedule_per_batch",)),
    (lambda o: torch.optim.lr_scheduler.MultiStepLR(o, milestones=[20, 26]), ()),   # late in the run: iterations
    (lambda o: torch.optim.lr_scheduler.MultiStepLR(o, milestones=[2, 26]), ()),    # one late milestone: not judged
    (lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=2), ("epoch_schedule_per_batch",)),   # 15 decays
    (lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=10), ()),                             # 3 decays
])
def test_an_epoch_schedule_stepped_per_iteration_is_found_in_a_loop_that_ends_no_epoch(make, expected):
    """detectron2's plain train loop draws from an infinite sampler: no epoch ends, so the schedule's cadence is read
    from the schedule alone (a MultiStepLR whose milestones all pass in the first tenth of 30 iterations, a StepLR
    that decays ten times or more)."""
    assert _iterations(make) == expected


def _hand_clip(where: str, how: str) -> tuple[str, ...]:
    """A loop that clamps (or rescales) every gradient by hand, before or after optimizer.step()."""
    from torch import nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def by_hand():
        for p in model.parameters():
            if how == "clamp via .data":
                p.grad.data.clamp_(-1e-3, 1e-3)           # sgrvinod's clip_gradient: the version is not bumped
            elif how == "clamp that changes nothing":
                p.grad.data.clamp_(-1e6, 1e6)
            else:
                p.grad.mul_(0.5)

    with LoopDoctor(model) as doctor:
        for _ in range(4):
            x, y = torch.randn(8, 2), torch.randint(0, 3, (8,))
            optimizer.zero_grad(set_to_none=False)
            torch.nn.functional.cross_entropy(model(x), y).backward()
            if where == "before":
                by_hand()
            optimizer.step()
            if where == "after":
                by_hand()
    return doctor.report().names


@pytest.mark.parametrize("how", ["clamp via .data", "clamp that changes nothing", "mul_"])
def test_a_gradient_edit_written_by_hand_after_the_step_is_clip_after_step(how):
    assert _hand_clip("after", how) == ("clip_after_step",)
    assert _hand_clip("before", how) == ()


def test_an_epoch_drawn_whole_from_a_kept_iterator_counts_though_it_is_never_exhausted():
    """sentence-transformers draws steps_per_epoch = len(loader) batches per epoch from an iterator it keeps, so its
    last epoch never raises StopIteration; the doctor still counts 2 epochs, and the schedule cadence check runs."""
    def make(optimizer, steps_per_epoch):
        return torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=2 * steps_per_epoch)

    assert _scheduled(make, "epoch", epochs=2, kept=True).names == ("update_schedule_per_epoch",)
    per_update = _scheduled(make, "update", epochs=2, kept=True)
    assert per_update.names == () and not any("no training epoch ended" in note for note in per_update.notes)
