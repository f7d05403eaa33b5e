"""The two-phase driver (``phases: [scan, confirm]``): the scan sweep, then a confirm sweep of its best
configurations to the target (the specs and the ranking: :mod:`trainsweep.phases`), locally or in the
stack; the recommendation is the confirm sweep's."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trainsweep.sweeps.result import DEFAULT_RESULTS_DIR, SweepEvents, SweepRun


def _scan_ranking(scan: SweepRun) -> list[dict[str, Any]]:
    """The scan's configurations, best first, from its downloaded ``sweep.json``."""
    from trainsweep import layout, phases
    from trainsweep.errors import TrainsweepError

    sweep_json = scan.dest / layout.RESULTS_DIR / layout.SWEEP_JSON
    try:
        doc = json.loads(sweep_json.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise TrainsweepError(f"cannot read the scan's {sweep_json}: {e}; nothing was confirmed") from None
    if not isinstance(doc, dict):
        raise TrainsweepError(f"the scan's {sweep_json} is not a sweep summary; nothing was confirmed")
    return phases.rank_scan(doc)


def recommendation_lines(dest: Path) -> list[str]:
    """The recommendation's sentences from a downloaded sweep's ``sweep.json`` ([] when there are none)."""
    from trainsweep import layout

    try:
        summary = json.loads((dest / layout.RESULTS_DIR / layout.SWEEP_JSON).read_text(encoding="utf-8"))
        return [str(line) for line in summary["recommendation"]["text"]]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def run_phases(
    spec_source: Path | dict[str, Any],
    *,
    local: bool,
    out: Path = DEFAULT_RESULTS_DIR,
    resume: str | None = None,
    watch: bool = True,
    events: SweepEvents | None = None,
    models: bool = False,
    **cloud: Any,
) -> SweepRun:
    """Run the scan, then confirm its best ``confirm_top_k`` configurations; returns the confirm sweep's
    run (its ``scan`` is the scan's), or the scan's when it did not succeed (nothing to confirm).

    ``cloud``: the stack and session arguments of :func:`trainsweep.sweeps.cloud.run_cloud`.
    """
    from trainsweep import phases
    from trainsweep.errors import TrainsweepError
    from trainsweep.sourcedir import spec_dir
    from trainsweep.spec import load_spec, make_sweep_id

    if resume is not None:
        raise TrainsweepError(
            "--resume re-runs the cells of one sweep: resume the scan or the confirm sweep with a spec "
            "without phases (its own spec.json is in its results folder)"
        )
    if not watch and not local:
        raise TrainsweepError(
            "phases: [scan, confirm] waits for the scan to choose what to confirm: drop --no-watch"
        )
    events = events or SweepEvents()
    spec = load_spec(spec_source)
    assert spec.target is not None  # the spec requires one with phases
    folder = spec_dir(spec_source)

    def run_one(spec_dict: dict[str, Any], sweep_id: str, record: dict[str, Any] | None = None) -> SweepRun:
        common: dict[str, Any] = {"out": out, "events": events, "sweep_id": sweep_id}
        common.update(spec_folder=folder, record=record)
        if local:
            from trainsweep.sweeps.local import run_local

            return run_local(spec_dict, models=models, **common)
        from trainsweep.sweeps.cloud import run_cloud

        return run_cloud(spec_dict, watch=watch, models=models, **common, **cloud)

    scan_id = make_sweep_id(spec.name, datetime.now(UTC))
    events.say(f"Phase 1 of 2, scan: every configuration early-stopped, packed, once (sweep {scan_id})")
    scan = run_one(phases.scan_spec(spec), scan_id)
    if not scan.succeeded:
        return scan
    scan_id = scan.sweep_id  # a local run adds a suffix when another start took the id
    confirm_id = phases.confirm_sweep_id(scan_id)
    ranked = _scan_ranking(scan)
    cells = phases.confirm_cells(ranked, spec.confirm_top_k)
    named = ", ".join(f"{t} x {b}" for t, b in cells)
    events.say(
        f"Phase 2 of 2, confirm: the scan's best {len(cells)} of {len(ranked)} configurations ({named}) "
        f"trained to {spec.target.metric} {spec.target.value:g} (sweep {confirm_id})"
    )
    record = phases.phases_record(scan_id, ranked, spec.confirm_top_k)
    confirm = run_one(phases.confirm_spec(spec, cells), confirm_id, record)
    confirm.scan = scan
    lines = recommendation_lines(confirm.dest) if confirm.succeeded else []
    if lines:
        events.say("Recommendation (from the confirmed runs):")
        for line in lines:
            events.say(f"  {line}")
    return confirm
