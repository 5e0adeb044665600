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
    """What autograd stores for a counted saved tensor; `release` tells the meter when autograd drops it."""

    __slots__ = ("tensor", "key", "release")

    def __del__(self):
        self.release(self.key)


_unpack = operator.attrgetter("tensor")  # a C-level callable: unpacking costs no Python frame


class GraphMemoryMeter:
    """Live and peak bytes of autograd's saved tensors (CPU) or of the CUDA allocator (chapters 4-8).

    Use it as a context manager around forward and loss (``with meter: loss = f(model(x))``); it may
    be entered again and again: graphs still alive from earlier entries keep counting.

    Cost (issue 9, item 8): the pack hook and the packet's release are closures over local state (no
    attribute look-ups on the meter), and one ``saved_tensors_hooks`` object is made once and
    re-entered, so the meter adds a few microseconds per saved tensor (``benchmarks/bench_loop.py``).
    """

    def __init__(self, device: str | torch.device = "cpu"):
        self.device = torch.device(device)
        self.kind = CUDA_KIND if self.device.type == "cuda" else CPU_KIND
        self._state = [0, 0]                # CPU: [bytes alive now, peak bytes]
        self._refs: dict[int, int] = {}     # CPU: storage address -> packets alive for it
        self._sizes: dict[int, int] = {}    # CPU: storage address -> bytes
        self._depth = 0
        self._baseline = 0
        self._cuda_peak = 0
        if self.device.type == "cuda":
            self._hooks = None                # the allocator already counts everything
            self._baseline = torch.cuda.memory_allocated(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        else:
            self._hooks = torch.autograd.graph.saved_tensors_hooks(*self._make_hooks())

    def _make_hooks(self):
        state, refs, sizes = self._state, self._refs, self._sizes
        new_packet = _Packet.__new__

        def release(key: int) -> None:
            count = refs[key] - 1
            if count:
                refs[key] = count
            else:
                del refs[key]
                state[0] -= sizes.pop(key)

        def pack(tensor: torch.Tensor) -> object:
            if tensor.requires_grad:
                grad_fn = tensor.grad_fn
                if grad_fn is None:
                    return _Parameter(tensor)          # a parameter: lives anyway, not graph memory
                base = tensor._base
                if base is not None and base.grad_fn is None:
                    return _Parameter(tensor)          # a view of a parameter (W.t() in Linear)
                tensor = tensor.detach()  # an activation: held without its grad_fn, or graph and packet form a cycle
            storage = tensor.untyped_storage()
            key = storage.data_ptr()
            count = refs.get(key)
            if count is None:
                size = storage.nbytes()
                sizes[key] = size
                refs[key] = 1
                live = state[0] + size
                state[0] = live
                if live > state[1]:
                    state[1] = live
            else:
                refs[key] = count + 1
            packet = new_packet(_Packet)
            packet.tensor, packet.key, packet.release = tensor, key, release
            return packet

        return pack, _unpack

    def __enter__(self) -> "GraphMemoryMeter":
        if self._hooks is not None:
            if self._depth == 0:
                self._hooks.__enter__()
            self._depth += 1
        return self

    def __exit__(self, *exc_info) -> None:
        if self._hooks is not None and self._depth:
            self._depth -= 1
            if self._depth == 0:
                self._hooks.__exit__(*exc_info)

    @property
    def bytes(self) -> int:
        """Bytes alive now: saved-for-backward (CPU) or allocated since the meter was made (CUDA)."""
        if self.device.type == "cuda":
            return max(0, torch.cuda.memory_allocated(self.device) - self._baseline)
        return self._state[0]

    @property
    def peak(self) -> int:
        """The most bytes seen alive since the meter was made or `reset_peak()` was last called."""
        if self.device.type == "cuda":
            return max(self._cuda_peak, torch.cuda.max_memory_allocated(self.device) - self._baseline)
        return self._state[1]

    def reset_peak(self) -> None:
        """Start a new peak window at the current live bytes (the loop calls it once per step)."""
        if self.device.type == "cuda":
            self._cuda_peak = self.bytes
            torch.cuda.reset_peak_memory_stats(self.device)
        else:
            self._state[1] = self._state[0]


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
