"""How an instrumented run ends: the exceptions that end a script from inside its hooks, the reasons a cell
fails with, and the cell status file's content (:func:`trainsweep.training.contract.cell_status_path`)."""

from __future__ import annotations

from typing import Any

NO_TRAINING = (
    "the script ran its model in training mode {where} with no backward pass and no optimizer.step(): "
    "nothing to time (a custom loop? mark steps with trainsweep.instrument; see docs/byo.md)"
)


class EarlyStop(BaseException):
    """Early stop has what it needs: ends the script from inside ``optimizer.step()``.

    A BaseException, so that a script's ``except Exception`` does not swallow it; the bootstrap catches it
    and ends the run with status ok. ``error`` is set instead of ``prediction`` when no prediction could
    be made.
    """

    def __init__(self, prediction: dict[str, Any] | None, error: str | None = None):
        super().__init__(error or "early stop: the step time is known")
        self.prediction = prediction
        self.error = error


class BeyondEdge(EarlyStop):
    """The batch size is one the script cannot use (its training set is smaller than one batch): the cell
    lies beyond the batch sizes this script can run, as a batch that does not fit in memory does."""

    def __init__(self, reason: str):
        super().__init__(None, reason)


def failure_reason(e: BaseException) -> str:
    """``Type: first line of the message``, as a sweep table shows a failed cell."""
    text = str(e)
    return f"{type(e).__name__}: {text.splitlines()[0][:500] if text else ''}"


def cell_status(
    run_name: str,
    batch_size: int | None,
    status: str,
    reason: str | None,
    *,
    prediction: dict[str, Any] | None = None,
    steps: int = 0,
    loader_batch_size: int | None = None,
    flags: list[str] | None = None,
    step_marker: str | None = None,
    train_samples: int | None = None,
) -> dict[str, Any]:
    """A cell's outcome as its status file holds it: the built-in worker's keys and a script's extras."""
    return {
        "run_name": run_name,
        "batch_size": batch_size,
        "status": status,
        "reason": reason,
        "prediction": prediction,
        "steps": steps,
        "loader_batch_size": loader_batch_size,
        "flags": list(flags or []),
        "step_marker": step_marker,
        "train_samples": train_samples,
    }
