"""The cloud driver: a sweep in the deployed stack, with the user's AWS session.

:func:`run_cloud` is what ``trainsweep run SPEC`` (and ``trainsweep.run(spec)``) does: check the spec and
its worst-case cost as PlanSweep will, pack the script's folder, start the state machine (or resume the
sweep's cells without results), watch the cells and download the results to ``out/<sweep-id>/``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trainsweep.aws.region import open_session
from trainsweep.sweeps.common import finish, spec_change_note
from trainsweep.sweeps.result import DEFAULT_RESULTS_DIR, SweepEvents, SweepInterrupted, SweepRun

POLL_S = 5.0
"""Seconds between two looks at a cloud sweep's cells."""


def stack_resources(session: Any, stack: str) -> tuple[str, str]:
    """(results bucket, state machine ARN) of a deployed trainsweep stack.

    Raises:
        TrainsweepError: the stack is not deployed (or lacks those outputs).
    """
    from trainsweep.aws import outputs as names
    from trainsweep.aws import sweeps

    source = getattr(session, "region_source", None)
    outputs = sweeps.stack_outputs(session.client("cloudformation"), stack, region_source=source)
    return (
        sweeps.pick_output(outputs, names.BUCKET_NAME),
        sweeps.pick_output(outputs, names.STATE_MACHINE_ARN),
    )


def watch_execution(
    clients: Any, bucket: str, sweep_id: str, arn: str, events: SweepEvents, poll_s: float | None = None
) -> str:
    """Tell ``events`` the cells' status until the execution ends (a look every ``poll_s``, default
    :data:`POLL_S`); returns how it ended."""
    from trainsweep.aws import sweeps

    s3, sfn, sm, region = clients
    seen: dict[str, Any] = {}  # ended jobs' descriptions: not asked for again
    while True:
        view = sweeps.sweep_view(
            s3=s3, bucket=bucket, sweep_id=sweep_id, sagemaker=sm, sfn=sfn, execution_arn=arn,
            region=region, jobs_seen=seen,
        )  # fmt: skip
        events.update(view)
        if view.finished:
            return str(view.execution_status)
        time.sleep(POLL_S if poll_s is None else poll_s)


def _checked_start(session: Any, spec: Any, stack: str) -> tuple[str, str] | None:
    """Refuse what cannot run before anything starts; returns the stack's bucket and state machine
    (None when the stack is not found: the caller says so after checking the script).

    Priced as PlanSweep prices it (the stack's cache, the Pricing API, the shipped catalogue): an
    over-budget sweep, local instance types and one too large for the workflow are refused.
    """
    from trainsweep.aws.pricing import pricing_client, stack_price_fn
    from trainsweep.aws.workflow import check_plan_fits
    from trainsweep.errors import TrainsweepError
    from trainsweep.spec import plan_sweep
    from trainsweep.tracking import check_client

    check_client(spec.tracking)
    if spec.data and spec.data.startswith("file://"):
        raise TrainsweepError("a file:// data URI works only with --local: upload the data and use s3://")
    s3 = session.client("s3")
    try:
        found: tuple[str, str] | None = stack_resources(session, stack)
    except TrainsweepError:
        found = None  # a bad spec is said first; the missing stack right after
    price = stack_price_fn(
        s3, found[0] if found else None, pricing_client(session), session.region_name, spec.instance_types
    )
    check_plan_fits(plan_sweep(spec, region=session.region_name, cloud=True, price=price))
    return found


def run_cloud(
    spec_source: Path | dict[str, Any],
    *,
    stack: str,
    session: Any = None,
    profile: str | None = None,
    region: str | None = None,
    out: Path = DEFAULT_RESULTS_DIR,
    resume: str | None = None,
    watch: bool = True,
    events: SweepEvents | None = None,
    sweep_id: str | None = None,
    spec_folder: Path | None = None,
    record: dict[str, Any] | None = None,
    models: bool = False,
    poll_s: float | None = None,
) -> SweepRun:
    """Start (or resume) a sweep in the stack, watch it and download it to ``out/<sweep-id>/``.

    ``session``: a boto3 session, else one for ``profile`` and ``region``. ``watch=False`` only starts it
    (the result's ``watched`` is False and nothing is downloaded); ``models``: download the jobs' models
    and checkpoints too. Ctrl-C while watching raises
    :class:`SweepInterrupted`: the sweep goes on in AWS.
    """
    from trainsweep.aws import sweeps
    from trainsweep.errors import TrainsweepError
    from trainsweep.sourcedir import spec_dir, stage
    from trainsweep.spec import load_spec, make_sweep_id
    from trainsweep.sweeps.download import fetch

    events = events or SweepEvents()
    spec = load_spec(spec_source)
    session = session or open_session(profile, region, spec_region=spec.region)
    found = _checked_start(session, spec, stack)
    staged = stage(
        spec.workload, spec_folder or spec_dir(spec_source), check_requirements=False
    )  # the job installs them
    bucket, machine = found or stack_resources(session, stack)
    s3, sfn, sm = session.client("s3"), session.client("stepfunctions"), session.client("sagemaker")
    sweep_id = resume or sweep_id or make_sweep_id(spec.name, datetime.now(UTC))
    spec_dict = _with_uploaded_code(s3, bucket, sweep_id, spec.to_dict(), staged, events)
    run = SweepRun(sweep_id, out / sweep_id, None, None, local=False)
    clients = (s3, sfn, sm, session.region_name)

    def wait(arn: str) -> str:
        return watch_execution(clients, bucket, sweep_id, arn, events, poll_s)

    if resume:
        if not watch:
            raise TrainsweepError("--resume waits for the re-run cells to re-aggregate: drop --no-watch")
        try:
            _resume(session, stack, bucket, machine, run, spec_source, spec_dict, staged, wait, events)
        except KeyboardInterrupt:
            run.interrupted = True
            raise SweepInterrupted(run) from None
    elif not _start(sfn, machine, spec_dict, run, wait if watch else None, events):
        if spec.tracking is not None:
            events.note(
                "tracking: the sweep is exported to MLflow when `trainsweep run` watches it to its end; "
                "after `trainsweep download`, `trainsweep export mlflow` does it"
            )
        return run
    fetch(s3, bucket, sweep_id, run.dest, models=models, events=events)
    run.downloaded = True
    run.view = sweeps.sweep_view(
        s3=s3, bucket=bucket, sweep_id=sweep_id, sagemaker=sm, region=session.region_name
    )
    return finish(run, events, record, spec)


def _with_uploaded_code(
    s3: Any, bucket: str, sweep_id: str, spec_dict: dict[str, Any], staged: Any, events: SweepEvents
) -> dict[str, Any]:
    """The spec the sweep runs: with the script's folder packed and uploaded, when it has one."""
    from trainsweep.aws.code import upload_source

    if staged is None:
        return spec_dict
    spec_dict = upload_source(s3, bucket, sweep_id, spec_dict, staged)
    events.say(
        f"Packed {staged.local.root} ({staged.packed.files} files, "
        f"{len(staged.packed.data) / 1024:.0f} KiB) for every job of the sweep"
    )
    return spec_dict


def _start(
    sfn: Any,
    machine: str,
    spec_dict: dict[str, Any],
    run: SweepRun,
    wait: Callable[[str], str] | None,
    events: SweepEvents,
) -> bool:
    """Start the sweep's execution and, with ``wait``, watch it to its end (Ctrl-C raises
    :class:`SweepInterrupted`); False: started only, not watched."""
    from trainsweep.aws import sweeps

    run.execution_arn = sweeps.start_sweep(sfn, machine, spec_dict, run.sweep_id)
    events.say(f"Started sweep {run.sweep_id} ({run.execution_arn})")
    if wait is None:
        run.watched = False
        return False
    try:
        run.execution_status = wait(run.execution_arn)
    except KeyboardInterrupt:
        run.interrupted = True
        raise SweepInterrupted(run) from None
    run.error = sweeps.execution_error(sfn, run.execution_arn)
    run.error_detail = sweeps.execution_error_detail(sfn, run.execution_arn)
    return True


def _resume(
    session: Any,
    stack: str,
    bucket: str,
    machine: str,
    run: SweepRun,
    spec_source: Path | dict[str, Any],
    spec_dict: dict[str, Any],
    staged: Any,
    wait: Any,
    events: SweepEvents,
) -> None:
    """Re-run the cells of ``run``'s sweep without results, then re-aggregate all of them."""
    from trainsweep import layout
    from trainsweep.aws import resume
    from trainsweep.aws import s3 as s3io

    s3 = session.client("s3")
    saved_spec = s3io.get_json(s3, bucket, layout.spec_key(run.sweep_id))
    note = spec_change_note(
        saved_spec, spec_source, run.sweep_id, staged.packed.digest if staged is not None else None
    )
    if note:
        events.note(note)
    outcome = resume.resume_sweep(
        s3=s3, sfn=session.client("stepfunctions"), cfn=session.client("cloudformation"),
        lam=resume.aggregate_client(session), stack_name=stack, bucket=bucket, state_machine_arn=machine,
        sweep_id=run.sweep_id, spec=spec_dict, watch=wait,
    )  # fmt: skip
    run.execution_status, run.error, run.error_detail = outcome.status, outcome.error, outcome.detail
    run.resumed_runs = outcome.rerun
    events.say(f"Resumed {len(outcome.rerun)} run(s): {', '.join(outcome.rerun) or 'none'}")
