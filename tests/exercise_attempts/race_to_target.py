"""Attempts at Exercise 8.1, race_to_target(model, optimizer, train_loader, val_inputs, val_targets, target,
max_updates) -> updates or None."""
import torch
from torch import nn


def _accuracy(model, val_inputs, val_targets):
    model.eval()
    with torch.no_grad():
        acc = (model(val_inputs).argmax(dim=1) == val_targets).sum().item() / len(val_targets)
    model.train()       # (a float32 mean here until issue 40.4 stated the accuracy rule: an integer count)
    return acc


def right_nested_loops(model, optimizer, train_loader, val_inputs, val_targets, target, max_updates):
    """Epochs in a while loop, one update per batch, a no_grad eval-mode measurement after each."""
    updates = 0
    model.train()
    while updates < max_updates and len(train_loader) > 0:
        for x, y in train_loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            updates += 1
            if _accuracy(model, val_inputs, val_targets) >= target:
                return updates
            if updates == max_updates:
                return None
    return None


def right_batch_stream(model, optimizer, train_loader, val_inputs, val_targets, target, max_updates):
    """A generator of batches over endless epochs, zipped with the update numbers 1..max_updates."""
    def batches():
        while len(train_loader):
            yield from train_loader

    for update, (x, y) in zip(range(1, max_updates + 1), batches()):
        model.train()
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        model.eval()
        with torch.inference_mode():
            correct = (model(val_inputs).argmax(-1) == val_targets).sum().item()
        model.train()
        if correct / len(val_targets) >= target:
            return update
    return None


def _race(model, optimizer, loader, vx, vy, target, max_updates, measure=_accuracy, ge=True, stop=True,
          limit=None, one_epoch=False, offset=0):
    updates, first = 0, None
    limit = max_updates if limit is None else limit
    model.train()
    while updates < limit:
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            updates += 1
            acc = measure(model, vx, vy)
            if (acc >= target if ge else acc > target) and first is None:
                first = updates - offset
                if stop:
                    return first
            if updates >= limit:
                return first
        if one_epoch:
            return first
    return first


def wrong_strictly_above(model, optimizer, train_loader, val_inputs, val_targets, target, max_updates):
    """acc > target: an accuracy exactly at the target (e.g. 0.75 on 4 examples) does not count."""
    return _race(model, optimizer, train_loader, val_inputs, val_targets, target, max_updates, ge=False)


def wrong_measures_in_train_mode(model, optimizer, train_loader, val_inputs, val_targets, target, max_updates):
    """no_grad but no eval(): Dropout noise in the accuracy, and its draws shift the next batches' masks."""
    def measure(model, vx, vy):
        with torch.no_grad():
            return (model(vx).argmax(1) == vy).float().mean().item()
    return _race(model, optimizer, train_loader, val_inputs, val_targets, target, max_updates, measure=measure)


def wrong_never_back_to_train(model, optimizer, train_loader, val_inputs, val_targets, target, max_updates):
    """eval() for the measurement and no train() after: from update 2 on, training runs without Dropout."""
    def measure(model, vx, vy):
        model.eval()
        with torch.no_grad():
            return (model(vx).argmax(1) == vy).float().mean().item()
    return _race(model, optimizer, train_loader, val_inputs, val_targets, target, max_updates, measure=measure)


def wrong_builds_graph(model, optimizer, train_loader, val_inputs, val_targets, target, max_updates):
    """eval() and train() but no no_grad: same numbers, a graph built for every measurement."""
    def measure(model, vx, vy):
        model.eval()
        acc = (model(vx).argmax(1) == vy).float().mean().item()
        model.train()
        return acc
    return _race(model, optimizer, train_loader, val_inputs, val_targets, target, max_updates, measure=measure)


def wrong_one_epoch(model, optimizer, train_loader, val_inputs, val_targets, target, max_updates):
    """One pass over train_loader only: a target first reached in epoch 2 gives None."""
    return _race(model, optimizer, train_loader, val_inputs, val_targets, target, max_updates, one_epoch=True)


def wrong_zero_based_count(model, optimizer, train_loader, val_inputs, val_targets, target, max_updates):
    """Returns the 0-based index of the update, one less than the number of updates: any run that reaches it."""
    return _race(model, optimizer, train_loader, val_inputs, val_targets, target, max_updates, offset=1)


def wrong_one_update_too_many(model, optimizer, train_loader, val_inputs, val_targets, target, max_updates):
    """Loop runs while updates <= max_updates: a target first reached at update max_updates + 1 is returned."""
    return _race(model, optimizer, train_loader, val_inputs, val_targets, target, max_updates,
                 limit=max_updates + 1)


def wrong_does_not_stop(model, optimizer, train_loader, val_inputs, val_targets, target, max_updates):
    """Remembers the first crossing but trains on to max_updates: the right number, the model trained too long."""
    return _race(model, optimizer, train_loader, val_inputs, val_targets, target, max_updates, stop=False)
