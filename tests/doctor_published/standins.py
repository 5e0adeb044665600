"""Small stand-ins for what the published loops import from libraries the course does not install.

torchvision (datasets with random augmentation), transformers/accelerate/evaluate (dict batches, a model
called with ``**batch`` that returns an output with ``.loss``), gymnasium's CartPole and d2l's bookkeeping
helpers. All are the course's own code, written to the libraries' documented behaviour (nothing is copied from
them; the d2l helpers have names of our own). Each keeps the behaviour the loops rely on: a dataset keeps its
raw examples in ``.data`` and draws its augmentation from torch's global RNG, as torchvision does;
``Accelerator.backward`` calls ``loss.backward()``; a scheduler from ``get_linear_schedule_with_warmup`` is a
``LambdaLR`` with transformers' warmup-then-linear-decay factor. Data are synthetic, tiny and learnable (a
class-dependent pattern plus noise), drawn from their own generator.
"""
from __future__ import annotations

import functools
import math
import sys

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import Dataset


# --- torchvision ---------------------------------------------------------------------------------

class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


class ToTensor:
    """uint8 HxW or HxWxC (tensor or ndarray) -> float CxHxW in [0, 1]."""

    def __call__(self, pic):
        x = torch.as_tensor(np.asarray(pic))
        x = x[None] if x.dim() == 2 else x.permute(2, 0, 1)
        return x.float().div(255)


class Normalize:
    def __init__(self, mean, std):
        self.mean, self.std = torch.tensor(mean)[:, None, None], torch.tensor(std)[:, None, None]

    def __call__(self, x):
        return (x - self.mean) / self.std


class RandomCrop:
    """Pad, then crop at a random offset drawn from torch's global RNG (as torchvision does)."""

    def __init__(self, size, padding=0):
        self.size, self.padding = size, padding

    def __call__(self, x):
        x = torch.as_tensor(np.asarray(x))
        hwc = x.dim() == 3 and x.shape[-1] in (1, 3)
        img = x.permute(2, 0, 1) if hwc else x[None]
        img = F.pad(img, [self.padding] * 4)
        i = torch.randint(0, img.shape[-2] - self.size + 1, size=(1,)).item()
        j = torch.randint(0, img.shape[-1] - self.size + 1, size=(1,)).item()
        img = img[:, i:i + self.size, j:j + self.size]
        return img.permute(1, 2, 0).contiguous() if hwc else img[0].contiguous()


class RandomHorizontalFlip:
    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, x):
        x = torch.as_tensor(np.asarray(x))
        if torch.rand(1) < self.p:
            return x.flip(-2 if x.dim() == 3 and x.shape[-1] in (1, 3) else -1).contiguous()
        return x


class transforms:  # noqa: N801 - stands in for the module
    Compose, ToTensor, Normalize, RandomCrop, RandomHorizontalFlip = (Compose, ToTensor, Normalize, RandomCrop,
                                                                       RandomHorizontalFlip)


def _images(n: int, shape: tuple, classes: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    targets = torch.randint(0, classes, (n,), generator=g)
    patterns = torch.rand((classes,) + shape, generator=g)
    noise = torch.rand((n,) + shape, generator=g)
    data = (0.6 * patterns[targets] + 0.4 * noise).mul(255).to(torch.uint8)
    return data, targets


class _Images(Dataset):
    """torchvision-style: raw uint8 examples in .data, labels in .targets, transform applied in __getitem__."""

    shape, classes, sizes, numpy = (8, 8), 10, (256, 100), False

    def __init__(self, root=None, train=True, download=False, transform=None, sizes=None):
        n = (sizes or self.sizes)[0 if train else 1]
        data, self.targets = _images(n, self.shape, self.classes, 1 if train else 2)
        self.data = data.numpy() if self.numpy else data
        self.transform, self.train = transform, train

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        img, target = self.data[index], int(self.targets[index])
        if self.transform is not None:
            img = self.transform(img)
        return img, target


class MNIST(_Images):
    pass


class FashionMNIST(_Images):
    pass


class CIFAR10(_Images):
    shape, sizes, numpy = (8, 8, 3), (320, 200), True


class datasets:  # noqa: N801
    MNIST, FashionMNIST, CIFAR10 = MNIST, FashionMNIST, CIFAR10


# --- transformers / accelerate / evaluate ---------------------------------------------------------

class BatchEncoding(dict):
    """A dict of tensors whose .to() moves them (transformers' BatchEncoding)."""

    def to(self, device):
        for key, value in self.items():
            self[key] = value.to(device)
        return self


class ModelOutput(dict):
    """A dict whose entries are also attributes (transformers' ModelOutput)."""

    __getattr__ = dict.__getitem__


class TinySequenceClassifier(nn.Module):
    """Stands in for AutoModelForSequenceClassification: embedding, masked mean, dropout, linear head."""

    def __init__(self, vocab=64, width=16, labels=2, dropout=0.1):
        super().__init__()
        self.embeddings = nn.Embedding(vocab, width)
        self.mask_out = nn.Dropout(dropout)
        self.classifier = nn.Linear(width, labels)

    @classmethod
    def from_pretrained(cls, name, return_dict=True, **kwargs):
        return cls(**kwargs)

    def forward(self, input_ids, attention_mask, token_type_ids=None, labels=None):
        mask = attention_mask.unsqueeze(-1).float()
        pooled = (self.embeddings(input_ids) * mask).sum(1) / mask.sum(1)
        logits = self.classifier(self.mask_out(pooled))
        loss = F.cross_entropy(logits, labels) if labels is not None else None
        return ModelOutput(loss=loss, logits=logits) if loss is not None else ModelOutput(logits=logits)


def sentence_pairs(n: int, seed: int, vocab: int = 64) -> list[dict]:
    """Tokenized examples of different lengths; the label is whether token 3 outnumbers token 4."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    for _ in range(n):
        length = int(torch.randint(6, 14, (1,), generator=g))
        ids = torch.randint(5, vocab, (length,), generator=g)
        ids[torch.randint(0, length, (3,), generator=g)] = int(torch.randint(3, 5, (1,), generator=g))
        rows.append({"input_ids": ids.tolist(), "labels": int((ids == 3).sum() > (ids == 4).sum())})
    return rows


def pad_collate(examples: list[dict]) -> BatchEncoding:
    """tokenizer.pad(examples, return_tensors='pt'): pad to the longest example, with an attention mask."""
    longest = max(len(e["input_ids"]) for e in examples)
    ids = torch.zeros(len(examples), longest, dtype=torch.long)
    mask = torch.zeros(len(examples), longest, dtype=torch.long)
    for i, e in enumerate(examples):
        ids[i, :len(e["input_ids"])] = torch.tensor(e["input_ids"])
        mask[i, :len(e["input_ids"])] = 1
    return BatchEncoding(input_ids=ids, attention_mask=mask, labels=torch.tensor([e["labels"] for e in examples]))


def _warmup_then_linear(step: int, *, num_warmup_steps: int, num_training_steps: int) -> float:
    """The lr factor: 0 -> 1 over the warmup steps, then 1 -> 0 at the last training step (and 0 after it)."""
    if step < num_warmup_steps:
        return step / max(1, num_warmup_steps)
    return max(0.0, (num_training_steps - step) / max(1, num_training_steps - num_warmup_steps))


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps, last_epoch=-1):
    """transformers' schedule, built as transformers builds it: a LambdaLR over a functools.partial of the factor
    with the two step counts as keywords."""
    factor = functools.partial(_warmup_then_linear, num_warmup_steps=num_warmup_steps,
                               num_training_steps=num_training_steps)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor, last_epoch)


def set_seed(seed: int) -> None:
    """transformers' set_seed: Python's, NumPy's and torch's generators."""
    import random
    for seeder in (random.seed, np.random.seed, torch.manual_seed):
        seeder(seed)


class DistributedType:
    NO, XLA = "NO", "XLA"


class Accelerator:
    """One process on the CPU: prepare() hands objects back, backward() calls loss.backward()."""

    def __init__(self, cpu=False, mixed_precision=None):
        self.device = torch.device("cpu")
        self.distributed_type = DistributedType.NO
        self.mixed_precision = mixed_precision or "no"

    def prepare(self, *objects):
        return objects

    def backward(self, loss, **kwargs):
        loss.backward(**kwargs)

    def gather_for_metrics(self, tensors):
        return tensors

    def print(self, *args, **kwargs):
        pass

    def end_training(self):
        pass


class Metric:
    """evaluate.load('glue', 'mrpc'): accuracy and F1 over the batches added."""

    def __init__(self):
        self.predictions, self.references = [], []

    def add_batch(self, predictions, references):
        self.predictions.append(predictions)
        self.references.append(references)

    def compute(self):
        p, r = torch.cat(self.predictions), torch.cat(self.references)
        self.predictions, self.references = [], []
        tp = int(((p == 1) & (r == 1)).sum())
        f1 = 2 * tp / max(1, int((p == 1).sum()) + int((r == 1).sum()))
        return {"accuracy": float((p == r).float().mean()), "f1": f1}


class evaluate:  # noqa: N801
    @staticmethod
    def load(*names):
        return Metric()


# --- d2l's bookkeeping and plotting helpers (our own stand-ins, with names of our own) -------------------

class KeepsArguments:
    """Mixin: keep_arguments() copies the arguments of the __init__ that calls it onto the object (the book's
    hyperparameter helper); names starting with an underscore are left out."""

    def keep_arguments(self) -> None:
        caller = sys._getframe(1)
        code = caller.f_code
        for name in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]:
            if name != "self" and not name.startswith("_"):
                setattr(self, name, caller.f_locals[name])


class Board(KeepsArguments):
    """A live plot that draws nothing: it records each point as (x, float(y), curve name)."""

    def __init__(self, **_options):
        self.points: list[tuple] = []

    def draw(self, x, y, curve, every_n=1):
        self.points.append((x, float(y), curve))


class Sums:
    """Running totals of n quantities; every value added is first turned into a Python float."""

    def __init__(self, n: int):
        self.totals = [0.0] * n

    def add(self, *values) -> None:
        self.totals = [total + float(value) for total, value in zip(self.totals, values)]

    def __getitem__(self, i: int) -> float:
        return self.totals[i]


class Plotter:
    """An animated figure that is never drawn."""

    def __init__(self, **_options):
        pass

    def add(self, x, ys) -> None:
        pass


class Stopwatch:
    """Laps of a fixed 1 ms, so that throughput printouts need no clock."""

    def __init__(self):
        self.laps: list[float] = []

    def start(self) -> None:
        pass

    def stop(self) -> None:
        self.laps.append(1e-3)

    def total(self) -> float:
        return sum(self.laps)


def count_correct(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """How many predictions are right: rows of class scores are reduced to their argmax first."""
    guesses = scores.argmax(dim=1) if scores.dim() > 1 and scores.size(1) > 1 else scores
    return float((guesses.to(labels.dtype) == labels).sum())


# --- text files -----------------------------------------------------------------------------------

def text_lines(path: str) -> list[str]:
    """The lines of a stand-in text file (train.txt, valid.txt, test.txt): words that follow a simple chain,
    so a language model has something to learn. Each file has its own seed, so the splits share no lines."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    seed, count = {"train.txt": (1, 60), "valid.txt": (2, 16), "test.txt": (3, 16)}[name]
    g = torch.Generator().manual_seed(seed)
    lines = []
    for _ in range(count):
        word = int(torch.randint(0, 40, (1,), generator=g))
        words = []
        for _ in range(int(torch.randint(5, 12, (1,), generator=g))):
            words.append(f"w{word}")
            word = (3 * word + int(torch.randint(0, 3, (1,), generator=g))) % 40
        lines.append(" ".join(words) + "\n")
    return lines


class TinyResNet(nn.Module):
    """Stands in for torchvision's resnet18: conv, BatchNorm, ReLU, pooling and a final `fc` layer."""

    def __init__(self, classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.avgpool = nn.AdaptiveAvgPool2d(2)
        self.fc = nn.Linear(32, classes)

    def forward(self, x):
        x = self.avgpool(self.relu(self.bn1(self.conv1(x))))
        return self.fc(torch.flatten(x, 1))


class models:  # noqa: N801
    @staticmethod
    def resnet18(weights=None):
        """'Pretrained' weights: a fixed seed of their own, so the global RNG is not touched."""
        with torch.random.fork_rng():
            torch.manual_seed(18)
            return TinyResNet(classes=10)


class ImageFolder(_Images):
    """datasets.ImageFolder over 'train' or 'val': two classes (ants, bees) of 8x8 colour images."""

    shape, classes, sizes, numpy = (8, 8, 3), 2, (160, 64), True

    def __init__(self, root, transform=None):
        super().__init__(train=not root.rstrip("/").endswith("val"), transform=transform)
        self.classes = ["ants", "bees"]


# --- timm and image files -------------------------------------------------------------------------

PET_BREEDS = ("abyssinian", "beagle")


def pet_file_names(data_dir: str, count: int = 120) -> list[str]:
    """os.listdir() of the Oxford-IIIT Pets stand-in: '<breed>_<n>.jpg', the breed alternating."""
    return [f"{data_dir}/{PET_BREEDS[i % 2]}_{i}.jpg" for i in range(count)]


def open_image(fname: str) -> np.ndarray:
    """PIL.Image.open(fname).convert('RGB') for the stand-in: a 10x10 RGB image that depends on the file."""
    number = int(fname.rsplit("_", 1)[1].split(".")[0])
    g = torch.Generator().manual_seed(1000 + number)
    pattern = torch.full((10, 10, 3), 60 + 120 * (number % 2), dtype=torch.float32)
    return (pattern + 60 * torch.rand((10, 10, 3), generator=g)).to(torch.uint8).numpy()


class TimmNet(TinyResNet):
    """timm.create_model('resnet50d', pretrained=True, num_classes=n): get_classifier() and default_cfg."""

    default_cfg = {"mean": (0.485, 0.456, 0.406), "std": (0.229, 0.224, 0.225)}

    def get_classifier(self):
        return self.fc


def create_model(name, pretrained=True, num_classes=1000):
    with torch.random.fork_rng():
        torch.manual_seed(50)
        return TimmNet(classes=num_classes)


class Resize:
    """Resize to a square size by centre-cropping (the stand-in images are already close to it)."""

    def __init__(self, size):
        self.size = size[0] if isinstance(size, (tuple, list)) else size

    def __call__(self, x):
        x = torch.as_tensor(np.asarray(x))
        top = (x.shape[0] - self.size) // 2
        return x[top:top + self.size, top:top + self.size].contiguous()


class RandomResizedCrop(RandomCrop):
    """A random crop of the given size (the stand-in for scale jittering)."""

    def __init__(self, size, scale=(0.08, 1.0)):
        super().__init__(size[0] if isinstance(size, (tuple, list)) else size, padding=0)


# --- gymnasium ------------------------------------------------------------------------------------

class CartPole:
    """gymnasium's CartPole-v1 dynamics (Euler steps of the classic cart-pole equations), seeded per reset."""

    class spec:  # noqa: N801
        reward_threshold = 475.0

    def reset(self, seed=None):
        if seed is not None or not hasattr(self, "rng"):
            self.rng = np.random.default_rng(seed)
        self.state = self.rng.uniform(-0.05, 0.05, size=4)
        return self.state.astype(np.float32), {}

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = 10.0 if action == 1 else -10.0
        cos, sin = math.cos(theta), math.sin(theta)
        temp = (force + 0.05 * theta_dot ** 2 * sin) / 1.1
        theta_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos ** 2 / 1.1))
        x_acc = temp - 0.05 * theta_acc * cos / 1.1
        x, x_dot = x + 0.02 * x_dot, x_dot + 0.02 * x_acc
        theta, theta_dot = theta + 0.02 * theta_dot, theta_dot + 0.02 * theta_acc
        self.state = np.array([x, x_dot, theta, theta_dot])
        terminated = bool(abs(x) > 2.4 or abs(theta) > 12 * 2 * math.pi / 360)
        return self.state.astype(np.float32), 1.0, terminated, False, {}


class gym:  # noqa: N801
    @staticmethod
    def make(name, render_mode=None):
        return CartPole()
