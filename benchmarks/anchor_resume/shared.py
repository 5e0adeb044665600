"""The task every library trains (drive.py): 3-class points, an MLP with dropout, optional random augmentation."""
import os
import random
import signal

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

EPOCHS, BATCH, LR, EVERY = 3, 10, 0.02, 4          # 9 batches an epoch; a checkpoint every 4 updates
WORKERS = int(os.environ.get("WORKERS", "0"))
AUGMENT = os.environ.get("AUGMENT", "0") == "1"
KILL_AT = int(os.environ.get("KILL_AT", "0"))      # SIGKILL inside this training forward pass (1-based)


class Jittered(Dataset):
    def __init__(self, n, seed, augment):
        g = torch.Generator().manual_seed(seed)
        self.y = torch.arange(n) % 3
        self.x = torch.randn(n, 4, generator=g) + self.y[:, None].float()
        self.augment = augment

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        x = self.x[i]
        if self.augment:
            x = (x + 0.3 * torch.randn(4)) * float(np.random.uniform(0.8, 1.2))
            if random.random() < 0.5:
                x = x.flip(0)
        return x, self.y[i]


class Killer(nn.Module):
    """Counts training forward passes; SIGKILLs the process at KILL_AT (after a mid-epoch checkpoint)."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        if self.training:
            self.calls += 1
            if self.calls == KILL_AT:
                os.kill(os.getpid(), signal.SIGKILL)
        return x


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(Killer(), nn.Linear(4, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 3))


def data():
    return Jittered(90, 1, AUGMENT), Jittered(30, 2, False)
