"""ParseRun reads a job's log with the spec's ``log_format`` on both paths: the state machine's call and
the S3 notification of a log that arrives under ``sweeps/<id>/logs/``."""

from __future__ import annotations

import json
from typing import Any

from tests.handlers.handler_helpers import BUCKET, jobs_document, planned_job, s3_event
from trainsweep import layout

SWEEP = "mine-20260101-000000"
RUN = f"{SWEEP}-p3-1-64-e0"
LOG_FORMAT = r"^epoch (?P<epoch>\d+) step (?P<step>\d+): (?P<step_s>[0-9.]+) s$"
# A log only the pattern reads: no built-in dialect has a line of it.
OWN_LOG = b"".join(f"epoch {e} step {s}: 0.{s}25 s\n".encode() for e in (1, 2) for s in (1, 2, 3))


def _job(log_format: str | None = LOG_FORMAT, **extra: Any) -> dict[str, Any]:
    """A planned job as ``trainsweep.spec`` writes it."""
    fields: dict[str, Any] = {"job_name": RUN, "run_names": [RUN], **extra}
    return planned_job(
        SWEEP, fields.pop("job_name"), fields.pop("run_names"), log_format=log_format, **fields
    )


def _record(s3: Any, run: str = RUN) -> dict[str, Any]:
    key = layout.results_key(SWEEP, layout.run_record_path(run))
    return json.loads(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())


def _put_jobs(s3: Any, jobs: list[dict[str, Any]]) -> None:
    s3.put_object(Bucket=BUCKET, Key=layout.jobs_key(SWEEP), Body=jobs_document(jobs))


def _finished(handler: Any, context: Any, job: dict[str, Any]) -> list[dict[str, Any]]:
    event = {"sweep_id": SWEEP, "job": job, "outcome": {"training": {"BillableTimeInSeconds": 60}}}
    return handler("parse_run")(event, context)


# ---- the state machine's call (one per finished job) ---------------------------------------------


def test_a_finished_job_is_parsed_with_its_log_format(s3, handler, context):
    s3.put_object(Bucket=BUCKET, Key=layout.log_key(SWEEP, RUN), Body=OWN_LOG)
    (cell,) = _finished(handler, context, _job())
    assert (cell["status"], cell["reason"]) == ("completed", None)
    record = _record(s3)
    assert record["dialect"] == "log-format"
    assert [e["step_s"] for e in record["epochs"]] == [[0.125, 0.225, 0.325]] * 2
    assert layout.results_key(SWEEP, layout.execution_times_path("p3-1", 64, 0, "json")) in {
        o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]
    }


def test_a_job_without_log_format_is_read_by_sniffing(s3, handler, context):
    log = b"Epoch 1/1\n1 step training time: 0.5s\n2 step training time: 0.25s\nEpoch time: 1.0\n"
    s3.put_object(Bucket=BUCKET, Key=layout.log_key(SWEEP, RUN), Body=log)
    job = _job(None)
    del job["log_format"]  # a job planned before the key existed
    (cell,) = _finished(handler, context, job)
    assert _record(s3)["dialect"] == "cloud-ml"
    assert cell["status"] == "completed"


def test_a_log_its_pattern_never_matches_fails_the_cell_with_the_reason(s3, handler, context):
    s3.put_object(Bucket=BUCKET, Key=layout.log_key(SWEEP, RUN), Body=b"training...\nloss 0.5\n")
    (cell,) = _finished(handler, context, _job())
    assert cell["status"] == "failed"
    assert cell["reason"] == "the log_format pattern matched no line of the log"
    record = _record(s3)
    assert record["status"] == "unreadable"
    assert [p["code"] for p in record["problems"]] == ["no-match"]


# ---- S3 notifications (partial timings while the job runs) ----------------------------------------


def test_a_notified_sweep_log_is_parsed_with_the_log_format_of_its_job_in_jobs_json(s3, handler, context):
    other = _job(r"(?P<step_s>\d+)", job_name=f"{SWEEP}-p3-1-128-e0", run_names=[f"{SWEEP}-p3-1-128-e0"])
    _put_jobs(s3, [other, _job()])
    key = layout.log_key(SWEEP, RUN)
    s3.put_object(Bucket=BUCKET, Key=key, Body=OWN_LOG)
    assert handler("parse_run")(s3_event(key), context)["written"]
    record = _record(s3)
    assert record["dialect"] == "log-format"
    assert record["extra"]["log_format"]["pattern"] == LOG_FORMAT


def test_a_log_exported_under_the_jobs_own_name_is_read_with_its_log_format(s3, handler, context):
    job_name = f"{SWEEP}-r1-p3-1-64-e0"  # a resumed job: its SageMaker name is not its run's
    _put_jobs(s3, [_job(job_name=job_name)])
    key = layout.log_key(SWEEP, job_name)  # where ExportLog copies a job's CloudWatch stream
    s3.put_object(Bucket=BUCKET, Key=key, Body=OWN_LOG)
    handler("parse_run")(s3_event(key), context)
    assert _record(s3, job_name)["dialect"] == "log-format"


def test_the_notification_and_the_state_machine_write_the_same_artefacts(s3, handler, context):
    """S3 notifications are asynchronous: one may run after the job was recorded, and must agree."""
    _put_jobs(s3, [_job()])
    key = layout.log_key(SWEEP, RUN)
    s3.put_object(Bucket=BUCKET, Key=key, Body=OWN_LOG)
    _finished(handler, context, _job())
    prefix = layout.results_prefix(SWEEP)

    def results() -> dict[str, bytes]:
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)["Contents"]]
        return {k: s3.get_object(Bucket=BUCKET, Key=k)["Body"].read() for k in keys}

    recorded = results()
    handler("parse_run")(s3_event(key), context)
    assert results() == recorded


def test_a_notified_log_of_a_job_without_log_format_is_sniffed(s3, handler, context):
    _put_jobs(s3, [_job(log_format=None)])
    key = layout.log_key(SWEEP, RUN)
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"Epoch 1/1\n1 step training time: 0.5s\nEpoch time: 0.5\n")
    assert handler("parse_run")(s3_event(key), context)["written"]
    assert _record(s3)["dialect"] == "cloud-ml"


def test_a_notified_log_without_jobs_json_or_a_planned_job_is_not_recorded(s3, handler, context):
    """Was sniffed and recorded: any training job may write any sweep's logs/ (issue 11, item 9)."""
    key = layout.log_key(SWEEP, RUN)
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"Epoch 1/1\n1 step training time: 0.5s\nEpoch time: 0.5\n")
    assert handler("parse_run")(s3_event(key), context) == {"written": []}
    other_version = json.dumps({"schema_version": 99, "jobs": [_job()]}).encode()
    for jobs_json in (jobs_document([_job(job_name="x", run_names=["x"])]), other_version, b"{not json"):
        s3.put_object(Bucket=BUCKET, Key=layout.jobs_key(SWEEP), Body=jobs_json)
        assert handler("parse_run")(s3_event(key), context) == {"written": []}
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET, Prefix=layout.results_prefix(SWEEP))


def test_imported_logs_never_look_for_a_plan(s3, handler, context):
    sweep = layout.import_results_sweep_id("old")
    planned = _job(run_names=["result-p3-1-64-e1"])  # would read nothing if it were looked up
    s3.put_object(Bucket=BUCKET, Key=layout.jobs_key(sweep), Body=jobs_document([planned]))
    key = "imports/old/result-p3-1-64-e1.txt"
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"Epoch 1/1\n1 step training time: 0.5s\nEpoch time: 0.5\n")
    handler("parse_run")(s3_event(key), context)
    record_key = layout.results_key(sweep, layout.run_record_path("result-p3-1-64-e1"))
    record = json.loads(s3.get_object(Bucket=BUCKET, Key=record_key)["Body"].read())
    assert record["dialect"] == "cloud-ml"
