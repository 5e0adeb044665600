"""The nudge (issue 38): a perturbation every host can run. It moves every random initialisation and every generated
point by a relative 1e-6 without drawing from any random stream, so a chaotic run's digits move and a conclusion's
do not; nbval's nudged pass holds every compared output to that."""
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import torch

from course_utils.engine.data import make_imbalanced, make_spiral, spiral_splits
from course_utils.engine.models import MLP, TinyLinear
from course_utils.infra import nudge

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import nbval_perturbed  # noqa: E402


@pytest.fixture
def nudged(monkeypatch):
    monkeypatch.setenv(nudge.VARIABLE, "1e-6")
    assert nudge.install()
    yield
    nudge.uninstall()


def _model_and_rng(seed=0):
    torch.manual_seed(seed)
    model = MLP(hidden=16, batchnorm=True, dropout=0.1)
    return model, torch.get_rng_state()


def test_without_the_variable_nothing_changes(monkeypatch):
    monkeypatch.delenv(nudge.VARIABLE, raising=False)
    assert not nudge.install() and nudge.size() == 0.0
    assert not hasattr(torch.nn.init.kaiming_uniform_, "__wrapped__")
    x = torch.randn(5)
    assert nudge.nudge(x) is x


def test_every_random_init_moves_by_at_most_the_size_and_no_random_stream_moves(nudged, monkeypatch):
    nudged_model, nudged_rng = _model_and_rng()
    nudge.uninstall()
    plain_model, plain_rng = _model_and_rng()
    assert torch.equal(nudged_rng, plain_rng)                       # no draw: every later shuffle and mask the same
    moved = 0
    for (name, a), b in zip(nudged_model.state_dict().items(), plain_model.state_dict().values()):
        if a.is_floating_point():
            assert torch.allclose(a, b, rtol=1.5e-6, atol=0), name
        if not torch.equal(a, b):
            moved += 1
            assert ((a - b).abs() > 0).float().mean() > 0.5, name    # most values, not a few
    # every Linear's weight and bias moved; BatchNorm's constant ones and zeros and its counters did not
    linears = sum(isinstance(m, torch.nn.Linear) for m in plain_model.modules())
    assert linears == 3 and moved == 2 * linears
    assert torch.equal(nudged_model.body[1].weight, torch.ones(16))


def test_a_hand_set_model_is_exact_under_the_nudge(nudged):
    """Chapter 3's hand calculation sets its weights after the init: the nudge cannot touch them."""
    assert TinyLinear().weight.tolist() == [[0.5, -0.30000001192092896], [0.20000000298023224, 0.800000011920929]]


def test_generated_data_moves_but_labels_and_order_do_not(nudged, monkeypatch):
    got = make_spiral(300, seed=3).tensors, make_imbalanced(50, 10, seed=1).tensors, spiral_splits(40, 20, seed=2)
    monkeypatch.delenv(nudge.VARIABLE)
    want = make_spiral(300, seed=3).tensors, make_imbalanced(50, 10, seed=1).tensors, spiral_splits(40, 20, seed=2)
    for (gx, gy), (wx, wy) in zip(got[:2], want[:2]):
        assert torch.equal(gy, wy) and not torch.equal(gx, wx) and torch.allclose(gx, wx, rtol=1.5e-6, atol=0)
    assert torch.equal(got[2].val.tensors[1], want[2].val.tensors[1])


def test_the_pattern_is_fixed_and_spread_over_minus_one_to_one():
    p = nudge.pattern(100_000)
    assert torch.equal(p, nudge.pattern(100_000)) and p.min() >= -1 and p.max() < 1
    assert abs(p.mean()) < 0.01 and (p > 0).float().mean().item() == pytest.approx(0.5, abs=0.01)


@pytest.mark.parametrize("text", ["big", "0.5", "nan", "-inf"])
def test_a_bad_value_is_named(monkeypatch, text):
    monkeypatch.setenv(nudge.VARIABLE, text)
    with pytest.raises(ValueError, match="COURSE_NUDGE"):
        nudge.size()


def test_a_negative_size_flips_the_pattern(monkeypatch):
    x = torch.ones(8)
    monkeypatch.setenv(nudge.VARIABLE, "-1e-6")
    down = nudge.nudge(x)
    monkeypatch.setenv(nudge.VARIABLE, "1e-6")
    up = nudge.nudge(x)
    assert torch.allclose(down - 1, -(up - 1), atol=1e-7)


def test_a_process_started_by_a_chapter_is_nudged_too():
    """course_utils installs the nudge on import: a trainer or worker process a chapter starts inherits it."""
    probe = ("import torch, course_utils; torch.manual_seed(0); "
             "print(repr(torch.nn.Linear(3, 3).weight.sum().item()))")
    def run(config):
        return float(subprocess.run([sys.executable, "-c", probe], env=nbval_perturbed.environment(config, Path("u")),
                                    capture_output=True, text=True, check=True).stdout)
    nudged, plain = run("nudged"), run(nbval_perturbed.PINNED)
    assert nudged != plain and abs(nudged - plain) < 1e-5


def _notebook(path: Path, sources: list[str]) -> Path:
    """A notebook executed in a fresh kernel without the nudge, outputs kept (as `make notebooks` commits them)."""
    from nbclient import NotebookClient
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    nbformat.write(notebook, path)
    return path


CHAOTIC_RUN = """
import torch
torch.set_num_threads(1)
from course_utils.engine.data import make_spiral
from course_utils.engine.models import MLP
torch.manual_seed(0)
x, y = make_spiral(300, seed=0).tensors
model = MLP(hidden=32)
opt = torch.optim.SGD(model.parameters(), lr=2.0)
losses = []
for step in range(150):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    losses.append(loss.item())
"""


def test_the_nudged_pass_finds_a_chaotic_cell_without_being_told_where(tmp_path, monkeypatch):
    """A notebook with a chaotic run: the cell printing its raw digits fails under the nudge, the cell printing
    the conclusion passes, and both pass without the nudge (the nudge, not the machine, moved the digits)."""
    monkeypatch.delenv(nudge.VARIABLE, raising=False)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    path = _notebook(tmp_path / "00_chaos.ipynb", [
        CHAOTIC_RUN,
        "print('raw digits:', [round(v, 4) for v in losses[-3:]])",
        "print('ended above its start:', losses[-1] > losses[0], '| fell below ln 3 on some step:',"
        " min(losses) < 1.0986)",
    ])
    env = {"PYTHONPATH": str(ROOT)}
    plain = nbval_perturbed.nbval([path], nbval_perturbed.PINNED, **env)
    assert plain.passed, plain.log[-2000:]
    moved = nbval_perturbed.nbval([path], "nudged", **env)
    assert moved.failed == ["00_chaos.ipynb::Cell 1"], moved.log[-2000:]


def test_a_layer_built_on_meta_or_under_fake_tensors_is_left_alone(nudged):
    """A meta tensor holds no values: the nudge leaves it (the atlas's device entry builds a layer on meta under
    FakeTensorMode; nudging it raised, and the any-host pass counted one entry short)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    layer = torch.nn.Linear(10, 3, device="meta")
    assert layer.weight.device.type == "meta"
    with FakeTensorMode():
        faked = torch.nn.Linear(10, 3, device="meta")
        assert faked.weight.shape == (3, 10)
