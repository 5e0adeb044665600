# Mirrors: pytorch/examples, siamese_network/main.py, snapshot at commit 77f55b912142 (2025-08-25); the file last
# changed in 89c7d75 (2025-08-22).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: a Dataset that draws a random image pair in __getitem__ from Python's `random` (same class for an even
# index, different classes for an odd one) over the raw digit images; one convolutional trunk applied to both
# images, the two feature vectors concatenated into a small head and a sigmoid (Xavier init, biases 0.01); BCE;
# Adadelta(1.0) with StepLR(gamma 0.7) stepped per epoch; the same train/test functions as the MNIST example (the
# test sums batch-mean losses under no_grad in eval mode). Shrunk: 8x8 stand-in digits (256 train, 100 test), a
# conv + BatchNorm trunk for resnet18, batch 64 and test batch 1000, 2 epochs (not 14). Added: `with watch(...)`.
# Added to the corpus after the doctor's design was frozen, as a held-out check (see the report of issue 23).
# The published test divides a sum of batch-mean losses by the number of examples (it expects a tiny average
# loss): a wrong scale, but not a bug of the registry, so not a finding.
import random

import numpy as np
import torch
from torch import nn
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, Dataset

from tests.doctor_published.standins import datasets

KNOBS = {"batch": 64, "test_batch": 1000, "epochs": 2, "lr": 1.0, "gamma": 0.7, "seed": 1, "log_every": 10}


class TwinNet(nn.Module):
    """The same trunk on both images; their features side by side -> head -> probability of 'same digit'."""

    def __init__(self, features: int = 8):
        super().__init__()
        self.trunk = nn.Sequential(nn.Conv2d(1, features, 3, stride=2, padding=1, bias=False),
                                   nn.BatchNorm2d(features), nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1))
        self.head = nn.Sequential(nn.Linear(2 * features, 16), nn.ReLU(inplace=True), nn.Linear(16, 1))
        self.squash = nn.Sigmoid()
        for part in (self.trunk, self.head):
            part.apply(_xavier)

    def embed(self, images):
        return self.trunk(images).flatten(1)

    def forward(self, left, right):
        both = torch.cat((self.embed(left), self.embed(right)), dim=1)
        return self.squash(self.head(both))


def _xavier(layer: nn.Module) -> None:
    if isinstance(layer, nn.Linear):
        nn.init.xavier_uniform_(layer.weight)
        layer.bias.data.fill_(0.01)


class DigitPairs(Dataset):
    """Pairs of raw digit images: an even index gives two different images of one digit, an odd one two digits."""

    def __init__(self, folder, train, download=False):
        digits = datasets.MNIST(folder, train=train, download=download)
        self.data = digits.data.unsqueeze(1).clone()
        labels = np.asarray(digits.targets)
        self.members = {digit: np.flatnonzero(labels == digit) for digit in range(10)}

    def __len__(self):
        return len(self.data)

    def _image(self, digit, slot):
        return self.data[self.members[digit][slot]].clone().float()

    def __getitem__(self, index):
        digit = random.randint(0, 9)
        count = len(self.members[digit])
        first = random.randint(0, count - 1)
        if index % 2 == 0:
            second = random.randint(0, count - 1)
            while second == first:
                second = random.randint(0, count - 1)
            return self._image(digit, first), self._image(digit, second), torch.tensor(1.0)
        other = random.randint(0, 9)
        while other == digit:
            other = random.randint(0, 9)
        slot = random.randint(0, len(self.members[other]) - 1)
        return self._image(digit, first), self._image(other, slot), torch.tensor(0.0)


def train_pass(knobs, net, dev, pairs, opt, epoch):
    net.train()
    bce = nn.BCELoss()
    for k, (left, right, same) in enumerate(pairs):
        left, right, same = left.to(dev), right.to(dev), same.to(dev)
        opt.zero_grad()
        p_same = net(left, right).squeeze()
        loss = bce(p_same, same)
        loss.backward()
        opt.step()
        if k % knobs["log_every"] == 0:
            print(f"epoch {epoch} [{k * len(left)}/{len(pairs.dataset)}] bce {loss.item():.5f}")


def test_pass(net, dev, pairs):
    net.eval()
    bce = nn.BCELoss()
    summed, hits = 0, 0
    with torch.no_grad():
        for left, right, same in pairs:
            left, right, same = left.to(dev), right.to(dev), same.to(dev)
            p_same = net(left, right).squeeze()
            summed += bce(p_same, same).sum().item()
            guess = (p_same > 0.5).long()
            hits += (guess == same.long()).sum().item()
    summed /= len(pairs.dataset)
    print(f"test: bce {summed:.4f}, {hits}/{len(pairs.dataset)} pairs right")


def main(watch):
    knobs = dict(KNOBS)
    torch.manual_seed(knobs["seed"])
    random.seed(knobs["seed"])
    dev = torch.device("cpu")
    fit_pairs = DataLoader(DigitPairs("mnist", train=True, download=True), batch_size=knobs["batch"])
    test_pairs = DataLoader(DigitPairs("mnist", train=False), batch_size=knobs["test_batch"])
    net = TwinNet().to(dev)
    opt = torch.optim.Adadelta(net.parameters(), lr=knobs["lr"])
    sched = StepLR(opt, step_size=1, gamma=knobs["gamma"])
    with watch(net, opt, sched):
        for epoch in range(1, knobs["epochs"] + 1):
            train_pass(knobs, net, dev, fit_pairs, opt, epoch)
            test_pass(net, dev, test_pairs)
            sched.step()
    return [net, opt]


from tests.doctor_published import dedent, variant  # noqa: E402

TEST_LOOP = """\
        for left, right, same in pairs:
            left, right, same = left.to(dev), right.to(dev), same.to(dev)
            p_same = net(left, right).squeeze()
            summed += bce(p_same, same).sum().item()
            guess = (p_same > 0.5).long()
            hits += (guess == same.long()).sum().item()
"""
VARIANTS = [
    variant("no_zero_grad", "missing_zero_grad", ("        opt.zero_grad()\n", "")),
    variant("test_in_train_mode", "eval_in_train_mode", ("    net.eval()\n", "")),
    variant("test_with_gradients", "missing_no_grad", ("    with torch.no_grad():\n" + TEST_LOOP, dedent(TEST_LOOP))),
    variant("train_switch_forgotten", "missing_train_switch", ("    net.train()\n", "")),
    variant("step_lr_every_batch", "epoch_schedule_per_batch",
            ("def train_pass(knobs, net, dev, pairs, opt, epoch):",
             "def train_pass(knobs, net, dev, pairs, opt, epoch, sched):"),
            ("        opt.step()\n", "        opt.step()\n        sched.step()\n"),
            ("            train_pass(knobs, net, dev, fit_pairs, opt, epoch)\n",
             "            train_pass(knobs, net, dev, fit_pairs, opt, epoch, sched)\n"),
            ("            sched.step()\n", "")),
    variant("test_pairs_from_training_images", "data_leakage",
            ('DigitPairs("mnist", train=False)', 'DigitPairs("mnist", train=True)')),
    variant("training_losses_kept", "graph_attached_logging",
            ("def train_pass(", "bce_curve = []\n\n\ndef train_pass("),
            ("        loss.backward()\n", "        loss.backward()\n        bce_curve.append(loss)\n")),
]
