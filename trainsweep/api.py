"""The Python API: ``from trainsweep import plan, run, status, watch, download, load``.

Each function is what a CLI command does (``trainsweep plan``, ``run``, ``status``, ``download``), without
the terminal: it returns data and raises :class:`trainsweep.errors.TrainsweepError` (a
:class:`~trainsweep.errors.SpecError` for a bad spec) where the command prints an error. Reference:
``docs/python-api.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainsweep.aws.outputs import STACK_NAME
from trainsweep.sweeps.result import DEFAULT_RESULTS_DIR, PrintedEvents, SweepEvents, SweepRun

if TYPE_CHECKING:
    from trainsweep.spec import SweepPlan
    from trainsweep.sweeps.results import SweepResults
    from trainsweep.sweeps.status import SweepStatus

STACK = STACK_NAME
"""The stack the CDK app deploys: the default of every function that asks AWS."""

SpecSource = Any
"""A spec: a YAML or JSON file's path, a mapping, YAML/JSON text, or a :class:`trainsweep.spec.SweepSpec`."""


def plan(spec: SpecSource, *, region: str | None = None, bucket: str | None = None) -> SweepPlan:
    """Validate a spec and expand it into jobs with its worst-case cost and time (``trainsweep plan``).

    No AWS call. A two-phase spec's plan is its scan's (the confirm sweep is chosen by the scan). An
    over-budget plan is returned (``worst_case_cost_usd`` above ``spec.budget_usd``): :func:`run` refuses it.

    Raises:
        SpecError: the spec is invalid, or has ``tracking`` without the MLflow client installed.
    """
    from trainsweep import phases
    from trainsweep.spec import load_spec, plan_sweep
    from trainsweep.tracking import check_client

    loaded = load_spec(spec)
    check_client(loaded.tracking)
    planned = phases.scan_spec(loaded) if loaded.phases else loaded
    return plan_sweep(planned, region=region, bucket=bucket, enforce_budget=False)


def run(
    spec: SpecSource,
    *,
    local: bool = False,
    out: str | Path = DEFAULT_RESULTS_DIR,
    resume: str | None = None,
    watch: bool = True,
    models: bool = False,
    stack: str = STACK,
    profile: str | None = None,
    region: str | None = None,
    session: Any = None,
    events: SweepEvents | None = None,
) -> SweepRun:
    """Run a sweep and download its results and logs to ``out/<sweep-id>/`` (``trainsweep run``).

    Args:
        spec: the sweep spec (a file's path, a mapping, YAML text or a ``SweepSpec``).
        local: run on this machine against the embedded AWS (instance types ``local``/``local_gpu``);
            else in the deployed stack ``stack`` with ``session`` (or one for ``profile`` and ``region``).
        out: the folder sweeps are downloaded to.
        resume: a sweep id: re-run only its cells without results (locally: a sweep under ``out``).
        watch: wait for the end (a cloud sweep; without it the sweep is only started, and the result's
            ``watched`` is False). A local run always waits.
        models: also download the jobs' models, outputs and checkpoints (can be gigabytes).
        events: told what happens (:class:`~trainsweep.sweeps.result.SweepEvents`); default: lines on
            standard output (:class:`~trainsweep.sweeps.result.PrintedEvents`). ``SweepEvents()`` is quiet.

    Returns:
        The run: ``sweep_id``, ``dest`` (its folder), ``execution_status``, ``succeeded``, ``view``
        (every cell), ``report``; ``load()`` reads its results.

    Raises:
        SpecError: the spec or the sweep id is invalid.
        TrainsweepError: the sweep cannot start (over budget, no stack, a script that is not there...).
        SweepInterrupted: Ctrl-C; ``result`` says what ran (a cloud sweep goes on in AWS).
    """
    from trainsweep.spec import check_sweep_id, load_spec

    events = PrintedEvents() if events is None else events
    out = Path(out)
    if resume is not None:
        check_sweep_id(resume)  # it names a folder and an S3 prefix
    cloud = {"stack": stack, "session": session, "profile": profile, "region": region}
    if load_spec(spec).phases:
        from trainsweep.sweeps.phases import run_phases

        return run_phases(
            spec, local=local, out=out, resume=resume, watch=watch, events=events, models=models, **cloud
        )
    if local:
        from trainsweep.sweeps.local import run_local

        return run_local(spec, out=out, resume=resume, events=events, models=models)
    from trainsweep.sweeps.cloud import run_cloud

    return run_cloud(spec, out=out, resume=resume, watch=watch, events=events, models=models, **cloud)


def status(
    sweep_id: str | None = None,
    *,
    results: str | Path = DEFAULT_RESULTS_DIR,
    stack: str = STACK,
    profile: str | None = None,
    region: str | None = None,
    session: Any = None,
) -> SweepStatus:
    """Every cell of a sweep (default: the latest) now (``trainsweep status``): from its folder under
    ``results`` when it is downloaded (every local sweep), else from the deployed stack.

    Returns:
        ``view`` (a ``SweepView``: ``cells``, ``counts``, ``spend_usd``, ``to_dict()``) and, from the
        stack, ``parse_failures``.
    """
    from trainsweep.sweeps.status import status as sweep_status

    return sweep_status(
        sweep_id, results=Path(results), stack=stack, session=session, profile=profile, region=region
    )


def watch(
    sweep_id: str | None = None,
    *,
    stack: str = STACK,
    profile: str | None = None,
    region: str | None = None,
    session: Any = None,
    events: SweepEvents | None = None,
    poll_s: float = 5.0,
) -> Any:
    """Follow a sweep running in the deployed stack (default: the latest) until its execution ends, telling
    ``events`` each look (default: a line whenever the counts change). Returns the last ``SweepView``."""
    from trainsweep.sweeps.status import watch as watch_sweep

    return watch_sweep(
        sweep_id, stack=stack, session=session, profile=profile, region=region,
        events=PrintedEvents() if events is None else events, poll_s=poll_s,
    )  # fmt: skip


def download(
    sweep_id: str,
    *,
    to: str | Path | None = None,
    models: bool = False,
    stack: str = STACK,
    profile: str | None = None,
    region: str | None = None,
    session: Any = None,
    events: SweepEvents | None = None,
) -> list[Path]:
    """Download a sweep of the deployed stack (``trainsweep download``): its spec, jobs, logs and results to
    ``to`` (default ``trainsweep-results/<sweep-id>/``); its jobs' models and checkpoints with ``models``.
    The size is said (``events.say``) before the transfer. Returns the files written."""
    from trainsweep.sweeps.download import download as download_sweep

    return download_sweep(
        sweep_id, stack=stack, session=session, profile=profile, region=region,
        to=None if to is None else Path(to), models=models,
        events=PrintedEvents() if events is None else events,
    )  # fmt: skip


def load(sweep: str | Path | SweepRun, *, results: str | Path = DEFAULT_RESULTS_DIR) -> SweepResults:
    """A downloaded sweep's results: ``table`` (``sweep.csv`` as a typed pandas DataFrame),
    ``recommendation``, ``runs``; shown as HTML in Jupyter.

    Args:
        sweep: a sweep's folder (or its ``results/`` folder, or an import's ``--out``), a
            :class:`SweepRun`, or a sweep id under ``results``.

    Raises:
        TrainsweepError: no ``sweep.csv`` there (the sweep has not been aggregated, or not downloaded).
    """
    from trainsweep.sweeps.results import load as load_results

    if isinstance(sweep, SweepRun):
        return load_results(sweep.dest)
    path = Path(sweep)
    if not path.exists() and len(path.parts) == 1:
        path = Path(results) / path
    return load_results(path)
