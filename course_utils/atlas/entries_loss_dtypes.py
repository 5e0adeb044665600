"""The atlas's entries for what reaches the loss in another dtype than the one it computes in (chapter 3): a batch
whose dtype is not the weights' (a float64 numpy array, a model cast to half), targets from numpy that BCELoss
refuses, and the loss's size_average/reduce flags from older torch. Kept apart from entries_losses.py (targets of
the wrong shape or range, integers where scores belong) so that each file holds one concern; the atlas keeps them in
this order, right after that file's."""
from __future__ import annotations

from course_utils.atlas.entry import Entry

ENTRIES = (
    Entry(
        id="input-dtype-differs-from-weights", stage="step", chapter=3,
        title="a batch whose dtype differs from the weights' (a float64 numpy array, a model cast to half or "
              "bfloat16)",
        code="rng = np.random.default_rng(0)\n"
             "model = $layer$cast\n"
             "x = torch.from_numpy(rng.random($shape)$astype)   # numpy's default dtype is float64\n"
             "out = model(x)",
        fix="rng = np.random.default_rng(0)\n"
            "model = $layer$cast\n"
            "x = torch.from_numpy(rng.random($shape)$astype)\n"
            "out = model(x.to(model.weight.dtype))              # the batch in the weights' dtype\n"
            "shown = str(out.dtype)",
        cause="A matrix product or a convolution needs its input and its weights in one dtype, and nothing casts "
              "outside autocast: numpy arrays and pandas columns are float64 (torch.from_numpy keeps it) while "
              "weights are float32, and a model cast with .half() or .to(torch.bfloat16) meets a float32 batch. "
              "Cast the batch with .float() or .to(model.weight.dtype), or keep float32 weights and use "
              "torch.autocast. (Where the two types name different devices, cuda and cpu, the devices differ.)",
        expect="RuntimeError",
        params=({"layer": "nn.Linear(3, 2)", "shape": "(4, 3)", "cast": "", "astype": ""},
                {"layer": "nn.Linear(20, 2)", "shape": "(16, 20)", "cast": ".to(torch.bfloat16)",
                 "astype": ".astype(np.float32)"},
                {"layer": "nn.Conv2d(1, 4, 3)", "shape": "(2, 1, 8, 8)", "cast": "", "astype": ""},
                {"layer": "nn.Conv2d(1, 4, 3, bias=False)", "shape": "(2, 1, 8, 8)", "cast": ".half()",
                 "astype": ".astype(np.float32)"}),
        sources=("https://github.com/theislab/scarches/issues/246",
                 "https://github.com/xianglin226/scMDC/issues/8",
                 "https://github.com/Lakonik/ComfyUI-piFlow/issues/18",
                 "https://github.com/pytorch/pytorch/issues/11951",
                 "https://github.com/OUCMachineLearning/OUCML/issues/24",
                 "https://github.com/LeapLabTHU/ACmix/issues/15",
                 "https://github.com/Yu-Fangxu/COLD-Attack/issues/20"),
        wordings=("Expected object of scalar type Double but got scalar type Float for argument #2 'mat2'",
                  "expected scalar type Double but found Float",
                  "Input type (torch.cuda.FloatTensor) and weight type (torch.cuda.HalfTensor) should be the same",
                  "Input type (torch.cuda.HalfTensor) and weight type (torch.cuda.FloatTensor) should be the same"),
    ),
    Entry(
        id="bce-target-dtype-found-expected-float", stage="step", chapter=3,
        title="BCELoss got float64 (or int64) targets from numpy",
        code="torch.manual_seed(0)\n"
             "probs = torch.sigmoid(nn.Linear(4, 1)(torch.randn(6, 4)))\n"
             "targets = torch.from_numpy(np.array([0, 1, 1, 0, 1, 0], dtype=np.$dtype)).view(-1, 1)\n"
             "loss = nn.BCELoss()(probs, targets)",
        fix="torch.manual_seed(0)\n"
            "probs = torch.sigmoid(nn.Linear(4, 1)(torch.randn(6, 4)))\n"
            "targets = torch.from_numpy(np.array([0, 1, 1, 0, 1, 0], dtype=np.$dtype)).view(-1, 1).float()\n"
            "loss = nn.BCELoss()(probs, targets)\n"
            "shown = str(targets.dtype)",
        cause="The target's dtype must match the input's (float32), but targets built from numpy arrive as "
              "float64 or int64 (or a model made .double() for numpy inputs meets float32 targets); some losses "
              "raise it in the forward, others (MSELoss in older torch) only in backward(). Convert the targets "
              "with .float() and keep the model in float32.",
        expect="RuntimeError",
        params=({"dtype": "float64"}, {"dtype": "int64"}),
        sources=("https://github.com/huggingface/sentence-transformers/issues/770",
                 "https://github.com/pytorch/pytorch/issues/45373",
                 "https://github.com/pytorch/pytorch/issues/2138",
                 "https://github.com/pytorch/pytorch/issues/36553"),
        wordings=("expected dtype Double but got dtype Float",),   # torch 1.4's MSELoss backward (pytorch#36553)
    ),
    Entry(
        id="loss-size-average-deprecated", stage="step", chapter=3,
        title="a loss built with the old size_average= / reduce= arguments",
        code="loss_fn = nn.$cls(size_average=$avg)          # from a pre-0.4 tutorial",
        fix="loss_fn = nn.$cls(reduction=\"$reduction\")   # the one argument that replaced both\n"
            "shown = loss_fn.reduction",
        cause="size_average and reduce were replaced by reduction= in torch 0.4 and still work through a "
              "translation that warns each time a loss is built. reduction=\"mean\" is the old default, "
              "size_average=False is reduction=\"sum\", reduce=False is reduction=\"none\".",
        expect="UserWarning",
        params=({"cls": "MSELoss", "avg": "False", "reduction": "sum"},
                {"cls": "CrossEntropyLoss", "avg": "True", "reduction": "mean"}),
        sources=("https://github.com/facebookresearch/UnsupervisedMT/issues/21",
                 "https://github.com/jessicayung/blog-code-snippets/issues/5",
                 "https://github.com/neptune-ai/open-solution-mapping-challenge/issues/184",
                 "https://github.com/xuebinqin/DIS/issues/35"),
        wordings=("size_average and reduce args will be deprecated, please use reduction='elementwise_mean' "
                  "instead.",),    # torch 0.4.0, before "mean" was the name
    ),
)
