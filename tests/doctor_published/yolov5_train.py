# Mirrors: ultralytics/yolov5, train.py (train(): the optimizer's three parameter groups, the linear LambdaLR,
# ModelEMA, the warmup, the accumulation and AMP step, the per-epoch scheduler step, validation of the EMA) with
# val.py's run() and utils/torch_utils.py's ModelEMA, snapshot at commit 5081342f04fb (2026-08-21), the commit
# that last changed train.py.
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: a nominal batch size (nbs) and accumulate = round(nbs / batch_size); SGD (nesterov) over three groups (norm
# weights without decay, other weights with decay, biases); LambdaLR with the linear lf(epoch), stepped once per
# epoch; an EMA copy kept in eval mode with requires_grad off, updated after each optimizer step with a ramped
# decay; a warmup of nw iterations over which accumulate rises from 1 to nbs / batch_size and each group's lr and
# the momentum are interpolated by hand (np.interp on the global iteration ni); zero_grad at each epoch's start;
# an autocast forward whose loss is the batch's mean loss times the batch size (detection losses are scaled so),
# scaler.scale(loss).backward(), and once ni - last_opt_step >= accumulate: unscale, clip_grad_norm_(10), step,
# update, zero_grad, EMA update; running mean losses of the detached loss items; validation of the EMA model in eval
# mode under no_grad whose loss is the sum of per-batch losses divided by the number of batches. Two real bugs:
# the update condition counts micro-batches over the whole run, so an epoch can end inside a window, and the next
# epoch's zero_grad wipes that window's gradients (accumulation_without_flush); the validation loss is a mean of
# batch means over a last short batch (COCO's 5,000 validation images in batches of 32) (mean_of_batch_means).
# Shrunk: 8x8 stand-in CIFAR-10 images as the detector's input (224 train images in batches of 32: 7 per epoch;
# 200 validation images in batches of 64), a small conv/BatchNorm classifier for the detector, nbs 96 (accumulate
# 3), a warmup of 6 iterations (not max(3 epochs, 100)), 3 epochs, bfloat16 autocast with GradScaler("cpu") instead
# of CUDA's fp16; no mosaic, no anchors, no mAP, no callbacks or checkpoints.
# Added: `with watch([model, ema.ema]):` around the epochs (the two modules the loop calls).
import math
from copy import deepcopy

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader

from tests.doctor_published.standins import datasets, transforms


class TinyDetector(nn.Module):
    def __init__(self, nc=10):
        super().__init__()
        self.model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.SiLU(),
                                   nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.SiLU(),
                                   nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(32, nc))

    def forward(self, x):
        return self.model(x)


class ComputeLoss:
    """The mean loss and its parts; the loss returned for backward is scaled by the batch size."""

    def __call__(self, pred, targets):
        lcls = nn.functional.cross_entropy(pred, targets)
        lbox = 0.05 * (pred.float() ** 2).mean()
        bs = pred.shape[0]
        return (lbox + lcls) * bs, torch.cat((lbox.reshape(1), lcls.reshape(1))).detach()


class ModelEMA:
    def __init__(self, model, decay=0.9999, tau=5, updates=0):
        self.ema = deepcopy(model).eval()
        self.updates = updates
        self.decay = lambda x: decay * (1 - math.exp(-x / tau))
        for p in self.ema.parameters():
            p.requires_grad_(False)

    def update(self, model):
        self.updates += 1
        d = self.decay(self.updates)
        with torch.no_grad():
            msd = model.state_dict()
            for k, v in self.ema.state_dict().items():
                if v.dtype.is_floating_point:
                    v *= d
                    v += (1 - d) * msd[k].detach()


def smart_optimizer(model, lr, momentum, decay):
    g = [], [], []
    norms = tuple(v for k, v in nn.__dict__.items() if "Norm" in k)
    for module in model.modules():
        for p_name, p in module.named_parameters(recurse=False):
            if p_name == "bias":
                g[2].append(p)
            elif p_name == "weight" and isinstance(module, norms):
                g[1].append(p)
            else:
                g[0].append(p)
    optimizer = torch.optim.SGD(g[2], lr=lr, momentum=momentum, nesterov=True)
    optimizer.add_param_group({"params": g[0], "weight_decay": decay})
    optimizer.add_param_group({"params": g[1], "weight_decay": 0.0})
    return optimizer


@torch.no_grad()
def run_val(model, dataloader, compute_loss):
    model.eval()
    loss = torch.zeros(2)
    seen = correct = 0
    for im, targets in dataloader:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            preds = model(im)
        loss += compute_loss(preds, targets)[1]
        correct += (preds.argmax(1) == targets).sum().item()
        seen += targets.shape[0]
    return correct / seen, *(loss / len(dataloader)).tolist()


def main(watch):
    hyp = dict(lr0=0.01, lrf=0.01, momentum=0.937, weight_decay=5e-4, warmup_momentum=0.8, warmup_bias_lr=0.1)
    epochs, batch_size, nbs, warmup_iters = 3, 32, 96, 6
    torch.manual_seed(0)
    prep = transforms.Compose([transforms.RandomHorizontalFlip(), transforms.ToTensor()])
    train_set = datasets.CIFAR10("data", train=True, transform=prep, sizes=(224, 200))
    val_set = datasets.CIFAR10("data", train=False, transform=transforms.ToTensor(), sizes=(224, 200))
    train_loader = DataLoader(train_set, batch_size=batch_size, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=batch_size * 2, shuffle=False)
    model = TinyDetector()
    amp = True
    accumulate = max(round(nbs / batch_size), 1)
    hyp["weight_decay"] *= batch_size * accumulate / nbs
    optimizer = smart_optimizer(model, hyp["lr0"], hyp["momentum"], hyp["weight_decay"])
    lf = lambda x: (1 - x / epochs) * (1.0 - hyp["lrf"]) + hyp["lrf"]  # noqa: E731
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda=lf)
    ema = ModelEMA(model)
    nb = len(train_loader)
    nw = warmup_iters
    last_opt_step = -1
    scaler = torch.amp.GradScaler("cpu", enabled=amp)
    compute_loss = ComputeLoss()
    with watch([model, ema.ema]):
        for epoch in range(epochs):
            model.train()
            mloss = torch.zeros(2)
            optimizer.zero_grad()
            for i, (imgs, targets) in enumerate(train_loader):
                ni = i + nb * epoch
                if ni <= nw:
                    xi = [0, nw]
                    accumulate = max(1, np.interp(ni, xi, [1, nbs / batch_size]).round())
                    for j, x in enumerate(optimizer.param_groups):
                        x["lr"] = np.interp(ni, xi, [hyp["warmup_bias_lr"] if j == 0 else 0.0,
                                                     x["initial_lr"] * lf(epoch)])
                        if "momentum" in x:
                            x["momentum"] = np.interp(ni, xi, [hyp["warmup_momentum"], hyp["momentum"]])
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
                    pred = model(imgs)
                    loss, loss_items = compute_loss(pred, targets)
                scaler.scale(loss).backward()
                if ni - last_opt_step >= accumulate:
                    scaler.unscale_(optimizer)
                    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=10.0)
                    scaler.step(optimizer)
                    scaler.update()
                    optimizer.zero_grad()
                    ema.update(model)
                    last_opt_step = ni
                mloss = (mloss * i + loss_items) / (i + 1)
            lr = [x["lr"] for x in optimizer.param_groups]
            scheduler.step()
            results = run_val(ema.ema, val_loader, compute_loss)
            print(f"epoch {epoch}: {mloss.tolist()} lr {lr} val {results}")
    return [model, optimizer, ema.ema]


from tests.doctor_published import variant  # noqa: E402

REAL = {"accumulation_without_flush", "mean_of_batch_means"}
VARIANTS = [
    variant("scheduler_stepped_every_batch", "epoch_schedule_per_batch",
            ("                mloss = (mloss * i + loss_items) / (i + 1)\n",
             "                mloss = (mloss * i + loss_items) / (i + 1)\n                scheduler.step()\n"),
            ("            scheduler.step()\n            results", "            results")),
    variant("clip_after_scaler_step", "clip_after_step",
            ("                    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=10.0)\n"
             "                    scaler.step(optimizer)\n",
             "                    scaler.step(optimizer)\n"
             "                    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=10.0)\n")),
    variant("hand_made_ema_validated_in_train_mode", "eval_in_train_mode",
            ("        self.ema = deepcopy(model).eval()\n", "        self.ema = deepcopy(model)\n"),
            ("    model.eval()\n    loss = torch.zeros(2)\n", "    loss = torch.zeros(2)\n")),
    variant("loss_items_not_detached", "graph_attached_logging",
            ("torch.cat((lbox.reshape(1), lcls.reshape(1))).detach()", "torch.cat((lbox.reshape(1), lcls.reshape(1)))")),
]
