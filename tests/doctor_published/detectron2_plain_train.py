# Mirrors: facebookresearch/detectron2, tools/plain_train_net.py (do_train, do_test), snapshot at
# commit 02b5c4e295e9 (2026-06-06); plain_train_net.py last changed in 8f22855e (2024-05-03). Also mirrored from the same
# snapshot: detectron2/evaluation/evaluator.py's inference_on_dataset and inference_context, detectron2/solver's
# build_optimizer and WarmupMultiStepLR-style LRMultiplier, and the infinite TrainingSampler.
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: model.train() once; the backbone's stem frozen when the model is built (freeze_at), before the optimizer;
# frozen BatchNorm (statistics as buffers); SGD with momentum and weight decay; an iteration-based schedule (linear
# warmup, then x0.1 at fixed iterations) stepped after every optimizer step; an endless loader of list-of-dict
# batches zipped with range(start_iter, max_iter); a model that returns a dict of losses in training, summed for
# backward, each loss reduced to .item() for the event storage; zero_grad, backward, step, lr logged, scheduler
# step; every EVAL_PERIOD iterations do_test: inference_on_dataset under inference_context (eval, then the mode
# restored) and no_grad, the evaluator pooling every prediction before computing its metric.
# Shrunk: a conv/frozen-BN stem, a conv stage and two heads (class, box) for the detector over 8x8 stand-in
# images (96 train in batches of 8, 40 test at batch 1), 30 iterations, warmup 5, steps at 20 and 26, evaluation
# every 10; no checkpointer, no writers, no distributed reduction.
# Added: `with watch(model):` around do_train.
import contextlib
import itertools

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Sampler

from tests.doctor_published.standins import datasets, transforms


class FrozenBatchNorm2d(nn.Module):
    def __init__(self, n):
        super().__init__()
        for name, value in (("weight", 1.0), ("bias", 0.0), ("running_mean", 0.0), ("running_var", 1.0)):
            self.register_buffer(name, torch.full((n,), value))

    def forward(self, x):
        scale = self.weight * (self.running_var + 1e-5).rsqrt()
        return x * scale.view(1, -1, 1, 1) + (self.bias - self.running_mean * scale).view(1, -1, 1, 1)


class Backbone(nn.Module):
    def __init__(self, freeze_at=1):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), FrozenBatchNorm2d(8), nn.ReLU())
        self.res2 = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, bias=False), FrozenBatchNorm2d(8), nn.ReLU())
        if freeze_at >= 1:
            for p in self.stem.parameters():
                p.requires_grad = False

    def forward(self, x):
        return self.res2(self.stem(x))


class TinyRCNN(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.backbone = Backbone()
        self.cls_score = nn.Linear(32, num_classes)
        self.bbox_pred = nn.Linear(32, 4)

    def forward(self, batched_inputs):
        images = torch.stack([d["image"] for d in batched_inputs])
        feats = F.adaptive_avg_pool2d(self.backbone(images), 2).flatten(1)
        scores, boxes = self.cls_score(feats), self.bbox_pred(feats)
        if self.training:
            gt_classes = torch.tensor([d["label"] for d in batched_inputs])
            gt_boxes = torch.stack([d["box"] for d in batched_inputs])
            return {"loss_cls": F.cross_entropy(scores, gt_classes), "loss_box_reg": F.smooth_l1_loss(boxes, gt_boxes)}
        return [{"pred_class": int(s.argmax()), "box": b} for s, b in zip(scores, boxes)]


class Detections(torch.utils.data.Dataset):
    def __init__(self, train):
        self.images = datasets.CIFAR10("data", train=train, transform=transforms.ToTensor(), sizes=(96, 40))

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        image, label = self.images[i]
        return {"image": image, "label": label, "box": torch.tensor([label / 10, 0.2, 0.6, 0.8])}


class TrainingSampler(Sampler):
    """An endless stream of shuffled indices from its own seeded generator."""

    def __init__(self, size, seed=0):
        self.size, self.seed = size, seed

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed)
        while True:
            yield from torch.randperm(self.size, generator=g).tolist()


def trivial_batch_collator(batch):
    return batch


class LRMultiplier(torch.optim.lr_scheduler.LRScheduler):
    """Linear warmup over warmup_iters, then x gamma at each of steps (all counted in iterations)."""

    def __init__(self, optimizer, steps, warmup_iters, warmup_factor=0.001, gamma=0.1, last_epoch=-1):
        self.steps, self.warmup_iters, self.warmup_factor, self.gamma = steps, warmup_iters, warmup_factor, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        it = self.last_epoch
        factor = self.gamma ** sum(it >= s for s in self.steps)
        if it < self.warmup_iters:
            alpha = it / self.warmup_iters
            factor *= self.warmup_factor * (1 - alpha) + alpha
        return [base * factor for base in self.base_lrs]


class EventStorage:
    def __init__(self, start_iter=0):
        self.iter, self.history = start_iter, []

    def put_scalars(self, **kwargs):
        self.history.append(kwargs)

    def put_scalar(self, name, value, smoothing_hint=True):
        self.history.append({name: value})


@contextlib.contextmanager
def inference_context(model):
    training_mode = model.training
    model.eval()
    yield
    model.train(training_mode)


class ClassificationEvaluator:
    def reset(self):
        self.predictions = []

    def process(self, inputs, outputs):
        self.predictions += [(o["pred_class"], i["label"]) for i, o in zip(inputs, outputs)]

    def evaluate(self):
        return {"accuracy": sum(p == t for p, t in self.predictions) / len(self.predictions)}


def inference_on_dataset(model, data_loader, evaluator):
    evaluator.reset()
    with contextlib.ExitStack() as stack:
        stack.enter_context(inference_context(model))
        stack.enter_context(torch.no_grad())
        for inputs in data_loader:
            outputs = model(inputs)
            evaluator.process(inputs, outputs)
    return evaluator.evaluate()


def do_test(model):
    loader = DataLoader(Detections(train=False), batch_size=1, collate_fn=trivial_batch_collator)
    return inference_on_dataset(model, loader, ClassificationEvaluator())


def do_train(model, max_iter=30, eval_period=10, start_iter=0):
    model.train()
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.02, momentum=0.9,
                                weight_decay=1e-4)
    scheduler = LRMultiplier(optimizer, steps=(20, 26), warmup_iters=5)
    dataset = Detections(train=True)
    data_loader = DataLoader(dataset, batch_size=8, sampler=TrainingSampler(len(dataset)),
                             collate_fn=trivial_batch_collator)
    with contextlib.nullcontext(EventStorage(start_iter)) as storage:
        for data, iteration in zip(data_loader, range(start_iter, max_iter)):
            storage.iter = iteration
            loss_dict = model(data)
            losses = sum(loss_dict.values())
            assert torch.isfinite(losses).all(), loss_dict
            loss_dict_reduced = {k: v.item() for k, v in loss_dict.items()}
            losses_reduced = sum(loss for loss in loss_dict_reduced.values())
            storage.put_scalars(total_loss=losses_reduced, **loss_dict_reduced)
            optimizer.zero_grad()
            losses.backward()
            optimizer.step()
            storage.put_scalar("lr", optimizer.param_groups[0]["lr"], smoothing_hint=False)
            scheduler.step()
            if eval_period > 0 and (iteration + 1) % eval_period == 0 and iteration != max_iter - 1:
                print(iteration, do_test(model))
    return optimizer


def main(watch):
    torch.manual_seed(0)
    model = TinyRCNN()
    with watch(model):
        optimizer = do_train(model)
        print(do_test(model))
    return [model, optimizer]


from tests.doctor_published import variant  # noqa: E402

VARIANTS = [
    variant("scheduler_stepped_before_optimizer", "scheduler_before_optimizer",
            ("            optimizer.step()\n", "            scheduler.step()\n            optimizer.step()\n"),
            ("            scheduler.step()\n            if eval_period", "            if eval_period")),
    variant("storage_keeps_loss_tensors", "graph_attached_logging",
            ("{k: v.item() for k, v in loss_dict.items()}", "{k: v for k, v in loss_dict.items()}")),
    variant("one_x_schedule_in_epochs_stepped_per_iteration", "epoch_schedule_per_batch",
            ("    scheduler = LRMultiplier(optimizer, steps=(20, 26), warmup_iters=5)\n",
             "    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[2], gamma=0.1)\n")),
    variant("test_without_no_grad", "missing_no_grad", ("        stack.enter_context(torch.no_grad())\n", "")),
    variant("backbone_frozen_midway_grads_kept_as_zeros", "freeze_after_optimizer",
            ("            optimizer.zero_grad()\n", "            optimizer.zero_grad(set_to_none=False)\n"),
            ("            storage.iter = iteration\n",
             "            storage.iter = iteration\n"
             "            if iteration == 12:\n"
             "                model.backbone.res2.requires_grad_(False)\n")),
]
