"""What a SageMaker training job needs: the training image and a least-privilege execution role."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import ArnFormat, IgnoreMode, Stack
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from trainsweep import layout
from trainsweep.sagemaker_contract import TRAINING_LOG_GROUP

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = "container/Dockerfile"
# The image is built from the repository root so that it can install the trainsweep package; only
# what the Dockerfile may need is sent to Docker (and hashed at synth).
IMAGE_CONTEXT_EXCLUDE = [
    "*",
    "!container",
    "!trainsweep",
    "!pyproject.toml",
    "!README.md",
    "!requirements.txt",
    "**/__pycache__",
    "**/*.pyc",
]
SAGEMAKER_LOG_GROUP = TRAINING_LOG_GROUP


class TrainingPlatform(Construct):
    """The training image (built from ``container/`` at deploy time) and the role jobs run as.

    The role may: pull its image, and the images of the ECR repositories it is given (users' own images,
    context ``byo_image_repositories``); read the data prefixes it is given (and ``data/`` of the
    bucket) and the packed source of users' scripts (``sweeps/*/code/``); write job outputs, checkpoints
    and logs below ``sweeps/`` (``logs/*.log``, ``output/``, ``checkpoints/`` of any sweep: one role
    serves every sweep, and SageMaker gives a job's session nothing, such as its name, that a policy
    could tie a prefix to); write its CloudWatch logs and metrics. Nothing else (:meth:`_grant` adds
    every statement). What a job may still do to other sweeps, and why it cannot rewrite their results,
    is in docs/cloud.md ("Security").
    ``existing_role_arn``: run the jobs as this role instead (the image is still built and pushed).
    ``mlflow_resource_arns``: SageMaker managed MLflow resources the jobs track into (``MlflowConfig``).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        bucket: s3.IBucket,
        data_buckets: list[s3.IBucket] | None = None,
        image_repositories: list[ecr.IRepository] | None = None,
        image_directory: Path = ROOT,
        dockerfile: str = DOCKERFILE,
        existing_role_arn: str | None = None,
        mlflow_resource_arns: list[str] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        if not (image_directory / dockerfile).is_file():
            raise FileNotFoundError(
                f"the training image is built from {image_directory / dockerfile}, which does not exist"
            )
        self.image = ecr_assets.DockerImageAsset(
            self,
            "Image",
            directory=str(image_directory),
            file=dockerfile,
            exclude=IMAGE_CONTEXT_EXCLUDE,
            ignore_mode=IgnoreMode.DOCKER,
            platform=ecr_assets.Platform.LINUX_AMD64,
        )
        if existing_role_arn:
            # The deployment's own role: nothing is added to it (immutable), it needs what docs/cloud.md
            # ("An existing execution role") lists.
            self.role: iam.IRole = iam.Role.from_role_arn(
                self, "ExistingRole", existing_role_arn, mutable=False
            )
            return
        self.role = self._execution_role()
        self._grant(bucket, data_buckets or [], image_repositories or [], mlflow_resource_arns or [])

    def _execution_role(self) -> iam.Role:
        """The role SageMaker assumes for the jobs, with no permissions yet."""
        stack = Stack.of(self)
        return iam.Role(
            self,
            "ExecutionRole",
            # Confused-deputy guard: SageMaker may assume the role only for training jobs of this
            # account and region (SageMaker sets both keys when it assumes a training job's role).
            assumed_by=iam.ServicePrincipal(
                "sagemaker.amazonaws.com",
                conditions={
                    "StringEquals": {"aws:SourceAccount": stack.account},
                    "ArnLike": {
                        "aws:SourceArn": stack.format_arn(
                            service="sagemaker",
                            resource="training-job",
                            resource_name="*",
                            arn_format=ArnFormat.SLASH_RESOURCE_NAME,
                        )
                    },
                },
            ),
            description="trainsweep SageMaker training jobs",
        )

    def _grant(
        self,
        bucket: s3.IBucket,
        data_buckets: list[s3.IBucket],
        image_repositories: list[ecr.IRepository],
        mlflow_resource_arns: list[str],
    ) -> None:
        """Everything the role may do: the one place its policy statements are added (each group made by
        a ``_*_statements`` function below)."""
        stack = Stack.of(self)
        # Also grants ecr:GetAuthorizationToken (resource "*"), which a pull from any repository needs.
        self.image.repository.grant_pull(self.role)
        self._add(_own_image_statements(image_repositories))
        self._add(_results_bucket_statements(bucket))
        self._add(_mlflow_statements(mlflow_resource_arns))
        for data in data_buckets:
            data.grant_read(self.role)
        self._add(_data_bucket_key_statements(stack, data_buckets))
        self._add(_log_and_metric_statements(stack))

    def _add(self, statements: list[iam.PolicyStatement]) -> None:
        for statement in statements:
            self.role.add_to_principal_policy(statement)


def _mlflow_statements(mlflow_resource_arns: list[str]) -> list[iam.PolicyStatement]:
    """Track into SageMaker managed MLflow: what SageMaker's docs give such a role (every MLflow API,
    ``sagemaker-mlflow:*``), here only on the tracking servers / MLflow Apps the deployment configured."""
    if not mlflow_resource_arns:
        return []
    return [
        iam.PolicyStatement(
            sid="UseManagedMlflow", actions=["sagemaker-mlflow:*"], resources=list(mlflow_resource_arns)
        )
    ]


def _own_image_statements(image_repositories: list[ecr.IRepository]) -> list[iam.PolicyStatement]:
    """Pull users' own images: what a docker pull needs, on the configured repositories only."""
    if not image_repositories:
        return []
    return [
        iam.PolicyStatement(
            sid="PullOwnImages",
            actions=["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
            resources=[r.repository_arn for r in image_repositories],
        )
    ]


def _results_bucket_statements(bucket: s3.IBucket) -> list[iam.PolicyStatement]:
    """Write logs, output and checkpoints below ``sweeps/``; read code, checkpoints and uploaded data.

    Explicit statements rather than CDK's grant_* helpers: those add bucket-level and wildcard actions
    (GetBucket*, List*, DeleteObject* on the bucket ARN) the jobs do not need.
    """
    any_sweep = layout.SWEEPS_PREFIX + "*"
    objects = bucket.arn_for_objects
    statements = [
        iam.PolicyStatement(
            # Tagged uploads (layout.RAW_LOG_TAGGING) need PutObjectTagging too. Only raw-log keys
            # (<run>.log, the trigger suffix): nothing else below logs/ is ever read.
            sid="WriteLogs",
            actions=["s3:PutObject", "s3:PutObjectTagging"],
            resources=[objects(f"{any_sweep}/{layout.LOGS_DIR}/*{layout.TRIGGER_SUFFIX_LOG}")],
        ),
        iam.PolicyStatement(
            sid="WriteOutput", actions=["s3:PutObject"], resources=[objects(f"{any_sweep}/output/*")]
        ),
        iam.PolicyStatement(
            sid="SyncSpotCheckpoints",  # managed spot syncs the checkpoint folder both ways
            actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
            resources=[objects(f"{any_sweep}/checkpoints/*")],
        ),
        iam.PolicyStatement(
            sid="ReadSourceCode",  # a script's packed source dir, uploaded by `trainsweep run`
            actions=["s3:GetObject"],
            resources=[objects(f"{any_sweep}/{layout.CODE_DIR}/*")],
        ),
        iam.PolicyStatement(
            sid="ReadUploadedData",
            actions=["s3:GetObject"],
            resources=[objects(f"{layout.DATA_PREFIX}*")],
        ),
        iam.PolicyStatement(
            sid="ListCheckpointsAndData",
            actions=["s3:ListBucket"],
            resources=[bucket.bucket_arn],
            conditions={
                "StringLike": {"s3:prefix": [f"{any_sweep}/checkpoints/*", f"{layout.DATA_PREFIX}*"]}
            },
        ),
    ]
    if bucket.encryption_key is not None:
        statements.append(
            iam.PolicyStatement(
                # GenerateDataKey/Decrypt: SSE-KMS objects it writes and reads; Encrypt: the job's
                # output is encrypted with this key (OutputDataConfig.KmsKeyId names it).
                sid="UseBucketKey",
                actions=["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"],
                resources=[bucket.encryption_key.key_arn],
            )
        )
    return statements


def _data_bucket_key_statements(stack: Stack, data_buckets: list[s3.IBucket]) -> list[iam.PolicyStatement]:
    """Decrypt objects of the data buckets, whose SSE-KMS keys this stack cannot name.

    Whichever key S3 uses, but only through S3 and only for objects of these buckets (the encryption
    context is the object's ARN, or the bucket's with S3 Bucket Keys). A key in another account must
    also allow the role in its key policy.
    """
    if not data_buckets:
        return []
    return [
        iam.PolicyStatement(
            sid="DecryptDataBuckets",
            actions=["kms:Decrypt"],
            resources=["*"],
            conditions={
                "StringEquals": {"kms:ViaService": f"s3.{stack.region}.amazonaws.com"},
                "ArnLike": {
                    "kms:EncryptionContext:aws:s3:arn": [
                        arn for d in data_buckets for arn in (d.bucket_arn, d.arn_for_objects("*"))
                    ]
                },
            },
        )
    ]


def _log_and_metric_statements(stack: Stack) -> list[iam.PolicyStatement]:
    """Write the job's CloudWatch logs (creating the training log group if needed) and metrics."""

    def log_group(suffix: str = "") -> str:
        return stack.format_arn(
            service="logs",
            resource="log-group",
            resource_name=SAGEMAKER_LOG_GROUP + suffix,
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )

    return [
        iam.PolicyStatement(
            # The first job in a region creates /aws/sagemaker/TrainingJobs. Both forms of the group's
            # ARN, as AWS's own SageMaker policies grant it: which one CloudWatch Logs checks differs
            # between callers, and a refused CreateLogGroup leaves the job with no stream at all.
            sid="CreateTrainingLogGroup",
            actions=["logs:CreateLogGroup"],
            resources=[log_group(), log_group(":*")],
        ),
        iam.PolicyStatement(
            actions=["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
            resources=[log_group(":*")],
        ),
        iam.PolicyStatement(
            actions=["cloudwatch:PutMetricData"],
            resources=["*"],
            conditions={"StringLike": {"cloudwatch:namespace": "/aws/sagemaker/*"}},
        ),
    ]
