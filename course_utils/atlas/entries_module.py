"""The atlas's entries for a module used another way than it is built to be (chapter 3): a loss class given the
tensors instead of its options, a forward that was never defined, a forward given more than it takes; and a name
of torch's that code written for an older torch still calls, removed since.
"""
from __future__ import annotations

from course_utils.atlas.entry import Entry, source


def _net(method: str, note: str, arguments: str = "x", name: str = "$name") -> str:
    """A one-layer module whose forward-like method is `method`, as a fragment shows it."""
    comment = f"            # {note}" if note else ""
    return (f"class {name}(nn.Module):\n"
            f"    def __init__(self):\n"
            f"        super().__init__()\n"
            f"        self.fc = nn.Linear(4, 2)\n\n"
            f"    def {method}(self, {arguments}):{comment}\n"
            f"        return self.fc(x)\n\n")


ENTRIES = (
    Entry(
        id="loss-class-given-tensors", stage="step", chapter=3,
        title="the tensors passed to a loss class's constructor: loss = nn.CrossEntropyLoss(outputs, labels)",
        code="torch.manual_seed(0)\n"
             "outputs, labels = $made\n"
             "loss = nn.$loss(outputs, labels)             # builds a loss module, with the tensors as its options",
        fix="torch.manual_seed(0)\n"
            "outputs, labels = $made\n"
            "criterion = nn.$loss()                        # built once, with its options (weight, reduction, ...)\n"
            "loss = criterion(outputs, labels)             # then called on the tensors\n"
            "shown = loss.dim()",
        cause="nn.CrossEntropyLoss, nn.MSELoss and the other loss classes are built first (their arguments are "
              "options: weight, reduction, and the old size_average and reduce, which is where the tensors land), "
              "then called: nn.CrossEntropyLoss()(outputs, labels), or F.cross_entropy(outputs, labels). Torch "
              "raises the same words wherever a tensor of several values is asked for True or False: `if loss:`, "
              "`and`, `or`, `assert tensor`.",
        expect="RuntimeError",
        params=({"loss": "CrossEntropyLoss", "made": "torch.randn(4, 3), torch.tensor([0, 2, 1, 2])"},
                {"loss": "MSELoss", "made": "torch.randn(8, 1), torch.randn(8, 1)"}),
        sources=("https://github.com/Lightning-AI/pytorch-lightning/issues/501",
                 "https://github.com/imranparuk/speaker-recognition-3d-cnn/issues/2",
                 "https://github.com/nikhilroxtomar/DDANet/issues/1",
                 "https://github.com/kingsman142/captcha-solver/issues/2"),
        wordings=("bool value of Tensor with more than one value is ambiguous",),   # before torch 1.x's rename
    ),
    Entry(
        id="forward-not-defined", stage="step", chapter=3,
        title="a module whose forward is misspelled (foward, Forward) or indented inside __init__",
        code=_net("$method", "not 'forward': nn.Module never calls it") + "out = $name()(torch.randn(3, 4))\n",
        fix=_net("forward", "the name nn.Module.__call__ looks for") + "out = $name()(torch.randn(3, 4))\n"
                                                                       "shown = tuple(out.shape)\n",
        cause="Calling a module runs its method named exactly forward, defined at the class's level. A typo "
              "(foward, Forward, farward) or a def indented one level too deep (inside __init__) leaves the class "
              "with nn.Module's own forward, which raises this.",
        expect="NotImplementedError",
        params=({"name": "Net", "method": "foward"}, {"name": "Classifier", "method": "Forward"}),
        sources=("https://github.com/pytorch/pytorch/issues/74303",
                 "https://github.com/zehanwang01/OmniBind/issues/9",
                 "https://github.com/bigohofone/outfit-transformer/issues/4"),
    ),
    Entry(
        id="forward-given-extra-arguments", stage="step", chapter=3,
        title="a model called with more than its forward takes (model(inputs, labels), model(*batch))",
        code=_net("forward", "", "x$more", name="Net") + "x, y = torch.randn(3, 4), torch.tensor([0, 1, 1])\n"
             "out = Net()($args)                 # the labels passed to the model too\n",
        fix=_net("forward", "", "x$more", name="Net") + "x, y = torch.randn(3, 4), torch.tensor([0, 1, 1])\n"
            "out = Net()($fixed)                 # the model gets the inputs; the loss gets out and y\n"
            "shown = tuple(out.shape)\n",
        cause="Python counts self, so 'takes 2 positional arguments but 3 were given' means forward(self, x) was "
              "called as model(x, y): most often the labels (or a whole batch unpacked with *batch) passed to the "
              "model. Give the model what forward takes and the labels to the loss; a dict batch passed as "
              "model(**batch) fails the same way with 'got an unexpected keyword argument'.",
        expect="TypeError",
        params=({"more": "", "args": "x, y", "fixed": "x"},
                {"more": ", mask=None", "args": "x, None, y", "fixed": "x, None"}),
        python_note="Python's own words: identical on 3.11, 3.12 and 3.13 (checked); 3.9 and older wrote forward() "
                    "without the class.",
        sources=("https://github.com/pytorch/pytorch/issues/19808",
                 "https://github.com/pengzhiliang/MAE-pytorch/issues/36",
                 "https://github.com/ggjy/P2Net.pytorch/issues/3",
                 "https://github.com/pytorch/pytorch/issues/897"),
        wordings=("forward() takes exactly 2 arguments (3 given)",),   # Python 2 (pytorch#897)
    ),
    Entry(
        id="torch-name-removed", stage="step", chapter=3,
        title="code written for an older torch calls a function or class this torch removed or renamed",
        code=source("""
            loader = DataLoader(TensorDataset(torch.arange(4.0)), batch_size=2)
            $old   # what a repository written for torch 1.x calls
        """),
        fix=source("""
            loader = DataLoader(TensorDataset(torch.arange(4.0)), batch_size=2)
            before = torch.are_deterministic_algorithms_enabled()
            try:
                $new   # this torch's name for it
                shown = "$new".split("=")[-1].split("(")[0].strip()
            finally:
                torch.use_deterministic_algorithms(before)
        """),
        cause="torch removes what it deprecated a few versions earlier, and private names (with a leading _) change "
              "without notice: torch.set_deterministic became torch.use_deterministic_algorithms in 1.8; "
              "DataLoader's _DataLoaderIter was split into _SingleProcessDataLoaderIter and "
              "_MultiProcessingDataLoaderIter in 1.2. Install the torch version the code was written for (its "
              "requirements file), or use the current name: the deprecation notes in torch's release notes say "
              "which; iter(loader), not a private iterator class.",
        expect="AttributeError",
        params=({"old": "torch.set_deterministic(True)", "new": "torch.use_deterministic_algorithms(True)"},
                {"old": "iterator = torch.utils.data.dataloader._DataLoaderIter(loader)",
                 "new": "iterator = iter(loader)"}),
        sources=("https://github.com/JedMills/MTFL-For-Personalised-DNNs/issues/4",
                 "https://github.com/pytorch/pytorch/issues/58096",
                 "https://github.com/SHI-Labs/Cross-Scale-Non-Local-Attention/issues/17",
                 "https://github.com/CSAILVision/semantic-segmentation-pytorch/issues/219",
                 "https://github.com/msamogh/nonechucks/issues/16"),
        wordings=("cannot import name '_DataLoaderIter' from 'torch.utils.data.dataloader'",),   # (CSAILVision#219)
        python_note="Python's own words for a missing attribute ('module ... has no attribute ...'), the same in "
                    "3.11-3.13.",
    ),
)
