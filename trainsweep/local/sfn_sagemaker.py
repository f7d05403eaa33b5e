"""Teach moto's Step Functions interpreter the SageMaker ``createTrainingJob`` integration.

moto 5.2 lists ``sagemaker`` as an unsupported service: a state machine that uses
``arn:aws:states:::sagemaker:createTrainingJob.sync`` fails uncatchably. :func:`install` adds a
service handler that behaves like the AWS-optimised integration, so the CDK-synthesised definition
runs unchanged in the statemachine tests and in local mode:

* request-response: ``CreateTrainingJob`` and return its response;
* ``.sync``: create, then poll ``DescribeTrainingJob`` until ``Completed`` (output: the description),
  ``Failed`` or ``Stopped`` (error ``States.TaskFailed``, cause: the description as JSON, which
  carries ``FailureReason``, as on AWS);
* API errors become ``SageMaker.AmazonSageMakerException`` with the error code in the cause, which
  is the name AWS uses for this integration, so Retry/Catch clauses written for AWS match here too.

Like AWS, hyperparameter values must be strings: anything else is rejected with a validation error.
"""

from __future__ import annotations

import json
import threading

SERVICE_NAME = "sagemaker"
API_ERROR_NAME = "SageMaker.AmazonSageMakerException"
TERMINAL_FAILURES = frozenset({"Failed", "Stopped"})

_lock = threading.Lock()
_installed = False


def install() -> None:
    """Register the SageMaker service handler with moto's interpreter (idempotent, thread-safe)."""
    global _installed
    with _lock:
        if _installed:
            return
        # moto's parser is imported here, not at import: this module is imported by the CLI
        from moto.stepfunctions.parser.asl.component.state.exec.state_task import state_task_factory

        from trainsweep.local.sfn_sagemaker_task import StateTaskServiceSageMaker

        original = state_task_factory.state_task_service_for

        def state_task_service_for(service_name: str):  # type: ignore[no-untyped-def]
            if service_name == SERVICE_NAME:
                return StateTaskServiceSageMaker()
            return original(service_name=service_name)

        state_task_factory.state_task_service_for = state_task_service_for  # type: ignore[assignment]
        _installed = True


def is_installed() -> bool:
    return _installed


def failure_reason_from_cause(cause: str | None) -> str | None:
    """The ``FailureReason`` of a failed ``.sync`` training task's cause (the job description as JSON)."""
    if not cause:
        return None
    try:
        described = json.loads(cause)
    except ValueError:
        return cause
    if isinstance(described, dict):
        return described.get("FailureReason") or described.get("TrainingJobStatus")
    return cause
