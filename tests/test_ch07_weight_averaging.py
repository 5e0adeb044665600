"""Chapter 7's weight averaging: what each averaging function keeps, SWALR's curve, EMA against the last weights."""
import math

from course_utils.chapters.ch07_weight_averaging import averaging_rules, ema_run, swalr_curve


def test_averaging_rules():
    rules = averaging_rules()
    assert rules.pop("updates counted (n_averaged)") == 4
    assert all(v is True for v in rules.values()), rules


def test_swalr_reaches_swa_lr_after_anneal_epochs():
    for strategy in ("cos", "linear"):
        lrs = swalr_curve(strategy)
        assert all(math.isclose(v, 0.01) for v in lrs[2:])
        assert lrs[0] > lrs[1] > 0.01


def test_ema_run_one_seed():
    r = ema_run(0)
    assert r["ema"] < r["last"]
    assert r["BN mean = the live model's"] and r["update_bn recomputed it"] and r["use_buffers=True averages it"]
