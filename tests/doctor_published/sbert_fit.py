# Mirrors: UKPLab/sentence-transformers, sentence_transformers/SentenceTransformer.py (SentenceTransformer.fit,
# _eval_during_training, encode, smart_batching_collate) with sentence_transformers/losses/CosineSimilarityLoss.py,
# sentence_transformers/evaluation/EmbeddingSimilarityEvaluator.py and examples/training/sts/
# training_stsbenchmark.py (the script that calls fit), at tag v2.2.2, commit f38e91e1e505 (2022-06-26), the last
# release whose fit() is this hand-written loop (v3 moved training onto the transformers Trainer).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: a SentenceTransformer built as a Sequential of a Transformer module (token embeddings, LayerNorm, self-
# attention and feed-forward with dropout 0.1, "pretrained") and mean Pooling over the attention mask; training
# pairs as InputExamples (two texts, a similarity label in [0, 1]) in a plain shuffled DataLoader whose collate_fn
# fit() replaces by smart_batching_collate (tokenise each side per batch, pad to the batch's longest); the loss
# model CosineSimilarityLoss (MSE between the cosine of the two embeddings and the label); in fit():
# steps_per_epoch = the shortest loader's length, num_train_steps = steps_per_epoch * epochs, per objective AdamW
# over two groups (weight decay 0.01, none for bias and LayerNorm weights) and a WarmupLinear schedule over
# num_train_steps with warmup_steps = 10% of them (rounded up); data iterators that persist across epochs and are
# renewed on StopIteration; per epoch zero_grad() and train() on every loss model; per step and objective: forward,
# backward, clip_grad_norm_(max_grad_norm=1), step, zero_grad, scheduler.step() (unless the AMP scale changed);
# every evaluation_steps steps _eval_during_training (the evaluator, best-score tracking) then zero_grad() and
# train() again on the loss models, and one more evaluation at each epoch's end; the evaluator encodes both
# sentence lists with encode() (eval(), length-sorted batches, forward under no_grad, detached embeddings, order
# restored) and returns the best Spearman correlation of cosine, Manhattan, Euclidean and dot-product scores with
# the gold labels (computed over all pairs, so no mean of batch means).
# The published loop has none of the registry's bugs: every step clears its gradients, clipping sits between
# backward and step, the warmup-linear schedule is sized in steps and stepped every step, the evaluation runs in
# eval mode under no_grad, and train() is restored both after a mid-epoch evaluation and at each epoch's start.
# Shrunk: a word-level stand-in tokenizer over 32 words in 4 topics, a width-16 encoder of one block, 96 training
# pairs in batches of 8 (12 steps per epoch), 2 epochs (not 4), 3 warmup steps, evaluation every 5 steps (not 1000)
# on 24 dev pairs encoded in batches of 16, AdamW lr 2e-2 (not 2e-5) so that the tiny encoder learns (dev Spearman
# 0.42 after 5 steps -> 0.55); the use_amp branch (autocast, GradScaler, the scheduler skipped when the scale
# changes) is left out, since the example trains without AMP (skip_scheduler stays False); no model card, no
# checkpoints or saving of the best model.
# Added: `with watch(model):` around fit (the loss model calls model; the evaluator calls model.forward through
# encode), and fit returns its optimizers.
import math

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader

from tests.doctor_published.standins import get_linear_schedule_with_warmup

TOPICS, WORDS_PER_TOPIC = 4, 8


class InputExample:
    def __init__(self, texts, label=0.0):
        self.texts, self.label = texts, label


class Transformer(nn.Module):
    """Stands in for models.Transformer('distilbert-base-uncased'): embeddings, one encoder block."""

    def __init__(self, vocab, dim=16, heads=2, max_seq_length=8, dropout=0.1):
        super().__init__()
        self.vocab, self.heads, self.max_seq_length = vocab, heads, max_seq_length
        with torch.random.fork_rng():       # the "pretrained" checkpoint: weights of their own seed
            torch.manual_seed(7)
            self.word_embeddings = nn.Embedding(len(vocab) + 1, dim, padding_idx=0)
            self.position_embeddings = nn.Embedding(max_seq_length, dim)
            self.LayerNorm = nn.LayerNorm(dim)
            self.qkv, self.attention_output = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
            self.attention_LayerNorm = nn.LayerNorm(dim)
            self.intermediate, self.output = nn.Linear(dim, 2 * dim), nn.Linear(2 * dim, dim)
            self.output_LayerNorm = nn.LayerNorm(dim)
        self.dropout = nn.Dropout(dropout)

    def tokenize(self, texts):
        ids = [[self.vocab[w] for w in text.split()][:self.max_seq_length] for text in texts]
        longest = max(len(i) for i in ids)
        input_ids = torch.zeros(len(ids), longest, dtype=torch.long)
        for row, i in enumerate(ids):
            input_ids[row, :len(i)] = torch.tensor(i)
        return {"input_ids": input_ids, "attention_mask": (input_ids != 0).long()}

    def forward(self, features):
        ids, mask = features["input_ids"], features["attention_mask"]
        b, t = ids.shape
        x = self.LayerNorm(self.word_embeddings(ids) + self.position_embeddings(torch.arange(t)))
        x = self.dropout(x)
        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in self.qkv(x).chunk(3, dim=-1))
        attn = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, None, :].bool())
        x = self.attention_LayerNorm(x + self.dropout(self.attention_output(attn.transpose(1, 2).reshape(b, t, -1))))
        x = self.output_LayerNorm(x + self.dropout(self.output(F.gelu(self.intermediate(x)))))
        features.update({"token_embeddings": x})
        return features


class Pooling(nn.Module):
    def forward(self, features):
        mask = features["attention_mask"].unsqueeze(-1).float()
        summed = (features["token_embeddings"] * mask).sum(1)
        features.update({"sentence_embedding": summed / mask.sum(1).clamp(min=1e-9)})
        return features


class CosineSimilarityLoss(nn.Module):
    def __init__(self, model, loss_fct=nn.MSELoss()):
        super().__init__()
        self.model, self.loss_fct = model, loss_fct

    def forward(self, sentence_features, labels):
        embeddings = [self.model(features)["sentence_embedding"] for features in sentence_features]
        output = torch.cosine_similarity(embeddings[0], embeddings[1])
        return self.loss_fct(output, labels.view(-1))


def rankdata(values):
    values = np.asarray(values, dtype=float)
    ranks = np.empty(len(values))
    ranks[np.argsort(values, kind="stable")] = np.arange(1, len(values) + 1)
    for v in np.unique(values):
        ranks[values == v] = ranks[values == v].mean()
    return ranks


def spearmanr(a, b):
    return float(np.corrcoef(rankdata(a), rankdata(b))[0, 1])


class EmbeddingSimilarityEvaluator:
    def __init__(self, sentences1, sentences2, scores, batch_size=16, name=""):
        self.sentences1, self.sentences2, self.scores = sentences1, sentences2, scores
        self.batch_size, self.name = batch_size, name

    @classmethod
    def from_input_examples(cls, examples, **kwargs):
        return cls([e.texts[0] for e in examples], [e.texts[1] for e in examples], [e.label for e in examples],
                   **kwargs)

    def __call__(self, model, output_path=None, epoch=-1, steps=-1):
        embeddings1 = model.encode(self.sentences1, batch_size=self.batch_size, convert_to_numpy=True)
        embeddings2 = model.encode(self.sentences2, batch_size=self.batch_size, convert_to_numpy=True)
        unit1 = embeddings1 / np.linalg.norm(embeddings1, axis=1, keepdims=True)
        unit2 = embeddings2 / np.linalg.norm(embeddings2, axis=1, keepdims=True)
        cosine_scores = (unit1 * unit2).sum(1)
        manhattan_distances = -np.abs(embeddings1 - embeddings2).sum(1)
        euclidean_distances = -np.sqrt(((embeddings1 - embeddings2) ** 2).sum(1))
        dot_products = (embeddings1 * embeddings2).sum(1)
        spearman = {name: spearmanr(self.scores, s) for name, s in (
            ("cosine", cosine_scores), ("manhattan", manhattan_distances), ("euclidean", euclidean_distances),
            ("dot", dot_products))}
        print(f"{self.name} epoch {epoch} steps {steps}: Spearman {spearman}")
        return max(spearman.values())


class SentenceTransformer(nn.Sequential):
    def tokenize(self, texts):
        return self[0].tokenize(texts)

    def smart_batching_collate(self, batch):
        texts = [[example.texts[idx] for example in batch] for idx in range(len(batch[0].texts))]
        labels = torch.tensor([example.label for example in batch])
        return [self.tokenize(side) for side in texts], labels

    def encode(self, sentences, batch_size=32, convert_to_numpy=True):
        self.eval()
        all_embeddings = []
        length_sorted_idx = np.argsort([-len(sen.split()) for sen in sentences])
        sentences_sorted = [sentences[idx] for idx in length_sorted_idx]
        for start_index in range(0, len(sentences), batch_size):
            features = self.tokenize(sentences_sorted[start_index:start_index + batch_size])
            with torch.no_grad():
                out_features = self.forward(features)
                embeddings = out_features["sentence_embedding"].detach()
            all_embeddings.extend(embeddings)
        all_embeddings = [all_embeddings[idx] for idx in np.argsort(length_sorted_idx)]
        if convert_to_numpy:
            all_embeddings = np.asarray([emb.numpy() for emb in all_embeddings])
        return all_embeddings

    def fit(self, train_objectives, evaluator=None, epochs=1, steps_per_epoch=None, scheduler="WarmupLinear",
            warmup_steps=10000, optimizer_class=torch.optim.AdamW, optimizer_params={"lr": 2e-5},  # noqa: B006
            weight_decay=0.01, evaluation_steps=0, max_grad_norm=1):
        dataloaders = [dataloader for dataloader, _ in train_objectives]
        for dataloader in dataloaders:
            dataloader.collate_fn = self.smart_batching_collate
        loss_models = [loss for _, loss in train_objectives]
        self.best_score = -9999999
        if steps_per_epoch is None or steps_per_epoch == 0:
            steps_per_epoch = min([len(dataloader) for dataloader in dataloaders])
        num_train_steps = int(steps_per_epoch * epochs)

        optimizers, schedulers = [], []
        for loss_model in loss_models:
            param_optimizer = list(loss_model.named_parameters())
            no_decay = ["bias", "LayerNorm.bias", "LayerNorm.weight"]
            optimizer_grouped_parameters = [
                {"params": [p for n, p in param_optimizer if not any(nd in n for nd in no_decay)],
                 "weight_decay": weight_decay},
                {"params": [p for n, p in param_optimizer if any(nd in n for nd in no_decay)], "weight_decay": 0.0}]
            optimizer = optimizer_class(optimizer_grouped_parameters, **optimizer_params)
            assert scheduler.lower() == "warmuplinear"
            scheduler_obj = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=warmup_steps,
                                                            num_training_steps=num_train_steps)
            optimizers.append(optimizer)
            schedulers.append(scheduler_obj)

        global_step = 0
        data_iterators = [iter(dataloader) for dataloader in dataloaders]
        num_train_objectives = len(train_objectives)
        skip_scheduler = False
        for epoch in range(epochs):
            training_steps = 0
            for loss_model in loss_models:
                loss_model.zero_grad()
                loss_model.train()
            for _ in range(steps_per_epoch):
                for train_idx in range(num_train_objectives):
                    loss_model = loss_models[train_idx]
                    optimizer = optimizers[train_idx]
                    scheduler = schedulers[train_idx]
                    data_iterator = data_iterators[train_idx]
                    try:
                        data = next(data_iterator)
                    except StopIteration:
                        data_iterator = iter(dataloaders[train_idx])
                        data_iterators[train_idx] = data_iterator
                        data = next(data_iterator)
                    features, labels = data
                    loss_value = loss_model(features, labels)
                    loss_value.backward()
                    torch.nn.utils.clip_grad_norm_(loss_model.parameters(), max_grad_norm)
                    optimizer.step()
                    optimizer.zero_grad()
                    if not skip_scheduler:
                        scheduler.step()
                training_steps += 1
                global_step += 1
                if evaluation_steps > 0 and training_steps % evaluation_steps == 0:
                    self._eval_during_training(evaluator, epoch, training_steps)
                    for loss_model in loss_models:
                        loss_model.zero_grad()
                        loss_model.train()
            self._eval_during_training(evaluator, epoch, -1)
        return optimizers

    def _eval_during_training(self, evaluator, epoch, steps):
        if evaluator is not None:
            score = evaluator(self, epoch=epoch, steps=steps)
            if score > self.best_score:
                self.best_score = score


def sts_samples(n, seed):
    """Pairs of word sequences (9 in 10 words from their topic) about one of 4 topics on a circle; the label is 1
    for the same topic, 0.5 for neighbouring topics, 0 for opposite ones (the STS scores divided by 5)."""
    g = torch.Generator().manual_seed(seed)

    def sentence(topic):
        words = []
        for _ in range(int(torch.randint(3, 7, (1,), generator=g))):
            if torch.rand(1, generator=g) < 0.9:
                words.append(topic * WORDS_PER_TOPIC + int(torch.randint(0, WORDS_PER_TOPIC, (1,), generator=g)))
            else:
                words.append(int(torch.randint(0, TOPICS * WORDS_PER_TOPIC, (1,), generator=g)))
        return " ".join(f"w{w}" for w in words)

    samples = []
    for _ in range(n):
        a, shift = (int(v) for v in torch.randint(0, TOPICS, (2,), generator=g))
        b = (a + shift) % TOPICS
        distance = min(shift, TOPICS - shift)
        samples.append(InputExample(texts=[sentence(a), sentence(b)], label=1.0 - distance / 2))
    return samples


def main(watch):
    torch.manual_seed(42)
    train_batch_size, num_epochs = 8, 2
    vocab = {f"w{i}": i + 1 for i in range(TOPICS * WORDS_PER_TOPIC)}
    model = SentenceTransformer(Transformer(vocab), Pooling())
    train_samples, dev_samples = sts_samples(96, seed=1), sts_samples(24, seed=2)
    train_dataloader = DataLoader(train_samples, shuffle=True, batch_size=train_batch_size)
    train_loss = CosineSimilarityLoss(model=model)
    evaluator = EmbeddingSimilarityEvaluator.from_input_examples(dev_samples, name="sts-dev")
    warmup_steps = math.ceil(len(train_dataloader) * num_epochs * 0.1)
    with watch(model):
        optimizers = model.fit(train_objectives=[(train_dataloader, train_loss)], evaluator=evaluator,
                               epochs=num_epochs, evaluation_steps=5, warmup_steps=warmup_steps,
                               optimizer_params={"lr": 2e-2})
    return [model, *optimizers]


from tests.doctor_published import variant  # noqa: E402

REAL = set()
VARIANTS = [
    variant("schedule_stepped_once_per_epoch", "update_schedule_per_epoch",
            ("                    if not skip_scheduler:\n                        scheduler.step()\n", ""),
            ("            self._eval_during_training(evaluator, epoch, -1)\n",
             "            self._eval_during_training(evaluator, epoch, -1)\n"
             "            for scheduler in schedulers:\n                scheduler.step()\n")),
    # subtle: train() still opens every epoch, so only the steps after the first mid-epoch evaluation (steps 6-12
    # of every epoch) train with dropout off
    variant("mid_epoch_evaluation_leaves_eval_mode", "missing_train_switch",
            ("                        loss_model.zero_grad()\n                        loss_model.train()\n",
             "                        loss_model.zero_grad()\n")),
    # subtle: the embeddings are detached, so nothing is kept; each evaluation batch still builds its graph
    variant("encode_without_no_grad", "missing_no_grad",
            ("            with torch.no_grad():\n                out_features = self.forward(features)\n"
             "                embeddings = out_features[\"sentence_embedding\"].detach()\n",
             "            out_features = self.forward(features)\n"
             "            embeddings = out_features[\"sentence_embedding\"].detach()\n")),
    variant("encode_without_eval", "eval_in_train_mode",
            ("        self.eval()\n        all_embeddings = []\n", "        all_embeddings = []\n")),
    # subtle: loss_model.zero_grad() still runs at each epoch's start and after each evaluation, so gradients pile
    # up over the (at most 5) steps between evaluations instead of over the whole run
    variant("optimizer_zero_grad_dropped", "missing_zero_grad",
            ("                    optimizer.step()\n                    optimizer.zero_grad()\n",
             "                    optimizer.step()\n")),
]
