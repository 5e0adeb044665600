# Mirrors: d2l-ai/d2l-en, d2l/torch.py (Module, Classifier, DataModule, FashionMNIST, Trainer.fit/fit_epoch) and
# chapter_multilayer-perceptrons/dropout.md (the dropout MLP), snapshot at commit 23d7a5aecceee (2024-03-16).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: the book's object design: a model base class that keeps its constructor arguments as attributes, plots
# (records) every value it computes after detaching it to NumPy, returns the loss from its training-step method and
# builds its own SGD optimizer; a classifier subclass whose validation step plots loss and accuracy; a data class
# whose loaders shuffle only the training set; a trainer whose fit() builds the optimizer (through the model) and
# loops `for self.epoch in ...`, each epoch in train mode running training step, zero_grad, then backward,
# optional clipping and step inside torch.no_grad(), then in eval mode the validation steps under no_grad; a
# dropout MLP of lazy linear layers. Shrunk: 8x8 stand-in Fashion-MNIST (256 train, 100 validation), hidden widths
# 32 and 16 (not 256 and 256), 2 epochs (not 10); the plots are recorded, not drawn.
# Added: `with watch(model):` around the trainer's fit (the optimizer does not exist before it).
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader

from tests.doctor_published.standins import Board, KeepsArguments, datasets, transforms


class BookModel(nn.Module, KeepsArguments):
    """Base model: forward through `self.net`, record every value computed, make its own optimizer."""

    def __init__(self, train_points_per_epoch=2, val_points_per_epoch=1):
        super().__init__()
        self.keep_arguments()
        self.board = Board()

    def loss(self, scores, y):
        raise NotImplementedError

    def forward(self, x):
        return self.net(x)

    def record(self, name, value, training):
        run = self.trainer
        if training:
            x = run.train_batch_idx / run.num_train_batches
            every = run.num_train_batches / self.train_points_per_epoch
        else:
            x = run.epoch + 1
            every = run.num_val_batches / self.val_points_per_epoch
        self.board.draw(x, value.detach().cpu().numpy(), ("train_" if training else "val_") + name, every_n=int(every))

    def train_step(self, batch):
        *inputs, target = batch
        loss = self.loss(self(*inputs), target)
        self.record("loss", loss, training=True)
        return loss

    def val_step(self, batch):
        *inputs, target = batch
        self.record("loss", self.loss(self(*inputs), target), training=False)

    def make_optimizer(self):
        return torch.optim.SGD(self.parameters(), lr=self.learning_rate)


class BookClassifier(BookModel):
    def val_step(self, batch):
        *inputs, target = batch
        scores = self(*inputs)
        self.record("loss", self.loss(scores, target), training=False)
        self.record("acc", self.accuracy(scores, target), training=False)

    def accuracy(self, scores, y, averaged=True):
        flat = scores.reshape(-1, scores.shape[-1])
        right = (flat.argmax(dim=1).to(y.dtype) == y.reshape(-1)).float()
        return right.mean() if averaged else right

    def loss(self, scores, y, averaged=True):
        return F.cross_entropy(scores.reshape(-1, scores.shape[-1]), y.reshape(-1),
                               reduction="mean" if averaged else "none")


class BookData(KeepsArguments):
    def __init__(self, folder="fashion", num_workers=4):
        self.keep_arguments()

    def loader(self, train):
        raise NotImplementedError

    def train_loader(self):
        return self.loader(train=True)

    def val_loader(self):
        return self.loader(train=False)


class FashionData(BookData):
    def __init__(self, batch=64, side=(28, 28)):
        super().__init__()
        self.keep_arguments()
        as_tensor = transforms.Compose([transforms.ToTensor()])
        self.fit_set = datasets.FashionMNIST(self.folder, train=True, transform=as_tensor, download=True)
        self.val_set = datasets.FashionMNIST(self.folder, train=False, transform=as_tensor, download=True)

    def loader(self, train):
        return DataLoader(self.fit_set if train else self.val_set, self.batch, shuffle=train, num_workers=0)


class BookTrainer(KeepsArguments):
    def __init__(self, epochs, num_gpus=0, clip_at=0):
        self.keep_arguments()
        assert num_gpus == 0, "this stand-in runs on the CPU"

    def fit(self, model, data):
        self.train_batches, self.val_batches = data.train_loader(), data.val_loader()
        self.num_train_batches = len(self.train_batches)
        self.num_val_batches = len(self.val_batches) if self.val_batches is not None else 0
        model.trainer = self
        self.model = model
        self.optim = model.make_optimizer()
        self.epoch = self.train_batch_idx = self.val_batch_idx = 0
        for self.epoch in range(self.epochs):
            self.run_epoch()

    def run_epoch(self):
        self.model.train()
        for batch in self.train_batches:
            loss = self.model.train_step(batch)
            self.optim.zero_grad()
            with torch.no_grad():
                loss.backward()
                if self.clip_at > 0:
                    nn.utils.clip_grad_norm_(self.model.parameters(), self.clip_at)
                self.optim.step()
            self.train_batch_idx += 1
        if self.val_batches is None:
            return
        self.model.eval()
        for batch in self.val_batches:
            with torch.no_grad():
                self.model.val_step(batch)
            self.val_batch_idx += 1


class DropoutMLP(BookClassifier):
    def __init__(self, outputs, hidden_1, hidden_2, p_1, p_2, learning_rate):
        super().__init__()
        self.keep_arguments()
        self.net = nn.Sequential(nn.Flatten(), nn.LazyLinear(hidden_1), nn.ReLU(), nn.Dropout(p_1),
                                 nn.LazyLinear(hidden_2), nn.ReLU(), nn.Dropout(p_2), nn.LazyLinear(outputs))


def main(watch):
    torch.manual_seed(0)
    model = DropoutMLP(outputs=10, hidden_1=32, hidden_2=16, p_1=0.5, p_2=0.5, learning_rate=0.1)
    data = FashionData(batch=64)
    trainer = BookTrainer(epochs=2)
    with watch(model):
        trainer.fit(model, data)
    return [model, trainer.optim]


from tests.doctor_published import variant  # noqa: E402

VARIANTS = [
    variant("zero_grad_after_backward", "zero_grad_after_backward",
            ("            self.optim.zero_grad()\n", ""),
            ("                loss.backward()\n",
             "                loss.backward()\n                self.optim.zero_grad()\n")),
    variant("no_zero_grad", "missing_zero_grad", ("            self.optim.zero_grad()\n", "")),
    variant("validation_in_train_mode", "eval_in_train_mode", ("        self.model.eval()\n", "")),
    variant("validation_with_gradients", "missing_no_grad",
            ("            with torch.no_grad():\n                self.model.val_step(batch)\n",
             "            self.model.val_step(batch)\n")),
    variant("training_switch_only_at_fit", "missing_train_switch",
            ("        for self.epoch in range(self.epochs):\n",
             "        self.model.train()\n        for self.epoch in range(self.epochs):\n"),
            ("    def run_epoch(self):\n        self.model.train()\n", "    def run_epoch(self):\n")),
    variant("validation_data_from_training", "data_leakage",
            ("self.val_set = datasets.FashionMNIST(self.folder, train=False,",
             "self.val_set = datasets.FashionMNIST(self.folder, train=True,")),
]
