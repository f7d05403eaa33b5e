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
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any


class OptimizerSteps:
    """The steps under way (outermost first) and :attr:`outer`, the outermost steps taken."""

    def __init__(self) -> None:
        self._open: list[tuple[int, bool]] = []
        """(id of the optimizer, whether its step counts in :attr:`outer`) of each step under way."""
        self.outer = 0

    def started(self, optimizer: Any, *, counted: bool = True) -> None:
        """``optimizer.step()`` was called (its pre-hook); ``counted``: False for the instrumentation's
        own steps."""
        if any(i == id(optimizer) for i, _ in self._open):
            self._abandon()  # its last step raised: an optimizer's step does not call itself
        count = counted and not self._open  # a wrapped optimizer's step inside its wrapper's: no count
        if count:
            self.outer += 1
        self._open.append((id(optimizer), count))

    def ended(self, optimizer: Any) -> None:
        """``optimizer.step()`` returned (its post-hook): it and any step left open inside it are over."""
        for n, (i, _) in enumerate(self._open):
            if i == id(optimizer):
                del self._open[n:]
                return

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
