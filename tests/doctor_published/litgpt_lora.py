# Mirrors: Lightning-AI/lit-gpt, litgpt/finetune/lora.py (main, fit, validate, get_lr_scheduler; the repository
# is now Lightning-AI/litgpt) with litgpt/lora.py's LoRA linear layer and mark_only_lora_as_trainable and
# litgpt/utils.py's CycleIterator, snapshot at commit 3cf6493cdc7c (2024-03-28); finetune/lora.py last changed
# in 56889db4 (2024-03-25).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: a GPT whose attention and MLP projections are LoRA linears (frozen base weight, trainable A and B, LoRA
# dropout); mark_only_lora_as_trainable before AdamW over the trainable parameters only; a linear-warmup LambdaLR
# then CosineAnnealingLR joined by SequentialLR, sized in optimizer steps and stepped after every step; a sanity
# validation of 2 batches before training; a while loop over a CycleIterator that counts epochs, with
# is_accumulating = iter_num % accumulation_iters != 0 over the whole run, backward of loss / accumulation_iters,
# then step, zero_grad, scheduler step; a running mean of detached losses; every eval.interval steps validate():
# under no_grad, model.eval(), at most max_iters batches whose losses fill a preallocated tensor that is averaged,
# a generated example, model.train(). Instruction examples are padded per batch and their prompt tokens masked
# with -100. Shrunk: a character-level stand-in instruction set (48 train, 20 validation examples), one block of
# width 16, micro-batches of 4 and accumulation 3, 2 epochs, warmup 2 steps, validation every 4 steps over at
# most 3 batches (full ones), 4 generated tokens; no Fabric (its backward is loss.backward()), no checkpoints.
# Added: `with watch(model):` around fit.
import math

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader

IGNORE = -100


class LoRALinear(nn.Linear):
    def __init__(self, in_features, out_features, r=4, lora_alpha=8, lora_dropout=0.05):
        super().__init__(in_features, out_features)
        self.lora_A = nn.Parameter(torch.randn(r, in_features) / math.sqrt(in_features))
        self.lora_B = nn.Parameter(torch.zeros(out_features, r))
        self.lora_dropout = nn.Dropout(lora_dropout)
        self.scaling = lora_alpha / r

    def forward(self, x):
        return super().forward(x) + (self.lora_dropout(x) @ self.lora_A.T @ self.lora_B.T) * self.scaling


def mark_only_lora_as_trainable(model):
    for name, p in model.named_parameters():
        p.requires_grad = "lora_" in name


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.norm_1, self.norm_2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn, self.proj = LoRALinear(width, 3 * width), LoRALinear(width, width)
        self.fc, self.out = LoRALinear(width, 4 * width), LoRALinear(4 * width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in self.attn(self.norm_1(x)).split(c, 2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.norm_2(x))))


class GPT(nn.Module):
    def __init__(self, vocab, block_size, width=16, heads=2):
        super().__init__()
        self.block_size = block_size
        with torch.random.fork_rng():       # the "pretrained" checkpoint: weights of their own seed
            torch.manual_seed(31)
            self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(block_size, width)
            self.h = nn.ModuleList([Block(width, heads)])
            self.ln_f, self.lm_head = nn.LayerNorm(width), nn.Linear(width, vocab, bias=False)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.size(1)))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def instructions(n, seed):
    """Prompt 'a+b=' (tokens 1..12) followed by its answer; only the answer is a target. The 100 problems are
    dealt once in a fixed order and each split takes its own slice (seed 1: the first n, seed 2: the last n), so
    the splits share no example, as the published data's random split of distinct instructions."""
    order = torch.randperm(100, generator=torch.Generator().manual_seed(0)).tolist()
    rows = []
    for k in (order[:n] if seed == 1 else order[-n:]):
        a, b = divmod(k, 10)
        prompt, answer = [1, 2 + a, 12, 2 + b, 13], [2 + (a + b) // 10, 2 + (a + b) % 10, 14]
        ids = torch.tensor(prompt + answer)
        rows.append({"input_ids": ids, "labels": torch.tensor([IGNORE] * len(prompt) + answer)})
    return rows


def collate(batch):
    longest = max(len(b["input_ids"]) for b in batch)
    ids = torch.zeros(len(batch), longest, dtype=torch.long)
    labels = torch.full((len(batch), longest), IGNORE)
    for i, b in enumerate(batch):
        ids[i, :len(b["input_ids"])], labels[i, :len(b["labels"])] = b["input_ids"], b["labels"]
    return {"input_ids": ids, "labels": labels}


class CycleIterator:
    def __init__(self, iterable):
        self.iterable, self.epoch, self._iterator = iterable, 0, None

    def __next__(self):
        if self._iterator is None:
            self._iterator = iter(self.iterable)
        try:
            return next(self._iterator)
        except StopIteration:
            self._iterator = iter(self.iterable)
            self.epoch += 1
            return next(self._iterator)


def chunked_cross_entropy(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=IGNORE)


def get_lr_scheduler(optimizer, warmup_steps, max_steps):
    scheduler1 = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: step / warmup_steps)
    scheduler2 = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=(max_steps - warmup_steps))
    return torch.optim.lr_scheduler.SequentialLR(optimizer, [scheduler1, scheduler2], milestones=[warmup_steps])


@torch.no_grad()
def generate(model, idx, new_tokens):
    for _ in range(new_tokens):
        nxt = torch.multinomial((model(idx)[:, -1] / 0.8).softmax(-1), 1)
        idx = torch.cat((idx, nxt), dim=1)
    return idx


@torch.no_grad()
def validate(model, val_dataloader, max_iters):
    model.eval()
    losses = torch.zeros(min(len(val_dataloader), max_iters))
    for k, batch in enumerate(val_dataloader):
        if k >= max_iters:
            break
        logits = model(batch["input_ids"])
        losses[k] = chunked_cross_entropy(logits[..., :-1, :], batch["labels"][..., 1:])
    val_loss = losses.mean()
    print(generate(model, torch.tensor([[1, 5, 12, 6, 13]]), 4).tolist())
    model.train()
    return val_loss


def fit(model, optimizer, scheduler, train_dataloader, val_dataloader, train, eval):
    validate(model, val_dataloader, max_iters=2)
    train_iterator = CycleIterator(train_dataloader)
    running_loss = []
    step_count = iter_num = 0
    while step_count < train["max_steps"] and train_iterator.epoch < train["epochs"]:
        iter_num += 1
        batch = next(train_iterator)
        input_ids, targets = batch["input_ids"], batch["labels"]
        is_accumulating = iter_num % train["accumulation_iters"] != 0
        logits = model(input_ids)
        loss = chunked_cross_entropy(logits[..., :-1, :], targets[..., 1:])
        (loss / train["accumulation_iters"]).backward()
        running_loss = (running_loss + [loss.detach()])[-train["accumulation_iters"]:]
        if not is_accumulating:
            optimizer.step()
            optimizer.zero_grad()
            scheduler.step()
            step_count += 1
        if iter_num % train["log_interval"] == 0:
            print(f"iter {iter_num} step {step_count} loss {torch.stack(running_loss).mean().item():.3f}")
        if not is_accumulating and step_count % eval["interval"] == 0:
            val_loss = validate(model, val_dataloader, eval["max_iters"])
            print(f"iter {iter_num}: val loss {val_loss.item():.4f}")


def main(watch):
    torch.manual_seed(1337)
    train = dict(micro_batch_size=4, accumulation_iters=3, epochs=2, max_steps=10 ** 9, lr=3e-3, warmup=2,
                 log_interval=3)
    eval = dict(interval=4, max_iters=3)
    train_dataloader = DataLoader(instructions(48, 1), batch_size=train["micro_batch_size"], shuffle=True,
                                  collate_fn=collate)
    val_dataloader = DataLoader(instructions(20, 2), batch_size=train["micro_batch_size"], collate_fn=collate)
    steps_per_epoch = len(train_dataloader) // train["accumulation_iters"]
    lr_max_steps = min(train["epochs"] * steps_per_epoch, train["max_steps"])
    model = GPT(vocab=16, block_size=8)
    mark_only_lora_as_trainable(model)
    trainable_params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable_params, lr=train["lr"], weight_decay=0.02, betas=(0.9, 0.95))
    scheduler = get_lr_scheduler(optimizer, warmup_steps=train["warmup"], max_steps=lr_max_steps)
    with watch(model):
        fit(model, optimizer, scheduler, train_dataloader, val_dataloader, train, eval)
    return [model, optimizer]


from tests.doctor_published import variant  # noqa: E402

VARIANTS = [
    variant("loss_not_divided_by_accumulation", "unscaled_accumulation",
            ('        (loss / train["accumulation_iters"]).backward()\n', "        loss.backward()\n")),
    # expected set corrected after grading: without no_grad, each validation loss written into the preallocated
    # `losses` tensor carries its graph, and fit keeps the returned val_loss until the next validation
    variant("validate_with_gradients", {"missing_no_grad", "graph_attached_logging"},
            ("@torch.no_grad()\ndef validate", "def validate")),
    variant("validate_leaves_eval_mode", "missing_train_switch",
            ("    model.train()\n    return val_loss\n", "    return val_loss\n")),
    variant("schedule_stepped_per_epoch", "update_schedule_per_epoch",
            ("            scheduler.step()\n            step_count += 1\n", "            step_count += 1\n"),
            ("        iter_num += 1\n        batch = next(train_iterator)\n",
             "        iter_num += 1\n        epoch_before = train_iterator.epoch\n"
             "        batch = next(train_iterator)\n"
             "        if train_iterator.epoch != epoch_before:\n            scheduler.step()\n")),
]
