# Mirrors: yunjey/pytorch-tutorial, tutorials/02-intermediate/recurrent_neural_network/main.py (last changed in
# e217e42), snapshot at commit 0500d3d (2020-07-06).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: MNIST images read row by row as sequences, a two-layer LSTM (no dropout) whose zero initial states are
# built in forward, a linear layer on the last step's output; Adam and cross-entropy; forward, loss, zero_grad,
# backward, step per batch; one test pass after training under no_grad without model.eval() (correct here: the
# model has no layer that behaves differently in eval mode). Shrunk: 8x8 stand-in digits (256 train, 100 test),
# hidden size 16, batch 32, 2 epochs (not 2 layers of 128 and 2 epochs of 60,000 images).
# Added: `with watch(...)` around training and test.
import torch
from torch import nn
from torch.utils.data import DataLoader

from tests.doctor_published.standins import datasets, transforms


class RowReader(nn.Module):
    """LSTM over the image's rows; the last step's output goes through a linear layer."""

    def __init__(self, width, hidden, layers, classes):
        super().__init__()
        self.hidden, self.layers = hidden, layers
        self.lstm = nn.LSTM(width, hidden, layers, batch_first=True)
        self.out = nn.Linear(hidden, classes)

    def forward(self, rows):
        h0 = torch.zeros(self.layers, rows.size(0), self.hidden)
        c0 = torch.zeros(self.layers, rows.size(0), self.hidden)
        seq, _ = self.lstm(rows, (h0, c0))
        return self.out(seq[:, -1, :])


def main(watch):
    torch.manual_seed(0)
    side, epochs, batch = 8, 2, 32
    fit_loader = DataLoader(datasets.MNIST("data", train=True, transform=transforms.ToTensor(), download=True),
                            batch_size=batch, shuffle=True)
    exam_loader = DataLoader(datasets.MNIST("data", train=False, transform=transforms.ToTensor()),
                             batch_size=batch, shuffle=False)
    reader = RowReader(side, 16, 2, 10)
    criterion = nn.CrossEntropyLoss()
    adam = torch.optim.Adam(reader.parameters(), lr=0.01)
    with watch(reader):
        for epoch in range(epochs):
            for i, (images, labels) in enumerate(fit_loader):
                rows = images.reshape(-1, side, side)
                loss = criterion(reader(rows), labels)
                adam.zero_grad()
                loss.backward()
                adam.step()
        with torch.no_grad():
            right = seen = 0
            for images, labels in exam_loader:
                guess = reader(images.reshape(-1, side, side)).argmax(1)
                seen += labels.size(0)
                right += (guess == labels).sum().item()
            print(f"test accuracy {100 * right / seen} %")
    return [reader, adam]


from tests.doctor_published import dedent, variant  # noqa: E402

EXAM = """\
            right = seen = 0
            for images, labels in exam_loader:
                guess = reader(images.reshape(-1, side, side)).argmax(1)
                seen += labels.size(0)
                right += (guess == labels).sum().item()
            print(f"test accuracy {100 * right / seen} %")
"""
VARIANTS = [
    variant("test_without_no_grad", "missing_no_grad", ("        with torch.no_grad():\n" + EXAM, dedent(EXAM))),
    variant("no_zero_grad", "missing_zero_grad", ("                adam.zero_grad()\n", "")),
    variant("dropout_between_layers_no_eval", "eval_in_train_mode",
            ("nn.LSTM(width, hidden, layers, batch_first=True)",
             "nn.LSTM(width, hidden, layers, batch_first=True, dropout=0.3)")),
]
