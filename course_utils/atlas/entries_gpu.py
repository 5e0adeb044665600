"""The atlas's entries that need a CUDA GPU (quoted from torch, not run here): out of memory, a device-side assert, a
torch built without CUDA, a torch built for other GPUs."""
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
            "https://github.com/skorch-dev/skorch/issues/218",
            "https://github.com/sgrvinod/a-PyTorch-Tutorial-to-Image-Captioning/issues/57",
        ),
        wordings=(
            "CUDA out of memory. Tried to allocate 128.00 MiB (GPU 0; 11.17 GiB total capacity; 10.85 GiB already "
            "allocated; 24.81 MiB free; 10.86 GiB reserved in total by PyTorch)",
            "cuda runtime error (2) : out of memory at /pytorch/aten/src/THC/generic/THCStorage.cu:58",  # torch 0.4
            "CUDA error: out of memory",   # raised by a kernel launch rather than the allocator (torch 1.x)
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
    Entry(
        id="cuda-not-compiled", stage="step", chapter=3,
        title="moved the model to \"cuda\" with a torch that was installed without CUDA",
        code=(
            "model = nn.Linear(4, 2).to(\"cuda\")   # or .cuda(), device=\"cuda\": the script assumes a GPU\n"
        ),
        fix=(
            "device = \"cuda\" if torch.cuda.is_available() else \"cpu\"   # the script runs on either\n"
            "model = nn.Linear(4, 2).to(device)\n"
            "shown = str(next(model.parameters()).device)\n"
        ),
        cause="This torch is a CPU-only build (the default wheel on Windows and macOS, or a CPU install on Linux), "
              "so nothing can go to \"cuda\". Choose the device from torch.cuda.is_available(), or, with an NVIDIA "
              "GPU, install the CUDA build that matches the driver (torch.version.cuda is None on a CPU build).",
        expect="AssertionError",
        not_run="its words depend on the build (a CUDA build without a GPU says it found no NVIDIA driver), and a "
                "chapter prints the same on every machine",
        message="Torch not compiled with CUDA enabled",
        sources=(
            "https://github.com/karpathy/nanoGPT/issues/281",
            "https://github.com/zzzDavid/ICDAR-2019-SROIE/issues/4",
            "https://github.com/X-PLUG/MobileAgent/issues/60",
        ),
    ),
    Entry(
        id="cuda-no-kernel-image", stage="step", chapter=3,
        title="ran torch on a GPU it was not built for (a newer or older card than its wheel supports)",
        code=(
            "x = torch.randn(64, 64, device=\"cuda\")   # torch warned at start: the card's sm_XY is not supported\n"
            "y = (x @ x).relu()\n"
        ),
        fix=(
            "# in a shell, a build for the card: pip install torch --index-url https://download.pytorch.org/whl/cu128\n"
            "major, minor = torch.cuda.get_device_capability()\n"
            "assert f\"sm_{major}{minor}\" in torch.cuda.get_arch_list(), \"install a torch build for this card\"\n"
            "x = torch.randn(64, 64, device=\"cuda\")\n"
            "shown = (x @ x).relu().shape\n"
        ),
        cause="The torch wheel holds GPU code for a list of compute capabilities (torch.cuda.get_arch_list()) and "
              "this card is not in it: a card newer than the wheel, or an old card that a new wheel dropped. "
              "torch says so in a UserWarning at the first CUDA call; install a build for the card's sm_XY "
              "(another CUDA variant of the wheel).",
        expect="AcceleratorError",
        not_run=_NEEDS_GPU,
        fix_line="pip install torch --index-url https://download.pytorch.org/whl/cu128  # a build listing the card's sm_XY",
        message="CUDA error: no kernel image is available for execution on the device\n"
                "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
                "below might be incorrect.\n"
                "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
                "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
        sources=(
            "https://github.com/pytorch/pytorch/issues/31285",
            "https://github.com/Turoad/CLRNet/issues/83",
            "https://github.com/sconlyshootery/FeatDepth/issues/68",
            "https://github.com/INK-USC/RE-Net/issues/77",
        ),
    ),
)
