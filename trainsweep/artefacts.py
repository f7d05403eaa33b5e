"""The per-run artefacts written below a results root, as bytes keyed by their relative path.

Used by the ParseLog Lambda, local mode and ``trainsweep import`` alike. The same run always gives the
same bytes, so a replayed or duplicated event rewrites identical objects (idempotent processing).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from itertools import chain
from typing import Any

from trainsweep import axes, layout
from trainsweep.jsonstream import iter_json, iter_json_bytes
from trainsweep.logs.model import Epoch, RunTimings


def _json_safe(x: Any) -> Any:
    """Replace NaN/infinity (not JSON) by None; the parser reports such values as problems."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_json_safe(v) for v in x]
    return x


def _dumps_record_value(x: Any) -> str:
    return json.dumps(_json_safe(x), indent=1, allow_nan=False)


class _EpochRecords(Sequence[dict[str, Any]]):
    """Epochs as their record entries, made one at a time as they are written."""

    def __init__(self, epochs: list[Epoch]) -> None:
        self._epochs = epochs

    def __len__(self) -> int:
        return len(self._epochs)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [e.record_items() for e in self._epochs[i]]
        return self._epochs[i].record_items()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (e.record_items() for e in self._epochs)


def iter_run_record(run: RunTimings) -> Iterator[bytes]:
    """:func:`run_record_bytes` in blocks, without building the record's lists (bounded memory)."""
    items = run.record_items()
    items["epochs"] = _EpochRecords(items["epochs"])
    items["ranks"] = {r: _EpochRecords(eps) for r, eps in items["ranks"].items()}
    pieces = iter_json(items, indent=1, dumps=_dumps_record_value)
    yield from iter_json_bytes(chain(pieces, ("\n",)))


def run_record_bytes(run: RunTimings) -> bytes:
    """The schema-versioned run record (``runs/<name>.json``) as UTF-8 JSON.

    The same bytes as ``json.dumps(run.to_record(), indent=1, allow_nan=False) + "\\n"`` (non-finite
    numbers as ``null``), written piece by piece (:func:`iter_run_record`).
    """
    return b"".join(iter_run_record(run))


def seed_paths(run: RunTimings) -> dict[str, str] | None:
    """``{"json"|"summary"|"png": relative path}`` of the seed outputs; None without VMTYPE/BS/N."""
    vm, bs, n = run.computing_system, run.batch_size, run.run_index
    if not vm or bs is None or n is None:
        return None
    setting = axes.folder_parts(run.extra.get(axes.LOG_KEY))
    return {ext: layout.execution_times_path(vm, bs, n, ext, setting) for ext in ("json", "summary", "png")}


def iter_run_artefacts(run: RunTimings) -> Iterator[tuple[str, Iterator[bytes]]]:
    """:func:`run_artefacts` one artefact at a time, each as blocks of bytes made while it is read.

    For very long logs: writing each block to its file as it comes keeps the memory bounded (a 1 GB
    log's artefacts are hundreds of MB). Read each artefact's blocks before asking for the next one.
    """
    from trainsweep.summary import iter_seed_json, iter_seed_summary

    paths = seed_paths(run)
    if paths is not None and run.steps_total > 0:
        from trainsweep.plots.run import step_times_png

        yield paths["json"], iter_json_bytes(iter_seed_json(run))
        yield paths["summary"], iter_json_bytes(iter_seed_summary(run))
        yield paths["png"], iter((step_times_png(run),))
    yield layout.run_record_path(run.name), iter_run_record(run)


def run_artefacts(run: RunTimings) -> dict[str, bytes]:
    """Relative path below a results root -> bytes, for one parsed run.

    Always the run record; the seed-compatible ``e<N>.json``, ``e<N>.summary`` and the ``e<N>.png``
    step-time plot too when the run's VMTYPE, batch size and repetition index are known and the log
    has at least one step time (a failed or empty log gets no seed timings that would look like a run).
    """
    return {path: b"".join(blocks) for path, blocks in iter_run_artefacts(run)}
