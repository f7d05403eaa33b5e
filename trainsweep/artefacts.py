"""The per-run artefacts written below a results root, as bytes keyed by their relative path.

Used by the ParseLog Lambda, local mode and ``trainsweep import`` alike. The same run always gives the
same bytes, so a replayed or duplicated event rewrites identical objects (idempotent processing).
"""

from __future__ import annotations

import json
import math
from typing import Any

from trainsweep import layout
from trainsweep.logs.model import RunTimings


def _json_safe(x: Any) -> Any:
    """Replace NaN/infinity (not JSON) by None; the parser reports such values as problems."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_json_safe(v) for v in x]
    return x


def run_record_bytes(run: RunTimings) -> bytes:
    """The schema-versioned run record (``runs/<name>.json``) as UTF-8 JSON."""
    return (json.dumps(_json_safe(run.to_record()), indent=1, allow_nan=False) + "\n").encode()


def seed_paths(run: RunTimings) -> dict[str, str] | None:
    """``{"json"|"summary"|"png": relative path}`` of the seed outputs; None without VMTYPE/BS/N."""
    vm, bs, n = run.computing_system, run.batch_size, run.run_index
    if not vm or bs is None or n is None:
        return None
    return {ext: layout.execution_times_path(vm, bs, n, ext) for ext in ("json", "summary", "png")}


def run_artefacts(run: RunTimings) -> dict[str, bytes]:
    """Relative path below a results root -> bytes, for one parsed run.

    Always the run record; the seed-compatible ``e<N>.json``, ``e<N>.summary`` and the ``e<N>.png``
    step-time plot too when the run's VMTYPE, batch size and repetition index are known and the log
    has at least one step time (a failed or empty log gets no seed timings that would look like a run).
    """
    from trainsweep.summary import dumps_seed_json, format_seed_summary, seed_json

    out: dict[str, bytes] = {}
    paths = seed_paths(run)
    if paths is not None and run.steps_total > 0:
        from trainsweep.plots.run import step_times_png

        data = seed_json(run)
        out[paths["json"]] = dumps_seed_json(data).encode()
        out[paths["summary"]] = format_seed_summary(data).encode()
        out[paths["png"]] = step_times_png(run)
    out[layout.run_record_path(run.name)] = run_record_bytes(run)
    return out
