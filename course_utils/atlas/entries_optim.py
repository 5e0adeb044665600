"""The atlas's entries for the optimizer (chapter 3) and the schedulers (chapter 7)."""
from __future__ import annotations

from course_utils.atlas.entry import Entry, source

ENTRIES = (
    Entry(
        id="optimizer-empty-parameter-list", stage="step", chapter=3,
        title="layers kept in a plain Python list, so the model has no parameters",
        code="class Net(nn.Module):\n"
             "    def __init__(self):\n"
             "        super().__init__()\n"
             "        self.layers = [nn.Linear($width, $width) for _ in range($depth)]   # a list: not registered\n"
             "    def forward(self, x):\n"
             "        for layer in self.layers:\n"
             "            x = layer(x)\n"
             "        return x\n"
             "opt = torch.optim.$opt(Net().parameters(), lr=0.01)",
        fix="class Net(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            "        self.layers = nn.ModuleList(nn.Linear($width, $width) for _ in range($depth))\n"
            "    def forward(self, x):\n"
            "        for layer in self.layers:\n"
            "            x = layer(x)\n"
            "        return x\n"
            "net = Net()\n"
            "opt = torch.optim.$opt(net.parameters(), lr=0.01)\n"
            "shown = len(list(net.parameters()))",
        cause="model.parameters() found nothing: layers in a Python list or dict (use nn.ModuleList / "
              "nn.ModuleDict), layers created in forward() instead of __init__, or a filter on requires_grad "
              "after freezing everything.",
        expect="ValueError",
        params=({"width": 8, "depth": 2, "opt": "SGD"}, {"width": 32, "depth": 4, "opt": "Adam"}),
        sources=("https://github.com/pytorch/pytorch/issues/50402",
                 "https://github.com/lxztju/pytorch_classification/issues/13",
                 "https://github.com/danieltan07/learning-to-reweight-examples/issues/6"),
    ),
    Entry(
        id="anomaly-nan-in-backward", stage="step", chapter=3,
        title="anomaly detection names the operation whose gradient is NaN",
        code="torch.manual_seed(0)\n"
             "p = torch.randn(4, 3, requires_grad=True)\n"
             "probs = torch.softmax(p, 1) * torch.tensor([1.0, 1.0, 0.0])   # one class masked out: probability 0\n"
             "with torch.autograd.set_detect_anomaly(True):       # turned on to find where the NaN comes from\n"
             "    loss = $loss\n"
             "    loss.backward()",
        fix="torch.manual_seed(0)\n"
            "p = torch.randn(4, 3, requires_grad=True)\n"
            "probs = torch.softmax(p, 1) * torch.tensor([1.0, 1.0, 0.0])\n"
            "with torch.autograd.set_detect_anomaly(True):\n"
            "    loss = $safe\n"
            "    loss.backward()\n"
            "shown = bool(torch.isfinite(p.grad).all())",
        cause="With anomaly detection on, backward stops at the first function whose gradient holds a NaN and names "
              "it (the warning above it shows the forward line). Typical sources: sqrt or ** 0.5 at exactly 0 "
              "(a distance of a point to itself), log of 0, 0/0; add a small epsilon or clamp before the function.",
        expect="RuntimeError",
        params=({"loss": "torch.sqrt(((p - p.detach()) ** 2).sum(1)).mean()",
                 "safe": "torch.sqrt(((p - p.detach()) ** 2).sum(1) + 1e-12).mean()"},
                {"loss": "-(probs * torch.log(probs)).sum(1).mean()",
                 "safe": "-(probs * torch.log(probs.clamp_min(1e-12))).sum(1).mean()"}),
        sources=("https://github.com/pytorch/pytorch/issues/38714",
                 "https://github.com/pytorch/pytorch/issues/51196",
                 "https://github.com/leftthomas/CGD/issues/12"),
    ),
    Entry(
        id="optimizer-non-leaf-tensor", stage="step", chapter=3,
        title="an optimizer given a tensor made by an operation on a requires_grad tensor",
        code="torch.manual_seed(0)\n"
             "w = torch.randn($n, 1, requires_grad=True)$op      # the result of an operation, not a leaf\n"
             "opt = torch.optim.$opt([w], lr=0.1)",
        fix="torch.manual_seed(0)\n"
            "w = (torch.randn($n, 1)$op).requires_grad_()       # operate first, then ask for gradients\n"
            "opt = torch.optim.$opt([w], lr=0.1)\n"
            "shown = w.is_leaf",
        cause="An optimizer can only update leaf tensors, those created by you rather than computed; "
              "torch.randn(..., requires_grad=True) * 0.01, or .to(device)/.double()/.cuda() after "
              "requires_grad=True, returns a computed tensor whose gradient would never be stored. Scale or move "
              "first and set requires_grad last (or use nn.Parameter).",
        expect="ValueError",
        params=({"n": 3, "op": " * 0.01", "opt": "SGD"}, {"n": 10, "op": ".to(torch.float64)", "opt": "Adam"}),
        sources=("https://github.com/pytorch/pytorch/issues/140469",
                 "https://github.com/vinsis/ternary-quantization/issues/4",
                 "https://github.com/mazzzystar/randomCNN-voice-transfer/issues/16"),
    ),
    Entry(
        id="leaf-inplace-manual-update", stage="step", chapter=3,
        title="a hand-written gradient step on a weight, outside torch.no_grad()",
        code="torch.manual_seed(0)\n"
             "w = torch.randn($n, 1, requires_grad=True)\n"
             "loss = ((torch.randn(8, $n) @ w) ** 2).mean()\n"
             "loss.backward()\n"
             "$update",
        fix="torch.manual_seed(0)\n"
            "w = torch.randn($n, 1, requires_grad=True)\n"
            "loss = ((torch.randn(8, $n) @ w) ** 2).mean()\n"
            "loss.backward()\n"
            "with torch.no_grad():                   # the update itself must not be recorded\n"
            "    $update\n"
            "shown = w.requires_grad",
        cause="A tensor created with requires_grad=True (a leaf, like every nn.Parameter) cannot be changed in "
              "place while autograd records, since its gradient would refer to a value that no longer exists. "
              "Do manual updates and weight edits under torch.no_grad() (or let an optimizer do them).",
        expect="RuntimeError",
        params=({"n": 3, "update": "w -= 0.1 * w.grad"},
                {"n": 10, "update": "w.add_(w.grad, alpha=-0.01)"}),
        sources=("https://github.com/pytorch/examples/pull/779",
                 "https://github.com/BaiTheBest/SparseLLM/issues/13",
                 "https://github.com/divelab/DIG/issues/164"),
    ),
    Entry(
        id="scheduler-step-before-optimizer-step", stage="step", chapter=7,
        fix_line="sched.step()   # after optimizer.step(), never before it",
        title="scheduler.step() called before optimizer.step()",
        code="torch.manual_seed(0)\n"
             "model = nn.Linear(4, 1)\n"
             "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
             "sched = torch.optim.lr_scheduler.$sched\n"
             "for step in range(2):\n"
             "    loss = F.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1))\n"
             "    opt.zero_grad()\n"
             "    loss.backward()\n"
             "    sched.step()                       # before the update\n"
             "    opt.step()",
        fix="torch.manual_seed(0)\n"
            "model = nn.Linear(4, 1)\n"
            "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "sched = torch.optim.lr_scheduler.$sched\n"
            "for step in range(2):\n"
            "    loss = F.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1))\n"
            "    opt.zero_grad()\n"
            "    loss.backward()\n"
            "    opt.step()\n"
            "    sched.step()                       # after the update\n"
            "shown = round(opt.param_groups[0]['lr'], 6)",
        cause="A warning: the schedule's first value is skipped because the scheduler moved before any update. "
              "It also appears, harmlessly, when a GradScaler skips the first step (an inf in the fp16 "
              "gradients), even though the loop's order is right.",
        expect="UserWarning",
        params=({"sched": "StepLR(opt, step_size=1, gamma=0.5)"},
                {"sched": "CosineAnnealingLR(opt, T_max=10)"}),
        sources=("https://github.com/zju3dv/NeuralRecon/issues/51",
                 "https://github.com/princeton-vl/RAFT/issues/104",
                 "https://github.com/ThilinaRajapakse/pytorch-transformers-classification/issues/21"),
    ),
    Entry(
        id="plateau-step-without-metric", stage="step", chapter=7,
        title="ReduceLROnPlateau.step() called without the monitored value",
        code="torch.manual_seed(0)\n"
             "model = nn.Linear(4, 1)\n"
             "opt = torch.optim.$opt(model.parameters(), lr=0.1)\n"
             "sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, $mode)\n"
             "loss = F.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1))\n"
             "opt.zero_grad()\n"
             "loss.backward()\n"
             "opt.step()\n"
             "sched.step()                           # as for every other scheduler",
        fix="torch.manual_seed(0)\n"
            "model = nn.Linear(4, 1)\n"
            "opt = torch.optim.$opt(model.parameters(), lr=0.1)\n"
            "sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, $mode)\n"
            "loss = F.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1))\n"
            "opt.zero_grad()\n"
            "loss.backward()\n"
            "opt.step()\n"
            "val_loss = float(loss)                 # the validation metric, once per epoch\n"
            "sched.step(val_loss)\n"
            "shown = opt.param_groups[0]['lr']",
        cause="ReduceLROnPlateau decides from a measured value (usually the validation loss), so its step() "
              "requires it; generic training loops and libraries that call scheduler.step() with no argument "
              "break on it.",
        expect="TypeError",
        params=({"opt": "SGD", "mode": "\"min\""}, {"opt": "Adam", "mode": "\"max\""}),
        sources=("https://github.com/junyanz/pytorch-CycleGAN-and-pix2pix/issues/495",
                 "https://github.com/victoresque/pytorch-template/issues/89",
                 "https://github.com/mittagessen/kraken/issues/635"),
        python_note="Python's own missing-argument text: Python 3.10 and later (3.11 and 3.13 alike) name the "
                    "method as 'ReduceLROnPlateau.step()'; Python 3.9 and earlier wrote 'step()'.",
    ),
    Entry(
        id="onecycle-stepped-past-total", stage="step", chapter=7,
        title="OneCycleLR stepped more times than its total_steps",
        code="torch.manual_seed(0)\n"
             "model = nn.Linear(4, 1)\n"
             "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
             "sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, epochs=$epochs, steps_per_epoch=$spe)\n"
             "for epoch in range($epochs):\n"
             "    for batch in range($batches):          # the loader has more batches than steps_per_epoch\n"
             "        opt.step()\n"
             "        sched.step()",
        fix="torch.manual_seed(0)\n"
            "model = nn.Linear(4, 1)\n"
            "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, epochs=$epochs, steps_per_epoch=$batches)\n"
            "for epoch in range($epochs):\n"
            "    for batch in range($batches):          # steps_per_epoch=len(train_loader)\n"
            "        opt.step()\n"
            "        sched.step()\n"
            "shown = sched.last_epoch",
        cause="OneCycleLR plans a fixed number of steps (total_steps, or epochs * steps_per_epoch) and refuses one "
              "more: steps_per_epoch differs from len(train_loader) (a changed batch size or dataset, gradient "
              "accumulation), the scheduler is stepped per batch but sized per epoch, or training runs extra epochs.",
        expect="ValueError",
        params=({"epochs": 2, "spe": 3, "batches": 4}, {"epochs": 3, "spe": 10, "batches": 12}),
        sources=("https://github.com/vLAR-group/GrowSP/issues/11",
                 "https://github.com/A4Bio/PiFold/issues/6",
                 "https://github.com/flairNLP/flair/issues/2954"),
    ),
    Entry(
        id="schedule-sized-from-empty-loader", stage="step", chapter=7,
        title="a schedule sized from len(train_loader) when the loader found no data (a wrong data path)",
        code=source("""
            files = sorted((tmp / "$folder").glob("*.npy"))   # the configured data path: nothing there
            dataset = TensorDataset(torch.zeros(len(files), 4))
            loader = DataLoader(dataset, batch_size=8)
            opt = torch.optim.SGD(nn.Linear(4, 1).parameters(), lr=0.1)
            sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, $sizing)
        """),
        fix=source("""
            (tmp / "$folder").mkdir()
            for i in range(20):
                np.save(tmp / "$folder" / f"{i}.npy", np.zeros(4))
            files = sorted((tmp / "$folder").glob("*.npy"))
            if not files:                                  # said at the start, with the path that was searched
                raise FileNotFoundError(f"no .npy files in {tmp / '$folder'}: check the data path")
            dataset = TensorDataset(torch.zeros(len(files), 4))
            loader = DataLoader(dataset, batch_size=8)
            opt = torch.optim.SGD(nn.Linear(4, 1).parameters(), lr=0.1)
            sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, $sizing)
            shown = sched.total_steps
        """),
        fix_line="raise FileNotFoundError(f\"no .npy files in {tmp / 'data'}: check the data path\")   # before "
                 "anything is sized from len(loader)",
        cause="OneCycleLR (like any schedule sized from the data) takes its length from len(train_loader), and a loader "
              "over an empty dataset has 0 batches: the data path found nothing (a wrong folder, a pattern that "
              "matches no file, data not downloaded), and the first thing to notice was the schedule. Check that the "
              "dataset is not empty, naming the path searched, before building anything from its size.",
        expect="ValueError",
        params=({"folder": "data", "sizing": "total_steps=3 * len(loader)"},
                {"folder": "train", "sizing": "epochs=3, steps_per_epoch=len(loader)"}),
        sources=("https://github.com/Pointcept/Pointcept/issues/173",),
    ),
    Entry(
        id="scheduler-step-epoch-argument", stage="step", chapter=7,
        title="scheduler.step(epoch): the epoch passed in, as older tutorials did",
        code="torch.manual_seed(0)\n"
             "model = nn.Linear(4, 1)\n"
             "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
             "scheduler = torch.optim.lr_scheduler.$cls(opt, $args)\n"
             "for epoch in range(3):\n"
             "    opt.step()\n"
             "    scheduler.step(epoch)                  # the epoch number passed in",
        fix="torch.manual_seed(0)\n"
            "model = nn.Linear(4, 1)\n"
            "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "scheduler = torch.optim.lr_scheduler.$cls(opt, $args)\n"
            "for epoch in range(3):\n"
            "    opt.step()\n"
            "    scheduler.step()                       # it counts for itself\n"
            "shown = scheduler.get_last_lr()",
        cause="A scheduler counts its own steps; passing the epoch switches it to a closed-form formula (where the "
              "class has one) that can disagree with the chained one and is deprecated. Call scheduler.step() with "
              "no argument, once per epoch or per update as the schedule is sized (ReduceLROnPlateau takes the "
              "metric, not an epoch).",
        expect="UserWarning",
        params=({"cls": "StepLR", "args": "step_size=1, gamma=0.5"},
                {"cls": "ExponentialLR", "args": "gamma=0.9"}),
        sources=("https://github.com/Tony-Y/pytorch_warmup/issues/5",
                 "https://github.com/pytorch/pytorch/issues/51712",
                 "https://github.com/MannLabs/alphapeptdeep/issues/194",
                 "https://github.com/torch-points3d/torch-points3d/issues/487"),
    ),
    Entry(
        id="scheduler-verbose-removed", stage="step", chapter=7,
        title="a scheduler built with verbose=True, an argument torch has removed (code written for older torch)",
        code="model = nn.Linear(2, 1)\n"
             "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
             "scheduler = torch.optim.lr_scheduler.$cls(optimizer, $args, verbose=True)",
        fix="model = nn.Linear(2, 1)\n"
            "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "scheduler = torch.optim.lr_scheduler.$cls(optimizer, $args)\n"
            "shown = scheduler.get_last_lr()          # log the rate yourself where you want to see it",
        cause="verbose= printed a line whenever the rate changed; torch 2.2 deprecated it and later releases removed "
              "it, so code written for older torch fails to build its scheduler. Drop it and log "
              "scheduler.get_last_lr() yourself. Any \"unexpected keyword argument\" from a library's constructor "
              "asks the same first question: which version was the code written for?",
        expect="TypeError",
        params=({"cls": "ReduceLROnPlateau", "args": "mode=\"min\", factor=0.5"},
                {"cls": "StepLR", "args": "step_size=10"}),
        sources=("https://github.com/sb-ai-lab/LightAutoML/issues/173",
                 "https://github.com/gszfwsb/NCFM/pull/11",
                 "https://github.com/scverse/scvi-tools/pull/3297"),
    ),
    Entry(
        id="sparse-adam-dense-gradient", stage="step", chapter=3,
        title="SparseAdam on an embedding whose gradient is dense (tied to the output layer, or sparse=False)",
        code="emb = nn.Embedding($vocab, 8, sparse=True)\n"
             "head = nn.Linear(8, $vocab, bias=False)\n"
             "head.weight = emb.weight                      # input and output embeddings shared\n"
             "opt = torch.optim.SparseAdam(emb.parameters(), lr=0.01)\n"
             "head(emb(torch.tensor([[1, 2, 3]]))).sum().backward()\n"
             "opt.step()",
        fix="emb = nn.Embedding($vocab, 8, sparse=True)\n"
            "head = nn.Linear(8, $vocab, bias=False)\n"
            "head.weight = emb.weight\n"
            "opt = torch.optim.Adam(emb.parameters(), lr=0.01)   # the shared weight's gradient is dense\n"
            "head(emb(torch.tensor([[1, 2, 3]]))).sum().backward()\n"
            "opt.step()\n"
            "shown = emb.weight.grad.is_sparse",
        cause="SparseAdam takes sparse gradients only. An Embedding(sparse=True) gives one, until something else "
              "adds a dense gradient into the same weight: an output layer tied to it reaches every row. Use Adam "
              "(every row gets a gradient anyway), or keep the sparse embedding unshared.",
        expect="RuntimeError",
        params=({"vocab": 10}, {"vocab": 1000}),
        sources=("https://github.com/OpenNMT/OpenNMT-py/issues/1015",),
    ),
)
