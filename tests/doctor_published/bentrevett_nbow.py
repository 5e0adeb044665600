# Mirrors: bentrevett/pytorch-sentiment-analysis, "1 - Neural Bag of Words.ipynb" (the split, the collate function,
# the NBoW model, train, evaluate and the epoch loop), snapshot at commit 329f654b2cfa (2024-01-22); the notebook
# last changed in 18d56fa (2024-01-22).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: a validation split carved out of the training split (train_test_split, test_size 0.25); dict examples of
# token ids and a label, padded per batch by a collate function; an embedding whose token vectors are averaged and
# fed to one linear layer; Adam with its defaults and cross-entropy; train() and evaluate() that collect each
# batch's loss.item() and accuracy.item() in lists and return np.mean of them, evaluate in eval mode under no_grad;
# the best-validation state kept and reloaded for one test pass. The published evaluate averages batch means with
# np.mean: IMDB's 6,250 validation and 25,000 test reviews in batches of 512 both end with a short batch (106 and
# 424 reviews), so the validation and test loss and accuracy weight those few reviews like full batches (REAL).
# Shrunk: stand-in token sequences (192 train before the split, 60 test; 48 validation in batches of 20, a last
# batch of 8), width 16, 3 epochs (not 10); the checkpoint goes to memory; no tqdm, no plots.
# Added: `with watch(...)` around the epochs and the test pass.
import copy

import numpy as np
import torch
from torch import nn

from tests.doctor_published.standins import sentence_pairs

PAD = 0


def as_examples(rows):
    return [{"ids": torch.tensor(r["input_ids"]), "label": torch.tensor(r["labels"])} for r in rows]


def train_test_split(examples, test_size, seed=0):
    """datasets.Dataset.train_test_split: a shuffled split into 'train' and 'test'."""
    order = torch.randperm(len(examples), generator=torch.Generator().manual_seed(seed)).tolist()
    n_test = int(round(test_size * len(examples)))
    return {"train": [examples[i] for i in order[n_test:]], "test": [examples[i] for i in order[:n_test]]}


def get_collate_fn(pad_index):
    def collate_fn(batch):
        ids = nn.utils.rnn.pad_sequence([b["ids"] for b in batch], padding_value=pad_index, batch_first=True)
        return {"ids": ids, "label": torch.stack([b["label"] for b in batch])}
    return collate_fn


def get_data_loader(dataset, batch_size, pad_index, shuffle=False):
    return torch.utils.data.DataLoader(dataset=dataset, batch_size=batch_size, collate_fn=get_collate_fn(pad_index),
                                       shuffle=shuffle)


class NBoW(nn.Module):
    def __init__(self, vocab_size, embedding_dim, output_dim, pad_index):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=pad_index)
        self.fc = nn.Linear(embedding_dim, output_dim)

    def forward(self, ids):
        pooled = self.embedding(ids).mean(dim=1)
        prediction = self.fc(pooled)
        return prediction


def get_accuracy(prediction, label):
    return (prediction.argmax(dim=-1) == label).sum() / prediction.shape[0]


def train(data_loader, model, criterion, optimizer):
    model.train()
    epoch_losses, epoch_accs = [], []
    for batch in data_loader:
        prediction = model(batch["ids"])
        loss = criterion(prediction, batch["label"])
        accuracy = get_accuracy(prediction, batch["label"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        epoch_losses.append(loss.item())
        epoch_accs.append(accuracy.item())
    return np.mean(epoch_losses), np.mean(epoch_accs)


def evaluate(data_loader, model, criterion):
    model.eval()
    epoch_losses, epoch_accs = [], []
    with torch.no_grad():
        for batch in data_loader:
            prediction = model(batch["ids"])
            loss = criterion(prediction, batch["label"])
            accuracy = get_accuracy(prediction, batch["label"])
            epoch_losses.append(loss.item())
            epoch_accs.append(accuracy.item())
    return np.mean(epoch_losses), np.mean(epoch_accs)


def main(watch):
    torch.manual_seed(1234)
    train_data = as_examples(sentence_pairs(192, seed=11))
    test_data = as_examples(sentence_pairs(60, seed=12))
    train_valid_data = train_test_split(train_data, test_size=0.25)
    train_data = train_valid_data["train"]
    valid_data = train_valid_data["test"]
    batch_size = 20
    train_data_loader = get_data_loader(train_data, batch_size, PAD, shuffle=True)
    valid_data_loader = get_data_loader(valid_data, batch_size, PAD)
    test_data_loader = get_data_loader(test_data, batch_size, PAD)
    model = NBoW(64, 16, 2, PAD)
    optimizer = torch.optim.Adam(model.parameters())
    criterion = nn.CrossEntropyLoss()
    best_valid_loss, best_state = float("inf"), None
    with watch(model):
        for epoch in range(3):
            train_loss, train_acc = train(train_data_loader, model, criterion, optimizer)
            valid_loss, valid_acc = evaluate(valid_data_loader, model, criterion)
            if valid_loss < best_valid_loss:
                best_valid_loss, best_state = valid_loss, copy.deepcopy(model.state_dict())
            print(f"epoch {epoch} train {train_loss:.3f} {train_acc:.3f} valid {valid_loss:.3f} {valid_acc:.3f}")
        model.load_state_dict(best_state)
        test_loss, test_acc = evaluate(test_data_loader, model, criterion)
        print(f"test {test_loss:.3f} {test_acc:.3f}")
    return [model, optimizer]


from tests.doctor_published import dedent, variant  # noqa: E402

EVAL_BODY = """\
        for batch in data_loader:
            prediction = model(batch["ids"])
            loss = criterion(prediction, batch["label"])
            accuracy = get_accuracy(prediction, batch["label"])
            epoch_losses.append(loss.item())
            epoch_accs.append(accuracy.item())
"""
REAL = {"mean_of_batch_means"}
VARIANTS = [
    variant("validation_reviews_also_trained_on", "data_leakage",
            ('    train_data = train_valid_data["train"]\n', "")),
    variant("softmax_in_forward", "softmax_before_cross_entropy",
            ("        prediction = self.fc(pooled)\n", "        prediction = self.fc(pooled).softmax(dim=-1)\n")),
    variant("evaluate_without_no_grad", "missing_no_grad",
            ("    with torch.no_grad():\n" + EVAL_BODY, dedent(EVAL_BODY))),
    variant("dropout_added_evaluate_without_eval", "eval_in_train_mode",
            ("        self.fc = nn.Linear(embedding_dim, output_dim)\n",
             "        self.fc = nn.Linear(embedding_dim, output_dim)\n        self.dropout = nn.Dropout(0.5)\n"),
            ("        pooled = self.embedding(ids).mean(dim=1)\n",
             "        pooled = self.dropout(self.embedding(ids).mean(dim=1))\n"),
            ("    model.eval()\n", "")),
    variant("zero_grad_between_backward_and_step", "zero_grad_after_backward",
            ("        optimizer.zero_grad()\n        loss.backward()\n",
             "        loss.backward()\n        optimizer.zero_grad()\n")),
]
