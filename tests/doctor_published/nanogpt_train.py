# Mirrors: karpathy/nanoGPT, train.py and model.py (and data/shakespeare_char/prepare.py for the split), snapshot at
# commit 3adf61e154c3 (2025-11-12); the three files last changed in dc81cb36 (2024-12-09).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: a character-level text split 90/10 into two uint16 token streams, sampled at random offsets by a batch
# function (no DataLoader); a GPT (pre-norm blocks, causal scaled-dot-product attention, GELU MLP, tied embedding,
# N(0, 0.02) init with scaled residual projections; the model returns (logits, loss)); AdamW over two parameter
# groups (2-D tensors decayed); a while-loop that sets each group's lr by hand (linear warmup, then cosine to a
# floor), evaluates every few iterations (a function under @torch.no_grad() that switches to eval mode, averages
# a few batches per split into a tensor and switches back), runs K micro-steps (forward under an autocast
# context, loss divided by K, the next batch fetched before backward, backward through a GradScaler), unscales
# and clips, steps through the scaler, updates it, zeroes with set_to_none, and logs loss.item() x K.
# Shrunk: a stand-in text (~2,700 characters) kept in memory instead of train.bin/val.bin, 2 layers of width 16
# (not 12 of 768), context 32, batch 4, 4 micro-steps (not 40), 6 iterations, evaluation every 3 with 2 batches
# per split; the scaler is disabled (CPU); no checkpoint files, no compile, no DDP.
# Added: `with watch(...)`, given the two token streams.
import math
import time
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from tests.doctor_published.standins import text_lines


@dataclass
class Shape:
    context: int = 1024
    vocab: int = 50304
    depth: int = 12
    heads: int = 12
    width: int = 768
    p_drop: float = 0.0
    biases: bool = True


class MaskedAttention(nn.Module):
    def __init__(self, s: Shape):
        super().__init__()
        self.heads, self.p_drop = s.heads, s.p_drop
        self.qkv = nn.Linear(s.width, 3 * s.width, bias=s.biases)
        self.out_proj = nn.Linear(s.width, s.width, bias=s.biases)
        self.after = nn.Dropout(s.p_drop)

    def forward(self, x):
        n, t, w = x.shape
        q, k, v = (part.reshape(n, t, self.heads, w // self.heads).transpose(1, 2)
                   for part in self.qkv(x).chunk(3, dim=-1))
        mixed = F.scaled_dot_product_attention(q, k, v, dropout_p=self.p_drop if self.training else 0.0,
                                               is_causal=True)
        return self.after(self.out_proj(mixed.transpose(1, 2).reshape(n, t, w)))


class FeedForward(nn.Module):
    def __init__(self, s: Shape):
        super().__init__()
        self.up = nn.Linear(s.width, 4 * s.width, bias=s.biases)
        self.out_proj = nn.Linear(4 * s.width, s.width, bias=s.biases)
        self.after = nn.Dropout(s.p_drop)

    def forward(self, x):
        return self.after(self.out_proj(F.gelu(self.up(x))))


class Layer(nn.Module):
    def __init__(self, s: Shape):
        super().__init__()
        self.norm_a, self.attend = nn.LayerNorm(s.width, bias=s.biases), MaskedAttention(s)
        self.norm_b, self.think = nn.LayerNorm(s.width, bias=s.biases), FeedForward(s)

    def forward(self, x):
        x = x + self.attend(self.norm_a(x))
        return x + self.think(self.norm_b(x))


class CharGPT(nn.Module):
    def __init__(self, s: Shape):
        super().__init__()
        self.shape = s
        self.tokens = nn.Embedding(s.vocab, s.width)
        self.places = nn.Embedding(s.context, s.width)
        self.drop = nn.Dropout(s.p_drop)
        self.layers = nn.ModuleList(Layer(s) for _ in range(s.depth))
        self.final_norm = nn.LayerNorm(s.width, bias=s.biases)
        self.unembed = nn.Linear(s.width, s.vocab, bias=False)
        self.tokens.weight = self.unembed.weight          # one matrix for both ends
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, 0.0, 0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
        for name, p in self.named_parameters():
            if name.endswith("out_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * s.depth))

    def forward(self, ids, targets=None):
        t = ids.size(1)
        assert t <= self.shape.context, f"{t} tokens do not fit a context of {self.shape.context}"
        x = self.drop(self.tokens(ids) + self.places(torch.arange(t, device=ids.device)))
        for layer in self.layers:
            x = layer(x)
        x = self.final_norm(x)
        if targets is None:
            return self.unembed(x[:, -1:, :]), None
        logits = self.unembed(x)
        return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-1)

    def make_optimizer(self, decay, lr, betas, device_type):
        trainable = [p for p in self.parameters() if p.requires_grad]
        groups = [{"params": [p for p in trainable if p.dim() >= 2], "weight_decay": decay},
                  {"params": [p for p in trainable if p.dim() < 2], "weight_decay": 0.0}]
        extra = {"fused": True} if device_type == "cuda" else {}
        return torch.optim.AdamW(groups, lr=lr, betas=betas, **extra)


def character_streams():
    """The stand-in text as characters: a sorted vocabulary, the first 90% for training, the rest for validation."""
    text = "".join(text_lines("train.txt") + text_lines("valid.txt") + text_lines("test.txt"))
    alphabet = sorted(set(text))
    code = {ch: i for i, ch in enumerate(alphabet)}
    cut = int(len(text) * 0.9)
    streams = {"train": np.array([code[ch] for ch in text[:cut]], dtype=np.uint16),
               "val": np.array([code[ch] for ch in text[cut:]], dtype=np.uint16)}
    return streams, len(alphabet)


def main(watch):
    eval_every, log_every, eval_batches = 3, 1, 2
    accumulate = 4
    micro_batch, context = 4, 32
    depth, heads, width = 2, 2, 16
    p_drop = 0.0
    biases = False
    peak_lr, floor_lr = 6e-4, 6e-5
    last_iter, warmup, decay_until = 6, 2, 6
    decay, betas = 0.1, (0.9, 0.95)
    clip = 1.0
    anneal = True
    device = "cpu"
    half = "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"

    torch.manual_seed(1337)
    device_type = "cuda" if device.startswith("cuda") else "cpu"
    amp = nullcontext() if device_type == "cpu" else torch.autocast(device_type, dtype=getattr(torch, half))
    streams, vocab = character_streams()

    def sample(split):
        tokens = streams[split]
        starts = torch.randint(len(tokens) - context, (micro_batch,))
        x = torch.stack([torch.from_numpy(tokens[s:s + context].astype(np.int64)) for s in starts])
        y = torch.stack([torch.from_numpy(tokens[s + 1:s + 1 + context].astype(np.int64)) for s in starts])
        return x.to(device), y.to(device)

    gpt = CharGPT(Shape(context=context, vocab=vocab, depth=depth, heads=heads, width=width, p_drop=p_drop,
                        biases=biases)).to(device)
    scaler = torch.amp.GradScaler(enabled=half == "float16" and device_type == "cuda")
    adamw = gpt.make_optimizer(decay, peak_lr, betas, device_type)

    @torch.no_grad()
    def measure():
        gpt.eval()
        means = {}
        for split in ("train", "val"):
            values = torch.zeros(eval_batches)
            for b in range(eval_batches):
                x, y = sample(split)
                with amp:
                    _, loss = gpt(x, y)
                values[b] = loss.item()
            means[split] = values.mean()
        gpt.train()
        return means

    def lr_at(it):
        if it < warmup:
            return peak_lr * (it + 1) / (warmup + 1)
        if it > decay_until:
            return floor_lr
        progress = (it - warmup) / (decay_until - warmup)
        return floor_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (peak_lr - floor_lr)

    it, best_val = 0, float("inf")
    with watch(gpt, adamw, train_data=streams["train"], val_data=streams["val"]):
        x, y = sample("train")
        tic = time.time()
        while True:
            lr = lr_at(it) if anneal else peak_lr
            for group in adamw.param_groups:
                group["lr"] = lr
            if it % eval_every == 0:
                means = measure()
                print(f"iteration {it}: train {means['train']:.4f}, val {means['val']:.4f}")
                best_val = min(best_val, means["val"])
            for _ in range(accumulate):
                with amp:
                    _, loss = gpt(x, y)
                    loss = loss / accumulate
                x, y = sample("train")
                scaler.scale(loss).backward()
            if clip != 0.0:
                scaler.unscale_(adamw)
                nn.utils.clip_grad_norm_(gpt.parameters(), clip)
            scaler.step(adamw)
            scaler.update()
            adamw.zero_grad(set_to_none=True)
            toc = time.time()
            if it % log_every == 0:
                print(f"iteration {it}: loss {loss.item() * accumulate:.4f} in {(toc - tic) * 1e3:.1f} ms")
            tic = toc
            it += 1
            if it > last_iter:
                break
    return [gpt, adamw]


from tests.doctor_published import variant  # noqa: E402

CLIP_BLOCK = """\
            if clip != 0.0:
                scaler.unscale_(adamw)
                nn.utils.clip_grad_norm_(gpt.parameters(), clip)
"""
VARIANTS = [
    variant("shakespeare_char_config", set(), ("    accumulate = 4\n", "    accumulate = 1\n"),
            ("    p_drop = 0.0\n", "    p_drop = 0.2\n")),
    variant("loss_not_divided", "unscaled_accumulation", ("                    loss = loss / accumulate\n", "")),
    variant("zero_grad_inside_micro_steps", "zero_grad_after_backward",
            ("            adamw.zero_grad(set_to_none=True)\n", ""),
            ('                x, y = sample("train")\n',
             '                x, y = sample("train")\n                adamw.zero_grad(set_to_none=True)\n')),
    variant("no_zero_grad", "missing_zero_grad", ("            adamw.zero_grad(set_to_none=True)\n", "")),
    variant("estimate_loss_with_gradients", "missing_no_grad", ("    @torch.no_grad()\n", "")),
    variant("estimate_loss_in_train_mode_with_dropout", "eval_in_train_mode",
            ("    p_drop = 0.0\n", "    p_drop = 0.2\n"), ("        gpt.eval()\n", "")),
    variant("softmax_before_the_loss", "softmax_before_cross_entropy",
            ("        logits = self.unembed(x)\n", "        logits = F.softmax(self.unembed(x), dim=-1)\n")),
    variant("clip_before_the_micro_steps", "clip_before_backward",
            (CLIP_BLOCK, ""),
            ("            for _ in range(accumulate):\n",
             "            nn.utils.clip_grad_norm_(gpt.parameters(), clip)\n"
             "            for _ in range(accumulate):\n")),
    variant("validation_split_overlaps_training", "data_leakage",
            ('"val": np.array([code[ch] for ch in text[cut:]]',
             '"val": np.array([code[ch] for ch in text[cut - 270:]]')),
]
