"""The atlas's entries for mixed precision (stage "precision", chapter 7): autocast, half-precision overflow,
GradScaler's rules, bfloat16 to NumPy, the deprecated torch.cuda.amp names, BCELoss under CUDA autocast (quoted)."""
from __future__ import annotations

from course_utils.atlas.entry import Entry

ENTRIES = (
    Entry(
        id="autocast-output-used-outside", stage="precision", chapter=7,
        title="an autocast output used in a matrix product after the autocast block",
        code="torch.manual_seed(0)\n"
             "model = nn.Linear(8, 8)\n"
             "with torch.autocast(\"cpu\", dtype=torch.$dtype):\n"
             "    h = model(torch.randn($batch, 8))             # h comes out in the low-precision dtype\n"
             "scores = h @ torch.randn(8, 3)                    # outside the region: no cast any more",
        fix="torch.manual_seed(0)\n"
            "model = nn.Linear(8, 8)\n"
            "with torch.autocast(\"cpu\", dtype=torch.$dtype):\n"
            "    h = model(torch.randn($batch, 8))\n"
            "    scores = h @ torch.randn(8, 3)                 # inside the region (or h.float() @ ...)\n"
            "shown = str(scores.dtype)",
        cause="Autocast casts only inside its region; the outputs it produced stay bfloat16/float16, so a later "
              "matmul with a float32 tensor outside the block mixes dtypes. Keep the computation inside the block "
              "or cast the output back with .float().",
        expect="RuntimeError",
        params=({"dtype": "bfloat16", "batch": 4}, {"dtype": "float16", "batch": 6}),
        sources=("https://github.com/karpathy/nanochat/pull/224",
                 "https://github.com/shibing624/MedicalGPT/issues/456",
                 "https://github.com/hiyouga/LlamaFactory/issues/2022"),
    ),
    Entry(
        id="masked-fill-overflows-half", stage="precision", chapter=7,
        title="an attention mask filled with -1e9 in float16",
        code="torch.manual_seed(0)\n"
             "q, k = torch.randn(2, $t, 8), torch.randn(2, $t, 8)\n"
             "mask = torch.ones($t, $t, dtype=torch.bool).triu(1)\n"
             "with torch.autocast(\"cpu\", dtype=torch.float16):\n"
             "    scores = (q @ k.transpose(1, 2)).masked_fill(mask, $value)   # scores are float16 here",
        fix="torch.manual_seed(0)\n"
            "q, k = torch.randn(2, $t, 8), torch.randn(2, $t, 8)\n"
            "mask = torch.ones($t, $t, dtype=torch.bool).triu(1)\n"
            "with torch.autocast(\"cpu\", dtype=torch.float16):\n"
            "    scores = q @ k.transpose(1, 2)\n"
            "    scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)   # or float('-inf')\n"
            "shown = str(scores.dtype)",
        cause="float16 holds magnitudes up to 65,504, so a fill value like -1e9 (or float32's minimum) cannot be "
              "stored. Use torch.finfo(scores.dtype).min or float('-inf'), or bfloat16, which has float32's range.",
        expect="RuntimeError",
        params=({"t": 4, "value": "-1e9"}, {"t": 6, "value": "torch.finfo(torch.float32).min"}),
        sources=("https://github.com/NVIDIA/apex/issues/1052",
                 "https://github.com/NVIDIA/apex/issues/1105",
                 "https://github.com/QwenLM/Qwen/issues/32"),
    ),
    Entry(
        id="gradscaler-unscale-twice", stage="precision", chapter=7,
        title="scaler.unscale_() on every micro-batch of gradient accumulation",
        code="torch.manual_seed(0)\n"
             "model = nn.Linear(4, 1)\n"
             "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
             "scaler = torch.amp.GradScaler(\"cpu\")\n"
             "for i in range($accum):\n"
             "    loss = F.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1)) / $accum\n"
             "    scaler.scale(loss).backward()\n"
             "    scaler.unscale_(opt)                   # to clip, on every micro-batch\n"
             "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
             "    if (i + 1) % $accum == 0:\n"
             "        scaler.step(opt)\n"
             "        scaler.update()\n"
             "        opt.zero_grad()",
        fix="torch.manual_seed(0)\n"
            "model = nn.Linear(4, 1)\n"
            "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "scaler = torch.amp.GradScaler(\"cpu\")\n"
            "for i in range($accum):\n"
            "    loss = F.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1)) / $accum\n"
            "    scaler.scale(loss).backward()\n"
            "    if (i + 1) % $accum == 0:\n"
            "        scaler.unscale_(opt)               # once, right before the step\n"
            "        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
            "        scaler.step(opt)\n"
            "        scaler.update()\n"
            "        opt.zero_grad()\n"
            "shown = scaler.get_scale()",
        cause="unscale_() divides the gradients by the scale, so it may run once per optimizer between two "
              "update() calls; with gradient accumulation (or a second clip) it was called again before the "
              "step. Unscale and clip only on the micro-batch that steps.",
        expect="RuntimeError",
        params=({"accum": 2}, {"accum": 4}),
        sources=("https://github.com/huggingface/transformers/issues/24449",
                 "https://github.com/hiyouga/LlamaFactory/issues/77",
                 "https://github.com/espnet/espnet/pull/2362"),
    ),
    Entry(
        id="gradscaler-fp16-parameters", stage="precision", chapter=7,
        title="a GradScaler used with a model whose weights are float16",
        code="torch.manual_seed(0)\n"
             "model = nn.Linear(4, 1).to(torch.float16)         # model.half(): the weights themselves in fp16\n"
             "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
             "scaler = torch.amp.GradScaler(\"cpu\")\n"
             "loss = model(torch.randn(8, 4, dtype=torch.float16)).float().mean()\n"
             "scaler.scale(loss).backward()\n"
             "scaler.$call(opt)",
        fix="torch.manual_seed(0)\n"
            "model = nn.Linear(4, 1)                            # float32 master weights\n"
            "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "scaler = torch.amp.GradScaler(\"cpu\")\n"
            "with torch.autocast(\"cpu\", dtype=torch.float16):  # fp16 compute, fp32 weights and gradients\n"
            "    loss = model(torch.randn(8, 4)).float().mean()\n"
            "scaler.scale(loss).backward()\n"
            "scaler.$call(opt)\n"
            "shown = str(model.weight.grad.dtype)",
        cause="Mixed precision keeps float32 weights and lets autocast run the forward in float16; a GradScaler "
              "refuses float16 gradients, which come from parameters cast with .half() (or a model loaded with "
              "torch_dtype=float16). Keep the trainable parameters in float32.",
        expect="ValueError",
        params=({"call": "step"}, {"call": "unscale_"}),
        sources=("https://github.com/haotian-liu/LLaVA/issues/363",
                 "https://github.com/mk-minchul/AdaFace/issues/127",
                 "https://github.com/Facico/Chinese-Vicuna/issues/168"),
    ),
    Entry(
        id="gradscaler-no-inf-checks", stage="precision", chapter=7,
        title="scaler.step() on an optimizer whose parameters got no gradient",
        code="torch.manual_seed(0)\n"
             "backbone, head, spare = nn.Linear(4, 8), nn.Linear(8, 1), nn.Linear(8, 1)\n"
             "for p in backbone.parameters():\n"
             "    p.requires_grad_(False)                      # frozen\n"
             "opt = torch.optim.SGD($group.parameters(), lr=0.1)   # the optimizer holds the wrong module\n"
             "scaler = torch.amp.GradScaler(\"cpu\")\n"
             "loss = F.mse_loss(head(backbone(torch.randn(8, 4))), torch.randn(8, 1))\n"
             "scaler.scale(loss).backward()\n"
             "scaler.step(opt)",
        fix="torch.manual_seed(0)\n"
            "backbone, head, spare = nn.Linear(4, 8), nn.Linear(8, 1), nn.Linear(8, 1)\n"
            "for p in backbone.parameters():\n"
            "    p.requires_grad_(False)\n"
            "model = nn.Sequential(backbone, head)\n"
            "opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)\n"
            "scaler = torch.amp.GradScaler(\"cpu\")\n"
            "loss = F.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1))\n"
            "scaler.scale(loss).backward()\n"
            "scaler.step(opt)\n"
            "scaler.update()\n"
            "shown = scaler.get_scale()",
        cause="scaler.step() looks for infs in the optimizer's gradients and found no gradient at all: its "
              "parameters are frozen, unused in the forward, or belong to another copy of the model (built before "
              "a .to(device) that replaced them, or a model other than the one that ran).",
        expect="AssertionError",
        params=({"group": "backbone"}, {"group": "spare"}),
        sources=("https://github.com/huggingface/accelerate/issues/328",
                 "https://github.com/NirAharon/BoT-SORT/issues/85",
                 "https://github.com/open-mmlab/mmsegmentation/issues/3230"),
    ),
    Entry(
        id="bfloat16-to-numpy", stage="precision", chapter=7,
        title="a bfloat16 output converted to numpy",
        code="torch.manual_seed(0)\n"
             "model = nn.Linear(4, $n_out).to(torch.bfloat16)\n"
             "out = model(torch.randn($batch, 4, dtype=torch.bfloat16))\n"
             "preds = $convert",
        fix="torch.manual_seed(0)\n"
            "model = nn.Linear(4, $n_out).to(torch.bfloat16)\n"
            "out = model(torch.randn($batch, 4, dtype=torch.bfloat16))\n"
            "preds = out.detach().float().cpu().numpy()   # numpy has no bfloat16: go through float32\n"
            "shown = str(preds.dtype)",
        cause="numpy has no bfloat16 type, so a bfloat16 tensor (a model run in bf16, outputs of bf16 autocast) "
              "cannot be converted directly; cast with .float() first.",
        expect="TypeError",
        params=({"n_out": 3, "batch": 4, "convert": "out.detach().numpy()"},
                {"n_out": 1, "batch": 8, "convert": "out.detach().cpu().numpy()"}),
        sources=("https://github.com/pytorch/pytorch/issues/110285",
                 "https://github.com/xwying/torchshow/issues/23"),
    ),
    Entry(
        id="cuda-amp-deprecated", stage="precision", chapter=7,
        title="mixed precision written with the torch.cuda.amp names (GradScaler, autocast)",
        code="$old\n",
        fix="$new\nshown = $shown\n",
        cause="torch.cuda.amp.GradScaler and torch.cuda.amp.autocast are the old, CUDA-only spellings; torch.amp "
              "takes the device as an argument (the old names are thin wrappers around it), so one loop serves the "
              "CPU and the GPU. Only the name changes: the behaviour, and a loop that trains correctly, stay the same.",
        expect="FutureWarning",
        params=({"old": "scaler = torch.cuda.amp.GradScaler(enabled=torch.cuda.is_available())",
                 "new": "scaler = torch.amp.GradScaler(\"cuda\", enabled=torch.cuda.is_available())",
                 "shown": "type(scaler).__qualname__"},
                {"old": "with torch.cuda.amp.autocast(enabled=torch.cuda.is_available()):\n    pass",
                 "new": "with torch.autocast(\"cuda\", enabled=torch.cuda.is_available()):\n    pass",
                 "shown": "torch.is_autocast_enabled()"}),
        sources=("https://github.com/Linesight-RL/linesight/issues/51",
                 "https://github.com/pomonam/kronfluence/issues/35",
                 "https://github.com/thuml/Time-Series-Library/issues/740",
                 "https://github.com/pytorch/tutorials/issues/3331"),
    ),
    Entry(
        id="bce-unsafe-to-autocast", stage="precision", chapter=7,
        fix_line="loss = F.binary_cross_entropy_with_logits(model(x), y)   # and the model's Sigmoid layer removed",
        title="a Sigmoid then BCELoss (binary_cross_entropy) inside CUDA autocast",
        code=(
            "model = nn.Sequential(nn.Linear(16, 1), nn.Sigmoid()).cuda()\n"
            "x, y = torch.randn(8, 16, device=\"cuda\"), torch.randint(0, 2, (8, 1), device=\"cuda\").float()\n"
            "with torch.autocast(\"cuda\", dtype=torch.float16):\n"
            "    loss = F.binary_cross_entropy(model(x), y)   # probabilities in float16, then their log\n"
        ),
        fix=(
            "model = nn.Linear(16, 1).cuda()   # the logits: no Sigmoid layer\n"
            "x, y = torch.randn(8, 16, device=\"cuda\"), torch.randint(0, 2, (8, 1), device=\"cuda\").float()\n"
            "with torch.autocast(\"cuda\", dtype=torch.float16):\n"
            "    loss = F.binary_cross_entropy_with_logits(model(x), y)   # sigmoid and log together, in float32\n"
            "shown = str(loss.dtype)\n"
        ),
        cause="A sigmoid's output in float16 rounds to exactly 0 or 1 for moderate logits, and BCE takes its log, "
              "so CUDA autocast refuses binary_cross_entropy outright. Drop the Sigmoid and use BCEWithLogitsLoss "
              "(binary_cross_entropy_with_logits), which computes both together, stably. On the CPU, autocast "
              "runs binary_cross_entropy in float32 and raises nothing (checked on torch 2.13, float16 and "
              "bfloat16), so the error first appears on the GPU.",
        expect="RuntimeError",
        not_run="needs a CUDA GPU, which this machine lacks; CPU autocast does not raise it",
        message="torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
                "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
                "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
                "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
                "safe to autocast.",
        sources=("https://github.com/pytorch/pytorch/issues/61098",
                 "https://github.com/Nioolek/PPYOLOE_pytorch/issues/16",
                 "https://github.com/SysCV/transfiner/issues/43",
                 "https://github.com/bcmi/SLBR-Visible-Watermark-Removal/issues/10"),
    ),
    Entry(
        id="autocast-cpu-unsupported-dtype", stage="precision", chapter=7,
        title="CPU autocast asked for a dtype it does not support (float32, float64)",
        code="model = nn.Linear(4, 2)\n"
             "with torch.autocast(\"cpu\", dtype=torch.$dtype):   # meant: \"full precision\"\n"
             "    out = model(torch.randn(3, 4))",
        fix="model = nn.Linear(4, 2)\n"
            "with torch.autocast(\"cpu\", dtype=torch.bfloat16, enabled=$wanted):   # on, or off with enabled=\n"
            "    out = model(torch.randn(3, 4))\n"
            "shown = str(out.dtype)",
        cause="Autocast lowers precision: on the CPU only bfloat16 and float16 are its dtypes, so asking for "
              "float32 (to mean \"no mixed precision\") disables it with a warning. Turn it off with "
              "enabled=False instead, which is what a flag like --amp should switch.",
        expect="UserWarning",
        params=({"dtype": "float32", "wanted": "False"}, {"dtype": "float64", "wanted": "True"}),
        sources=("https://github.com/pytorch/pytorch/issues/100565",
                 "https://github.com/modelscope/FunASR/issues/264",
                 "https://github.com/pytorch/pytorch/pull/107348"),
        wordings=("In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
                  "CPU Autocast only supports dtype of torch.bfloat16 currently.",),   # torch 2.0 (pytorch#100565)
    ),
    Entry(
        id="autocast-cuda-unavailable", stage="precision", chapter=7,
        title="torch.autocast(\"cuda\") (or torch.cuda.amp, a GradScaler for \"cuda\") on a machine without a usable GPU",
        code="model = nn.Linear(4, 2)\n"
             "with torch.autocast(\"cuda\", dtype=torch.float16):   # the script assumes a GPU\n"
             "    out = model(torch.randn(3, 4))",
        fix="device = \"cuda\" if torch.cuda.is_available() else \"cpu\"\n"
            "model = nn.Linear(4, 2).to(device)\n"
            "with torch.autocast(device, dtype=torch.bfloat16):   # the device the model is on\n"
            "    out = model(torch.randn(3, 4, device=device))\n"
            "shown = str(out.dtype)",
        cause="Autocast for \"cuda\" (which is all torch.cuda.amp.autocast can mean) switches itself off where "
              "CUDA is not available, so the run is full precision on the CPU with only this warning to say so; a "
              "GradScaler for \"cuda\" does the same, with its own warning. Either the torch installed has no CUDA "
              "or the machine has no usable GPU (torch.cuda.is_available() says which is worth checking). Pass the "
              "device the model is on (torch.autocast(device_type=device)), and enable the scaler only on CUDA.",
        expect="UserWarning",
        not_run="warns only where CUDA is unavailable (here it does); on a machine with a GPU it runs, and a "
                "chapter prints the same on every machine",
        message="CUDA is not available or torch_xla is imported. Disabling autocast.",
        sources=("https://github.com/pytorch/pytorch/issues/83733",
                 "https://github.com/pytorch/pytorch/issues/73140",
                 "https://github.com/ai-forever/Real-ESRGAN/issues/12",
                 "https://github.com/LuxImagingAI/DBSegment/issues/1",
                 "https://github.com/aladdinpersson/Machine-Learning-Collection/issues/147"),
        wordings=("User provided device_type of 'cuda', but CUDA is not available. Disabling",    # torch 1.12
                  # the scaler's own warning, the same case (DBSegment#1 prints both; torch 2.13 words it so too)
                  "torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling."),
    ),
    Entry(
        id="half-op-missing-on-cpu", stage="precision", chapter=7,
        title="a float16 (or bfloat16) model or tensor on the CPU reaches an operation with no kernel for that dtype "
              "there (weights loaded in fp16 for a GPU, run on a machine without one)",
        code="torch.manual_seed(0)\n"
             "$make   # what a model run in float16 on the CPU hands on\n"
             "out = $op",
        fix="torch.manual_seed(0)\n"
            "$make\n"
            "out = $fixed   # this operation in float32 (or the whole CPU model: model.float())\n"
            "shown = str(out.dtype)",
        cause="A model kept in float16 (.half(), or weights loaded with torch_dtype=torch.float16 for a GPU) runs on "
              "the CPU until an operation has no float16 kernel there. On torch 2.13 the common layers have one "
              "(Linear, convolutions, LayerNorm, BatchNorm, softmax), ctc_loss and cdist do not, nor do linear "
              "algebra's cholesky and svd (tests/test_atlas.py runs each in float16 on the CPU); the threads quoting LayerNormKernelImpl, addmm_impl_cpu_ or "
              "slow_conv2d_cpu ran torch before those kernels were added (pytorch#99590 added LayerNorm's in 2023). "
              "On a CPU keep the model in float32 (model.float(), or load it with torch_dtype=torch.float32), "
              "use torch.autocast(\"cpu\", dtype=torch.bfloat16) for lower precision, or cast the one operation's "
              "inputs with .float().",
        expect="NotImplementedError",
        params=({"make": "log_probs = torch.randn(12, 2, 5).log_softmax(2).half()   # (T, N, C)\n"
                         "targets, lengths = torch.randint(1, 5, (2, 4)), (torch.full((2,), 12), torch.full((2,), 4))",
                 "op": "F.ctc_loss(log_probs, targets, *lengths)",
                 "fixed": "F.ctc_loss(log_probs.float(), targets, *lengths)"},
                {"make": "emb = torch.randn(8, 16).half()   # embeddings for a metric-learning loss",
                 "op": "torch.cdist(emb, emb)",
                 "fixed": "torch.cdist(emb.float(), emb.float())"}),
        sources=("https://github.com/pytorch/pytorch/issues/52291",
                 "https://github.com/pytorch/pytorch/pull/99590",
                 "https://github.com/facebookresearch/flores/issues/30",
                 "https://github.com/huggingface/transformers/issues/27769",
                 "https://github.com/bigscience-workshop/petals/issues/432"),
        wordings=("\"LayerNormKernelImpl\" not implemented for 'Half'",        # torch 1.7 (pytorch#52291)
                  "\"addmm_impl_cpu_\" not implemented for 'Half'",            # a Linear layer (transformers#27769)
                  "\"slow_conv2d_cpu\" not implemented for 'Half'"),           # a convolution, older torch
    ),
    Entry(
        id="tf32-not-enabled", stage="precision", chapter=7,
        title="torch.compile on an Ampere-or-newer GPU with float32 matmuls left at full precision",
        code="model = torch.compile(nn.Linear(1024, 1024).cuda())   # an A100, RTX 30xx or newer\n"
             "out = model(torch.randn(64, 1024, device=\"cuda\"))",
        fix="torch.set_float32_matmul_precision(\"high\")   # TF32 for float32 matmuls (10 mantissa bits)\n"
            "model = torch.compile(nn.Linear(1024, 1024).cuda())\n"
            "out = model(torch.randn(64, 1024, device=\"cuda\"))\n"
            "shown = str(out.dtype)",
        cause="Not an error: the card has TensorFloat32 tensor cores, and torch leaves float32 matmuls at full "
              "precision unless told otherwise. torch.set_float32_matmul_precision(\"high\") runs them on those "
              "cores with 10 mantissa bits instead of 23 (faster; by how much depends on the card, not measured "
              "here), which training usually tolerates; leave it when exact float32 results matter.",
        expect="UserWarning",
        not_run="needs an NVIDIA GPU of compute capability 8.0 or newer, which this machine lacks",
        message="TensorFloat32 tensor cores for float32 matrix multiplication available but not enabled. Consider "
                "setting `torch.set_float32_matmul_precision('high')` for better performance.",
        sources=("https://github.com/drubinstein/pokemonred_puffer/issues/10",
                 "https://github.com/vllm-project/vllm/pull/29897",
                 "https://github.com/pytorch/FBGEMM/pull/4767",
                 "https://github.com/mittagessen/kraken/issues/596"),
        wordings=("You are using a CUDA device ('NVIDIA GeForce RTX 4070') that has Tensor Cores. To properly utilize "
                  "them, you should set `torch.set_float32_matmul_precision('medium' | 'high')` which will trade-off "
                  "precision for performance.",),   # Lightning's words for the same setting (kraken#596)
    ),
)
