"""The SageMaker ``createTrainingJob[.sync]`` task for moto's Step Functions interpreter
(:mod:`trainsweep.local.sfn_sagemaker` installs it). It imports moto's parser: only local mode and the
statemachine tests import this module."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError
from moto.stepfunctions.parser.api import HistoryEventType, TaskFailedEventDetails
from moto.stepfunctions.parser.asl.component.common.error_name.custom_error_name import CustomErrorName
from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
    FailureEvent,
    FailureEventException,
)
from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName
from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import (
    StatesErrorNameType,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.resource import (
    ResourceCondition,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_callback import (  # noqa: E501
    StateTaskServiceCallback,
)
from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails
from moto.stepfunctions.parser.asl.utils.boto_client import boto_client_for
from moto.stepfunctions.parser.asl.utils.encoding import to_json_str

from trainsweep.local.sfn_sagemaker import API_ERROR_NAME, TERMINAL_FAILURES

_CREATE_TRAINING_JOB_PARAMETERS = frozenset(
    {
        "AlgorithmSpecification",
        "CheckpointConfig",
        "DebugHookConfig",
        "DebugRuleConfigurations",
        "EnableInterContainerTrafficEncryption",
        "EnableManagedSpotTraining",
        "EnableNetworkIsolation",
        "Environment",
        "ExperimentConfig",
        "HyperParameters",
        "InfraCheckConfig",
        "InputDataConfig",
        "MlflowConfig",
        "OutputDataConfig",
        "ProfilerConfig",
        "ProfilerRuleConfigurations",
        "RemoteDebugConfig",
        "ResourceConfig",
        "RetryStrategy",
        "RoleArn",
        "SessionChainingConfig",
        "StoppingCondition",
        "Tags",
        "TensorBoardOutputConfig",
        "TrainingJobName",
        "VpcConfig",
    }
)


class StateTaskServiceSageMaker(StateTaskServiceCallback):
    """``arn:aws:states:::sagemaker:createTrainingJob[.sync]`` for moto's interpreter."""

    def __init__(self) -> None:
        # WaitForTaskToken is listed because moto's callback machinery assumes its endpoint exists
        # (it calls ``interrupt_all`` on it after every integration pattern).
        super().__init__(
            supported_integration_patterns={
                ResourceCondition.Sync,  # type: ignore[arg-type]  # moto types its enum values as str
                ResourceCondition.WaitForTaskToken,  # type: ignore[arg-type]
            }
        )

    def _get_supported_parameters(self) -> set[str] | None:
        if self.resource.api_action.lower() == "createtrainingjob":
            return set(_CREATE_TRAINING_JOB_PARAMETERS)
        return None

    def _failure(self, env: Any, error: str, cause: str) -> Any:
        return FailureEvent(
            env=env,
            error_name=CustomErrorName(error),
            event_type=HistoryEventType.TaskFailed,
            event_details=EventDetails(  # type: ignore[typeddict-item]  # moto's total=True TypedDict
                taskFailedEventDetails=TaskFailedEventDetails(
                    error=error,
                    cause=cause,
                    resource=self._get_sfn_resource(),
                    resourceType=self._get_sfn_resource_type(),
                )
            ),
        )

    def _from_error(self, env: Any, ex: Exception) -> Any:
        if isinstance(ex, ClientError):
            err = ex.response.get("Error", {})
            meta = ex.response.get("ResponseMetadata", {})
            cause = (
                f"{err.get('Message', '')} (Service: AmazonSageMaker; Status Code: "
                f"{meta.get('HTTPStatusCode')}; Error Code: {err.get('Code')}; "
                f"Request ID: {meta.get('RequestId')}; Proxy: null)"
            )
            return self._failure(env, API_ERROR_NAME, cause)
        return super()._from_error(env=env, ex=ex)

    def _client(self, resource_runtime_part: Any, state_credentials: Any) -> Any:
        return boto_client_for(
            region=resource_runtime_part.region, service="sagemaker", state_credentials=state_credentials
        )

    def _eval_service_task(
        self, env: Any, resource_runtime_part: Any, normalised_parameters: dict, state_credentials: Any
    ) -> None:
        bad = {
            k: type(v).__name__
            for k, v in (normalised_parameters.get("HyperParameters") or {}).items()
            if not isinstance(v, str)
        }
        if bad:
            raise FailureEventException(
                self._failure(
                    env,
                    API_ERROR_NAME,
                    "1 validation error detected: HyperParameters values must be strings; got "
                    + ", ".join(f"{k} ({t})" for k, t in sorted(bad.items()))
                    + " (Service: AmazonSageMaker; Status Code: 400; Error Code: ValidationException)",
                )
            )
        client = self._client(resource_runtime_part, state_credentials)
        response = client.create_training_job(**normalised_parameters)
        response.pop("ResponseMetadata", None)
        env.stack.append(response)

    def _build_sync_resolver(
        self, env: Any, resource_runtime_part: Any, normalised_parameters: dict, state_credentials: Any
    ) -> Callable[[], Any]:
        client = self._client(resource_runtime_part, state_credentials)
        env.stack.pop()  # the CreateTrainingJob response; the job is known by its name
        job_name = normalised_parameters["TrainingJobName"]

        def resolve() -> dict | None:
            # Called by the interpreter every 0.5 s until it returns something or raises.
            described = client.describe_training_job(TrainingJobName=job_name)
            described.pop("ResponseMetadata", None)
            status = described.get("TrainingJobStatus")
            if status == "Completed":
                return json.loads(to_json_str(described))
            if status in TERMINAL_FAILURES:
                raise FailureEventException(self._task_failed(env, described))
            return None

        return resolve

    def _task_failed(self, env: Any, described: dict) -> Any:
        """``States.TaskFailed`` with the job's description as its cause, as AWS's ``.sync`` fails."""
        return FailureEvent(
            env=env,
            error_name=StatesErrorName(typ=StatesErrorNameType.StatesTaskFailed),
            event_type=HistoryEventType.TaskFailed,
            event_details=EventDetails(  # type: ignore[typeddict-item]  # moto's total=True TypedDict
                taskFailedEventDetails=TaskFailedEventDetails(
                    resource=self._get_sfn_resource(),
                    resourceType=self._get_sfn_resource_type(),
                    error=StatesErrorNameType.StatesTaskFailed.to_name(),
                    cause=to_json_str(described),
                )
            ),
        )
