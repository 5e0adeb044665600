# Mirrors: zhouhaoyi/Informer2020, exp/exp_informer.py (Exp_Informer: _get_data, _select_optimizer,
# _select_criterion, vali, train, _process_one_batch) with utils/tools.py (adjust_learning_rate, EarlyStopping,
# StandardScaler), data/data_loader.py (Dataset_ETT_hour) and models/ (Informer: DataEmbedding, EncoderLayer,
# ConvLayer, DecoderLayer), snapshot at commit 29f2a739226a (2025-06-20); exp/exp_informer.py last changed in
# 7fcb5ccf1158 (2021-05-07).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: an hourly multivariate series (features 'M') split by fixed borders into train/val/test, the val and test
# splits starting seq_len steps early so their first inputs reach back into the previous split; a scaler fitted on
# the training rows only; sliding windows (seq_x, seq_y = label_len known steps + pred_len targets, their
# time-feature marks) returned as float64 arrays; loaders with drop_last everywhere (train and val shuffled, test
# not); an encoder-decoder Informer (conv token embedding + positional + time-feature embedding with dropout,
# encoder attention layers with a feed-forward and a distilling Conv1d/BatchNorm/ELU/max-pool layer between
# them, a decoder with causal self-attention and cross-attention, a linear projection) fed a decoder input of the
# label_len known steps then zeros; Adam, MSE; per epoch: model.train(), per batch zero_grad, forward, loss,
# loss.item() into a list, a progress line every few batches, backward, step (the GradScaler path kept for
# use_amp, off by default); the epoch's train loss np.average of the list; vali() on the validation and on the
# test loader: model.eval(), per batch the loss of the detached outputs appended, np.average over the batches,
# model.train(); early stopping on the validation loss (patience 3) that keeps the best weights, which are loaded
# back after training; adjust_learning_rate('type1') after each epoch, halving the lr from the third epoch on.
# Shrunk: 3 channels and 104 hours (56 train, 24 val, 24 test rows; ETTh1's 12/4/4 months), seq_len 16, label_len
# 8, pred_len 4 (96/48/24), batches of 8 (4 train, 2 val, 2 test batches), d_model 16, 2 heads, d_ff 32, full
# attention for ProbSparse attention, the query/key/value projections in one weight, the feed-forward's 1x1
# convolutions as Linear layers, lr 1e-3 (not 1e-4) so that 3 epochs (not 6) learn, a progress line every 4
# batches (not 100); the best weights kept in memory (not a checkpoint file); one of the args.itr=2 runs;
# main_informer.py's exp.test() afterwards is not run.
# Added: `with watch(exp.model):` around exp.train.
# Real bug, in vali(): no torch.no_grad(): every validation and test batch (each epoch) builds its graph and saves
# its activations (the loss is taken on detached outputs, so nothing outlives the batch) (missing_no_grad).
# The averages of batch means are exact: drop_last=True leaves only full batches.
import copy
import time
from types import SimpleNamespace

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset


def hourly_series(n=104, channels=3, seed=0):
    """ETTh1's columns' stand-in: daily and weekly cycles, a drift and AR(1) noise; the hours' time marks."""
    rng = np.random.default_rng(seed)
    hours = np.arange(n)
    noise = np.zeros((n, channels))
    for t in range(1, n):
        noise[t] = 0.7 * noise[t - 1] + rng.normal(0, 0.3, channels)
    phase = rng.uniform(0, 2 * np.pi, channels)
    data = (2 * np.sin(2 * np.pi * hours[:, None] / 24 + phase) + np.sin(2 * np.pi * hours[:, None] / 168)
            + 0.01 * hours[:, None] + noise + 5)
    stamps = np.datetime64("2016-07-01T00") + hours.astype("timedelta64[h]")
    days = stamps.astype("datetime64[D]")
    marks = np.stack([(stamps - days).astype(int) / 23.0 - 0.5,
                      ((days.astype(int) + 3) % 7) / 6.0 - 0.5,
                      (days - days.astype("datetime64[M]")).astype(int) / 30.0 - 0.5,
                      (days - days.astype("datetime64[Y]")).astype(int) / 365.0 - 0.5], axis=1)
    return data, marks


class StandardScaler:
    def fit(self, data):
        self.mean, self.std = data.mean(0), data.std(0)

    def transform(self, data):
        return (data - self.mean) / self.std


class Dataset_ETT_hour(Dataset):
    def __init__(self, flag="train", size=None):
        self.seq_len, self.label_len, self.pred_len = size
        self.set_type = {"train": 0, "val": 1, "test": 2}[flag]
        self.__read_data__()

    def __read_data__(self):
        self.scaler = StandardScaler()
        df_data, stamps = hourly_series()
        border1s = [0, 56 - self.seq_len, 56 + 24 - self.seq_len]
        border2s = [56, 56 + 24, 56 + 48]
        border1, border2 = border1s[self.set_type], border2s[self.set_type]
        self.scaler.fit(df_data[border1s[0]:border2s[0]])
        data = self.scaler.transform(df_data)
        self.data_x = data[border1:border2]
        self.data_y = data[border1:border2]
        self.data_stamp = stamps[border1:border2]

    def __getitem__(self, index):
        s_end = index + self.seq_len
        r_begin = s_end - self.label_len
        r_end = r_begin + self.label_len + self.pred_len
        return (self.data_x[index:s_end], self.data_y[r_begin:r_end], self.data_stamp[index:s_end],
                self.data_stamp[r_begin:r_end])

    def __len__(self):
        return len(self.data_x) - self.seq_len - self.pred_len + 1


class DataEmbedding(nn.Module):
    def __init__(self, c_in, d_model, dropout, marks=4, max_len=64):
        super().__init__()
        self.token = nn.Conv1d(c_in, d_model, 3, padding=1, padding_mode="circular")
        nn.init.kaiming_normal_(self.token.weight, mode="fan_in", nonlinearity="leaky_relu")
        position = torch.arange(max_len).float()[:, None]
        freqs = torch.exp(torch.arange(0, d_model, 2).float() * -(np.log(10000.0) / d_model))
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(position * freqs), torch.cos(position * freqs)
        self.register_buffer("pe", pe[None])
        self.temporal = nn.Linear(marks, d_model, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, x_mark):
        x = self.token(x.permute(0, 2, 1)).transpose(1, 2) + self.pe[:, :x.size(1)] + self.temporal(x_mark)
        return self.dropout(x)


class AttentionLayer(nn.Module):
    def __init__(self, d_model, n_heads, dropout, causal=False):
        super().__init__()
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.n_heads, self.dropout, self.causal = n_heads, dropout, causal

    def forward(self, queries, keys, values):
        b, lq, d = queries.shape
        w, bias = self.qkv.weight.chunk(3), self.qkv.bias.chunk(3)
        q, k, v = (F.linear(x, w[j], bias[j]).view(b, x.size(1), self.n_heads, -1).transpose(1, 2)
                   for j, x in enumerate((queries, keys, values)))
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0,
                                           is_causal=self.causal)
        return self.out(y.transpose(1, 2).reshape(b, lq, d))


class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout):
        super().__init__()
        self.attention = AttentionLayer(d_model, n_heads, dropout)
        self.conv1, self.conv2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        x = self.norm1(x + self.dropout(self.attention(x, x, x)))
        y = self.dropout(F.gelu(self.conv1(x)))
        y = self.dropout(self.conv2(y))
        return self.norm2(x + y)


class ConvLayer(nn.Module):
    def __init__(self, c_in):
        super().__init__()
        self.downConv = nn.Conv1d(c_in, c_in, 3, padding=1, padding_mode="circular")
        self.norm = nn.BatchNorm1d(c_in)
        self.maxPool = nn.MaxPool1d(kernel_size=3, stride=2, padding=1)

    def forward(self, x):
        return self.maxPool(F.elu(self.norm(self.downConv(x.permute(0, 2, 1))))).transpose(1, 2)


class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout):
        super().__init__()
        self.self_attention = AttentionLayer(d_model, n_heads, dropout, causal=True)
        self.cross_attention = AttentionLayer(d_model, n_heads, dropout)
        self.conv1, self.conv2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, cross):
        x = self.norm1(x + self.dropout(self.self_attention(x, x, x)))
        x = self.norm2(x + self.dropout(self.cross_attention(x, cross, cross)))
        y = self.dropout(F.gelu(self.conv1(x)))
        y = self.dropout(self.conv2(y))
        return self.norm3(x + y)


class Informer(nn.Module):
    def __init__(self, enc_in, dec_in, c_out, out_len, d_model=16, n_heads=2, e_layers=2, d_ff=32, dropout=0.05):
        super().__init__()
        self.pred_len = out_len
        self.enc_embedding = DataEmbedding(enc_in, d_model, dropout)
        self.dec_embedding = DataEmbedding(dec_in, d_model, dropout)
        self.attn_layers = nn.ModuleList([EncoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(e_layers)])
        self.conv_layers = nn.ModuleList([ConvLayer(d_model) for _ in range(e_layers - 1)])
        self.enc_norm = nn.LayerNorm(d_model)
        self.dec_layer = DecoderLayer(d_model, n_heads, d_ff, dropout)
        self.dec_norm = nn.LayerNorm(d_model)
        self.projection = nn.Linear(d_model, c_out)

    def forward(self, x_enc, x_mark_enc, x_dec, x_mark_dec):
        enc_out = self.enc_embedding(x_enc, x_mark_enc)
        for attn_layer, conv_layer in zip(self.attn_layers, self.conv_layers):
            enc_out = conv_layer(attn_layer(enc_out))
        enc_out = self.enc_norm(self.attn_layers[-1](enc_out))
        dec_out = self.dec_norm(self.dec_layer(self.dec_embedding(x_dec, x_mark_dec), enc_out))
        return self.projection(dec_out)[:, -self.pred_len:, :]


def adjust_learning_rate(optimizer, epoch, args):
    if args.lradj == "type1":
        lr_adjust = {epoch: args.learning_rate * (0.5 ** ((epoch - 1) // 1))}
    if epoch in lr_adjust:
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr_adjust[epoch]
        print(f"Updating learning rate to {lr_adjust[epoch]}")


class EarlyStopping:
    def __init__(self, patience=7, verbose=False, delta=0):
        self.patience, self.verbose, self.delta = patience, verbose, delta
        self.counter, self.best_score, self.early_stop, self.val_loss_min = 0, None, False, np.inf

    def __call__(self, val_loss, model, path):
        score = -val_loss
        if self.best_score is None:
            self.best_score = score
            self.save_checkpoint(val_loss, model, path)
        elif score < self.best_score + self.delta:
            self.counter += 1
            print(f"EarlyStopping counter: {self.counter} out of {self.patience}")
            if self.counter >= self.patience:
                self.early_stop = True
        else:
            self.best_score = score
            self.save_checkpoint(val_loss, model, path)
            self.counter = 0

    def save_checkpoint(self, val_loss, model, path):
        if self.verbose:
            print(f"Validation loss decreased ({self.val_loss_min:.6f} --> {val_loss:.6f}).  Saving model ...")
        path["checkpoint.pth"] = copy.deepcopy(model.state_dict())
        self.val_loss_min = val_loss


class Exp_Informer:
    def __init__(self, args):
        self.args = args
        self.model = self._build_model()

    def _build_model(self):
        return Informer(self.args.enc_in, self.args.dec_in, self.args.c_out, self.args.pred_len,
                        self.args.d_model, self.args.n_heads, self.args.e_layers, self.args.d_ff,
                        self.args.dropout).float()

    def _get_data(self, flag):
        args = self.args
        if flag == "test":
            shuffle_flag = False; drop_last = True; batch_size = args.batch_size  # noqa: E702
        else:
            shuffle_flag = True; drop_last = True; batch_size = args.batch_size  # noqa: E702
        data_set = Dataset_ETT_hour(flag=flag, size=[args.seq_len, args.label_len, args.pred_len])
        print(flag, len(data_set))
        data_loader = DataLoader(data_set, batch_size=batch_size, shuffle=shuffle_flag, drop_last=drop_last)
        return data_set, data_loader

    def _select_optimizer(self):
        return torch.optim.Adam(self.model.parameters(), lr=self.args.learning_rate)

    def _select_criterion(self):
        return nn.MSELoss()

    def vali(self, vali_data, vali_loader, criterion):
        self.model.eval()
        total_loss = []
        for i, (batch_x, batch_y, batch_x_mark, batch_y_mark) in enumerate(vali_loader):
            pred, true = self._process_one_batch(vali_data, batch_x, batch_y, batch_x_mark, batch_y_mark)
            loss = criterion(pred.detach().cpu(), true.detach().cpu())
            total_loss.append(loss)
        total_loss = np.average(total_loss)
        self.model.train()
        return total_loss

    def train(self, setting):
        train_data, train_loader = self._get_data(flag="train")
        vali_data, vali_loader = self._get_data(flag="val")
        test_data, test_loader = self._get_data(flag="test")
        path = {}
        time_now = time.time()
        train_steps = len(train_loader)
        early_stopping = EarlyStopping(patience=self.args.patience, verbose=True)
        model_optim = self._select_optimizer()
        criterion = self._select_criterion()
        if self.args.use_amp:
            scaler = torch.amp.GradScaler("cpu")
        for epoch in range(self.args.train_epochs):
            iter_count = 0
            train_loss = []
            self.model.train()
            epoch_time = time.time()
            for i, (batch_x, batch_y, batch_x_mark, batch_y_mark) in enumerate(train_loader):
                iter_count += 1
                model_optim.zero_grad()
                pred, true = self._process_one_batch(train_data, batch_x, batch_y, batch_x_mark, batch_y_mark)
                loss = criterion(pred, true)
                train_loss.append(loss.item())
                if (i + 1) % 4 == 0:
                    print(f"\titers: {i + 1}, epoch: {epoch + 1} | loss: {loss.item():.7f}")
                    speed = (time.time() - time_now) / iter_count
                    left_time = speed * ((self.args.train_epochs - epoch) * train_steps - i)
                    print(f"\tspeed: {speed:.4f}s/iter; left time: {left_time:.4f}s")
                    iter_count = 0
                    time_now = time.time()
                if self.args.use_amp:
                    scaler.scale(loss).backward()
                    scaler.step(model_optim)
                    scaler.update()
                else:
                    loss.backward()
                    model_optim.step()
            print(f"Epoch: {epoch + 1} cost time: {time.time() - epoch_time}")
            train_loss = np.average(train_loss)
            vali_loss = self.vali(vali_data, vali_loader, criterion)
            test_loss = self.vali(test_data, test_loader, criterion)
            print(f"Epoch: {epoch + 1}, Steps: {train_steps} | Train Loss: {train_loss:.7f} "
                  f"Vali Loss: {vali_loss:.7f} Test Loss: {test_loss:.7f}")
            early_stopping(vali_loss, self.model, path)
            if early_stopping.early_stop:
                print("Early stopping")
                break
            adjust_learning_rate(model_optim, epoch + 1, self.args)
        self.model.load_state_dict(path["checkpoint.pth"])
        return self.model, model_optim

    def _process_one_batch(self, dataset_object, batch_x, batch_y, batch_x_mark, batch_y_mark):
        batch_x = batch_x.float()
        batch_y = batch_y.float()
        batch_x_mark = batch_x_mark.float()
        batch_y_mark = batch_y_mark.float()
        dec_inp = torch.zeros([batch_y.shape[0], self.args.pred_len, batch_y.shape[-1]]).float()
        dec_inp = torch.cat([batch_y[:, :self.args.label_len, :], dec_inp], dim=1).float()
        if self.args.use_amp:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                outputs = self.model(batch_x, batch_x_mark, dec_inp, batch_y_mark)
        else:
            outputs = self.model(batch_x, batch_x_mark, dec_inp, batch_y_mark)
        f_dim = 0
        batch_y = batch_y[:, -self.args.pred_len:, f_dim:]
        return outputs, batch_y


def main(watch):
    torch.manual_seed(0)
    args = SimpleNamespace(seq_len=16, label_len=8, pred_len=4, enc_in=3, dec_in=3, c_out=3, d_model=16, n_heads=2,
                           e_layers=2, d_ff=32, dropout=0.05, train_epochs=3, batch_size=8, patience=3,
                           learning_rate=1e-3, lradj="type1", use_amp=False)
    setting = "informer_ETTh1_ftM_sl16_ll8_pl4"
    exp = Exp_Informer(args)
    with watch(exp.model):
        model, model_optim = exp.train(setting)
    return [model, model_optim]


from tests.doctor_published import variant  # noqa: E402

REAL = {"missing_no_grad": "exp/exp_informer.py, vali(): the validation and test passes of every epoch run the "
                           "model outside torch.no_grad()"}
VALI_LOOP = """\
        for i, (batch_x, batch_y, batch_x_mark, batch_y_mark) in enumerate(vali_loader):
            pred, true = self._process_one_batch(vali_data, batch_x, batch_y, batch_x_mark, batch_y_mark)
            loss = criterion(pred.detach().cpu(), true.detach().cpu())
            total_loss.append(loss)
"""
VARIANTS = [
    variant("vali_under_no_grad", set(),
            (VALI_LOOP, "        with torch.no_grad():\n" + "".join("    " + ln for ln in VALI_LOOP.splitlines(True))),
            fixes={"missing_no_grad"}),
    variant("validation_windows_from_the_training_split", "data_leakage",
            ('vali_data, vali_loader = self._get_data(flag="val")',
             'vali_data, vali_loader = self._get_data(flag="train")')),
    # the drop_last fix later asked for test sets (every window counted): 21 test windows = 8 + 8 + 5, and vali()
    # averages the batch means
    variant("test_loader_keeps_its_last_batch", "mean_of_batch_means",
            ("shuffle_flag = False; drop_last = True;", "shuffle_flag = False; drop_last = False;")),
    variant("vali_without_eval", "eval_in_train_mode",
            ("        self.model.eval()\n        total_loss = []\n", "        total_loss = []\n")),
    # either train() call alone is redundant (vali() restores train mode, and each epoch sets it); both gone, every
    # epoch after the first trains in eval mode
    variant("train_mode_set_once_before_the_epochs", "missing_train_switch",
            ("        total_loss = np.average(total_loss)\n        self.model.train()\n",
             "        total_loss = np.average(total_loss)\n"),
            ("            train_loss = []\n            self.model.train()\n", "            train_loss = []\n"),
            ("        for epoch in range(self.args.train_epochs):\n",
             "        self.model.train()\n        for epoch in range(self.args.train_epochs):\n")),
    variant("train_losses_kept_as_tensors", "graph_attached_logging",
            ("                train_loss.append(loss.item())\n", "                train_loss.append(loss)\n"),
            ("            train_loss = np.average(train_loss)\n",
             "            train_loss = torch.stack(train_loss).mean().item()\n")),
]
