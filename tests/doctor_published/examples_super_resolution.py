# Mirrors: pytorch/examples, super_resolution/main.py and model.py, snapshot at commit 77f55b912142 (2025-08-25);
# main.py last changed in 6f61614 (2025-06-23).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: pairs of (downscaled, full) luminance images from a dataset that crops and resizes in __getitem__; a
# sub-pixel network (four convolutions, the last with r^2 channels, then PixelShuffle(r)) with orthogonal init;
# MSE and Adam; per batch: zero_grad, loss, loss.item() summed, backward, step, a progress print; the epoch's
# mean loss over the number of batches; a test pass under no_grad (no model.eval(): the network has no layer that
# behaves differently in eval mode) that averages 10*log10(1/mse) over the batches; a checkpoint each epoch.
# Shrunk: 8x8 images upscaled from 4x4 (r = 2; 96 train, 40 test, batch 16 and 10), widths 8, 8, 4, 3 epochs (not
# 2, and 64 channels); the checkpoint goes to memory. Added: `with watch(...)` around the epochs.
import io
from math import log10

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn import init
from torch.utils.data import DataLoader, Dataset


class LowHighPairs(Dataset):
    """(low-resolution input, full-resolution target), made from one stored image per example."""

    def __init__(self, n, seed, factor=2, side=8):
        g = torch.Generator().manual_seed(seed)
        base = torch.rand(n, 1, side // 2, side // 2, generator=g)
        self.data = F.interpolate(base, scale_factor=2, mode="bilinear", align_corners=False) \
            + 0.05 * torch.rand(n, 1, side, side, generator=g)
        self.factor = factor

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        target = self.data[i]
        return F.avg_pool2d(target[None], self.factor)[0], target


class SubPixelNet(nn.Module):
    def __init__(self, upscale_factor):
        super().__init__()
        self.relu = nn.ReLU()
        self.conv1, self.conv2 = nn.Conv2d(1, 8, 5, 1, 2), nn.Conv2d(8, 8, 3, 1, 1)
        self.conv3, self.conv4 = nn.Conv2d(8, 4, 3, 1, 1), nn.Conv2d(4, upscale_factor ** 2, 3, 1, 1)
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)
        for conv in (self.conv1, self.conv2, self.conv3):
            init.orthogonal_(conv.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv4.weight)

    def forward(self, x):
        x = self.relu(self.conv2(self.relu(self.conv1(x))))
        return self.pixel_shuffle(self.conv4(self.relu(self.conv3(x))))


def main(watch):
    torch.manual_seed(123)
    training_data_loader = DataLoader(LowHighPairs(96, seed=1), batch_size=16, shuffle=True)
    testing_data_loader = DataLoader(LowHighPairs(40, seed=2), batch_size=10, shuffle=False)
    model = SubPixelNet(upscale_factor=2)
    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

    def train(epoch):
        epoch_loss = 0
        for iteration, (low, high) in enumerate(training_data_loader, 1):
            optimizer.zero_grad()
            loss = criterion(model(low), high)
            epoch_loss += loss.item()
            loss.backward()
            optimizer.step()
            print(f"epoch {epoch} ({iteration}/{len(training_data_loader)}): loss {loss.item():.4f}")
        print(f"epoch {epoch} complete: average loss {epoch_loss / len(training_data_loader):.4f}")

    def test():
        avg_psnr = 0
        with torch.no_grad():
            for low, high in testing_data_loader:
                mse = criterion(model(low), high)
                avg_psnr += 10 * log10(1 / mse.item())
        print(f"average PSNR {avg_psnr / len(testing_data_loader):.4f} dB")

    with watch(model):
        for epoch in range(1, 4):
            train(epoch)
            test()
            torch.save(model, io.BytesIO())
    return [model, optimizer]


from tests.doctor_published import variant  # noqa: E402

VARIANTS = [
    variant("test_without_no_grad", "missing_no_grad", ("        with torch.no_grad():\n", "        if True:\n")),
    variant("zero_grad_forgotten", "missing_zero_grad", ("            optimizer.zero_grad()\n", "")),
    variant("loss_summed_as_a_tensor", "graph_attached_logging",
            ("            epoch_loss += loss.item()\n", "            epoch_loss += loss\n")),
    variant("test_images_from_the_training_set", "data_leakage",
            ("DataLoader(LowHighPairs(40, seed=2)", "DataLoader(LowHighPairs(96, seed=1)")),
]
