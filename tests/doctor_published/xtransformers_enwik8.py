# Mirrors: lucidrains/x-transformers, train_enwik8.py (train()), with x_transformers/autoregressive_wrapper.py
# (AutoregressiveWrapper: forward's next-token cross-entropy, generate under @torch.no_grad() and eval_decorator),
# snapshot at commit 9252ed783802 (2026-08-21); train_enwik8.py last changed in ed35c2f69c55 (2026-04-13).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: byte-level enwik8 (the first bytes split once into a training and a validation stream, no overlap); a
# TextSamplerDataset whose __getitem__ ignores the index and cuts a random window of seq_len + 1 bytes, with
# __len__ = len(data) // seq_len; DataLoaders with drop_last=True wrapped in an endless cycle(); a decoder-only
# transformer over 256 tokens (no dropout, as published: x-transformers' Decoder defaults to none) inside the
# AutoregressiveWrapper, whose forward returns the mean next-token cross-entropy; Adam(lr) over all parameters;
# Accelerator().prepare(model, optim, loaders); per iteration i in range(num_batches): model.train(), then
# gradient_accumulate_every micro-batches each `accelerator.backward(loss / gradient_accumulate_every)` (equal
# micro-batches, so 1/K is the right weight), a print and a wandb.log of the LAST micro-batch's loss.item(),
# accelerator.clip_grad_norm_(parameters, 0.5), optim.step(), optim.zero_grad() (after the step: the first
# iteration's backward starts from no gradients); every validate_every iterations (i = 0 included) model.eval() and,
# under torch.no_grad(), the loss of ONE validation batch, printed and logged; every generate_every iterations
# model.eval(), a random validation window (random.choice on the dataset) as the prime, model.generate(...)
# (no_grad, eval_decorator restores the mode it found: eval) and the decoded text printed. No schedule, no AMP
# (Accelerator's default mixed_precision "no"), no checkpoints.
# The published loop has none of the registry's bugs.
# Shrunk: 19,000 synthetic "enwik8" bytes (XML-ish markup around words drawn from a small vocabulary; not 95e6
# bytes of Wikipedia) split at 18,000 (not 90e6); seq_len 32 (not 1024), batch_size 4 and gradient_accumulate_every
# 4 as published, 24 iterations (not 1e5), validate_every 6 (not 100), generate_every 12 (not 500), generate_length
# 12 (not seq_len); a decoder of dim 32, depth 2, 2 heads (not 512, 6, 8) with a learned absolute position
# embedding and pre-norm blocks standing in for polar_pos_emb / pre_and_post_norm, so generate keeps the last
# max_seq_len tokens and has no kv cache; learning_rate 3e-3 (not 1e-4, which would not move in 24 updates); seeds
# fixed; the CPU; tqdm, fire and wandb (disabled mode) are stand-ins that print or keep values in memory; the
# Accelerator is a one-process stand-in (prepare hands objects back, backward calls loss.backward(),
# clip_grad_norm_ calls torch's).
# Added: `with watch(model):` around the training iterations.
import math
import random

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset


# --- stand-ins for accelerate, wandb and tqdm ------------------------------------------------------------------

class Accelerator:
    def __init__(self, cpu=False):
        self.device = torch.device("cpu")
        self.is_main_process = True

    def prepare(self, *objects):
        return objects

    def backward(self, loss, **kwargs):
        loss.backward(**kwargs)

    def clip_grad_norm_(self, parameters, max_norm, norm_type=2):
        return torch.nn.utils.clip_grad_norm_(parameters, max_norm, norm_type=norm_type)


class _Run:
    name = None


class wandb:  # noqa: N801 - stands in for the module, in "disabled" mode: logs are kept, nothing is sent
    run = _Run()
    history = []

    @staticmethod
    def init(project=None, mode=None):
        wandb.history = []

    @staticmethod
    def log(values):
        wandb.history.append(values)


class tqdm:  # noqa: N801
    @staticmethod
    def tqdm(iterable, mininterval=10.0, desc=None):
        return iterable


# --- helpers, as in the script --------------------------------------------------------------------------------

def exists(v):
    return v is not None


def default(v, d):
    return v if exists(v) else d


def cycle(loader):
    while True:
        for data in loader:
            yield data


def decode_token(token):
    return str(chr(max(32, token)))


def decode_tokens(tokens):
    return "".join(map(decode_token, tokens))


def synthetic_enwik8(count=19_000, seed=0):
    """Stand-in for the first bytes of enwik8: wiki markup around words from a small vocabulary, as uint8."""
    rng = random.Random(seed)
    words = ["the", "of", "and", "in", "was", "is", "for", "on", "as", "with", "by", "city", "river", "king",
             "war", "music", "year", "first", "born", "called", "[[link]]", "'''name'''", "&quot;", "{{cite}}"]
    out = []
    while sum(map(len, out)) < count:
        sentence = " ".join(rng.choice(words) for _ in range(rng.randint(4, 12)))
        out.append(f"<text>{sentence.capitalize()}.</text>\n" if rng.random() < 0.3 else sentence + ". ")
    return torch.tensor(list("".join(out).encode()[:count]), dtype=torch.uint8)


# --- the model: TransformerWrapper(Decoder) inside the AutoregressiveWrapper --------------------------------------

class Block(nn.Module):
    def __init__(self, dim, heads, attn_dropout=0.0, ff_dropout=0.0):
        super().__init__()
        self.heads = heads
        self.attn_norm, self.ff_norm = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.to_qkv, self.to_out = nn.Linear(dim, 3 * dim, bias=False), nn.Linear(dim, dim)
        self.ff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Dropout(ff_dropout), nn.Linear(4 * dim, dim))
        self.attn_dropout = attn_dropout

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.to_qkv(self.attn_norm(x)).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                  dropout_p=self.attn_dropout if self.training else 0.0)
        x = x + self.to_out(attended.transpose(1, 2).reshape(b, n, d))
        return x + self.ff(self.ff_norm(x))


class Decoder(nn.Module):
    def __init__(self, dim, depth, heads, attn_dropout=0.0, ff_dropout=0.0, **_positional_and_norm_options):
        super().__init__()
        self.dim = dim
        self.layers = nn.ModuleList(Block(dim, heads, attn_dropout, ff_dropout) for _ in range(depth))
        self.final_norm = nn.LayerNorm(dim)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.final_norm(x)


class TransformerWrapper(nn.Module):
    def __init__(self, num_tokens, max_seq_len, attn_layers):
        super().__init__()
        self.max_seq_len = max_seq_len
        self.token_emb = nn.Embedding(num_tokens, attn_layers.dim)
        self.pos_emb = nn.Embedding(max_seq_len, attn_layers.dim)
        self.attn_layers = attn_layers
        self.to_logits = nn.Linear(attn_layers.dim, num_tokens)

    def forward(self, x):
        positions = torch.arange(x.shape[1], device=x.device)
        return self.to_logits(self.attn_layers(self.token_emb(x) + self.pos_emb(positions)))


def eval_decorator(fn):
    def inner(self, *args, **kwargs):
        was_training = self.training
        self.eval()
        out = fn(self, *args, **kwargs)
        self.train(was_training)
        return out
    return inner


class AutoregressiveWrapper(nn.Module):
    def __init__(self, net, ignore_index=-100):
        super().__init__()
        self.net, self.max_seq_len, self.ignore_index = net, net.max_seq_len, ignore_index

    @torch.no_grad()
    @eval_decorator
    def generate(self, prompts, seq_len, temperature=1.0, frac_num_tokens=0.1, cache_kv=True):
        out = prompts[None] if prompts.dim() == 1 else prompts
        for _ in range(seq_len):
            logits = self.net(out[:, -self.max_seq_len:])[:, -1]
            k = math.ceil(frac_num_tokens * logits.shape[-1])
            values, indices = logits.topk(k, dim=-1)
            filtered = torch.full_like(logits, float("-inf")).scatter(1, indices, values)
            sample = torch.multinomial(F.softmax(filtered / temperature, dim=-1), 1)
            out = torch.cat((out, sample), dim=-1)
        generated = out[:, -seq_len:]
        return generated[0] if prompts.dim() == 1 else generated

    def forward(self, x):
        inp, target = x[:, :-1], x[:, 1:]
        logits = self.net(inp)
        return F.cross_entropy(logits.transpose(1, 2), target, ignore_index=self.ignore_index)


# --- the training script ---------------------------------------------------------------------------------------

def train(watch, num_batches=24, batch_size=4, gradient_accumulate_every=4, learning_rate=3e-3, validate_every=6,
          generate_every=12, generate_length=12, seq_len=32, track_experiment_online=False, run_name="baseline",
          cpu=True):
    accelerator = Accelerator(cpu=cpu)
    device = accelerator.device

    generate_length = default(generate_length, seq_len)

    model = TransformerWrapper(num_tokens=256, max_seq_len=seq_len,
                               attn_layers=Decoder(dim=32, depth=2, heads=2, rotary_pos_emb=False,
                                                   polar_pos_emb=True, pre_and_post_norm=True))
    model = AutoregressiveWrapper(model)

    data = synthetic_enwik8()
    train_x, valid_x = data[:18_000], data[18_000:]
    data_train, data_val = train_x.clone(), valid_x.clone()

    class TextSamplerDataset(Dataset):
        def __init__(self, data, seq_len):
            super().__init__()
            self.data, self.seq_len = data, seq_len

        def __getitem__(self, index):
            rand_start = torch.randint(0, self.data.size(0) - self.seq_len - 1, (1,))
            full_seq = self.data[rand_start: rand_start + self.seq_len + 1].long()
            return full_seq.to(device)

        def __len__(self):
            return self.data.size(0) // self.seq_len

    train_dataset = TextSamplerDataset(data_train, seq_len)
    val_dataset = TextSamplerDataset(data_val, seq_len)
    train_loader = cycle(DataLoader(train_dataset, batch_size=batch_size, drop_last=True))
    val_loader = cycle(DataLoader(val_dataset, batch_size=batch_size, drop_last=True))

    optim = torch.optim.Adam(model.parameters(), lr=learning_rate)

    wandb.init(project="enwik8", mode="online" if track_experiment_online else "disabled")
    wandb.run.name = run_name

    model, optim, train_loader, val_loader = accelerator.prepare(model, optim, train_loader, val_loader)

    with watch(model):
        for i in tqdm.tqdm(range(num_batches), mininterval=10.0, desc="training"):
            model.train()

            for _ in range(gradient_accumulate_every):
                loss = model(next(train_loader))
                accelerator.backward(loss / gradient_accumulate_every)

            print(f"training loss: {loss.item()}")
            if accelerator.is_main_process:
                wandb.log(dict(loss=loss.item()))

            accelerator.clip_grad_norm_(model.parameters(), 0.5)
            optim.step()
            optim.zero_grad()

            if i % validate_every == 0:
                model.eval()
                with torch.no_grad():
                    loss = model(next(val_loader))

                    print(f"validation loss: {loss.item()}")
                    if accelerator.is_main_process:
                        wandb.log(dict(valid_loss=loss.item()))

            if i % generate_every == 0:
                model.eval()
                inp = random.choice(val_dataset)[:-1]
                prime = decode_tokens(inp.cpu().numpy())
                print(f"{prime} \n\n {'*' * 100}")

                sample = model.generate(prompts=inp, seq_len=generate_length, cache_kv=True)

                output_str = decode_tokens(sample.cpu().numpy())
                print(output_str)
    return [model, optim]


def main(watch):
    torch.manual_seed(0)
    random.seed(0)
    return train(watch)


from tests.doctor_published import variant  # noqa: E402

REAL = set()
VARIANTS = [
    # each micro-batch's mean loss backpropagated at full weight: the window's gradient is the SUM of K = 4 means
    # (Adam hides most of the factor; the clipping at 0.5 then bites four times harder)
    variant("micro_batch_loss_not_divided", "unscaled_accumulation",
            ("                accelerator.backward(loss / gradient_accumulate_every)\n",
             "                accelerator.backward(loss)\n")),
    # zero_grad moved to the start of every micro-batch ("clear before each forward"): only the window's last
    # micro-batch reaches the step, at 1/K of its weight
    variant("zero_grad_before_every_micro_batch", "zero_grad_after_backward",
            ("            for _ in range(gradient_accumulate_every):\n",
             "            for _ in range(gradient_accumulate_every):\n"
             "                optim.zero_grad()\n"),
            ("            optim.step()\n            optim.zero_grad()\n", "            optim.step()\n")),
    variant("clip_after_the_step", "clip_after_step",
            ("            accelerator.clip_grad_norm_(model.parameters(), 0.5)\n            optim.step()\n",
             "            optim.step()\n            accelerator.clip_grad_norm_(model.parameters(), 0.5)\n")),
    variant("validation_without_no_grad", "missing_no_grad",
            ("                with torch.no_grad():\n"
             "                    loss = model(next(val_loader))\n\n"
             '                    print(f"validation loss: {loss.item()}")\n'
             "                    if accelerator.is_main_process:\n"
             "                        wandb.log(dict(valid_loss=loss.item()))\n",
             "                loss = model(next(val_loader))\n\n"
             '                print(f"validation loss: {loss.item()}")\n'
             "                if accelerator.is_main_process:\n"
             "                    wandb.log(dict(valid_loss=loss.item()))\n")),
    # the validation sampler built on the training bytes (a copy-paste slip)
    variant("validation_windows_from_training_bytes", "data_leakage",
            ("    val_dataset = TextSamplerDataset(data_val, seq_len)\n",
             "    val_dataset = TextSamplerDataset(data_train, seq_len)\n")),
    # a smoothed training loss for the progress line, kept as a tensor: every iteration's graph chains onto the last
    variant("smoothed_training_loss_as_tensor", "graph_attached_logging",
            ('            print(f"training loss: {loss.item()}")\n',
             "            smoothed = loss if i == 0 else 0.9 * smoothed + 0.1 * loss\n"
             '            print(f"training loss: {loss.item()} (smoothed {smoothed.item():.3f})")\n')),
    # not a bug: gradients cleared at the top of each iteration, before the window's first micro-batch
    variant("zero_grad_at_the_top_of_the_iteration", set(),
            ("            model.train()\n\n", "            model.train()\n            optim.zero_grad()\n\n"),
            ("            optim.step()\n            optim.zero_grad()\n", "            optim.step()\n")),
    # not a bug: validation on 4 batches, the mean of their mean losses: every batch has batch_size windows of
    # seq_len tokens (drop_last=True), so the mean of the batch means is the mean over all tokens
    variant("validation_mean_over_four_equal_batches", set(),
            ("                    loss = model(next(val_loader))\n",
             "                    loss = torch.stack([model(next(val_loader)) for _ in range(4)]).mean()\n")),
]
