"""Per-step timing that does not perturb what it measures.

On a GPU every step records two CUDA events on the compute stream (input ready, step done) and nothing
waits for them: finished steps are resolved later, with ``Event.query()`` (non-blocking) at each step,
and all at once at the epoch's end, where the loop synchronises anyway. Per step:

* ``step_s``: from the end of the previous step (or the epoch's start marker) to the end of this one,
  on the device timeline;
* ``compute_s``: from the moment the input was ready on the stream to the end of the step;
* ``data_wait_s``: the rest, the time the device waited for this step's input.

On the CPU the same three values come from ``time.perf_counter``.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

import torch

StepCallback = Callable[[int, float, float, float], None]
"""(step number in the epoch, step_s, data_wait_s, compute_s)."""


class StepClock:
    """Records step boundaries; calls ``on_step`` in step order once a step's times are known."""

    def __init__(self, device: torch.device, on_step: StepCallback):
        self.on_step = on_step
        self.cuda = device.type == "cuda"
        self.device = device
        self._pending: deque[tuple[int, torch.cuda.Event, torch.cuda.Event]] = deque()
        self._pool: list[torch.cuda.Event] = []
        self._prev_end: torch.cuda.Event | None = None
        self._t_prev = 0.0
        self._t_ready = 0.0
        self._ready: torch.cuda.Event | None = None
        self._step = 0

    def _record(self) -> torch.cuda.Event:
        """Record a (pooled) timing event on the current stream."""
        ev = self._pool.pop() if self._pool else torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def epoch_start(self) -> None:
        self._step = 0
        if self.cuda:
            if self._prev_end is not None and not self._pending:
                self._pool.append(self._prev_end)
            self._prev_end = self._record()
        else:
            self._t_prev = time.perf_counter()

    def data_ready(self) -> None:
        """The step's input is ready (on the device's stream); compute starts now.

        Marked again before the step ends (a loop that fetches several batches per step), the latest mark
        counts and the earlier event goes back to the pool.
        """
        if self.cuda:
            if self._ready is not None:
                self._pool.append(self._ready)
            self._ready = self._record()
        else:
            self._t_ready = time.perf_counter()

    def step_end(self) -> None:
        self._step += 1
        if self.cuda:
            end = self._record()
            assert self._ready is not None
            self._pending.append((self._step, self._ready, end))
            self._ready = None
            self.poll()
        else:
            now = time.perf_counter()
            step, compute = now - self._t_prev, now - self._t_ready
            self._t_prev = now
            self.on_step(self._step, step, step - compute, compute)

    def poll(self) -> None:
        """Resolve the steps the device has finished, without waiting."""
        while self._pending and self._pending[0][2].query():
            self._resolve()

    def drain(self) -> None:
        """Wait for the device and resolve every pending step (call where the loop syncs anyway)."""
        if self.cuda:
            torch.cuda.current_stream(self.device).synchronize()
            while self._pending:
                self._resolve()

    def _resolve(self) -> None:
        n, ready, end = self._pending.popleft()
        prev = self._prev_end
        assert prev is not None
        step = prev.elapsed_time(end) / 1000.0
        compute = ready.elapsed_time(end) / 1000.0
        self._pool.extend((prev, ready))
        self._prev_end = end
        self.on_step(n, step, max(step - compute, 0.0), compute)

    @property
    def pending(self) -> int:
        return len(self._pending)
