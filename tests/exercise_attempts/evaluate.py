"""Attempts at Exercise 4.1, evaluate(model, loader, loss_fn) -> (mean_loss, accuracy); loss_fn returns a batch mean."""
import torch


def right_restores_every_module(model, loader, loss_fn):
    """Remembers each submodule's own mode (a frozen BatchNorm stays frozen), sums loss x batch size."""
    modes = {m: m.training for m in model.modules()}
    model.eval()
    loss_sum, correct, n = 0.0, 0, 0
    with torch.no_grad():
        for x, y in loader:
            logits = model(x)
            loss_sum += loss_fn(logits, y).item() * len(y)
            correct += (logits.argmax(dim=1) == y).sum().item()
            n += len(y)
    for m, mode in modes.items():
        m.training = mode
    return loss_sum / n, correct / n


def right_inference_mode(model, loader, loss_fn):
    """inference_mode and try/finally; tensor sums turned into floats once at the end."""
    modes = [(layer, layer.training) for layer in model.modules()]
    model.eval()
    try:
        with torch.inference_mode():
            totals = torch.zeros(3, dtype=torch.float64)
            for x, y in loader:
                logits = model(x)
                totals += torch.stack([loss_fn(logits, y).double() * y.numel(),
                                       (logits.argmax(-1) == y).sum().double(), torch.tensor(y.numel()).double()])
    finally:
        for layer, training in modes:
            layer.train(training)
    return float(totals[0] / totals[2]), float(totals[1] / totals[2])


def _loop(model, loader, loss_fn, per_batch=False, denominator=None):
    losses, accs, loss_sum, correct, n = [], [], 0.0, 0, 0
    for x, y in loader:
        logits = model(x)
        loss = loss_fn(logits, y)
        losses.append(loss.item())
        accs.append((logits.argmax(1) == y).float().mean().item())
        loss_sum += loss.item() * len(y)
        correct += (logits.argmax(1) == y).sum().item()
        n += len(y)
    if per_batch:
        return sum(losses) / len(losses), sum(accs) / len(accs)
    n = denominator if denominator is not None else n
    return loss_sum / n, correct / n


def wrong_mean_of_batch_means(model, loader, loss_fn):
    """Averages the batch losses and accuracies: a short last batch counts as much as a full one (10 examples, B=4)."""
    was = model.training
    model.eval()
    with torch.no_grad():
        out = _loop(model, loader, loss_fn, per_batch=True)
    model.train(was)
    return out


def wrong_no_no_grad(model, loader, loss_fn):
    """No no_grad: numbers right, but every batch builds a graph (the memory meter sees it)."""
    was = model.training
    model.eval()
    out = _loop(model, loader, loss_fn)
    model.train(was)
    return out


def wrong_leaves_eval(model, loader, loss_fn):
    """model.eval() and never back: a model passed in train mode comes back in eval mode."""
    model.eval()
    with torch.no_grad():
        return _loop(model, loader, loss_fn)


def wrong_always_train_after(model, loader, loss_fn):
    """model.train() at the end: a model passed in eval mode comes back in train mode."""
    model.eval()
    with torch.no_grad():
        out = _loop(model, loader, loss_fn)
    model.train()
    return out


def wrong_no_eval(model, loader, loss_fn):
    """Forgets model.eval(): Dropout stays on and BatchNorm's running stats move, on a train-mode model."""
    with torch.no_grad():
        return _loop(model, loader, loss_fn)


def wrong_divides_by_dataset(model, loader, loss_fn):
    """Divides by len(loader.dataset): wrong with drop_last=True or a sampler over part of the dataset."""
    was = model.training
    model.eval()
    with torch.no_grad():
        out = _loop(model, loader, loss_fn, denominator=len(loader.dataset))
    model.train(was)
    return out


def wrong_returns_tensors(model, loader, loss_fn):
    """Returns 0-d tensors, not Python floats: any loader."""
    was = model.training
    model.eval()
    loss_sum, correct, n = torch.tensor(0.0), torch.tensor(0), 0
    with torch.no_grad():
        for x, y in loader:
            logits = model(x)
            loss_sum += loss_fn(logits, y) * len(y)
            correct += (logits.argmax(1) == y).sum()
            n += len(y)
    model.train(was)
    return loss_sum / n, correct / n


def wrong_full_batches_denominator(model, loader, loss_fn):
    """Divides by len(loader) * batch_size: a partial last batch (10 examples, B=4) is counted as full."""
    was = model.training
    model.eval()
    with torch.no_grad():
        out = _loop(model, loader, loss_fn, denominator=len(loader) * loader.batch_size)
    model.train(was)
    return out
