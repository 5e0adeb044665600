"""The loop doctor under autocast and a GradScaler, on every device (chapters 5, 9): the same loops run on the
CPU here and on CUDA where a GPU is present (the CUDA cases are skipped otherwise).

The doctor reads the constant a loss was multiplied by from its autograd graph; a GradScaler's own multiply is
recognised by the scaler's tensor, wherever it sits and on any device, and left out. Accumulation is judged by
chapter 0's rule: each micro-batch's mean loss weighted by its share of the window's examples.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from course_utils.doctor import LoopDoctor

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
DEVICES = [pytest.param(("cpu", torch.bfloat16), id="cpu-bf16"), pytest.param(("cpu", torch.float16), id="cpu-fp16"),
           pytest.param(("cuda", torch.float16), id="cuda-fp16", marks=CUDA),
           pytest.param(("cuda", torch.bfloat16), id="cuda-bf16", marks=CUDA)]


def _model(device: str) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.1), nn.Linear(8, 3)).to(device)


def _scaled_accumulation(device: str, dtype: torch.dtype, weighting: str, outside: bool, n: int, k: int,
                         watched: bool = True):
    """Autocast + GradScaler(device), windows of k micro-batches of 8, the short last window flushed. weighting:
    "examples" (n_i / n_window), "k" (every loss / k) or "none"; outside: scaler.scale(loss) * w, else
    scaler.scale(loss * w). Returns (the model, the report or None)."""
    model = _model(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler(device)
    g = torch.Generator().manual_seed(1)
    loader = DataLoader(TensorDataset(torch.randn(n, 4, generator=g), torch.arange(n) % 3), batch_size=8)
    batches = len(loader)

    def loop():
        for _ in range(2):
            for i, (xb, yb) in enumerate(loader):
                start = i - i % k
                window = sum(min(8, n - 8 * j) for j in range(start, min(start + k, batches)))
                weight = {"examples": len(yb) / window, "k": 1 / k, "none": 1.0}[weighting]
                with torch.autocast(device, dtype=dtype):
                    loss = nn.functional.cross_entropy(model(xb.to(device)), yb.to(device))
                (scaler.scale(loss) * weight if outside else scaler.scale(loss * weight)).backward()
                if (i + 1) % k == 0 or i + 1 == batches:
                    scaler.step(opt)
                    scaler.update()
                    opt.zero_grad()
    if not watched:
        loop()
        return model, None
    with LoopDoctor(model) as doctor:
        loop()
    return model, doctor.report()


@pytest.mark.parametrize("outside", [False, True], ids=["scale(loss*w)", "scale(loss)*w"])
@pytest.mark.parametrize("device", DEVICES)
def test_grad_scaler_accumulation_judged_by_examples(device, outside):
    device, dtype = device
    # 64 examples: 8 full micro-batches, windows of 2 -- dividing by K is the examples rule there
    assert _scaled_accumulation(device, dtype, "examples", outside, n=64, k=2)[1].names == ()
    assert _scaled_accumulation(device, dtype, "k", outside, n=64, k=2)[1].names == ()
    assert _scaled_accumulation(device, dtype, "none", outside, n=64, k=2)[1].names == ("unscaled_accumulation",)
    # 60 examples: micro-batches of 8 x 7 and 4, windows of 3, 3 and a flushed 8 + 4 that must weigh as much
    _, clean = _scaled_accumulation(device, dtype, "examples", outside, n=60, k=3)
    assert clean.names == (), str(clean)
    _, short = _scaled_accumulation(device, dtype, "k", outside, n=60, k=3)
    assert short.names == ("unscaled_accumulation",), str(short)
    assert "0.667 times the weight of a full one" in str(short)


@pytest.mark.parametrize("device", DEVICES)
def test_weights_bitwise_unchanged_under_autocast_and_a_scaler(device):
    device, dtype = device
    bare, _ = _scaled_accumulation(device, dtype, "examples", True, n=60, k=3, watched=False)
    model, _ = _scaled_accumulation(device, dtype, "examples", True, n=60, k=3)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), bare.parameters()))


def _mode_loop(device: str, dtype: torch.dtype, bug: str):
    """Autocast without a scaler; `bug` in ("", "no_zero_grad", "zero_after_backward", "eval_with_grad")."""
    model = _model(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(2)
    train = DataLoader(TensorDataset(torch.randn(48, 4, generator=g), torch.arange(48) % 3), batch_size=8)
    val = DataLoader(TensorDataset(torch.randn(16, 4, generator=g), torch.arange(16) % 3), batch_size=8)
    with LoopDoctor(model) as doctor:
        for _ in range(2):
            model.train()
            for xb, yb in train:
                if bug != "no_zero_grad":
                    opt.zero_grad()
                with torch.autocast(device, dtype=dtype):
                    loss = nn.functional.cross_entropy(model(xb.to(device)), yb.to(device))
                loss.backward()
                if bug == "zero_after_backward":
                    opt.zero_grad()
                opt.step()
            model.eval()
            with torch.set_grad_enabled(bug == "eval_with_grad"), torch.autocast(device, dtype=dtype):
                for xb, _ in val:
                    model(xb.to(device))
    return doctor.report().names


@pytest.mark.parametrize("device", DEVICES)
def test_gradient_reads_and_evaluation_checks_on_the_device(device):
    device, dtype = device
    assert _mode_loop(device, dtype, "") == ()
    assert _mode_loop(device, dtype, "no_zero_grad") == ("missing_zero_grad",)
    assert _mode_loop(device, dtype, "zero_after_backward") == ("zero_grad_after_backward",)
    assert _mode_loop(device, dtype, "eval_with_grad") == ("missing_no_grad",)
