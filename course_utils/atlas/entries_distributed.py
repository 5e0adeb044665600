"""The atlas's entries for starting and ending process groups (chapter 7); the DDP wrapper's are in entries_ddp.py.

Every fragment runs one process on the CPU with the gloo backend (world size 1) and destroys any process group
it initialises in a ``finally``; none registers a communication hook. The groups use an in-memory HashStore;
only dist-env-not-set's fix opens the launcher's TCP store (the rendezvous's own errors are in entries_rendezvous.py),
and the launcher's own entry (torchrun's summary of a rank that died) forks its one rank from this process.
"""
from __future__ import annotations

from course_utils.atlas.entry import Entry, source

# One process, world size 1. An in-memory HashStore stands in for the rendezvous store a launcher provides: with
# one process nothing needs a socket, and on this torch every 25th TCPStore a process opens takes 5 s to start.
_GROUP = (
    "import torch.distributed as dist\n"
    "store = dist.HashStore()   # one process: an in-memory store stands in for torchrun's\n"
    "dist.init_process_group(\"gloo\", store=store, rank=0, world_size=1)\n"
)



def in_group(*lines: str) -> str:
    """A fragment's lines run inside that one-process group, which a ``finally`` destroys whatever happens."""
    return _GROUP + "try:\n" + "".join(f"    {line}\n" for line in lines) + "finally:\n    dist.destroy_process_group()\n"


ENTRIES = (
    Entry(
        id="dist-default-group-missing", stage="distributed", chapter=7,
        title="called a collective or built a DistributedSampler before init_process_group",
        code=(
            "import torch.distributed as dist\n"
            "from torch.utils.data.distributed import DistributedSampler\n"
            "dataset = TensorDataset(torch.arange(10.0))\n"
            "result = $call\n"
        ),
        fix=(
            "from torch.utils.data.distributed import DistributedSampler\n"
            "dataset = TensorDataset(torch.arange(10.0))\n"
            + in_group(
                "result = $call",
                "shown = dist.get_world_size()",
            )
        ),
        cause="torch.distributed calls (collectives, get_rank, a DistributedSampler without num_replicas and rank) "
              "need the default process group, which init_process_group creates once per process; the script ran "
              "as a plain python process or skipped that call.",
        expect="ValueError",
        params=(
            {"call": "dist.all_reduce(torch.ones(3))"},
            {"call": "DistributedSampler(dataset)"},
            {"call": "dist.get_rank()"},
        ),
        sources=(
            "https://github.com/megvii-model/YOLOF/issues/11",
            "https://github.com/open-mmlab/mmsegmentation/issues/901",
            "https://github.com/zcablii/LSKNet/issues/54",
        ),
    ),
    Entry(
        id="dist-env-not-set", stage="distributed", chapter=7,
        title="init_process_group with the default env:// method, run with plain python instead of torchrun",
        code=(
            "import torch.distributed as dist\n"
            "try:\n"
            "    dist.init_process_group(\"gloo\"$args)\n"
            "finally:\n"
            "    if dist.is_initialized():\n"
            "        dist.destroy_process_group()\n"
        ),
        fix=(
            "import torch.distributed as dist\n"
            "store = dist.TCPStore(\"127.0.0.1\", 0, world_size=1, is_master=True, wait_for_workers=False)\n"
            "launcher = {\"RANK\": \"0\", \"WORLD_SIZE\": \"1\", \"MASTER_ADDR\": \"127.0.0.1\",\n"
            "            \"MASTER_PORT\": str(store.port), \"TORCHELASTIC_USE_AGENT_STORE\": \"True\"}\n"
            "before = {name: os.environ.get(name) for name in launcher}\n"
            "os.environ.update(launcher)   # what torchrun sets for each process it starts (and its store)\n"
            "try:\n"
            "    dist.init_process_group(\"gloo\"$args)\n"
            "    shown = dist.get_world_size()\n"
            "finally:\n"
            "    if dist.is_initialized():\n"
            "        dist.destroy_process_group()\n"
            "    for name, value in before.items():\n"
            "        if value is None:\n"
            "            os.environ.pop(name, None)\n"
            "        else:\n"
            "            os.environ[name] = value\n"
            "    del store\n"
        ),
        cause="The env:// rendezvous reads RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT from the environment, "
              "which a launcher (torchrun) sets; a script started with plain python has none of them. Launch with "
              "torchrun, or pass rank, world_size and a store or init_method yourself.",
        expect="ValueError",
        params=({"args": ""}, {"args": ", rank=0, world_size=1"}),
        sources=(
            "https://github.com/meta-llama/llama/issues/391",
            "https://github.com/HRNet/HRNet-Semantic-Segmentation/issues/35",
            "https://github.com/NVIDIA/apex/issues/99",
        ),
    ),
    Entry(
        id="dist-nccl-missing", stage="distributed", chapter=7,
        title="asked for the nccl backend on a torch built without NCCL (CPU, Windows, macOS)",
        code=(
            "import torch.distributed as dist\n"
            "store = dist.HashStore()\n"
            "try:\n"
            "    dist.init_process_group(\"$backend\", store=store, rank=0, world_size=1)\n"
            "finally:\n"
            "    if dist.is_initialized():\n"
            "        dist.destroy_process_group()\n"
        ),
        fix=(
            "import torch.distributed as dist\n"
            "store = dist.HashStore()\n"
            "backend = \"nccl\" if dist.is_nccl_available() and torch.cuda.is_available() else \"gloo\"\n"
            "try:\n"
            "    dist.init_process_group(backend, store=store, rank=0, world_size=1)\n"
            "    shown = dist.get_backend()\n"
            "finally:\n"
            "    if dist.is_initialized():\n"
            "        dist.destroy_process_group()\n"
        ),
        cause="NCCL is NVIDIA's GPU-to-GPU library and only Linux CUDA builds of torch include it; a CPU-only "
              "build (like Windows and macOS builds) does not. A CUDA build on a machine without a GPU refuses "
              "too, in other words: \"ProcessGroupNCCL is only supported with GPUs, no GPUs found!\" (ValueError). "
              "Use gloo there, and choose the backend from dist.is_nccl_available() and torch.cuda.is_available().",
        expect="RuntimeError",
        not_run="torch's words depend on its build (measured: this course's CPU-only torch and the default CUDA "
                "wheel on a machine without a GPU word it differently), so it is quoted, not run: every machine "
                "prints the same",
        message="Distributed package doesn't have NCCL built in",
        params=({"backend": "nccl"}, {"backend": "cpu:gloo,cuda:nccl"}),
        sources=(
            "https://github.com/tczhangzhi/pytorch-distributed/issues/15",
            "https://github.com/Alpha-VLLM/LLaMA2-Accessory/issues/166",
            "https://github.com/kennymckormick/pyskl/issues/79",
        ),
    ),
    Entry(
        id="dist-init-twice", stage="distributed", chapter=7,
        title="called init_process_group a second time in the same process (a re-run notebook cell, a helper)",
        code=(
            in_group(
                "$again",
            )
        ),
        fix=(
            in_group(
                "if not dist.is_initialized():",
                "    $again",
                "shown = dist.is_initialized()",
            )
        ),
        cause="A process has one default process group; init_process_group creates it and refuses to run again "
              "until destroy_process_group. Check dist.is_initialized() first, or destroy the group at the end "
              "of each run.",
        expect="ValueError",
        params=(
            {"again": "dist.init_process_group(\"gloo\", store=store, rank=0, world_size=1)"},
            {"again": "dist.init_process_group(\"gloo\", init_method=\"tcp://127.0.0.1:0\", rank=0, world_size=1)"},
        ),
        sources=(
            "https://github.com/NVIDIA/Megatron-LM/pull/521",
            "https://github.com/ddPn08/rvc-webui/pull/54",
        ),
    ),
    Entry(
        id="nccl-collective-timeout", stage="distributed", chapter=7,
        title="one rank waits in a collective (all_reduce, barrier) that another rank never calls",
        code=(
            "dist.init_process_group(\"nccl\", timeout=datetime.timedelta(minutes=10))   # under torchrun, 2 GPUs\n"
            "rank = dist.get_rank()\n"
            "loss = torch.ones(1, device=f\"cuda:{rank}\")\n"
            "if rank == 0:   # a collective inside rank-0-only code (logging, validation, a checkpoint)\n"
            "    dist.all_reduce(loss)\n"
            "torch.cuda.synchronize()\n"
        ),
        fix=(
            "dist.init_process_group(\"nccl\", timeout=datetime.timedelta(minutes=10))\n"
            "rank = dist.get_rank()\n"
            "loss = torch.ones(1, device=f\"cuda:{rank}\")\n"
            "dist.all_reduce(loss)   # every rank calls every collective, in the same order\n"
            "if rank == 0:\n"
            "    shown = loss.item()\n"
        ),
        cause="A collective completes only when every rank calls it; one that never arrives (a collective in "
              "rank-0-only code, ranks with different numbers of batches, a rank stuck or crashed in its data "
              "loading) leaves the others waiting until the timeout, and the watchdog then ends the job. Make every "
              "rank run the same collectives in the same order (DistributedSampler gives every rank as many "
              "batches); chapter 7's two gloo ranks show the same wait with gloo's words.",
        expect="DistBackendError",
        not_run="needs two CUDA GPUs and NCCL, which this machine lacks",
        message="[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, "
                "NumelIn=9801523, NumelOut=9801523, Timeout(ms)=600000) ran for 600020 milliseconds before timing "
                "out.",
        sources=("https://github.com/XPixelGroup/BasicSR/issues/737",
                 "https://github.com/NVIDIA/Megatron-LM/issues/1207",
                 "https://github.com/hiyouga/LlamaFactory/issues/7396",
                 "https://github.com/OFA-Sys/OFA/issues/271"),
        wordings=("[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=469508, OpType=ALLREDUCE, "
                  "Timeout(ms)=1800000) ran for 1802212 milliseconds before timing out.",),   # an older torch
    ),
    Entry(
        id="nccl-unhandled-system-error", stage="distributed", chapter=7,
        title="NCCL could not set up its connections between the GPUs (shared memory, network)",
        code=(
            "dist.init_process_group(\"nccl\")   # under torchrun, 2 GPUs, in a container with the default /dev/shm\n"
            "rank = dist.get_rank()\n"
            "dist.all_reduce(torch.ones(1, device=f\"cuda:{rank}\"))   # the first collective builds NCCL's links\n"
        ),
        fix=(
            "# NCCL_DEBUG=INFO names the call that failed (\"Error while creating shared memory segment ...\");\n"
            "# then: docker run --ipc=host (or --shm-size=8g), or NCCL_SHM_DISABLE=1, or NCCL_SOCKET_IFNAME=<iface>\n"
            "dist.init_process_group(\"nccl\")\n"
            "rank = dist.get_rank()\n"
            "t = torch.ones(1, device=f\"cuda:{rank}\")\n"
            "dist.all_reduce(t)\n"
            "shown = t.item()\n"
        ),
        cause="NCCL failed a system call while connecting the ranks: most often the shared memory it needs in "
              "/dev/shm (a Docker container gets 64 MB unless started with --ipc=host or a larger --shm-size, or "
              "/dev/shm is not writable), sometimes the network interface it picked. torch only relays NCCL's "
              "code; run with NCCL_DEBUG=INFO to see which call failed.",
        expect="DistBackendError",
        not_run="needs two CUDA GPUs and NCCL, which this machine lacks",
        message="NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:268, unhandled system error "
                "(run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\n"
                "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device "
                "error. \n"
                "Last error:\n"
                "Error while creating shared memory segment /dev/shm/nccl-LeXlEJ (size 9637888)",
        sources=("https://github.com/hiyouga/LlamaFactory/issues/7233",
                 "https://github.com/NVIDIA/DeepLearningExamples/issues/1386",
                 "https://github.com/pytorch/pytorch/issues/37004",
                 "https://github.com/NVIDIA/nccl/issues/473"),
        wordings=("NCCL error in ProcessGroupNCCL.cpp:290, unhandled system error",   # torch 1.2 (pytorch#37004)
                  "NCCL Error 2: unhandled system error"),                           # torch 1.0 (NVIDIA/nccl#473)
    ),
    Entry(
        id="collective-tensor-on-other-device", stage="distributed", chapter=7,
        title="a collective (all_reduce, all_gather, broadcast) on a CPU tensor in an nccl group: a metric counted "
              "on the CPU",
        code=(
            "import torch.distributed as dist\n"
            "store = dist.HashStore()\n"
            "# gloo registered for CUDA tensors only stands in for nccl, which has no CPU side\n"
            "dist.init_process_group(\"cuda:gloo\", store=store, rank=0, world_size=1)\n"
            "try:\n"
            "    correct = torch.tensor([$count.0])   # a metric accumulated on the CPU\n"
            "    $call\n"
            "finally:\n"
            "    dist.destroy_process_group()\n"
        ),
        fix=(
            "import torch.distributed as dist\n"
            "store = dist.HashStore()\n"
            "dist.init_process_group(\"cpu:gloo,cuda:gloo\", store=store, rank=0, world_size=1)   # a backend per device\n"
            "try:\n"
            "    correct = torch.tensor([$count.0])\n"
            "    $call\n"
            "    shown = correct.item()\n"
            "finally:\n"
            "    dist.destroy_process_group()\n"
        ),
        fix_line='dist.init_process_group("cpu:gloo,cuda:nccl")   # or move the tensor: correct.cuda()',
        cause="A process group sends each tensor through the backend registered for its device; nccl serves CUDA "
              "tensors only, so a collective on a CPU tensor (a metric counter, a list gathered for logging) finds "
              "no backend. Move the tensor to the rank's GPU before the collective, or create the group with a "
              "backend for each device: init_process_group('cpu:gloo,cuda:nccl'). Older torch worded it 'Tensors "
              "must be CUDA and dense'.",
        expect="RuntimeError",
        params=({"count": 7, "call": "dist.all_reduce(correct)"},
                {"count": 3, "call": "dist.broadcast(correct, src=0)"}),
        sources=("https://github.com/Lightning-AI/torchmetrics/issues/2477",
                 "https://github.com/Lightning-AI/pytorch-lightning/issues/18803",
                 "https://github.com/zai-org/CogVLM/issues/328",
                 "https://github.com/pytorch/examples/issues/1030"),
        wordings=("Tensors must be CUDA and dense",),   # torch 1.8-1.12 (pytorch/examples#1030)
    ),
    Entry(
        id="torchrun-child-failed", stage="distributed", chapter=7, reports_another=True,
        title="torchrun's summary of a rank that died (exitcode 1: the rank's own error, printed above it; -9: killed, "
              "most often by the out-of-memory killer)",
        code=source("""
            from torch.distributed.launcher.api import LaunchConfig, elastic_launch

            def train():                    # what train.py does on each rank
                $death

            config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=1, rdzv_backend="static",
                                  rdzv_endpoint="localhost:0", rdzv_configs={"rank": 0}, start_method="fork",
                                  max_restarts=0)    # torchrun's defaults on one machine, its node 0
            elastic_launch(config, train)()   # what `torchrun --nproc-per-node=1 train.py` does, in this process
        """),
        fix=source("""
            from torch.distributed.launcher.api import LaunchConfig, elastic_launch

            def train():
                return "done"               # the rank's own error found (above the summary) and fixed

            config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=1, rdzv_backend="static",
                                  rdzv_endpoint="localhost:0", rdzv_configs={"rank": 0}, start_method="fork",
                                  max_restarts=0)    # torchrun's defaults on one machine, its node 0
            shown = elastic_launch(config, train)()   # what each rank returned
        """),
        cause="ChildFailedError is not the error: it is torchrun's summary that a rank stopped, after which it stops "
              "the others. The exitcode says how: 1, the rank's Python raised, and its traceback is printed above the "
              "summary (scroll up, or look at the first rank's log; with @record on main the summary carries it); "
              "-9 (SIGKILL) with no traceback, the system killed it, most often the out-of-memory killer when the "
              "host's RAM ran out (DataLoader workers each holding a copy of the dataset, chapter 1): check dmesg, "
              "use fewer workers or a smaller batch; -6 or -11, a crash in native code.",
        expect="ChildFailedError",
        params=({"death": "os._exit(1)         # as a script ends when it raises (its traceback goes to the terminal)"},
                {"death": "os.kill(os.getpid(), signal.SIGKILL)   # as the out-of-memory killer ends it"}),
        sources=("https://github.com/deepinsight/insightface/issues/2182",
                 "https://github.com/CVMI-Lab/PLA/issues/18",
                 "https://github.com/apple/ml-recurrent-drafter/issues/5",
                 "https://github.com/OpenBMB/MiniCPM-V/issues/770"),
        # the launcher's own log line, printed above the summary (MiniCPM-V#770)
        wordings=("failed (exitcode: -9) local_rank: 0 (pid: 1322) of binary: /root/miniconda3/bin/python",),
    ),
)
