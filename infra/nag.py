"""cdk-nag AwsSolutions findings we accept, each with its reason; any other finding fails synth.

:data:`ACCEPTED` is the table: one row per accepted finding, naming the construct it is attached to (the
narrowest it concerns). A finding's id may hold placeholders, filled per stack by :func:`acknowledge`:
:data:`BUCKET` (the results bucket's ARN), :data:`STATE_MACHINE` (the state machine's logical id), and
two that give a row once per item: :data:`FUNCTION` (each function's logical id) and :data:`DATA_BUCKET`
(each of ``data_bucket_names``; the reason may name it too).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aws_cdk import Acknowledgment, Validations
from constructs import IConstruct

from trainsweep import layout
from trainsweep.sagemaker_contract import TRAINING_LOG_GROUP

if TYPE_CHECKING:
    from infra.stack import TrainsweepStack

BUCKET = "{bucket}"
STATE_MACHINE = "{state_machine}"
FUNCTION = "{function}"
DATA_BUCKET = "{data_bucket}"

S3_READ = (
    "s3 read actions CDK grants for reading objects (GetObject*, GetBucket*, List*), "
    "scoped to the named prefixes"
)
S3_WRITE = "s3:Abort* lets a writer abort its own multipart uploads; scoped to the prefixes it writes"
KMS_DATA_KEY = (
    "kms:GenerateDataKey*/ReEncrypt* on the bucket's (or topic's) own customer-managed key only, "
    "needed to read and write SSE-KMS objects"
)
XRAY = "X-Ray tracing writes (xray:PutTraceSegments/PutTelemetryRecords) have no resource-level permissions"
LAMBDA_BASIC = (
    "AWSLambdaBasicExecutionRole only allows writing the function's CloudWatch logs; "
    "the log group is created and retained by the stack"
)
RUNTIME = (
    "python3.12: the functions' dependencies are cross-installed as manylinux wheels for this version "
    "(infra/functions.py); moved when the project's tested Python moves"
)
SWEEPS = (
    "handlers work on any sweep: the sweep id is execution input, so the grant is sweeps/* "
    "(never the whole bucket)"
)
DATA_BUCKET_READ = (
    "s3 read actions CDK grants for reading the configured data buckets (data_bucket_names), read only"
)
LAMBDA_BASIC_POLICY = (
    "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]"
)
ANY_RESOURCE = "AwsSolutions-IAM5[Resource::*]"
REGION_ACCOUNT = "<AWS::Region>:<AWS::AccountId>"
TRAINING_LOGS = (
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:logs:"
    f"{REGION_ACCOUNT}:log-group:{TRAINING_LOG_GROUP}:*]"
)


def _resource(pattern: str) -> str:
    return f"AwsSolutions-IAM5[Resource::{pattern}]"


def _action(action: str) -> str:
    return f"AwsSolutions-IAM5[Action::{action}]"


@dataclass(frozen=True)
class Accepted:
    """One accepted finding.

    Attributes:
        on: the construct it is attached to: ``bucket``, ``parse_failures``, ``training``, ``sweep`` (the
            state machine's construct), ``bucket_notifications`` (CDK's notifications handler),
            ``functions`` (every function) or ``function:<name>`` (one of them).
        finding: cdk-nag's id of the finding (placeholders allowed, see the module).
        reason: why it is accepted.
        when: only when the deployment sets this :class:`~infra.settings.StackSettings` field (e.g.
            ``data_bucket_names``).
    """

    on: str
    finding: str
    reason: str
    when: str | None = None


ACCEPTED: tuple[Accepted, ...] = (
    # ---- the results bucket and the parse-failure queue ----
    Accepted(
        "bucket",
        "AwsSolutions-S1",
        "server access logs would need a second bucket per deployment; "
        "CloudTrail data events are the audit trail for this bucket",
    ),
    Accepted(
        "parse_failures",
        "AwsSolutions-SQS3",
        "this queue is itself the dead-letter destination: ParseRun's S3-triggered "
        "invocations that still fail after Lambda's two retries land here for `trainsweep status` and "
        "a person to read; a second queue behind it would hold nothing",
    ),
    # ---- the training jobs' role ----
    Accepted(
        "training",
        _resource(f"{BUCKET}/sweeps/*/logs/*.log"),
        "jobs upload their <run>.log below their sweep's logs/ prefix; one role serves every "
        "sweep (ParseRun records only logs of jobs planned in that sweep's jobs.json)",
    ),
    Accepted(
        "training",
        _resource(f"{BUCKET}/sweeps/*/output/*"),
        "SageMaker writes job output below the sweep's output/ prefix",
    ),
    Accepted(
        "training",
        _resource(f"{BUCKET}/sweeps/*/checkpoints/*"),
        "managed-spot checkpoints below the sweep's checkpoints/ prefix (synced both ways)",
    ),
    Accepted(
        "training",
        _resource(f"{BUCKET}/data/*"),
        "training data users upload to the bucket's data/ prefix (read only)",
    ),
    Accepted(
        "training",
        _resource(f"{BUCKET}/sweeps/*/{layout.CODE_DIR}/*"),
        "jobs read the packed source of a user's script below their sweep's code/ prefix (read only)",
    ),
    Accepted(
        "training", TRAINING_LOGS, "SageMaker training jobs write to streams of this AWS-named log group"
    ),
    Accepted("training", _action("s3:GetObject*"), DATA_BUCKET_READ, when="data_bucket_names"),
    Accepted("training", _action("s3:GetBucket*"), DATA_BUCKET_READ, when="data_bucket_names"),
    Accepted("training", _action("s3:List*"), DATA_BUCKET_READ, when="data_bucket_names"),
    Accepted(
        "training",
        _resource(f"arn:<AWS::Partition>:s3:::{DATA_BUCKET}/*"),
        f"training data in {DATA_BUCKET}, a bucket the deployment names in data_bucket_names (read only)",
    ),
    Accepted(
        "training",
        _action("sagemaker-mlflow:*"),
        "every MLflow API a tracked job calls, as SageMaker's MLflow docs grant it, only on the MLflow "
        "resources the deployment names in mlflow_resource_arns",
        when="mlflow_resource_arns",
    ),
    Accepted(
        "training",
        ANY_RESOURCE,
        "ecr:GetAuthorizationToken has no resource-level "
        "permissions; cloudwatch:PutMetricData is limited to the /aws/sagemaker/* namespaces; "
        "kms:Decrypt for SSE-KMS data buckets (keys unknown at synth) is limited to calls through S3 "
        "for objects of the configured data buckets",
    ),
    # ---- the Lambda functions ----
    Accepted("functions", _action("s3:GetObject*"), S3_READ),
    Accepted("functions", _action("s3:GetBucket*"), S3_READ),
    Accepted("functions", _action("s3:List*"), S3_READ),
    Accepted("functions", _action("s3:Abort*"), S3_WRITE),
    Accepted("functions", _action("kms:ReEncrypt*"), KMS_DATA_KEY),
    Accepted("functions", _action("kms:GenerateDataKey*"), KMS_DATA_KEY),
    Accepted("functions", LAMBDA_BASIC_POLICY, LAMBDA_BASIC),
    Accepted("functions", "AwsSolutions-L1", RUNTIME),
    Accepted(
        "function:plan_sweep",
        ANY_RESOURCE,
        XRAY + "; servicequotas:ListServiceQuotas and pricing:GetProducts have no resource-level "
        "permissions (read only: the account's quotas, AWS's public list prices)",
    ),
    Accepted("function:parse_run", ANY_RESOURCE, XRAY),
    Accepted("function:export_log", ANY_RESOURCE, XRAY),
    Accepted("function:aggregate_sweep", ANY_RESOURCE, XRAY),
    Accepted("functions", _resource(f"{BUCKET}/sweeps/*"), SWEEPS),
    Accepted(
        "function:parse_run",
        _resource(f"{BUCKET}/imports/*"),
        "user uploads under imports/<name>/ are parsed wherever they lie (read only)",
    ),
    Accepted("function:export_log", TRAINING_LOGS, "reads the streams of finished training jobs (read only)"),
    Accepted(
        "bucket_notifications",
        LAMBDA_BASIC_POLICY,
        "CDK's own handler that configures the bucket notifications at deploy time; logs only",
    ),
    # ---- the state machine ----
    Accepted(
        "sweep",
        _resource(f"<{FUNCTION}.Arn>:*"),
        "Step Functions' Lambda integration may invoke the function's versions and aliases",
    ),
    Accepted(
        "sweep",
        _resource(f"arn:<AWS::Partition>:sagemaker:{REGION_ACCOUNT}:training-job/*"),
        "job names are made per sweep at run time; the state machine "
        "creates/describes/stops training jobs only",
    ),
    Accepted(
        "sweep",
        _resource(f"{BUCKET}/sweeps/*/{layout.MAP_DIR}/*/jobs-*.json"),
        "each group's Distributed Map reads its job list (read only); the sweep id and execution "
        "name are run-time input",
    ),
    Accepted(
        "sweep",
        _resource(f"{BUCKET}/sweeps/*/{layout.MAP_DIR}/*/results/*"),
        "the Distributed Maps' ResultWriter writes each map run's manifest and result files below "
        "the execution's results/ prefix (write only)",
    ),
    Accepted(
        "sweep",
        _resource(f"arn:<AWS::Partition>:states:{REGION_ACCOUNT}:execution:<{STATE_MACHINE}.Name>/Jobs:*"),
        "the Distributed Map describes, stops and redrives its own child executions (label Jobs), "
        "whose names Step Functions makes at run time",
    ),
    Accepted(
        "sweep",
        _resource(f"arn:<AWS::Partition>:states:{REGION_ACCOUNT}:execution:<{STATE_MACHINE}.Name>:*"),
        "AWS's documented Distributed Map policy: the state machine describes and stops its own "
        "executions, whose names are made at run time",
    ),
    Accepted("sweep", _action("kms:ReEncrypt*"), KMS_DATA_KEY),
    Accepted("sweep", _action("kms:GenerateDataKey*"), KMS_DATA_KEY),
    Accepted(
        "sweep",
        ANY_RESOURCE,
        "X-Ray tracing and CloudWatch Logs delivery (logs:*LogDelivery*) have no resource-level permissions",
    ),
)


def acknowledge(stack: TrainsweepStack) -> None:
    """Attach every accepted finding (:data:`ACCEPTED`) to the construct it concerns."""
    values, lists = _placeholders(stack)
    for row in ACCEPTED:
        if row.when is not None and not getattr(stack.settings, row.when):
            continue
        for target in _targets(stack, row.on):
            for finding, reason in _filled(row, values, lists):
                Validations.of(target).acknowledge(Acknowledgment(id=finding, reason=reason))


def _targets(stack: TrainsweepStack, on: str) -> list[IConstruct]:
    if on == "functions":
        return list(stack.functions.values())
    if on.startswith("function:"):
        return [stack.functions[on.removeprefix("function:")]]
    if on == "bucket_notifications":
        return [c for c in stack.node.children if c.node.id.startswith("BucketNotificationsHandler")]
    named: dict[str, IConstruct] = {
        "bucket": stack.bucket,
        "parse_failures": stack.parse_failures,
        "training": stack.training,
        "sweep": stack.state_machine.node.scope,  # type: ignore[dict-item]
    }
    return [named[on]]


def _placeholders(stack: TrainsweepStack) -> tuple[dict[str, str], dict[str, list[str]]]:
    """The stack's values of the placeholders: single ones, and those that give a row once per item."""
    own_bucket = stack.bucket.node.default_child
    values = {
        "bucket": (
            f"<{stack.get_logical_id(own_bucket)}.Arn>"  # type: ignore[arg-type]
            if own_bucket is not None
            else f"arn:<AWS::Partition>:s3:::{stack.bucket.bucket_name}"  # an existing bucket, by name
        ),
        "state_machine": stack.get_logical_id(stack.state_machine.node.default_child),  # type: ignore[arg-type]
    }
    lists = {
        "function": [
            stack.get_logical_id(fn.function.node.default_child)  # type: ignore[arg-type]
            for fn in stack.functions.values()
        ],
        "data_bucket": list(stack.settings.data_bucket_names),
    }
    return values, lists


def _filled(row: Accepted, values: dict[str, str], lists: dict[str, list[str]]) -> Iterator[tuple[str, str]]:
    """The row's finding and reason with the stack's values in; once per item of a list placeholder."""
    used = [name for name in lists if "{" + name + "}" in row.finding]
    for items in itertools.product(*(lists[name] for name in used)):
        fields = {**values, **dict(zip(used, items, strict=True))}
        yield row.finding.format(**fields), row.reason.format(**fields)
