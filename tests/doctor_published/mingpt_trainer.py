# Mirrors: karpathy/minGPT, mingpt/trainer.py (c4c650e, 2022-07-26), mingpt/model.py (90420ee, 2022-07-28) and
# projects/adder/adder.py (acaadac, 2022-07-11), snapshot at commit 37baab71b9ab (2023-01-08).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: the adder project: a Dataset of n-digit additions rendered as digit tokens (the sum reversed, the prompt
# positions masked with -1), a fixed-seed permutation split into test and train problems; a GPT (explicit masked
# attention with a lower-triangular buffer, tanh-GELU MLP, dropout 0.1, N(0, 0.02) init with scaled residual
# projections) whose optimizer-building method puts Linear weights in a decayed AdamW group and biases, LayerNorm
# and Embedding weights in an undecayed one; a trainer object that builds that optimizer inside its run method,
# draws batches forever from a RandomSampler with replacement (re-creating the iterator on StopIteration), and per
# batch runs forward, model.zero_grad(set_to_none=True), backward, clip, step, then the batch-end callbacks; the
# project's callback prints the loss every 10 iterations and every 20 switches to eval mode, scores both splits
# by greedy generation under no_grad, checkpoints on a new best score and switches back to train mode.
# Shrunk: 1-digit additions (not 2), a 1-layer GPT of width 16 (not gpt-nano), batch 16 (not 64), no worker
# processes, 40 iterations (the project runs until stopped), evaluation every 20; the checkpoint goes to memory.
# Added: `with watch(model):` around the trainer's run (the optimizer does not exist before it).
import io
import math
import random
import time

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset, RandomSampler


class Settings:
    """An attribute bag with defaults, updated from keyword arguments."""

    def __init__(self, **values):
        self.__dict__.update(values)


def seed_all(seed: int) -> None:
    for seeder in (random.seed, np.random.seed, torch.manual_seed):
        seeder(seed)


class MaskedSelfAttention(nn.Module):
    def __init__(self, s: Settings):
        super().__init__()
        self.heads = s.heads
        self.qkv = nn.Linear(s.width, 3 * s.width)
        self.proj_back = nn.Linear(s.width, s.width)
        self.weights_drop, self.out_drop = nn.Dropout(s.p_attn), nn.Dropout(s.p_resid)
        self.register_buffer("causal", torch.tril(torch.ones(s.context, s.context))[None, None])

    def forward(self, x):
        n, t, w = x.shape
        q, k, v = (part.reshape(n, t, self.heads, w // self.heads).transpose(1, 2)
                   for part in self.qkv(x).chunk(3, dim=-1))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        scores = scores.masked_fill(self.causal[:, :, :t, :t] == 0, float("-inf"))
        mixed = self.weights_drop(scores.softmax(dim=-1)) @ v
        return self.out_drop(self.proj_back(mixed.transpose(1, 2).reshape(n, t, w)))


class Stage(nn.Module):
    def __init__(self, s: Settings):
        super().__init__()
        self.pre_attn, self.attn = nn.LayerNorm(s.width), MaskedSelfAttention(s)
        self.pre_mlp = nn.LayerNorm(s.width)
        self.widen, self.proj_back = nn.Linear(s.width, 4 * s.width), nn.Linear(4 * s.width, s.width)
        self.mlp_drop = nn.Dropout(s.p_resid)

    def forward(self, x):
        x = x + self.attn(self.pre_attn(x))
        return x + self.mlp_drop(self.proj_back(F.gelu(self.widen(self.pre_mlp(x)), approximate="tanh")))


class AdderGPT(nn.Module):
    @staticmethod
    def defaults() -> Settings:
        return Settings(depth=1, heads=2, width=16, vocab=None, context=None, p_embed=0.1, p_resid=0.1, p_attn=0.1)

    def __init__(self, s: Settings):
        super().__init__()
        self.context = s.context
        self.tok = nn.Embedding(s.vocab, s.width)
        self.pos = nn.Embedding(s.context, s.width)
        self.embed_drop = nn.Dropout(s.p_embed)
        self.stages = nn.ModuleList(Stage(s) for _ in range(s.depth))
        self.last_norm = nn.LayerNorm(s.width)
        self.head = nn.Linear(s.width, s.vocab, bias=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)
        for name, p in self.named_parameters():
            if name.endswith("proj_back.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * s.depth))

    def build_optimizer(self, t: Settings) -> torch.optim.AdamW:
        decayed, plain = set(), set()
        for prefix, module in self.named_modules():
            for short, _ in module.named_parameters(recurse=False):
                full = f"{prefix}.{short}" if prefix else short
                if short == "weight" and isinstance(module, nn.Linear):
                    decayed.add(full)
                else:
                    plain.add(full)
        by_name = dict(self.named_parameters())
        groups = [{"params": [by_name[n] for n in sorted(decayed)], "weight_decay": t.decay},
                  {"params": [by_name[n] for n in sorted(plain)], "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=t.lr, betas=t.betas)

    def forward(self, ids, targets=None):
        t = ids.size(1)
        assert t <= self.context, f"{t} tokens do not fit a context of {self.context}"
        x = self.embed_drop(self.tok(ids) + self.pos(torch.arange(t, device=ids.device)[None]))
        for stage in self.stages:
            x = stage(x)
        logits = self.head(self.last_norm(x))
        loss = None if targets is None else F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-1)
        return logits, loss

    @torch.no_grad()
    def complete(self, ids, new_tokens):
        """Greedy continuation: append the most likely next token `new_tokens` times."""
        for _ in range(new_tokens):
            logits, _ = self(ids[:, -self.context:])
            ids = torch.cat((ids, logits[:, -1, :].softmax(dim=-1).argmax(dim=-1, keepdim=True)), dim=1)
        return ids


class LoopRunner:
    """Owns the training loop: builds the optimizer when it starts, runs callbacks after every batch."""

    @staticmethod
    def defaults() -> Settings:
        return Settings(workers=0, max_iters=None, batch=16, lr=3e-4, betas=(0.9, 0.95), decay=0.1, clip=1.0)

    def __init__(self, t: Settings, model: nn.Module, problems: Dataset):
        self.t, self.model, self.problems = t, model.to("cpu"), problems
        self.optimizer = None
        self.hooks: dict[str, list] = {}
        self.device = "cpu"
        self.iteration, self.last_time, self.seconds = 0, 0.0, 0.0

    def on(self, event: str, hook) -> None:
        self.hooks[event] = [hook]

    def _fire(self, event: str) -> None:
        for hook in self.hooks.get(event, []):
            hook(self)

    def run(self):
        model, t = self.model, self.t
        self.optimizer = model.build_optimizer(t)
        forever = DataLoader(self.problems, batch_size=t.batch, num_workers=t.workers, shuffle=False,
                             sampler=RandomSampler(self.problems, replacement=True, num_samples=10 ** 10))
        model.train()
        self.iteration, self.last_time = 0, time.time()
        stream = iter(forever)
        while True:
            try:
                x, y = next(stream)
            except StopIteration:
                stream = iter(forever)
                x, y = next(stream)
            x, y = x.to(self.device), y.to(self.device)
            _, self.loss = model(x, y)
            model.zero_grad(set_to_none=True)
            self.loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), t.clip)
            self.optimizer.step()
            self._fire("batch_end")
            self.iteration += 1
            now = time.time()
            self.seconds, self.last_time = now - self.last_time, now
            if t.max_iters is not None and self.iteration >= t.max_iters:
                break


class SumProblems(Dataset):
    """a + b = c for n-digit a and b, as tokens: the digits of a, of b, then of c reversed (one digit longer)."""

    def __init__(self, digits: int, part: str):
        self.digits = digits
        order = torch.randperm((10 ** digits) ** 2, generator=torch.Generator().manual_seed(1337))
        held_out = min(int(len(order) * 0.2), 500)
        self.codes = order[:held_out] if part == "test" else order[held_out:]

    def vocab(self) -> int:
        return 10

    def context(self) -> int:
        return 3 * self.digits

    def __len__(self):
        return len(self.codes)

    def __getitem__(self, i):
        n = self.digits
        a, b = divmod(int(self.codes[i]), 10 ** n)
        text = f"{a:0{n}d}{b:0{n}d}" + f"{a + b:0{n + 1}d}"[::-1]
        tokens = [int(ch) for ch in text]
        x, y = torch.tensor(tokens[:-1]), torch.tensor(tokens[1:])
        y[:2 * n - 1] = -1
        return x, y


def main(watch):
    digits = 1
    seed_all(3407)
    train_set, test_set = SumProblems(digits, "train"), SumProblems(digits, "test")
    shape = AdderGPT.defaults()
    shape.vocab, shape.context = train_set.vocab(), train_set.context()
    model = AdderGPT(shape)
    plan = LoopRunner.defaults()
    plan.lr = 5e-4
    plan.max_iters = 40
    runner = LoopRunner(plan, model, train_set)

    def score(runner, part):
        problems = {"train": train_set, "test": test_set}[part]
        place = torch.tensor([[10 ** k for k in range(digits, -1, -1)]]).to(runner.device)
        right = []
        for x, _ in DataLoader(problems, batch_size=100, num_workers=0, drop_last=False):
            x = x.to(runner.device)
            prompt = x[:, :2 * digits]
            answer = model.complete(prompt, digits + 1)[:, -(digits + 1):].flip(1)
            a = (prompt[:, :digits] * place[:, 1:]).sum(1)
            b = (prompt[:, digits:] * place[:, 1:]).sum(1)
            right += ((answer * place).sum(1) == a + b).int().tolist()
        hits = torch.tensor(right, dtype=torch.float)
        print(f"{part}: {int(hits.sum())}/{len(right)} right ({100 * hits.mean():.1f}%)")
        return hits.sum()

    best = 0

    def after_batch(runner):
        nonlocal best
        if runner.iteration % 10 == 0:
            print(f"iteration {runner.iteration}: loss {runner.loss.item():.5f} ({runner.seconds * 1e3:.1f} ms)")
        if runner.iteration % 20 == 0:
            model.eval()
            with torch.no_grad():
                total = score(runner, "train") + score(runner, "test")
            if total > best:
                best = total
                torch.save(model.state_dict(), io.BytesIO())
            model.train()

    runner.on("batch_end", after_batch)
    with watch(model):
        runner.run()
    return [model, runner.optimizer]


from tests.doctor_published import variant  # noqa: E402

CLIP_THEN_STEP = ("            nn.utils.clip_grad_norm_(model.parameters(), t.clip)\n"
                  "            self.optimizer.step()\n")
VARIANTS = [
    variant("evaluation_in_train_mode", "eval_in_train_mode", ("            model.eval()\n", "")),
    variant("no_zero_grad", "missing_zero_grad", ("            model.zero_grad(set_to_none=True)\n", "")),
    variant("clip_after_step", "clip_after_step",
            (CLIP_THEN_STEP, "".join(reversed(CLIP_THEN_STEP.splitlines(keepends=True))))),
    variant("losses_kept_by_the_callback", "graph_attached_logging",
            ("    best = 0\n", "    best = 0\n    loss_log = []\n"),
            ("        nonlocal best\n", "        nonlocal best\n        loss_log.append(runner.loss)\n")),
    variant("test_problems_in_training", "data_leakage",
            ('order[:held_out] if part == "test" else order[held_out:]',
             'order[:held_out] if part == "test" else order[held_out // 2:]')),
]
