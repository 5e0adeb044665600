# Mirrors: facebookresearch/DiT, train.py (main: the EMA copy, the frozen-by-no_grad VAE encoding, the training
# loop and its logging) with models.py's LabelEmbedder and diffusion's training_losses, snapshot at commit ed81ce22
# (2023-06-02); train.py last changed in 58fe9c2 (2023-02-21).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: an EMA deep copy with requires_grad off, initialised with decay 0 and updated after every step under
# no_grad, kept in eval mode; AdamW(lr 1e-4, weight decay 0), no schedule; model.train() once before the epochs
# ("enables embedding dropout for classifier-free guidance": the label embedder replaces labels by a null class
# with probability 0.1 when self.training, drawn with torch.rand, not an nn.Dropout); a drop_last loader of
# flipped, normalized images; each batch encoded by a VAE under no_grad (the VAE's parameters keep requires_grad)
# and sampled from its latent distribution times 0.18215; random timesteps, noised latents, the per-example MSE of
# the predicted noise averaged, zero_grad, backward, step, EMA update, running_loss += loss.item() averaged over
# the logging window. Shrunk: the stand-in 8x8 ImageFolder (2 classes, 160 images in batches of 32), a VAE of one
# strided conv (latents 4x4x4), a DiT reduced to an MLP over the flattened latent with timestep and label
# embeddings added, 100 diffusion steps (not 1000), 2 epochs, logging every 3 steps; no DDP, no checkpoints.
# Added: `with watch(model):` around the epochs.
import math
from collections import OrderedDict
from copy import deepcopy

import torch
from torch import nn
from torch.utils.data import DataLoader

from tests.doctor_published.standins import ImageFolder, transforms


class LatentDist:
    def __init__(self, mean, logvar):
        self.mean, self.std = mean, torch.exp(0.5 * logvar)

    def sample(self):
        return self.mean + self.std * torch.randn_like(self.mean)


class TinyVAE(nn.Module):
    def __init__(self):
        super().__init__()
        with torch.random.fork_rng():
            torch.manual_seed(7)
            self.enc = nn.Conv2d(3, 8, 2, stride=2)

    def encode(self, x):
        mean, logvar = self.enc(x).chunk(2, dim=1)
        return type("Out", (), {"latent_dist": LatentDist(mean, logvar.clamp(-6, 2))})()


class LabelEmbedder(nn.Module):
    def __init__(self, num_classes, hidden_size, dropout_prob):
        super().__init__()
        self.embedding_table = nn.Embedding(num_classes + 1, hidden_size)
        self.num_classes, self.dropout_prob = num_classes, dropout_prob

    def forward(self, labels):
        if self.training and self.dropout_prob > 0:
            drop = torch.rand(labels.shape[0]) < self.dropout_prob
            labels = torch.where(drop, self.num_classes, labels)
        return self.embedding_table(labels)


def timestep_embedding(t, dim, max_period=10000):
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32) / half)
    args = t[:, None].float() * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class TinyDiT(nn.Module):
    def __init__(self, latent=64, hidden=32, num_classes=2, class_dropout_prob=0.1):
        super().__init__()
        self.x_embedder = nn.Linear(latent, hidden)
        self.t_embedder = nn.Sequential(nn.Linear(16, hidden), nn.SiLU(), nn.Linear(hidden, hidden))
        self.y_embedder = LabelEmbedder(num_classes, hidden, class_dropout_prob)
        self.blocks = nn.Sequential(nn.LayerNorm(hidden), nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, hidden))
        self.final_layer = nn.Linear(hidden, latent)

    def forward(self, x, t, y):
        h = self.x_embedder(x.flatten(1)) + self.t_embedder(timestep_embedding(t, 16)) + self.y_embedder(y)
        return self.final_layer(h + self.blocks(h)).view_as(x)


class Diffusion:
    def __init__(self, num_timesteps=100):
        self.num_timesteps = num_timesteps
        betas = torch.linspace(1e-4 * 10, 0.02 * 10, num_timesteps, dtype=torch.float64)
        self.alphas_cumprod = torch.cumprod(1 - betas, 0).float()

    def training_losses(self, model, x_start, t, model_kwargs):
        noise = torch.randn_like(x_start)
        a = self.alphas_cumprod[t].view(-1, 1, 1, 1)
        x_t = a.sqrt() * x_start + (1 - a).sqrt() * noise
        return {"loss": ((model(x_t, t, **model_kwargs) - noise) ** 2).mean(dim=(1, 2, 3))}


@torch.no_grad()
def update_ema(ema_model, model, decay=0.9999):
    ema_params, model_params = OrderedDict(ema_model.named_parameters()), OrderedDict(model.named_parameters())
    for name, param in model_params.items():
        ema_params[name].mul_(decay).add_(param.data, alpha=1 - decay)


def requires_grad(model, flag=True):
    for p in model.parameters():
        p.requires_grad = flag


def main(watch):
    torch.manual_seed(0)
    epochs, log_every = 2, 3
    model = TinyDiT()
    ema = deepcopy(model)
    requires_grad(ema, False)
    diffusion = Diffusion()
    vae = TinyVAE()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0)
    transform = transforms.Compose([transforms.RandomHorizontalFlip(), transforms.ToTensor(),
                                    transforms.Normalize([0.5] * 3, [0.5] * 3)])
    dataset = ImageFolder("data/train", transform=transform)
    loader = DataLoader(dataset, batch_size=32, shuffle=True, drop_last=True)
    update_ema(ema, model, decay=0)
    model.train()
    ema.eval()
    train_steps = log_steps = 0
    running_loss = 0
    with watch(model):
        for epoch in range(epochs):
            for x, y in loader:
                with torch.no_grad():
                    x = vae.encode(x).latent_dist.sample().mul_(0.18215)
                t = torch.randint(0, diffusion.num_timesteps, (x.shape[0],))
                model_kwargs = dict(y=y)
                loss_dict = diffusion.training_losses(model, x, t, model_kwargs)
                loss = loss_dict["loss"].mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                update_ema(ema, model)
                running_loss += loss.item()
                log_steps += 1
                train_steps += 1
                if train_steps % log_every == 0:
                    avg_loss = torch.tensor(running_loss / log_steps).item()
                    print(f"step {train_steps}: train loss {avg_loss:.4f}")
                    running_loss = 0
                    log_steps = 0
    model.eval()
    return [model, opt, ema]


from tests.doctor_published import variant  # noqa: E402

VARIANTS = [
    variant("no_zero_grad", "missing_zero_grad", ("                opt.zero_grad()\n", "")),
    variant("running_loss_keeps_graph", "graph_attached_logging",
            ("                running_loss += loss.item()\n", "                running_loss += loss\n"),
            ("torch.tensor(running_loss / log_steps).item()", "(running_loss / log_steps).item()")),
    variant("warmup_scheduler_stepped_first", "scheduler_before_optimizer",
            ("    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0)\n",
             "    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0)\n"
             "    warmup = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 5))\n"),
            ("                loss.backward()\n                opt.step()\n",
             "                loss.backward()\n                warmup.step()\n                opt.step()\n")),
    variant("label_table_resized_after_optimizer", "head_after_optimizer",
            ("    update_ema(ema, model, decay=0)\n",
             "    model.y_embedder = LabelEmbedder(len(dataset.classes), 32, 0.1)\n"
             "    ema = deepcopy(model)\n    requires_grad(ema, False)\n    update_ema(ema, model, decay=0)\n")),
    variant("preview_samples_from_model_in_train_mode", "eval_in_train_mode",
            ("                    running_loss = 0\n",
             "                    running_loss = 0\n"
             "                    with torch.no_grad():\n"
             "                        z = torch.randn(4, 4, 4, 4)\n"
             "                        for step in reversed(range(0, diffusion.num_timesteps, 25)):\n"
             "                            z = z - 0.1 * model(z, torch.full((4,), step), torch.arange(4) % 2)\n"
             "                        print(f'preview {z.std().item():.3f}')\n")),
]
