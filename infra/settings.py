"""The stack's settings: CDK context (``cdk.json`` or ``-c key=value``) read once, into a frozen object."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from constructs import Node

from infra.training_task import RetryPolicy
from trainsweep.tracking import is_sagemaker_arn

NOTIFICATION_EMAIL = "notification_email"
RAW_LOG_DAYS = "raw_log_days"
DATA_BUCKET_NAMES = "data_bucket_names"
BYO_IMAGE_REPOSITORIES = "byo_image_repositories"
RETRY = "retry"
DESTROY_ON_DELETE = "destroy_on_delete"
PARSE_RESERVED_CONCURRENCY = "parse_reserved_concurrency"
TRAINING_ROLE_ARN = "training_role_arn"
RESULTS_BUCKET_NAME = "results_bucket_name"
RESULTS_BUCKET_KEY_ARN = "results_bucket_key_arn"
MLFLOW_RESOURCE_ARNS = "mlflow_resource_arns"
_ROLE_ARN = re.compile(r"arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+")
_BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_KEY_ARN = re.compile(r"arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[\w-]+")
DEFAULT_PARSE_RESERVED_CONCURRENCY = 0
# Lambda refuses a reservation that leaves fewer than this many of the account's executions unreserved.
LAMBDA_MIN_UNRESERVED = 100

# ECR's own rules for a repository name, and a repository ARN (any partition, region and account).
_REPOSITORY_NAME = r"(?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*"
_REPOSITORY = re.compile(
    rf"(?P<name>{_REPOSITORY_NAME})|arn:aws[a-z-]*:ecr:[a-z0-9-]+:\d{{12}}:repository/(?P<arn_name>{_REPOSITORY_NAME})"
)


@dataclass(frozen=True)
class StackSettings:
    """What a deployment may choose. Lists come as JSON lists (``cdk.json``) or comma-separated text (``-c``).

    Attributes:
        notification_email: subscribe this address to the sweep topic.
        raw_log_days: expire raw logs after this many days (None: keep them).
        data_bucket_names: buckets the training jobs may read.
        image_repositories: ECR repositories (names in the stack's account and region, or ARNs) whose
            images a spec's ``workload.image_uri`` may name: the training role may pull from them.
        retry: backoff of retryable training errors.
        destroy_on_delete: tear the bucket down with the stack (default: retain it).
        parse_reserved_concurrency: concurrent executions reserved for ParseRun, so that the rest of the
            account cannot throttle it away from the state machine (default 0: reserve none). Lambda
            refuses a reservation that leaves fewer than 100 of the account's executions unreserved, so
            an account whose limit is still a new account's 10 or 50 cannot reserve any;
            ``trainsweep doctor`` says how many the account can afford.
        training_role_arn: an existing SageMaker execution role the jobs run as, instead of the stack's
            own (for accounts where the deployment may not create IAM roles; docs/cloud.md lists what
            it needs).
        results_bucket_name: an existing bucket for the results instead of the stack's own.
        results_bucket_key_arn: that bucket's SSE-KMS key (None: the bucket is not SSE-KMS).
        mlflow_resource_arns: SageMaker managed MLflow tracking servers and MLflow Apps that specs'
            ``tracking.mlflow`` may name: the training role may use them (``sagemaker-mlflow:*``).
    """

    notification_email: str | None = None
    raw_log_days: int | None = None
    data_bucket_names: tuple[str, ...] = ()
    image_repositories: tuple[str, ...] = ()
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    destroy_on_delete: bool = False
    parse_reserved_concurrency: int = DEFAULT_PARSE_RESERVED_CONCURRENCY
    training_role_arn: str | None = None
    results_bucket_name: str | None = None
    results_bucket_key_arn: str | None = None
    mlflow_resource_arns: tuple[str, ...] = ()

    @classmethod
    def from_context(cls, node: Node) -> StackSettings:
        """Read every context value the stack uses; raises ValueError for a value it cannot use."""
        ctx = node.try_get_context
        reserved = _reserved_concurrency(ctx(PARSE_RESERVED_CONCURRENCY))
        repositories = _repositories(ctx(BYO_IMAGE_REPOSITORIES))
        _check_existing_resources(ctx)
        days = ctx(RAW_LOG_DAYS)
        return cls(
            training_role_arn=_text(ctx(TRAINING_ROLE_ARN)),
            results_bucket_name=_text(ctx(RESULTS_BUCKET_NAME)),
            results_bucket_key_arn=_text(ctx(RESULTS_BUCKET_KEY_ARN)),
            notification_email=_text(ctx(NOTIFICATION_EMAIL)),
            raw_log_days=int(days) if days else None,
            data_bucket_names=_names(ctx(DATA_BUCKET_NAMES)),
            image_repositories=repositories,
            retry=RetryPolicy.from_context(ctx(RETRY)),
            destroy_on_delete=_truthy(ctx(DESTROY_ON_DELETE)),
            parse_reserved_concurrency=reserved,
            mlflow_resource_arns=_mlflow_resource_arns(ctx(MLFLOW_RESOURCE_ARNS)),
        )


# The existing resources a deployment may name instead of the stack's own: the form each must have.
_EXISTING = {
    TRAINING_ROLE_ARN: (_ROLE_ARN, "an IAM role ARN (arn:aws:iam::ACCOUNT:role/NAME)"),
    RESULTS_BUCKET_NAME: (_BUCKET_NAME, "an S3 bucket name"),
    RESULTS_BUCKET_KEY_ARN: (_KEY_ARN, "a KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/ID)"),
}


def _reserved_concurrency(value: Any) -> int:
    """Context ``parse_reserved_concurrency``: a whole number >= 0 (default when unset or blank)."""
    try:
        reserved = DEFAULT_PARSE_RESERVED_CONCURRENCY if value in (None, "") else int(value)
    except (TypeError, ValueError):
        reserved = -1
    if reserved < 0:
        raise ValueError(
            f"context {PARSE_RESERVED_CONCURRENCY}: {value!r} is not a whole "
            "number >= 0 (concurrent executions reserved for ParseRun; 0 reserves none)"
        )
    return reserved


def _repositories(value: Any) -> tuple[str, ...]:
    """Context ``byo_image_repositories``: ECR repository names or ARNs."""
    repositories = _names(value)
    for ref in repositories:
        if not _REPOSITORY.fullmatch(ref):
            raise ValueError(
                f"context {BYO_IMAGE_REPOSITORIES}: {ref!r} is not an ECR repository name or ARN "
                "(give my-train, team/my-train or arn:aws:ecr:REGION:ACCOUNT:repository/my-train, "
                "without the registry host or the tag)"
            )
    return repositories


def _mlflow_resource_arns(value: Any) -> tuple[str, ...]:
    """Context ``mlflow_resource_arns``: SageMaker managed MLflow tracking servers or MLflow Apps."""
    arns = _names(value)
    for arn in arns:
        if not is_sagemaker_arn(arn):
            raise ValueError(
                f"context {MLFLOW_RESOURCE_ARNS}: {arn!r} is not a SageMaker MLflow ARN "
                "(arn:aws:sagemaker:REGION:ACCOUNT:mlflow-tracking-server/NAME or ...:mlflow-app/ID)"
            )
    return arns


def _check_existing_resources(ctx: Callable[[str], Any]) -> None:
    """Each existing resource named in the context has its form; a bucket key comes with its bucket."""
    for key, (pattern, what) in _EXISTING.items():
        value = str(ctx(key) or "")
        if value and not pattern.fullmatch(value):
            raise ValueError(f"context {key}: {value!r} is not {what}")
    if ctx(RESULTS_BUCKET_KEY_ARN) and not ctx(RESULTS_BUCKET_NAME):
        raise ValueError(f"context {RESULTS_BUCKET_KEY_ARN} is the key of {RESULTS_BUCKET_NAME}: give both")


def _text(value: Any) -> str | None:
    """A context string; None when unset or blank."""
    return str(value or "") or None


def _names(value: Any) -> tuple[str, ...]:
    """A context list: a JSON list, or comma-separated text; blanks dropped."""
    items = value if isinstance(value, (list, tuple)) else str(value or "").split(",")
    return tuple(s for s in (str(item).strip() for item in items) if s)


def _truthy(value: Any) -> bool:
    return str(value).lower() in ("1", "true", "yes", "on")
