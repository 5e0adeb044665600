# Mirrors: sgrvinod/a-PyTorch-Tutorial-to-Image-Captioning, train.py (main, train, validate) with models.py's
# Encoder, Attention and DecoderWithAttention and utils.py's clip_gradient, adjust_learning_rate and
# AverageMeter, snapshot at commit cc9c7e2f4017 (2020-06-03); train.py last changed in ca674e1 (2019-04-01).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: a CNN encoder (BatchNorm) whose parameters are all frozen (fine_tune_encoder False: no encoder optimizer)
# and an attention LSTM decoder with dropout 0.5 before its output layer, teacher-forced over captions sorted by
# length, decoding at step t only the captions still longer than t; Adam for the decoder only; scores and targets
# packed with pack_padded_sequence, cross-entropy plus the doubly stochastic attention penalty alpha_c * ((1 -
# sum_t alpha)^2).mean(); zero_grad, backward, clip_gradient (each gradient clamped in place to +-grad_clip by
# value, a hand-written loop over the optimizer's param groups), step; AverageMeters weighted by the number of
# decoded words; validate() with decoder.eval() and encoder.eval() under no_grad, losses weighted by decoded words
# and a corpus-level score over all references; adjust_learning_rate(0.8) after 8 epochs without improvement.
# Shrunk: 8x8 stand-in images (120 train in batches of 16, 40 validation) whose "captions" spell the class in
# words of a 16-token vocabulary, 2x2 encoded positions, width 16, 3 epochs; unigram precision stands in for
# BLEU-4; no checkpoints.
# Added: `with watch([encoder, decoder]):` around the epochs (the two modules the loop calls).
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence
from torch.utils.data import DataLoader, Dataset

from tests.doctor_published.standins import datasets, transforms

START, END, PAD = 1, 2, 0


class Encoder(nn.Module):
    def __init__(self, size=2):
        super().__init__()
        self.cnn = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.pool = nn.AdaptiveAvgPool2d(size)
        self.fine_tune(False)

    def forward(self, images):
        return self.pool(self.cnn(images)).permute(0, 2, 3, 1)

    def fine_tune(self, fine_tune=True):
        for p in self.cnn.parameters():
            p.requires_grad = fine_tune


class Attention(nn.Module):
    def __init__(self, encoder_dim, decoder_dim, attention_dim):
        super().__init__()
        self.encoder_att, self.decoder_att = nn.Linear(encoder_dim, attention_dim), nn.Linear(decoder_dim, attention_dim)
        self.full_att = nn.Linear(attention_dim, 1)

    def forward(self, encoder_out, decoder_hidden):
        att = self.full_att(torch.relu(self.encoder_att(encoder_out) + self.decoder_att(decoder_hidden).unsqueeze(1)))
        alpha = att.squeeze(2).softmax(dim=1)
        return (encoder_out * alpha.unsqueeze(2)).sum(dim=1), alpha


class DecoderWithAttention(nn.Module):
    def __init__(self, vocab_size, embed_dim=16, decoder_dim=16, attention_dim=16, encoder_dim=8, dropout=0.5):
        super().__init__()
        self.vocab_size = vocab_size
        self.attention = Attention(encoder_dim, decoder_dim, attention_dim)
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.dropout = nn.Dropout(p=dropout)
        self.decode_step = nn.LSTMCell(embed_dim + encoder_dim, decoder_dim)
        self.init_h, self.init_c = nn.Linear(encoder_dim, decoder_dim), nn.Linear(encoder_dim, decoder_dim)
        self.f_beta = nn.Linear(decoder_dim, encoder_dim)
        self.fc = nn.Linear(decoder_dim, vocab_size)

    def forward(self, encoder_out, encoded_captions, caption_lengths):
        batch_size = encoder_out.size(0)
        encoder_out = encoder_out.reshape(batch_size, -1, encoder_out.size(-1))
        caption_lengths, sort_ind = caption_lengths.squeeze(1).sort(dim=0, descending=True)
        encoder_out, encoded_captions = encoder_out[sort_ind], encoded_captions[sort_ind]
        embeddings = self.embedding(encoded_captions)
        mean = encoder_out.mean(dim=1)
        h, c = self.init_h(mean), self.init_c(mean)
        decode_lengths = (caption_lengths - 1).tolist()
        predictions = torch.zeros(batch_size, max(decode_lengths), self.vocab_size)
        alphas = torch.zeros(batch_size, max(decode_lengths), encoder_out.size(1))
        for t in range(max(decode_lengths)):
            bt = sum(length > t for length in decode_lengths)
            awe, alpha = self.attention(encoder_out[:bt], h[:bt])
            awe = torch.sigmoid(self.f_beta(h[:bt])) * awe
            h, c = self.decode_step(torch.cat([embeddings[:bt, t, :], awe], dim=1), (h[:bt], c[:bt]))
            preds = self.fc(self.dropout(h))
            predictions[:bt, t, :] = preds
            alphas[:bt, t, :] = alpha
        return predictions, encoded_captions, decode_lengths, alphas, sort_ind


class CaptionDataset(Dataset):
    """Each image's caption spells its class: start, tens-style words for the class, end, padded to 6."""

    def __init__(self, train):
        self.images = datasets.CIFAR10("data", train=train, transform=transforms.ToTensor(), sizes=(120, 40))

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        img, label = self.images[i]
        words = [3 + label] + ([13] if label % 2 else [14, 15])
        caption = [START] + words + [END]
        caplen = len(caption)
        return img, torch.tensor(caption + [PAD] * (6 - caplen)), torch.tensor([caplen])


class AverageMeter:
    def __init__(self):
        self.val = self.avg = self.sum = self.count = 0

    def update(self, val, n=1):
        self.val, self.sum, self.count = val, self.sum + val * n, self.count + n
        self.avg = self.sum / self.count


def clip_gradient(optimizer, grad_clip):
    for group in optimizer.param_groups:
        for param in group["params"]:
            if param.grad is not None:
                param.grad.data.clamp_(-grad_clip, grad_clip)


def adjust_learning_rate(optimizer, shrink_factor):
    for param_group in optimizer.param_groups:
        param_group["lr"] = param_group["lr"] * shrink_factor


def train(train_loader, encoder, decoder, criterion, decoder_optimizer, alpha_c, grad_clip):
    decoder.train()
    encoder.train()
    losses = AverageMeter()
    for imgs, caps, caplens in train_loader:
        imgs = encoder(imgs)
        scores, caps_sorted, decode_lengths, alphas, sort_ind = decoder(imgs, caps, caplens)
        targets = caps_sorted[:, 1:]
        scores = pack_padded_sequence(scores, decode_lengths, batch_first=True).data
        targets = pack_padded_sequence(targets, decode_lengths, batch_first=True).data
        loss = criterion(scores, targets)
        loss += alpha_c * ((1. - alphas.sum(dim=1)) ** 2).mean()
        decoder_optimizer.zero_grad()
        loss.backward()
        if grad_clip is not None:
            clip_gradient(decoder_optimizer, grad_clip)
        decoder_optimizer.step()
        losses.update(loss.item(), sum(decode_lengths))
    return losses.avg


def validate(val_loader, encoder, decoder, criterion, alpha_c):
    decoder.eval()
    if encoder is not None:
        encoder.eval()
    losses = AverageMeter()
    hits = total = 0
    with torch.no_grad():
        for imgs, caps, caplens in val_loader:
            imgs = encoder(imgs)
            scores, caps_sorted, decode_lengths, alphas, sort_ind = decoder(imgs, caps, caplens)
            targets = caps_sorted[:, 1:]
            packed = pack_padded_sequence(scores, decode_lengths, batch_first=True).data
            loss = criterion(packed, pack_padded_sequence(targets, decode_lengths, batch_first=True).data)
            loss += alpha_c * ((1. - alphas.sum(dim=1)) ** 2).mean()
            losses.update(loss.item(), sum(decode_lengths))
            for j, n in enumerate(decode_lengths):
                hits += (scores[j, :n].argmax(-1) == targets[j, :n]).sum().item()
                total += n
    return hits / total, losses.avg


def main(watch):
    torch.manual_seed(0)
    alpha_c, grad_clip, epochs = 1.0, 5.0, 3
    encoder, decoder = Encoder(), DecoderWithAttention(vocab_size=16)
    decoder_optimizer = torch.optim.Adam(params=filter(lambda p: p.requires_grad, decoder.parameters()), lr=4e-3)
    criterion = nn.CrossEntropyLoss()
    train_loader = DataLoader(CaptionDataset(train=True), batch_size=16, shuffle=True)
    val_loader = DataLoader(CaptionDataset(train=False), batch_size=16, shuffle=True)
    best_bleu4, epochs_since_improvement = 0.0, 0
    with watch([encoder, decoder]):
        for epoch in range(epochs):
            if epochs_since_improvement > 0 and epochs_since_improvement % 8 == 0:
                adjust_learning_rate(decoder_optimizer, 0.8)
            train(train_loader, encoder, decoder, criterion, decoder_optimizer, alpha_c, grad_clip)
            recent_bleu4, val_loss = validate(val_loader, encoder, decoder, criterion, alpha_c)
            if recent_bleu4 > best_bleu4:
                best_bleu4, epochs_since_improvement = recent_bleu4, 0
            else:
                epochs_since_improvement += 1
            print(f"epoch {epoch}: score {recent_bleu4:.3f} val loss {val_loss:.3f}")
    return [encoder, decoder, decoder_optimizer]


from tests.doctor_published import dedent, variant  # noqa: E402

VAL_BODY = """\
        for imgs, caps, caplens in val_loader:
            imgs = encoder(imgs)
            scores, caps_sorted, decode_lengths, alphas, sort_ind = decoder(imgs, caps, caplens)
            targets = caps_sorted[:, 1:]
            packed = pack_padded_sequence(scores, decode_lengths, batch_first=True).data
            loss = criterion(packed, pack_padded_sequence(targets, decode_lengths, batch_first=True).data)
            loss += alpha_c * ((1. - alphas.sum(dim=1)) ** 2).mean()
            losses.update(loss.item(), sum(decode_lengths))
            for j, n in enumerate(decode_lengths):
                hits += (scores[j, :n].argmax(-1) == targets[j, :n]).sum().item()
                total += n
"""
VARIANTS = [
    variant("hand_clamp_after_step", "clip_after_step",
            ("        if grad_clip is not None:\n            clip_gradient(decoder_optimizer, grad_clip)\n"
             "        decoder_optimizer.step()\n",
             "        decoder_optimizer.step()\n"
             "        if grad_clip is not None:\n            clip_gradient(decoder_optimizer, grad_clip)\n")),
    variant("validate_without_decoder_eval", "eval_in_train_mode", ("    decoder.eval()\n", "")),
    variant("validate_without_no_grad", "missing_no_grad", ("    with torch.no_grad():\n" + VAL_BODY, dedent(VAL_BODY))),
    variant("softmax_scores_into_cross_entropy", "softmax_before_cross_entropy",
            ("            preds = self.fc(self.dropout(h))\n",
             "            preds = self.fc(self.dropout(h)).softmax(dim=1)\n")),
    variant("val_loss_mean_of_batches", "mean_of_batch_means",
            ("            losses.update(loss.item(), sum(decode_lengths))\n            for j",
             "            losses.update(loss.item())\n            for j")),
]
