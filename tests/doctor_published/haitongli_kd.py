# Mirrors: haitongli/knowledge-distillation-pytorch, train.py (train_kd, train_and_evaluate_kd and the KD branch of
# __main__) with evaluate.py (evaluate_kd), model/net.py (loss_fn_kd, accuracy), model/data_loader.py
# (fetch_dataloader) and utils.py (RunningAverage), snapshot at commit 9937528f0be0 (2022-09-07); train.py last
# changed in bc2752f46e68 (2019-09-12). The configuration is experiments/resnet18_distill/wrn_teacher/params.json.
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: a CIFAR-10 train loader (random crop with padding, horizontal flip, normalisation, shuffled) and a dev
# loader (normalisation only, shuffle=False, drop_last off); a ResNet student trained with SGD (momentum 0.9, weight
# decay 5e-4) and a pretrained wide-ResNet teacher with BatchNorm and dropout 0.3 that is not in the optimizer;
# a StepLR (gamma 0.1) stepped at the top of every epoch, before that epoch's training; train_kd: model.train()
# and teacher_model.eval() at its start, then per batch the student's forward, the teacher's forward under
# no_grad, the KD loss (KLDivLoss with its default 'mean' reduction between the tempered log-softmax and softmax,
# times alpha T^2, plus (1 - alpha) cross-entropy), zero_grad, backward, step, a summary of accuracy and loss every
# save_summary_steps batches, a RunningAverage of the loss value; evaluate_kd: model.eval(), the student's
# forward over the dev loader with no no_grad, the validation loss forced to 0.0, per-batch accuracy from numpy
# outputs, and the mean of the per-batch summaries (np.mean, written here as sum / len, which is the same number).
# Real bugs: (1) scheduler.step() opens each epoch, before any optimizer.step() of it (the pre-1.1 PyTorch
# convention), so every epoch trains at the lr meant for the next one: the decay the config sets for epoch 150
# already applies in epoch 149, and here the decay meant for epoch 3 (0-based) already applies in epoch 2
# (scheduler_before_optimizer); (2) evaluate_kd runs the student forward without no_grad (missing_no_grad); (3) its
# accuracy is the mean of per-batch accuracies over a short last batch: CIFAR-10's 10,000 test images in batches
# of 128 end with 16, here 100 dev images in batches of 16 end with 4 (mean_of_batch_means).
# Shrunk: 8x8 stand-in CIFAR-10 images whose class is a colour, shared by both splits (224 train: 14 batches of 16,
# not 128; 100 dev), a one-block student (8 channels) and a one-block teacher (8 then 16 channels, stride 2), the
# teacher's checkpoint replaced by 15 full-batch Adam steps on 96 un-augmented training images (on its own RNG,
# before the watched run; dev accuracy 0.66), 4 epochs with StepLR(step_size=3) instead of 170 with step_size=150,
# summaries every 3 batches (not 100); no checkpoints, no json metrics files, no CUDA; loss.data[0] (PyTorch 0.3)
# is loss.item().
# Added: `with watch([model, teacher_model]):` around train_and_evaluate_kd (the loop calls both).
import random
from types import SimpleNamespace

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, Dataset

from tests.doctor_published.standins import transforms


class BasicBlock(nn.Module):
    def __init__(self, in_planes, planes, stride=1, drop_rate=0.0):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.drop_rate = drop_rate
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False),
                                          nn.BatchNorm2d(planes))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.dropout(out, p=self.drop_rate, training=self.training)
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    """The student (ResNet-18's stem, residual stages and linear head, one block deep)."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.layer1 = BasicBlock(8, 8)
        self.linear = nn.Linear(8, num_classes)

    def forward(self, x):
        out = self.layer1(F.relu(self.bn1(self.conv1(x))))
        return self.linear(F.adaptive_avg_pool2d(out, 1).flatten(1))


class WideResNet(nn.Module):
    """The teacher: a wider block with dropout between its convolutions."""

    def __init__(self, num_classes=10, drop_rate=0.3):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.block1 = BasicBlock(8, 16, stride=2, drop_rate=drop_rate)
        self.bn = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16, num_classes)

    def forward(self, x):
        out = F.relu(self.bn(self.block1(self.conv1(x))))
        return self.fc(F.adaptive_avg_pool2d(out, 1).flatten(1))


def loss_fn_kd(outputs, labels, teacher_outputs, params):
    alpha, T = params.alpha, params.temperature
    return nn.KLDivLoss()(F.log_softmax(outputs / T, dim=1), F.softmax(teacher_outputs / T, dim=1)) * (alpha * T * T) \
        + F.cross_entropy(outputs, labels) * (1. - alpha)


def accuracy(outputs, labels):
    return np.sum(np.argmax(outputs, axis=1) == labels) / float(labels.size)


metrics = {"accuracy": accuracy}


class RunningAverage:
    def __init__(self):
        self.steps, self.total = 0, 0

    def update(self, val):
        self.total += val
        self.steps += 1

    def __call__(self):
        return self.total / float(self.steps)


class CIFAR10(Dataset):
    """torchvision-style stand-in: uint8 8x8x3 images in .data, one colour per class shared by both splits (plus each
    pixel's own noise), the transform applied in __getitem__."""

    def __init__(self, root, train, transform, size):
        patterns = torch.rand((10, 1, 1, 3), generator=torch.Generator().manual_seed(0))
        g = torch.Generator().manual_seed(1 if train else 2)
        self.targets = torch.randint(0, 10, (size,), generator=g)
        noise = torch.rand((size, 8, 8, 3), generator=g)
        self.data = (0.6 * patterns[self.targets] + 0.4 * noise).mul(255).to(torch.uint8).numpy()
        self.transform = transform

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        return self.transform(self.data[index]), int(self.targets[index])


def fetch_dataloader(types, params):
    normalize = transforms.Normalize((0.4914, 0.4822, 0.4465), (0.247, 0.243, 0.261))
    train_transformer = transforms.Compose([transforms.RandomCrop(8, padding=1), transforms.RandomHorizontalFlip(),
                                            transforms.ToTensor(), normalize])
    dev_transformer = transforms.Compose([transforms.ToTensor(), normalize])
    if types == "train":
        trainset = CIFAR10("./data-cifar10", train=True, transform=train_transformer, size=224)
        return DataLoader(trainset, batch_size=params.batch_size, shuffle=True)
    devset = CIFAR10("./data-cifar10", train=False, transform=dev_transformer, size=100)
    return DataLoader(devset, batch_size=params.batch_size, shuffle=False)


def pretrained_teacher(train_dl):
    """Stands in for utils.load_checkpoint('experiments/base_wrn/best.pth.tar'): a short full-batch fit on 96
    un-augmented training images, on its own RNG."""
    trainset = train_dl.dataset
    plain = transforms.Compose([transforms.ToTensor(),
                                transforms.Normalize((0.4914, 0.4822, 0.4465), (0.247, 0.243, 0.261))])
    x = torch.stack([plain(img) for img in trainset.data[:96]])
    with torch.random.fork_rng():
        torch.manual_seed(10)
        teacher = WideResNet()
        opt = torch.optim.Adam(teacher.parameters(), lr=1e-2)
        for _ in range(15):
            opt.zero_grad()
            F.cross_entropy(teacher(x), trainset.targets[:96]).backward()
            opt.step()
        opt.zero_grad()     # a checkpoint brings no gradients
    return teacher


def train_kd(model, teacher_model, optimizer, loss_fn_kd, dataloader, metrics, params):
    model.train()
    teacher_model.eval()
    summ = []
    loss_avg = RunningAverage()
    for i, (train_batch, labels_batch) in enumerate(dataloader):
        output_batch = model(train_batch)
        with torch.no_grad():
            output_teacher_batch = teacher_model(train_batch)
        loss = loss_fn_kd(output_batch, labels_batch, output_teacher_batch, params)

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        if i % params.save_summary_steps == 0:
            output_batch = output_batch.data.cpu().numpy()
            labels_batch = labels_batch.data.cpu().numpy()
            summary_batch = {metric: metrics[metric](output_batch, labels_batch) for metric in metrics}
            summary_batch["loss"] = loss.item()
            summ.append(summary_batch)
        loss_avg.update(loss.item())

    metrics_mean = {metric: sum(x[metric] for x in summ) / len(summ) for metric in summ[0]}
    print("- Train metrics: " + " ; ".join(f"{k}: {v:05.3f}" for k, v in metrics_mean.items())
          + f" ; running loss {loss_avg():05.3f}")


def evaluate_kd(model, dataloader, metrics, params):
    model.eval()
    summ = []
    for i, (data_batch, labels_batch) in enumerate(dataloader):
        output_batch = model(data_batch)
        loss = 0.0  # the published loop skips the validation loss to save time
        output_batch = output_batch.data.cpu().numpy()
        labels_batch = labels_batch.data.cpu().numpy()
        summary_batch = {metric: metrics[metric](output_batch, labels_batch) for metric in metrics}
        summary_batch["loss"] = loss
        summ.append(summary_batch)
    metrics_mean = {metric: sum(x[metric] for x in summ) / len(summ) for metric in summ[0]}
    print("- Eval metrics : " + " ; ".join(f"{k}: {v:05.3f}" for k, v in metrics_mean.items()))
    return metrics_mean


def train_and_evaluate_kd(model, teacher_model, train_dataloader, val_dataloader, optimizer, loss_fn_kd, metrics,
                          params):
    best_val_acc = 0.0
    if params.model_version == "resnet18_distill":
        scheduler = StepLR(optimizer, step_size=3, gamma=0.1)
    elif params.model_version == "cnn_distill":
        scheduler = StepLR(optimizer, step_size=100, gamma=0.2)

    for epoch in range(params.num_epochs):
        scheduler.step()
        print(f"Epoch {epoch + 1}/{params.num_epochs} lr {optimizer.param_groups[0]['lr']}")
        train_kd(model, teacher_model, optimizer, loss_fn_kd, train_dataloader, metrics, params)
        val_metrics = evaluate_kd(model, val_dataloader, metrics, params)
        val_acc = val_metrics["accuracy"]
        if val_acc >= best_val_acc:
            print("- Found new best accuracy")
            best_val_acc = val_acc


def main(watch):
    params = SimpleNamespace(model_version="resnet18_distill", teacher="wrn", alpha=0.95, temperature=6,
                             learning_rate=0.1, batch_size=16, num_epochs=4, save_summary_steps=3)
    random.seed(230)
    torch.manual_seed(230)
    train_dl = fetch_dataloader("train", params)
    dev_dl = fetch_dataloader("dev", params)
    model = ResNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=params.learning_rate, momentum=0.9, weight_decay=5e-4)
    teacher_model = pretrained_teacher(train_dl)
    with watch([model, teacher_model]):
        train_and_evaluate_kd(model, teacher_model, train_dl, dev_dl, optimizer, loss_fn_kd, metrics, params)
    return [model, optimizer, teacher_model]


from tests.doctor_published import variant  # noqa: E402

REAL = {"scheduler_before_optimizer", "missing_no_grad", "mean_of_batch_means"}
VARIANTS = [
    # "fixing" the order warning by stepping the epoch schedule after each optimizer.step(), inside train_kd
    variant("step_schedule_after_every_update", "epoch_schedule_per_batch",
            ("def train_kd(model, teacher_model, optimizer, loss_fn_kd, dataloader, metrics, params):",
             "def train_kd(model, teacher_model, optimizer, loss_fn_kd, dataloader, metrics, params, scheduler):"),
            ("        optimizer.step()\n", "        optimizer.step()\n        scheduler.step()\n"),
            ("        scheduler.step()\n        print(f\"Epoch", "        print(f\"Epoch"),
            ("train_kd(model, teacher_model, optimizer, loss_fn_kd, train_dataloader, metrics, params)",
             "train_kd(model, teacher_model, optimizer, loss_fn_kd, train_dataloader, metrics, params, scheduler)"),
            fixes={"scheduler_before_optimizer"}),
    # subtle: the teacher's forward is under no_grad and it is not trained, so nothing fails; in train mode its
    # dropout perturbs the soft targets and its BatchNorm layers normalise by (and keep absorbing) batch statistics
    variant("teacher_left_in_train_mode", "eval_in_train_mode",
            ("    model.train()\n    teacher_model.eval()\n", "    model.train()\n")),
    variant("student_not_switched_back_to_train", "missing_train_switch",
            ("    model.train()\n    teacher_model.eval()\n", "    teacher_model.eval()\n")),
    variant("zero_grad_dropped", "missing_zero_grad",
            ("        optimizer.zero_grad()\n        loss.backward()\n", "        loss.backward()\n")),
    # subtle: bringing the validation loss back as the comment invites, but keeping the tensor; only because
    # evaluate_kd has no no_grad does each kept loss hold its batch's graph (the mean keeps them all, and
    # val_metrics holds it until the next epoch)
    variant("validation_loss_kept_as_tensor", "graph_attached_logging",
            ("        loss = 0.0  # the published loop skips the validation loss to save time\n",
             "        loss = F.cross_entropy(output_batch, labels_batch)\n")),
]
