# Mirrors: pytorch/examples, fast_neural_style/neural_style/neural_style.py (train), with utils.py (gram_matrix,
# normalize_batch), transformer_net.py (TransformerNet) and vgg.py (Vgg16), snapshot at commit 77f55b912142
# (2025-08-25); neural_style.py last changed in 993a98a67a48 (2025-08-22).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: an image transformation network of reflection-padded convs with affine InstanceNorm (no running
# statistics), a residual body and nearest-upsampling convs, trained with Adam (lr only, no weight decay) against a
# frozen loss network (Vgg16(requires_grad=False): its parameters never reach the optimizer and it is never put in
# eval mode, which it does not need, having no dropout or BatchNorm) that returns a namedtuple of four ReLU stages;
# images in [0, 255]; the style image repeated batch_size times, normalized in place by normalize_batch, and its Gram
# matrices computed once before training (outside no_grad: nothing in it needs a gradient); a training loader with
# only batch_size (no shuffle, no drop_last: the last batch is short and gm_s[:n_batch] trims the style Grams);
# per epoch transformer.train(), then per batch: zero_grad first (before the forward), the transformer's output and
# the content batch both normalized in place (x.div_(255) inside normalize_batch), content loss = content_weight *
# MSE on relu2_2, style loss = style_weight * the sum of Gram MSEs over the four stages, backward, step, the two
# losses added to running sums with .item(), a log every log_interval batches of the running sums divided by the
# number of batches so far (a mean of batch means of the training loss, not a validation metric); a checkpoint every
# checkpoint_interval batches inside the epoch that calls transformer.eval().cpu(), saves the state_dict and then
# transformer.to(device).train() (a .cpu()/.to() round trip after the optimizer is built: Module.to keeps the same
# Parameter objects, so the optimizer still holds them; no registry bug). No scheduler, no clipping, no AMP, no
# validation. The published loop has none of the registry's bugs.
# Shrunk: 26 synthetic 16x16 RGB "photos" (smooth colour gradients plus blobs, so the last batch of each epoch has 2
# images), a 16x16 striped style image, batch size 4 and 2 epochs (the published defaults), a transformer of 8 and 16
# channels with two residual blocks, a loss network of four small frozen random convs, content weight 1e5 and style
# weight 1e10 (the defaults) on losses that are small at this size, lr 1e-2 (not 1e-3) so that the 14 steps learn,
# log every 2 batches (not 500), a checkpoint every 3 batches (not 2000) into an in-memory buffer (the published
# default is no checkpoints: --checkpoint-model-dir is None; the loop is kept as with the option given); the device
# is the CPU; no final save to disk, no stylize/ONNX export.
# Added: `with watch(transformer):` around the epochs.
import io
import time
from collections import namedtuple
from types import SimpleNamespace

import torch
from torch import nn
from torch.optim import Adam
from torch.utils.data import DataLoader, Dataset


def gram_matrix(y):
    b, ch, h, w = y.size()
    flat = y.view(b, ch, h * w)
    return flat.bmm(flat.transpose(1, 2)) / (ch * h * w)


def normalize_batch(batch):
    mean = batch.new_tensor([0.485, 0.456, 0.406]).view(-1, 1, 1)
    std = batch.new_tensor([0.229, 0.224, 0.225]).view(-1, 1, 1)
    batch = batch.div_(255.0)
    return (batch - mean) / std


class ConvLayer(nn.Module):
    def __init__(self, cin, cout, kernel_size, stride):
        super().__init__()
        self.pad = nn.ReflectionPad2d(kernel_size // 2)
        self.conv2d = nn.Conv2d(cin, cout, kernel_size, stride)

    def forward(self, x):
        return self.conv2d(self.pad(x))


class ResidualBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1, self.in1 = ConvLayer(channels, channels, 3, 1), nn.InstanceNorm2d(channels, affine=True)
        self.conv2, self.in2 = ConvLayer(channels, channels, 3, 1), nn.InstanceNorm2d(channels, affine=True)
        self.relu = nn.ReLU()

    def forward(self, x):
        return x + self.in2(self.conv2(self.relu(self.in1(self.conv1(x)))))


class UpsampleConvLayer(nn.Module):
    def __init__(self, cin, cout, kernel_size, stride, upsample=None):
        super().__init__()
        self.upsample = upsample
        self.pad = nn.ReflectionPad2d(kernel_size // 2)
        self.conv2d = nn.Conv2d(cin, cout, kernel_size, stride)

    def forward(self, x):
        if self.upsample:
            x = nn.functional.interpolate(x, mode="nearest", scale_factor=self.upsample)
        return self.conv2d(self.pad(x))


class TransformerNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.in1 = ConvLayer(3, 8, 5, 1), nn.InstanceNorm2d(8, affine=True)
        self.conv2, self.in2 = ConvLayer(8, 16, 3, 2), nn.InstanceNorm2d(16, affine=True)
        self.res1, self.res2 = ResidualBlock(16), ResidualBlock(16)
        self.deconv1, self.in3 = UpsampleConvLayer(16, 8, 3, 1, upsample=2), nn.InstanceNorm2d(8, affine=True)
        self.deconv2 = ConvLayer(8, 3, 5, 1)
        self.relu = nn.ReLU()

    def forward(self, x):
        y = self.relu(self.in1(self.conv1(x)))
        y = self.relu(self.in2(self.conv2(y)))
        y = self.res2(self.res1(y))
        y = self.relu(self.in3(self.deconv1(y)))
        return self.deconv2(y)


VggOutputs = namedtuple("VggOutputs", ["relu1_2", "relu2_2", "relu3_3", "relu4_3"])


class Vgg16(nn.Module):
    """Stand-in for the pretrained VGG-16 slices: four frozen conv stages, pooling between them."""

    def __init__(self, requires_grad=False):
        super().__init__()
        g = torch.Generator().manual_seed(7)
        self.slice1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.slice2 = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(8, 12, 3, padding=1), nn.ReLU())
        self.slice3 = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(12, 16, 3, padding=1), nn.ReLU())
        self.slice4 = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=g) * (0.3 if p.dim() > 1 else 0.05))
        if not requires_grad:
            for p in self.parameters():
                p.requires_grad = False

    def forward(self, x):
        h1 = self.slice1(x)
        h2 = self.slice2(h1)
        h3 = self.slice3(h2)
        h4 = self.slice4(h3)
        return VggOutputs(h1, h2, h3, h4)


class PhotoFolder(Dataset):
    """Stand-in for ImageFolder on COCO: smooth colour gradients with a bright blob, pixels in [0, 255]."""

    def __init__(self, count, size=16, seed=0):
        g = torch.Generator().manual_seed(seed)
        ramp = torch.linspace(0, 1, size)
        self.images = []
        for _ in range(count):
            a, b = torch.rand(3, 1, 1, generator=g), torch.rand(3, 1, 1, generator=g)
            img = a * ramp.view(1, 1, -1) + b * ramp.view(1, -1, 1)
            top, left = (int(v) for v in torch.randint(0, size - 5, (2,), generator=g))
            img[:, top:top + 5, left:left + 5] += 0.8
            self.images.append((img.clamp(0, 1) * 255.0, 0))

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        img, label = self.images[idx]
        return img.clone(), label


def style_image(size=16):
    """Stand-in for the style painting: diagonal colour stripes, pixels in [0, 255]."""
    i = torch.arange(size).view(-1, 1) + torch.arange(size).view(1, -1)
    stripes = ((i // 3) % 2).float()
    return torch.stack([stripes, 1 - stripes, 0.5 * stripes]) * 255.0


def settings():
    """What the published script reads from its command line, at the shrunk defaults."""
    return SimpleNamespace(epochs=2, batch_size=4, lr=1e-2, content_weight=1e5, style_weight=1e10, seed=42,
                           log_interval=2, checkpoint_interval=3, checkpoint_model_dir="in-memory")


def train(args, transformer, optimizer, device, checkpoints):
    train_dataset = PhotoFolder(26)
    train_loader = DataLoader(train_dataset, batch_size=args.batch_size)
    mse_loss = nn.MSELoss()

    vgg = Vgg16(requires_grad=False).to(device)
    style = style_image().repeat(args.batch_size, 1, 1, 1).to(device)
    features_style = vgg(normalize_batch(style))
    gram_style = [gram_matrix(y) for y in features_style]

    for e in range(args.epochs):
        transformer.train()
        agg_content_loss = 0.
        agg_style_loss = 0.
        count = 0
        for batch_id, (x, _) in enumerate(train_loader):
            n_batch = len(x)
            count += n_batch
            optimizer.zero_grad()

            x = x.to(device)
            y = transformer(x)

            y = normalize_batch(y)
            x = normalize_batch(x)

            features_y = vgg(y)
            features_x = vgg(x)

            content_loss = args.content_weight * mse_loss(features_y.relu2_2, features_x.relu2_2)

            style_loss = 0.
            for ft_y, gm_s in zip(features_y, gram_style):
                gm_y = gram_matrix(ft_y)
                style_loss += mse_loss(gm_y, gm_s[:n_batch, :, :])
            style_loss *= args.style_weight

            total_loss = content_loss + style_loss
            total_loss.backward()
            optimizer.step()

            agg_content_loss += content_loss.item()
            agg_style_loss += style_loss.item()

            if (batch_id + 1) % args.log_interval == 0:
                print(f"{time.ctime()}\tEpoch {e + 1}:\t[{count}/{len(train_dataset)}]\t"
                      f"content: {agg_content_loss / (batch_id + 1):.6f}\t"
                      f"style: {agg_style_loss / (batch_id + 1):.6f}\t"
                      f"total: {(agg_content_loss + agg_style_loss) / (batch_id + 1):.6f}")

            if args.checkpoint_model_dir is not None and (batch_id + 1) % args.checkpoint_interval == 0:
                transformer.eval().cpu()
                buffer = io.BytesIO()
                torch.save(transformer.state_dict(), buffer)
                checkpoints[f"ckpt_epoch_{e}_batch_id_{batch_id + 1}.pth"] = buffer.getvalue()
                transformer.to(device).train()


def main(watch):
    args = settings()
    device = torch.device("cpu")
    torch.manual_seed(args.seed)
    transformer = TransformerNet().to(device)
    optimizer = Adam(transformer.parameters(), args.lr)
    checkpoints = {}
    with watch(transformer):
        train(args, transformer, optimizer, device, checkpoints)
    transformer.eval().cpu()
    return [transformer, optimizer]


from tests.doctor_published import variant  # noqa: E402

REAL = set()
VARIANTS = [
    # zero_grad moved from the top of the step to just after backward: every step applies a zero gradient
    variant("zero_grad_after_backward", "zero_grad_after_backward",
            ("            optimizer.zero_grad()\n\n            x = x.to(device)\n",
             "            x = x.to(device)\n"),
            ("            total_loss.backward()\n",
             "            total_loss.backward()\n            optimizer.zero_grad()\n")),
    # the running sums keep the loss tensors (and every step's graph) alive; the log still prints numbers
    variant("running_losses_keep_tensors", "graph_attached_logging",
            ("            agg_content_loss += content_loss.item()\n"
             "            agg_style_loss += style_loss.item()\n",
             "            agg_content_loss += content_loss\n"
             "            agg_style_loss += style_loss\n")),
    # clipping added "for stability" after the update: it clips gradients already used
    variant("clip_after_step", "clip_after_step",
            ("            optimizer.step()\n",
             "            optimizer.step()\n"
             "            torch.nn.utils.clip_grad_norm_(transformer.parameters(), 1.0)\n")),
    # a one-cycle schedule sized in updates (epochs * batches) but stepped once per epoch
    variant("one_cycle_stepped_per_epoch", "update_schedule_per_epoch",
            ("def train(args, transformer, optimizer, device, checkpoints):\n"
             "    train_dataset = PhotoFolder(26)\n"
             "    train_loader = DataLoader(train_dataset, batch_size=args.batch_size)\n",
             "def train(args, transformer, optimizer, device, checkpoints):\n"
             "    train_dataset = PhotoFolder(26)\n"
             "    train_loader = DataLoader(train_dataset, batch_size=args.batch_size)\n"
             "    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=args.lr,\n"
             "                                                    total_steps=args.epochs * len(train_loader))\n"),
            ("                transformer.to(device).train()\n",
             "                transformer.to(device).train()\n        scheduler.step()\n")),
    # checkpoints written in half precision to halve their size; the model is cast back to float afterwards,
    # so every checkpoint rounds the trained weights to fp16 under the optimizer
    variant("half_precision_checkpoints", "half_after_optimizer",
            ("                transformer.eval().cpu()\n", "                transformer.eval().cpu().half()\n"),
            ("                transformer.to(device).train()\n",
             "                transformer.float().to(device).train()\n")),
    # not a bug: the content target's features computed without a graph (the loss network is frozen and x needs
    # no gradient); the transformer's output still goes through vgg with grad enabled
    variant("content_features_under_no_grad", set(),
            ("            features_x = vgg(x)\n",
             "            with torch.no_grad():\n                features_x = vgg(x)\n")),
]
