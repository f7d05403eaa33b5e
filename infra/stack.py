"""The trainsweep stack: composes the components and grants what each needs. No logic of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import ArnFormat, CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_notifications as s3n
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.functions import HandlerFunction
from infra.settings import StackSettings
from infra.storage import ResultsBucket
from infra.training import TrainingPlatform
from infra.workflow import SweepStateMachine
from trainsweep import layout
from trainsweep.aws import outputs
from trainsweep.aws.config import DATA_BUCKETS_ENV, TRAINING_IMAGE_ENV
from trainsweep.sagemaker_contract import TRAINING_LOG_GROUP

PARSE_FAILURE_RETENTION = Duration.days(14)
"""How long a failed ParseRun event waits in the queue (SQS's maximum, as for a dead-letter queue)."""


class TrainsweepStack(Stack):
    """Everything a sweep needs in one account and region.

    Context (``cdk.json`` or ``-c key=value``, read once into :class:`~infra.settings.StackSettings`):
    ``notification_email`` (subscribe an address to the topic), ``raw_log_days`` (expire raw logs),
    ``data_bucket_names`` (buckets the training jobs may read), ``byo_image_repositories`` (ECR
    repositories of users' own training images the jobs may pull), ``retry`` (backoff of retryable
    training errors), ``destroy_on_delete`` (tear the bucket down with the stack; default: retain it),
    ``parse_reserved_concurrency`` (ParseRun's reserved concurrent executions; default 0: none),
    ``training_role_arn``, ``results_bucket_name`` and ``results_bucket_key_arn`` (existing resources
    to use instead of creating them), ``mlflow_resource_arns`` (SageMaker managed MLflow resources the
    training role may track into).

    ParseRun's S3-triggered (asynchronous) invocations that still fail after Lambda's two retries land
    in the ``ParseFailures`` queue (``trainsweep status`` counts them) instead of disappearing.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, image_directory: Path | None = None, **kwargs: Any
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.settings = StackSettings.from_context(self.node)
        removal = RemovalPolicy.DESTROY if self.settings.destroy_on_delete else RemovalPolicy.RETAIN
        self.bucket, bucket_key = _results_bucket(self, self.settings, removal)
        self.training = self._training_platform(image_directory)
        self.functions = self._functions()
        self._grant_functions()
        parse = self.functions["parse_run"].function
        self.parse_failures = self._keep_parse_failures(parse)
        self._trigger_parsing(parse)
        self.topic, topic_key = self._topic()
        workflow = SweepStateMachine(
            self,
            "Sweep",
            plan=self.functions["plan_sweep"].function,
            parse=parse,
            export=self.functions["export_log"].function,
            aggregate=self.functions["aggregate_sweep"].function,
            topic=self.topic,
            bucket=self.bucket,
            bucket_key=bucket_key,
            training_role=self.training.role,
            retry=self.settings.retry,
        )
        topic_key.grant_encrypt_decrypt(workflow.state_machine.role)
        self.state_machine = workflow.state_machine
        self._outputs()

    def _training_platform(self, image_directory: Path | None) -> TrainingPlatform:
        """The training image and role, which may read the configured data buckets and pull from the
        configured image repositories."""
        data_buckets = [
            s3.Bucket.from_bucket_name(self, f"Data{i}", name)
            for i, name in enumerate(self.settings.data_bucket_names)
        ]
        return TrainingPlatform(
            self,
            "Training",
            bucket=self.bucket,
            data_buckets=data_buckets,
            image_repositories=[
                _repository(self, f"ByoImage{i}", ref)
                for i, ref in enumerate(self.settings.image_repositories)
            ],
            existing_role_arn=self.settings.training_role_arn,
            mlflow_resource_arns=list(self.settings.mlflow_resource_arns),
            **_image_args(image_directory),
        )

    def _functions(self) -> dict[str, HandlerFunction]:
        """The four handlers, by their ``lambdas/`` folder name."""
        settings = self.settings
        # PlanSweep gives the stack's image to every job whose spec names none ($.job.image_uri).
        # ... and the buckets the training role may read: it refuses a spec whose inputs lie elsewhere.
        plan = self._function(
            "PlanSweep",
            "plan_sweep",
            512,
            1,
            {
                TRAINING_IMAGE_ENV: self.training.image.image_uri,
                # an existing role may read what its owners gave it: "*", PlanSweep checks nothing
                DATA_BUCKETS_ENV: "*" if settings.training_role_arn else ",".join(settings.data_bucket_names),
            },
        )
        # ParseRun records every finished cell. No concurrency is reserved by default (a new account cannot
        # afford it: Lambda keeps 100 unreserved); the state machine retries a throttled invoke patiently
        # instead, and S3's asynchronous invocations are queued and retried by Lambda itself.
        parse = self._function(
            "ParseRun", "parse_run", 1024, 5, reserved_concurrency=settings.parse_reserved_concurrency
        )
        return {
            "plan_sweep": plan,
            "parse_run": parse,
            "export_log": self._function("ExportLog", "export_log", 512, 10),
            "aggregate_sweep": self._function("AggregateSweep", "aggregate_sweep", 2048, 10),
        }

    def _function(
        self,
        cid: str,
        name: str,
        memory_mb: int,
        minutes: int,
        environment: dict[str, str] | None = None,
        reserved_concurrency: int | None = None,
    ) -> HandlerFunction:
        return HandlerFunction(
            self,
            cid,
            name=name,
            bucket_name=self.bucket.bucket_name,
            memory_mb=memory_mb,
            timeout=Duration.minutes(minutes),
            environment=environment,
            reserved_concurrency=reserved_concurrency,
        )

    def _grant_functions(self) -> None:
        """Each function reads/writes only the prefixes it works on."""
        bucket = self.bucket
        plan, parse, export, aggregate = (
            self.functions[name].function
            for name in ("plan_sweep", "parse_run", "export_log", "aggregate_sweep")
        )
        sweeps = layout.SWEEPS_PREFIX + "*"
        bucket.grant_put(plan, sweeps)
        # PlanSweep keeps the Pricing API's answers in the bucket (layout.PRICES_KEY) for the next sweep.
        bucket.grant_read(plan, layout.PRICES_KEY)
        bucket.grant_put(plan, layout.PRICES_KEY)
        bucket.grant_read(parse, sweeps)
        bucket.grant_read(parse, layout.IMPORTS_PREFIX + "*")
        bucket.grant_put(parse, sweeps)
        bucket.grant_read(export, sweeps)
        bucket.grant_put(export, sweeps)
        bucket.grant_read(aggregate, sweeps)
        bucket.grant_put(aggregate, sweeps)
        plan.add_to_role_policy(_quota_read_statement())
        plan.add_to_role_policy(_pricing_read_statement())
        export.add_to_role_policy(_training_logs_read_statement(self))
        # Raw logs trigger ParseRun: only ExportLog (which copies a job's missing log there) may write
        # them. The grants above cover sweeps/*; an explicit Deny wins over any Allow, present or future.
        for fn in (plan, parse, aggregate):
            fn.add_to_role_policy(_deny_raw_log_writes_statement(bucket))

    def _keep_parse_failures(self, parse: lambda_.IFunction) -> sqs.Queue:
        """A log that keeps crashing ParseRun is kept in this queue, not lost after Lambda's two retries."""
        parse_failures = sqs.Queue(
            self,
            "ParseFailures",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=PARSE_FAILURE_RETENTION,
        )
        parse.configure_async_invoke(on_failure=destinations.SqsDestination(parse_failures), retry_attempts=2)
        return parse_failures

    def _trigger_parsing(self, parse: lambda_.IFunction) -> None:
        """Raw logs (and imports) trigger parsing; outputs (results/) never do."""
        notify = s3n.LambdaDestination(parse)
        self.bucket.add_event_notification(
            s3.EventType.OBJECT_CREATED,
            notify,
            s3.NotificationKeyFilter(prefix=layout.SWEEPS_PREFIX, suffix=layout.TRIGGER_SUFFIX_LOG),
        )
        self.bucket.add_event_notification(
            s3.EventType.OBJECT_CREATED, notify, s3.NotificationKeyFilter(prefix=layout.IMPORTS_PREFIX)
        )

    def _topic(self) -> tuple[sns.Topic, kms.Key]:
        """The notification topic and its key (with the configured email subscribed)."""
        topic_key = kms.Key(
            self, "TopicKey", description="trainsweep notifications", enable_key_rotation=True
        )
        topic = sns.Topic(self, "Topic", display_name="trainsweep", master_key=topic_key, enforce_ssl=True)
        if self.settings.notification_email:
            topic.add_subscription(subscriptions.EmailSubscription(self.settings.notification_email))
        return topic, topic_key

    def _outputs(self) -> None:
        """What the CLI reads from the deployed stack (:mod:`trainsweep.aws.outputs`)."""
        CfnOutput(self, outputs.STATE_MACHINE_ARN, value=self.state_machine.state_machine_arn)
        CfnOutput(self, outputs.BUCKET_NAME, value=self.bucket.bucket_name)
        CfnOutput(self, outputs.TOPIC_ARN, value=self.topic.topic_arn)
        CfnOutput(self, outputs.TRAINING_ROLE_ARN, value=self.training.role.role_arn)
        CfnOutput(self, outputs.TRAINING_IMAGE_URI, value=self.training.image.image_uri)
        CfnOutput(self, outputs.PARSE_FAILURE_QUEUE_URL, value=self.parse_failures.queue_url)


def _results_bucket(
    stack: Stack, settings: StackSettings, removal: RemovalPolicy
) -> tuple[s3.IBucket, kms.IKey | None]:
    """The stack's own results bucket and its key, or the deployment's existing bucket (and its key)."""
    if settings.results_bucket_name is None:
        storage = ResultsBucket(stack, "Results", raw_log_days=settings.raw_log_days, removal_policy=removal)
        return storage.bucket, storage.key
    key = (
        kms.Key.from_key_arn(stack, "ExistingResultsKey", settings.results_bucket_key_arn)
        if settings.results_bucket_key_arn
        else None
    )
    bucket = s3.Bucket.from_bucket_attributes(
        stack, "ExistingResults", bucket_name=settings.results_bucket_name, encryption_key=key
    )
    return bucket, key


def _quota_read_statement() -> iam.PolicyStatement:
    # Service Quotas has no resource-level permissions for List*; reading is harmless.
    return iam.PolicyStatement(actions=["servicequotas:ListServiceQuotas"], resources=["*"])


def _pricing_read_statement() -> iam.PolicyStatement:
    # The Pricing API (endpoints in us-east-1, eu-central-1 and ap-south-1 only, serving every region's
    # prices) has no resource-level permissions: public list prices, read only.
    return iam.PolicyStatement(actions=["pricing:GetProducts"], resources=["*"])


def _deny_raw_log_writes_statement(bucket: s3.IBucket) -> iam.PolicyStatement:
    # s3:PutObject also authorises every step of a multipart upload; PutObject* covers tagging,
    # ACLs, retention and legal holds of such objects.
    return iam.PolicyStatement(
        sid="DenyRawLogWrites",
        effect=iam.Effect.DENY,
        actions=["s3:PutObject", "s3:PutObject*"],
        resources=[bucket.arn_for_objects(f"{layout.SWEEPS_PREFIX}*/{layout.LOGS_DIR}/*")],
    )


def _training_logs_read_statement(stack: Stack) -> iam.PolicyStatement:
    return iam.PolicyStatement(
        actions=["logs:DescribeLogStreams", "logs:GetLogEvents"],
        resources=[
            stack.format_arn(
                service="logs",
                resource="log-group",
                resource_name=f"{TRAINING_LOG_GROUP}:*",
                arn_format=ArnFormat.COLON_RESOURCE_NAME,
            )
        ],
    )


def _repository(scope: Construct, construct_id: str, ref: str) -> ecr.IRepository:
    """An existing ECR repository from its name (this account and region) or its ARN."""
    if ref.startswith("arn:"):
        return ecr.Repository.from_repository_arn(scope, construct_id, ref)
    return ecr.Repository.from_repository_name(scope, construct_id, ref)


def _image_args(image_directory: Path | None) -> dict[str, Any]:
    return {} if image_directory is None else {"image_directory": image_directory}
