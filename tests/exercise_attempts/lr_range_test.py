"""Attempts at Exercise 6.1, lr_range_test(model, loader, loss_fn, optimizer, start_lr, end_lr) -> (lrs, losses)."""
import torch


def _rate(i, n, start_lr, end_lr):
    return start_lr * (end_lr / start_lr) ** (i / (n - 1)) if n > 1 else start_lr


def right_set_every_group(model, loader, loss_fn, optimizer, start_lr, end_lr):
    """Writes the batch's rate into every param group before its forward; loss recorded before the step."""
    n = len(loader)
    lrs, losses = [], []
    for i, (x, y) in enumerate(loader):
        lr = _rate(i, n, start_lr, end_lr)
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        lrs.append(lr)
        losses.append(loss.item())
    return lrs, losses


def right_lambda_scheduler(model, loader, loss_fn, optimizer, start_lr, end_lr):
    """torch's LambdaLR with start_lr as base and the factor (end/start)^(i/(n-1)); the rate read back from the group."""
    n = len(loader)
    for group in optimizer.param_groups:
        group["lr"] = start_lr
        group.pop("initial_lr", None)
    ratio = end_lr / start_lr
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: ratio ** (i / (n - 1)) if n > 1 else 1.0)
    lrs, losses = [], []
    for x, y in loader:
        lrs.append(float(optimizer.param_groups[0]["lr"]))
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        scheduler.step()
        losses.append(float(loss))
    return lrs, losses


def _sweep(model, loader, loss_fn, optimizer, rates, after=False, first_group_only=False, zero=True):
    lrs, losses = [], []
    for (x, y), lr in zip(loader, rates):
        for group in optimizer.param_groups[:1] if first_group_only else optimizer.param_groups:
            group["lr"] = lr
        if zero:
            optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        if after:
            with torch.no_grad():
                loss = loss_fn(model(x), y)
        lrs.append(lr)
        losses.append(loss.item())
    return lrs, losses


def wrong_linear_rates(model, loader, loss_fn, optimizer, start_lr, end_lr):
    """Linear steps from start_lr to end_lr, not a constant factor: any n >= 3."""
    n = len(loader)
    rates = [start_lr + (end_lr - start_lr) * i / max(n - 1, 1) for i in range(n)]
    return _sweep(model, loader, loss_fn, optimizer, rates)


def wrong_exponent_over_n(model, loader, loss_fn, optimizer, start_lr, end_lr):
    """Exponent i / n instead of i / (n - 1): the last batch never reaches end_lr, any n >= 2."""
    n = len(loader)
    return _sweep(model, loader, loss_fn, optimizer, [start_lr * (end_lr / start_lr) ** (i / n) for i in range(n)])


def wrong_first_group_only(model, loader, loss_fn, optimizer, start_lr, end_lr):
    """Sets param_groups[0]["lr"] only: an optimizer with two param groups keeps its old rate in the second."""
    n = len(loader)
    return _sweep(model, loader, loss_fn, optimizer, [_rate(i, n, start_lr, end_lr) for i in range(n)],
                  first_group_only=True)


def wrong_loss_after_update(model, loader, loss_fn, optimizer, start_lr, end_lr):
    """Records the loss after the batch's own update (a second forward): any loader."""
    n = len(loader)
    return _sweep(model, loader, loss_fn, optimizer, [_rate(i, n, start_lr, end_lr) for i in range(n)], after=True)


def wrong_rate_set_after_step(model, loader, loss_fn, optimizer, start_lr, end_lr):
    """Sets the next rate after step(): batch i trains with rate i - 1, batch 0 with the optimizer's own rate."""
    n = len(loader)
    lrs, losses = [], []
    for i, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        lr = _rate(i, n, start_lr, end_lr)
        for group in optimizer.param_groups:
            group["lr"] = lr
        lrs.append(lr)
        losses.append(loss.item())
    return lrs, losses


def wrong_n_is_dataset_size(model, loader, loss_fn, optimizer, start_lr, end_lr):
    """n = len(loader.dataset), examples not batches: with batch size 8 the sweep ends near start_lr, not end_lr."""
    n = len(loader.dataset)
    return _sweep(model, loader, loss_fn, optimizer, [_rate(i, n, start_lr, end_lr) for i in range(n)])


def wrong_no_zero_grad(model, loader, loss_fn, optimizer, start_lr, end_lr):
    """No zero_grad: every update applies the sum of all earlier gradients, batch 2 onwards."""
    n = len(loader)
    return _sweep(model, loader, loss_fn, optimizer, [_rate(i, n, start_lr, end_lr) for i in range(n)], zero=False)


def wrong_new_optimizer_per_batch(model, loader, loss_fn, optimizer, start_lr, end_lr):
    """Builds torch.optim.SGD(lr=rate) each batch: the optimizer passed in never steps (and its kind is ignored)."""
    n = len(loader)
    lrs, losses = [], []
    for i, (x, y) in enumerate(loader):
        lr = _rate(i, n, start_lr, end_lr)
        opt = torch.optim.SGD(model.parameters(), lr=lr)
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        lrs.append(lr)
        losses.append(loss.item())
    return lrs, losses


def wrong_returns_tensors(model, loader, loss_fn, optimizer, start_lr, end_lr):
    """Keeps the loss tensors (with their graphs), not floats: any loader."""
    n = len(loader)
    lrs, losses = [], []
    for i, (x, y) in enumerate(loader):
        lr = _rate(i, n, start_lr, end_lr)
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        lrs.append(lr)
        losses.append(loss)
    return lrs, losses
