"""Weight averaging with ``torch.optim.swa_utils`` (chapter 7): EMA and SWA models, SWALR, and update_bn.

``averaging_rules`` checks what each averaging function computes on a one-weight model; ``swalr_curve`` reads the
LR SWALR hands the optimizer; ``ema_runs`` trains a small BatchNorm MLP with a noisy, high learning rate on the
spiral and compares, on fresh validation points, the last weights with their EMA, before and after
``update_bn``. Results are booleans and counts over seeds (chapter 7).
"""
from __future__ import annotations

import torch
from torch import nn
from torch.optim.swa_utils import (SWALR, AveragedModel, get_ema_avg_fn, get_ema_multi_avg_fn, get_swa_avg_fn,
                                   get_swa_multi_avg_fn, update_bn)
from torch.utils.data import DataLoader

from course_utils.engine.data import spiral_splits
from course_utils.engine.models import MLP
from course_utils.infra.parallel import map_runs


def averaging_rules(decay: float = 0.5) -> dict[str, bool | int]:
    """What AveragedModel keeps after the weights 1, 2, 3, 4: the plain mean (SWA) or the EMA (chapter 7)."""
    model = nn.Linear(1, 1, bias=False)
    swa_default = AveragedModel(model, device="cpu")
    swa_fn = AveragedModel(model, avg_fn=get_swa_avg_fn())
    swa_multi = AveragedModel(model, multi_avg_fn=get_swa_multi_avg_fn())
    ema = AveragedModel(model, avg_fn=get_ema_avg_fn(decay))
    ema_multi = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(decay))
    averaged = (swa_default, swa_fn, swa_multi, ema, ema_multi)
    for value in (1.0, 2.0, 3.0, 4.0):
        with torch.no_grad():
            model.weight.fill_(value)
        for a in averaged:
            a.update_parameters(model)
    expected_ema = 1.0
    for value in (2.0, 3.0, 4.0):          # the first update copies, each later one moves by (1 - decay)
        expected_ema = decay * expected_ema + (1 - decay) * value
    w = [a.module.weight.item() for a in averaged]
    return {"updates counted (n_averaged)": int(swa_default.n_averaged),
            "default = get_swa_avg_fn = get_swa_multi_avg_fn = mean 2.5": w[0] == w[1] == w[2] == 2.5,
            f"get_ema_avg_fn({decay}) = get_ema_multi_avg_fn({decay}) = {expected_ema}":
                w[3] == w[4] == expected_ema,
            "the averaged copy is not the live model": model.weight.item() == 4.0}


def swalr_curve(strategy: str = "cos", epochs: int = 6) -> list[float]:
    """The LR of each epoch under SWALR from lr 0.1 to swa_lr 0.01 over 3 epochs (chapter 7)."""
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    scheduler = SWALR(optimizer, swa_lr=0.01, anneal_epochs=3, anneal_strategy=strategy, last_epoch=-1)
    lrs = []
    for _ in range(epochs):
        optimizer.step()
        scheduler.step()
        lrs.append(optimizer.param_groups[0]["lr"])
    return lrs


def _loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    model.eval()
    with torch.no_grad():
        return float(nn.functional.cross_entropy(model(x), y))


def _running_mean(model: nn.Module) -> torch.Tensor:
    return next(m for m in model.modules() if isinstance(m, nn.BatchNorm1d)).running_mean


def _noisy_bn_model(seed: int, n_val: int = 400) -> tuple[nn.Module, object]:
    """The spiral (160 noisy training points) and a fresh BatchNorm MLP, seeded (chapter 7's averaging runs)."""
    splits = spiral_splits(160, n_val, seed=seed, noise=0.3)
    torch.manual_seed(seed)
    return MLP(hidden=32, batchnorm=True), splits


def _sgd_epochs(model: nn.Module, splits, seed: int, epochs: int, lr: float = 0.3, after_step=lambda: None,
                after_epoch=lambda epoch: None) -> None:
    """`epochs` epochs of SGD with momentum 0.9 in batches of 16, a callback after every step and every epoch."""
    loader = DataLoader(splits.train, batch_size=16, shuffle=True, generator=torch.Generator().manual_seed(seed))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    for epoch in range(epochs):
        model.train()
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            after_step()
        after_epoch(epoch)


def ema_run(seed: int, epochs: int = 12, lr: float = 0.3, decay: float = 0.9) -> dict[str, float | bool]:
    """The last weights against their EMA on fresh validation points, and what the EMA's BatchNorm holds (chapter 7)."""
    model, splits = _noisy_bn_model(seed)
    ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(decay), use_buffers=False)
    ema_buffers = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(decay), use_buffers=True)
    _sgd_epochs(model, splits, seed, epochs, lr,
                after_step=lambda: (ema.update_parameters(model), ema_buffers.update_parameters(model)))
    vx, vy = splits.val.tensors
    synced = bool(torch.equal(_running_mean(ema), _running_mean(model)))   # use_buffers=False: the live model's
    update_bn(DataLoader(splits.train, batch_size=64), ema, device=torch.device("cpu"))
    return {"last": _loss(model, vx, vy), "ema": _loss(ema, vx, vy), "BN mean = the live model's": synced,
            "update_bn recomputed it": bool((_running_mean(ema) - _running_mean(model)).abs().max() > 1e-3),
            "use_buffers=True averages it": bool(_running_mean(ema_buffers).abs().max() > 1e-3)}


def ema_runs(seeds=range(5)) -> dict[str, int]:
    """Over seeds: how often the EMA beats the last weights, and what the EMA's BatchNorm held (chapter 7)."""
    runs = map_runs(ema_run, [(s,) for s in seeds])
    out = {"seeds": len(runs),
           "EMA (+ update_bn) below the last weights by > 0.05": sum(r["ema"] < r["last"] - 0.05 for r in runs)}
    for k in ("BN mean = the live model's", "update_bn recomputed it", "use_buffers=True averages it"):
        out[k] = sum(r[k] for r in runs)
    return out


def _averaged_state(states: list[dict]) -> dict:
    """Checkpoints averaged by hand, as a checkpoint-averaging script does: every floating tensor (weights and
    BatchNorm statistics) the mean over the checkpoints, a counter the last one's."""
    return {k: torch.stack([s[k] for s in states]).mean(0) if states[-1][k].is_floating_point() else states[-1][k]
            for k in states[-1]}


def _val(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    model.eval()
    with torch.no_grad():
        out = model(x)
    return float(nn.functional.cross_entropy(out, y)), float((out.argmax(1) == y).float().mean())


def averaged_bn_run(seed: int, epochs: int = 12, kept: int = 6, lr: float = 0.3) -> dict[str, object]:
    """A BatchNorm MLP trained with a noisy lr; its checkpoints of the last `kept` epochs averaged by hand, evaluated
    (validation loss, accuracy) with their averaged BatchNorm statistics, with the last checkpoint's statistics (what
    an average of the parameters alone keeps) and with statistics update_bn recomputed for the averaged weights;
    then a mid-training evaluation of averaged weights swapped into the training model, against a separate copy
    (chapter 7)."""
    import copy
    model, splits = _noisy_bn_model(seed)
    states = []
    _sgd_epochs(model, splits, seed, epochs, lr, after_epoch=lambda epoch: states.append(
        copy.deepcopy(model.state_dict())) if epoch >= epochs - kept else None)
    vx, vy = splits.val.tensors
    mean_state = _averaged_state(states)
    last_stats = {k: states[-1][k] if k in dict(model.named_buffers()) else v for k, v in mean_state.items()}
    with_last_stats = _restored(last_stats, vx, vy)
    averaged = MLP(hidden=32, batchnorm=True)
    averaged.load_state_dict(mean_state)
    with_averaged_stats = _val(averaged, vx, vy)
    update_bn(DataLoader(splits.train, batch_size=64), averaged)
    recomputed = _val(averaged, vx, vy)
    train_buffers = copy.deepcopy(dict(model.named_buffers()))
    copy_model = copy.deepcopy(model)                 # a separate copy (what AveragedModel holds)
    copy_model.load_state_dict(_averaged_state(states))
    update_bn(DataLoader(splits.train, batch_size=64), copy_model)
    copy_left_alone = all(torch.equal(b, train_buffers[k]) for k, b in model.named_buffers())
    weights = {k: p.detach().clone() for k, p in model.named_parameters()}
    model.load_state_dict(_averaged_state(states))    # the swap: averaged weights into the training model
    update_bn(DataLoader(splits.train, batch_size=64), model)
    with torch.no_grad():
        for k, p in model.named_parameters():
            p.copy_(weights[k])                       # the weights swapped back, the buffers forgotten
    swapped_changed = not all(torch.equal(b, train_buffers[k]) for k, b in model.named_buffers())
    return {"averaged stats": with_averaged_stats, "recomputed": recomputed, "last stats": with_last_stats,
            "last": _restored(states[-1], vx, vy),
            "a separate copy left the training buffers alone": copy_left_alone,
            "the swap changed the training model's buffers": swapped_changed}


def _restored(state: dict, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    model = MLP(hidden=32, batchnorm=True)
    model.load_state_dict(state)
    return _val(model, x, y)


def averaged_bn_counts(seeds=range(5)) -> dict[str, int]:
    """`averaged_bn_run` over seeds, as counts (chapter 7)."""
    runs = map_runs(averaged_bn_run, [(s,) for s in seeds])
    loss = {k: [r[k][0] for r in runs] for k in ("averaged stats", "recomputed", "last stats", "last")}
    return {"seeds": len(runs),
            "averaged weights (update_bn) below the last weights' loss by > 0.1":
                sum(a < b - 0.1 for a, b in zip(loss["recomputed"], loss["last"])),
            "update_bn's statistics at or below the hand-averaged ones' loss":
                sum(a <= b for a, b in zip(loss["recomputed"], loss["averaged stats"])),
            "hand-averaged statistics within 0.1 of update_bn's loss":
                sum(abs(a - b) < 0.1 for a, b in zip(loss["recomputed"], loss["averaged stats"])),
            "the last checkpoint's statistics above update_bn's loss":
                sum(a > b for a, b in zip(loss["last stats"], loss["recomputed"])),
            "update_bn on a separate copy left the training model's buffers alone":
                sum(r["a separate copy left the training buffers alone"] for r in runs),
            "update_bn on the training model (weights swapped in, then back) changed its buffers":
                sum(r["the swap changed the training model's buffers"] for r in runs)}


def _trained_weights(seed: int, with_ema: bool, epochs: int = 2) -> torch.Tensor:
    model, splits = _noisy_bn_model(seed, n_val=10)
    ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.9)) if with_ema else None
    _sgd_epochs(model, splits, seed, epochs, after_step=lambda: ema.update_parameters(model) if ema else None)
    return torch.cat([t.detach().flatten().float() for t in model.state_dict().values()])


def ema_leaves_the_run_alone(seeds=range(5)) -> int:
    """On how many seeds the trained model's weights and buffers after 2 epochs are bitwise the same with and
    without an EMA updated after every step: the EMA reads the run, it never feeds back into it (chapter 7)."""
    return sum(torch.equal(_trained_weights(s, True), _trained_weights(s, False)) for s in seeds)


def _accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    model.eval()
    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean())


def ema_follow_run(seed: int, decay: float, steps: int = 300, warmup: bool = False) -> dict[str, float]:
    """A run of `steps` Adam updates from a randomly initialised MLP on the spiral, with an AveragedModel EMA
    updated after every step: the live model's and the EMA's validation accuracy at the end. `warmup`: the decay
    ramps up as min(decay, (1 + t) / (10 + t)), the warmup diffusers' and timm's EMA helpers offer (chapter 7)."""
    splits = spiral_splits(300, 300, seed=seed)
    torch.manual_seed(seed)
    model = MLP(hidden=32)
    updates = [0]

    def ema_fn(ema_param: torch.Tensor, param: torch.Tensor, num_averaged) -> torch.Tensor:
        d = min(decay, (1 + updates[0]) / (10 + updates[0])) if warmup else decay
        return d * ema_param + (1 - d) * param

    ema = AveragedModel(model, avg_fn=ema_fn)
    _train(model, splits, seed, steps, lr=0.01, after_step=lambda: (ema.update_parameters(model),
                                                                    updates.__setitem__(0, updates[0] + 1)))
    vx, vy = splits.val.tensors
    return {"live": _accuracy(model, vx, vy), "ema": _accuracy(ema.module, vx, vy)}


def _train(model: nn.Module, splits, seed: int, steps: int, lr: float, after_step=lambda: None) -> None:
    x, y = splits.train.tensors
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed)
    model.train()
    for _ in range(steps):
        idx = torch.randint(0, len(x), (32,), generator=g)
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
        optimizer.step()
        after_step()


def ema_built_before_load_run(seed: int, decay: float = 0.999, steps: int = 100) -> dict[str, float]:
    """A fine-tune of trained weights, its EMA copy made BEFORE those weights were loaded into the model (while it
    still held its random initialisation): an EMA written by hand (copied at construction, then d * ema + (1 - d)
    * live every step, as timm's ModelEma and many scripts do) against torch's AveragedModel, whose first update
    copies the live weights (chapter 7)."""
    import copy
    splits = spiral_splits(300, 300, seed=seed)
    torch.manual_seed(seed)
    trained = MLP(hidden=32)
    _train(trained, splits, seed, 300, lr=0.01)                       # the checkpoint the fine-tune starts from
    model = MLP(hidden=32)                                            # random weights, for now
    by_hand = copy.deepcopy(model)
    averaged = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(decay))
    model.load_state_dict(trained.state_dict())                       # loaded after the EMAs were made

    def update() -> None:
        with torch.no_grad():
            for e, p in zip(by_hand.parameters(), model.parameters()):
                e.mul_(decay).add_(p, alpha=1 - decay)
        averaged.update_parameters(model)
    _train(model, splits, seed + 1, steps, lr=0.001, after_step=update)
    vx, vy = splits.val.tensors
    return {"live": _accuracy(model, vx, vy), "by hand": _accuracy(by_hand, vx, vy),
            "AveragedModel": _accuracy(averaged.module, vx, vy)}


def ema_follow_lines(seeds=range(5), steps: int = 300) -> list[str]:
    """An EMA that seems never to learn, its two usual causes measured over seeds (chapter 7)."""
    n = len(seeds)
    plain = map_runs(ema_follow_run, [(s, 0.999, steps) for s in seeds])
    warm = map_runs(ema_follow_run, [(s, 0.999, steps, True) for s in seeds])
    early = map_runs(ema_built_before_load_run, [(s,) for s in seeds])
    shares = ", ".join(f"{d}: {d ** steps:.2f}" for d in (0.9, 0.99, 0.999))
    return [f"share of the starting weights left in an EMA after {steps} updates, by decay: {shares}",
            f"decay 0.999, {steps} updates from random weights: the live model's validation accuracy at least 0.95 on "
            f"{sum(r['live'] >= 0.95 for r in plain)} of {n} seeds; the EMA's at least 0.2 below it on "
            f"{sum(r['ema'] <= r['live'] - 0.2 for r in plain)} of {n}",
            f"  the same with the decay warmed up, min(0.999, (1 + t) / (10 + t)): the EMA within 0.05 of the live "
            f"model on {sum(abs(r['ema'] - r['live']) <= 0.05 for r in warm)} of {n}",
            f"an EMA made before the checkpoint was loaded, then 100 fine-tuning updates (decay 0.999): written by hand "
            f"(copied at construction), accuracy below 0.5 on {sum(r['by hand'] < 0.5 for r in early)} of {n}; "
            f"AveragedModel (its first update copies the live weights), within 0.05 of the live model on "
            f"{sum(abs(r['AveragedModel'] - r['live']) <= 0.05 for r in early)} of {n}"]
