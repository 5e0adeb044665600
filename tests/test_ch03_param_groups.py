"""Chapter 3's parameter groups: the decay split, torch's refusals, and unfreezing with add_param_group."""
import pytest
import torch
from torch import nn

from course_utils.chapters import ch03_param_groups as m


@pytest.mark.parametrize("model", [m._net(), nn.Sequential(nn.Embedding(5, 3), nn.Linear(3, 3), nn.BatchNorm1d(3)),
                                   nn.TransformerEncoderLayer(8, 2, 16)])
def test_the_split_holds_every_trainable_parameter_once_and_decays_only_matrices(model):
    decayed, plain = m.decay_split(model, 0.1)
    ids = [id(p) for g in (decayed, plain) for p in g["params"]]
    assert sorted(ids) == sorted(id(p) for p in model.parameters()) and len(set(ids)) == len(ids)
    assert all(p.ndim >= 2 for p in decayed["params"]) and all(p.ndim < 2 for p in plain["params"])
    torch.optim.AdamW([decayed, plain])                         # torch accepts it: no parameter twice


def test_decay_on_the_gains_pulls_them_down_against_the_split():
    for seed in (0, 1):
        _, everything = m.decay_run(seed, split=False, steps=100)
        _, split = m.decay_run(seed, split=True, steps=100)
        assert everything < split


def test_without_decay_the_two_ways_are_one_run():
    assert m.decay_run(2, split=False, weight_decay=0.0, steps=20) == m.decay_run(2, split=True, weight_decay=0.0,
                                                                                 steps=20)


def test_the_printed_errors_are_torchs_and_unfreezing_needs_add_param_group():
    lines = m.group_lines(seeds=range(1))
    assert lines[2] == "a parameter in two groups: ValueError: some parameters appear in more than one parameter group"
    assert "hold 8 of 10 parameters" in lines[3]
    unfreeze = m.unfreeze_lines()
    assert unfreeze[0].endswith("a .grad: True; one step moved it: False")
    assert unfreeze[1].endswith("moved it: True")
    assert unfreeze[2].endswith("ValueError: loaded state dict has a different number of parameter groups")
    assert unfreeze[3].endswith("groups 2, the head's momentum kept: True")


def test_load_state_dict_replaces_the_param_groups_list_so_a_kept_reference_is_cut_off():
    lines = m.param_groups_identity_lines()
    assert lines[0].endswith("False") and lines[1].endswith("the optimizer's lr: 0.1")


def test_a_backbone_at_the_heads_rate_forgets_its_pretraining_and_a_frozen_one_keeps_it_exactly():
    run = m.backbone_rate_run(7)
    assert run[0.0][1] == run["task A before"]
    assert run[1.0][1] < run[0.1][1] < run["task A before"]
