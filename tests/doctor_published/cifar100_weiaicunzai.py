# Mirrors: weiaicunzai/pytorch-cifar100, train.py (train, eval_training and the __main__ block), with utils.py
# (WarmUpLR, get_training_dataloader, get_test_dataloader), conf/global_settings.py (EPOCH, MILESTONES, SAVE_EPOCH)
# and models/resnet.py (the network behind `-net resnet18`), snapshot at commit 11d8418f415b (2022-03-27); train.py
# last changed in 2149cb57f517 (2020-12-29).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: CIFAR-100-shaped images with RandomCrop(padding) / RandomHorizontalFlip / RandomRotation(15) / Normalize for
# training and Normalize only for test, both loaders shuffled (the test loader too, as published) and keeping their
# short last batch; a ResNet (3x3 stem with BatchNorm, residual basic blocks, average pool, fc as the LAST child);
# CrossEntropyLoss; SGD(lr 0.1, momentum 0.9, weight decay 5e-4); MultiStepLR(milestones, gamma 0.2) and the
# repository's WarmUpLR (an LRScheduler subclass, lr = base_lr * last_epoch / (total_iters + 1e-8), total_iters =
# len(train loader) * warm) built right after it, so the first update runs at lr 0; per epoch (counted from 1):
# `if epoch > warm: train_scheduler.step(epoch)` at the START of the epoch (the deprecated explicit-epoch call, which
# sets MultiStepLR's closed form for that epoch), then train(epoch), then eval_training(epoch), then the checkpoints
# (a "best" one once past the second milestone, a "regular" one every SAVE_EPOCH epochs). train(): net.train() once,
# per batch zero_grad, forward, loss, backward, step, then the L2 norms of the LAST child's weight and bias gradients
# written to the SummaryWriter, a progress line with loss.item() and the lr, the scalar loss.item() to the writer, and
# `if epoch <= warm: warmup_scheduler.step()` (per iteration, warmup epochs only); after the batches, a histogram of
# every parameter. eval_training(): decorated with @torch.no_grad(), net.eval(), per batch `test_loss +=
# loss.item()` (the criterion's batch MEAN) and `correct += preds.eq(labels).sum()`; the reported average loss is
# test_loss / len(test dataset) and the accuracy correct / len(test dataset).
# The published loop's one registry bug (REAL): eval_training sums per-batch MEAN losses, so every batch weighs the
# same whatever its size (CIFAR-100's 10,000 test images in batches of 128 end with a batch of 16), and then divides
# that sum by the number of IMAGES, not of batches: the "Average loss" is the mean of batch means scaled down by
# about the batch size (a second, plain scale error on top of the weighting). The accuracy is computed right.
# Shrunk: 16x16 stand-in images (not 32x32) of 20 classes (CIFAR-100's 20 coarse classes, not its 100 fine ones: 320
# training images could not teach 100 classes), 320 training and 200 test images (not 50,000 and 10,000), batch size
# 32 (not 128; the test set ends with a batch of 8), a two-stage ResNet of width 8 and 16 with one basic block per
# stage (not resnet18's four stages of two), 6 epochs with milestones (3, 4, 5) and SAVE_EPOCH 2 (not 200 with (60,
# 120, 160) and 10), warm 1 as published; the rotation is an affine resample of up to 15 degrees; the CPU instead of
# `-gpu`; no worker processes; the SummaryWriter is a stand-in that keeps floats in memory (as the real one converts
# tensors at once), and add_graph is dropped; checkpoints go to memory; no resume.
# Added: `with watch(net):` around the epochs.
import io
import math
from types import SimpleNamespace

import torch
from torch import nn
from torch import optim
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset

CIFAR100_TRAIN_MEAN = (0.5071, 0.4865, 0.4409)
CIFAR100_TRAIN_STD = (0.2673, 0.2564, 0.2762)


def global_settings():
    """conf/global_settings.py, shrunk."""
    return SimpleNamespace(EPOCH=6, MILESTONES=[3, 4, 5], SAVE_EPOCH=2)


def command_line():
    """What `python train.py -net resnet18 -gpu` parses, shrunk (the GPU flag off: the CPU here)."""
    return SimpleNamespace(net="resnet18", gpu=False, b=32, warm=1, lr=0.1, resume=False)


# --- data: CIFAR-100-shaped stand-ins and torchvision-like transforms ------------------------------------------

class SyntheticCIFAR100(Dataset):
    """torchvision.datasets.CIFAR100 stand-in: uint8 HxWx3 images around a class pattern, 20 classes."""

    def __init__(self, train=True, transform=None, size=16, classes=20):
        g = torch.Generator().manual_seed(11)
        colours = torch.rand(classes, 1, 1, 3, generator=g)          # what survives crops, flips and rotations
        coarse = F.interpolate(torch.rand(classes, 3, 4, 4, generator=g), size=(size, size), mode="bilinear")
        patterns = 0.7 * colours + 0.3 * coarse.permute(0, 2, 3, 1)
        g.manual_seed(12 if train else 13)
        count = 320 if train else 200
        self.targets = torch.randint(0, classes, (count,), generator=g)
        noise = torch.rand(count, size, size, 3, generator=g)
        self.data = (0.6 * patterns[self.targets] + 0.4 * noise).mul(255).to(torch.uint8)
        self.transform = transform

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        img = self.data[index]
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


def to_tensor(img):
    """uint8 HxWxC -> float CxHxW in [0, 1]."""
    return img.permute(2, 0, 1).float().div(255)


class Normalize:
    def __init__(self, mean, std):
        self.mean = torch.tensor(mean).view(3, 1, 1)
        self.std = torch.tensor(std).view(3, 1, 1)

    def __call__(self, x):
        return (x - self.mean) / self.std


class RandomCrop:
    def __init__(self, size, padding):
        self.size, self.padding = size, padding

    def __call__(self, img):                     # uint8 HxWxC, as torchvision's PIL path sees it
        chw = F.pad(img.permute(2, 0, 1), [self.padding] * 4)
        top, left = (int(v) for v in torch.randint(0, 2 * self.padding + 1, (2,)))
        return chw[:, top:top + self.size, left:left + self.size].permute(1, 2, 0)


class RandomHorizontalFlip:
    def __call__(self, img):
        return img.flip(1) if torch.rand(1).item() < 0.5 else img


class RandomRotation:
    """Rotate a CxHxW float image by an angle drawn uniformly from [-degrees, degrees] (zeros outside)."""

    def __init__(self, degrees):
        self.degrees = degrees

    def __call__(self, x):
        angle = math.radians((torch.rand(1).item() * 2 - 1) * self.degrees)
        theta = torch.tensor([[math.cos(angle), -math.sin(angle), 0.0], [math.sin(angle), math.cos(angle), 0.0]])
        grid = F.affine_grid(theta[None], [1, *x.shape], align_corners=False)
        return F.grid_sample(x[None], grid, align_corners=False)[0]


def get_training_dataloader(mean, std, batch_size=16, num_workers=2, shuffle=True):
    transform_train = Compose([RandomCrop(16, padding=2), RandomHorizontalFlip(), to_tensor, RandomRotation(15),
                               Normalize(mean, std)])
    cifar100_training = SyntheticCIFAR100(train=True, transform=transform_train)
    return DataLoader(cifar100_training, shuffle=shuffle, num_workers=num_workers, batch_size=batch_size)


def get_test_dataloader(mean, std, batch_size=16, num_workers=2, shuffle=True):
    transform_test = Compose([to_tensor, Normalize(mean, std)])
    cifar100_test = SyntheticCIFAR100(train=False, transform=transform_test)
    return DataLoader(cifar100_test, shuffle=shuffle, num_workers=num_workers, batch_size=batch_size)


# --- model ---------------------------------------------------------------------------------------------------

class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_channels, out_channels, stride=1):
        super().__init__()
        self.residual_function = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False),
            nn.BatchNorm2d(out_channels), nn.ReLU(inplace=True),
            nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False), nn.BatchNorm2d(out_channels))
        self.shortcut = nn.Sequential()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                                          nn.BatchNorm2d(out_channels))

    def forward(self, x):
        return F.relu(self.residual_function(x) + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, block, num_block, num_classes=20):
        super().__init__()
        self.in_channels = 8
        self.conv1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(inplace=True))
        self.conv2_x = self._make_layer(block, 8, num_block[0], 1)
        self.conv3_x = self._make_layer(block, 16, num_block[1], 2)
        self.avg_pool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(16 * block.expansion, num_classes)

    def _make_layer(self, block, out_channels, num_blocks, stride):
        layers = []
        for s in [stride] + [1] * (num_blocks - 1):
            layers.append(block(self.in_channels, out_channels, s))
            self.in_channels = out_channels * block.expansion
        return nn.Sequential(*layers)

    def forward(self, x):
        out = self.conv3_x(self.conv2_x(self.conv1(x)))
        return self.fc(self.avg_pool(out).flatten(1))


def get_network(args):
    if args.net == "resnet18":
        return ResNet(BasicBlock, [1, 1])
    raise SystemExit("the network name you have entered is not supported yet")


class WarmUpLR(optim.lr_scheduler.LRScheduler):
    """utils.WarmUpLR: the lr rises linearly from 0 to base_lr over total_iters steps."""

    def __init__(self, optimizer, total_iters, last_epoch=-1):
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [base_lr * self.last_epoch / (self.total_iters + 1e-8) for base_lr in self.base_lrs]


class SummaryWriter:
    """Stand-in for torch.utils.tensorboard.SummaryWriter: converts what it is given at once, keeps it in memory."""

    def __init__(self, log_dir=None):
        self.scalars, self.histograms = [], []

    def add_scalar(self, tag, value, step):
        self.scalars.append((tag, float(value), step))

    def add_histogram(self, tag, values, step):
        v = values.detach().float()
        self.histograms.append((tag, v.min().item(), v.max().item(), step))

    def close(self):
        pass


# --- the loop ------------------------------------------------------------------------------------------------

def train(epoch, net, cifar100_training_loader, optimizer, loss_function, warmup_scheduler, writer, args):
    net.train()
    for batch_index, (images, labels) in enumerate(cifar100_training_loader):
        optimizer.zero_grad()
        outputs = net(images)
        loss = loss_function(outputs, labels)
        loss.backward()
        optimizer.step()

        n_iter = (epoch - 1) * len(cifar100_training_loader) + batch_index + 1

        last_layer = list(net.children())[-1]
        for name, para in last_layer.named_parameters():
            if "weight" in name:
                writer.add_scalar("LastLayerGradients/grad_norm2_weights", para.grad.norm(), n_iter)
            if "bias" in name:
                writer.add_scalar("LastLayerGradients/grad_norm2_bias", para.grad.norm(), n_iter)

        print("Training Epoch: {epoch} [{seen}/{total}]\tLoss: {:0.4f}\tLR: {:0.6f}".format(
            loss.item(), optimizer.param_groups[0]["lr"], epoch=epoch,
            seen=batch_index * args.b + len(images), total=len(cifar100_training_loader.dataset)))

        writer.add_scalar("Train/loss", loss.item(), n_iter)

        if epoch <= args.warm:
            warmup_scheduler.step()

    for name, param in net.named_parameters():
        layer, _, attr = name.rpartition(".")
        writer.add_histogram(f"{layer}/{attr}", param, epoch)


@torch.no_grad()
def eval_training(net, cifar100_test_loader, loss_function, writer, epoch=0, tb=True):
    net.eval()

    test_loss = 0.0
    correct = 0.0

    for images, labels in cifar100_test_loader:
        outputs = net(images)
        loss = loss_function(outputs, labels)

        test_loss += loss.item()
        _, preds = outputs.max(1)
        correct += preds.eq(labels).sum()

    average_loss = test_loss / len(cifar100_test_loader.dataset)
    accuracy = correct.float() / len(cifar100_test_loader.dataset)
    print("Test set: Epoch: {}, Average loss: {:.4f}, Accuracy: {:.4f}".format(epoch, average_loss, accuracy))
    if tb:
        writer.add_scalar("Test/Average loss", average_loss, epoch)
        writer.add_scalar("Test/Accuracy", accuracy, epoch)
    return accuracy


def main(watch):
    settings, args = global_settings(), command_line()
    torch.manual_seed(0)
    net = get_network(args)

    cifar100_training_loader = get_training_dataloader(CIFAR100_TRAIN_MEAN, CIFAR100_TRAIN_STD, num_workers=0,
                                                       batch_size=args.b, shuffle=True)
    cifar100_test_loader = get_test_dataloader(CIFAR100_TRAIN_MEAN, CIFAR100_TRAIN_STD, num_workers=0,
                                               batch_size=args.b, shuffle=True)

    loss_function = nn.CrossEntropyLoss()
    optimizer = optim.SGD(net.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    train_scheduler = optim.lr_scheduler.MultiStepLR(optimizer, milestones=settings.MILESTONES, gamma=0.2)
    iter_per_epoch = len(cifar100_training_loader)
    warmup_scheduler = WarmUpLR(optimizer, iter_per_epoch * args.warm)

    writer = SummaryWriter(log_dir="runs")
    checkpoints = {}

    best_acc = 0.0
    with watch(net):
        for epoch in range(1, settings.EPOCH + 1):
            if epoch > args.warm:
                train_scheduler.step(epoch)

            train(epoch, net, cifar100_training_loader, optimizer, loss_function, warmup_scheduler, writer, args)
            acc = eval_training(net, cifar100_test_loader, loss_function, writer, epoch)

            if epoch > settings.MILESTONES[1] and best_acc < acc:
                buffer = io.BytesIO()
                torch.save(net.state_dict(), buffer)
                checkpoints[f"{args.net}-{epoch}-best.pth"] = buffer.getvalue()
                best_acc = acc
                continue

            if not epoch % settings.SAVE_EPOCH:
                buffer = io.BytesIO()
                torch.save(net.state_dict(), buffer)
                checkpoints[f"{args.net}-{epoch}-regular.pth"] = buffer.getvalue()
    writer.close()
    return [net, optimizer]


from tests.doctor_published import variant  # noqa: E402

REAL = {"mean_of_batch_means": "train.py, eval_training(): `test_loss += loss.item()` sums the criterion's per-batch "
                               "MEAN losses (each batch weighs the same; CIFAR-100's test set ends with a batch of 16 "
                               "of 128, 8 of 32 here) and the sum is divided by len(test dataset), the number of "
                               "images, not of batches: a mean of batch means, also scaled down by about the batch "
                               "size"}
VARIANTS = [
    # the repository's warmup moved next to the MultiStepLR call, once per epoch: WarmUpLR counts iterations
    # (total_iters = iter_per_epoch * warm), so the whole warmup epoch runs at lr 0 and its one step reaches only
    # base_lr / iter_per_epoch
    variant("warmup_stepped_once_per_epoch", "update_schedule_per_epoch",
            ("        if epoch <= args.warm:\n            warmup_scheduler.step()\n", ""),
            ("            acc = eval_training(net, cifar100_test_loader, loss_function, writer, epoch)\n",
             "            acc = eval_training(net, cifar100_test_loader, loss_function, writer, epoch)\n"
             "            if epoch <= args.warm:\n"
             "                warmup_scheduler.step()\n")),
    # the deprecated step(epoch) "cleaned up": MultiStepLR stepped in the batch loop as the else-branch of the
    # warmup, once per iteration after the warm epoch: its milestones (in epochs) pass within a few batches
    variant("multistep_stepped_per_iteration_after_warmup", "epoch_schedule_per_batch",
            ("        if epoch <= args.warm:\n            warmup_scheduler.step()\n",
             "        if epoch <= args.warm:\n            warmup_scheduler.step()\n"
             "        else:\n            train_scheduler.step()\n"),
            ("warmup_scheduler, writer, args):\n", "warmup_scheduler, writer, args,\n          train_scheduler):\n"),
            ("warmup_scheduler, writer, args)\n",
             "warmup_scheduler, writer, args,\n                  train_scheduler)\n"),
            ("            if epoch > args.warm:\n                train_scheduler.step(epoch)\n", "")),
    variant("eval_training_without_net_eval", "eval_in_train_mode",
            ("    net.eval()\n", "")),
    # train() no longer switches back: from epoch 2 on the BatchNorm layers train on their running statistics
    variant("train_without_net_train", "missing_train_switch",
            ("    net.train()\n", "")),
    variant("eval_training_without_no_grad_decorator", "missing_no_grad",
            ("@torch.no_grad()\ndef eval_training(", "def eval_training(")),
    variant("test_loader_built_on_the_training_split", "data_leakage",
            ("    cifar100_test = SyntheticCIFAR100(train=False, transform=transform_test)\n",
             "    cifar100_test = SyntheticCIFAR100(train=True, transform=transform_test)\n")),
    # not a bug: the test loss weighted by the batch size, so the average is per image (fixes the REAL bug)
    variant("test_loss_weighted_by_batch_size", set(),
            ("        test_loss += loss.item()\n", "        test_loss += loss.item() * images.size(0)\n"),
            fixes={"mean_of_batch_means"}),
    # not a bug: the deprecated step(epoch) at the start of the epoch replaced by a plain step() after every epoch's
    # training and test, the warmup epoch included (each milestone then takes effect one epoch later than published:
    # the usual convention, the same once-per-epoch cadence, and never before the epoch's updates)
    variant("multistep_stepped_after_each_epoch", set(),
            ("            if epoch > args.warm:\n                train_scheduler.step(epoch)\n", ""),
            ("            acc = eval_training(net, cifar100_test_loader, loss_function, writer, epoch)\n",
             "            acc = eval_training(net, cifar100_test_loader, loss_function, writer, epoch)\n"
             "            train_scheduler.step()\n")),
]
