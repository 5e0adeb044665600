# Mirrors: pytorch/vision, references/segmentation/train.py (train_one_epoch, evaluate, main), the stored version
# at commit e8dd7c6c5c1e (the early form of the reference with an SGD poly schedule in a LambdaLR; the stored
# index gives no date for it, and the repository was too large to fetch here, so no date is given).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: a segmentation model that returns a dict with 'out' and, with --aux-loss, 'aux' (an FCN-style head with
# BatchNorm and Dropout(0.1) on each), both upsampled to the image size; the criterion sums cross-entropy with
# ignore_index 255 over the dict ('out' + 0.5 'aux'); SGD with momentum and weight decay over parameter groups
# (backbone, classifier, and the aux classifier at 10x lr); a LambdaLR poly schedule (1 - x / (len(loader) *
# epochs)) ** 0.9 stepped after every optimizer step; a training loader with a RandomSampler and drop_last, joint
# random flips of image and mask; per batch: forward, criterion, zero_grad, backward, step, scheduler step, the
# loss logged with .item(); per epoch an evaluation in eval mode under no_grad with batch size 1 over a
# SequentialSampler that fills a confusion matrix (pixel counts, so no mean of batch means).
# Shrunk: 8x8 stand-in scenes (24 train, 8 val) with 3 classes and a 255 border, a 2-conv backbone of 8 channels,
# batch 4, 2 epochs (not 30); no distributed mode, no checkpoints, no metric logger.
# Added: `with watch(...)` around the epochs.
from collections import OrderedDict
from types import SimpleNamespace

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset, RandomSampler, SequentialSampler


class Scenes(Dataset):
    """VOC-style stand-in: an RGB image with a coloured square of one class on background 0; the square's outline
    in the mask is 255 (ignored); joint random horizontal flips for training, drawn from torch's global RNG."""

    def __init__(self, count, seed, train):
        g = torch.Generator().manual_seed(seed)
        self.images, self.masks, self.train = [], [], train
        colours = torch.tensor([[0.2, 0.2, 0.2], [0.9, 0.1, 0.1], [0.1, 0.8, 0.2]])
        for _ in range(count):
            cls = int(torch.randint(1, 3, (1,), generator=g))
            top, left = (int(v) for v in torch.randint(0, 4, (2,), generator=g))
            mask = torch.zeros(8, 8, dtype=torch.long)
            mask[top:top + 4, left:left + 4] = 255
            mask[top + 1:top + 3, left + 1:left + 3] = cls
            img = colours[torch.where(mask == 255, cls, mask)].permute(2, 0, 1)
            self.images.append(img + 0.2 * torch.randn(3, 8, 8, generator=g))
            self.masks.append(mask)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, k):
        img, mask = self.images[k], self.masks[k]
        if self.train and torch.rand(1) < 0.5:
            img, mask = img.flip(-1), mask.flip(-1)
        mean, std = torch.tensor([0.485, 0.456, 0.406]), torch.tensor([0.229, 0.224, 0.225])
        return (img - mean[:, None, None]) / std[:, None, None], mask


def head(in_ch, classes):
    return nn.Sequential(nn.Conv2d(in_ch, in_ch // 2, 3, padding=1, bias=False), nn.BatchNorm2d(in_ch // 2),
                         nn.ReLU(), nn.Dropout(0.1), nn.Conv2d(in_ch // 2, classes, 1))


class SmallFCN(nn.Module):
    def __init__(self, num_classes, aux_loss):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                                      nn.Conv2d(8, 8, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(8),
                                      nn.ReLU())
        self.classifier = head(8, num_classes)
        self.aux_classifier = head(8, num_classes) if aux_loss else None

    def forward(self, x):
        feats = self.backbone(x)
        result = OrderedDict(out=F.interpolate(self.classifier(feats), size=x.shape[-2:], mode="bilinear",
                                               align_corners=False))
        if self.aux_classifier is not None:
            result["aux"] = F.interpolate(self.aux_classifier(feats), size=x.shape[-2:], mode="bilinear",
                                          align_corners=False)
        return result


def criterion(inputs, target):
    losses = {name: F.cross_entropy(x, target, ignore_index=255) for name, x in inputs.items()}
    if len(losses) == 1:
        return losses["out"]
    return losses["out"] + 0.5 * losses["aux"]


class ConfusionMatrix:
    def __init__(self, num_classes):
        self.n, self.mat = num_classes, None

    def update(self, a, b):
        if self.mat is None:
            self.mat = torch.zeros((self.n, self.n), dtype=torch.int64)
        k = (a >= 0) & (a < self.n)
        self.mat += torch.bincount(self.n * a[k] + b[k], minlength=self.n ** 2).reshape(self.n, self.n)

    def __str__(self):
        h = self.mat.float()
        iou = torch.diag(h) / (h.sum(1) + h.sum(0) - torch.diag(h))
        return f"global acc {100 * torch.diag(h).sum() / h.sum():.1f}, mean IoU {100 * iou.mean():.1f}"


def evaluate(model, data_loader, num_classes):
    model.eval()
    confmat = ConfusionMatrix(num_classes)
    with torch.no_grad():
        for image, target in data_loader:
            output = model(image)
            output = output["out"]
            confmat.update(target.flatten(), output.argmax(1).flatten())
    return confmat


def train_one_epoch(model, criterion, optimizer, data_loader, lr_scheduler, epoch):
    model.train()
    for image, target in data_loader:
        output = model(image)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        lr_scheduler.step()
        print(f"epoch {epoch} loss {loss.item():.4f} lr {optimizer.param_groups[0]['lr']:.5f}")


def main(watch):
    args = SimpleNamespace(batch_size=4, epochs=2, lr=0.05, momentum=0.9, weight_decay=1e-4, aux_loss=True)
    torch.manual_seed(0)
    dataset, dataset_test, num_classes = Scenes(24, 1, train=True), Scenes(8, 2, train=False), 3
    data_loader = DataLoader(dataset, batch_size=args.batch_size, sampler=RandomSampler(dataset), drop_last=True)
    data_loader_test = DataLoader(dataset_test, batch_size=1, sampler=SequentialSampler(dataset_test))
    model = SmallFCN(num_classes, aux_loss=args.aux_loss)
    params_to_optimize = [
        {"params": [p for p in model.backbone.parameters() if p.requires_grad]},
        {"params": [p for p in model.classifier.parameters() if p.requires_grad]},
    ]
    if args.aux_loss:
        params = [p for p in model.aux_classifier.parameters() if p.requires_grad]
        params_to_optimize.append({"params": params, "lr": args.lr * 10})
    optimizer = torch.optim.SGD(params_to_optimize, lr=args.lr, momentum=args.momentum,
                                weight_decay=args.weight_decay)
    lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda x: (1 - x / (len(data_loader) * args.epochs)) ** 0.9)
    with watch(model):
        for epoch in range(args.epochs):
            train_one_epoch(model, criterion, optimizer, data_loader, lr_scheduler, epoch)
            confmat = evaluate(model, data_loader_test, num_classes=num_classes)
            print(confmat)
    return [model, optimizer]


from tests.doctor_published import dedent, variant  # noqa: E402

EVAL_LOOP = """\
        for image, target in data_loader:
            output = model(image)
            output = output["out"]
            confmat.update(target.flatten(), output.argmax(1).flatten())
"""

VARIANTS = [
    variant("evaluate_without_eval", "eval_in_train_mode", ("    model.eval()\n", "")),
    variant("evaluate_without_no_grad", "missing_no_grad",
            ("    with torch.no_grad():\n" + EVAL_LOOP, dedent(EVAL_LOOP))),
    variant("zero_grad_after_backward", "zero_grad_after_backward",
            ("        optimizer.zero_grad()\n        loss.backward()\n",
             "        loss.backward()\n        optimizer.zero_grad()\n")),
    variant("epoch_milestones_stepped_per_batch", "epoch_schedule_per_batch",
            ("    lr_scheduler = torch.optim.lr_scheduler.LambdaLR(\n"
             "        optimizer, lambda x: (1 - x / (len(data_loader) * args.epochs)) ** 0.9)\n",
             "    lr_scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[1], gamma=0.1)\n")),
    variant("pixel_accuracy_averaged_per_batch", "mean_of_batch_means",
            ("DataLoader(dataset_test, batch_size=1,", "DataLoader(dataset_test, batch_size=3,"),
            ("    confmat = ConfusionMatrix(num_classes)\n", "    accs = []\n"),
            ("            confmat.update(target.flatten(), output.argmax(1).flatten())\n    return confmat\n",
             "            accs.append((output.argmax(1) == target)[target != 255].float().mean().item())\n"
             "    return sum(accs) / len(accs)\n")),
]
