# Mirrors: pytorch/examples, word_language_model/main.py (with data.py's corpus reader and model.py's recurrent
# model), snapshot at commit 77f55b912142 (2025-08-25); main.py last changed in 28d16ff (2025-08-22), data.py in
# 1b1a974 (2019-08-15), model.py in c0b889d (2023-11-26).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: three text files read into 1-D token streams over one shared vocabulary, cut into columns; an LSTM
# language model (dropout, uniform +-0.1 init, log-softmax out, NLL); truncated backpropagation through time with
# the state detached before each window; gradient clipping after backward; by default *no optimizer* (zeroed with
# model.zero_grad(), each parameter's data moved by -lr times its gradient by hand), AdamW behind a flag; validation
# sums the window length times the batch loss under no_grad in eval mode; lr divided by 4 when validation does not
# improve, the best weights saved; a final test pass. Shrunk: stand-in text files (40 words, ~500 training tokens),
# 2 layers of width 16 (not 200), windows of 8 (not 35), batch 4 (not 20), 2 epochs (not 40); the best weights
# go to memory; no ONNX export. Added: `with watch(...)`, given the token streams (there is no DataLoader).
import io
import math
import time

import torch
from torch import nn
from torch.nn import functional as F

from tests.doctor_published.standins import text_lines


class Config:
    root = "wikitext-2"
    cell = "LSTM"
    embed, hidden, layers = 16, 16, 2
    lr = 20.0
    clip = 0.25
    epochs = 2
    batch, eval_batch = 4, 10
    window = 8
    dropout = 0.2
    seed = 1111
    log_every = 200
    smoke = False
    optimizer = False


class Vocabulary:
    """Word <-> id, ids given in order of first sight."""

    def __init__(self):
        self.ids: dict[str, int] = {}
        self.words: list[str] = []

    def index(self, word: str) -> int:
        if word not in self.ids:
            self.ids[word] = len(self.words)
            self.words.append(word)
        return self.ids[word]

    def __len__(self) -> int:
        return len(self.words)


def read_stream(path: str, vocab: Vocabulary) -> torch.Tensor:
    """Every word of the file, each line closed by <eos>, as one int64 stream."""
    ids = [vocab.index(w) for line in text_lines(path) for w in line.split() + ["<eos>"]]
    return torch.tensor(ids, dtype=torch.int64)


class WordLSTM(nn.Module):
    """Embedding -> dropout -> multi-layer recurrent cell -> dropout -> linear -> log-probabilities per token."""

    def __init__(self, cell: str, vocab: int, embed: int, hidden: int, layers: int, dropout: float = 0.5):
        super().__init__()
        self.vocab, self.hidden, self.layers = vocab, hidden, layers
        self.mask = nn.Dropout(dropout)
        self.embed = nn.Embedding(vocab, embed)
        self.core = getattr(nn, cell)(embed, hidden, layers, dropout=dropout)
        self.out = nn.Linear(hidden, vocab)
        nn.init.uniform_(self.embed.weight, -0.1, 0.1)
        nn.init.zeros_(self.out.bias)
        nn.init.uniform_(self.out.weight, -0.1, 0.1)

    def forward(self, tokens, state):
        seq, state = self.core(self.mask(self.embed(tokens)), state)
        scores = self.out(self.mask(seq)).reshape(-1, self.vocab)
        return F.log_softmax(scores, dim=1), state

    def blank_state(self, width: int):
        ref = next(self.parameters())
        return tuple(ref.new_zeros(self.layers, width, self.hidden) for _ in range(2))


def cut_loose(state):
    """The recurrent state without its history (a tensor, or a tuple of them)."""
    return state.detach() if isinstance(state, torch.Tensor) else tuple(cut_loose(s) for s in state)


def main(watch):
    cfg = Config()
    torch.manual_seed(cfg.seed)
    dev = torch.device("cpu")
    vocab = Vocabulary()
    files = {"train": "train.txt", "valid": "valid.txt", "test": "test.txt"}
    streams = {part: read_stream(f"{cfg.root}/{name}", vocab) for part, name in files.items()}

    def columns(stream, width):
        """The stream, trimmed to a multiple of `width`, as `width` side-by-side columns."""
        usable = (stream.size(0) // width) * width
        return stream[:usable].view(width, -1).t().contiguous().to(dev)

    fit_cols = columns(streams["train"], cfg.batch)
    val_cols = columns(streams["valid"], cfg.eval_batch)
    test_cols = columns(streams["test"], cfg.eval_batch)
    lm = WordLSTM(cfg.cell, len(vocab), cfg.embed, cfg.hidden, cfg.layers, cfg.dropout).to(dev)
    nll = nn.NLLLoss()
    if cfg.optimizer:
        adamw = torch.optim.AdamW(lm.parameters(), lr=cfg.lr)

    def window(cols, start):
        size = min(cfg.window, len(cols) - 1 - start)
        return cols[start:start + size], cols[start + 1:start + 1 + size].reshape(-1)

    def perplexity_loss(cols):
        lm.eval()
        summed = 0.0
        state = lm.blank_state(cfg.eval_batch)
        with torch.no_grad():
            for start in range(0, cols.size(0) - 1, cfg.window):
                tokens, nxt = window(cols, start)
                log_p, state = lm(tokens, state)
                state = cut_loose(state)
                summed += len(tokens) * nll(log_p, nxt).item()
        return summed / (len(cols) - 1)

    def one_epoch():
        lm.train()
        running, tic = 0.0, time.time()
        state = lm.blank_state(cfg.batch)
        for n, start in enumerate(range(0, fit_cols.size(0) - 1, cfg.window)):
            tokens, nxt = window(fit_cols, start)
            if cfg.optimizer:
                adamw.zero_grad()
            else:
                lm.zero_grad()
            state = cut_loose(state)
            log_p, state = lm(tokens, state)
            loss = nll(log_p, nxt)
            loss.backward()
            nn.utils.clip_grad_norm_(lm.parameters(), cfg.clip)
            if cfg.optimizer:
                adamw.step()
            else:
                for w in lm.parameters():
                    w.data.add_(w.grad, alpha=-rate)
            running += loss.item()
            if n % cfg.log_every == 0 and n > 0:
                mean = running / cfg.log_every
                print(f"epoch {epoch} window {n} lr {rate:.2f} {(time.time() - tic) * 1e3 / cfg.log_every:.1f} "
                      f"ms/window loss {mean:.2f} ppl {math.exp(mean):.1f}")
                running, tic = 0.0, time.time()
            if cfg.smoke:
                break

    rate = cfg.lr
    best = None
    with watch(lm, train_data=streams["train"], val_data=streams["valid"]):
        try:
            for epoch in range(1, cfg.epochs + 1):
                one_epoch()
                val = perplexity_loss(val_cols)
                print(f"epoch {epoch}: validation loss {val:.2f}, ppl {math.exp(val):.1f}")
                if best is None or val < best:
                    torch.save(lm.state_dict(), io.BytesIO())
                    best = val
                else:
                    rate /= 4.0
        except KeyboardInterrupt:
            print("stopped by hand")
        final = perplexity_loss(test_cols)
    return [lm] + ([adamw] if cfg.optimizer else [])


from tests.doctor_published import dedent, variant  # noqa: E402

WITH_ADAMW = ("    optimizer = False\n", "    optimizer = True\n")
CLIP = "            nn.utils.clip_grad_norm_(lm.parameters(), cfg.clip)\n"
SCORING = """\
            for start in range(0, cols.size(0) - 1, cfg.window):
                tokens, nxt = window(cols, start)
                log_p, state = lm(tokens, state)
                state = cut_loose(state)
                summed += len(tokens) * nll(log_p, nxt).item()
"""
VARIANTS = [
    variant("with_adamw", set(), WITH_ADAMW, ("    lr = 20.0\n", "    lr = 0.01\n")),
    variant("no_zero_grad_by_hand", "missing_zero_grad", ("            else:\n                lm.zero_grad()\n", "")),
    variant("clip_before_backward", "clip_before_backward",
            ("            loss.backward()\n" + CLIP, CLIP + "            loss.backward()\n")),
    variant("clip_after_step_imported_by_name", "clip_after_step", WITH_ADAMW,
            ("from torch.nn import functional as F\n",
             "from torch.nn import functional as F\nfrom torch.nn.utils import clip_grad_norm_\n"),
            (CLIP, ""),
            ("                adamw.step()\n",
             "                adamw.step()\n                clip_grad_norm_(lm.parameters(), cfg.clip)\n")),
    variant("evaluate_without_eval", "eval_in_train_mode", ("        lm.eval()\n", "")),
    variant("evaluate_without_no_grad", "missing_no_grad",
            ("        with torch.no_grad():\n" + SCORING, dedent(SCORING))),
    variant("loss_tensor_summed", "graph_attached_logging",
            ("            running += loss.item()\n", "            running += loss\n")),
    variant("validation_text_is_training_text", "data_leakage",
            ('"valid": "valid.txt"', '"valid": "train.txt"')),
]
