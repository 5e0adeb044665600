"""The trainer's --deterministic (review 07.3): deterministic kernels for the run, the settings put back after."""
from __future__ import annotations

import pytest
import torch

import sys

from course_utils.production import FitConfig
import course_utils.production.fit  # noqa: F401 - the module, not the function the package exports
from course_utils.production.cli import config_from_args
from course_utils.production.determinism import check_environment, deterministic

fit_module = sys.modules["course_utils.production.fit"]


def test_cuda_needs_the_cublas_variable_and_the_cpu_does_not():
    with pytest.raises(ValueError, match="CUBLAS_WORKSPACE_CONFIG=:4096:8"):
        check_environment(torch.device("cuda"), {})
    with pytest.raises(ValueError, match="it is ':1:1'"):
        check_environment(torch.device("cuda"), {"CUBLAS_WORKSPACE_CONFIG": ":1:1"})
    check_environment(torch.device("cuda"), {"CUBLAS_WORKSPACE_CONFIG": ":16:8"})
    check_environment(torch.device("cpu"), {})


def test_the_block_switches_deterministic_kernels_on_and_puts_everything_back():
    before = (torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.benchmark)
    torch.backends.cudnn.benchmark = True
    try:
        with deterministic(torch.device("cpu")):
            assert torch.are_deterministic_algorithms_enabled() and not torch.backends.cudnn.benchmark
            assert torch.backends.cudnn.deterministic
        assert not torch.are_deterministic_algorithms_enabled() and torch.backends.cudnn.benchmark
        with deterministic(torch.device("cpu"), on=False):
            assert not torch.are_deterministic_algorithms_enabled()
    finally:
        torch.use_deterministic_algorithms(before[0])
        torch.backends.cudnn.benchmark = before[1]


def test_fit_runs_its_body_under_the_flag(monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr(fit_module, "_fit", lambda config, task: seen.append(torch.are_deterministic_algorithms_enabled()))
    fit_module.fit(FitConfig(out=str(tmp_path), deterministic=True, device="cpu"))
    fit_module.fit(FitConfig(out=str(tmp_path), device="cpu"))
    assert seen == [True, False] and not torch.are_deterministic_algorithms_enabled()


def test_a_real_run_under_the_flag_equals_one_without_it_on_the_cpu(tmp_path):
    common = dict(epochs=1, n_train=64, n_val=32, tensorboard=False, progress=False, device="cpu")
    fit_module.fit(FitConfig(out=str(tmp_path / "a"), deterministic=True, **common))
    fit_module.fit(FitConfig(out=str(tmp_path / "b"), **common))
    a, b = (torch.load(tmp_path / run / "model.pt", weights_only=True) for run in "ab")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_the_flag_and_a_bad_value():
    assert config_from_args(["--out", "x", "--deterministic"]).deterministic
    assert not config_from_args(["--out", "x"]).deterministic
    with pytest.raises(ValueError, match="deterministic"):
        FitConfig(out="x", deterministic="yes")
