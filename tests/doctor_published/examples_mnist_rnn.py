# Mirrors: pytorch/examples, mnist_rnn/main.py, snapshot at commit 77f55b912142 (2025-08-25); the file last changed
# in 65722fe (2025-04-30).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: MNIST read row by row by an LSTM whose last step goes through BatchNorm1d, dropout, two linear layers and
# log-softmax; Adadelta with StepLR(gamma 0.7) stepped once per epoch after a training pass and a test pass; the
# training pass in train mode zeroes, runs forward, NLL, backward and step per batch and prints every 10th batch;
# the test pass in eval mode under no_grad sums per-example NLL and divides by the number of examples. Shrunk: 8x8
# stand-in digits (256 train, 100 test), hidden size 16, batch 32 and 50, 2 epochs (not 14).
# Added: `with watch(...)` around the epochs.
import torch
from torch import nn
from torch.nn import functional as F
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader

from tests.doctor_published.standins import datasets, transforms


class RowLSTM(nn.Module):
    def __init__(self, side=8, hidden=16):
        super().__init__()
        self.side = side
        self.rnn = nn.LSTM(input_size=side, hidden_size=hidden, batch_first=True)
        self.batchnorm = nn.BatchNorm1d(hidden)
        self.dropout1, self.dropout2 = nn.Dropout(0.25), nn.Dropout(0.5)
        self.fc1, self.fc2 = nn.Linear(hidden, 12), nn.Linear(12, 10)

    def forward(self, images):
        out, _ = self.rnn(images.reshape(-1, self.side, self.side))
        h = self.dropout1(self.batchnorm(out[:, -1, :]))
        return F.log_softmax(self.fc2(self.dropout2(F.relu(self.fc1(h)))), dim=1)


def train(model, loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(loader):
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()
        if batch_idx % 10 == 0:
            print(f"epoch {epoch} [{batch_idx * len(data)}/{len(loader.dataset)}] loss {loss.item():.6f}")


def test(model, loader):
    model.eval()
    test_loss = correct = 0
    with torch.no_grad():
        for data, target in loader:
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            correct += output.argmax(dim=1, keepdim=True).eq(target.view(-1, 1)).sum().item()
    test_loss /= len(loader.dataset)
    print(f"test: average loss {test_loss:.4f}, accuracy {correct}/{len(loader.dataset)}")


def main(watch):
    torch.manual_seed(1)
    prep = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
    train_loader = DataLoader(datasets.MNIST("data", train=True, download=True, transform=prep), batch_size=32,
                              shuffle=True)
    test_loader = DataLoader(datasets.MNIST("data", train=False, transform=prep), batch_size=50)
    model = RowLSTM()
    optimizer = torch.optim.Adadelta(model.parameters(), lr=0.1)
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
    with watch(model):
        for epoch in range(1, 3):
            train(model, train_loader, optimizer, epoch)
            test(model, test_loader)
            scheduler.step()
    return [model, optimizer]


from tests.doctor_published import variant  # noqa: E402

VARIANTS = [
    variant("test_in_train_mode", "eval_in_train_mode", ("    model.eval()\n", "")),
    variant("train_mode_never_restored", "missing_train_switch", ("    model.train()\n", ""),
            ("    with watch(model):\n", "    model.train()\n    with watch(model):\n")),
    variant("scheduler_before_the_first_step", "scheduler_before_optimizer",
            ("        for epoch in range(1, 3):\n            train(", "        for epoch in range(1, 3):\n"
             "            scheduler.step()\n            train("),
            ("            test(model, test_loader)\n            scheduler.step()\n", "            test(model, test_loader)\n")),
    variant("test_loss_as_mean_of_batch_means", "mean_of_batch_means",
            ('F.nll_loss(output, target, reduction="sum").item()', "F.nll_loss(output, target).item()"),
            ("batch_size=50)", "batch_size=32)"),
            ("    test_loss /= len(loader.dataset)\n", "    test_loss /= len(loader)\n")),
]
