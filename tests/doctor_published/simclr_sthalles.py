# Mirrors: sthalles/SimCLR, simclr.py (SimCLR.info_nce_loss, SimCLR.train) with run.py (main: the loader, Adam,
# the CosineAnnealingLR), models/resnet_simclr.py (ResNetSimCLR), data_aug/contrastive_learning_dataset.py and
# data_aug/view_generator.py, snapshot at commit 1848fc934ad8 (2021-02-11); simclr.py and run.py last changed in
# 727cbae12ca5 (2021-02-11).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: a dataset whose transform returns n_views=2 random augmentations of each image (crop, flip, colour jitter
# applied with p=0.8, grayscale with p=0.2, drawn from torch's global RNG); a loader with shuffle and drop_last (the
# loss builds its labels from the nominal batch size); a ResNet backbone built with num_classes=out_dim whose fc is
# wrapped into an MLP projection head (Linear, ReLU, the old fc) inside the model's constructor, before run.py builds
# Adam(lr 3e-4, weight decay 1e-4) over model.parameters(); CosineAnnealingLR(T_max=len(train_loader), eta_min=0);
# no model.train() or model.eval() anywhere (the model trains in the mode it was built in); per batch: the views
# concatenated, under autocast the forward, the InfoNCE logits (normalised features, similarity matrix, diagonal
# dropped, positives first, divided by the temperature 0.07) and cross-entropy against label 0, then zero_grad,
# scaler.scale(loss).backward(), scaler.step, scaler.update; every log_every_n_steps a top-1/top-5 accuracy of the
# logits under no_grad and scalars written to a summary writer (the loss tensor, which the writer turns into a
# number, and scheduler.get_lr()[0]); after each epoch, once the first epochs ("warmup", no actual warmup) are
# over, scheduler.step(); an end-of-epoch log line.
# Shrunk: the CIFAR-10 stand-in (the published script's second dataset choice) of 8x8 images, 48 of them in
# batches of 8 (6 per epoch; STL10's 100,000 unlabeled images in batches of 256 make 390), a one-conv
# BatchNorm backbone for resnet18, out_dim 16, 5 epochs of which the first 1 (not 10) skips the scheduler step,
# logging every 4 steps (not 100), lr 3e-3 (not 3e-4) and a jitter strength s=0.25 (not 1) so that 30 updates
# learn something; pad-and-crop for RandomResizedCrop, a brightness/contrast jitter for
# ColorJitter, no Gaussian blur; bfloat16 autocast with GradScaler("cpu") for CUDA's fp16 (the README's
# --fp16_precision flag); no checkpoint or config file written; the tensorboard writer replaced by one that
# keeps numbers.
# Added: `with watch(model):` around simclr.train.
# Real bug, in run.py: the cosine schedule is sized in updates (T_max=len(train_loader): 390 on STL10) but
# simclr.py steps it once per epoch, after the warmup epochs; over the README's 100 epochs (the default 200) it
# covers 90 (190) of its 390 steps, so the learning rate never anneals (it ends at 0.87 (0.52) of its start;
# here 4 of 6 steps: the last epoch trains at 0.5 of it) (update_schedule_per_epoch; the repository's issues #8
# and #43 report it).
from types import SimpleNamespace

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader

from tests.doctor_published.standins import datasets, transforms


class ColorJitter:
    """Brightness and contrast factors drawn from torch's global RNG, on a float CxHxW image."""

    def __init__(self, brightness, contrast):
        self.brightness, self.contrast = brightness, contrast

    def __call__(self, img):
        b = 1 + (torch.rand(1).item() * 2 - 1) * self.brightness
        c = 1 + (torch.rand(1).item() * 2 - 1) * self.contrast
        mean = img.mean()
        return ((img * b - mean) * c + mean).clamp(0, 1)


class RandomApply:
    def __init__(self, transforms_, p):
        self.transforms, self.p = transforms_, p

    def __call__(self, img):
        if torch.rand(1).item() < self.p:
            for t in self.transforms:
                img = t(img)
        return img


class RandomGrayscale:
    def __init__(self, p):
        self.p = p

    def __call__(self, img):
        return img.mean(0, keepdim=True).expand_as(img).clone() if torch.rand(1).item() < self.p else img


class ContrastiveLearningViewGenerator:
    def __init__(self, base_transform, n_views=2):
        self.base_transform, self.n_views = base_transform, n_views

    def __call__(self, x):
        return [self.base_transform(x) for _ in range(self.n_views)]


class ContrastiveLearningDataset:
    def __init__(self, root_folder):
        self.root_folder = root_folder

    @staticmethod
    def get_simclr_pipeline_transform(size, s=1):
        color_jitter = ColorJitter(0.8 * s, 0.8 * s)
        return transforms.Compose([transforms.RandomCrop(size, padding=1), transforms.RandomHorizontalFlip(),
                                   transforms.ToTensor(), RandomApply([color_jitter], p=0.8),
                                   RandomGrayscale(p=0.2)])

    def get_dataset(self, name, n_views):
        valid_datasets = {"cifar10": lambda: datasets.CIFAR10(
            self.root_folder, train=True, download=True, sizes=(48, 32),
            transform=ContrastiveLearningViewGenerator(self.get_simclr_pipeline_transform(8, s=0.25), n_views))}
        return valid_datasets[name]()


class TinyResNet(nn.Module):
    """Stands in for torchvision's resnet18(num_classes=out_dim): conv, BatchNorm, ReLU, pooling, `fc`."""

    def __init__(self, num_classes):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.avgpool = nn.AdaptiveAvgPool2d(2)
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.avgpool(F.relu(self.bn1(self.conv1(x)))), 1))


class ResNetSimCLR(nn.Module):
    def __init__(self, out_dim):
        super().__init__()
        self.backbone = TinyResNet(num_classes=out_dim)
        dim_mlp = self.backbone.fc.in_features
        self.backbone.fc = nn.Sequential(nn.Linear(dim_mlp, dim_mlp), nn.ReLU(), self.backbone.fc)

    def forward(self, x):
        return self.backbone(x)


class SummaryWriter:
    """Keeps (tag, number, step), as tensorboard turns a scalar tensor into a number."""

    def __init__(self):
        self.scalars = []

    def add_scalar(self, tag, value, global_step):
        self.scalars.append((tag, float(value), global_step))


def accuracy(output, target, topk=(1,)):
    with torch.no_grad():
        _, pred = output.topk(max(topk), 1, True, True)
        correct = pred.t().eq(target.view(1, -1).expand_as(pred.t()))
        return [correct[:k].reshape(-1).float().sum(0, keepdim=True) * (100.0 / target.size(0)) for k in topk]


class SimCLR:
    def __init__(self, *, args, model, optimizer, scheduler):
        self.args, self.model, self.optimizer, self.scheduler = args, model, optimizer, scheduler
        self.writer = SummaryWriter()
        self.criterion = nn.CrossEntropyLoss()

    def info_nce_loss(self, features):
        labels = torch.cat([torch.arange(self.args.batch_size) for _ in range(self.args.n_views)], dim=0)
        labels = (labels[None, :] == labels[:, None]).float()
        features = F.normalize(features, dim=1)
        similarity_matrix = features @ features.T
        mask = torch.eye(labels.shape[0], dtype=torch.bool)
        labels = labels[~mask].view(labels.shape[0], -1)
        similarity_matrix = similarity_matrix[~mask].view(similarity_matrix.shape[0], -1)
        positives = similarity_matrix[labels.bool()].view(labels.shape[0], -1)
        negatives = similarity_matrix[~labels.bool()].view(similarity_matrix.shape[0], -1)
        logits = torch.cat([positives, negatives], dim=1) / self.args.temperature
        return logits, torch.zeros(logits.shape[0], dtype=torch.long)

    def train(self, train_loader):
        scaler = torch.amp.GradScaler("cpu", enabled=self.args.fp16_precision)
        n_iter = 0
        for epoch_counter in range(self.args.epochs):
            for images, _ in train_loader:
                images = torch.cat(images, dim=0)
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.args.fp16_precision):
                    features = self.model(images)
                    logits, labels = self.info_nce_loss(features)
                    loss = self.criterion(logits, labels)
                self.optimizer.zero_grad()
                scaler.scale(loss).backward()
                scaler.step(self.optimizer)
                scaler.update()
                if n_iter % self.args.log_every_n_steps == 0:
                    top1, top5 = accuracy(logits, labels, topk=(1, 5))
                    self.writer.add_scalar("loss", loss, global_step=n_iter)
                    self.writer.add_scalar("acc/top1", top1[0], global_step=n_iter)
                    self.writer.add_scalar("acc/top5", top5[0], global_step=n_iter)
                    self.writer.add_scalar("learning_rate", self.scheduler.get_lr()[0], global_step=n_iter)
                n_iter += 1
            # the "warmup": the first epochs keep the initial learning rate
            if epoch_counter >= 1:
                self.scheduler.step()
            print(f"Epoch: {epoch_counter}\tLoss: {loss}\tTop1 accuracy: {top1[0]}")


def main(watch):
    torch.manual_seed(0)
    args = SimpleNamespace(dataset_name="cifar10", epochs=5, batch_size=8, lr=3e-3, weight_decay=1e-4,
                           fp16_precision=True, out_dim=16, log_every_n_steps=4, temperature=0.07, n_views=2)
    dataset = ContrastiveLearningDataset("./datasets")
    train_dataset = dataset.get_dataset(args.dataset_name, args.n_views)
    train_loader = DataLoader(train_dataset, batch_size=args.batch_size, shuffle=True, drop_last=True)
    model = ResNetSimCLR(out_dim=args.out_dim)
    optimizer = torch.optim.Adam(model.parameters(), args.lr, weight_decay=args.weight_decay)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=len(train_loader), eta_min=0,
                                                           last_epoch=-1)
    simclr = SimCLR(model=model, optimizer=optimizer, scheduler=scheduler, args=args)
    with watch(model):
        simclr.train(train_loader)
    return [model, optimizer]


from tests.doctor_published import variant  # noqa: E402

REAL = {"update_schedule_per_epoch": "run.py sizes CosineAnnealingLR in updates (T_max=len(train_loader)) and "
                                     "simclr.py's train() steps it once per epoch after the warmup epochs: the "
                                     "cosine advances len(train_loader) times too slowly and never anneals"}
MONITOR = """\
            self.model.eval()
            with torch.no_grad():
                hits = 0
                for images, _ in self.monitor_loader:
                    logits, labels = self.info_nce_loss(self.model(torch.cat(images, dim=0)))
                    hits += (logits.argmax(1) == labels).sum().item()
            print(f"Epoch {epoch_counter}: held-out top-1 {hits / (2 * len(self.monitor_loader.dataset))}")
"""
VARIANTS = [
    # issue #43's fix: the cosine counted in epochs, as it is stepped
    variant("cosine_sized_in_epochs", set(),
            ("(optimizer, T_max=len(train_loader),", "(optimizer, T_max=args.epochs - 1,"),
            fixes={"update_schedule_per_epoch"}),
    # both issues' fixes at once: counted in epochs and stepped every batch after the warmup epoch
    variant("cosine_in_epochs_stepped_every_batch", "epoch_schedule_per_batch",
            ("(optimizer, T_max=len(train_loader),", "(optimizer, T_max=args.epochs - 1,"),
            ("                scaler.update()\n",
             "                scaler.update()\n                if epoch_counter >= 1:\n"
             "                    self.scheduler.step()\n"),
            ("            if epoch_counter >= 1:\n                self.scheduler.step()\n", ""),
            fixes={"update_schedule_per_epoch"}),
    # in full precision (run.py's default): with the GradScaler on, step() leaves the unscaled gradient in .grad
    # and the next unscale divides it by the scale again, so a missing zero_grad would carry over only 1/65536 of it
    variant("no_zero_grad_in_full_precision", "missing_zero_grad", ("fp16_precision=True,", "fp16_precision=False,"),
            ("                self.optimizer.zero_grad()\n", "")),
    variant("epoch_losses_kept_as_tensors", "graph_attached_logging",
            ("            for images, _ in train_loader:\n",
             "            epoch_losses = []\n            for images, _ in train_loader:\n"),
            ("                n_iter += 1\n",
             "                n_iter += 1\n                epoch_losses.append(loss)\n"),
            ("\\tLoss: {loss}\\t", "\\tLoss: {torch.stack(epoch_losses).mean()}\\t")),
    variant("projection_head_added_after_the_optimizer", "head_after_optimizer",
            ("        dim_mlp = self.backbone.fc.in_features\n"
             "        self.backbone.fc = nn.Sequential(nn.Linear(dim_mlp, dim_mlp), nn.ReLU(), self.backbone.fc)\n",
             ""),
            ("    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(",
             "    dim_mlp = model.backbone.fc.in_features\n"
             "    model.backbone.fc = nn.Sequential(nn.Linear(dim_mlp, dim_mlp), nn.ReLU(), model.backbone.fc)\n"
             "    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(")),
    # the loop never calls model.train() (it relies on the mode the model was built in), so a held-out monitor
    # that switches to eval mode at the end of the first epoch leaves every later epoch training in eval mode
    variant("held_out_monitor_leaves_eval_mode", "missing_train_switch",
            ("    simclr = SimCLR(model=model, optimizer=optimizer, scheduler=scheduler, args=args)\n",
             "    simclr = SimCLR(model=model, optimizer=optimizer, scheduler=scheduler, args=args)\n"
             "    simclr.monitor_loader = DataLoader(datasets.CIFAR10(\n"
             "        \"./datasets\", train=False, sizes=(48, 32), transform=ContrastiveLearningViewGenerator(\n"
             "            ContrastiveLearningDataset.get_simclr_pipeline_transform(8, s=0.25), args.n_views)),\n"
             "        batch_size=args.batch_size, drop_last=True)\n"),
            ("            print(f\"Epoch: {epoch_counter}\\tLoss: {loss}\\tTop1 accuracy: {top1[0]}\")\n", MONITOR)),
]
