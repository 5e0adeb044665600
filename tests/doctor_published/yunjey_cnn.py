# Mirrors: yunjey/pytorch-tutorial, tutorials/02-intermediate/convolutional_neural_network/main.py (last changed
# in 78c6afe), snapshot at commit 0500d3d (2020-07-06).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: MNIST through ToTensor, two conv blocks (conv, BatchNorm, ReLU, max-pool) under one linear layer, Adam,
# cross-entropy; each batch runs forward, loss, zero_grad, backward, step (zero_grad after the forward) and prints
# every 100th step; after all epochs, one test pass in eval mode under no_grad counts correct predictions over the
# examples. Shrunk: 8x8 stand-in digits (256 train, 100 test), 4 and 8 channels, batch 32, 2 epochs (not 5).
# Added: `with watch(...)` around training and test.
import torch
from torch import nn
from torch.utils.data import DataLoader

from tests.doctor_published.standins import datasets, transforms


class ConvNet(nn.Module):
    """[conv 3x3, BatchNorm, ReLU, max-pool 2] x2, flatten, linear."""

    def __init__(self, classes=10):
        super().__init__()
        self.block1 = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2))
        self.block2 = nn.Sequential(nn.Conv2d(4, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Linear(2 * 2 * 8, classes)

    def forward(self, x):
        return self.head(self.block2(self.block1(x)).reshape(len(x), -1))


def main(watch):
    torch.manual_seed(0)
    epochs, batch, rate = 2, 32, 0.001
    fit_set = datasets.MNIST("data", train=True, transform=transforms.ToTensor(), download=True)
    exam_set = datasets.MNIST("data", train=False, transform=transforms.ToTensor())
    fit_loader = DataLoader(fit_set, batch_size=batch, shuffle=True)
    exam_loader = DataLoader(exam_set, batch_size=batch, shuffle=False)
    net = ConvNet()
    criterion = nn.CrossEntropyLoss()
    adam = torch.optim.Adam(net.parameters(), lr=rate)
    with watch(net):
        steps = len(fit_loader)
        for epoch in range(epochs):
            for i, (images, labels) in enumerate(fit_loader):
                scores = net(images)
                loss = criterion(scores, labels)
                adam.zero_grad()
                loss.backward()
                adam.step()
                if (i + 1) % 100 == 0:
                    print(f"epoch {epoch + 1}, step {i + 1}/{steps}, loss {loss.item():.4f}")
        net.eval()
        with torch.no_grad():
            right = seen = 0
            for images, labels in exam_loader:
                guess = net(images).argmax(1)
                seen += labels.size(0)
                right += (guess == labels).sum().item()
            print(f"test accuracy {100 * right / seen} %")
    return [net, adam]


from tests.doctor_published import dedent, variant  # noqa: E402

EXAM = """\
            right = seen = 0
            for images, labels in exam_loader:
                guess = net(images).argmax(1)
                seen += labels.size(0)
                right += (guess == labels).sum().item()
            print(f"test accuracy {100 * right / seen} %")
"""
VARIANTS = [
    variant("test_without_eval", "eval_in_train_mode", ("        net.eval()\n", "")),
    variant("test_without_no_grad", "missing_no_grad", ("        with torch.no_grad():\n" + EXAM, dedent(EXAM))),
    variant("zero_grad_after_backward", "zero_grad_after_backward",
            ("                adam.zero_grad()\n                loss.backward()\n",
             "                loss.backward()\n                adam.zero_grad()\n")),
    variant("no_zero_grad", "missing_zero_grad", ("                adam.zero_grad()\n", "")),
]
