# Mirrors: pytorch/tutorials, beginner_source/basics/quickstart_tutorial.py at commit afcd669d5655, the commit
# the snapshot index holds, retrieved 2026-11-23 (the index records no commit date).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: FashionMNIST through ToTensor, DataLoaders of 64 (unshuffled), a flatten + three-layer ReLU MLP,
# cross-entropy, SGD(1e-3); per epoch a training function (train mode; forward, loss, backward, step, and only
# then zero_grad; the loss printed every 100 batches) and a test function (eval mode, no_grad; per batch the mean
# loss's .item() and the number of correct predictions are summed; the loss sum is divided by the number of
# batches, the correct count by the number of examples). Shrunk: 8x8 stand-in images (256 train, 100 test),
# widths 64-32-32-10 (not 784-512-512-10), 2 epochs (not 5); the model is not saved.
# Added: `with watch(...)` around the epochs.
# Real bug, in the test function: the summed batch means are divided by the number of batches, so the smaller
# last batch (10,000 = 156 x 64 + 16 in the tutorial, 100 = 64 + 36 here) counts as much as a full one.
import torch
from torch import nn
from torch.utils.data import DataLoader

from tests.doctor_published.standins import ToTensor, datasets


class Classifier(nn.Module):
    def __init__(self, pixels: int = 64, width: int = 32, classes: int = 10):
        super().__init__()
        self.flat = nn.Flatten()
        self.mlp = nn.Sequential(nn.Linear(pixels, width), nn.ReLU(),
                                 nn.Linear(width, width), nn.ReLU(),
                                 nn.Linear(width, classes))

    def forward(self, images):
        return self.mlp(self.flat(images))


def main(watch):
    torch.manual_seed(0)
    fit_images = datasets.FashionMNIST(root="fashion", train=True, download=True, transform=ToTensor())
    exam_images = datasets.FashionMNIST(root="fashion", train=False, download=True, transform=ToTensor())
    fit_loader = DataLoader(fit_images, batch_size=64)
    exam_loader = DataLoader(exam_images, batch_size=64)
    dev = "cpu"
    clf = Classifier().to(dev)
    xent = nn.CrossEntropyLoss()
    sgd = torch.optim.SGD(clf.parameters(), lr=1e-3)

    def learn(loader):
        clf.train()
        for k, (images, labels) in enumerate(loader):
            images, labels = images.to(dev), labels.to(dev)
            loss = xent(clf(images), labels)
            loss.backward()
            sgd.step()
            sgd.zero_grad()
            if k % 100 == 0:
                print(f"loss {loss.item():.6f} after {(k + 1) * len(images)} of {len(loader.dataset)} images")

    def examine(loader):
        clf.eval()
        loss_sum, right = 0, 0
        with torch.no_grad():
            for images, labels in loader:
                images, labels = images.to(dev), labels.to(dev)
                scores = clf(images)
                loss_sum += xent(scores, labels).item()
                right += (scores.argmax(1) == labels).float().sum().item()
        loss_sum /= len(loader)
        right /= len(loader.dataset)
        print(f"exam: accuracy {100 * right:.1f}%, loss {loss_sum:.6f}")

    with watch(clf, sgd):
        for epoch in range(2):
            print(f"epoch {epoch + 1}")
            learn(fit_loader)
            examine(exam_loader)
    return [clf, sgd]


from tests.doctor_published import dedent, variant  # noqa: E402

REAL = {"mean_of_batch_means": "quickstart_tutorial.py, test(): the summed batch-mean losses are divided by the "
                               "number of batches"}
EXAM_LOOP = """\
            for images, labels in loader:
                images, labels = images.to(dev), labels.to(dev)
                scores = clf(images)
                loss_sum += xent(scores, labels).item()
                right += (scores.argmax(1) == labels).float().sum().item()
"""
VARIANTS = [
    variant("average_weighted_by_batch_size", set(),
            ("                loss_sum += xent(scores, labels).item()\n",
             "                loss_sum += xent(scores, labels).item() * len(images)\n"),
            ("        loss_sum /= len(loader)\n", "        loss_sum /= len(loader.dataset)\n"),
            fixes={"mean_of_batch_means"}),
    variant("no_zero_grad", "missing_zero_grad", ("            sgd.zero_grad()\n", "")),
    variant("zero_grad_before_step", "zero_grad_after_backward",
            ("            sgd.step()\n            sgd.zero_grad()\n",
             "            sgd.zero_grad()\n            sgd.step()\n")),
    variant("test_without_no_grad", "missing_no_grad",
            ("        with torch.no_grad():\n" + EXAM_LOOP, dedent(EXAM_LOOP))),
    variant("softmax_output_layer", "softmax_before_cross_entropy",
            ("                                 nn.Linear(width, classes))",
             "                                 nn.Linear(width, classes), nn.Softmax(dim=1))")),
    variant("loss_tensors_kept", "graph_attached_logging",
            ("    with watch(clf, sgd):\n", "    losses = []\n    with watch(clf, sgd):\n"),
            ("            sgd.zero_grad()\n", "            sgd.zero_grad()\n            losses.append(loss)\n")),
    variant("test_on_training_data", "data_leakage",      # 256 = 4 x 64: the batches are now equal
            ('exam_images = datasets.FashionMNIST(root="fashion", train=False,',
             'exam_images = datasets.FashionMNIST(root="fashion", train=True,'),
            fixes={"mean_of_batch_means"}),
]
