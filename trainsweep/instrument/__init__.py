"""Timing instrumentation for your own training script: the explicit marks, for loops the automatic hooks
cannot read.

In a trainsweep job the container starts your script under :mod:`trainsweep.instrument.bootstrap`, which
times it with no change to its code: steps end at ``optimizer.step()``, data waits are ``DataLoader``
fetches, an epoch is a pass over the training loader, a loader pass without optimizer steps is
evaluation. Where that does not fit your loop (custom steps, another framework), mark what it cannot see::

    import trainsweep.instrument as ti

    for epoch in range(epochs):
        ti.epoch_start()
        for batch in batches:
            ti.data_ready()
            train_step(batch)
            ti.step_end()
        ti.eval_start()
        accuracy = evaluate()
        ti.eval_end()
        ti.metric("accuracy", accuracy)
        ti.epoch_end()

The first mark of a kind (data, step, epoch, evaluation) switches the automatic detection of that kind
off, so nothing is counted twice. Outside a trainsweep job (no ``TRAINSWEEP_INSTRUMENT``) the marks work
the same and print their lines to stdout, where CloudWatch collects them: batch size from the training
loader, mode full. Hugging Face ``Trainer`` and PyTorch Lightning: use the callbacks in
:mod:`trainsweep.instrument.hf` and :mod:`trainsweep.instrument.lightning`.

This module imports torch only at the first mark.
"""

from __future__ import annotations

import atexit
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainsweep.instrument.session import Session

__all__ = [
    "current_session",
    "data_ready",
    "epoch_end",
    "epoch_start",
    "eval_end",
    "eval_start",
    "metric",
    "step_end",
]


def data_ready() -> None:
    """The next step's input is ready (on the device); the step's compute starts now."""
    current_session().data_ready()


def step_end() -> None:
    """A training step (one optimizer update) ends."""
    current_session().step_end()


def epoch_start(epoch: int | None = None) -> None:
    """An epoch starts (numbered ``epoch``, default: the previous one plus one); closes an open epoch."""
    current_session().epoch_start(epoch)


def epoch_end() -> None:
    """The epoch ends; its time includes the evaluation marked inside it."""
    current_session().epoch_end()


def eval_start() -> None:
    """An evaluation (validation) pass starts; it counts into the current epoch."""
    current_session().eval_start()


def eval_end() -> None:
    """The evaluation pass ends."""
    current_session().eval_end()


def metric(name: str, value: Any) -> None:
    """A metric of the current epoch: ``accuracy`` (or ``val_acc``, ``eval_accuracy``...) is its
    evaluation accuracy; other names are logged as ``trainsweep.metric.<name>``. Non-finite values are
    left out."""
    current_session().metric(name, value)


def current_session() -> Session:
    """This process's session: the job's (set up by the bootstrap), or one started now outside a job."""
    from trainsweep.instrument import session as _session

    current = _session.current()
    if current is None:
        current = _standalone()
    return current


def _standalone() -> Session:
    """A session for a script that runs outside a trainsweep job: hooks installed, totals written at exit."""
    from trainsweep.instrument import auto
    from trainsweep.instrument import session as _session
    from trainsweep.instrument.session import EarlyStop, failure_reason
    from trainsweep.training.contract import InstrumentConfig, is_oom

    cfg = InstrumentConfig.from_env()
    s = _session.open_session(cfg, workload=Path(sys.argv[0]).name or "script")
    auto.install(s)
    _session.activate(s)
    pid = os.getpid()
    previous_hook = sys.excepthook

    def excepthook(kind: type[BaseException], exc: BaseException, tb: Any) -> None:
        if isinstance(exc, EarlyStop) and exc.error is None:
            print(f"trainsweep: {exc}", file=sys.stderr)  # the prediction is written: no failure
            return
        if os.getpid() == pid:
            s.fail(failure_reason(exc), "oom" if is_oom(exc) else "error")
        previous_hook(kind, exc, tb)

    def at_exit() -> None:
        if os.getpid() == pid:  # not in a forked DataLoader worker
            try:
                s.finish()
            except BaseException as e:  # early stop cannot predict: say so, the script is over anyway
                s.fail(str(e), "error")
            s.close()

    sys.excepthook = excepthook
    atexit.register(at_exit)
    return s
