# Mirrors: d2l-ai/d2l-en, d2l/torch.py (train_ch6, evaluate_accuracy_gpu, load_data_fashion_mnist and the
# Accumulator and accuracy helpers), snapshot at commit 23d7a5aecceee (2024-03-16); the model is the concise
# BatchNorm LeNet of the book's batch-normalization section (the edition that trains it with train_ch6).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: Fashion-MNIST loaders (training shuffled); Xavier init of the Linear and Conv2d weights, SGD(lr 1.0),
# cross-entropy; per epoch: train mode, per batch zero_grad, forward, loss, backward, step, then under no_grad the
# running sums (loss x batch size, correct predictions, examples) turned into floats, the running means plotted five
# times an epoch; then an accuracy function that switches to eval mode and counts correct predictions under
# no_grad. Shrunk: 8x8 stand-in Fashion-MNIST (256 train, 100 test), 3x3 convolutions and widths 4/8/12 (not 5x5
# and 6/16/120/84), batch 32 (not 256), 2 epochs (not 10), no worker processes, no animation.
# Added: `with watch(...)` around the epochs.
import torch
from torch import nn
from torch.utils.data import DataLoader

from tests.doctor_published.standins import Plotter, Stopwatch, Sums, count_correct, datasets, transforms


def fashion_loaders(batch: int):
    as_tensor = transforms.Compose([transforms.ToTensor()])
    fit = datasets.FashionMNIST(root="fashion", train=True, transform=as_tensor, download=True)
    held = datasets.FashionMNIST(root="fashion", train=False, transform=as_tensor, download=True)
    return (DataLoader(fit, batch, shuffle=True, num_workers=0),
            DataLoader(held, batch, shuffle=False, num_workers=0))


def held_out_accuracy(net, batches, device=None):
    """Share of right predictions over `batches`, in eval mode and without gradients."""
    is_module = isinstance(net, nn.Module)
    if is_module:
        net.eval()
        device = device or next(net.parameters()).device
    tally = Sums(2)             # right, seen
    with torch.no_grad():
        for x, y in batches:
            x = [part.to(device) for part in x] if isinstance(x, list) else x.to(device)
            y = y.to(device)
            tally.add(count_correct(net(x), y), y.numel())
    return tally[0] / tally[1]


def train_lenet(net, fit_batches, held_batches, epochs, lr, device, watch):
    def xavier(layer):
        if type(layer) in (nn.Linear, nn.Conv2d):
            nn.init.xavier_uniform_(layer.weight)

    net.apply(xavier)
    net.to(device)
    sgd = torch.optim.SGD(net.parameters(), lr=lr)
    xent = nn.CrossEntropyLoss()
    plot = Plotter(xlabel="epoch", xlim=[1, epochs], legend=["train loss", "train acc", "test acc"])
    watch_time, per_epoch = Stopwatch(), len(fit_batches)
    with watch(net, sgd):
        for epoch in range(epochs):
            tally = Sums(3)     # loss x examples, right, examples
            net.train()
            for k, (images, labels) in enumerate(fit_batches):
                watch_time.start()
                sgd.zero_grad()
                images, labels = images.to(device), labels.to(device)
                scores = net(images)
                loss = xent(scores, labels)
                loss.backward()
                sgd.step()
                with torch.no_grad():
                    tally.add(loss * images.shape[0], count_correct(scores, labels), images.shape[0])
                watch_time.stop()
                fit_loss, fit_acc = tally[0] / tally[2], tally[1] / tally[2]
                if (k + 1) % (per_epoch // 5) == 0 or k == per_epoch - 1:
                    plot.add(epoch + (k + 1) / per_epoch, (fit_loss, fit_acc, None))
            held_acc = held_out_accuracy(net, held_batches)
            plot.add(epoch + 1, (None, None, held_acc))
    print(f"train loss {fit_loss:.3f}, train accuracy {fit_acc:.3f}, test accuracy {held_acc:.3f}; "
          f"{tally[2] * epochs / watch_time.total():.0f} examples/s on {device}")
    return sgd


def main(watch):
    torch.manual_seed(0)
    lenet = nn.Sequential(
        nn.Conv2d(1, 4, kernel_size=3), nn.BatchNorm2d(4), nn.Sigmoid(), nn.AvgPool2d(kernel_size=2, stride=2),
        nn.Conv2d(4, 8, kernel_size=3), nn.BatchNorm2d(8), nn.Sigmoid(), nn.Flatten(),
        nn.Linear(8, 12), nn.BatchNorm1d(12), nn.Sigmoid(), nn.Linear(12, 10))
    fit_batches, held_batches = fashion_loaders(32)
    sgd = train_lenet(lenet, fit_batches, held_batches, epochs=2, lr=1.0, device=torch.device("cpu"), watch=watch)
    return [lenet, sgd]


from tests.doctor_published import dedent, variant  # noqa: E402

HELD_LOOP = """\
        for x, y in batches:
            x = [part.to(device) for part in x] if isinstance(x, list) else x.to(device)
            y = y.to(device)
            tally.add(count_correct(net(x), y), y.numel())
"""
TALLY = "                tally.add(loss * images.shape[0], count_correct(scores, labels), images.shape[0])\n"
VARIANTS = [
    variant("train_switch_forgotten", "missing_train_switch", ("            net.train()\n", "")),
    variant("evaluation_in_train_mode", "eval_in_train_mode", ("        net.eval()\n", "")),
    variant("evaluation_with_gradients", "missing_no_grad",
            ("    with torch.no_grad():\n" + HELD_LOOP, dedent(HELD_LOOP))),
    variant("no_zero_grad", "missing_zero_grad", ("                sgd.zero_grad()\n", "")),
    variant("training_loss_summed_as_a_tensor", "graph_attached_logging",
            ("                with torch.no_grad():\n    " + TALLY,
             "                loss_sum = loss if k == 0 else loss_sum + loss\n" + TALLY)),
    variant("test_set_from_training_data", "data_leakage",
            ('held = datasets.FashionMNIST(root="fashion", train=False,',
             'held = datasets.FashionMNIST(root="fashion", train=True,')),
]
