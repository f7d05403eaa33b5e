"""The timeline of an instrumented run: epochs opened and closed, steps numbered and timed, evaluations
counted, written through the run's writer (:class:`trainsweep.training.timeline.RunWriter`).

The session (:mod:`trainsweep.instrument.session`) decides from the hooks when an epoch opens or closes,
when a step ends and what was an evaluation; this module keeps the books and writes them. Step times come
from :class:`trainsweep.training.timing.StepClock` (CUDA events, no per-step sync).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import torch

from trainsweep.instrument.passes import LoaderPass
from trainsweep.instrument.settings import Settings
from trainsweep.predict import SteadyState
from trainsweep.training.timeline import RunFacts, RunWriter, gpu_memory
from trainsweep.training.timing import StepClock


def device() -> torch.device:
    """The device the script computes on now: its current GPU once it used CUDA, else the CPU."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


@dataclass(eq=False)
class Epoch:
    """One epoch of the timeline (``t``: ``perf_counter``; ``wall``: ``time.time``)."""

    index: int
    t0: float
    wall0: float
    train_pass: LoaderPass | None = None
    steps: int = 0
    validation_s: float = 0.0
    evals: int = 0
    training_done: bool = False
    boundary_marked: bool = False
    written: bool = False
    last_t: float = 0.0
    last_wall: float = 0.0

    def touch(self, t: float, wall: float) -> None:
        """Activity at ``t``: an epoch closed at the end of the run closes at its last activity."""
        if t >= self.last_t:
            self.last_t, self.last_wall = t, wall


class Timeline:
    """One rank's epochs, steps and evaluations. ``header`` gives the run's header when the run's first
    epoch is written (the facts the loaders told by then); ``flags`` are written with it."""

    def __init__(
        self,
        settings: Settings,
        writer: RunWriter,
        monitor: SteadyState | None,
        header: Callable[[], RunFacts],
        flags: list[str],
    ) -> None:
        self.settings = settings
        self.writer = writer
        self.monitor = monitor
        self.header = header
        self.flags = flags
        self.step_marker: str | None = None
        self.clock: StepClock | None = None
        self.ready_marked = False
        """The step's input was marked ready (the first fetch after a step; later ones accumulate)."""
        self.epoch: Epoch | None = None
        self.last_epoch: Epoch | None = None
        self.last_index = 0
        self.closed_index: int | None = None
        self.first_t: float | None = None
        self.last_close_t: float | None = None
        self.run_t0: float | None = None
        self.t_start = time.perf_counter()
        self.step_ids: deque[tuple[int, int]] = deque()
        """(epoch, step in epoch) of the steps the clock has not resolved yet."""
        self.evals_done = 0
        self.eval_at_steps: list[int] = []  # steps before each evaluation began
        self.eval_s: list[float] = []  # how long each took
        self.evals_per_epoch: int | None = None  # in the first closed epoch

    @property
    def started(self) -> bool:
        """The run's header and RUN_START are written."""
        return self.run_t0 is not None

    def start(self, *, continued: float | None = None) -> None:
        """The process starts: the initialisation interval opens. ``continued``: the wall-clock start of
        the process that started this rank, which opened the interval in this log."""
        if continued is None:
            self.writer.init_start()
        else:
            self.t_start -= max(time.time() - continued, 0.0)

    def mark_steps(self, marker: str) -> None:
        """How steps are marked, written when it is first known or changes."""
        if marker == self.step_marker:
            return
        self.step_marker = marker
        if self.started:
            self.writer.step_marker(marker)

    # ---- epochs ----------------------------------------------------------------------------------

    def ensure_written(self, ep: Epoch) -> None:
        """Write what precedes the epoch's first step: the run's header (once), then EPOCH_START."""
        if self.run_t0 is None:
            self.run_t0 = ep.t0
            facts = self.header()
            init_s = max(ep.t0 - self.t_start, 0.0)
            self.writer.run_start(facts, init_s=init_s, wall=ep.wall0, flags=self.flags)
            if self.step_marker is not None:
                self.writer.step_marker(self.step_marker)
        if not ep.written:
            ep.written = True
            self.writer.epoch_start(ep.index, epochs=self.settings.epochs, wall=ep.wall0)

    def open_epoch(
        self, t0: float, wall0: float, train_pass: LoaderPass | None, index: int | None = None
    ) -> None:
        self.last_index = self.last_index + 1 if index is None else index
        ep = Epoch(self.last_index, t0, wall0, train_pass)
        ep.touch(t0, wall0)
        self.epoch = self.last_epoch = ep
        if self.first_t is None:
            self.first_t = t0

    def mark_boundary(self, ep: Epoch) -> None:
        """The epoch's training steps are over: its last step and the next are no steady steps."""
        if self.clock is not None:
            self.clock.drain()
        if self.monitor is not None and ep.steps and not ep.boundary_marked:
            self.monitor.epoch_boundary()
            if self.monitor.epochs_done == 1:  # the epoch cap counts in steps of the first whole epoch
                self.monitor.steps_per_epoch = ep.steps
        ep.boundary_marked = True

    def close_epoch(self, ep: Epoch, t_end: float, wall_end: float) -> None:
        self.mark_boundary(ep)
        self.ensure_written(ep)
        validation = ep.validation_s if ep.evals else None
        self.writer.epoch_end(
            ep.index, validation_s=validation, epoch_s=max(t_end - ep.t0, 0.0), wall=wall_end
        )
        self.epoch = None
        self.closed_index = ep.index
        self.last_close_t = t_end
        if self.evals_per_epoch is None:
            self.evals_per_epoch = ep.evals

    # ---- steps -----------------------------------------------------------------------------------

    def _on_step(self, n: int, step_s: float, wait_s: float, compute_s: float) -> None:
        """The clock resolved a step: write it under the epoch it was counted in."""
        epoch, k = self.step_ids.popleft() if self.step_ids else (self.last_index, n)
        self.writer.step(epoch, k, step_s, wait_s, compute_s)
        if self.monitor is not None:
            self.monitor.add(step_s)

    def restart_clock(self) -> None:
        """A new step boundary now: pending steps resolved, the next step measured from here."""
        where = device()
        if self.clock is not None:
            self.clock.drain()
        if self.clock is None or self.clock.device != where:
            self.clock = StepClock(where, self._on_step)
        self.clock.epoch_start()
        self.clock.data_ready()  # until the input is marked ready, the whole step counts as compute
        self.ready_marked = False

    def step(self, ep: Epoch, now: float, wall: float) -> StepClock:
        """A training step of ``ep`` ends (at ``now``): counted, its times to come from the clock."""
        clock = self.clock
        if clock is None:
            self.restart_clock()
            clock = self.clock
            assert clock is not None
        if not ep.written:
            self.ensure_written(ep)
        ep.steps += 1
        self.step_ids.append((ep.index, ep.steps))
        clock.step_end()
        clock.data_ready()
        self.ready_marked = False
        ep.touch(now, wall)
        return clock

    # ---- evaluations -----------------------------------------------------------------------------

    def evaluated(self, ep: Epoch, t0: float, wall0: float, t1: float, wall1: float, *, steps: int) -> None:
        """An evaluation of ``ep`` from ``t0`` to ``t1``, after ``steps`` training steps of the run."""
        ep.validation_s += t1 - t0
        ep.evals += 1
        self.evals_done += 1
        self.eval_at_steps.append(steps)
        self.eval_s.append(t1 - t0)
        ep.touch(t1, wall1)
        self.ensure_written(ep)
        self.writer.evaluation(ep.index, wall0=wall0, wall1=wall1)

    # ---- the end ---------------------------------------------------------------------------------

    def run_end(self, *, stopped: bool) -> None:
        """The run's totals and RUN_STOP (no fit time for a run early stop ended)."""
        assert self.run_t0 is not None
        fit_s = None
        if not stopped and self.first_t is not None and self.last_close_t is not None:
            fit_s = self.last_close_t - self.first_t
        where = self.clock.device if self.clock is not None else device()
        total_s = time.perf_counter() - self.run_t0
        self.writer.run_end(fit_s=fit_s, gpu_memory=gpu_memory(where), total_s=total_s)
