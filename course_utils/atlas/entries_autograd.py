"""The atlas's entries for what a learner adds to autograd (chapter 3): a custom torch.autograd.Function's backward,
and a gradient hook on a tensor."""
from __future__ import annotations

from course_utils.atlas.entry import Entry

ENTRIES = (
    Entry(
        id="function-gradient-count", stage="step", chapter=3,
        title="a custom autograd.Function whose backward returns fewer gradients than forward takes inputs",
        code="class SignSTE(torch.autograd.Function):     # sign() forward, straight-through backward\n"
             "    @staticmethod\n"
             "    def forward(ctx, x, $extra):\n"
             "        return x.sign()\n"
             "\n"
             "    @staticmethod\n"
             "    def backward(ctx, grad_output):\n"
             "        return grad_output                    # one gradient for $count inputs\n"
             "\n"
             "x = torch.randn(4, requires_grad=True)\n"
             "SignSTE.apply(x, $given).sum().backward()",
        fix="class SignSTE(torch.autograd.Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x, $extra):\n"
            "        return x.sign()\n"
            "\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        return grad_output$nones   # one per forward input: None for each non-tensor\n"
            "\n"
            "x = torch.randn(4, requires_grad=True)\n"
            "SignSTE.apply(x, $given).sum().backward()\n"
            "shown = x.grad.tolist()",
        fix_line="return grad_output, None   # backward returns one value per forward input; None where no gradient",
        cause="backward must return one value for each argument forward took after ctx, in the same order: the "
              "gradient for a tensor input, None for a flag, a number or a tensor that needs none. torch names the "
              "Function (its class name with Backward) and counts both sides.",
        expect="RuntimeError",
        params=({"extra": "training", "count": "two", "given": "True", "nones": ", None"},
                {"extra": "scale, training", "count": "three", "given": "2.0, True", "nones": ", None, None"}),
        sources=("https://github.com/1zb/pytorch-image-comp-rnn/issues/4",
                 "https://github.com/huawei-noah/AdderNet/issues/21",
                 "https://github.com/evanmy/sae/issues/5",
                 "https://github.com/meta-pytorch/torchrec/pull/4363"),
        wordings=("The backward formula for torchrec.reduce_scatter_tensor.default returned an incorrect number of "
                  "gradients (expected 5, got 6). Expected one gradient for each forward input, or for each "
                  "positional input to the operator. Use None for inputs that do not require a gradient.",),
    ),
    Entry(
        id="hook-on-frozen-tensor", stage="step", chapter=3,
        title="a gradient hook registered on a frozen parameter (or any tensor that does not require grad)",
        code="torch.manual_seed(0)\n"
             "model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))\n"
             "model[$frozen].requires_grad_(False)           # a frozen layer\n"
             "for p in model.parameters():                 # e.g. a pruning mask on every gradient\n"
             "    p.register_hook(lambda grad: grad * (grad.abs() > 1e-3))",
        fix="torch.manual_seed(0)\n"
            "model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))\n"
            "model[$frozen].requires_grad_(False)\n"
            "hooked = 0\n"
            "for p in model.parameters():\n"
            "    if p.requires_grad:                      # a frozen parameter never gets a gradient to hook\n"
            "        p.register_hook(lambda grad: grad * (grad.abs() > 1e-3))\n"
            "        hooked += 1\n"
            "shown = hooked",
        cause="Tensor.register_hook runs on the gradient computed for that tensor, and a tensor that does not "
              "require grad never gets one, so torch refuses the hook at once. It comes from a tool (pruning, "
              "Grad-CAM, a debugger) that hooks every parameter of a model with some layers frozen, or hooks an "
              "output computed under no_grad; register only where requires_grad is True.",
        expect="RuntimeError",
        params=({"frozen": 0}, {"frozen": 2}),
        sources=("https://github.com/neuralmagic/sparseml/issues/1438",
                 "https://github.com/frgfm/torch-cam/issues/217",
                 "https://github.com/aws/sagemaker-pytorch-training-toolkit/issues/197"),
    ),
    Entry(
        id="save-for-backward-non-tensor", stage="step", chapter=3,
        title="a number, tuple or flag passed to ctx.save_for_backward in a custom Function",
        code="class Scale(torch.autograd.Function):\n"
             "    @staticmethod\n"
             "    def forward(ctx, x, factor):\n"
             "        ctx.save_for_backward(x, $saved)             # a non-tensor among the saved values\n"
             "        return x * factor\n"
             "    @staticmethod\n"
             "    def backward(ctx, grad):\n"
             "        return grad * ctx.factor, None\n"
             "x = torch.randn(3, requires_grad=True)\n"
             "Scale.apply(x, 2.0).sum().backward()",
        fix="class Scale(torch.autograd.Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x, factor):\n"
            "        ctx.kept, ctx.factor = $saved, factor        # anything that is not a tensor: an attribute\n"
            "        return x * factor\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        return grad * ctx.factor, None\n"
            "x = torch.randn(3, requires_grad=True)\n"
            "Scale.apply(x, 2.0).sum().backward()\n"
            "shown = x.grad.tolist() == [2.0, 2.0, 2.0]",
        cause="save_for_backward keeps tensors only (and checks them for in-place changes before backward uses "
              "them); torch refuses anything else when the forward returns. Keep a number, a tuple or a flag as "
              "an attribute of ctx instead.",
        expect="TypeError",
        params=({"saved": "factor"}, {"saved": "(factor, factor)"}),
        sources=("https://github.com/HuangJunJie2017/BEVDet/issues/8",
                 "https://github.com/pytorch/pytorch/issues/37751"),
    ),
)
