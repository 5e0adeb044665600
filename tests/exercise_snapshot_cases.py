"""Exercise 5.3 (`snapshot`): right solutions in other styles, and typical wrong ones with the words their verdict
must contain (merged into tests/exercise_rights.py and tests/exercise_wrongs.py)."""
from __future__ import annotations

import copy
import io
from collections import OrderedDict

import torch

# --- right, written differently -------------------------------------------------------------------------------


def snap_clone(model):
    return {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}


def snap_bytes(model):
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    return torch.load(buffer)


def snap_empty_like(model):
    return OrderedDict((k, torch.empty_like(v).copy_(v)) for k, v in model.state_dict().items())


def snap_deepcopy_model(model):
    return copy.deepcopy(model).state_dict()


RIGHT = [(snap_clone,), (snap_bytes,), (snap_empty_like,), (snap_deepcopy_model,)]

# --- wrong ----------------------------------------------------------------------------------------------------


def snap_references(model):
    return model.state_dict()


def snap_shallow(model):
    return dict(model.state_dict())


def snap_detach(model):
    return {k: v.detach() for k, v in model.state_dict().items()}


def snap_cpu(model):
    return {k: v.cpu() for k, v in model.state_dict().items()}


def snap_parameters_only(model):
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def snap_all_buffers(model):
    found = {name: p.detach().clone() for name, p in model.named_parameters()}
    found.update({name: b.clone() for name, b in model.named_buffers()})
    return found


def snap_float(model):
    return {k: v.clone().float() for k, v in model.state_dict().items()}


def snap_model(model):
    return copy.deepcopy(model)


_STORE: dict = {}


def snap_one_store(model):
    for k, v in model.state_dict().items():
        if k in _STORE:
            _STORE[k].copy_(v)
        else:
            _STORE[k] = v.clone()
    return _STORE


def snap_switches_eval(model):
    model.eval()
    return copy.deepcopy(model.state_dict())


def snap_grad_off(model):
    torch.set_grad_enabled(False)
    return copy.deepcopy(model.state_dict())


def snap_keep_vars(model):
    return {k: v.clone() for k, v in model.state_dict(keep_vars=True).items()}


WRONG = [
    ("state_dict() itself", (snap_references,), "it is the model's own tensor (the same memory)"),
    ("a shallow dict copy", (snap_shallow,), "it is the model's own tensor (the same memory)"),
    ("detach without clone", (snap_detach,), ".detach() (or .cpu() on a CPU model) returns the same memory"),
    ("cpu() on a CPU model", (snap_cpu,), "it is the model's own tensor (the same memory)"),
    ("parameters only", (snap_parameters_only,), "lacks 3 buffers of the state dict: `1.running_mean`"),
    ("named_buffers with a non-persistent one", (snap_all_buffers,), "names the state dict does not: `1.mask`"),
    ("a float copy", (snap_float,), "`1.num_batches_tracked` is torch.float32"),
    ("the model itself", (snap_model,), "a model (an nn.Module), not a state dict"),
    ("one store for every call", (snap_one_store,), "a second snapshot changed the first one's"),
    ("switches to eval mode", (snap_switches_eval,), "left it in eval mode"),
    ("switches grad mode off", (snap_grad_off,), "gradients were still switched off"),
    ("clones attached to the graph", (snap_keep_vars,), "attached to the autograd graph"),
]
