# Mirrors: pytorch/examples, mnist/main.py, snapshot at commit 77f55b912142 (2025-08-25); the file last changed
# in d0b7e37 (2025-07-09).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: a two-conv digit classifier with two dropouts and log-softmax out, Adadelta at lr 1.0, StepLR(gamma 0.7)
# stepped once per epoch after a training pass and a held-out pass; the training pass zeroes, runs forward, NLL,
# backward and step per batch and prints every 10th batch; the held-out pass sums the per-example NLL under
# no_grad in eval mode and divides by the number of examples. Shrunk: 8x8 stand-in digits (256 train, 100 test),
# 4 and 8 channels, 2 epochs (not 14); the settings are fixed (no command line), the device is the CPU.
# Added: `with watch(...)` around the epochs (what a user of the doctor writes).
from types import SimpleNamespace

import torch
from torch import nn
from torch.nn import functional as F
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader

from tests.doctor_published.standins import datasets, transforms


def settings():
    """What the published script reads from its command line, at the shrunk defaults."""
    return SimpleNamespace(train_batch=64, holdout_batch=1000, n_epochs=2, rate=1.0, decay=0.7, seed=1,
                           print_every=10, smoke=False)


class DigitCNN(nn.Module):
    """conv(1->4) relu conv(4->8) relu maxpool dropout | flatten dense(32->16) relu dropout dense(16->10)."""

    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(1, 4, 3), nn.Conv2d(4, 8, 3)
        self.drop_a, self.drop_b = nn.Dropout(0.25), nn.Dropout(0.5)
        self.d1, self.d2 = nn.Linear(32, 16), nn.Linear(16, 10)

    def forward(self, pixels):
        h = F.max_pool2d(F.relu(self.c2(F.relu(self.c1(pixels)))), 2)
        h = self.drop_a(h).flatten(1)
        h = self.drop_b(F.relu(self.d1(h)))
        return F.log_softmax(self.d2(h), dim=1)


def run_epoch(cfg, net, where, batches, opt, epoch_no):
    net.train()
    for k, (pixels, digits) in enumerate(batches):
        pixels, digits = pixels.to(where), digits.to(where)
        opt.zero_grad()
        log_p = net(pixels)
        nll = F.nll_loss(log_p, digits)
        nll.backward()
        opt.step()
        if k % cfg.print_every == 0:
            seen = k * len(pixels)
            print(f"epoch {epoch_no}: {seen}/{len(batches.dataset)} images, nll {nll.item():.5f}")
            if cfg.smoke:
                break


def holdout(net, where, batches):
    net.eval()
    nll_total, hits = 0, 0
    with torch.no_grad():
        for pixels, digits in batches:
            pixels, digits = pixels.to(where), digits.to(where)
            log_p = net(pixels)
            nll_total += F.nll_loss(log_p, digits, reduction="sum").item()
            hits += (log_p.argmax(1) == digits).sum().item()
    nll_total /= len(batches.dataset)
    print(f"held out: nll {nll_total:.4f}, {hits} of {len(batches.dataset)} right")


def main(watch):
    cfg = settings()
    torch.manual_seed(cfg.seed)
    where = torch.device("cpu")
    prep = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
    fit_set = datasets.MNIST("digits", train=True, download=True, transform=prep)
    check_set = datasets.MNIST("digits", train=False, transform=prep)
    fit_batches = DataLoader(fit_set, batch_size=cfg.train_batch)
    check_batches = DataLoader(check_set, batch_size=cfg.holdout_batch)

    net = DigitCNN().to(where)
    opt = torch.optim.Adadelta(net.parameters(), lr=cfg.rate)
    sched = StepLR(opt, step_size=1, gamma=cfg.decay)
    with watch(net, opt, sched):
        for epoch_no in range(1, cfg.n_epochs + 1):
            run_epoch(cfg, net, where, fit_batches, opt, epoch_no)
            holdout(net, where, check_batches)
            sched.step()
    return [net, opt]


from tests.doctor_published import dedent, variant  # noqa: E402

HOLDOUT_LOOP = """\
        for pixels, digits in batches:
            pixels, digits = pixels.to(where), digits.to(where)
            log_p = net(pixels)
            nll_total += F.nll_loss(log_p, digits, reduction="sum").item()
            hits += (log_p.argmax(1) == digits).sum().item()
"""

VARIANTS = [
    variant("no_zero_grad", "missing_zero_grad", ("        opt.zero_grad()\n", "")),
    variant("zero_grad_between_backward_and_step", "zero_grad_after_backward",
            ("        opt.zero_grad()\n", ""),
            ("        nll.backward()\n", "        nll.backward()\n        opt.zero_grad()\n")),
    variant("test_without_eval", "eval_in_train_mode", ("    net.eval()\n", "")),
    variant("test_without_no_grad", "missing_no_grad",
            ("    with torch.no_grad():\n" + HOLDOUT_LOOP, dedent(HOLDOUT_LOOP))),
    variant("train_without_train_switch", "missing_train_switch", ("    net.train()\n", "")),
    variant("step_lr_every_batch", "epoch_schedule_per_batch",
            ("def run_epoch(cfg, net, where, batches, opt, epoch_no):",
             "def run_epoch(cfg, net, where, batches, opt, epoch_no, sched):"),
            ("        opt.step()\n", "        opt.step()\n        sched.step()\n"),
            ("            run_epoch(cfg, net, where, fit_batches, opt, epoch_no)\n",
             "            run_epoch(cfg, net, where, fit_batches, opt, epoch_no, sched)\n"),
            ("            sched.step()\n", "")),
    variant("one_cycle_per_epoch", "update_schedule_per_epoch",
            ("    sched = StepLR(opt, step_size=1, gamma=cfg.decay)",
             "    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg.rate, epochs=cfg.n_epochs,\n"
             "                                                steps_per_epoch=len(fit_batches),\n"
             "                                                cycle_momentum=False)")),
    variant("mean_of_batch_means", "mean_of_batch_means",
            ("holdout_batch=1000,", "holdout_batch=64,"),
            ('F.nll_loss(log_p, digits, reduction="sum").item()', "F.nll_loss(log_p, digits).item()"),
            ("    nll_total /= len(batches.dataset)", "    nll_total /= len(batches)")),
    variant("test_set_from_training_data", "data_leakage",
            ('datasets.MNIST("digits", train=False,', 'datasets.MNIST("digits", train=True,')),
]
