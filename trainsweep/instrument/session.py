"""The per-process recorder of an instrumented script, the facade its hooks call: it infers from loader
passes, optimizer steps and explicit marks where epochs, steps and evaluations are, and hands them to the
run's timeline (:mod:`trainsweep.instrument.timeline`, written as the built-in worker writes its own), the
loaders it found to :mod:`trainsweep.instrument.passes`, and the steps to early stop
(:mod:`trainsweep.instrument.earlystop`). Its parts: the inference from loader passes
(:mod:`trainsweep.instrument.passes`), where epochs open and close (:mod:`trainsweep.instrument.epochs`),
the explicit marks (:mod:`trainsweep.instrument.marks`), and the run's header facts
(:mod:`trainsweep.instrument.facts`); this module holds the automatic hooks, the steps, early stop's
trigger and the end of the run.

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

import os
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader

from trainsweep.instrument import earlystop, facts, probe, script_flops, usage
from trainsweep.instrument.loops import BACKWARD, OPTIMIZER, ForwardWatch, GradOffBlock
from trainsweep.instrument.marks import ACCURACY_NAMES as ACCURACY_NAMES  # the callbacks', from here
from trainsweep.instrument.marks import ExplicitMarks
from trainsweep.instrument.outcome import NO_TRAINING, EarlyStop, cell_status
from trainsweep.instrument.outcome import failure_reason as failure_reason  # the bootstrap's, from here
from trainsweep.instrument.passes import LoaderPass, Loaders, batches_per_step, world_size
from trainsweep.instrument.settings import Settings
from trainsweep.instrument.stepping import OptimizerSteps
from trainsweep.instrument.timeline import Epoch, Timeline, device
from trainsweep.logs import mllog
from trainsweep.predict import SteadyState
from trainsweep.training.contract import InstrumentConfig
from trainsweep.training.runlog import RunLog, StdoutLog
from trainsweep.training.timeline import RunFacts, RunWriter

CAPTURE_STEPS = 3
"""Training steps over which the model is looked for; the module hooks are removed after them."""


class Session(ExplicitMarks):
    """Records one process's training run; see the module docstring for the rules."""

    def __init__(self, settings: Settings, log: RunLog, *, rank: int = 0) -> None:
        self.settings = settings
        self.writer = RunWriter(log, rank=rank)
        self.primary = rank == 0
        self.manual: set[str] = set()
        self.flags: list[str] = []
        self.steps = 0
        self.prediction: dict[str, Any] | None = None
        self.monitor = SteadyState(settings.rule) if settings.mode == "early-stop" else None
        self.loaders = Loaders(settings, keep=self.monitor is not None)
        self.timeline = Timeline(settings, self.writer, self.monitor, self._facts, self.flags)
        self.forecast = (
            earlystop.Forecast(settings, self.monitor, self.timeline, self.loaders) if self.monitor else None
        )
        self.finder = probe.ModelFinder(CAPTURE_STEPS if self.monitor is not None else 0)
        self.release_capture: Callable[[], None] | None = None  # set by the hooks that feed the finder
        self.usage = usage.UsageWatch()  # the precision and compile the script trains with
        self._usage_written = False
        self.last_pass: LoaderPass | None = None  # the pass that yielded the latest batch
        self.train_pass: LoaderPass | None = None  # the training pass still running
        self._live: list[LoaderPass] = []
        self._finished = False
        self._internal = 0
        self._auto_step_pending = False
        self._eval_at: tuple[float, float] | None = None
        self._optimizer: weakref.ref[Any] | None = None
        # loops without a loader or an optimizer (loops.py)
        self.backwards = 0
        self.stepping = OptimizerSteps()  # steps under way, backward passes inside and outside them
        self._optimizers_built = 0
        self._passes_started = 0
        self._training_forwards = 0  # training-mode forwards with gradients on, before the first step
        self._first_forward: tuple[float, float] | None = None
        self._resume_at: tuple[float, float] | None = None  # where a loop without a loader goes on
        self._block: GradOffBlock | None = None
        self.forwards = ForwardWatch(self.forward_called)
        self.handed_over = False
        """The script started its ranks itself (``torch.multiprocessing.spawn``): they time the run."""
        self.spawned_none: int | None = None
        """``nprocs`` of a ``spawn`` that started no rank (0: a count taken from the GPUs of a machine
        without any), for the reason a run that trained nothing gives."""
        if self.monitor is not None and settings.steps is not None:
            self.monitor.steps_per_epoch = settings.steps  # the run is one stretch of that many steps

    @property
    def epoch(self) -> Epoch | None:
        """The open epoch."""
        return self.timeline.epoch

    @property
    def step_marker(self) -> str | None:
        return self.timeline.step_marker

    @property
    def loader_batch_size(self) -> int | None:
        return self.loaders.batch_size

    def start(self, *, continued: float | None = None) -> None:
        """The process starts (before the script): the initialisation interval opens. ``continued``: the
        wall-clock start of the process that started this rank, which opened the interval in this log."""
        self.timeline.start(continued=continued)

    def _facts(self) -> RunFacts:
        """The header (:func:`trainsweep.instrument.facts.run_facts`) on the device the steps are timed on."""
        clock = self.timeline.clock
        where = clock.device if clock is not None else device()
        return facts.run_facts(self.settings, self.loaders, where, self.flags)

    # ---- automatic hooks -------------------------------------------------------------------------

    def optimizer_stepping(self, optimizer: Any) -> None:
        """``optimizer.step()`` was called: backward passes until it returns are its closure's."""
        self.stepping.started(optimizer, counted=not self._internal)

    def optimizer_stepped(self, optimizer: Any) -> None:
        """``optimizer.step()`` returned: a training step ends (unless steps are marked explicitly)."""
        self.stepping.ended(optimizer)
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
        if self.timeline.step_marker == BACKWARD:
            # an optimizer built after backward passes began marking steps: its steps mark them from the
            # next one on (this one's backward pass has just counted it)
            self.timeline.mark_steps(OPTIMIZER)
            return
        if self.steps == 0:
            facts.refuse_cpu_steps_on_a_gpu_job()
        self.timeline.mark_steps(OPTIMIZER)
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
        self.stepping.backward()
        if "step" in self.manual or self._optimizers_built or self._optimizer is not None:
            return
        if self.steps == 0:
            facts.refuse_cpu_steps_on_a_gpu_job()
        self.timeline.mark_steps(BACKWARD)
        self._count_step()

    def forward_called(self, module: nn.Module) -> None:
        """A top-level module call (while the forward watch is on: before the first step, in blocks with
        gradients off): where a loop without a loader starts, and the bound on a loop with nothing to time."""
        if self._internal or self.steps or not module.training or not torch.is_grad_enabled():
            return
        now = probe.now()
        self._training_forwards += 1
        if self.timeline.clock is None:
            self.timeline.restart_clock()  # no loader pass started the first step: it starts at the call
        if self._first_forward is None:
            self._first_forward = now
            return
        waited = now[0] - self._first_forward[0]
        if waited > self.settings.first_step_timeout_s and not self.backwards and "step" not in self.manual:
            raise EarlyStop(None, NO_TRAINING.format(where=f"for {waited:.0f} s"))

    def grad_off_start(self) -> None:
        """An outermost ``torch.no_grad()`` / ``torch.inference_mode()`` block begins."""
        if self._internal or self._block is not None or "eval" in self.manual:
            return
        if not self.steps and not self.step_run:
            return  # before training: not an epoch's evaluation
        self._block = GradOffBlock.begin(
            calls=self.forwards.eval_calls, passes=self._passes_started, evals=self.timeline.evals_done
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
            calls=self.forwards.eval_calls, passes=self._passes_started, evals=self.timeline.evals_done
        ):
            return
        took = b.duration()
        self._settle_training_pass()
        t1, wall1 = probe.now()
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
        """A training step ends: in the pass that fed it (when that is a training pass), in its epoch."""
        p = self._training_pass_of_step()
        now, wall = probe.now()
        ep = self._epoch_for_step(p, now, wall)
        self.steps += 1
        if p is not None:
            p.stepped()
        if self.steps == 1:
            self._first_step()
        clock = self.timeline.step(ep, now, wall)
        if self.steps <= usage.SAMPLE_STEPS:
            self.usage.forward.step_ended()
        if self.steps == usage.SAMPLE_STEPS:
            self._write_usage()
        if not self.finder.done:
            self._step_seen_by_finder()
        if (
            self.monitor is not None
            and self.prediction is None
            and self.monitor.steps_per_epoch is not None  # without a loader: known once an epoch is over
            and earlystop.should_stop(self.monitor, ep.steps, clock.device)
        ):
            self._stop(ep)
        self._raise_if_stopped()

    def _first_step(self) -> None:
        """Once per run, at its first training step (the loop is found): per-run work that needs the loop
        goes here, off the per-step path."""
        if self._block is None:
            self.forwards.stop()  # module calls are watched only in no_grad blocks from now on

    def _write_usage(self) -> None:
        """What the sampled steps trained with (:mod:`trainsweep.instrument.usage`), written once after
        the header; the hook that saw it goes."""
        if self._usage_written:
            return
        self._usage_written = True
        self.usage.stop()
        for key, value in self.usage.events():
            self.writer.header(key, value)
        per_step = self._batches_per_step()
        if per_step is not None:
            self.writer.header(mllog.BATCHES_PER_STEP, per_step)

    def _batches_per_step(self) -> float | None:
        """The batches a step trains (above 1: gradient accumulation): the training loader's batches per
        step (a loop that calls backward twice on one batch, a GAN or SAM, still trains one), or without a
        loader the backward passes per step of any optimizer (:mod:`trainsweep.instrument.stepping`:
        a closure's passes inside ``optimizer.step`` evaluate the step's own batch again, a GAN's
        discriminator and generator each step after their own pass); None when neither says."""
        per_pass = batches_per_step(self.train_pass or self.loaders.last_train_pass)
        if per_pass is not None:
            return float(per_pass)
        if self.timeline.step_marker != BACKWARD and (per := self.stepping.backwards_per_step()):
            return float(per)
        return None

    def _write_flops(self) -> None:
        """The FLOPs of a training step, counted once from the recorded forward pass on the meta device
        (:mod:`trainsweep.instrument.script_flops`): after training, so no timed step pays for it."""
        if not self.primary or self.handed_over or not self.steps:
            return
        watch = self.usage
        calls = watch.forward.counted(self._batches_per_step() or 1.0)  # two views: two calls
        with self.internal():  # its module calls and backward pass are not the script's
            value = script_flops.event(
                calls, dtype=watch.precision, world_size=world_size(), compiled=watch.compiled,
                overflow=watch.forward.overflow,
            )  # fmt: skip
        self.writer.header(mllog.FLOPS, value)

    def _step_seen_by_finder(self) -> None:
        self.finder.step_done()
        if self.finder.done and self.release_capture is not None:
            self.release_capture()  # a Python call per module call: off once the model is known
            self.release_capture = None

    def _raise_if_stopped(self) -> None:
        if self.prediction is not None:
            raise EarlyStop(self.prediction)  # the script caught the first one and went on

    # ---- early stop ------------------------------------------------------------------------------

    def eval_loader(self) -> DataLoader | None:
        """The evaluation loader: the first one iterated for evaluation, else the first other one built."""
        return self.loaders.eval_loader()

    def beyond_edge_reason(self, loader: DataLoader | None = None) -> str | None:
        """Why the batch size asked for is one the script cannot use (:meth:`Loaders.beyond_edge_reason`)."""
        return self.loaders.beyond_edge_reason(loader)

    @contextmanager
    def internal(self) -> Iterator[None]:
        """Loader passes, optimizer steps and module calls inside are the session's own: not recorded."""
        self._internal += 1
        try:
            yield
        finally:
            self._internal -= 1

    def _stop(self, ep: Epoch) -> None:
        """Predict the full run from the steps watched, write it, and end the script (EarlyStop)."""
        assert self.monitor is not None and self.timeline.clock is not None
        self.timeline.clock.drain()
        self.prediction = self.predict(ep, self.monitor.stop_reason() or "epochs")
        raise EarlyStop(self.prediction)

    def predict(self, ep: Epoch | None, reason: str) -> dict[str, Any]:
        """The prediction of the full run, written to the log and the prediction file.

        Raises:
            EarlyStop: with ``error`` set, when no prediction can be made.
        """
        assert self.forecast is not None
        return self.forecast.predict(
            ep, reason, model=self.finder.model, internal=self.internal, per_step=self._batches_per_step()
        )

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
        tl = self.timeline
        if tl.clock is not None:
            tl.clock.drain()
        stopped = self.prediction is not None
        ep = tl.epoch
        if ep is not None and not stopped:
            tl.close_epoch(ep, ep.last_t, ep.last_wall)
        if not tl.started:
            return
        self._write_usage()  # a run of fewer steps than the sample
        self._write_flops()
        if self.monitor is not None and not stopped and self.steps:
            self.prediction = self.predict(None, "epochs")
        tl.run_end(stopped=stopped)

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
            loader_batch_size=self.loaders.batch_size,
            flags=self.flags,
            step_marker=self.timeline.step_marker,
            train_samples=self.loaders.train_samples(),
        )

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
