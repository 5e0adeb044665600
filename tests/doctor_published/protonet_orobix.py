# Mirrors: orobix/Prototypical-Networks-for-Few-shot-Learning-PyTorch, src/train.py (init_seed, init_dataset,
# init_sampler, init_dataloader, init_protonet, init_optim, init_lr_scheduler, save_list_to_file, train, test, main)
# with src/prototypical_loss.py (euclidean_dist, prototypical_loss), src/prototypical_batch_sampler.py
# (PrototypicalBatchSampler), src/protonet.py (conv_block, ProtoNet), src/omniglot_dataset.py (OmniglotDataset,
# index_classes, load_img) and src/parser_util.py (get_parser's defaults), snapshot at commit df89808d7086
# (2022-04-05); src/train.py last changed in 5e18a5e5b369 (2019-06-10), src/prototypical_loss.py in 58b72c38ffa2
# (2021-02-03).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: `python train.py` at the parser's defaults (shrunk below): Omniglot split by character (Vinyals' train / val /
# test lists), each character's four rotations rot000/rot090/rot180/rot270 counted as four classes, images inverted
# (1 - x) and 1 x H x W; one DataLoader per split driven by a PrototypicalBatchSampler (per episode: classes_per_it
# random classes, num_support + num_query random images of each, the episode's indices shuffled; len() is the number
# of episodes), the training sampler sized with the *_tr options, validation and test with the *_val options; the
# ProtoNet encoder (four conv3x3-BatchNorm-ReLU-MaxPool2 blocks, flattened); Adam (lr 1e-3) and a StepLR (gamma
# 0.5, step_size in epochs) built in main; train(): per epoch `iter(tr_dataloader)`, model.train() once, per episode
# optim.zero_grad(), the forward of the whole episode, prototypical_loss (moves output and target to the CPU, takes
# each class's first n_support images of the episode as its support and the rest as queries, prototypes as support
# means, squared euclidean distances, log_softmax(-dists), the loss as the mean NLL of the queries, the accuracy as
# argmax == class), backward, step, loss.item() and acc.item() appended to lists over the whole run; the epoch's
# averages as np.mean of the last `iterations` entries; lr_scheduler.step() once per epoch after the batch loop and
# BEFORE validation; validation with model.eval() and NO torch.no_grad(), its lists and averages like training's;
# best_model.pth written when the validation accuracy ties or beats the best, `best_state = model.state_dict()` (a
# live reference, not a copy: the published "best model" test really tests the last weights), last_model.pth and the
# four lists saved at the end; main then runs test() (10 passes over the test loader, no model.eval() call, no
# no_grad) with the last model, loads best_state and runs test() again.
# REAL: missing_no_grad: the validation pass in train() (and test(), twice in main) runs every forward with autograd
# on (the published has no torch.no_grad anywhere); every episode builds a graph that is freed unused. The
# validation means are exact (every episode has classes_per_it_val * (num_support_val + num_query_val) images), so
# no mean_of_batch_means. (best_state aliasing the live parameters is a real bug, but not one of the registry's.)
# Shrunk: synthetic 16x16 "characters" (a random stroke pattern per character, each of 10 drawers a noisy copy
# shifted by up to a pixel; not 28x28 images of 20 drawers), 8 training characters (32 classes), 3 validation and 3
# test characters (12 classes each); ProtoNet of 8 channels (not 64); 4 epochs (not 100), 6 episodes per epoch (not
# 100), StepLR every 2 epochs (not 20), 3 passes over the test loader in test() (not 10); episodes of 6 classes x (3
# support + 3 query) for training (not 60 x (5 + 5)) and 5 classes x (3 support + 5 query) for validation and test
# (not 5 x (5 + 15)); files go to memory; no tqdm, no CUDA. Validation accuracy (5-way) rises from about 32% to 52%.
# Added: `with watch(model):` around train and the two test passes.
import io
from types import SimpleNamespace

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset


def get_parser_defaults():
    """parser_util.get_parser()'s options, shrunk (see the header)."""
    return SimpleNamespace(dataset_root="../dataset", experiment_root="../output", epochs=4, learning_rate=0.001,
                           lr_scheduler_step=2, lr_scheduler_gamma=0.5, iterations=6, classes_per_it_tr=6,
                           num_support_tr=3, num_query_tr=3, classes_per_it_val=5, num_support_val=3,
                           num_query_val=5, manual_seed=7, cuda=False)


FILES = {}      # the experiment_root folder, in memory


def open_for_writing(path):
    FILES[path] = io.BytesIO()
    return FILES[path]


# --- omniglot_dataset.py -------------------------------------------------------------------------------

SPLITS = {"train": range(0, 8), "val": range(8, 11), "test": range(11, 14)}   # characters of Vinyals' lists
ROTATIONS = ("rot000", "rot090", "rot180", "rot270")


def draw_character(char, drawer):
    """One drawer's 16x16 copy of a character: its strokes, shifted by a pixel or so, with a few flipped pixels."""
    g = torch.Generator().manual_seed(1000 + char)
    strokes = (torch.rand(16, 16, generator=g) < 0.25).float()
    strokes = torch.maximum(strokes, strokes.roll(1, dims=int(torch.randint(0, 2, (1,), generator=g))))
    g.manual_seed(5000 + 31 * char + drawer)
    shift = int(torch.randint(-1, 2, (1,), generator=g))
    image = strokes.roll(shift, dims=drawer % 2)
    flips = torch.rand(16, 16, generator=g) < 0.04
    return torch.where(flips, 1.0 - image, image)


def load_img(character, drawer, rot):
    x = draw_character(character, drawer)
    x = torch.rot90(x, k=ROTATIONS.index(rot), dims=(0, 1))
    x = 1.0 - x                                  # the published inverts the PNG (white background -> 0)
    return x.contiguous().view(1, 16, 16)


def index_classes(items):
    idx = {}
    for character, _, rot in items:
        if (character, rot) not in idx:
            idx[(character, rot)] = len(idx)
    print(f"== Dataset: Found {len(idx)} classes")
    return idx


class OmniglotDataset(Dataset):
    def __init__(self, mode="train", root="../dataset"):
        super().__init__()
        if mode == "trainval":
            characters = list(SPLITS["train"]) + list(SPLITS["val"])
        else:
            characters = list(SPLITS[mode])
        self.all_items = [(c, drawer, rot) for c in characters for rot in ROTATIONS for drawer in range(10)]
        self.idx_classes = index_classes(self.all_items)
        self.y = tuple(self.idx_classes[(c, rot)] for c, _, rot in self.all_items)
        self.x = [load_img(c, drawer, rot) for c, drawer, rot in self.all_items]

    def __getitem__(self, idx):
        return self.x[idx], self.y[idx]

    def __len__(self):
        return len(self.all_items)


# --- prototypical_batch_sampler.py ------------------------------------------------------------------------

class PrototypicalBatchSampler:
    """Yields `iterations` episodes: classes_per_it random classes, num_samples random indices of each, shuffled."""

    def __init__(self, labels, classes_per_it, num_samples, iterations):
        self.labels = labels
        self.classes_per_it = classes_per_it
        self.sample_per_class = num_samples
        self.iterations = iterations
        self.classes, self.counts = np.unique(self.labels, return_counts=True)
        self.classes = torch.LongTensor(self.classes)
        self.indexes = [torch.LongTensor([i for i, label in enumerate(self.labels) if label == c])
                        for c in self.classes.tolist()]
        self.numel_per_class = torch.LongTensor([len(ix) for ix in self.indexes])

    def __iter__(self):
        spc = self.sample_per_class
        cpi = self.classes_per_it
        for it in range(self.iterations):
            batch_size = spc * cpi
            batch = torch.LongTensor(batch_size)
            c_idxs = torch.randperm(len(self.classes))[:cpi]
            for i, label_idx in enumerate(c_idxs.tolist()):
                s = slice(i * spc, (i + 1) * spc)
                sample_idxs = torch.randperm(int(self.numel_per_class[label_idx]))[:spc]
                batch[s] = self.indexes[label_idx][sample_idxs]
            batch = batch[torch.randperm(len(batch))]
            yield batch

    def __len__(self):
        return self.iterations


# --- protonet.py -------------------------------------------------------------------------------------------

def conv_block(in_channels, out_channels):
    return nn.Sequential(nn.Conv2d(in_channels, out_channels, 3, padding=1), nn.BatchNorm2d(out_channels),
                         nn.ReLU(), nn.MaxPool2d(2))


class ProtoNet(nn.Module):
    def __init__(self, x_dim=1, hid_dim=8, z_dim=8):
        super().__init__()
        self.encoder = nn.Sequential(conv_block(x_dim, hid_dim), conv_block(hid_dim, hid_dim),
                                     conv_block(hid_dim, hid_dim), conv_block(hid_dim, z_dim))

    def forward(self, x):
        x = self.encoder(x)
        return x.view(x.size(0), -1)


# --- prototypical_loss.py -----------------------------------------------------------------------------------

def euclidean_dist(x, y):
    n, m, d = x.size(0), y.size(0), x.size(1)
    if d != y.size(1):
        raise Exception
    return torch.pow(x.unsqueeze(1).expand(n, m, d) - y.unsqueeze(0).expand(n, m, d), 2).sum(2)


def prototypical_loss(input, target, n_support):
    target_cpu = target.to("cpu")
    input_cpu = input.to("cpu")

    def supp_idxs(c):
        return target_cpu.eq(c).nonzero()[:n_support].squeeze(1)

    classes = torch.unique(target_cpu)
    n_classes = len(classes)
    n_query = target_cpu.eq(classes[0].item()).sum().item() - n_support     # the same for every class
    support_idxs = list(map(supp_idxs, classes))
    prototypes = torch.stack([input_cpu[idx_list].mean(0) for idx_list in support_idxs])
    query_idxs = torch.stack([target_cpu.eq(c).nonzero()[n_support:] for c in classes]).view(-1)
    query_samples = input.to("cpu")[query_idxs]
    dists = euclidean_dist(query_samples, prototypes)
    log_p_y = F.log_softmax(-dists, dim=1).view(n_classes, n_query, -1)
    target_inds = torch.arange(0, n_classes).view(n_classes, 1, 1).expand(n_classes, n_query, 1).long()
    loss_val = -log_p_y.gather(2, target_inds).squeeze().view(-1).mean()
    _, y_hat = log_p_y.max(2)
    acc_val = y_hat.eq(target_inds.squeeze(2)).float().mean()
    return loss_val, acc_val


loss_fn = prototypical_loss


# --- train.py ------------------------------------------------------------------------------------------------

def init_seed(opt):
    np.random.seed(opt.manual_seed)
    torch.manual_seed(opt.manual_seed)


def init_dataset(opt, mode):
    dataset = OmniglotDataset(mode=mode, root=opt.dataset_root)
    n_classes = len(np.unique(dataset.y))
    if n_classes < opt.classes_per_it_tr or n_classes < opt.classes_per_it_val:
        raise Exception("There are not enough classes in the dataset in order to satisfy the chosen classes_per_it.")
    return dataset


def init_sampler(opt, labels, mode):
    if "train" in mode:
        classes_per_it = opt.classes_per_it_tr
        num_samples = opt.num_support_tr + opt.num_query_tr
    else:
        classes_per_it = opt.classes_per_it_val
        num_samples = opt.num_support_val + opt.num_query_val
    return PrototypicalBatchSampler(labels=labels, classes_per_it=classes_per_it, num_samples=num_samples,
                                    iterations=opt.iterations)


def init_dataloader(opt, mode):
    dataset = init_dataset(opt, mode)
    sampler = init_sampler(opt, dataset.y, mode)
    return DataLoader(dataset, batch_sampler=sampler)


def init_protonet(opt):
    return ProtoNet().to("cpu")


def init_optim(opt, model):
    return torch.optim.Adam(params=model.parameters(), lr=opt.learning_rate)


def init_lr_scheduler(opt, optim):
    return torch.optim.lr_scheduler.StepLR(optimizer=optim, gamma=opt.lr_scheduler_gamma,
                                           step_size=opt.lr_scheduler_step)


def save_list_to_file(path, thelist):
    f = open_for_writing(path)
    for item in thelist:
        f.write(f"{item}\n".encode())


def train(opt, tr_dataloader, model, optim, lr_scheduler, val_dataloader=None):
    device = "cpu"

    if val_dataloader is None:
        best_state = None
    train_loss = []
    train_acc = []
    val_loss = []
    val_acc = []
    best_acc = 0

    best_model_path = opt.experiment_root + "/best_model.pth"
    last_model_path = opt.experiment_root + "/last_model.pth"

    for epoch in range(opt.epochs):
        print(f"=== Epoch: {epoch} ===")
        tr_iter = iter(tr_dataloader)
        model.train()
        for batch in tr_iter:
            optim.zero_grad()
            x, y = batch
            x, y = x.to(device), y.to(device)
            model_output = model(x)
            loss, acc = loss_fn(model_output, target=y, n_support=opt.num_support_tr)
            loss.backward()
            optim.step()
            train_loss.append(loss.item())
            train_acc.append(acc.item())
        avg_loss = np.mean(train_loss[-opt.iterations:])
        avg_acc = np.mean(train_acc[-opt.iterations:])
        print(f"Avg Train Loss: {avg_loss}, Avg Train Acc: {avg_acc}")
        lr_scheduler.step()
        if val_dataloader is None:
            continue
        val_iter = iter(val_dataloader)
        model.eval()
        for batch in val_iter:
            x, y = batch
            x, y = x.to(device), y.to(device)
            model_output = model(x)
            loss, acc = loss_fn(model_output, target=y, n_support=opt.num_support_val)
            val_loss.append(loss.item())
            val_acc.append(acc.item())
        avg_loss = np.mean(val_loss[-opt.iterations:])
        avg_acc = np.mean(val_acc[-opt.iterations:])
        postfix = " (Best)" if avg_acc >= best_acc else f" (Best: {best_acc})"
        print(f"Avg Val Loss: {avg_loss}, Avg Val Acc: {avg_acc}{postfix}")
        if avg_acc >= best_acc:
            torch.save(model.state_dict(), open_for_writing(best_model_path))
            best_acc = avg_acc
            best_state = model.state_dict()

    torch.save(model.state_dict(), open_for_writing(last_model_path))

    for name in ["train_loss", "train_acc", "val_loss", "val_acc"]:
        save_list_to_file(opt.experiment_root + "/" + name + ".txt", locals()[name])

    return best_state, best_acc, train_loss, train_acc, val_loss, val_acc


def test(opt, test_dataloader, model):
    device = "cpu"
    avg_acc = list()
    for epoch in range(3):
        test_iter = iter(test_dataloader)
        for batch in test_iter:
            x, y = batch
            x, y = x.to(device), y.to(device)
            model_output = model(x)
            _, acc = loss_fn(model_output, target=y, n_support=opt.num_support_val)
            avg_acc.append(acc.item())
    avg_acc = np.mean(avg_acc)
    print(f"Test Acc: {avg_acc}")
    return avg_acc


def main(watch):
    options = get_parser_defaults()
    init_seed(options)

    tr_dataloader = init_dataloader(options, "train")
    val_dataloader = init_dataloader(options, "val")
    test_dataloader = init_dataloader(options, "test")

    model = init_protonet(options)
    optim = init_optim(options, model)
    lr_scheduler = init_lr_scheduler(options, optim)
    with watch(model):
        res = train(opt=options, tr_dataloader=tr_dataloader, val_dataloader=val_dataloader, model=model,
                    optim=optim, lr_scheduler=lr_scheduler)
        best_state, best_acc, train_loss, train_acc, val_loss, val_acc = res
        print("Testing with last model..")
        test(opt=options, test_dataloader=test_dataloader, model=model)

        model.load_state_dict(best_state)
        print("Testing with best model..")
        test(opt=options, test_dataloader=test_dataloader, model=model)
    return [model, optim]


from tests.doctor_published import variant  # noqa: E402

REAL = {"missing_no_grad"}
VARIANTS = [
    # StepLR (step_size 2, counted in epochs) stepped after every episode instead of after the epoch's batch loop:
    # the lr halves every 2 episodes, 1e-3 down to 1e-3 / 2^16 by the end
    variant("step_lr_stepped_every_episode", "epoch_schedule_per_batch",
            ("            optim.step()\n", "            optim.step()\n            lr_scheduler.step()\n"),
            ("        print(f\"Avg Train Loss: {avg_loss}, Avg Train Acc: {avg_acc}\")\n        lr_scheduler.step()\n",
             "        print(f\"Avg Train Loss: {avg_loss}, Avg Train Acc: {avg_acc}\")\n")),
    # the epoch's lr_scheduler.step() moved to the top of the epoch, before any optim.step(): epoch 0 already trains
    # at epoch 1's lr
    variant("step_lr_stepped_at_epoch_start", "scheduler_before_optimizer",
            ("        print(f\"=== Epoch: {epoch} ===\")\n",
             "        print(f\"=== Epoch: {epoch} ===\")\n        lr_scheduler.step()\n"),
            ("        print(f\"Avg Train Loss: {avg_loss}, Avg Train Acc: {avg_acc}\")\n        lr_scheduler.step()\n",
             "        print(f\"Avg Train Loss: {avg_loss}, Avg Train Acc: {avg_acc}\")\n")),
    # model.eval() dropped before validation: BatchNorm normalises each validation episode with its own statistics
    # and its running buffers move with validation data
    variant("validation_in_train_mode", "eval_in_train_mode", ("        model.eval()\n", "")),
    # model.train() hoisted above the epoch loop: from epoch 1 on the encoder trains in eval mode (BatchNorm on its
    # frozen running statistics)
    variant("train_switch_hoisted_out_of_the_epochs", "missing_train_switch",
            ("        tr_iter = iter(tr_dataloader)\n        model.train()\n",
             "        tr_iter = iter(tr_dataloader)\n"),
            ("    for epoch in range(opt.epochs):\n", "    model.train()\n    for epoch in range(opt.epochs):\n")),
    # optim.zero_grad() dropped: Adam follows the sum of every episode's gradient so far
    variant("no_zero_grad", "missing_zero_grad", ("            optim.zero_grad()\n", "")),
    # the training losses kept as tensors (converted only for the epoch's print): each keeps its episode's graph
    variant("train_losses_kept_as_tensors", "graph_attached_logging",
            ("            train_loss.append(loss.item())\n", "            train_loss.append(loss)\n"),
            ("        avg_loss = np.mean(train_loss[-opt.iterations:])\n",
             "        avg_loss = np.mean([l.item() for l in train_loss[-opt.iterations:]])\n"),
            ("        save_list_to_file(opt.experiment_root + \"/\" + name + \".txt\", locals()[name])\n",
             "        save_list_to_file(opt.experiment_root + \"/\" + name + \".txt\",\n"
             "                          [float(v) for v in locals()[name]])\n")),
    # validation episodes drawn from the training split's characters (as if Vinyals' val list were missing): the
    # validation accuracy measures seen classes
    variant("validation_episodes_from_the_training_split", "data_leakage",
            ("    val_dataloader = init_dataloader(options, \"val\")\n",
             "    val_dataloader = init_dataloader(options, \"train\")\n")),
    # not a bug: the validation pass wrapped in torch.no_grad() and test() decorated with it (fixes the published
    # missing no_grad)
    variant("validation_and_test_under_no_grad", set(),
            ("def test(opt, test_dataloader, model):\n", "@torch.no_grad()\ndef test(opt, test_dataloader, model):\n"),
            ("        for batch in val_iter:\n"
             "            x, y = batch\n"
             "            x, y = x.to(device), y.to(device)\n"
             "            model_output = model(x)\n"
             "            loss, acc = loss_fn(model_output, target=y, n_support=opt.num_support_val)\n"
             "            val_loss.append(loss.item())\n"
             "            val_acc.append(acc.item())\n",
             "        with torch.no_grad():\n"
             "            for batch in val_iter:\n"
             "                x, y = batch\n"
             "                x, y = x.to(device), y.to(device)\n"
             "                model_output = model(x)\n"
             "                loss, acc = loss_fn(model_output, target=y, n_support=opt.num_support_val)\n"
             "                val_loss.append(loss.item())\n"
             "                val_acc.append(acc.item())\n"),
            fixes={"missing_no_grad"}),
    # not a bug: the gradients cleared right after the step instead of before the forward (none exist before the
    # first episode)
    variant("zero_grad_after_the_step", set(),
            ("            optim.zero_grad()\n            x, y = batch\n", "            x, y = batch\n"),
            ("            optim.step()\n", "            optim.step()\n            optim.zero_grad()\n")),
]
