# Mirrors: facebookresearch/dino, main_dino.py (train_dino, train_one_epoch, DINOLoss, DataAugmentationDINO) with
# utils.py (MultiCropWrapper, get_params_groups, cosine_scheduler, clip_gradients, cancel_gradients_last_layer,
# MetricLogger, SmoothedValue) and vision_transformer.py (DINOHead), snapshot at commit 7c446df5b9f4 (2023-04-27);
# main_dino.py last changed in cb71140 (2021-10-05).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: multi-crop augmentation (2 global crops, then smaller local crops) returned as a list per image and batched
# by the default collate into a list of tensors; a shuffling DistributedSampler (set_epoch every epoch) and
# drop_last=True; a student and a teacher of the same architecture, each a MultiCropWrapper (the backbone's `fc`
# replaced by Identity, one backbone pass per crop resolution, the outputs concatenated and sent through a DINOHead:
# a 3-layer GELU MLP, an L2 normalization and a weight-normalized last layer whose norm is fixed, norm_last_layer);
# stochastic depth in the student only; the teacher loaded from the student's state_dict, its parameters frozen,
# never switched to eval() and never given gradients; AdamW over two parameter groups (biases and 1-d parameters
# without weight decay) whose lr and weight decay are written into param_groups every iteration from precomputed
# per-iteration cosine schedules (linear lr warmup; the lr scaled by batch/256) indexed by the global iteration
# len(loader) * epoch + it; a per-iteration cosine schedule of the teacher's EMA momentum; DINOLoss: the teacher
# output centered and sharpened (temperature schedule by epoch), a softmax detached, cross-entropy against the
# student's log-softmax over every pair of different views, averaged over pairs, then the center updated under
# no_grad with an EMA of the teacher's batch mean; use_fp16 (the default) with autocast and a GradScaler:
# zero_grad, scale(loss).backward(), unscale_ then the per-parameter clip_gradients (each gradient clipped to norm
# 3.0 on its own; not clip_grad_norm_), cancel_gradients_last_layer (the last layer's gradients set to None during
# the first freeze_last_layer epochs), scaler.step, scaler.update; the fp32 branch kept as published; a non-finite
# loss stops training; the teacher's EMA update under no_grad; a MetricLogger whose update() turns tensors into
# floats with .item() and keeps a window median and a global average.
# The published loop has none of the registry's bugs: there is no validation pass (the k-NN and linear evaluations
# are separate scripts), the manual schedules are indexed by the global iteration, and the frozen weight-norm scale
# is frozen before the optimizer is built.
# Shrunk: 96 synthetic 16x16 images of four colored patterns with noise, global crops 12x12 and 2 local crops 6x6
# (random crop, resize, flip, brightness jitter), batch 16 (6 iterations per epoch), 4 epochs with 1 warmup epoch,
# a two-conv backbone with one residual block (width 32) in place of the ViT, head hidden 64, bottleneck 16,
# out_dim 64, lr 0.08 (so 5e-3 after the batch/256 scaling), teacher momentum 0.9 (not 0.996) so the tiny run
# moves; bfloat16 autocast on the CPU with GradScaler("cpu"); one process (no DDP, no SyncBatchNorm, no
# all_reduce), no checkpoints or log file, the CPU.
# Caveat: the DINO loss does not fall in this shrunk run. The tiny head starts collapsed (every image gives nearly
# the same output, so the loss starts near 0.4, not log 64 = 4.2) and the centering spreads the teacher, so the
# per-epoch loss climbs (0.42, 0.10, 1.69, 3.99); settings tried (out_dim 256 to 4096, teacher temperature 0.02 to
# 0.07, momentum 0.9 to 0.996, more epochs) either climb too or collapse to a one-hot output. What is mirrored is
# the loop's mechanics: the schedules, the EMA, the scaler, the clipping and the last layer's frozen first epoch.
# Added: `with watch(student):` around the epochs.
import math
import sys
from collections import defaultdict, deque
from types import SimpleNamespace

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


def get_args():
    return SimpleNamespace(out_dim=64, norm_last_layer=True, momentum_teacher=0.9, use_bn_in_head=False,
                           warmup_teacher_temp=0.04, teacher_temp=0.04, warmup_teacher_temp_epochs=0,
                           use_fp16=True, weight_decay=0.04, weight_decay_end=0.4, clip_grad=3.0,
                           batch_size_per_gpu=16, epochs=4, freeze_last_layer=1, lr=0.08, warmup_epochs=1,
                           min_lr=1e-6, optimizer="adamw", drop_path_rate=0.1, local_crops_number=2, seed=0,
                           num_workers=0)


# ---------------------------------------------------------------- data
class PatternImages(torch.utils.data.Dataset):
    """Stand-in for the ImageFolder: four colored stripe/blob patterns with noise; labels are never used."""

    def __init__(self, count, transform, size=16, seed=0):
        g = torch.Generator().manual_seed(seed)
        yy, xx = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
        bases = [torch.stack([(xx % 4 < 2).float(), 0.2 * torch.ones(size, size), 0.5 * torch.ones(size, size)]),
                 torch.stack([0.3 * torch.ones(size, size), (yy % 4 < 2).float(), 0.2 * torch.ones(size, size)]),
                 torch.stack([((xx + yy) % 6 < 3).float(), 0.8 * torch.ones(size, size), (xx > 8).float()]),
                 torch.stack([(yy > 8).float(), (xx < 8).float(), ((xx - yy).abs() < 3).float()])]
        self.labels = torch.randint(0, 4, (count,), generator=g)
        self.images = [bases[int(c)] + 0.2 * torch.randn(3, size, size, generator=g) for c in self.labels]
        self.transform = transform

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        return self.transform(self.images[idx]), int(self.labels[idx])


def random_resized_crop(image, out, scale):
    size = image.shape[-1]
    side = max(2, int(size * math.sqrt(float(torch.empty(1).uniform_(*scale)))))
    top, left = (int(v) for v in torch.randint(0, size - side + 1, (2,)))
    crop = image[:, top:top + side, left:left + side]
    return F.interpolate(crop[None], size=(out, out), mode="bilinear", align_corners=False)[0]


class DataAugmentationDINO:
    def __init__(self, global_crops_scale, local_crops_scale, local_crops_number):
        self.global_crops_scale, self.local_crops_scale = global_crops_scale, local_crops_scale
        self.local_crops_number = local_crops_number

    @staticmethod
    def flip_and_jitter(crop):
        if torch.rand(()) < 0.5:
            crop = crop.flip(-1)
        if torch.rand(()) < 0.8:
            crop = crop * float(torch.empty(1).uniform_(0.6, 1.4))
        return crop

    def __call__(self, image):
        crops = [self.flip_and_jitter(random_resized_crop(image, 12, self.global_crops_scale)) for _ in range(2)]
        crops += [self.flip_and_jitter(random_resized_crop(image, 6, self.local_crops_scale))
                  for _ in range(self.local_crops_number)]
        return crops


# ---------------------------------------------------------------- networks
class DropPath(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        if self.p == 0.0 or not self.training:
            return x
        keep = (torch.rand(x.shape[0], 1, 1, 1, device=x.device) >= self.p).to(x.dtype)
        return x * keep / (1 - self.p)


class TinyBackbone(nn.Module):
    """Stand-in for vit_small: a stem, one residual block with stochastic depth, global pooling, an `fc`."""

    def __init__(self, drop_path_rate=0.0, width=32):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.GELU())
        self.block = nn.Sequential(nn.Conv2d(width, width, 3, padding=1), nn.GELU(),
                                   nn.Conv2d(width, width, 3, padding=1))
        self.drop_path = DropPath(drop_path_rate)
        self.fc = nn.Linear(width, 1000)

    def forward(self, x):
        x = self.stem(x)
        x = x + self.drop_path(self.block(x))
        return self.fc(x.mean(dim=(-2, -1)))


class DINOHead(nn.Module):
    def __init__(self, in_dim, out_dim, use_bn=False, norm_last_layer=True, nlayers=3, hidden_dim=64,
                 bottleneck_dim=16):
        super().__init__()
        layers = [nn.Linear(in_dim, hidden_dim), nn.GELU()]
        for _ in range(nlayers - 2):
            layers += [nn.Linear(hidden_dim, hidden_dim), nn.GELU()]
        layers.append(nn.Linear(hidden_dim, bottleneck_dim))
        self.mlp = nn.Sequential(*layers)
        for m in self.mlp:
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)
        # weight norm by hand: direction `last_layer.weight`, scale `last_layer_g` (fixed at 1 with norm_last_layer)
        self.last_layer = nn.Linear(bottleneck_dim, out_dim, bias=False)
        self.last_layer_g = nn.Parameter(torch.ones(out_dim, 1))
        if norm_last_layer:
            self.last_layer_g.requires_grad = False

    def forward(self, x):
        x = F.normalize(self.mlp(x), dim=-1, p=2)
        return F.linear(x, self.last_layer_g * F.normalize(self.last_layer.weight, dim=1))


class MultiCropWrapper(nn.Module):
    def __init__(self, backbone, head):
        super().__init__()
        backbone.fc = nn.Identity()
        self.backbone, self.head = backbone, head

    def forward(self, x):
        if not isinstance(x, list):
            x = [x]
        sizes = torch.tensor([inp.shape[-1] for inp in x])
        ends = torch.cumsum(torch.unique_consecutive(sizes, return_counts=True)[1], 0)
        start, output = 0, []
        for end in ends.tolist():
            output.append(self.backbone(torch.cat(x[start:end])))
            start = end
        return self.head(torch.cat(output))


class DINOLoss(nn.Module):
    def __init__(self, out_dim, ncrops, warmup_teacher_temp, teacher_temp, warmup_teacher_temp_epochs, nepochs,
                 student_temp=0.1, center_momentum=0.9):
        super().__init__()
        self.student_temp, self.center_momentum, self.ncrops = student_temp, center_momentum, ncrops
        self.register_buffer("center", torch.zeros(1, out_dim))
        self.teacher_temp_schedule = np.concatenate((
            np.linspace(warmup_teacher_temp, teacher_temp, warmup_teacher_temp_epochs),
            np.ones(nepochs - warmup_teacher_temp_epochs) * teacher_temp))

    def forward(self, student_output, teacher_output, epoch):
        student_out = (student_output / self.student_temp).chunk(self.ncrops)
        temp = self.teacher_temp_schedule[epoch]
        teacher_out = F.softmax((teacher_output - self.center) / temp, dim=-1).detach().chunk(2)
        total_loss, n_loss_terms = 0, 0
        for iq, q in enumerate(teacher_out):
            for v in range(len(student_out)):
                if v == iq:
                    continue        # the same view seen by both
                loss = torch.sum(-q * F.log_softmax(student_out[v], dim=-1), dim=-1)
                total_loss += loss.mean()
                n_loss_terms += 1
        total_loss /= n_loss_terms
        self.update_center(teacher_output)
        return total_loss

    @torch.no_grad()
    def update_center(self, teacher_output):
        batch_center = torch.sum(teacher_output, dim=0, keepdim=True) / len(teacher_output)
        self.center = self.center * self.center_momentum + batch_center * (1 - self.center_momentum)


# ---------------------------------------------------------------- utils
def get_params_groups(model):
    regularized, not_regularized = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        if name.endswith(".bias") or len(param.shape) == 1:
            not_regularized.append(param)
        else:
            regularized.append(param)
    return [{"params": regularized}, {"params": not_regularized, "weight_decay": 0.0}]


def cosine_scheduler(base_value, final_value, epochs, niter_per_ep, warmup_epochs=0, start_warmup_value=0):
    warmup_iters = warmup_epochs * niter_per_ep
    warmup = np.linspace(start_warmup_value, base_value, warmup_iters) if warmup_epochs > 0 else np.array([])
    iters = np.arange(epochs * niter_per_ep - warmup_iters)
    schedule = final_value + 0.5 * (base_value - final_value) * (1 + np.cos(np.pi * iters / len(iters)))
    schedule = np.concatenate((warmup, schedule))
    assert len(schedule) == epochs * niter_per_ep
    return schedule


def clip_gradients(model, clip):
    norms = []
    for _, p in model.named_parameters():
        if p.grad is not None:
            param_norm = p.grad.data.norm(2)
            norms.append(param_norm.item())
            clip_coef = clip / (param_norm + 1e-6)
            if clip_coef < 1:
                p.grad.data.mul_(clip_coef)
    return norms


def cancel_gradients_last_layer(epoch, model, freeze_last_layer):
    if epoch >= freeze_last_layer:
        return
    for n, p in model.named_parameters():
        if "last_layer" in n:
            p.grad = None


class SmoothedValue:
    def __init__(self, window_size=20):
        self.deque = deque(maxlen=window_size)
        self.total, self.count = 0.0, 0

    def update(self, value, n=1):
        self.deque.append(value)
        self.count += n
        self.total += value * n

    @property
    def median(self):
        return sorted(self.deque)[len(self.deque) // 2]

    @property
    def global_avg(self):
        return self.total / self.count


class MetricLogger:
    def __init__(self, delimiter="  "):
        self.meters = defaultdict(SmoothedValue)
        self.delimiter = delimiter

    def update(self, **kwargs):
        for k, v in kwargs.items():
            if isinstance(v, torch.Tensor):
                v = v.item()
            assert isinstance(v, (float, int))
            self.meters[k].update(v)

    def __str__(self):
        return self.delimiter.join(f"{k}: {float(m.median):.4f} ({float(m.global_avg):.4f})"
                                   for k, m in self.meters.items())

    def log_every(self, iterable, print_freq, header=""):
        for i, obj in enumerate(iterable):
            yield obj
            if i % print_freq == 0 or i == len(iterable) - 1:
                print(f"{header} [{i}/{len(iterable)}] {self}")


# ---------------------------------------------------------------- training
def train_one_epoch(student, teacher, teacher_without_ddp, dino_loss, data_loader, optimizer, lr_schedule,
                    wd_schedule, momentum_schedule, epoch, fp16_scaler, args):
    metric_logger = MetricLogger(delimiter="  ")
    header = f"Epoch: [{epoch}/{args.epochs}]"
    for it, (images, _) in enumerate(metric_logger.log_every(data_loader, 2, header)):
        it = len(data_loader) * epoch + it  # global training iteration
        for i, param_group in enumerate(optimizer.param_groups):
            param_group["lr"] = lr_schedule[it]
            if i == 0:  # only the first group is regularized
                param_group["weight_decay"] = wd_schedule[it]

        images = [im for im in images]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=fp16_scaler is not None):
            teacher_output = teacher(images[:2])  # only the 2 global views go through the teacher
            student_output = student(images)
            loss = dino_loss(student_output.float(), teacher_output.float(), epoch)

        if not math.isfinite(loss.item()):
            print(f"Loss is {loss.item()}, stopping training")
            sys.exit(1)

        # student update
        optimizer.zero_grad()
        param_norms = None
        if fp16_scaler is None:
            loss.backward()
            if args.clip_grad:
                param_norms = clip_gradients(student, args.clip_grad)
            cancel_gradients_last_layer(epoch, student, args.freeze_last_layer)
            optimizer.step()
        else:
            fp16_scaler.scale(loss).backward()
            if args.clip_grad:
                fp16_scaler.unscale_(optimizer)  # unscale the gradients in place before clipping
                param_norms = clip_gradients(student, args.clip_grad)
            cancel_gradients_last_layer(epoch, student, args.freeze_last_layer)
            fp16_scaler.step(optimizer)
            fp16_scaler.update()

        # EMA update of the teacher
        with torch.no_grad():
            m = momentum_schedule[it]
            for param_q, param_k in zip(student.parameters(), teacher_without_ddp.parameters()):
                param_k.data.mul_(m).add_((1 - m) * param_q.detach().data)

        metric_logger.update(loss=loss.item())
        metric_logger.update(lr=optimizer.param_groups[0]["lr"])
        metric_logger.update(wd=optimizer.param_groups[0]["weight_decay"])
    print("Averaged stats:", metric_logger)
    return {k: meter.global_avg for k, meter in metric_logger.meters.items()}


def main(watch):
    args = get_args()
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)

    transform = DataAugmentationDINO((0.4, 1.0), (0.05, 0.4), args.local_crops_number)
    dataset = PatternImages(96, transform)
    sampler = torch.utils.data.DistributedSampler(dataset, num_replicas=1, rank=0, shuffle=True)
    data_loader = torch.utils.data.DataLoader(dataset, sampler=sampler, batch_size=args.batch_size_per_gpu,
                                              num_workers=args.num_workers, pin_memory=False, drop_last=True)

    student = TinyBackbone(drop_path_rate=args.drop_path_rate)
    teacher = TinyBackbone()
    embed_dim = student.fc.weight.shape[1]
    student = MultiCropWrapper(student, DINOHead(embed_dim, args.out_dim, use_bn=args.use_bn_in_head,
                                                 norm_last_layer=args.norm_last_layer))
    teacher = MultiCropWrapper(teacher, DINOHead(embed_dim, args.out_dim, args.use_bn_in_head))
    teacher_without_ddp = teacher
    teacher_without_ddp.load_state_dict(student.state_dict())
    for p in teacher.parameters():
        p.requires_grad = False

    dino_loss = DINOLoss(args.out_dim, args.local_crops_number + 2, args.warmup_teacher_temp, args.teacher_temp,
                         args.warmup_teacher_temp_epochs, args.epochs)

    params_groups = get_params_groups(student)
    optimizer = torch.optim.AdamW(params_groups)
    fp16_scaler = None
    if args.use_fp16:
        fp16_scaler = torch.amp.GradScaler("cpu")

    lr_schedule = cosine_scheduler(args.lr * args.batch_size_per_gpu / 256.0, args.min_lr, args.epochs,
                                   len(data_loader), warmup_epochs=args.warmup_epochs)
    wd_schedule = cosine_scheduler(args.weight_decay, args.weight_decay_end, args.epochs, len(data_loader))
    momentum_schedule = cosine_scheduler(args.momentum_teacher, 1, args.epochs, len(data_loader))

    with watch(student):
        for epoch in range(0, args.epochs):
            data_loader.sampler.set_epoch(epoch)
            train_stats = train_one_epoch(student, teacher, teacher_without_ddp, dino_loss, data_loader,
                                          optimizer, lr_schedule, wd_schedule, momentum_schedule, epoch,
                                          fp16_scaler, args)
            print({**{f"train_{k}": v for k, v in train_stats.items()}, "epoch": epoch})
    return [student, optimizer]


from tests.doctor_published import variant  # noqa: E402

REAL = set()
VARIANTS = [
    # clipping moved after the scaler's step: the update used unclipped gradients
    variant("clip_after_scaler_step", "clip_after_step",
            ("                fp16_scaler.unscale_(optimizer)  # unscale the gradients in place before clipping\n"
             "                param_norms = clip_gradients(student, args.clip_grad)\n"
             "            cancel_gradients_last_layer(epoch, student, args.freeze_last_layer)\n"
             "            fp16_scaler.step(optimizer)\n"
             "            fp16_scaler.update()\n",
             "                fp16_scaler.unscale_(optimizer)  # unscale the gradients in place before clipping\n"
             "            cancel_gradients_last_layer(epoch, student, args.freeze_last_layer)\n"
             "            fp16_scaler.step(optimizer)\n"
             "            fp16_scaler.update()\n"
             "            if args.clip_grad:\n"
             "                param_norms = clip_gradients(student, args.clip_grad)\n")),
    # the learner "simplifies" the MetricLogger (no .item() inside) and passes the loss tensor: the meters' window
    # and running total keep every iteration's graph alive
    variant("metric_logger_keeps_loss_tensors", "graph_attached_logging",
            ("            if isinstance(v, torch.Tensor):\n                v = v.item()\n"
             "            assert isinstance(v, (float, int))\n", ""),
            ("        metric_logger.update(loss=loss.item())\n", "        metric_logger.update(loss=loss)\n")),
    # not a bug: the published MetricLogger.update calls .item() on any tensor it is given
    variant("loss_tensor_given_to_metric_logger", set(),
            ("        metric_logger.update(loss=loss.item())\n", "        metric_logger.update(loss=loss)\n")),
    # not a bug: F.cross_entropy with probability targets is exactly sum(-q * log_softmax(s)) averaged over the
    # batch; the target q is a softmax output, which is right for a soft target
    variant("soft_target_cross_entropy", set(),
            ("                loss = torch.sum(-q * F.log_softmax(student_out[v], dim=-1), dim=-1)\n"
             "                total_loss += loss.mean()\n",
             "                total_loss += F.cross_entropy(student_out[v], q)\n")),
    # the docstring says "cross-entropy between softmax outputs", so the learner softmaxes the student too
    variant("student_softmax_into_cross_entropy", "softmax_before_cross_entropy",
            ("                loss = torch.sum(-q * F.log_softmax(student_out[v], dim=-1), dim=-1)\n"
             "                total_loss += loss.mean()\n",
             "                total_loss += F.cross_entropy(F.softmax(student_out[v], dim=-1), q)\n")),
    # the optimizer's groups are collected from the bare backbone, before MultiCropWrapper adds the DINOHead
    variant("param_groups_before_the_head", "head_after_optimizer",
            ("    embed_dim = student.fc.weight.shape[1]\n",
             "    embed_dim = student.fc.weight.shape[1]\n    params_groups = get_params_groups(student)\n"),
            ("    params_groups = get_params_groups(student)\n    optimizer", "    optimizer")),
    # the per-iteration cosine schedules indexed by the epoch: the lr only moves at epoch boundaries and stays
    # in the first few warmup values
    variant("schedules_indexed_by_epoch", "update_schedule_per_epoch",
            ("            param_group[\"lr\"] = lr_schedule[it]\n",
             "            param_group[\"lr\"] = lr_schedule[epoch]\n")),
]
