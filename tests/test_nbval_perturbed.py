"""Issue 21: the committed outputs hold on another CPU. Every notebook is re-executed under the perturbed
numeric configuration of tools/nbval_perturbed.py that the suite runs (``SUITE``: ATen, MKL and oneDNN on
their AVX2 paths without the pin, NumPy's dispatch and libm's variants lowered) and compared with the
committed outputs exactly as nbval does, in the background from the moment the tests are collected
(conftest.py)."""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import nbval_perturbed  # noqa: E402

pytestmark = pytest.mark.timeout(1800)


@pytest.fixture(scope="module")
def outcomes(request):
    """The runs conftest.py started in the background at collection, or, if it did not, run them now."""
    import conftest
    background = request.config.stash.get(conftest.BACKGROUND, None)
    if background is not None:
        runs = background.result()
    else:
        runs = nbval_perturbed.run_all(nbval_perturbed.SUITE, nbval_perturbed.notebooks([]), jobs=1)
    for o in runs:
        print(f"[perturbed nbval] {o.config}: {o.summary} ({o.seconds:.0f} s)")
    return {o.config: o for o in runs}


@pytest.mark.parametrize("config", nbval_perturbed.SUITE)
def test_committed_outputs_hold_under_perturbed_numerics(outcomes, config):
    outcome = outcomes[config]
    assert "passed" in outcome.summary, outcome.log[-3000:]           # nbval ran the notebooks at all
    assert outcome.passed, (f"{len(outcome.failed)} cell(s) differ under {config}: {outcome.failed}\n"
                            + outcome.log[-6000:])


def test_the_configurations_really_perturb():
    """Each configuration changes what it claims to: ATen's path, or NumPy's dispatch and libm's variants."""
    import subprocess
    probe = ("import os, torch; from course_utils.infra.notebook import pin_numerics; pin_numerics(); "
             "from numpy._core._multiarray_umath import __cpu_features__ as f; "
             "print(torch.backends.cpu.get_cpu_capability(), os.environ['MKL_CBWR'], f['X86_V3'])")
    seen = {}
    for config in [None, *nbval_perturbed.CONFIGS]:
        env = nbval_perturbed.environment(config, Path("unused"))
        seen[config] = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                                      check=True).stdout.split()
    assert seen[None][:2] == ["DEFAULT", "COMPATIBLE,STRICT"]          # the pin, as the chapters run
    assert seen["avx2-unpinned"][:2] == ["AVX2", "AVX2"]
    assert seen["pinned-other-libs"] == ["DEFAULT", "COMPATIBLE,STRICT", "False"]
    assert seen["other-host"] == ["AVX2", "AVX2", "False"]


def test_the_libm_perturbation_reaches_the_dynamic_loader():
    """glibc reads GLIBC_TUNABLES: with AVX2 and FMA masked, its x86-64-v3/v4 library variants are inactive."""
    import subprocess
    loader = Path("/lib64/ld-linux-x86-64.so.2")
    if not loader.exists():
        pytest.skip("not an x86-64 glibc system")
    def active(config):
        out = subprocess.run([str(loader), "--list-diagnostics"], capture_output=True, text=True,
                             env=nbval_perturbed.environment(config, Path("unused"))).stdout
        return int(next(line for line in out.splitlines() if line.startswith("dl_hwcaps_subdirs_active=")
                        ).split("=")[1], 16)
    base = active(None)
    for config in ("pinned-other-libs", "other-host"):
        lowered = active(config)
        assert lowered & base == lowered and bin(lowered).count("1") <= 1   # at most x86-64-v2 left
