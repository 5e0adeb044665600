"""The atlas's entries for resuming the optimizer and the scheduler from a checkpoint (chapter 7): whose state is
loaded, its parameter groups, its device."""
from __future__ import annotations

from course_utils.atlas.entry import Entry

ENTRIES = (
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
        id="optimizer-load-other-class", stage="checkpoint", chapter=7,
        title="resumed with another optimizer class than the one whose state was saved (SGD's into Adam, ...)",
        code=(
            "model = nn.Linear(4, 2)\n"
            "saved = $saved\n"
            "model(torch.randn(8, 4)).sum().backward()\n"
            "saved.step()\n"
            "torch.save(saved.state_dict(), tmp / \"opt.pt\")\n"
            "optimizer = $now            # the optimizer was changed, the checkpoint was not\n"
            "optimizer.load_state_dict(torch.load(tmp / \"opt.pt\"))\n"
            "model(torch.randn(8, 4)).sum().backward()\n"
            "optimizer.step()\n"
        ),
        fix=(
            "model = nn.Linear(4, 2)\n"
            "saved = $saved\n"
            "model(torch.randn(8, 4)).sum().backward()\n"
            "saved.step()\n"
            "torch.save(saved.state_dict(), tmp / \"opt.pt\")\n"
            "optimizer = $now            # a new optimizer class starts from its own fresh state\n"
            "model(torch.randn(8, 4)).sum().backward()\n"
            "optimizer.step()\n"
            "shown = type(optimizer).__name__\n"
        ),
        cause="An optimizer's state_dict holds its own class's per-parameter state (Adam's step, exp_avg and "
              "exp_avg_sq, SGD's momentum_buffer, RMSprop's square_avg) and its hyperparameters (betas, momentum, "
              "...); load_state_dict copies them in without checking the class, and the first read of a key the "
              "other class never wrote raises KeyError, at loading or at the next step. Resume with the class "
              "that was saved, or load only the model's weights and let the new optimizer start fresh. (A KeyError "
              "raised in your own code or a library's, such as checkpoint['step'], is that checkpoint dict "
              "missing its key instead.)",
        expect="KeyError",
        params=(
            {"saved": "torch.optim.SGD(model.parameters(), lr=0.1)",
             "now": "torch.optim.AdamW(model.parameters(), lr=0.001)"},
            {"saved": "torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)",
             "now": "torch.optim.Adam(model.parameters(), lr=0.001)"},
            {"saved": "torch.optim.Adam(model.parameters(), lr=0.001)",
             "now": "torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)"},
            {"saved": "torch.optim.Adam(model.parameters(), lr=0.001)",
             "now": "torch.optim.RMSprop(model.parameters(), lr=0.001)"},
        ),
        sources=(
            "https://github.com/ultralytics/yolov3/issues/80",
            "https://github.com/harryhan618/SCNN_Pytorch/issues/34",
            "https://github.com/pytorch/torchtitan/issues/848",
            "https://github.com/pytorch/pytorch/issues/23070",
        ),
    ),
    Entry(
        id="optimizer-load-wrong-dict", stage="checkpoint", chapter=7,
        title="gave optimizer.load_state_dict a dict that is not an optimizer's state (the model's, the scheduler's, "
              "or the whole checkpoint)",
        code=(
            "model = nn.Linear(4, 2)\n"
            "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10)\n"
            "torch.save({\"model\": model.state_dict(), \"optimizer\": optimizer.state_dict(),\n"
            "            \"scheduler\": scheduler.state_dict()}, tmp / \"ckpt.pt\")\n"
            "checkpoint = torch.load(tmp / \"ckpt.pt\")\n"
            "optimizer.load_state_dict($given)\n"
        ),
        fix=(
            "model = nn.Linear(4, 2)\n"
            "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10)\n"
            "torch.save({\"model\": model.state_dict(), \"optimizer\": optimizer.state_dict(),\n"
            "            \"scheduler\": scheduler.state_dict()}, tmp / \"ckpt.pt\")\n"
            "checkpoint = torch.load(tmp / \"ckpt.pt\")\n"
            "optimizer.load_state_dict(checkpoint[\"optimizer\"])   # an optimizer's own state: 'state', 'param_groups'\n"
            "shown = sorted(checkpoint[\"optimizer\"])\n"
        ),
        cause="An optimizer's state_dict has exactly two keys, 'state' and 'param_groups'; what was passed has "
              "neither: the model's weights, the scheduler's state (saved under the optimizer's name, or the two "
              "swapped), or the whole checkpoint dict. Print the keys of what you load and pass the optimizer's "
              "own entry.",
        expect="KeyError",
        params=({"given": "checkpoint[\"scheduler\"]"}, {"given": "checkpoint[\"model\"]"}, {"given": "checkpoint"}),
        sources=(
            "https://github.com/bl0/moco/issues/8",
            "https://github.com/ruotianluo/self-critical.pytorch/issues/232",
        ),
    ),
    Entry(
        id="scheduler-last-epoch-without-initial-lr", stage="checkpoint", chapter=7,
        title="resumed a scheduler by building it with last_epoch=N on an optimizer that never had a scheduler",
        code=(
            "model = nn.Linear(4, 2)\n"
            "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "start_epoch = $epoch                     # read from the checkpoint\n"
            "scheduler = torch.optim.lr_scheduler.$sched(optimizer, $args, last_epoch=start_epoch - 1)\n"
        ),
        fix=(
            "model = nn.Linear(4, 2)\n"
            "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "saved = torch.optim.lr_scheduler.$sched(optimizer, $args)   # the run that saved: $epoch epochs\n"
            "for _ in range($epoch):\n"
            "    optimizer.step()\n"
            "    saved.step()\n"
            "torch.save({\"optimizer\": optimizer.state_dict(), \"scheduler\": saved.state_dict()}, tmp / \"ckpt.pt\")\n"
            "checkpoint = torch.load(tmp / \"ckpt.pt\")\n"
            "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "optimizer.load_state_dict(checkpoint[\"optimizer\"])\n"
            "scheduler = torch.optim.lr_scheduler.$sched(optimizer, $args)\n"
            "scheduler.load_state_dict(checkpoint[\"scheduler\"])   # resume by its state, not last_epoch=\n"
            "shown = (scheduler.last_epoch, scheduler.get_last_lr() == saved.get_last_lr())\n"
        ),
        cause="A scheduler built with last_epoch >= 0 expects to resume: it reads each group's 'initial_lr', which "
              "only a scheduler writes into the optimizer (so a freshly built optimizer, or one whose state was not "
              "loaded, has none). Build the scheduler as for a new run, then load its state_dict from the "
              "checkpoint (with the optimizer's loaded first).",
        expect="KeyError",
        params=({"sched": "StepLR", "args": "step_size=3", "epoch": "5"},
                {"sched": "CosineAnnealingLR", "args": "T_max=20", "epoch": "12"}),
        sources=(
            "https://github.com/XiaohangZhan/deocclusion/issues/43",
            "https://github.com/stefanopini/simple-HRNet/issues/33",
            "https://github.com/akamaster/pytorch_resnet_cifar10/pull/14",
            "https://github.com/real-stanford/universal_manipulation_interface/issues/70",
        ),
        wordings=("KeyError: \"param 'initial_lr' is not specified in param_groups[0] when resuming an optimizer\"",),
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
)
