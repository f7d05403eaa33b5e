"""The training step of the sweep workflow: the ``CreateTrainingJob`` request, a task for each kind of
job, and the retries of training errors (the SDK's retryable errors, and API errors whose cause says
another attempt may succeed).

:func:`training_job_parameters` is the one place the request's parameters are written.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from trainsweep.jobs import job_path

TRAINING_RESOURCE = "arn:aws:states:::sagemaker:createTrainingJob.sync"
# Errors worth another attempt, by name (the AWS SDK's spellings of throttling and resource limits).
RETRYABLE_TRAINING_ERRORS = [
    "SageMaker.ThrottlingException",
    "SageMaker.ResourceLimitExceeded",
    "SageMaker.ResourceLimitExceededException",
    "ThrottlingException",
]
# The integration reports every other API error as this one name, whatever its code: a throttle, but
# also an instance type the region does not offer or a job name in use, which no retry can fix. It is
# caught, and retried (RetryableTrainingError) only when its cause carries a code of throttling,
# resource limits, capacity or a server error ("... Status Code: 400; Error Code: ThrottlingException").
TRAINING_API_ERROR = "SageMaker.AmazonSageMakerException"
RETRYABLE_TRAINING_CAUSES = [
    "*Error Code: Throttling*",
    "*Error Code: ResourceLimitExceeded*",
    "*Capacity*",
    "*Status Code: 50*",
]
TRAINING_RETRY_PATH = "$.training_retry"


@dataclass(frozen=True)
class RetryPolicy:
    """Backoff for retryable training errors (context ``retry``: seconds, attempts, rate, max delay)."""

    interval_s: int = 30
    max_attempts: int = 6
    backoff_rate: float = 2.0
    max_delay_s: int = 600

    def caps_s(self) -> list[int]:
        """The longest wait before each retry (full jitter waits a random 1 s up to it)."""
        grow = self.backoff_rate
        return [int(min(self.interval_s * grow**i, self.max_delay_s)) for i in range(self.max_attempts)]

    @classmethod
    def from_context(cls, value: Any) -> RetryPolicy:
        if not value:
            return cls()
        if isinstance(value, str):  # `-c retry='{"interval_s": 10}'` arrives as text
            value = json.loads(value)
        return cls(**{k: type(getattr(cls(), k))(v) for k, v in dict(value).items()})


def training_job_parameters(
    *, role_arn: str, key_arn: str | None, spot: bool, data: bool, vpc: bool = False, mlflow: bool = False
) -> dict[str, Any]:
    """The ``CreateTrainingJob`` request a training task sends, for one combination of the optional parts
    (spot, data channel, VPC, SageMaker managed MLflow): the one place the request's parameters are
    written.

    The image is the job's: the spec's own ``workload.image_uri``, or the stack's image, which PlanSweep
    puts in every other job.
    """
    params: dict[str, Any] = {
        "TrainingJobName.$": job_path("job_name"),
        "AlgorithmSpecification": {
            "TrainingImage.$": job_path("image_uri"),
            "TrainingInputMode.$": job_path("input_mode"),
        },
        "RoleArn": role_arn,
        "HyperParameters.$": job_path("hyperparameters"),
        "OutputDataConfig": {
            "S3OutputPath.$": job_path("output_s3_uri"),
            **({"KmsKeyId": key_arn} if key_arn else {}),
        },
        "ResourceConfig": {
            "InstanceType.$": job_path("instance_type"),
            "InstanceCount.$": job_path("instance_count"),
            "VolumeSizeInGB.$": job_path("volume_size_gb"),
        },
        "EnableNetworkIsolation.$": job_path("network_isolation"),
        "EnableInterContainerTrafficEncryption.$": job_path("inter_container_encryption"),
        # Always set: the AWS default is a day of billing for a job that hangs.
        "StoppingCondition": {"MaxRuntimeInSeconds.$": job_path("max_runtime_seconds")},
        "Tags": [
            {"Key": "trainsweep:sweep", "Value.$": "$.sweep_id"},
            {"Key": "trainsweep:cell", "Value.$": job_path("job_name")},
        ],
    }
    if not spot:  # warm pools cannot be used with spot; 0 (the default) keeps no pool
        params["ResourceConfig"]["KeepAlivePeriodInSeconds.$"] = job_path("keep_alive_seconds")
    if spot:
        params["EnableManagedSpotTraining"] = True
        params["StoppingCondition"]["MaxWaitTimeInSeconds.$"] = job_path("max_wait_seconds")
        params["CheckpointConfig"] = {"S3Uri.$": job_path("checkpoint_s3_uri")}
    if vpc:
        params["VpcConfig.$"] = job_path("vpc_config")
    if mlflow:
        params["MlflowConfig.$"] = job_path("mlflow_config")
    if data:
        params["InputDataConfig"] = [
            {
                "ChannelName": "train",
                "DataSource": {
                    "S3DataSource": {
                        "S3DataType": "S3Prefix",
                        "S3Uri.$": job_path("data_s3_uri"),
                        "S3DataDistributionType": "FullyReplicated",
                    }
                },
            }
        ]
    return params


def _training_task(scope: Construct, construct_id: str, params: dict[str, Any]) -> sfn.CustomState:
    """``createTrainingJob.sync`` sending ``params`` (:func:`training_job_parameters`)."""
    return sfn.CustomState(
        scope,
        construct_id,
        state_json={
            "Type": "Task",
            "Resource": TRAINING_RESOURCE,
            "Parameters": params,
            "ResultPath": "$.outcome.training",
        },
    )


def training_choice(
    scope: Construct,
    then: sfn.IChainable,
    retry_check: sfn.IChainable,
    *,
    role_arn: str,
    key_arn: str | None,
    retry: RetryPolicy,
) -> sfn.Choice:
    """A training task for each combination of spot, data channel, VPC and MLflow, chosen by the job's
    own (Step Functions cannot leave an optional parameter out of one task); each goes on to ``then``, its
    API errors to ``retry_check``."""
    choose = sfn.Choice(scope, "TrainingKind")
    for spot, data, vpc, mlflow in itertools.product((True, False), repeat=4):
        name = (
            "Train" + ("Spot" if spot else "") + ("WithData" if data else "") + ("InVpc" if vpc else "")
        ) + ("WithMlflow" if mlflow else "")
        params = training_job_parameters(
            role_arn=role_arn, key_arn=key_arn, spot=spot, data=data, vpc=vpc, mlflow=mlflow
        )
        task = _training_task(scope, name, params)
        task.add_retry(
            errors=RETRYABLE_TRAINING_ERRORS,
            interval=Duration.seconds(retry.interval_s),
            max_attempts=retry.max_attempts,
            backoff_rate=retry.backoff_rate,
            max_delay=Duration.seconds(retry.max_delay_s),
            jitter_strategy=sfn.JitterType.FULL,
        )
        task.add_catch(retry_check, errors=[TRAINING_API_ERROR], result_path="$.outcome.error")
        task.add_catch(then, errors=[sfn.Errors.ALL], result_path="$.outcome.error")
        task.next(then)
        if spot or data or vpc or mlflow:
            choose.when(_training_kind(spot, data, vpc, mlflow), task)
        else:
            choose.otherwise(task)
    return choose


def api_error_retry(
    scope: Construct, retry: RetryPolicy, give_up: sfn.IChainable
) -> tuple[sfn.Choice, sfn.Pass]:
    """(the state a training API error goes to, the state that leads back to training).

    An error whose cause is retryable (:data:`RETRYABLE_TRAINING_CAUSES`) waits, with exponential
    backoff and full jitter, and trains again, at most ``retry.max_attempts`` times; any other goes on
    to ``give_up`` at once (the cell is recorded failed with AWS's message).
    """
    caps = ", ".join(str(c + 1) for c in retry.caps_s())  # MathRandom's end is exclusive
    attempt = f"{TRAINING_RETRY_PATH}.attempt"
    schedule = sfn.Pass(
        scope,
        "ScheduleTrainingRetry",
        parameters={
            "attempt.$": f"States.MathAdd({attempt}, 1)",
            "wait_s.$": f"States.MathRandom(1, States.ArrayGetItem(States.Array({caps}), {attempt}))",
        },
        result_path=TRAINING_RETRY_PATH,
    )
    wait = sfn.Wait(
        scope, "WaitToRetryTraining", time=sfn.WaitTime.seconds_path(f"{TRAINING_RETRY_PATH}.wait_s")
    )
    again = sfn.Pass(scope, "RetryTraining", result=sfn.Result.from_object({}), result_path="$.outcome")
    retryable = sfn.Condition.or_(
        *(sfn.Condition.string_matches("$.outcome.error.Cause", p) for p in RETRYABLE_TRAINING_CAUSES)
    )
    check = (
        sfn.Choice(scope, "RetryableTrainingError")
        .when(
            sfn.Condition.and_(
                sfn.Condition.is_string("$.outcome.error.Cause"),
                retryable,
                sfn.Condition.number_less_than(attempt, retry.max_attempts),
            ),
            schedule.next(wait).next(again),
        )
        .otherwise(give_up)
    )
    return check, again


def _training_kind(spot: bool, data: bool, vpc: bool, mlflow: bool = False) -> sfn.Condition:
    """The job's combination of spot, data channel, VPC and MLflow (``vpc_config`` and ``mlflow_config``
    are in a job only when set)."""
    spot_c = sfn.Condition.boolean_equals(job_path("spot"), True)
    data_c = sfn.Condition.is_string(job_path("data_s3_uri"))
    vpc_c = sfn.Condition.is_present(job_path("vpc_config"))
    mlflow_c = sfn.Condition.is_present(job_path("mlflow_config"))
    return sfn.Condition.and_(
        *(
            c if wanted else sfn.Condition.not_(c)
            for c, wanted in ((spot_c, spot), (data_c, data), (vpc_c, vpc), (mlflow_c, mlflow))
        )
    )
