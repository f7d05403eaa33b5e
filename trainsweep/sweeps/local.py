"""The local driver: a whole sweep on this machine, through the embedded AWS, the project's stack and the
real state machine.

:func:`run_local` is what ``trainsweep run SPEC --local`` (and ``trainsweep.run(spec, local=True)``) does:
it checks a resume's spec against the sweep's own and tells its events what happens around
:func:`run_local_sweep`, which does the work: start a fresh embedded AWS, deploy
the synthesized stack into it, upload a ``file://`` data channel, start the state machine on the spec,
report progress, wait for every S3 notification, download ``sweeps/<id>/`` into ``<out>/<id>/`` and
stop everything. ``resume=SWEEP_ID`` puts a downloaded sweep back, re-runs only its cells without
results and re-aggregates all cells. On Ctrl-C the training processes and the execution are stopped
and whatever results exist are downloaded before :class:`SweepInterrupted` (a ``KeyboardInterrupt``
that says whether anything was downloaded) propagates.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from trainsweep import atomicio, layout
from trainsweep.errors import LocalModeError
from trainsweep.sweeps import claim
from trainsweep.sweeps.common import finish, log_path_for, spec_change_note
from trainsweep.sweeps.result import DEFAULT_RESULTS_DIR, SweepEvents, SweepInterrupted, SweepRun
from trainsweep.sweeps.termination import interrupt_on_termination

if TYPE_CHECKING:
    from trainsweep.sourcedir import StagedSource

# Results are downloaded once every log notification is handled, or ParseRun made no progress this long.
NOTIFICATION_STALL_S = 120.0
LOG = logging.getLogger(__name__)
StatusCallback = Callable[[Any], None]


def _check_local(spec: Any, has_gpu: Callable[[], bool]) -> None:
    from trainsweep.instances import LOCAL_CPU, LOCAL_GPU

    cloud = [t for t in spec.instance_types if t not in (LOCAL_CPU, LOCAL_GPU)]
    if cloud:
        raise LocalModeError(
            f"local mode runs instance types {LOCAL_CPU!r} and {LOCAL_GPU!r}; the spec names {cloud}: "
            "use them in a cloud run (without --local) or replace them by 'local'"
        )
    if LOCAL_GPU in spec.instance_types and not has_gpu():
        raise LocalModeError(
            "the spec asks for 'local_gpu' but this machine has no NVIDIA GPU (nvidia-smi -L lists none); "
            "use 'local' to train on the CPU"
        )


def upload_data(s3: Any, bucket: str, sweep_id: str, uri: str) -> str:
    """Upload a ``file://`` file or folder as the ``train`` channel; returns its ``s3://`` URI."""
    parsed = urlparse(uri)
    path = Path(unquote(parsed.netloc + parsed.path)) if parsed.scheme == "file" else Path(uri)
    if not path.exists():
        raise LocalModeError(f"data {uri!r}: {path} does not exist")
    prefix = layout.data_prefix(sweep_id)
    files = [path] if path.is_file() else sorted(f for f in path.rglob("*") if f.is_file())
    if not files:
        raise LocalModeError(f"data {uri!r}: {path} holds no files")
    for f in files:
        rel = f.name if path.is_file() else f.relative_to(path).as_posix()
        s3.upload_file(str(f), bucket, prefix + rel)
    return f"s3://{bucket}/{prefix}"


class _Synth:
    """``synthesize`` in a background thread; :meth:`result` waits for it (and re-raises its error)."""

    def __init__(self, root: Path | None) -> None:
        from trainsweep.local.deploy import PROJECT_ROOT, synthesize

        self.waited = 0.0
        self._out: list[Any] = []
        self._thread = threading.Thread(
            target=lambda: self._out.append(_capture(synthesize, root or PROJECT_ROOT)), daemon=True
        )
        self._thread.start()

    def result(self) -> Path:
        t0 = time.perf_counter()
        self._thread.join()
        self.waited = time.perf_counter() - t0
        ok, value = self._out[0]
        if not ok:
            raise value
        return Path(value)


# Loggers of the embedded AWS: what they report (e.g. moto's Step Functions interpreter logs each
# aborted state with the whole state machine's internals, 165 KB on Ctrl-C; requests it refused) goes to a
# file, not the terminal.
EMULATOR_LOGGERS = ("moto", "werkzeug", "trainsweep.local.access")


def _log_emulator_to(path: Path) -> Callable[[], None]:
    """Send :data:`EMULATOR_LOGGERS` to ``path`` instead of the terminal; returns the undo."""

    class FileOnFirstRecord(logging.FileHandler):
        """No file (and no folder) until something is logged."""

        def _open(self) -> Any:
            Path(self.baseFilename).parent.mkdir(parents=True, exist_ok=True)
            return super()._open()

    handler = FileOnFirstRecord(path, delay=True, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    saved = {}
    for name in EMULATOR_LOGGERS:
        logger = logging.getLogger(name)
        saved[name] = logger.propagate
        logger.addHandler(handler)
        logger.propagate = False

    def restore() -> None:
        for name, propagate in saved.items():
            logging.getLogger(name).removeHandler(handler)
            logging.getLogger(name).propagate = propagate
        handler.close()

    return restore


def _capture(fn: Callable[..., Any], *args: Any) -> tuple[bool, Any]:
    try:
        return True, fn(*args)
    except Exception as exc:
        return False, exc


def run_local_sweep(
    spec_source: Any,
    *,
    out_root: Path = DEFAULT_RESULTS_DIR,
    resume: str | None = None,
    on_update: StatusCallback | None = None,
    poll_s: float = 1.0,
    entry_point: Path | None = None,
    stop_grace_s: float = 10.0,
    has_gpu: Callable[[], bool] | None = None,
    job_env: dict[str, str] | None = None,
    now: datetime | None = None,
    project_root: Path | None = None,
    sweep_id: str | None = None,
    spec_folder: Path | None = None,
    staged: StagedSource | None = None,
    models: bool = False,
) -> SweepRun:
    """Run (or resume) a sweep locally and download its results; see the module docstring.

    ``sweep_id`` names a new sweep (default: from the spec's name and the time; a phase of a two-phase
    sweep names its own); ``spec_folder`` is where the spec's relative paths start when ``spec_source``
    is not a file (default: the file's folder, else the current one); ``staged``: the script's folder as
    the caller already packed (and checked) it, else it is packed here; ``models``: download the jobs'
    models and checkpoints too (:func:`trainsweep.aws.sweeps.download_sweep`).
    """
    from trainsweep.aws.workflow import check_plan_fits
    from trainsweep.local.executor import gpu_available
    from trainsweep.sourcedir import spec_dir, stage
    from trainsweep.spec import check_sweep_id, load_spec, make_sweep_id, plan_sweep
    from trainsweep.tracking import check_client

    t_start = time.perf_counter()
    if resume is not None:
        check_sweep_id(resume)  # it names a folder under out_root
    spec = load_spec(spec_source)
    _check_local(spec, has_gpu or gpu_available)
    check_client(spec.tracking)
    # The script, its folder and its requirements are checked before anything starts.
    if staged is None:
        staged = stage(spec.workload, spec_folder or spec_dir(spec_source), check_requirements=True)
    out_root = Path(out_root)
    created_root = not out_root.exists()
    if resume:
        sweep_id = resume
        lock = claim.acquire(out_root, sweep_id)  # a second run of the same sweep is refused
    else:
        sweep_id = claim.claim_new(out_root, sweep_id or make_sweep_id(spec.name, now or datetime.now(UTC)))
        lock = claim.acquire(out_root, sweep_id)
    dest = out_root / sweep_id
    result = SweepRun(sweep_id, dest, None, None, log_path=log_path_for(dest), local=True)
    try:
        with interrupt_on_termination():
            plan = plan_sweep(spec, sweep_id=sweep_id)
            check_plan_fits(plan)  # PlanSweep would refuse it once deployed
            if resume:
                _check_resumable(dest, sweep_id, out_root)
            _run_in_embedded_aws(
                result, spec, staged, resume=bool(resume), on_update=on_update, poll_s=poll_s,
                aws_options={"entry_point": entry_point, "stop_grace_s": stop_grace_s, "has_gpu": has_gpu,
                             "job_env": {**_thread_env(spec, len(plan.jobs)), **(job_env or {})}},
                project_root=project_root, models=models,
            )  # fmt: skip
    finally:
        _release(lock, result, out_root if created_root else None)
        result.timings["total"] = time.perf_counter() - t_start
    return result


def _release(lock: claim.SweepLock, result: SweepRun, created_root: Path | None) -> None:
    """The end of a run: an interrupted sweep with something to resume keeps its lock file (nobody holds
    it: ``status`` says ``INTERRUPTED``); a run that left nothing leaves no folder either."""
    resumable = (result.dest / layout.JOBS_JSON).is_file()
    if result.interrupted and resumable:
        lock.handle.close()
    else:
        lock.release()
    if not resumable:
        for folder in (result.dest, created_root):
            if folder is not None:
                with contextlib.suppress(OSError):
                    folder.rmdir()  # only when empty


def _check_resumable(dest: Path, sweep_id: str, out_root: Path) -> None:
    """A resume needs the sweep's plan: ``jobs.json``, or ``spec.json`` to plan it again (the plan is
    deterministic) when a killed writer left ``jobs.json`` empty or cut short."""
    from trainsweep.spec import plan_sweep

    jobs = dest / layout.JOBS_JSON
    if isinstance(atomicio.read_json(jobs), dict):
        return
    saved = atomicio.read_json(dest / layout.SPEC_JSON)
    why = "is empty or cut short" if jobs.is_file() else "not found"
    if not isinstance(saved, dict):
        raise LocalModeError(
            f"cannot resume {sweep_id!r}: {jobs} {why} and no readable {layout.SPEC_JSON} beside it to plan "
            f"it again (the sweep never got its plan: start it again without --resume; resume a sweep "
            f"downloaded under {out_root})"
        )
    LOG.warning("%s %s: planned again from %s", jobs, why, layout.SPEC_JSON)
    atomicio.write_bytes(jobs, plan_sweep(saved, sweep_id=sweep_id).jobs_json())


def _thread_env(spec: Any, jobs: int) -> dict[str, str]:
    """Each job process's share of this machine's cores (:mod:`trainsweep.local.threads`)."""
    from trainsweep.local.threads import job_thread_env

    return job_thread_env(jobs_at_once=min(spec.max_concurrency, jobs), hosts_per_job=max(spec.node_counts))


def _run_in_embedded_aws(
    result: SweepRun,
    spec: Any,
    staged: StagedSource | None,
    *,
    resume: bool,
    on_update: StatusCallback | None,
    poll_s: float,
    aws_options: dict[str, Any],
    project_root: Path | None,
    models: bool,
) -> None:
    """Start the embedded AWS, deploy, run (or resume) the sweep with its results copied to ``dest`` as
    they appear, download, stop everything."""
    from trainsweep.aws import outputs as output_names
    from trainsweep.aws import sweeps
    from trainsweep.aws.mirror import SweepMirror, run_files_only
    from trainsweep.local.server import EmbeddedAws

    sweep_id, dest = result.sweep_id, result.dest
    mirror: SweepMirror | None = None
    aws = EmbeddedAws(**aws_options)
    # Synthesis (a Node.js subprocess) overlaps the server's start.
    synth = _Synth(project_root)
    restore_logging = _log_emulator_to(log_path_for(dest))
    deployed: list[str] = []  # the bucket, once there is one
    try:
        stack, spec_dict = _deploy(aws, synth, result, spec, staged)
        bucket = stack.output(output_names.BUCKET_NAME)
        deployed.append(bucket)
        machine = stack.output(output_names.STATE_MACHINE_ARN)
        watch = _watcher(aws, bucket, result, on_update, poll_s)
        # A resume's reduced specs rewrite the plan and the report: only each run's files go to disk
        # as they come, the rest with the final download.
        mirror = SweepMirror(
            aws.client("s3"), bucket, sweep_id, dest, accept=run_files_only if resume else None
        )
        if not resume:
            sfn = aws.client("stepfunctions")
            mirror.start()
            arn = sweeps.start_sweep(sfn, machine, spec_dict, sweep_id)
            result.execution_status = watch(arn)
            result.error = sweeps.execution_error(sfn, arn)
            result.error_detail = sweeps.execution_error_detail(sfn, arn)
        else:
            _resume(aws, stack, dest, spec_dict, sweep_id, bucket, machine, watch, result, mirror)
        _drain(aws, stack, result)
    except KeyboardInterrupt:
        result.interrupted = True
        with contextlib.suppress(Exception):
            aws.stop_executions()
        if aws.sagemaker is not None:
            aws.sagemaker.stop_all()
        if aws.notifications is not None:
            aws.notifications.drain(30)
        raise SweepInterrupted(result) from None  # ``finally`` below downloads first
    finally:
        if mirror is not None:
            mirror.stop()
        try:
            _download(aws, result, deployed[0] if deployed else None, models)
        finally:
            t0 = time.perf_counter()
            aws.close()
            restore_logging()
            result.timings["shutdown"] = time.perf_counter() - t0


def _deploy(aws: Any, synth: _Synth, result: SweepRun, spec: Any, staged: StagedSource | None) -> Any:
    """Start the server, deploy the stack, upload the data channel and the script's folder; returns the
    stack and the spec as the state machine gets it."""
    from trainsweep.aws import outputs as output_names
    from trainsweep.aws.code import upload_source

    aws.start()
    if aws.sagemaker is not None:
        aws.sagemaker.keep_output = result.dest / layout.JOB_OUTPUT_DIR  # the jobs' folders are temporary
    stack = aws.deploy(assembly=synth.result())
    result.timings.update(aws.timings)
    result.timings["synth_wait"] = synth.waited
    bucket = stack.output(output_names.BUCKET_NAME)
    s3 = aws.client("s3")
    spec_dict = spec.to_dict()
    if spec.data and spec.data.startswith("file://"):
        spec_dict["data"] = upload_data(s3, bucket, result.sweep_id, spec.data)
    if staged is not None:
        spec_dict = upload_source(s3, bucket, result.sweep_id, spec_dict, staged)
    return stack, spec_dict


def _watcher(
    aws: Any, bucket: str, result: SweepRun, on_update: StatusCallback | None, poll_s: float
) -> Callable[[str], str]:
    """``watch(execution_arn)``: the live view every ``poll_s`` until the execution ends; its status."""
    from trainsweep.aws import sweeps

    s3, sfn, sm = aws.client("s3"), aws.client("stepfunctions"), aws.client("sagemaker")

    def watch(execution_arn: str) -> str:
        while True:
            view = sweeps.sweep_view(
                s3=s3, bucket=bucket, sweep_id=result.sweep_id, sagemaker=sm, sfn=sfn,
                execution_arn=execution_arn, region=aws.region,
            )  # fmt: skip
            result.view = view
            if on_update is not None:
                on_update(view)
            if view.finished:
                return str(view.execution_status)
            time.sleep(poll_s)

    return watch


def _drain(aws: Any, stack: Any, result: SweepRun) -> None:
    """Wait while log notifications are parsed; count ParseRun's failures."""
    from trainsweep.aws import outputs as output_names
    from trainsweep.aws.failures import queued_failures

    t0 = time.perf_counter()
    # Many cells finishing at once queue many notifications: wait while they are being parsed (a
    # fixed cap would download before the last ones and lose their results).
    if not aws.notifications.drain(stall_s=NOTIFICATION_STALL_S):
        LOG.warning(
            "%d log notifications not handled: ParseRun made no progress for %d s",
            aws.notifications.pending,
            NOTIFICATION_STALL_S,
        )
    result.timings["drain"] = time.perf_counter() - t0
    result.parse_failures = queued_failures(
        aws.client("sqs"), stack.output(output_names.PARSE_FAILURE_QUEUE_URL)
    )


def _download(aws: Any, result: SweepRun, bucket: str | None, models: bool) -> None:
    """The whole prefix into ``dest`` once more (``jobs.json`` last), and the final view."""
    from trainsweep.aws import sweeps

    if aws.sagemaker is not None:
        result.training_seconds = aws.sagemaker.process_seconds()
    if aws.port is None or bucket is None:
        return
    t0 = time.perf_counter()
    with contextlib.suppress(sweeps.SweepNotFoundError):
        sweeps.download_sweep(aws.client("s3"), bucket, result.sweep_id, result.dest, models=models)
        result.downloaded = True
        result.view = _final_view(aws, bucket, result.sweep_id, result.view)
    result.timings["download"] = time.perf_counter() - t0


def _final_view(aws: Any, bucket: str, sweep_id: str, current: Any) -> Any:
    """The cells after aggregation (jobs.json holds their final statuses), with SageMaker's timings."""
    from trainsweep.aws import sweeps

    try:
        view = sweeps.sweep_view(
            s3=aws.client("s3"), bucket=bucket, sweep_id=sweep_id, sagemaker=aws.client("sagemaker"),
            region=aws.region,
        )  # fmt: skip
        if current is not None:
            view.execution_status, view.elapsed_s = current.execution_status, current.elapsed_s
        return view
    except Exception:
        return current


def _resume(
    aws: Any,
    stack: Any,
    previous: Path,
    spec_dict: dict[str, Any],
    sweep_id: str,
    bucket: str,
    machine: str,
    watch: Callable[[str], str],
    result: SweepRun,
    mirror: Any,
) -> None:
    from trainsweep.aws import resume, sweeps

    s3 = aws.client("s3")
    sweeps.upload_sweep(s3, bucket, sweep_id, previous)
    mirror.mark_current()  # what was just uploaded is on disk already
    mirror.start()
    outcome = resume.resume_sweep(
        s3=s3,
        sfn=aws.client("stepfunctions"),
        cfn=aws.client("cloudformation"),
        lam=aws.client("lambda"),
        stack_name=stack.name,
        bucket=bucket,
        state_machine_arn=machine,
        sweep_id=sweep_id,
        spec=spec_dict,
        watch=watch,
        before_merge=lambda: aws.notifications.drain(stall_s=NOTIFICATION_STALL_S),
    )
    result.execution_status = outcome.status
    result.error = outcome.error
    result.error_detail = outcome.detail
    result.resumed_runs = outcome.rerun


def run_local(
    spec_source: Any,
    *,
    out: Path = DEFAULT_RESULTS_DIR,
    resume: str | None = None,
    events: SweepEvents | None = None,
    sweep_id: str | None = None,
    spec_folder: Path | None = None,
    record: dict[str, Any] | None = None,
    models: bool = False,
) -> SweepRun:
    """Run (or resume) a sweep on this machine and download it to ``out/<sweep-id>/``.

    Before a resume, a spec that differs from the sweep's own is said (``events.note``); after the run,
    the re-run cells and ParseRun's failures. ``record``: a phase's record for its folder
    (:func:`trainsweep.phases.phases_record`). Ctrl-C raises :class:`SweepInterrupted`.
    """
    from trainsweep.sweeps import local as this  # looked up on each call, so tests can replace it

    events = events or SweepEvents()
    staged = None
    if resume:
        saved = atomicio.read_json(out / resume / layout.SPEC_JSON)  # None when empty or cut short
        if isinstance(saved, dict):
            from trainsweep.sourcedir import spec_dir, stage
            from trainsweep.spec import load_spec

            # packed once: the digest says whether the files changed, the run uploads the same archive
            folder = spec_folder or spec_dir(spec_source)
            staged = stage(load_spec(spec_source).workload, folder, check_requirements=True)
            digest = staged.packed.digest if staged is not None else None
            note = spec_change_note(saved, spec_source, resume, digest)
            if note:
                events.note(note)
    events.say("Starting the embedded AWS and deploying the stack (local mode)…")
    result = this.run_local_sweep(
        spec_source,
        out_root=out,
        resume=resume,
        on_update=events.update,
        sweep_id=sweep_id,
        spec_folder=spec_folder,
        staged=staged,
        models=models,
    )
    if resume:
        events.say(f"Resumed {len(result.resumed_runs)} run(s): {', '.join(result.resumed_runs) or 'none'}")
    if result.parse_failures is not None and result.parse_failures.alarming:
        # The queue goes with the embedded AWS: say it here, `status` reads the downloaded sweep.
        events.warn(result.parse_failures.local_line())
    from trainsweep.spec import load_spec

    return finish(result, events, record, load_spec(spec_source))
