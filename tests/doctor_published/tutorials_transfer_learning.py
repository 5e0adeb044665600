# Mirrors: pytorch/tutorials, beginner_source/transfer_learning_tutorial.py at commit 74ba612b9509, the commit the
# snapshot index holds, retrieved 2026-11-23 (the index records no commit date).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: the "ConvNet as fixed feature extractor" part: a pretrained network with every parameter frozen, then a new
# `fc` head (trainable), SGD with momentum over the head's parameters only, StepLR(7, 0.1) stepped after each
# training phase; each epoch runs a 'train' and a 'val' phase (train()/eval()), zero_grad for every batch of both,
# the forward under torch.set_grad_enabled(phase is 'train'), backward and step only in training; running sums of
# loss.item() x batch size and of correct predictions (a tensor); the best validation weights are saved to a
# file in a temporary directory and loaded back at the end. Shrunk: a stand-in ImageFolder of 8x8 images (160
# train, 64 val; random crop and flip for training), a tiny conv + BatchNorm network for resnet18, batch 16 (not
# 4), 3 epochs (not 25); no plots. Added: `with watch(...)` around the call that trains.
import os
import time
from tempfile import TemporaryDirectory

import torch
from torch import nn
from torch.optim import lr_scheduler
from torch.utils.data import DataLoader

from tests.doctor_published.standins import ImageFolder, models, transforms

IMAGENET_MEAN, IMAGENET_STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def main(watch):
    torch.manual_seed(0)
    recipes = {
        "train": transforms.Compose([transforms.RandomCrop(8, padding=1), transforms.RandomHorizontalFlip(),
                                     transforms.ToTensor(), transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)]),
        "val": transforms.Compose([transforms.ToTensor(), transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)]),
    }
    folder = "insects"
    sets = {part: ImageFolder(os.path.join(folder, part), recipes[part]) for part in ("train", "val")}
    loaders = {part: DataLoader(sets[part], batch_size=16, shuffle=True, num_workers=0) for part in sets}
    sizes = {part: len(sets[part]) for part in sets}
    dev = torch.device("cpu")

    def fit_with_phases(net, loss_fn, opt, sched, epochs=25):
        started = time.time()
        with TemporaryDirectory() as scratch:
            best_file = os.path.join(scratch, "best.pt")
            torch.save(net.state_dict(), best_file)
            best_accuracy = 0.0
            for epoch in range(epochs):
                print(f"epoch {epoch + 1} of {epochs}")
                for phase in ("train", "val"):
                    training = phase == "train"
                    net.train() if training else net.eval()
                    loss_total, right = 0.0, 0
                    for images, labels in loaders[phase]:
                        images, labels = images.to(dev), labels.to(dev)
                        opt.zero_grad()
                        with torch.set_grad_enabled(training):
                            scores = net(images)
                            guesses = scores.argmax(dim=1)
                            loss = loss_fn(scores, labels)
                            if training:
                                loss.backward()
                                opt.step()
                        loss_total += loss.item() * images.size(0)
                        right += (guesses == labels.data).sum()
                    if training:
                        sched.step()
                    mean_loss, accuracy = loss_total / sizes[phase], right.double() / sizes[phase]
                    print(f"  {phase}: loss {mean_loss:.4f}, accuracy {accuracy:.4f}")
                    if phase == "val" and accuracy > best_accuracy:
                        best_accuracy = accuracy
                        torch.save(net.state_dict(), best_file)
            print(f"{time.time() - started:.1f} s; best val accuracy {best_accuracy:.4f}")
            net.load_state_dict(torch.load(best_file))
        return net

    frozen = models.resnet18(weights="IMAGENET1K_V1")
    for p in frozen.parameters():
        p.requires_grad = False
    frozen.fc = nn.Linear(frozen.fc.in_features, 2)
    frozen = frozen.to(dev)
    xent = nn.CrossEntropyLoss()
    head_sgd = torch.optim.SGD(frozen.fc.parameters(), lr=0.001, momentum=0.9)
    decay = lr_scheduler.StepLR(head_sgd, step_size=7, gamma=0.1)
    with watch(frozen, head_sgd, decay):
        frozen = fit_with_phases(frozen, xent, head_sgd, decay, epochs=3)
    return [frozen, head_sgd]


from tests.doctor_published import variant  # noqa: E402

NEW_HEAD = "    frozen.fc = nn.Linear(frozen.fc.in_features, 2)\n"
OPTIMIZER = "    head_sgd = torch.optim.SGD(frozen.fc.parameters(), lr=0.001, momentum=0.9)\n"
VARIANTS = [
    variant("head_replaced_after_the_optimizer", "head_after_optimizer",
            (NEW_HEAD, ""), (OPTIMIZER, OPTIMIZER + NEW_HEAD)),
    variant("step_lr_every_batch", "epoch_schedule_per_batch",
            ("                                opt.step()\n",
             "                                opt.step()\n                                sched.step()\n"),
            ("                    if training:\n                        sched.step()\n", "")),
    variant("no_grad_switch_in_val", "missing_no_grad",
            ("with torch.set_grad_enabled(training):", "with torch.set_grad_enabled(True):")),
    variant("val_phase_in_train_mode", "eval_in_train_mode",
            ("net.train() if training else net.eval()", "net.train()")),
    variant("val_folder_holds_training_images", "data_leakage",
            ("ImageFolder(os.path.join(folder, part),", "ImageFolder(os.path.join(folder, \"train\"),")),
]
