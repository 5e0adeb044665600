# Mirrors: pytorch/vision, references/classification/train.py (train_one_epoch, evaluate and main's schedule) at
# commit 017e9b99b5da, the version between PR #4824 (2021-11-02, which added gradient clipping) and PR #4874
# (2021-11-08, "fix bug in training model by amp", which removed the second optimizer.step() of the AMP path).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: an image folder with random-crop/flip training transforms and a random sampler; a BatchNorm network;
# cross-entropy with label smoothing; SGD with momentum over two parameter groups (no weight decay on the norm
# layers); a linear warmup chained to a StepLR by SequentialLR, stepped once per epoch; per batch: forward, then
# zero_grad, then either (AMP) the loss under autocast, scaler.scale(loss).backward(), scaler.step, scaler.update,
# or loss.backward(); then, in both paths, an optional clip_grad_norm_ and optimizer.step() -- the AMP path thus
# clips gradients already applied and steps a second time with them (the bug PR #4874 fixed); accuracy meters
# weighted by batch size; evaluation in eval mode under inference_mode. Shrunk: 8x8 stand-in ants/bees images
# (160 train, 64 val), batch 16, 3 epochs, warmup 1 epoch, AMP off and no clipping (the script's defaults); AMP
# is bfloat16 autocast with GradScaler("cpu"). Not kept: model EMA, mixup/cutmix, DDP, checkpoints, progress logs.
# Added: `with watch(...)` around the epochs.
from types import SimpleNamespace

import torch
from torch import nn
from torch.utils.data import DataLoader, RandomSampler, SequentialSampler

from tests.doctor_published.standins import ImageFolder, transforms


def resnetish(classes):
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, classes))


def train_one_epoch(model, criterion, optimizer, data_loader, epoch, args, scaler=None):
    model.train()
    hits = seen = 0
    for i, (image, target) in enumerate(data_loader):
        output = model(image)
        optimizer.zero_grad()
        if args.amp:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = criterion(output, target)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss = criterion(output, target)
            loss.backward()
        if args.clip_grad_norm is not None:
            nn.utils.clip_grad_norm_([p for g in optimizer.param_groups for p in g["params"]], args.clip_grad_norm)
        optimizer.step()
        hits += (output.argmax(1) == target).sum().item()
        seen += image.shape[0]
    return 100 * hits / seen


def evaluate(model, criterion, data_loader):
    model.eval()
    hits = seen = 0
    with torch.inference_mode():
        for image, target in data_loader:
            output = model(image)
            criterion(output, target)
            hits += (output.argmax(1) == target).sum().item()
            seen += image.shape[0]
    print(f"Acc@1 {100 * hits / seen:.3f}")
    return 100 * hits / seen


def main(watch):
    args = SimpleNamespace(batch_size=16, epochs=3, lr=0.1, momentum=0.9, weight_decay=1e-4, norm_weight_decay=0.0,
                           lr_step_size=2, lr_gamma=0.1, lr_warmup_epochs=1, lr_warmup_decay=0.01,
                           label_smoothing=0.1, amp=False, clip_grad_norm=None)
    torch.manual_seed(0)
    train_prep = transforms.Compose([transforms.RandomCrop(8, padding=1), transforms.RandomHorizontalFlip(),
                                     transforms.ToTensor(), transforms.Normalize((0.5,) * 3, (0.25,) * 3)])
    val_prep = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,) * 3, (0.25,) * 3)])
    dataset, dataset_test = ImageFolder("data/train", train_prep), ImageFolder("data/val", val_prep)
    data_loader = DataLoader(dataset, batch_size=args.batch_size, sampler=RandomSampler(dataset))
    data_loader_test = DataLoader(dataset_test, batch_size=args.batch_size, sampler=SequentialSampler(dataset_test))
    model = resnetish(len(dataset.classes))
    criterion = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
    norm = [p for m in model.modules() if isinstance(m, nn.BatchNorm2d) for p in m.parameters()]
    other = [p for p in model.parameters() if all(p is not q for q in norm)]
    parameters = [{"params": norm, "weight_decay": args.norm_weight_decay},
                  {"params": other, "weight_decay": args.weight_decay}]
    optimizer = torch.optim.SGD(parameters, lr=args.lr, momentum=args.momentum, weight_decay=args.weight_decay)
    scaler = torch.amp.GradScaler("cpu") if args.amp else None
    main_lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=args.lr_step_size, gamma=args.lr_gamma)
    warmup_lr_scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=args.lr_warmup_decay,
                                                            total_iters=args.lr_warmup_epochs)
    lr_scheduler = torch.optim.lr_scheduler.SequentialLR(
        optimizer, schedulers=[warmup_lr_scheduler, main_lr_scheduler], milestones=[args.lr_warmup_epochs])
    with watch(model):
        for epoch in range(args.epochs):
            train_one_epoch(model, criterion, optimizer, data_loader, epoch, args, scaler)
            lr_scheduler.step()
            evaluate(model, criterion, data_loader_test)
    return [model, optimizer]


from tests.doctor_published import variant  # noqa: E402

VARIANTS = [
    # --amp as published in that week: scaler.step() then optimizer.step() again on the same gradients
    variant("amp_as_published", "missing_zero_grad", ("amp=False,", "amp=True,")),
    variant("amp_and_clipping_as_published", {"missing_zero_grad", "clip_after_step"}, ("amp=False,", "amp=True,"),
            ("clip_grad_norm=None)", "clip_grad_norm=1.0)")),
    variant("amp_as_fixed_by_pr_4874", set(), ("amp=False,", "amp=True,"),
            ("            scaler.step(optimizer)\n            scaler.update()\n        else:\n"
             "            loss = criterion(output, target)\n            loss.backward()\n"
             "        if args.clip_grad_norm is not None:\n", "            scaler.step(optimizer)\n"
             "            scaler.update()\n        else:\n            loss = criterion(output, target)\n"
             "            loss.backward()\n            optimizer.step()\n        if False:\n"),
            ("        optimizer.step()\n        hits", "        hits")),
    variant("scheduler_stepped_every_batch", "epoch_schedule_per_batch",
            ("        optimizer.step()\n        hits", "        optimizer.step()\n        args.sched.step()\n        hits"),
            ("            lr_scheduler.step()\n", ""),
            ("    with watch(model):\n", "    args.sched = main_lr_scheduler\n    with watch(model):\n")),
    variant("evaluate_without_eval", "eval_in_train_mode", ("    model.eval()\n", "")),
    variant("zero_grad_before_the_forward_missing", "missing_zero_grad", ("        optimizer.zero_grad()\n", "")),
]
