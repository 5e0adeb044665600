# Mirrors: kuangliu/pytorch-cifar, main.py (last changed in 7ad1b9c, 2020-11-24) and models/resnet.py's basic
# residual block, snapshot at commit 49b7aa97b0c1 (2021-02-25).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: CIFAR-10 with random crop and horizontal flip for training, normalisation for both; a residual basic block
# (two 3x3 conv + BatchNorm, a 1x1 projection shortcut) under a linear classifier; cross-entropy, SGD(0.1, momentum
# 0.9, weight decay 5e-4), CosineAnnealingLR(T_max = the number of epochs) stepped after each epoch's train and
# test functions; both functions keep running sums of loss.item() and correct predictions and, after every batch,
# format a progress line with the running mean (the loss sum divided by the number of batches so far); the test
# function runs in eval mode under no_grad and checkpoints {weights, accuracy, epoch} on a new best accuracy.
# Shrunk: 8x8 stand-in CIFAR-10 (320 train, 200 test images), one basic block of width 8 for the network, 2
# epochs with T_max=2 (not 200 and 200), no worker processes, the checkpoint written to memory.
# Added: `with watch(...)` around the epochs.
import io

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader

from tests.doctor_published.standins import datasets, transforms

CIFAR_MEAN, CIFAR_STD = (0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010)


class ResidualPair(nn.Module):
    """conv-BN-ReLU, conv-BN, plus the input (projected by a strided 1x1 conv when the shape changes), ReLU."""

    def __init__(self, c_in: int, c_out: int, stride: int = 1):
        super().__init__()
        self.a = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.a_norm = nn.BatchNorm2d(c_out)
        self.b = nn.Conv2d(c_out, c_out, 3, stride=1, padding=1, bias=False)
        self.b_norm = nn.BatchNorm2d(c_out)
        self.skip = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.skip = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x):
        y = self.b_norm(self.b(F.relu(self.a_norm(self.a(x)))))
        return F.relu(y + self.skip(x))


class SmallResNet(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.block = ResidualPair(3, 8, stride=2)
        self.classify = nn.Linear(8 * 4 * 4, classes)

    def forward(self, images):
        return self.classify(self.block(images).flatten(1))


def show_progress(step: int, steps: int, line: str) -> None:
    """Where the script redraws its terminal progress bar; here nothing is drawn."""


def main(watch):
    torch.manual_seed(0)
    dev = "cpu"
    best_accuracy, first_epoch = 0, 0
    augment = transforms.Compose([transforms.RandomCrop(8, padding=1), transforms.RandomHorizontalFlip(),
                                  transforms.ToTensor(), transforms.Normalize(CIFAR_MEAN, CIFAR_STD)])
    plain = transforms.Compose([transforms.ToTensor(), transforms.Normalize(CIFAR_MEAN, CIFAR_STD)])
    train_images = datasets.CIFAR10(root="cifar", train=True, download=True, transform=augment)
    test_images = datasets.CIFAR10(root="cifar", train=False, download=True, transform=plain)
    train_batches = DataLoader(train_images, batch_size=128, shuffle=True, num_workers=0)
    test_batches = DataLoader(test_images, batch_size=100, shuffle=False, num_workers=0)

    net = SmallResNet().to(dev)
    xent = nn.CrossEntropyLoss()
    sgd = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(sgd, T_max=2)

    def train_epoch(epoch):
        print(f"epoch {epoch}")
        net.train()
        loss_sum, right, seen = 0, 0, 0
        for k, (images, labels) in enumerate(train_batches):
            images, labels = images.to(dev), labels.to(dev)
            sgd.zero_grad()
            scores = net(images)
            loss = xent(scores, labels)
            loss.backward()
            sgd.step()
            loss_sum += loss.item()
            seen += labels.size(0)
            right += (scores.argmax(1) == labels).sum().item()
            show_progress(k, len(train_batches), f"loss {loss_sum / (k + 1):.3f}, {100 * right / seen:.2f}% right")

    def test_epoch(epoch):
        nonlocal best_accuracy
        net.eval()
        loss_sum, right, seen = 0, 0, 0
        with torch.no_grad():
            for k, (images, labels) in enumerate(test_batches):
                images, labels = images.to(dev), labels.to(dev)
                scores = net(images)
                loss = xent(scores, labels)
                loss_sum += loss.item()
                seen += labels.size(0)
                right += (scores.argmax(1) == labels).sum().item()
                show_progress(k, len(test_batches), f"loss {loss_sum / (k + 1):.3f}, {100 * right / seen:.2f}% right")
        accuracy = 100 * right / seen
        if accuracy > best_accuracy:
            torch.save({"weights": net.state_dict(), "accuracy": accuracy, "epoch": epoch}, io.BytesIO())
            best_accuracy = accuracy

    with watch(net, sgd, cosine):
        for epoch in range(first_epoch, first_epoch + 2):
            train_epoch(epoch)
            test_epoch(epoch)
            cosine.step()
    return [net, sgd]


from tests.doctor_published import variant  # noqa: E402

VARIANTS = [
    variant("test_in_train_mode", "eval_in_train_mode", ("        net.eval()\n", "")),
    variant("cosine_stepped_every_batch", "epoch_schedule_per_batch",
            ("            sgd.step()\n", "            sgd.step()\n            cosine.step()\n"),
            ("            test_epoch(epoch)\n            cosine.step()\n", "            test_epoch(epoch)\n")),
    variant("test_batch_of_64", "mean_of_batch_means",
            ("DataLoader(test_images, batch_size=100,", "DataLoader(test_images, batch_size=64,")),
    variant("no_zero_grad", "missing_zero_grad", ("            sgd.zero_grad()\n", "")),
    variant("train_loss_tensor", "graph_attached_logging",
            ("            loss_sum += loss.item()\n            seen",
             "            loss_sum += loss\n            seen")),
    variant("test_on_training_images", {"data_leakage", "mean_of_batch_means"},     # 320 = 3 x 100 + 20
            ('datasets.CIFAR10(root="cifar", train=False,', 'datasets.CIFAR10(root="cifar", train=True,')),
]
