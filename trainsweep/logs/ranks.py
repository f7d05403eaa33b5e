"""Runs written as one log file per rank (MO833's ``[MO833] Rank,<r>,...`` files, MLLOG files of one
rank each): which files are the ranks of one run, and the one run they make.

The rule (docs/log-formats.md, "Runs written as one file per rank"): log files of **one folder** whose
names are the same once their last number is removed (:func:`rank_key`: ``TEST_NODE-…-1625079915.4443638``
and ``TEST_NODE-…-1625079915.4444025``; ``train-rank0.log`` and ``train-rank1.log``), of one dialect, each
holding the timings of exactly **one** rank, and those ranks all different, are the ranks of one run.
Files that all show the same rank are repetitions (MLPerf's ``result_0.txt`` … ``result_9.txt``), not
ranks; files that show some rank twice and others once cannot be told apart and are left as they are,
with a problem that says so. The ranks expected are ``0 .. N-1`` with N the world size a header gives,
else the largest rank seen plus one: a rank without a readable file is a problem of the merged run, which
is still made from the others.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import PurePosixPath

from trainsweep.logs.model import Epoch, RunTimings

_LAST_NUMBER = re.compile(r"\d+(?:\.\d+)*(?=\D*$)")
_STATUS_ORDER = ("complete", "partial", "empty", "failed", "unreadable")


def primary_rank(ranks: dict[int, dict[int, Epoch]]) -> int:
    """The rank whose epochs are the run's: rank 0, else the lowest."""
    return 0 if 0 in ranks else min(ranks)


def ranks_to_run(run: RunTimings, ranks: dict[int, dict[int, Epoch]]) -> None:
    """A per-rank reader's epochs (rank -> epoch index -> epoch) as the run's ranks and epochs."""
    if not ranks:
        return
    run.ranks = {r: [eps[i] for i in sorted(eps)] for r, eps in sorted(ranks.items())}
    run.epochs = run.ranks[primary_rank(ranks)]


def rank_key(path: str) -> str:
    """The file's name without its suffix and without its last number: what the ranks of one run share."""
    stem = PurePosixPath(path).name
    for suffix in (".txt", ".out", ".log"):
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    return _LAST_NUMBER.sub("", stem, count=1)


def only_rank(run: RunTimings) -> int | None:
    """The rank of a log that holds the timings of exactly one rank (with steps); else None."""
    if len(run.ranks) != 1:
        return None
    ((rank, epochs),) = run.ranks.items()
    return rank if any(e.steps for e in epochs) else None


def merge_ranks(
    files: list[tuple[int, str, RunTimings]], name: str, left_out: list[tuple[str, str]]
) -> RunTimings:
    """One run from the per-rank runs ``(rank, path, run)`` (ranks all different, see :func:`only_rank`).

    The primary rank (0, else the lowest) gives the epochs, init and header; ``total_s`` is the latest
    any rank ended; the status is the worst of the ranks'. Each rank's problems are kept, prefixed with its
    rank and file. ``left_out`` are ``(path, why)`` of files named like these ranks that gave no rank
    timings; they and the ranks missing from ``0 .. N-1`` become problems of the run.
    ``extra["rank_files"]`` maps each rank to its file.
    """
    by_rank = sorted(files, key=lambda t: t[0])
    merged = _merged_timings(by_rank, name)
    for rank, path, run in by_rank:
        for p in run.problems:
            merged.problems.append(replace(p, message=f"rank {rank} ({path}): {p.message}"))
    _note_absent_ranks(merged, by_rank, left_out)
    return merged


def _merged_timings(by_rank: list[tuple[int, str, RunTimings]], name: str) -> RunTimings:
    """The run's timings: the primary rank's, with the end, status, reads and files of every rank."""
    rank0, _, primary = next((t for t in by_rank if t[0] == 0), by_rank[0])
    return RunTimings(
        name=name,
        dialect=primary.dialect,
        computing_system=primary.computing_system,
        batch_size=primary.batch_size,
        run_index=primary.run_index,
        header=replace(primary.header),
        init_s=primary.init_s,
        fit_s=primary.fit_s,
        total_s=max((r.total_s for _, _, r in by_rank if r.total_s is not None), default=None),
        model_save_s=primary.model_save_s,
        real_time=primary.real_time,
        epochs=primary.ranks[rank0],
        ranks={rank: run.ranks[rank] for rank, _, run in by_rank},
        status=max((r.status for _, _, r in by_rank), key=_STATUS_ORDER.index),
        failure_reason=next((r.failure_reason for _, _, r in by_rank if r.failure_reason), None),
        prediction=primary.prediction,
        extra=dict(primary.extra, rank_files={str(rank): path for rank, path, _ in by_rank}),
        bytes_read=sum(r.bytes_read for _, _, r in by_rank),
        lines_read=sum(r.lines_read for _, _, r in by_rank),
    )


def _note_absent_ranks(
    merged: RunTimings, by_rank: list[tuple[int, str, RunTimings]], left_out: list[tuple[str, str]]
) -> None:
    """The world size the ranks show, and a problem per file left out and per rank of it without a log."""
    seen = [rank for rank, _, _ in by_rank]
    world = max([max(seen) + 1] + [r.header.world_size or 0 for _, _, r in by_rank])
    merged.header.world_size = world
    for path, why in left_out:
        merged.add_problem(
            "rank-file-left-out",
            f"{path} is named like a rank file of this run but gave no rank timings ({why}); "
            "the run is made from the other ranks",
        )
    missing = [r for r in range(world) if r not in seen]
    if missing:
        listed = ", ".join(str(r) for r in missing)
        merged.add_problem(
            "rank-missing",
            f"rank(s) {listed} of 0-{world - 1} have no readable log file; the run is made from the "
            f"{len(seen)} other rank(s)",
        )
