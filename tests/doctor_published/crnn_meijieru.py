# Mirrors: meijieru/crnn.pytorch, train.py (the module-level setup, weights_init, val, trainBatch and the epoch
# loop) with models/crnn.py (BidirectionalLSTM, CRNN), utils.py (strLabelConverter, averager, loadData) and dataset.py
# (lmdbDataset, resizeNormalize, randomSequentialSampler, alignCollate), snapshot at commit 3cc7904c5ba2
# (2024-09-18); train.py last changed in d3a47f91691b (2018-09-07), the model and utilities in 2017.
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# The README's command: `python train.py --adadelta --trainRoot ... --valRoot ... --cuda` (Adadelta at torch's
# default lr 1.0; the other options at their defaults).
# Kept: text-line images (grey, one channel) with string labels; a training loader over randomSequentialSampler
# (random contiguous blocks of batchSize indices, a short tail block) whose alignCollate resizes every image to
# imgH x imgW and normalizes to [-1, 1]; a validation dataset whose own transform resizes to the same size, loaded
# inside val() by a fresh shuffled DataLoader on every call; the CRNN (seven conv layers with BatchNorm on the 3rd,
# 5th and 7th, the four poolings, the last two of stride (2, 1) and padding (0, 1), the height squeezed to 1, then
# two bidirectional LSTMs, the second ending in the class projection), initialized by weights_init (conv weights
# N(0, 0.02), BatchNorm weights N(1, 0.02) and biases 0); strLabelConverter (blank 0, labels lower-cased,
# concatenated IntTensor targets and their lengths); warp-ctc's CTCLoss (raw activations, normalized inside, the
# loss summed over the batch) divided by the batch size; the preallocated image/text/length tensors refilled by
# utils.loadData (resize_ and copy_ through .data) for every batch; the global loss averager (utils.averager, which
# keeps .data sums) reset after each display; per epoch a fresh iterator and a `while i < len(train_loader)` loop
# that, every iteration, sets requires_grad = True on every parameter and calls crnn.train() before trainBatch
# (forward, crnn.zero_grad(), backward, step; no clipping, no scheduler); every valInterval iterations val(): every
# parameter's requires_grad set False (no torch.no_grad()), net.eval(), at most max_iter=100 batches, the loss of
# each batch (already divided by its size) added to a local averager (a mean of batch means), greedy CTC decoding
# compared with the lower-cased labels, and the accuracy divided by max_iter * batchSize (not by the images seen),
# a few raw/decoded predictions printed; every saveInterval iterations the state_dict saved.
# Real bugs, as published: the validation loss is a mean of per-batch means and the accuracy's denominator counts
# every batch as full, both wrong when the validation set is not a multiple of batchSize and val() covers it
# whole (fewer than 100 batches: IIIT5K's 3000, SVT's 647 or IC13's 1015 images at batch 64).
# Not kept (the published script does not run on today's torch/Python): DataLoader(shuffle=True, sampler=...)
# raises, so the sampler is kept without shuffle; opt.trainroot/opt.valroot (the parser defines trainRoot/valRoot)
# read as trainRoot/valRoot; `preds.squeeze(2)` after `preds.max(2)` (torch 0.1's keepdim) dropped; iterator
# .next() written next(); collections.Iterable read from collections.abc; lmdb labels, str(bytes) in Python 3,
# are plain strings here; Variable wrappers (no-ops) dropped; loadData resizes the tensor itself (today's .data is
# a new alias, whose resize_ leaves the tensor's shape as it was).
# Shrunk: synthetic text lines of 2 to 4 digits (alphabet '0123456789', not 36 characters), each digit a fixed
# 32 x 10 grey glyph, plus noise; 104 training lines (6 full batches and a tail of 8) and 40 validation lines
# (3 batches, the last of 8); batchSize 16 (not 64), imgW 40 (not 100: 11 time steps, not 26), conv widths
# 4-8-8-8-16-16-16 (not 64 to 512), nh 16 (not 256), 3 epochs (not 25), displayInterval/valInterval 3 and
# saveInterval 6 (not 500), n_test_disp 3; no workers, no cudnn, no DataParallel; checkpoints in memory.
# The CTC loss falls from about 17.6 to 9 over the 21 updates (the blank plateau: no line is read right yet).
# Added: `with watch(crnn):` around the epochs.
import collections.abc
import io
import random
from types import SimpleNamespace

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset, sampler


def parse_options():
    return SimpleNamespace(trainRoot="train_lmdb", valRoot="val_lmdb", workers=0, batchSize=16, imgH=32, imgW=40,
                           nh=16, nepoch=3, cuda=False, ngpu=1, pretrained="", alphabet="0123456789",
                           expr_dir="expr", displayInterval=3, n_test_disp=3, valInterval=3, saveInterval=6, lr=0.01,
                           beta1=0.5, adam=False, adadelta=True, keep_ratio=False, manualSeed=1234,
                           random_sample=False)


# --- utils.py ---------------------------------------------------------------------------------------------------

class strLabelConverter:
    """Strings to concatenated label indices (1-based: 0 is the CTC blank) and back."""

    def __init__(self, alphabet, ignore_case=True):
        self._ignore_case = ignore_case
        if self._ignore_case:
            alphabet = alphabet.lower()
        self.alphabet = alphabet + "-"
        self.dict = {char: i + 1 for i, char in enumerate(alphabet)}

    def encode(self, text):
        if isinstance(text, str):
            text = [self.dict[char.lower() if self._ignore_case else char] for char in text]
            length = [len(text)]
        elif isinstance(text, collections.abc.Iterable):
            length = [len(s) for s in text]
            text, _ = self.encode("".join(text))
        return torch.IntTensor(text), torch.IntTensor(length)

    def decode(self, t, length, raw=False):
        if length.numel() == 1:
            length = int(length[0])
            assert t.numel() == length, f"text with length: {t.numel()} does not match declared length: {length}"
            if raw:
                return "".join(self.alphabet[int(i) - 1] for i in t)
            chars = []
            for i in range(length):
                if t[i] != 0 and not (i > 0 and t[i - 1] == t[i]):
                    chars.append(self.alphabet[int(t[i]) - 1])
            return "".join(chars)
        assert t.numel() == length.sum(), "texts do not match their declared lengths"
        texts, index = [], 0
        for i in range(length.numel()):
            n = int(length[i])
            texts.append(self.decode(t[index:index + n], torch.IntTensor([n]), raw=raw))
            index += n
        return texts


class averager:
    """Average of torch.Variable and torch.Tensor values (sums their .data)."""

    def __init__(self):
        self.reset()

    def add(self, v):
        if isinstance(v, torch.autograd.Variable):
            count = v.data.numel()
            v = v.data.sum()
        elif isinstance(v, torch.Tensor):
            count = v.numel()
            v = v.sum()
        self.n_count += count
        self.sum += v

    def reset(self):
        self.n_count = 0
        self.sum = 0

    def val(self):
        res = 0
        if self.n_count != 0:
            res = self.sum / float(self.n_count)
        return res


def loadData(v, data):
    v.resize_(data.size()).copy_(data)


# --- dataset.py: an lmdb stand-in, the transforms, the sampler and the collate -------------------------------------

GLYPHS = (torch.rand(10, 32, 10, generator=torch.Generator().manual_seed(5)) > 0.55).float()


class lmdbDataset(Dataset):
    """dataset.lmdbDataset stand-in: (image, label) pairs, the image a [0, 1] grey line (1 x 32 x 10 per digit, like
    PIL's 'L' image before ToTensor), the label its string."""

    def __init__(self, root=None, transform=None, target_transform=None):
        g = torch.Generator().manual_seed(11 if root == "train_lmdb" else 12)
        count = 104 if root == "train_lmdb" else 40
        self.samples = []
        for _ in range(count):
            n = int(torch.randint(2, 5, (1,), generator=g))
            digits = torch.randint(0, 10, (n,), generator=g)
            img = torch.cat([GLYPHS[d] for d in digits], dim=1)[None]
            img = (0.15 + 0.7 * img + 0.1 * torch.randn(img.shape, generator=g)).clamp(0, 1)
            self.samples.append((img, "".join(str(int(d)) for d in digits)))
        self.nSamples = count
        self.transform = transform
        self.target_transform = target_transform

    def __len__(self):
        return self.nSamples

    def __getitem__(self, index):
        assert index <= len(self), "index range error"
        img, label = self.samples[index]
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            label = self.target_transform(label)
        return img, label


class resizeNormalize:
    def __init__(self, size):
        self.size = size            # (width, height), as PIL's resize takes it

    def __call__(self, img):
        img = F.interpolate(img[None], size=(self.size[1], self.size[0]), mode="bilinear", align_corners=False)[0]
        return img.sub_(0.5).div_(0.5)


class randomSequentialSampler(sampler.Sampler):
    def __init__(self, data_source, batch_size):
        self.num_samples = len(data_source)
        self.batch_size = batch_size

    def __iter__(self):
        n_batch = len(self) // self.batch_size
        tail = len(self) % self.batch_size
        index = torch.LongTensor(len(self)).fill_(0)
        for i in range(n_batch):
            random_start = random.randint(0, len(self) - self.batch_size)
            index[i * self.batch_size:(i + 1) * self.batch_size] = random_start + torch.arange(0, self.batch_size)
        if tail:
            random_start = random.randint(0, len(self) - self.batch_size)
            index[(i + 1) * self.batch_size:] = random_start + torch.arange(0, tail)
        return iter(index.tolist())

    def __len__(self):
        return self.num_samples


class alignCollate:
    def __init__(self, imgH=32, imgW=100, keep_ratio=False, min_ratio=1):
        self.imgH, self.imgW, self.keep_ratio, self.min_ratio = imgH, imgW, keep_ratio, min_ratio

    def __call__(self, batch):
        images, labels = zip(*batch)
        imgH, imgW = self.imgH, self.imgW
        if self.keep_ratio:
            ratios = sorted(image.shape[-1] / float(image.shape[-2]) for image in images)
            imgW = int(np.floor(ratios[-1] * imgH))
            imgW = max(imgH * self.min_ratio, imgW)
        transform = resizeNormalize((imgW, imgH))
        images = torch.cat([transform(image).unsqueeze(0) for image in images], 0)
        return images, labels


# --- models/crnn.py ----------------------------------------------------------------------------------------------

class BidirectionalLSTM(nn.Module):
    def __init__(self, nIn, nHidden, nOut):
        super().__init__()
        self.rnn = nn.LSTM(nIn, nHidden, bidirectional=True)
        self.embedding = nn.Linear(nHidden * 2, nOut)

    def forward(self, input):
        recurrent, _ = self.rnn(input)
        T, b, h = recurrent.size()
        output = self.embedding(recurrent.view(T * b, h))
        return output.view(T, b, -1)


class CRNN(nn.Module):
    def __init__(self, imgH, nc, nclass, nh, n_rnn=2, leakyRelu=False):
        super().__init__()
        assert imgH % 16 == 0, "imgH has to be a multiple of 16"
        ks, ps, ss = [3, 3, 3, 3, 3, 3, 2], [1, 1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1, 1]
        nm = [4, 8, 8, 8, 16, 16, 16]
        cnn = nn.Sequential()

        def convRelu(i, batchNormalization=False):
            nIn = nc if i == 0 else nm[i - 1]
            cnn.add_module(f"conv{i}", nn.Conv2d(nIn, nm[i], ks[i], ss[i], ps[i]))
            if batchNormalization:
                cnn.add_module(f"batchnorm{i}", nn.BatchNorm2d(nm[i]))
            cnn.add_module(f"relu{i}", nn.LeakyReLU(0.2, inplace=True) if leakyRelu else nn.ReLU(True))

        convRelu(0)
        cnn.add_module("pooling0", nn.MaxPool2d(2, 2))
        convRelu(1)
        cnn.add_module("pooling1", nn.MaxPool2d(2, 2))
        convRelu(2, True)
        convRelu(3)
        cnn.add_module("pooling2", nn.MaxPool2d((2, 2), (2, 1), (0, 1)))
        convRelu(4, True)
        convRelu(5)
        cnn.add_module("pooling3", nn.MaxPool2d((2, 2), (2, 1), (0, 1)))
        convRelu(6, True)
        self.cnn = cnn
        self.rnn = nn.Sequential(BidirectionalLSTM(nm[-1], nh, nh), BidirectionalLSTM(nh, nh, nclass))

    def forward(self, input):
        conv = self.cnn(input)
        b, c, h, w = conv.size()
        assert h == 1, "the height of conv must be 1"
        conv = conv.squeeze(2).permute(2, 0, 1)     # [w, b, c]
        return self.rnn(conv)


class CTCLoss(nn.Module):
    """warpctc_pytorch.CTCLoss stand-in: raw activations [T, b, C] (normalized inside), concatenated IntTensor
    labels, blank 0; returns the loss summed over the batch, as a 1-element tensor."""

    def forward(self, acts, labels, act_lens, label_lens):
        return F.ctc_loss(acts.log_softmax(2), labels, act_lens, label_lens, blank=0, reduction="sum").view(1)


# --- train.py ----------------------------------------------------------------------------------------------------

def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        m.weight.data.normal_(0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        m.weight.data.normal_(1.0, 0.02)
        m.bias.data.fill_(0)


def main(watch):
    opt = parse_options()
    checkpoints = {}
    random.seed(opt.manualSeed)
    np.random.seed(opt.manualSeed)
    torch.manual_seed(opt.manualSeed)

    train_dataset = lmdbDataset(root=opt.trainRoot)
    assert train_dataset
    if not opt.random_sample:
        train_sampler = randomSequentialSampler(train_dataset, opt.batchSize)
    else:
        train_sampler = None
    train_loader = DataLoader(train_dataset, batch_size=opt.batchSize, sampler=train_sampler,
                              num_workers=int(opt.workers),
                              collate_fn=alignCollate(imgH=opt.imgH, imgW=opt.imgW, keep_ratio=opt.keep_ratio))
    test_dataset = lmdbDataset(root=opt.valRoot, transform=resizeNormalize((opt.imgW, 32)))

    nclass = len(opt.alphabet) + 1
    nc = 1
    converter = strLabelConverter(opt.alphabet)
    criterion = CTCLoss()

    crnn = CRNN(opt.imgH, nc, nclass, opt.nh)
    crnn.apply(weights_init)

    image = torch.FloatTensor(opt.batchSize, 3, opt.imgH, opt.imgH)
    text = torch.IntTensor(opt.batchSize * 5)
    length = torch.IntTensor(opt.batchSize)

    # loss averager
    loss_avg = averager()

    # setup optimizer
    if opt.adam:
        optimizer = torch.optim.Adam(crnn.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))
    elif opt.adadelta:
        optimizer = torch.optim.Adadelta(crnn.parameters())
    else:
        optimizer = torch.optim.RMSprop(crnn.parameters(), lr=opt.lr)

    def val(net, dataset, criterion, max_iter=100):
        print("Start val")

        for p in crnn.parameters():
            p.requires_grad = False

        net.eval()
        data_loader = DataLoader(dataset, shuffle=True, batch_size=opt.batchSize, num_workers=int(opt.workers))
        val_iter = iter(data_loader)

        i = 0
        n_correct = 0
        loss_avg = averager()

        max_iter = min(max_iter, len(data_loader))
        for i in range(max_iter):
            data = next(val_iter)
            i += 1
            cpu_images, cpu_texts = data
            batch_size = cpu_images.size(0)
            loadData(image, cpu_images)
            t, l = converter.encode(cpu_texts)
            loadData(text, t)
            loadData(length, l)

            preds = crnn(image)
            preds_size = torch.IntTensor([preds.size(0)] * batch_size)
            cost = criterion(preds, text, preds_size, length) / batch_size
            loss_avg.add(cost)

            _, preds = preds.max(2)
            preds = preds.transpose(1, 0).contiguous().view(-1)
            sim_preds = converter.decode(preds.data, preds_size.data, raw=False)
            for pred, target in zip(sim_preds, cpu_texts):
                if pred == target.lower():
                    n_correct += 1

        raw_preds = converter.decode(preds.data, preds_size.data, raw=True)[:opt.n_test_disp]
        for raw_pred, pred, gt in zip(raw_preds, sim_preds, cpu_texts):
            print("%-20s => %-20s, gt: %-20s" % (raw_pred, pred, gt))

        accuracy = n_correct / float(max_iter * opt.batchSize)
        print("Test loss: %f, accuray: %f" % (loss_avg.val(), accuracy))

    def trainBatch(net, criterion, optimizer):
        data = next(train_iter)
        cpu_images, cpu_texts = data
        batch_size = cpu_images.size(0)
        loadData(image, cpu_images)
        t, l = converter.encode(cpu_texts)
        loadData(text, t)
        loadData(length, l)

        preds = crnn(image)
        preds_size = torch.IntTensor([preds.size(0)] * batch_size)
        cost = criterion(preds, text, preds_size, length) / batch_size
        crnn.zero_grad()
        cost.backward()
        optimizer.step()
        return cost

    with watch(crnn):
        for epoch in range(opt.nepoch):
            train_iter = iter(train_loader)
            i = 0
            while i < len(train_loader):
                for p in crnn.parameters():
                    p.requires_grad = True
                crnn.train()

                cost = trainBatch(crnn, criterion, optimizer)
                loss_avg.add(cost)
                i += 1

                if i % opt.displayInterval == 0:
                    print("[%d/%d][%d/%d] Loss: %f" % (epoch, opt.nepoch, i, len(train_loader), loss_avg.val()))
                    loss_avg.reset()

                if i % opt.valInterval == 0:
                    val(crnn, test_dataset, criterion)

                # do checkpointing
                if i % opt.saveInterval == 0:
                    checkpoints["{0}/netCRNN_{1}_{2}.pth".format(opt.expr_dir, epoch, i)] = buffer = io.BytesIO()
                    torch.save(crnn.state_dict(), buffer)
    return [crnn, optimizer]


from tests.doctor_published import variant  # noqa: E402

# val()'s loss is a local averager of batch means (cost already divided by batch_size, one count per batch) and
# its accuracy divides by max_iter * batchSize: the 40 validation lines make 3 batches of 16, 16 and 8
REAL = {"mean_of_batch_means"}
VARIANTS = [
    variant("no_zero_grad", "missing_zero_grad", ("        crnn.zero_grad()\n", "")),
    variant("zero_grad_between_backward_and_step", "zero_grad_after_backward",
            ("        crnn.zero_grad()\n        cost.backward()\n",
             "        cost.backward()\n        crnn.zero_grad()\n")),
    # "parameters need no gradients to evaluate" dropped as noise: the training loop's requires_grad = True is still
    # in force, so every validation forward builds a graph
    variant("val_keeps_requires_grad", "missing_no_grad",
            ("        for p in crnn.parameters():\n            p.requires_grad = False\n\n", "")),
    # the CRNN's three BatchNorm layers normalize validation batches with their own statistics and move the
    # running statistics
    variant("val_without_eval", "eval_in_train_mode", ("        net.eval()\n", "")),
    # train() hoisted out of the iteration loop to the start of the run: after the first val() the CRNN trains
    # in eval mode (BatchNorm on running statistics)
    variant("train_switch_once_before_the_epochs", "missing_train_switch",
            ("                crnn.train()\n", ""),
            ("    with watch(crnn):\n", "    crnn.train()\n    with watch(crnn):\n")),
    # the averager "modernized": .data dropped, so the training averager sums graph-attached losses until the
    # next display resets it
    variant("averager_without_data", "graph_attached_logging",
            ("            count = v.data.numel()\n            v = v.data.sum()\n",
             "            count = v.numel()\n            v = v.sum()\n")),
    # gradient clipping added (a common CRNN fix for exploding LSTM gradients) between zero_grad and backward
    variant("clip_before_backward", "clip_before_backward",
            ("        crnn.zero_grad()\n        cost.backward()\n",
             "        crnn.zero_grad()\n        torch.nn.utils.clip_grad_norm_(crnn.parameters(), 5)\n"
             "        cost.backward()\n")),
    # a StepLR halving the lr every epoch, stepped in trainBatch after each update
    variant("step_lr_stepped_every_batch", "epoch_schedule_per_batch",
            ("        optimizer = torch.optim.RMSprop(crnn.parameters(), lr=opt.lr)\n",
             "        optimizer = torch.optim.RMSprop(crnn.parameters(), lr=opt.lr)\n"
             "    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)\n"),
            ("        optimizer.step()\n        return cost\n",
             "        optimizer.step()\n        scheduler.step()\n        return cost\n")),
    variant("validation_lmdb_is_the_training_lmdb", "data_leakage",
            ("    test_dataset = lmdbDataset(root=opt.valRoot,", "    test_dataset = lmdbDataset(root=opt.trainRoot,")),
    # not a bug: val() under torch.no_grad() instead of switching requires_grad off; the same numbers, no graph
    variant("val_under_no_grad_instead", set(),
            ("        for p in crnn.parameters():\n            p.requires_grad = False\n\n", ""),
            ("            preds = crnn(image)\n",
             "            with torch.no_grad():\n                preds = crnn(image)\n")),
    # the fix of the real bug: each batch's loss weighted by its size, the accuracy over the images seen
    variant("val_weighted_by_batch_size", set(),
            ("            loss_avg.add(cost)\n\n            _, preds",
             "            loss_avg.add(cost.expand(batch_size))\n\n            _, preds"),
            ("        accuracy = n_correct / float(max_iter * opt.batchSize)\n",
             "        accuracy = n_correct / float(min(max_iter * opt.batchSize, len(dataset)))\n"),
            fixes={"mean_of_batch_means"}),
]
