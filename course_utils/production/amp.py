"""Mixed precision (chapter 7): autocast, and for fp16 a GradScaler with `unscale_` before clipping."""
from __future__ import annotations

import contextlib
from typing import Any

import torch

DTYPES = {"none": None, "bf16": torch.bfloat16, "fp16": torch.float16}


class Precision:
    """One place for the precision policy: `autocast()`, `backward(loss)`, `unscale(opt)`, `step(opt)` (chapter 7).

    none: float32 everywhere. bf16: autocast to bfloat16 (CPU or CUDA); its range equals float32's, so
    no scaler. fp16: autocast to float16 on CUDA with `torch.amp.GradScaler`: the loss is scaled up
    before backward so small gradients do not underflow; `unscale` divides them back before clipping;
    `step` skips the update when a gradient is inf/NaN and lowers the scale.
    """

    def __init__(self, mode: str, device: torch.device):
        if mode not in DTYPES:
            raise ValueError(f"amp must be one of {', '.join(DTYPES)}, got {mode!r}")
        if mode == "fp16" and device.type != "cuda":
            raise ValueError("amp fp16 needs a CUDA GPU (float16 autocast with a GradScaler); on the CPU use "
                             "amp bf16")
        self.mode, self.device, self.dtype = mode, device, DTYPES[mode]
        self.scaler = torch.amp.GradScaler("cuda") if mode == "fp16" else None

    def autocast(self) -> contextlib.AbstractContextManager:
        """The forward pass's precision context (a no-op for 'none')."""
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.dtype)

    def backward(self, loss: torch.Tensor) -> None:
        """loss.backward(), through the scaler for fp16."""
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def unscale(self, optimizer: torch.optim.Optimizer) -> None:
        """Bring fp16-scaled gradients back to their true size: before clipping or measuring them."""
        if self.scaler is not None:
            self.scaler.unscale_(optimizer)

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        """optimizer.step(); with a scaler, skipped on inf/NaN gradients, and the scale updated."""
        if self.scaler is None:
            optimizer.step()
        else:
            self.scaler.step(optimizer)
            self.scaler.update()

    def state_dict(self) -> dict[str, Any] | None:
        return self.scaler.state_dict() if self.scaler is not None else None

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        if self.scaler is not None and state:
            self.scaler.load_state_dict(state)
