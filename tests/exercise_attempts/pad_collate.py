"""Attempts at Exercise 2.1, pad_collate(batch) -> (input_ids, mask, labels)."""
import torch
import torch.nn.functional as F


def right_preallocate(batch):
    """Zeros [B, T] then copy each row in; the mask from the lengths by broadcasting."""
    lengths = torch.tensor([len(tokens) for tokens, _ in batch])
    T = int(lengths.max()) if len(batch) else 0
    input_ids = torch.zeros(len(batch), T, dtype=torch.long)
    for row, (tokens, _) in enumerate(batch):
        input_ids[row, :len(tokens)] = tokens
    mask = torch.arange(T) < lengths[:, None]
    labels = torch.tensor([label for _, label in batch], dtype=torch.long)
    return input_ids, mask, labels


def right_pad_each(batch):
    """F.pad every row to T on the right, then stack; the mask padded the same way from ones."""
    T = max(len(tokens) for tokens, _ in batch)
    ids = torch.stack([F.pad(tokens.long(), (0, T - len(tokens)), value=0) for tokens, _ in batch])
    mask = torch.stack([F.pad(torch.ones(len(t), dtype=torch.bool), (0, T - len(t)), value=False) for t, _ in batch])
    return ids, mask, torch.as_tensor([int(label) for _, label in batch], dtype=torch.int64)


def wrong_left_pad(batch):
    """Pads on the left (as some decoders do): any batch with unequal lengths."""
    T = max(len(t) for t, _ in batch)
    ids = torch.stack([F.pad(t, (T - len(t), 0)) for t, _ in batch])
    mask = torch.stack([F.pad(torch.ones(len(t), dtype=torch.bool), (T - len(t), 0)) for t, _ in batch])
    return ids, mask, torch.tensor([label for _, label in batch])


def wrong_mask_inverted(batch):
    """True on padding, the key_padding_mask convention of nn.MultiheadAttention: any batch."""
    ids, mask, labels = right_preallocate(batch)
    return ids, ~mask, labels


def wrong_long_mask(batch):
    """Mask of 0/1 longs, not a BoolTensor: equal values, wrong dtype, any batch."""
    ids, mask, labels = right_preallocate(batch)
    return ids, mask.long(), labels


def wrong_float_ids(batch):
    """torch.zeros(B, T) defaults to float32: input_ids not a LongTensor (nn.Embedding refuses it), any batch."""
    T = max(len(t) for t, _ in batch)
    ids = torch.zeros(len(batch), T)
    mask = torch.zeros(len(batch), T, dtype=torch.bool)
    for i, (t, _) in enumerate(batch):
        ids[i, :len(t)] = t
        mask[i, :len(t)] = True
    return ids, mask, torch.tensor([label for _, label in batch])


def wrong_float_labels(batch):
    """torch.Tensor(labels) makes float32 labels, not a LongTensor: any batch."""
    ids, mask, _ = right_preallocate(batch)
    return ids, mask, torch.Tensor([label for _, label in batch])


def wrong_first_length(batch):
    """T from the first sequence (as if the batch were sorted): longer later rows are truncated, e.g. lengths [2, 3]."""
    T = len(batch[0][0])
    ids = torch.zeros(len(batch), T, dtype=torch.long)
    for i, (t, _) in enumerate(batch):
        ids[i, :min(T, len(t))] = t[:T]
    return ids, ids != 0, torch.tensor([label for _, label in batch])


def wrong_squeezed_labels(batch):
    """Labels squeezed: a batch of one gives labels of shape [] instead of [1]."""
    ids, mask, labels = right_preallocate(batch)
    return ids, mask, torch.tensor([[label] for _, label in batch]).squeeze()
