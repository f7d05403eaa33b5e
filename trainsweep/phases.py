"""Two-phase sweeps (``phases: [scan, confirm]``): a cheap scan of every configuration, then full runs of
the best few to the target.

The scan is the spec as an early-stop sweep, packed (one job per instance type scans every batch size),
one repetition, without the target (an early-stopped run never evaluates). Its configurations are ranked
as its recommendation ranks them (cost to train, then time; only those it could judge), and the
``confirm_top_k`` best become the ``cells`` of the confirm sweep: the spec in full mode, one job per cell,
with the target, so each run stops at its first evaluation reaching it and the confirm sweep's
recommendation ranks by time and cost to reach the target. Each phase is an ordinary sweep through the
state machine; the confirm sweep's id is the scan's plus :data:`CONFIRM_SUFFIX`, and its results folder
holds :data:`PHASES_FILE`, which names the scan and the ranking the cells came from.

This module is pure: the CLI runs the two sweeps (locally or in AWS) with these specs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from trainsweep.errors import TrainsweepError
from trainsweep.spec import SweepSpec, check_sweep_id

CONFIRM_SUFFIX = "-confirm"
PHASES_FILE = "phases.json"


def scan_spec(spec: SweepSpec) -> dict[str, Any]:
    """The scan phase's spec: every configuration, early-stopped, packed, once, no target."""
    d = spec.to_dict()
    d.update(phases=None, target=None, cells=None, mode="early-stop", packing="per-instance", repetitions=1)
    return d


def confirm_spec(spec: SweepSpec, cells: list[tuple[str, int]]) -> dict[str, Any]:
    """The confirm phase's spec: ``cells`` only, full runs to the target, one job per cell."""
    d = spec.to_dict()
    d.update(
        phases=None,
        batch_size_search=None,  # the scan searched; the confirm sweep trains the cells it chose
        mode="full",
        packing="per-cell",
        cells=[{"instance_type": t, "batch_size": b} for t, b in cells],
    )
    return d


def confirm_sweep_id(scan_sweep_id: str) -> str:
    """The confirm sweep's id: the scan's with :data:`CONFIRM_SUFFIX` (checked like any sweep id)."""
    sweep_id = scan_sweep_id + CONFIRM_SUFFIX
    check_sweep_id(sweep_id)
    return sweep_id


def _number(x: Any) -> float | None:
    if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x):
        return float(x)
    return None


def rank_scan(sweep: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The scan's configurations the recommendation could judge, best first (cost, then time to train).

    ``sweep`` is the scan's ``sweep.json``. Raises :class:`TrainsweepError` when it is not one, or when no
    configuration can be ranked (nothing to confirm).
    """
    rows = sweep.get("configurations")
    if not isinstance(rows, list):
        raise TrainsweepError("the scan's sweep.json has no configurations: cannot choose what to confirm")
    ranked = []
    for row in rows:
        if not isinstance(row, Mapping) or row.get("status") != "ok" or row.get("not_judged"):
            continue
        t, c = _number(row.get("time_to_train_s")), _number(row.get("cost_to_train_usd"))
        itype, bs = row.get("instance_type"), row.get("batch_size")
        if t is None or c is None or not isinstance(itype, str) or not isinstance(bs, int):
            continue
        ranked.append(
            {"instance_type": itype, "batch_size": bs, "time_to_train_s": t, "cost_to_train_usd": c}
        )
    if not ranked:
        raise TrainsweepError(
            "the scan judged no configuration (each row's not_judged in its sweep.csv says why): "
            "nothing to confirm"
        )
    ranked.sort(key=lambda r: (r["cost_to_train_usd"], r["time_to_train_s"]))
    return ranked


def confirm_cells(ranked: list[dict[str, Any]], k: int) -> list[tuple[str, int]]:
    """The ``k`` best of :func:`rank_scan`'s ranking as (instance type, batch size)."""
    return [(r["instance_type"], r["batch_size"]) for r in ranked[:k]]


def phases_record(scan_sweep_id: str, ranked: list[dict[str, Any]], k: int) -> dict[str, Any]:
    """What :data:`PHASES_FILE` holds: the scan it came from, its ranking and the cells confirmed."""
    return {
        "scan_sweep_id": scan_sweep_id,
        "confirm_top_k": k,
        "ranking": ranked,
        "confirmed": [{"instance_type": t, "batch_size": b} for t, b in confirm_cells(ranked, k)],
    }
