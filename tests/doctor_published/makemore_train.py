# Mirrors: karpathy/makemore, makemore.py (the __main__ training loop and evaluate), snapshot at commit 988aa59e
# (2022-11-20); makemore.py last changed in bf38625 (2022-09-15).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: a list of distinct words split by one randperm into train and test words (the test words the last ones), a character
# dataset whose (x, y) pairs put a start token before the word and mark the targets past its end with -1 (ignored
# by the loss); a small causal transformer with no dropout that returns (logits, loss); AdamW with betas (0.9,
# 0.99); an endless loader (a RandomSampler with replacement) drawn from once per step; per step: forward, then
# model.zero_grad(set_to_none=True), backward, step, the loss printed with .item(); every few steps an evaluation
# of train and test loss under inference_mode in eval mode (model.train() after it) that averages the losses of
# at most max_batches + 1 shuffled batches, all full; sampling under no_grad. Shrunk: 240 stand-in words of 3 to
# 6 letters over 8 letters (48 test words), one block of width 16 and 2 heads, batch 16, 30 steps with an
# evaluation every 10 (batches of 16, max_batches 2) and a sample every 15. Added: `with watch(...)` around the
# steps.
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset, RandomSampler


def stand_in_words(count=240, seed=7):
    """Distinct pronounceable stand-in names (as names.txt has no repeats): consonant-vowel pairs, 8 letters."""
    g = torch.Generator().manual_seed(seed)
    words = []
    while len(words) < count:
        pairs = int(torch.randint(2, 4, (1,), generator=g))
        word = "".join("bdkmr"[int(torch.randint(0, 5, (1,), generator=g))] +
                       "aei"[int(torch.randint(0, 3, (1,), generator=g))] for _ in range(pairs))
        word = word[:int(torch.randint(3, len(word) + 1, (1,), generator=g))]
        if word not in words:
            words.append(word)
    return words


class NameSet(Dataset):
    def __init__(self, words, letters, longest):
        self.words, self.longest = words, longest
        self.code = {ch: i + 1 for i, ch in enumerate(letters)}

    def __len__(self):
        return len(self.words)

    def vocab(self):
        return len(self.code) + 1

    def __getitem__(self, k):
        ids = torch.tensor([self.code[ch] for ch in self.words[k]], dtype=torch.long)
        x = torch.zeros(self.longest + 1, dtype=torch.long)
        y = torch.zeros(self.longest + 1, dtype=torch.long)
        x[1:1 + len(ids)] = ids
        y[:len(ids)] = ids
        y[len(ids) + 1:] = -1
        return x, y


def split_words(words):
    letters = sorted(set("".join(words)))
    longest = max(len(w) for w in words)
    n_test = min(48, int(len(words) * 0.2))
    order = torch.randperm(len(words)).tolist()
    train_words = [words[i] for i in order[:-n_test]]
    test_words = [words[i] for i in order[-n_test:]]
    return NameSet(train_words, letters, longest), NameSet(test_words, letters, longest)


class EndlessLoader:
    def __init__(self, dataset, **kwargs):
        sampler = RandomSampler(dataset, replacement=True, num_samples=10 ** 9)
        self.loader = DataLoader(dataset, sampler=sampler, **kwargs)
        self.it = iter(self.loader)

    def next(self):
        try:
            return next(self.it)
        except StopIteration:
            self.it = iter(self.loader)
            return next(self.it)


class CausalBlock(nn.Module):
    def __init__(self, width, heads, span):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
        self.register_buffer("mask", torch.tril(torch.ones(span, span)).view(1, 1, span, span))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / (c // self.heads) ** 0.5
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf")).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln2(x))


class TinyTransformer(nn.Module):
    def __init__(self, vocab, span, width=16, heads=2, layers=1):
        super().__init__()
        self.span = span
        self.tok, self.pos = nn.Embedding(vocab, width), nn.Embedding(span, width)
        self.blocks = nn.ModuleList(CausalBlock(width, heads, span) for _ in range(layers))
        self.ln_f, self.head = nn.LayerNorm(width), nn.Linear(width, vocab, bias=False)

    def forward(self, idx, targets=None):
        x = self.tok(idx) + self.pos(torch.arange(idx.size(1)))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


@torch.no_grad()
def generate(model, idx, new_tokens):
    for _ in range(new_tokens):
        logits, _ = model(idx[:, -model.span:])
        nxt = torch.multinomial(logits[:, -1, :].softmax(-1), num_samples=1)
        idx = torch.cat((idx, nxt), dim=1)
    return idx


@torch.inference_mode()
def evaluate(model, dataset, batch_size=50, max_batches=None):
    model.eval()
    loader = DataLoader(dataset, shuffle=True, batch_size=batch_size, num_workers=0)
    losses = []
    for i, (x, y) in enumerate(loader):
        _, loss = model(x, y)
        losses.append(loss.item())
        if max_batches is not None and i >= max_batches:
            break
    mean_loss = torch.tensor(losses).mean().item()
    model.train()
    return mean_loss


def main(watch):
    torch.manual_seed(3407)
    train_set, test_set = split_words(stand_in_words())
    model = TinyTransformer(train_set.vocab(), train_set.longest + 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.01, betas=(0.9, 0.99), eps=1e-8)
    batches = EndlessLoader(train_set, batch_size=16, num_workers=0)
    max_steps, best_loss, step = 30, None, 0
    with watch(model):
        while True:
            x, y = batches.next()
            logits, loss = model(x, y)
            model.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if step % 10 == 0:
                print(f"step {step} | loss {loss.item():.4f}")
            if step > 0 and step % 10 == 0:
                train_loss = evaluate(model, train_set, batch_size=16, max_batches=2)
                test_loss = evaluate(model, test_set, batch_size=16, max_batches=2)
                print(f"step {step} train loss: {train_loss} test loss: {test_loss}")
                if best_loss is None or test_loss < best_loss:
                    best_loss = test_loss
            if step > 0 and step % 15 == 0:
                print(generate(model, torch.zeros(4, 1, dtype=torch.long), 6).tolist())
            step += 1
            if step >= max_steps:
                break
    return [model, optimizer]


from tests.doctor_published import variant  # noqa: E402

VARIANTS = [
    variant("evaluate_without_inference_mode", "missing_no_grad", ("@torch.inference_mode()\n", "")),
    variant("zero_grad_after_backward", "zero_grad_after_backward",
            ("            model.zero_grad(set_to_none=True)\n            loss.backward()\n",
             "            loss.backward()\n            model.zero_grad(set_to_none=True)\n")),
    variant("dropout_added_no_train_reset", "missing_train_switch",
            ("        self.ln_f, self.head = nn.LayerNorm(width), nn.Linear(width, vocab, bias=False)\n",
             "        self.ln_f, self.head = nn.LayerNorm(width), nn.Linear(width, vocab, bias=False)\n"
             "        self.drop = nn.Dropout(0.1)\n"),
            ("        x = self.tok(idx) + self.pos(torch.arange(idx.size(1)))\n",
             "        x = self.drop(self.tok(idx) + self.pos(torch.arange(idx.size(1))))\n"),
            ("    model.train()\n    return mean_loss", "    return mean_loss")),
    variant("test_words_also_trained_on", "data_leakage",
            ("    train_words = [words[i] for i in order[:-n_test]]", "    train_words = [words[i] for i in order]")),
    variant("eval_batch_leaves_short_last_batch", "mean_of_batch_means",
            ("test_loss = evaluate(model, test_set, batch_size=16, max_batches=2)",
             "test_loss = evaluate(model, test_set, batch_size=20, max_batches=2)")),
]
