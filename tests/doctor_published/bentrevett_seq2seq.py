# Mirrors: bentrevett/pytorch-seq2seq, "1 - Sequence to Sequence Learning with Neural Networks.ipynb" (the collate
# function and loaders, Encoder, Decoder, Seq2Seq, init_weights, train_fn, evaluate_fn and the epoch loop), snapshot
# at commit b3cd54c72cd6 (2024-01-20); the notebook last changed in 8f59223 (2024-01-20).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: dict examples of source ("de_ids") and target ("en_ids") token ids wrapped in <sos> ... <eos>, padded per
# batch by a collate function with pad_sequence (sequence first); a shuffled training loader and unshuffled
# validation and test loaders of the same batch size (no drop_last); a two-layer LSTM encoder whose final hidden and
# cell states start a two-layer LSTM decoder, both with embedding dropout and inter-layer dropout 0.5; the decoder
# run one token at a time inside Seq2Seq.forward, writing its logits into a zeros tensor, with teacher forcing drawn
# per time step by random.random() (ratio 0.5 in training, 0 in evaluation); every weight drawn uniform in
# [-0.08, 0.08]; Adam with its defaults; cross-entropy with ignore_index=<pad> on the logits from position 1 on;
# train_fn: model.train(), then per batch zero_grad, forward, loss, backward, clip_grad_norm_(1.0), step, the loss
# summed with .item(), returning the sum over len(loader); evaluate_fn: model.eval() under no_grad, the same
# per-batch mean losses summed with .item() and divided by len(loader); the epoch loop keeps the state with the best
# validation loss, then reloads it for one test pass.
# The published evaluation averages per-batch means: each batch's loss is a mean over its non-pad target tokens,
# and those means are summed and divided by the number of batches, so batches of different sizes (Multi30k's
# 1,014 validation sentences in batches of 128 end with one of 118) and different token counts weigh the same
# (REAL: mean_of_batch_means). Training averages the same way, but that is a progress print, not a validation.
# Shrunk: a stand-in "translation" (a fixed token-for-token mapping of 3 to 6 random source words; vocabulary of 4
# specials and 10 words on each side): 160 training, 50 validation and 40 test pairs in batches of 16 (the last
# validation batch holds 2, the last test batch 8), embedding 16, hidden 32, 4 epochs (not 10); no spaCy, torchtext
# or datasets (the vocabularies are fixed), the checkpoint kept in memory, no tqdm, the CPU. No source sentence is
# drawn twice across the splits: as first written, 2 of the 50 validation sentences were also training sentences
# (short random sequences collide), and the doctor named that data leakage in every case, rightly; Multi30k's splits
# do not share sentences, so the shrunk data no longer does either (stop 59, after the blind grading).
# Added: `with watch(model):` around the epochs and the test pass.
import copy
import random

import numpy as np
import torch
from torch import nn, optim

UNK, PAD, SOS, EOS = 0, 1, 2, 3
N_WORDS = 10


def make_pairs(count, seed, taken):
    """Stand-in Multi30k: each English id is a fixed function of the German id at the same place; no German
    sentence twice across the splits (`taken`: the ones drawn so far), as in Multi30k."""
    g = torch.Generator().manual_seed(seed)
    pairs = []
    while len(pairs) < count:
        length = int(torch.randint(3, 7, (1,), generator=g))
        de = torch.randint(4, 4 + N_WORDS, (length,), generator=g)
        if tuple(de.tolist()) in taken:
            continue
        taken.add(tuple(de.tolist()))
        en = 4 + (de - 4) * 3 % N_WORDS
        pairs.append({"de_ids": torch.cat([torch.tensor([SOS]), de, torch.tensor([EOS])]),
                      "en_ids": torch.cat([torch.tensor([SOS]), en, torch.tensor([EOS])])})
    return pairs


def get_collate_fn(pad_index):
    def collate_fn(batch):
        src = nn.utils.rnn.pad_sequence([ex["de_ids"] for ex in batch], padding_value=pad_index)
        trg = nn.utils.rnn.pad_sequence([ex["en_ids"] for ex in batch], padding_value=pad_index)
        return {"de_ids": src, "en_ids": trg}
    return collate_fn


def get_data_loader(dataset, batch_size, pad_index, shuffle=False):
    return torch.utils.data.DataLoader(dataset=dataset, batch_size=batch_size,
                                       collate_fn=get_collate_fn(pad_index), shuffle=shuffle)


class Encoder(nn.Module):
    def __init__(self, input_dim, embedding_dim, hidden_dim, n_layers, dropout):
        super().__init__()
        self.hidden_dim, self.n_layers = hidden_dim, n_layers
        self.embedding = nn.Embedding(input_dim, embedding_dim)
        self.rnn = nn.LSTM(embedding_dim, hidden_dim, n_layers, dropout=dropout)
        self.dropout = nn.Dropout(dropout)

    def forward(self, src):
        _, (hidden, cell) = self.rnn(self.dropout(self.embedding(src)))
        return hidden, cell


class Decoder(nn.Module):
    def __init__(self, output_dim, embedding_dim, hidden_dim, n_layers, dropout):
        super().__init__()
        self.output_dim, self.hidden_dim, self.n_layers = output_dim, hidden_dim, n_layers
        self.embedding = nn.Embedding(output_dim, embedding_dim)
        self.rnn = nn.LSTM(embedding_dim, hidden_dim, n_layers, dropout=dropout)
        self.fc_out = nn.Linear(hidden_dim, output_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, input, hidden, cell):
        embedded = self.dropout(self.embedding(input.unsqueeze(0)))
        output, (hidden, cell) = self.rnn(embedded, (hidden, cell))
        prediction = self.fc_out(output.squeeze(0))
        return prediction, hidden, cell


class Seq2Seq(nn.Module):
    def __init__(self, encoder, decoder, device):
        super().__init__()
        self.encoder, self.decoder, self.device = encoder, decoder, device
        assert encoder.hidden_dim == decoder.hidden_dim and encoder.n_layers == decoder.n_layers

    def forward(self, src, trg, teacher_forcing_ratio):
        trg_length, batch_size = trg.shape
        outputs = torch.zeros(trg_length, batch_size, self.decoder.output_dim).to(self.device)
        hidden, cell = self.encoder(src)
        input = trg[0, :]
        for t in range(1, trg_length):
            output, hidden, cell = self.decoder(input, hidden, cell)
            outputs[t] = output
            teacher_force = random.random() < teacher_forcing_ratio
            input = trg[t] if teacher_force else output.argmax(1)
        return outputs


def init_weights(m):
    for _, param in m.named_parameters():
        nn.init.uniform_(param.data, -0.08, 0.08)


def train_fn(model, data_loader, optimizer, criterion, clip, teacher_forcing_ratio, device):
    model.train()
    epoch_loss = 0
    for i, batch in enumerate(data_loader):
        src = batch["de_ids"].to(device)
        trg = batch["en_ids"].to(device)
        optimizer.zero_grad()
        output = model(src, trg, teacher_forcing_ratio)
        output_dim = output.shape[-1]
        output = output[1:].view(-1, output_dim)
        trg = trg[1:].view(-1)
        loss = criterion(output, trg)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        epoch_loss += loss.item()
    return epoch_loss / len(data_loader)


def evaluate_fn(model, data_loader, criterion, device):
    model.eval()
    epoch_loss = 0
    with torch.no_grad():
        for i, batch in enumerate(data_loader):
            src = batch["de_ids"].to(device)
            trg = batch["en_ids"].to(device)
            output = model(src, trg, 0)  # no teacher forcing
            output_dim = output.shape[-1]
            output = output[1:].view(-1, output_dim)
            trg = trg[1:].view(-1)
            loss = criterion(output, trg)
            epoch_loss += loss.item()
    return epoch_loss / len(data_loader)


def main(watch):
    seed = 1234
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    taken = set()
    train_data, valid_data, test_data = make_pairs(160, 0, taken), make_pairs(50, 1, taken), make_pairs(40, 2, taken)
    pad_index = PAD
    batch_size = 16
    train_data_loader = get_data_loader(train_data, batch_size, pad_index, shuffle=True)
    valid_data_loader = get_data_loader(valid_data, batch_size, pad_index)
    test_data_loader = get_data_loader(test_data, batch_size, pad_index)

    device = torch.device("cpu")
    input_dim = output_dim = 4 + N_WORDS
    encoder = Encoder(input_dim, 16, 32, 2, 0.5)
    decoder = Decoder(output_dim, 16, 32, 2, 0.5)
    model = Seq2Seq(encoder, decoder, device).to(device)
    model.apply(init_weights)
    optimizer = optim.Adam(model.parameters())
    criterion = nn.CrossEntropyLoss(ignore_index=pad_index)

    n_epochs = 4
    clip = 1.0
    teacher_forcing_ratio = 0.5
    best_valid_loss = float("inf")
    best_state = None
    with watch(model):
        for epoch in range(n_epochs):
            train_loss = train_fn(model, train_data_loader, optimizer, criterion, clip, teacher_forcing_ratio,
                                  device)
            valid_loss = evaluate_fn(model, valid_data_loader, criterion, device)
            if valid_loss < best_valid_loss:
                best_valid_loss = valid_loss
                best_state = copy.deepcopy(model.state_dict())
            print(f"\tTrain Loss: {train_loss:7.3f} | Train PPL: {np.exp(train_loss):7.3f}")
            print(f"\tValid Loss: {valid_loss:7.3f} | Valid PPL: {np.exp(valid_loss):7.3f}")
        model.load_state_dict(best_state)
        test_loss = evaluate_fn(model, test_data_loader, criterion, device)
        print(f"| Test Loss: {test_loss:.3f} | Test PPL: {np.exp(test_loss):7.3f} |")
    return [model, optimizer]


from tests.doctor_published import variant  # noqa: E402

REAL = {"mean_of_batch_means"}
VARIANTS = [
    # dropout 0.5 stays on in the validation and test passes (the no_grad is kept)
    variant("evaluate_without_eval", "eval_in_train_mode", ("    model.eval()\n", "")),
    variant("evaluate_without_no_grad", "missing_no_grad",
            ("    with torch.no_grad():\n        for i, batch in enumerate(data_loader):\n",
             "    if True:\n        for i, batch in enumerate(data_loader):\n")),
    # train_fn relies on the model still being in train mode: from the second epoch on, evaluate_fn has left it
    # in eval mode and dropout never comes back
    variant("train_fn_without_train_switch", "missing_train_switch",
            ("    model.train()\n    epoch_loss = 0\n", "    epoch_loss = 0\n")),
    # a learner "clips first, then backpropagates": the clip sees the previous step's zeroed gradients
    variant("clip_before_backward", "clip_before_backward",
            ("        loss.backward()\n        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)\n",
             "        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)\n        loss.backward()\n")),
    # the decoder returns probabilities (handy for translate_sentence), and CrossEntropyLoss softmaxes them again
    variant("decoder_returns_probabilities", "softmax_before_cross_entropy",
            ("        prediction = self.fc_out(output.squeeze(0))\n",
             "        prediction = torch.softmax(self.fc_out(output.squeeze(0)), dim=-1)\n")),
    # a copy-paste slip: the validation loader is built from the training pairs
    variant("validation_loader_on_training_pairs", "data_leakage",
            ("    valid_data_loader = get_data_loader(valid_data, batch_size, pad_index)",
             "    valid_data_loader = get_data_loader(train_data, batch_size, pad_index)")),
    # not a bug (it removes the published one): the validation loss is summed over tokens and divided by the number
    # of non-pad target tokens, so every token weighs the same; it looks odd (a second criterion, a token count)
    variant("validation_loss_per_token", set(),
            ("            loss = criterion(output, trg)\n            epoch_loss += loss.item()\n"
             "    return epoch_loss / len(data_loader)",
             "            loss = nn.functional.cross_entropy(output, trg, ignore_index=PAD, reduction=\"sum\")\n"
             "            epoch_loss += loss.item()\n            n_tokens += (trg != PAD).sum().item()\n"
             "    return epoch_loss / n_tokens"),
            ("    model.eval()\n    epoch_loss = 0\n", "    model.eval()\n    epoch_loss, n_tokens = 0, 0\n"),
            fixes={"mean_of_batch_means"}),
]
