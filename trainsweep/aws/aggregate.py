"""Aggregate a finished sweep in S3: read the cells' results the Distributed Maps wrote and the run
records, build the sweep artefacts, write them. Every planned cell (``jobs.json``) gets a final status."""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from trainsweep import layout
from trainsweep.aws import s3 as s3io
from trainsweep.aws.outcome import REASON_MAX
from trainsweep.jobs import PlannedJob, jobs_of_document

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

LOG = logging.getLogger(__name__)


def flatten_cells(cells: Iterable[Any]) -> list[dict[str, Any]]:
    """Nested lists of cell records (a map result's output) as one list, in a stable order."""
    out: list[dict[str, Any]] = []

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            out.append(x)
        elif isinstance(x, list):
            for y in x:
                walk(y)

    walk(list(cells))
    return sorted(out, key=lambda c: (c.get("instance_type") or "", c.get("run_name") or ""))


def _short(error: Any) -> str:
    """``Error: Cause`` of a caught Step Functions error, cut to a cell reason's length."""
    if not isinstance(error, dict):
        return str(error)[:REASON_MAX]
    text = ": ".join(str(error[k]) for k in ("Error", "Cause") if error.get(k))
    return (text or "unknown error")[:REASON_MAX]


def map_results(s3: S3Client, bucket: str, maps: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """The cell records the groups' Distributed Maps wrote (``ResultWriter``), and the errors of what
    could not be read or did not run: a failed group, a failed child execution, an unreadable manifest.

    ``maps`` is the group Map's output, one ``{results: {Bucket, Key}}`` (the map run's manifest) or
    ``{instance_type, error}`` per group; or, when the fan-out itself failed, that ``{Error, Cause}``.
    """
    if isinstance(maps, dict):  # the whole fan-out failed
        return [], [f"the sweep's fan-out failed ({_short(maps)})"]
    cells: list[Any] = []
    errors: list[str] = []
    for group in maps or []:
        if not isinstance(group, dict) or "results" not in group:
            where = group.get("instance_type", "?") if isinstance(group, dict) else "?"
            errors.append(f"the jobs of {where} did not run ({_short((group or {}).get('error'))})")
            continue
        ref = group["results"]
        manifest = s3io.get_json(s3, ref.get("Bucket") or bucket, ref["Key"])
        if manifest is None:
            errors.append(f"map results manifest s3://{ref.get('Bucket') or bucket}/{ref['Key']} is missing")
            continue
        dest = manifest.get("DestinationBucket") or bucket
        files = manifest.get("ResultFiles") or {}
        for status in ("SUCCEEDED", "FAILED", "PENDING"):
            for entry in files.get(status) or []:
                rows = s3io.get_json(s3, dest, entry["Key"])
                if rows is None:
                    errors.append(f"map result file s3://{dest}/{entry['Key']} is missing")
                    continue
                for row in rows:
                    if row.get("Status") == "SUCCEEDED" and row.get("Output") is not None:
                        cells.append(json.loads(row["Output"]))
                    else:
                        errors.append(
                            f"a job's workflow ended {str(row.get('Status', status)).lower()} ({_short(row)})"
                        )
    return flatten_cells(cells), errors


def final_cells(
    records: list[dict[str, Any]], jobs: list[PlannedJob], errors: list[str]
) -> list[dict[str, Any]]:
    """One record per planned cell: the recorded ones, and a failed record (with what went wrong) for
    every planned cell no result names. Records of cells the plan does not have are kept."""
    seen = {c.get("run_name") for c in records}
    why = "; ".join(dict.fromkeys(errors)) if errors else "the job's workflow recorded no result"
    missing: list[dict[str, Any]] = []
    for job in jobs:
        for run_name, batch_size in job.cells:
            if run_name in seen:
                continue
            missing.append(
                {
                    "run_name": run_name,
                    "job_name": job.job_name,
                    "instance_type": job.instance_type,
                    "batch_size": batch_size,
                    "repetition": job.repetition,
                    "status": "failed",
                    "reason": f"no result recorded: {why}"[:REASON_MAX],
                    "billable_s": None,
                    "training_s": None,
                }
            )
            if job.axes:
                missing[-1]["axes"] = job.setting(run_name)
    return flatten_cells([records, missing])


def aggregate_sweep(
    s3: S3Client, bucket: str, sweep_id: str, maps: Any = None, cells: Iterable[Any] | None = None
) -> dict[str, Any]:
    """Write the sweep artefacts and every planned cell's final status; returns a summary for the
    notification. ``maps`` is what the state machine's fan-out left (see :func:`map_results`);
    ``cells``, instead, the cell records themselves (a resume merges old and new ones)."""
    from trainsweep.logs.model import RecordVersionError, RunTimings
    from trainsweep.report import sweep_artefacts

    jobs_doc = s3io.get_json(s3, bucket, layout.jobs_key(sweep_id)) or {}
    found, errors = (flatten_cells(cells), []) if cells is not None else map_results(s3, bucket, maps)
    for error in errors:
        LOG.warning("sweep %s: %s", sweep_id, error)
    records = final_cells(found, jobs_of_document(jobs_doc) if jobs_doc else [], errors)
    results = layout.results_prefix(sweep_id)
    runs = []
    for cell in records:
        data = s3io.get_json(s3, bucket, results + layout.run_record_path(cell["run_name"]))
        if data is None:
            continue
        try:
            runs.append(RunTimings.from_record(data))
        except (RecordVersionError, KeyError, TypeError, ValueError) as exc:
            LOG.warning("skipping run record of %s: %s", cell["run_name"], exc)
    spec = s3io.get_json(s3, bucket, layout.spec_key(sweep_id))
    jobs_doc = s3io.get_json(s3, bucket, layout.jobs_key(sweep_id)) or {}
    # The plan's region and prices: PlanSweep priced the sweep where it runs (the stack's price cache,
    # the Pricing API), which the shipped catalogue may not know.
    hourly = jobs_doc.get("hourly_usd")
    planned: dict[str, Any] = hourly if isinstance(hourly, dict) else {}
    files = sweep_artefacts(
        runs,
        spec=spec,
        jobs=records,
        region=str(jobs_doc.get("region") or "us-east-1"),
        prices={t: float(p) for t, p in planned.items() if isinstance(p, int | float) and p > 0},
    )
    written = s3io.put_all(s3, bucket, results, files)

    jobs_doc["cells"] = records
    jobs_bytes = (json.dumps(jobs_doc, indent=2, sort_keys=True) + "\n").encode()
    s3io.put_bytes(s3, bucket, layout.jobs_key(sweep_id), jobs_bytes)
    counts = Counter(c.get("status") for c in records)
    return {
        "sweep_id": sweep_id,
        "cells": len(records),
        "status_counts": dict(sorted((str(k), v) for k, v in counts.items())),
        "runs_parsed": len(runs),
        "results": f"s3://{bucket}/{results}",
        "report": f"s3://{bucket}/{results}{layout.REPORT_HTML}",
        "written": len(written),
    }
