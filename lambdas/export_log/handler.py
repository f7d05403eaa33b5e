"""ExportLog: copy a finished job's CloudWatch log to S3 when the job wrote no log of its own.

Event: ``{sweep_id, job}`` (:class:`trainsweep.requests.ExportLogRequest`). The container uploads its
logs as it runs; a job that died before its first upload only has CloudWatch. The copy follows every
page (the seeds' unpaginated exports lost the beginning of long logs) and lands on the job's raw-log
key, so it is parsed like any other log.
"""

from __future__ import annotations

from typing import Any

import boto3
from aws_lambda_powertools import Logger

from trainsweep.aws.config import FunctionConfig
from trainsweep.aws.export import export_job_log
from trainsweep.requests import ExportLogRequest, parse_request

logger = Logger(service="trainsweep")


@logger.inject_lambda_context(log_event=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    request = parse_request(event, ExportLogRequest)
    config = FunctionConfig.from_env()
    key = export_job_log(
        boto3.client("logs"),
        boto3.client("s3"),
        bucket=config.bucket,
        log_group=config.training_log_group,
        sweep_id=request.sweep_id,
        job=request.job,
    )
    return {"exported": key}
