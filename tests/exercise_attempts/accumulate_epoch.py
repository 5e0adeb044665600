"""Attempts at Exercise 5.2, accumulate_epoch(model, loader, loss_fn, optimizer, K) -> number of updates."""
import torch


def _windows(loader, K):
    window = []
    for batch in loader:
        window.append(batch)
        if len(window) == K:
            yield window
            window = []
    if window:
        yield window


def right_buffered_windows(model, loader, loss_fn, optimizer, K):
    """Buffers a window's batches, then weights each mean loss by its share of the window's examples."""
    model.train()
    optimizer.zero_grad()
    updates = 0
    for window in _windows(loader, K):
        total = sum(len(y) for _, y in window)
        for x, y in window:
            (loss_fn(model(x), y) * (len(y) / total)).backward()
        optimizer.step()
        optimizer.zero_grad()
        updates += 1
    return updates


def right_rescale_grads(model, loader, loss_fn, optimizer, K):
    """Backward of loss x batch size (a sum), then divides the summed gradients by the window's examples."""
    model.train()
    params = [p for g in optimizer.param_groups for p in g["params"]]
    for p in params:
        p.grad = None
    updates, seen, pending = 0, 0, 0
    n_batches = len(loader)
    for i, (x, y) in enumerate(loader):
        (loss_fn(model(x), y) * y.shape[0]).backward()
        seen += y.shape[0]
        pending += 1
        if pending == K or i == n_batches - 1:
            with torch.no_grad():
                for p in params:
                    if p.grad is not None:
                        p.grad /= seen
            optimizer.step()
            for p in params:
                p.grad = None
            updates, seen, pending = updates + 1, 0, 0
    return updates


def wrong_divide_by_K(model, loader, loss_fn, optimizer, K):
    """Every loss / K: the short last window's update is too small (10 examples, B=2, K=4)."""
    optimizer.zero_grad()
    updates = 0
    for window in _windows(loader, K):
        for x, y in window:
            (loss_fn(model(x), y) / K).backward()
        optimizer.step()
        optimizer.zero_grad()
        updates += 1
    return updates


def wrong_no_flush(model, loader, loss_fn, optimizer, K):
    """Steps only when (i + 1) % K == 0: the short last window is never applied (5 batches, K=2)."""
    optimizer.zero_grad()
    updates = 0
    for i, (x, y) in enumerate(loader):
        (loss_fn(model(x), y) / K).backward()
        if (i + 1) % K == 0:
            optimizer.step()
            optimizer.zero_grad()
            updates += 1
    return updates


def wrong_divide_by_window_batches(model, loader, loss_fn, optimizer, K):
    """Loss / (batches in the window): a partial last batch weighs as much as a full one (10 examples, B=4, K=3)."""
    optimizer.zero_grad()
    updates = 0
    for window in _windows(loader, K):
        for x, y in window:
            (loss_fn(model(x), y) / len(window)).backward()
        optimizer.step()
        optimizer.zero_grad()
        updates += 1
    return updates


def wrong_nominal_window(model, loader, loss_fn, optimizer, K):
    """Weight len(y) / (K * batch_size): the short last window is under-weighted (10 examples, B=2, K=4)."""
    optimizer.zero_grad()
    updates = 0
    for window in _windows(loader, K):
        for x, y in window:
            (loss_fn(model(x), y) * len(y) / (K * loader.batch_size)).backward()
        optimizer.step()
        optimizer.zero_grad()
        updates += 1
    return updates


def wrong_zero_grad_once(model, loader, loss_fn, optimizer, K):
    """zero_grad only before the epoch: each update also re-applies every earlier window's gradient (2+ windows)."""
    optimizer.zero_grad()
    updates = 0
    for window in _windows(loader, K):
        total = sum(len(y) for _, y in window)
        for x, y in window:
            (loss_fn(model(x), y) * len(y) / total).backward()
        optimizer.step()
        updates += 1
    return updates


def wrong_step_off_by_one(model, loader, loss_fn, optimizer, K):
    """Steps when i % K == 0: the first update holds one micro-batch, later windows are shifted (K=2, 4 batches)."""
    optimizer.zero_grad()
    sizes = [len(y) for _, y in loader]
    bounds = [0] + list(range(1, len(sizes), K)) + [len(sizes)]
    totals = {}
    for a, b in zip(bounds, bounds[1:]):
        for j in range(a, b):
            totals[j] = sum(sizes[a:b])
    updates = 0
    for i, (x, y) in enumerate(loader):
        (loss_fn(model(x), y) * len(y) / totals[i]).backward()
        if i % K == 0 or i == len(sizes) - 1:
            optimizer.step()
            optimizer.zero_grad()
            updates += 1
    return updates


def wrong_returns_micro_batches(model, loader, loss_fn, optimizer, K):
    """Trains right but returns the number of micro-batches ("steps"), not of updates: any K > 1."""
    optimizer.zero_grad()
    count = 0
    for window in _windows(loader, K):
        total = sum(len(y) for _, y in window)
        for x, y in window:
            (loss_fn(model(x), y) * len(y) / total).backward()
            count += 1
        optimizer.step()
        optimizer.zero_grad()
    return count
