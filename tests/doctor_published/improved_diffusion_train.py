# Mirrors: openai/improved-diffusion, improved_diffusion/train_util.py at commit 1bc7bbbdc414 (2024-03-12),
# re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed). Mirrored: TrainLoop (run_loop, run_step, forward_backward, optimize_fp16,
# optimize_normal, _anneal_lr, log_loss_dict) with fp16_util.py (make_master_params, model_grads_to_master_grads,
# master_params_to_model_params, zero_grad), resample.py (UniformSampler), nn.py (update_ema, GroupNorm32),
# image_datasets.py (load_data), logger.py (logkv_mean, dumpkvs), gaussian_diffusion.py (training_losses for the
# "mse" loss) and scripts/image_train.py; train_util.py last changed in 6051920 (2021-02-19).
# Kept: a step-based loop with no epochs: an endless generator over a shuffled DataLoader with drop_last=True yields
# (images in [-1, 1], cond dict); run_loop steps until lr_anneal_steps, dumping the logger every log_interval steps
# and saving every save_interval; run_step = forward_backward, then optimize_fp16 or optimize_normal, then
# log_step; forward_backward zeroes the model's gradients by hand (detach_ and zero_ of each .grad), then for each
# microbatch of `microbatch` images (the whole batch by default, microbatch=-1) draws timesteps from a
# UniformSampler (importance weights all 1), computes the diffusion losses (noise prediction, MSE averaged over all
# but the batch dimension), takes (losses["loss"] * weights).mean() and backpropagates it as is (each microbatch's
# mean loss added into the gradients, not divided by the number of microbatches), logging every loss term by
# timestep quartile with .mean().item() and per-example values through .detach().numpy(); optimize_normal logs the
# gradient norm (.item()), sets the linearly annealed lr in param_groups by hand (_anneal_lr), steps AdamW and
# updates the EMA copies of the parameters; the fp16 path (use_fp16): convolutions cast to half after flattened fp32
# master parameters are made and before AdamW is built over the masters, the loss multiplied by 2**lg_loss_scale,
# a non-finite gradient skips the step and lowers the scale, the model's gradients copied into the master gradient
# and unscaled, AdamW stepped on the masters, the masters copied back into the model, the scale grown slowly;
# GroupNorm computed in float32; the model is never switched between train() and eval() (there is no validation).
# The published loop has none of the registry's bugs at its defaults (microbatch=-1: one backward per step). With
# --microbatch set, each microbatch's mean is backpropagated without dividing by their count; with AdamW and
# microbatches of one size that only scales the gradient, but a batch that does not split evenly weighs the last
# microbatch's images more (a variant below).
# Shrunk: 64 synthetic 3x8x8 images (blurred colour blobs), batch 8, 60 steps (lr_anneal_steps, which also ends the
# run), a diffusion of 100 linear-beta steps, a UNet of one residual block of width 16 with a timestep embedding
# (GroupNorm32, SiLU, no attention, no down/up-sampling), lr 2e-3 (not 1e-4) so the tiny run learns, EMA rate
# 0.9999 as published, log_interval 10; on the CPU the "fp16" cast is bfloat16; no blobfile, no DDP, no
# checkpoint files (save() keeps state_dicts in memory).
# Added: `with watch(model):` around the TrainLoop(...).run_loop() line of image_train.py.
import copy
import functools
import math

import numpy as np
import torch as th
from torch import nn
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors
from torch.optim import AdamW

INITIAL_LOG_LOSS_SCALE = 20.0
HALF = th.bfloat16     # the CPU's half type


# ---------------------------------------------------------------- logger (improved_diffusion/logger.py, shrunk)
class Logger:
    def __init__(self):
        self.name2val, self.name2cnt = {}, {}

    def logkv(self, key, val):
        self.name2val[key] = val

    def logkv_mean(self, key, val):
        oldval, cnt = self.name2val.get(key, 0.0), self.name2cnt.get(key, 0)
        self.name2val[key] = oldval * cnt / (cnt + 1) + val / (cnt + 1)
        self.name2cnt[key] = cnt + 1

    def dumpkvs(self):
        print(" | ".join(f"{k} {float(v):.4g}" for k, v in sorted(self.name2val.items())))
        self.name2val.clear()
        self.name2cnt.clear()

    def log(self, *args):
        print(*args)


logger = Logger()


# ---------------------------------------------------------------- fp16_util.py
def convert_module_to_f16(layer):
    if isinstance(layer, nn.Conv2d):
        layer.weight.data = layer.weight.data.to(HALF)
        layer.bias.data = layer.bias.data.to(HALF)


def make_master_params(model_params):
    master = nn.Parameter(_flatten_dense_tensors([p.detach().float() for p in model_params]))
    master.requires_grad = True
    return [master]


def model_grads_to_master_grads(model_params, master_params):
    master_params[0].grad = _flatten_dense_tensors([p.grad.data.detach().float() for p in model_params])


def master_params_to_model_params(model_params, master_params):
    for param, master in zip(model_params, _unflatten_dense_tensors(master_params[0].detach(), model_params)):
        param.detach().copy_(master)


def zero_grad(model_params):
    for param in model_params:
        if param.grad is not None:
            param.grad.detach_()
            param.grad.zero_()


# ---------------------------------------------------------------- nn.py, unet.py (shrunk)
class GroupNorm32(nn.GroupNorm):
    def forward(self, x):
        return super().forward(x.float()).type(x.dtype)


def update_ema(target_params, source_params, rate=0.99):
    for targ, src in zip(target_params, source_params):
        targ.detach().mul_(rate).add_(src, alpha=1 - rate)


def timestep_embedding(timesteps, dim, max_period=10000):
    half = dim // 2
    freqs = th.exp(-math.log(max_period) * th.arange(half, dtype=th.float32) / half)
    args = timesteps[:, None].float() * freqs[None]
    return th.cat([th.cos(args), th.sin(args)], dim=-1)


class ResBlock(nn.Module):
    def __init__(self, channels, emb_channels):
        super().__init__()
        self.in_layers = nn.Sequential(GroupNorm32(8, channels), nn.SiLU(), nn.Conv2d(channels, channels, 3, padding=1))
        self.emb_layers = nn.Sequential(nn.SiLU(), nn.Linear(emb_channels, channels))
        self.out_layers = nn.Sequential(GroupNorm32(8, channels), nn.SiLU(), nn.Conv2d(channels, channels, 3, padding=1))

    def forward(self, x, emb):
        h = self.in_layers(x)
        h = h + self.emb_layers(emb).type(h.dtype)[..., None, None]
        return x + self.out_layers(h)


class TinyUNet(nn.Module):
    def __init__(self, in_channels=3, model_channels=16):
        super().__init__()
        self.model_channels = model_channels
        self.time_embed = nn.Sequential(nn.Linear(model_channels, 4 * model_channels), nn.SiLU(),
                                        nn.Linear(4 * model_channels, 4 * model_channels))
        self.input_blocks = nn.Conv2d(in_channels, model_channels, 3, padding=1)
        self.middle_block = ResBlock(model_channels, 4 * model_channels)
        self.out = nn.Sequential(GroupNorm32(8, model_channels), nn.SiLU(),
                                 nn.Conv2d(model_channels, in_channels, 3, padding=1))
        self.dtype = th.float32

    def convert_to_fp16(self):
        self.input_blocks.apply(convert_module_to_f16)
        self.middle_block.apply(convert_module_to_f16)
        self.dtype = HALF

    def forward(self, x, timesteps, y=None):
        emb = self.time_embed(timestep_embedding(timesteps, self.model_channels))
        h = self.input_blocks(x.type(self.dtype))
        h = self.middle_block(h, emb)
        return self.out(h.type(x.dtype))


# ---------------------------------------------------------------- gaussian_diffusion.py (the "mse" loss only)
def mean_flat(tensor):
    return tensor.mean(dim=list(range(1, len(tensor.shape))))


class GaussianDiffusion:
    def __init__(self, num_timesteps=100):
        self.num_timesteps = num_timesteps
        betas = np.linspace(1000 / num_timesteps * 0.0001, 1000 / num_timesteps * 0.02, num_timesteps)
        alphas_cumprod = np.cumprod(1.0 - betas)
        self.sqrt_alphas_cumprod = th.tensor(np.sqrt(alphas_cumprod), dtype=th.float32)
        self.sqrt_one_minus_alphas_cumprod = th.tensor(np.sqrt(1.0 - alphas_cumprod), dtype=th.float32)

    def q_sample(self, x_start, t, noise):
        return (self.sqrt_alphas_cumprod[t][:, None, None, None] * x_start
                + self.sqrt_one_minus_alphas_cumprod[t][:, None, None, None] * noise)

    def training_losses(self, model, x_start, t, model_kwargs=None):
        noise = th.randn_like(x_start)
        x_t = self.q_sample(x_start, t, noise)
        model_output = model(x_t, t, **(model_kwargs or {}))
        terms = {"mse": mean_flat((noise - model_output) ** 2)}
        terms["loss"] = terms["mse"]
        return terms


class UniformSampler:
    def __init__(self, diffusion):
        self._weights = np.ones([diffusion.num_timesteps])

    def sample(self, batch_size, device):
        p = self._weights / np.sum(self._weights)
        indices = th.from_numpy(np.random.choice(len(p), size=(batch_size,), p=p)).long().to(device)
        weights = th.from_numpy(1 / (len(p) * p[indices.numpy()])).float().to(device)
        return indices, weights


# ---------------------------------------------------------------- image_datasets.py (stand-in images)
class BlobImages(th.utils.data.Dataset):
    def __init__(self, count, size=8, seed=0):
        g = th.Generator().manual_seed(seed)
        yy, xx = th.meshgrid(th.arange(size).float(), th.arange(size).float(), indexing="ij")
        self.images = []
        for _ in range(count):
            cy, cx = (float(v) for v in th.rand(2, generator=g) * (size - 1))
            colour = th.rand(3, generator=g) * 2 - 1
            blob = th.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 6.0)
            self.images.append((colour[:, None, None] * blob).clamp(-1, 1))

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        return self.images[idx], {}


def load_data(batch_size, deterministic=False):
    dataset = BlobImages(64)
    loader = th.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=not deterministic, num_workers=0,
                                      drop_last=True)
    while True:
        yield from loader


# ---------------------------------------------------------------- train_util.py
class TrainLoop:
    def __init__(self, *, model, diffusion, data, batch_size, microbatch, lr, ema_rate, log_interval,
                 save_interval, use_fp16=False, fp16_scale_growth=1e-3, schedule_sampler=None, weight_decay=0.0,
                 lr_anneal_steps=0):
        self.model, self.diffusion, self.data = model, diffusion, data
        self.batch_size = batch_size
        self.microbatch = microbatch if microbatch > 0 else batch_size
        self.lr = lr
        self.ema_rate = [ema_rate] if isinstance(ema_rate, float) else [float(x) for x in ema_rate.split(",")]
        self.log_interval, self.save_interval = log_interval, save_interval
        self.use_fp16, self.fp16_scale_growth = use_fp16, fp16_scale_growth
        self.schedule_sampler = schedule_sampler or UniformSampler(diffusion)
        self.weight_decay, self.lr_anneal_steps = weight_decay, lr_anneal_steps
        self.step, self.resume_step = 0, 0
        self.global_batch = self.batch_size
        self.saved = {}

        self.model_params = list(self.model.parameters())
        self.master_params = self.model_params
        self.lg_loss_scale = INITIAL_LOG_LOSS_SCALE
        if self.use_fp16:
            self._setup_fp16()

        self.opt = AdamW(self.master_params, lr=self.lr, weight_decay=self.weight_decay)
        self.ema_params = [copy.deepcopy(self.master_params) for _ in range(len(self.ema_rate))]
        self.use_ddp = False
        self.ddp_model = self.model

    def _setup_fp16(self):
        self.master_params = make_master_params(self.model_params)
        self.model.convert_to_fp16()

    def run_loop(self):
        while not self.lr_anneal_steps or self.step + self.resume_step < self.lr_anneal_steps:
            batch, cond = next(self.data)
            self.run_step(batch, cond)
            if self.step % self.log_interval == 0:
                logger.dumpkvs()
            if self.step % self.save_interval == 0:
                self.save()
            self.step += 1
        if (self.step - 1) % self.save_interval != 0:
            self.save()

    def run_step(self, batch, cond):
        self.forward_backward(batch, cond)
        if self.use_fp16:
            self.optimize_fp16()
        else:
            self.optimize_normal()
        self.log_step()

    def forward_backward(self, batch, cond):
        zero_grad(self.model_params)
        for i in range(0, batch.shape[0], self.microbatch):
            micro = batch[i: i + self.microbatch]
            micro_cond = {k: v[i: i + self.microbatch] for k, v in cond.items()}
            t, weights = self.schedule_sampler.sample(micro.shape[0], "cpu")
            compute_losses = functools.partial(self.diffusion.training_losses, self.ddp_model, micro, t,
                                               model_kwargs=micro_cond)
            losses = compute_losses()
            loss = (losses["loss"] * weights).mean()
            log_loss_dict(self.diffusion, t, {k: v * weights for k, v in losses.items()})
            if self.use_fp16:
                loss_scale = 2 ** self.lg_loss_scale
                (loss * loss_scale).backward()
            else:
                loss.backward()

    def optimize_fp16(self):
        if any(not th.isfinite(p.grad).all() for p in self.model_params):
            self.lg_loss_scale -= 1
            logger.log(f"Found NaN, decreased lg_loss_scale to {self.lg_loss_scale}")
            return
        model_grads_to_master_grads(self.model_params, self.master_params)
        self.master_params[0].grad.mul_(1.0 / (2 ** self.lg_loss_scale))
        self._log_grad_norm()
        self._anneal_lr()
        self.opt.step()
        for rate, params in zip(self.ema_rate, self.ema_params):
            update_ema(params, self.master_params, rate=rate)
        master_params_to_model_params(self.model_params, self.master_params)
        self.lg_loss_scale += self.fp16_scale_growth

    def optimize_normal(self):
        self._log_grad_norm()
        self._anneal_lr()
        self.opt.step()
        for rate, params in zip(self.ema_rate, self.ema_params):
            update_ema(params, self.master_params, rate=rate)

    def _log_grad_norm(self):
        sqsum = 0.0
        for p in self.master_params:
            sqsum += (p.grad ** 2).sum().item()
        logger.logkv_mean("grad_norm", np.sqrt(sqsum))

    def _anneal_lr(self):
        if not self.lr_anneal_steps:
            return
        frac_done = (self.step + self.resume_step) / self.lr_anneal_steps
        lr = self.lr * (1 - frac_done)
        for param_group in self.opt.param_groups:
            param_group["lr"] = lr

    def log_step(self):
        logger.logkv("step", self.step + self.resume_step)
        logger.logkv("samples", (self.step + self.resume_step + 1) * self.global_batch)
        if self.use_fp16:
            logger.logkv("lg_loss_scale", self.lg_loss_scale)

    def save(self):
        self.saved[self.step] = (copy.deepcopy(self.model.state_dict()), copy.deepcopy(self.opt.state_dict()))


def log_loss_dict(diffusion, ts, losses):
    for key, values in losses.items():
        logger.logkv_mean(key, values.mean().item())
        for sub_t, sub_loss in zip(ts.cpu().numpy(), values.detach().cpu().numpy()):
            quartile = int(4 * sub_t / diffusion.num_timesteps)
            logger.logkv_mean(f"{key}_q{quartile}", sub_loss)


# ---------------------------------------------------------------- scripts/image_train.py
def main(watch):
    th.manual_seed(0)
    np.random.seed(0)
    logger.name2val.clear()
    logger.name2cnt.clear()
    model = TinyUNet()
    diffusion = GaussianDiffusion(100)
    schedule_sampler = UniformSampler(diffusion)
    data = load_data(batch_size=8)
    loop = None
    with watch(model):
        loop = TrainLoop(model=model, diffusion=diffusion, data=data, batch_size=8, microbatch=-1, lr=2e-3,
                         ema_rate="0.9999", log_interval=10, save_interval=10000, use_fp16=False,
                         fp16_scale_growth=1e-3, schedule_sampler=schedule_sampler, weight_decay=0.0,
                         lr_anneal_steps=60)
        loop.run_loop()
    return [model, loop.opt]


from tests.doctor_published import variant  # noqa: E402

REAL = set()
VARIANTS = [
    # --microbatch 3 with a batch of 8: microbatches of 3, 3 and 2 images, each mean backpropagated as is, so the
    # last two images weigh 3/2 as much as the others (and the gradient is about three batch means)
    variant("microbatch_not_dividing_the_batch", "unscaled_accumulation",
            ("microbatch=-1,", "microbatch=3,")),
    # the hand-written zero_grad moved into the microbatch loop ("zero before each backward"): only the last
    # microbatch's gradient reaches the step
    variant("zero_grad_inside_microbatch_loop", "zero_grad_after_backward",
            ("microbatch=-1,", "microbatch=4,"),
            ("        zero_grad(self.model_params)\n        for i in range(0, batch.shape[0], self.microbatch):\n",
             "        for i in range(0, batch.shape[0], self.microbatch):\n            zero_grad(self.model_params)\n")),
    # the loss terms handed to the running-mean logger without .item(): between dumps the logger's running mean
    # chains every step's graph
    variant("loss_terms_logged_as_tensors", "graph_attached_logging",
            ("        logger.logkv_mean(key, values.mean().item())\n", "        logger.logkv_mean(key, values.mean())\n")),
    # the hand annealing replaced by a LambdaLR, stepped where _anneal_lr was called: before opt.step()
    variant("lambdalr_stepped_before_the_step", "scheduler_before_optimizer",
            ("        self.ema_params = [copy.deepcopy",
             "        self.sched = th.optim.lr_scheduler.LambdaLR(self.opt, lambda s: 1 - s / self.lr_anneal_steps)\n"
             "        self.ema_params = [copy.deepcopy"),
            ("    def optimize_normal(self):\n        self._log_grad_norm()\n        self._anneal_lr()\n",
             "    def optimize_normal(self):\n        self._log_grad_norm()\n        self.sched.step()\n")),
    # use_fp16 with the cast moved below AdamW: the optimizer holds the model's (now half) parameters, the masters
    # are made afterwards outside it, and every step copies the unchanged masters back over the update
    variant("fp16_set_up_after_the_optimizer", "half_after_optimizer",
            ("save_interval=10000, use_fp16=False,", "save_interval=10000, use_fp16=True,"),
            ("        if self.use_fp16:\n            self._setup_fp16()\n\n"
             "        self.opt = AdamW(self.master_params, lr=self.lr, weight_decay=self.weight_decay)\n",
             "        self.opt = AdamW(self.master_params, lr=self.lr, weight_decay=self.weight_decay)\n"
             "        if self.use_fp16:\n            self._setup_fp16()\n")),
    # not a bug: the published fp16 path (model cast to half after fp32 masters are made, the optimizer built over
    # the masters, gradients copied across and unscaled by hand)
    variant("published_fp16_master_weights", set(), ("save_interval=10000, use_fp16=False,", "save_interval=10000, use_fp16=True,")),
    # not a bug: gradients zeroed at the end of each step (after the step and the EMA) instead of at the start of
    # forward_backward; they start as None, so every backward still lands on zeroed gradients
    variant("zero_grad_after_the_step", set(),
            ("        zero_grad(self.model_params)\n        for i in range(0, batch.shape[0], self.microbatch):\n",
             "        for i in range(0, batch.shape[0], self.microbatch):\n"),
            ("            self.optimize_normal()\n        self.log_step()\n",
             "            self.optimize_normal()\n        zero_grad(self.model_params)\n        self.log_step()\n")),
]
