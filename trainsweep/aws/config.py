"""Environment variables the Lambda functions read: names in one place, parsed once per cold start."""

from __future__ import annotations

import os
from dataclasses import dataclass

from trainsweep.sagemaker_contract import TRAINING_LOG_GROUP

BUCKET_ENV = "TRAINSWEEP_BUCKET"
TRAINING_LOG_GROUP_ENV = "TRAINSWEEP_TRAINING_LOG_GROUP"
DEFAULT_TRAINING_LOG_GROUP = TRAINING_LOG_GROUP
TRAINING_IMAGE_ENV = "TRAINSWEEP_TRAINING_IMAGE"
"""The stack's own training image (PlanSweep gives it to every job whose spec names no image)."""
DATA_BUCKETS_ENV = "TRAINSWEEP_DATA_BUCKETS"
"""The buckets the training role may read besides the results bucket (``data_bucket_names``), comma-separated:
PlanSweep refuses a spec whose ``s3://`` inputs lie elsewhere."""
EMBEDDED_ENV = "TRAINSWEEP_EMBEDDED_AWS"
"""``1`` where the function runs in local mode's embedded AWS (set by its Lambda runtime, never deployed):
PlanSweep accepts the ``local``/``local_gpu`` instance types only there."""


class ConfigError(RuntimeError):
    """A required environment variable is missing (a deployment error, not a user error)."""


@dataclass(frozen=True)
class FunctionConfig:
    bucket: str
    training_log_group: str = DEFAULT_TRAINING_LOG_GROUP
    training_image: str | None = None
    """Only PlanSweep is given it; see :meth:`require_training_image`."""
    embedded: bool = False
    """Running in local mode's embedded AWS (``TRAINSWEEP_EMBEDDED_AWS``), not in an AWS account."""
    data_buckets: tuple[str, ...] = ()
    """Only PlanSweep is given them (``TRAINSWEEP_DATA_BUCKETS``)."""

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> FunctionConfig:
        env = os.environ if environ is None else environ
        bucket = env.get(BUCKET_ENV)
        if not bucket:
            raise ConfigError(f"environment variable {BUCKET_ENV} is not set")
        return cls(
            bucket=bucket,
            training_log_group=env.get(TRAINING_LOG_GROUP_ENV, DEFAULT_TRAINING_LOG_GROUP),
            training_image=env.get(TRAINING_IMAGE_ENV) or None,
            embedded=env.get(EMBEDDED_ENV) == "1",
            data_buckets=tuple(b for b in env.get(DATA_BUCKETS_ENV, "").split(",") if b),
        )

    def require_training_image(self) -> str:
        """The stack's training image; raises :class:`ConfigError` in a function deployed without it."""
        if not self.training_image:
            raise ConfigError(f"environment variable {TRAINING_IMAGE_ENV} is not set")
        return self.training_image
