# Mirrors: NVIDIA/tacotron2, train.py (train, validate, prepare_dataloaders) with loss_function.py's Tacotron2Loss,
# data_utils.py's TextMelCollate and model.py's Tacotron2 (Prenet, Encoder, Decoder, Postnet, parse_batch,
# parse_output), snapshot at commit 185cd24e046c (2020-06-11); train.py last changed in 6d0635e8c12b (2020-01-09).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: text/mel pairs shuffled once by a seeded RNG; a collate that sorts by text length, zero-pads text and
# mels and pads the stop-token (gate) target with ones from each utterance's last frame; a training loader with
# shuffle and drop_last; a Tacotron-like model: symbol embedding, a conv/BatchNorm encoder with dropout(0.5) tied
# to self.training and a bidirectional LSTM over packed sequences, a teacher-forced decoder (a prenet whose dropout
# stays on in eval mode too, as published; attention and decoder LSTM cells with dropout tied to self.training;
# masked attention; mel and gate projections), a conv/BatchNorm postnet with a residual, parse_output masking the
# padded frames through .data; the loss MSE(mel) + MSE(postnet mel) + BCE-with-logits(gate); Adam with weight
# decay 1e-6; model.train() once before the epochs; per iteration: the lr written into every param group by hand,
# model.zero_grad(), parse_batch, forward, loss, loss.item() as the logged loss, backward, clip_grad_norm_(1.0)
# whose norm is logged, step, a log line; every iters_per_checkpoint iterations (iteration 0 included) validate():
# model.eval(), under no_grad a validation loader built on the spot (batch size as training, no drop_last), the
# summed per-batch mean losses divided by the number of batches (i + 1), model.train(), the validation log (the
# loss value, the last batch's outputs and the weights turned into numbers on the spot).
# Shrunk: a stand-in corpus (each symbol of a 12-symbol alphabet speaks as two frames of its own 8-band mel
# template plus noise; texts of 2 to 5 symbols; 40 training, 12 validation utterances), batches of 8 (5 per
# epoch; LJSpeech's 100 validation utterances in batches of 64 leave a short last batch of 36, the 12 here one
# of 4), 2 epochs, a validation every 4 iterations (not 1000), widths of 16-32, content-only attention (no
# location layer), 2 postnet convs; no fp16 (apex) or distributed path, no checkpoints written, the tensorboard
# logger replaced by one that keeps numbers.
# Added: `with watch(model):` around the epochs.
# Real bug, in validate(): the validation loss is the mean of the batch means (val_loss / (i + 1)), so the short
# last batch (36 of LJSpeech's 100 utterances; 4 of 12 here) weighs as much as a full one (mean_of_batch_means).
import random
import time

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from torch.utils.data import DataLoader, Dataset

N_SYMBOLS, N_MELS = 12, 8


def corpus(seed=0):
    """Texts of 2 to 5 symbols (1..11; 0 pads); each symbol is two frames of its template, plus noise."""
    g = torch.Generator().manual_seed(seed)
    templates = torch.rand(N_SYMBOLS, N_MELS, generator=g) * 2 - 1
    pairs = []
    for _ in range(52):
        n = int(torch.randint(2, 6, (1,), generator=g))
        text = torch.randint(1, N_SYMBOLS, (n,), generator=g)
        mel = templates[text].repeat_interleave(2, dim=0).T
        pairs.append((text.int(), mel + 0.1 * torch.randn(mel.shape, generator=g)))
    return pairs


class TextMelLoader(Dataset):
    def __init__(self, pairs, seed):
        self.pairs = list(pairs)
        random.Random(seed).shuffle(self.pairs)

    def __getitem__(self, index):
        return self.pairs[index]

    def __len__(self):
        return len(self.pairs)


class TextMelCollate:
    def __call__(self, batch):
        input_lengths, order = torch.sort(torch.LongTensor([len(text) for text, _ in batch]), descending=True)
        text_padded = torch.zeros(len(batch), int(input_lengths[0]), dtype=torch.long)
        longest = max(mel.size(1) for _, mel in batch)
        mel_padded = torch.zeros(len(batch), N_MELS, longest)
        gate_padded = torch.zeros(len(batch), longest)
        output_lengths = torch.zeros(len(batch), dtype=torch.long)
        for row, k in enumerate(order.tolist()):
            text, mel = batch[k]
            text_padded[row, :len(text)] = text
            mel_padded[row, :, :mel.size(1)] = mel
            gate_padded[row, mel.size(1) - 1:] = 1
            output_lengths[row] = mel.size(1)
        return text_padded, input_lengths, mel_padded, gate_padded, output_lengths


def lengths_to_mask(lengths):
    return torch.arange(int(lengths.max()))[None, :] < lengths[:, None]


class Prenet(nn.Module):
    def __init__(self, in_dim, sizes):
        super().__init__()
        dims = [in_dim] + sizes
        self.layers = nn.ModuleList([nn.Linear(a, b, bias=False) for a, b in zip(dims[:-1], dims[1:])])

    def forward(self, x):
        for layer in self.layers:
            x = F.dropout(F.relu(layer(x)), p=0.5, training=True)     # on at inference too, by design
        return x


class Encoder(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv1d(dim, dim, 5, padding=2), nn.BatchNorm1d(dim))
        self.lstm = nn.LSTM(dim, dim // 2, batch_first=True, bidirectional=True)

    def forward(self, x, input_lengths):
        x = F.dropout(F.relu(self.conv(x)), 0.5, self.training).transpose(1, 2)
        packed = pack_padded_sequence(x, input_lengths, batch_first=True)
        outputs, _ = self.lstm(packed)
        return pad_packed_sequence(outputs, batch_first=True)[0]


class Attention(nn.Module):
    def __init__(self, query_dim, memory_dim, dim):
        super().__init__()
        self.query_layer = nn.Linear(query_dim, dim, bias=False)
        self.memory_layer = nn.Linear(memory_dim, dim, bias=False)
        self.v = nn.Linear(dim, 1, bias=False)

    def forward(self, query, memory, processed_memory, mask):
        energies = self.v(torch.tanh(self.query_layer(query)[:, None] + processed_memory)).squeeze(-1)
        weights = F.softmax(energies.masked_fill(~mask, -float("inf")), dim=1)
        return torch.bmm(weights[:, None], memory).squeeze(1), weights


class Decoder(nn.Module):
    def __init__(self, memory_dim, rnn_dim=32, prenet_dim=16):
        super().__init__()
        self.prenet = Prenet(N_MELS, [prenet_dim, prenet_dim])
        self.attention_rnn = nn.LSTMCell(prenet_dim + memory_dim, rnn_dim)
        self.attention = Attention(rnn_dim, memory_dim, 16)
        self.decoder_rnn = nn.LSTMCell(rnn_dim + memory_dim, rnn_dim)
        self.linear_projection = nn.Linear(rnn_dim + memory_dim, N_MELS)
        self.gate_layer = nn.Linear(rnn_dim + memory_dim, 1)
        self.rnn_dim, self.p_attention_dropout, self.p_decoder_dropout = rnn_dim, 0.1, 0.1

    def forward(self, memory, decoder_inputs, memory_lengths):
        b = memory.size(0)
        frames = torch.cat([memory.new_zeros(b, N_MELS, 1), decoder_inputs[:, :, :-1]], dim=2)
        prenet_frames = self.prenet(frames.transpose(1, 2))
        mask = lengths_to_mask(memory_lengths)
        processed_memory = self.attention.memory_layer(memory)
        att_h = att_c = dec_h = dec_c = memory.new_zeros(b, self.rnn_dim)
        context = memory.new_zeros(b, memory.size(2))
        mels, gates, alignments = [], [], []
        for t in range(prenet_frames.size(1)):
            att_h, att_c = self.attention_rnn(torch.cat([prenet_frames[:, t], context], -1), (att_h, att_c))
            att_h = F.dropout(att_h, self.p_attention_dropout, self.training)
            context, weights = self.attention(att_h, memory, processed_memory, mask)
            dec_h, dec_c = self.decoder_rnn(torch.cat([att_h, context], -1), (dec_h, dec_c))
            dec_h = F.dropout(dec_h, self.p_decoder_dropout, self.training)
            hidden_and_context = torch.cat([dec_h, context], -1)
            mels.append(self.linear_projection(hidden_and_context))
            gates.append(self.gate_layer(hidden_and_context))
            alignments.append(weights)
        return torch.stack(mels, 2), torch.cat(gates, 1), torch.stack(alignments, 1)


class Postnet(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.convolutions = nn.ModuleList([
            nn.Sequential(nn.Conv1d(N_MELS, dim, 5, padding=2), nn.BatchNorm1d(dim)),
            nn.Sequential(nn.Conv1d(dim, N_MELS, 5, padding=2), nn.BatchNorm1d(N_MELS))])

    def forward(self, x):
        x = F.dropout(torch.tanh(self.convolutions[0](x)), 0.5, self.training)
        return F.dropout(self.convolutions[1](x), 0.5, self.training)


class Tacotron2(nn.Module):
    def __init__(self, dim=16, mask_padding=True):
        super().__init__()
        self.mask_padding = mask_padding
        self.embedding = nn.Embedding(N_SYMBOLS, dim)
        self.encoder = Encoder(dim)
        self.decoder = Decoder(dim)
        self.postnet = Postnet()

    def parse_batch(self, batch):
        text_padded, input_lengths, mel_padded, gate_padded, output_lengths = batch
        max_len = int(input_lengths.max())
        return ((text_padded.long(), input_lengths.long(), mel_padded.float(), max_len, output_lengths.long()),
                (mel_padded.float(), gate_padded.float()))

    def parse_output(self, outputs, output_lengths):
        if self.mask_padding:
            pad = ~lengths_to_mask(output_lengths)
            outputs[0].data.masked_fill_(pad[:, None, :], 0.0)
            outputs[1].data.masked_fill_(pad[:, None, :], 0.0)
            outputs[2].data.masked_fill_(pad, 1e3)
        return outputs

    def forward(self, inputs):
        text, text_lengths, mels, max_len, output_lengths = inputs
        memory = self.encoder(self.embedding(text).transpose(1, 2), text_lengths)
        mel_outputs, gate_outputs, alignments = self.decoder(memory, mels, text_lengths)
        mel_outputs_postnet = mel_outputs + self.postnet(mel_outputs)
        return self.parse_output([mel_outputs, mel_outputs_postnet, gate_outputs, alignments], output_lengths)


class Tacotron2Loss(nn.Module):
    def forward(self, model_output, targets):
        mel_target, gate_target = targets
        mel_target.requires_grad = False
        gate_target.requires_grad = False
        mel_out, mel_out_postnet, gate_out, _ = model_output
        mel_loss = F.mse_loss(mel_out, mel_target) + F.mse_loss(mel_out_postnet, mel_target)
        gate_loss = F.binary_cross_entropy_with_logits(gate_out.reshape(-1, 1), gate_target.reshape(-1, 1))
        return mel_loss + gate_loss


class Tacotron2Logger:
    """Keeps numbers only, as tensorboard does: scalars, and the images and histograms turned into arrays."""

    def __init__(self):
        self.scalars, self.images = [], []

    def log_training(self, reduced_loss, grad_norm, learning_rate, duration, iteration):
        self.scalars.append(("training", iteration, reduced_loss, float(grad_norm), learning_rate, duration))

    def log_validation(self, reduced_loss, model, y, y_pred, iteration):
        self.scalars.append(("validation", iteration, reduced_loss))
        for tag, value in model.named_parameters():
            self.scalars.append((tag, iteration, value.data.norm().item()))
        _, mel_outputs, gate_outputs, alignments = y_pred
        self.images.append((alignments[0].data.cpu().numpy(), mel_outputs[0].data.cpu().numpy(),
                            torch.sigmoid(gate_outputs[0]).data.cpu().numpy(), y[0][0].data.cpu().numpy()))


def prepare_dataloaders(hparams):
    pairs = corpus()
    trainset = TextMelLoader(pairs[:40], hparams["seed"])
    valset = TextMelLoader(pairs[40:], hparams["seed"])
    collate_fn = TextMelCollate()
    train_loader = DataLoader(trainset, shuffle=True, batch_size=hparams["batch_size"], drop_last=True,
                              collate_fn=collate_fn)
    return train_loader, valset, collate_fn


def validate(model, criterion, valset, iteration, batch_size, collate_fn, logger):
    model.eval()
    with torch.no_grad():
        val_loader = DataLoader(valset, shuffle=False, batch_size=batch_size, collate_fn=collate_fn)
        val_loss = 0.0
        for i, batch in enumerate(val_loader):
            x, y = model.parse_batch(batch)
            y_pred = model(x)
            loss = criterion(y_pred, y)
            reduced_val_loss = loss.item()
            val_loss += reduced_val_loss
        val_loss = val_loss / (i + 1)
    model.train()
    print(f"Validation loss {iteration}: {val_loss:9f}")
    logger.log_validation(val_loss, model, y, y_pred, iteration)


def main(watch):
    hparams = dict(epochs=2, iters_per_checkpoint=4, seed=1234, learning_rate=1e-3, weight_decay=1e-6,
                   grad_clip_thresh=1.0, batch_size=8)
    torch.manual_seed(hparams["seed"])
    model = Tacotron2()
    learning_rate = hparams["learning_rate"]
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate, weight_decay=hparams["weight_decay"])
    criterion = Tacotron2Loss()
    logger = Tacotron2Logger()
    train_loader, valset, collate_fn = prepare_dataloaders(hparams)
    iteration = 0
    epoch_offset = 0
    model.train()
    is_overflow = False
    with watch(model):
        for epoch in range(epoch_offset, hparams["epochs"]):
            print(f"Epoch: {epoch}")
            for i, batch in enumerate(train_loader):
                start = time.perf_counter()
                for param_group in optimizer.param_groups:
                    param_group["lr"] = learning_rate
                model.zero_grad()
                x, y = model.parse_batch(batch)
                y_pred = model(x)
                loss = criterion(y_pred, y)
                reduced_loss = loss.item()
                loss.backward()
                grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), hparams["grad_clip_thresh"])
                optimizer.step()
                if not is_overflow:
                    duration = time.perf_counter() - start
                    print(f"Train loss {iteration} {reduced_loss:.6f} Grad Norm {grad_norm:.6f} {duration:.2f}s/it")
                    logger.log_training(reduced_loss, grad_norm, learning_rate, duration, iteration)
                if not is_overflow and (iteration % hparams["iters_per_checkpoint"] == 0):
                    validate(model, criterion, valset, iteration, hparams["batch_size"], collate_fn, logger)
                iteration += 1
    return [model, optimizer]


from tests.doctor_published import variant  # noqa: E402

REAL = {"mean_of_batch_means": "train.py, validate(): the per-batch mean losses are summed and divided by the "
                               "number of batches (i + 1); the validation loader keeps its short last batch "
                               "(LJSpeech's 100 validation utterances = 64 + 36; 12 = 8 + 4 here)"}
CLIP = '                grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), hparams["grad_clip_thresh"])\n'
STEP = "                optimizer.step()\n"
VARIANTS = [
    variant("validation_loss_weighted_by_batch_size", set(),
            ("            val_loss += reduced_val_loss\n",
             "            val_loss += reduced_val_loss * batch[0].size(0)\n"),
            ("        val_loss = val_loss / (i + 1)\n", "        val_loss = val_loss / len(valset)\n"),
            fixes={"mean_of_batch_means"}),
    variant("validate_without_eval", "eval_in_train_mode", ("    model.eval()\n    with torch.no_grad():\n",
                                                             "    with torch.no_grad():\n")),
    # the loop calls model.train() once, before the epochs: only validate() brings train mode back after the
    # validation at iteration 0, so without it every later update runs with dropout off and BatchNorm frozen
    variant("validate_leaves_eval_mode", "missing_train_switch",
            ("    model.train()\n    print(f\"Validation loss", "    print(f\"Validation loss")),
    variant("grad_norm_taken_after_step", "clip_after_step", (CLIP + STEP, STEP + CLIP)),
    variant("epoch_loss_summed_as_a_tensor", "graph_attached_logging",
            ('            print(f"Epoch: {epoch}")\n',
             '            print(f"Epoch: {epoch}")\n            epoch_loss = 0.0\n'),
            ("                reduced_loss = loss.item()\n",
             "                reduced_loss = loss.item()\n                epoch_loss += loss\n"),
            ("                iteration += 1\n",
             '                iteration += 1\n            print(f"Epoch {epoch} mean loss {epoch_loss / (i + 1)}")\n')),
    variant("validation_filelist_overlaps_training", "data_leakage",       # still 12 = 8 + 4
            ("    valset = TextMelLoader(pairs[40:], hparams[\"seed\"])\n",
             "    valset = TextMelLoader(pairs[32:44], hparams[\"seed\"])\n")),
]
