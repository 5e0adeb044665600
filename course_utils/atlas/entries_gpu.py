"""The atlas's entries that need a CUDA GPU (quoted from torch, not run here): out of memory, a device-side assert, a
torch built without CUDA, no GPU visible to a CUDA build, a torch built for other GPUs."""
from __future__ import annotations

from course_utils.atlas.entry import Entry

_NEEDS_GPU = "needs a CUDA GPU, which this machine lacks"
# what torch adds to every CUDA runtime error it reports
_CUDA_TAIL = ("CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
              "might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
              "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.")

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
            "https://github.com/saforem2/ezpz/pull/190",
        ),
        wordings=(
            "CUDA out of memory. Tried to allocate 128.00 MiB (GPU 0; 11.17 GiB total capacity; 10.85 GiB already "
            "allocated; 24.81 MiB free; 10.86 GiB reserved in total by PyTorch)",
            "cuda runtime error (2) : out of memory at /pytorch/aten/src/THC/generic/THCStorage.cu:58",  # torch 0.4
            "CUDA error: out of memory",   # raised by a kernel launch rather than the allocator (torch 1.x)
            "XPU out of memory. Tried to allocate 15.62 GiB.",   # an Intel GPU's allocator (ezpz#190)
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
                + _CUDA_TAIL,
        sources=(
            "https://github.com/mrdbourke/pytorch-deep-learning/issues/1290",
            "https://github.com/pytorch/pytorch/issues/18014",
            "https://github.com/hszhao/semseg/issues/29",
            "https://github.com/LiyuanLucasLiu/LM-LSTM-CRF/issues/27",
        ),
        wordings=(   # what the kernel itself prints first, one line per failing thread (semseg#29, torch 1.x)
            "/pytorch/aten/src/THCUNN/SpatialClassNLLCriterion.cu:104: void cunn_SpatialClassNLLCriterion_updateOutput_"
            "kernel(T *, T *, T *, long *, T *, int, int, int, int, int, long) [with T = float, AccumT = float]: block: "
            "[3,0,0], thread: [160,0,0] Assertion `t >= 0 && t < n_classes` failed.",
            # torch 1.x's own words for the error (LM-LSTM-CRF#27)
            "cuda runtime error (59) : device-side assert triggered at /opt/conda/conda-bld/pytorch_1518244421288/"
            "work/torch/lib/THC/generated/../THCReduceAll.cuh:339",
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
        id="cuda-no-gpus-visible", stage="step", chapter=3,
        title="a CUDA build of torch that may see no GPU: CUDA_VISIBLE_DEVICES set in the script to an index this "
              "machine lacks (os.environ[\"CUDA_VISIBLE_DEVICES\"] = \"3\" on a one-GPU machine), set empty, or a "
              "job or container started without a GPU",
        code=(
            "import os\n"
            "os.environ[\"CUDA_VISIBLE_DEVICES\"] = \"3\"   # the author's fourth GPU; this machine has one\n"
            "model = nn.Linear(4, 2).cuda()\n"
        ),
        fix=(
            "import os\n"
            "os.environ.setdefault(\"CUDA_VISIBLE_DEVICES\", \"0\")   # or leave it to the shell: CUDA_VISIBLE_DEVICES=0 python ...\n"
            "device = \"cuda\" if torch.cuda.is_available() else \"cpu\"\n"
            "model = nn.Linear(4, 2).to(device)\n"
            "shown = (os.environ[\"CUDA_VISIBLE_DEVICES\"], torch.cuda.device_count())\n"
        ),
        cause="CUDA_VISIBLE_DEVICES lists the GPUs a process may use, by index, and is read when torch first starts "
              "CUDA: an index the machine does not have (a script written on an 8-GPU server), an empty value, or a "
              "scheduler or container that gave the job no GPU leaves torch with none, though nvidia-smi shows the "
              "card. Set it from the shell for each run (CUDA_VISIBLE_DEVICES=0 python train.py) rather than in the "
              "script, and choose the device from torch.cuda.is_available(). (With no NVIDIA driver at all, torch "
              "says it found none: install the driver, or run on the CPU.)",
        expect="RuntimeError",
        not_run="needs a CUDA build of torch on a machine with a GPU (torch's text, from c10's device count check)",
        message="No CUDA GPUs are available",
        wordings=("Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a "
                  "driver from http://www.nvidia.com/Download/index.aspx",),
        sources=(
            "https://github.com/Grace9994/CoMoSVC/issues/6",
            "https://github.com/ziplab/PTQD/issues/13",
            "https://github.com/jiaw-z/CoR-GS/issues/23",
            "https://github.com/Kent0n-Li/FGDM/issues/7",
            "https://github.com/thuml/Anomaly-Transformer/issues/74",
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
                + _CUDA_TAIL,
        sources=(
            "https://github.com/pytorch/pytorch/issues/31285",
            "https://github.com/Turoad/CLRNet/issues/83",
            "https://github.com/sconlyshootery/FeatDepth/issues/68",
            "https://github.com/INK-USC/RE-Net/issues/77",
            "https://github.com/meituan/YOLOv6/issues/350",
        ),
        wordings=(   # what torch warns first, when CUDA starts on a card its build has no kernels for (YOLOv6#350)
            "NVIDIA GeForce RTX 3080 Laptop GPU with CUDA capability sm_86 is not compatible with the current "
            "PyTorch installation.\nThe current PyTorch install supports CUDA capabilities sm_37 sm_50 sm_60 sm_70.\n"
            "If you want to use the NVIDIA GeForce RTX 3080 Laptop GPU GPU with PyTorch, please check the "
            "instructions at https://pytorch.org/get-started/locally/",
        ),
    ),
    Entry(
        id="cuda-invalid-device-ordinal", stage="distributed", chapter=7,
        title="asked for a GPU index the machine does not have (more processes per node than GPUs)",
        code=(
            "local_rank = int(os.environ[\"LOCAL_RANK\"])   # torchrun --nproc_per_node=4 on a machine with 2 GPUs\n"
            "torch.cuda.set_device(local_rank)                # ranks 2 and 3 ask for cuda:2 and cuda:3\n"
        ),
        fix=(
            "assert torch.cuda.device_count() >= int(os.environ[\"LOCAL_WORLD_SIZE\"]), \"one process per GPU\"\n"
            "local_rank = int(os.environ[\"LOCAL_RANK\"])   # torchrun --nproc_per_node=2 (= the GPUs it can see)\n"
            "torch.cuda.set_device(local_rank)\n"
            "shown = torch.cuda.current_device()\n"
        ),
        cause="GPUs are numbered from 0 to torch.cuda.device_count() - 1 among those CUDA_VISIBLE_DEVICES leaves "
              "visible; a rank whose LOCAL_RANK is past that end (nproc_per_node larger than the GPUs, or a device "
              "id in a config written for a bigger machine) asks for a card that does not exist. Launch one process "
              "per visible GPU.",
        expect="AcceleratorError",
        not_run=_NEEDS_GPU,
        message="CUDA error: invalid device ordinal\n"
                + _CUDA_TAIL,
        sources=("https://github.com/HRNet/HRNet-Semantic-Segmentation/issues/171",
                 "https://github.com/tatsu-lab/stanford_alpaca/issues/67",
                 "https://github.com/cfzd/Ultra-Fast-Lane-Detection/issues/193",
                 "https://github.com/wenwenyu/PICK-pytorch/issues/14"),
        wordings=("THCudaCheck FAIL file=/pytorch/torch/csrc/cuda/Module.cpp line=33 error=10 : invalid device "
                  "ordinal",   # torch 1.x (HRNet#171)
                  "cuda runtime error (101) : invalid device ordinal at /pytorch/torch/csrc/cuda/Module.cpp:59"),
    ),
    Entry(
        id="cublas-workspace-config", stage="step", chapter=7,
        title="torch.use_deterministic_algorithms(True) on a GPU without CUBLAS_WORKSPACE_CONFIG",
        code=(
            "torch.use_deterministic_algorithms(True)   # for a reproducible run\n"
            "x = torch.randn(64, 64, device=\"cuda\")\n"
            "y = x @ x                                  # a cuBLAS matmul\n"
        ),
        fix=(
            "os.environ[\"CUBLAS_WORKSPACE_CONFIG\"] = \":4096:8\"   # before the first CUDA call (or export it)\n"
            "torch.use_deterministic_algorithms(True)\n"
            "x = torch.randn(64, 64, device=\"cuda\")\n"
            "shown = (x @ x).shape\n"
        ),
        cause="cuBLAS picks its workspace per stream in a way that can change results between runs, unless the "
              "environment variable fixes it before CUDA starts; with deterministic algorithms requested, torch "
              "refuses the matmul instead. Set CUBLAS_WORKSPACE_CONFIG=:4096:8 (or :16:8) before the first CUDA "
              "call; chapter 7 lists the other reproducibility switches.",
        expect="RuntimeError",
        not_run=_NEEDS_GPU,
        message="Deterministic behavior was enabled with either `torch.use_deterministic_algorithms(True)` or "
                "`at::Context::setDeterministicAlgorithms(true)`, but this operation is not deterministic because it "
                "uses CuBLAS and you have CUDA >= 10.2. To enable deterministic behavior in this case, you must set "
                "an environment variable before running your PyTorch application: CUBLAS_WORKSPACE_CONFIG=:4096:8 "
                "or CUBLAS_WORKSPACE_CONFIG=:16:8. For more information, go to "
                "https://docs.nvidia.com/cuda/cublas/index.html#results-reproducibility",
        sources=("https://github.com/Metta-AI/metta/pull/654",
                 "https://github.com/Lightning-AI/litgpt/pull/2124",
                 "https://github.com/pytorch/tutorials/pull/2758",
                 "https://github.com/open-mmlab/mmengine/pull/929"),
    ),
    Entry(
        id="bf16-unsupported-device", stage="precision", chapter=7,
        title="autocast to bfloat16 on a GPU older than Ampere",
        code=(
            "model = nn.Linear(8, 2).cuda()             # a Turing card (RTX 20xx, T4, Quadro RTX) or older\n"
            "with torch.autocast(\"cuda\", dtype=torch.bfloat16):\n"
            "    out = model(torch.randn(4, 8, device=\"cuda\"))\n"
        ),
        fix=(
            "model = nn.Linear(8, 2).cuda()\n"
            "dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16   # with a GradScaler\n"
            "with torch.autocast(\"cuda\", dtype=dtype):\n"
            "    out = model(torch.randn(4, 8, device=\"cuda\"))\n"
            "shown = str(out.dtype)\n"
        ),
        cause="bfloat16 arithmetic needs compute capability 8.0 (Ampere) or newer; older cards have float16 only. "
              "Ask torch.cuda.is_bf16_supported() and fall back to float16, which needs a GradScaler (chapter 7), "
              "or train in float32.",
        expect="RuntimeError",
        not_run="needs an NVIDIA GPU older than compute capability 8.0, which this machine lacks",
        message="Current CUDA Device does not support bfloat16. Please switch dtype to float16.",
        sources=("https://github.com/openvla/openvla/issues/103",),
    ),
    Entry(
        id="dataparallel-gather-scalars", stage="distributed", chapter=7,
        title="nn.DataParallel around a model whose forward returns the loss (a 0-d tensor per GPU)",
        code=(
            "model = nn.DataParallel(ModelReturningMeanLoss().cuda())   # 2 GPUs: each returns loss.mean()\n"
            "loss = model(batch, targets)                              # gathered: a vector of 2 losses\n"
            "loss.backward()                                           # needs .mean() first\n"
        ),
        fix=(
            "model = nn.DataParallel(ModelReturningMeanLoss().cuda())\n"
            "loss = model(batch, targets).mean()    # one loss: the mean of the GPUs' (or use DDP, chapter 7)\n"
            "loss.backward()\n"
            "shown = loss.shape\n"
        ),
        cause="DataParallel runs the forward on each GPU and stacks what the replicas return along dimension 0; a "
              "loss already averaged inside forward is a 0-d tensor, so it is turned into a vector with one loss per "
              "GPU. Harmless, but reduce it with .mean() before backward (or return per-example losses); DDP, which "
              "torch recommends over DataParallel, has no gather.",
        expect="UserWarning",
        not_run="needs two CUDA GPUs, which this machine lacks (on one device DataParallel gathers nothing)",
        message="Was asked to gather along dimension 0, but all input tensors were scalars; will instead unsqueeze "
                "and return a vector.",
        sources=("https://github.com/airsplay/lxmert/issues/17",),
    ),
    Entry(
        id="cpu-out-of-memory", stage="step", chapter=4,
        title="host memory (RAM) runs out: a tensor larger than the machine can hold, often a whole dataset or an "
              "evaluation's outputs kept at once",
        code="x = torch.empty($count, dtype=torch.uint8)          # $what",
        fix="chunks = [torch.empty(1_000_000, dtype=torch.uint8) for _ in range(4)]   # work in pieces\n"
            "shown = sum(c.numel() for c in chunks)",
        fix_line="chunks = [torch.empty(1_000_000, dtype=torch.uint8) for _ in range(4)]   # in pieces, as batches",
        cause="The CPU allocator could not get the bytes it asked the operating system for: the process has run out "
              "of RAM (and on Windows of virtual memory). It names the size it wanted. Load data lazily, evaluate in "
              "batches and keep per-batch results small, lower the batch size or num_workers (each worker holds its "
              "own copies), or add memory; on Windows a larger paging file helps.",
        expect="RuntimeError",
        params=({"count": 2**50, "what": "1 PiB"}, {"count": 2**48 + 12345, "what": "256 TiB and then some"}),
        sources=("https://github.com/mxfold/mxfold2/issues/20", "https://github.com/JingyunLiang/VRT/issues/49",
                 "https://github.com/lllyasviel/Fooocus/issues/237"),
        wordings=("RuntimeError: [enforce fail at ..\\c10\\core\\impl\\alloc_cpu.cpp:72] data. DefaultCPUAllocator: "
                  "not enough memory: you tried to allocate 26214400 bytes.",),
    ),
)
