"""cdk-nag AwsSolutions findings we accept, each with its reason; any other finding fails synth."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Acknowledgment, Validations
from constructs import IConstruct

from trainsweep import layout
from trainsweep.sagemaker_contract import TRAINING_LOG_GROUP

if TYPE_CHECKING:
    from infra.stack import TrainsweepStack

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


def _ack(scope: IConstruct, findings: dict[str, str]) -> None:
    for finding, reason in findings.items():
        Validations.of(scope).acknowledge(Acknowledgment(id=finding, reason=reason))


def _s3_kms(extra: dict[str, str] | None = None) -> dict[str, str]:
    return {
        "AwsSolutions-IAM5[Action::s3:GetObject*]": S3_READ,
        "AwsSolutions-IAM5[Action::s3:GetBucket*]": S3_READ,
        "AwsSolutions-IAM5[Action::s3:List*]": S3_READ,
        "AwsSolutions-IAM5[Action::s3:Abort*]": S3_WRITE,
        "AwsSolutions-IAM5[Action::kms:ReEncrypt*]": KMS_DATA_KEY,
        "AwsSolutions-IAM5[Action::kms:GenerateDataKey*]": KMS_DATA_KEY,
        **(extra or {}),
    }


def acknowledge(stack: TrainsweepStack) -> None:
    """Attach every accepted finding to the narrowest construct it concerns."""
    own_bucket = stack.bucket.node.default_child
    bucket_arn = (
        f"<{stack.get_logical_id(own_bucket)}.Arn>"  # type: ignore[arg-type]
        if own_bucket is not None
        else f"arn:<AWS::Partition>:s3:::{stack.bucket.bucket_name}"  # an existing bucket, by name
    )
    training_logs = (
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:"
        f"log-group:{TRAINING_LOG_GROUP}:*]"
    )
    _ack(
        stack.bucket,
        {
            "AwsSolutions-S1": "server access logs would need a second bucket per deployment; "
            "CloudTrail data events are the audit trail for this bucket"
        },
    )
    _ack(
        stack.parse_failures,
        {
            "AwsSolutions-SQS3": "this queue is itself the dead-letter destination: ParseRun's S3-triggered "
            "invocations that still fail after Lambda's two retries land here for `trainsweep status` and "
            "a person to read; a second queue behind it would hold nothing"
        },
    )
    _ack(
        stack.training,
        {
            f"AwsSolutions-IAM5[Resource::{bucket_arn}/sweeps/*/logs/*.log]": (
                "jobs upload their <run>.log below their sweep's logs/ prefix; one role serves every "
                "sweep (ParseRun records only logs of jobs planned in that sweep's jobs.json)"
            ),
            f"AwsSolutions-IAM5[Resource::{bucket_arn}/sweeps/*/output/*]": (
                "SageMaker writes job output below the sweep's output/ prefix"
            ),
            f"AwsSolutions-IAM5[Resource::{bucket_arn}/sweeps/*/checkpoints/*]": (
                "managed-spot checkpoints below the sweep's checkpoints/ prefix (synced both ways)"
            ),
            f"AwsSolutions-IAM5[Resource::{bucket_arn}/data/*]": (
                "training data users upload to the bucket's data/ prefix (read only)"
            ),
            f"AwsSolutions-IAM5[Resource::{bucket_arn}/sweeps/*/{layout.CODE_DIR}/*]": (
                "jobs read the packed source of a user's script below their sweep's code/ prefix (read only)"
            ),
            training_logs: "SageMaker training jobs write to streams of this AWS-named log group",
            **(
                {
                    **{
                        f"AwsSolutions-IAM5[Action::{action}]": (
                            "s3 read actions CDK grants for reading the configured data buckets "
                            "(data_bucket_names), read only"
                        )
                        for action in ("s3:GetObject*", "s3:GetBucket*", "s3:List*")
                    },
                    **{
                        f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::{name}/*]": (
                            f"training data in {name}, a bucket the deployment names in data_bucket_names "
                            "(read only)"
                        )
                        for name in stack.settings.data_bucket_names
                    },
                }
                if stack.settings.data_bucket_names
                else {}
            ),
            **(
                {
                    "AwsSolutions-IAM5[Action::sagemaker-mlflow:*]": (
                        "every MLflow API a tracked job calls, as SageMaker's MLflow docs grant it, only "
                        "on the MLflow resources the deployment names in mlflow_resource_arns"
                    )
                }
                if stack.settings.mlflow_resource_arns
                else {}
            ),
            "AwsSolutions-IAM5[Resource::*]": "ecr:GetAuthorizationToken has no resource-level "
            "permissions; cloudwatch:PutMetricData is limited to the /aws/sagemaker/* namespaces; "
            "kms:Decrypt for SSE-KMS data buckets (keys unknown at synth) is limited to calls through S3 "
            "for objects of the configured data buckets",
        },
    )
    for name, fn in stack.functions.items():
        extra = {
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
            "AWSLambdaBasicExecutionRole]": LAMBDA_BASIC,
            "AwsSolutions-L1": RUNTIME,
            "AwsSolutions-IAM5[Resource::*]": XRAY
            + (
                "; servicequotas:ListServiceQuotas and pricing:GetProducts have no resource-level "
                "permissions (read only: the account's quotas, AWS's public list prices)"
                if name == "plan_sweep"
                else ""
            ),
            f"AwsSolutions-IAM5[Resource::{bucket_arn}/sweeps/*]": SWEEPS,
        }
        if name == "parse_run":
            extra[f"AwsSolutions-IAM5[Resource::{bucket_arn}/imports/*]"] = (
                "user uploads under imports/<name>/ are parsed wherever they lie (read only)"
            )
        if name == "export_log":
            extra[training_logs] = "reads the streams of finished training jobs (read only)"
        _ack(fn, _s3_kms(extra))
    for child in stack.node.children:
        if child.node.id.startswith("BucketNotificationsHandler"):
            _ack(
                child,
                {
                    "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                    "AWSLambdaBasicExecutionRole]": "CDK's own handler that configures the bucket "
                    "notifications at deploy time; logs only"
                },
            )
    sweep = stack.state_machine.node.scope
    function_acks = {
        f"AwsSolutions-IAM5[Resource::<{stack.get_logical_id(fn.function.node.default_child)}.Arn>:*]": (  # type: ignore[arg-type]
            "Step Functions' Lambda integration may invoke the function's versions and aliases"
        )
        for fn in stack.functions.values()
    }
    _ack(
        sweep,  # type: ignore[arg-type]
        {
            **function_acks,
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sagemaker:<AWS::Region>:<AWS::AccountId>:"
            "training-job/*]": "job names are made per sweep at run time; the state machine "
            "creates/describes/stops training jobs only",
            f"AwsSolutions-IAM5[Resource::{bucket_arn}/sweeps/*/{layout.MAP_DIR}/*/jobs-*.json]": (
                "each group's Distributed Map reads its job list (read only); the sweep id and execution "
                "name are run-time input"
            ),
            f"AwsSolutions-IAM5[Resource::{bucket_arn}/sweeps/*/{layout.MAP_DIR}/*/results/*]": (
                "the Distributed Maps' ResultWriter writes each map run's manifest and result files below "
                "the execution's results/ prefix (write only)"
            ),
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:"
            f"execution:<{stack.get_logical_id(stack.state_machine.node.default_child)}.Name>/Jobs:*]": (  # type: ignore[arg-type]
                "the Distributed Map describes, stops and redrives its own child executions (label Jobs), "
                "whose names Step Functions makes at run time"
            ),
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:"
            f"execution:<{stack.get_logical_id(stack.state_machine.node.default_child)}.Name>:*]": (  # type: ignore[arg-type]
                "AWS's documented Distributed Map policy: the state machine describes and stops its own "
                "executions, whose names are made at run time"
            ),
            "AwsSolutions-IAM5[Action::kms:ReEncrypt*]": KMS_DATA_KEY,
            "AwsSolutions-IAM5[Action::kms:GenerateDataKey*]": KMS_DATA_KEY,
            "AwsSolutions-IAM5[Resource::*]": "X-Ray tracing and CloudWatch Logs delivery "
            "(logs:*LogDelivery*) have no resource-level permissions",
        },
    )
