"""Runs a user's training script under the instrumentation and reports the cell's outcome.

``python -m trainsweep.instrument.bootstrap script.py --batch-size 64 --epochs 2 ...`` (or the same under
``torchrun --nproc_per_node=G -m``; or ``... bootstrap -m pkg.train ARGS``), with the cell's
:class:`~trainsweep.training.contract.InstrumentConfig` named by ``TRAINSWEEP_INSTRUMENT``. The hooks go
in before the script runs, the script runs as ``__main__`` with its own ``sys.argv`` and its folder first
on ``sys.path``, and the outcome is classified: rank 0 writes the cell status file, every rank exits with
the contract's code (0 also after early stop, 1 error, 2 unreadable settings, 3 out of memory or a
batch the script cannot use, 143 SIGTERM).
"""

from __future__ import annotations

import json
import os
import runpy
import signal
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainsweep.instrument import auto, spawned
from trainsweep.instrument.outcome import BeyondEdge, EarlyStop, cell_status, failure_reason
from trainsweep.instrument.session import Session, activate, open_session
from trainsweep.training import contract

NO_STEPS = (
    "the script never called optimizer.step() nor backward(): nothing to time "
    "(a custom loop? mark steps with trainsweep.instrument; see docs/byo.md)"
)
USAGE = "usage: python -m trainsweep.instrument.bootstrap (SCRIPT | -m MODULE) [ARGS...]"


class Stopped(BaseException):
    """SIGTERM arrived (StopTrainingJob, MaxRuntimeExceeded, local mode's stop). Not an Exception, so that
    the script's ``except Exception`` does not swallow it."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Stopped("stopped by SIGTERM")


@dataclass(frozen=True)
class Outcome:
    status: str  # ok | oom | error | stopped
    reason: str | None = None
    kind: str | None = None  # the FAILURE event's kind; None when ok
    code: int = contract.EXIT_OK


OK = Outcome("ok")


def _error(reason: str) -> Outcome:
    return Outcome("error", reason, "error", contract.EXIT_ERROR)


def _exit_status(e: SystemExit) -> int:
    """The process status ``sys.exit(code)`` stands for (Python's rules: None is 0, text is 1)."""
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    print(e.code, file=sys.stderr)
    return 1


def run_script(script: Path, args: list[str]) -> BaseException | None:
    """Run ``script`` as ``__main__`` with ``args``; returns what it raised (None when it returned)."""
    if not script.is_file():
        return FileNotFoundError(f"the entry point {script} does not exist (working directory {Path.cwd()})")
    sys.argv = [str(script), *args]
    sys.path.insert(0, str(script.resolve().parent))
    try:
        runpy.run_path(str(script), run_name="__main__")
    except BaseException as e:
        return e
    return None


def run_module(module: str, args: list[str]) -> BaseException | None:
    """Run ``module`` as ``python -m module args`` would (the working folder first on the path)."""
    sys.argv = [module, *args]
    if sys.path[:1] != [""] and Path(sys.path[0] or ".").resolve() != Path.cwd():
        sys.path.insert(0, str(Path.cwd()))
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except BaseException as e:
        return e
    return None


def _program(args: list[str]) -> tuple[str, Callable[[], BaseException | None]] | None:
    """(workload name, runner) of ``SCRIPT ARGS...`` or ``-m MODULE ARGS...``; None when neither."""
    if not args or args[0] in ("-h", "--help"):
        return None
    if args[0] == "-m":
        if len(args) < 2:
            return None
        return args[1], lambda: run_module(args[1], args[2:])
    script = Path(args[0])
    return script.name, lambda: run_script(script, args[1:])


def classify(exc: BaseException | None, session: Session) -> Outcome:
    """The cell's outcome from what the script raised and what the session saw."""
    if isinstance(exc, Stopped):
        return Outcome("stopped", str(exc), "stopped", contract.EXIT_STOPPED)
    edge = _beyond_edge(exc, session)
    if edge is not None:
        return edge
    if isinstance(exc, EarlyStop) and exc.error is not None:
        return _error(exc.error)
    if session.prediction is not None:
        return OK  # early stop, also when the script turned our exception into its own on the way out
    if isinstance(exc, SystemExit):
        status = _exit_status(exc)
        if status == 0:
            exc = None
        elif session.steps == 0:
            return _error(f"the script exited with code {status} before its first training step")
        else:
            return _error(f"the script exited with code {status}")
    if exc is not None:
        traceback.print_exception(exc)
        if contract.is_oom(exc):
            reason = contract.oom_reason(session.settings.batch_size, exc)
            return Outcome("oom", reason, "oom", contract.EXIT_OOM)
        return _error(failure_reason(exc))
    if session.steps == 0:
        return _error(_no_steps(session))
    return OK


def _no_steps(session: Session) -> str:
    """Why nothing was timed: no step in the script's process, or ranks it asked for and never got."""
    if session.spawned_none is None:
        return NO_STEPS
    return (
        f"the script started no rank: torch.multiprocessing.spawn(nprocs={session.spawned_none}) (a count "
        "taken from torch.cuda.device_count() is 0 on a machine without a GPU), and it never called "
        "optimizer.step() nor backward() itself: nothing to time"
    )


def _beyond_edge(exc: BaseException | None, session: Session) -> Outcome | None:
    """A batch size the script cannot use (a training set smaller than one batch): infeasible, as out of
    memory is, with what the script then said when it failed (a loop over no batch often divides by 0)."""
    if isinstance(exc, BeyondEdge):
        reason = exc.error
    elif session.steps == 0 and session.prediction is None:
        reason = session.beyond_edge_reason()
        if reason is not None and exc is not None and not isinstance(exc, SystemExit | EarlyStop):
            reason += f" (the script then failed: {failure_reason(exc)})"
    else:
        return None
    if reason is None:
        return None
    return Outcome(contract.INFEASIBLE, reason, contract.INFEASIBLE, contract.EXIT_OOM)


def _finish(session: Session, outcome: Outcome) -> Outcome:
    """Write the end of a good run; early-stop mode may still fail to predict here."""
    try:
        session.finish()
    except EarlyStop as e:
        return _error(e.error or str(e))
    return outcome


def write_status(path: Path, status: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(status, indent=1))
    tmp.replace(path)  # the supervisor never reads half a file


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    program = _program(args)
    if program is None:
        print(USAGE, file=sys.stderr)
        return contract.EXIT_BAD_INPUT
    workload, run = program
    rank = int(os.environ.get("RANK", "0"))
    try:
        cfg = contract.InstrumentConfig.from_env()
    except (OSError, TypeError, ValueError) as e:
        print(f"trainsweep: cannot read {os.environ.get(contract.INSTRUMENT_ENV)}: {e}", file=sys.stderr)
        return contract.EXIT_BAD_INPUT
    signal.signal(signal.SIGTERM, _on_sigterm)
    outcome, _ = time_run(cfg, workload, rank, run)
    return outcome.code


def time_run(
    cfg: contract.InstrumentConfig | None,
    workload: str,
    rank: int,
    run: Callable[[], BaseException | None],
    *,
    continued: float | None = None,
) -> tuple[Outcome, BaseException | None]:
    """Time ``run`` (the script, or a rank it started) as one rank of the cell: the hooks in, the run, its
    outcome classified and written (the status file by rank 0). ``continued``: the wall-clock start of the
    process that started this one (:mod:`trainsweep.instrument.spawned`), whose log this rank goes on.
    Returns the outcome and what ``run`` raised."""
    try:
        session = open_session(cfg, workload=workload, rank=rank, continued=continued)
    except (TypeError, ValueError) as e:  # an early-stop rule the predictor refuses
        assert cfg is not None  # outside a job the settings are the defaults
        reason = f"bad instrumentation settings: {failure_reason(e)}"
        print(f"trainsweep: {reason}", file=sys.stderr)
        if rank == 0:
            write_status(Path(cfg.status_file), cell_status(cfg.run_name, cfg.batch_size, "error", reason))
        return Outcome("error", reason, "error", contract.EXIT_BAD_INPUT), None
    installed = auto.install(session)
    activate(session)
    exc = run()
    # from here on a SIGTERM must not cut the status file short
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    outcome = _handed_over(exc) if session.handed_over else classify(exc, session)
    if outcome.kind is None and not session.handed_over:
        outcome = _finish(session, outcome)
    if outcome.kind is not None:
        session.fail(outcome.reason or outcome.status, outcome.kind)
        print(f"trainsweep: {outcome.reason}", file=sys.stderr, flush=True)
    if rank == 0 and cfg is not None and (outcome.kind is not None or not session.handed_over):
        write_status(Path(cfg.status_file), session.status(outcome.status, outcome.reason))
    session.close()
    installed.remove()
    activate(None)
    return outcome, exc


def _handed_over(exc: BaseException | None) -> Outcome:
    """The outcome of a process whose ranks timed themselves (rank 0 wrote the status): its own failure
    only, a rank's as ``torch.multiprocessing`` raised it here (with that rank's traceback)."""
    if isinstance(exc, Stopped):
        return Outcome("stopped", str(exc), "stopped", contract.EXIT_STOPPED)
    if isinstance(exc, SystemExit):
        status = _exit_status(exc)
        return OK if status == 0 else _error(f"the script exited with code {status}")
    if exc is not None:
        traceback.print_exception(exc)
        return _error(spawned.rank_failure(exc) or failure_reason(exc))
    return OK


if __name__ == "__main__":
    sys.exit(main())
