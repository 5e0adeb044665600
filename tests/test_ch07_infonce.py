"""Chapter 7's contrastive cells: NT-Xent and SupCon against per-anchor loops written from their definitions."""
import math

import pytest
import torch
from torch.nn import functional as F

from course_utils.chapters import ch07_infonce as m


def loop_terms(views, positives_of, t=m.TEMPERATURE):
    """Per anchor i: mean over its positives p of -log(exp(s_ip) / sum over a != i of exp(s_ia))."""
    z = F.normalize(views, dim=1)
    total = 0.0
    for i in range(len(z)):
        others = [a for a in range(len(z)) if a != i]
        denominator = sum(math.exp(float(z[i] @ z[a]) / t) for a in others)
        terms = [-math.log(math.exp(float(z[i] @ z[p]) / t) / denominator) for p in positives_of(i)]
        total += sum(terms) / len(terms)
    return total / len(z)


@pytest.mark.parametrize("n", [2, 5])
def test_nt_xent_is_the_per_anchor_loop_with_one_positive_each(n):
    g = torch.Generator().manual_seed(n)
    first, second = torch.randn(n, 6, generator=g), torch.randn(n, 6, generator=g)
    expected = loop_terms(torch.cat([first, second]), lambda i: [(i + n) % (2 * n)])
    assert m.nt_xent(first, second).item() == pytest.approx(expected, rel=1e-5)


def test_supcon_is_the_per_anchor_loop_over_every_same_label_view():
    g = torch.Generator().manual_seed(3)
    views = torch.randn(8, 6, generator=g)
    labels = torch.tensor([0, 0, 1, 2, 0, 0, 1, 2])
    expected = loop_terms(views, lambda i: [p for p in range(8) if p != i and labels[p] == labels[i]])
    assert m.supcon_of(m.similarities(views), labels).item() == pytest.approx(expected, rel=1e-5)


def test_with_one_view_pair_per_label_supcon_is_nt_xent():
    g = torch.Generator().manual_seed(4)
    first, second = torch.randn(4, 6, generator=g), torch.randn(4, 6, generator=g)
    s = m.similarities(torch.cat([first, second]))
    assert m.supcon_of(s, torch.arange(4).repeat(2)).item() == pytest.approx(m.nt_xent_of(s).item(), rel=1e-6)


def test_the_printed_lines_carry_the_measured_conclusions():
    lines = m.denominator_lines()
    assert "7 terms" in lines[0] and lines[1].endswith("True")
    assert "pushes them apart" in lines[2] and "pulls them together" in lines[3]
    batch = m.batch_lines(seeds=range(3))
    assert all("on 3 of 3 seeds" in line for line in batch[:3])
    assert "(within 0.1) on 3 of 3 seeds" in batch[3] and "quarter of its size on 3 of 3" in batch[3]


def test_all_gather_copies_carry_no_graph_and_the_local_slot_restores_this_ranks():
    lines = m.gathered_negatives_lines()
    assert lines[0].endswith("requires grad: False; a loss on it could reach this rank's embeddings: False")
    assert lines[1].endswith("get a gradient: True")
    import torch.distributed as dist
    assert not dist.is_initialized()                        # the group is destroyed again


def test_perfect_pairs_with_orthogonal_negatives_score_the_closed_form_floor():
    for n, t in ((8, 0.5), (16, 0.1), (32, 1.0)):
        z = torch.eye(64, dtype=torch.float64)[:n]               # every negative at cosine exactly 0
        expected = math.log(1 + (2 * n - 2) * math.exp(-1 / t))
        assert abs(m.nt_xent(z, z, t).item() - expected) < 1e-12
    lines = m.floor_lines(sizes=(64,), temperatures=(0.5,))
    assert lines[-1].endswith("1 of 1") and "2.91" in lines[2]
