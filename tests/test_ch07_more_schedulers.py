"""Chapter 7's other schedulers: curves from torch, and the traps each is known for."""
import math

from course_utils.chapters.ch07_more_schedulers import LR, lr_curve, schedulers, traps


def test_curves_match_their_closed_forms():
    assert all(math.isclose(v, LR * 0.8 ** e) for e, v in enumerate(lr_curve("ExponentialLR")))
    assert all(math.isclose(v, LR * 0.9 ** e) for e, v in enumerate(lr_curve("MultiplicativeLR")))
    assert [round(v, 9) for v in lr_curve("MultiStepLR")] == [0.1, 0.1, 0.01, 0.01, 0.01, 0.001, 0.001, 0.001]
    seq = lr_curve("SequentialLR")
    assert math.isclose(seq[3], LR) and math.isclose(seq[4], LR * 0.8)
    assert max(lr_curve("CyclicLR")) == LR
    assert len(schedulers()) == 10


def test_traps():
    t = traps()
    assert t["CyclicLR turns SGD's momentum 0 into"] == 0.9
    assert t["CyclicLR on Adagrad (no momentum to cycle)"] == "ValueError"
    assert all(v is True for v in t.values() if isinstance(v, bool))
