# Mirrors: pytorch/tutorials, intermediate_source/seq2seq_translation_tutorial.py at commit 803c1b1273a4, the
# commit the snapshot index holds, retrieved 2026-11-23 (the index records no commit date; later versions batch
# the data).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: sentence pairs filtered by length and by an English prefix, two vocabularies with start/end tokens; a GRU
# encoder and an attention GRU decoder (dropout 0.1) run one token at a time, each with its own SGD optimizer;
# per pair both optimizers are zeroed, the encoder outputs are written into a fixed-size buffer, the decoder runs
# with teacher forcing drawn at random (else it feeds back its own detached argmax and stops at the end token),
# the per-token NLL losses are summed into one backward, both optimizers step, and loss.item() / target length is
# returned; the pairs are drawn up front; printed and plotted averages; translation of random pairs under no_grad.
# Shrunk: synthetic pairs (8 source words, "we see ..." targets), longest sentence 6 (not 10), width 16 (not 256),
# 60 iterations (not 75,000), 3 random translations; no plots. Added: `with watch(...)` around training and
# translation.
# Real bug, in the evaluation function: the models are never put in eval mode, so the decoder's dropout (p=0.1)
# stays on while translating (the tutorial translates right after training, in train mode).
import math
import random
import time

import torch
from torch import nn
from torch.nn import functional as F

START, END = 0, 1
LONGEST = 6
FORCING = 0.5
PREFIXES = ("we see ", "you see ")


class Vocab:
    """Words <-> ids for one language, with the start and end tokens first; counts every word seen."""

    def __init__(self, language: str):
        self.language = language
        self.ids: dict[str, int] = {}
        self.seen: dict[str, int] = {}
        self.words = {START: "<start>", END: "<end>"}

    @property
    def size(self) -> int:
        return len(self.words)

    def add(self, sentence: str) -> None:
        for word in sentence.split(" "):
            if word in self.ids:
                self.seen[word] += 1
            else:
                self.ids[word], self.seen[word] = len(self.words), 1
                self.words[self.ids[word]] = word


def toy_pairs(count: int = 40, seed: int = 3) -> list[list[str]]:
    """Stand-in for the translation file (already reversed): 's5 s2 s7' -> 'we see t7 t2 t5'."""
    g = torch.Generator().manual_seed(seed)
    found = []
    for _ in range(count):
        n = int(torch.randint(2, 4, (1,), generator=g))
        ids = torch.randint(0, 8, (n,), generator=g).tolist()
        found.append([" ".join(f"s{i}" for i in ids), "we see " + " ".join(f"t{i}" for i in ids[::-1])])
    return found


def usable(pair: list[str]) -> bool:
    return all(len(side.split(" ")) < LONGEST for side in pair) and pair[1].startswith(PREFIXES)


def load_languages():
    pairs = [p for p in toy_pairs() if usable(p)]
    source, target = Vocab("fra"), Vocab("eng")
    for src, tgt in pairs:
        source.add(src)
        target.add(tgt)
    return source, target, pairs


class GruEncoder(nn.Module):
    def __init__(self, vocab: int, width: int):
        super().__init__()
        self.width = width
        self.embed = nn.Embedding(vocab, width)
        self.gru = nn.GRU(width, width)

    def forward(self, token, state):
        return self.gru(self.embed(token).view(1, 1, -1), state)

    def start_state(self):
        return torch.zeros(1, 1, self.width)


class AttentionDecoder(nn.Module):
    """Attention over a fixed number of encoder slots, computed from the embedded token and the state."""

    def __init__(self, width: int, vocab: int, p_drop: float = 0.1, slots: int = LONGEST):
        super().__init__()
        self.width = width
        self.embed = nn.Embedding(vocab, width)
        self.score = nn.Linear(2 * width, slots)
        self.merge = nn.Linear(2 * width, width)
        self.drop = nn.Dropout(p_drop)
        self.gru = nn.GRU(width, width)
        self.out = nn.Linear(width, vocab)

    def forward(self, token, state, memory):
        e = self.drop(self.embed(token).view(1, 1, -1))
        focus = F.softmax(self.score(torch.cat((e[0], state[0]), 1)), dim=1)
        context = torch.bmm(focus.unsqueeze(0), memory.unsqueeze(0))
        x = F.relu(self.merge(torch.cat((e[0], context[0]), 1)).unsqueeze(0))
        x, state = self.gru(x, state)
        return F.log_softmax(self.out(x[0]), dim=1), state, focus


def main(watch):
    random.seed(0)
    torch.manual_seed(0)
    source, target, pairs = load_languages()

    def as_ids(vocab, sentence):
        return torch.tensor([vocab.ids[w] for w in sentence.split(" ")] + [END], dtype=torch.long).view(-1, 1)

    def learn_pair(src, tgt, enc, dec, enc_opt, dec_opt, nll, slots=LONGEST):
        state = enc.start_state()
        enc_opt.zero_grad()
        dec_opt.zero_grad()
        memory = torch.zeros(slots, enc.width)
        loss = 0
        for i in range(src.size(0)):
            out, state = enc(src[i], state)
            memory[i] = out[0, 0]
        token = torch.tensor([[START]])
        forced = random.random() < FORCING
        for j in range(tgt.size(0)):
            log_p, state, _ = dec(token, state, memory)
            if forced:
                loss += nll(log_p, tgt[j])
                token = tgt[j]
            else:
                token = log_p.topk(1)[1].squeeze().detach()
                loss += nll(log_p, tgt[j])
                if token.item() == END:
                    break
        loss.backward()
        enc_opt.step()
        dec_opt.step()
        return loss.item() / tgt.size(0)

    def clock(seconds):
        return f"{math.floor(seconds / 60)}m {seconds % 60:.0f}s"

    def learn(enc, dec, iterations, print_every=1000, plot_every=100, lr=0.01):
        tic, curve = time.time(), []
        since_print = since_plot = 0
        enc_opt = torch.optim.SGD(enc.parameters(), lr=lr)
        dec_opt = torch.optim.SGD(dec.parameters(), lr=lr)
        drawn = [(as_ids(source, a), as_ids(target, b)) for a, b in (random.choice(pairs) for _ in range(iterations))]
        nll = nn.NLLLoss()
        for it, (src, tgt) in enumerate(drawn, start=1):
            value = learn_pair(src, tgt, enc, dec, enc_opt, dec_opt, nll)
            since_print += value
            since_plot += value
            if it % print_every == 0:
                print(f"{clock(time.time() - tic)} iteration {it} ({100 * it / iterations:.0f}%) "
                      f"loss {since_print / print_every:.4f}")
                since_print = 0
            if it % plot_every == 0:
                curve.append(since_plot / plot_every)
                since_plot = 0
        return enc_opt, dec_opt

    def translate(enc, dec, sentence, slots=LONGEST):
        with torch.no_grad():
            src = as_ids(source, sentence)
            state = enc.start_state()
            memory = torch.zeros(slots, enc.width)
            for i in range(src.size(0)):
                out, state = enc(src[i], state)
                memory[i] += out[0, 0]
            token = torch.tensor([[START]])
            words, focus_map = [], torch.zeros(slots, slots)
            for j in range(slots):
                log_p, state, focus = dec(token, state, memory)
                focus_map[j] = focus.data
                best = log_p.data.topk(1)[1]
                if best.item() == END:
                    words.append("<end>")
                    break
                words.append(target.words[best.item()])
                token = best.squeeze().detach()
            return words, focus_map[:j + 1]

    def spot_check(enc, dec, n=10):
        for _ in range(n):
            src, tgt = random.choice(pairs)
            words, _ = translate(enc, dec, src)
            print(f"{src} -> {' '.join(words)} (expected {tgt})")

    width = 16
    enc = GruEncoder(source.size, width).to("cpu")
    dec = AttentionDecoder(width, target.size, p_drop=0.1).to("cpu")
    with watch([enc, dec]):
        optimizers = learn(enc, dec, 60, print_every=20, plot_every=10)
        spot_check(enc, dec, n=3)
    return [enc, dec, *optimizers]


from tests.doctor_published import dedent, variant  # noqa: E402

REAL = {"eval_in_train_mode": "seq2seq_translation_tutorial.py, the evaluation function: neither model is put in "
                              "eval mode, so the decoder's dropout (p=0.1) is on while translating"}
TRANSLATE = "    def translate(enc, dec, sentence, slots=LONGEST):\n"
TRANSLATE_BODY = """\
            src = as_ids(source, sentence)
            state = enc.start_state()
            memory = torch.zeros(slots, enc.width)
            for i in range(src.size(0)):
                out, state = enc(src[i], state)
                memory[i] += out[0, 0]
            token = torch.tensor([[START]])
            words, focus_map = [], torch.zeros(slots, slots)
            for j in range(slots):
                log_p, state, focus = dec(token, state, memory)
                focus_map[j] = focus.data
                best = log_p.data.topk(1)[1]
                if best.item() == END:
                    words.append("<end>")
                    break
                words.append(target.words[best.item()])
                token = best.squeeze().detach()
            return words, focus_map[:j + 1]
"""
VARIANTS = [
    variant("evaluate_in_eval_mode", set(),
            (TRANSLATE, TRANSLATE + "        enc.eval()\n        dec.eval()\n"), fixes={"eval_in_train_mode"}),
    variant("no_encoder_zero_grad", "missing_zero_grad", ("        enc_opt.zero_grad()\n", "")),
    variant("loss_tensor_returned", "graph_attached_logging",
            ("        return loss.item() / tgt.size(0)\n", "        return loss / tgt.size(0)\n")),
    variant("evaluate_without_no_grad", "missing_no_grad",
            ("        with torch.no_grad():\n" + TRANSLATE_BODY, dedent(TRANSLATE_BODY))),
    variant("clip_after_the_steps", "clip_after_step",
            ("        dec_opt.step()\n",
             "        dec_opt.step()\n        nn.utils.clip_grad_norm_(dec.parameters(), 1.0)\n")),
]
