"""The atlas's entries that need a CUDA GPU (quoted from torch, not run here): out of memory, a device-side assert."""
from __future__ import annotations

from course_utils.atlas.entry import Entry

_NEEDS_GPU = "needs a CUDA GPU, which this machine lacks"

ENTRIES = (
    Entry(
        id="cuda-out-of-memory", stage="step", chapter=3,
        title="ran a batch whose activations do not fit in the GPU's memory",
        code=(
            "model = nn.Sequential(nn.Conv2d(3, 256, 3, padding=1), nn.ReLU(), nn.Conv2d(256, 256, 3, padding=1),\n"
            "                      nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 10)).cuda()\n"
            "images = torch.randn(1024, 3, 224, 224, device=\"cuda\")   # one batch of 1024 images\n"
            "model(images).sum().backward()   # every layer's output is kept for backward, for the whole batch\n"
        ),
        fix=(
            "model = nn.Sequential(nn.Conv2d(3, 256, 3, padding=1), nn.ReLU(), nn.Conv2d(256, 256, 3, padding=1),\n"
            "                      nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 10)).cuda()\n"
            "images = torch.randn(1024, 3, 224, 224)   # the batch stays on the CPU\n"
            "for chunk in images.split(32):            # 32 images at a time: gradients add up across chunks\n"
            "    (model(chunk.cuda()).sum()).backward()\n"
            "shown = torch.cuda.max_memory_allocated() // 2**20\n"
        ),
        cause="Training keeps every layer's output for the backward pass, so memory grows with batch size times "
              "activation size; this batch needs more than the card has. Use smaller batches (with gradient "
              "accumulation to keep the effective batch), mixed precision, or activation checkpointing.",
        expect="OutOfMemoryError",
        not_run=_NEEDS_GPU,
        message="CUDA out of memory. Tried to allocate 22.78 GiB. GPU 0 has a total capacity of 31.47 GiB of which "
                "12.73 GiB is free. Including non-PyTorch memory, this process has 18.73 GiB memory in use. Of the "
                "allocated memory 9.08 GiB is allocated by PyTorch, and 9.35 GiB is reserved by PyTorch but "
                "unallocated. If reserved but unallocated memory is large try setting "
                "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
                "Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
        sources=(
            "https://github.com/murong-xu/CADS/issues/4",
            "https://github.com/lllyasviel/FramePack/issues/369",
            "https://github.com/pytorch/pytorch/issues/16417",
            "https://github.com/microsoft/unilm/issues/137",
        ),
        wordings=(
            "CUDA out of memory. Tried to allocate 128.00 MiB (GPU 0; 11.17 GiB total capacity; 10.85 GiB already "
            "allocated; 24.81 MiB free; 10.86 GiB reserved in total by PyTorch)",
        ),
    ),
    Entry(
        id="cuda-device-side-assert", stage="step", chapter=3,
        title="a class index outside [0, num_classes) reached cross_entropy on the GPU",
        code=(
            "logits = torch.randn(8, 10, device=\"cuda\")\n"
            "labels = torch.tensor([3, 7, 1, 10, 4, 5, 9, 2], device=\"cuda\")   # 10 classes numbered 1..10\n"
            "loss = F.cross_entropy(logits, labels)\n"
            "print(loss.item())   # the kernel's assert is reported here, or at a later call\n"
        ),
        fix=(
            "logits = torch.randn(8, 10, device=\"cuda\")\n"
            "labels = torch.tensor([3, 7, 1, 10, 4, 5, 9, 2], device=\"cuda\") - 1   # renumbered 0..9\n"
            "assert 0 <= labels.min() and labels.max() < logits.shape[1]\n"
            "shown = F.cross_entropy(logits, labels).item()\n"
        ),
        cause="A target class index is negative or not below the number of classes (labels numbered from 1, a "
              "num_classes too small for the data); the GPU kernel's assert fires and CUDA reports it late and "
              "vaguely. Run the same batch on the CPU, which raises IndexError \"Target 10 is out of bounds.\", "
              "or set CUDA_LAUNCH_BLOCKING=1; the context is unusable afterwards, so restart the process.",
        expect="AcceleratorError",
        not_run=_NEEDS_GPU,
        message="CUDA error: device-side assert triggered\n"
                "Search for `cudaErrorAssert' in https://docs.nvidia.com/cuda/cuda-runtime-api/"
                "group__CUDART__TYPES.html for more information.\n"
                "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
                "below might be incorrect.\n"
                "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
                "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
        sources=(
            "https://github.com/mrdbourke/pytorch-deep-learning/issues/1290",
            "https://github.com/pytorch/pytorch/issues/18014",
        ),
    ),
)
