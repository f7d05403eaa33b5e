"""The Lambda functions' requests: what the state machine (and a resume) sends each handler, typed.

Each handler parses its event into one of these models (:func:`parse_request`) before it calls the core,
so a malformed event fails at the edge with the field path of what is wrong, and the core reads fields,
not dictionary keys. The models are pydantic models in the style of Powertools' event parser
(``aws_lambda_powertools.utilities.parser``), and its ``parse``/``event_parser`` accept them as they are.
A planned job inside a request is a :class:`~trainsweep.jobs.PlannedJob`, validated as one.
ParseRun's other caller, S3's ObjectCreated notification, is read by Powertools' ``S3Event``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from trainsweep.errors import TrainsweepError
from trainsweep.jobs import PlannedJob, describe


class RequestError(TrainsweepError):
    """A Lambda function's event is not the request it takes."""


class _Request(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    FUNCTION: ClassVar[str] = ""
    """The function that takes the request (named in errors)."""


class SweepStart(_Request):
    """A state machine execution's input as ``trainsweep run`` starts it: the spec and the sweep's names."""

    spec: dict[str, Any]
    sweep_id: str | None = None
    """None: the planner names the sweep (``<name>-<UTC time>``)."""
    attempt: str | None = None
    """A resume's token for new SageMaker job names (``SweepPlan`` keeps the run names)."""


class PlanSweepRequest(_Request):
    """PlanSweep's event: the execution input and the execution's name (it names the fan-out's files).

    The state machine sends ``{input, execution}``; an event without ``input`` (the function invoked on
    its own) is the input itself.
    """

    FUNCTION: ClassVar[str] = "PlanSweep"

    input: SweepStart
    """A :class:`SweepStart`, or a bare spec (started from the console or the AWS CLI)."""
    execution: str = "run"

    @model_validator(mode="before")
    @classmethod
    def _input_alone(cls, value: Any) -> Any:
        if isinstance(value, Mapping) and "input" not in value:
            return {"input": value}
        return value

    @field_validator("execution", mode="before")
    @classmethod
    def _unnamed(cls, value: Any) -> Any:
        # an execution started without a name (an emulator's) names its files "run"
        return "run" if value is None else value

    @field_validator("input", mode="before")
    @classmethod
    def _bare_spec(cls, value: Any) -> Any:
        if isinstance(value, Mapping) and ("spec" not in value or "workload" in value):
            return {"spec": value}
        return value


class JobOutcome(_Request):
    """How the training task ended: DescribeTrainingJob's output, or the ``{Error, Cause}`` caught."""

    training: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class RecordJobRequest(_Request):
    """ParseRun's event from the state machine, once per finished job."""

    FUNCTION: ClassVar[str] = "ParseRun"

    sweep_id: str
    job: PlannedJob
    outcome: JobOutcome = Field(default_factory=JobOutcome)


class ExportLogRequest(_Request):
    """ExportLog's event: the job whose CloudWatch log to copy when it wrote none of its own."""

    FUNCTION: ClassVar[str] = "ExportLog"

    sweep_id: str
    job: PlannedJob


class AggregateSweepRequest(_Request):
    """AggregateSweep's event: the fan-out's output (``maps``), or a resume's merged cell records
    (``cells``), which take the place of the fan-out's."""

    FUNCTION: ClassVar[str] = "AggregateSweep"

    sweep_id: str
    maps: Any = None
    """Per instance-type group, its Distributed Map's result reference or error; or the fan-out's error."""
    cells: list[Any] | None = None
    """Cell records, or lists of them (as the fan-out's results hold them)."""


RequestT = TypeVar("RequestT", bound=_Request)


def parse_request(event: Any, model: type[RequestT]) -> RequestT:
    """The request in a Lambda event.

    Raises:
        RequestError: the event is not a ``model``; the message names each wrong field by its path.
    """
    try:
        return model.model_validate(event)
    except ValidationError as exc:
        raise RequestError(f"{model.FUNCTION} got a malformed event: {describe(exc)}") from exc
