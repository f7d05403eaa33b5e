"""Resuming a sweep: the cells without results, the smallest specs that re-run them, the redrive of an
interrupted execution and the re-aggregation of every cell (``trainsweep resume``, cloud and local)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from trainsweep import layout
from trainsweep.aws import runs, sweeps
from trainsweep.aws import s3 as s3io
from trainsweep.aws.sweeps import CellView, SweepNotFoundError, plan_cells, record_outcome
from trainsweep.errors import TrainsweepError
from trainsweep.jobs import jobs_of_document

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient
    from mypy_boto3_lambda import LambdaClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_stepfunctions import SFNClient


@dataclass
class ResumePlan:
    """What a resumed sweep re-runs: one reduced spec per instance type, and what it keeps."""

    sweep_id: str
    specs: list[dict[str, Any]]
    missing: list[str]  # run names without results
    kept_cells: list[dict[str, Any]]  # final records of the cells that already have results
    also_rerun: list[str]  # complete runs a reduced spec cannot avoid (repetitions start at 0)


def plan_resume(
    spec: dict[str, Any],
    jobs_doc: dict[str, Any],
    have_record: set[str],
    finished: set[str] | None = None,
) -> ResumePlan:
    """Find the cells without results and the smallest specs that re-run them.

    A cell has results when its final status is ``completed`` and its run record exists, or, before
    aggregation (a sweep interrupted by Ctrl-C), when its run record says the run finished
    (``finished``: the names whose record has status ``complete``; default ``have_record``). A run
    stopped by SIGTERM, cut short or unreadable is re-run. Job names depend only on sweep id, instance
    type, batch size and repetition, so the reduced specs' runs land on the original keys.
    """
    final = {c.get("run_name"): c for c in jobs_doc.get("cells") or []}
    cells = plan_cells(jobs_doc)
    finished = have_record if finished is None else finished
    done = {c.run_name for c in cells if _has_results(c, final, have_record, finished)}
    missing = [c for c in cells if c.run_name not in done]
    # A cell that finished before the sweep was interrupted has no final record yet: the merged
    # aggregate gets one made from its plan (SageMaker's billable time is not known here).
    kept = [final.get(c.run_name) or _completed_record(c) for c in cells if c.run_name in done]
    specs: list[dict[str, Any]] = []
    also: list[str] = []
    for instance_type in dict.fromkeys(c.instance_type for c in missing):
        mine = [c for c in missing if c.instance_type == instance_type]
        reduced = _reduced_spec(spec, instance_type, mine)
        specs.append(reduced)
        also += _rerun_beside(cells, mine, instance_type, reduced["batch_sizes"], reduced["repetitions"])
    kept = [k for k in kept if k.get("run_name") not in set(also)]
    return ResumePlan(jobs_doc.get("sweep_id", ""), specs, [c.run_name for c in missing], kept, also)


def _has_results(
    cell: CellView, final: dict[Any, dict[str, Any]], have_record: set[str], finished: set[str]
) -> bool:
    rec = final.get(cell.run_name)
    if rec is not None:
        return rec.get("status") == "completed" and cell.run_name in have_record
    return cell.run_name in have_record and cell.run_name in finished


def _reduced_spec(spec: dict[str, Any], instance_type: str, mine: list[CellView]) -> dict[str, Any]:
    """The spec that re-runs the cells ``mine`` of one instance type: its sizes, repetitions up to theirs."""
    sizes = sorted({c.batch_size for c in mine if c.batch_size is not None}) or list(spec["batch_sizes"])
    reps = max((c.repetition or 0) for c in mine) + 1
    reduced = dict(spec)
    reduced.update(instance_types=[instance_type], batch_sizes=sizes, repetitions=reps)
    if reduced.get("cells"):
        # every (instance_type, size) here was a planned cell: the reduced grid is those cells
        reduced["cells"] = None
    return reduced


def _rerun_beside(
    cells: list[CellView], mine: list[CellView], instance_type: str, sizes: list[int], reps: int
) -> list[str]:
    """The cells with results that a reduced spec for ``mine`` runs again all the same."""
    # The reduced spec keeps every axis value: the run names' setting part is made from all settings.
    chosen = {(c.batch_size, c.repetition, _setting(c)) for c in mine}
    return [
        c.run_name
        for c in cells
        if c.instance_type == instance_type
        and c.batch_size in sizes
        and (c.repetition or 0) < reps
        and (c.batch_size, c.repetition, _setting(c)) not in chosen
    ]


def _setting(cell: CellView) -> str:
    return json.dumps(cell.axes or {}, sort_keys=True)


def _completed_record(cell: CellView) -> dict[str, Any]:
    if cell.axes:
        return {**_completed_record(CellView(**{**asdict(cell), "axes": None})), "axes": cell.axes}
    return {
        "run_name": cell.run_name,
        "job_name": cell.job_name,
        "instance_type": cell.instance_type,
        "batch_size": cell.batch_size,
        "repetition": cell.repetition,
        "status": "completed",
        "reason": None,
        "billable_s": None,
        "training_s": None,
    }


def finished_runs(s3: S3Client, bucket: str, sweep_id: str, run_names: Iterable[str]) -> set[str]:
    """The runs among ``run_names`` whose record in the bucket says they finished (:func:`record_outcome`)."""
    out = set()
    for name in run_names:
        try:
            record = s3io.get_json(s3, bucket, layout.results_key(sweep_id, layout.run_record_path(name)))
        except ValueError:  # not JSON
            record = None
        if record_outcome(record)[0]:
            out.add(name)
    return out


def merge_cells(kept: list[dict[str, Any]], new: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Final cell records after a resume: the new run's record wins for a cell present in both."""
    merged = {c["run_name"]: c for c in kept}
    for c in new:
        merged[c["run_name"]] = c
    return [merged[k] for k in sorted(merged)]


def run_records(s3: S3Client, bucket: str, sweep_id: str) -> set[str]:
    prefix = layout.results_key(sweep_id, layout.RUNS_DIR + "/")
    return {k[len(prefix) :].removesuffix(".json") for k in s3io.list_keys(s3, bucket, prefix)}


def find_function(cfn: CloudFormationClient, stack_name: str, *hints: str) -> str | None:
    """The physical name of the stack's Lambda function whose logical id contains one of the hints."""
    paginator = cfn.get_paginator("list_stack_resources")
    for page in paginator.paginate(StackName=stack_name):
        for r in page.get("StackResourceSummaries", []):
            if r["ResourceType"] != "AWS::Lambda::Function":
                continue
            if any(h.lower() in r["LogicalResourceId"].lower() for h in hints):
                return str(r["PhysicalResourceId"])
    return None


AGGREGATE_READ_TIMEOUT_S = 15 * 60
"""Longer than AggregateSweep may run (10 minutes, infra/stack.py): the synchronous invoke waits for it."""


def aggregate_client(session: Any) -> LambdaClient:
    """A Lambda client for :func:`reaggregate`: it waits as long as the function may run, and never sends
    the invoke again (boto3's default 60 s read timeout and retries would start a second aggregation
    while the first still runs)."""
    from botocore.config import Config

    config = Config(
        read_timeout=AGGREGATE_READ_TIMEOUT_S,
        connect_timeout=10,
        retries={"total_max_attempts": 1},
        tcp_keepalive=True,  # a NAT may drop a connection idle for minutes
    )
    return session.client("lambda", config=config)  # type: ignore[no-any-return]


def reaggregate(
    lam: LambdaClient,
    function_name: str,
    sweep_id: str,
    cells: list[dict[str, Any]],
) -> dict[str, Any]:
    """Invoke the deployed AggregateSweep function on a merged cell list (after a resume); ``lam`` from
    :func:`aggregate_client`."""
    response = lam.invoke(
        FunctionName=function_name, Payload=json.dumps({"sweep_id": sweep_id, "cells": cells}).encode()
    )
    body = response["Payload"].read()
    if response.get("FunctionError"):
        raise TrainsweepError(f"AggregateSweep failed while merging the resumed sweep: {body[:500]!r}")
    return json.loads(body or b"{}")


_SOURCE_KEYS = ("source_dir", "entry_point", "requirements")
CODE_CHANGED = "workload.source_dir (its files changed)"


def spec_differences(
    saved: dict[str, Any], given: dict[str, Any], sweep_id: str, code_digest: str | None = None
) -> list[str]:
    """The fields (``workload.epochs``, ``max_runtime_seconds``...) where the spec given to a resume
    differs from the sweep's ``spec.json``; the re-run cells use the given one.

    What uploading rewrites is not a difference: a ``file://`` data URI (uploaded under the sweep's
    ``data/`` prefix) and a script's source folder (uploaded as the sweep's ``code/`` archive). What the
    folder holds is: with ``code_digest`` (the given source dir's archive digest), an archive other than
    the sweep's is named as ``workload.source_dir (its files changed)``.
    """

    def flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in d.items():
            if isinstance(v, dict) and v:
                out.update(flat(v, f"{prefix}{k}."))
            else:
                out[f"{prefix}{k}"] = v
        return out

    old, new = flat(saved), flat(given)
    if str(new.get("data") or "").startswith("file://") and layout.data_prefix(sweep_id) in str(
        old.get("data") or ""
    ):
        old["data"] = new["data"]
    code_changed = False
    uploaded = str(old.get("workload.source_dir") or "")
    if layout.code_prefix(sweep_id) in uploaded:
        for k in _SOURCE_KEYS:
            old[f"workload.{k}"] = new.get(f"workload.{k}")
        code_changed = code_digest is not None and not uploaded.endswith(
            layout.code_key(sweep_id, code_digest)
        )
    changed = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
    return [*changed, CODE_CHANGED] if code_changed else changed


@dataclass
class ResumeOutcome:
    status: str  # SUCCEEDED when every resumed execution succeeded
    error: str | None
    rerun: list[str]  # run names run again
    detail: str | None = None  # execution_error_detail of the failed execution


def resume_sweep(
    *,
    s3: S3Client,
    sfn: SFNClient,
    cfn: CloudFormationClient,
    lam: LambdaClient,
    stack_name: str,
    bucket: str,
    state_machine_arn: str,
    sweep_id: str,
    spec: dict[str, Any],
    watch: Callable[[str], str],
    before_merge: Callable[[], Any] | None = None,
) -> ResumeOutcome:
    """Re-run the cells of a sweep in ``bucket`` that have no results, then re-aggregate all cells
    (even when none is re-run: a sweep interrupted before its aggregation gets its report).

    A sweep whose last execution failed, timed out or was stopped is first redriven
    (:func:`redrive_interrupted`). Then one execution per reduced spec (:func:`plan_resume`), one after
    the other so the spec's ``max_concurrency`` holds. PlanSweep rewrites ``spec.json``/``jobs.json``
    for a reduced spec: the sweep's own are put back before AggregateSweep runs on the merged cells.
    """
    redrive_interrupted(sfn, state_machine_arn, sweep_id, watch)
    jobs_doc = s3io.get_json(s3, bucket, layout.jobs_key(sweep_id))
    if jobs_doc is None:
        raise SweepNotFoundError(f"cannot resume {sweep_id!r}: no {layout.jobs_key(sweep_id)} in {bucket}")
    saved_spec = s3io.get_bytes(s3, bucket, layout.spec_key(sweep_id))
    have = run_records(s3, bucket, sweep_id)
    unaggregated = have - {c.get("run_name") for c in jobs_doc.get("cells") or []}
    finished = finished_runs(s3, bucket, sweep_id, unaggregated)
    # kept without a final cell: their jobs' ends may never have been recorded (seed outputs missing)
    runs.complete_runs(s3, bucket, sweep_id, jobs_of_document(jobs_doc), sorted(finished))
    plan = plan_resume(spec, jobs_doc, have, finished)
    rerun = plan.missing + plan.also_rerun
    function = find_function(cfn, stack_name, "Aggregate")
    if function is None:
        raise TrainsweepError(f"stack {stack_name} has no AggregateSweep function to merge the resumed sweep")
    outcome = ResumeOutcome("SUCCEEDED", None, rerun)
    new_cells = _run_reduced(s3, sfn, bucket, state_machine_arn, sweep_id, plan.specs, watch, outcome)
    # A cell whose re-run left no record (its execution was refused or failed) keeps its old one.
    renewed = {c.get("run_name") for c in new_cells}
    old = {c.get("run_name"): c for c in jobs_doc.get("cells") or []}
    new_cells += [old[r] for r in rerun if r not in renewed and r in old]
    _put_back(s3, bucket, sweep_id, saved_spec, jobs_doc)
    if before_merge is not None:
        before_merge()
    reaggregate(lam, function, sweep_id, merge_cells(plan.kept_cells, new_cells))
    return outcome


def _run_reduced(
    s3: S3Client,
    sfn: SFNClient,
    bucket: str,
    state_machine_arn: str,
    sweep_id: str,
    specs: list[dict[str, Any]],
    watch: Callable[[str], str],
    outcome: ResumeOutcome,
) -> list[dict[str, Any]]:
    """Run the reduced specs one after the other; returns the final records of the re-run cells. An
    execution that did not succeed sets ``outcome``'s status, error and detail."""
    rerun = set(outcome.rerun)
    new_cells: list[dict[str, Any]] = []
    for i, reduced in enumerate(specs):
        attempt = sweeps.resume_attempt(i)
        suffix = f"resume{i}-{int(time.time())}"
        arn = sweeps.start_sweep(sfn, state_machine_arn, reduced, sweep_id, suffix=suffix, attempt=attempt)
        ended = watch(arn)
        if ended != "SUCCEEDED":
            outcome.status = ended
            outcome.error = sweeps.execution_error(sfn, arn)
            outcome.detail = sweeps.execution_error_detail(sfn, arn)
        doc = s3io.get_json(s3, bucket, layout.jobs_key(sweep_id)) or {}
        new_cells += [c for c in doc.get("cells") or [] if c.get("run_name") in rerun]
    return new_cells


def _put_back(
    s3: S3Client, bucket: str, sweep_id: str, saved_spec: bytes | None, jobs_doc: dict[str, Any]
) -> None:
    """The sweep's own ``spec.json`` and ``jobs.json`` (without final cells) where a reduced spec's
    PlanSweep wrote its own."""
    if saved_spec is not None:
        s3io.put_bytes(s3, bucket, layout.spec_key(sweep_id), saved_spec)
    original = {k: v for k, v in jobs_doc.items() if k != "cells"}
    s3io.put_bytes(
        s3,
        bucket,
        layout.jobs_key(sweep_id),
        (json.dumps(original, indent=2, sort_keys=True) + "\n").encode(),
    )


REDRIVABLE = ("FAILED", "TIMED_OUT", "ABORTED")


def redrive_interrupted(
    sfn: SFNClient, state_machine_arn: str, sweep_id: str, watch: Callable[[str], str]
) -> str | None:
    """Redrive the sweep's last execution when it failed, timed out or was stopped, and watch it: Step
    Functions re-runs it from the state that failed, its Distributed Maps only the child executions that
    did not succeed (and those never started). Returns how it ended, or None when there was nothing to
    redrive or Step Functions refused (an execution older than 14 days, one already redriven too often):
    the cells without results are re-run as before.
    """
    from trainsweep.aws.credentials import raise_for_credentials

    arn = sweeps.latest_execution_arn(sfn, state_machine_arn, sweep_id)
    if arn is None or sfn.describe_execution(executionArn=arn)["status"] not in REDRIVABLE:
        return None
    try:
        sfn.redrive_execution(executionArn=arn)
    except Exception as exc:  # ExecutionNotRedrivable and friends: resume without it
        raise_for_credentials(exc)
        return None
    return watch(arn)
