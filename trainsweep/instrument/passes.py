"""What the loader hooks see: one pass over a DataLoader (:class:`LoaderPass`), and the loaders a script
built (:class:`Loaders`): which one trains, which one evaluates, how many samples and batches they hold,
and whether the batch size asked for is one a loader can use.

The session (:mod:`trainsweep.instrument.session`) decides, pass by pass, what a pass was; this module
keeps what it found.
"""

from __future__ import annotations

import os
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader

from trainsweep.instrument import probe
from trainsweep.instrument.outcome import NO_TRAINING, BeyondEdge, EarlyStop
from trainsweep.instrument.settings import Settings
from trainsweep.instrument.stepping import PerStep

if TYPE_CHECKING:
    from trainsweep.instrument.timeline import Timeline
    from trainsweep.predict import SteadyState

KEEP_LOADERS = 16
"""Loaders early-stop mode keeps alive (the first ones built) to find the evaluation loader among them."""


def world_size() -> int:
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return int(os.environ.get("WORLD_SIZE", "1"))


def batches_per_step(p: LoaderPass | None) -> int | None:
    """The batches a step of the pass ``p`` trained (several with gradient accumulation): the median of
    the batches each step took (a prefetching consumer's first step reads one ahead; AMP's
    ``GradScaler`` skips the first few ``optimizer.step()`` calls while its scale overflows, leaving
    their batches to the next step); None before its first step or batch."""
    median = p.step_batches.median() if p is not None else None
    return None if median is None else max(1, median)


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
    step_batches: PerStep = field(default_factory=PerStep)
    """The batches each of the pass's first steps took (:func:`batches_per_step`)."""
    role: str = "unknown"  # unknown | train
    exhausted: bool = False  # yielded len(loader) batches, or abandoned: over once anything else happens
    ended: bool = False
    t_end: float = 0.0
    wall_end: float = 0.0
    first_batch_len: int | None = None
    training_forwards_at_start: int = 0  # the session's count of training-mode forwards before any step

    def stepped(self) -> None:
        """A training step this pass fed ended."""
        self.steps += 1
        self.step_batches.step(self.batches)


class Loaders:
    """The DataLoaders of the script: every one built (weakly, the first :data:`KEEP_LOADERS` held when
    ``keep``: early stop times validation after the script dropped them), the training loader and the
    first one iterated for evaluation."""

    def __init__(self, settings: Settings, *, keep: bool) -> None:
        self.settings = settings
        self.keep = keep
        self.train: DataLoader | None = None
        self.evaluation: DataLoader | None = None
        self.batch_size: int | None = None
        """The training loader's batch (per rank), else its first batch's length."""
        self.last_train_pass: LoaderPass | None = None
        self._refs: list[weakref.ref[DataLoader]] = []
        self._kept: list[DataLoader] = []

    def created(self, loader: DataLoader) -> None:
        if self.keep and len(self._kept) < KEEP_LOADERS:
            self._kept.append(loader)
        self._refs.append(weakref.ref(loader))

    def training(self, p: LoaderPass) -> bool:
        """``p`` is a training pass; True when its loader is the first to train (now :attr:`train`).

        Raises:
            BeyondEdge: the loader holds fewer samples per rank than one batch of the size asked for.
        """
        self.last_train_pass = p
        if self.train is not None:
            return False
        loader = self.train = p.loader
        self.batch_size = loader.batch_size if loader.batch_size is not None else p.first_batch_len
        reason = self.beyond_edge_reason(loader)
        if reason is not None:
            raise BeyondEdge(reason)
        if self.evaluation is loader:
            self.evaluation = None
        return True

    def eval_loader(self) -> DataLoader | None:
        """The evaluation loader: the first one iterated for evaluation, else the first other one built."""
        if self.evaluation is not None:
            return self.evaluation
        train = self.train
        train_data = getattr(train, "dataset", None)
        for ref in self._refs:
            loader = ref()
            if loader is None or loader is train:
                continue
            # A wrapper or copy of the training loader (accelerate's DataLoaderShard around the Trainer's) is
            # not an evaluation loader: timing it would add a pass over the training set as validation.
            if train_data is not None and getattr(loader, "dataset", None) is train_data:
                continue
            return loader
        return None

    def samples(self, per_rank: int | None) -> tuple[int | None, int | None]:
        """Samples per epoch (all ranks) of the training and the evaluation loaders, capped as the run caps
        them; None: unknown."""
        s, world = self.settings, world_size()
        train, evals = self.train, self.eval_loader()
        train_n = probe.loader_samples(train, per_rank, s.max_steps_per_epoch) if train is not None else None
        eval_n = (
            probe.loader_samples(evals, evals.batch_size, s.max_eval_batches) if evals is not None else None
        )
        return (
            train_n * world if train_n is not None else None,
            eval_n * world if eval_n is not None else None,
        )

    def beyond_edge_reason(self, loader: DataLoader | None = None) -> str | None:
        """Why the batch size asked for is one the script cannot use: a loader batching it per rank has
        fewer samples than one batch (``loader``, else every loader built). None: no such loader."""
        s = self.settings
        if not s.batch_size:
            return None
        per_rank = s.batch_size // world_size()
        loaders = [loader] if loader is not None else [ref() for ref in self._refs]
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

    def train_samples(self) -> int | None:
        """Samples of the training loader's pass over every rank (None: no loader with a length trained)."""
        loader = self.train
        if loader is None:
            return None
        batches = loader.batch_sampler
        sampler = loader.sampler if loader.batch_size is not None else getattr(batches, "sampler", None)
        try:
            return len(sampler) * world_size()  # type: ignore[arg-type]
        except TypeError:
            return None


class PassInference:
    """The session's inference from loader passes (:class:`trainsweep.instrument.session.Session` is one):
    a pass that feeds an optimizer step trains, one during whose life no step happens evaluates, and a
    training pass that is over ends its epoch's training (see the session's module docstring)."""

    settings: Settings
    manual: set[str]
    steps: int
    timeline: Timeline
    loaders: Loaders
    monitor: SteadyState | None
    last_pass: LoaderPass | None
    train_pass: LoaderPass | None
    backwards: int
    _live: list[LoaderPass]
    _internal: int
    _passes_started: int
    _training_forwards: int
    _auto_step_pending: bool
    _eval_at: tuple[float, float] | None

    def _evaluated(
        self, t0: float, wall0: float, t1: float, wall1: float, *, nested: bool, block: bool = False
    ) -> None:
        raise NotImplementedError

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
        ep = self.timeline.epoch
        if self.settings.steps is not None:
            return  # step-based: a loader that runs out mid-run is read again, the stretch of steps goes on
        if "epoch" not in self.manual and ep is not None and ep.train_pass is tp and not ep.training_done:
            ep.training_done = True
            self.timeline.mark_boundary(ep)
            ep.touch(tp.t_end, tp.wall_end)

    def _settle(self, keep: LoaderPass | None = None) -> None:
        """End the passes that are exhausted: something else happens (``keep`` is the one asking for more)."""
        done = [p for p in self._live if p.exhausted and p is not keep]
        if not done:
            return
        probe.sync()
        now, wall = probe.now()
        for p in done:
            self._end_pass(p, now, wall)

    def loader_created(self, loader: DataLoader) -> None:
        self.loaders.created(loader)

    def pass_start(self, loader: DataLoader) -> LoaderPass | None:
        """``iter(loader)``: a pass begins; None while the session iterates a loader itself."""
        if self._internal:
            return None
        for q in self._live:
            if q.loader is loader:  # the script left its previous pass over this loader early (break)
                q.exhausted = True
        self._settle_training_pass()
        nested = self.train_pass is not None
        probe.sync()
        p = LoaderPass(loader, *probe.now(), self.steps, nested, probe.loader_batches(loader))
        p.training_forwards_at_start = self._training_forwards
        self._passes_started += 1
        self._live.append(p)
        if not nested and "epoch" not in self.manual:
            self.timeline.restart_clock()
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
        if self.steps != p.steps_at_start or p.loader is self.loaders.train:
            return False
        # before any training pass is known, only a pass under no_grad: gradient accumulation can take
        # more batches than the cap before the first optimizer step
        return self.loaders.train is not None or self._eval_at is not None or not torch.is_grad_enabled()

    def after_next(self, p: LoaderPass, batch: Any) -> None:
        p.batches += 1
        if p.first_batch_len is None:
            p.first_batch_len = probe.batch_length(batch)
        if p.length is not None and p.batches >= p.length:
            p.exhausted = True
        self.last_pass = p
        self._auto_step_pending = False
        tl = self.timeline
        if (
            "data" not in self.manual
            and not tl.ready_marked
            and (self.train_pass is None or p is self.train_pass)
            and tl.clock is not None
        ):
            tl.clock.data_ready()
            tl.ready_marked = True  # the first fetch after a step: later ones are accumulation batches

    def pass_end(self, p: LoaderPass) -> None:
        """The loader ran out (StopIteration), or a cap ended the pass."""
        if not p.ended:
            probe.sync()
            self._end_pass(p, *probe.now())

    def _end_pass(self, p: LoaderPass, t: float, wall: float) -> None:
        p.ended, p.t_end, p.wall_end = True, t, wall
        if p in self._live:
            self._live.remove(p)
        if p.role == "train":
            ep = self.timeline.epoch
            if ep is not None and ep.train_pass is p:
                ep.touch(t, wall)
            return
        if self.steps != p.steps_at_start or not p.batches:
            return  # iterated alongside training steps (a second training loader): not an evaluation
        self._refuse_untimed_pass(p)
        if "eval" in self.manual:
            if self._eval_at is not None and self.loaders.evaluation is None:
                self.loaders.evaluation = p.loader
            return
        if self.loaders.evaluation is None:
            self.loaders.evaluation = p.loader
        self._evaluated(p.t0, p.wall0, t, wall, nested=p.nested)

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

    def _training_pass_of_step(self) -> LoaderPass | None:
        """The pass that yielded the step's batch, when it is a training pass (classified at its first
        step); None: the step came from no loader, or from one that is not training."""
        p = self.last_pass
        self._settle(keep=p)
        if p is None or p.role == "train":
            return p
        if p.role == "unknown" and self.steps == p.steps_at_start:
            self._classify_training(p)
            return p
        return None  # steps happened during that pass's life that were not its own: not a training pass

    def _classify_training(self, p: LoaderPass) -> None:
        p.role = "train"
        if not p.ended:
            self.train_pass = p
        if self.loaders.training(p) and self.monitor is not None and self.monitor.steps_per_epoch is None:
            # until the first epoch ends: one step per batch (gradient accumulation is seen then)
            batches = probe.loader_batches(p.loader)
            cap = self.settings.max_steps_per_epoch
            self.monitor.steps_per_epoch = min(batches, cap) if batches and cap else batches
