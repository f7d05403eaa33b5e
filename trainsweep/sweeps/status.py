"""The status driver: every cell of a sweep, read from its downloaded folder (every local sweep) or asked of
the deployed stack (``trainsweep status``, ``trainsweep.status``, ``trainsweep.watch``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainsweep.errors import TrainsweepError
from trainsweep.sweeps.result import DEFAULT_RESULTS_DIR, SweepEvents


@dataclass
class SweepStatus:
    """A sweep's cells (``view``: a :class:`trainsweep.aws.sweeps.SweepView`) and, for a sweep asked of
    the stack, its ParseRun failure queue's count (``parse_failures``: None when not asked, or for a stack
    deployed before it had the queue)."""

    view: Any
    parse_failures: Any = None
    downloaded: bool = False  # read from a downloaded folder, not from the stack


class UnreadableSweepError(TrainsweepError):
    """A downloaded sweep's ``jobs.json`` is there but empty or cut short."""


def check_folder_id(sweep_id: str) -> None:
    """Refuse an id that would name a folder outside the results (``..``, ``a/b``). Looser than a sweep
    id (:func:`trainsweep.spec.check_sweep_id`): imported logs are the sweep ``import-<S3 folder>``."""
    from trainsweep.errors import SpecError

    if sweep_id in ("", ".", "..") or any(c in sweep_id for c in "/\\") or not sweep_id.isprintable():
        raise SpecError(
            f"invalid sweep id {sweep_id!r}: a sweep id names one folder (no '/', '\\' or '..')",
            [("sweep_id", "one folder name")],
        )


def status(
    sweep_id: str | None = None,
    *,
    results: Path = DEFAULT_RESULTS_DIR,
    stack: str,
    session: Any = None,
    profile: str | None = None,
    region: str | None = None,
) -> SweepStatus:
    """The status of a sweep (default: the latest): a sweep downloaded under ``results`` is read from disk;
    otherwise the deployed stack is asked, and says how many raw-log events ParseRun failed on for good.

    Raises:
        SpecError: ``sweep_id`` does not name one folder.
        TrainsweepError: not downloaded, and no such stack or sweep in AWS.
    """
    if sweep_id is not None:
        check_folder_id(sweep_id)  # it names a folder under results
    view = local_view(results, sweep_id)
    if view is not None and (view.finished or view.execution_status == "RUNNING"):
        return SweepStatus(view, downloaded=True)  # RUNNING: a local run holds its lock
    from trainsweep.aws.region import open_session

    try:  # a copy downloaded mid-run is stale: the cloud is asked first
        session = session or open_session(profile, region)
        cloud = cloud_view(session, stack, view.sweep_id if view is not None else sweep_id)
    except TrainsweepError:
        if view is None:
            raise
        return SweepStatus(view, downloaded=True)
    return SweepStatus(cloud, parse_failures(session, stack))


def watch(
    sweep_id: str | None = None,
    *,
    stack: str,
    session: Any = None,
    profile: str | None = None,
    region: str | None = None,
    events: SweepEvents | None = None,
    poll_s: float = 5.0,
) -> Any:
    """Follow a sweep running in the stack (default: the latest) until its execution ends; ``events`` hear
    each look. Returns the last :class:`trainsweep.aws.sweeps.SweepView`."""
    import time

    from trainsweep.aws.region import open_session

    session = session or open_session(profile, region)
    events = events or SweepEvents()
    while True:
        view = cloud_view(session, stack, sweep_id)
        events.update(view)
        if view.finished or view.execution_status is None:
            return view
        sweep_id = view.sweep_id
        time.sleep(poll_s)


def parse_failures(session: Any, stack: str) -> Any:
    """The count of the stack's ParseRun failure queue (``QueuedFailures``); None for a stack deployed
    before it had the queue."""
    from trainsweep.aws import outputs as names
    from trainsweep.aws import sweeps
    from trainsweep.aws.failures import queued_failures

    try:
        url = sweeps.pick_output(
            sweeps.stack_outputs(session.client("cloudformation"), stack), names.PARSE_FAILURE_QUEUE_URL
        )
    except TrainsweepError:
        return None
    return queued_failures(session.client("sqs"), url)


def local_view(results: Path, sweep_id: str | None) -> Any:
    """The status of a downloaded sweep (None when it is not on disk)."""
    from trainsweep import atomicio, layout
    from trainsweep.aws import sweeps

    if sweep_id is None:
        candidates = sorted(results.glob(f"*/{layout.JOBS_JSON}"), key=lambda p: p.stat().st_mtime)
        if not candidates:
            return None
        folder = candidates[-1].parent
    else:
        folder = results / sweep_id
    jobs_file = folder / layout.JOBS_JSON
    if not jobs_file.is_file():
        return None
    doc = atomicio.read_json(jobs_file)
    if not isinstance(doc, dict):
        raise UnreadableSweepError(
            f"{jobs_file} is empty or cut short (its writer was killed): the sweep's status is unknown; "
            f"`trainsweep run SPEC --local --resume {folder.name} --out {results}` plans it again from "
            f"its {layout.SPEC_JSON} and re-runs the cells without results"
        )
    runs = folder / layout.RESULTS_DIR / layout.RUNS_DIR
    records = sorted(runs.glob("*.json")) if runs.is_dir() else []
    have = {p.stem for p in records if p.stat().st_size > 0}  # an empty one is missing
    aggregated = {c.get("run_name") for c in doc.get("cells") or []}
    unfinished = {}
    for p in records:
        if p.stem in aggregated:
            continue  # its final record says more
        done, reason = sweeps.record_outcome(atomicio.read_json(p))
        if not done:
            unfinished[p.stem] = reason
    view = sweeps.view_from_documents(folder.name, doc, have, unfinished)
    if view.execution_status is None:  # not aggregated: is a run still at it, or was it killed?
        from trainsweep.sweeps.claim import run_state

        view.execution_status = run_state(results, folder.name)
    return view


def cloud_view(session: Any, stack: str, sweep_id: str | None) -> Any:
    """The live status of a sweep of the deployed stack (default: the latest in its bucket)."""
    from trainsweep.aws import sweeps
    from trainsweep.sweeps.cloud import stack_resources

    bucket, machine = stack_resources(session, stack)
    s3, sfn = session.client("s3"), session.client("stepfunctions")
    sweep_id = sweep_id or sweeps.latest_sweep_id(s3, bucket)
    if sweep_id is None:
        raise TrainsweepError(f"no sweep in bucket {bucket} yet; start one with `trainsweep run SPEC`")
    arn = sweeps.latest_execution_arn(sfn, machine, sweep_id)
    return sweeps.sweep_view(
        s3=s3, bucket=bucket, sweep_id=sweep_id, sagemaker=session.client("sagemaker"), sfn=sfn,
        execution_arn=arn, region=session.region_name,
    )  # fmt: skip
