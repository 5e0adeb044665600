# Mirrors: HiLab-git/SSL4MIS, code/train_fully_supervised_2D.py (patients_to_slices, train, the __main__ block) with
# code/val_2D.py (calculate_metric_percase, test_single_volume), code/utils/losses.py (DiceLoss),
# code/networks/unet.py (ConvBlock, DownBlock, UpBlock, Encoder, Decoder, UNet) and code/dataloaders/dataset.py
# (BaseDataSets, random_rot_flip, random_rotate, RandomGenerator), snapshot at commit 06df6047a59a (2025-06-06);
# train_fully_supervised_2D.py and val_2D.py last changed in f5b9b38c7fa9 (2020-11-27). From medpy and scipy, which
# they import: metric.binary.dc and hd95 (surface distances with connectivity 1) and ndimage.zoom / rotate with
# order 0, written here to their documented behaviour.
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: the first line of train_acdc_unet_semi_seg.sh, `python train_fully_supervised_2D.py --root_path ../data/ACDC
# --exp ACDC/Fully_Supervised --num_classes 4 --labeled_num 7`: ACDC cardiac MRI with 4 classes (background, right
# ventricle, myocardium, left ventricle); training on the 2D slices of the first labeled_num patients (the number of
# slices looked up in patients_to_slices' table, its `elif "Prostate":` always true), each slice (variable size)
# augmented by RandomGenerator (half the time a random 90-degree rotation and flip, else a random rotation of
# -20..19 degrees, nearest-neighbour) and zoomed to the patch size with order 0; a shuffled training loader of dict
# batches {"image": [B, 1, P, P], "label": [B, P, P] uint8, "idx"} that keeps its short last batch; validation on
# whole volumes of held-out patients, batch_size 1, no transform; the UNet of networks/unet.py (ConvBlock = conv3x3,
# BatchNorm, LeakyReLU, Dropout, conv3x3, BatchNorm, LeakyReLU; four max-pool DownBlocks with dropout 0.05, 0.1, 0.2,
# 0.3, 0.5; UpBlocks with ConvTranspose2d (bilinear False) and no dropout; a 3x3 output conv); model.train() once
# before the optimizer; SGD (lr 0.01, momentum 0.9, weight decay 1e-4); CrossEntropyLoss on the logits plus
# DiceLoss on their softmax (one-hot labels, per-class 1 - dice averaged), loss = 0.5 * (dice + ce); per iteration:
# the forward, the two losses, zero_grad, backward, step, then the poly lr `base_lr * (1 - iter_num /
# max_iterations) ** 0.9` written into the param groups (computed from iter_num before it is incremented, so the
# first two updates both run at base_lr), iter_num += 1, the lr and the three losses to the SummaryWriter (the loss
# tensors themselves: tensorboardX turns each into a float at once), loss.item() logged, every 20 iterations the
# second image of the batch, its argmax prediction and its label to the writer; every 200 iterations validation:
# model.eval(), test_single_volume per volume (each slice zoomed to the patch size, net.eval() again, under
# torch.no_grad() the argmax of the softmax, zoomed back), dice and hd95 per foreground class summed over volumes and
# divided by len(db_val), their class means as performance, the model saved to iter_*_dice_*.pth and
# unet_best_model.pth when it beats the best, then model.train(); every 3000 iterations a checkpoint; stop at
# max_iterations (max_epoch = max_iterations // len(trainloader) + 1); the seeds of random, numpy and torch set in
# __main__.
# The published loop has none of the registry's bugs: validation is in eval mode under no_grad, the per-volume
# means are the intended metric (every volume counts once, batch_size 1), the lr is written by hand after each step.
# Shrunk: synthetic cardiac volumes (per patient a left-ventricle disk inside a myocardium ring and a right-ventricle
# ellipse beside them, shrinking from base to apex, class intensities plus noise; 18x20 to 26x24 slices, not about
# 216x256); 10 training patients of 2 or 3 slices (labeled_num 7 -> 18 slices, not 136) and 3 validation volumes of 4
# slices (not 20 of about 10); patch 32x32 (not 256x256); UNet feature channels (4, 8, 8, 16, 16) (not (16, 32, 64,
# 128, 256)); batch 4 (not 24: 5 batches per epoch, the last of 2); max_iterations 30 (not 30000), validation every
# 10 (not 200), images every 5 (not 20), checkpoints every 15 (not 3000) iterations; base_lr 0.05 (not 0.01: in 30
# iterations 0.01 leaves the validation dice at 0); files and the SummaryWriter go to memory, logging to print; no
# workers, no cudnn flags, the CPU instead of CUDA; train() takes `watch` and returns the model and optimizer (not
# "Training Finished!"). The loss falls from 1.22 to 0.36, the mean validation dice rises from 0 (iteration 10) to
# 0.30 (iteration 30).
# Added: `with watch(model):` around the epochs (inside train(), where the model is made).
import io
import math
import random
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.nn.modules.loss import CrossEntropyLoss
from torch.utils.data import DataLoader, Dataset


def parse_args():
    """The parser's defaults with the shell script's flags, shrunk (see the header)."""
    return SimpleNamespace(root_path="../data/ACDC", exp="ACDC/Fully_Supervised", model="unet", num_classes=4,
                           max_iterations=30, batch_size=4, deterministic=1, base_lr=0.05, patch_size=[32, 32],
                           seed=1337, labeled_num=7)


# --- stand-ins: scipy.ndimage (order 0), medpy.metric.binary, tensorboardX, the snapshot folder ----------------

def zoom(array, factors, order=0):
    """ndimage.zoom with order 0: nearest neighbour, the corners of input and output aligned."""
    out_shape = [int(round(n * f)) for n, f in zip(array.shape, factors)]
    index = [np.round(np.arange(o) * (n - 1) / max(o - 1, 1)).astype(int) for n, o in zip(array.shape, out_shape)]
    return array[np.ix_(*index)]


def rotate(array, angle, order=0, reshape=False):
    """ndimage.rotate about the centre, nearest neighbour, same shape, zeros outside."""
    h, w = array.shape
    t = math.radians(angle)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    cy, cx = (h - 1) / 2, (w - 1) / 2
    sy = np.round(cy + (yy - cy) * math.cos(t) - (xx - cx) * math.sin(t)).astype(int)
    sx = np.round(cx + (yy - cy) * math.sin(t) + (xx - cx) * math.cos(t)).astype(int)
    inside = (sy >= 0) & (sy < h) & (sx >= 0) & (sx < w)
    out = np.zeros_like(array)
    out[inside] = array[sy[inside], sx[inside]]
    return out


def _border(mask):
    padded = np.pad(mask, 1)
    eroded = padded.copy()
    for axis in range(mask.ndim):
        eroded &= np.roll(padded, 1, axis) & np.roll(padded, -1, axis)
    return mask ^ eroded[tuple(slice(1, -1) for _ in range(mask.ndim))]


def _surface_distances(result, reference):
    a, b = np.argwhere(_border(result)), np.argwhere(_border(reference))
    if len(a) == 0 or len(b) == 0:
        raise RuntimeError("The first or second supplied array does not contain any binary object.")
    return np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)).min(1)


class metric:
    class binary:
        @staticmethod
        def dc(result, reference):
            result, reference = result.astype(bool), reference.astype(bool)
            size = result.sum() + reference.sum()
            return 2.0 * (result & reference).sum() / size if size else 0.0

        @staticmethod
        def hd95(result, reference):
            result, reference = result.astype(bool), reference.astype(bool)
            return np.percentile(np.hstack((_surface_distances(result, reference),
                                            _surface_distances(reference, result))), 95)


class SummaryWriter:
    def __init__(self, logdir):
        self.scalars, self.images = {}, {}

    def add_scalar(self, tag, value, step):
        if torch.is_tensor(value):
            value = value.detach().cpu().numpy()      # tensorboardX's make_np: the value now, never the tensor
        self.scalars.setdefault(tag, []).append((step, float(value)))

    def add_image(self, tag, img, step):
        self.images[tag] = (step, tuple(img.shape))

    def close(self):
        pass


SNAPSHOT = {}       # the snapshot folder's .pth files, in memory


def snapshot_file(path):
    SNAPSHOT[path] = io.BytesIO()
    return SNAPSHOT[path]


# --- a stand-in ACDC: the h5 files of ../data/ACDC ---------------------------------------------------------

def cardiac_volume(patient, depth, shape):
    """One patient's short-axis stack: LV disk in a myocardium ring, RV ellipse to its left; smaller toward apex."""
    g = np.random.default_rng(100 + patient)
    h, w = shape
    cy, cx = h / 2 + g.uniform(-1.5, 1.5), w / 2 + g.uniform(0, 2)
    scale = g.uniform(0.9, 1.15)
    intensity = np.array([0.15, 0.75, 0.35, 0.85]) + g.uniform(-0.05, 0.05, 4)
    yy, xx = np.mgrid[0:h, 0:w]
    images, labels = [], []
    for z in range(depth):
        r_lv = scale * (3.6 - 0.5 * z)
        d = np.hypot(yy - cy, xx - cx)
        label = np.zeros((h, w), np.uint8)
        label[d < r_lv + 1.8] = 2
        label[d < r_lv] = 3
        d_rv = np.hypot((yy - cy) / 1.6, (xx - (cx - r_lv - 3.2)) / 1.0)
        label[(d_rv < scale * (2.6 - 0.3 * z)) & (label == 0)] = 1
        image = intensity[label] + 0.12 * g.standard_normal((h, w))
        images.append(image.astype(np.float32))
        labels.append(label)
    return np.stack(images), np.stack(labels)


def build_acdc():
    files = {"train_slices.list": [], "val.list": []}
    shapes = [(20, 22), (22, 20), (24, 24), (18, 20), (22, 24), (26, 24), (20, 20), (24, 22), (22, 22), (20, 24)]
    for p, (depth, shape) in enumerate(zip([3, 2, 3, 2, 3, 2, 3, 3, 2, 3], shapes)):
        image, label = cardiac_volume(p, depth, shape)
        for s in range(depth):
            case = f"patient{p + 1:03d}_frame01_slice_{s}"
            files["train_slices.list"].append(case)
            files[f"data/slices/{case}.h5"] = {"image": image[s], "label": label[s]}
    for p, shape in zip(range(90, 93), [(22, 24), (24, 20), (20, 22)]):
        case = f"patient{p + 1:03d}_frame01"
        files["val.list"].append(case)
        image, label = cardiac_volume(p, 4, shape)
        files[f"data/{case}.h5"] = {"image": image, "label": label}
    return files


ACDC = build_acdc()


# --- dataloaders/dataset.py ------------------------------------------------------------------------------

class BaseDataSets(Dataset):
    def __init__(self, base_dir=None, split="train", num=None, transform=None):
        self._base_dir = base_dir
        self.split = split
        self.transform = transform
        if self.split == "train":
            self.sample_list = list(ACDC["train_slices.list"])
        elif self.split == "val":
            self.sample_list = list(ACDC["val.list"])
        if num is not None and self.split == "train":
            self.sample_list = self.sample_list[:num]
        print(f"total {len(self.sample_list)} samples")

    def __len__(self):
        return len(self.sample_list)

    def __getitem__(self, idx):
        case = self.sample_list[idx]
        if self.split == "train":
            h5f = ACDC[f"data/slices/{case}.h5"]
        else:
            h5f = ACDC[f"data/{case}.h5"]
        image = h5f["image"][:]
        label = h5f["label"][:]
        sample = {"image": image, "label": label}
        if self.split == "train":
            sample = self.transform(sample)
        sample["idx"] = idx
        return sample


def random_rot_flip(image, label):
    k = np.random.randint(0, 4)
    image = np.rot90(image, k)
    label = np.rot90(label, k)
    axis = np.random.randint(0, 2)
    image = np.flip(image, axis=axis).copy()
    label = np.flip(label, axis=axis).copy()
    return image, label


def random_rotate(image, label):
    angle = np.random.randint(-20, 20)
    image = rotate(image, angle, order=0, reshape=False)
    label = rotate(label, angle, order=0, reshape=False)
    return image, label


class RandomGenerator:
    def __init__(self, output_size):
        self.output_size = output_size

    def __call__(self, sample):
        image, label = sample["image"], sample["label"]
        if random.random() < 0.5:
            image, label = random_rot_flip(image, label)
        else:
            image, label = random_rotate(image, label)
        x, y = image.shape
        image = zoom(image, (self.output_size[0] / x, self.output_size[1] / y), order=0)
        label = zoom(label, (self.output_size[0] / x, self.output_size[1] / y), order=0)
        image = torch.from_numpy(image.astype(np.float32)).unsqueeze(0)
        label = torch.from_numpy(label.astype(np.uint8))
        return {"image": image, "label": label}


# --- networks/unet.py ------------------------------------------------------------------------------------------

class ConvBlock(nn.Module):
    def __init__(self, in_channels, out_channels, dropout_p):
        super().__init__()
        self.conv_conv = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1), nn.BatchNorm2d(out_channels),
            nn.LeakyReLU(), nn.Dropout(dropout_p),
            nn.Conv2d(out_channels, out_channels, kernel_size=3, padding=1), nn.BatchNorm2d(out_channels),
            nn.LeakyReLU())

    def forward(self, x):
        return self.conv_conv(x)


class DownBlock(nn.Module):
    def __init__(self, in_channels, out_channels, dropout_p):
        super().__init__()
        self.maxpool_conv = nn.Sequential(nn.MaxPool2d(2), ConvBlock(in_channels, out_channels, dropout_p))

    def forward(self, x):
        return self.maxpool_conv(x)


class UpBlock(nn.Module):
    def __init__(self, in_channels1, in_channels2, out_channels, dropout_p):
        super().__init__()
        self.up = nn.ConvTranspose2d(in_channels1, in_channels2, kernel_size=2, stride=2)
        self.conv = ConvBlock(in_channels2 * 2, out_channels, dropout_p)

    def forward(self, x1, x2):
        return self.conv(torch.cat([x2, self.up(x1)], dim=1))


class Encoder(nn.Module):
    def __init__(self, params):
        super().__init__()
        ft, dp = params["feature_chns"], params["dropout"]
        self.in_conv = ConvBlock(params["in_chns"], ft[0], dp[0])
        self.down1 = DownBlock(ft[0], ft[1], dp[1])
        self.down2 = DownBlock(ft[1], ft[2], dp[2])
        self.down3 = DownBlock(ft[2], ft[3], dp[3])
        self.down4 = DownBlock(ft[3], ft[4], dp[4])

    def forward(self, x):
        x0 = self.in_conv(x)
        x1 = self.down1(x0)
        x2 = self.down2(x1)
        x3 = self.down3(x2)
        x4 = self.down4(x3)
        return [x0, x1, x2, x3, x4]


class Decoder(nn.Module):
    def __init__(self, params):
        super().__init__()
        ft = params["feature_chns"]
        self.up1 = UpBlock(ft[4], ft[3], ft[3], dropout_p=0.0)
        self.up2 = UpBlock(ft[3], ft[2], ft[2], dropout_p=0.0)
        self.up3 = UpBlock(ft[2], ft[1], ft[1], dropout_p=0.0)
        self.up4 = UpBlock(ft[1], ft[0], ft[0], dropout_p=0.0)
        self.out_conv = nn.Conv2d(ft[0], params["class_num"], kernel_size=3, padding=1)

    def forward(self, feature):
        x0, x1, x2, x3, x4 = feature
        x = self.up1(x4, x3)
        x = self.up2(x, x2)
        x = self.up3(x, x1)
        x = self.up4(x, x0)
        return self.out_conv(x)


class UNet(nn.Module):
    def __init__(self, in_chns, class_num):
        super().__init__()
        params = {"in_chns": in_chns, "feature_chns": [4, 8, 8, 16, 16], "dropout": [0.05, 0.1, 0.2, 0.3, 0.5],
                  "class_num": class_num, "bilinear": False, "acti_func": "relu"}
        self.encoder = Encoder(params)
        self.decoder = Decoder(params)

    def forward(self, x):
        return self.decoder(self.encoder(x))


def net_factory(net_type="unet", in_chns=1, class_num=3):
    return UNet(in_chns=in_chns, class_num=class_num)


# --- utils/losses.py -----------------------------------------------------------------------------------------

class DiceLoss(nn.Module):
    def __init__(self, n_classes):
        super().__init__()
        self.n_classes = n_classes

    def _one_hot_encoder(self, input_tensor):
        tensor_list = []
        for i in range(self.n_classes):
            tensor_list.append(input_tensor == i * torch.ones_like(input_tensor))
        return torch.cat(tensor_list, dim=1).float()

    def _dice_loss(self, score, target):
        target = target.float()
        smooth = 1e-5
        intersect = torch.sum(score * target)
        y_sum = torch.sum(target * target)
        z_sum = torch.sum(score * score)
        return 1 - (2 * intersect + smooth) / (z_sum + y_sum + smooth)

    def forward(self, inputs, target, weight=None, softmax=False):
        if softmax:
            inputs = torch.softmax(inputs, dim=1)
        target = self._one_hot_encoder(target)
        if weight is None:
            weight = [1] * self.n_classes
        assert inputs.size() == target.size(), "predict & target shape do not match"
        class_wise_dice = []
        loss = 0.0
        for i in range(0, self.n_classes):
            dice = self._dice_loss(inputs[:, i], target[:, i])
            class_wise_dice.append(1.0 - dice.item())
            loss += dice * weight[i]
        return loss / self.n_classes


# --- val_2D.py -------------------------------------------------------------------------------------------------

def calculate_metric_percase(pred, gt):
    pred[pred > 0] = 1
    gt[gt > 0] = 1
    if pred.sum() > 0:
        dice = metric.binary.dc(pred, gt)
        hd95 = metric.binary.hd95(pred, gt)
        return dice, hd95
    else:
        return 0, 0


def test_single_volume(image, label, net, classes, patch_size=[32, 32]):
    image, label = image.squeeze(0).cpu().detach().numpy(), label.squeeze(0).cpu().detach().numpy()
    prediction = np.zeros_like(label)
    for ind in range(image.shape[0]):
        slice = image[ind, :, :]
        x, y = slice.shape[0], slice.shape[1]
        slice = zoom(slice, (patch_size[0] / x, patch_size[1] / y), order=0)
        input = torch.from_numpy(slice).unsqueeze(0).unsqueeze(0).float()
        net.eval()
        with torch.no_grad():
            out = torch.argmax(torch.softmax(net(input), dim=1), dim=1).squeeze(0)
            out = out.cpu().detach().numpy()
            pred = zoom(out, (x / patch_size[0], y / patch_size[1]), order=0)
            prediction[ind] = pred
    metric_list = []
    for i in range(1, classes):
        metric_list.append(calculate_metric_percase(prediction == i, label == i))
    return metric_list


# --- train_fully_supervised_2D.py ------------------------------------------------------------------------------

def patients_to_slices(dataset, patiens_num):
    ref_dict = None
    if "ACDC" in dataset:
        ref_dict = {"3": 8, "7": 18, "10": 26}
    elif "Prostate":
        ref_dict = {"2": 5, "4": 10}
    else:
        print("Error")
    return ref_dict[str(patiens_num)]


def train(args, snapshot_path, watch):
    base_lr = args.base_lr
    num_classes = args.num_classes
    batch_size = args.batch_size
    max_iterations = args.max_iterations

    labeled_slice = patients_to_slices(args.root_path, args.labeled_num)

    model = net_factory(net_type=args.model, in_chns=1, class_num=num_classes)
    db_train = BaseDataSets(base_dir=args.root_path, split="train", num=labeled_slice,
                            transform=RandomGenerator(args.patch_size))
    db_val = BaseDataSets(base_dir=args.root_path, split="val")

    def worker_init_fn(worker_id):
        random.seed(args.seed + worker_id)

    trainloader = DataLoader(db_train, batch_size=batch_size, shuffle=True, num_workers=0,
                             worker_init_fn=worker_init_fn)
    valloader = DataLoader(db_val, batch_size=1, shuffle=False, num_workers=0)

    model.train()

    optimizer = optim.SGD(model.parameters(), lr=base_lr, momentum=0.9, weight_decay=0.0001)
    ce_loss = CrossEntropyLoss()
    dice_loss = DiceLoss(num_classes)

    writer = SummaryWriter(snapshot_path + "/log")
    print(f"{len(trainloader)} iterations per epoch")

    iter_num = 0
    max_epoch = max_iterations // len(trainloader) + 1
    best_performance = 0.0
    iterator = range(max_epoch)
    with watch(model):
        for epoch_num in iterator:
            for i_batch, sampled_batch in enumerate(trainloader):

                volume_batch, label_batch = sampled_batch["image"], sampled_batch["label"]
                volume_batch, label_batch = volume_batch.to("cpu"), label_batch.to("cpu")

                outputs = model(volume_batch)
                outputs_soft = torch.softmax(outputs, dim=1)

                loss_ce = ce_loss(outputs, label_batch[:].long())
                loss_dice = dice_loss(outputs_soft, label_batch.unsqueeze(1))
                loss = 0.5 * (loss_dice + loss_ce)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()

                lr_ = base_lr * (1.0 - iter_num / max_iterations) ** 0.9
                for param_group in optimizer.param_groups:
                    param_group["lr"] = lr_

                iter_num = iter_num + 1
                writer.add_scalar("info/lr", lr_, iter_num)
                writer.add_scalar("info/total_loss", loss, iter_num)
                writer.add_scalar("info/loss_ce", loss_ce, iter_num)
                writer.add_scalar("info/loss_dice", loss_dice, iter_num)

                print("iteration %d : loss : %f, loss_ce: %f, loss_dice: %f" %
                      (iter_num, loss.item(), loss_ce.item(), loss_dice.item()))

                if iter_num % 5 == 0:
                    image = volume_batch[1, 0:1, :, :]
                    writer.add_image("train/Image", image, iter_num)
                    outputs = torch.argmax(torch.softmax(outputs, dim=1), dim=1, keepdim=True)
                    writer.add_image("train/Prediction", outputs[1, ...] * 50, iter_num)
                    labs = label_batch[1, ...].unsqueeze(0) * 50
                    writer.add_image("train/GroundTruth", labs, iter_num)

                if iter_num > 0 and iter_num % 10 == 0:
                    model.eval()
                    metric_list = 0.0
                    for i_batch, sampled_batch in enumerate(valloader):
                        metric_i = test_single_volume(sampled_batch["image"], sampled_batch["label"], model,
                                                      classes=num_classes)
                        metric_list += np.array(metric_i)
                    metric_list = metric_list / len(db_val)
                    for class_i in range(num_classes - 1):
                        writer.add_scalar(f"info/val_{class_i + 1}_dice", metric_list[class_i, 0], iter_num)
                        writer.add_scalar(f"info/val_{class_i + 1}_hd95", metric_list[class_i, 1], iter_num)

                    performance = np.mean(metric_list, axis=0)[0]

                    mean_hd95 = np.mean(metric_list, axis=0)[1]
                    writer.add_scalar("info/val_mean_dice", performance, iter_num)
                    writer.add_scalar("info/val_mean_hd95", mean_hd95, iter_num)

                    if performance > best_performance:
                        best_performance = performance
                        save_mode_path = f"{snapshot_path}/iter_{iter_num}_dice_{round(best_performance, 4)}.pth"
                        save_best = f"{snapshot_path}/{args.model}_best_model.pth"
                        torch.save(model.state_dict(), snapshot_file(save_mode_path))
                        torch.save(model.state_dict(), snapshot_file(save_best))

                    print("iteration %d : mean_dice : %f mean_hd95 : %f" % (iter_num, performance, mean_hd95))
                    model.train()

                if iter_num % 15 == 0:
                    save_mode_path = f"{snapshot_path}/iter_{iter_num}.pth"
                    torch.save(model.state_dict(), snapshot_file(save_mode_path))
                    print(f"save model to {save_mode_path}")

                if iter_num >= max_iterations:
                    break
            if iter_num >= max_iterations:
                break
    writer.close()
    return [model, optimizer]


def main(watch):
    args = parse_args()
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    snapshot_path = f"../model/{args.exp}_{args.labeled_num}_labeled/{args.model}"
    return train(args, snapshot_path, watch)


from tests.doctor_published import dedent, variant  # noqa: E402

REAL = set()
NO_GRAD_BODY = """\
            out = torch.argmax(torch.softmax(net(input), dim=1), dim=1).squeeze(0)
            out = out.cpu().detach().numpy()
            pred = zoom(out, (x / patch_size[0], y / patch_size[1]), order=0)
            prediction[ind] = pred
"""
VARIANTS = [
    # the cross-entropy fed the softmax already computed for the dice loss (outputs_soft is right there)
    variant("cross_entropy_on_outputs_soft", "softmax_before_cross_entropy",
            ("                loss_ce = ce_loss(outputs, label_batch[:].long())\n",
             "                loss_ce = ce_loss(outputs_soft, label_batch[:].long())\n")),
    # zero_grad moved between backward and step: every .grad is None at the step, so nothing moves
    variant("zero_grad_between_backward_and_step", "zero_grad_after_backward",
            ("                optimizer.zero_grad()\n                loss.backward()\n                optimizer.step()\n",
             "                loss.backward()\n                optimizer.zero_grad()\n                optimizer.step()\n")),
    # model.train() dropped after validation: from iteration 11 on the UNet trains in eval mode (dropout off,
    # BatchNorm on running statistics)
    variant("train_switch_dropped_after_validation", "missing_train_switch",
            ("                    model.train()\n", "")),
    # both eval switches dropped (the loop's model.eval() and test_single_volume's net.eval()): validation slices go
    # through dropout and batch statistics of a single slice, and move BatchNorm's running buffers
    variant("validation_in_train_mode", "eval_in_train_mode",
            ("                    model.eval()\n", ""), ("        net.eval()\n", "")),
    # test_single_volume without torch.no_grad(): every validation slice's forward builds a graph
    variant("test_single_volume_without_no_grad", "missing_no_grad", ("        with torch.no_grad():\n" + NO_GRAD_BODY, dedent(NO_GRAD_BODY))),
    # the hand-written poly lr replaced by torch's PolynomialLR sized in epochs (total_iters=max_epoch) but stepped
    # where the lr was written, after every iteration: the lr reaches 0 after 7 of the 30 iterations
    variant("polynomial_lr_in_epochs_stepped_per_iteration", "epoch_schedule_per_batch",
            ("    max_epoch = max_iterations // len(trainloader) + 1\n",
             "    max_epoch = max_iterations // len(trainloader) + 1\n"
             "    scheduler = optim.lr_scheduler.PolynomialLR(optimizer, total_iters=max_epoch, power=0.9)\n"),
            ("                lr_ = base_lr * (1.0 - iter_num / max_iterations) ** 0.9\n"
             "                for param_group in optimizer.param_groups:\n"
             "                    param_group[\"lr\"] = lr_\n",
             "                scheduler.step()\n"
             "                lr_ = scheduler.get_last_lr()[0]\n")),
    # a fresh output layer (for fine-tuning from another dataset's checkpoint) put on after the optimizer was built
    variant("fresh_out_conv_after_the_optimizer", "head_after_optimizer",
            ("    dice_loss = DiceLoss(num_classes)\n",
             "    dice_loss = DiceLoss(num_classes)\n"
             "    model.decoder.out_conv = nn.Conv2d(model.decoder.out_conv.in_channels, num_classes, kernel_size=3,\n"
             "                                       padding=1)   # a fresh head for ACDC's 4 classes\n")),
    # not a bug: the gradients cleared at the top of the iteration, before the forward
    variant("zero_grad_before_the_forward", set(),
            ("                optimizer.zero_grad()\n                loss.backward()\n",
             "                loss.backward()\n"),
            ("                outputs = model(volume_batch)\n",
             "                optimizer.zero_grad()\n                outputs = model(volume_batch)\n")),
    # not a bug: the volume sums divided by len(valloader): with batch_size 1 it equals len(db_val)
    variant("metrics_divided_by_the_loader_length", set(),
            ("                    metric_list = metric_list / len(db_val)\n",
             "                    metric_list = metric_list / len(valloader)\n")),
]
