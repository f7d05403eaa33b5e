"""The results bucket: raw logs in, artefacts out, private and encrypted."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from trainsweep import layout


class ResultsBucket(Construct):
    """A KMS-encrypted, versioned, SSL-only bucket with public access blocked.

    Args:
        raw_log_days: expire raw logs (``imports/``, and objects tagged ``layout.RAW_LOG_TAGGING``: S3
            filters cannot say ``sweeps/*/logs/``) after this many days;
            None keeps them.
        noncurrent_days: expire overwritten versions after this many days (the container re-uploads
            its growing log every few seconds, so a run leaves many versions).
        removal_policy: what ``cdk destroy`` does with the bucket and its key (default: retain).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        raw_log_days: int | None = None,
        noncurrent_days: int = 7,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, construct_id)
        self.key = kms.Key(
            self,
            "Key",
            description="trainsweep results bucket",
            enable_key_rotation=True,
            removal_policy=removal_policy,
        )
        rules = [
            s3.LifecycleRule(
                id="expire-noncurrent-versions",
                noncurrent_version_expiration=Duration.days(noncurrent_days),
                abort_incomplete_multipart_upload_after=Duration.days(7),
            )
        ]
        if raw_log_days is not None:
            rules += [
                s3.LifecycleRule(
                    id="expire-imported-logs",
                    prefix=layout.IMPORTS_PREFIX,
                    expiration=Duration.days(raw_log_days),
                ),
                s3.LifecycleRule(
                    id="expire-raw-logs",
                    tag_filters={layout.RAW_LOG_TAG_KEY: layout.RAW_LOG_TAG_VALUE},
                    expiration=Duration.days(raw_log_days),
                ),
            ]
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            encryption=s3.BucketEncryption.KMS,
            encryption_key=self.key,
            bucket_key_enabled=True,
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            versioned=True,
            lifecycle_rules=rules,
            removal_policy=removal_policy,
            auto_delete_objects=False,
        )
