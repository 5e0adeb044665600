"""The committed outputs hold, checked by two nbval passes in the background (conftest.py starts them): "pinned",
nbval exactly as `make nbval` runs it (the instructor command), and the configuration of tools/nbval_perturbed.py
that the suite runs (``SUITE``), "any-host": issue 21's perturbation (ATen, MKL and oneDNN on their AVX2 paths
without the pin, NumPy's dispatch and libm's variants lowered: another CPU) and issue 38's nudge (every random
init and generated point moved by 1e-6: every chaotic run moved, on any host) at once. Each pass is one pytest process over copies of
the notebooks; its failing cells and log are this test's message. `pytest --nbval` checks the notebooks cell by
cell in the session instead, and then the pinned pass is left out (conftest.py)."""
import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import background_corpus  # noqa: E402
import course  # noqa: E402
import nbval_perturbed  # noqa: E402

pytestmark = pytest.mark.timeout(1800)
PASSES = [nbval_perturbed.PINNED, *nbval_perturbed.SUITE]


@pytest.fixture(scope="module")
def outcomes(request):
    """The passes conftest.py started once collection was final."""
    import conftest
    runs = request.config.stash[conftest.BACKGROUND].result()
    for o in runs:
        print(f"[nbval pass] {o.config}: {o.summary} ({o.seconds:.0f} s)")
    return {o.config: o for o in runs}


@pytest.mark.parametrize("config", PASSES)
def test_committed_outputs_hold(outcomes, config):
    outcome = outcomes[config]
    assert "passed" in outcome.summary, outcome.log[-3000:]           # nbval ran the notebooks at all
    assert outcome.passed, (f"{len(outcome.failed)} cell(s) differ under {config}: {outcome.failed}\n"
                            + (outcome.differences() or outcome.log[-6000:]))


def test_the_pinned_pass_is_the_instructor_command():
    """The background pass runs nbval with `make nbval`'s own arguments (tools/course.py), over every notebook."""
    arguments = nbval_perturbed.nbval_arguments()
    assert arguments == [str(ROOT / a) if a.endswith(".cfg") else a for a in course.NBVAL]
    assert Path(arguments[arguments.index("--nbval-sanitize-with") + 1]).is_file()
    assert [p.name for p in nbval_perturbed.notebooks([])] == sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert nbval_perturbed.environment(None, Path("p.json")).keys().isdisjoint(nbval_perturbed.PIN_VARIABLES)


def test_the_configurations_really_perturb():
    """Each configuration changes what it claims to: ATen's path, or NumPy's dispatch and libm's variants."""
    import subprocess

    import torch
    probe = ("import os, torch; from course_utils.infra.notebook import pin_numerics; pin_numerics(); "
             "from numpy._core._multiarray_umath import __cpu_features__ as f; "
             "print(torch.backends.cpu.get_cpu_capability(), os.environ['MKL_CBWR'], f['X86_V3'])")
    seen = {}
    for config in [None, *nbval_perturbed.CONFIGS]:
        env = nbval_perturbed.environment(config, Path("unused"))
        seen[config] = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                                      check=True).stdout.split()
    pinned = ["AVX2", "AVX2,STRICT"] if torch.cpu._is_avx2_supported() else ["DEFAULT", "COMPATIBLE,STRICT"]
    assert seen[None][:2] == pinned                                      # the pin, as the chapters run
    assert seen["generic-path"][:2] == ["DEFAULT", "COMPATIBLE,STRICT"]
    assert seen["pinned-other-libs"] == [*pinned, "False"]
    assert seen["other-host"] == ["DEFAULT", "COMPATIBLE,STRICT", "False"]
    assert seen["nudged"] == seen[None]                                # the nudge leaves the pin alone ...
    assert nbval_perturbed.environment("nudged", Path("u"))["COURSE_NUDGE"] == "1e-6"   # ... and moves the runs
    assert seen["any-host"] == seen["other-host"]                       # make test's pass: everything at once
    assert nbval_perturbed.environment("any-host", Path("u"))["COURSE_NUDGE"] == "1e-6"


def test_the_pin_is_avx2_where_the_cpu_has_it_and_generic_elsewhere(monkeypatch):
    """Forcing ATen onto AVX2 on a CPU without it would stop the kernel on an illegal instruction: such a CPU, and
    a torch without the CPUID probe, get the generic path; the perturbed pass runs exactly that path."""
    import torch

    from course_utils.infra.notebook import GENERIC_PATH, NUMERIC_PIN, numeric_path
    monkeypatch.setattr(torch.cpu, "_is_avx2_supported", lambda: True)
    assert numeric_path() is NUMERIC_PIN and NUMERIC_PIN["ATEN_CPU_CAPABILITY"] == "avx2"
    monkeypatch.setattr(torch.cpu, "_is_avx2_supported", lambda: False)
    assert numeric_path() is GENERIC_PATH
    monkeypatch.delattr(torch.cpu, "_is_avx2_supported")
    assert numeric_path() is GENERIC_PATH
    assert nbval_perturbed.CONFIGS["generic-path"] == GENERIC_PATH and set(GENERIC_PATH) == set(NUMERIC_PIN)
    assert set(NUMERIC_PIN) <= set(nbval_perturbed.PIN_VARIABLES)      # a perturbed pass never inherits the pin


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


def _collected(*args: str) -> list[str]:
    import subprocess
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:randomly", "--collect-only", "-q", *args],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:]
    return [line for line in done.stdout.splitlines() if "::" in line]


XDIST = ("-n", "auto", "--dist", "loadfile")


class _FakeCorpus:
    """What tools/course.py starts beside the phases, not started: it records how, and passes or fails."""

    def __init__(self, code: int = 0, started: list | None = None, **how):
        self.code, self.count, self.events = code, 3, started if started is not None else []
        self.events.append(("start", how))

    def close(self):
        self.events.append(("close", None))

    def stop(self):
        self.events.append(("stop", None))

    def verdict(self):
        return "doctor corpus    (not run)"


def test_make_test_runs_every_test_once_in_two_phases_beside_the_corpus_and_the_verdicts_come_last(monkeypatch):
    """`make test` (no --nbval): the doctor's published-loop corpus starts beside both phases (in this .venv, in
    their environment) and is waited for after them; the unit and widget tests on every core, then the browser tests
    with both passes' verdicts last; together the phases and the corpus collect exactly what a plain `pytest`
    collects, each test once. With --nbval the cells are items of the session and the pinned pass is not run a
    second time."""
    ran, started = [], []
    monkeypatch.setattr(course, "installed", lambda: None)
    monkeypatch.setattr(course, "run", lambda *args: None)                     # Chromium's install
    monkeypatch.setattr(course, "call", lambda *args, env=None: ran.append([str(a) for a in args]) or envs.append(env)
                        or started.append(("phase", None)) or 0)
    monkeypatch.setattr(background_corpus, "start", lambda **how: _FakeCorpus(0, started, **how))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("MPLCONFIGDIR", raising=False)
    envs: list = []
    with pytest.raises(SystemExit) as stopped:
        course.main(["test"])
    assert stopped.value.code == 0 and len(ran) == 2
    assert [event for event, _ in started] == ["start", "phase", "phase", "close"]
    assert started[0][1] == {"python": str(course.venv_bin("python")), "env": envs[0]}
    # matplotlib's font list is the clone's own, no other checkout's
    assert all(env["MPLCONFIGDIR"] == str(course.VENV / "matplotlib") for env in envs)
    # the phases may cache rewritten test files (a host that forbids bytecode makes every collection rewrite them)
    assert all(env is not None and "PYTHONDONTWRITEBYTECODE" not in env and env.get("PATH") == os.environ["PATH"]
               for env in envs)
    for command in ran:
        assert "--nbval" not in command and command[1:5] == ["-m", "pytest", "-p", "no:randomly"]
    unit, browser = (command[5:] for command in ran)
    assert all(option in unit for option in XDIST) and not any(option in browser for option in XDIST)
    first = _collected(*[a for a in unit if a not in XDIST])
    second = _collected(*browser)
    everything = _collected()
    corpus = [line for line in everything if line.split("::")[0] in background_corpus.files()]   # beside both
    assert len(corpus) > 400 and background_corpus.command()[-len(background_corpus.files()):] == list(
        background_corpus.files())
    assert not set(first) & set(second) and not (set(first) | set(second)) & set(corpus)
    assert sorted(first + second + corpus) == sorted(everything)
    assert not any("tests/browser/" in line or "outputs_hold" in line for line in first)
    kinds = ["verdict" if "outputs_hold" in line else "browser" if "tests/browser/" in line else "other"
             for line in second]
    assert "browser" in kinds and kinds == sorted(kinds, key=["other", "browser", "verdict"].index)
    assert second[-len(PASSES):] == [f"tests/test_nbval_passes.py::test_committed_outputs_hold[{c}]" for c in PASSES]
    assert PASSES == [nbval_perturbed.PINNED, "any-host"]
    cells = _collected("--nbval", "--nbval-current-env", "tests/test_nbval_passes.py", "notebooks/09_cheat_sheet.ipynb")
    assert any(line.startswith("notebooks/09_cheat_sheet.ipynb::Cell") for line in cells)
    assert not any("[pinned]" in line for line in cells) and any("[any-host]" in line for line in cells)


def test_make_test_fails_when_either_phase_or_the_corpus_fails_and_runs_all(monkeypatch):
    """A failing unit test must not hide the browser tests', the notebooks' and the corpus's verdicts, nor pass the
    run; an interrupted run stops the corpus (its session is its own: a Ctrl-C does not reach it)."""
    for codes, corpus in (([1, 0], 0), ([0, 1], 0), ([2, 1], 0), ([0, 0], 1)):
        ran, answers, events = [], iter(codes), []
        monkeypatch.setattr(course, "installed", lambda: None)
        monkeypatch.setattr(course, "run", lambda *args: None)
        monkeypatch.setattr(course, "call", lambda *args, env=None: ran.append(args) or next(answers))
        monkeypatch.setattr(background_corpus, "start", lambda **how: _FakeCorpus(corpus, events, **how))
        with pytest.raises(SystemExit) as stopped:
            course.main(["test"])
        assert len(ran) == 2 and stopped.value.code == max(*codes, corpus)
        assert [event for event, _ in events] == ["start", "close"]

    def interrupted(*args, env=None):
        raise KeyboardInterrupt
    events = []
    monkeypatch.setattr(course, "call", interrupted)
    monkeypatch.setattr(background_corpus, "start", lambda **how: _FakeCorpus(0, events, **how))
    with pytest.raises(KeyboardInterrupt):
        course.main(["test"])
    assert [event for event, _ in events] == ["start", "stop"]


def _item(nodeid: str, config: str | None = None):
    from types import SimpleNamespace
    return SimpleNamespace(nodeid=nodeid, callspec=SimpleNamespace(params={"config": config}))


def _session(items, collect_only=False):
    from types import SimpleNamespace
    config = SimpleNamespace(stash=pytest.Stash(), option=SimpleNamespace(collectonly=collect_only))
    return SimpleNamespace(config=config, items=items)


def test_the_passes_start_at_collection_for_the_verdicts_kept_and_never_for_collect_only(monkeypatch):
    """Once collection is final, one background run of exactly the verdicts left (after -k or --nbval); a
    `--collect-only` run starts none (it would wait minutes at exit for passes nobody reads)."""
    import threading
    import conftest
    started, release = [], threading.Event()
    monkeypatch.setattr(nbval_perturbed, "run_all",
                        lambda configs, paths, jobs, niceness: started.append((configs, len(paths), jobs, niceness))
                        or release.wait(5))
    unit = _item("tests/test_loop.py::test_x")
    verdicts = [_item(f"{conftest.PASSES}::test_committed_outputs_hold[{c}]", c) for c in PASSES]
    listing = _session([unit, *verdicts], collect_only=True)
    conftest.pytest_collection_finish(listing)
    assert conftest.BACKGROUND not in listing.config.stash
    kept = _session([unit, verdicts[1]])                                   # e.g. --nbval left the pinned one out
    conftest.pytest_collection_finish(kept)
    release.set()
    kept.config.stash[conftest.BACKGROUND].result()
    assert started == [([PASSES[1]], len(nbval_perturbed.notebooks([])), 2, conftest.NICENESS)]
    none = _session([unit])
    conftest.pytest_collection_finish(none)
    assert conftest.BACKGROUND not in none.config.stash and len(started) == 1


def test_a_niced_pass_runs_its_kernels_at_that_niceness(tmp_path):
    """The niceness reaches the kernels that do the work: a cell printing its own niceness holds at 19 only."""
    import os
    import nbformat
    if not hasattr(os, "nice") or os.nice(0) >= 19:
        pytest.skip("no nice() here, or this process is already at the lowest priority")
    cell = nbformat.v4.new_code_cell("import os\nprint(os.nice(0))", execution_count=1)
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="19\n")]
    notebook = nbformat.v4.new_notebook(cells=[cell])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "00_niceness.ipynb"
    nbformat.write(notebook, path)
    assert nbval_perturbed.nbval([path], niceness=19).passed
    plain = nbval_perturbed.nbval([path])
    assert not plain.passed and plain.failed == ["00_niceness.ipynb::Cell 0"], plain.log[-2000:]


def test_the_background_corpus_runs_lowered_in_a_session_of_its_own_and_its_failures_are_its_verdict(tmp_path):
    """The corpus's background run (tools/background_corpus.py) at a niceness: a session of its own, its
    scheduling group at that niceness too where Linux has autogroups; a failing test fails the run and its log
    names it; the tests counted. (Niceness 5 here: at 19, beside the unit phase's busy workers, the probe would
    wait minutes.)"""
    import os
    if not hasattr(os, "nice") or os.nice(0) >= 5:
        pytest.skip("no nice() here, or this process is already at a lower priority")
    probe = tmp_path / "test_probe.py"
    probe.write_text("import os\nfrom pathlib import Path\n\n\ndef test_priority():\n"
                     f"    group = Path('/proc/self/autogroup')\n"
                     f"    Path({str(tmp_path / 'facts')!r}).write_text(f'{{os.nice(0)}} {{os.getsid(0)}} '\n"
                     "        + (group.read_text().split()[-1] if group.exists() else '-'))\n\n\n"
                     "def test_broken():\n    assert 1 == 2, 'the failure the verdict names'\n")
    run = background_corpus.start((str(probe),), niceness=5)
    run.close()
    assert run.code == 1 and run.count == 2 and not run.log.exists()
    niceness, session, group = (tmp_path / "facts").read_text().split()
    assert niceness == "5" and int(session) != os.getsid(0) and group in ("5", "-")
    assert "test_broken" in run.text() and "the failure the verdict names" in run.text()
    verdict = run.verdict().splitlines()
    assert verdict[0].startswith("doctor corpus    1 failed, 1 passed") and verdict[1].startswith("FAILED")


def test_a_background_corpus_run_still_going_is_stopped_with_its_workers(tmp_path):
    """A session that ends before the corpus (interrupted) stops the whole run: pytest and its xdist workers, which
    a Ctrl-C in the terminal would not reach (their session is their own)."""
    import os
    import time
    probe = tmp_path / "test_slow.py"
    probe.write_text("import time\n\n\ndef test_one():\n    time.sleep(120)\n\n\ndef test_two():\n"
                     "    time.sleep(120)\n")
    run = background_corpus.start((str(probe),), niceness=5)
    time.sleep(3)
    begun = time.perf_counter()
    run.stop()
    assert run.code is not None and time.perf_counter() - begun < 30 and not run.log.exists()
    if Path("/proc/self/stat").exists():      # nothing of the group still runs (an ended worker may wait, a zombie,
        def stat(path: Path) -> list[str]:    # for whoever reaps it)
            try:
                return path.read_text().rsplit(")", 1)[1].split()     # state, parent, group, ...
            except (OSError, IndexError):                              # ended meanwhile
                return ["Z", "", ""]

        def alive() -> list[list[str]]:
            stats = map(stat, Path("/proc").glob("[0-9]*/stat"))
            return [s for s in stats if s[2] == str(run.process.pid) and s[0] != "Z"]
        deadline = time.monotonic() + 10
        while alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not alive()


def test_a_differing_cell_is_reported_in_full(tmp_path):
    """A cell that fails in a background pass is shown whole in its log (pytest cuts long diffs by default): what a
    chapter prints only when something goes wrong, such as torchrun's stderr, must reach the test's message. The
    message itself is each failing cell's diff (`Outcome.differences`), a wide line shown where it differs: a cell
    whose HTML table filled the log's tail once hid the very lines that differed."""
    import nbformat
    lines = [f"line {i}" for i in range(60)]
    cell = nbformat.v4.new_code_cell("print('\\n'.join(f'line {i}' for i in range(60)))", execution_count=1)
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="\n".join(lines[:-1] + ["line X"]) + "\n")]
    row = "<tr><td>same</td></tr>" * 400
    table = nbformat.v4.new_code_cell(f"from IPython.display import HTML\nHTML('<table><tr><td>run</td></tr>{row}"
                                      "</table>')", execution_count=2)
    table.outputs = [nbformat.v4.new_output("execute_result", execution_count=2, data={
        "text/html": f"<table><tr><td>committed</td></tr>{row}</table>", "text/plain": "<IPython.core.display.HTML object>"})]
    notebook = nbformat.v4.new_notebook(cells=[cell, table])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, tmp_path / "00_long.ipynb")
    outcome = nbval_perturbed.nbval([tmp_path / "00_long.ipynb"], PYTHONPATH=str(ROOT))
    assert outcome.failed == ["00_long.ipynb::Cell 0", "00_long.ipynb::Cell 1"]
    assert "line X" in outcome.log and "line 59" in outcome.log and "truncated" not in outcome.log
    shown = outcome.differences()
    assert len(shown) < 2000, shown                                        # the diff, not the cells
    assert re.search(r"^  \+ line X$", shown, flags=re.M) and re.search(r"^  - line 59$", shown, flags=re.M), shown
    assert re.search(r"^  \+ .*<td>committed</td>", shown, flags=re.M), shown
    assert re.search(r"^  - .*<td>run</td>", shown, flags=re.M), shown
