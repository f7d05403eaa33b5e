"""What a loop without a DataLoader or without an optimizer shows: model calls, backward passes and blocks
with gradients off, seen through PyTorch's global hooks.

* :class:`ForwardWatch` counts the model's forward passes (top-level module calls: a module called while
  no other module runs) while it is on. The session keeps it on until the first training step (the first
  forward in training mode with gradients on is where a loop without a loader starts, and how long a
  script runs its model without any step is bounded), and during blocks with gradients off;
* :class:`GradOffBlock` is one outermost ``torch.no_grad()`` / ``torch.inference_mode()`` block (one that
  turns gradients off). A block that runs a model in evaluation mode (``model.eval()``) at least
  :data:`EVAL_MIN_CALLS` times and iterates no DataLoader is an evaluation (nanoGPT's ``estimate_loss``, a
  loop over a validation tensor); one forward under no_grad in a training step (a teacher, a target
  network) is not, nor is a no_grad block inside the training model's own forward (its modules are in
  training mode).

Step markers, the run record's ``trainsweep.step_marker``: ``optimizer`` (a step ends at each
``optimizer.step()``), ``backward`` (no optimizer was built: a step ends at each backward pass; manual
updates such as ``p.data.add_`` then count in the next step), ``explicit`` (the script or a framework
callback marks steps).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.modules import module as nn_module
from torch.utils.hooks import RemovableHandle

OPTIMIZER, BACKWARD, EXPLICIT = "optimizer", "backward", "explicit"
STEP_MARKERS = (OPTIMIZER, BACKWARD, EXPLICIT)
EVAL_MIN_CALLS = 2
"""Forward passes in a block with gradients off that make it an evaluation."""
FIRST_STEP_TIMEOUT_S = 300.0
"""Default bound on the time a script runs its model in training mode with no backward pass nor
optimizer step: past it, the run fails with the reason instead of running on untimed."""


class ForwardWatch:
    """Counts top-level module calls while on (global forward hooks, installed only while on)."""

    def __init__(self, on_call: Callable[[nn.Module], None]) -> None:
        self._on_call = on_call
        self._handles: list[RemovableHandle] = []
        self.depth = 0
        self.eval_calls = 0
        """Top-level calls of a module in evaluation mode (``module.training`` False)."""

    @property
    def on(self) -> bool:
        return bool(self._handles)

    def start(self) -> None:
        if self._handles:
            return
        self.depth = 0
        self._handles = [
            nn_module.register_module_forward_pre_hook(self._pre),
            nn_module.register_module_forward_hook(self._post, always_call=True),
        ]

    def stop(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []

    def _pre(self, module: nn.Module, args: object) -> None:
        if self.depth == 0:
            if not module.training:
                self.eval_calls += 1
            self._on_call(module)
        self.depth += 1

    def _post(self, module: nn.Module, args: object, output: object) -> None:
        self.depth = max(self.depth - 1, 0)  # started inside a call: its end is not ours


def _cuda_live() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_initialized()


@dataclass(eq=False)
class GradOffBlock:
    """One outermost block with gradients off: when it began, and what ran in it."""

    t0: float
    wall0: float
    calls_at_start: int
    passes_at_start: int
    evals_at_start: int
    event: torch.cuda.Event | None = None

    @classmethod
    def begin(cls, *, calls: int, passes: int, evals: int) -> GradOffBlock:
        event = None
        if _cuda_live():  # no synchronisation here: most such blocks are tiny parts of a training step
            event = torch.cuda.Event(enable_timing=True)
            event.record()
        return cls(time.perf_counter(), time.time(), calls, passes, evals, event)

    def is_evaluation(self, *, calls: int, passes: int, evals: int) -> bool:
        """A model in evaluation mode ran often enough in it (``calls``: the watch's ``eval_calls``), and no
        loader pass (timed by its own rule) was part of it."""
        return (
            calls - self.calls_at_start >= EVAL_MIN_CALLS
            and passes == self.passes_at_start
            and evals == self.evals_at_start
        )

    def duration(self) -> float:
        """Seconds the block took (on the device's timeline on a GPU: synchronises once)."""
        if self.event is not None and _cuda_live():
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            end.synchronize()
            return self.event.elapsed_time(end) / 1000.0
        return time.perf_counter() - self.t0
