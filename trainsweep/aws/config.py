"""Environment variables the Lambda functions read: names in one place, parsed once per cold start."""

from __future__ import annotations

import os
from dataclasses import dataclass

BUCKET_ENV = "TRAINSWEEP_BUCKET"
TRAINING_LOG_GROUP_ENV = "TRAINSWEEP_TRAINING_LOG_GROUP"
DEFAULT_TRAINING_LOG_GROUP = "/aws/sagemaker/TrainingJobs"


class ConfigError(RuntimeError):
    """A required environment variable is missing (a deployment error, not a user error)."""


@dataclass(frozen=True)
class FunctionConfig:
    bucket: str
    training_log_group: str = DEFAULT_TRAINING_LOG_GROUP

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> FunctionConfig:
        env = os.environ if environ is None else environ
        bucket = env.get(BUCKET_ENV)
        if not bucket:
            raise ConfigError(f"environment variable {BUCKET_ENV} is not set")
        return cls(
            bucket=bucket, training_log_group=env.get(TRAINING_LOG_GROUP_ENV, DEFAULT_TRAINING_LOG_GROUP)
        )
