# Mirrors: facebookresearch/ConvNeXt, engine.py (train_one_epoch, evaluate) and main.py (main), with
# models/convnext.py (ConvNeXt, Block, LayerNorm), optim_factory.py (create_optimizer, get_parameter_groups) and
# utils.py (SmoothedValue, MetricLogger, NativeScalerWithGradNormCount, get_grad_norm_, cosine_scheduler), snapshot at
# commit 048efcea897d (2022-07-23); engine.py last changed in 6157687b8df6 (2022-01-21), main.py in 4a293e6ab3b0
# (2022-02-01). From timm, which the loop imports: Mixup (with label smoothing), SoftTargetCrossEntropy, ModelEma,
# DropPath, trunc_normal_ and accuracy, written here to their documented behaviour.
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: a ConvNeXt (a patchify stem conv + channels-first LayerNorm, stages of blocks: 7x7 depthwise conv,
# channels-last LayerNorm, Linear 4x expansion, GELU, Linear back, a layer-scale gamma initialised at 1e-6, DropPath
# with rates rising linearly to drop_path; LayerNorm + 2x2 conv downsampling; global average pool, LayerNorm, a
# linear head); a training loader with drop_last=True and a validation loader with batch size int(1.5 * batch_size)
# and drop_last=False; a model EMA (timm's ModelEma: a deep copy put in eval mode once, its state_dict blended after
# every update) made before the optimizer, evaluated after the model each epoch (--model_ema_eval true, as in
# TRAINING.md); create_optimizer's AdamW over two param groups (weight decay 0.05; none for 1-D parameters and
# biases), each with an "lr_scale" of 1.0 (no layer decay); num_training_steps_per_epoch = len(dataset) //
# (batch_size * update_freq); per-iteration cosine schedules for the lr (with warmup) and the weight decay, computed
# up front as arrays by cosine_scheduler and written into every param group inside train_one_epoch; Mixup/CutMix
# with label smoothing 0.1 and SoftTargetCrossEntropy (so class_acc is None); train_one_epoch: model.train(True),
# optimizer.zero_grad() once before the batch loop, step = data_iter_step // update_freq, the micro-batches past
# num_training_steps_per_epoch * update_freq skipped with `continue` (they run no forward), it = start_steps + step,
# the lr and wd written into the param groups under the published condition `lr_schedule_values is not None or
# wd_schedule_values is not None and data_iter_step % update_freq == 0` (true at every micro-batch: harmless, `it`
# does not change within a window), mixup, the autocast forward and loss, loss.item() checked finite, then the AMP
# branch (use_amp true, as TRAINING.md suggests): loss /= update_freq, NativeScalerWithGradNormCount called every
# micro-batch (scale(loss).backward(); when update_grad, i.e. (data_iter_step + 1) % update_freq == 0: unscale_,
# clip_grad_norm_ only when clip_grad is set (None by default) else the norm measured, scaler.step, scaler.update),
# and after an update optimizer.zero_grad() and the EMA update; the full-precision branch kept as published;
# MetricLogger updated with loss.item(), the max and min lr, the weight decay and the grad norm (None between
# updates, skipped); evaluate() under @torch.no_grad(): model.eval(), autocast, cross-entropy, top-1/top-5; the
# accuracies weighted by the batch size, the loss with metric_logger.update(loss=loss.item()) (n=1).
# REAL: mean_of_batch_means: evaluate's loss meter averages per-batch mean losses with equal weight while the
# validation loader keeps a short last batch (drop_last=False; ImageNet's 50000 images over 8 GPUs are 6250 each, in
# batches of 192: a last batch of 106), so the printed and logged test loss (and test_loss_ema) is a mean of batch
# means; the accuracies are exact. Here 50 validation images in batches of 12 leave a last batch of 2.
# Shrunk: 10 classes of synthetic 16x16 RGB images (a class pattern plus noise; 136 train, 50 validation), a random
# horizontal flip for training (timm's RandAugment, color jitter and random erasing left out), batch size 8 with
# update_freq 2 (136 // 16 = 8 updates per epoch; the 17th micro-batch is skipped by the published `continue`), 3
# epochs (not 300) with 1 warmup epoch (not 20), a ConvNeXt of dims (16, 32) and depths (1, 1) (ConvNeXt-T is
# (96, 192, 384, 768), (3, 3, 9, 3)), drop_path 0.1, lr 4e-3 as published, min_lr 1e-6, EMA decay 0.9 (0.9999 would
# not move in 24 updates); bfloat16 autocast on the CPU and a GradScaler("cpu") for the NativeScaler (the published
# uses torch.cuda.amp); one process (no DistributedSampler, dist_eval), the CPU instead of CUDA, no checkpoints,
# auto-resume, TensorBoard or wandb loggers. The training loss (against the mixed soft targets) falls from 2.31 in
# epoch 1 to 1.98 in epoch 3, validation top-1 rises from 40% to 64% (the EMA's from 18% to 62%).
# Added: `with watch(model):` around the epochs.
import copy
import math
from collections import defaultdict, deque
from types import SimpleNamespace

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset, RandomSampler, SequentialSampler


def settings():
    """What main.py reads from its command line, at the shrunk TRAINING.md settings."""
    return SimpleNamespace(batch_size=8, epochs=3, update_freq=2, model="convnext_atto", drop_path=0.1,
                           input_size=16, layer_scale_init_value=1e-6, head_init_scale=1.0, model_ema=True,
                           model_ema_decay=0.9, model_ema_eval=True, opt="adamw", opt_eps=1e-8, clip_grad=None,
                           weight_decay=0.05, weight_decay_end=None, lr=4e-3, min_lr=1e-6, warmup_epochs=1,
                           warmup_steps=-1, smoothing=0.1, mixup=0.8, cutmix=1.0, mixup_prob=1.0,
                           mixup_switch_prob=0.5, nb_classes=10, seed=0, start_epoch=0, use_amp=True,
                           num_workers=0, device="cpu")


# --- data ---------------------------------------------------------------------------------------------

class SyntheticImageNet(Dataset):
    """Stand-in for build_dataset: 16x16 RGB images, one pattern per class plus noise, flipped when training."""

    def __init__(self, n, train, seed):
        g = torch.Generator().manual_seed(7)
        prototypes = torch.randn(10, 3, 16, 16, generator=g).clamp(-2, 2)
        g.manual_seed(seed)
        self.targets = torch.randint(0, 10, (n,), generator=g)
        self.data = prototypes[self.targets] + 1.5 * torch.randn(n, 3, 16, 16, generator=g)
        self.train = train

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, i):
        img = self.data[i]
        if self.train and torch.rand(1) < 0.5:
            img = img.flip(-1)
        return img, int(self.targets[i])


def build_dataset(is_train, args):
    return SyntheticImageNet(136 if is_train else 50, is_train, seed=1 if is_train else 2), args.nb_classes


# --- timm stand-ins -------------------------------------------------------------------------------------

def one_hot(x, num_classes, on_value=1.0, off_value=0.0):
    return torch.full((x.size(0), num_classes), off_value).scatter_(1, x.long().view(-1, 1), on_value)


class Mixup:
    """timm's Mixup in 'batch' mode: per batch, CutMix (with switch_prob) or Mixup, smoothed one-hot targets."""

    def __init__(self, mixup_alpha, cutmix_alpha, prob, switch_prob, label_smoothing, num_classes):
        self.mixup_alpha, self.cutmix_alpha = mixup_alpha, cutmix_alpha
        self.prob, self.switch_prob = prob, switch_prob
        self.label_smoothing, self.num_classes = label_smoothing, num_classes

    def __call__(self, x, target):
        assert len(x) % 2 == 0, "Batch size should be even when using this"
        lam = 1.0
        if np.random.rand() < self.prob:
            if np.random.rand() < self.switch_prob:
                lam = float(np.random.beta(self.cutmix_alpha, self.cutmix_alpha))
                h, w = x.shape[-2:]
                cut = math.sqrt(1 - lam)
                ch, cw = int(h * cut), int(w * cut)
                cy, cx = np.random.randint(h), np.random.randint(w)
                y0, y1 = np.clip(cy - ch // 2, 0, h), np.clip(cy + ch // 2, 0, h)
                x0, x1 = np.clip(cx - cw // 2, 0, w), np.clip(cx + cw // 2, 0, w)
                x[:, :, y0:y1, x0:x1] = x.flip(0)[:, :, y0:y1, x0:x1]
                lam = 1 - (y1 - y0) * (x1 - x0) / (h * w)
            else:
                lam = float(np.random.beta(self.mixup_alpha, self.mixup_alpha))
                x.mul_(lam).add_(x.flip(0).mul(1 - lam))
        off = self.label_smoothing / self.num_classes
        y1 = one_hot(target, self.num_classes, 1 - self.label_smoothing + off, off)
        y2 = one_hot(target.flip(0), self.num_classes, 1 - self.label_smoothing + off, off)
        return x, y1 * lam + y2 * (1 - lam)


class SoftTargetCrossEntropy(nn.Module):
    def forward(self, x, target):
        return torch.sum(-target * F.log_softmax(x, dim=-1), dim=-1).mean()


class ModelEma:
    """timm's ModelEma: a deep copy in eval mode, blended toward the model's state_dict after every update."""

    def __init__(self, model, decay=0.9999, device="", resume=""):
        self.ema = copy.deepcopy(model)
        self.ema.eval()
        self.decay = decay
        for p in self.ema.parameters():
            p.requires_grad_(False)

    def update(self, model):
        with torch.no_grad():
            msd = model.state_dict()
            for k, ema_v in self.ema.state_dict().items():
                ema_v.copy_(ema_v * self.decay + (1.0 - self.decay) * msd[k].detach())


def accuracy(output, target, topk=(1,)):
    maxk = min(max(topk), output.size(1))
    _, pred = output.topk(maxk, 1, True, True)
    correct = pred.t().eq(target.reshape(1, -1).expand_as(pred.t()))
    return [correct[:min(k, maxk)].reshape(-1).float().sum(0) * 100.0 / target.size(0) for k in topk]


def drop_path(x, drop_prob=0.0, training=False):
    if drop_prob == 0.0 or not training:
        return x
    keep = 1 - drop_prob
    mask = x.new_empty((x.shape[0],) + (1,) * (x.ndim - 1)).bernoulli_(keep)
    return x * mask / keep


class DropPath(nn.Module):
    def __init__(self, drop_prob=0.0):
        super().__init__()
        self.drop_prob = drop_prob

    def forward(self, x):
        return drop_path(x, self.drop_prob, self.training)


# --- models/convnext.py ---------------------------------------------------------------------------------

class LayerNorm(nn.Module):
    """LayerNorm over the channels, for channels_last (N, H, W, C) or channels_first (N, C, H, W) inputs."""

    def __init__(self, normalized_shape, eps=1e-6, data_format="channels_last"):
        super().__init__()
        self.weight, self.bias = nn.Parameter(torch.ones(normalized_shape)), nn.Parameter(torch.zeros(normalized_shape))
        self.eps, self.data_format = eps, data_format
        self.normalized_shape = (normalized_shape,)

    def forward(self, x):
        if self.data_format == "channels_last":
            return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        u = x.mean(1, keepdim=True)
        s = (x - u).pow(2).mean(1, keepdim=True)
        x = (x - u) / torch.sqrt(s + self.eps)
        return self.weight[:, None, None] * x + self.bias[:, None, None]


class Block(nn.Module):
    def __init__(self, dim, drop_path=0.0, layer_scale_init_value=1e-6):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim)
        self.norm = LayerNorm(dim, eps=1e-6)
        self.pwconv1, self.act, self.pwconv2 = nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim)
        self.gamma = (nn.Parameter(layer_scale_init_value * torch.ones(dim), requires_grad=True)
                      if layer_scale_init_value > 0 else None)
        self.drop_path = DropPath(drop_path) if drop_path > 0.0 else nn.Identity()

    def forward(self, x):
        shortcut = x
        x = self.dwconv(x).permute(0, 2, 3, 1)
        x = self.pwconv2(self.act(self.pwconv1(self.norm(x))))
        if self.gamma is not None:
            x = self.gamma * x
        return shortcut + self.drop_path(x.permute(0, 3, 1, 2))


class ConvNeXt(nn.Module):
    def __init__(self, in_chans=3, num_classes=1000, depths=(1, 1), dims=(16, 32), drop_path_rate=0.0,
                 layer_scale_init_value=1e-6, head_init_scale=1.0):
        super().__init__()
        self.downsample_layers = nn.ModuleList([nn.Sequential(nn.Conv2d(in_chans, dims[0], kernel_size=4, stride=4),
                                                              LayerNorm(dims[0], data_format="channels_first"))])
        for i in range(len(dims) - 1):
            self.downsample_layers.append(nn.Sequential(LayerNorm(dims[i], data_format="channels_first"),
                                                        nn.Conv2d(dims[i], dims[i + 1], kernel_size=2, stride=2)))
        dp_rates = [x.item() for x in torch.linspace(0, drop_path_rate, sum(depths))]
        self.stages, cur = nn.ModuleList(), 0
        for i in range(len(dims)):
            self.stages.append(nn.Sequential(*[Block(dims[i], dp_rates[cur + j], layer_scale_init_value)
                                               for j in range(depths[i])]))
            cur += depths[i]
        self.norm = nn.LayerNorm(dims[-1], eps=1e-6)
        self.head = nn.Linear(dims[-1], num_classes)
        self.apply(self._init_weights)
        self.head.weight.data.mul_(head_init_scale)
        self.head.bias.data.mul_(head_init_scale)

    @staticmethod
    def _init_weights(m):
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.trunc_normal_(m.weight, std=0.02)
            nn.init.constant_(m.bias, 0)

    def forward(self, x):
        for down, stage in zip(self.downsample_layers, self.stages):
            x = stage(down(x))
        return self.head(self.norm(x.mean([-2, -1])))


def create_model(name, pretrained, num_classes, drop_path_rate, layer_scale_init_value, head_init_scale):
    return ConvNeXt(num_classes=num_classes, depths=(1, 1), dims=(16, 32), drop_path_rate=drop_path_rate,
                    layer_scale_init_value=layer_scale_init_value, head_init_scale=head_init_scale)


# --- optim_factory.py -------------------------------------------------------------------------------------

def get_parameter_groups(model, weight_decay=1e-5, skip_list=()):
    groups = {}
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        if len(param.shape) == 1 or name.endswith(".bias") or name in skip_list:
            group_name, this_weight_decay = "no_decay", 0.0
        else:
            group_name, this_weight_decay = "decay", weight_decay
        if group_name not in groups:
            groups[group_name] = {"weight_decay": this_weight_decay, "params": [], "lr_scale": 1.0}
        groups[group_name]["params"].append(param)
    return list(groups.values())


def create_optimizer(args, model, skip_list=None):
    skip = skip_list if skip_list is not None else getattr(model, "no_weight_decay", lambda: set())()
    parameters = get_parameter_groups(model, args.weight_decay, skip)
    return torch.optim.AdamW(parameters, lr=args.lr, weight_decay=0.0, eps=args.opt_eps)


# --- utils.py ---------------------------------------------------------------------------------------------

class SmoothedValue:
    def __init__(self, window_size=20, fmt=None):
        self.deque = deque(maxlen=window_size)
        self.total, self.count = 0.0, 0
        self.fmt = fmt or "{median:.4f} ({global_avg:.4f})"

    def update(self, value, n=1):
        self.deque.append(value)
        self.count += n
        self.total += value * n

    @property
    def median(self):
        return torch.tensor(list(self.deque)).median().item()

    @property
    def global_avg(self):
        return self.total / self.count

    @property
    def value(self):
        return self.deque[-1]

    def __str__(self):
        return self.fmt.format(median=self.median, global_avg=self.global_avg, value=self.value)


class MetricLogger:
    def __init__(self, delimiter="\t"):
        self.meters = defaultdict(SmoothedValue)
        self.delimiter = delimiter

    def update(self, **kwargs):
        for k, v in kwargs.items():
            if v is None:
                continue
            if isinstance(v, torch.Tensor):
                v = v.item()
            assert isinstance(v, (float, int))
            self.meters[k].update(v)

    def __getattr__(self, attr):
        if attr in self.__dict__.get("meters", {}):
            return self.meters[attr]
        raise AttributeError(attr)

    def __str__(self):
        return self.delimiter.join(f"{name}: {meter}" for name, meter in self.meters.items())

    def add_meter(self, name, meter):
        self.meters[name] = meter

    def synchronize_between_processes(self):
        pass    # one process

    def log_every(self, iterable, print_freq, header=""):
        for i, obj in enumerate(iterable):
            yield obj
            if i % print_freq == 0 or i == len(iterable) - 1:
                print(f"{header} [{i}/{len(iterable)}]  {self}")


class NativeScalerWithGradNormCount:
    state_dict_key = "amp_scaler"

    def __init__(self):
        self._scaler = torch.amp.GradScaler("cpu")

    def __call__(self, loss, optimizer, clip_grad=None, parameters=None, create_graph=False, update_grad=True):
        self._scaler.scale(loss).backward(create_graph=create_graph)
        if update_grad:
            if clip_grad is not None:
                assert parameters is not None
                self._scaler.unscale_(optimizer)
                norm = torch.nn.utils.clip_grad_norm_(parameters, clip_grad)
            else:
                self._scaler.unscale_(optimizer)
                norm = get_grad_norm_(parameters)
            self._scaler.step(optimizer)
            self._scaler.update()
        else:
            norm = None
        return norm


def get_grad_norm_(parameters, norm_type=2.0):
    parameters = [p for p in parameters if p.grad is not None]
    if len(parameters) == 0:
        return torch.tensor(0.0)
    return torch.norm(torch.stack([torch.norm(p.grad.detach(), norm_type) for p in parameters]), norm_type)


def cosine_scheduler(base_value, final_value, epochs, niter_per_ep, warmup_epochs=0, start_warmup_value=0,
                     warmup_steps=-1):
    warmup_schedule = np.array([])
    warmup_iters = warmup_epochs * niter_per_ep
    if warmup_steps > 0:
        warmup_iters = warmup_steps
    if warmup_epochs > 0:
        warmup_schedule = np.linspace(start_warmup_value, base_value, warmup_iters)
    iters = np.arange(epochs * niter_per_ep - warmup_iters)
    schedule = final_value + 0.5 * (base_value - final_value) * (1 + np.cos(np.pi * iters / len(iters)))
    schedule = np.concatenate((warmup_schedule, schedule))
    assert len(schedule) == epochs * niter_per_ep
    return schedule


# --- engine.py --------------------------------------------------------------------------------------------

def train_one_epoch(model, criterion, data_loader, optimizer, device, epoch, loss_scaler, max_norm=0,
                    model_ema=None, mixup_fn=None, start_steps=None, lr_schedule_values=None,
                    wd_schedule_values=None, num_training_steps_per_epoch=None, update_freq=None, use_amp=False):
    model.train(True)
    metric_logger = MetricLogger(delimiter="  ")
    metric_logger.add_meter("lr", SmoothedValue(window_size=1, fmt="{value:.6f}"))
    metric_logger.add_meter("min_lr", SmoothedValue(window_size=1, fmt="{value:.6f}"))
    header = f"Epoch: [{epoch}]"
    print_freq = 10

    optimizer.zero_grad()

    for data_iter_step, (samples, targets) in enumerate(metric_logger.log_every(data_loader, print_freq, header)):
        step = data_iter_step // update_freq
        if step >= num_training_steps_per_epoch:
            continue
        it = start_steps + step  # global training iteration
        if lr_schedule_values is not None or wd_schedule_values is not None and data_iter_step % update_freq == 0:
            for i, param_group in enumerate(optimizer.param_groups):
                if lr_schedule_values is not None:
                    param_group["lr"] = lr_schedule_values[it] * param_group["lr_scale"]
                if wd_schedule_values is not None and param_group["weight_decay"] > 0:
                    param_group["weight_decay"] = wd_schedule_values[it]

        samples = samples.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)

        if mixup_fn is not None:
            samples, targets = mixup_fn(samples, targets)

        if use_amp:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                output = model(samples)
                loss = criterion(output, targets)
        else:
            output = model(samples)
            loss = criterion(output, targets)

        loss_value = loss.item()
        if not math.isfinite(loss_value):
            print(f"Loss is {loss_value}, stopping training")
            assert math.isfinite(loss_value)

        if use_amp:
            is_second_order = hasattr(optimizer, "is_second_order") and optimizer.is_second_order
            loss /= update_freq
            grad_norm = loss_scaler(loss, optimizer, clip_grad=max_norm, parameters=model.parameters(),
                                    create_graph=is_second_order,
                                    update_grad=(data_iter_step + 1) % update_freq == 0)
            if (data_iter_step + 1) % update_freq == 0:
                optimizer.zero_grad()
                if model_ema is not None:
                    model_ema.update(model)
        else:
            loss /= update_freq
            loss.backward()
            if (data_iter_step + 1) % update_freq == 0:
                optimizer.step()
                optimizer.zero_grad()
                if model_ema is not None:
                    model_ema.update(model)

        class_acc = (output.max(-1)[-1] == targets).float().mean() if mixup_fn is None else None
        metric_logger.update(loss=loss_value)
        metric_logger.update(class_acc=class_acc)
        min_lr, max_lr = 10.0, 0.0
        for group in optimizer.param_groups:
            min_lr, max_lr = min(min_lr, group["lr"]), max(max_lr, group["lr"])
        metric_logger.update(lr=max_lr)
        metric_logger.update(min_lr=min_lr)
        weight_decay_value = None
        for group in optimizer.param_groups:
            if group["weight_decay"] > 0:
                weight_decay_value = group["weight_decay"]
        metric_logger.update(weight_decay=weight_decay_value)
        if use_amp:
            metric_logger.update(grad_norm=grad_norm)

    metric_logger.synchronize_between_processes()
    print("Averaged stats:", metric_logger)
    return {k: meter.global_avg for k, meter in metric_logger.meters.items()}


@torch.no_grad()
def evaluate(data_loader, model, device, use_amp=False):
    criterion = torch.nn.CrossEntropyLoss()
    metric_logger = MetricLogger(delimiter="  ")
    header = "Test:"

    model.eval()
    for batch in metric_logger.log_every(data_loader, 10, header):
        images = batch[0]
        target = batch[-1]
        images = images.to(device, non_blocking=True)
        target = target.to(device, non_blocking=True)

        if use_amp:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                output = model(images)
                loss = criterion(output, target)
        else:
            output = model(images)
            loss = criterion(output, target)

        acc1, acc5 = accuracy(output, target, topk=(1, 5))
        batch_size = images.shape[0]
        metric_logger.update(loss=loss.item())
        metric_logger.meters["acc1"].update(acc1.item(), n=batch_size)
        metric_logger.meters["acc5"].update(acc5.item(), n=batch_size)
    metric_logger.synchronize_between_processes()
    print(f"* Acc@1 {metric_logger.acc1.global_avg:.3f} Acc@5 {metric_logger.acc5.global_avg:.3f} "
          f"loss {metric_logger.loss.global_avg:.3f}")
    return {k: meter.global_avg for k, meter in metric_logger.meters.items()}


# --- main.py ----------------------------------------------------------------------------------------------

def main(watch):
    args = settings()
    device = torch.device(args.device)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)

    dataset_train, args.nb_classes = build_dataset(is_train=True, args=args)
    dataset_val, _ = build_dataset(is_train=False, args=args)
    sampler_train = RandomSampler(dataset_train)
    sampler_val = SequentialSampler(dataset_val)
    data_loader_train = DataLoader(dataset_train, sampler=sampler_train, batch_size=args.batch_size,
                                   num_workers=args.num_workers, drop_last=True)
    data_loader_val = DataLoader(dataset_val, sampler=sampler_val, batch_size=int(1.5 * args.batch_size),
                                 num_workers=args.num_workers, drop_last=False)

    mixup_fn = None
    mixup_active = args.mixup > 0 or args.cutmix > 0.0
    if mixup_active:
        mixup_fn = Mixup(mixup_alpha=args.mixup, cutmix_alpha=args.cutmix, prob=args.mixup_prob,
                         switch_prob=args.mixup_switch_prob, label_smoothing=args.smoothing,
                         num_classes=args.nb_classes)

    model = create_model(args.model, pretrained=False, num_classes=args.nb_classes, drop_path_rate=args.drop_path,
                         layer_scale_init_value=args.layer_scale_init_value, head_init_scale=args.head_init_scale)
    model.to(device)

    model_ema = None
    if args.model_ema:
        model_ema = ModelEma(model, decay=args.model_ema_decay, device="", resume="")

    model_without_ddp = model
    n_parameters = sum(p.numel() for p in model.parameters() if p.requires_grad)

    total_batch_size = args.batch_size * args.update_freq
    num_training_steps_per_epoch = len(dataset_train) // total_batch_size

    optimizer = create_optimizer(args, model_without_ddp, skip_list=None)
    loss_scaler = NativeScalerWithGradNormCount()

    lr_schedule_values = cosine_scheduler(args.lr, args.min_lr, args.epochs, num_training_steps_per_epoch,
                                          warmup_epochs=args.warmup_epochs, warmup_steps=args.warmup_steps)
    if args.weight_decay_end is None:
        args.weight_decay_end = args.weight_decay
    wd_schedule_values = cosine_scheduler(args.weight_decay, args.weight_decay_end, args.epochs,
                                          num_training_steps_per_epoch)

    if mixup_fn is not None:
        criterion = SoftTargetCrossEntropy()
    else:
        criterion = torch.nn.CrossEntropyLoss()

    max_accuracy, max_accuracy_ema = 0.0, 0.0
    with watch(model):
        for epoch in range(args.start_epoch, args.epochs):
            train_stats = train_one_epoch(
                model, criterion, data_loader_train, optimizer, device, epoch, loss_scaler, args.clip_grad,
                model_ema, mixup_fn, start_steps=epoch * num_training_steps_per_epoch,
                lr_schedule_values=lr_schedule_values, wd_schedule_values=wd_schedule_values,
                num_training_steps_per_epoch=num_training_steps_per_epoch, update_freq=args.update_freq,
                use_amp=args.use_amp)
            test_stats = evaluate(data_loader_val, model, device, use_amp=args.use_amp)
            max_accuracy = max(max_accuracy, test_stats["acc1"])
            log_stats = {**{f"train_{k}": v for k, v in train_stats.items()},
                         **{f"test_{k}": v for k, v in test_stats.items()},
                         "epoch": epoch, "n_parameters": n_parameters}
            if args.model_ema and args.model_ema_eval:
                test_stats_ema = evaluate(data_loader_val, model_ema.ema, device, use_amp=args.use_amp)
                max_accuracy_ema = max(max_accuracy_ema, test_stats_ema["acc1"])
                log_stats.update({f"test_{k}_ema": v for k, v in test_stats_ema.items()})
            print(f"SUMMARY epoch {epoch}: train loss {log_stats['train_loss']:.4f}, "
                  f"test loss {log_stats['test_loss']:.4f}, acc1 {log_stats['test_acc1']:.1f}, "
                  f"ema acc1 {log_stats.get('test_acc1_ema', float('nan')):.1f}")
    return [model, optimizer]


from tests.doctor_published import variant  # noqa: E402

REAL = {"mean_of_batch_means"}
VARIANTS = [
    # the updates per epoch counted with the partial window (ceil of 17 micro-batches / 2 = 9): the `continue` no
    # longer skips the 17th micro-batch, whose gradients are never stepped and are wiped by the next epoch's
    # optimizer.zero_grad() (the cosine arrays are sized with 9, so nothing runs out of range)
    variant("steps_per_epoch_counting_the_partial_window", "accumulation_without_flush",
            ("    num_training_steps_per_epoch = len(dataset_train) // total_batch_size\n",
             "    num_training_steps_per_epoch = math.ceil(len(data_loader_train) / args.update_freq)\n")),
    # the division by update_freq dropped from the AMP branch ("the loss scaler takes care of scaling"): every
    # update applies the sum of two micro-batch means
    variant("amp_branch_without_division_by_update_freq", "unscaled_accumulation",
            ('            is_second_order = hasattr(optimizer, "is_second_order") and optimizer.is_second_order\n'
             "            loss /= update_freq\n",
             '            is_second_order = hasattr(optimizer, "is_second_order") and optimizer.is_second_order\n')),
    # model.train(True) dropped from train_one_epoch: after the first evaluate() the model trains in eval mode,
    # stochastic depth (DropPath 0.1) silently off
    variant("train_one_epoch_without_train_switch", "missing_train_switch", ("    model.train(True)\n", "")),
    # a fresh classification head for fine-tuning, put on once the optimizer and the loss scaler exist
    variant("head_reset_after_create_optimizer", "head_after_optimizer",
            ("    loss_scaler = NativeScalerWithGradNormCount()\n",
             "    loss_scaler = NativeScalerWithGradNormCount()\n"
             "    model.head = nn.Linear(model.head.in_features, args.nb_classes)   # a fresh head to fine-tune\n")),
    # the hand-written per-iteration cosine replaced by torch's CosineAnnealingLR with T_max in epochs, stepped where
    # the arrays were applied, after every update: the lr runs through a cosine wave every 2 * 3 updates
    variant("torch_cosine_in_epochs_stepped_per_update", "epoch_schedule_per_batch",
            ("num_training_steps_per_epoch=None, update_freq=None, use_amp=False):\n",
             "num_training_steps_per_epoch=None, update_freq=None, use_amp=False,\n"
             "                    lr_scheduler=None):\n"),
            ("                optimizer.zero_grad()\n                if model_ema is not None:\n"
             "                    model_ema.update(model)\n        else:\n",
             "                optimizer.zero_grad()\n                lr_scheduler.step()\n"
             "                if model_ema is not None:\n                    model_ema.update(model)\n        else:\n"),
            ("    lr_schedule_values = cosine_scheduler(args.lr, args.min_lr, args.epochs, "
             "num_training_steps_per_epoch,\n"
             "                                          warmup_epochs=args.warmup_epochs, "
             "warmup_steps=args.warmup_steps)\n",
             "    lr_scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs, "
             "eta_min=args.min_lr)\n"
             "    lr_schedule_values = None\n"),
            ("update_freq=args.update_freq,\n                use_amp=args.use_amp)\n",
             "update_freq=args.update_freq,\n                use_amp=args.use_amp, lr_scheduler=lr_scheduler)\n")),
    # not a bug: the published condition parenthesised as it was meant, so the lr and wd are written only at the
    # first micro-batch of each window: `it` is the same for the whole window, so the values are too
    variant("schedule_written_at_window_start_only", set(),
            ("        if lr_schedule_values is not None or wd_schedule_values is not None and "
             "data_iter_step % update_freq == 0:\n",
             "        if (lr_schedule_values is not None or wd_schedule_values is not None) and "
             "data_iter_step % update_freq == 0:\n")),
    # not a bug: the optimizer.zero_grad() before the batch loop dropped: every window ends with one and the
    # micro-batches past the last full window run no backward, so each epoch starts with no gradients anyway
    variant("no_zero_grad_before_the_batch_loop", set(),
            ("    optimizer.zero_grad()\n\n    for data_iter_step", "    for data_iter_step")),
    # not a bug: evaluate's loss meter weighted by the batch size, like the accuracies (fixes the published mean of
    # batch means)
    variant("test_loss_weighted_by_batch_size", set(),
            ("        metric_logger.update(loss=loss.item())\n",
             '        metric_logger.meters["loss"].update(loss.item(), n=batch_size)\n'),
            fixes={"mean_of_batch_means"}),
]
