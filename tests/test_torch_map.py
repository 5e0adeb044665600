"""The mechanism map (issue 43): the file agrees with torch, every "demonstrated" is read from the code today,
and the reader of the code is not vacuous (a mention in a comment or a string, an ignored cell, a cell that
prints nothing: none of them counts)."""
from __future__ import annotations

import copy
import json
import textwrap

import pytest

from course_utils.chapters import torch_map
from course_utils.chapters.torch_map_cells import (Analysis, CourseCode, claim_problems, committed_notebooks,
                                                   nbval_markers)

ITEMS = {i.id: i for i in torch_map.surface()}


@pytest.fixture(scope="module")
def committed():
    return torch_map.load(), Analysis(committed_notebooks()).find(list(ITEMS.values()))


def test_the_file_lists_what_torch_has(committed):
    mapping, _ = committed
    assert torch_map.surface_problems(mapping, list(ITEMS.values())) == [], "run python tools/torch_map.py sync"
    assert mapping["torch"] == torch_map.torch.__version__.split("+")[0]


def test_every_entry_keeps_the_rules(committed):
    mapping, _ = committed
    assert torch_map.entry_problems(mapping) == []
    for e in torch_map.entries(mapping).values():
        if e["status"] == "out_of_scope":
            assert len(e["reason"].split()) >= 5, e        # a reason, not a word


def test_every_demonstrated_claim_is_what_the_code_calls_today(committed):
    mapping, found = committed
    # a rebuilt notebook renumbers its cells: `python tools/torch_map.py sync` rewrites the places
    assert claim_problems(mapping, found) == [], "run python tools/torch_map.py sync"
    statuses = [e["status"] for e in torch_map.entries(mapping).values()]
    assert statuses.count("demonstrated") >= 0.9 * len(statuses)      # issue 43's goal


def test_the_map_spans_the_issue_s_surface():
    for wanted in ("torch.utils.data.DataLoader(persistent_workers)", "torch.optim.lr_scheduler.OneCycleLR",
                   "torch.nn.CrossEntropyLoss(label_smoothing)", "torch.nn.BCEWithLogitsLoss(pos_weight)",
                   "torch.optim.*(foreach)", "torch.optim.*(capturable)", "torch.amp.GradScaler.unscale_",
                   "torch.nn.Module.load_state_dict(assign)", "torch.nn.Module.register_buffer(persistent)",
                   "torch.Tensor.backward(retain_graph)", "torch.load(weights_only)", "torch.load(map_location)",
                   "torch.nn.parallel.DistributedDataParallel.no_sync", "torch.utils.data.DistributedSampler(seed)",
                   "torch.nn.SyncBatchNorm.convert_sync_batchnorm", "torch.distributed.all_gather_object",
                   "torch.distributed.ReduceOp", "torch.backends.cudnn.benchmark", "torch.utils.data.random_split",
                   "torch.nn.utils.rnn.pad_sequence(padding_value)", "torch.optim.swa_utils.AveragedModel",
                   "torch.nn.utils.clip_grad_value_", "torch.inference_mode", "torch.optim.*(params=[{...}])"):
        assert wanted in ITEMS, wanted
    assert not any("DataPipe" in i for i in ITEMS)          # torchdata's pipes are not the loop's surface


def test_sync_keeps_reasons_and_check_sees_a_changed_surface():
    items = list(ITEMS.values())
    previous = {"torch": "x", "groups": {"torch.optim": [
        {"id": "torch.optim.*(capturable)", "status": "out_of_scope", "reason": "only CUDA graphs need it"},
        {"id": "torch.optim.SGD", "status": "out_of_scope", "reason": "stale: the code calls it now"}]}}
    rebuilt = torch_map.build(items, {"torch.optim.SGD": [{"notebook": "n.ipynb", "cell": "c"}]}, previous)
    got = torch_map.entries(rebuilt)
    assert got["torch.optim.*(capturable)"]["reason"] == "only CUDA graphs need it"
    assert got["torch.optim.SGD"]["status"] == "demonstrated"
    assert got["torch.optim.Adam"]["status"] == "not_yet"
    assert torch_map.surface_problems(rebuilt, items) == []
    fewer = copy.deepcopy(rebuilt)
    fewer["groups"]["torch.optim"] = [e for e in fewer["groups"]["torch.optim"] if e["id"] != "torch.optim.SGD"]
    fewer["groups"]["torch.optim"].append({"id": "torch.optim.NoSuchOptimizer", "status": "not_yet"})
    assert len(torch_map.surface_problems(fewer, items)) == 2


def test_the_nbval_tables_are_nbval_s():
    comments, tags = nbval_markers()
    assert comments["NBVAL_IGNORE_OUTPUT"] == ("check", False) and comments["NBVAL_SKIP"] == "skip"
    assert tags["nbval-ignore-output"] == ("check", False) and tags["raises-exception"] == "check_exception"


# ---- the analyser on synthetic notebooks and a synthetic course ----------------------------------------


def notebook(*cells: tuple[str, list[str], bool]) -> dict:
    """An nbformat dict: (source, tags, prints) per code cell; a printing cell has one stdout line."""
    return {"cells": [{"cell_type": "code", "id": f"c{n}", "source": textwrap.dedent(src),
                       "metadata": {"tags": tags} if tags else {},
                       "outputs": [{"output_type": "stream", "name": "stdout", "text": "1.5\n"}] if prints else []}
                      for n, (src, tags, prints) in enumerate(cells)]}


def found(nb: dict, *ids: str, course: CourseCode | None = None, depth: int = 4) -> dict[str, list[str]]:
    hits = Analysis({"t.ipynb": nb}, course, depth).find([ITEMS[i] for i in ids])
    return {i: [p["cell"] + (f" via {p['via']}" if "via" in p else "") for p in places] for i, places in hits.items()}


CLIP = "torch.nn.utils.clip_grad_norm_"
SETUP = ("import torch\nfrom torch import nn\nfrom torch.utils.data import DataLoader, TensorDataset\n"
         "model = nn.Linear(2, 1)\n", [], False)


def test_a_mention_in_a_comment_or_a_string_is_not_a_call():
    nb = notebook(SETUP,
                  ("# torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\nprint(1.5)", [], True),
                  ('text = "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)"\nprint(text)', [], True),
                  ('"""clip_grad_norm_(model.parameters(), max_norm=1.0, foreach=True)"""\nprint(1.5)', [], True))
    assert found(nb, CLIP, f"{CLIP}(foreach)") == {}


def test_a_call_counts_in_a_compared_printing_cell_only():
    call = "total = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)\nprint(total)"
    nb = notebook(SETUP, (call, [], True), (call, ["nbval-ignore-output"], True), (call, ["nbval-skip"], True),
                  (call, ["raises-exception"], True), ("# NBVAL_IGNORE_OUTPUT\n" + call, [], True), (call, [], False))
    assert found(nb, CLIP, f"{CLIP}(foreach)", f"{CLIP}(error_if_nonfinite)") == {CLIP: ["c1"],
                                                                                   f"{CLIP}(foreach)": ["c1"]}


def test_a_figure_repr_alone_is_not_printing():
    nb = notebook(SETUP, ("torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)", [], False))
    nb["cells"][1]["outputs"] = [{"output_type": "execute_result",
                                  "data": {"text/plain": "<Figure size 640x480 with 1 Axes>"}}]
    assert found(nb, CLIP) == {}


def test_imports_aliases_positions_and_type_tests():
    nb = notebook(SETUP,
                  ("from torch.nn.utils import clip_grad_norm_ as clip\nprint(clip(model.parameters(), 1))", [], True),
                  ("loader = DataLoader(TensorDataset(torch.zeros(4, 2)), 2, True)\nprint(len(loader))", [], True),
                  ("print(isinstance(model, torch.optim.lr_scheduler.OneCycleLR))", [], True),
                  ("choices = {'nothing': torch.no_grad, 'inference': torch.inference_mode}\nprint(len(choices))",
                   [], True),
                  ("with torch.autocast('cpu', dtype=torch.bfloat16):\n    print(model(torch.zeros(1, 2)))", [], True))
    assert found(nb, CLIP, "torch.utils.data.DataLoader(batch_size)", "torch.utils.data.DataLoader(shuffle)",
                 "torch.utils.data.DataLoader(sampler)", "torch.optim.lr_scheduler.OneCycleLR", "torch.inference_mode",
                 "torch.amp.autocast(dtype)") == {
        CLIP: ["c1"], "torch.utils.data.DataLoader(batch_size)": ["c2"], "torch.utils.data.DataLoader(shuffle)": ["c2"],
        "torch.inference_mode": ["c4"], "torch.amp.autocast(dtype)": ["c5"]}


def test_method_items_need_an_instance_of_their_class_in_the_code():
    update = "torch.amp.GradScaler.update(new_scale)"
    nb = notebook(SETUP, ("counts = {}\ncounts.update(new_scale=2.0)\nprint(counts)", [], True),
                  ("scaler = torch.amp.GradScaler('cpu')\nscaler.update(new_scale=2.0)\nprint(scaler.get_scale())",
                   [], True),
                  ("sd = model.state_dict()\nprint(model.load_state_dict(sd, strict=False))", [], True))
    assert found(nb, update, "torch.nn.Module.load_state_dict(strict)", "torch.nn.Module.load_state_dict(assign)") == {
        update: ["c2"], "torch.nn.Module.load_state_dict(strict)": ["c3"]}


def test_calls_are_followed_into_the_course_code_and_earlier_cells(tmp_path):
    package = tmp_path / "course_utils"
    (package / "engine").mkdir(parents=True)
    (package / "__init__.py").write_text("from course_utils.engine.steps import train_step\n")
    (package / "engine" / "__init__.py").write_text("")
    (package / "engine" / "steps.py").write_text(textwrap.dedent("""
        import torch
        from . import clipping

        def train_step(model):
            return clipping.clip(model)

        def unused(model):
            torch.optim.lr_scheduler.OneCycleLR(torch.optim.SGD(model.parameters()), 1.0, total_steps=3)
        """))
    (package / "engine" / "clipping.py").write_text(textwrap.dedent("""
        from torch.nn.utils import clip_grad_norm_

        def clip(model):
            '''Not torch.nn.utils.clip_grad_value_(model.parameters(), 1.0).'''
            return clip_grad_norm_(model.parameters(), max_norm=1.0, error_if_nonfinite=True)
        """))
    defines = ("from course_utils import train_step\n\ndef mine():\n    return train_step(model)", [], False)
    nb = notebook(SETUP, defines, ("print(mine())", [], True), ("print(train_step)", [], True))
    ids = (CLIP, f"{CLIP}(error_if_nonfinite)", "torch.nn.utils.clip_grad_value_",
           "torch.optim.lr_scheduler.OneCycleLR")
    assert found(nb, *ids, course=CourseCode(tmp_path)) == {
        CLIP: ["c2 via course_utils.engine.clipping.clip", "c3 via course_utils.engine.clipping.clip"],
        f"{CLIP}(error_if_nonfinite)": ["c2 via course_utils.engine.clipping.clip",
                                        "c3 via course_utils.engine.clipping.clip"]}
    shallow = found(nb, *ids, course=CourseCode(tmp_path), depth=2)      # c2: mine -> train_step -> clip, 3 deep
    assert shallow == {CLIP: ["c3 via course_utils.engine.clipping.clip"],
                       f"{CLIP}(error_if_nonfinite)": ["c3 via course_utils.engine.clipping.clip"]}


def test_the_committed_file_is_valid_json_with_known_statuses():
    mapping = json.loads(torch_map.DATA.read_text(encoding="utf-8"))
    assert set(mapping) == {"torch", "groups"}
    assert {e["status"] for rows in mapping["groups"].values() for e in rows} <= set(torch_map.STATUSES)
