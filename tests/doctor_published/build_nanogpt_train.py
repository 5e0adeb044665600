# Mirrors: karpathy/build-nanogpt, train_gpt2.py (DataLoaderLite, the training loop, the validation pass and the
# sampling pass), snapshot at commit 6104ab1 (2024-06-17), the commit that last changed the file.
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: token shards read by a lite loader (no DataLoader) that hands out consecutive (B, T) windows and wraps
# around; a GPT returning (logits, loss) with no dropout; AdamW; a step-counted loop: every few steps, eval mode,
# the val loader reset, under no_grad a fixed number of validation batches whose losses are divided by that number
# and added as detached tensors, then a sampling pass in eval mode under no_grad (top-k from softmax); then train
# mode, zero_grad, K micro-steps (autocast forward, loss / K, a detached running sum, backward), clipping to 1.0,
# the lr of every param group set by hand (warmup, then cosine to a floor), optimizer.step. Shrunk: random token
# streams (vocab 32; 4,096 train, 1,024 val tokens), one block of width 16, B=4, T=16, 2 micro-steps (not 64),
# 8 steps with validation every 4 (not 19,073 and 250), bfloat16 autocast on the CPU; no HellaSwag, no DDP.
# Added: `with watch(...)`, given the two token streams.
import math

import torch
from torch import nn
from torch.nn import functional as F


class LiteLoader:
    """Consecutive (B, T) windows of a token stream; wraps to the start when the next one would run past it."""

    def __init__(self, tokens, B, T):
        self.tokens, self.B, self.T = tokens, B, T
        self.reset()

    def reset(self):
        self.position = 0

    def next_batch(self):
        B, T = self.B, self.T
        chunk = self.tokens[self.position:self.position + B * T + 1]
        x, y = chunk[:-1].view(B, T), chunk[1:].view(B, T)
        self.position += B * T
        if self.position + B * T + 1 > len(self.tokens):
            self.reset()
        return x, y


class TinyGPT(nn.Module):
    """Token and position embeddings, one pre-norm causal attention + MLP block, a tied head."""

    def __init__(self, vocab=32, context=16, width=16):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, width), nn.Embedding(context, width)
        self.ln1, self.ln2, self.ln_f = nn.LayerNorm(width), nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, idx, targets=None):
        h = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        q, k, v = self.qkv(self.ln1(h)).split(h.shape[-1], dim=2)
        h = h + self.proj(F.scaled_dot_product_attention(q[:, None], k[:, None], v[:, None], is_causal=True)[:, 0])
        h = h + self.mlp(self.ln2(h))
        logits = self.head(self.ln_f(h))
        loss = None if targets is None else F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


def main(watch):
    torch.manual_seed(1337)
    g = torch.Generator().manual_seed(0)
    streams = {"train": torch.randint(0, 32, (4096,), generator=g), "val": torch.randint(0, 32, (1024,), generator=g)}
    B, T, grad_accum_steps, max_steps, warmup_steps = 4, 16, 2, 8, 2
    max_lr, min_lr = 6e-4 * 10, 6e-5 * 10
    train_loader, val_loader = LiteLoader(streams["train"], B, T), LiteLoader(streams["val"], B, T)
    model = TinyGPT()
    optimizer = torch.optim.AdamW(model.parameters(), lr=max_lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)

    def get_lr(it):
        if it < warmup_steps:
            return max_lr * (it + 1) / warmup_steps
        ratio = (it - warmup_steps) / (max_steps - warmup_steps)
        return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (max_lr - min_lr)

    with watch(model, train_data=streams["train"], val_data=streams["val"]):
        for step in range(max_steps):
            last_step = step == max_steps - 1
            if step % 4 == 0 or last_step:
                model.eval()
                val_loader.reset()
                with torch.no_grad():
                    val_loss_accum, val_loss_steps = 0.0, 3
                    for _ in range(val_loss_steps):
                        x, y = val_loader.next_batch()
                        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
                            logits, loss = model(x, y)
                        val_loss_accum += (loss / val_loss_steps).detach()
                print(f"validation loss: {val_loss_accum.item():.4f}")
            if step > 0 and (step % 4 == 0 or last_step):
                model.eval()
                tokens = torch.zeros(2, 1, dtype=torch.long)
                sample_rng = torch.Generator().manual_seed(42)
                while tokens.size(1) < 8:
                    with torch.no_grad():
                        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
                            logits, _ = model(tokens)
                        probs = F.softmax(logits[:, -1, :].float(), dim=-1)
                        top_p, top_i = torch.topk(probs, 5, dim=-1)
                        pick = torch.gather(top_i, -1, torch.multinomial(top_p, 1, generator=sample_rng))
                        tokens = torch.cat((tokens, pick), dim=1)
            model.train()
            optimizer.zero_grad()
            loss_accum = 0.0
            for micro_step in range(grad_accum_steps):
                x, y = train_loader.next_batch()
                with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
                    logits, loss = model(x, y)
                loss = loss / grad_accum_steps
                loss_accum += loss.detach()
                loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            lr = get_lr(step)
            for param_group in optimizer.param_groups:
                param_group["lr"] = lr
            optimizer.step()
            print(f"step {step} | loss {loss_accum.item():.6f} | lr {lr:.4e} | norm {norm:.4f}")
    return [model, optimizer]


from tests.doctor_published import variant  # noqa: E402

VARIANTS = [
    variant("micro_step_loss_not_divided", "unscaled_accumulation",
            ("                loss = loss / grad_accum_steps\n", "")),
    variant("validation_without_no_grad", "missing_no_grad",
            ("                with torch.no_grad():\n                    val_loss_accum, val_loss_steps = 0.0, 3\n",
             "                if True:\n                    val_loss_accum, val_loss_steps = 0.0, 3\n")),
    variant("zero_grad_inside_the_micro_steps", "zero_grad_after_backward",
            ("                loss.backward()\n", "                loss.backward()\n                optimizer.zero_grad()\n")),
    variant("validation_from_the_training_stream", "data_leakage",
            ('"val": torch.randint(0, 32, (1024,), generator=g)}', '"val": None}\n    streams["val"] = streams["train"][:1024]')),
]
