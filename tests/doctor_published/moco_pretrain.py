# Mirrors: facebookresearch/moco, main_moco.py (main_worker, train, adjust_learning_rate, AverageMeter, accuracy)
# and moco/builder.py (MoCo), at commit 132aea9da9bb (2026-01-12), the last commit that still has the files (the
# repository's head, 8976944da9c6 of 2026-02-03, deletes them); the training code is unchanged in substance since
# the original release (later commits only reformat it and add type annotations).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: the MoCo module (a query encoder and a key encoder built from the same base encoder with num_classes=dim; with
# --mlp (MoCo v2) both fc layers replaced in the constructor by Linear-ReLU-fc; the key encoder initialised as a copy
# of the query encoder and frozen (requires_grad False) before the optimizer is built; a queue buffer of K
# normalized keys and a pointer); its forward: normalized queries with grad, then under no_grad the momentum update
# of the key encoder, a batch shuffle, the key encoder's forward IN TRAIN MODE (its BatchNorm uses batch statistics:
# the shuffle exists for that), unshuffle, normalized keys; logits = [positive, queue negatives] / T, labels all
# zero, dequeue-and-enqueue; SGD (momentum 0.9, weight decay 1e-4) over model.parameters() (the frozen key
# encoder's parameters are in it but never get a gradient); CrossEntropyLoss; a training loader with shuffle=True
# and drop_last=True over a dataset that returns two augmented crops of each image (TwoCropsTransform) and an
# unused label; per epoch adjust_learning_rate(optimizer, epoch) BEFORE training (a hand-written cosine of the epoch,
# MoCo v2's --cos, written into the param groups; no torch scheduler), then train(): model.train() once, per batch
# the forward, the loss, the (K+1)-way accuracy computed under no_grad, AverageMeters updated with loss.item() and
# the accuracies weighted by the batch size, then zero_grad, backward, step (zero_grad right before backward), a
# progress line every print_freq batches. No validation (pretraining only), no clipping, no AMP, no accumulation.
# The published loop has none of the registry's bugs.
# Shrunk: 96 synthetic 8x8 RGB "images" drawn around 24 prototypes, each crop a random shift plus noise and a random
# brightness (the augmentation), batch size 16 (6 steps per epoch), 8 epochs (not 200), a base encoder of two convs
# with BatchNorm and an fc (dim 16, MLP head as in v2), K = 64 (a multiple of the batch size, as the published
# assert requires), m = 0.99 (not 0.999, so the key encoder follows within 48 steps), T = 0.2 (v2), lr 0.06
# (0.03 scaled by the batch size per the README would barely move in 24 steps); one process: the DDP-only batch
# shuffle becomes a permutation within the batch and concat_all_gather the identity; the CPU instead of .cuda(); no
# checkpoints, no resume, no distributed sampler. The epoch loss rises in the first epoch while the random initial
# queue fills with real keys (as in MoCo itself), then falls (about 4.03 in epoch 1 to 3.5-3.6 in epochs 6-7).
# Added: `with watch(model):` around the epochs.
import math
import time
from types import SimpleNamespace

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class BaseEncoder(nn.Module):
    """Stand-in for torchvision's resnet50(num_classes=dim): conv-BN-ReLU twice, pooled, an fc to dim."""

    def __init__(self, num_classes=16):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                                      nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(32),
                                      nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x):
        return self.fc(self.features(x))


class MoCo(nn.Module):
    def __init__(self, base_encoder, dim=16, K=64, m=0.99, T=0.2, mlp=False):
        super().__init__()
        self.K, self.m, self.T = K, m, T
        self.encoder_q = base_encoder(num_classes=dim)
        self.encoder_k = base_encoder(num_classes=dim)
        if mlp:
            dim_mlp = self.encoder_q.fc.weight.shape[1]
            self.encoder_q.fc = nn.Sequential(nn.Linear(dim_mlp, dim_mlp), nn.ReLU(), self.encoder_q.fc)
            self.encoder_k.fc = nn.Sequential(nn.Linear(dim_mlp, dim_mlp), nn.ReLU(), self.encoder_k.fc)
        for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            param_k.data.copy_(param_q.data)
            param_k.requires_grad = False
        self.register_buffer("queue", nn.functional.normalize(torch.randn(dim, K), dim=0))
        self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))

    @torch.no_grad()
    def _momentum_update_key_encoder(self):
        for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            param_k.data = param_k.data * self.m + param_q.data * (1.0 - self.m)

    @torch.no_grad()
    def _dequeue_and_enqueue(self, keys):
        batch_size = keys.shape[0]
        ptr = int(self.queue_ptr)
        assert self.K % batch_size == 0
        self.queue[:, ptr:ptr + batch_size] = keys.T
        self.queue_ptr[0] = (ptr + batch_size) % self.K

    @torch.no_grad()
    def _batch_shuffle(self, x):
        idx_shuffle = torch.randperm(x.shape[0])
        return x[idx_shuffle], torch.argsort(idx_shuffle)

    @torch.no_grad()
    def _batch_unshuffle(self, x, idx_unshuffle):
        return x[idx_unshuffle]

    def forward(self, im_q, im_k):
        q = nn.functional.normalize(self.encoder_q(im_q), dim=1)
        with torch.no_grad():
            self._momentum_update_key_encoder()
            im_k, idx_unshuffle = self._batch_shuffle(im_k)
            k = nn.functional.normalize(self.encoder_k(im_k), dim=1)
            k = self._batch_unshuffle(k, idx_unshuffle)
        l_pos = torch.einsum("nc,nc->n", [q, k]).unsqueeze(-1)
        l_neg = torch.einsum("nc,ck->nk", [q, self.queue.clone().detach()])
        logits = torch.cat([l_pos, l_neg], dim=1)
        logits /= self.T
        labels = torch.zeros(logits.shape[0], dtype=torch.long)
        self._dequeue_and_enqueue(k)
        return logits, labels


class TwoCropsTransform:
    def __init__(self, base_transform):
        self.base_transform = base_transform

    def __call__(self, x):
        return [self.base_transform(x), self.base_transform(x)]


def augment(img):
    """Stand-in for RandomResizedCrop/ColorJitter/...: a random shift, a random brightness and noise."""
    dx, dy = (int(v) for v in torch.randint(-1, 2, (2,)))
    out = torch.roll(img, shifts=(dy, dx), dims=(1, 2)) * (0.8 + 0.4 * torch.rand(1))
    return out + 0.3 * torch.randn_like(out)


class UnlabeledImages(Dataset):
    """Stand-in for ImageFolder(traindir, TwoCropsTransform(...)): images around a few prototypes."""

    def __init__(self, count, transform, seed=0):
        g = torch.Generator().manual_seed(seed)
        prototypes = torch.randn(24, 3, 8, 8, generator=g)
        self.labels = torch.randint(0, 24, (count,), generator=g)
        self.images = prototypes[self.labels] + 0.7 * torch.randn(count, 3, 8, 8, generator=g)
        self.transform = transform

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        return self.transform(self.images[idx]), int(self.labels[idx])


class AverageMeter:
    def __init__(self, name, fmt=":f"):
        self.name, self.fmt = name, fmt
        self.reset()

    def reset(self):
        self.val = self.avg = self.sum = self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count

    def __str__(self):
        return ("{name} {val" + self.fmt + "} ({avg" + self.fmt + "})").format(**self.__dict__)


def accuracy(output, target, topk=(1,)):
    with torch.no_grad():
        maxk = max(topk)
        batch_size = target.size(0)
        _, pred = output.topk(maxk, 1, True, True)
        correct = pred.t().eq(target.view(1, -1).expand(maxk, -1))
        return [correct[:k].reshape(-1).float().sum(0, keepdim=True).mul_(100.0 / batch_size) for k in topk]


def adjust_learning_rate(optimizer, epoch, args):
    lr = args.lr
    if args.cos:
        lr *= 0.5 * (1.0 + math.cos(math.pi * epoch / args.epochs))
    else:
        for milestone in args.schedule:
            lr *= 0.1 if epoch >= milestone else 1.0
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr


def train(train_loader, model, criterion, optimizer, epoch, args):
    losses = AverageMeter("Loss", ":.4e")
    top1 = AverageMeter("Acc@1", ":6.2f")
    top5 = AverageMeter("Acc@5", ":6.2f")
    model.train()
    end = time.time()
    for i, (images, _) in enumerate(train_loader):
        output, target = model(im_q=images[0], im_k=images[1])
        loss = criterion(output, target)

        acc1, acc5 = accuracy(output, target, topk=(1, 5))
        losses.update(loss.item(), images[0].size(0))
        top1.update(acc1[0], images[0].size(0))
        top5.update(acc5[0], images[0].size(0))

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        batch_time = time.time() - end
        end = time.time()
        if i % args.print_freq == 0:
            print(f"Epoch: [{epoch}][{i}/{len(train_loader)}]\tTime {batch_time:.3f}\t{losses}\t{top1}\t{top5}")
    print(f"Epoch: [{epoch}] done\t{losses}\t{top1}")


def settings():
    """What the published script reads from its command line, at the shrunk MoCo v2 settings."""
    return SimpleNamespace(lr=0.06, momentum=0.9, weight_decay=1e-4, epochs=8, start_epoch=0, batch_size=16,
                           schedule=[120, 160], cos=True, mlp=True, moco_dim=16, moco_k=64, moco_m=0.99, moco_t=0.2,
                           print_freq=2, workers=0, seed=0)


def main(watch):
    args = settings()
    torch.manual_seed(args.seed)
    model = MoCo(BaseEncoder, args.moco_dim, args.moco_k, args.moco_m, args.moco_t, args.mlp)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=args.momentum,
                                weight_decay=args.weight_decay)

    train_dataset = UnlabeledImages(96, TwoCropsTransform(augment))
    train_sampler = None
    train_loader = DataLoader(train_dataset, batch_size=args.batch_size, shuffle=(train_sampler is None),
                              num_workers=args.workers, pin_memory=False, sampler=train_sampler, drop_last=True)

    with watch(model):
        for epoch in range(args.start_epoch, args.epochs):
            adjust_learning_rate(optimizer, epoch, args)
            train(train_loader, model, criterion, optimizer, epoch, args)
    return [model, optimizer]


from tests.doctor_published import variant  # noqa: E402

REAL = set()
VARIANTS = [
    variant("zero_grad_dropped", "missing_zero_grad", ("        optimizer.zero_grad()\n", "")),
    # the meter multiplies and sums the loss tensor itself: every step's graph stays referenced by losses.sum
    variant("loss_meter_gets_the_tensor", "graph_attached_logging",
            ("        losses.update(loss.item(), images[0].size(0))\n",
             "        losses.update(loss, images[0].size(0))\n")),
    # MoCo v2's MLP head bolted on in main after the optimizer was built from the v1 model: the new query-head
    # Linear is never updated (and the key head follows it by momentum)
    variant("v2_mlp_head_added_after_optimizer", "head_after_optimizer",
            ("    model = MoCo(BaseEncoder, args.moco_dim, args.moco_k, args.moco_m, args.moco_t, args.mlp)\n",
             "    model = MoCo(BaseEncoder, args.moco_dim, args.moco_k, args.moco_m, args.moco_t, mlp=False)\n"),
            ("    train_dataset = UnlabeledImages(96, TwoCropsTransform(augment))\n",
             "    if args.mlp:\n"
             "        dim_mlp = model.encoder_q.fc.weight.shape[1]\n"
             "        model.encoder_q.fc = nn.Sequential(nn.Linear(dim_mlp, dim_mlp), nn.ReLU(), model.encoder_q.fc)\n"
             "        model.encoder_k.fc = nn.Sequential(nn.Linear(dim_mlp, dim_mlp), nn.ReLU(), model.encoder_k.fc)\n"
             "        model.encoder_k.fc.load_state_dict(model.encoder_q.fc.state_dict())\n"
             "        for p in model.encoder_k.fc.parameters():\n"
             "            p.requires_grad = False\n"
             "    train_dataset = UnlabeledImages(96, TwoCropsTransform(augment))\n")),
    # adjust_learning_rate replaced by a torch cosine schedule stepped where adjust_learning_rate was called, at the
    # start of each epoch: its first step comes before any optimizer.step() (and the schedule runs one epoch ahead)
    variant("cosine_scheduler_stepped_at_epoch_start", "scheduler_before_optimizer",
            ("                                weight_decay=args.weight_decay)\n",
             "                                weight_decay=args.weight_decay)\n"
             "    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)\n"),
            ("            adjust_learning_rate(optimizer, epoch, args)\n", "            scheduler.step()\n")),
    # two half batches accumulated to emulate the batch size, each loss summed at full weight (the update is
    # twice as large), zero_grad only before each pair
    variant("accumulated_half_batches_unscaled", "unscaled_accumulation",
            ("        optimizer.zero_grad()\n        loss.backward()\n        optimizer.step()\n",
             "        if i % 2 == 0:\n"
             "            optimizer.zero_grad()\n"
             "        loss.backward()\n"
             "        if i % 2 == 1:\n"
             "            optimizer.step()\n"),
            ("epochs=8, start_epoch=0, batch_size=16,", "epochs=8, start_epoch=0, batch_size=8,")),
    # not a bug: zero_grad moved to right after the step (the next backward starts from cleared gradients; the
    # first backward finds none)
    variant("zero_grad_after_the_step", set(),
            ("        optimizer.zero_grad()\n        loss.backward()\n        optimizer.step()\n",
             "        loss.backward()\n        optimizer.step()\n        optimizer.zero_grad()\n")),
    # not a bug: the cosine computed per iteration from a fractional epoch (as MoCo v3 does), still hand-written
    variant("cosine_adjusted_every_iteration", set(),
            ("def train(train_loader, model, criterion, optimizer, epoch, args):\n",
             "def train(train_loader, model, criterion, optimizer, epoch, args):\n"
             "    iters_per_epoch = len(train_loader)\n"),
            ("        output, target = model(im_q=images[0], im_k=images[1])\n",
             "        adjust_learning_rate(optimizer, epoch + i / iters_per_epoch, args)\n"
             "        output, target = model(im_q=images[0], im_k=images[1])\n"),
            ("            adjust_learning_rate(optimizer, epoch, args)\n", "")),
]
