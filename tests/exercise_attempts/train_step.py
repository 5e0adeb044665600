"""Attempts at Exercise 3.1, train_step(model, inputs, targets, loss_fn, optimizer)."""
import torch


def right_closure(model, inputs, targets, loss_fn, optimizer):
    """optimizer.step(closure): the closure zeroes, forwards and backwards; SGD and Adam call it once."""
    def closure():
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        return loss
    return optimizer.step(closure).item()


def right_grads_to_none(model, inputs, targets, loss_fn, optimizer):
    """Clears every parameter's grad by hand (what zero_grad(set_to_none=True) does), float() of the loss."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            p.grad = None
    loss = loss_fn(model(inputs), targets)
    loss.backward()
    optimizer.step()
    return float(loss.detach())


def wrong_no_zero_grad(model, inputs, targets, loss_fn, optimizer):
    """No zero_grad: the second and third calls step on summed gradients."""
    loss = loss_fn(model(inputs), targets)
    loss.backward()
    optimizer.step()
    return loss.item()


def wrong_returns_tensor(model, inputs, targets, loss_fn, optimizer):
    """Returns the loss tensor (with its graph), not a Python float: any call."""
    optimizer.zero_grad()
    loss = loss_fn(model(inputs), targets)
    loss.backward()
    optimizer.step()
    return loss


def wrong_zero_before_step(model, inputs, targets, loss_fn, optimizer):
    """zero_grad between backward and step: SGD steps on zeros (momentum replays old steps), Adam only decays."""
    loss = loss_fn(model(inputs), targets)
    loss.backward()
    optimizer.zero_grad()
    optimizer.step()
    return loss.item()


def wrong_step_before_backward(model, inputs, targets, loss_fn, optimizer):
    """step() before backward(): each call applies the previous call's gradient (the first call applies none)."""
    optimizer.zero_grad()
    loss = loss_fn(model(inputs), targets)
    optimizer.step()
    loss.backward()
    return loss.item()


def wrong_eval_forward(model, inputs, targets, loss_fn, optimizer):
    """model.eval() "for a deterministic step": Dropout off and BatchNorm on running stats, unlike torch's step."""
    model.eval()
    optimizer.zero_grad()
    loss = loss_fn(model(inputs), targets)
    loss.backward()
    optimizer.step()
    model.train()
    return loss.item()


def wrong_reports_loss_after(model, inputs, targets, loss_fn, optimizer):
    """Returns the loss after the update, from a second forward: BatchNorm stats and Dropout's RNG move twice."""
    optimizer.zero_grad()
    loss_fn(model(inputs), targets).backward()
    optimizer.step()
    with torch.no_grad():
        return loss_fn(model(inputs), targets).item()


def wrong_leaves_eval(model, inputs, targets, loss_fn, optimizer):
    """Reports the loss in eval mode under no_grad and leaves the model in eval: the next call trains without Dropout."""
    optimizer.zero_grad()
    loss = loss_fn(model(inputs), targets)
    loss.backward()
    optimizer.step()
    model.eval()
    return loss.item()
