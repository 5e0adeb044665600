"""The atlas's entries for what an optimizer is given and what may require a gradient (chapter 3): the parameters
method instead of its result, a parameter in two groups, an integer tensor asked for a gradient.
"""
from __future__ import annotations

from course_utils.atlas.entry import Entry

ENTRIES = (
    Entry(
        id="optimizer-given-the-method", stage="step", chapter=3,
        title="an optimizer given one tensor instead of an iterable of tensors (or model.parameters without its "
              "parentheses)",
        code="torch.manual_seed(0)\n"
             "model = nn.Linear(4, 2)\n"
             "optimizer = torch.optim.$opt($given, lr=0.01)   # not the parameters themselves",
        fix="torch.manual_seed(0)\n"
            "model = nn.Linear(4, 2)\n"
            "optimizer = torch.optim.$opt(model.parameters(), lr=0.01)   # an iterable of tensors (or [one])\n"
            "shown = sum(p.numel() for group in optimizer.param_groups for p in group[\"params\"])",
        cause="An optimizer takes an iterable of tensors (or of dicts, one per parameter group): a list of them, or "
              "model.parameters() called. One tensor on its own is refused with torch's own words; anything else "
              "that is not iterable (the method model.parameters uncalled, the module itself, None from a function "
              "that forgot to return) fails in Python's words, naming the object ('method', 'Linear', "
              "'NoneType'). Wrap a single tensor in a list: [w].",
        expect="TypeError",
        params=({"opt": "SGD", "given": "model.weight"}, {"opt": "Adam", "given": "model.double().bias"}),
        sources=("https://github.com/KaiyangZhou/Dassl.pytorch/issues/67",
                 "https://github.com/drumpt/SGEM/issues/1"),
    ),
    Entry(
        id="parameter-in-two-groups", stage="step", chapter=3,
        title="parameter groups that overlap: the new head with its own learning rate, and all of the model's "
              "parameters again for the rest",
        code="torch.manual_seed(0)\n"
             "model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, $classes))   # backbone, then head\n"
             "head = model[-1]\n"
             "optimizer = torch.optim.$opt([{\"params\": model.parameters(), \"lr\": 1e-4},\n"
             "                              {\"params\": head.parameters(), \"lr\": 1e-2}])",
        fix="torch.manual_seed(0)\n"
            "model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, $classes))\n"
            "head = model[-1]\n"
            "mine = {id(p) for p in head.parameters()}\n"
            "rest = [p for p in model.parameters() if id(p) not in mine]   # every parameter in one group only\n"
            "optimizer = torch.optim.$opt([{\"params\": rest, \"lr\": 1e-4},\n"
            "                              {\"params\": head.parameters(), \"lr\": 1e-2}])\n"
            "shown = [len(group[\"params\"]) for group in optimizer.param_groups]",
        cause="Each parameter may belong to one group only, since a group decides its learning rate and weight "
              "decay; model.parameters() already holds the head's parameters. Build the groups from disjoint sets: "
              "the head's parameters, and the others (filter by identity or by name with named_parameters()).",
        expect="ValueError",
        params=({"classes": 3, "opt": "SGD"}, {"classes": 10, "opt": "AdamW"}),
        sources=("https://github.com/TreB1eN/InsightFace_Pytorch/issues/169",
                 "https://github.com/fastai/fastai/issues/32",
                 "https://github.com/zkyseu/O2SFormer/issues/16"),
    ),
    Entry(
        id="requires-grad-on-integers", stage="step", chapter=3,
        title="requires_grad asked of an integer tensor (torch.tensor([1, 2, 3], requires_grad=True), token ids, "
              "labels)",
        code="$code",
        fix="$fixed\n"
            "shown = str(values.dtype)",
        cause="A gradient is a rate of change, defined only for floating point (and complex) tensors; a tensor "
              "made from Python integers, token ids or labels is int64. Make it float (dtype=torch.float32, "
              ".float()) if it is a quantity you differentiate; ids and labels never need a gradient (the "
              "embedding's weights do).",
        expect="RuntimeError",
        params=({"code": "values = torch.tensor([1, 2, 3], requires_grad=True)   # integers: int64",
                 "fixed": "values = torch.tensor([1, 2, 3], dtype=torch.float32, requires_grad=True)"},
                {"code": "values = torch.arange(6).view(2, 3)   # integers: int64\nvalues.requires_grad_()",
                 "fixed": "values = torch.arange(6.0).view(2, 3)   # a float start: float32\nvalues.requires_grad_()"}),
        sources=("https://github.com/pytorch/pytorch/issues/53466",
                 "https://github.com/pytorch/pytorch/issues/95110",
                 "https://github.com/jiasenlu/NeuralBabyTalk/issues/26"),
    ),
)
