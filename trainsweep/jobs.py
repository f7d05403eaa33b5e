"""The planned job: one SageMaker training job of a sweep, as the planner writes it and every reader reads it.

A :class:`PlannedJob` is what ``jobs.json`` lists under ``jobs``, what each instance-type group's job list
in S3 holds, what the state machine's ``$.job`` is (the training task builds CreateTrainingJob from its
fields, ``infra/training_task.py``), and what ExportLog and ParseRun receive. Its JSON form is versioned by
:data:`SCHEMA_VERSION`, the ``schema_version`` of the ``jobs.json`` document that lists it.

A pydantic model rather than a dataclass: the same class validates a job arriving in a Lambda event or
read back from S3 (with the field path of what is wrong), serves as a field of the handlers' request
models, and dumps to exactly the JSON the planner has always written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from trainsweep.errors import TrainsweepError

SCHEMA_VERSION = 3
"""``schema_version`` of ``jobs.json``: the version of the :class:`PlannedJob` records it lists. Version 2
adds ``axes`` (a sweep with axes), version 3 ``mlflow_config`` (a sweep tracked by a SageMaker MLflow
server); a plan is written at the lowest version that holds it (without either: version 1, byte for byte
as before), so an older trainsweep refuses by its version, not by an unknown field, a plan it cannot read."""
SCHEMA_VERSIONS = (1, 2, 3)
"""The versions this trainsweep reads."""

AxisValue = str | int | float | bool


class JobRecordError(TrainsweepError):
    """A planned job (or a ``jobs.json`` document) that is not one this version of trainsweep writes."""


class PlannedJob(BaseModel):
    """One training job of a sweep: its names, where and how it runs, and the cells (runs) it trains.

    The field order is the JSON key order of the job lists the state machine reads.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    sweep_id: str
    job_name: str
    """The SageMaker training job's name (a resumed sweep's jobs carry their attempt in it)."""
    run_names: tuple[str, ...]
    """One per batch size the job trains: the names of their logs and results."""
    instance_type: str
    instance_count: int
    vmtype: str
    """The seed layout's spelling of the instance type and count (``p3-1``)."""
    batch_sizes: tuple[int, ...]
    repetition: int
    hyperparameters: dict[str, str]
    max_runtime_seconds: int
    spot: bool
    max_wait_seconds: int | None
    keep_alive_seconds: int = 0
    """ResourceConfig.KeepAlivePeriodInSeconds (0: no warm pool; never with spot). Absent (0) in records
    written before warm pools."""
    checkpoint_s3_uri: str | None
    data_s3_uri: str | None
    image_uri: str | None
    """None until PlanSweep gives the job the stack's image (a spec's own image is kept)."""
    log_format: str | None = None
    """The spec's pattern for a log no built-in dialect reads (None: sniff). Absent (None) in records
    written before it."""
    output_s3_uri: str | None
    region: str
    volume_size_gb: int = 50
    """ResourceConfig.VolumeSizeInGB (the spec's ``training_job``); 50 in records written before it."""
    input_mode: str = "File"
    """AlgorithmSpecification.TrainingInputMode: File, FastFile or Pipe."""
    network_isolation: bool = False
    """EnableNetworkIsolation."""
    inter_container_encryption: bool = False
    """EnableInterContainerTrafficEncryption."""
    vpc_config: dict[str, list[str]] | None = None
    """VpcConfig (``Subnets``, ``SecurityGroupIds``); written only when set: the state machine picks the
    training task that passes it by the key's presence."""
    axes: tuple[dict[str, AxisValue], ...] = ()
    """Each cell's setting of the spec's axes (``{dtype: bfloat16}``), aligned with ``run_names``; written
    only for a sweep with axes (schema version 2)."""
    mlflow_config: dict[str, str] | None = None
    """MlflowConfig (``MlflowResourceArn``, ``MlflowExperimentName``, ``MlflowRunName``) when the spec
    tracks into a SageMaker managed MLflow; written only when set: the state machine picks the training
    task that passes it by the key's presence."""

    def to_json(self) -> dict[str, Any]:
        """The job as JSON types, keys in field order (``jobs.json`` and the state machine's ``$.job``);
        ``vpc_config``, ``axes`` and ``mlflow_config`` only when set."""
        out = self.model_dump(mode="json")
        if out["vpc_config"] is None:
            del out["vpc_config"]
        if not out["axes"]:
            del out["axes"]
        if out["mlflow_config"] is None:
            del out["mlflow_config"]
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PlannedJob:
        """Read a job written by :meth:`to_json`.

        Raises:
            JobRecordError: a missing, unknown or mistyped field, named by its path.
        """
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise JobRecordError(f"not a planned job: {describe(exc)}") from exc

    @property
    def cells(self) -> list[tuple[str, int | None]]:
        """``(run name, batch size)`` of each cell the job trains (a missing batch size reads as None)."""
        sizes = self.batch_sizes
        return [(run, sizes[i] if i < len(sizes) else None) for i, run in enumerate(self.run_names)]

    def setting(self, run_name: str) -> dict[str, AxisValue]:
        """The axes' values of the cell named ``run_name`` (empty without axes)."""
        if not self.axes or run_name not in self.run_names:
            return {}
        i = self.run_names.index(run_name)
        return dict(self.axes[i]) if i < len(self.axes) else {}

    def writes_log(self, run_name: str) -> bool:
        """True when the log named ``run_name`` is this job's: one of its runs', or its own (ExportLog's)."""
        return run_name in self.run_names or run_name == self.job_name

    def worst_case_usd(self, hourly: float | None) -> float | None:
        """The job's worst case at ``hourly`` USD per instance-hour: all its instances for its max runtime
        and for the warm pool it may leave, which is billed while kept (None: no price)."""
        if hourly is None:
            return None
        return self.instance_count * (self.max_runtime_seconds + self.keep_alive_seconds) / 3600 * hourly


def describe(exc: ValidationError) -> str:
    """pydantic's findings as ``path: message`` pairs, one line each."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or '(top level)'}: {e['msg']}" for e in exc.errors())


def jobs_of_document(doc: Any) -> list[PlannedJob]:
    """The planned jobs of a ``jobs.json`` document.

    Raises:
        JobRecordError: not a jobs document, a ``schema_version`` other than :data:`SCHEMA_VERSION`, or a
            job that does not read.
    """
    if not isinstance(doc, Mapping):
        raise JobRecordError(f"jobs.json: expected an object, got {type(doc).__name__}")
    version = doc.get("schema_version")
    if version not in SCHEMA_VERSIONS:
        raise JobRecordError(
            f"jobs.json has schema_version {version!r}; this trainsweep reads versions "
            f"{', '.join(map(str, SCHEMA_VERSIONS))}"
        )
    jobs = doc.get("jobs")
    if not isinstance(jobs, list):
        raise JobRecordError("jobs.json: expected a list under 'jobs'")
    return [PlannedJob.from_json(j) for j in jobs]


def schema_version(jobs: list[PlannedJob]) -> int:
    """The ``schema_version`` of a ``jobs.json`` listing ``jobs``: 3 when a job has ``mlflow_config``, 2
    when one has axes, else 1."""
    if any(j.mlflow_config for j in jobs):
        return 3
    return 2 if any(j.axes for j in jobs) else 1


def job_for_run(jobs: list[PlannedJob], run_name: str) -> PlannedJob | None:
    """The job that writes the log named ``run_name`` (None when no job of ``jobs`` does)."""
    return next((j for j in jobs if j.writes_log(run_name)), None)


FIELDS: tuple[str, ...] = tuple(PlannedJob.model_fields)
"""The record's field names: the only names a ``$.job.<field>`` path may use."""

JOB_PATH = "$.job"
"""Where the state machine's job states carry the job they run (the fan-out's item)."""


def job_path(field: str) -> str:
    """The JSONPath of a field of the job a job state carries: ``$.job.<field>``.

    Raises:
        KeyError: ``field`` is not a field of :class:`PlannedJob` (a definition built with it would read
            nothing at run time).
    """
    if field not in PlannedJob.model_fields:
        raise KeyError(f"{field!r} is not a field of PlannedJob ({', '.join(FIELDS)})")
    return f"{JOB_PATH}.{field}"
