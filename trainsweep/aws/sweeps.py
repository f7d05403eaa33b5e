"""A sweep seen from the user's side: start it, watch its cells, download its results (resuming it:
:mod:`trainsweep.aws.resume`).

Used by ``trainsweep run/status/download`` against AWS and against the embedded AWS alike (the clients
are passed in). A cell's live status comes from SageMaker (ListTrainingJobs by the sweep's name, and
DescribeTrainingJob of the jobs that run) and S3 (its run record); once the sweep has been aggregated,
``jobs.json`` holds every cell's final status.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainsweep import atomicio, layout
from trainsweep.aws import s3 as s3io
from trainsweep.aws.outcome import job_cells
from trainsweep.errors import TrainsweepError
from trainsweep.jobs import jobs_of_document

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_stepfunctions import SFNClient

LIVE_STATES = ("pending", "running", "done", "failed", "infeasible", "skipped")
_FINAL_TO_LIVE = {
    "completed": "done",
    "partial": "failed",
    "timeout": "failed",
    "failed": "failed",
    "infeasible": "infeasible",
    "skipped": "skipped",
}
EXECUTION_NAME_MAX = 80


class SweepNotFoundError(TrainsweepError):
    """The sweep id is unknown in this bucket (or results folder)."""


@dataclass
class CellView:
    """One cell as the live table shows it."""

    run_name: str
    job_name: str
    instance_type: str
    batch_size: int | None
    repetition: int | None
    status: str = "pending"  # one of LIVE_STATES
    instance_count: int = 1  # instances of the cell's job: its cost counts every one
    detail: str | None = None  # SageMaker's secondary status, or the failure reason
    elapsed_s: float | None = None
    billable_s: float | None = None
    cost_usd: float | None = None
    axes: dict[str, Any] | None = None  # the cell's setting of the spec's axes (None without axes)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if out["axes"] is None:  # a sweep without axes: the record as it always was
            del out["axes"]
        return out


@dataclass
class SweepView:
    sweep_id: str
    execution_status: str | None
    cells: list[CellView] = field(default_factory=list)
    elapsed_s: float | None = None

    @property
    def counts(self) -> dict[str, int]:
        c = Counter(cell.status for cell in self.cells)
        return {s: c.get(s, 0) for s in LIVE_STATES}

    @property
    def spend_usd(self) -> float:
        return sum(c.cost_usd or 0.0 for c in self.cells)

    @property
    def finished(self) -> bool:
        return self.execution_status not in (None, "RUNNING")

    def to_dict(self) -> dict[str, Any]:
        return {
            "sweep_id": self.sweep_id,
            "execution_status": self.execution_status,
            "elapsed_s": self.elapsed_s,
            "spend_usd": round(self.spend_usd, 6),
            "counts": self.counts,
            "cells": [c.to_dict() for c in self.cells],
        }


# ---- stack and execution --------------------------------------------------------------------------


def stack_outputs(
    cfn: CloudFormationClient, stack_name: str, *, region_source: str | None = None
) -> dict[str, str]:
    """The outputs of a deployed trainsweep stack; a clear error when it is not deployed in the client's
    region (``region_source``: where that region came from, for the message), and a credentials error
    (:class:`~trainsweep.aws.credentials.AwsCredentialsError`) when the request could not authenticate."""
    from trainsweep.aws.credentials import raise_for_credentials

    try:
        stacks = cfn.describe_stacks(StackName=stack_name)["Stacks"]
    except Exception as exc:
        raise_for_credentials(exc)
        region = getattr(getattr(cfn, "meta", None), "region_name", None)
        where = f" in {region}" if region else ""
        if region and region_source:
            where += f" (region from {region_source})"
        if "does not exist" in str(exc):  # CloudFormation's ValidationError for an unknown stack
            raise TrainsweepError(
                f"stack {stack_name!r} not found{where} ({exc}); deploy it first with `npx cdk deploy` "
                "into that region, or pass --region REGION / --stack NAME / --local"
            ) from exc
        raise TrainsweepError(f"cannot read stack {stack_name!r}{where}: {exc}") from exc
    return {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}


def pick_output(outputs: dict[str, str], *candidates: str) -> str:
    """The output whose key equals, or else contains, one of the candidates (case-insensitive)."""
    lowered = {k.lower(): v for k, v in outputs.items()}
    for c in candidates:
        if c.lower() in lowered:
            return lowered[c.lower()]
    for c in candidates:
        for k, v in lowered.items():
            if c.lower() in k:
                return v
    raise TrainsweepError(
        f"the stack has no output like {' / '.join(candidates)} (outputs: {sorted(outputs)})"
    )


def execution_name(sweep_id: str, suffix: str = "") -> str:
    name = f"{sweep_id}-{suffix}" if suffix else sweep_id
    return name[:EXECUTION_NAME_MAX]


def start_sweep(
    sfn: SFNClient,
    state_machine_arn: str,
    spec: dict[str, Any],
    sweep_id: str,
    *,
    suffix: str = "",
    attempt: str | None = None,
) -> str:
    """Start the state machine on a spec (PlanSweep validates and expands it); returns the execution ARN.

    ``attempt`` (resumes) gives the jobs new SageMaker names; their runs keep the sweep's names.
    """
    payload: dict[str, Any] = {"spec": spec, "sweep_id": sweep_id}
    if attempt:
        payload["attempt"] = attempt
    response = sfn.start_execution(
        stateMachineArn=state_machine_arn, name=execution_name(sweep_id, suffix), input=json.dumps(payload)
    )
    return str(response["executionArn"])


def resume_attempt(index: int, now: float | None = None) -> str:
    """A short token that gives a resumed sweep's jobs SageMaker names not used before (``r`` + base 36)."""
    n = int((time.time() if now is None else now) * 10) * 10 + index % 10
    digits = ""
    while n:
        n, d = divmod(n, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[d] + digits
    return "r" + digits[-7:]


def execution_arn_for(state_machine_arn: str, name: str) -> str:
    """``arn:aws:states:R:A:stateMachine:M`` + name -> ``arn:aws:states:R:A:execution:M:name``."""
    return state_machine_arn.replace(":stateMachine:", ":execution:", 1) + f":{name}"


ERROR_LINE_MAX = 500


def execution_error(sfn: SFNClient, execution_arn: str) -> str | None:
    """Why an execution failed, in one line; None while it runs or after success.

    A failed Lambda task's cause is the function's JSON error (``errorMessage``, ``errorType``,
    ``stackTrace``): the line is its type and the first line of its message. The whole cause is in
    :func:`execution_error_detail`.
    """
    d = sfn.describe_execution(executionArn=execution_arn)
    if d["status"] in ("RUNNING", "SUCCEEDED"):
        return None
    return failure_line(d.get("error"), d.get("cause")) or d["status"]


def execution_error_detail(sfn: SFNClient, execution_arn: str) -> str | None:
    """Everything the execution says about its failure (error, whole cause), for a log file."""
    d = sfn.describe_execution(executionArn=execution_arn)
    if d["status"] in ("RUNNING", "SUCCEEDED"):
        return None
    cause = d.get("cause") or ""
    with contextlib.suppress(ValueError):  # a Lambda error's JSON, indented; other text as it is
        cause = json.dumps(json.loads(cause), indent=2)
    return f"execution {execution_arn} ended {d['status']}\nerror: {d.get('error')}\ncause:\n{cause}\n"


def failure_line(error: str | None, cause: str | None) -> str:
    """One line for people from a Step Functions ``error`` and ``cause``."""
    text = cause or ""
    try:
        loaded = json.loads(text) if text.lstrip().startswith("{") else None
    except ValueError:
        loaded = None
    if isinstance(loaded, dict) and loaded.get("errorMessage") is not None:
        message = str(loaded["errorMessage"]).strip().splitlines()
        text = ": ".join(x for x in (loaded.get("errorType"), message[0] if message else "") if x)
    else:
        text = ": ".join(x for x in (error, " ".join(text.split())) if x)
    if len(text) > ERROR_LINE_MAX:
        text = text[: ERROR_LINE_MAX - 1] + "…"
    return text


# ---- status ---------------------------------------------------------------------------------------


def plan_cells(jobs_doc: dict[str, Any]) -> list[CellView]:
    """The cells of the plan in a ``jobs.json`` document (none before PlanSweep wrote its jobs)."""
    if "jobs" not in jobs_doc:
        return []
    return [CellView(**ident) for job in jobs_of_document(jobs_doc) for ident in job_cells(job)]


def _apply_final(cells: list[CellView], final: Iterable[dict[str, Any]]) -> None:
    by_run = {c.get("run_name"): c for c in final}
    for cell in cells:
        rec = by_run.get(cell.run_name)
        if rec is None:
            continue
        cell.status = _FINAL_TO_LIVE.get(str(rec.get("status")), "failed")
        cell.detail = rec.get("reason") or rec.get("status")
        if rec.get("billable_s") is not None:
            cell.billable_s = float(rec["billable_s"])


def _price(instance_type: str, region: str, jobs_doc: dict[str, Any] | None = None) -> float | None:
    """USD per hour of a type: as the sweep's plan priced it (``jobs.json``'s ``hourly_usd``: PlanSweep's
    prices for its region), else from the catalogue."""
    from trainsweep.instances import LOCAL_CPU, LOCAL_GPU

    if instance_type in (LOCAL_CPU, LOCAL_GPU):
        return 0.0
    planned = (jobs_doc or {}).get("hourly_usd")
    usd = planned.get(instance_type) if isinstance(planned, dict) else None
    if isinstance(usd, int | float) and not isinstance(usd, bool) and usd > 0:
        return float(usd)
    try:
        from trainsweep.cost.prices import hourly_usd

        return hourly_usd(instance_type, region)
    except Exception:  # no catalogue entry: spend unknown for this type
        return None


def sweep_view(
    *,
    s3: S3Client,
    bucket: str,
    sweep_id: str,
    sagemaker: Any | None = None,
    sfn: Any | None = None,
    execution_arn: str | None = None,
    region: str = "us-east-1",
    jobs_doc: dict[str, Any] | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    jobs_seen: dict[str, dict[str, Any]] | None = None,
) -> SweepView:
    """The live status of every cell of a sweep.

    SageMaker is asked through :func:`trainsweep.aws.jobstatus.job_states`: one paged list of the
    sweep's jobs, and descriptions of the running ones; ``jobs_seen`` (a dict the caller keeps between
    polls) spares describing a job that ended again.
    """
    execution_status, elapsed = _execution(sfn, execution_arn, now)
    doc = jobs_doc if jobs_doc is not None else s3io.get_json(s3, bucket, layout.jobs_key(sweep_id))
    if doc is None:
        if execution_status is None and not s3io.list_keys(s3, bucket, layout.sweep_prefix(sweep_id))[:1]:
            raise SweepNotFoundError(f"no sweep {sweep_id!r} in bucket {bucket}")
        return SweepView(sweep_id, execution_status, [], elapsed)  # PlanSweep has not run yet
    cells = plan_cells(doc)
    runs_prefix = layout.results_key(sweep_id, layout.RUNS_DIR + "/")
    have_record = {
        k[len(runs_prefix) :].removesuffix(".json") for k in s3io.list_keys(s3, bucket, runs_prefix)
    }
    if sagemaker is not None:
        _apply_jobs(cells, sagemaker, sweep_id, have_record, jobs_seen, now)
    else:
        for cell in cells:
            if cell.run_name in have_record:
                cell.status = "done"
    if doc.get("cells"):
        _apply_final(cells, doc["cells"])
    for cell in cells:
        price = _price(cell.instance_type, str(doc.get("region") or region), doc)
        if price is not None:
            seconds = cell.billable_s if cell.billable_s is not None else cell.elapsed_s
            cell.cost_usd = None if seconds is None else price * cell.instance_count * seconds / 3600.0
    return SweepView(sweep_id, execution_status, cells, elapsed)


def _execution(
    sfn: Any | None, execution_arn: str | None, now: Callable[[], datetime]
) -> tuple[str | None, float | None]:
    """(status, seconds since it started or until it stopped) of the sweep's execution, when given."""
    if sfn is None or execution_arn is None:
        return None, None
    d = sfn.describe_execution(executionArn=execution_arn)
    end = d.get("stopDate") or now()
    return d["status"], (end - d["startDate"]).total_seconds()


def _apply_jobs(
    cells: list[CellView],
    sagemaker: Any,
    sweep_id: str,
    have_record: set[str],
    jobs_seen: dict[str, dict[str, Any]] | None,
    now: Callable[[], datetime],
) -> None:
    """Each cell's live status from its SageMaker job (a packed job's time shared among its runs)."""
    from trainsweep.aws.jobstatus import job_states

    described = job_states(sagemaker, sweep_id, (c.job_name for c in cells), jobs_seen)
    per_job = Counter(c.job_name for c in cells)
    for cell in cells:
        d = described.get(cell.job_name)
        if d is not None:
            _live(cell, d, have_record, per_job[cell.job_name], now())


def _live(cell: CellView, d: dict[str, Any], have_record: set[str], runs_in_job: int, now: datetime) -> None:
    from trainsweep.aws.outcome import is_out_of_memory

    status = d.get("TrainingJobStatus")
    start = d.get("TrainingStartTime") or d.get("CreationTime")
    end = d.get("TrainingEndTime")
    if start is not None:
        cell.elapsed_s = ((end or now) - start).total_seconds() / runs_in_job
    if d.get("BillableTimeInSeconds") is not None:
        cell.billable_s = float(d["BillableTimeInSeconds"]) / runs_in_job
    reason = d.get("FailureReason")
    if status in ("InProgress", "Stopping"):
        cell.status = "done" if cell.run_name in have_record and runs_in_job > 1 else "running"
        cell.detail = d.get("SecondaryStatus")
    elif status == "Completed":
        cell.status = "done"
    elif is_out_of_memory(reason):
        cell.status, cell.detail = "infeasible", reason
    else:
        cell.status, cell.detail = "failed", reason or d.get("SecondaryStatus") or status


def latest_sweep_id(s3: S3Client, bucket: str) -> str | None:
    """The most recently planned sweep in the bucket (by its jobs.json)."""
    newest: tuple[datetime, str] | None = None
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=layout.SWEEPS_PREFIX):
        for obj in page.get("Contents", []):
            parts = obj["Key"].split("/")
            if (
                len(parts) == 3
                and parts[2] == layout.JOBS_JSON
                and (newest is None or obj["LastModified"] > newest[0])
            ):
                newest = (obj["LastModified"], parts[1])
    return None if newest is None else newest[1]


def wait_for_execution(
    sfn: SFNClient, execution_arn: str, *, poll_s: float = 1.0, timeout_s: float | None = None
) -> str:
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        status = str(sfn.describe_execution(executionArn=execution_arn)["status"])
        if status != "RUNNING":
            return status
        if deadline is not None and time.monotonic() > deadline:
            return status
        time.sleep(poll_s)


# ---- download / upload ----------------------------------------------------------------------------


@dataclass(frozen=True)
class SweepObjects:
    """What a sweep holds in S3, split as downloads take it: ``(key, bytes)`` of its spec, jobs, logs and
    results, and of its jobs' models, outputs and checkpoints (:func:`trainsweep.layout.is_model_key`)."""

    files: list[tuple[str, int]]
    models: list[tuple[str, int]]

    @staticmethod
    def size(objects: list[tuple[str, int]]) -> int:
        return sum(size for _, size in objects)


def list_sweep(s3: S3Client, bucket: str, sweep_id: str) -> SweepObjects:
    """Every object under ``sweeps/<id>/`` with its size, but ParseRun's parse states.

    Raises:
        SweepNotFoundError: nothing is there.
    """
    prefix = layout.sweep_prefix(sweep_id)
    found: list[tuple[str, int]] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        found.extend((o["Key"], int(o.get("Size", 0))) for o in page.get("Contents", []))
    if not found:
        raise SweepNotFoundError(f"no sweep {sweep_id!r} in bucket {bucket} (nothing under {prefix})")
    # ParseRun's parse states (layout.parse_state_key) are its working files, not a sweep's content.
    found = [(k, n) for k, n in found if not k.endswith("/") and not layout.is_parse_state_key(sweep_id, k)]
    models = [(k, n) for k, n in found if layout.is_model_key(sweep_id, k)]
    return SweepObjects([(k, n) for k, n in found if not layout.is_model_key(sweep_id, k)], models)


def download_sweep(
    s3: S3Client,
    bucket: str,
    sweep_id: str,
    dest: Path,
    *,
    workers: int = 8,
    models: bool = False,
    objects: SweepObjects | None = None,
) -> list[Path]:
    """Copy the sweep's spec, jobs, logs and results under ``sweeps/<id>/`` to ``dest`` with the same
    relative layout; its jobs' models and checkpoints too with ``models``. ``objects``: the sweep's
    listing when the caller has it (:func:`list_sweep`). Then the results' Parquet tables are made
    beside them (:func:`trainsweep.tables.write_parquet`)."""
    from trainsweep.aws.mirror import fetch_keys
    from trainsweep.tables import write_parquet

    prefix = layout.sweep_prefix(sweep_id)
    listed = objects or list_sweep(s3, bucket, sweep_id)
    keys = [k for k, _ in listed.files + (listed.models if models else [])]
    files = fetch_keys(s3, bucket, prefix, keys, dest, workers)
    return files + write_parquet(dest / layout.RESULTS_DIR)


def _readable_json(data: bytes) -> bool:
    try:
        json.loads(data)
    except ValueError:
        return False
    return True


def upload_sweep(s3: S3Client, bucket: str, sweep_id: str, src: Path) -> int:
    """Put a downloaded sweep folder back under ``sweeps/<id>/`` (resuming a local sweep); raw logs
    are left out so their notifications do not re-parse runs that already have results."""
    prefix = layout.sweep_prefix(sweep_id)
    count = 0
    for f in sorted(src.rglob("*")):
        if not f.is_file():
            continue
        rel = f.relative_to(src).as_posix()
        if rel.startswith(layout.LOGS_DIR + "/") or f.name.endswith(atomicio.PART_SUFFIX):
            continue
        data = f.read_bytes()
        if f.suffix == ".json" and not _readable_json(data):
            continue  # empty or cut short by a killed writer: missing, so its run is re-run
        s3io.put_bytes(s3, bucket, prefix + rel, data)
        count += 1
    return count


# ---- a sweep read from its documents ------------------------------------------------------------


def record_outcome(record: Any) -> tuple[bool, str | None]:
    """(whether a run record says its run finished, the reason when it did not).

    A run finished when its log was read to the end (status ``complete``; an early-stopped run's log
    ends with its prediction and is complete too). A record that is not a JSON object did not finish.
    """
    if not isinstance(record, dict):
        return False, "the run record is not readable"
    status = record.get("status", "complete")
    if status == "complete":
        return True, None
    return False, str(record.get("failure_reason") or f"log status: {status}")


def view_from_documents(
    sweep_id: str,
    jobs_doc: dict[str, Any],
    have_record: set[str],
    unfinished: dict[str, str | None] | None = None,
) -> SweepView:
    """The status of a downloaded sweep: planned cells, their final records, their run records.

    ``unfinished`` maps the runs whose record says they did not finish (:func:`record_outcome`) to
    why: before aggregation such a cell shows ``failed``, not ``done``.
    """
    unfinished = unfinished or {}
    cells = plan_cells(jobs_doc)
    for cell in cells:
        if cell.run_name in unfinished:
            cell.status, cell.detail = "failed", unfinished[cell.run_name]
        elif cell.run_name in have_record:
            cell.status = "done"
    if jobs_doc.get("cells"):
        _apply_final(cells, jobs_doc["cells"])
        for cell in cells:
            if cell.status == "done" and cell.run_name not in have_record:
                cell.status, cell.detail = "failed", "its run record is missing: a resume runs it again"
    region = str(jobs_doc.get("region") or "us-east-1")
    for cell in cells:
        price = _price(cell.instance_type, region, jobs_doc)
        if price is not None and cell.billable_s is not None:
            cell.cost_usd = price * cell.instance_count * cell.billable_s / 3600.0
    finished = "SUCCEEDED" if jobs_doc.get("cells") else None
    return SweepView(sweep_id, finished, cells, None)


def latest_execution_arn(sfn: SFNClient, state_machine_arn: str, sweep_id: str) -> str | None:
    """The newest execution of the sweep (its first run is named after it; resumes add a suffix)."""
    newest: tuple[datetime, str] | None = None
    for page in sfn.get_paginator("list_executions").paginate(stateMachineArn=state_machine_arn):
        for ex in page.get("executions", []):
            mine = ex["name"] == sweep_id or ex["name"].startswith(f"{sweep_id}-resume")
            if mine and (newest is None or ex["startDate"] > newest[0]):
                newest = (ex["startDate"], ex["executionArn"])
    return None if newest is None else newest[1]
