"""Where the epochs of an instrumented run open and close (:class:`EpochInference`, a part of
:class:`trainsweep.instrument.session.Session`): from the training step that ends, and from the evaluation
that was found.

Three ways to count epochs, the session's module docstring has the rules:

* by loader passes: a new training pass opens an epoch, back-dated to the pass's start; an evaluation
  after the epoch's training closes it (a loop without a loader: one after training steps does, and the
  next epoch starts where it ended);
* by marks: the script or a framework callback opens and closes them; a step only opens one when none
  is open;
* by step count (``steps`` set): the run is one stretch of steps with its evaluations.
"""

from __future__ import annotations

from trainsweep.instrument.passes import LoaderPass, PassInference
from trainsweep.instrument.timeline import Epoch


class EpochInference(PassInference):
    """The session's epoch bookkeeping over its loader-pass inference."""

    _first_forward: tuple[float, float] | None
    _resume_at: tuple[float, float] | None

    @property
    def step_run(self) -> bool:
        """A step-based run (``steps`` set): one stretch of steps, no epochs to find."""
        return self.settings.steps is not None

    def _epoch_for_step(self, p: LoaderPass | None, now: float, wall: float) -> Epoch:
        """The epoch of a step, opened (and the last one closed) as the step says. Marked epochs and a
        step-based run's one stretch only open at a step when none is open."""
        tl = self.timeline
        ep = tl.epoch
        if ep is not None and p is not None and ep.train_pass is p:
            return ep  # the open epoch's training pass goes on: every mode keeps its epoch
        if "epoch" in self.manual:
            if ep is None:
                tl.open_epoch(now, wall, None)
        elif self.step_run:
            if ep is None:  # the one stretch of a step-based run opens at its first step
                start = (p.t0, p.wall0) if p is not None else self._loop_start(now, wall)
                tl.open_epoch(*start, p)
        else:
            self._epoch_by_passes(p, now, wall)
        assert tl.epoch is not None
        return tl.epoch

    def _epoch_by_passes(self, p: LoaderPass | None, now: float, wall: float) -> None:
        """A new training pass opens an epoch, back-dated to the pass's start; a step after the epoch's
        training is over opens one where the loop went on."""
        tl = self.timeline
        ep = tl.epoch
        new_pass = p is not None and (ep is None or ep.train_pass is not p)
        if ep is not None and not new_pass and not (p is None and ep.training_done):
            return
        t0, wall0 = (p.t0, p.wall0) if new_pass and p is not None else self._loop_start(now, wall)
        if ep is not None:
            tl.close_epoch(ep, t0, wall0)
        tl.open_epoch(t0, wall0, p if new_pass else None)

    def _loop_start(self, now: float, wall: float) -> tuple[float, float]:
        """Where a training loop without a loader pass began: after the evaluation that closed the last
        epoch, else at the model's first training call, else now."""
        start, self._resume_at = self._resume_at or self._first_forward or (now, wall), None
        return start

    def _evaluated(
        self, t0: float, wall0: float, t1: float, wall1: float, *, nested: bool, block: bool = False
    ) -> None:
        tl = self.timeline
        if tl.epoch is None and self.step_run and tl.last_epoch is None and "epoch" not in self.manual:
            tl.open_epoch(t0, wall0, None)  # a step-based run's evaluation before its first step counts
        ep = tl.epoch
        if ep is None:
            return  # before training (a sanity check) or after the last epoch closed (a test set)
        tl.evaluated(ep, t0, wall0, t1, wall1, steps=self.steps)
        if self._evaluation_closes(ep, nested=nested, block=block):
            tl.close_epoch(ep, t1, wall1)
            self._resume_at = (t1, wall1)
        if tl.clock is not None:
            tl.restart_clock()  # the next training step should not include the evaluation

    def _evaluation_closes(self, ep: Epoch, *, nested: bool, block: bool) -> bool:
        """An evaluation after the epoch's training ends the epoch; without a loader, one after steps does."""
        if "epoch" in self.manual or self.step_run or nested:
            return False
        return ep.training_done or (block and ep.train_pass is None and ep.steps > 0)
