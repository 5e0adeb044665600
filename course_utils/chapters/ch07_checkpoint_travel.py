"""Chapter 7: checkpoints that travel to another machine or another wrapper, shown on a CPU.

- A GPU checkpoint on a CPU machine: the file's storages carry the location tag "cuda:0" (written here by
  tagging them the way a GPU machine's torch.save does); loading it needs ``map_location``.
- Optimizer state after loading: ``Optimizer.load_state_dict`` casts each state tensor to its parameter's
  device and dtype *at load time*. Move the model after loading and the state stays behind. The CPU shows it
  with dtype (float32 state, float64 weights), the same line of torch that moves devices.
- The ``module.`` prefix of ``DataParallel`` and DDP (both keep your model as ``.module``), beside
  ``_orig_mod.`` of ``torch.compile``: a plain model refuses those keys; strip the prefix or save the
  unwrapped module.
"""
from __future__ import annotations

import io
from dataclasses import dataclass

import torch
from torch import nn, serialization
from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present


def _trained(seed: int = 0) -> tuple[nn.Linear, torch.optim.Adam]:
    torch.manual_seed(seed)
    model = nn.Linear(4, 3)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.randn(8, 4)).pow(2).mean().backward()
    optimizer.step()
    return model, optimizer


def gpu_tagged_checkpoint(state: dict, location: str = "cuda:0") -> bytes:
    """torch.save's bytes for `state` with every storage tagged `location`, as a machine with that device writes it."""
    entry = (0, lambda storage: location, lambda storage, tag: None)
    serialization.register_package(*entry)
    try:
        buffer = io.BytesIO()
        torch.save(state, buffer)
    finally:
        serialization._package_registry.remove(entry)
    return buffer.getvalue()


def _load(data: bytes, map_location) -> tuple[str, dict | None]:
    try:
        return "loaded", torch.load(io.BytesIO(data), map_location=map_location, weights_only=True)
    except Exception as error:  # noqa: BLE001 - the type is what the chapter prints
        return type(error).__name__, None


@dataclass(frozen=True)
class Travel:
    """What each load did: a GPU-tagged file with and without map_location; optimizer state in two orders."""

    without_map: str
    with_map: str
    devices_after_map: set[str]
    equal_after_map: bool
    state_dtype_right: torch.dtype
    state_dtype_wrong: torch.dtype
    step_wrong: str

    def text(self) -> str:
        return "\n".join([
            "a checkpoint whose tensors are tagged cuda:0, on this CPU machine:",
            f"  torch.load(path, weights_only=True): {self.without_map}",
            f"  torch.load(path, map_location='cpu', weights_only=True): {self.with_map}, every tensor on "
            f"{'/'.join(sorted(self.devices_after_map))}, equal to what was saved: {self.equal_after_map}",
            "optimizer state saved in float32, for a model in float64 (dtype standing in for the device):",
            f"  model moved, then optimizer.load_state_dict: exp_avg is {_name(self.state_dtype_right)}",
            f"  optimizer.load_state_dict, then model moved: exp_avg is {_name(self.state_dtype_wrong)}; "
            f"the next step: {self.step_wrong}",
        ])


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _try(action) -> str:
    try:
        action()
        return "works"
    except Exception as error:  # noqa: BLE001 - the type is what the chapter prints
        return type(error).__name__


def travel() -> Travel:
    """Chapter 7: map_location and the optimizer state after loading, on the CPU."""
    model, optimizer = _trained()
    saved = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
    data = gpu_tagged_checkpoint(saved)
    without_map, _ = _load(data, None)
    with_map, loaded = _load(data, "cpu")
    tensors = [*loaded["model"].values(), *(t for s in loaded["optimizer"]["state"].values() for t in s.values())]
    equal = all(torch.equal(loaded["model"][k], v) for k, v in saved["model"].items())

    right_model = nn.Linear(4, 3).double()                      # move first, then load: state follows
    right = torch.optim.Adam(right_model.parameters(), lr=0.01)
    right.load_state_dict(saved["optimizer"])
    wrong_model = nn.Linear(4, 3)                               # load first, then move: state stays behind
    wrong = torch.optim.Adam(wrong_model.parameters(), lr=0.01)
    wrong.load_state_dict(saved["optimizer"])
    wrong_model.double()
    wrong_model(torch.randn(8, 4, dtype=torch.float64)).pow(2).mean().backward()
    return Travel(without_map, with_map, {str(t.device) for t in tensors}, equal,
                  right.state[right_model.weight]["exp_avg"].dtype, wrong.state[wrong_model.weight]["exp_avg"].dtype,
                  _try(wrong.step))


def prefix_lines(wrapped: dict[str, nn.Module], make_plain) -> list[str]:
    """Chapter 7: each wrapper's key prefix, and whether a plain model (``make_plain()``) loads its keys."""
    lines = []
    for name, wrapper in wrapped.items():
        keys = wrapper.state_dict()
        prefix = next(iter(keys)).split(".")[0] + "."
        plain = _try(lambda: make_plain().load_state_dict(keys))
        copy = dict(keys)
        consume_prefix_in_state_dict_if_present(copy, prefix)
        every = all(k.startswith(prefix) for k in keys)
        lines.append(f"{name}: every key starts with {prefix!r}: {every}; a plain model's load_state_dict: {plain}; "
                     f"with the prefix stripped: {_try(lambda: make_plain().load_state_dict(copy))}")
    return lines


def strict_false_line(wrapper: nn.Module, make_plain) -> str:
    """Chapter 7: what load_state_dict(strict=False) does with a wrapper's prefixed keys: no error, nothing loaded."""
    plain = make_plain()
    before = [p.detach().clone() for p in plain.parameters()]
    result = plain.load_state_dict(wrapper.state_dict(), strict=False)
    unchanged = all(torch.equal(a, b) for a, b in zip(before, plain.parameters()))
    total = len(plain.state_dict())
    return (f"strict=False: no error; weights unchanged: {unchanged}; it returns {len(result.missing_keys)} of "
            f"{total} keys missing and {len(result.unexpected_keys)} unexpected")
