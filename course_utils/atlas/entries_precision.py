"""The atlas's entries for mixed precision (stage "precision", chapter 7): autocast, half-precision overflow,
GradScaler's rules, bfloat16 to NumPy."""
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
)
