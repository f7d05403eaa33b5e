"""Which optimizer steps are under way, as PyTorch's global step hooks see them, and how many steps every
optimizer took: what tells a closure's backward passes from accumulated batches.

* ``optimizer.step(closure)`` runs its closure, a forward and a backward pass on the step's own batch,
  inside the step: LBFGS up to ``max_iter`` times, SAM-style optimizers twice. Those passes are the step's,
  not batches accumulated before it.
* An optimizer that wraps another (Lookahead-style) runs the inner one's step inside its own: one step.
* Every other optimizer's step counts (a GAN's discriminator and generator each step after their own
  backward pass).
* A step that raised never reaches its post-hook: it is dropped as soon as it shows (the same optimizer
  steps again, or a backward pass runs with no frame of it on the stack), and it is not counted.

The batches a step trains, without a loader, are the median of the backward passes outside the steps
before each step: a step skipped at the start (AMP's ``GradScaler`` skips ``optimizer.step()`` while its
scale overflows the float16 gradients, a few steps in most runs) leaves one large count, not a mean that
reads as gradient accumulation.
"""

from __future__ import annotations

import statistics
import sys
from types import FrameType
from typing import Any

KEPT_STEPS = 256
"""The steps whose counts are kept (the first ones: the batches a step trains do not change)."""


class PerStep:
    """How many of something (batches, backward passes) came before each of the first KEPT_STEPS steps,
    and their median: a few steps that hold more (AMP's skipped steps, a prefetch) do not move it."""

    def __init__(self) -> None:
        self.counts: list[int] = []
        self._at_last = 0

    def step(self, total: int) -> None:
        """A step, with ``total`` counted since the start."""
        if len(self.counts) < KEPT_STEPS:
            self.counts.append(total - self._at_last)
        self._at_last = total

    def median(self) -> int | None:
        """None before the first step."""
        return statistics.median_low(self.counts) if self.counts else None


class OptimizerSteps:
    """The steps under way (outermost first) and :attr:`outer`, the outermost steps taken."""

    def __init__(self) -> None:
        self._open: list[tuple[int, bool]] = []
        """(id of the optimizer, whether its step counts in :attr:`outer`) of each step under way."""
        self.outer = 0
        self._outside = 0  # backward passes outside any step
        self._before_step = PerStep()  # ... before each counted step

    def started(self, optimizer: Any, *, counted: bool = True) -> None:
        """``optimizer.step()`` was called (its pre-hook); ``counted``: False for the instrumentation's
        own steps."""
        if any(i == id(optimizer) for i, _ in self._open):
            self._abandon()  # its last step raised: an optimizer's step does not call itself
        count = counted and not self._open  # a wrapped optimizer's step inside its wrapper's: no count
        if count:
            self.outer += 1
            self._before_step.step(self._outside)
        self._open.append((id(optimizer), count))

    def ended(self, optimizer: Any) -> None:
        """``optimizer.step()`` returned (its post-hook): it and any step left open inside it are over."""
        for n, (i, _) in enumerate(self._open):
            if i == id(optimizer):
                del self._open[n:]
                return

    def backward(self) -> None:
        """A backward pass returned (one of the script's): counted when it ran outside the steps."""
        if not self.inside():
            self._outside += 1

    def backwards_per_step(self) -> int | None:
        """The median of the backward passes outside the steps before each step; None before the first
        step or when the steps have none (a closure runs them all)."""
        return self._before_step.median() or None

    def inside(self) -> bool:
        """Whether the caller runs inside a step under way (a closure): a frame of that step's optimizer
        is on the caller's stack. Walks the stack only while a step is open."""
        if not self._open:
            return False
        ids = {i for i, _ in self._open}
        frame: FrameType | None = sys._getframe(1)
        while frame is not None:
            if id(frame.f_locals.get("self")) in ids:
                return True
            frame = frame.f_back
        self._abandon()  # the steps open raised: none is under way
        return False

    def _abandon(self) -> None:
        if self._open and self._open[0][1]:
            self.outer -= 1  # it never completed
        self._open.clear()
