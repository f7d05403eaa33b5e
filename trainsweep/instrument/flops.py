"""The FLOPs of one training step, counted once per run with PyTorch's FLOP counter.

:class:`torch.utils.flop_counter.FlopCounterMode` counts the matrix products and convolutions of what runs
under it, forward and backward, at 2 FLOPs per multiply-add; it leaves out elementwise work,
normalisation and the optimizer's update, as model FLOPs utilisation (MFU) does. The count depends on the
shapes alone, so a built-in workload counts a step of its model on PyTorch's ``meta`` device before
training starts: no memory, no time, nothing the timed steps feel.

The precision the count is set against is the one its FLOPs run in: the autocast precision (``bf16``,
``fp16``) or, in float32, ``tf32`` where PyTorch lets the tensor cores take the bulk of the FLOPs (NVIDIA
compute capability 8.0 on, ``torch.backends.cudnn.allow_tf32`` for convolutions, a matmul precision below
``highest`` for matrix products), else ``fp32``. The value of the run's :data:`trainsweep.logs.mllog.FLOPS`
event (:func:`event_value`) is what :mod:`trainsweep.cost.throughput` turns into MFU.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

AUTOCAST_PEAKS = {"bfloat16": "bf16", "float16": "fp16"}
"""The catalogue's precision of an autocast dtype (:data:`trainsweep.accelerators.PRECISIONS`)."""
_TF32_CAPABILITY = (8, 0)


@dataclass(frozen=True)
class StepCount:
    """What the counter saw in one step of one rank."""

    flops: int
    samples: int
    """Samples in the counted batch (one rank's)."""
    by_op: Mapping[str, int]
    """FLOPs per ATen operator (``aten.convolution``, ``aten.mm`` ...)."""

    @property
    def conv_share(self) -> float:
        conv = sum(n for op, n in self.by_op.items() if "convolution" in op)
        return conv / self.flops if self.flops else 0.0


def count(step: Callable[[], object], samples: int) -> StepCount:
    """The FLOPs of the operators ``step()`` runs (a forward and a backward pass of ``samples`` samples)."""
    counter = FlopCounterMode(display=False)
    with counter:
        step()
    by_op = {str(op): int(n) for op, n in counter.get_flop_counts().get("Global", {}).items()}
    return StepCount(int(counter.get_total_flops()), samples, by_op)


def count_on_meta(build: Callable[[], nn.Module], sample_shape: tuple[int, ...], batch: int) -> StepCount:
    """One classification training step (forward, cross-entropy, backward) of a fresh model from
    ``build()`` on the ``meta`` device, for a batch of ``batch`` samples of ``sample_shape``."""
    with torch.device("meta"):
        model = build()
        x = torch.empty(batch, *sample_shape)
        y = torch.zeros(batch, dtype=torch.long)
    model.train()

    def step() -> None:
        nn.functional.cross_entropy(model(x), y).backward()

    return count(step, batch)


def tf32_allowed(device: torch.device) -> tuple[bool, bool]:
    """Whether float32 convolutions and float32 matrix products may run on TF32 tensor cores here."""
    if device.type != "cuda" or torch.cuda.get_device_capability(device) < _TF32_CAPABILITY:
        return False, False
    return bool(torch.backends.cudnn.allow_tf32), torch.get_float32_matmul_precision() != "highest"


def peak_precision(dtype: str, step: StepCount, *, tf32_conv: bool, tf32_matmul: bool) -> str:
    """The catalogue precision most of the step's FLOPs run in, for a run that trains in ``dtype``."""
    if dtype in AUTOCAST_PEAKS:
        return AUTOCAST_PEAKS[dtype]
    share = step.conv_share
    on_tf32 = share * tf32_conv + (1.0 - share) * tf32_matmul
    return "tf32" if on_tf32 > 0.5 else "fp32"


def event_value(step: StepCount, *, precision: str, world_size: int, device: str) -> dict[str, Any]:
    """The run's FLOPS event: every rank does the counted step's work, so a step of the run is
    ``world_size`` of them."""
    return {
        "per_step": step.flops * world_size,
        "per_sample": step.flops / step.samples if step.samples else None,
        "precision": precision,
        "device": device,
        "accelerators": world_size if device != "cpu" else 0,
        "conv_share": round(step.conv_share, 4),
    }


def failure(exc: BaseException) -> str:
    """Why a count failed, in the counter's (or the model's) own words: the error's first line."""
    words = str(exc).splitlines()[0][:300] if str(exc) else ""
    return f"{type(exc).__name__}: {words}"


def builtin_event(
    build: Callable[[], nn.Module],
    sample_shape: tuple[int, ...],
    *,
    batch: int,
    dtype: str,
    device: torch.device,
    world_size: int,
) -> dict[str, Any]:
    """The FLOPS event of a built-in workload's run; ``{"error": why}`` when the count failed (the run
    goes on: the report then says MFU could not be counted, and why)."""
    try:
        step = count_on_meta(build, sample_shape, batch)
    except (RuntimeError, NotImplementedError, TypeError, ValueError) as exc:
        return {"error": failure(exc)}
    conv, matmul = tf32_allowed(device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    return event_value(
        step,
        precision=peak_precision(dtype, step, tf32_conv=conv, tf32_matmul=matmul),
        world_size=world_size,
        device=name,
    )
