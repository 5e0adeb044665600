# Mirrors: huggingface/accelerate, examples/cv_example.py, snapshot at commit 16cb6eb80dd9 (2026-07-24); the file
# last changed in 445ef713 (2026-02-06).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: a Dataset over image file names that opens the file, transforms it and takes the label from the file name
# in __getitem__, returning a dict {image, label}; a seeded NumPy permutation splits the names 80/20; random
# resized crops for training, a deterministic resize for evaluation; a timm model frozen except its classifier,
# batches normalised by hand with the model's mean and std; Adam at lr/25 with OneCycleLR(max_lr=lr) stepped after
# every update; everything passed through accelerator.prepare(); per batch accelerator.backward(loss), step,
# schedule step, zero_grad; evaluation in eval mode with the forward under no_grad, correct predictions summed as
# a tensor and read with .item() at the end. Shrunk: 120 stand-in 10x10 pet images of 2 breeds (not the
# Oxford-IIIT Pets files), 8x8 crops (not 224), a tiny conv + BatchNorm network for resnet50d, batch 16 (not 64),
# 2 epochs (not 3), no worker processes. Added: `with watch(...)` around the epochs.
import os
import re

import numpy as np
import torch
from torch.nn import functional as F
from torch.optim.lr_scheduler import OneCycleLR
from torch.utils.data import DataLoader, Dataset

from tests.doctor_published.standins import (Accelerator, Compose, RandomResizedCrop, Resize, ToTensor, create_model,
                                             open_image, pet_file_names, set_seed)

BREED = re.compile(r"^(.+)_\d+\.jpg$")


def breed_of(path: str) -> str:
    """'<folder>/beagle_12.jpg' -> 'beagle'."""
    return BREED.match(os.path.basename(path)).group(1)


class PetImages(Dataset):
    def __init__(self, paths, prepare=None, breed_ids=None):
        self.paths, self.prepare, self.breed_ids = paths, prepare, breed_ids

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        path = self.paths[i]
        picture = open_image(path)
        if self.prepare is not None:
            picture = self.prepare(picture)
        breed = breed_of(path)
        return {"image": picture, "label": self.breed_ids[breed] if self.breed_ids is not None else breed}


def fine_tune(hp: dict, folder: str, run_on_cpu: bool, precision, watch):
    acc = Accelerator(cpu=run_on_cpu, mixed_precision=precision)
    lr, epochs, batch = hp["lr"], int(hp["epochs"]), int(hp["batch"])
    side = hp["side"] if isinstance(hp["side"], (list, tuple)) else (hp["side"], hp["side"])
    paths = pet_file_names(folder)
    breed_ids = {breed: k for k, breed in enumerate(sorted({breed_of(p) for p in paths}))}
    set_seed(int(hp["seed"]))
    order = np.random.permutation(len(paths))
    cut = int(0.8 * len(paths))
    fit_part, check_part = order[:cut], order[cut:]
    fit_set = PetImages([paths[k] for k in fit_part], Compose([RandomResizedCrop(side, scale=(0.5, 1.0)), ToTensor()]),
                        breed_ids)
    check_set = PetImages([paths[k] for k in check_part], Compose([Resize(side), ToTensor()]), breed_ids)
    fit = DataLoader(fit_set, shuffle=True, batch_size=batch, num_workers=0)
    check = DataLoader(check_set, shuffle=False, batch_size=batch, num_workers=0)

    net = create_model("resnet50d", pretrained=True, num_classes=len(breed_ids)).to(acc.device)
    for p in net.parameters():
        p.requires_grad = False
    for p in net.get_classifier().parameters():
        p.requires_grad = True
    centre = torch.tensor(net.default_cfg["mean"]).view(1, -1, 1, 1).to(acc.device)
    spread = torch.tensor(net.default_cfg["std"]).view(1, -1, 1, 1).to(acc.device)
    adam = torch.optim.Adam(params=net.parameters(), lr=lr / 25)
    one_cycle = OneCycleLR(optimizer=adam, max_lr=lr, epochs=epochs, steps_per_epoch=len(fit))
    net, adam, fit, check, one_cycle = acc.prepare(net, adam, fit, check, one_cycle)

    with watch(net, adam, one_cycle):
        for epoch in range(epochs):
            net.train()
            for batch_dict in fit:
                batch_dict = {key: value.to(acc.device) for key, value in batch_dict.items()}
                loss = F.cross_entropy(net((batch_dict["image"] - centre) / spread), batch_dict["label"])
                acc.backward(loss)
                adam.step()
                one_cycle.step()
                adam.zero_grad()

            net.eval()
            right, seen = 0, 0
            for batch_dict in check:
                batch_dict = {key: value.to(acc.device) for key, value in batch_dict.items()}
                pixels = (batch_dict["image"] - centre) / spread
                with torch.no_grad():
                    scores = net(pixels)
                guesses, truth = acc.gather_for_metrics((scores.argmax(dim=-1), batch_dict["label"]))
                hit = guesses == truth
                seen += hit.shape[0]
                right += hit.long().sum()
            acc.print(f"epoch {epoch}: {100 * right.item() / seen:.2f}% right")
    acc.end_training()
    return [net, adam]


def main(watch):
    hp = {"lr": 3e-2, "epochs": 2, "seed": 42, "batch": 16, "side": 8}
    return fine_tune(hp, folder="pets", run_on_cpu=True, precision=None, watch=watch)


from tests.doctor_published import variant  # noqa: E402

UPDATE = ("                acc.backward(loss)\n                adam.step()\n                one_cycle.step()\n"
          "                adam.zero_grad()\n")
VARIANTS = [
    variant("one_cycle_per_epoch", "update_schedule_per_epoch",
            ("                one_cycle.step()\n", ""),
            ("            net.eval()\n", "            one_cycle.step()\n            net.eval()\n")),
    variant("scheduler_before_the_step", "scheduler_before_optimizer",
            ("                adam.step()\n                one_cycle.step()\n",
             "                one_cycle.step()\n                adam.step()\n")),
    variant("zero_grad_between_backward_and_step", "zero_grad_after_backward",
            (UPDATE, "                acc.backward(loss)\n                adam.zero_grad()\n"
                     "                adam.step()\n"
                     "                one_cycle.step()\n")),
    variant("evaluation_in_train_mode", "eval_in_train_mode", ("            net.eval()\n", "")),
    variant("evaluation_with_gradients", "missing_no_grad",
            ("                with torch.no_grad():\n                    scores = net(pixels)\n",
             "                scores = net(pixels)\n")),
    variant("validation_split_overlaps_training", "data_leakage",
            ("fit_part, check_part = order[:cut], order[cut:]",
             "fit_part, check_part = order[:cut], order[cut - 12:]")),
]
