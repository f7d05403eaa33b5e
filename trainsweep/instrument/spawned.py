"""Ranks a script starts itself: ``torch.multiprocessing.spawn(fn, nprocs=N)`` (pytorch/examples' ImageNet
with ``--multiprocessing-distributed``, the DDP tutorial's ``multigpu.py``).

The process the command names never steps; its ranks do, each a fresh interpreter that imports the
script as ``__mp_main__`` and calls ``fn(index, *args)``. While the script runs, ``start_processes`` (what
``spawn`` calls) hands each rank a :class:`RankEntry` in place of ``fn``: the rank times its call of
``fn`` as a ``torchrun`` rank is timed (rank ``node_rank * N + index``; rank 0 writes the cell's status and
goes on the log the script's process opened), and the script's own process is marked as having handed the
run over: it writes nothing more unless it fails (a rank's failure reaches it as
``torch.multiprocessing``'s ``ProcessRaisedException``, with that rank's traceback).

The ``fork`` start method is left alone: a forked rank inherits the script's hooks and session.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch.multiprocessing

from trainsweep import sagemaker_contract as sm
from trainsweep.training import contract
from trainsweep.training.output import script_words

_SPAWN_MODULE = "torch.multiprocessing.spawn"
TIMED_METHODS = ("spawn", "forkserver")


@dataclass(frozen=True)
class RankEntry:
    """``fn`` of one ``start_processes`` call, timed in each rank (pickled to the ranks by reference)."""

    fn: Callable[..., Any]
    workload: str
    nprocs: int
    node_rank: int
    started: float  # wall-clock start of the script's process

    def __call__(self, index: int, *args: Any) -> None:
        from trainsweep.instrument import bootstrap

        rank = self.node_rank * self.nprocs + index
        cfg = contract.InstrumentConfig.from_env()
        outcome, exc = bootstrap.time_run(
            cfg, self.workload, rank, functools.partial(_call, self.fn, index, args), continued=self.started
        )
        if exc is not None and outcome.kind is not None:
            raise exc  # torch.multiprocessing passes it to the script's process, traceback and all
        if outcome.kind is not None:
            raise RuntimeError(outcome.reason or outcome.status)


def _call(fn: Callable[..., Any], index: int, args: tuple[Any, ...]) -> BaseException | None:
    try:
        fn(index, *args)
    except BaseException as e:
        return e
    return None


def node_rank() -> int:
    """This host's index among the job's hosts (SageMaker's ``SM_HOSTS`` / ``SM_CURRENT_HOST``)."""
    all_hosts, current = sm.hosts(sm.Paths.from_env())
    return all_hosts.index(current) if current in all_hosts else 0


def wrap_start_processes(session: Any, workload: str) -> Callable[[Any], Any]:
    """A wrapper maker for ``start_processes``: ranks started by spawn time themselves."""
    started = time.time()

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def start_processes(
            fn: Callable[..., Any], args: tuple[Any, ...] = (), nprocs: int = 1, join: bool = True,
            daemon: bool = False, start_method: str = "spawn",
        ) -> Any:  # fmt: skip
            if start_method in TIMED_METHODS and nprocs >= 1 and not isinstance(fn, RankEntry):
                fn = RankEntry(fn, workload, nprocs, node_rank(), started)
                session.handed_over = True
            elif nprocs < 1:
                session.spawned_none = nprocs
            return original(fn, args, nprocs, join, daemon, start_method)

        return start_processes

    return wrap


def targets() -> list[tuple[Any, str]]:
    """Where ``start_processes`` is looked up: the module ``spawn`` calls it from, and the package."""
    return [(sys.modules[_SPAWN_MODULE], "start_processes"), (torch.multiprocessing, "start_processes")]


def rank_failure(exc: BaseException) -> str | None:
    """A spawned rank's failure as the script's process received it, in that rank's words (its exception
    and last frame); None for any other exception."""
    if isinstance(exc, torch.multiprocessing.ProcessRaisedException):
        words = script_words(str(exc).splitlines()) or "failed"
        return f"rank {exc.error_index} failed: {words}"
    if isinstance(exc, torch.multiprocessing.ProcessExitedException):
        how = f"signal {exc.signal_name}" if exc.signal_name else f"exit code {exc.exit_code}"
        return f"rank {exc.error_index} ended with {how}"
    return None
