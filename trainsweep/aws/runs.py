"""Turn raw logs in S3 into per-run artefacts, and finished jobs into per-cell status records.

The glue between S3 and the pure core (``trainsweep.logs.parse``, ``trainsweep.artefacts``): the
ParseRun handler calls :func:`process_log` for each S3 notification and :func:`record_job` once per
finished job of the state machine. Keys come from :mod:`trainsweep.layout`; every output lies below
``sweeps/<id>/results/``, which is not a trigger prefix, and is a deterministic function of its input.

A job's ``log_format`` (the spec's pattern for a log no built-in dialect reads) reaches the parser on
both paths: :func:`record_job` takes it from the job the state machine passes, :func:`process_log` from
the sweep's ``jobs.json`` (:func:`planned_job`), so a notification that arrives after the job was
recorded writes the same bytes. A notified log that no job of its sweep writes is not recorded at all.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from trainsweep import layout
from trainsweep.aws import s3 as s3io
from trainsweep.aws.outcome import Cell, cell_status, job_cells, job_outcome
from trainsweep.jobs import JobRecordError, PlannedJob, job_for_run, jobs_of_document

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

    from trainsweep.aws.growing import GrowingParse

LOG = logging.getLogger(__name__)


def parse_object(
    s3: S3Client, bucket: str, key: str, run_name: str, log_format: str | None = None
) -> Any | None:
    """Parse one raw log object into a ``RunTimings``; None if the object does not exist.

    ``log_format`` is the job's own pattern (None: sniff the built-in dialects). A log the parser
    cannot read still yields a run (status ``unreadable``, with problems), never an exception: S3
    retries failing asynchronous invocations, and a bad object would loop.
    """
    parsed = _parse_versioned(s3, bucket, key, run_name, log_format)
    return None if parsed is None else parsed[0]


def _parse_versioned(
    s3: S3Client, bucket: str, key: str, run_name: str, log_format: str | None = None
) -> tuple[Any, str] | None:
    from trainsweep.logs import parse
    from trainsweep.logs.model import RunTimings

    opened = s3io.open_chunks(s3, bucket, key)
    if opened is None:
        return None
    chunks, version = opened
    try:
        return parse(chunks, name=run_name, log_format=log_format), version
    except Exception as exc:  # a parser bug must not lose the report: record it as the run's problem
        LOG.exception("parser failed on s3://%s/%s", bucket, key)
        run = RunTimings(name=run_name, status="unreadable", failure_reason=f"parser error: {exc}")
        run.add_problem("parser-error", f"the parser raised {type(exc).__name__}: {exc}", severity="error")
        return run, version


def _parse_log(
    s3: S3Client, bucket: str, key: str, location: layout.LogLocation, log_format: str | None
) -> tuple[Any, str, GrowingParse | None] | None:
    """The run of the log at ``key``, the ETag of the version read, and the state to keep for its next
    version (None: the log is parsed whole, as a log without S3's SHA-256 of it is). None when the
    object is gone, or changed while it was read (the newer version's notification parses that one).

    A sweep's log that S3 keeps a whole-object SHA-256 of (the container's uploads) is read from where
    the last parse of it stopped (:mod:`trainsweep.aws.growing`); a failure there reads it whole.
    """
    from trainsweep.aws import growing

    if not location.is_import:
        version = growing.head_log(s3, bucket, key)
        if version is None:
            return None
        if version.sha256 is not None:
            state_key = layout.parse_state_key(location.sweep_id, location.run_name)
            try:
                parsed = growing.parse_growing(
                    s3, bucket, key, state_key, location.run_name, log_format, version
                )
            except Exception:  # the parse from the start below records a parser error as the run's
                LOG.exception("resumable parse of s3://%s/%s failed; parsing it whole", bucket, key)
            else:
                return None if parsed is None else (parsed.run, version.etag, parsed)
    whole = _parse_versioned(s3, bucket, key, location.run_name, log_format)
    return None if whole is None else (whole[0], whole[1], None)


def live_artefacts(run: Any) -> Iterator[tuple[str, Iterator[bytes]]]:
    """The artefacts written for each notified version of a sweep's log: the run record alone, which is
    what the live views read (``trainsweep status`` lists the records, a folder downloaded mid-run is
    reported from them). The seed outputs (``e<N>.json``, ``e<N>.summary``, ``e<N>.png``), which no view
    reads while the job runs and whose plot costs seconds at the end of a long log, wait for the job's
    end (:func:`record_job`)."""
    from trainsweep.artefacts import iter_run_record

    yield layout.run_record_path(run.name), iter_run_record(run)


def notified_artefacts(location: layout.LogLocation, run: Any) -> Iterator[tuple[str, Iterator[bytes]]]:
    """What a raw log's notification writes: every artefact of a log under ``imports/`` (a finished log
    that nothing parses again), the :func:`live_artefacts` of a sweep's log (its job uploads it again
    and again while it runs, whatever its dialect says of its end; the state machine's call once the
    job has ended writes them all)."""
    from trainsweep.artefacts import iter_run_artefacts

    return iter_run_artefacts(run) if location.is_import else live_artefacts(run)


def _write_run(
    s3: S3Client,
    bucket: str,
    sweep_id: str,
    run: Any,
    kept: GrowingParse | None,
    artefacts: Iterable[tuple[str, Iterable[bytes]]] | None = None,
) -> list[str]:
    """Write a run's artefacts (all of them unless given), then the parse state its log's next version
    resumes from."""
    from trainsweep.artefacts import iter_run_artefacts

    # Streamed, artefact by artefact: a 1 GB log's artefacts are hundreds of MB, more than the
    # function's memory holds next to the parsed run.
    artefacts = iter_run_artefacts(run) if artefacts is None else artefacts
    keys = s3io.put_all_streamed(s3, bucket, layout.results_prefix(sweep_id), artefacts)
    if kept is not None:
        from trainsweep.aws import growing

        growing.keep_state(s3, bucket, layout.parse_state_key(sweep_id, run.name), kept)
    return keys


def process_log(s3: S3Client, bucket: str, key: str, *, event_etag: str | None = None) -> list[str]:
    """Parse the raw log at ``key`` (already URL-decoded) and write its artefacts; returns the keys.

    Keys that are not raw logs (``layout.classify_log_key``) are ignored, so a stray notification
    cannot make the function write anything; nor does a log under ``sweeps/<id>/logs/`` whose run no
    job of that sweep's ``jobs.json`` writes (:func:`planned_job`). A running job re-uploads its
    growing log: when the object changed while it was being parsed, nothing is written, so a slow
    notification for an old version never overwrites the artefacts of a newer one (whose own
    notification follows). ``event_etag``, the ETag the notification names: a version already replaced
    again is not read at all (the newer version's notification parses that one), so a backlog of a
    running job's uploads costs one HEAD each, not a parse each. A sweep's log gets its
    :func:`live_artefacts` only (:func:`notified_artefacts`): :func:`record_job` writes them all once
    the job has ended.
    """
    location = layout.classify_log_key(key)
    if location is None:
        LOG.info("ignoring %s: not a raw log key", key)
        return []
    if event_etag and _bare(s3io.etag(s3, bucket, key)) not in (None, _bare(event_etag)):
        LOG.info("ignoring %s: the notified version has been replaced since", key)
        return []
    log_format = None
    if not location.is_import:
        job = planned_job(s3, bucket, location)
        if job is None:
            # Any training job may write any sweep's logs/ (one role serves every sweep): a log whose
            # run no job of this sweep's jobs.json writes must not rewrite that sweep's results.
            LOG.warning(
                "refusing %s: no job of sweep %s (its %s) writes a log named %s; nothing written",
                key,
                location.sweep_id,
                layout.JOBS_JSON,
                location.run_name,
            )
            return []
        log_format = job.log_format or None
    parsed = _parse_log(s3, bucket, key, location, log_format)
    if parsed is None:
        LOG.info("ignoring %s: the object is gone or was replaced while it was read", key)
        return []
    run, version, kept = parsed
    if s3io.etag(s3, bucket, key) != version:
        LOG.info("ignoring %s: a newer version arrived while parsing", key)
        return []
    return _write_run(s3, bucket, location.sweep_id, run, kept, notified_artefacts(location, run))


def planned_job(s3: S3Client, bucket: str, location: layout.LogLocation) -> PlannedJob | None:
    """The job of the sweep's ``jobs.json`` that writes this run's log; None when there is none.

    None also when the sweep has no ``jobs.json``, or one that is not JSON or not a plan this version
    reads (:func:`trainsweep.jobs.jobs_of_document`): such a log (put under ``sweeps/<id>/logs/`` by
    hand, or by another sweep's job) belongs to no planned job.
    """
    key = layout.jobs_key(location.sweep_id)
    version = s3io.etag(s3, bucket, key)
    cached = _JOBS_SEEN.get((bucket, key))
    if version is not None and cached is not None and cached[0] == version:
        jobs = cached[1]  # unchanged since this warm function last read it (13 MB at 10,000 jobs)
    else:
        try:
            doc = s3io.get_json(s3, bucket, key)
            jobs = [] if doc is None else jobs_of_document(doc)
        except (ValueError, JobRecordError) as exc:
            LOG.warning("s3://%s/%s: %s; no job of it writes %s", bucket, key, exc, location.run_name)
            return None
        _JOBS_SEEN.clear()  # one sweep's plan at a time: bounded memory
        if version is not None:
            _JOBS_SEEN[(bucket, key)] = (version, jobs)
    return job_for_run(jobs, location.run_name)


_JOBS_SEEN: dict[tuple[str, str], tuple[str, list[PlannedJob]]] = {}
"""The last ``jobs.json`` read, by its ETag: a warm ParseRun asks S3 only whether it changed."""


def _bare(etag: str | None) -> str | None:
    return None if etag is None else etag.strip('"')


def _record_run(s3: S3Client, bucket: str, sweep_id: str, run_name: str, log_format: str | None) -> Any:
    """Parse a finished job's run log and write its artefacts; None when it has no log."""
    key = layout.log_key(sweep_id, run_name)
    location = layout.classify_log_key(key)
    parsed = _parse_log(s3, bucket, key, location, log_format) if location is not None else None
    if parsed is None:  # no log, or one replaced while read (rare once the job ended): read what is there
        run = parse_object(s3, bucket, key, run_name, log_format)
        kept = None
    else:
        run, _, kept = parsed
    if run is not None:
        _write_run(s3, bucket, sweep_id, run, kept)
    return run


def complete_runs(
    s3: S3Client, bucket: str, sweep_id: str, jobs: Iterable[PlannedJob], run_names: Iterable[str]
) -> list[str]:
    """Write every artefact of runs whose job's end was never recorded: a sweep stopped between a job's
    end and the state machine's call that records it (:func:`record_job`) leaves the run record its log's
    uploads wrote (:func:`live_artefacts`) and no seed outputs. A resume that keeps such a run calls this
    first. A run whose seed JSON is where its job puts it is left alone (its end was recorded), as is a
    run without a log. Returns the runs written."""
    from trainsweep import axes

    by_run = {run: job for job in jobs for run in job.run_names}
    made = set(s3io.list_keys(s3, bucket, layout.results_key(sweep_id, layout.EXECUTION_TIMES_DIR + "/")))
    done = []
    for name in run_names:
        job = by_run.get(name)
        if job is not None:
            size = dict(job.cells).get(name)
            parts = axes.folder_parts(job.setting(name))
            seed = layout.execution_times_path(job.vmtype, size or 0, job.repetition, "json", parts)
            if layout.results_key(sweep_id, seed) in made:
                continue
        if _record_run(s3, bucket, sweep_id, name, job.log_format if job else None) is not None:
            done.append(name)
    return done


def record_job(
    s3: S3Client,
    bucket: str,
    sweep_id: str,
    job: PlannedJob,
    training: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
) -> list[Cell]:
    """Parse the logs of a finished job's runs, write their artefacts, and return one record per cell.

    ``training`` is the training task's output (DescribeTrainingJob), ``error`` the ``{Error, Cause}``
    the state machine caught instead. Packed jobs have several runs; the job's billable time is split
    evenly among them (not the cells a batch-size search skipped: they did not run). The job's
    ``log_format`` (None: sniff) reads each run's log.
    """
    outcome = job_outcome(training, error)
    judged = []
    for ident in job_cells(job):
        run = _record_run(s3, bucket, sweep_id, ident["run_name"], job.log_format or None)
        status, reason = cell_status(
            outcome,
            run.status if run is not None else None,
            run.failure_reason if run is not None else None,
            run.extra.get("failure_kind") if run is not None else None,
        )
        judged.append((ident, status, reason))
    # a cell the batch-size search skipped never ran: the job's time is shared by the others
    n_runs = sum(1 for _, status, _ in judged if status != "skipped") or len(judged)

    def share(total: float | None) -> float | None:
        return total / n_runs if total is not None and n_runs else None

    billable, trained = share(outcome.billable_s), share(outcome.training_s)
    cells = []
    for ident, status, reason in judged:
        ran = status != "skipped"
        cells.append(
            Cell(
                **ident,
                status=status,
                reason=reason,
                billable_s=billable if ran else None,
                training_s=trained if ran else None,
            )
        )
    return cells
