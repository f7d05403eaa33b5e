"""The per-process recorder of an instrumented script: turns loader passes, optimizer steps and explicit
marks into epochs and steps, written as the built-in worker writes them, and stops early when the step
time is known.

One :class:`Session` per process. Its inputs come from two sides:

* the automatic hooks (:mod:`trainsweep.instrument.auto`): a loader pass starts, yields a batch, ends;
  an optimizer steps; a module is called;
* the explicit API (:mod:`trainsweep.instrument`) and the framework callbacks: data ready, step end,
  epoch start/end, evaluation start/end, a metric.

The first explicit mark of a kind (``data``, ``step``, ``epoch``, ``eval``) switches the automatic
detection of that kind off, so nothing is counted twice. Automatic rules:

* a training step ends at each ``optimizer.step()`` of the first optimizer that steps; in a script that
  never built an optimizer, at each backward pass (``step_marker``: optimizer | backward | explicit);
* a loader pass during which an optimizer steps is a training pass; it opens an epoch, back-dated to the
  pass's start (only its first step tells);
* a pass during whose life no optimizer step happens is an evaluation pass, timed as validation of the
  open epoch; one that follows the epoch's training pass closes the epoch when it ends, one inside a
  training pass (mid-epoch evaluation) does not;
* otherwise an epoch closes when the next training pass starts, or at the end of the run (at its last
  activity, so that saving the model after training is not part of the last epoch);
* a pass is over at StopIteration, or once anything else happens after it yielded ``len(loader)``
  batches (consumers that count batches never ask for more), or when its loader is iterated again.
* an outermost ``no_grad`` / ``inference_mode`` block that runs a model in evaluation mode at least twice
  and iterates no loader is an evaluation too (:mod:`trainsweep.instrument.loops`); without a loader, one
  that follows training steps closes the epoch, and the next epoch starts where it ended;
* a step-based run (``steps`` set) is one epoch: one stretch of steps with its evaluations, whatever the
  loaders do;
* with neither a step nor a backward pass, the run fails at the end of the first loader pass that ran the
  model in training mode, or once it has run it for ``first_step_timeout_s``.

Step times come from :class:`trainsweep.training.timing.StepClock` (CUDA events, no per-step sync);
the session synchronises the device once per loader pass and evaluation, never per step (a block with
gradients off records a CUDA event and synchronises only when it turns out to be an evaluation).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader

from trainsweep.instrument import earlystop, probe
from trainsweep.instrument.events import RunFacts, RunWriter, StdoutLog
from trainsweep.instrument.loops import BACKWARD, EXPLICIT, OPTIMIZER, ForwardWatch, GradOffBlock
from trainsweep.instrument.outcome import NO_TRAINING, BeyondEdge, EarlyStop, cell_status
from trainsweep.instrument.outcome import failure_reason as failure_reason  # the bootstrap's, from here
from trainsweep.instrument.settings import Settings
from trainsweep.logs import mllog
from trainsweep.predict import SteadyState
from trainsweep.training.contract import InstrumentConfig, job_gpus_said
from trainsweep.training.runlog import RunLog
from trainsweep.training.timing import StepClock

KINDS = frozenset({"data", "step", "epoch", "eval"})
"""What an explicit mark can take over from the automatic hooks."""
ACCURACY_NAMES = frozenset({"accuracy", "acc", "eval_accuracy", "eval_acc", "val_accuracy", "val_acc"})
METRIC_PREFIX = mllog.NS + "metric."
CAPTURE_STEPS = 3
"""Training steps over which the model is looked for; the module hooks are removed after them."""
KEEP_LOADERS = 16
"""Loaders early-stop mode keeps alive (the first ones built) to find the evaluation loader among them."""


@dataclass(eq=False)
class LoaderPass:
    """One iteration of a DataLoader, from ``iter()`` until it is over."""

    loader: DataLoader  # held: a loader built in the ``for`` statement lives only as long as its pass
    t0: float
    wall0: float
    steps_at_start: int
    nested: bool  # started while a training pass was still running
    length: int | None  # len(loader)
    batches: int = 0
    steps: int = 0
    role: str = "unknown"  # unknown | train
    exhausted: bool = False  # yielded len(loader) batches, or abandoned: over once anything else happens
    ended: bool = False
    t_end: float = 0.0
    wall_end: float = 0.0
    first_batch_len: int | None = None
    training_forwards_at_start: int = 0  # the session's count of training-mode forwards before any step


@dataclass(eq=False)
class _Epoch:
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
        if t >= self.last_t:
            self.last_t, self.last_wall = t, wall


def _device() -> torch.device:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _sync() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _now() -> tuple[float, float]:
    return time.perf_counter(), time.time()


def _world_size() -> int:
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return int(os.environ.get("WORLD_SIZE", "1"))


def _refuse_cpu_steps_on_a_gpu_job() -> None:
    """Before the first optimizer step is counted: a job with GPUs whose script has not touched CUDA trains
    on the CPU, and its timings would be filed under a GPU instance type (the built-in workloads refuse
    the same way). Ends the run with the reason."""
    try:
        gpus = job_gpus_said() or 0
    except ValueError:
        return  # unreadable: the launcher's own checks say so; nothing to compare with here
    if gpus > 0 and not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        why = "" if torch.cuda.is_available() else " (and this torch cannot see a GPU)"
        raise EarlyStop(
            None,
            f"the job has {gpus} GPU(s) (SM_NUM_GPUS={gpus}) but the script's first optimizer step ran on "
            f"the CPU{why}: its timings would be filed under a GPU instance type; move the model and its "
            "batches to the GPU (torch.device('cuda'))",
        )


def _metric_value(value: Any) -> Any:
    """A JSON value for a metric: tensors and numpy scalars become floats; None when not finite."""
    if isinstance(value, torch.Tensor):
        value = value.detach().float().mean().item()
    elif hasattr(value, "item") and not isinstance(value, int | float | str):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class Session:
    """Records one process's training run; see the module docstring for the rules."""

    def __init__(self, settings: Settings, log: RunLog, *, rank: int = 0) -> None:
        self.settings = settings
        self.writer = RunWriter(log, rank=rank)
        self.primary = rank == 0
        self.manual: set[str] = set()
        self.flags: list[str] = []
        self.steps = 0
        self.prediction: dict[str, Any] | None = None
        self.loader_batch_size: int | None = None
        self.monitor = SteadyState(settings.rule) if settings.mode == "early-stop" else None
        self.finder = probe.ModelFinder(CAPTURE_STEPS if self.monitor is not None else 0)
        self.release_capture: Callable[[], None] | None = None  # set by the hooks that feed the finder
        self.clock: StepClock | None = None
        self.epoch: _Epoch | None = None
        self.last_pass: LoaderPass | None = None  # the pass that yielded the latest batch
        self.train_pass: LoaderPass | None = None  # the training pass still running
        self._t_start = time.perf_counter()
        self._live: list[LoaderPass] = []
        self._last_train_pass: LoaderPass | None = None
        self._last_epoch: _Epoch | None = None
        self._last_index = 0
        self._closed_index: int | None = None
        self._first_t: float | None = None
        self._last_close_t: float | None = None
        self._run_t0: float | None = None
        self._finished = False
        self._internal = 0
        self._ready_marked = False
        self._auto_step_pending = False
        self._eval_at: tuple[float, float] | None = None
        self._step_ids: deque[tuple[int, int]] = deque()
        self._loaders: list[weakref.ref[DataLoader]] = []
        self._kept: list[DataLoader] = []
        self._train_loader: DataLoader | None = None
        self._eval_loader: DataLoader | None = None
        self._optimizer: weakref.ref[Any] | None = None
        # loops without a loader or an optimizer (loops.py)
        self.step_marker: str | None = None
        self.backwards = 0
        self._optimizers_built = 0
        self._passes_started = 0
        self._evals_done = 0
        self._eval_at_steps: list[int] = []  # steps before each evaluation began
        self._eval_s: list[float] = []  # how long each took
        self._evals_per_epoch: int | None = None  # in the first closed epoch
        self._training_forwards = 0  # training-mode forwards with gradients on, before the first step
        self._first_forward: tuple[float, float] | None = None
        self._resume_at: tuple[float, float] | None = None  # where a loop without a loader goes on
        self._block: GradOffBlock | None = None
        self.forwards = ForwardWatch(self.forward_called)
        self.handed_over = False
        """The script started its ranks itself (``torch.multiprocessing.spawn``): they time the run."""
        if self.monitor is not None and settings.steps is not None:
            self.monitor.steps_per_epoch = settings.steps  # the run is one stretch of that many steps

    @property
    def step_run(self) -> bool:
        """A step-based run (``steps`` set): one stretch of steps, no epochs to find."""
        return self.settings.steps is not None

    # ---- the run's start and the epochs ----------------------------------------------------------

    def start(self, *, continued: float | None = None) -> None:
        """The process starts (before the script): the initialisation interval opens. ``continued``: the
        wall-clock start of the process that started this rank, which opened the interval in this log."""
        if continued is None:
            self.writer.init_start()
        else:
            self._t_start -= max(time.time() - continued, 0.0)

    def _ensure_written(self, ep: _Epoch) -> None:
        """Write what precedes the epoch's first step: the run's header (once), then EPOCH_START."""
        if self._run_t0 is None:
            self._run_t0 = ep.t0
            facts = self._facts()
            self.writer.run_start(
                facts, init_s=max(ep.t0 - self._t_start, 0.0), wall=ep.wall0, flags=self.flags
            )
            if self.step_marker is not None:
                self.writer.step_marker(self.step_marker)
        if not ep.written:
            ep.written = True
            self.writer.epoch_start(ep.index, epochs=self.settings.epochs, wall=ep.wall0)

    def _facts(self) -> RunFacts:
        """The header; flags a script that ignored the batch size (the log then says what it trained with)."""
        s = self.settings
        world = _world_size()
        observed = self.loader_batch_size
        if observed is not None and s.batch_size is not None and observed != s.batch_size // world:
            self.flags.append(
                f"the script ignored --{s.batch_size_arg} {s.batch_size}: "
                f"its training loader batches {observed} per rank"
            )
        per_rank = observed or (s.batch_size // world if s.batch_size else None)
        train = self._train_loader
        evals = self.eval_loader()
        train_n = probe.loader_samples(train, per_rank, s.max_steps_per_epoch) if train is not None else None
        eval_n = (
            probe.loader_samples(evals, evals.batch_size, s.max_eval_batches) if evals is not None else None
        )
        device = self.clock.device if self.clock is not None else _device()
        gpus = torch.cuda.device_count() if device.type == "cuda" else 0
        return RunFacts(
            workload=s.workload,
            global_batch_size=observed * world if observed is not None else s.batch_size,
            train_samples=train_n * world if train_n is not None else None,
            eval_samples=eval_n * world if eval_n is not None else None,
            epochs=s.epochs,
            gpus=gpus,
            world_size=world,
            platform=torch.cuda.get_device_name(device) if gpus else "cpu",
            command_line=" ".join(sys.argv),
            instance_type=s.instance_type,
            mode=s.mode,
            steps=s.steps,
        )

    def _on_step(self, n: int, step_s: float, wait_s: float, compute_s: float) -> None:
        epoch, k = self._step_ids.popleft() if self._step_ids else (self._last_index, n)
        self.writer.step(epoch, k, step_s, wait_s, compute_s)
        if self.monitor is not None:
            self.monitor.add(step_s)

    def _restart_clock(self) -> None:
        """A new step boundary now: pending steps resolved, the next step measured from here."""
        device = _device()
        if self.clock is not None:
            self.clock.drain()
        if self.clock is None or self.clock.device != device:
            self.clock = StepClock(device, self._on_step)
        self.clock.epoch_start()
        self.clock.data_ready()  # until the input is marked ready, the whole step counts as compute
        self._ready_marked = False

    def _open_epoch(
        self, t0: float, wall0: float, train_pass: LoaderPass | None, index: int | None = None
    ) -> None:
        self._last_index = self._last_index + 1 if index is None else index
        ep = _Epoch(self._last_index, t0, wall0, train_pass)
        ep.touch(t0, wall0)
        self.epoch = self._last_epoch = ep
        if self._first_t is None:
            self._first_t = t0

    def _mark_boundary(self, ep: _Epoch) -> None:
        """The epoch's training steps are over: its last step and the next are no steady steps."""
        if self.clock is not None:
            self.clock.drain()
        if self.monitor is not None and ep.steps and not ep.boundary_marked:
            self.monitor.epoch_boundary()
            if self.monitor.epochs_done == 1:  # the epoch cap counts in steps of the first whole epoch
                self.monitor.steps_per_epoch = ep.steps
        ep.boundary_marked = True

    def _close_epoch(self, ep: _Epoch, t_end: float, wall_end: float) -> None:
        self._mark_boundary(ep)
        self._ensure_written(ep)
        validation = ep.validation_s if ep.evals else None
        self.writer.epoch_end(
            ep.index, validation_s=validation, epoch_s=max(t_end - ep.t0, 0.0), wall=wall_end
        )
        self.epoch = None
        self._closed_index = ep.index
        self._last_close_t = t_end
        if self._evals_per_epoch is None:
            self._evals_per_epoch = ep.evals

    def _settle_training_pass(self) -> None:
        """The training pass is over before something else begins: its epoch's training is over.

        Decided lazily, not when the loader runs out: prefetching consumers (accelerate, Lightning) reach
        the end of the loader one batch before the last step.
        """
        self._settle()
        tp = self.train_pass
        if tp is None or not tp.ended:
            return
        self.train_pass = None
        ep = self.epoch
        if self.step_run:
            return  # a loader that runs out mid-run is read again: the stretch of steps goes on
        if "epoch" not in self.manual and ep is not None and ep.train_pass is tp and not ep.training_done:
            ep.training_done = True
            self._mark_boundary(ep)
            ep.touch(tp.t_end, tp.wall_end)

    def _settle(self, keep: LoaderPass | None = None) -> None:
        """End the passes that are exhausted: something else happens (``keep`` is the one asking for more)."""
        done = [p for p in self._live if p.exhausted and p is not keep]
        if not done:
            return
        _sync()
        now, wall = _now()
        for p in done:
            self._end_pass(p, now, wall)

    # ---- automatic hooks -------------------------------------------------------------------------

    def loader_created(self, loader: DataLoader) -> None:
        if self.monitor is not None and len(self._kept) < KEEP_LOADERS:
            # early stop may time validation after the script returned and dropped its loaders
            self._kept.append(loader)
        self._loaders.append(weakref.ref(loader))

    def pass_start(self, loader: DataLoader) -> LoaderPass | None:
        """``iter(loader)``: a pass begins; None while the session iterates a loader itself."""
        if self._internal:
            return None
        for q in self._live:
            if q.loader is loader:  # the script left its previous pass over this loader early (break)
                q.exhausted = True
        self._settle_training_pass()
        nested = self.train_pass is not None
        _sync()
        p = LoaderPass(loader, *_now(), self.steps, nested, probe.loader_batches(loader))
        p.training_forwards_at_start = self._training_forwards
        self._passes_started += 1
        self._live.append(p)
        if not nested and "epoch" not in self.manual:
            self._restart_clock()
        return p

    def before_next(self, p: LoaderPass) -> bool:
        """True when a cap ends the pass now (the iterator raises StopIteration)."""
        if p.ended:
            return True
        self._settle(keep=p)
        s = self.settings
        cap = None
        if p.role == "train":
            cap = s.max_steps_per_epoch
        elif self._looks_like_eval(p):
            cap = s.max_eval_batches
        if cap is not None and p.batches >= cap:
            self.pass_end(p)
            return True
        return False

    def _looks_like_eval(self, p: LoaderPass) -> bool:
        if self.steps != p.steps_at_start or p.loader is self._train_loader:
            return False
        # before any training pass is known, only a pass under no_grad: gradient accumulation can take
        # more batches than the cap before the first optimizer step
        return self._train_loader is not None or self._eval_at is not None or not torch.is_grad_enabled()

    def after_next(self, p: LoaderPass, batch: Any) -> None:
        p.batches += 1
        if p.first_batch_len is None:
            p.first_batch_len = probe.batch_length(batch)
        if p.length is not None and p.batches >= p.length:
            p.exhausted = True
        self.last_pass = p
        self._auto_step_pending = False
        if (
            "data" not in self.manual
            and not self._ready_marked
            and (self.train_pass is None or p is self.train_pass)
            and self.clock is not None
        ):
            self.clock.data_ready()
            self._ready_marked = True  # the first fetch after a step: later ones are accumulation batches

    def pass_end(self, p: LoaderPass) -> None:
        """The loader ran out (StopIteration), or a cap ended the pass."""
        if not p.ended:
            _sync()
            self._end_pass(p, *_now())

    def _end_pass(self, p: LoaderPass, t: float, wall: float) -> None:
        p.ended, p.t_end, p.wall_end = True, t, wall
        if p in self._live:
            self._live.remove(p)
        if p.role == "train":
            if self.epoch is not None and self.epoch.train_pass is p:
                self.epoch.touch(t, wall)
            return
        if self.steps != p.steps_at_start or not p.batches:
            return  # iterated alongside training steps (a second training loader): not an evaluation
        self._refuse_untimed_pass(p)
        if "eval" in self.manual:
            if self._eval_at is not None and self._eval_loader is None:
                self._eval_loader = p.loader
            return
        if self._eval_loader is None:
            self._eval_loader = p.loader
        self._evaluated(p.t0, p.wall0, t, wall, nested=p.nested)

    def optimizer_stepped(self, optimizer: Any) -> None:
        """``optimizer.step()`` returned: a training step ends (unless steps are marked explicitly)."""
        if self._internal:
            return
        first = self._optimizer() if self._optimizer is not None else None
        if first is None:
            self._optimizer = weakref.ref(optimizer)
        elif first is not optimizer:
            return  # one step per iteration: a second optimizer (GAN, wrappers) steps in the same one
        if "step" in self.manual:
            self._raise_if_stopped()
            return
        if self.step_marker == BACKWARD:
            # an optimizer built after backward passes began marking steps: its steps mark them from the
            # next one on (this one's backward pass has just counted it)
            self._set_marker(OPTIMIZER)
            return
        if self.steps == 0:
            _refuse_cpu_steps_on_a_gpu_job()
        self._set_marker(OPTIMIZER)
        self._count_step()
        self._auto_step_pending = True

    def optimizer_built(self) -> None:
        """An optimizer was built: its ``step()`` ends the steps, not the backward passes."""
        if not self._internal:
            self._optimizers_built += 1

    def backward_done(self) -> None:
        """A backward pass returned: a step ends here while no optimizer was built (manual updates)."""
        if self._internal:
            return
        self.backwards += 1
        if "step" in self.manual or self._optimizers_built or self._optimizer is not None:
            return
        if self.steps == 0:
            _refuse_cpu_steps_on_a_gpu_job()
        self._set_marker(BACKWARD)
        self._count_step()

    def _set_marker(self, marker: str) -> None:
        """How steps are marked, written to the run's log when it is first known or changes."""
        if marker == self.step_marker:
            return
        self.step_marker = marker
        if self._run_t0 is not None:
            self.writer.step_marker(marker)

    def forward_called(self, module: nn.Module) -> None:
        """A top-level module call (while the forward watch is on: before the first step, in blocks with
        gradients off): where a loop without a loader starts, and the bound on a loop with nothing to time."""
        if self._internal or self.steps or not module.training or not torch.is_grad_enabled():
            return
        now = _now()
        self._training_forwards += 1
        if self.clock is None:
            self._restart_clock()  # no loader pass started the first step: it starts at the model's call
        if self._first_forward is None:
            self._first_forward = now
            return
        waited = now[0] - self._first_forward[0]
        if waited > self.settings.first_step_timeout_s and not self.backwards and "step" not in self.manual:
            raise EarlyStop(None, NO_TRAINING.format(where=f"for {waited:.0f} s"))

    def _refuse_untimed_pass(self, p: LoaderPass) -> None:
        """A whole loader pass fed the model in training mode and nothing was ever timed: fail now, at the
        first epoch's end, not after the whole run."""
        if self.steps or self.backwards or "step" in self.manual:
            return
        whole = p.length is not None and p.batches >= p.length
        if whole and self._training_forwards > p.training_forwards_at_start:
            raise EarlyStop(
                None, NO_TRAINING.format(where=f"through a whole pass of a DataLoader ({p.batches} batches)")
            )

    def grad_off_start(self) -> None:
        """An outermost ``torch.no_grad()`` / ``torch.inference_mode()`` block begins."""
        if self._internal or self._block is not None or "eval" in self.manual:
            return
        if not self.steps and not self.step_run:
            return  # before training: not an epoch's evaluation
        self._block = GradOffBlock.begin(
            calls=self.forwards.eval_calls, passes=self._passes_started, evals=self._evals_done
        )
        self.forwards.start()

    def grad_off_end(self, *, failed: bool = False) -> None:
        """The block ends: an evaluation when the model ran in it (see :mod:`loops`)."""
        b, self._block = self._block, None
        if b is None:
            return
        if self.steps:
            self.forwards.stop()
        if failed or not b.is_evaluation(
            calls=self.forwards.eval_calls, passes=self._passes_started, evals=self._evals_done
        ):
            return
        took = b.duration()
        self._settle_training_pass()
        t1, wall1 = _now()
        nested = self.train_pass is not None and not self.train_pass.ended
        self._evaluated(t1 - took, wall1 - took, t1, wall1, nested=nested, block=True)

    @property
    def capturing(self) -> bool:
        return not self.finder.done

    def module_called(self, module: nn.Module) -> None:
        if not self._internal:
            self.finder.called(module)

    def module_returned(self, module: nn.Module) -> None:
        if not self._internal:
            self.finder.returned(module)

    # ---- steps -----------------------------------------------------------------------------------

    def _count_step(self) -> None:
        p = self.last_pass
        self._settle(keep=p)
        now, wall = _now()
        if p is not None and p.role == "unknown" and self.steps != p.steps_at_start:
            p = None  # steps happened during that pass's life that were not its own: not a training pass
        if p is not None and p.role == "unknown":
            self._classify_training(p)
        if p is not None and p.role != "train":
            p = None
        self._epoch_for_step(p, now, wall)
        ep = self.epoch
        assert ep is not None
        if self.clock is None:
            self._restart_clock()
        assert self.clock is not None
        self._ensure_written(ep)
        self.steps += 1
        ep.steps += 1
        if p is not None:
            p.steps += 1
        if self.steps == 1 and self._block is None:
            self.forwards.stop()  # the loop is found: module calls are watched only in no_grad blocks now
        self._step_ids.append((ep.index, ep.steps))
        self.clock.step_end()
        self.clock.data_ready()
        self._ready_marked = False
        ep.touch(*_now())
        if not self.finder.done:
            self.finder.step_done()
            if self.finder.done and self.release_capture is not None:
                self.release_capture()  # a Python call per module call: off once the model is known
                self.release_capture = None
        if (
            self.monitor is not None
            and self.prediction is None
            and self.monitor.steps_per_epoch is not None  # without a loader: known once an epoch is over
            and earlystop.should_stop(self.monitor, ep.steps, self.clock.device)
        ):
            self._stop(ep)
        self._raise_if_stopped()

    def _epoch_for_step(self, p: LoaderPass | None, now: float, wall: float) -> None:
        """Open (and close) epochs at a step: a new training pass opens one, back-dated to the pass's start;
        a step after the epoch's training is over opens one where the loop went on. Marked epochs and a
        step-based run's one stretch only open at a step when none is open."""
        ep = self.epoch
        if "epoch" in self.manual:
            if ep is None:
                self._open_epoch(now, wall, None)
            return
        if self.step_run:
            if ep is None:  # the one stretch of a step-based run opens at its first step
                self._open_epoch(*((p.t0, p.wall0) if p is not None else self._loop_start(now, wall)), p)
            return
        new_pass = p is not None and (ep is None or ep.train_pass is not p)
        if ep is None or new_pass or (p is None and ep.training_done):
            t0, wall0 = (p.t0, p.wall0) if new_pass and p is not None else self._loop_start(now, wall)
            if ep is not None:
                self._close_epoch(ep, t0, wall0)
            self._open_epoch(t0, wall0, p if new_pass else None)

    def _loop_start(self, now: float, wall: float) -> tuple[float, float]:
        """Where a training loop without a loader pass began: after the evaluation that closed the last
        epoch, else at the model's first training call, else now."""
        start, self._resume_at = self._resume_at or self._first_forward or (now, wall), None
        return start

    def _classify_training(self, p: LoaderPass) -> None:
        p.role = "train"
        self._last_train_pass = p
        if not p.ended:
            self.train_pass = p
        loader = p.loader
        if self._train_loader is None:
            self._train_loader = loader
            self.loader_batch_size = loader.batch_size if loader.batch_size is not None else p.first_batch_len
            reason = self.beyond_edge_reason(loader)
            if reason is not None:
                raise BeyondEdge(reason)
            if self.monitor is not None and self.monitor.steps_per_epoch is None:
                # until the first epoch ends: one step per batch (gradient accumulation is seen then)
                batches = probe.loader_batches(loader)
                cap = self.settings.max_steps_per_epoch
                self.monitor.steps_per_epoch = min(batches, cap) if batches and cap else batches
            if self._eval_loader is loader:
                self._eval_loader = None

    def _raise_if_stopped(self) -> None:
        if self.prediction is not None:
            raise EarlyStop(self.prediction)  # the script caught the first one and went on

    # ---- explicit marks --------------------------------------------------------------------------

    def claim(self, *kinds: str) -> None:
        """Switch the automatic detection of ``kinds`` off before the first mark (framework callbacks)."""
        unknown = set(kinds) - KINDS
        if unknown:
            raise ValueError(f"unknown kinds {sorted(unknown)}; known: {sorted(KINDS)}")
        self.manual.update(kinds)

    def data_ready(self) -> None:
        self.manual.add("data")
        if self.clock is None:
            self._restart_clock()
        assert self.clock is not None
        self.clock.data_ready()
        self._ready_marked = True

    def step_end(self) -> None:
        if "step" not in self.manual:
            self.manual.add("step")
            self._set_marker(EXPLICIT)
            if self._auto_step_pending:
                # the optimizer hook has just counted this very step: the mark takes over from here on
                self._auto_step_pending = False
                self._raise_if_stopped()
                return
        self._count_step()

    def epoch_start(self, epoch: int | None = None) -> None:
        self.manual.add("epoch")
        self._settle()
        _sync()
        now, wall = _now()
        if self.epoch is not None:
            self._close_epoch(self.epoch, now, wall)
        self._restart_clock()
        self._open_epoch(now, wall, None, epoch)

    def epoch_end(self) -> None:
        self.manual.add("epoch")
        self._settle()
        if self.epoch is not None:
            _sync()
            self._close_epoch(self.epoch, *_now())

    def eval_start(self) -> None:
        self.manual.add("eval")
        self._settle_training_pass()
        _sync()
        self._eval_at = _now()

    def eval_end(self) -> None:
        self.manual.add("eval")
        self._settle()
        if self._eval_at is None:
            return
        _sync()
        (t0, wall0), self._eval_at = self._eval_at, None
        nested = self.train_pass is not None and not self.train_pass.ended
        self._evaluated(t0, wall0, *_now(), nested=nested)

    def _evaluated(
        self, t0: float, wall0: float, t1: float, wall1: float, *, nested: bool, block: bool = False
    ) -> None:
        ep = self.epoch
        if ep is None and self.step_run and self._last_epoch is None and "epoch" not in self.manual:
            self._open_epoch(t0, wall0, None)  # a step-based run's evaluation before its first step counts
            ep = self.epoch
        if ep is None:
            return  # before training (a sanity check) or after the last epoch closed (a test set)
        ep.validation_s += t1 - t0
        ep.evals += 1
        self._evals_done += 1
        self._eval_at_steps.append(self.steps)
        self._eval_s.append(t1 - t0)
        ep.touch(t1, wall1)
        self._ensure_written(ep)
        self.writer.evaluation(ep.index, wall0=wall0, wall1=wall1)
        if self._evaluation_closes(ep, nested=nested, block=block):
            self._close_epoch(ep, t1, wall1)
            self._resume_at = (t1, wall1)
        if self.clock is not None:
            self._restart_clock()  # the next training step should not include the evaluation

    def _evaluation_closes(self, ep: _Epoch, *, nested: bool, block: bool) -> bool:
        """An evaluation after the epoch's training ends the epoch; without a loader, one after steps does."""
        if "epoch" in self.manual or self.step_run or nested:
            return False
        return ep.training_done or (block and ep.train_pass is None and ep.steps > 0)

    def metric(self, name: str, value: Any) -> None:
        """A metric of the current (or the last closed) epoch; accuracies become EVAL_ACCURACY."""
        v = _metric_value(value)
        if v is None:
            return
        index = self.epoch.index if self.epoch is not None else self._closed_index
        accuracy = index is not None and name.lower() in ACCURACY_NAMES  # no epoch: no epoch's accuracy
        self.writer.metric(mllog.EVAL_ACCURACY if accuracy else METRIC_PREFIX + name, v, index)

    # ---- early stop ------------------------------------------------------------------------------

    def eval_loader(self) -> DataLoader | None:
        """The evaluation loader: the first one iterated for evaluation, else the first other one built."""
        if self._eval_loader is not None:
            return self._eval_loader
        train = self._train_loader
        train_data = getattr(train, "dataset", None)
        for ref in self._loaders:
            loader = ref()
            if loader is None or loader is train:
                continue
            # A wrapper or copy of the training loader (accelerate's DataLoaderShard around the Trainer's) is
            # not an evaluation loader: timing it would add a pass over the training set as validation.
            if train_data is not None and getattr(loader, "dataset", None) is train_data:
                continue
            return loader
        return None

    @contextmanager
    def internal(self) -> Iterator[None]:
        """Loader passes, optimizer steps and module calls inside are the session's own: not recorded."""
        self._internal += 1
        try:
            yield
        finally:
            self._internal -= 1

    def _stop(self, ep: _Epoch) -> None:
        """Predict the full run from the steps watched, write it, and end the script (EarlyStop)."""
        assert self.monitor is not None and self.clock is not None
        self.clock.drain()
        self.prediction = self.predict(ep, self.monitor.stop_reason() or "epochs")
        raise EarlyStop(self.prediction)

    def predict(self, ep: _Epoch | None, reason: str) -> dict[str, Any]:
        """The prediction of the full run, written to the log and the prediction file.

        Raises:
            EarlyStop: with ``error`` set, when no prediction can be made.
        """
        assert self.monitor is not None
        s = self.settings
        ep = ep or self._last_epoch or _Epoch(self._last_index, 0.0, 0.0)
        try:
            shape, validation = self._run_shape(ep)
            if not validation.measured:
                self.writer.evaluation(ep.index)
            epochs = s.epochs or max(self._last_index, 1)
            pred = earlystop.prediction(
                self.monitor, shape, validation, rule=s.rule, epochs=epochs, reason=reason
            )
        except earlystop.CannotPredictError as e:
            raise EarlyStop(None, str(e)) from None
        if validation.error is not None:
            flag = (
                f"early stop could not time validation batches ({validation.error}): "
                "the prediction leaves validation out"
            )
            self.flags.append(flag)
            self.writer.flag(flag)
        value = earlystop.prediction_value(s.run_name, s.batch_size, pred, validation)
        if s.steps is not None:
            value["steps"] = s.steps
        self.writer.prediction(value, pred)
        if self.primary and s.prediction_file is not None:
            s.prediction_file.parent.mkdir(parents=True, exist_ok=True)
            s.prediction_file.write_text(json.dumps(value, indent=2))
        return value

    def _run_shape(self, ep: _Epoch) -> tuple[earlystop.EpochShape, earlystop.ValidationTiming]:
        """The full run's steps per epoch and its validation: from the loaders (timing a few evaluation
        batches), or, for a step-based run or a loop without a loader, from the steps and evaluations seen.

        Raises:
            earlystop.CannotPredictError: the steps per epoch are unknown.
        """
        s = self.settings
        if s.steps is not None:
            count = earlystop.evaluations_in_run(self._eval_at_steps, s.steps)
            measured = earlystop.ValidationTiming(float(count), list(self._eval_s), measured=True)
            return earlystop.EpochShape(s.steps, float(s.steps)), measured
        assert self.monitor is not None
        known = self.monitor.steps_per_epoch
        if self._train_loader is None and known is not None:
            per_epoch = float(self._evals_per_epoch or 0)
            measured = earlystop.ValidationTiming(per_epoch, list(self._eval_s), measured=True)
            return earlystop.EpochShape(known, float(known)), measured
        tp = ep.train_pass or self._last_train_pass
        # gradient accumulation: several batches per optimizer step (a prefetching consumer reads one ahead)
        per_step = max(1, round(tp.batches / tp.steps)) if tp is not None and tp.steps else 1
        shape = earlystop.epoch_shape(
            self._train_loader,
            batch_size=self.loader_batch_size,
            cap=s.max_steps_per_epoch,
            batches_per_step=per_step,
        )
        with self.internal():
            validation = earlystop.time_validation(
                self.eval_loader(),
                self.finder.model,
                cap=s.max_eval_batches,
                n=s.rule.validation_batches,
                sync=_sync,
            )
        return shape, validation

    def beyond_edge_reason(self, loader: DataLoader | None = None) -> str | None:
        """Why the batch size asked for is one the script cannot use: a loader batching it per rank has
        fewer samples than one batch (``loader``, else every loader built). None: no such loader."""
        s = self.settings
        if not s.batch_size:
            return None
        per_rank = s.batch_size // _world_size()
        loaders = [loader] if loader is not None else [ref() for ref in self._loaders]
        for candidate in loaders:
            if candidate is None or candidate.batch_size != per_rank:
                continue
            try:
                samples = len(candidate.sampler)  # type: ignore[arg-type]
            except TypeError:
                continue
            if samples < per_rank:
                return (
                    f"batch size {s.batch_size} is beyond what this script can train: its DataLoader holds "
                    f"{samples} samples per rank, fewer than one batch of {per_rank}"
                )
        return None

    # ---- the end ---------------------------------------------------------------------------------

    def finish(self) -> None:
        """The script ended well: close the open epoch, predict if early stop never fired, write the totals.

        Raises:
            EarlyStop: with ``error`` set, when early-stop mode cannot predict.
        """
        if self._finished:
            return
        self._finished = True
        self.forwards.stop()
        self._settle()
        if self.clock is not None:
            self.clock.drain()
        stopped = self.prediction is not None
        ep = self.epoch
        if ep is not None and not stopped:
            self._close_epoch(ep, ep.last_t, ep.last_wall)
        if self._run_t0 is None:
            return
        if self.monitor is not None and not stopped and self.steps:
            self.prediction = self.predict(None, "epochs")
        fit_s = None
        if not stopped and self._first_t is not None and self._last_close_t is not None:
            fit_s = self._last_close_t - self._first_t
        device = self.clock.device if self.clock is not None else _device()
        memory = None
        if device.type == "cuda":  # how much of the GPU this batch size needs: headroom per cell
            memory = {
                "peak_allocated_bytes": torch.cuda.max_memory_allocated(device),
                "peak_reserved_bytes": torch.cuda.max_memory_reserved(device),
                "total_bytes": torch.cuda.get_device_properties(device).total_memory,
            }
        self.writer.run_end(fit_s=fit_s, gpu_memory=memory, total_s=time.perf_counter() - self._run_t0)

    def fail(self, reason: str, kind: str) -> None:
        """The run failed: the FAILURE event (every rank) and the legacy line."""
        self._finished = True
        self.writer.failure(reason, kind)

    def status(self, status: str, reason: str | None) -> dict[str, Any]:
        """The cell status file's content (:func:`trainsweep.training.contract.cell_status_path`)."""
        return cell_status(
            self.settings.run_name,
            self.settings.batch_size,
            status,
            reason,
            prediction=self.prediction,
            steps=self.steps,
            loader_batch_size=self.loader_batch_size,
            flags=self.flags,
            step_marker=self.step_marker,
            train_samples=self._train_samples(),
        )

    def _train_samples(self) -> int | None:
        """Samples of the training loader's pass over every rank (None: no loader with a length trained)."""
        loader = self._train_loader
        if loader is None:
            return None
        batches = loader.batch_sampler
        sampler = loader.sampler if loader.batch_size is not None else getattr(batches, "sampler", None)
        try:
            return len(sampler) * _world_size()  # type: ignore[arg-type]
        except TypeError:
            return None

    def close(self) -> None:
        self.writer.close()


# ---- the current session ----------------------------------------------------------------------------

_current: Session | None = None


def current() -> Session | None:
    """The session of this process, if one is active."""
    return _current


def activate(session: Session | None) -> None:
    """Make ``session`` the process's session (None: none)."""
    global _current
    _current = session


def open_session(
    cfg: InstrumentConfig | None, *, workload: str, rank: int | None = None, continued: float | None = None
) -> Session:
    """A started session for ``cfg`` (a job's cell) or for a script outside a job (``cfg`` None);
    ``continued``: see :meth:`Session.start`."""
    rank = int(os.environ.get("RANK", "0")) if rank is None else rank
    if cfg is None:
        session = Session(Settings.standalone(workload=workload), StdoutLog(rank=rank), rank=rank)
    else:
        log = RunLog(Path(cfg.log_file), rank=rank)
        session = Session(Settings.from_config(cfg, workload=workload), log, rank=rank)
    session.start(continued=continued)
    return session
