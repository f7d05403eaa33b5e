"""The trainsweep stack: composes the components and grants what each needs. No logic of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import ArnFormat, CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_notifications as s3n
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from infra.functions import HandlerFunction
from infra.storage import ResultsBucket
from infra.training import TrainingPlatform
from infra.workflow import RetryPolicy, SweepStateMachine
from trainsweep import layout
from trainsweep.aws import outputs


class TrainsweepStack(Stack):
    """Everything a sweep needs in one account and region.

    Context (``cdk.json`` or ``-c key=value``): ``notification_email`` (subscribe an address to the
    topic), ``raw_log_days`` (expire raw logs), ``data_bucket_names`` (comma-separated buckets the
    training jobs may read), ``retry`` (backoff of retryable training errors), ``destroy_on_delete``
    (tear the bucket down with the stack; default: retain it).
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, image_directory: Path | None = None, **kwargs: Any
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        ctx = self.node.try_get_context
        removal = RemovalPolicy.DESTROY if _truthy(ctx("destroy_on_delete")) else RemovalPolicy.RETAIN
        raw_days = ctx("raw_log_days")

        storage = ResultsBucket(
            self, "Results", raw_log_days=int(raw_days) if raw_days else None, removal_policy=removal
        )
        bucket = storage.bucket
        data_buckets = [
            s3.Bucket.from_bucket_name(self, f"Data{i}", name.strip())
            for i, name in enumerate(str(ctx("data_bucket_names") or "").split(","))
            if name.strip()
        ]
        training = TrainingPlatform(
            self, "Training", bucket=bucket, data_buckets=data_buckets, **_image_args(image_directory)
        )

        def function(cid: str, name: str, memory_mb: int, minutes: int) -> HandlerFunction:
            return HandlerFunction(
                self,
                cid,
                name=name,
                bucket_name=bucket.bucket_name,
                memory_mb=memory_mb,
                timeout=Duration.minutes(minutes),
            )

        plan = function("PlanSweep", "plan_sweep", 512, 1)
        parse = function("ParseRun", "parse_run", 1024, 5)
        export = function("ExportLog", "export_log", 512, 10)
        aggregate = function("AggregateSweep", "aggregate_sweep", 2048, 10)

        # ---- grants: each function reads/writes only the prefixes it works on ----
        sweeps = layout.SWEEPS_PREFIX + "*"
        bucket.grant_put(plan.function, sweeps)
        bucket.grant_read(parse.function, sweeps)
        bucket.grant_read(parse.function, layout.IMPORTS_PREFIX + "*")
        bucket.grant_put(parse.function, sweeps)
        bucket.grant_read(export.function, sweeps)
        bucket.grant_put(export.function, sweeps)
        bucket.grant_read(aggregate.function, sweeps)
        bucket.grant_put(aggregate.function, sweeps)
        plan.function.add_to_role_policy(_quota_read_statement())
        export.function.add_to_role_policy(_training_logs_read_statement(self))

        # ---- raw logs trigger parsing; outputs (results/) never do ----
        notify = s3n.LambdaDestination(parse.function)
        bucket.add_event_notification(
            s3.EventType.OBJECT_CREATED,
            notify,
            s3.NotificationKeyFilter(prefix=layout.SWEEPS_PREFIX, suffix=layout.TRIGGER_SUFFIX_LOG),
        )
        bucket.add_event_notification(
            s3.EventType.OBJECT_CREATED, notify, s3.NotificationKeyFilter(prefix=layout.IMPORTS_PREFIX)
        )

        topic_key = kms.Key(
            self, "TopicKey", description="trainsweep notifications", enable_key_rotation=True
        )
        topic = sns.Topic(self, "Topic", display_name="trainsweep", master_key=topic_key, enforce_ssl=True)
        email = ctx("notification_email")
        if email:
            topic.add_subscription(subscriptions.EmailSubscription(str(email)))

        workflow = SweepStateMachine(
            self,
            "Sweep",
            plan=plan.function,
            parse=parse.function,
            export=export.function,
            aggregate=aggregate.function,
            topic=topic,
            bucket=bucket,
            bucket_key=storage.key,
            image_uri=training.image.image_uri,
            training_role=training.role,
            retry=RetryPolicy.from_context(ctx("retry")),
        )
        topic_key.grant_encrypt_decrypt(workflow.state_machine.role)

        CfnOutput(self, outputs.STATE_MACHINE_ARN, value=workflow.state_machine.state_machine_arn)
        CfnOutput(self, outputs.BUCKET_NAME, value=bucket.bucket_name)
        CfnOutput(self, outputs.TOPIC_ARN, value=topic.topic_arn)
        CfnOutput(self, outputs.TRAINING_ROLE_ARN, value=training.role.role_arn)
        CfnOutput(self, outputs.TRAINING_IMAGE_URI, value=training.image.image_uri)

        self.bucket = bucket
        self.state_machine = workflow.state_machine
        self.topic = topic
        self.training = training
        self.functions = {
            "plan_sweep": plan,
            "parse_run": parse,
            "export_log": export,
            "aggregate_sweep": aggregate,
        }


def _quota_read_statement() -> iam.PolicyStatement:
    # Service Quotas has no resource-level permissions for List*; reading is harmless.
    return iam.PolicyStatement(actions=["servicequotas:ListServiceQuotas"], resources=["*"])


def _training_logs_read_statement(stack: Stack) -> iam.PolicyStatement:
    return iam.PolicyStatement(
        actions=["logs:DescribeLogStreams", "logs:GetLogEvents"],
        resources=[
            stack.format_arn(
                service="logs",
                resource="log-group",
                resource_name="/aws/sagemaker/TrainingJobs:*",
                arn_format=ArnFormat.COLON_RESOURCE_NAME,
            )
        ],
    )


def _truthy(value: Any) -> bool:
    return str(value).lower() in ("1", "true", "yes", "on")


def _image_args(image_directory: Path | None) -> dict[str, Any]:
    return {} if image_directory is None else {"image_directory": image_directory}
