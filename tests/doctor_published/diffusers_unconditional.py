# Mirrors: huggingface/diffusers, examples/unconditional_image_generation/train_unconditional.py (main), with what it
# calls from src/diffusers: UNet2DModel (ResnetBlock2D, Attention, DownBlock2D/AttnDownBlock2D, UpBlock2D/
# AttnUpBlock2D, UNetMidBlock2D), DDPMScheduler, DDPMPipeline, training_utils.EMAModel and
# optimization.get_scheduler("cosine"), snapshot at commit 58eb52c0803e (2026-08-23); the script last changed in
# c56add8081be (2026-07-08). Accelerate (Accelerator with gradient_accumulation_steps, accumulate(), backward(),
# sync_gradients, the prepared optimizer and scheduler) is replaced by the plain loop it amounts to on one process,
# read from accelerate 1.15: accelerator.backward(loss) divides the loss by gradient_accumulation_steps before
# backward(); a step is a sync step at the end of every window of gradient_accumulation_steps micro-batches and at
# the end of the loader (sync_with_dataloader); the prepared optimizer's step() and zero_grad() and the prepared
# scheduler's step() do nothing on the other micro-batches, so here they sit under `if sync_gradients:`;
# accelerator.clip_grad_norm_ is clip_grad_norm_; accelerator.log a tracker that keeps the logged values.
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: a UNet2DModel built from its config (down blocks DownBlock2D then AttnDownBlock2D, a mid block with
# attention, up blocks AttnUpBlock2D then UpBlock2D with skip connections, sinusoidal timestep embedding, GroupNorm,
# SiLU, dropout 0.0 as diffusers' default), an EMAModel over model.parameters() with EMA warmup (inv_gamma 1.0,
# power 3/4, max decay 0.9999) made before the optimizer; DDPMScheduler (1000 steps, linear betas) for add_noise and
# sampling; AdamW (betas 0.95/0.999, weight decay 1e-6, eps 1e-8); a dataset of images transformed to a dict
# {"input": tensor} in [-1, 1] with a random flip, a DataLoader with shuffle=True and no drop_last; get_scheduler(
# "cosine") built with num_warmup_steps = lr_warmup_steps * gradient_accumulation_steps and num_training_steps =
# len(train_dataloader) * num_epochs, both in micro-batches, while the scheduler is stepped once per update (the
# prepared scheduler skips the other micro-batches); per epoch model.train(), per batch: clean images, noise and
# random timesteps drawn, noisy images from add_noise, the forward, F.mse_loss(model_output.float(),
# noise.float()) (epsilon prediction; the "sample" branch with SNR weights kept), backward of loss /
# gradient_accumulation_steps, on sync steps clip_grad_norm_(model.parameters(), 1.0), optimizer.step(),
# lr_scheduler.step(), optimizer.zero_grad(), then ema_model.step(model.parameters()) and global_step += 1; logs
# {"loss": loss.detach().item(), "lr": lr_scheduler.get_last_lr()[0], "step": global_step, "ema_decay": ...} every
# micro-batch; after the epoch, every save_images_epochs and at the last epoch: the EMA weights stored, copied into
# the model, a DDPMPipeline sampling (decorated @torch.no_grad(), and never calling eval(): the UNet samples in train
# mode, harmless while it has no dropout and only GroupNorm), the weights restored, the images scaled to uint8 and
# logged.
# REAL: none of the registry's bugs. Two things come close. (1) The cosine schedule is sized in micro-batches but
# stepped once per update: with gradient_accumulation_steps K > 1 its warmup lasts lr_warmup_steps * K updates and
# the run ends 1/K of the way along it (here K = 2: the last lr is 0.62 of the peak instead of near 0); with the
# README's K = 1 it is exact. No registry name covers a schedule stretched K times (update_schedule_per_epoch is
# len(loader) times too slow). (2) accelerator.backward divides by K even in an epoch's short last window and weights
# a short last batch like a full one (no drop_last); here the 48 images make 6 full batches of 8 and 3 full windows
# of 2, so no window is short (with the README's K = 1 none can be).
# Shrunk: 48 synthetic 16x16 RGB "flowers" (a few flat coloured discs on a tinted gradient), resolution 16 (64 in
# the README) with no resize or crop, batch size 8 (16), gradient_accumulation_steps 2 (the README uses 1; 2 keeps
# the accumulation in play), 3 epochs (100), so 9 updates; lr 2e-3 (1e-4 barely moves in 9 updates) with 2 warmup
# updates (500); block_out_channels (8, 16) with layers_per_block 1 and GroupNorm of 4 groups (the script's default
# model is (128, 128, 256, 256, 512, 512) with 2 layers per block and 32 groups), single-head attention; samples
# every 2 epochs (10) with 10 inference steps (1000) and eval_batch_size 4 (16); mixed_precision "no" (as in the
# README); one process, the CPU; no checkpoints, no saved pipeline, no hub, no resume, no tqdm. The epoch's mean loss
# falls from about 1.17 to 0.89.
# Added: `with watch(model):` around the epochs.
import math
from types import SimpleNamespace

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset


def parse_args():
    """What the script reads from its command line, at the shrunk README settings."""
    return SimpleNamespace(resolution=16, random_flip=True, train_batch_size=8, eval_batch_size=4, num_epochs=3,
                           save_images_epochs=2, gradient_accumulation_steps=2, learning_rate=2e-3,
                           lr_scheduler="cosine", lr_warmup_steps=2, adam_beta1=0.95, adam_beta2=0.999,
                           adam_weight_decay=1e-6, adam_epsilon=1e-8, use_ema=True, ema_inv_gamma=1.0, ema_power=0.75,
                           ema_max_decay=0.9999, mixed_precision="no", prediction_type="epsilon",
                           ddpm_num_steps=1000, ddpm_num_inference_steps=10, ddpm_beta_schedule="linear",
                           checkpointing_steps=500, dataloader_num_workers=0, seed=0)


# --- data ---------------------------------------------------------------------------------------------------

class Flowers(Dataset):
    """Stand-in for load_dataset(...) with set_transform(transform_images): {"input": image in [-1, 1]}."""

    def __init__(self, n, size, random_flip, seed=0):
        g = torch.Generator().manual_seed(seed)
        yy, xx = torch.meshgrid(torch.linspace(0, 1, size), torch.linspace(0, 1, size), indexing="ij")
        images = []
        for _ in range(n):
            img = (0.3 * torch.rand(3, 1, 1, generator=g) + 0.2 * torch.rand(3, 1, 1, generator=g) * yy).expand(
                3, size, size).clone()
            for _ in range(int(torch.randint(1, 4, (1,), generator=g))):
                cy, cx, r = torch.rand(3, generator=g) * torch.tensor([1.0, 1.0, 0.25]) + torch.tensor([0, 0, 0.1])
                disc = (((yy - cy) ** 2 + (xx - cx) ** 2) < r ** 2).float()
                img = img * (1 - disc) + torch.rand(3, 1, 1, generator=g) * disc
            images.append(img)
        self.data = torch.stack(images)      # pixels in [0, 1], as ToTensor gives
        self.random_flip = random_flip

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        img = self.data[i]
        if self.random_flip and torch.rand(1) < 0.5:      # transforms.RandomHorizontalFlip()
            img = img.flip(-1)
        return {"input": (img - 0.5) / 0.5}              # transforms.Normalize([0.5], [0.5])


# --- diffusers stand-ins --------------------------------------------------------------------------------------

class UNet2DOutput:
    def __init__(self, sample):
        self.sample = sample


def timestep_embedding(timesteps, dim, max_period=10000):
    half = dim // 2
    exponent = -math.log(max_period) * torch.arange(half, dtype=torch.float32) / half
    emb = timesteps[:, None].float() * torch.exp(exponent)[None, :]
    return torch.cat([torch.cos(emb), torch.sin(emb)], dim=-1)     # flip_sin_to_cos=True


class ResnetBlock2D(nn.Module):
    def __init__(self, in_channels, out_channels, temb_channels, groups=8, dropout=0.0):
        super().__init__()
        self.norm1, self.conv1 = nn.GroupNorm(groups, in_channels), nn.Conv2d(in_channels, out_channels, 3, padding=1)
        self.time_emb_proj = nn.Linear(temb_channels, out_channels)
        self.norm2, self.dropout = nn.GroupNorm(groups, out_channels), nn.Dropout(dropout)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1)
        self.conv_shortcut = nn.Conv2d(in_channels, out_channels, 1) if in_channels != out_channels else None

    def forward(self, x, temb):
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.time_emb_proj(F.silu(temb))[:, :, None, None]
        h = self.conv2(self.dropout(F.silu(self.norm2(h))))
        return (self.conv_shortcut(x) if self.conv_shortcut is not None else x) + h


class Attention(nn.Module):
    def __init__(self, channels, groups=8):
        super().__init__()
        self.group_norm = nn.GroupNorm(groups, channels)
        self.to_q, self.to_k, self.to_v = nn.Linear(channels, channels), nn.Linear(channels, channels), \
            nn.Linear(channels, channels)
        self.to_out = nn.Linear(channels, channels)

    def forward(self, x):
        b, c, h, w = x.shape
        t = self.group_norm(x).flatten(2).transpose(1, 2)
        out = F.scaled_dot_product_attention(self.to_q(t), self.to_k(t), self.to_v(t))
        return x + self.to_out(out).transpose(1, 2).reshape(b, c, h, w)


class UNet2DModel(nn.Module):
    """UNet2DModel(sample_size, 3 -> 3, layers_per_block=1, block_out_channels=(16, 32),
    down: DownBlock2D, AttnDownBlock2D; up: AttnUpBlock2D, UpBlock2D)."""

    def __init__(self, sample_size=16, in_channels=3, out_channels=3, block_out_channels=(16, 32), norm_num_groups=8,
                 dropout=0.0):
        super().__init__()
        self.config = SimpleNamespace(sample_size=sample_size, in_channels=in_channels, out_channels=out_channels)
        c0, c1 = block_out_channels
        temb = 4 * c0
        self.time_embedding = nn.Sequential(nn.Linear(c0, temb), nn.SiLU(), nn.Linear(temb, temb))
        self.conv_in = nn.Conv2d(in_channels, c0, 3, padding=1)
        g = norm_num_groups
        self.down0 = ResnetBlock2D(c0, c0, temb, g, dropout)
        self.downsample = nn.Conv2d(c0, c0, 3, stride=2, padding=1)
        self.down1, self.down1_attn = ResnetBlock2D(c0, c1, temb, g, dropout), Attention(c1, g)
        self.mid1, self.mid_attn = ResnetBlock2D(c1, c1, temb, g, dropout), Attention(c1, g)
        self.mid2 = ResnetBlock2D(c1, c1, temb, g, dropout)
        self.up0a, self.up0a_attn = ResnetBlock2D(2 * c1, c1, temb, g, dropout), Attention(c1, g)
        self.up0b, self.up0b_attn = ResnetBlock2D(c1 + c0, c1, temb, g, dropout), Attention(c1, g)
        self.upsample = nn.Conv2d(c1, c1, 3, padding=1)
        self.up1a = ResnetBlock2D(c1 + c0, c0, temb, g, dropout)
        self.up1b = ResnetBlock2D(2 * c0, c0, temb, g, dropout)
        self.conv_norm_out, self.conv_out = nn.GroupNorm(g, c0), nn.Conv2d(c0, out_channels, 3, padding=1)
        self.c0 = c0

    @property
    def dtype(self):
        return next(self.parameters()).dtype

    @property
    def device(self):
        return next(self.parameters()).device

    def forward(self, sample, timestep):
        timesteps = torch.as_tensor(timestep, device=sample.device).reshape(-1).expand(sample.shape[0])
        emb = self.time_embedding(timestep_embedding(timesteps, self.c0))
        h = self.conv_in(sample)
        s0 = h
        h = self.down0(h, emb)
        s1 = h
        h = self.downsample(h)
        s2 = h
        h = self.down1_attn(self.down1(h, emb))
        s3 = h
        h = self.mid2(self.mid_attn(self.mid1(h, emb)), emb)
        h = self.up0a_attn(self.up0a(torch.cat([h, s3], 1), emb))
        h = self.up0b_attn(self.up0b(torch.cat([h, s2], 1), emb))
        h = self.upsample(F.interpolate(h, scale_factor=2.0, mode="nearest"))
        h = self.up1a(torch.cat([h, s1], 1), emb)
        h = self.up1b(torch.cat([h, s0], 1), emb)
        return UNet2DOutput(self.conv_out(F.silu(self.conv_norm_out(h))))


class DDPMScheduler:
    """add_noise for training; set_timesteps and step (variance "fixed_small", clipped x0) for sampling."""

    def __init__(self, num_train_timesteps=1000, beta_schedule="linear", prediction_type="epsilon"):
        self.config = SimpleNamespace(num_train_timesteps=num_train_timesteps, prediction_type=prediction_type)
        self.betas = torch.linspace(1e-4, 0.02, num_train_timesteps, dtype=torch.float32)
        self.alphas_cumprod = torch.cumprod(1.0 - self.betas, dim=0)
        self.timesteps = torch.arange(num_train_timesteps - 1, -1, -1)
        self.num_inference_steps = num_train_timesteps

    def add_noise(self, original_samples, noise, timesteps):
        a = self.alphas_cumprod[timesteps].to(original_samples.dtype).view(-1, 1, 1, 1)
        return a.sqrt() * original_samples + (1 - a).sqrt() * noise

    def set_timesteps(self, num_inference_steps):
        self.num_inference_steps = num_inference_steps
        step_ratio = self.config.num_train_timesteps // num_inference_steps
        self.timesteps = torch.from_numpy((np.arange(0, num_inference_steps) * step_ratio).round()[::-1].copy())

    def step(self, model_output, timestep, sample, generator=None):
        t = int(timestep)
        prev_t = t - self.config.num_train_timesteps // self.num_inference_steps
        alpha_prod_t = self.alphas_cumprod[t]
        alpha_prod_t_prev = self.alphas_cumprod[prev_t] if prev_t >= 0 else torch.tensor(1.0)
        beta_prod_t, beta_prod_t_prev = 1 - alpha_prod_t, 1 - alpha_prod_t_prev
        current_alpha_t = alpha_prod_t / alpha_prod_t_prev
        current_beta_t = 1 - current_alpha_t
        pred_original_sample = ((sample - beta_prod_t.sqrt() * model_output) / alpha_prod_t.sqrt()).clamp(-1, 1)
        prev_sample = (alpha_prod_t_prev.sqrt() * current_beta_t / beta_prod_t * pred_original_sample
                       + current_alpha_t.sqrt() * beta_prod_t_prev / beta_prod_t * sample)
        if t > 0:
            variance = (beta_prod_t_prev / beta_prod_t * current_beta_t).clamp(min=1e-20)
            noise = torch.randn(model_output.shape, generator=generator, dtype=model_output.dtype)
            prev_sample = prev_sample + variance.sqrt() * noise
        return SimpleNamespace(prev_sample=prev_sample)


class DDPMPipeline:
    def __init__(self, unet, scheduler):
        self.unet, self.scheduler = unet, scheduler

    @torch.no_grad()
    def __call__(self, batch_size=1, generator=None, num_inference_steps=1000, output_type="pil"):
        size = self.unet.config.sample_size
        image = torch.randn((batch_size, self.unet.config.in_channels, size, size), generator=generator,
                            dtype=self.unet.dtype)
        self.scheduler.set_timesteps(num_inference_steps)
        for t in self.scheduler.timesteps:
            model_output = self.unet(image, t).sample
            image = self.scheduler.step(model_output, t, image, generator=generator).prev_sample
        image = (image / 2 + 0.5).clamp(0, 1)
        return SimpleNamespace(images=image.cpu().permute(0, 2, 3, 1).numpy())


class EMAModel:
    """training_utils.EMAModel: shadow parameters; with EMA warmup the decay is 1 - (1 + step / inv_gamma) ** -power."""

    def __init__(self, parameters, decay=0.9999, min_decay=0.0, update_after_step=0, use_ema_warmup=False,
                 inv_gamma=1.0, power=2 / 3, model_cls=None, model_config=None):
        self.shadow_params = [p.clone().detach() for p in parameters]
        self.decay, self.min_decay, self.update_after_step = decay, min_decay, update_after_step
        self.use_ema_warmup, self.inv_gamma, self.power = use_ema_warmup, inv_gamma, power
        self.optimization_step, self.cur_decay_value, self.temp_stored_params = 0, None, None

    def get_decay(self, optimization_step):
        step = max(0, optimization_step - self.update_after_step - 1)
        if step <= 0:
            return 0.0
        if self.use_ema_warmup:
            cur_decay_value = 1 - (1 + step / self.inv_gamma) ** -self.power
        else:
            cur_decay_value = (1 + step) / (10 + step)
        return max(min(cur_decay_value, self.decay), self.min_decay)

    @torch.no_grad()
    def step(self, parameters):
        parameters = list(parameters)
        self.optimization_step += 1
        decay = self.get_decay(self.optimization_step)
        self.cur_decay_value = decay
        for s_param, param in zip(self.shadow_params, parameters):
            if param.requires_grad:
                s_param.sub_((1 - decay) * (s_param - param))
            else:
                s_param.copy_(param)

    def to(self, device=None):
        self.shadow_params = [p.to(device) for p in self.shadow_params]

    def store(self, parameters):
        self.temp_stored_params = [param.detach().cpu().clone() for param in parameters]

    def copy_to(self, parameters):
        for s_param, param in zip(self.shadow_params, parameters):
            param.data.copy_(s_param.to(param.device).data)

    def restore(self, parameters):
        for c_param, param in zip(self.temp_stored_params, parameters):
            param.data.copy_(c_param.data)
        self.temp_stored_params = None


def get_scheduler(name, optimizer, num_warmup_steps, num_training_steps, num_cycles=0.5):
    """optimization.get_scheduler("cosine"): a LambdaLR, linear warmup then a half cosine to 0."""
    assert name == "cosine"

    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        progress = float(current_step - num_warmup_steps) / float(max(1, num_training_steps - num_warmup_steps))
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * float(num_cycles) * 2.0 * progress)))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)


class Tracker:
    """accelerator.log / the TensorBoard tracker: keeps what is logged."""

    def __init__(self):
        self.records, self.images = [], []

    def log(self, values, step=None):
        self.records.append((step, dict(values)))

    def add_images(self, tag, images, step):
        self.images.append((tag, images, step))


def _extract_into_tensor(arr, timesteps, broadcast_shape):
    res = arr[timesteps].float()
    while len(res.shape) < len(broadcast_shape):
        res = res[..., None]
    return res.expand(broadcast_shape)


# --- train_unconditional.py: main -------------------------------------------------------------------------------

def main(watch):
    args = parse_args()
    torch.manual_seed(args.seed)
    tracker = Tracker()

    model = UNet2DModel(sample_size=args.resolution, in_channels=3, out_channels=3, block_out_channels=(8, 16),
                        norm_num_groups=4)

    if args.use_ema:
        ema_model = EMAModel(model.parameters(), decay=args.ema_max_decay, use_ema_warmup=True,
                             inv_gamma=args.ema_inv_gamma, power=args.ema_power, model_cls=UNet2DModel,
                             model_config=model.config)

    weight_dtype = torch.float32

    noise_scheduler = DDPMScheduler(num_train_timesteps=args.ddpm_num_steps, beta_schedule=args.ddpm_beta_schedule,
                                    prediction_type=args.prediction_type)

    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, betas=(args.adam_beta1, args.adam_beta2),
                                  weight_decay=args.adam_weight_decay, eps=args.adam_epsilon)

    dataset = Flowers(48, args.resolution, args.random_flip)
    train_dataloader = DataLoader(dataset, batch_size=args.train_batch_size, shuffle=True,
                                  num_workers=args.dataloader_num_workers)

    lr_scheduler = get_scheduler(
        args.lr_scheduler,
        optimizer=optimizer,
        num_warmup_steps=args.lr_warmup_steps * args.gradient_accumulation_steps,
        num_training_steps=(len(train_dataloader) * args.num_epochs),
    )

    if args.use_ema:
        ema_model.to("cpu")

    num_update_steps_per_epoch = math.ceil(len(train_dataloader) / args.gradient_accumulation_steps)
    max_train_steps = args.num_epochs * num_update_steps_per_epoch
    print(f"Num examples = {len(dataset)}, total optimization steps = {max_train_steps}")

    global_step = 0
    first_epoch = 0

    with watch(model):
        for epoch in range(first_epoch, args.num_epochs):
            model.train()
            for step, batch in enumerate(train_dataloader):
                clean_images = batch["input"].to(weight_dtype)
                noise = torch.randn(clean_images.shape, dtype=weight_dtype, device=clean_images.device)
                bsz = clean_images.shape[0]
                timesteps = torch.randint(0, noise_scheduler.config.num_train_timesteps, (bsz,),
                                          device=clean_images.device).long()
                noisy_images = noise_scheduler.add_noise(clean_images, noise, timesteps)

                # accelerator.accumulate(model): sync at the end of every window and of the loader
                sync_gradients = (step + 1) % args.gradient_accumulation_steps == 0 or step + 1 == len(
                    train_dataloader)
                model_output = model(noisy_images, timesteps).sample

                if args.prediction_type == "epsilon":
                    loss = F.mse_loss(model_output.float(), noise.float())
                elif args.prediction_type == "sample":
                    alpha_t = _extract_into_tensor(noise_scheduler.alphas_cumprod, timesteps,
                                                   (clean_images.shape[0], 1, 1, 1))
                    snr_weights = alpha_t / (1 - alpha_t)
                    loss = snr_weights * F.mse_loss(model_output.float(), clean_images.float(), reduction="none")
                    loss = loss.mean()
                else:
                    raise ValueError(f"Unsupported prediction type: {args.prediction_type}")

                (loss / args.gradient_accumulation_steps).backward()        # accelerator.backward(loss)

                if sync_gradients:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    optimizer.step()
                    lr_scheduler.step()
                    optimizer.zero_grad()

                if sync_gradients:
                    if args.use_ema:
                        ema_model.step(model.parameters())
                    global_step += 1

                logs = {"loss": loss.detach().item(), "lr": lr_scheduler.get_last_lr()[0], "step": global_step}
                if args.use_ema:
                    logs["ema_decay"] = ema_model.cur_decay_value
                tracker.log(logs, step=global_step)

            epoch_losses = [r["loss"] for _, r in tracker.records if "loss" in r][-len(train_dataloader):]
            print(f"SUMMARY epoch {epoch}: mean loss {sum(epoch_losses) / len(epoch_losses):.4f}, "
                  f"lr {lr_scheduler.get_last_lr()[0]:.2e}")

            if epoch % args.save_images_epochs == 0 or epoch == args.num_epochs - 1:
                unet = model
                if args.use_ema:
                    ema_model.store(unet.parameters())
                    ema_model.copy_to(unet.parameters())
                pipeline = DDPMPipeline(unet=unet, scheduler=noise_scheduler)
                generator = torch.Generator(device="cpu").manual_seed(0)
                images = pipeline(generator=generator, batch_size=args.eval_batch_size,
                                  num_inference_steps=args.ddpm_num_inference_steps, output_type="np").images
                if args.use_ema:
                    ema_model.restore(unet.parameters())
                images_processed = (images * 255).round().astype("uint8")
                tracker.add_images("test_samples", images_processed.transpose(0, 3, 1, 2), epoch)
    return [model, optimizer]


from tests.doctor_published import variant  # noqa: E402

BACKWARD = "                (loss / args.gradient_accumulation_steps).backward()        # accelerator.backward(loss)\n"
REAL = set()
VARIANTS = [
    # ported off Accelerate, accelerator.backward(loss) written as loss.backward(): the division by
    # gradient_accumulation_steps that Accelerate did is gone, each update applies the sum of 2 micro-batch means
    variant("accelerator_backward_ported_as_plain_backward", "unscaled_accumulation",
            (BACKWARD, "                loss.backward()\n")),
    # ported off Accelerate, optimizer.zero_grad() left where the script calls it, on every micro-batch (the
    # prepared optimizer ignored it between sync steps; a plain one does not): the first micro-batch of every
    # window is wiped before the step
    variant("zero_grad_on_every_micro_batch", "zero_grad_after_backward",
            ("                    lr_scheduler.step()\n                    optimizer.zero_grad()\n",
             "                    lr_scheduler.step()\n                optimizer.zero_grad()\n")),
    # the cosine (sized in micro-batches: 4 warmup steps of 18) stepped once per epoch after the batch loop: the
    # warmup outlasts the 3 epochs and the lr never decays
    variant("cosine_stepped_once_per_epoch", "update_schedule_per_epoch",
            ("                    optimizer.step()\n                    lr_scheduler.step()\n",
             "                    optimizer.step()\n"),
            ("            epoch_losses = [", "            lr_scheduler.step()\n            epoch_losses = [")),
    # the scheduler stepped before the optimizer on sync steps: the first warmup lr (0) is never used
    variant("scheduler_stepped_before_the_optimizer", "scheduler_before_optimizer",
            ("                    optimizer.step()\n                    lr_scheduler.step()\n",
             "                    lr_scheduler.step()\n                    optimizer.step()\n")),
    # the UNet given dropout 0.1 (UNet2DModel's dropout argument): DDPMPipeline never calls eval(), so the EMA
    # weights now sample with dropout on
    variant("unet_with_dropout_sampled_in_train_mode", "eval_in_train_mode",
            ("                        norm_num_groups=4)\n",
             "                        norm_num_groups=4, dropout=0.1)\n")),
    # train_text_to_image.py's running train_loss added without .item(): each logged value is a tensor that keeps
    # its window's graph, and the tracker keeps every one
    variant("train_loss_accumulated_as_tensor", "graph_attached_logging",
            ("            model.train()\n", "            model.train()\n            train_loss = 0.0\n"),
            (BACKWARD, "                train_loss += loss / args.gradient_accumulation_steps\n" + BACKWARD),
            ("                    global_step += 1\n",
             "                    global_step += 1\n"
             "                    tracker.log({\"train_loss\": train_loss}, step=global_step)\n"
             "                    train_loss = 0.0\n")),
    # not a bug: the schedule sized in updates (warmup in updates, ceil(len / K) * epochs steps), as it is stepped:
    # the cosine now ends near 0
    variant("cosine_sized_in_updates", set(),
            ("        num_warmup_steps=args.lr_warmup_steps * args.gradient_accumulation_steps,\n"
             "        num_training_steps=(len(train_dataloader) * args.num_epochs),\n",
             "        num_warmup_steps=args.lr_warmup_steps,\n"
             "        num_training_steps=math.ceil(len(train_dataloader) / args.gradient_accumulation_steps) * "
             "args.num_epochs,\n")),
    # not a bug: gradients cleared at the start of each window (before its first forward) instead of after the step
    variant("zero_grad_at_window_start", set(),
            ("                    lr_scheduler.step()\n                    optimizer.zero_grad()\n",
             "                    lr_scheduler.step()\n"),
            ("                model_output = model(noisy_images, timesteps).sample\n",
             "                if step % args.gradient_accumulation_steps == 0:\n"
             "                    optimizer.zero_grad()\n"
             "                model_output = model(noisy_images, timesteps).sample\n")),
]
