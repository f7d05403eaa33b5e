"""PlanSweep: validate the execution input (a sweep spec), expand it into jobs, refuse it when over budget.

Event: ``{input, execution}`` (:class:`trainsweep.requests.PlanSweepRequest`): the execution input is the
spec itself, or ``{"spec": ..., "sweep_id": ...}`` (the CLI names its sweeps). Output: the
plan's state input with jobs grouped by instance type and capped by the account's quotas
(``trainsweep.aws.workflow``): references only, each group's jobs are written to S3
(``layout.map_jobs_key``) for its Distributed Map to read; a job whose spec names no image gets the
stack's own (``TRAINSWEEP_TRAINING_IMAGE``), in the job lists and in ``jobs.json``. A bad spec, an
over-budget sweep or a zero quota raises ``SpecError``/``BudgetExceededError``/``QuotaError``/
``SweepTooLargeError``: the state machine fails with that message, and nothing is written. So does a
spec of ``local``/``local_gpu`` types outside local mode's embedded AWS (``TRAINSWEEP_EMBEDDED_AWS``):
SageMaker would reject every job. So does a spec whose ``s3://`` data or source dir the training role cannot
read (``trainsweep.access``; ``TRAINSWEEP_DATA_BUCKETS``: the stack's ``data_bucket_names``).
Prices come from the spec's ``prices``, the stack's cache, the AWS Pricing API, then the shipped
catalogue (``trainsweep.aws.pricing``).
"""

from __future__ import annotations

import os
from typing import Any

import boto3
from aws_lambda_powertools import Logger

from trainsweep import layout
from trainsweep.access import RoleReads, check_role_can_read
from trainsweep.aws import pricing
from trainsweep.aws import s3 as s3io
from trainsweep.aws.config import FunctionConfig
from trainsweep.aws.quotas import training_instance_quotas
from trainsweep.aws.workflow import state_input, with_default_image
from trainsweep.instances import LOCAL_CPU, LOCAL_GPU
from trainsweep.requests import PlanSweepRequest, parse_request
from trainsweep.spec import load_spec, plan_sweep

logger = Logger(service="trainsweep")


@logger.inject_lambda_context(log_event=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    request = parse_request(event, PlanSweepRequest)
    config = FunctionConfig.from_env()
    spec = load_spec(request.input.spec)
    if not config.embedded:  # IAM is AWS's: the embedded AWS enforces none
        check_role_can_read(spec, RoleReads(config.bucket, config.data_buckets))
    region = os.environ.get("AWS_REGION") or spec.region or "us-east-1"
    s3 = boto3.client("s3")
    # The stack's price cache, else the Pricing API (not in local mode's embedded AWS), else the shipped
    # catalogue: every commercial region is priced, not only the shipped us-east-1.
    price = pricing.stack_price_fn(
        s3, config.bucket, None if config.embedded else pricing.pricing_client(), region, spec.instance_types
    )
    plan = plan_sweep(
        spec, sweep_id=request.input.sweep_id, region=region, bucket=config.bucket,
        attempt=request.input.attempt, price=price,
        require_uploaded_source=True, cloud=not config.embedded,
    )  # fmt: skip
    plan.jobs = with_default_image(plan.jobs, config.require_training_image)

    cloud_types = [t for t in plan.spec.instance_types if t not in (LOCAL_CPU, LOCAL_GPU)]
    quotas = (
        training_instance_quotas(boto3.client("service-quotas"), cloud_types, spot=plan.spec.spot)
        if cloud_types
        else {}
    )
    # raises before anything is written
    workflow = state_input(plan.to_state_input(), quotas, execution=request.execution)

    s3io.put_json(s3, config.bucket, layout.spec_key(plan.sweep_id), plan.spec.to_dict())
    s3io.put_bytes(s3, config.bucket, layout.jobs_key(plan.sweep_id), plan.jobs_json())
    for key in workflow.items:
        s3io.put_bytes(s3, config.bucket, key, workflow.item_bytes(key))
    return workflow.state
