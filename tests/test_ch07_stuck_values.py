"""The stuck-value table: a row for every loss torch.nn exports, each torch value equal to its closed form."""
import math

import torch
from torch import nn
from torch.nn.modules.loss import _Loss

from course_utils.chapters import ch07_stuck_values as sv


def test_every_loss_torch_exports_has_a_row():
    exported = {name for name in dir(nn) if isinstance(getattr(nn, name), type)
                and issubclass(getattr(nn, name), _Loss) and not name.startswith("_")}
    covered = set()
    for row in sv.stuck_rows():
        covered.add(row.loss.split(" ")[0].rstrip(","))
        covered.update(name for name in exported if f"({name}" in row.loss or f"and {name}" in row.loss)
    assert exported <= covered, exported - covered


def test_each_value_is_its_closed_form():
    rows = sv.stuck_rows()
    assert all(abs(row.value - row.closed) < 1e-4 for row in rows), [r.loss for r in rows
                                                                       if abs(r.value - r.closed) >= 1e-4]
    assert all("(True)" in line for line in sv.stuck_lines()[1:-1])
    assert sv.sequential_head_check() == (True, True)


def test_the_ctc_path_count_against_brute_force():
    from itertools import product

    def collapse(path):
        out, previous = [], None
        for s in path:
            if s != previous and s != 0:
                out.append(s)
            previous = s
        return out

    for frames in (3, 4, 5):
        brute = sum(collapse(p) == [1, 2] for p in product(range(3), repeat=frames))
        assert sv._ctc_paths(2, frames) == brute


def test_the_reference_targets_are_what_the_rows_say():
    y = sv._standardised()
    assert abs(y.double().mean().item()) < 1e-6 and abs(y.double().var(unbiased=False).item() - 1) < 1e-5
    labels = sv._labels()
    assert torch.bincount(labels).tolist() == [round(f * sv.N) for f in sv.FREQUENCIES]
    ce = {r.output: r.value for r in sv.stuck_rows() if r.loss == "CrossEntropyLoss"}
    assert min(ce.values()) < math.log(len(sv.FREQUENCIES))            # the prior row sits below log C
