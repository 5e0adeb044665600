# Mirrors: pytorch/examples, imagenet/main.py (train, validate, AverageMeter and main_worker's schedule), snapshot at
# commit 77f55b912142 (2025-08-25); the file last changed in 4206858 (2025-07-07).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: an image folder with random crop and flip for training, a plain one for validation; a BatchNorm network;
# cross-entropy, SGD with momentum and weight decay, StepLR stepped once per epoch after train and validate; meters
# that weight each batch's loss.item() and accuracy by its size; train mode, forward, loss, meters, zero_grad,
# backward, step; validation switches to eval mode and runs under no_grad; the best top-1 accuracy decides the
# checkpoint. Shrunk: 8x8 stand-in ants/bees (160 train, 64 val), batch 24 (so the last batches are smaller),
# 3 epochs with StepLR(step_size=2) (not 90 and 30); the checkpoint stays in memory; no DDP, no worker processes.
# Added: `with watch(...)` around the epochs.
import io

import torch
from torch import nn
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader

from tests.doctor_published.standins import ImageFolder, transforms


class AverageMeter:
    """Current value and size-weighted running average."""

    def __init__(self, name):
        self.name, self.val, self.sum, self.count, self.avg = name, 0, 0, 0, 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def accuracy(output, target):
    with torch.no_grad():
        return (output.argmax(1) == target).float().mean() * 100


def train(train_loader, model, criterion, optimizer, epoch):
    losses, top1 = AverageMeter("Loss"), AverageMeter("Acc@1")
    model.train()
    for i, (images, target) in enumerate(train_loader):
        output = model(images)
        loss = criterion(output, target)
        losses.update(loss.item(), images.size(0))
        top1.update(accuracy(output, target).item(), images.size(0))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: loss {losses.avg:.4f}, acc@1 {top1.avg:.2f}")


def validate(val_loader, model, criterion):
    losses, top1 = AverageMeter("Loss"), AverageMeter("Acc@1")
    model.eval()
    with torch.no_grad():
        for images, target in val_loader:
            output = model(images)
            loss = criterion(output, target)
            losses.update(loss.item(), images.size(0))
            top1.update(accuracy(output, target).item(), images.size(0))
    print(f"test: loss {losses.avg:.4f}, acc@1 {top1.avg:.2f}")
    return top1.avg


def main(watch):
    torch.manual_seed(0)
    normalize = transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
    train_dataset = ImageFolder("data/train", transforms.Compose([
        transforms.RandomCrop(8, padding=1), transforms.RandomHorizontalFlip(), transforms.ToTensor(), normalize]))
    val_dataset = ImageFolder("data/val", transforms.Compose([transforms.ToTensor(), normalize]))
    train_loader = DataLoader(train_dataset, batch_size=24, shuffle=True)
    val_loader = DataLoader(val_dataset, batch_size=24, shuffle=False)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(8, 2))
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), 0.1, momentum=0.9, weight_decay=1e-4)
    scheduler = StepLR(optimizer, step_size=2, gamma=0.1)
    best_acc1, best = 0, io.BytesIO()
    with watch(model):
        for epoch in range(3):
            train(train_loader, model, criterion, optimizer, epoch)
            acc1 = validate(val_loader, model, criterion)
            scheduler.step()
            if acc1 > best_acc1:
                best_acc1 = acc1
                torch.save({"epoch": epoch + 1, "state_dict": model.state_dict(), "best_acc1": best_acc1,
                            "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()}, best)
    return [model, optimizer]


from tests.doctor_published import variant  # noqa: E402

VARIANTS = [
    variant("validate_in_train_mode", "eval_in_train_mode", ("    model.eval()\n", "")),
    variant("train_mode_never_restored", "missing_train_switch", ("    model.train()\n", ""),
            ("    with watch(model):\n", "    model.train()\n    with watch(model):\n")),
    variant("validation_loss_averaged_per_batch", "mean_of_batch_means",
            ("            losses.update(loss.item(), images.size(0))\n            top1.update(accuracy(output, target)"
             ".item(), images.size(0))\n    print(f\"test",
             "            losses.update(loss.item())\n            top1.update(accuracy(output, target)"
             ".item(), images.size(0))\n    print(f\"test")),
    variant("steplr_stepped_per_batch", "epoch_schedule_per_batch",
            ("def train(train_loader, model, criterion, optimizer, epoch):",
             "def train(train_loader, model, criterion, optimizer, epoch, scheduler):"),
            ("        optimizer.step()\n    print", "        optimizer.step()\n        scheduler.step()\n    print"),
            ("            train(train_loader, model, criterion, optimizer, epoch)\n",
             "            train(train_loader, model, criterion, optimizer, epoch, scheduler)\n"),
            ("            scheduler.step()\n", "")),
]
