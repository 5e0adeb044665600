"""LoopDoctor (chapters 5, 9): watch a training loop you do not change, and name its silent bugs.

``with LoopDoctor(model) as doctor: <your loop>`` then ``print(doctor.report())``. Only the model is
required: optimizers and schedulers, also those built inside a library call, are found as they are built
or stepped, and data is seen as it leaves a DataLoader. Give ``train_data`` and ``val_data`` when the loop
has no DataLoader (NumPy arrays, token streams, tensors sliced by hand), so the leakage check can run.

The doctor only observes (``install.py`` lists where): it never calls a dataset's ``__getitem__``, draws
from no random generator, and changes no value the loop computes, so the weights come out bitwise the
same. Its parts: ``sources.py`` (data as it flows) and ``updates.py`` (optimizers, clipping, schedulers) watch;
``gradients.py`` (per optimizer), ``forwards.py`` (modes and graphs), ``keys.py`` (splits) and ``readings.py``
(averages) count; ``checks.py`` (as things happen) and ``verdict.py`` (the whole run) turn counts into findings.
"""
from __future__ import annotations

import traceback
import weakref
from collections import deque
from collections.abc import Mapping

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.modules.instancenorm import _InstanceNorm

from course_utils.doctor import checks, verdict
from course_utils.doctor.checks import Observations
from course_utils.doctor.forwards import Forward, Graphs, first_input, mode_layers, outputs
from course_utils.doctor.forwards import mode as forward_mode
from course_utils.doctor.gradients import Pass, Track
from course_utils.doctor.install import Undo, install
from course_utils.doctor.report import Report
from course_utils.doctor.sources import DataWatch, Source, _pointer, _size, _storages
from course_utils.doctor.updates import UpdateWatch

_NORMS = (_BatchNorm, _InstanceNorm)

SOFTMAX_CHECKS = 5     # backward passes whose loss graph is searched for softmax -> cross_entropy
_ACTIVE: list = []     # the one doctor watching now (wrappers are process-wide)


def _as_list(value, kind, name: str) -> list:
    items = list(value) if isinstance(value, (list, tuple)) else [] if value is None else [value]
    for item in items:
        if not isinstance(item, kind):
            raise ValueError(f"{name} must be a {kind.__name__} (or a list of them), got {type(item).__name__}")
    return items


def _check_data(data: object, name: str) -> None:
    if data is None or isinstance(data, (DataLoader, Dataset, torch.Tensor, np.ndarray, Mapping)):
        return
    if isinstance(data, (tuple, list)) and data and isinstance(data[0], (torch.Tensor, np.ndarray, Mapping)):
        return
    if hasattr(data, "__getitem__") and hasattr(data, "__len__") and not isinstance(data, (str, bytes)):
        return
    raise ValueError(f"{name} must be a DataLoader, a Dataset, a tensor, a NumPy array or an (inputs, targets) "
                     f"pair, got {type(data).__name__}")


FORWARDS_KEPT = 1 << 16      # the recent forwards a one-call mean of a list of tensors is matched against


class LoopDoctor(DataWatch, UpdateWatch):
    """``with LoopDoctor(model, ...) as doctor: <your loop>`` then ``print(doctor.report())`` (ch. 5, 9).

    model: the module (or list of modules) your loop calls; optimizer, scheduler: optional (found when built or
    stepped); train_data, val_data: optional splits (a DataLoader, Dataset, tensor, NumPy array, (inputs,
    targets) pair, or a 1-D token stream), needed for the leakage check only when the loop uses no DataLoader.
    """

    def __init__(self, model: nn.Module | list[nn.Module], optimizer: object = None, scheduler: object = None,
                 train_data: object = None, val_data: object = None):
        self.models = _as_list(model, nn.Module, "model")
        if not self.models:
            raise ValueError("model must be a torch.nn.Module (or a list of them), got nothing")
        self.given_optimizers = _as_list(optimizer, torch.optim.Optimizer, "optimizer")
        self.given_schedulers = [] if scheduler is None else list(scheduler) if isinstance(scheduler, (list, tuple)) \
            else [scheduler]
        for s in self.given_schedulers:
            if not callable(getattr(s, "step", None)):
                raise ValueError(f"scheduler must be None or have a step() method, got {type(s).__name__}")
        _check_data(train_data, "train_data")
        _check_data(val_data, "val_data")
        self.train_data, self.val_data = train_data, val_data
        self.obs = Observations()
        self.tracks: list[Track] = []
        self.schedulers: dict[int, list] = {}         # id -> [scheduler, steps, track]
        self.sources: dict[int, Source] = {}
        self.graphs = Graphs()
        self.layers = [mode_layers(m) for m in self.models]
        self._open: list[list[Forward]] = [[] for _ in self.models]
        self._undo = Undo()
        self._stepping: Track | None = None
        self._last_batch = None                       # (serial, source id, storage pointers, shapes, iterator)
        self._training_iterators = weakref.WeakSet()   # DataLoader iterators whose batches were trained on
        self._fresh = False                           # has no forward run since the last batch was drawn?
        self._given = {p: d for d in (train_data, val_data) if d is not None for p in _storages(d)}
        self._serial = 0
        self._epoch_serial = 0                        # the serial of the last batch before a training epoch ended
        self._complete_unended: set[int] = set()      # training iterators that gave every batch, never asked again
        self._recent_outputs: list[int] = []
        self._reading: tuple | None = None           # the last forward, as a Reading's terms (readings.py)
        self._forward_batches: deque = deque(maxlen=FORWARDS_KEPT)   # each recent forward: (batch size, its loader
                                                                     # iterator's id or None), for lists of tensors
        self._made_from_list: tuple | None = None    # the last torch.tensor/stack(list of readings): (ref, list)
        self._tensor_sums: dict[int, tuple] = {}     # tensors summing readings: id -> (ref, terms or None)
        self._reading_source: int | None = None      # and the dataset its input came from
        self._mean_loss = None                       # a weakref to the last loss module's batch-mean result
        self._depth_in: dict[int, int] = {}          # watched model -> how many of its forwards are running
        self._child_evaluations: list = []           # a child's no-grad forwards, not yet decided (see _forward)
        self._unsourced_in_train_mode: list = []     # no-grad train-mode forwards on inputs no loader gave
        self._scales: set[int] = set()                # where each GradScaler seen keeps its scale
        self._frozen: list = []
        self._depth = {"clip": 0, "sched": 0}
        self._exhausted = weakref.WeakSet()
        self._round = 0
        self.failure: str | None = None
        self._split_keys: dict = {}
        self._active = self._closed = False

    # --- install / remove ------------------------------------------------------------------------

    def __enter__(self) -> LoopDoctor:
        if self._active or self._closed:
            raise RuntimeError("a LoopDoctor watches one loop: create a new one for the next")
        if _ACTIVE:
            raise RuntimeError("another LoopDoctor is already watching: end its with-block first")
        self._active = True
        _ACTIVE.append(self)
        try:
            for opt in self.given_optimizers:
                self._track(opt)
            install(self, self._undo)
        except BaseException:
            self._remove()
            raise
        return self

    def __exit__(self, *exc_info) -> bool:
        try:
            if exc_info[0] is None and self.failure is None:
                self._guarded(self._finish)
        finally:
            self._remove()
        return False

    def _remove(self) -> None:
        self._undo.run()
        for records in self._open:
            for record in records:
                for handle in record.handles:
                    handle.remove()
            records.clear()
        self._active, self._closed = False, True
        if self in _ACTIVE:
            _ACTIVE.remove(self)

    def _guarded(self, fn, *args, **kwargs):
        """Run an observer; if the doctor itself fails, stop observing and say so, never break the loop."""
        if self.failure is not None:
            return None
        try:
            return fn(*args, **kwargs)
        except Exception as exc:      # noqa: BLE001 - the loop must go on whatever the doctor's trouble
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            self.failure = f"{type(exc).__name__}: {exc} ({frame.name}, line {frame.lineno})"
            return None

    # --- forwards ------------------------------------------------------------------------------------

    def _on_forward(self, index: int, module: nn.Module, args: tuple, kwargs: dict, output: object) -> None:
        self._guarded(self._forward, index, module, args, kwargs, output)

    def _inside(self, index: int, step: int, *hook_args) -> None:
        """A watched model's forward began (+1) or ended (-1): its children's calls inside it are its own."""
        self._depth_in[index] = max(0, self._depth_in.get(index, 0) + step)

    def _on_child_forward(self, index: int, child: nn.Module, args: tuple, kwargs: dict, output: object) -> None:
        """A direct child of model `index` called on its own, outside the model's forward, with gradients off: an
        evaluation of that part (a frozen encoder's features, `model.module(x)`), judged by the child's layers."""
        if self._depth_in.get(index, 0) or torch.is_grad_enabled():
            return
        own = {id(m) for m in child.modules()}
        layers = [m for m in self.layers[index] if id(m) in own]
        self._guarded(self._forward, index, child, args, kwargs, output, layers)

    def _evaluation(self, index: int, source: int | None, mode: str, layers: list, name: str) -> None:
        """Forward `index` ran without gradients: an evaluation (in train mode, judged by its layers)."""
        obs = self.obs
        obs.evaluation_forwards += 1
        self._evaluated(index)
        if source is not None:
            self.sources[source].evaluated = True
        if mode == "train" and layers and (source is not None or self._last_batch is None):
            checks.eval_in_train_mode(obs, index, layers, "without gradients")
        elif mode == "train" and (random := [m for m in layers if not isinstance(m, _NORMS)]):
            # on inputs no loader gave (noise, a prompt): samples for a preview, or a GAN's fakes that a backward is
            # about to train on; judged when the next batch comes, only if no backward came first, and only by the
            # layers that draw at random in train mode (dropout): a generator's BatchNorm normalising its preview
            # batch is how GANs sample (pytorch/examples' DCGAN), not a corrupted sample
            self._unsourced_in_train_mode.append((index, random))
        elif mode == "train" and not layers:
            obs.notes[("eval in train mode", name)] = obs.notes.get(("eval in train mode", name), 0) + 1

    def _settle_child_evaluations(self, trained: bool) -> None:
        """A child's no-grad forwards since the last batch: evaluations, unless a backward came before the next
        batch (then they were a frozen stage whose features a trained part learned from: SupContrast's linear
        stage, `with torch.no_grad(): features = model.encoder(images)`). The same for no-grad forwards in train mode
        on inputs no loader gave: a preview sampled from noise is judged, a GAN's fakes then trained on are not. A
        whole model's forwards with every parameter frozen and gradients on are a frozen stage too, unless its
        parameters require gradients again when the backward comes (crnn.pytorch freezes them to evaluate)."""
        pending, self._child_evaluations = self._child_evaluations, []
        for evaluation, frozen in pending:      # may add to the unsourced forwards judged just below
            # a model frozen for its forwards whose parameters train again by this backward was frozen to evaluate
            if not trained or frozen is not None and any(p.requires_grad for p in frozen.parameters()):
                self._evaluation(*evaluation)
        if not trained:
            for index, layers in self._unsourced_in_train_mode:
                checks.eval_in_train_mode(self.obs, index, layers, "without gradients")
        self._unsourced_in_train_mode = []

    def _forward(self, index: int, module: nn.Module, args: tuple, kwargs: dict, output: object,
                 layers: list | None = None) -> None:
        obs = self.obs
        obs.forwards += 1
        child = layers is not None
        layers = self.layers[index] if layers is None else layers
        relevant = bool(layers)
        mode = forward_mode(module.training, any(m.training for m in layers) if relevant else module.training)
        x = first_input(args, kwargs)
        source, batch = self._batch_of(x)
        outs = outputs(output)
        live = [o for o in outs if o.requires_grad] if torch.is_grad_enabled() else []
        self._reading = (obs.forwards, obs.forwards, 1, size := _size(x), size)
        self._forward_batches.append((size, id(batch[2]) if batch and batch[0] == "batch" else None))
        self._reading_source = source
        if self._last_batch is None:
            self._recent_outputs = ([_pointer(o) for o in outs] + self._recent_outputs)[:8]
        if not live:
            evaluation = (obs.forwards, source, mode, layers, type(module).__name__)
            frozen = torch.is_grad_enabled() and outs and not any(p.requires_grad for p in module.parameters())
            if child or frozen:
                # a frozen model with gradients on: a fixed encoder whose features a trained part learns from, or
                # the old idiom of evaluating by `requires_grad = False` on every parameter (crnn.pytorch's val),
                # told apart when the next batch or backward comes (or at the report): see _settle_child_evaluations
                self._child_evaluations.append((evaluation, module if frozen else None))
            else:
                self._evaluation(*evaluation)
            return
        record = Forward(obs.forwards, index, mode if relevant else "plain " + mode, source, batch, size)
        record.handles = [o.register_hook(record.hit) for o in live]
        if live[0].grad_fn is not None:
            self.graphs.watch(obs.forwards, live[0], self._round, record)
            self.graphs.check(self._round)
        self._open[index].append(record)

    def _resolve(self, final: bool = False) -> list[Forward]:
        """Decide open forwards: reached ones trained; unreached older than a reached one (or all, at the end)
        were evaluations that built a graph. Returns the forwards newly found trained."""
        trained = []
        for index, records in enumerate(self._open):
            if not records:
                continue
            last = max((r.index for r in records if r.reached), default=None)
            still = []
            for record in records:
                if record.reached:
                    self.obs.training_forwards += 1
                    trained.append(record)
                    if record.source is not None:
                        self.sources[record.source].trained = True
                        iterator = record.batch[2]() if record.batch[0] == "batch" else None
                        if iterator is not None:
                            self._training_iterators.add(iterator)
                    if record.training == "eval":
                        checks.trained_in_eval_mode(self.obs, record.index, self.layers[index])
                    elif record.training == "plain eval":
                        key = ("train in eval mode", type(self.models[index]).__name__)
                        self.obs.notes[key] = self.obs.notes.get(key, 0) + 1
                elif final or (last is not None and record.index < last):
                    self.obs.evaluation_forwards += 1
                    self._evaluated(record.index)
                    checks.evaluation_with_graph(self.obs, record.index)
                    if record.source is not None:
                        self.sources[record.source].evaluated = True
                    if record.training == "train":
                        self.obs.graph_evals_in_train_mode.append((record.index, record.source, index))
                else:
                    still.append(record)
                    continue
                for handle in record.handles:
                    handle.remove()
            self._open[index] = still
        return trained

    # --- backward ------------------------------------------------------------------------------------

    def _backward(self, original, tensors, *args, **kwargs):
        root = tensors if isinstance(tensors, torch.Tensor) else next(iter(tensors), None) \
            if isinstance(tensors, (tuple, list)) else None
        if self.failure is not None or not isinstance(root, torch.Tensor) or not root.requires_grad:
            return original(tensors, *args, **kwargs)
        before = self._guarded(self._before_backward, root)
        result = original(tensors, *args, **kwargs)
        if before is not None:
            self._guarded(self._after_backward, before)
        return result

    def _before_backward(self, root: torch.Tensor) -> tuple[int, float]:
        self._settle_child_evaluations(trained=True)
        obs = self.obs
        obs.backward_passes += 1
        index = obs.backward_passes
        if not self.tracks:
            params = [p for m in self.models for p in m.parameters() if p.requires_grad]
            self._track(None, params)
        for track in self.tracks:
            if track.optimizer is None and track.moved():
                self._hand_update(track)
            if track.stepped is not None:
                checks.edited_after_step(obs, track, "overwritten by the next backward")
            if track.pending:
                track.settle("backward", index)
                track.before = track.current        # what settle just looked at: .grad before this pass
            else:
                track.before = track.state()
        stepping = self._stepping
        if stepping is not None and stepping.pending:
            checks.closure_without_zero_grad(obs, stepping, index)
        if index <= SOFTMAX_CHECKS and "softmax_before_cross_entropy" not in obs.events:
            checks.softmax_in_loss(obs, root, index)
        return index, checks.loss_factor(root, self._scales)

    def _after_backward(self, before: tuple) -> None:
        index, factor = before
        trained = self._resolve()
        batches = frozenset(r.batch for r in trained if r.batch is not None)
        examples = max((r.size for r in trained), default=None)
        done = Pass(index, factor, batches, applied=self._stepping is not None, examples=examples)
        for track in self.tracks:
            if not track.matches(track.before):          # this pass wrote into the track's .grad
                track.pending.append(done)
                track.remember(empty=False)
                if track.optimizer is None:
                    track.mark()

    # --- the verdict ---------------------------------------------------------------------------------

    def _finish(self) -> None:
        self._resolve(final=True)
        # an epoch whose every batch was drawn ended, though the loop never asked for one more (sentence-transformers
        # draws steps_per_epoch = len(loader) batches from an iterator it keeps)
        self.obs.epochs += len(self._complete_unended)
        for track in self.tracks:
            if track.optimizer is None and track.moved():
                self._hand_update(track)
            if track.stepped is not None:
                checks.edited_after_step(self.obs, track, "left unused when the loop ended")
            pending = track.unapplied()
            track.final_unapplied = sum(not self._in_unfinished_epoch(p) for p in pending)
            track.stopped_inside_epoch = len(pending) - track.final_unapplied
            track.settle("exit", self.obs.backward_passes)
        self._tick()

    def _in_unfinished_epoch(self, done: Pass) -> bool:
        """Did this pass train only on DataLoader batches drawn after the last training epoch ended? Then the loop
        stopped inside an epoch (a step budget, a cycling iterator): no epoch's last micro-batches were lost."""
        return bool(done.batches) and all(isinstance(b, tuple) and b[0] == "batch" and b[1] > self._epoch_serial
                                          for b in done.batches)

    def report(self) -> Report:
        """The findings so far (complete once the with-block has ended), with what was counted."""
        obs = self.obs
        self._guarded(self._settle_child_evaluations, False)
        self._split_keys = {}
        findings = verdict.findings(self)
        notes = verdict.notes(self)
        updates = sum(t.updates for t in self.tracks)
        steps = sum(entry[1] for entry in self.schedulers.values())
        return Report(findings, obs.training_forwards, obs.evaluation_forwards, obs.backward_passes, updates,
                      steps if self.schedulers or self.given_schedulers else None, tuple(notes))
