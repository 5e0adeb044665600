# Mirrors: lucidrains/denoising-diffusion-pytorch, denoising_diffusion_pytorch/denoising_diffusion_pytorch.py
# (GaussianDiffusion.p_losses/forward/sample and Trainer.train), snapshot at commit faed4db2 (2026-08-02), the
# commit that last changed the file.
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: a diffusion wrapper (the module the trainer trains) around a small U-Net-like denoiser with a time
# embedding, GroupNorm and a Dropout layer at its default p=0; a sigmoid beta schedule, the pred_v objective and
# its min-SNR loss weight, images normalized to [-1, 1], per-example MSE weighted by timestep, then the mean; a
# label-free image folder with random horizontal flips behind a shuffling DataLoader drawn from endlessly
# (cycle); Adam with betas (0.9, 0.99); an EMA copy (no gradients) that copies the weights until update_after_step
# and then blends every update_every steps; per step: model.train(), gradient_accumulate_every micro-batches each
# loss / gradient_accumulate_every with its .item() summed for the progress bar, backward through an accelerator
# object, clip_grad_norm_ through it, step, zero_grad, EMA update; every save_and_sample_every steps the EMA model
# in eval mode samples under inference_mode (the sampler is itself inference_mode). Shrunk: 8x8 stand-in images
# (64), 8 channels, 8 timesteps, batch 8, 2 micro-batches, 12 steps, samples every 6 steps (4 images), EMA after 2
# steps every 2; no autocast, one process, images kept in memory (no files, no FID).
# Added: `with watch(...)` around trainer.train().
import copy
import math
from contextlib import nullcontext

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset

from tests.doctor_published.standins import datasets, transforms


def cycle(dl):
    while True:
        for data in dl:
            yield data


class OneProcess:
    """What the trainer asks of its accelerator, for one process on the CPU."""

    device, is_main_process = torch.device("cpu"), True

    def autocast(self):
        return nullcontext()

    def backward(self, loss):
        loss.backward()

    def clip_grad_norm_(self, parameters, max_norm):
        return nn.utils.clip_grad_norm_(parameters, max_norm)

    def wait_for_everyone(self):
        pass

    def print(self, *args):
        print(*args)


def time_embedding(t, dim):
    half = dim // 2
    freqs = torch.exp(-math.log(10000) * torch.arange(half) / (half - 1))
    angles = t.float()[:, None] * freqs[None]
    return torch.cat((angles.sin(), angles.cos()), dim=-1)


class TimedBlock(nn.Module):
    def __init__(self, dim, time_dim, dropout=0.0):
        super().__init__()
        self.to_scale_shift = nn.Sequential(nn.SiLU(), nn.Linear(time_dim, 2 * dim))
        self.norm1, self.norm2 = nn.GroupNorm(4, dim), nn.GroupNorm(4, dim)
        self.conv1, self.conv2 = nn.Conv2d(dim, dim, 3, padding=1), nn.Conv2d(dim, dim, 3, padding=1)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, emb):
        scale, shift = self.to_scale_shift(emb)[:, :, None, None].chunk(2, dim=1)
        h = F.silu(self.norm1(self.conv1(x)) * (scale + 1) + shift)
        h = self.conv2(self.dropout(F.silu(self.norm2(h))))
        return x + h


class SmallUnet(nn.Module):
    def __init__(self, dim=8, channels=3, dropout=0.0):
        super().__init__()
        self.channels, self.dim = channels, dim
        self.time_mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, 4 * dim))
        self.init_conv = nn.Conv2d(channels, dim, 7, padding=3)
        self.down = TimedBlock(dim, 4 * dim, dropout)
        self.mid = TimedBlock(dim, 4 * dim, dropout)
        self.up = TimedBlock(2 * dim, 4 * dim, dropout)
        self.final_conv = nn.Conv2d(2 * dim, channels, 1)

    def forward(self, x, time):
        emb = self.time_mlp(time_embedding(time, self.dim))
        h0 = self.init_conv(x)
        h = self.down(h0, emb)
        h = F.interpolate(self.mid(F.avg_pool2d(h, 2), emb), scale_factor=2)
        return self.final_conv(self.up(torch.cat((h, h0), dim=1), emb))


def gather(values, t, shape):
    return values.gather(-1, t).reshape(t.shape[0], *((1,) * (len(shape) - 1)))


class Diffusion(nn.Module):
    def __init__(self, model, image_size, timesteps=8):
        super().__init__()
        self.model, self.image_size, self.num_timesteps = model, image_size, timesteps
        t = torch.linspace(0, timesteps, timesteps + 1, dtype=torch.float64) / timesteps
        start, end, tau = -3, 3, 1
        v_start, v_end = torch.tensor(start / tau).sigmoid(), torch.tensor(end / tau).sigmoid()
        ac = (-((t * (end - start) + start) / tau).sigmoid() + v_end) / (v_end - v_start)
        ac = ac / ac[0]
        betas = (1 - ac[1:] / ac[:-1]).clamp(0, 0.999)
        alphas_cumprod = torch.cumprod(1 - betas, dim=0)
        prev = F.pad(alphas_cumprod[:-1], (1, 0), value=1.0)
        snr = alphas_cumprod / (1 - alphas_cumprod)
        for name, value in dict(betas=betas, alphas_cumprod=alphas_cumprod,
                                sqrt_ac=alphas_cumprod.sqrt(), sqrt_1m_ac=(1 - alphas_cumprod).sqrt(),
                                post_var=betas * (1 - prev) / (1 - alphas_cumprod),
                                post_c1=betas * prev.sqrt() / (1 - alphas_cumprod),
                                post_c2=(1 - prev) * (1 - betas).sqrt() / (1 - alphas_cumprod),
                                loss_weight=snr.clamp(max=5) / (snr + 1)).items():
            self.register_buffer(name, value.float())

    def q_sample(self, x_start, t, noise):
        return gather(self.sqrt_ac, t, x_start.shape) * x_start + gather(self.sqrt_1m_ac, t, x_start.shape) * noise

    def p_losses(self, x_start, t):
        noise = torch.randn_like(x_start)
        x = self.q_sample(x_start, t, noise)
        out = self.model(x, t)
        target = gather(self.sqrt_ac, t, x.shape) * noise - gather(self.sqrt_1m_ac, t, x.shape) * x_start
        loss = F.mse_loss(out, target, reduction="none").flatten(1).mean(1)
        return (loss * gather(self.loss_weight, t, loss.shape)).mean()

    def forward(self, img):
        t = torch.randint(0, self.num_timesteps, (img.shape[0],)).long()
        return self.p_losses(img * 2 - 1, t)

    @torch.inference_mode()
    def sample(self, batch_size=4):
        img = torch.randn(batch_size, self.model.channels, self.image_size, self.image_size)
        for step in reversed(range(self.num_timesteps)):
            t = torch.full((batch_size,), step, dtype=torch.long)
            v = self.model(img, t)
            x_start = (gather(self.sqrt_ac, t, img.shape) * img - gather(self.sqrt_1m_ac, t, img.shape) * v)
            x_start = x_start.clamp(-1, 1)
            mean = gather(self.post_c1, t, img.shape) * x_start + gather(self.post_c2, t, img.shape) * img
            img = mean + (gather(self.post_var, t, img.shape).sqrt() * torch.randn_like(img) if step > 0 else 0)
        return (img + 1) * 0.5


class ImageFolderNoLabels(Dataset):
    def __init__(self, augment_horizontal_flip=True):
        self.images = datasets.CIFAR10("images", train=True, sizes=(64, 8)).data
        steps = [transforms.RandomHorizontalFlip()] if augment_horizontal_flip else []
        self.transform = transforms.Compose(steps + [transforms.ToTensor()])

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        return self.transform(self.images[index])


class EMA:
    def __init__(self, model, beta=0.995, update_after_step=2, update_every=2):
        self.online, self.beta = model, beta
        self.update_after_step, self.update_every, self.step = update_after_step, update_every, 0
        self.ema_model = copy.deepcopy(model)
        self.ema_model.requires_grad_(False)

    @torch.no_grad()
    def update(self):
        self.step += 1
        pairs = list(zip(self.ema_model.parameters(), self.online.parameters()))
        if self.step <= self.update_after_step:
            for ema_p, p in pairs:
                ema_p.copy_(p)
        elif self.step % self.update_every == 0:
            for ema_p, p in pairs:
                ema_p.lerp_(p, 1 - self.beta)


class Trainer:
    def __init__(self, diffusion_model, train_batch_size=8, gradient_accumulate_every=2, train_lr=1e-3,
                 train_num_steps=12, adam_betas=(0.9, 0.99), save_and_sample_every=6, num_samples=4,
                 max_grad_norm=1.0):
        self.accelerator = OneProcess()
        self.model, self.batch_size = diffusion_model, train_batch_size
        self.gradient_accumulate_every, self.train_num_steps = gradient_accumulate_every, train_num_steps
        self.save_and_sample_every, self.num_samples, self.max_grad_norm = save_and_sample_every, num_samples, \
            max_grad_norm
        dl = DataLoader(ImageFolderNoLabels(), batch_size=train_batch_size, shuffle=True, num_workers=0)
        self.dl = cycle(dl)
        self.opt = torch.optim.Adam(diffusion_model.parameters(), lr=train_lr, betas=adam_betas)
        self.ema = EMA(diffusion_model)
        self.step, self.samples = 0, {}

    def train(self):
        accelerator = self.accelerator
        device = accelerator.device
        while self.step < self.train_num_steps:
            self.model.train()
            total_loss = 0.
            for _ in range(self.gradient_accumulate_every):
                data = next(self.dl).to(device)
                with self.accelerator.autocast():
                    loss = self.model(data)
                    loss = loss / self.gradient_accumulate_every
                    total_loss += loss.item()
                self.accelerator.backward(loss)
            print(f"loss: {total_loss:.4f}")
            accelerator.wait_for_everyone()
            accelerator.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
            self.opt.step()
            self.opt.zero_grad()
            accelerator.wait_for_everyone()
            self.step += 1
            if accelerator.is_main_process:
                self.ema.update()
                if self.step != 0 and self.step % self.save_and_sample_every == 0:
                    self.ema.ema_model.eval()
                    with torch.inference_mode():
                        milestone = self.step // self.save_and_sample_every
                        groups = [self.num_samples // 2, self.num_samples - self.num_samples // 2]
                        images = [self.ema.ema_model.sample(batch_size=n) for n in groups]
                    self.samples[milestone] = torch.cat(images, dim=0)
        accelerator.print("training complete")


def main(watch):
    torch.manual_seed(0)
    diffusion = Diffusion(SmallUnet(dim=8), image_size=8, timesteps=8)
    trainer = Trainer(diffusion)
    with watch(diffusion):
        trainer.train()
    return [diffusion, trainer.opt, trainer.ema.ema_model]


from tests.doctor_published import variant  # noqa: E402

VARIANTS = [
    variant("micro_batch_loss_not_divided", "unscaled_accumulation",
            ("                    loss = loss / self.gradient_accumulate_every\n", "")),
    variant("zero_grad_every_micro_batch", "zero_grad_after_backward",
            ("                self.accelerator.backward(loss)\n",
             "                self.accelerator.backward(loss)\n                self.opt.zero_grad()\n"),
            ("            self.opt.step()\n            self.opt.zero_grad()\n", "            self.opt.step()\n")),
    variant("no_zero_grad", "missing_zero_grad",
            ("            self.opt.step()\n            self.opt.zero_grad()\n", "            self.opt.step()\n")),
    variant("clip_at_start_of_step", "clip_before_backward",
            ("            accelerator.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)\n", ""),
            ("            total_loss = 0.\n",
             "            total_loss = 0.\n"
             "            accelerator.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)\n")),
    variant("loss_curve_kept_as_tensors", "graph_attached_logging",
            ("        self.step, self.samples = 0, {}\n", "        self.step, self.samples, self.history = 0, {}, []\n"),
            ("                    total_loss += loss.item()\n", "                    total_loss += loss\n"),
            ('            print(f"loss: {total_loss:.4f}")\n',
             '            self.history.append(total_loss)\n            print(f"loss: {total_loss:.4f}")\n')),
]
