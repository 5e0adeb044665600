"""The atlas's entries for checkpoint files themselves (chapter 7): a folder that does not exist yet, and a file
holding a state_dict read as if it held the model.
"""
from __future__ import annotations

from course_utils.atlas.entry import Entry, source

ENTRIES = (
    Entry(
        id="save-into-missing-folder", stage="checkpoint", chapter=7,
        title="torch.save into a folder that was never created (runs/exp1/, checkpoints/ on a fresh machine)",
        code=source("""
            model = nn.Linear(4, 2)
            path = tmp / "$folder" / "last.pt"
            torch.save(model.state_dict(), path)
        """),
        fix=source("""
            model = nn.Linear(4, 2)
            path = tmp / "$folder" / "last.pt"
            path.parent.mkdir(parents=True, exist_ok=True)   # the folder first
            torch.save(model.state_dict(), path)
            shown = path.exists()
        """),
        cause="torch.save creates the file, not the folders above it, and refuses before writing anything. Create "
              "them first (Path(...).parent.mkdir(parents=True, exist_ok=True), os.makedirs(..., exist_ok=True)); a "
              "run that starts on a fresh machine, or in a folder named by the date, meets it at its first "
              "checkpoint, often hours in: make the folder when the run starts.",
        expect="RuntimeError",
        params=({"folder": "runs/exp1"}, {"folder": "checkpoints"}),
        sources=("https://github.com/thunlp/KnowledgeablePromptTuning/issues/24",
                 "https://github.com/twjiang/graphSAGE-pytorch/issues/35",
                 "https://github.com/Hurongyao/TIMEADDM/issues/2"),
    ),
    Entry(
        id="state-dict-used-as-model", stage="checkpoint", chapter=7,
        title="torch.load of a file holding a state_dict, used as if it were the model (model = torch.load(path); "
              "model.eval())",
        code=source("""
            torch.save(nn.Linear(4, 2).state_dict(), tmp / "model.pt")   # what was saved: the weights, by name
            model = torch.load(tmp / "model.pt")
            $use
        """),
        fix=source("""
            torch.save(nn.Linear(4, 2).state_dict(), tmp / "model.pt")
            model = nn.Linear(4, 2)                                      # the model, built by code
            model.load_state_dict(torch.load(tmp / "model.pt"))          # then given the weights
            $use
            shown = type(model).__name__
        """),
        cause="A state_dict is an OrderedDict of tensors by parameter name, not a model: it has no eval(), forward "
              "or parameters(). Build the model from its class and load_state_dict() the file into it. (Saving the "
              "whole model with torch.save(model) avoids this only to break on loading elsewhere: torch 2.6's "
              "weights_only default refuses it, and without it the class's module must be importable.)",
        expect="AttributeError",
        params=({"use": "model.eval()"}, {"use": "params = list(model.parameters())"}),
        python_note="Python's own words: identical on 3.11, 3.12 and 3.13 (checked).",
        sources=("https://github.com/alexjfoote/reetoolbox/issues/1",
                 "https://github.com/alankbi/detecto/issues/72",
                 "https://github.com/wusaifei/HWCC_image_classification/issues/2",
                 "https://github.com/fahadshamshad/Clip2Protect/issues/6"),
        wordings=("'dict' object has no attribute 'eval'",),   # a checkpoint dict (Clip2Protect#6)
    ),
)
