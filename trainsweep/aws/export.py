"""Copy a training job's CloudWatch log to its raw-log key in S3 when the job left no log there."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from trainsweep import layout
from trainsweep.aws import s3 as s3io
from trainsweep.aws.cloudwatch import job_streams, stream_lines

if TYPE_CHECKING:
    from mypy_boto3_logs import CloudWatchLogsClient
    from mypy_boto3_s3 import S3Client

    from trainsweep.jobs import PlannedJob

LOG = logging.getLogger(__name__)


def export_job_log(
    logs: CloudWatchLogsClient,
    s3: S3Client,
    *,
    bucket: str,
    log_group: str,
    sweep_id: str,
    job: PlannedJob,
) -> str | None:
    """Write the job's CloudWatch streams to ``layout.log_key(sweep_id, job_name)``; returns the key.

    Nothing is written (None) when every run of the job already has its log, or CloudWatch has no
    stream for the job. A multi-host job's streams are concatenated in host order. For a packed job
    the export goes to the job's own name (one log for all its batch sizes), kept for the user; the
    runs without a log are reported by ParseRun. The copy is streamed (:func:`s3io.put_stream`): its
    memory does not grow with the length of the stream.
    """
    missing = [r for r in job.run_names if not s3io.exists(s3, bucket, layout.log_key(sweep_id, r))]
    if not missing:
        return None
    key = layout.log_key(sweep_id, job.job_name)
    if s3io.exists(s3, bucket, key):
        return None
    streams = job_streams(logs, log_group, job.job_name)
    if not streams:
        LOG.info("no CloudWatch stream for %s in %s", job.job_name, log_group)
        return None
    # Streamed: a long job's stream is gigabytes; at most one upload part of it is held at a time.
    lines = (line for s in streams for line in stream_lines(logs, log_group, s))
    s3io.put_stream(s3, bucket, key, lines, tagging=layout.RAW_LOG_TAGGING)
    return key
