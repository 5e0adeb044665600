"""The graph-memory meter (chapters 4-8): what autograd keeps for backward, measured, never estimated.

On the CPU the meter tallies the bytes autograd saves for backward, with
``torch.autograd.graph.saved_tensors_hooks``. Each saved tensor is wrapped in a tiny packet owned
by autograd's graph; the meter holds no reference to any packet or tensor, and a packet's
finalizer tells the meter when autograd lets go of it (after ``backward()``, or when the last
reference to the graph disappears). Choices, so the figures can be checked by hand:

- Counted per storage: a tensor saved twice (ReLU's output is saved by ReLU and by the next
  Linear) counts once; a saved view counts its whole storage, because that is what stays alive.
- Parameters and views of them (leaf tensors that require grad) are not counted: they live
  anyway. What is counted is what the graph keeps on top of the model: inputs, activations,
  targets, small outputs such as a loss's total weight.
- A packet holds an activation through ``detach()``: holding the tensor itself (with its
  ``grad_fn``) would close a reference cycle through the graph, and a graph that never runs
  backward would then never be freed (measured: the same happens to a pack hook that returns
  an op's output unchanged).

On CUDA the meter reports ``torch.cuda.memory_allocated`` minus its value when the meter was
created: everything the allocator handed out meanwhile (activations, and also gradients or
optimizer state allocated for the first time), which is what the GPU really pays.
"""
from __future__ import annotations

import operator

import torch

CPU_KIND = "cpu: bytes autograd saved for backward"
CUDA_KIND = "cuda: allocator"


class _Parameter:
    """What autograd stores for a saved parameter (not counted)."""

    __slots__ = ("tensor",)

    def __init__(self, tensor: torch.Tensor):
        self.tensor = tensor


class _Packet:
    """What autograd stores for a counted saved tensor; tells the meter when autograd drops it."""

    __slots__ = ("tensor", "meter", "key")

    def __init__(self, tensor: torch.Tensor, meter: "GraphMemoryMeter", key: int):
        self.tensor, self.meter, self.key = tensor, meter, key

    def __del__(self):
        meter, key = self.meter, self.key
        count = meter._refs[key] - 1
        if count:
            meter._refs[key] = count
        else:
            del meter._refs[key]
            meter._live -= meter._sizes.pop(key)


_unpack = operator.attrgetter("tensor")  # a C-level callable: unpacking costs no Python frame


class GraphMemoryMeter:
    """Live and peak bytes of autograd's saved tensors (CPU) or of the CUDA allocator (chapters 4-8).

    Use it as a context manager around forward and loss (``with meter: loss = f(model(x))``); it may
    be entered again and again: graphs still alive from earlier entries keep counting.
    """

    def __init__(self, device: str | torch.device = "cpu"):
        self.device = torch.device(device)
        self.kind = CUDA_KIND if self.device.type == "cuda" else CPU_KIND
        self._live = 0                      # CPU: saved bytes alive now
        self._refs: dict[int, int] = {}     # CPU: storage address -> packets alive for it
        self._sizes: dict[int, int] = {}    # CPU: storage address -> bytes
        self._hooks = None
        self._peak = 0
        self._baseline = 0
        if self.device.type == "cuda":
            self._baseline = torch.cuda.memory_allocated(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)

    def _pack(self, tensor: torch.Tensor) -> object:
        if tensor.requires_grad:
            base = tensor._base
            if tensor.grad_fn is None or (base is not None and base.grad_fn is None):
                return _Parameter(tensor)             # a parameter or a view of one: not graph memory
            tensor = tensor.detach()  # an activation: held without its grad_fn, or graph and packet form a cycle
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        count = self._refs.get(key, 0)
        if count == 0:
            size = storage.nbytes()
            self._sizes[key] = size
            self._live += size
            if self._live > self._peak:
                self._peak = self._live
        self._refs[key] = count + 1
        return _Packet(tensor, self, key)

    def __enter__(self) -> "GraphMemoryMeter":
        if self.device.type != "cuda":  # on CUDA the allocator already counts everything
            self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, _unpack)
            self._hooks.__enter__()
        return self

    def __exit__(self, *exc_info) -> None:
        if self._hooks is not None:
            self._hooks.__exit__(*exc_info)
            self._hooks = None

    @property
    def bytes(self) -> int:
        """Bytes alive now: saved-for-backward (CPU) or allocated since the meter was made (CUDA)."""
        if self.device.type == "cuda":
            return max(0, torch.cuda.memory_allocated(self.device) - self._baseline)
        return self._live

    @property
    def peak(self) -> int:
        """The most bytes seen alive since the meter was made or `reset_peak()` was last called."""
        if self.device.type == "cuda":
            return max(self._peak, torch.cuda.max_memory_allocated(self.device) - self._baseline)
        return self._peak

    def reset_peak(self) -> None:
        """Start a new peak window at the current live bytes (the loop calls it once per step)."""
        self._peak = self.bytes
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)


def count_new_nodes(root: object, seen: set) -> int:
    """Autograd nodes reachable from `root` (a grad_fn) and not yet in `seen`, which gains them (chapter 5)."""
    count, todo = 0, [root]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        count += 1
        todo.extend(next_node for next_node, _ in node.next_functions)
    return count
