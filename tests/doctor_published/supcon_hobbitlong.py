# Mirrors: HobbitLong/SupContrast, main_supcon.py (set_loader, set_model, train, main) then main_linear.py (set_model,
# train, validate, main) with main_ce.py's set_loader, util.py (TwoCropTransform, AverageMeter, accuracy,
# adjust_learning_rate, warmup_learning_rate, set_optimizer, save_model), losses.py (SupConLoss) and
# networks/resnet_big.py (SupConResNet, LinearClassifier), snapshot at commit 66a8fe53880d (2023-12-26); the
# scripts and util.py last changed in ae5da977b0ab (2023-08-13).
# Re-expressed in the course's own code from the published loops' structure; no published code is copied
# (fetched code is never committed).
# The README's two commands run back to back in one process: `main_supcon.py --batch_size 1024 --learning_rate 0.5
# --temp 0.1 --cosine` (a batch over 256 turns --warm on), then `main_linear.py --batch_size 512 --learning_rate 5
# --ckpt .../last.pth` (no --cosine, no --warm).
# Kept, stage 1 (main_supcon): CIFAR-10 with TwoCropTransform over RandomResizedCrop(scale 0.2-1) / flip /
# RandomApply(ColorJitter, p 0.8) / RandomGrayscale(0.2) / Normalize, a shuffled loader that keeps its short last
# batch; SupConResNet (an encoder, then an MLP projection head, outputs L2-normalized); SupConLoss (contrast_mode
# "all", base_temperature 0.07); SGD(momentum 0.9, weight decay 1e-4) from set_optimizer; per epoch (from 1)
# adjust_learning_rate(opt, optimizer, epoch) BEFORE training (a cosine of the epoch down to lr * decay_rate^3,
# written into the param groups; no torch scheduler), then train(): model.train(), per batch the two crops
# concatenated along the batch, bsz = labels.shape[0], warmup_learning_rate(opt, epoch, idx, len(loader), optimizer)
# (per batch, a linear ramp from warmup_from to warmup_to over the first warm_epochs, overriding the epoch's lr),
# features split back into [bsz, 2, dim], the loss, AverageMeter.update(loss.item(), bsz), then zero_grad, backward,
# step, a progress line every print_freq batches; after each epoch the meter's average and the lr to the
# tensorboard logger; save_model (opt, model and optimizer state, epoch) every save_freq epochs and at the end.
# Kept, stage 2 (main_linear): the encoder restored from that last checkpoint; a LinearClassifier on the encoder's
# features; CrossEntropyLoss; SGD over the CLASSIFIER only (weight decay 0); a training loader (RandomResizedCrop,
# flip, Normalize) and a validation loader (Normalize only, the held-out split, shuffle False, batch 256 in the
# script, its last batch short: CIFAR-10's 10,000 = 39 x 256 + 16); per epoch adjust_learning_rate (step decay at
# lr_decay_epochs), train(): model.eval() and classifier.train(), per batch warmup_learning_rate (a no-op without
# --warm), features = model.encoder(images) under torch.no_grad(), classifier(features.detach()), the loss,
# meters updated with loss.item() and the top-1 accuracy weighted by bsz (accuracy() runs under no_grad), zero_grad,
# backward, step; then validate(): model.eval(), classifier.eval(), under torch.no_grad() the forward, the loss and
# meters weighted by bsz; the best validation accuracy kept.
# The published loops have none of the registry's bugs.
# Shrunk: 12x12 stand-in CIFAR-10 images (stripes whose orientation and frequency, and a tint, depend on the class),
# 240 training and 200 validation images (not 50,000 and 10,000); stage 1 batch 64 (not 1024; --warm set as the
# large batch would), 8 epochs (not 1000), warm_epochs 2 (not 10), save_freq 3, temperature 0.1 as in the README,
# lr 0.05 (not 0.5: at batch 64 the README's rate, meant for 1024, made the tiny encoder collapse to one point);
# the projection head is SupConResNet's head='linear' option, 32 -> 16 (the default MLP head, shrunk to 32-32-16,
# collapsed in some seeds: its few hidden ReLUs died); stage 2 batch 64 (not 512), validation batch 48 (200 = 4 x
# 48 + 8), 4 epochs with decay at (2, 3) (not 100 with 60, 75, 90), lr 1 (not 5); an encoder of two conv-BN-ReLU
# layers and average pooling (32 features, not resnet50's 2048); ColorJitter is a random brightness, contrast and
# saturation (no hue); one process on the CPU (no DataParallel, apex or cudnn; main_linear's GPU-only check
# dropped); checkpoints in memory, loaded with weights_only=False (the checkpoint holds the options namespace, which
# torch's weights_only default would refuse); the tensorboard_logger is a stand-in that keeps floats.
# The SupCon loss falls from about 7.1 to 5.8 over the 8 epochs; the linear probe reaches about 75% validation
# accuracy (10 classes).
# Added: `with watch([model, classifier]):` around both stages (the two modules the loops call).
import io
import math
import sys
import time
from types import SimpleNamespace

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset


# --- options (parse_option of both scripts, shrunk) --------------------------------------------------------------

def supcon_options():
    opt = SimpleNamespace(print_freq=2, save_freq=3, batch_size=64, num_workers=0, epochs=8, learning_rate=0.05,
                          lr_decay_epochs="700,800,900", lr_decay_rate=0.1, weight_decay=1e-4, momentum=0.9,
                          model="resnet_tiny", head="linear", dataset="cifar10", size=12, method="SupCon", temp=0.1,
                          cosine=True, warm=True, trial="0")
    opt.lr_decay_epochs = [int(it) for it in opt.lr_decay_epochs.split(",")]
    if opt.batch_size > 256:
        opt.warm = True
    if opt.warm:
        opt.warmup_from = 0.01
        opt.warm_epochs = 2
        if opt.cosine:
            eta_min = opt.learning_rate * (opt.lr_decay_rate ** 3)
            opt.warmup_to = eta_min + (opt.learning_rate - eta_min) * (
                1 + math.cos(math.pi * opt.warm_epochs / opt.epochs)) / 2
        else:
            opt.warmup_to = opt.learning_rate
    return opt


def linear_options():
    opt = SimpleNamespace(print_freq=2, batch_size=64, num_workers=0, epochs=4, learning_rate=1.0,
                          lr_decay_epochs="2,3", lr_decay_rate=0.2, weight_decay=0, momentum=0.9,
                          model="resnet_tiny", dataset="cifar10", cosine=False, warm=False, val_batch_size=48)
    opt.lr_decay_epochs = [int(it) for it in opt.lr_decay_epochs.split(",")]
    opt.n_cls = 10
    return opt


# --- util.py --------------------------------------------------------------------------------------------------

class TwoCropTransform:
    def __init__(self, transform):
        self.transform = transform

    def __call__(self, x):
        return [self.transform(x), self.transform(x)]


class AverageMeter:
    def __init__(self):
        self.reset()

    def reset(self):
        self.val = self.avg = self.sum = self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def accuracy(output, target, topk=(1,)):
    with torch.no_grad():
        maxk, batch_size = max(topk), target.size(0)
        _, pred = output.topk(maxk, 1, True, True)
        correct = pred.t().eq(target.view(1, -1).expand(maxk, -1))
        return [correct[:k].reshape(-1).float().sum(0, keepdim=True).mul_(100.0 / batch_size) for k in topk]


def adjust_learning_rate(args, optimizer, epoch):
    lr = args.learning_rate
    if args.cosine:
        eta_min = lr * (args.lr_decay_rate ** 3)
        lr = eta_min + (lr - eta_min) * (1 + math.cos(math.pi * epoch / args.epochs)) / 2
    else:
        steps = np.sum(epoch > np.asarray(args.lr_decay_epochs))
        if steps > 0:
            lr = lr * (args.lr_decay_rate ** steps)
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr


def warmup_learning_rate(args, epoch, batch_id, total_batches, optimizer):
    if args.warm and epoch <= args.warm_epochs:
        p = (batch_id + (epoch - 1) * total_batches) / (args.warm_epochs * total_batches)
        lr = args.warmup_from + p * (args.warmup_to - args.warmup_from)
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr


def set_optimizer(opt, model):
    return torch.optim.SGD(model.parameters(), lr=opt.learning_rate, momentum=opt.momentum,
                           weight_decay=opt.weight_decay)


def save_model(model, optimizer, opt, epoch, save_file):
    state = {"opt": opt, "model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}
    torch.save(state, save_file)


class Logger:
    """tensorboard_logger.Logger stand-in: keeps the values (floats) in memory."""

    def __init__(self, logdir=None, flush_secs=2):
        self.values = []

    def log_value(self, name, value, step):
        self.values.append((name, float(value), step))


# --- data: CIFAR-10 stand-ins and the augmentations ----------------------------------------------------------------

class SyntheticCIFAR10(Dataset):
    """datasets.CIFAR10 stand-in: float HxWx3 images in [0, 1] of stripes whose angle and frequency (and a tint)
    depend on the class, plus noise."""

    def __init__(self, train=True, transform=None, size=12):
        g = torch.Generator().manual_seed(21 if train else 22)
        count = 240 if train else 200
        self.targets = torch.randint(0, 10, (count,), generator=g)
        angle = self.targets.float() * math.pi / 5
        freq = 1.2 + 0.4 * (self.targets % 3).float()
        phase = torch.rand(count, generator=g) * 2 * math.pi
        yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
        wave = torch.sin(freq.view(-1, 1, 1) * (torch.cos(angle).view(-1, 1, 1) * xx + torch.sin(angle).view(-1, 1, 1)
                                                * yy) + phase.view(-1, 1, 1))
        tint = torch.rand(10, 3, generator=torch.Generator().manual_seed(20))[self.targets]
        img = 0.5 + 0.3 * wave[..., None] * tint[:, None, None, :] + 0.05 * torch.randn(count, size, size, 3,
                                                                                       generator=g)
        self.data = img.clamp(0, 1)
        self.transform = transform

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        img = self.data[index].permute(2, 0, 1)
        if self.transform is not None:
            img = self.transform(img)
        return img, int(self.targets[index])


class Compose:
    def __init__(self, steps):
        self.steps = steps

    def __call__(self, x):
        for step in self.steps:
            x = step(x)
        return x


class RandomResizedCrop:
    def __init__(self, size, scale=(0.08, 1.0)):
        self.size, self.scale = size, scale

    def __call__(self, x):
        h, w = x.shape[-2:]
        area = (self.scale[0] + (self.scale[1] - self.scale[0]) * torch.rand(1).item()) * h * w
        ratio = math.exp(math.log(3 / 4) + (math.log(4 / 3) - math.log(3 / 4)) * torch.rand(1).item())
        ch = max(2, min(h, round(math.sqrt(area / ratio))))
        cw = max(2, min(w, round(math.sqrt(area * ratio))))
        top, left = torch.randint(0, h - ch + 1, (1,)).item(), torch.randint(0, w - cw + 1, (1,)).item()
        crop = x[:, top:top + ch, left:left + cw]
        return F.interpolate(crop[None], size=(self.size, self.size), mode="bilinear", align_corners=False)[0]


class RandomHorizontalFlip:
    def __call__(self, x):
        return x.flip(-1) if torch.rand(1).item() < 0.5 else x


class ColorJitter:
    def __init__(self, brightness, contrast, saturation, hue=0.0):
        self.b, self.c, self.s = brightness, contrast, saturation

    def __call__(self, x):
        factor = lambda k: 1 + (2 * torch.rand(1).item() - 1) * k   # noqa: E731
        x = x * factor(self.b)
        mean = x.mean()
        x = (x - mean) * factor(self.c) + mean
        grey = x.mean(0, keepdim=True)
        return ((x - grey) * factor(self.s) + grey).clamp(0, 1)


class RandomApply:
    def __init__(self, transforms, p=0.5):
        self.transforms, self.p = transforms, p

    def __call__(self, x):
        if torch.rand(1).item() < self.p:
            for t in self.transforms:
                x = t(x)
        return x


class RandomGrayscale:
    def __init__(self, p=0.1):
        self.p = p

    def __call__(self, x):
        return x.mean(0, keepdim=True).expand_as(x).clone() if torch.rand(1).item() < self.p else x


class Normalize:
    def __init__(self, mean, std):
        self.mean, self.std = torch.tensor(mean).view(3, 1, 1), torch.tensor(std).view(3, 1, 1)

    def __call__(self, x):
        return (x - self.mean) / self.std


CIFAR10_MEAN, CIFAR10_STD = (0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010)


def set_loader_supcon(opt):
    """main_supcon.set_loader."""
    normalize = Normalize(mean=CIFAR10_MEAN, std=CIFAR10_STD)
    train_transform = Compose([RandomResizedCrop(size=opt.size, scale=(0.2, 1.0)), RandomHorizontalFlip(),
                               RandomApply([ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8), RandomGrayscale(p=0.2),
                               normalize])
    train_dataset = SyntheticCIFAR10(train=True, transform=TwoCropTransform(train_transform))
    train_sampler = None
    return DataLoader(train_dataset, batch_size=opt.batch_size, shuffle=(train_sampler is None),
                      num_workers=opt.num_workers, sampler=train_sampler)


def set_loader_linear(opt):
    """main_ce.set_loader, which main_linear imports."""
    normalize = Normalize(mean=CIFAR10_MEAN, std=CIFAR10_STD)
    train_transform = Compose([RandomResizedCrop(size=12, scale=(0.2, 1.0)), RandomHorizontalFlip(), normalize])
    val_transform = Compose([normalize])
    train_dataset = SyntheticCIFAR10(train=True, transform=train_transform)
    val_dataset = SyntheticCIFAR10(train=False, transform=val_transform)
    train_sampler = None
    train_loader = DataLoader(train_dataset, batch_size=opt.batch_size, shuffle=(train_sampler is None),
                              num_workers=opt.num_workers, sampler=train_sampler)
    val_loader = DataLoader(val_dataset, batch_size=opt.val_batch_size, shuffle=False, num_workers=0)
    return train_loader, val_loader


# --- networks and the loss -------------------------------------------------------------------------------------

def tiny_encoder():
    """Stand-in for resnet50() without its fc: conv-BN-ReLU twice, average pooled to 32 features."""
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
                         nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(32),
                         nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1), nn.Flatten())


model_dict = {"resnet_tiny": [tiny_encoder, 32]}


class SupConResNet(nn.Module):
    def __init__(self, name="resnet_tiny", head="mlp", feat_dim=16):
        super().__init__()
        model_fun, dim_in = model_dict[name]
        self.encoder = model_fun()
        if head == "linear":
            self.head = nn.Linear(dim_in, feat_dim)
        elif head == "mlp":
            self.head = nn.Sequential(nn.Linear(dim_in, dim_in), nn.ReLU(inplace=True), nn.Linear(dim_in, feat_dim))
        else:
            raise NotImplementedError(f"head not supported: {head}")

    def forward(self, x):
        return F.normalize(self.head(self.encoder(x)), dim=1)


class LinearClassifier(nn.Module):
    def __init__(self, name="resnet_tiny", num_classes=10):
        super().__init__()
        _, feat_dim = model_dict[name]
        self.fc = nn.Linear(feat_dim, num_classes)

    def forward(self, features):
        return self.fc(features)


class SupConLoss(nn.Module):
    """Supervised contrastive loss over [bsz, n_views, dim] features (SimCLR's when no labels are given)."""

    def __init__(self, temperature=0.07, contrast_mode="all", base_temperature=0.07):
        super().__init__()
        self.temperature, self.contrast_mode, self.base_temperature = temperature, contrast_mode, base_temperature

    def forward(self, features, labels=None):
        batch_size, n_views = features.shape[:2]
        if labels is None:
            same = torch.eye(batch_size)
        else:
            labels = labels.contiguous().view(-1, 1)
            same = torch.eq(labels, labels.T).float()
        contrast = torch.cat(torch.unbind(features, dim=1), dim=0)              # [n_views * bsz, dim]
        if self.contrast_mode == "one":
            anchors, anchor_views = features[:, 0], 1
        else:
            anchors, anchor_views = contrast, n_views
        scores = anchors @ contrast.T / self.temperature
        scores = scores - scores.max(dim=1, keepdim=True).values.detach()
        not_self = torch.ones(batch_size * anchor_views, batch_size * n_views)
        not_self[torch.arange(batch_size * anchor_views), torch.arange(batch_size * anchor_views)] = 0
        positives = same.repeat(anchor_views, n_views) * not_self
        log_prob = scores - torch.log((torch.exp(scores) * not_self).sum(1, keepdim=True))
        n_pos = positives.sum(1)
        n_pos = torch.where(n_pos < 1e-6, torch.ones_like(n_pos), n_pos)
        mean_log_prob_pos = (positives * log_prob).sum(1) / n_pos
        loss = -(self.temperature / self.base_temperature) * mean_log_prob_pos
        return loss.view(anchor_views, batch_size).mean()


# --- main_supcon.py ----------------------------------------------------------------------------------------------

def set_model_supcon(opt):
    return SupConResNet(name=opt.model, head=opt.head), SupConLoss(temperature=opt.temp)


def train_supcon(train_loader, model, criterion, optimizer, epoch, opt):
    """main_supcon.train: one epoch."""
    model.train()
    batch_time, data_time, losses = AverageMeter(), AverageMeter(), AverageMeter()
    end = time.time()
    for idx, (images, labels) in enumerate(train_loader):
        data_time.update(time.time() - end)
        images = torch.cat([images[0], images[1]], dim=0)
        bsz = labels.shape[0]

        # warm-up learning rate
        warmup_learning_rate(opt, epoch, idx, len(train_loader), optimizer)

        features = model(images)
        f1, f2 = torch.split(features, [bsz, bsz], dim=0)
        features = torch.cat([f1.unsqueeze(1), f2.unsqueeze(1)], dim=1)
        if opt.method == "SupCon":
            loss = criterion(features, labels)
        elif opt.method == "SimCLR":
            loss = criterion(features)
        else:
            raise ValueError(f"contrastive method not supported: {opt.method}")

        # update metric
        losses.update(loss.item(), bsz)

        # SGD
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        batch_time.update(time.time() - end)
        end = time.time()
        if (idx + 1) % opt.print_freq == 0:
            print(f"Train: [{epoch}][{idx + 1}/{len(train_loader)}]\tBT {batch_time.val:.3f} ({batch_time.avg:.3f})\t"
                  f"DT {data_time.val:.3f} ({data_time.avg:.3f})\tloss {losses.val:.3f} ({losses.avg:.3f})")
            sys.stdout.flush()
    return losses.avg


# --- main_linear.py ----------------------------------------------------------------------------------------------

def train_linear(train_loader, model, classifier, criterion, optimizer, epoch, opt):
    """main_linear.train: one epoch of the classifier on the frozen encoder."""
    model.eval()
    classifier.train()
    batch_time, data_time, losses, top1 = AverageMeter(), AverageMeter(), AverageMeter(), AverageMeter()
    end = time.time()
    for idx, (images, labels) in enumerate(train_loader):
        data_time.update(time.time() - end)
        bsz = labels.shape[0]

        # warm-up learning rate
        warmup_learning_rate(opt, epoch, idx, len(train_loader), optimizer)

        # compute loss
        with torch.no_grad():
            features = model.encoder(images)
        output = classifier(features.detach())
        loss = criterion(output, labels)

        # update metric
        losses.update(loss.item(), bsz)
        acc1, acc5 = accuracy(output, labels, topk=(1, 5))
        top1.update(acc1[0], bsz)

        # SGD
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        batch_time.update(time.time() - end)
        end = time.time()
        if (idx + 1) % opt.print_freq == 0:
            print(f"Train: [{epoch}][{idx + 1}/{len(train_loader)}]\tloss {losses.val:.3f} ({losses.avg:.3f})\t"
                  f"Acc@1 {float(top1.val):.3f} ({float(top1.avg):.3f})")
            sys.stdout.flush()
    return losses.avg, top1.avg


def validate(val_loader, model, classifier, criterion, opt):
    """main_linear.validate."""
    model.eval()
    classifier.eval()
    batch_time, losses, top1 = AverageMeter(), AverageMeter(), AverageMeter()
    with torch.no_grad():
        end = time.time()
        for idx, (images, labels) in enumerate(val_loader):
            images = images.float()
            bsz = labels.shape[0]

            # forward
            output = classifier(model.encoder(images))
            loss = criterion(output, labels)

            # update metric
            losses.update(loss.item(), bsz)
            acc1, acc5 = accuracy(output, labels, topk=(1, 5))
            top1.update(acc1[0], bsz)

            batch_time.update(time.time() - end)
            end = time.time()
            if idx % opt.print_freq == 0:
                print(f"Test: [{idx}/{len(val_loader)}]\tLoss {losses.val:.4f} ({losses.avg:.4f})\t"
                      f"Acc@1 {float(top1.val):.3f} ({float(top1.avg):.3f})")
    print(f" * Acc@1 {float(top1.avg):.3f}")
    return losses.avg, top1.avg


def main(watch):
    torch.manual_seed(0)
    opt, lin = supcon_options(), linear_options()

    # main_supcon.main: loader, model and criterion, optimizer, logger
    train_loader = set_loader_supcon(opt)
    model, criterion = set_model_supcon(opt)
    optimizer = set_optimizer(opt, model)
    logger = Logger(logdir="tb_folder", flush_secs=2)
    checkpoints = {}

    # main_linear.main: loaders, the classifier and its criterion
    linear_train_loader, val_loader = set_loader_linear(lin)
    classifier = LinearClassifier(name=lin.model, num_classes=lin.n_cls)
    ce_criterion = torch.nn.CrossEntropyLoss()

    with watch([model, classifier]):
        # stage 1: python main_supcon.py ...
        for epoch in range(1, opt.epochs + 1):
            adjust_learning_rate(opt, optimizer, epoch)

            time1 = time.time()
            loss = train_supcon(train_loader, model, criterion, optimizer, epoch, opt)
            print(f"epoch {epoch}, total time {time.time() - time1:.2f}")

            logger.log_value("loss", loss, epoch)
            logger.log_value("learning_rate", optimizer.param_groups[0]["lr"], epoch)

            if epoch % opt.save_freq == 0:
                checkpoints[f"ckpt_epoch_{epoch}.pth"] = io.BytesIO()
                save_model(model, optimizer, opt, epoch, checkpoints[f"ckpt_epoch_{epoch}.pth"])
        checkpoints["last.pth"] = io.BytesIO()
        save_model(model, optimizer, opt, opt.epochs, checkpoints["last.pth"])

        # stage 2: python main_linear.py --ckpt last.pth
        checkpoints["last.pth"].seek(0)
        ckpt = torch.load(checkpoints["last.pth"], map_location="cpu", weights_only=False)
        model.load_state_dict(ckpt["model"])
        linear_optimizer = set_optimizer(lin, classifier)
        best_acc = 0
        for epoch in range(1, lin.epochs + 1):
            adjust_learning_rate(lin, linear_optimizer, epoch)

            time1 = time.time()
            loss, acc = train_linear(linear_train_loader, model, classifier, ce_criterion, linear_optimizer, epoch,
                                     lin)
            print(f"Train epoch {epoch}, total time {time.time() - time1:.2f}, accuracy:{float(acc):.2f}")

            loss, val_acc = validate(val_loader, model, classifier, ce_criterion, lin)
            if val_acc > best_acc:
                best_acc = val_acc
        print(f"best accuracy: {float(best_acc):.2f}")
    return [model, optimizer, classifier, linear_optimizer]


from tests.doctor_published import dedent, variant  # noqa: E402

REAL = set()
VALIDATE_BODY = """\
        end = time.time()
        for idx, (images, labels) in enumerate(val_loader):
            images = images.float()
            bsz = labels.shape[0]

            # forward
            output = classifier(model.encoder(images))
            loss = criterion(output, labels)

            # update metric
            losses.update(loss.item(), bsz)
            acc1, acc5 = accuracy(output, labels, topk=(1, 5))
            top1.update(acc1[0], bsz)

            batch_time.update(time.time() - end)
            end = time.time()
            if idx % opt.print_freq == 0:
                print(f"Test: [{idx}/{len(val_loader)}]\\tLoss {losses.val:.4f} ({losses.avg:.4f})\\t"
                      f"Acc@1 {float(top1.val):.3f} ({float(top1.avg):.3f})")
"""
VARIANTS = [
    # the SupCon meter handed the loss tensor: `losses.sum` chains every batch's graph until the epoch ends
    variant("supcon_meter_gets_the_loss_tensor", "graph_attached_logging",
            ("        # update metric\n        losses.update(loss.item(), bsz)\n\n        # SGD\n",
             "        # update metric\n        losses.update(loss, bsz)\n\n        # SGD\n")),
    # util's hand-written cosine replaced by torch's CosineAnnealingLR(T_max=epochs), stepped next to the per-batch
    # warmup: the cosine (in epochs) runs its course within T_max batches, then climbs back
    variant("cosine_scheduler_stepped_every_batch", "epoch_schedule_per_batch",
            ("    optimizer = set_optimizer(opt, model)\n",
             "    optimizer = set_optimizer(opt, model)\n"
             "    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(\n"
             "        optimizer, T_max=opt.epochs, eta_min=opt.learning_rate * opt.lr_decay_rate ** 3)\n"),
            ("def train_supcon(train_loader, model, criterion, optimizer, epoch, opt):\n",
             "def train_supcon(train_loader, model, criterion, optimizer, epoch, opt, scheduler):\n"),
            ("        losses.update(loss.item(), bsz)\n\n        # SGD\n"
             "        optimizer.zero_grad()\n        loss.backward()\n        optimizer.step()\n",
             "        losses.update(loss.item(), bsz)\n\n        # SGD\n"
             "        optimizer.zero_grad()\n        loss.backward()\n        optimizer.step()\n"
             "        scheduler.step()\n"),
            ("            adjust_learning_rate(opt, optimizer, epoch)\n", ""),
            ("            loss = train_supcon(train_loader, model, criterion, optimizer, epoch, opt)\n",
             "            loss = train_supcon(train_loader, model, criterion, optimizer, epoch, opt, scheduler)\n")),
    # "the encoder is frozen, eval() is not needed": neither train() nor validate() of main_linear calls
    # model.eval(), and the encoder stays in the train mode stage 1 left it in: validation normalizes with batch
    # statistics and moves the BatchNorm running statistics
    variant("linear_stage_never_puts_the_encoder_in_eval", "eval_in_train_mode",
            ("    model.eval()\n    classifier.train()\n", "    classifier.train()\n"),
            ("    model.eval()\n    classifier.eval()\n", "    classifier.eval()\n")),
    variant("validate_without_no_grad", "missing_no_grad",
            ("    with torch.no_grad():\n" + VALIDATE_BODY, dedent(VALIDATE_BODY))),
    # validation meters updated without the batch size (AverageMeter's n defaults to 1): the 8-image last batch
    # weighs as much as a 48-image one
    variant("validate_meters_without_batch_size", "mean_of_batch_means",
            ("            losses.update(loss.item(), bsz)\n", "            losses.update(loss.item())\n"),
            ("            top1.update(acc1[0], bsz)\n", "            top1.update(acc1[0])\n")),
    variant("validation_set_from_the_training_split", "data_leakage",
            ("    val_dataset = SyntheticCIFAR10(train=False, transform=val_transform)\n",
             "    val_dataset = SyntheticCIFAR10(train=True, transform=val_transform)\n")),
    # not a bug: validate() relies on train() having put the encoder in eval mode (nothing puts it back in train
    # mode during the linear stage), so dropping validate's own model.eval() changes nothing
    variant("validate_relies_on_train_for_encoder_eval", set(),
            ("    model.eval()\n    classifier.eval()\n", "    classifier.eval()\n")),
    # not a bug: the frozen encoder's forward in the linear stage without no_grad; features.detach() still stops
    # every gradient at the classifier's input and the encoder is in eval mode: the same updates, a graph that is
    # dropped at once (a training step, not an evaluation)
    variant("linear_stage_features_with_grad_then_detached", set(),
            ("        with torch.no_grad():\n            features = model.encoder(images)\n",
             "        features = model.encoder(images)\n")),
]
