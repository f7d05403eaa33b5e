"""Billing records found next to imported logs: DescribeTrainingJob dumps (JSON), matched to their runs.

The seeds saved ``aws sagemaker describe-training-job`` answers beside their logs (``sagemaker-logs/
resnet50-p3-gpu1-b1024-e0.json``). Such a record gives the job's billable and training seconds, its spot
savings and its instance type, which beat the billable-time model. A record is matched to a run by job
name: the run of the same name, else the run of the same experiment whose instance type, batch size and
repetition the job name (and the record) say. A record that matches no run, or several, is reported and
not used.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from trainsweep import instances, layout

RECORD_MAX_BYTES = 4 * 1024 * 1024
"""A DescribeTrainingJob answer is a few KiB; larger JSON files are not read as records."""


@dataclass(frozen=True)
class BillingRecord:
    """One DescribeTrainingJob dump."""

    path: str
    """Relative to the imported folder (POSIX separators)."""
    job_name: str
    instance_type: str | None
    batch_size: int | None
    run_index: int | None
    status: str | None
    billable_s: float | None
    training_s: float | None

    def job(self, run_name: str) -> dict[str, Any]:
        """The record as a sweep job record (what :func:`trainsweep.report.sweep_artefacts` reads)."""
        return {
            "run_name": run_name,
            "job_name": self.job_name,
            "instance_type": self.instance_type,
            "batch_size": self.batch_size,
            "status": self.status,
            "billable_s": self.billable_s,
            "training_s": self.training_s,
            "record": self.path,
        }


def _number(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


def _mapping(x: Any) -> dict[str, Any]:
    return x if isinstance(x, dict) else {}


def read_record(path: Path, relative: str) -> BillingRecord | None:
    """The record in ``path``; None when the file is not a DescribeTrainingJob answer."""
    try:
        if path.stat().st_size > RECORD_MAX_BYTES:
            return None
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("TrainingJobName"), str):
        return None
    if "BillableTimeInSeconds" not in doc and "ResourceConfig" not in doc:
        return None
    name = doc["TrainingJobName"]
    cell = layout.parse_job_name(name)
    resource = _mapping(doc.get("ResourceConfig"))
    itype = resource.get("InstanceType") if isinstance(resource.get("InstanceType"), str) else None
    if itype is None and cell is not None and cell.vmtype is not None:
        t = instances.from_vmtype(cell.vmtype)
        itype = t.name if t is not None else None
    hyper = _mapping(doc.get("HyperParameters"))
    bs_text = str(hyper.get("batch-size") or hyper.get("batch_size") or "").strip('"')
    bs = int(bs_text) if bs_text.isdigit() else (cell.batch_size if cell is not None else None)
    return BillingRecord(
        path=relative,
        job_name=name,
        instance_type=itype,
        batch_size=bs,
        run_index=cell.run if cell is not None else None,
        status=doc.get("TrainingJobStatus") if isinstance(doc.get("TrainingJobStatus"), str) else None,
        billable_s=_number(doc.get("BillableTimeInSeconds")),
        training_s=_number(doc.get("TrainingTimeInSeconds")),
    )


def read_records(src: Path, files: list[Path]) -> list[BillingRecord]:
    """The DescribeTrainingJob dumps among ``files`` (JSON files below ``src``, from the import's walk)."""
    found = [read_record(f, f.relative_to(src).as_posix()) for f in files]
    return [r for r in found if r is not None]


@dataclass(frozen=True)
class RunKey:
    """What identifies an imported run for matching: where it is and which cell it is."""

    path: str
    results_root: str
    run_name: str
    instance_type: str | None
    batch_size: int | None
    run_index: int | None


def _experiment(path: str) -> str:
    """The experiment folder of a file: its folder, less a trailing ``logs``/``sagemaker-logs``."""
    parent = PurePosixPath(path).parent
    if parent.name in (layout.LOGS_DIR, "sagemaker-logs"):
        parent = parent.parent
    return "" if str(parent) == "." else str(parent)


def match_records(
    records: list[BillingRecord], runs: list[RunKey]
) -> tuple[dict[str, BillingRecord], list[dict[str, Any]]]:
    """``({run path: its record}, [unmatched records with the reason])``.

    A record matches the run of its job name, else the one run of its experiment folder (the record's
    folder, less ``sagemaker-logs``) with its instance type, batch size and repetition.
    """
    matched: dict[str, BillingRecord] = {}
    unmatched: list[dict[str, Any]] = []
    for rec in records:
        by_name = [r for r in runs if r.run_name == rec.job_name]
        where = _experiment(rec.path)
        by_cell = [
            r
            for r in runs
            if _experiment(r.path) == where
            and rec.instance_type is not None
            and (r.instance_type, r.batch_size, r.run_index)
            == (rec.instance_type, rec.batch_size, rec.run_index)
        ]
        found = by_name or by_cell
        if len(found) == 1 and found[0].path not in matched:
            matched[found[0].path] = rec
            continue
        if not found:
            reason = (
                f"no log of {where or '.'} is the run of job {rec.job_name} "
                f"({rec.instance_type}, batch size {rec.batch_size}, repetition {rec.run_index})"
            )
        elif len(found) > 1:
            reason = f"{len(found)} logs could be job {rec.job_name}: " + ", ".join(r.path for r in found)
        else:
            reason = f"{found[0].path} already has a record ({matched[found[0].path].path})"
        unmatched.append({"path": rec.path, "job_name": rec.job_name, "reason": reason})
    return matched, unmatched
