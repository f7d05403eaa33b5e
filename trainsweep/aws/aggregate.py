"""Aggregate a finished sweep in S3: read its run records, build the sweep artefacts, write them."""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from trainsweep import layout
from trainsweep.aws import s3 as s3io

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

LOG = logging.getLogger(__name__)


def flatten_cells(cells: Iterable[Any]) -> list[dict[str, Any]]:
    """The nested Map output (groups -> jobs -> cells) as one list, in a stable order."""
    out: list[dict[str, Any]] = []

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            out.append(x)
        elif isinstance(x, list):
            for y in x:
                walk(y)

    walk(list(cells))
    return sorted(out, key=lambda c: (c.get("instance_type") or "", c.get("run_name") or ""))


def aggregate_sweep(s3: S3Client, bucket: str, sweep_id: str, cells: Iterable[Any]) -> dict[str, Any]:
    """Write the sweep artefacts and the cells' statuses; returns a summary for the notification."""
    from trainsweep.logs.model import RecordVersionError, RunTimings
    from trainsweep.report import sweep_artefacts

    records = flatten_cells(cells)
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
