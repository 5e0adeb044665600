# Mirrors: facebookresearch/detr, engine.py (train_one_epoch, evaluate) and main.py (main: the param groups, AdamW,
# StepLR, the loaders, the epoch loop), with models/detr.py (DETR, SetCriterion, PostProcess, MLP),
# models/backbone.py (FrozenBatchNorm2d, BackboneBase, Joiner), models/position_encoding.py (sine),
# models/transformer.py, models/matcher.py (HungarianMatcher), util/misc.py (SmoothedValue, MetricLogger,
# reduce_dict, NestedTensor, collate_fn) and util/box_ops.py, snapshot at commit 29901c51d7fe (2024-03-12); engine.py
# last changed in ee75d8998192 (2020-06-04), main.py in 0fb754c4e592 (2020-05-30).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: DETR's model (a ResNet-style backbone with FrozenBatchNorm2d whose stem and layer1 are frozen with
# requires_grad_(False) when the backbone is built, long before the optimizer; a sine position embedding computed
# from the padding mask; a post-norm encoder-decoder transformer with dropout 0.1 whose decoder returns every layer's
# output; class_embed to num_classes + 1 (the last is "no object"), a 3-layer box MLP with a sigmoid, learned query
# embeddings, auxiliary outputs of the earlier decoder layers); SetCriterion with the Hungarian matcher (class, L1 and
# GIoU costs), the no-object class weighted eos_coef in the cross-entropy, L1 and GIoU box losses normalised by the
# number of target boxes, class_error and cardinality_error computed for logging only, the same losses with suffix _i
# for each auxiliary layer, weight_dict weighting the sum; images of different sizes padded by collate_fn into a
# NestedTensor (tensors + padding mask), targets a tuple of dicts (boxes cxcywh normalised, labels, image_id,
# orig_size, size); main's two param groups (the non-backbone parameters at lr, those whose name contains "backbone" at
# lr_backbone), AdamW (weight decay 1e-4), StepLR(optimizer, lr_drop) stepped once per epoch after train_one_epoch; a
# training loader over a RandomSampler inside a BatchSampler with drop_last=True, a validation loader over a
# SequentialSampler with drop_last=False; per epoch train_one_epoch: model.train() and criterion.train(), per batch
# the forward, the loss dict, the weighted sum, reduce_dict (the identity on one process), loss_value from .item() of
# the reduced weighted sum checked finite, zero_grad, backward, clip_grad_norm_(model.parameters(), 0.1) when
# max_norm > 0, step, the MetricLogger updated with the loss value, every loss term (tensors, turned into floats by
# MetricLogger.update), class_error and lr; then evaluate(), decorated with @torch.no_grad(): model.eval(),
# criterion.eval(), the same losses logged per batch (MetricLogger.update with n=1), PostProcess (softmax scores,
# boxes scaled to the original size) and a COCO evaluator fed per image id, then accumulate/summarize.
# REAL: mean_of_batch_means: evaluate's loss meters (MetricLogger.update, n=1 per batch) average per-batch losses with
# equal weight while the validation loader keeps a short last batch (drop_last=False; on COCO val, 5000 images over
# 8 GPUs in batches of 2 leave a last batch of 1 on every GPU); test_loss, test_class_error and the other test_ terms
# written to log.txt (and plotted by util/plot_utils.py) are means of batch means. Here 30 validation images in
# batches of 8 leave a last batch of 6. (Each batch's box losses are also normalised per box, not per image, so even
# equal batches would not weight images equally.) The training meters are running means over steps, as published.
# Shrunk: synthetic "COCO": images of 16x16, 16x20 or 20x16 pixels with 1-2 coloured rectangles (3 classes, the
# colour is the class) on a noisy background, image ids 0-63 for training and 64-93 for validation, a random
# horizontal flip for training (the published RandomResize/RandomSizedCrop left out), batch size 8 (not 2 per GPU),
# 3 epochs with lr_drop 2 (not 300/200), hidden 32, 2 heads, feed-forward 64, 1 encoder and 2 decoder layers, 4
# queries (not 100); lr 2e-3 and lr_backbone 2e-4 (1e-4/1e-5 would barely move in 24 steps); the Hungarian
# assignment solved by enumerating the assignments (at most 2 boxes among 4 queries; the published uses scipy's
# linear_sum_assignment, not installed here); the COCO evaluator replaced by AP at IoU 0.5 averaged over classes; no
# pretrained backbone (the published loads torchvision's ImageNet weights); one process (reduce_dict and
# synchronize_between_processes are identities); the CPU instead of CUDA; output_dir empty, so no checkpoints and no
# log.txt. The training loss falls from about 10.0 in epoch 1 to 9.6 in epoch 3 and the test loss from 11.0 to about
# 10.5; 24 steps are far too few for DETR to localise (AP50 stays near 0).
# Added: `with watch(model):` around the epochs.
import itertools
import math
import sys
import time
from collections import defaultdict, deque
from types import SimpleNamespace

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import BatchSampler, DataLoader, Dataset, RandomSampler, SequentialSampler


def settings():
    """What main.py reads from its command line, at the shrunk defaults."""
    return SimpleNamespace(lr=2e-3, lr_backbone=2e-4, batch_size=8, weight_decay=1e-4, epochs=3, lr_drop=2,
                           clip_max_norm=0.1, hidden_dim=32, nheads=2, dim_feedforward=64, enc_layers=1,
                           dec_layers=2, dropout=0.1, num_queries=4, aux_loss=True, set_cost_class=1.0,
                           set_cost_bbox=5.0, set_cost_giou=2.0, bbox_loss_coef=5.0, giou_loss_coef=2.0,
                           eos_coef=0.1, num_classes=3, device="cpu", seed=42, output_dir="", num_workers=0,
                           start_epoch=0)


# --- util/box_ops.py ------------------------------------------------------------------------------

def box_cxcywh_to_xyxy(b):
    cx, cy, w, h = b.unbind(-1)
    return torch.stack([cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h], dim=-1)


def box_area(b):
    return (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])


def box_iou(a, b):
    area_a, area_b = box_area(a), box_area(b)
    lt = torch.max(a[:, None, :2], b[None, :, :2])
    rb = torch.min(a[:, None, 2:], b[None, :, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[..., 0] * wh[..., 1]
    union = area_a[:, None] + area_b[None, :] - inter
    return inter / union, union


def generalized_box_iou(a, b):
    iou, union = box_iou(a, b)
    lt = torch.min(a[:, None, :2], b[None, :, :2])
    rb = torch.max(a[:, None, 2:], b[None, :, 2:])
    wh = (rb - lt).clamp(min=0)
    hull = wh[..., 0] * wh[..., 1]
    return iou - (hull - union) / hull


# --- util/misc.py ---------------------------------------------------------------------------------

class SmoothedValue:
    """A window of recent values (median, avg) and the running total of value * n (global_avg)."""

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
    def avg(self):
        return torch.tensor(list(self.deque), dtype=torch.float32).mean().item()

    @property
    def global_avg(self):
        return self.total / self.count

    @property
    def value(self):
        return self.deque[-1]

    def __str__(self):
        return self.fmt.format(median=self.median, avg=self.avg, global_avg=self.global_avg, value=self.value)


class MetricLogger:
    def __init__(self, delimiter="\t"):
        self.meters = defaultdict(SmoothedValue)
        self.delimiter = delimiter

    def update(self, **kwargs):
        for name, v in kwargs.items():
            if isinstance(v, torch.Tensor):
                v = v.item()
            assert isinstance(v, (float, int))
            self.meters[name].update(v)

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
        start = time.time()
        for i, obj in enumerate(iterable):
            yield obj
            if i % print_freq == 0 or i == len(iterable) - 1:
                print(f"{header} [{i}/{len(iterable)}]  {self}")
        print(f"{header} Total time: {time.time() - start:.2f} s")


def reduce_dict(input_dict, average=True):
    return input_dict   # world size 1


class NestedTensor:
    def __init__(self, tensors, mask):
        self.tensors, self.mask = tensors, mask

    def to(self, device):
        return NestedTensor(self.tensors.to(device), self.mask.to(device))

    def decompose(self):
        return self.tensors, self.mask


def nested_tensor_from_tensor_list(tensor_list):
    c = tensor_list[0].shape[0]
    h = max(img.shape[1] for img in tensor_list)
    w = max(img.shape[2] for img in tensor_list)
    tensor = torch.zeros(len(tensor_list), c, h, w, dtype=tensor_list[0].dtype)
    mask = torch.ones(len(tensor_list), h, w, dtype=torch.bool)
    for img, pad, m in zip(tensor_list, tensor, mask):
        pad[:, :img.shape[1], :img.shape[2]].copy_(img)
        m[:img.shape[1], :img.shape[2]] = False
    return NestedTensor(tensor, mask)


def collate_fn(batch):
    images, targets = tuple(zip(*batch))
    return nested_tensor_from_tensor_list(list(images)), targets


@torch.no_grad()
def accuracy(output, target, topk=(1,)):
    if target.numel() == 0:
        return [torch.zeros([])]
    maxk = max(topk)
    _, pred = output.topk(maxk, 1, True, True)
    correct = pred.t().eq(target.view(1, -1).expand_as(pred.t()))
    return [correct[:k].reshape(-1).float().sum(0).mul(100.0 / target.size(0)) for k in topk]


# --- datasets (stand-in for datasets/coco.py) ------------------------------------------------------

SPLITS = {"train": range(0, 64), "val": range(64, 94)}   # image ids of each split
COLOURS = torch.tensor([[1.0, 0.1, 0.1], [0.1, 1.0, 0.1], [0.1, 0.1, 1.0]])
SIZES = ((16, 16), (16, 20), (20, 16))
MAX_BOXES, MIN_SIDE = 2, 6


def draw_image(image_id):
    """The image and its annotations, drawn from a generator seeded by the image id (a file on disk)."""
    g = torch.Generator().manual_seed(1000 + image_id)
    h, w = SIZES[int(torch.randint(0, 3, (1,), generator=g))]
    img = 0.3 + 0.1 * torch.randn(3, h, w, generator=g)
    boxes, labels = [], []
    for _ in range(int(torch.randint(1, MAX_BOXES + 1, (1,), generator=g))):
        bw, bh = (int(v) for v in torch.randint(MIN_SIDE, 11, (2,), generator=g))
        x0 = int(torch.randint(0, w - bw + 1, (1,), generator=g))
        y0 = int(torch.randint(0, h - bh + 1, (1,), generator=g))
        label = int(torch.randint(0, 3, (1,), generator=g))
        img[:, y0:y0 + bh, x0:x0 + bw] = COLOURS[label][:, None, None]
        boxes.append([(x0 + bw / 2) / w, (y0 + bh / 2) / h, bw / w, bh / h])
        labels.append(label)
    return img, torch.tensor(boxes), torch.tensor(labels), h, w


class CocoDetection(Dataset):
    def __init__(self, image_ids, train):
        self.ids, self.train = list(image_ids), train

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, idx):
        image_id = self.ids[idx]
        img, boxes, labels, h, w = draw_image(image_id)
        if self.train and torch.rand(1) < 0.5:          # T.RandomHorizontalFlip()
            img = img.flip(-1)
            boxes = boxes * torch.tensor([-1.0, 1, 1, 1]) + torch.tensor([1.0, 0, 0, 0])
        img = (img - 0.4) / 0.3                          # T.Normalize
        target = {"boxes": boxes, "labels": labels, "image_id": torch.tensor([image_id]),
                  "orig_size": torch.tensor([h, w]), "size": torch.tensor([h, w])}
        return img, target


def build_dataset(image_set, args):
    return CocoDetection(SPLITS[image_set], train=image_set == "train")


def get_coco_api_from_dataset(dataset):
    """The ground truth of every image of the dataset, by image id (stand-in for pycocotools' COCO)."""
    gt = {}
    for image_id in dataset.ids:
        _, boxes, labels, h, w = draw_image(image_id)
        gt[image_id] = (box_cxcywh_to_xyxy(boxes) * torch.tensor([w, h, w, h]), labels)
    return gt


class CocoEvaluator:
    """Stand-in for the COCO bbox evaluator: AP at IoU 0.5, averaged over classes."""

    def __init__(self, base_ds):
        self.gt, self.results = base_ds, {}

    def update(self, res):
        self.results.update(res)

    def synchronize_between_processes(self):
        pass

    def accumulate(self):
        aps = []
        for c in range(len(COLOURS)):
            dets = sorted(((s.item(), i, b) for i, r in self.results.items()
                           for s, l, b in zip(r["scores"], r["labels"], r["boxes"]) if l == c), key=lambda d: -d[0])
            n_gt = sum(int((labels == c).sum()) for _, labels in self.gt.values())
            used, tp = set(), []
            for _, i, b in dets:
                boxes, labels = self.gt[i]
                ious = box_iou(b[None], boxes)[0][0] * (labels == c)
                j = int(ious.argmax()) if len(ious) else -1
                hit = j >= 0 and ious[j] >= 0.5 and (i, j) not in used
                used |= {(i, j)} if hit else set()
                tp.append(float(hit))
            if n_gt == 0:
                continue
            tp = torch.tensor(tp)
            cum = tp.cumsum(0)
            precision = cum / torch.arange(1, len(tp) + 1)
            aps.append(float((precision * tp).sum() / n_gt) if len(tp) else 0.0)
        self.stats = [sum(aps) / len(aps)]

    def summarize(self):
        print(f" Average Precision (AP) @[ IoU=0.50 | area=all ] = {self.stats[0]:.3f}")


# --- models -----------------------------------------------------------------------------------------

class FrozenBatchNorm2d(nn.Module):
    """BatchNorm2d with fixed statistics and affine terms, all buffers."""

    def __init__(self, n):
        super().__init__()
        self.register_buffer("weight", torch.ones(n))
        self.register_buffer("bias", torch.zeros(n))
        self.register_buffer("running_mean", torch.zeros(n))
        self.register_buffer("running_var", torch.ones(n))

    def forward(self, x):
        scale = self.weight * (self.running_var + 1e-5).rsqrt()
        shift = self.bias - self.running_mean * scale
        return x * scale[None, :, None, None] + shift[None, :, None, None]


class TinyResNet(nn.Module):
    """Stand-in for torchvision's resnet50(norm_layer=FrozenBatchNorm2d): a stem, layer1 and layer2 (stride 4)."""

    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False), FrozenBatchNorm2d(8)
        self.layer1 = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, bias=False), FrozenBatchNorm2d(8), nn.ReLU())
        self.layer2 = nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False), FrozenBatchNorm2d(16),
                                    nn.ReLU())

    def forward(self, x):
        return self.layer2(self.layer1(F.relu(self.bn1(self.conv1(x)))))


class Backbone(nn.Module):
    def __init__(self, train_backbone):
        super().__init__()
        body = TinyResNet()
        for name, parameter in body.named_parameters():
            if not train_backbone or "layer2" not in name:       # the stem and layer1 never train
                parameter.requires_grad_(False)
        self.body, self.num_channels = body, 16

    def forward(self, tensor_list):
        x = self.body(tensor_list.tensors)
        mask = F.interpolate(tensor_list.mask[None].float(), size=x.shape[-2:]).to(torch.bool)[0]
        return {"0": NestedTensor(x, mask)}


class PositionEmbeddingSine(nn.Module):
    def __init__(self, num_pos_feats, temperature=10000):
        super().__init__()
        self.num_pos_feats, self.temperature = num_pos_feats, temperature

    def forward(self, tensor_list):
        not_mask = ~tensor_list.mask
        y_embed = not_mask.cumsum(1, dtype=torch.float32)
        x_embed = not_mask.cumsum(2, dtype=torch.float32)
        y_embed = y_embed / (y_embed[:, -1:, :] + 1e-6) * 2 * math.pi
        x_embed = x_embed / (x_embed[:, :, -1:] + 1e-6) * 2 * math.pi
        dim_t = torch.arange(self.num_pos_feats, dtype=torch.float32)
        dim_t = self.temperature ** (2 * (dim_t // 2) / self.num_pos_feats)
        pos_x, pos_y = x_embed[..., None] / dim_t, y_embed[..., None] / dim_t
        pos_x = torch.stack((pos_x[..., 0::2].sin(), pos_x[..., 1::2].cos()), dim=4).flatten(3)
        pos_y = torch.stack((pos_y[..., 0::2].sin(), pos_y[..., 1::2].cos()), dim=4).flatten(3)
        return torch.cat((pos_y, pos_x), dim=3).permute(0, 3, 1, 2)


class Joiner(nn.Sequential):
    def forward(self, tensor_list):
        xs = self[0](tensor_list)
        out, pos = [], []
        for x in xs.values():
            out.append(x)
            pos.append(self[1](x).to(x.tensors.dtype))
        return out, pos


class EncoderLayer(nn.Module):
    def __init__(self, d, nhead, ff, dropout):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d, nhead, dropout=dropout)
        self.linear1, self.linear2 = nn.Linear(d, ff), nn.Linear(ff, d)
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.dropout, self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, src, key_padding_mask, pos):
        q = k = src + pos
        src = self.norm1(src + self.dropout1(self.self_attn(q, k, src, key_padding_mask=key_padding_mask)[0]))
        return self.norm2(src + self.dropout2(self.linear2(self.dropout(F.relu(self.linear1(src))))))


class DecoderLayer(nn.Module):
    def __init__(self, d, nhead, ff, dropout):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d, nhead, dropout=dropout)
        self.multihead_attn = nn.MultiheadAttention(d, nhead, dropout=dropout)
        self.linear1, self.linear2 = nn.Linear(d, ff), nn.Linear(ff, d)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.dropout = nn.Dropout(dropout)
        self.dropout1, self.dropout2, self.dropout3 = nn.Dropout(dropout), nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, tgt, memory, memory_key_padding_mask, pos, query_pos):
        q = k = tgt + query_pos
        tgt = self.norm1(tgt + self.dropout1(self.self_attn(q, k, tgt)[0]))
        attended = self.multihead_attn(tgt + query_pos, memory + pos, memory,
                                       key_padding_mask=memory_key_padding_mask)[0]
        tgt = self.norm2(tgt + self.dropout2(attended))
        return self.norm3(tgt + self.dropout3(self.linear2(self.dropout(F.relu(self.linear1(tgt))))))


class Transformer(nn.Module):
    def __init__(self, d_model, nhead, num_encoder_layers, num_decoder_layers, dim_feedforward, dropout):
        super().__init__()
        self.encoder = nn.ModuleList(EncoderLayer(d_model, nhead, dim_feedforward, dropout)
                                     for _ in range(num_encoder_layers))
        self.decoder = nn.ModuleList(DecoderLayer(d_model, nhead, dim_feedforward, dropout)
                                     for _ in range(num_decoder_layers))
        self.decoder_norm = nn.LayerNorm(d_model)
        self.d_model = d_model
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def forward(self, src, mask, query_embed, pos_embed):
        bs = src.shape[0]
        src, pos_embed = src.flatten(2).permute(2, 0, 1), pos_embed.flatten(2).permute(2, 0, 1)
        query_embed = query_embed.unsqueeze(1).repeat(1, bs, 1)
        mask = mask.flatten(1)
        memory = src
        for layer in self.encoder:
            memory = layer(memory, mask, pos_embed)
        tgt, intermediate = torch.zeros_like(query_embed), []
        for layer in self.decoder:
            tgt = layer(tgt, memory, mask, pos_embed, query_embed)
            intermediate.append(self.decoder_norm(tgt))
        return torch.stack(intermediate).transpose(1, 2), memory


class MLP(nn.Module):
    def __init__(self, input_dim, hidden_dim, output_dim, num_layers):
        super().__init__()
        h = [hidden_dim] * (num_layers - 1)
        self.layers = nn.ModuleList(nn.Linear(n, k) for n, k in zip([input_dim] + h, h + [output_dim]))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = F.relu(layer(x)) if i < len(self.layers) - 1 else layer(x)
        return x


class DETR(nn.Module):
    def __init__(self, backbone, transformer, num_classes, num_queries, aux_loss=False):
        super().__init__()
        hidden_dim = transformer.d_model
        self.num_queries, self.transformer, self.aux_loss = num_queries, transformer, aux_loss
        self.class_embed = nn.Linear(hidden_dim, num_classes + 1)
        self.bbox_embed = MLP(hidden_dim, hidden_dim, 4, 3)
        self.query_embed = nn.Embedding(num_queries, hidden_dim)
        self.input_proj = nn.Conv2d(backbone.num_channels, hidden_dim, kernel_size=1)
        self.backbone = backbone

    def forward(self, samples):
        features, pos = self.backbone(samples)
        src, mask = features[-1].decompose()
        hs = self.transformer(self.input_proj(src), mask, self.query_embed.weight, pos[-1])[0]
        outputs_class = self.class_embed(hs)
        outputs_coord = self.bbox_embed(hs).sigmoid()
        out = {"pred_logits": outputs_class[-1], "pred_boxes": outputs_coord[-1]}
        if self.aux_loss:
            out["aux_outputs"] = [{"pred_logits": a, "pred_boxes": b}
                                  for a, b in zip(outputs_class[:-1], outputs_coord[:-1])]
        return out


class HungarianMatcher(nn.Module):
    def __init__(self, cost_class=1.0, cost_bbox=1.0, cost_giou=1.0):
        super().__init__()
        self.cost_class, self.cost_bbox, self.cost_giou = cost_class, cost_bbox, cost_giou

    @torch.no_grad()
    def forward(self, outputs, targets):
        bs, num_queries = outputs["pred_logits"].shape[:2]
        out_prob = outputs["pred_logits"].flatten(0, 1).softmax(-1)
        out_bbox = outputs["pred_boxes"].flatten(0, 1)
        tgt_ids = torch.cat([v["labels"] for v in targets])
        tgt_bbox = torch.cat([v["boxes"] for v in targets])
        cost = (self.cost_bbox * torch.cdist(out_bbox, tgt_bbox, p=1) - self.cost_class * out_prob[:, tgt_ids]
                - self.cost_giou * generalized_box_iou(box_cxcywh_to_xyxy(out_bbox), box_cxcywh_to_xyxy(tgt_bbox)))
        cost = cost.view(bs, num_queries, -1)
        sizes = [len(v["boxes"]) for v in targets]
        return [self.assign(c[i]) for i, c in enumerate(cost.split(sizes, -1))]

    @staticmethod
    def assign(c):
        """The minimum-cost assignment of the targets (columns) to distinct queries (rows), by enumeration."""
        n_q, n_t = c.shape
        perms = torch.tensor(list(itertools.permutations(range(n_q), n_t)), dtype=torch.int64).view(-1, n_t)
        best = perms[c[perms, torch.arange(n_t)].sum(1).argmin()]
        order = best.argsort()
        return best[order], torch.arange(n_t)[order]


class SetCriterion(nn.Module):
    def __init__(self, num_classes, matcher, weight_dict, eos_coef, losses):
        super().__init__()
        self.num_classes, self.matcher, self.weight_dict = num_classes, matcher, weight_dict
        self.eos_coef, self.losses = eos_coef, losses
        empty_weight = torch.ones(num_classes + 1)
        empty_weight[-1] = eos_coef
        self.register_buffer("empty_weight", empty_weight)

    def loss_labels(self, outputs, targets, indices, num_boxes, log=True):
        src_logits = outputs["pred_logits"]
        idx = self._get_src_permutation_idx(indices)
        target_classes_o = torch.cat([t["labels"][J] for t, (_, J) in zip(targets, indices)])
        target_classes = torch.full(src_logits.shape[:2], self.num_classes, dtype=torch.int64)
        target_classes[idx] = target_classes_o
        losses = {"loss_ce": F.cross_entropy(src_logits.transpose(1, 2), target_classes, self.empty_weight)}
        if log:
            losses["class_error"] = 100 - accuracy(src_logits[idx], target_classes_o)[0]
        return losses

    @torch.no_grad()
    def loss_cardinality(self, outputs, targets, indices, num_boxes):
        pred_logits = outputs["pred_logits"]
        tgt_lengths = torch.as_tensor([len(v["labels"]) for v in targets])
        card_pred = (pred_logits.argmax(-1) != pred_logits.shape[-1] - 1).sum(1)
        return {"cardinality_error": F.l1_loss(card_pred.float(), tgt_lengths.float())}

    def loss_boxes(self, outputs, targets, indices, num_boxes):
        idx = self._get_src_permutation_idx(indices)
        src_boxes = outputs["pred_boxes"][idx]
        target_boxes = torch.cat([t["boxes"][i] for t, (_, i) in zip(targets, indices)], dim=0)
        loss_bbox = F.l1_loss(src_boxes, target_boxes, reduction="none")
        loss_giou = 1 - torch.diag(generalized_box_iou(box_cxcywh_to_xyxy(src_boxes),
                                                       box_cxcywh_to_xyxy(target_boxes)))
        return {"loss_bbox": loss_bbox.sum() / num_boxes, "loss_giou": loss_giou.sum() / num_boxes}

    @staticmethod
    def _get_src_permutation_idx(indices):
        batch_idx = torch.cat([torch.full_like(src, i) for i, (src, _) in enumerate(indices)])
        return batch_idx, torch.cat([src for (src, _) in indices])

    def get_loss(self, loss, outputs, targets, indices, num_boxes, **kwargs):
        loss_map = {"labels": self.loss_labels, "cardinality": self.loss_cardinality, "boxes": self.loss_boxes}
        return loss_map[loss](outputs, targets, indices, num_boxes, **kwargs)

    def forward(self, outputs, targets):
        outputs_without_aux = {k: v for k, v in outputs.items() if k != "aux_outputs"}
        indices = self.matcher(outputs_without_aux, targets)
        num_boxes = sum(len(t["labels"]) for t in targets)
        num_boxes = torch.clamp(torch.as_tensor([num_boxes], dtype=torch.float), min=1).item()
        losses = {}
        for loss in self.losses:
            losses.update(self.get_loss(loss, outputs, targets, indices, num_boxes))
        for i, aux_outputs in enumerate(outputs.get("aux_outputs", [])):
            indices = self.matcher(aux_outputs, targets)
            for loss in self.losses:
                kwargs = {"log": False} if loss == "labels" else {}
                l_dict = self.get_loss(loss, aux_outputs, targets, indices, num_boxes, **kwargs)
                losses.update({k + f"_{i}": v for k, v in l_dict.items()})
        return losses


class PostProcess(nn.Module):
    @torch.no_grad()
    def forward(self, outputs, target_sizes):
        prob = F.softmax(outputs["pred_logits"], -1)
        scores, labels = prob[..., :-1].max(-1)
        boxes = box_cxcywh_to_xyxy(outputs["pred_boxes"])
        img_h, img_w = target_sizes.unbind(1)
        boxes = boxes * torch.stack([img_w, img_h, img_w, img_h], dim=1)[:, None, :]
        return [{"scores": s, "labels": l, "boxes": b} for s, l, b in zip(scores, labels, boxes)]


def build_model(args):
    backbone = Joiner(Backbone(train_backbone=args.lr_backbone > 0), PositionEmbeddingSine(args.hidden_dim // 2))
    backbone.num_channels = backbone[0].num_channels
    transformer = Transformer(args.hidden_dim, args.nheads, args.enc_layers, args.dec_layers, args.dim_feedforward,
                              args.dropout)
    model = DETR(backbone, transformer, num_classes=args.num_classes, num_queries=args.num_queries,
                 aux_loss=args.aux_loss)
    matcher = HungarianMatcher(args.set_cost_class, args.set_cost_bbox, args.set_cost_giou)
    weight_dict = {"loss_ce": 1, "loss_bbox": args.bbox_loss_coef, "loss_giou": args.giou_loss_coef}
    if args.aux_loss:
        aux_weight_dict = {}
        for i in range(args.dec_layers - 1):
            aux_weight_dict.update({k + f"_{i}": v for k, v in weight_dict.items()})
        weight_dict.update(aux_weight_dict)
    criterion = SetCriterion(args.num_classes, matcher=matcher, weight_dict=weight_dict, eos_coef=args.eos_coef,
                             losses=["labels", "boxes", "cardinality"])
    return model, criterion, {"bbox": PostProcess()}


# --- engine.py --------------------------------------------------------------------------------------

def train_one_epoch(model, criterion, data_loader, optimizer, device, epoch, max_norm=0):
    model.train()
    criterion.train()
    metric_logger = MetricLogger(delimiter="  ")
    metric_logger.add_meter("lr", SmoothedValue(window_size=1, fmt="{value:.6f}"))
    metric_logger.add_meter("class_error", SmoothedValue(window_size=1, fmt="{value:.2f}"))
    header = f"Epoch: [{epoch}]"
    print_freq = 10

    for samples, targets in metric_logger.log_every(data_loader, print_freq, header):
        samples = samples.to(device)
        targets = [{k: v.to(device) for k, v in t.items()} for t in targets]

        outputs = model(samples)
        loss_dict = criterion(outputs, targets)
        weight_dict = criterion.weight_dict
        losses = sum(loss_dict[k] * weight_dict[k] for k in loss_dict.keys() if k in weight_dict)

        loss_dict_reduced = reduce_dict(loss_dict)
        loss_dict_reduced_unscaled = {f"{k}_unscaled": v for k, v in loss_dict_reduced.items()}
        loss_dict_reduced_scaled = {k: v * weight_dict[k] for k, v in loss_dict_reduced.items() if k in weight_dict}
        losses_reduced_scaled = sum(loss_dict_reduced_scaled.values())
        loss_value = losses_reduced_scaled.item()
        if not math.isfinite(loss_value):
            print(f"Loss is {loss_value}, stopping training")
            sys.exit(1)

        optimizer.zero_grad()
        losses.backward()
        if max_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()

        metric_logger.update(loss=loss_value, **loss_dict_reduced_scaled, **loss_dict_reduced_unscaled)
        metric_logger.update(class_error=loss_dict_reduced["class_error"])
        metric_logger.update(lr=optimizer.param_groups[0]["lr"])
    metric_logger.synchronize_between_processes()
    print("Averaged stats:", metric_logger)
    return {k: meter.global_avg for k, meter in metric_logger.meters.items()}


@torch.no_grad()
def evaluate(model, criterion, postprocessors, data_loader, base_ds, device, output_dir):
    model.eval()
    criterion.eval()
    metric_logger = MetricLogger(delimiter="  ")
    metric_logger.add_meter("class_error", SmoothedValue(window_size=1, fmt="{value:.2f}"))
    header = "Test:"
    coco_evaluator = CocoEvaluator(base_ds)

    for samples, targets in metric_logger.log_every(data_loader, 10, header):
        samples = samples.to(device)
        targets = [{k: v.to(device) for k, v in t.items()} for t in targets]

        outputs = model(samples)
        loss_dict = criterion(outputs, targets)
        weight_dict = criterion.weight_dict

        loss_dict_reduced = reduce_dict(loss_dict)
        loss_dict_reduced_scaled = {k: v * weight_dict[k] for k, v in loss_dict_reduced.items() if k in weight_dict}
        loss_dict_reduced_unscaled = {f"{k}_unscaled": v for k, v in loss_dict_reduced.items()}
        metric_logger.update(loss=sum(loss_dict_reduced_scaled.values()), **loss_dict_reduced_scaled,
                             **loss_dict_reduced_unscaled)
        metric_logger.update(class_error=loss_dict_reduced["class_error"])

        orig_target_sizes = torch.stack([t["orig_size"] for t in targets], dim=0)
        results = postprocessors["bbox"](outputs, orig_target_sizes)
        res = {target["image_id"].item(): output for target, output in zip(targets, results)}
        if coco_evaluator is not None:
            coco_evaluator.update(res)

    metric_logger.synchronize_between_processes()
    print("Averaged stats:", metric_logger)
    if coco_evaluator is not None:
        coco_evaluator.synchronize_between_processes()
        coco_evaluator.accumulate()
        coco_evaluator.summarize()
    stats = {k: meter.global_avg for k, meter in metric_logger.meters.items()}
    if coco_evaluator is not None:
        stats["coco_eval_bbox"] = coco_evaluator.stats
    return stats, coco_evaluator


# --- main.py ----------------------------------------------------------------------------------------

def main(watch):
    args = settings()
    device = torch.device(args.device)
    torch.manual_seed(args.seed)

    model, criterion, postprocessors = build_model(args)
    model.to(device)
    model_without_ddp = model
    n_parameters = sum(p.numel() for p in model.parameters() if p.requires_grad)

    param_dicts = [
        {"params": [p for n, p in model_without_ddp.named_parameters() if "backbone" not in n and p.requires_grad]},
        {"params": [p for n, p in model_without_ddp.named_parameters() if "backbone" in n and p.requires_grad],
         "lr": args.lr_backbone},
    ]
    optimizer = torch.optim.AdamW(param_dicts, lr=args.lr, weight_decay=args.weight_decay)
    lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer, args.lr_drop)

    dataset_train = build_dataset(image_set="train", args=args)
    dataset_val = build_dataset(image_set="val", args=args)
    sampler_train = RandomSampler(dataset_train)
    sampler_val = SequentialSampler(dataset_val)
    batch_sampler_train = BatchSampler(sampler_train, args.batch_size, drop_last=True)
    data_loader_train = DataLoader(dataset_train, batch_sampler=batch_sampler_train, collate_fn=collate_fn,
                                   num_workers=args.num_workers)
    data_loader_val = DataLoader(dataset_val, args.batch_size, sampler=sampler_val, drop_last=False,
                                 collate_fn=collate_fn, num_workers=args.num_workers)
    base_ds = get_coco_api_from_dataset(dataset_val)

    print("Start training")
    with watch(model):
        for epoch in range(args.start_epoch, args.epochs):
            train_stats = train_one_epoch(model, criterion, data_loader_train, optimizer, device, epoch,
                                          args.clip_max_norm)
            lr_scheduler.step()
            test_stats, coco_evaluator = evaluate(model, criterion, postprocessors, data_loader_val, base_ds,
                                                  device, args.output_dir)
            log_stats = {**{f"train_{k}": v for k, v in train_stats.items()},
                         **{f"test_{k}": v for k, v in test_stats.items()},
                         "epoch": epoch, "n_parameters": n_parameters}
            print(f"SUMMARY epoch {epoch}: train loss {log_stats['train_loss']:.4f}, "
                  f"test loss {log_stats['test_loss']:.4f}, AP50 {log_stats['test_coco_eval_bbox'][0]:.3f}")
    return [model, optimizer]


from tests.doctor_published import variant  # noqa: E402

REAL = {"mean_of_batch_means"}
VARIANTS = [
    # the clip moved below the step ("clip what was applied"): it rescales gradients step() has already used
    variant("clip_after_optimizer_step", "clip_after_step",
            ("        if max_norm > 0:\n            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n"
             "        optimizer.step()\n",
             "        optimizer.step()\n        if max_norm > 0:\n"
             "            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n")),
    # the StepLR handed to train_one_epoch and stepped after every update, as for a per-iteration schedule: the lr
    # drops tenfold every lr_drop (2) batches instead of after lr_drop epochs
    variant("lr_drop_stepped_every_iteration", "epoch_schedule_per_batch",
            ("def train_one_epoch(model, criterion, data_loader, optimizer, device, epoch, max_norm=0):\n",
             "def train_one_epoch(model, criterion, data_loader, optimizer, device, epoch, max_norm=0,\n"
             "                    lr_scheduler=None):\n"),
            ("        optimizer.step()\n\n", "        optimizer.step()\n        lr_scheduler.step()\n\n"),
            ("                                          args.clip_max_norm)\n            lr_scheduler.step()\n",
             "                                          args.clip_max_norm, lr_scheduler)\n")),
    # fine-tuning on one's own classes (the DETR issue tracker's recipe), the new class head assigned once the
    # optimizer and its param groups exist: it gets gradients, is in no group, and never moves
    variant("class_head_replaced_after_optimizer", "head_after_optimizer",
            ("    lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer, args.lr_drop)\n",
             "    lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer, args.lr_drop)\n"
             "    model.class_embed = nn.Linear(args.hidden_dim, args.num_classes + 1)   # our own classes\n")),
    # MetricLogger.update keeps tensors as they come (the .item() per value dropped to save syncs): the weighted
    # loss terms of every training step stay attached to their graphs in the meters' deques and running totals
    variant("metric_logger_keeps_tensors", "graph_attached_logging",
            ("            if isinstance(v, torch.Tensor):\n                v = v.item()\n"
             "            assert isinstance(v, (float, int))\n", "")),
    # the training split enlarged to 80 image ids while validation still starts at id 64: 16 of the 30 validation
    # images are training images
    variant("training_ids_run_into_validation", "data_leakage",
            ('SPLITS = {"train": range(0, 64), "val": range(64, 94)}',
             'SPLITS = {"train": range(0, 80), "val": range(64, 94)}')),
    # evaluate() switches only the criterion to eval: the transformer's dropout stays on while validating
    variant("evaluate_switches_only_the_criterion", "eval_in_train_mode", ("    model.eval()\n", "")),
    # not a bug: the backbone frozen after the optimizer was built; zero_grad() leaves its .grad None
    # (set_to_none=True), so AdamW skips it (no moment, no decay): the same run as leaving it out of the groups
    variant("backbone_frozen_after_optimizer_default_zero_grad", set(),
            ("    lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer, args.lr_drop)\n",
             "    lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer, args.lr_drop)\n"
             "    for p in model.backbone.parameters():   # train the transformer and heads only\n"
             "        p.requires_grad_(False)\n")),
    # not a bug: evaluate's meters weighted by the number of images of each batch (fixes the published
    # mean of batch means)
    variant("test_meters_weighted_by_images", set(),
            ("        metric_logger.update(loss=sum(loss_dict_reduced_scaled.values()), **loss_dict_reduced_scaled,\n"
             "                             **loss_dict_reduced_unscaled)\n"
             "        metric_logger.update(class_error=loss_dict_reduced[\"class_error\"])\n",
             "        for k, v in {\"loss\": sum(loss_dict_reduced_scaled.values()), **loss_dict_reduced_scaled,\n"
             "                     **loss_dict_reduced_unscaled,\n"
             "                     \"class_error\": loss_dict_reduced[\"class_error\"]}.items():\n"
             "            metric_logger.meters[k].update(v.item(), n=len(targets))\n"),
            fixes={"mean_of_batch_means"}),
]
