"""The atlas's entries for the DistributedDataParallel wrapper (chapter 7): unused parameters, reentrant
checkpointing, the wrapped model's attributes, device_ids on the CPU, nothing to synchronise. Each runs in the
one-process gloo group of entries_distributed.py (``in_group``).
"""
from __future__ import annotations

from course_utils.atlas.entries_distributed import in_group
from course_utils.atlas.entry import Entry

ENTRIES = (
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
            + in_group(
                "model = DDP(Net())",
                "for step in range(2):",
                "    model(torch.randn(8, 4)).sum().backward()",
            )
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
            + in_group(
                "model = DDP(Net(), find_unused_parameters=True)   # or remove the unused layer",
                "for step in range(2):",
                "    model(torch.randn(8, 4)).sum().backward()",
                "shown = step + 1",
            )
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
            + in_group(
                "model = DDP(Net(), find_unused_parameters=True)",
                "model(torch.randn(8, 4)).sum().backward()",
            )
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
            + in_group(
                "model = DDP(Net())                      # every parameter is used: no find_unused_parameters",
                "model(torch.randn(8, 4)).sum().backward()",
                "shown = model.module.$middle.weight.grad is not None",
            )
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
            + in_group(
                "model = DDP(Net())",
                "result = $access",
            )
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
            + in_group(
                "model = DDP(Net())",
                "result = $fixed                     # your model is model.module",
                "shown = tuple(result.shape)",
            )
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
            + in_group(
                "model = DDP(nn.Linear(4, 3), device_ids=$ids$out)",
            )
        ),
        fix=(
            "from torch.nn.parallel import DistributedDataParallel as DDP\n"
            + in_group(
                "model = DDP(nn.Linear(4, 3))   # a CPU module: no device_ids (on a GPU: model.to(rank) first)",
                "shown = str(next(model.parameters()).device)",
            )
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
            + in_group(
                "frozen = DDP($module)",
            )
        ),
        fix=(
            "from torch.nn.parallel import DistributedDataParallel as DDP\n"
            + in_group(
                "frozen = $module                       # nothing to synchronise: use it unwrapped",
                "shown = sum(p.requires_grad for p in frozen.parameters())",
            )
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
)
