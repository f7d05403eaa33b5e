"""ParseRun: raw logs -> per-run artefacts.

Two callers: S3 ``ObjectCreated`` notifications for raw logs (``sweeps/<id>/logs/``, ``imports/``),
and the state machine once per finished job (``{sweep_id, job, outcome: {training | error}}``,
:class:`trainsweep.requests.RecordJobRequest`), which
also gets back each cell's final status and reason, so aggregation never races the notification.
A sweep log's notifications (its job uploads it again and again while it runs) write its run record,
what the live views read; the state machine's call writes every artefact once the job has ended.
A job's ``log_format`` reads its logs on both paths (from the job, or from the sweep's jobs.json).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote_plus

import boto3
from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.data_classes import S3Event

from trainsweep.aws.config import FunctionConfig
from trainsweep.aws.runs import process_log, record_job
from trainsweep.requests import RecordJobRequest, parse_request

logger = Logger(service="trainsweep")


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> Any:
    config = FunctionConfig.from_env()
    s3 = boto3.client("s3")
    if "Records" in event:
        written = []
        for record in S3Event(event).records:
            # S3 URL-encodes keys in events (a space arrives as '+').
            key = unquote_plus(record.s3.get_object.key)
            bucket = record.s3.bucket.name or config.bucket
            written += process_log(s3, bucket, key, event_etag=record.s3.get_object.etag or None)
        logger.info("artefacts written", extra={"keys": written})
        return {"written": written}
    request = parse_request(event, RecordJobRequest)
    outcome = request.outcome
    cells = record_job(s3, config.bucket, request.sweep_id, request.job, outcome.training, outcome.error)
    return [c.to_dict() for c in cells]
