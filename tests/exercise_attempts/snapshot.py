"""Attempts at Exercise 5.3, snapshot(model) -> a copy of model.state_dict() that later training does not change."""
import copy
import io

import torch


def right_deepcopy_module(model):
    """Deep-copies the whole module and takes the copy's state dict: nobody else holds those tensors."""
    return copy.deepcopy(model).state_dict()


def right_serialise_round_trip(model):
    """What a checkpoint on disk does, in memory: torch.save into a buffer, torch.load back out."""
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


def wrong_plain_state_dict(model):
    """state_dict() holds the live tensors: one SGD step later the "snapshot" holds the new weights."""
    return model.state_dict()


def wrong_shallow_dict_copy(model):
    """dict(...) copies the dict, not the tensors in it: one SGD step later the values have moved too."""
    return dict(model.state_dict())


def wrong_detach_only(model):
    """detach() makes a new tensor on the same memory: one in-place optimizer step changes the snapshot."""
    return {name: t.detach() for name, t in model.state_dict().items()}


def wrong_shallow_module_copy(model):
    """copy.copy(model) shares the parameter and buffer tensors: one training step later the snapshot has moved."""
    return copy.copy(model).state_dict()


def wrong_parameters_only(model):
    """Clones the parameters only: a BatchNorm model's snapshot lacks running_mean/var and num_batches_tracked."""
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def wrong_buffers_by_reference(model):
    """Clones the parameters but keeps the buffers by reference: BatchNorm's running stats move on after the call."""
    params = dict(model.named_parameters())
    return {name: t.detach().clone() if name in params else t for name, t in model.state_dict().items()}


def wrong_zip_order(model):
    """Names from state_dict zipped with parameters() then buffers(): Linear-BatchNorm-Linear gets values misnamed."""
    tensors = [p.detach().clone() for p in model.parameters()] + [b.clone() for b in model.buffers()]
    return dict(zip(model.state_dict().keys(), tensors))


def wrong_all_to_float(model):
    """Clones everything as float32: BatchNorm's num_batches_tracked (int64) comes back as float32."""
    return {name: t.detach().clone().float() for name, t in model.state_dict().items()}


def wrong_leaves_eval_mode(model):
    """Puts the model in eval mode to "freeze" it before copying, and leaves it there: any model in train mode."""
    model.eval()
    return copy.deepcopy(model.state_dict())


def wrong_non_persistent_buffers(model):
    """Parameters and named_buffers(), cloned: a buffer registered with persistent=False adds a key state_dict lacks."""
    named = dict(model.named_parameters())
    named.update(model.named_buffers())
    return {name: t.detach().clone() for name, t in named.items()}
