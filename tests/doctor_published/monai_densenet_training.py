# Mirrors: Project-MONAI/tutorials, 3d_classification/torch/densenet_training_array.py (last changed in 4b2771ac,
# 2023-01-21), snapshot at commit b3c6c998 (2026-08-14).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: an image dataset built from a list of file names and a label array (the first ten files train, the last
# ten validate), a random 90-degree rotation for training only, a first batch drawn once from a check loader to
# print its shape; a 3-D classifier with BatchNorm; cross-entropy and Adam; per batch: zero_grad, forward, loss,
# backward, step, loss.item() summed and printed; the epoch's mean training loss divided by the number of steps;
# every second epoch, eval mode under no_grad, correct predictions counted over examples, the best weights saved.
# Shrunk: 8x8x8 stand-in volumes made from each file name, batch 2, 4 epochs (not 96^3 volumes, DenseNet121 and 5
# epochs); no worker processes, no TensorBoard, the best weights kept in memory.
# Added: `with watch(...)` around the epochs.
import io

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class VolumeFiles(Dataset):
    """Stand-in for monai.data.ImageDataset: reads the volume behind each file name, applies the transform."""

    def __init__(self, image_files, labels, transform=None):
        self.image_files, self.labels, self.transform = image_files, labels, transform

    def __len__(self):
        return len(self.image_files)

    def __getitem__(self, i):
        number = int(self.image_files[i].split("IXI")[1][:3])
        g = torch.Generator().manual_seed(number)
        volume = torch.rand(8, 8, 8, generator=g) + 0.8 * float(self.labels[i]) * torch.linspace(0, 1, 8)
        volume = (volume - volume.min()) / (volume.max() - volume.min())      # ScaleIntensity
        volume = volume[None]                                                 # EnsureChannelFirst
        if self.transform is not None:
            volume = self.transform(volume)
        return volume, self.labels[i]


def rand_rotate90(volume):
    """RandRotate90: a quarter turn in the first spatial plane, with probability 0.1, from torch's RNG."""
    return torch.rot90(volume, 1, (1, 2)) if torch.rand(1).item() < 0.1 else volume


def small_3d_net():
    return nn.Sequential(nn.Conv3d(1, 4, 3, padding=1), nn.BatchNorm3d(4), nn.ReLU(), nn.AdaptiveAvgPool3d(1),
                         nn.Flatten(), nn.Linear(4, 2))


def main(watch):
    torch.manual_seed(0)
    images = [f"ixi/IXI{n:03d}-T1.nii.gz" for n in (314, 249, 609, 173, 20, 342, 134, 577, 66, 130, 607, 175, 385,
                                                     344, 409, 584, 253, 92, 574, 585)]
    labels = np.array([0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 1, 0, 1, 0, 1, 0, 1, 0], dtype=np.int64)
    check_loader = DataLoader(VolumeFiles(images, labels, rand_rotate90), batch_size=2)
    volume, label = next(iter(check_loader))
    print(type(volume), volume.shape, label)
    train_ds = VolumeFiles(images[:10], labels[:10], rand_rotate90)
    train_loader = DataLoader(train_ds, batch_size=2, shuffle=True)
    val_ds = VolumeFiles(images[-10:], labels[-10:])
    val_loader = DataLoader(val_ds, batch_size=2)
    model = small_3d_net()
    loss_function = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), 1e-2)
    val_interval, best_metric, best = 2, -1, io.BytesIO()
    with watch(model):
        for epoch in range(4):
            model.train()
            epoch_loss, step = 0, 0
            for inputs, targets in train_loader:
                step += 1
                optimizer.zero_grad()
                outputs = model(inputs)
                loss = loss_function(outputs, targets)
                loss.backward()
                optimizer.step()
                epoch_loss += loss.item()
                print(f"{step}/{len(train_ds) // train_loader.batch_size}, train_loss: {loss.item():.4f}")
            epoch_loss /= step
            print(f"epoch {epoch + 1} average loss: {epoch_loss:.4f}")
            if (epoch + 1) % val_interval == 0:
                model.eval()
                with torch.no_grad():
                    num_correct, metric_count = 0.0, 0
                    for val_images, val_labels in val_loader:
                        value = torch.eq(model(val_images).argmax(dim=1), val_labels)
                        metric_count += len(value)
                        num_correct += value.sum().item()
                    metric = num_correct / metric_count
                    if metric > best_metric:
                        best_metric = metric
                        torch.save(model.state_dict(), best)
                    print(f"epoch {epoch + 1} accuracy {metric:.4f} best {best_metric:.4f}")
    return [model, optimizer]


from tests.doctor_published import dedent, variant  # noqa: E402

VALIDATION = """\
                    num_correct, metric_count = 0.0, 0
                    for val_images, val_labels in val_loader:
                        value = torch.eq(model(val_images).argmax(dim=1), val_labels)
                        metric_count += len(value)
                        num_correct += value.sum().item()
"""
VARIANTS = [
    variant("validation_without_eval", "eval_in_train_mode", ("                model.eval()\n", "")),
    variant("validation_without_no_grad", "missing_no_grad",
            ("                with torch.no_grad():\n" + VALIDATION, "                if True:\n" + VALIDATION)),
    variant("train_mode_not_restored", "missing_train_switch",
            ("            model.train()\n", ""), ("    with watch(model):\n", "    model.train()\n    with watch(model):\n")),
    variant("epoch_loss_kept_as_a_tensor", "graph_attached_logging",
            ("                epoch_loss += loss.item()\n", "                epoch_loss += loss\n"),
            ('            print(f"epoch {epoch + 1} average loss: {epoch_loss:.4f}")\n', "")),
]
