"""The atlas's entries for saving and loading checkpoints (chapter 7)."""
from __future__ import annotations

from course_utils.atlas.entry import Entry, source

ENTRIES = (
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
            "https://github.com/VITA-Group/EnlightenGAN/issues/30",
        ),
        wordings=("'unexpected key \"module.conv1_1.weight\" in state_dict'",),   # torch 0.3's KeyError (EnlightenGAN#30)
    ),
    Entry(
        id="state-dict-whole-checkpoint", stage="checkpoint", chapter=7,
        fix_line='fresh.load_state_dict(checkpoint["model"])   # the model\'s entry of the checkpoint, not the whole dict',
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
            "https://github.com/mj-will/nessai/pull/455",
            "https://github.com/voicepaw/so-vits-svc-fork/issues/348",
        ),
        wordings=(
            # torch 2.0-2.5 with weights_only=True asked for explicitly (so-vits-svc-fork#348)
            "Weights only load failed. Re-running `torch.load` with `weights_only` set to `False` will likely succeed, "
            "but it can result in arbitrary code execution.Do it only if you get the file from a trusted source. "
            "WeightsUnpickler error: Unsupported class numpy.core.multiarray._reconstruct",
            "You are using `torch.load` with `weights_only=False` (the current default value), which uses the "
                  "default pickle module implicitly. It is possible to construct malicious pickle data which will "
                  "execute arbitrary code during unpickling (See https://github.com/pytorch/pytorch/blob/main/"
                  "SECURITY.md#untrusted-models for more details). In a future release, the default value for "
                  "`weights_only` will be flipped to `True`. This limits the functions that could be executed during "
                  "unpickling. Arbitrary objects will no longer be allowed to be loaded via this mode unless they are "
                  "explicitly allowlisted by the user via `torch.serialization.add_safe_globals`. We recommend you "
                  "start setting `weights_only=True` for any use case where you don't have full control of the "
                  "loaded file.",),   # torch 2.4-2.5's FutureWarning, before the default flipped (nessai#455)
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
              "the function to module level. A DataLoader whose workers start by spawn (Windows, macOS) pickles "
              "its dataset for each worker and fails the same way on a lambda the dataset holds (a transform): "
              "there too, a module-level function (chapter 1 shows spawn's pickling).",
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
    Entry(
        id="load-class-not-in-main", stage="checkpoint", chapter=7,
        title="torch.load (weights_only=False) of a file holding an object whose class the saving script defined "
              "at its top level, in a script that does not define it",
        code=source("""
            import runpy
            (tmp / "train.py").write_text(   # train.py defines its class at the top level and pickles an instance
                "import torch\\n"
                "class $name(torch.nn.Module):\\n"
                "    def __init__(self):\\n"
                "        super().__init__()\\n"
                "        self.fc = torch.nn.Linear(4, 2)\\n"
                "torch.save($saved, " + repr(str(tmp / "model.pt")) + ")\\n")
            runpy.run_path(str(tmp / "train.py"), run_name="__main__")   # as `python train.py` runs it
            # predict.py, another script: no class $name at its top level
            checkpoint = torch.load(tmp / "model.pt", weights_only=False)
        """),
        fix=source("""
            class $name(nn.Module):   # the class, in the one module both scripts import (here: defined again)
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(4, 2)

            torch.save($name().state_dict(), tmp / "model.pt")   # train.py saves tensors only
            model = $name()
            model.load_state_dict(torch.load(tmp / "model.pt"))   # predict.py builds the model, then fills it
            shown = sorted(model.state_dict())
        """),
        fix_line="torch.save(Net().state_dict(), tmp / \"model.pt\")   # tensors only: the loading script builds Net, "
                 "then load_state_dict",
        cause="Pickle stores an object's class by name: module and class. A class defined at the top level of the "
              "script that was run is stored as __main__.Net, and loading looks for Net in the script that loads, "
              "which has none. Save the state_dict and rebuild the model in code (torch.load's default, "
              "weights_only=True, reads it); or define the class in a module both scripts import, and import it "
              "before loading. A DataLoader whose workers start by spawn raises the same error, in the worker, for "
              "a Dataset class defined in a notebook.",
        expect="AttributeError",
        params=({"name": "Net", "saved": "Net()"},
                {"name": "RecorderMeter",
                 "saved": "{'epoch': 3, 'meter': RecorderMeter()}"}),   # a custom object inside a dict
        sources=(
            "https://github.com/pytorch/pytorch/issues/7812",
            "https://github.com/pytorch/pytorch/issues/2762",
            "https://github.com/kuangliu/pytorch-cifar/issues/20",
            "https://github.com/zengqunzhao/MA-Net/issues/5",
            "https://github.com/yhjo09/AdaTarget/issues/5",
        ),
        wordings=("Can't get attribute 'LocNet' on <module '__main__' (built-in)>",),   # from an interactive prompt
        python_note="Python's own words, the same in 3.11, 3.12 and 3.13's _pickle.c (3.11 run here). The module's "
                    "repr depends on how the loading script was started (\"from 'predict.py'\"; \"(built-in)\" at a "
                    "prompt; nothing more in Jupyter): shown as <the loading script>.",
    ),
)
