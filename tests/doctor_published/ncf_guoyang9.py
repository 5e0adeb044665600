# Mirrors: guoyang9/NCF, main.py (the dataset, model and optimizer setup and the training loop) with model.py
# (NCF), data_utils.py (load_all, NCFData), evaluate.py (hit, ndcg, metrics) and config.py, snapshot at
# commit 89ff06ffcd2b (2019-06-19), the last change of main.py, model.py and config.py; data_utils.py and evaluate.py
# last changed in 2019-04.
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# The README's command: `python main.py --batch_size=256 --lr=0.001 --factor_num=16` with config.model
# 'NeuMF-end' (GMF and MLP branches trained together from scratch) on ml-1m.
# Kept: load_all reading the training pairs ("user\titem" lines) and the test file (one line per user: "(user,
# held-out item)" then its 99 sampled negatives), user_num and item_num from the training pairs' maxima, the
# training pairs as a dok_matrix; NCFData: every epoch ng_sample() draws num_ng=4 negatives per training pair
# (rejecting pairs in the training matrix), positives labelled 1 and negatives 0, the test set (every candidate
# labelled 0, the labels unused) in file order; a shuffled training loader at batch_size and an unshuffled test
# loader at test_num_ng + 1 = 100, so that each test batch is exactly one user's held-out item and its 99
# negatives; NCF (GMF embeddings multiplied, MLP embeddings of size factor_num * 2^(num_layers - 1) concatenated
# through num_layers of Dropout-Linear-ReLU halving the width, both concatenated into one logit; normal(0.01)
# embeddings, Xavier MLP weights, a Kaiming-uniform predict layer, zero biases); BCEWithLogitsLoss; Adam (SGD only
# for 'NeuMF-pre'); per epoch model.train(), ng_sample(), per batch label.float(), model.zero_grad(), forward, loss,
# backward, step, count += 1 (the tensorboard line commented out, as published); then model.eval() and
# evaluate.metrics: per test batch the forward (no torch.no_grad()), topk of the logits, the recommended items by
# torch.take, HR and NDCG of the held-out item (the batch's first), their means over users; the epoch's time and
# HR/NDCG printed; `if HR > best_hr` the best values kept and the whole model saved with torch.save(model, ...).
# Real bug, as published: evaluate.metrics runs its forwards without torch.no_grad().
# Not kept: the .cuda() calls, CUDA_VISIBLE_DEVICES and cudnn.benchmark (CPU here); 'NeuMF-pre' loading the
# pretrained GMF and MLP models (config.model is 'NeuMF-end'); tensorboardX (its writer is commented out).
# Shrunk: a synthetic ml-1m stand-in of 40 users and up to 150 items (a low-rank taste model: each user's 8 to 12
# best-scoring items are its ratings, one of them held out for the test file, 99 negatives drawn from the items
# the user never rated), written as the two files' lines and parsed like them (no pandas; a dict-backed
# dok_matrix, no scipy); factor_num 8 (not 16), 4 epochs (not 20), lr 0.01 (not 0.001: 4 epochs of 7 updates);
# batch_size 256 as published (1,790 training examples an epoch: 7 batches, the last of 254); no loader workers;
# the checkpoint in memory.
# HR@10 (0.18 untrained) reaches about 0.4 over the 4 epochs.
# Added: `with watch(model):` around the epochs.
import io
import time
from types import SimpleNamespace

import numpy as np
import torch
from torch import nn
from torch.utils import data


def parse_args():
    return SimpleNamespace(lr=0.01, dropout=0.0, batch_size=256, epochs=4, top_k=10, factor_num=8, num_layers=3,
                           num_ng=4, test_num_ng=99, out=True, gpu="0")


# --- config.py ---------------------------------------------------------------------------------------------------

config = SimpleNamespace(dataset="ml-1m", model="NeuMF-end", main_path="NCF-Data/")
config.train_rating = config.main_path + f"{config.dataset}.train.rating"
config.test_negative = config.main_path + f"{config.dataset}.test.negative"
config.model_path = "./models/"


# --- data_utils.py -----------------------------------------------------------------------------------------------

def synthetic_files(users=40, items=150, seed=3):
    """The two files of the ml-1m split, as lines: "user\\titem" training ratings, and per user "(user,item)"
    (the held-out rating) followed by 99 negatives the user never rated."""
    g = np.random.RandomState(seed)
    taste, traits = g.normal(size=(users, 4)), g.normal(size=(items, 4))
    scores = taste @ traits.T + 0.5 * g.normal(size=(users, items))
    train_lines, negative_lines = [], []
    for u in range(users):
        rated = np.argsort(-scores[u])[:g.randint(8, 13)]
        held_out = int(rated[g.randint(len(rated))])
        train_items = [int(i) for i in rated if i != held_out]
        train_lines += [f"{u}\t{i}" for i in train_items]
        unrated = np.setdiff1d(np.arange(items), rated)
        negatives = g.choice(unrated, 99, replace=False)
        negative_lines.append(f"({u},{held_out})\t" + "\t".join(str(int(j)) for j in negatives) + "\n")
    return train_lines, negative_lines


class dok_matrix:
    """scipy.sparse.dok_matrix stand-in: entries set by (row, col), membership tested by (row, col)."""

    def __init__(self, shape, dtype=np.float32):
        self.shape, self.dtype, self._entries = shape, dtype, {}

    def __setitem__(self, key, value):
        self._entries[tuple(key)] = value

    def __contains__(self, key):
        return tuple(key) in self._entries


def load_all(test_num=100):
    """Loads the training pairs and the test file once, to save time in each epoch."""
    train_lines, negative_lines = synthetic_files()
    train_data = [[int(field) for field in line.split("\t")[:2]] for line in train_lines]

    user_num = max(x[0] for x in train_data) + 1
    item_num = max(x[1] for x in train_data) + 1

    train_mat = dok_matrix((user_num, item_num), dtype=np.float32)
    for x in train_data:
        train_mat[x[0], x[1]] = 1.0

    test_data = []
    fd = iter(negative_lines)
    line = next(fd, "")
    while line is not None and line != "":
        arr = line.split("\t")
        u = eval(arr[0])[0]
        test_data.append([u, eval(arr[0])[1]])
        for i in arr[1:]:
            test_data.append([u, int(i)])
        line = next(fd, "")
    return train_data, test_data, user_num, item_num, train_mat


class NCFData(data.Dataset):
    def __init__(self, features, num_item, train_mat=None, num_ng=0, is_training=None):
        super().__init__()
        self.features_ps = features
        self.num_item = num_item
        self.train_mat = train_mat
        self.num_ng = num_ng
        self.is_training = is_training
        self.labels = [0 for _ in range(len(features))]

    def ng_sample(self):
        assert self.is_training, "no need to sampling when testing"
        self.features_ng = []
        for x in self.features_ps:
            u = x[0]
            for t in range(self.num_ng):
                j = np.random.randint(self.num_item)
                while (u, j) in self.train_mat:
                    j = np.random.randint(self.num_item)
                self.features_ng.append([u, j])
        labels_ps = [1 for _ in range(len(self.features_ps))]
        labels_ng = [0 for _ in range(len(self.features_ng))]
        self.features_fill = self.features_ps + self.features_ng
        self.labels_fill = labels_ps + labels_ng

    def __len__(self):
        return (self.num_ng + 1) * len(self.labels)

    def __getitem__(self, idx):
        features = self.features_fill if self.is_training else self.features_ps
        labels = self.labels_fill if self.is_training else self.labels
        return features[idx][0], features[idx][1], labels[idx]


# --- model.py ----------------------------------------------------------------------------------------------------

class NCF(nn.Module):
    def __init__(self, user_num, item_num, factor_num, num_layers, dropout, model, GMF_model=None, MLP_model=None):
        super().__init__()
        self.dropout = dropout
        self.model = model
        self.GMF_model = GMF_model
        self.MLP_model = MLP_model

        self.embed_user_GMF = nn.Embedding(user_num, factor_num)
        self.embed_item_GMF = nn.Embedding(item_num, factor_num)
        self.embed_user_MLP = nn.Embedding(user_num, factor_num * (2 ** (num_layers - 1)))
        self.embed_item_MLP = nn.Embedding(item_num, factor_num * (2 ** (num_layers - 1)))

        MLP_modules = []
        for i in range(num_layers):
            input_size = factor_num * (2 ** (num_layers - i))
            MLP_modules.append(nn.Dropout(p=self.dropout))
            MLP_modules.append(nn.Linear(input_size, input_size // 2))
            MLP_modules.append(nn.ReLU())
        self.MLP_layers = nn.Sequential(*MLP_modules)

        predict_size = factor_num if self.model in ["MLP", "GMF"] else factor_num * 2
        self.predict_layer = nn.Linear(predict_size, 1)
        self._init_weight_()

    def _init_weight_(self):
        nn.init.normal_(self.embed_user_GMF.weight, std=0.01)
        nn.init.normal_(self.embed_user_MLP.weight, std=0.01)
        nn.init.normal_(self.embed_item_GMF.weight, std=0.01)
        nn.init.normal_(self.embed_item_MLP.weight, std=0.01)
        for m in self.MLP_layers:
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
        nn.init.kaiming_uniform_(self.predict_layer.weight, a=1, nonlinearity="sigmoid")
        for m in self.modules():
            if isinstance(m, nn.Linear) and m.bias is not None:
                m.bias.data.zero_()

    def forward(self, user, item):
        if not self.model == "MLP":
            output_GMF = self.embed_user_GMF(user) * self.embed_item_GMF(item)
        if not self.model == "GMF":
            interaction = torch.cat((self.embed_user_MLP(user), self.embed_item_MLP(item)), -1)
            output_MLP = self.MLP_layers(interaction)
        if self.model == "GMF":
            concat = output_GMF
        elif self.model == "MLP":
            concat = output_MLP
        else:
            concat = torch.cat((output_GMF, output_MLP), -1)
        prediction = self.predict_layer(concat)
        return prediction.view(-1)


# --- evaluate.py -------------------------------------------------------------------------------------------------

def hit(gt_item, pred_items):
    if gt_item in pred_items:
        return 1
    return 0


def ndcg(gt_item, pred_items):
    if gt_item in pred_items:
        index = pred_items.index(gt_item)
        return np.reciprocal(np.log2(index + 2))
    return 0


def metrics(model, test_loader, top_k):
    HR, NDCG = [], []

    for user, item, label in test_loader:
        predictions = model(user, item)
        _, indices = torch.topk(predictions, top_k)
        recommends = torch.take(item, indices).cpu().numpy().tolist()

        gt_item = item[0].item()
        HR.append(hit(gt_item, recommends))
        NDCG.append(ndcg(gt_item, recommends))

    return np.mean(HR), np.mean(NDCG)


# --- main.py -----------------------------------------------------------------------------------------------------

def main(watch):
    args = parse_args()
    np.random.seed(0)
    torch.manual_seed(0)
    checkpoints = {}

    ############################## PREPARE DATASET ##########################
    train_data, test_data, user_num, item_num, train_mat = load_all()

    train_dataset = NCFData(train_data, item_num, train_mat, args.num_ng, True)
    test_dataset = NCFData(test_data, item_num, train_mat, 0, False)
    train_loader = data.DataLoader(train_dataset, batch_size=args.batch_size, shuffle=True, num_workers=0)
    test_loader = data.DataLoader(test_dataset, batch_size=args.test_num_ng + 1, shuffle=False, num_workers=0)

    ########################### CREATE MODEL #################################
    GMF_model = None
    MLP_model = None
    model = NCF(user_num, item_num, args.factor_num, args.num_layers, args.dropout, config.model, GMF_model,
                MLP_model)
    loss_function = nn.BCEWithLogitsLoss()

    if config.model == "NeuMF-pre":
        optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    else:
        optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    ########################### TRAINING #####################################
    count, best_hr = 0, 0
    with watch(model):
        for epoch in range(args.epochs):
            model.train()  # Enable dropout (if have).
            start_time = time.time()
            train_loader.dataset.ng_sample()

            for user, item, label in train_loader:
                label = label.float()

                model.zero_grad()
                prediction = model(user, item)
                loss = loss_function(prediction, label)
                loss.backward()
                optimizer.step()
                # writer.add_scalar('data/loss', loss.item(), count)
                count += 1

            model.eval()
            HR, NDCG = metrics(model, test_loader, args.top_k)

            elapsed_time = time.time() - start_time
            print("The time elapse of epoch {:03d}".format(epoch) + " is: " +
                  time.strftime("%H: %M: %S", time.gmtime(elapsed_time)))
            print("HR: {:.3f}\tNDCG: {:.3f}".format(np.mean(HR), np.mean(NDCG)))

            if HR > best_hr:
                best_hr, best_ndcg, best_epoch = HR, NDCG, epoch
                if args.out:
                    checkpoints["{}{}.pth".format(config.model_path, config.model)] = buffer = io.BytesIO()
                    torch.save(model, buffer)

    print("End. Best epoch {:03d}: HR = {:.3f}, NDCG = {:.3f}".format(best_epoch, best_hr, best_ndcg))
    return [model, optimizer]


from tests.doctor_published import variant  # noqa: E402

# evaluate.metrics: every test batch's forward builds a graph (no torch.no_grad(); model.eval() only)
REAL = {"missing_no_grad"}
METRICS_BODY = """\
    for user, item, label in test_loader:
        predictions = model(user, item)
        _, indices = torch.topk(predictions, top_k)
        recommends = torch.take(item, indices).cpu().numpy().tolist()

        gt_item = item[0].item()
        HR.append(hit(gt_item, recommends))
        NDCG.append(ndcg(gt_item, recommends))
"""
VARIANTS = [
    variant("no_zero_grad", "missing_zero_grad", ("                model.zero_grad()\n", "")),
    variant("zero_grad_between_backward_and_step", "zero_grad_after_backward",
            ("                model.zero_grad()\n", ""),
            ("                loss.backward()\n",
             "                loss.backward()\n                model.zero_grad()\n")),
    # --dropout 0.2 (the option exists for this) and "eval() is for BatchNorm, there is none": HR and NDCG are
    # measured with dropout on
    variant("dropout_on_evaluated_in_train_mode", "eval_in_train_mode",
            ("lr=0.01, dropout=0.0,", "lr=0.01, dropout=0.2,"),
            ("            model.eval()\n", "")),
    # --dropout 0.2, and model.train() thought redundant (a module starts in train mode): from epoch 2 on the
    # model trains in the eval mode the first evaluation left
    variant("dropout_on_train_switch_dropped", "missing_train_switch",
            ("lr=0.01, dropout=0.0,", "lr=0.01, dropout=0.2,"),
            ("            model.train()  # Enable dropout (if have).\n", "")),
    # the commented tensorboard line replaced by a history kept for a plot: every loss tensor, with its graph
    variant("loss_history_of_tensors", "graph_attached_logging",
            ("    count, best_hr = 0, 0\n", "    count, best_hr = 0, 0\n    loss_history = []\n"),
            ("                # writer.add_scalar('data/loss', loss.item(), count)\n",
             "                loss_history.append(loss)\n")),
    # probabilities fed to BCEWithLogitsLoss, which applies its own sigmoid (the binary form of softmax before
    # cross_entropy)
    variant("sigmoid_before_bce_with_logits", "softmax_before_cross_entropy",
            ("                prediction = model(user, item)\n",
             "                prediction = torch.sigmoid(model(user, item))\n")),
    # an epoch StepLR stepped at the start of each epoch, the pre-1.1 habit: epoch 0 trains at the lr meant
    # for epoch 1
    variant("step_lr_stepped_at_epoch_start", "scheduler_before_optimizer",
            ("        optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)\n",
             "        optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)\n"
             "    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)\n"),
            ("            start_time = time.time()\n",
             "            start_time = time.time()\n            scheduler.step()\n")),
    # the leave-one-out split forgets to take the held-out rating out of the training file: every test batch's
    # positive is a training pair
    variant("held_out_rating_left_in_training", "data_leakage",
            ("        train_items = [int(i) for i in rated if i != held_out]\n",
             "        train_items = [int(i) for i in rated]\n")),
    # the fix of the real bug: metrics under torch.no_grad()
    variant("metrics_under_no_grad", set(),
            (METRICS_BODY, "    with torch.no_grad():\n" + "".join("    " + line if line.strip() else line
                                                            for line in METRICS_BODY.splitlines(keepends=True))),
            fixes={"missing_no_grad"}),
    # not a bug: ranking by sigmoid probabilities instead of logits (monotonic: the same top-k)
    variant("rank_by_probability", set(),
            ("        _, indices = torch.topk(predictions, top_k)\n",
             "        _, indices = torch.topk(torch.sigmoid(predictions), top_k)\n")),
]
