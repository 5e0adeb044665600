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


def test_hand_averaged_checkpoints_average_every_float_and_keep_the_last_counter():
    import torch
    from course_utils.chapters.ch07_weight_averaging import _averaged_state
    a = {"w": torch.tensor([1.0, 3.0]), "bn.running_mean": torch.tensor([0.0]), "n": torch.tensor(4)}
    b = {"w": torch.tensor([3.0, 5.0]), "bn.running_mean": torch.tensor([2.0]), "n": torch.tensor(9)}
    avg = _averaged_state([a, b])
    assert avg["w"].tolist() == [2.0, 4.0] and avg["bn.running_mean"].tolist() == [1.0] and avg["n"].item() == 9


def test_update_bn_on_a_copy_spares_the_training_model_and_on_the_model_itself_does_not():
    from course_utils.chapters.ch07_weight_averaging import averaged_bn_run
    run = averaged_bn_run(0, epochs=4, kept=2)
    assert run["a separate copy left the training buffers alone"] and run["the swap changed the training model's buffers"]


def test_an_ema_reads_the_run_and_never_changes_it():
    import torch
    from course_utils.chapters.ch07_weight_averaging import _trained_weights, ema_leaves_the_run_alone
    assert ema_leaves_the_run_alone(seeds=range(2)) == 2
    assert not torch.equal(_trained_weights(0, False, epochs=1), _trained_weights(0, False, epochs=2))  # it trained


def test_a_high_decay_ema_lags_a_warmed_up_one_follows_and_averaged_model_copies_first():
    from course_utils.chapters.ch07_weight_averaging import ema_built_before_load_run, ema_follow_run
    plain, warm = ema_follow_run(0, 0.999), ema_follow_run(0, 0.999, warmup=True)
    assert plain["live"] >= 0.95 and plain["ema"] <= plain["live"] - 0.2 and abs(warm["ema"] - warm["live"]) <= 0.05
    early = ema_built_before_load_run(0)
    assert early["by hand"] < 0.5 and abs(early["AveragedModel"] - early["live"]) <= 0.05
