"""The atlas's entries for the keys a checkpoint holds (chapter 7): a part asked for that the file does not have, and
a BatchNorm counter the loading model has no place for. Saving and loading themselves are in entries_checkpoint.py."""
from __future__ import annotations

from course_utils.atlas.entry import Entry, source

ENTRIES = (
    Entry(
        id="checkpoint-key-missing", stage="checkpoint", chapter=7,
        title="a checkpoint read by a key it was not saved under (the state_dict saved alone, read as "
              "checkpoint['model_state_dict'])",
        code=source("""
            model = nn.Linear(4, 2)
            torch.save($saved, tmp / "ckpt.pt")
            checkpoint = torch.load(tmp / "ckpt.pt")
            model.load_state_dict(checkpoint["$key"])     # the key another script saved under
        """),
        fix=source("""
            model = nn.Linear(4, 2)
            torch.save($saved, tmp / "ckpt.pt")
            checkpoint = torch.load(tmp / "ckpt.pt")
            shown = sorted(checkpoint)                    # look first: what the file holds
            model.load_state_dict($right)   # what is there: the state_dict itself, or the entry holding it
        """),
        cause="The file holds whatever the saving script put in it: the state_dict itself (its keys are parameter "
              "names, 'weight', 'bias', ...), or a dict under keys of that script's choosing ('model', "
              "'state_dict', 'model_state_dict', 'net'). Print list(checkpoint) and read the key that is there; "
              "a checkpoint from a library (Lightning: 'state_dict' with 'model.' prefixes) has its own layout.",
        expect="KeyError",
        python_note="Python's own words (the key in quotes): identical on 3.11, 3.12 and 3.13 (checked).",
        params=({"saved": "model.state_dict()", "key": "model_state_dict", "right": "checkpoint"},
                {"saved": "{\"model\": model.state_dict(), \"epoch\": 3}", "key": "state_dict",
                 "right": "checkpoint[\"model\"]"}),
        sources=("https://github.com/rrmenon10/ADAPET/issues/15",
                 "https://github.com/LordLiang/GA-Sketching/issues/6",
                 "https://github.com/jfzhang95/pytorch-video-recognition/issues/10",
                 "https://github.com/mit-han-lab/temporal-shift-module/issues/81"),
    ),
    Entry(
        id="state-dict-num-batches-tracked", stage="checkpoint", chapter=7,
        title="a BatchNorm checkpoint loaded into a model whose norm layers keep no num_batches_tracked (a "
              "FrozenBatchNorm2d backbone, or a model written for torch older than 0.4.1)",
        code="class FrozenBatchNorm2d(nn.Module):                 # detectron2's and torchvision's, in short\n"
             "    def __init__(self, n):\n"
             "        super().__init__()\n"
             "        for name in ('weight', 'bias', 'running_mean', 'running_var'):\n"
             "            self.register_buffer(name, torch.ones(n))\n"
             "\n"
             "trained = nn.Sequential(nn.Conv2d(3, $c, 3), nn.BatchNorm2d($c))\n"
             "frozen = nn.Sequential(nn.Conv2d(3, $c, 3), FrozenBatchNorm2d($c))\n"
             "frozen.load_state_dict(trained.state_dict())",
        fix="class FrozenBatchNorm2d(nn.Module):\n"
            "    def __init__(self, n):\n"
            "        super().__init__()\n"
            "        for name in ('weight', 'bias', 'running_mean', 'running_var'):\n"
            "            self.register_buffer(name, torch.ones(n))\n"
            "\n"
            "trained = nn.Sequential(nn.Conv2d(3, $c, 3), nn.BatchNorm2d($c))\n"
            "frozen = nn.Sequential(nn.Conv2d(3, $c, 3), FrozenBatchNorm2d($c))\n"
            "state = {k: v for k, v in trained.state_dict().items() if not k.endswith('num_batches_tracked')}\n"
            "frozen.load_state_dict(state)\n"
            "shown = sorted(state)[-1]",
        fix_line="state = {k: v for k, v in trained.state_dict().items() if not k.endswith('num_batches_tracked')}",
        cause="Since torch 0.4.1 every BatchNorm saves a num_batches_tracked counter with its running statistics. A "
              "layer that keeps the statistics but not the counter (a frozen BatchNorm in a detection backbone, or a "
              "module written for older torch) has no place for it, and a strict load names every such key. The "
              "counter matters only to BatchNorm(momentum=None): drop those keys and load the rest.",
        expect="RuntimeError",
        params=({"c": 4}, {"c": 8}),
        sources=("https://github.com/pytorch/pytorch/issues/12528", "https://github.com/mattpoggi/guided-stereo/issues/2",
                 "https://github.com/Res2Net/Res2Net-PretrainedModels/issues/5",
                 "https://github.com/pytorch/vision/pull/1815"),
    ),
)
