# Mirrors: milesial/Pytorch-UNet, train.py (train_model) with evaluate.py (evaluate), utils/dice_score.py
# (dice_coeff, multiclass_dice_coeff, dice_loss) and unet/unet_parts.py (DoubleConv, Down, Up, OutConv), snapshot
# at commit 21d7850f2af3 (2024-02-10); train.py and evaluate.py last changed in 52b4f14e91cb (2023-12-08).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: a U-Net of DoubleConv blocks (conv without bias, BatchNorm, ReLU, twice), max-pool down, transposed-conv up
# with a skip concatenation, a 1x1 output conv, n_classes = 2; a dataset of {'image', 'mask'} dicts split by
# random_split with a seeded generator (val_percent of the images); a shuffled training loader and a validation
# loader with shuffle=False and drop_last=True; RMSprop (weight decay 1e-8, momentum 0.999, foreach), a
# ReduceLROnPlateau in 'max' mode (patience 5) stepped with each validation Dice score, a GradScaler and autocast
# gated by `amp`; per epoch model.train(), then per batch: autocast forward, cross-entropy plus a multiclass Dice
# loss on the softmax (batch-reduced), zero_grad(set_to_none=True), scaler.scale(loss).backward(), unscale_,
# clip_grad_norm_(1.0), scaler.step, scaler.update, the loss added to epoch_loss with .item(); an evaluation round
# every n_train // (5 * batch_size) global steps (five per epoch, in the middle of the epoch): evaluate() under
# inference_mode, net.eval(), autocast, the argmax one-hot Dice over the foreground classes per image averaged in
# each batch, summed and divided by the number of batches, net.train() before returning; then scheduler.step(score).
# The published loop has none of the registry's bugs: zero_grad comes before backward, unscale_ before clipping,
# the plateau schedule gets the score it watches, and the validation mean of per-batch means is exact because
# drop_last=True makes every validation batch full (the last few images are skipped, which is no registry bug).
# Shrunk: 50 synthetic 16x16 RGB images whose mask is a bright rectangle (val_percent 0.2: 40 train, 10 validation),
# batch size 4 (10 steps per epoch, an evaluation every 2 steps over 2 full batches), 2 epochs, a U-Net of one
# level with 4 and 8 channels, lr 1e-3 (not 1e-5) so that the tiny run learns (validation Dice 0.27 -> 0.9);
# bfloat16 autocast on the CPU with GradScaler("cpu") and amp=True (the README recommends --amp); no wandb (its
# weight and gradient histograms and image logging), no checkpoints, no worker processes.
# Added: `with watch(model):` around the epochs.
import torch
from torch import nn, optim
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset, random_split


class DoubleConv(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.double_conv = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False), nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False), nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True))

    def forward(self, x):
        return self.double_conv(x)


class Down(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.maxpool_conv = nn.Sequential(nn.MaxPool2d(2), DoubleConv(in_channels, out_channels))

    def forward(self, x):
        return self.maxpool_conv(x)


class Up(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.up = nn.ConvTranspose2d(in_channels, in_channels // 2, kernel_size=2, stride=2)
        self.conv = DoubleConv(in_channels, out_channels)

    def forward(self, x1, x2):
        return self.conv(torch.cat([x2, self.up(x1)], dim=1))


class UNet(nn.Module):
    def __init__(self, n_channels, n_classes):
        super().__init__()
        self.n_channels, self.n_classes = n_channels, n_classes
        self.inc = DoubleConv(n_channels, 4)
        self.down1 = Down(4, 8)
        self.up1 = Up(8, 4)
        self.outc = nn.Conv2d(4, n_classes, kernel_size=1)

    def forward(self, x):
        x1 = self.inc(x)
        return self.outc(self.up1(self.down1(x1), x1))


class BasicDataset(Dataset):
    """Stand-in for the Carvana images: a bright rectangle (the car, class 1) on a noisy background (class 0)."""

    def __init__(self, count, size=16, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.items = []
        for _ in range(count):
            top, left = (int(v) for v in torch.randint(0, size // 2, (2,), generator=g))
            h, w = (int(v) for v in torch.randint(4, size // 2 + 1, (2,), generator=g))
            mask = torch.zeros(size, size, dtype=torch.long)
            mask[top:top + h, left:left + w] = 1
            tint = 0.6 * torch.tensor([1.0, 0.6, 0.2])[:, None, None]
            image = 0.4 * torch.rand(3, size, size, generator=g) + tint * mask.float()
            self.items.append({"image": image, "mask": mask})

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        return self.items[idx]


def dice_coeff(input, target, reduce_batch_first=False, epsilon=1e-6):
    sum_dim = (-1, -2) if input.dim() == 2 or not reduce_batch_first else (-1, -2, -3)
    inter = 2 * (input * target).sum(dim=sum_dim)
    sets_sum = input.sum(dim=sum_dim) + target.sum(dim=sum_dim)
    sets_sum = torch.where(sets_sum == 0, inter, sets_sum)
    return ((inter + epsilon) / (sets_sum + epsilon)).mean()


def multiclass_dice_coeff(input, target, reduce_batch_first=False, epsilon=1e-6):
    return dice_coeff(input.flatten(0, 1), target.flatten(0, 1), reduce_batch_first, epsilon)


def dice_loss(input, target, multiclass=False):
    fn = multiclass_dice_coeff if multiclass else dice_coeff
    return 1 - fn(input, target, reduce_batch_first=True)


@torch.inference_mode()
def evaluate(net, dataloader, amp):
    net.eval()
    num_val_batches = len(dataloader)
    dice_score = 0
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
        for batch in dataloader:
            image, mask_true = batch["image"], batch["mask"]
            mask_pred = net(image)
            mask_true = F.one_hot(mask_true, net.n_classes).permute(0, 3, 1, 2).float()
            mask_pred = F.one_hot(mask_pred.argmax(dim=1), net.n_classes).permute(0, 3, 1, 2).float()
            dice_score += multiclass_dice_coeff(mask_pred[:, 1:], mask_true[:, 1:], reduce_batch_first=False)
    net.train()
    return dice_score / max(num_val_batches, 1)


def train_model(model, epochs=2, batch_size=4, learning_rate=1e-3, val_percent=0.2, amp=True,
                weight_decay=1e-8, momentum=0.999, gradient_clipping=1.0):
    dataset = BasicDataset(50)
    n_val = int(len(dataset) * val_percent)
    n_train = len(dataset) - n_val
    train_set, val_set = random_split(dataset, [n_train, n_val], generator=torch.Generator().manual_seed(0))
    loader_args = dict(batch_size=batch_size, num_workers=0)
    train_loader = DataLoader(train_set, shuffle=True, **loader_args)
    val_loader = DataLoader(val_set, shuffle=False, drop_last=True, **loader_args)

    optimizer = optim.RMSprop(model.parameters(), lr=learning_rate, weight_decay=weight_decay, momentum=momentum,
                              foreach=True)
    scheduler = optim.lr_scheduler.ReduceLROnPlateau(optimizer, "max", patience=5)
    grad_scaler = torch.amp.GradScaler("cpu", enabled=amp)
    criterion = nn.CrossEntropyLoss() if model.n_classes > 1 else nn.BCEWithLogitsLoss()
    global_step = 0

    for epoch in range(1, epochs + 1):
        model.train()
        epoch_loss = 0
        for batch in train_loader:
            images, true_masks = batch["image"], batch["mask"]
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
                masks_pred = model(images)
                loss = criterion(masks_pred, true_masks)
                loss += dice_loss(F.softmax(masks_pred, dim=1).float(),
                                  F.one_hot(true_masks, model.n_classes).permute(0, 3, 1, 2).float(),
                                  multiclass=True)

            optimizer.zero_grad(set_to_none=True)
            grad_scaler.scale(loss).backward()
            grad_scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), gradient_clipping)
            grad_scaler.step(optimizer)
            grad_scaler.update()

            global_step += 1
            epoch_loss += loss.item()
            print(f"train loss {loss.item():.4f} step {global_step} epoch {epoch}")

            division_step = n_train // (5 * batch_size)
            if division_step > 0 and global_step % division_step == 0:
                val_score = evaluate(model, val_loader, amp)
                scheduler.step(val_score)
                print(f"Validation Dice score: {float(val_score):.4f} lr {optimizer.param_groups[0]['lr']}")
        print(f"epoch {epoch} loss {epoch_loss / len(train_loader):.4f}")
    return optimizer


def main(watch):
    torch.manual_seed(0)
    model = UNet(n_channels=3, n_classes=2)
    model = model.to(memory_format=torch.channels_last)
    with watch(model):
        optimizer = train_model(model)
    return [model, optimizer]


from tests.doctor_published import variant  # noqa: E402

REAL = set()
VARIANTS = [
    # subtle: the published mean of per-batch Dice means is exact only because drop_last=True keeps every
    # validation batch full; without it the 10 validation images come in batches of 4, 4 and 2
    variant("validation_loader_keeps_short_batch", "mean_of_batch_means",
            ("DataLoader(val_set, shuffle=False, drop_last=True, **loader_args)",
             "DataLoader(val_set, shuffle=False, **loader_args)")),
    # subtle: model.train() still opens every epoch, but the evaluation rounds run in the middle of the epoch, so
    # the steps after each round train with BatchNorm frozen on running statistics
    variant("evaluate_leaves_eval_mode", "missing_train_switch",
            ("    net.train()\n    return dice_score", "    return dice_score")),
    variant("clip_after_scaler_step", "clip_after_step",
            ("            torch.nn.utils.clip_grad_norm_(model.parameters(), gradient_clipping)\n"
             "            grad_scaler.step(optimizer)\n",
             "            grad_scaler.step(optimizer)\n"
             "            torch.nn.utils.clip_grad_norm_(model.parameters(), gradient_clipping)\n")),
    # one softmax shared by the Dice loss and the cross-entropy
    variant("softmax_shared_with_cross_entropy", "softmax_before_cross_entropy",
            ("                loss = criterion(masks_pred, true_masks)\n"
             "                loss += dice_loss(F.softmax(masks_pred, dim=1).float(),\n",
             "                probs = F.softmax(masks_pred, dim=1).float()\n"
             "                loss = criterion(probs, true_masks)\n"
             "                loss += dice_loss(probs,\n")),
    variant("epoch_loss_sums_tensors", "graph_attached_logging",
            ("            epoch_loss += loss.item()\n", "            epoch_loss += loss\n")),
    variant("evaluate_without_inference_mode", "missing_no_grad",
            ("@torch.inference_mode()\ndef evaluate", "def evaluate")),
]
