"""The loop doctor's verdict (chapters 5, 9): the checks that need the whole run, and what it could not see.

``findings`` turns what was counted into named findings: accumulation windows and the end-of-epoch flush,
gradients cleared before their update, the scheduler's cadence, leakage between the splits, means of batch
means, graphs kept alive. ``notes`` says what the doctor saw and does not count as a bug, and what it could
not observe. Both run when the report is asked for.
"""
from __future__ import annotations

from collections import Counter
from typing import Protocol

import numpy as np
import torch

from course_utils.doctor import checks, keys
from course_utils.doctor.cadence import schedule_cadence
from course_utils.doctor.checks import Observations, _passes, _who
from course_utils.doctor.forwards import KEEP_ROUNDS, Graphs, describe
from course_utils.doctor.gradients import Track, Window
from course_utils.doctor.report import Finding, finding
from course_utils.doctor.sources import Source

STREAM_LEAK = 0.05   # share of a validation token stream's windows found in training that counts as leakage


class Doctor(Protocol):
    """What the verdict reads of a ``core.LoopDoctor`` (named here so this module imports nothing above it)."""

    train_data: object
    val_data: object
    obs: Observations
    tracks: list[Track]
    schedulers: dict[int, list]       # id -> [scheduler, steps, track]
    sources: dict[int, Source]
    graphs: Graphs
    layers: list
    failure: str | None
    _last_batch: tuple | None
    _split_keys: dict


# --- whole-run checks ----------------------------------------------------------------------------------

def _typical(windows: list[Window]) -> int:
    sizes = Counter(w.batches for w in windows)
    return max(sizes, key=lambda n: (sizes[n], -n)) if sizes else 1


def _zero_grad_after_backward(track: Track, many: bool) -> list[Finding]:
    marked = {id(p) for _, passes in track.epoch_marks for p in passes}
    at_step = [w for w in track.wipes if w[0] == "step"]
    elsewhere = [w for w in track.wipes if w[0] != "step" and any(id(p) not in marked for p in w[2])]
    if at_step:
        _, index, lost = at_step[0]
        return [finding("zero_grad_after_backward", f"update {index}{_who(track, many)}: {_passes(len(lost))} "
                        "had filled .grad since the last update, but at step() every .grad was empty: it was "
                        "cleared between backward and step", len(at_step) + len(elsewhere))]
    if len(elsewhere) >= 2:
        _, index, lost = elsewhere[0]
        return [finding("zero_grad_after_backward", f"backward pass {index}{_who(track, many)}: .grad was "
                        f"cleared before any update used the previous {_passes(len(lost))}; this happened "
                        f"{len(elsewhere)} times in {track.updates} updates", len(elsewhere))]
    return []


def _flush(track: Track, many: bool) -> list[str]:
    """Each training epoch that ended in the middle of an accumulation window, in order: what became of the
    micro-batches left over (cleared, carried into an oversized window, or never applied)."""
    typical = _typical(track.windows)
    lost = {id(p) for _, _, passes in track.wipes for p in passes}
    who, evidence = _who(track, many), []
    for epoch, passes in track.epoch_marks:
        if typical < 2 and len(passes) < 2:
            continue      # no accumulation: a pass pending at an epoch's end is another bug's doing
        ids = {id(p) for p in passes}
        window = next((w for w in track.windows if any(id(p) in ids for p in w.members)), None)
        if ids & lost:
            evidence.append(f"epoch {epoch} ended with {_passes(len(passes))} that no update had applied{who}; "
                            "the next zero_grad cleared them")
        elif window is not None and window.batches > typical:
            evidence.append(f"epoch {epoch} ended in the middle of an accumulation window: its last "
                            f"{_passes(len(passes))} were carried into update {window.update}{who}, which used "
                            f"{window.batches} micro-batches where the other updates use {typical}")
        elif window is None:
            evidence.append(f"the loop ended with {_passes(len(passes))} of epoch {epoch} that no update ever "
                            f"applied{who}")
    if typical >= 2 and not track.epoch_marks and track.final_unapplied:
        evidence.append(f"the loop ended with {_passes(track.final_unapplied)} that no update ever applied{who}")
    return evidence


def _unscaled(track: Track, many: bool) -> list[Finding]:
    """The course's accumulation rule (chapters 0, 5, 7): each micro-batch's mean loss is weighted by its share of
    the window's examples, n_i / n_window, so every update applies the same total weight. Two ways to break it:
    summing K micro-batch means undivided, and a short window (flushed at an epoch's end) whose losses are still
    divided by the full window's K."""
    bad = [(w, [p.factor for p in w.members]) for w in _clean_windows(track)
           if w.batches >= 2 and all(p.factor > 0.99 for p in w.members) and not _summed_by_design(w)]
    if bad:
        w, factors = bad[0]
        return [finding("unscaled_accumulation", f"update {w.update}{_who(track, many)}: {w.batches} micro-batches "
                        f"were summed into .grad on losses that were not divided (each multiplied by "
                        f"{min(factors):.3g}): the update used {sum(factors):.3g} times the window's mean gradient",
                        len(bad) + len(_short_windows(track)))]
    short = _short_windows(track)
    if not short:
        return []
    w, weight, full, examples = short[0]
    sizes, first = "+".join(str(p.examples) for p in w.members), w.members[0]
    return [finding("unscaled_accumulation", f"update {w.update}{_who(track, many)}: a short window of "
                    f"{_micro(w.batches)} ({sizes} examples) had its losses multiplied by "
                    f"{', '.join(f'{p.factor:.3g}' for p in w.members)}, as in a full window of {examples} examples: "
                    f"the update used {weight / full:.3g} times the weight of a full one; each micro-batch's mean "
                    f"loss should carry its share of its window's examples (here {first.examples}/"
                    f"{sum(p.examples for p in w.members)} for the first)", len(short))]


def _summed_by_design(window: Window) -> bool:
    """Every micro-batch's mean loss multiplied by its own example count (yolov5's `loss * batch_size`): the window
    sums per-example losses, each example weighing 1 in every window, a convention with its learning rate tuned to
    it, not an undivided accumulation."""
    return all(p.examples is not None and p.examples > 1 and abs(p.factor - p.examples) <= 0.01 * p.examples
               for p in window.members)


def _clean_windows(track: Track) -> list[Window]:
    """Windows whose update found .grad clean of passes applied before: an update on top of old gradients (no
    zero_grad) has no accumulation window to judge, only the missing zero_grad (SAC with its critic's zero_grad
    dropped: the policy loss's backward then adds a second pass to every critic update)."""
    stale = set(track.stale)
    return [w for w in track.windows if w.update not in stale]


def _micro(n: int) -> str:
    return f"{n} micro-batch{'' if n == 1 else 'es'}"


WEIGHT_TOLERANCE = 0.02     # loss factors are exact constants: a window's total weight off by more is a choice


def _short_windows(track: Track) -> list[tuple[Window, float, float, int]]:
    """Windows holding fewer examples than the loop's full windows whose losses carry less total weight (sum of
    the loss factors) than a full window's, when every full window carries the same: (window, its total weight,
    a full window's, a full window's examples)."""
    typical = _typical(track.windows)
    if typical < 2:
        return []                      # no accumulation
    known = [w for w in _clean_windows(track) if all(p.examples for p in w.members)]
    full = [w for w in known if w.batches == typical]
    if not full or all(_summed_by_design(w) for w in known):
        return []                      # no full window, or per-example sums: each window weighs its examples
    weights = sorted(sum(p.factor for p in w.members) for w in full)
    middle = weights[len(weights) // 2]
    if middle <= 0 or weights[-1] - weights[0] > WEIGHT_TOLERANCE * middle:
        return []                      # full windows weighted differently from one another: no rule to judge by
    examples = max(sum(p.examples for p in w.members) for w in full)
    found = []
    for w in known:
        weight = sum(p.factor for p in w.members)
        if sum(p.examples for p in w.members) < examples and weight < (1 - WEIGHT_TOLERANCE) * middle:
            found.append((w, weight, middle, examples))
    return found


def _leakage(doctor: Doctor) -> list[Finding]:
    train, val = split_keys(doctor, "train"), split_keys(doctor, "val")
    if train is None or val is None or train.kind != val.kind or not (train.identifies() and val.identifies()):
        return []
    val_unique = np.unique(val.values)
    shared = int(np.isin(val_unique, train.values).sum())
    if train.kind == "rows" and shared:
        return [finding("data_leakage", f"{shared} of the {len(val_unique)} distinct validation examples are "
                        "exact copies of training examples")]
    if train.kind == "windows" and len(val_unique) and shared / len(val_unique) >= STREAM_LEAK:
        return [finding("data_leakage", f"{shared / len(val_unique):.0%} of the validation tokens' "
                        f"{keys.TOKEN_WINDOW}-token windows also occur in the training data")]
    return []


def split_keys(doctor: Doctor, split: str) -> keys.Keys | None:
    """The keys of a split: what was given (read from storage, or as its batches flowed), else the datasets
    that fed training forwards ("train") or only evaluation forwards ("val"). Computed once per report."""
    cache = doctor._split_keys
    if split not in cache:
        cache[split] = _split_keys(doctor, split)
    return cache[split]


def _split_keys(doctor: Doctor, split: str) -> keys.Keys | None:
    given = doctor.train_data if split == "train" else doctor.val_data
    if given is not None:
        dataset = given.dataset if isinstance(given, torch.utils.data.DataLoader) else given
        source = doctor.sources.get(id(dataset))
        if keys.readable(given):
            return keys.storage_keys(given)
        return keys.merge(source.flow) if source is not None else None
    if split == "train":
        chosen = [s for s in doctor.sources.values() if s.trained]
    else:
        chosen = [s for s in doctor.sources.values() if s.evaluated and not s.trained]
    parts = [keys.storage_keys(s.dataset) if s.readable else keys.merge(s.flow) for s in chosen]
    parts = [p for p in parts if p is not None]
    return keys.merge(parts) if parts else None


def val_sources(doctor: Doctor) -> set[int]:
    """Datasets holding validation data: the one given, or those that fed only evaluation forwards."""
    if doctor.val_data is not None:
        given = doctor.val_data
        return {id(given.dataset if isinstance(given, torch.utils.data.DataLoader) else given)}
    return {sid for sid, s in doctor.sources.items() if s.evaluated and not s.trained}


def findings(doctor: Doctor) -> tuple[Finding, ...]:
    """All findings: leakage first, then what was seen as it happened, then the whole-run checks."""
    obs, tracks = doctor.obs, doctor.tracks
    many = len(tracks) > 1
    if obs.outside and "head_after_optimizer" not in obs.events:
        checks.outside_optimizers(obs, tracks)
    result = _leakage(doctor)
    events = dict(obs.events)
    validation = val_sources(doctor)
    no_loader = doctor._last_batch is None
    for index, source, model in obs.graph_evals_in_train_mode:
        if (source in validation or (source is None and no_loader)) and "eval_in_train_mode" not in events:
            events["eval_in_train_mode"] = [f"forward {index} evaluated data with gradients and with the model in "
                                            f"train mode: its {describe(doctor.layers[model])} behaved as in "
                                            "training", 1]
    if doctor.graphs.most_kept >= 2:
        index, made = doctor.graphs.first
        pinned = doctor.graphs.pinned
        held = (f"{pinned} of them were never backwarded, so their saved activations stay alive too" if pinned else
                "backward had freed their saved activations, so what grows is autograd's bookkeeping")
        events["graph_attached_logging"] = [
            f"up to {doctor.graphs.most_kept} graphs of earlier forwards were alive at once, each {KEEP_ROUNDS} or "
            f"more updates after its forward (the first from forward {index}): a tensor attached to them (a loss "
            f"kept in a list, `total += loss`) keeps each step's graph; {held}", doctor.graphs.most_kept]
    for name, (evidence, count) in events.items():
        result.append(finding(name, evidence, count))
    for track in tracks:
        result += _zero_grad_after_backward(track, many)
        flush = _flush(track, many)
        if flush:
            result.append(finding("accumulation_without_flush", flush[0], len(flush)))
        result += _unscaled(track, many)
    result += schedule_cadence(doctor)
    means = [t for t in obs.averages if _all_evaluation(obs.evaluation_runs, t[0], t[1])]
    if means:
        first, last, k, smallest, largest, over_examples = means[0]
        if over_examples:
            evidence = (f"the mean losses of evaluation forwards {first} to {last} ({k} batches of {smallest} to "
                        f"{largest} examples) were summed and divided by the number of examples: each batch's mean "
                        f"counted once, so the result is about 1/{largest} of the mean loss (divide by {k} batches "
                        "only with equal batches; weigh each by its size)")
        else:
            evidence = (f"the values read from evaluation forwards {first} to {last} were summed and divided by {k}, "
                        f"the number of batches, though the batches held between {smallest} and {largest} examples: "
                        "a small batch counted as much as a full one")
        result.append(finding("mean_of_batch_means", evidence, len(means)))
    return tuple(_merge_same(result))


def _all_evaluation(runs: list, first: int, last: int) -> bool:
    """Were forwards first..last all evaluations (one run of consecutive evaluation forwards)?"""
    return any(start <= first and last <= end for start, end in runs)


def _merge_same(found: list[Finding]) -> list[Finding]:
    """One finding per name (several optimizers may report the same bug): the first evidence, counts added."""
    merged: dict[str, Finding] = {}
    for f in found:
        if f.name in merged:
            first = merged[f.name]
            merged[f.name] = Finding(f.name, first.evidence, first.fix, first.count + f.count)
        else:
            merged[f.name] = f
    return list(merged.values())


def notes(doctor: Doctor) -> list[str]:
    """What the doctor saw and does not count as a bug, and what it could not observe."""
    obs, found = doctor.obs, []
    if doctor.failure:
        found.append(f"the doctor stopped observing after an error of its own ({doctor.failure}); your loop ran "
                     "on unchanged, but the checks after that point did not run")
    if obs.backward_passes and not obs.forwards:
        found.append("no forward pass of the model was seen: give the doctor the model whose forward runs (with "
                     "torch.compile, the compiled module you call), or the train/eval and no_grad checks cannot "
                     "run")
    if obs.backward_passes and not any(t.optimizer is not None for t in doctor.tracks):
        moved = sum(t.updates for t in doctor.tracks)
        found.append(f"no optimizer.step() was seen; the parameters changed by hand {moved} times between backward "
                     "passes, and the zero_grad and accumulation checks ran on those updates. The clipping-order "
                     "and scheduler checks need an optimizer and did not run" if moved else
                     "no optimizer.step() and no change of the parameters were seen: the update checks did not run")
    for model in dict.fromkeys(name for _, name in obs.notes):
        evals, trains = obs.notes.get(("eval in train mode", model), 0), obs.notes.get(("train in eval mode", model), 0)
        what = " and ".join(x for x in (f"{evals} evaluation forwards ran in train mode" if evals else "",
                                        f"{trains} training forwards ran in eval mode" if trains else "") if x)
        found.append(f"{what}: no effect on {model}, which has no dropout, BatchNorm or other layer that behaves "
                     "differently in eval mode; it will bite once you add one")
    inside = sum(t.stopped_inside_epoch for t in doctor.tracks)
    if inside:
        found.append(f"the loop stopped inside an epoch with {_passes(inside)} that no update applied (compute spent "
                     "for nothing); no epoch's last micro-batches were lost, so it is not a missing end-of-epoch "
                     "flush")
    skipped = sum(t.skipped for t in doctor.tracks)
    if skipped:
        found.append(f"GradScaler skipped {skipped} updates with inf/NaN gradients, as it should; their gradients "
                     "were discarded on purpose and are not counted as lost")
    if doctor.train_data is None and doctor.val_data is None and not doctor.sources:
        found.append("no data was seen through a DataLoader and none was given: the leakage check did not run "
                     "(pass train_data= and val_data=)")
    elif (doctor.val_data is not None or val_sources(doctor)) and (
            split_keys(doctor, "train") is None or split_keys(doctor, "val") is None):
        found.append("the training or validation examples could not be read (no DataLoader batch or storage to "
                     "key): the leakage check did not run")
    if obs.training_forwards and not obs.epochs and doctor._last_batch is not None:
        found.append("no training epoch ended (the loop stopped early or draws batches by hand): the end-of-epoch "
                     "flush and the schedule-cadence checks that count epochs did not run (a MultiStepLR's or StepLR's "
                     "own numbers are still read)")
    return found
