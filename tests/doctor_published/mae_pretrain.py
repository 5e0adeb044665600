# Mirrors: facebookresearch/mae, engine_pretrain.py (train_one_epoch), main_pretrain.py and util/misc.py's
# NativeScalerWithGradNormCount, snapshot at commit efb2a80 (2022-04-20); engine_pretrain.py last changed in
# be47fef (2022-01-06).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: a masked autoencoder that draws its random mask in forward and returns (loss, prediction, mask); a training
# loader with random crop and flip and drop_last=True; AdamW; the learning rate set by hand (warmup, then half a
# cosine) at the start of each accumulation window, per iteration; zero_grad before the epoch; per batch: autocast
# forward, loss.item() checked finite, loss /= accum_iter, a scaler object that runs scaler.scale(loss).backward()
# and, on update iterations ((i + 1) % accum_iter == 0), unscale_, a gradient norm, scaler.step and update; then
# zero_grad on update iterations; no evaluation in pretraining. Shrunk: 8x8 stand-in images (240, batch 16), 2x2
# patches, a linear encoder and decoder of width 16, 3 epochs; bfloat16 autocast and GradScaler("cpu") for CUDA's.
# Added: `with watch(...)` around the epochs.
import math
from types import SimpleNamespace

import torch
from torch import nn
from torch.utils.data import DataLoader

from tests.doctor_published.standins import datasets, transforms


class TinyMAE(nn.Module):
    """Patchify, keep a random (1 - mask_ratio) of the patches, encode, decode all, MSE on the masked ones."""

    def __init__(self, patch=2, side=8, channels=3, width=16):
        super().__init__()
        self.patch, self.dim = patch, patch * patch * channels
        self.count = (side // patch) ** 2
        self.embed, self.decode = nn.Linear(self.dim, width), nn.Linear(width, self.dim)
        self.mask_token = nn.Parameter(torch.zeros(width))

    def forward(self, images, mask_ratio=0.75):
        p = self.patch
        patches = images.unfold(2, p, p).unfold(3, p, p).permute(0, 2, 3, 1, 4, 5).reshape(len(images), self.count, -1)
        noise = torch.rand(len(images), self.count)
        mask = (noise.argsort(1).argsort(1) >= int(self.count * (1 - mask_ratio))).float()
        latent = self.embed(patches) * (1 - mask[..., None]) + self.mask_token * mask[..., None]
        prediction = self.decode(torch.relu(latent))
        loss = (((prediction - patches) ** 2).mean(-1) * mask).sum() / mask.sum()
        return loss, prediction, mask


class ScalerWithNorm:
    """scaler.scale(loss).backward(); on an update: unscale_, gradient norm, step, update."""

    def __init__(self):
        self._scaler = torch.amp.GradScaler("cpu")

    def __call__(self, loss, optimizer, parameters=None, update_grad=True):
        self._scaler.scale(loss).backward()
        if not update_grad:
            return None
        self._scaler.unscale_(optimizer)
        norm = torch.norm(torch.stack([torch.norm(p.grad.detach()) for p in parameters if p.grad is not None]))
        self._scaler.step(optimizer)
        self._scaler.update()
        return norm


def adjust_learning_rate(optimizer, epoch, args):
    """Linear warmup, then half a cosine, set on every param group (per iteration: epoch is fractional)."""
    if epoch < args.warmup_epochs:
        lr = args.lr * epoch / args.warmup_epochs
    else:
        lr = args.min_lr + (args.lr - args.min_lr) * 0.5 * (
            1 + math.cos(math.pi * (epoch - args.warmup_epochs) / (args.epochs - args.warmup_epochs)))
    for group in optimizer.param_groups:
        group["lr"] = lr


def train_one_epoch(model, loader, optimizer, epoch, scaler, args):
    model.train(True)
    accum_iter = args.accum_iter
    optimizer.zero_grad()
    for it, (samples, _) in enumerate(loader):
        if it % accum_iter == 0:
            adjust_learning_rate(optimizer, it / len(loader) + epoch, args)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss, _, _ = model(samples, mask_ratio=args.mask_ratio)
        loss_value = loss.item()
        if not math.isfinite(loss_value):
            raise SystemExit(f"loss is {loss_value}, stopping training")
        loss /= accum_iter
        scaler(loss, optimizer, parameters=model.parameters(), update_grad=(it + 1) % accum_iter == 0)
        if (it + 1) % accum_iter == 0:
            optimizer.zero_grad()


def main(watch):
    args = SimpleNamespace(batch_size=16, epochs=3, accum_iter=1, mask_ratio=0.75, lr=1.5e-3, min_lr=0.0,
                           warmup_epochs=1, weight_decay=0.05)
    torch.manual_seed(0)
    prep = transforms.Compose([transforms.RandomCrop(8, padding=1), transforms.RandomHorizontalFlip(),
                               transforms.ToTensor()])
    images = datasets.CIFAR10("data", train=True, transform=prep, sizes=(240, 0))
    loader = DataLoader(images, batch_size=args.batch_size, shuffle=True, drop_last=True)
    model = TinyMAE()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=args.weight_decay)
    scaler = ScalerWithNorm()
    with watch(model):
        for epoch in range(args.epochs):
            train_one_epoch(model, loader, optimizer, epoch, scaler, args)
    return [model, optimizer]


from tests.doctor_published import variant  # noqa: E402

VARIANTS = [
    # 15 iterations an epoch in windows of 4: the last 3 are wiped by the next epoch's opening zero_grad (the
    # published loop has no flush; with ImageNet's length it depends on batch size, accum_iter and GPUs)
    variant("accum_iter_4_no_flush", "accumulation_without_flush", ("accum_iter=1,", "accum_iter=4,")),
    variant("zero_grad_only_before_the_epoch", "missing_zero_grad",
            ("        if (it + 1) % accum_iter == 0:\n            optimizer.zero_grad()\n", "")),
]
