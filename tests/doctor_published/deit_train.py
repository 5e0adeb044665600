# Mirrors: facebookresearch/deit, engine.py (train_one_epoch, evaluate) and main.py (main), with losses.py
# (DistillationLoss) and utils.py (MetricLogger, SmoothedValue), snapshot at commit 7e160fe43f02 (2024-03-15);
# engine.py last changed in 0db467b09c96 (2023-08-11), main.py in bd8fdf25fd23 (2023-05-28). From timm, which the
# loop imports: Mixup, SoftTargetCrossEntropy, NativeScaler, ModelEma, accuracy, create_optimizer and the cosine
# scheduler of create_scheduler, written here to their documented behaviour.
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: a ViT (patch embedding, class token, position embedding, pre-norm blocks with DropPath 0.1, a linear head);
# a training loader over a RandomSampler with drop_last=True and a validation loader over a SequentialSampler with
# batch size int(1.5 * batch_size) and drop_last=False; the linear lr scaling lr * batch_size / 512; AdamW (weight
# decay 0.05, none on biases, norms and embeddings); a model EMA (decay 0.99996) made before training and updated
# after every step (never evaluated); Mixup/CutMix with label smoothing 0.1 and SoftTargetCrossEntropy, called
# through DistillationLoss(criterion, None, 'none', ...) as criterion(samples, outputs, targets); a cosine schedule
# in epochs with warmup from warmup_lr, stepped once per epoch after training as lr_scheduler.step(epoch) (so epoch
# e+1 trains at the rate for e: the schedule lags one epoch, a quirk of the published loop, no registry bug); per
# epoch train_one_epoch: model.train(set_training_mode) (True by default), per batch mixup, autocast forward and
# loss, loss.item() checked finite, zero_grad, then NativeScaler's call (scale(loss).backward(), unscale_ and
# clip_grad_norm_ only when clip_grad is given: None by default, so no clipping, scaler.step, scaler.update), the
# EMA update, the loss value and lr logged to a MetricLogger (a mean over steps); then evaluate(), decorated with
# @torch.no_grad(): model.eval(), autocast forward, plain cross-entropy, top-1/top-5 accuracy; the accuracies
# updated with n=batch_size but the loss with metric_logger.update(loss=loss.item()), i.e. n=1.
# REAL: mean_of_batch_means: evaluate's loss meter averages the per-batch mean losses with equal weight, and the
# validation loader keeps a short last batch (drop_last=False; on ImageNet 50000 images in batches of 96 per GPU
# leave a last batch of 80), so the printed and logged test loss is a mean of batch means (the accuracies, weighted
# by batch size, are exact).
# Shrunk: 10 classes of synthetic 8x8 RGB images (a class-dependent pattern plus noise; 160 train, 60 validation so
# that the validation batches are 24, 24 and 12), a random horizontal flip as the training augmentation (the
# validation transform has none), batch size 16, 5 epochs (not 300) with 1 warmup epoch (not 5), a ViT of patch 4,
# width 32, 2 blocks, 2 heads; lr 5e-2 before the linear scaling (-> 1.56e-3; 5e-4 would give 1.6e-5 at batch 16),
# warmup_lr 1e-4 and min_lr 1e-5; bfloat16 autocast on the CPU and a GradScaler("cpu") for the NativeScaler (the
# published uses torch.cuda.amp); one process (no DistributedSampler, repeated augmentation or dist_eval); no
# teacher, no cosub / bce_loss / ThreeAugment / finetune / resume, no checkpoints or log files.
# Added: `with watch(model):` around the epochs.
import copy
import math
import sys
from collections import defaultdict, deque
from types import SimpleNamespace

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset, RandomSampler, SequentialSampler


# --- the model (timm's VisionTransformer, shrunk) ---------------------------------------------------------------

class DropPath(nn.Module):
    def __init__(self, drop_prob=0.0):
        super().__init__()
        self.drop_prob = drop_prob

    def forward(self, x):
        if self.drop_prob == 0.0 or not self.training:
            return x
        keep = 1 - self.drop_prob
        mask = x.new_empty((x.shape[0],) + (1,) * (x.dim() - 1)).bernoulli_(keep)
        return x * mask / keep


class Block(nn.Module):
    def __init__(self, dim, heads, drop_path):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.drop_path = DropPath(drop_path)

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.drop_path(self.attn(h, h, h, need_weights=False)[0])
        return x + self.drop_path(self.mlp(self.norm2(x)))


class VisionTransformer(nn.Module):
    def __init__(self, img_size=8, patch=4, num_classes=10, dim=32, depth=2, heads=2, drop_path_rate=0.1):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, patch, stride=patch)
        num_patches = (img_size // patch) ** 2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(0.02 * torch.randn(1, num_patches + 1, dim))
        rates = [drop_path_rate * i / max(depth - 1, 1) for i in range(depth)]
        self.blocks = nn.Sequential(*[Block(dim, heads, r) for r in rates])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def no_weight_decay(self):
        return {"pos_embed", "cls_token"}

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


# --- data ----------------------------------------------------------------------------------------------------------

class SyntheticImageNet(Dataset):
    """Stand-in for datasets.ImageFolder(root/train or root/val): a class pattern plus noise, flipped when training."""

    def __init__(self, count, is_train, num_classes=10, seed=0):
        patterns = torch.randn(num_classes, 3, 8, 8, generator=torch.Generator().manual_seed(seed))
        g = torch.Generator().manual_seed(seed + (1 if is_train else 2))
        self.targets = torch.randint(0, num_classes, (count,), generator=g)
        self.data = patterns[self.targets] + 0.8 * torch.randn(count, 3, 8, 8, generator=g)
        self.is_train = is_train

    def __len__(self):
        return len(self.data)

    def __getitem__(self, idx):
        img = self.data[idx]
        if self.is_train and torch.rand(1).item() < 0.5:
            img = img.flip(-1)
        return img, int(self.targets[idx])


def build_dataset(is_train, args):
    return SyntheticImageNet(160 if is_train else 60, is_train, args.nb_classes), args.nb_classes


# --- timm pieces -----------------------------------------------------------------------------------------------------

class Mixup:
    """Batch-mode Mixup/CutMix (switch prob 0.5) with smoothed one-hot targets mixed with the flipped batch."""

    def __init__(self, mixup_alpha, cutmix_alpha, label_smoothing, num_classes, switch_prob=0.5):
        self.mixup_alpha, self.cutmix_alpha, self.switch_prob = mixup_alpha, cutmix_alpha, switch_prob
        self.label_smoothing, self.num_classes = label_smoothing, num_classes

    def __call__(self, x, target):
        if torch.rand(1).item() < self.switch_prob:
            lam = float(torch.distributions.Beta(self.cutmix_alpha, self.cutmix_alpha).sample())
            h, w = x.shape[-2:]
            ch, cw = int(h * math.sqrt(1 - lam)), int(w * math.sqrt(1 - lam))
            cy, cx = int(torch.randint(0, h, (1,))), int(torch.randint(0, w, (1,)))
            y0, y1, x0, x1 = max(cy - ch // 2, 0), min(cy + ch // 2, h), max(cx - cw // 2, 0), min(cx + cw // 2, w)
            x = x.clone()
            x[:, :, y0:y1, x0:x1] = x.flip(0)[:, :, y0:y1, x0:x1]
            lam = 1 - (y1 - y0) * (x1 - x0) / (h * w)
        else:
            lam = float(torch.distributions.Beta(self.mixup_alpha, self.mixup_alpha).sample())
            x = x * lam + x.flip(0) * (1 - lam)
        off = self.label_smoothing / self.num_classes
        on = 1 - self.label_smoothing + off
        y = torch.full((target.shape[0], self.num_classes), off).scatter_(1, target.view(-1, 1), on)
        return x, y * lam + y.flip(0) * (1 - lam)


class SoftTargetCrossEntropy(nn.Module):
    def forward(self, x, target):
        return torch.sum(-target * F.log_softmax(x, dim=-1), dim=-1).mean()


class DistillationLoss(nn.Module):
    def __init__(self, base_criterion, teacher_model, distillation_type, alpha, tau):
        super().__init__()
        self.base_criterion, self.teacher_model = base_criterion, teacher_model
        self.distillation_type, self.alpha, self.tau = distillation_type, alpha, tau

    def forward(self, inputs, outputs, labels):
        base_loss = self.base_criterion(outputs, labels)
        if self.distillation_type == "none":
            return base_loss
        raise NotImplementedError("no teacher in the shrunk run")


class NativeScaler:
    def __init__(self):
        self._scaler = torch.amp.GradScaler("cpu")

    def __call__(self, loss, optimizer, clip_grad=None, parameters=None, create_graph=False):
        self._scaler.scale(loss).backward(create_graph=create_graph)
        if clip_grad is not None:
            self._scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(parameters, clip_grad)
        self._scaler.step(optimizer)
        self._scaler.update()


class ModelEma:
    def __init__(self, model, decay):
        self.ema = copy.deepcopy(model)
        self.ema.eval()
        self.decay = decay
        for p in self.ema.parameters():
            p.requires_grad_(False)

    def update(self, model):
        with torch.no_grad():
            for ema_v, model_v in zip(self.ema.state_dict().values(), model.state_dict().values()):
                ema_v.copy_(ema_v * self.decay + (1.0 - self.decay) * model_v)


def accuracy(output, target, topk=(1,)):
    maxk = min(max(topk), output.size(1))
    _, pred = output.topk(maxk, 1, True, True)
    correct = pred.t().eq(target.reshape(1, -1).expand_as(pred.t()))
    return [correct[:min(k, maxk)].reshape(-1).float().sum(0) * 100.0 / target.size(0) for k in topk]


def create_optimizer(args, model):
    skip = model.no_weight_decay()
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (no_decay if p.ndim <= 1 or name.endswith(".bias") or name in skip else decay).append(p)
    groups = [{"params": no_decay, "weight_decay": 0.0}, {"params": decay, "weight_decay": args.weight_decay}]
    return torch.optim.AdamW(groups, lr=args.lr, eps=args.opt_eps)


class CosineLRScheduler:
    """timm's cosine schedule in epochs: linear warmup from warmup_lr_init, then cosine to lr_min; step(epoch) sets
    the rate of that epoch in every param group."""

    def __init__(self, optimizer, t_initial, lr_min, warmup_lr_init, warmup_t):
        self.optimizer, self.t_initial, self.lr_min = optimizer, t_initial, lr_min
        self.warmup_lr_init, self.warmup_t = warmup_lr_init, warmup_t
        self.base_values = [group["lr"] for group in optimizer.param_groups]
        self.warmup_steps = [(v - warmup_lr_init) / warmup_t for v in self.base_values] if warmup_t else []
        if warmup_t:
            for group in optimizer.param_groups:
                group["lr"] = warmup_lr_init

    def _get_lr(self, t):
        if t < self.warmup_t:
            return [self.warmup_lr_init + t * s for s in self.warmup_steps]
        t = t - self.warmup_t
        total = self.t_initial - self.warmup_t
        return [self.lr_min + 0.5 * (v - self.lr_min) * (1 + math.cos(math.pi * t / total)) for v in self.base_values]

    def step(self, epoch):
        for group, lr in zip(self.optimizer.param_groups, self._get_lr(epoch)):
            group["lr"] = lr


def create_scheduler(args, optimizer):
    return CosineLRScheduler(optimizer, t_initial=args.epochs, lr_min=args.min_lr, warmup_lr_init=args.warmup_lr,
                             warmup_t=args.warmup_epochs), args.epochs + args.cooldown_epochs


# --- deit utils ------------------------------------------------------------------------------------------------------

class SmoothedValue:
    def __init__(self, window_size=20, fmt="{median:.4f} ({global_avg:.4f})"):
        self.deque, self.total, self.count, self.fmt = deque(maxlen=window_size), 0.0, 0, fmt

    def update(self, value, n=1):
        self.deque.append(value)
        self.count += n
        self.total += value * n

    @property
    def global_avg(self):
        return self.total / self.count

    def __str__(self):
        values = sorted(self.deque)
        return self.fmt.format(median=values[len(values) // 2], global_avg=self.global_avg, value=self.deque[-1])


class MetricLogger:
    def __init__(self, delimiter="\t"):
        self.meters = defaultdict(SmoothedValue)
        self.delimiter = delimiter

    def update(self, **kwargs):
        for k, v in kwargs.items():
            if isinstance(v, torch.Tensor):
                v = v.item()
            self.meters[k].update(v)

    def __getattr__(self, attr):
        if attr in self.__dict__.get("meters", {}):
            return self.meters[attr]
        raise AttributeError(attr)

    def add_meter(self, name, meter):
        self.meters[name] = meter

    def __str__(self):
        return self.delimiter.join(f"{name}: {meter}" for name, meter in self.meters.items())

    def log_every(self, iterable, print_freq, header=""):
        for i, obj in enumerate(iterable):
            yield obj
            if i % print_freq == 0 or i == len(iterable) - 1:
                print(f"{header} [{i}/{len(iterable)}] {self}")


# --- engine.py -----------------------------------------------------------------------------------------------------

def train_one_epoch(model, criterion, data_loader, optimizer, device, epoch, loss_scaler, max_norm=0,
                    model_ema=None, mixup_fn=None, set_training_mode=True, args=None):
    model.train(set_training_mode)
    metric_logger = MetricLogger(delimiter="  ")
    metric_logger.add_meter("lr", SmoothedValue(window_size=1, fmt="{value:.6f}"))
    header = f"Epoch: [{epoch}]"
    for samples, targets in metric_logger.log_every(data_loader, 4, header):
        samples = samples.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        if mixup_fn is not None:
            samples, targets = mixup_fn(samples, targets)

        with torch.autocast("cpu", dtype=torch.bfloat16):
            outputs = model(samples)
            loss = criterion(samples, outputs, targets)

        loss_value = loss.item()
        if not math.isfinite(loss_value):
            print(f"Loss is {loss_value}, stopping training")
            sys.exit(1)

        optimizer.zero_grad()
        is_second_order = hasattr(optimizer, "is_second_order") and optimizer.is_second_order
        loss_scaler(loss, optimizer, clip_grad=max_norm, parameters=model.parameters(), create_graph=is_second_order)

        if model_ema is not None:
            model_ema.update(model)

        metric_logger.update(loss=loss_value)
        metric_logger.update(lr=optimizer.param_groups[0]["lr"])
    print("Averaged stats:", metric_logger)
    return {k: meter.global_avg for k, meter in metric_logger.meters.items()}


@torch.no_grad()
def evaluate(data_loader, model, device):
    criterion = torch.nn.CrossEntropyLoss()
    metric_logger = MetricLogger(delimiter="  ")
    header = "Test:"
    model.eval()
    for images, target in metric_logger.log_every(data_loader, 10, header):
        images = images.to(device, non_blocking=True)
        target = target.to(device, non_blocking=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            output = model(images)
            loss = criterion(output, target)
        acc1, acc5 = accuracy(output, target, topk=(1, 5))
        batch_size = images.shape[0]
        metric_logger.update(loss=loss.item())
        metric_logger.meters["acc1"].update(acc1.item(), n=batch_size)
        metric_logger.meters["acc5"].update(acc5.item(), n=batch_size)
    print("* Acc@1 {top1.global_avg:.3f} Acc@5 {top5.global_avg:.3f} loss {losses.global_avg:.3f}"
          .format(top1=metric_logger.acc1, top5=metric_logger.acc5, losses=metric_logger.loss))
    return {k: meter.global_avg for k, meter in metric_logger.meters.items()}


# --- main.py -------------------------------------------------------------------------------------------------------

def get_args():
    """What the published script reads from its command line, at the shrunk defaults."""
    return SimpleNamespace(batch_size=16, epochs=5, start_epoch=0, unscale_lr=False, drop_path=0.1, model_ema=True,
                           model_ema_decay=0.99996, opt_eps=1e-8, clip_grad=None, weight_decay=0.05, lr=5e-2,
                           warmup_lr=1e-4, min_lr=1e-5, warmup_epochs=1, cooldown_epochs=10, smoothing=0.1,
                           mixup=0.8, cutmix=1.0, train_mode=True, distillation_type="none", distillation_alpha=0.5,
                           distillation_tau=1.0, nb_classes=10, seed=0, num_workers=0, pin_mem=False)


def main(watch):
    args = get_args()
    device = torch.device("cpu")
    torch.manual_seed(args.seed)

    dataset_train, args.nb_classes = build_dataset(is_train=True, args=args)
    dataset_val, _ = build_dataset(is_train=False, args=args)
    sampler_train = RandomSampler(dataset_train)
    sampler_val = SequentialSampler(dataset_val)
    data_loader_train = DataLoader(dataset_train, sampler=sampler_train, batch_size=args.batch_size,
                                   num_workers=args.num_workers, pin_memory=args.pin_mem, drop_last=True)
    data_loader_val = DataLoader(dataset_val, sampler=sampler_val, batch_size=int(1.5 * args.batch_size),
                                 num_workers=args.num_workers, pin_memory=args.pin_mem, drop_last=False)

    mixup_fn = Mixup(mixup_alpha=args.mixup, cutmix_alpha=args.cutmix, label_smoothing=args.smoothing,
                     num_classes=args.nb_classes)
    model = VisionTransformer(num_classes=args.nb_classes, drop_path_rate=args.drop_path)
    model.to(device)
    model_ema = ModelEma(model, decay=args.model_ema_decay) if args.model_ema else None

    if not args.unscale_lr:
        args.lr = args.lr * args.batch_size / 512.0
    optimizer = create_optimizer(args, model)
    loss_scaler = NativeScaler()
    lr_scheduler, _ = create_scheduler(args, optimizer)
    criterion = SoftTargetCrossEntropy()
    criterion = DistillationLoss(criterion, None, args.distillation_type, args.distillation_alpha,
                                 args.distillation_tau)

    max_accuracy = 0.0
    with watch(model):
        for epoch in range(args.start_epoch, args.epochs):
            train_stats = train_one_epoch(
                model, criterion, data_loader_train,
                optimizer, device, epoch, loss_scaler,
                args.clip_grad, model_ema, mixup_fn,
                set_training_mode=args.train_mode,
                args=args,
            )
            lr_scheduler.step(epoch)
            test_stats = evaluate(data_loader_val, model, device)
            print(f"Accuracy of the network on the {len(dataset_val)} test images: {test_stats['acc1']:.1f}%")
            max_accuracy = max(max_accuracy, test_stats["acc1"])
            print(f"Max accuracy: {max_accuracy:.2f}%  train loss {train_stats['loss']:.4f}")
    return [model, optimizer]


from tests.doctor_published import variant  # noqa: E402

REAL = {"mean_of_batch_means"}
VARIANTS = [
    # the head made to return probabilities; SoftTargetCrossEntropy (and evaluate's cross-entropy) log-softmax them
    variant("head_returns_probabilities", "softmax_before_cross_entropy",
            ("        return self.head(x[:, 0])\n", "        return self.head(x[:, 0]).softmax(dim=-1)\n")),
    # evaluation with DropPath still active
    variant("evaluate_without_eval_switch", "eval_in_train_mode",
            ("    header = \"Test:\"\n    model.eval()\n", "    header = \"Test:\"\n")),
    # model.train() taken out of train_one_epoch ("modules start in training mode"): every epoch after the first
    # evaluation trains in eval mode (no DropPath)
    variant("train_one_epoch_without_train_switch", "missing_train_switch",
            ("    model.train(set_training_mode)\n", "")),
    # clipping written where the gradients are cleared, before NativeScaler's call runs backward
    variant("clip_before_the_scaler_call", "clip_before_backward",
            ("        optimizer.zero_grad()\n",
             "        optimizer.zero_grad()\n        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n")),
    # the validation set built with is_train=True: the training images (under the training flip) are the test set
    variant("validation_built_from_train_split", "data_leakage",
            ("    dataset_val, _ = build_dataset(is_train=False, args=args)\n",
             "    dataset_val, _ = build_dataset(is_train=True, args=args)\n")),
    # timm's scheduler swapped for torch's CosineAnnealingLR over epochs, stepped inside train_one_epoch per batch
    variant("torch_cosine_in_epochs_stepped_per_batch", "epoch_schedule_per_batch",
            ("                    model_ema=None, mixup_fn=None, set_training_mode=True, args=None):\n",
             "                    model_ema=None, mixup_fn=None, set_training_mode=True, args=None,\n"
             "                    lr_scheduler=None):\n"),
            ("        metric_logger.update(lr=optimizer.param_groups[0][\"lr\"])\n",
             "        metric_logger.update(lr=optimizer.param_groups[0][\"lr\"])\n        lr_scheduler.step()\n"),
            ("    lr_scheduler, _ = create_scheduler(args, optimizer)\n",
             "    lr_scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs,\n"
             "                                                              eta_min=args.min_lr)\n"),
            ("                args=args,\n", "                args=args, lr_scheduler=lr_scheduler,\n"),
            ("            lr_scheduler.step(epoch)\n", "")),
    # not a bug (it fixes the published one): the validation loss weighted by the batch size like the accuracies
    variant("validation_loss_weighted_by_batch_size", set(),
            ("        metric_logger.update(loss=loss.item())\n",
             "        metric_logger.meters[\"loss\"].update(loss.item(), n=batch_size)\n"),
            fixes={"mean_of_batch_means"}),
]
