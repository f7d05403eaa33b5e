"""The numeric precision a built-in trains in (the ``dtype`` hyperparameter): autocast, the gradient scaler,
and a check that the device really computes in it.

``float32`` trains as PyTorch does by default. ``float16`` and ``bfloat16`` run the forward pass under
``torch.autocast`` (PyTorch's mixed precision: matrix products and convolutions in the lower precision,
reductions in float32); ``float16`` also scales the loss (``torch.amp.GradScaler``), whose small
gradients would otherwise underflow. A device that cannot autocast to the precision asked for, or whose
forward pass comes out in another precision, fails the cell as infeasible with the reason: a run never
trains silently in another precision than its setting says.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from trainsweep.hyperparameters import DTYPES
from trainsweep.training.config import JobConfigError

TORCH_DTYPES = {name: getattr(torch, name) for name in DTYPES}


class PrecisionInfeasibleError(JobConfigError):
    """This device cannot train in the precision the cell asks for."""


def _name(dtype: torch.dtype) -> str:
    return next((n for n, d in TORCH_DTYPES.items() if d == dtype), str(dtype).removeprefix("torch."))


@dataclass
class Precision:
    """How a cell computes: the precision's name, the device type and (float16) the gradient scaler."""

    name: str
    device_type: str
    scaler: Any = None
    """A ``torch.amp.GradScaler`` (float16), else None."""

    @contextlib.contextmanager
    def autocast(self) -> Iterator[None]:
        """The forward pass's context: autocast to the precision (nothing for float32)."""
        if self.name == "float32":
            yield
            return
        with torch.autocast(self.device_type, dtype=TORCH_DTYPES[self.name]):
            yield

    def backward_and_step(self, loss: torch.Tensor, optimizer: torch.optim.Optimizer) -> None:
        """``loss.backward()`` and ``optimizer.step()``, through the gradient scaler when there is one."""
        if self.scaler is None:
            loss.backward()
            optimizer.step()
            return
        self.scaler.scale(loss).backward()
        self.scaler.step(optimizer)
        self.scaler.update()


def choose(name: str, device: torch.device) -> Precision:
    """The precision ``name`` on ``device``.

    Raises:
        PrecisionInfeasibleError: the device cannot autocast to it (e.g. bfloat16 on a GPU without it).
    """
    if name not in TORCH_DTYPES:
        raise JobConfigError(f"dtype must be one of {', '.join(TORCH_DTYPES)}, got {name!r}")
    if name == "float32":
        return Precision(name, device.type)
    if not torch.amp.is_autocast_available(device.type):
        raise PrecisionInfeasibleError(
            f"dtype {name}: torch {torch.__version__} has no autocast for {device.type}; refusing to train "
            "in another precision"
        )
    if device.type == "cuda" and name == "bfloat16" and not torch.cuda.is_bf16_supported():
        gpu = torch.cuda.get_device_name(device)
        raise PrecisionInfeasibleError(
            f"dtype bfloat16: {gpu} does not compute in bfloat16; refusing to train in another precision"
        )
    scaler = torch.amp.GradScaler(device.type) if name == "float16" else None
    return Precision(name, device.type, scaler)


def check_forward(precision: Precision, forward: Callable[[], torch.Tensor]) -> str:
    """Run ``forward`` under the precision's autocast; returns the precision its output really came in.

    Raises:
        PrecisionInfeasibleError: the output is in another precision than asked (autocast did nothing).
    """
    try:
        with torch.no_grad(), precision.autocast():
            out = forward()
    except RuntimeError as exc:
        if "out of memory" in str(exc).lower():
            raise
        raise PrecisionInfeasibleError(
            f"dtype {precision.name} on {precision.device_type}: {str(exc).splitlines()[0][:300]}"
        ) from exc
    used = _name(out.dtype)
    if used != precision.name:
        raise PrecisionInfeasibleError(
            f"dtype {precision.name}: on {precision.device_type} the model's forward pass came out in "
            f"{used}; refusing to report it as {precision.name}"
        )
    return used
