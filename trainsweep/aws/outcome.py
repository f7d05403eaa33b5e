"""What happened to each cell of a sweep: a status and a reason, from the job's and the log's view.

Pure functions (no AWS calls): the ParseRun handler feeds them the training task's output or the
error the state machine caught, plus what the parser read from each run's log.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from trainsweep.jobs import PlannedJob

CellStatus = Literal["completed", "partial", "infeasible", "skipped", "timeout", "failed"]

SKIPPED_KIND = "skipped"
INFEASIBLE_KIND = "infeasible"  # trainsweep.training.contract.INFEASIBLE (this module stays free of it)
"""The failure kind the training supervisor gives a cell its batch-size search did not run because
throughput stopped improving (``trainsweep.training.supervisor.SKIPPED``): not a failure."""

# What the frameworks and SageMaker say when a batch does not fit: PyTorch/TF/NCCL messages, the
# kernel's OOM killer as SageMaker reports it, and trainsweep's own container marker.
_OOM = re.compile(
    r"out of memory|outofmemory|\bOOM\b|ResourceExhausted|MemoryError|Cannot allocate memory"
    r"|Please use an instance type with more memory|infeasible batch size",
    re.IGNORECASE,
)
_TIMEOUT_SECONDARY = {"MaxRuntimeExceeded", "MaxWaitTimeExceeded"}
REASON_MAX = 1000


@dataclass(frozen=True)
class Cell:
    """One (instance type, batch size, repetition) cell's final record (``jobs`` in the report)."""

    run_name: str
    job_name: str
    instance_type: str
    batch_size: int | None
    repetition: int | None
    status: CellStatus
    reason: str | None
    billable_s: float | None
    training_s: float | None = None
    """SageMaker's TrainingTimeInSeconds share; with billable_s it shows managed-spot savings."""
    instance_count: int = 1
    """Instances of the cell's job (billable seconds are per instance, as SageMaker's)."""
    axes: dict[str, Any] | None = None
    """The cell's setting of the spec's axes (None, and absent from the record, without axes)."""

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if out["axes"] is None:
            del out["axes"]
        return out


@dataclass(frozen=True)
class JobOutcome:
    """How the training task ended: ``ok`` or the error caught by the state machine."""

    ok: bool
    reason: str | None
    kind: Literal["ok", "oom", "timeout", "failed"]
    billable_s: float | None
    training_s: float | None = None


def is_out_of_memory(text: str | None) -> bool:
    return bool(text and _OOM.search(text))


def job_outcome(training: dict[str, Any] | None, error: dict[str, Any] | None) -> JobOutcome:
    """Classify the training task's result (the DescribeTrainingJob output, or ``{Error, Cause}``)."""
    if error is None:
        training = training or {}
        return JobOutcome(
            True,
            None,
            "ok",
            _float(training.get("BillableTimeInSeconds")),
            _float(training.get("TrainingTimeInSeconds")),
        )
    name = str(error.get("Error", "Error"))
    cause = error.get("Cause") or ""
    described: dict[str, Any] = {}
    if isinstance(cause, str) and cause.startswith("{"):
        try:
            loaded = json.loads(cause)
            described = loaded if isinstance(loaded, dict) else {}
        except ValueError:
            described = {}
    billable = _float(described.get("BillableTimeInSeconds"))
    trained = _float(described.get("TrainingTimeInSeconds"))
    failure = described.get("FailureReason")
    secondary = described.get("SecondaryStatus")
    status = described.get("TrainingJobStatus")
    if described:
        reason = failure or f"training job {status or 'ended'} ({secondary or 'no detail'})"
    else:
        reason = f"{name}: {cause}" if cause else name
    reason = reason[:REASON_MAX]
    if is_out_of_memory(failure) or (not described and is_out_of_memory(cause)):
        return JobOutcome(False, reason, "oom", billable, trained)
    if secondary in _TIMEOUT_SECONDARY or name == "States.Timeout":
        return JobOutcome(False, reason, "timeout", billable, trained)
    return JobOutcome(False, reason, "failed", billable, trained)


def cell_status(
    outcome: JobOutcome,
    run_status: str | None,
    run_failure: str | None,
    failure_kind: str | None = None,
) -> tuple[CellStatus, str | None]:
    """A cell's status from its job's outcome and its own log (None: no log was found).

    A packed job runs several batch sizes in turn: the cells it finished stay completed even when a
    later, larger batch size ran out of memory and failed the job. A cell the batch-size search did not
    run past a throughput plateau (its log's failure kind is :data:`SKIPPED_KIND`) is skipped, with the
    search's reason; one it did not run past an out-of-memory edge is infeasible.
    """
    if run_status == "complete":
        return "completed", None
    if failure_kind == SKIPPED_KIND:
        return "skipped", run_failure or "not run (batch-size search)"
    if failure_kind == INFEASIBLE_KIND:  # a batch size the script cannot use (smaller training set)
        return "infeasible", run_failure
    if is_out_of_memory(run_failure):
        return "infeasible", run_failure
    if not outcome.ok:
        if outcome.kind == "oom":
            return "infeasible", outcome.reason
        if outcome.kind == "timeout":
            return "timeout", outcome.reason
        return "failed", outcome.reason
    if run_status is None:
        return "failed", "the job completed but left no log"
    if run_status == "partial":
        return "partial", run_failure or "the log ends before the run does"
    if run_failure:
        return "failed", run_failure
    if run_status in ("unreadable", "empty"):
        # e.g. an own image whose log is in no format the parser knows
        return "failed", (
            f"the job completed but its log is {run_status}: no step timing trainsweep can read (known "
            "formats: cloud-ML, MO833, MLLOG); give the spec a workload.log_format for it, or time the "
            "training with trainsweep.instrument (docs/byo.md)"
        )
    return "failed", f"log status: {run_status}"


def _float(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def job_cells(job: PlannedJob) -> list[dict[str, Any]]:
    """The identity of each cell a planned job runs (run name, job, instance type, batch size, repetition).

    A packed job runs several batch sizes, one run name each.
    """
    cells: list[dict[str, Any]] = [
        {
            "run_name": run_name,
            "job_name": job.job_name,
            "instance_type": job.instance_type,
            "instance_count": job.instance_count,
            "batch_size": batch_size,
            "repetition": job.repetition,
        }
        for run_name, batch_size in job.cells
    ]
    if job.axes:  # a sweep with axes: each cell's setting
        for cell in cells:
            cell["axes"] = job.setting(cell["run_name"])
    return cells
