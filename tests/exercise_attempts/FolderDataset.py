"""Attempts at Exercise 1.2, the class FolderDataset(folder): each attempt is a whole Dataset class."""
import os
import re
from pathlib import Path

import torch
from torch.utils.data import Dataset


class right_regex_count(Dataset):
    """Counts the names that are a number then .pt; loads i.pt only in __getitem__."""

    def __init__(self, folder):
        self.folder = Path(folder)
        self.n = sum(1 for name in os.listdir(self.folder) if re.fullmatch(r"\d+\.pt", name))

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        example = torch.load(self.folder / f"{i}.pt", weights_only=True)
        return example["x"], example["y"]


class right_probe(Dataset):
    """Probes 0.pt, 1.pt, ... until one is missing (the names are consecutive); lazy loading."""

    def __init__(self, folder):
        self.folder = str(folder)
        n = 0
        while os.path.exists(os.path.join(self.folder, f"{n}.pt")):
            n += 1
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i >= self.n or i < 0:
            raise IndexError(i)
        d = torch.load(os.path.join(self.folder, f"{i}.pt"))
        return (d["x"], d["y"])


class wrong_counts_every_file(Dataset):
    """len(os.listdir(folder)) also counts the README, stats.pt and 0.txt: 3 examples and those give 6."""

    def __init__(self, folder):
        self.folder = Path(folder)

    def __len__(self):
        return len(os.listdir(self.folder))

    def __getitem__(self, i):
        d = torch.load(self.folder / f"{i}.pt")
        return d["x"], d["y"]


class wrong_eager(Dataset):
    """Loads every file in __init__, not on demand: a file rewritten after construction is never seen."""

    def __init__(self, folder):
        names = [n for n in os.listdir(folder) if n.endswith(".pt") and n[:-3].isdigit()]
        self.examples = [torch.load(Path(folder) / f"{i}.pt") for i in range(len(names))]

    def __len__(self):
        return len(self.examples)

    def __getitem__(self, i):
        return self.examples[i]["x"], self.examples[i]["y"]


class wrong_sorted_names(Dataset):
    """dataset[i] reads the i-th name in sorted order: with 11+ files, dataset[2] reads 10.pt, not 2.pt."""

    def __init__(self, folder):
        self.files = sorted(p for p in Path(folder).glob("*.pt") if p.stem.isdigit())

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        d = torch.load(self.files[i])
        return d["x"], d["y"]


class wrong_returns_dict(Dataset):
    """Returns the saved dict {"x", "y"}, not the pair (x, y): any index."""

    def __init__(self, folder):
        self.folder = Path(folder)
        self.n = len([p for p in self.folder.glob("*.pt") if p.stem.isdigit()])

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i >= self.n:
            raise IndexError(i)
        return torch.load(self.folder / f"{i}.pt")


class wrong_one_based(Dataset):
    """Reads (i + 1).pt, as if files started at 1: every example shifted, the last index a FileNotFoundError."""

    def __init__(self, folder):
        self.folder = Path(folder)
        self.n = len([p for p in self.folder.glob("*.pt") if p.stem.isdigit()])

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        d = torch.load(self.folder / f"{i + 1}.pt")
        return d["x"], d["y"]


class wrong_len_is_max_index(Dataset):
    """len = the largest file number, not one more: files 0.pt..4.pt give len 4, not 5."""

    def __init__(self, folder):
        self.folder = Path(folder)
        self.n = max((int(p.stem) for p in self.folder.glob("*.pt") if p.stem.isdigit()), default=0)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        d = torch.load(self.folder / f"{i}.pt")
        return d["x"], d["y"]


class wrong_returns_list(Dataset):
    """Returns [x, y], a list, where the statement asks for the tuple (x, y): any index."""

    def __init__(self, folder):
        self.folder = Path(folder)
        self.n = sum(1 for p in self.folder.iterdir() if p.suffix == ".pt" and p.stem.isdigit())

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i >= self.n:
            raise IndexError(i)
        d = torch.load(self.folder / f"{i}.pt")
        return [d["x"], d["y"]]
