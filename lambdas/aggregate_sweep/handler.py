"""AggregateSweep: every cell's status and every run's record -> sweep table, report and plots.

Event (:class:`trainsweep.requests.AggregateSweepRequest`): ``{sweep_id, maps}`` where ``maps`` is the
fan-out's output: per instance-type group, the reference of its Distributed Map's results in S3
(``ResultWriter``'s manifest; the cells' records are in the files it lists) or the error that stopped
the group; or the fan-out's own error. Or ``{sweep_id, cells}``: a resume's merged cell records. Every
cell planned in ``jobs.json`` gets a final status: one without a result is recorded as failed, with why.
Writes ``sweep.csv``, ``sweep.json``, ``report.html`` and ``plots/*.png`` below the sweep's results
root and returns a short summary for the notification.
"""

from __future__ import annotations

from typing import Any

import boto3
from aws_lambda_powertools import Logger

from trainsweep.aws.aggregate import aggregate_sweep
from trainsweep.aws.config import FunctionConfig
from trainsweep.requests import AggregateSweepRequest, parse_request

logger = Logger(service="trainsweep")


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    request = parse_request(event, AggregateSweepRequest)
    config = FunctionConfig.from_env()
    s3 = boto3.client("s3")
    if "cells" in request.model_fields_set:  # a resume's merged records (trainsweep.aws.resume.reaggregate)
        return aggregate_sweep(s3, config.bucket, request.sweep_id, cells=request.cells or [])
    return aggregate_sweep(s3, config.bucket, request.sweep_id, request.maps or [])
