"""The atlas's entries for saving, loading and distributed training (chapter 7), with two GPU-only entries.

Every distributed fragment runs one process on the CPU with the gloo backend (world size 1) and destroys
any process group it initialises in a ``finally``; none registers a communication hook. The groups use an
in-memory HashStore; only the two entries about the launcher's TCP store open one.
"""
from __future__ import annotations

from course_utils.atlas.entry import Entry

# One process, world size 1. An in-memory HashStore stands in for the rendezvous store a launcher provides: with
# one process nothing needs a socket, and on this torch every 25th TCPStore a process opens takes 5 s to start.
_GROUP = (
    "import torch.distributed as dist\n"
    "store = dist.HashStore()   # one process: an in-memory store stands in for torchrun's\n"
    "dist.init_process_group(\"gloo\", store=store, rank=0, world_size=1)\n"
)

_CHECKPOINT = (
    Entry(
        id="state-dict-wrapper-prefix", stage="checkpoint", chapter=7,
        title="loaded the state_dict of a wrapped model (DataParallel, DDP, torch.compile) into the plain model",
        code=(
            "model = $make\n"
            "wrapped = $wrap(model)\n"
            "torch.save(wrapped.state_dict(), tmp / \"ckpt.pt\")\n"
            "fresh = $make\n"
            "fresh.load_state_dict(torch.load(tmp / \"ckpt.pt\"))\n"
        ),
        fix=(
            "from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present\n"
            "model = $make\n"
            "wrapped = $wrap(model)\n"
            "torch.save(wrapped.state_dict(), tmp / \"ckpt.pt\")\n"
            "fresh = $make\n"
            "state = torch.load(tmp / \"ckpt.pt\")\n"
            "consume_prefix_in_state_dict_if_present(state, \"$prefix\")   # or save the unwrapped model's state_dict\n"
            "fresh.load_state_dict(state)\n"
            "shown = list(state)\n"
        ),
        cause="DataParallel and DistributedDataParallel keep your model as `.module`, torch.compile as "
              "`._orig_mod`, so every key of the wrapper's state_dict carries that prefix and none matches the plain "
              "model's. Strip the prefix, or save `model.module.state_dict()` / `model._orig_mod.state_dict()`.",
        expect="RuntimeError",
        params=(
            {"make": "nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))", "wrap": "nn.DataParallel",
             "prefix": "module."},
            {"make": "nn.Linear(4, 3)", "wrap": "torch.compile", "prefix": "_orig_mod."},
            {"make": "nn.Linear(8, 5)", "wrap": "nn.DataParallel", "prefix": "module."},
        ),
        sources=(
            "https://github.com/pytorch/pytorch/issues/3805",
            "https://github.com/abeardear/pytorch-YOLO-v1/issues/4",
            "https://github.com/rasbt/LLMs-from-scratch/issues/580",
        ),
    ),
    Entry(
        id="state-dict-whole-checkpoint", stage="checkpoint", chapter=7,
        title="passed the whole checkpoint dict (model, optimizer, epoch) to load_state_dict",
        code=(
            "model = $make\n"
            "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "torch.save({\"$key\": model.state_dict(), \"optimizer\": optimizer.state_dict(), \"epoch\": 3},\n"
            "           tmp / \"ckpt.pt\")\n"
            "fresh = $make\n"
            "fresh.load_state_dict(torch.load(tmp / \"ckpt.pt\"))\n"
        ),
        fix=(
            "model = $make\n"
            "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "torch.save({\"$key\": model.state_dict(), \"optimizer\": optimizer.state_dict(), \"epoch\": 3},\n"
            "           tmp / \"ckpt.pt\")\n"
            "fresh = $make\n"
            "checkpoint = torch.load(tmp / \"ckpt.pt\")\n"
            "fresh.load_state_dict(checkpoint[\"$key\"])\n"
            "shown = checkpoint[\"epoch\"]\n"
        ),
        cause="The file holds a dict of several things (model weights, optimizer state, epoch); its top-level keys "
              "are not parameter names. Load the model's own entry, `checkpoint[\"model\"]`.",
        expect="RuntimeError",
        params=(
            {"make": "nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))", "key": "model"},
            {"make": "nn.Linear(6, 2)", "key": "state_dict"},
        ),
        sources=(
            "https://github.com/Project-MONAI/research-contributions/issues/387",
            "https://github.com/LiheYoung/UniMatch/issues/31",
            "https://github.com/ohhhyeahhh/SiamCAR/issues/95",
        ),
    ),
    Entry(
        id="state-dict-size-mismatch", stage="checkpoint", chapter=7,
        title="loaded a checkpoint into a model built with another number of classes",
        code=(
            "def make(classes):\n"
            "    return nn.Sequential(nn.Linear($features, 16), nn.ReLU(), nn.Linear(16, classes))\n"
            "torch.save(make($saved).state_dict(), tmp / \"ckpt.pt\")\n"
            "model = make($now)\n"
            "model.load_state_dict(torch.load(tmp / \"ckpt.pt\"))\n"
        ),
        fix=(
            "def make(classes):\n"
            "    return nn.Sequential(nn.Linear($features, 16), nn.ReLU(), nn.Linear(16, classes))\n"
            "torch.save(make($saved).state_dict(), tmp / \"ckpt.pt\")\n"
            "model = make($saved)                               # the shapes the checkpoint was saved with\n"
            "model.load_state_dict(torch.load(tmp / \"ckpt.pt\"))\n"
            "model[2] = nn.Linear(16, $now)                     # then a new head for the new classes\n"
            "shown = tuple(model[2].weight.shape)\n"
        ),
        cause="A key matched but its tensor has another shape: the model was built with a different size (here "
              "the number of classes) than the one saved. strict=False does not skip this; build the saved shape, "
              "load, then replace the layer, or drop those keys before loading.",
        expect="RuntimeError",
        params=(
            {"features": 8, "saved": 10, "now": 5},
            {"features": 32, "saved": 1000, "now": 3},
        ),
        sources=(
            "https://github.com/Helias/Car-Model-Recognition/issues/2",
            "https://github.com/layumi/Person_reID_baseline_pytorch/issues/103",
        ),
    ),
    Entry(
        id="load-weights-only-global", stage="checkpoint", chapter=7,
        title="saved a whole model or a Python object in the checkpoint, then loaded it with torch.load's default",
        code=(
            "import argparse\n"
            "model = nn.Linear(4, 3)\n"
            "torch.save($saved, tmp / \"ckpt.pt\")\n"
            "checkpoint = torch.load(tmp / \"ckpt.pt\")\n"
        ),
        fix=(
            "import argparse\n"
            "model = nn.Linear(4, 3)\n"
            "torch.save($plain, tmp / \"ckpt.pt\")              # tensors, dicts, lists, numbers and strings only\n"
            "checkpoint = torch.load(tmp / \"ckpt.pt\")\n"
            "shown = sorted(checkpoint)\n"
        ),
        cause="Since torch 2.6 torch.load defaults to weights_only=True, which unpickles only tensors and plain "
              "containers; a whole nn.Module, an argparse Namespace or a numpy scalar is a global it refuses. Save "
              "state_dicts and plain values, or, for a file you trust, allowlist the class "
              "(torch.serialization.safe_globals) or pass weights_only=False.",
        expect="UnpicklingError",
        params=(
            {"saved": "{\"model\": model.state_dict(), \"args\": argparse.Namespace(lr=0.1, epochs=10)}",
             "plain": "{\"model\": model.state_dict(), \"args\": vars(argparse.Namespace(lr=0.1, epochs=10))}"},
            {"saved": "model", "plain": "model.state_dict()"},
            {"saved": "{\"model\": model.state_dict(), \"best_acc\": np.float64(0.91)}",
             "plain": "{\"model\": model.state_dict(), \"best_acc\": float(np.float64(0.91))}"},
        ),
        sources=(
            "https://github.com/ppogg/YOLOv5-Lite/issues/277",
            "https://github.com/Comfy-Org/ComfyUI/issues/7425",
            "https://github.com/ZHO-ZHO-ZHO/ComfyUI-YoloWorld-EfficientSAM/issues/102",
        ),
    ),
    Entry(
        id="load-not-a-checkpoint", stage="checkpoint", chapter=7,
        title="torch.load on a file that is not a checkpoint (an HTML page from a download link, a Git LFS pointer)",
        code=(
            "(tmp / \"model.pt\").write_text($content)   # what the download or the clone left on disk\n"
            "torch.load(tmp / \"model.pt\")\n"
        ),
        fix=(
            "(tmp / \"model.pt\").write_text($content)\n"
            "if (tmp / \"model.pt\").read_bytes()[:2] != b\"PK\":   # torch.save writes a zip archive (PK...)\n"
            "    torch.save(nn.Linear(4, 3).state_dict(), tmp / \"model.pt\")   # stands for fetching the real file\n"
            "shown = sorted(torch.load(tmp / \"model.pt\"))\n"
        ),
        cause="The file is text, not a torch.save archive: a download link that returned an HTML page, or a "
              "repository cloned without `git lfs pull`, which leaves a small pointer file. The operand number is "
              "the file's first byte (60 is '<', 118 is 'v'); older torch said \"invalid load key\".",
        expect="UnpicklingError",
        params=(
            {"content": "\"<!DOCTYPE html><html><head><title>Google Drive - Virus scan warning</title>"
                        "</head><body></body></html>\""},
            {"content": "\"version https://git-lfs.github.com/spec/v1\\noid sha256:4d7a2146a1b8\\nsize 44659879\\n\""},
        ),
        sources=(
            "https://github.com/pytorch/pytorch/issues/150998",
            "https://github.com/mit-han-lab/smoothquant/issues/13",
            "https://github.com/hhj1897/face_parsing/issues/3",
        ),
    ),
    Entry(
        id="load-cuda-on-cpu-machine", stage="checkpoint", chapter=7,
        title="loaded a checkpoint saved on a GPU machine on a machine without CUDA",
        code=(
            "from torch import serialization\n"
            "# stand-in for the GPU machine: tag every storage the way torch.save tags a tensor on $device\n"
            "gpu_tag = (0, lambda storage: \"$device\", lambda storage, location: None)\n"
            "serialization.register_package(*gpu_tag)\n"
            "try:\n"
            "    torch.save(nn.Linear(4, 3).state_dict(), tmp / \"ckpt.pt\")\n"
            "finally:\n"
            "    serialization._package_registry.remove(gpu_tag)\n"
            "state = torch.load(tmp / \"ckpt.pt\")\n"
        ),
        fix=(
            "from torch import serialization\n"
            "gpu_tag = (0, lambda storage: \"$device\", lambda storage, location: None)\n"
            "serialization.register_package(*gpu_tag)\n"
            "try:\n"
            "    torch.save(nn.Linear(4, 3).state_dict(), tmp / \"ckpt.pt\")\n"
            "finally:\n"
            "    serialization._package_registry.remove(gpu_tag)\n"
            "state = torch.load(tmp / \"ckpt.pt\", map_location=\"cpu\")\n"
            "shown = sorted({str(t.device) for t in state.values()})\n"
        ),
        cause="torch.save records each tensor's device and torch.load puts it back there; this machine has no "
              "CUDA. Pass map_location=\"cpu\" (or the device you have) to torch.load.",
        expect="RuntimeError",
        params=({"device": "cuda:0"}, {"device": "cuda:1"}),
        sources=(
            "https://github.com/hkchengrex/Cutie/issues/37",
            "https://github.com/yunjey/pytorch-tutorial/issues/249",
            "https://github.com/invoke-ai/InvokeAI/issues/3442",
        ),
    ),
    Entry(
        id="load-truncated-file", stage="checkpoint", chapter=7,
        title="loaded a checkpoint whose copy or download stopped part-way",
        code=(
            "torch.save(nn.Linear($n, $n).state_dict(), tmp / \"ckpt.pt\")\n"
            "data = (tmp / \"ckpt.pt\").read_bytes()\n"
            "(tmp / \"ckpt.pt\").write_bytes(data[:$kept])   # the copy stopped here\n"
            "torch.load(tmp / \"ckpt.pt\")\n"
        ),
        fix=(
            "torch.save(nn.Linear($n, $n).state_dict(), tmp / \"ckpt.pt\")\n"
            "data = (tmp / \"ckpt.pt\").read_bytes()\n"
            "(tmp / \"part.pt\").write_bytes(data[:$kept])\n"
            "complete = (tmp / \"part.pt\").stat().st_size == len(data)   # compare sizes (or a checksum) first\n"
            "shown = complete, sorted(torch.load(tmp / \"ckpt.pt\"))      # and load the complete file\n"
        ),
        cause="torch.save writes a zip archive whose directory sits at the very end; a file cut short (an "
              "interrupted download or copy, a save killed mid-write, a full disk) has lost it. Fetch or save the "
              "file again; write to a temporary name and rename it once complete.",
        expect="RuntimeError",
        params=({"n": 4, "kept": "len(data) // 2"}, {"n": 256, "kept": "len(data) - 10"}),
        sources=(
            "https://github.com/CompVis/stable-diffusion/issues/93",
            "https://github.com/liuyuan-pal/Gen6D/issues/39",
            "https://github.com/gaomingqi/Track-Anything/issues/103",
        ),
    ),
    Entry(
        id="optimizer-group-size", stage="checkpoint", chapter=7,
        title="loaded an optimizer state saved for another set of parameters",
        code=(
            "model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))\n"
            "torch.save(torch.optim.SGD($saved, lr=0.1).state_dict(), tmp / \"opt.pt\")\n"
            "optimizer = torch.optim.SGD($now, lr=0.1)\n"
            "optimizer.load_state_dict(torch.load(tmp / \"opt.pt\"))\n"
        ),
        fix=(
            "model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))\n"
            "torch.save(torch.optim.SGD($saved, lr=0.1).state_dict(), tmp / \"opt.pt\")\n"
            "optimizer = torch.optim.SGD($saved, lr=0.1)        # the same parameters, in the same order\n"
            "optimizer.load_state_dict(torch.load(tmp / \"opt.pt\"))\n"
            "shown = len(optimizer.param_groups[0][\"params\"])\n"
        ),
        cause="An optimizer's state_dict names parameters by position, so each group must hold as many parameters "
              "as when it was saved; the model changed or another subset (only the head, only trainable ones) was "
              "passed. Build the optimizer over the same parameters, or start a fresh one and load only the model.",
        expect="ValueError",
        params=(
            {"saved": "model.parameters()", "now": "model[2].parameters()"},
            {"saved": "model[2].parameters()", "now": "model.parameters()"},
        ),
        sources=(
            "https://github.com/facebookresearch/GloRe/issues/8",
            "https://github.com/mli0603/stereo-transformer/issues/58",
            "https://github.com/facebookresearch/suncet/issues/36",
        ),
    ),
    Entry(
        id="optimizer-group-count", stage="checkpoint", chapter=7,
        title="loaded an optimizer state saved with another number of parameter groups",
        code=(
            "model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))\n"
            "torch.save(torch.optim.SGD($saved, lr=0.1).state_dict(), tmp / \"opt.pt\")\n"
            "optimizer = torch.optim.SGD($now, lr=0.1)\n"
            "optimizer.load_state_dict(torch.load(tmp / \"opt.pt\"))\n"
        ),
        fix=(
            "model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))\n"
            "torch.save(torch.optim.SGD($saved, lr=0.1).state_dict(), tmp / \"opt.pt\")\n"
            "optimizer = torch.optim.SGD($saved, lr=0.1)        # the same groups as when it was saved\n"
            "optimizer.load_state_dict(torch.load(tmp / \"opt.pt\"))\n"
            "shown = len(optimizer.param_groups)\n"
        ),
        cause="The saved optimizer had its parameters split into a different number of groups (for example a "
              "body and a head with their own learning rates) than the one built now. Build the same groups before "
              "loading.",
        expect="ValueError",
        params=(
            {"saved": "[{\"params\": model[0].parameters()}, {\"params\": model[2].parameters(), \"lr\": 0.01}]",
             "now": "model.parameters()"},
            {"saved": "model.parameters()",
             "now": "[{\"params\": model[0].parameters(), \"lr\": 0.001}, {\"params\": model[2].parameters()}]"},
        ),
        sources=(
            "https://github.com/mks0601/ExAvatar_RELEASE/issues/5",
            "https://github.com/facebookresearch/SlowFast/issues/478",
            "https://github.com/NVIDIA/DeepLearningExamples/issues/651",
        ),
    ),
    Entry(
        id="optimizer-state-before-move", stage="checkpoint", chapter=7,
        title="loaded the optimizer state, then moved the model (dtype standing in for the device)",
        code=(
            "torch.manual_seed(0)\n"
            "model = nn.Linear(4, 3)\n"
            "optimizer = torch.optim.$opt(model.parameters(), lr=0.01)\n"
            "model(torch.randn(8, 4)).pow(2).mean().backward()\n"
            "optimizer.step()\n"
            "torch.save({\"model\": model.state_dict(), \"optimizer\": optimizer.state_dict()}, tmp / \"ckpt.pt\")\n"
            "\n"
            "checkpoint = torch.load(tmp / \"ckpt.pt\")\n"
            "model = nn.Linear(4, 3)\n"
            "model.load_state_dict(checkpoint[\"model\"])\n"
            "optimizer = torch.optim.$opt(model.parameters(), lr=0.01)\n"
            "optimizer.load_state_dict(checkpoint[\"optimizer\"])   # state cast to the parameters as they are now\n"
            "model.to(torch.$dtype)                               # stands in for model.to(\"cuda\"): moved too late\n"
            "model(torch.randn(8, 4, dtype=torch.$dtype)).pow(2).mean().backward()\n"
            "optimizer.step()\n"
        ),
        fix=(
            "torch.manual_seed(0)\n"
            "model = nn.Linear(4, 3)\n"
            "optimizer = torch.optim.$opt(model.parameters(), lr=0.01)\n"
            "model(torch.randn(8, 4)).pow(2).mean().backward()\n"
            "optimizer.step()\n"
            "torch.save({\"model\": model.state_dict(), \"optimizer\": optimizer.state_dict()}, tmp / \"ckpt.pt\")\n"
            "\n"
            "checkpoint = torch.load(tmp / \"ckpt.pt\")\n"
            "model = nn.Linear(4, 3).to(torch.$dtype)              # move the model first\n"
            "model.load_state_dict(checkpoint[\"model\"])\n"
            "optimizer = torch.optim.$opt(model.parameters(), lr=0.01)\n"
            "optimizer.load_state_dict(checkpoint[\"optimizer\"])   # the state follows the parameters\n"
            "model(torch.randn(8, 4, dtype=torch.$dtype)).pow(2).mean().backward()\n"
            "optimizer.step()\n"
            "shown = str(optimizer.state[model.weight][\"exp_avg\"].dtype)\n"
        ),
        cause="optimizer.load_state_dict casts the saved state (Adam's exp_avg, exp_avg_sq) to each parameter's "
              "device and dtype at load time; moving the model afterwards leaves the state behind, and the next "
              "step mixes the two. On a GPU the same order gives \"Expected all tensors to be on the same device\"; "
              "move the model before building and loading the optimizer.",
        expect="RuntimeError",
        params=({"opt": "Adam", "dtype": "float64"}, {"opt": "AdamW", "dtype": "float16"}),
        sources=(
            "https://github.com/pytorch/pytorch/issues/2830",
            "https://github.com/microsoft/Cream/issues/2",
            "https://github.com/kohya-ss/sd-scripts/issues/1944",
        ),
    ),
    Entry(
        id="save-local-function", stage="checkpoint", chapter=7,
        title="torch.save of a whole model that holds a lambda or a local function",
        code=(
            "def make_model():\n"
            "    $helper\n"
            "    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU())\n"
            "    model.$attr = $func\n"
            "    return model\n"
            "torch.save(make_model(), tmp / \"model.pt\")   # pickles the whole object, its functions included\n"
        ),
        fix=(
            "def make_model():\n"
            "    $helper\n"
            "    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU())\n"
            "    model.$attr = $func\n"
            "    return model\n"
            "torch.save(make_model().state_dict(), tmp / \"model.pt\")   # tensors only; rebuild the model in code\n"
            "shown = sorted(torch.load(tmp / \"model.pt\"))\n"
        ),
        cause="Saving a whole object pickles everything it holds, and pickle stores a function by its importable "
              "name; a lambda or a function defined inside another function has none. Save the state_dict, or move "
              "the function to module level.",
        expect="AttributeError",
        params=(
            {"helper": "pass", "attr": "activation", "func": "lambda x: x.clamp(min=0)"},
            {"helper": "def scale_output(x):\n        return 2 * x", "attr": "postprocess", "func": "scale_output"},
        ),
        sources=(
            "https://github.com/akamaster/pytorch_resnet_cifar10/issues/11",
            "https://github.com/learnables/learn2learn/issues/182",
            "https://github.com/AlessioGalluccio/FastFlow/issues/3",
        ),
        python_note="Python's own words: 3.11 and 3.12 raise AttributeError \"Can't pickle local object "
                    "'make_model.<locals>.<lambda>'\" (shown here, from 3.11); 3.13 raises AttributeError \"Can't get "
                    "local object 'make_model.<locals>.<lambda>'\" (checked on 3.13.0); 3.14's pickle raises "
                    "pickle.PicklingError \"Can't pickle local object <function make_model.<locals>.<lambda> at "
                    "0x...>\" (read in CPython's source, not run here). Nothing is normalised.",
    ),
)

_DISTRIBUTED = (
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
            + _GROUP +
            "try:\n"
            "    result = $call\n"
            "    shown = dist.get_world_size()\n"
            "finally:\n"
            "    dist.destroy_process_group()\n"
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
        id="dist-port-in-use", stage="distributed", chapter=7,
        title="started the rendezvous store on a port another process already holds (MASTER_PORT of a run still going)",
        code=(
            "import datetime, socket\n"
            "import torch.distributed as dist\n"
            "$holder\n"
            "try:\n"
            "    store = dist.TCPStore(\"127.0.0.1\", port, world_size=1, is_master=True, wait_for_workers=False,\n"
            "                          timeout=datetime.timedelta(seconds=2))\n"
            "finally:\n"
            "    $release\n"
        ),
        fix=(
            "import datetime, socket\n"
            "import torch.distributed as dist\n"
            "$holder\n"
            "try:\n"
            "    store = dist.TCPStore(\"127.0.0.1\", 0, world_size=1, is_master=True, wait_for_workers=False,\n"
            "                          timeout=datetime.timedelta(seconds=2))   # 0: the system picks a free port\n"
            "    shown = store.port != port\n"
            "finally:\n"
            "    $release\n"
        ),
        cause="The master's store listens on MASTER_PORT, and a port is held by one listener at a time: an "
              "earlier run that is still alive (or a second job started with the same port) has it. Stop that "
              "process or pick another port (torchrun --master_port, or --rdzv-endpoint=localhost:0 on one machine).",
        expect="DistNetworkError",
        params=(
            {"holder": "held = socket.socket()\n"
                       "held.bind((\"127.0.0.1\", 0))\n"
                       "held.listen()\n"
                       "port = held.getsockname()[1]",
             "release": "held.close()"},
            {"holder": "first = dist.TCPStore(\"127.0.0.1\", 0, world_size=1, is_master=True, wait_for_workers=False)\n"
                       "port = first.port   # the store of a run that is still going",
             "release": "del first"},
        ),
        sources=(
            "https://github.com/xdit-project/mochi-xdit/issues/22",
            "https://github.com/om-ai-lab/VLM-R1/issues/289",
            "https://github.com/NVIDIA/Megatron-LM/issues/1371",
        ),
    ),
    Entry(
        id="ddp-unused-parameters", stage="distributed", chapter=7,
        title="trained with DDP a model whose forward leaves some parameters unused",
        code=(
            "from torch.nn.parallel import DistributedDataParallel as DDP\n"
            "class Net(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            "        self.$first = nn.Linear(4, 3)\n"
            "        self.$second = nn.Linear(4, 3)\n"
            "    def forward(self, x):\n"
            "        return self.$used(x)            # the other layer gets no gradient\n"
            + _GROUP +
            "try:\n"
            "    model = DDP(Net())\n"
            "    for step in range(2):\n"
            "        model(torch.randn(8, 4)).sum().backward()\n"
            "finally:\n"
            "    dist.destroy_process_group()\n"
        ),
        fix=(
            "from torch.nn.parallel import DistributedDataParallel as DDP\n"
            "class Net(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            "        self.$first = nn.Linear(4, 3)\n"
            "        self.$second = nn.Linear(4, 3)\n"
            "    def forward(self, x):\n"
            "        return self.$used(x)\n"
            + _GROUP +
            "try:\n"
            "    model = DDP(Net(), find_unused_parameters=True)   # or remove the unused layer\n"
            "    for step in range(2):\n"
            "        model(torch.randn(8, 4)).sum().backward()\n"
            "    shown = step + 1\n"
            "finally:\n"
            "    dist.destroy_process_group()\n"
        ),
        cause="DDP waits for a gradient from every parameter before it finishes reducing; a parameter that the "
              "forward did not use never reports, so the next iteration finds the previous reduction unfinished. "
              "Use every parameter, delete the unused ones, or pass find_unused_parameters=True.",
        expect="RuntimeError",
        params=(
            {"first": "head", "second": "aux_head", "used": "head"},
            {"first": "old_classifier", "second": "classifier", "used": "classifier"},
        ),
        sources=(
            "https://github.com/pytorch/pytorch/issues/43259",
            "https://github.com/ImprintLab/MedSegDiff/issues/27",
            "https://github.com/Megvii-BaseDetection/YOLOX/issues/885",
        ),
    ),
    Entry(
        id="ddp-marked-ready-twice", stage="distributed", chapter=7,
        title="reentrant activation checkpointing inside DDP with find_unused_parameters=True",
        code=(
            "from torch.nn.parallel import DistributedDataParallel as DDP\n"
            "from torch.utils.checkpoint import checkpoint\n"
            "class Net(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            "        self.$first = nn.Linear(4, 4)\n"
            "        self.$middle = nn.Linear(4, 4)\n"
            "        self.$last = nn.Linear(4, 3)\n"
            "    def forward(self, x):\n"
            "        h = self.$first(x)\n"
            "        h = checkpoint(self.$middle, h, use_reentrant=True)\n"
            "        return self.$last(h)\n"
            + _GROUP +
            "try:\n"
            "    model = DDP(Net(), find_unused_parameters=True)\n"
            "    model(torch.randn(8, 4)).sum().backward()\n"
            "finally:\n"
            "    dist.destroy_process_group()\n"
        ),
        fix=(
            "from torch.nn.parallel import DistributedDataParallel as DDP\n"
            "from torch.utils.checkpoint import checkpoint\n"
            "class Net(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            "        self.$first = nn.Linear(4, 4)\n"
            "        self.$middle = nn.Linear(4, 4)\n"
            "        self.$last = nn.Linear(4, 3)\n"
            "    def forward(self, x):\n"
            "        h = self.$first(x)\n"
            "        h = checkpoint(self.$middle, h, use_reentrant=False)   # non-reentrant checkpointing\n"
            "        return self.$last(h)\n"
            + _GROUP +
            "try:\n"
            "    model = DDP(Net())                      # every parameter is used: no find_unused_parameters\n"
            "    model(torch.randn(8, 4)).sum().backward()\n"
            "    shown = model.module.$middle.weight.grad is not None\n"
            "finally:\n"
            "    dist.destroy_process_group()\n"
        ),
        cause="Reentrant checkpointing runs the checkpointed block's backward as a second, nested backward pass, "
              "so DDP's hooks fire again for its parameters, which find_unused_parameters had already marked "
              "ready. Use use_reentrant=False, or drop find_unused_parameters when every parameter is used.",
        expect="RuntimeError",
        params=(
            {"first": "embed", "middle": "block", "last": "head"},
            {"first": "stem", "middle": "encoder", "last": "classifier"},
        ),
        sources=(
            "https://github.com/huggingface/peft/issues/313",
            "https://github.com/huggingface/accelerate/issues/2017",
            "https://github.com/microsoft/FocalNet/issues/4",
        ),
    ),
    Entry(
        id="ddp-wrapper-attribute", stage="distributed", chapter=7,
        title="called your model's own method or attribute on the DDP wrapper",
        code=(
            "from torch.nn.parallel import DistributedDataParallel as DDP\n"
            "class Net(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            "        self.encoder = nn.Linear(4, 3)\n"
            "    def forward(self, x):\n"
            "        return self.encoder(x)\n"
            "    def embed(self, x):\n"
            "        return self.encoder(x).tanh()\n"
            + _GROUP +
            "try:\n"
            "    model = DDP(Net())\n"
            "    result = $access\n"
            "finally:\n"
            "    dist.destroy_process_group()\n"
        ),
        fix=(
            "from torch.nn.parallel import DistributedDataParallel as DDP\n"
            "class Net(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            "        self.encoder = nn.Linear(4, 3)\n"
            "    def forward(self, x):\n"
            "        return self.encoder(x)\n"
            "    def embed(self, x):\n"
            "        return self.encoder(x).tanh()\n"
            + _GROUP +
            "try:\n"
            "    model = DDP(Net())\n"
            "    result = $fixed                     # your model is model.module\n"
            "    shown = tuple(result.shape)\n"
            "finally:\n"
            "    dist.destroy_process_group()\n"
        ),
        cause="DistributedDataParallel (like DataParallel) is a new Module that holds yours as `.module` and "
              "forwards only calls to forward; your methods and submodules live on `model.module`.",
        expect="AttributeError",
        params=(
            {"access": "model.embed(torch.randn(2, 4))", "fixed": "model.module.embed(torch.randn(2, 4))"},
            {"access": "model.encoder.weight", "fixed": "model.module.encoder.weight"},
        ),
        sources=(
            "https://github.com/ultralytics/yolov5/issues/90",
            "https://github.com/Project-MONAI/GenerativeModels/issues/354",
            "https://github.com/VinAIResearch/XPhoneBERT/issues/7",
        ),
    ),
    Entry(
        id="ddp-device-ids-cpu", stage="distributed", chapter=7,
        title="passed GPU device_ids to DDP for a model that is still on the CPU",
        code=(
            "from torch.nn.parallel import DistributedDataParallel as DDP\n"
            + _GROUP +
            "try:\n"
            "    model = DDP(nn.Linear(4, 3), device_ids=$ids$out)\n"
            "finally:\n"
            "    dist.destroy_process_group()\n"
        ),
        fix=(
            "from torch.nn.parallel import DistributedDataParallel as DDP\n"
            + _GROUP +
            "try:\n"
            "    model = DDP(nn.Linear(4, 3))   # a CPU module: no device_ids (on a GPU: model.to(rank) first)\n"
            "    shown = str(next(model.parameters()).device)\n"
            "finally:\n"
            "    dist.destroy_process_group()\n"
        ),
        cause="device_ids tells DDP which single GPU the module lives on, so the module must already be there; "
              "this one's parameters are on the CPU. Move the model to the rank's GPU before wrapping it, or leave "
              "device_ids out for a CPU model.",
        expect="ValueError",
        params=({"ids": "[0]", "out": ""}, {"ids": "[1]", "out": ", output_device=1"}),
        sources=(
            "https://github.com/pytorch/pytorch/issues/100243",
            "https://github.com/ultralytics/ultralytics/pull/15701",
        ),
    ),
    Entry(
        id="ddp-no-trainable-parameters", stage="distributed", chapter=7,
        title="wrapped a frozen or parameter-free module in DDP",
        code=(
            "from torch.nn.parallel import DistributedDataParallel as DDP\n"
            + _GROUP +
            "try:\n"
            "    frozen = DDP($module)\n"
            "finally:\n"
            "    dist.destroy_process_group()\n"
        ),
        fix=(
            "from torch.nn.parallel import DistributedDataParallel as DDP\n"
            + _GROUP +
            "try:\n"
            "    frozen = $module                       # nothing to synchronise: use it unwrapped\n"
            "    shown = sum(p.requires_grad for p in frozen.parameters())\n"
            "finally:\n"
            "    dist.destroy_process_group()\n"
        ),
        cause="DDP exists to average gradients across processes; a module with no parameter that requires a "
              "gradient (a frozen feature extractor, a loss or metric module) has none to average. Wrap only the "
              "trainable model and use the frozen one as it is.",
        expect="RuntimeError",
        params=(
            {"module": "nn.Linear(4, 3).requires_grad_(False)"},
            {"module": "nn.Sequential(nn.ReLU(), nn.Dropout(0.1))"},
        ),
        sources=(
            "https://github.com/pytorch/pytorch/issues/45326",
            "https://github.com/huggingface/accelerate/issues/760",
            "https://github.com/guoqincode/Open-AnimateAnyone/issues/32",
        ),
    ),
    Entry(
        id="dist-init-twice", stage="distributed", chapter=7,
        title="called init_process_group a second time in the same process (a re-run notebook cell, a helper)",
        code=(
            _GROUP +
            "try:\n"
            "    $again\n"
            "finally:\n"
            "    dist.destroy_process_group()\n"
        ),
        fix=(
            _GROUP +
            "try:\n"
            "    if not dist.is_initialized():\n"
            "        $again\n"
            "    shown = dist.is_initialized()\n"
            "finally:\n"
            "    dist.destroy_process_group()\n"
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
)

_NEEDS_GPU = "needs a CUDA GPU, which this machine lacks"

_GPU_ONLY = (
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

ENTRIES = _CHECKPOINT + _DISTRIBUTED + _GPU_ONLY
