# Mirrors: huggingface/pytorch-image-models, train.py (train_one_epoch and validate), snapshot at commit aa4b5850
# (2026-08-08); train.py last changed in a6da4da1 (2026-07-16).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: a training loader with drop_last and random augmentation; gradient accumulation in which the epoch's last,
# shorter window divides by its own length (last_accum_steps = len(loader) % accum_steps); zero_grad before the
# epoch and after each update; an autocast forward, loss /= accum_steps when above 1, a native-scaler object that
# runs scaler.scale(loss).backward() and, when an update is due, unscales, clips, steps and updates the scaler;
# a scheduler object of timm's own kind (not a torch LRScheduler) stepped per update (step_update) and per epoch;
# meters weighted by batch size; validation in eval mode under inference_mode with meters weighted by batch size.
# Shrunk: 8x8 stand-in CIFAR-10 (224 train in batches of 32, 200 test), a small BatchNorm/dropout CNN, 3 epochs,
# windows of 3 (7 batches: 3, 3, 1), bfloat16 autocast and GradScaler("cpu") instead of CUDA's; no EMA, no mixup.
# Added: `with watch(...)` around the epochs.
import math
from types import SimpleNamespace

import torch
from torch import nn
from torch.utils.data import DataLoader

from tests.doctor_published.standins import datasets, transforms


class Meter:
    """Running value, sum and count; avg is the count-weighted mean."""

    def __init__(self):
        self.val = self.sum = self.count = 0

    def update(self, val, n=1):
        self.val, self.sum, self.count = val, self.sum + val * n, self.count + n

    @property
    def avg(self):
        return self.sum / max(self.count, 1)


class NativeScaler:
    def __init__(self):
        self._scaler = torch.amp.GradScaler("cpu")

    def __call__(self, loss, optimizer, clip_grad=None, parameters=None, need_update=True):
        self._scaler.scale(loss).backward()
        if need_update:
            if clip_grad is not None:
                self._scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(parameters, clip_grad)
            self._scaler.step(optimizer)
            self._scaler.update()


class CosineSchedule:
    """timm-style: sets each group's lr itself; step_update(updates) per update, step(epoch) per epoch."""

    def __init__(self, optimizer, t_initial, warmup_t=2, lr_min=1e-4):
        self.optimizer, self.t_initial, self.warmup_t, self.lr_min = optimizer, t_initial, warmup_t, lr_min
        self.base = [g["lr"] for g in optimizer.param_groups]

    def step_update(self, num_updates):
        for g, base in zip(self.optimizer.param_groups, self.base):
            t = num_updates / self.t_initial
            g["lr"] = base * min(1.0, (num_updates + 1) / self.warmup_t) * (
                self.lr_min / base + (1 - self.lr_min / base) * 0.5 * (1 + math.cos(math.pi * min(t, 1.0))))

    def step(self, epoch):
        pass


def small_net():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(2),
                         nn.Flatten(), nn.Dropout(0.2), nn.Linear(32, 10))


def train_one_epoch(epoch, model, loader, optimizer, loss_fn, args, lr_scheduler, loss_scaler):
    model.train()
    accum_steps = args.grad_accum_steps
    last_accum_steps = len(loader) % accum_steps
    updates_per_epoch = (len(loader) + accum_steps - 1) // accum_steps
    num_updates = epoch * updates_per_epoch
    last_batch_idx = len(loader) - 1
    last_batch_idx_to_accum = len(loader) - last_accum_steps
    losses_m = Meter()
    optimizer.zero_grad()
    for batch_idx, (input, target) in enumerate(loader):
        last_batch = batch_idx == last_batch_idx
        need_update = last_batch or (batch_idx + 1) % accum_steps == 0
        if batch_idx >= last_batch_idx_to_accum:
            accum_steps = last_accum_steps
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = loss_fn(model(input), target)
        if accum_steps > 1:
            loss /= accum_steps
        loss_scaler(loss, optimizer, clip_grad=args.clip_grad, parameters=model.parameters(), need_update=need_update)
        losses_m.update(loss.item() * accum_steps, input.size(0))
        if not need_update:
            continue
        num_updates += 1
        optimizer.zero_grad()
        lr_scheduler.step_update(num_updates=num_updates)
    return losses_m.avg


def validate(model, loader, loss_fn):
    losses_m, top1_m = Meter(), Meter()
    model.eval()
    with torch.inference_mode():
        for input, target in loader:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                output = model(input)
                loss = loss_fn(output, target)
            acc1 = (output.argmax(1) == target).float().mean() * 100
            losses_m.update(loss.item(), output.shape[0])
            top1_m.update(acc1.item(), output.shape[0])
    return losses_m.avg, top1_m.avg


def main(watch):
    args = SimpleNamespace(epochs=3, batch_size=32, grad_accum_steps=3, lr=0.05, clip_grad=1.0)
    torch.manual_seed(42)
    train_prep = transforms.Compose([transforms.RandomCrop(8, padding=1), transforms.RandomHorizontalFlip(),
                                     transforms.ToTensor(), transforms.Normalize((0.5,) * 3, (0.25,) * 3)])
    eval_prep = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,) * 3, (0.25,) * 3)])
    train_set = datasets.CIFAR10("data", train=True, transform=train_prep, sizes=(230, 200))
    eval_set = datasets.CIFAR10("data", train=False, transform=eval_prep, sizes=(230, 200))
    loader_train = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, drop_last=True)
    loader_eval = DataLoader(eval_set, batch_size=2 * args.batch_size)
    model = small_net()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=2e-5)
    updates_per_epoch = (len(loader_train) + args.grad_accum_steps - 1) // args.grad_accum_steps
    lr_scheduler = CosineSchedule(optimizer, t_initial=args.epochs * updates_per_epoch)
    loss_fn, loss_scaler = nn.CrossEntropyLoss(label_smoothing=0.1), NativeScaler()
    with watch(model):
        for epoch in range(args.epochs):
            train_one_epoch(epoch, model, loader_train, optimizer, loss_fn, args, lr_scheduler, loss_scaler)
            validate(model, loader_eval, loss_fn)
            lr_scheduler.step(epoch + 1)
    return [model, optimizer]


from tests.doctor_published import variant  # noqa: E402

VARIANTS = [
    variant("short_last_window_divided_by_full_k", "unscaled_accumulation",
            ("        if batch_idx >= last_batch_idx_to_accum:\n            accum_steps = last_accum_steps\n", "")),
    variant("loss_not_divided", "unscaled_accumulation", ("        if accum_steps > 1:\n            loss /= accum_steps\n", "")),
    variant("validate_without_eval", "eval_in_train_mode", ("    model.eval()\n", "")),
    variant("validate_with_gradients", "missing_no_grad",
            ("    with torch.inference_mode():\n", "    with torch.enable_grad():\n")),
    variant("zero_grad_every_micro_batch", "zero_grad_after_backward",
            ("        if not need_update:\n            continue\n",
             "        if not need_update:\n            optimizer.zero_grad()\n            continue\n")),
]
