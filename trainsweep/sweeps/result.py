"""What a sweep driver returns: :class:`SweepRun`, the one result of a local, cloud or two-phase run.

Also :class:`SweepEvents`, what a driver tells whoever watches it (the CLI's live table, a notebook's
lines), and :class:`SweepInterrupted`, the Ctrl-C that carries what had run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainsweep import layout

if TYPE_CHECKING:
    from trainsweep.sweeps.results import SweepResults

DEFAULT_RESULTS_DIR = Path("trainsweep-results")
"""Where sweeps are downloaded unless told otherwise: ``<this>/<sweep-id>/`` holds the sweep's S3 prefix."""


@dataclass
class SweepRun:
    """One sweep as a driver ran it: where its results are, how its execution ended, its cells.

    ``view`` is a :class:`trainsweep.aws.sweeps.SweepView` (every cell's final status, time and cost).
    """

    sweep_id: str
    dest: Path
    execution_status: str | None
    view: Any
    interrupted: bool = False
    error: str | None = None
    error_detail: str | None = None  # everything the failed execution said (for a log file)
    timings: dict[str, float] = field(default_factory=dict)
    training_seconds: float = 0.0  # wall time while at least one training process ran (union of lifetimes)
    resumed_runs: list[str] = field(default_factory=list)
    downloaded: bool = False  # sweeps/<id>/ was copied to ``dest``
    log_path: Path | None = None  # what the embedded AWS logged (exists only when it logged something)
    parse_failures: Any = None  # trainsweep.aws.failures.QueuedFailures: ParseRun's on-failure queue
    local: bool = True  # ran on this machine (the embedded AWS), else in the deployed stack
    watched: bool = True  # the driver waited for the end (a cloud run without watching only starts it)
    execution_arn: str | None = None
    detail_log: Path | None = None  # where ``error_detail`` was written, when the execution failed
    scan: SweepRun | None = None  # a two-phase sweep's scan, on the confirm sweep's run
    tracked: Any = None  # trainsweep.mlflow_export.ExportResult: where the spec's tracking got the sweep
    tracking_error: str | None = None  # why the export to the spec's tracking failed (results are kept)

    @property
    def succeeded(self) -> bool:
        """The execution succeeded and at least one cell trained (a sweep where every cell failed, or was
        infeasible, answers nothing)."""
        return (
            self.execution_status == "SUCCEEDED"
            and self.view is not None
            and any(c.status == "done" for c in self.view.cells)
        )

    @property
    def report(self) -> Path | None:
        """``results/report.html`` of the downloaded sweep (None when there is none)."""
        path = self.dest / layout.RESULTS_DIR / layout.REPORT_HTML
        return path if path.is_file() else None

    def load(self) -> SweepResults:
        """The downloaded sweep's results (:func:`trainsweep.load`)."""
        from trainsweep.sweeps.results import load

        return load(self.dest)

    def _repr_html_(self) -> str:
        from trainsweep.sweeps.results import run_html

        return run_html(self)


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a sweep (or the watching of a cloud sweep); ``result`` says what had run and whether
    anything was downloaded."""

    def __init__(self, result: SweepRun) -> None:
        super().__init__()
        self.result = result


class SweepEvents:
    """What a driver tells whoever watches it; each method does nothing here.

    Subclass it to show progress: the CLI draws a live table, :class:`PrintedEvents` prints lines.
    """

    def say(self, text: str) -> None:
        """A line for people (what starts, what was packed, what was resumed)."""

    def note(self, text: str) -> None:
        """Something to heed that does not stop the sweep (the spec given to a resume differs)."""

    def warn(self, text: str) -> None:
        """Something wrong beside the sweep's own outcome (ParseRun failed on log events)."""

    def update(self, view: Any) -> None:
        """The sweep's live status (a :class:`trainsweep.aws.sweeps.SweepView`), on each poll."""

    def finished(self, run: SweepRun) -> None:
        """A sweep (or one phase of it) ended and its results are downloaded."""


class PrintedEvents(SweepEvents):
    """Lines on standard output: each message, and the cells' counts whenever they change."""

    def __init__(self) -> None:
        self._last = ""

    def say(self, text: str) -> None:
        print(text, flush=True)

    def note(self, text: str) -> None:
        print(text, flush=True)

    def warn(self, text: str) -> None:
        print(f"warning: {text}", flush=True)

    def update(self, view: Any) -> None:
        line = f"{view.execution_status or 'starting'}: {counts_text(view)}"
        if line != self._last:
            self._last = line
            print(line, flush=True)

    def finished(self, run: SweepRun) -> None:
        self._last = ""
        state = "succeeded" if run.succeeded else f"ended {run.execution_status}"
        print(f"sweep {run.sweep_id} {state}; results in {run.dest}/", flush=True)


def counts_text(view: Any) -> str:
    """``3 done, 1 failed``: the cells per status (``planning`` before there are any)."""
    return ", ".join(f"{n} {s}" for s, n in view.counts.items() if n) or "planning"
