"""``trainsweep run``, ``status``, ``download`` and ``doctor``: the commands users live in.

``run SPEC --local`` runs the whole pipeline on this machine (:mod:`trainsweep.local.sweep`); without
``--local`` it starts the deployed stack's state machine (ARN and bucket from the stack outputs) with
the user's AWS profile and region, like the AWS CLI. Both show a live table of cells and download the
results to ``./trainsweep-results/<sweep-id>/`` with the S3 layout below it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from trainsweep.cli.common import ProfileOpt, RegionOpt, aws_session, error_line, make_console, styled

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

DEFAULT_STACK = "Trainsweep"  # == trainsweep.aws.outputs.STACK_NAME (CLI modules import only typer/rich)
DEFAULT_RESULTS = Path("trainsweep-results")
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

_STATUS_STYLE = {
    "pending": "dim",
    "running": "cyan",
    "done": "green",
    "failed": "red",
    "infeasible": "yellow",
    "skipped": "dim",
}

StackOpt = Annotated[str, typer.Option("--stack", help="Name of the deployed trainsweep stack.")]


def register(app: typer.Typer) -> None:
    """Add run, status, download and doctor to the app."""
    app.command("run")(run)
    app.command("status")(status)
    app.command("download")(download)
    app.command("doctor")(doctor)


# ---- rendering --------------------------------------------------------------------------------------


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = round(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


def render_view(view: Any) -> Table:
    """The live table: one row per cell, then counts, elapsed time and spend so far."""
    from rich.table import Table

    counts = view.counts
    title = f"sweep {view.sweep_id}"
    if (
        view.execution_status == "SUCCEEDED"
        and view.cells
        and not any(c.status == "done" for c in view.cells)
    ):
        title += " — finished, no cell succeeded"  # the execution ran to its end; the sweep answered nothing
    elif view.execution_status:
        title += f" — {view.execution_status.lower()}"
    table = Table(title=title, expand=False, show_lines=False)
    for col, kw in (
        ("instance", {}),
        ("batch", {"justify": "right"}),
        ("rep", {"justify": "right"}),
        ("status", {}),
        ("elapsed", {"justify": "right"}),
        ("billable", {"justify": "right"}),
        ("cost USD", {"justify": "right"}),
        ("detail", {"overflow": "fold", "max_width": 60}),
    ):
        table.add_column(col, **kw)
    for c in view.cells:
        style = _STATUS_STYLE.get(c.status, "")
        table.add_row(
            c.instance_type if c.instance_count == 1 else f"{c.instance_type} x{c.instance_count}",
            "-" if c.batch_size is None else str(c.batch_size),
            "-" if c.repetition is None else str(c.repetition),
            Text(c.status, style=style),
            _duration(c.elapsed_s),
            _duration(c.billable_s),
            "-" if c.cost_usd is None else f"{c.cost_usd:.4f}",
            (c.detail or "")[:300],
        )
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "planning"
    table.caption = f"{summary} · elapsed {_duration(view.elapsed_s)} · spend so far {view.spend_usd:.4f} USD"
    return table


def _watch_factory(console: Console, enabled: bool) -> tuple[Any, Any]:
    """(callback for each view, closer): a live table on a terminal, a line per change otherwise.

    The live table is transient: the final table, with the cells' final statuses, is printed once the
    results are downloaded.
    """
    if not enabled:
        return (lambda view: None), (lambda: None)
    if not console.is_terminal:
        last = [""]  # the line printed last: only a change prints

        def log_line(view: Any) -> None:
            counts = ", ".join(f"{n} {s}" for s, n in view.counts.items() if n) or "planning"
            line = f"{view.execution_status or 'starting'}: {counts}"
            if line != last[0]:
                last[0] = line
                console.print(f"[{time.strftime('%H:%M:%S')}] {line}", highlight=False)

        return log_line, (lambda: None)
    from rich.live import Live

    live = Live(console=console, refresh_per_second=2, transient=True)
    started = False

    def update(view: Any) -> None:
        nonlocal started
        if not started:
            live.start()
            started = True
        live.update(render_view(view))

    def close() -> None:
        if started:
            live.stop()

    return update, close


def _error(console: Console, message: str) -> None:
    console.print(error_line(message))


# ---- AWS session ------------------------------------------------------------------------------------


def _stack(session: Any, stack: str) -> tuple[str, str]:
    from trainsweep.aws import sweeps

    source = getattr(session, "region_source", None)
    outputs = sweeps.stack_outputs(session.client("cloudformation"), stack, region_source=source)
    from trainsweep.aws import outputs as names

    return (
        sweeps.pick_output(outputs, names.BUCKET_NAME),
        sweeps.pick_output(outputs, names.STATE_MACHINE_ARN),
    )


# ---- run --------------------------------------------------------------------------------------------


def run(
    spec_path: Annotated[Path, typer.Argument(metavar="SPEC", help="Sweep spec, YAML or JSON.")],
    local: Annotated[
        bool, typer.Option("--local", help="Run on this machine against an embedded AWS (no account).")
    ] = False,
    stack: StackOpt = DEFAULT_STACK,
    resume: Annotated[
        str | None,
        typer.Option("--resume", metavar="SWEEP_ID", help="Re-run only the cells without results."),
    ] = None,
    no_watch: Annotated[bool, typer.Option("--no-watch", help="Do not show the live table.")] = False,
    out: Annotated[Path, typer.Option("--out", help="Where results are downloaded.")] = DEFAULT_RESULTS,
    profile: ProfileOpt = None,
    region: RegionOpt = None,
) -> None:
    """Start a sweep, watch its cells, then download the results to OUT/<sweep-id>/."""
    from trainsweep.errors import SpecError, TrainsweepError

    console = make_console(stderr=True)
    try:
        if resume is not None:
            from trainsweep.spec import check_sweep_id

            check_sweep_id(resume)  # it names a folder and an S3 prefix
        from trainsweep.spec import load_spec

        if load_spec(spec_path).phases:
            _run_phases(console, spec_path, out, resume, local, stack, profile, region, watch=not no_watch)
        elif local:
            _run_local(console, spec_path, out, resume, watch=not no_watch)
        else:
            _run_cloud(console, spec_path, out, resume, stack, profile, region, watch=not no_watch)
    except SpecError as e:
        _error(console, str(e))  # the message lists every (field, problem)
        raise typer.Exit(EXIT_USAGE) from None
    except TrainsweepError as e:
        _error(console, str(e))
        raise typer.Exit(EXIT_FAILED) from None


def _run_phases(
    console: Console,
    spec_path: Path,
    out: Path,
    resume: str | None,
    local: bool,
    stack: str,
    profile: str | None,
    region: str | None,
    *,
    watch: bool,
) -> None:
    """``phases: [scan, confirm]``: the scan sweep, then a confirm sweep of its best configurations to the
    target (:mod:`trainsweep.phases`); the recommendation is the confirm sweep's."""
    from datetime import UTC, datetime

    from trainsweep import layout, phases
    from trainsweep.errors import TrainsweepError
    from trainsweep.sourcedir import spec_dir
    from trainsweep.spec import load_spec, make_sweep_id

    if resume is not None:
        raise TrainsweepError(
            "--resume re-runs the cells of one sweep: resume the scan or the confirm sweep with a spec "
            "without phases (its own spec.json is in its results folder)"
        )
    if not watch and not local:
        raise TrainsweepError(
            "phases: [scan, confirm] waits for the scan to choose what to confirm: drop --no-watch"
        )
    spec = load_spec(spec_path)
    assert spec.target is not None  # the spec requires one with phases
    folder = spec_dir(spec_path)

    def run_one(spec_dict: dict[str, Any], sweep_id: str, record: dict[str, Any] | None = None) -> Path:
        if local:
            return _run_local(
                console,
                spec_dict,
                out,
                None,
                watch=watch,
                sweep_id=sweep_id,
                spec_folder=folder,
                record=record,
            )
        return _run_cloud(
            console, spec_dict, out, None, stack, profile, region, watch=watch, sweep_id=sweep_id,
            spec_folder=folder, record=record,
        )  # fmt: skip

    scan_id = make_sweep_id(spec.name, datetime.now(UTC))
    confirm_id = phases.confirm_sweep_id(scan_id)
    console.print(
        f"Phase 1 of 2, scan: every configuration early-stopped, packed, once (sweep {scan_id})",
        highlight=False,
    )
    scan_dest = run_one(phases.scan_spec(spec), scan_id)
    sweep_json = scan_dest / layout.RESULTS_DIR / layout.SWEEP_JSON
    try:
        doc = json.loads(sweep_json.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise TrainsweepError(f"cannot read the scan's {sweep_json}: {e}; nothing was confirmed") from None
    if not isinstance(doc, dict):
        raise TrainsweepError(f"the scan's {sweep_json} is not a sweep summary; nothing was confirmed")
    ranked = phases.rank_scan(doc)
    k = spec.confirm_top_k
    cells = phases.confirm_cells(ranked, k)
    named = ", ".join(f"{t} x {b}" for t, b in cells)
    console.print(
        f"Phase 2 of 2, confirm: the scan's best {len(cells)} of {len(ranked)} configurations ({named}) "
        f"trained to {spec.target.metric} {spec.target.value:g} (sweep {confirm_id})",
        highlight=False,
    )
    dest = run_one(phases.confirm_spec(spec, cells), confirm_id, phases.phases_record(scan_id, ranked, k))
    try:
        summary = json.loads((dest / layout.RESULTS_DIR / layout.SWEEP_JSON).read_text(encoding="utf-8"))
        lines = summary["recommendation"]["text"]
    except (OSError, ValueError, KeyError, TypeError):
        lines = []
    if lines:
        console.print("Recommendation (from the confirmed runs):", highlight=False)
        for line in lines:
            console.print(f"  {line}", highlight=False)


def _write_record(dest: Path, record: dict[str, Any] | None) -> None:
    """A phase's :data:`trainsweep.phases.PHASES_FILE` in its downloaded folder."""
    from trainsweep.phases import PHASES_FILE

    if record is not None and dest.is_dir():
        (dest / PHASES_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


def _run_local(
    console: Console,
    spec_path: Path | dict[str, Any],
    out: Path,
    resume: str | None,
    *,
    watch: bool,
    sweep_id: str | None = None,
    spec_folder: Path | None = None,
    record: dict[str, Any] | None = None,
) -> Path:
    from trainsweep import layout
    from trainsweep.local.sweep import SweepInterrupted, run_local_sweep

    staged = None
    if resume:
        saved = out / resume / layout.SPEC_JSON
        if saved.is_file():
            from trainsweep.sourcedir import spec_dir, stage
            from trainsweep.spec import load_spec

            # packed once: the digest says whether the files changed, the run uploads the same archive
            folder = spec_folder or spec_dir(spec_path)
            staged = stage(load_spec(spec_path).workload, folder, check_requirements=True)
            digest = staged.packed.digest if staged is not None else None
            _say_spec_changes(console, json.loads(saved.read_text()), spec_path, resume, digest)
    console.print("Starting the embedded AWS and deploying the stack (local mode)…", highlight=False)
    update, close = _watch_factory(console, watch)
    try:
        result = run_local_sweep(
            spec_path,
            out_root=out,
            resume=resume,
            on_update=update,
            sweep_id=sweep_id,
            spec_folder=spec_folder,
            staged=staged,
        )
    except SweepInterrupted as stop:
        close()
        got = stop.result
        if got.log_path is not None and got.log_path.is_file():
            console.print(f"The embedded AWS's log: {got.log_path}")
        if got.downloaded:
            console.print(
                Text.assemble(
                    ("Interrupted:", "yellow"),
                    f" training processes stopped, partial results downloaded to {got.dest}/ "
                    f"(resume with --resume {got.sweep_id}).",
                )
            )
        else:
            console.print(
                Text.assemble(
                    ("Interrupted:", "yellow"),
                    " stopped before the sweep had any results; nothing was downloaded.",
                )
            )
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except KeyboardInterrupt:
        close()
        console.print(Text.assemble(("Interrupted:", "yellow"), " nothing was started or downloaded."))
        raise typer.Exit(EXIT_INTERRUPTED) from None
    close()
    if resume:
        console.print(
            f"Resumed {len(result.resumed_runs)} run(s): {', '.join(result.resumed_runs) or 'none'}"
        )
    if result.parse_failures is not None and result.parse_failures.alarming:
        # The queue goes with the embedded AWS: say it here, `status` reads the downloaded sweep.
        console.print(styled(("warning:", "bold yellow"), " ", result.parse_failures.local_line()))
    _write_record(result.dest, record)
    _finish(console, result.view, result.dest, result.execution_status, result.error, result.error_detail)
    return result.dest


def _say_spec_changes(
    console: Console,
    saved: Any,
    spec_source: Path | dict[str, Any],
    sweep_id: str,
    code_digest: str | None = None,
) -> None:
    """Tell the user when the spec given to ``--resume`` is not the sweep's own (it is the one that runs);
    ``code_digest``: the digest of the script's folder as the resume packed it (another archive than the
    sweep's means other code for the re-run cells)."""
    from trainsweep.aws import sweeps
    from trainsweep.spec import load_spec

    if not isinstance(saved, dict):
        return
    changed = sweeps.spec_differences(saved, load_spec(spec_source).to_dict(), sweep_id, code_digest)
    if changed:
        console.print(
            Text(
                f"note: {spec_source} differs from sweep {sweep_id}'s spec in {', '.join(changed)}; "
                "the re-run cells use the spec given here"
                + (" and the script's files as they are now" if sweeps.CODE_CHANGED in changed else "")
                + ".",
                style="yellow",
            )
        )


def _finish(
    console: Console,
    view: Any,
    dest: Path,
    status: str | None,
    error: str | None,
    detail: str | None = None,
) -> None:
    from trainsweep import layout

    if view is not None:
        console.print(render_view(view))
    # A sweep answers its question only if some cell trained: none done is a failure even when the
    # execution itself succeeded (every cell failed, or was infeasible).
    succeeded = view is not None and any(c.status == "done" for c in view.cells)
    if status != "SUCCEEDED":
        where = ""
        if detail:  # e.g. a refusing Lambda's JSON error with its stack trace: for the log, not the terminal
            from trainsweep.local.sweep import log_path_for

            log = log_path_for(dest)
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("a", encoding="utf-8") as f:
                f.write(detail)
            where = f" (details: {log})"
        _error(console, f"the sweep's execution ended {status}: {error or 'no detail'}{where}")
    elif not succeeded:
        counts = ", ".join(f"{n} {s}" for s, n in view.counts.items() if n) if view is not None else ""
        _error(
            console,
            f"no cell of the sweep succeeded ({counts or 'no cells'}): nothing to recommend; "
            "each cell's reason is in the table above and in the report",
        )
    report = dest / layout.RESULTS_DIR / layout.REPORT_HTML
    console.print(f"Results: {dest}/")
    if report.is_file():
        console.print(f"Report:  {report}")
    if status != "SUCCEEDED" or not succeeded:
        raise typer.Exit(EXIT_FAILED)


def _run_cloud(
    console: Console,
    spec_path: Path | dict[str, Any],
    out: Path,
    resume: str | None,
    stack: str,
    profile: str | None,
    region: str | None,
    *,
    watch: bool,
    sweep_id: str | None = None,
    spec_folder: Path | None = None,
    record: dict[str, Any] | None = None,
) -> Path:
    from datetime import UTC, datetime

    from trainsweep.aws import sweeps
    from trainsweep.aws.code import upload_source
    from trainsweep.aws.pricing import pricing_client, stack_price_fn
    from trainsweep.aws.workflow import check_plan_fits
    from trainsweep.errors import TrainsweepError
    from trainsweep.sourcedir import spec_dir, stage
    from trainsweep.spec import load_spec, make_sweep_id, plan_sweep

    spec = load_spec(spec_path)
    session = aws_session(profile, region, spec.region)
    if spec.data and spec.data.startswith("file://"):
        raise TrainsweepError("a file:// data URI works only with --local: upload the data and use s3://")
    s3, sfn, sm = session.client("s3"), session.client("stepfunctions"), session.client("sagemaker")
    try:
        found: tuple[str, str] | None = _stack(session, stack)
    except TrainsweepError:
        found = None  # a bad spec is said first; the missing stack right after
    # priced as PlanSweep prices it (the stack's cache, the Pricing API, the shipped catalogue); refuses
    # an over-budget sweep, local instance types, and one too large for the workflow, before anything starts
    price = stack_price_fn(
        s3, found[0] if found else None, pricing_client(session), session.region_name, spec.instance_types
    )
    check_plan_fits(plan_sweep(spec, region=session.region_name, cloud=True, price=price))
    staged = stage(
        spec.workload, spec_folder or spec_dir(spec_path), check_requirements=False
    )  # the job installs them
    bucket, machine = found or _stack(session, stack)
    sweep_id = resume or sweep_id or make_sweep_id(spec.name, datetime.now(UTC))
    spec_dict = spec.to_dict()
    if staged is not None:
        spec_dict = upload_source(s3, bucket, sweep_id, spec_dict, staged)
        console.print(
            f"Packed {staged.local.root} ({staged.packed.files} files, "
            f"{len(staged.packed.data) / 1024:.0f} KiB) for every job of the sweep",
            highlight=False,
        )
    update, close = _watch_factory(console, watch)

    seen: dict[str, Any] = {}  # ended jobs' descriptions: not asked for again

    def wait(arn: str) -> str:
        while True:
            view = sweeps.sweep_view(
                s3=s3, bucket=bucket, sweep_id=sweep_id, sagemaker=sm, sfn=sfn, execution_arn=arn,
                region=session.region_name, jobs_seen=seen,
            )  # fmt: skip
            update(view)
            if view.finished:
                return str(view.execution_status)
            time.sleep(5)

    if resume:
        if not watch:
            raise TrainsweepError("--resume waits for the re-run cells to re-aggregate: drop --no-watch")
        from trainsweep import layout
        from trainsweep.aws import s3 as s3io

        saved_spec = s3io.get_json(s3, bucket, layout.spec_key(sweep_id))
        _say_spec_changes(
            console, saved_spec, spec_path, sweep_id, staged.packed.digest if staged is not None else None
        )
        outcome = sweeps.resume_sweep(
            s3=s3, sfn=sfn, cfn=session.client("cloudformation"), lam=sweeps.aggregate_client(session),
            stack_name=stack, bucket=bucket, state_machine_arn=machine, sweep_id=sweep_id,
            spec=spec_dict, watch=wait,
        )  # fmt: skip
        status, error, detail = outcome.status, outcome.error, outcome.detail
        console.print(f"Resumed {len(outcome.rerun)} run(s): {', '.join(outcome.rerun) or 'none'}")
    else:
        arn = sweeps.start_sweep(sfn, machine, spec_dict, sweep_id)
        console.print(f"Started sweep {sweep_id} ({arn})", highlight=False)
        if not watch:
            console.print(
                f"Watch it with `trainsweep status {sweep_id}`; "
                f"download with `trainsweep download {sweep_id}`."
            )
            return out / sweep_id
        try:
            status = wait(arn)
        except KeyboardInterrupt:
            close()
            console.print(
                f"Stopped watching; the sweep goes on in AWS. `trainsweep status {sweep_id}` shows it.",
                highlight=False,
            )
            raise typer.Exit(EXIT_INTERRUPTED) from None
        error, detail = sweeps.execution_error(sfn, arn), sweeps.execution_error_detail(sfn, arn)
    close()
    dest = out / sweep_id
    sweeps.download_sweep(s3, bucket, sweep_id, dest)
    view = sweeps.sweep_view(
        s3=s3, bucket=bucket, sweep_id=sweep_id, sagemaker=sm, region=session.region_name
    )
    _write_record(dest, record)
    _finish(console, view, dest, status, error, detail)
    return dest


# ---- status / download ------------------------------------------------------------------------------


def status(
    sweep_id: Annotated[str | None, typer.Argument(help="Sweep id (default: the latest).")] = None,
    stack: StackOpt = DEFAULT_STACK,
    results: Annotated[
        Path, typer.Option("--results", help="Folder of downloaded sweeps (local sweeps are read here).")
    ] = DEFAULT_RESULTS,
    as_json: Annotated[bool, typer.Option("--json", help="Print the status as JSON.")] = False,
    profile: ProfileOpt = None,
    region: RegionOpt = None,
) -> None:
    """Show every cell of a sweep: pending, running, done, failed, infeasible or skipped (batch-size
    search), with time and spend.

    A sweep downloaded under --results (every local sweep) is read from disk; otherwise the deployed
    stack is asked, and also says how many raw-log events ParseRun failed on for good (its queue).
    """
    from trainsweep.errors import SpecError, TrainsweepError

    console = make_console()
    err = make_console(stderr=True)
    failures: Any = None
    try:
        if sweep_id is not None:
            _check_folder_id(sweep_id)  # it names a folder under --results
        view = _local_view(results, sweep_id)
        if view is None or not view.finished:  # a copy downloaded mid-run is stale: ask the cloud first
            try:
                cloud = _cloud_view(stack, view.sweep_id if view else sweep_id, profile, region)
                view, failures = cloud, _parse_failures(stack, profile, region)
            except TrainsweepError:
                if view is None:
                    raise
    except SpecError as e:
        _error(err, str(e))
        raise typer.Exit(EXIT_USAGE) from None
    except TrainsweepError as e:
        where = f"sweep {sweep_id!r}" if sweep_id else "a sweep"
        _error(err, f"{e}\n(no downloaded {where} under {results}/ either)")
        raise typer.Exit(EXIT_FAILED) from None
    if as_json:
        doc = view.to_dict()
        if failures is not None:
            doc["parse_failures"] = failures.to_dict()
        typer.echo(json.dumps(doc, indent=2, default=str))
    else:
        console.print(render_view(view))
        if failures is not None:
            line = failures.line()
            console.print(styled(("warning:", "bold yellow"), " ", line) if failures.alarming else line)


def _parse_failures(stack: str, profile: str | None, region: str | None) -> Any:
    """The count of the stack's ParseRun failure queue (``QueuedFailures``); None for a stack deployed
    before it had the queue."""
    from trainsweep.aws import outputs as names
    from trainsweep.aws import sweeps
    from trainsweep.aws.failures import queued_failures
    from trainsweep.errors import TrainsweepError

    session = aws_session(profile, region)
    try:
        url = sweeps.pick_output(
            sweeps.stack_outputs(session.client("cloudformation"), stack), names.PARSE_FAILURE_QUEUE_URL
        )
    except TrainsweepError:
        return None
    return queued_failures(session.client("sqs"), url)


def _check_folder_id(sweep_id: str) -> None:
    """Refuse an id that would name a folder outside the results (``..``, ``a/b``). Looser than a sweep
    id (:func:`trainsweep.spec.check_sweep_id`): imported logs are the sweep ``import-<S3 folder>``."""
    from trainsweep.errors import SpecError

    if sweep_id in ("", ".", "..") or any(c in sweep_id for c in "/\\") or not sweep_id.isprintable():
        raise SpecError(
            f"invalid sweep id {sweep_id!r}: a sweep id names one folder (no '/', '\\' or '..')",
            [("sweep_id", "one folder name")],
        )


def _local_view(results: Path, sweep_id: str | None) -> Any:
    """The status of a downloaded sweep (None when it is not on disk)."""
    from trainsweep import layout
    from trainsweep.aws import sweeps

    if sweep_id is None:
        candidates = sorted(results.glob(f"*/{layout.JOBS_JSON}"), key=lambda p: p.stat().st_mtime)
        if not candidates:
            return None
        folder = candidates[-1].parent
    else:
        folder = results / sweep_id
    jobs_file = folder / layout.JOBS_JSON
    if not jobs_file.is_file():
        return None
    doc = json.loads(jobs_file.read_text())
    runs = folder / layout.RESULTS_DIR / layout.RUNS_DIR
    records = sorted(runs.glob("*.json")) if runs.is_dir() else []
    have = {p.stem for p in records}
    aggregated = {c.get("run_name") for c in doc.get("cells") or []}
    unfinished = {}
    for p in records:
        if p.stem in aggregated:
            continue  # its final record says more
        try:
            record = json.loads(p.read_text())
        except (OSError, ValueError):
            record = None
        done, reason = sweeps.record_outcome(record)
        if not done:
            unfinished[p.stem] = reason
    return sweeps.view_from_documents(folder.name, doc, have, unfinished)


def _cloud_view(stack: str, sweep_id: str | None, profile: str | None, region: str | None) -> Any:
    from trainsweep.aws import sweeps
    from trainsweep.errors import TrainsweepError

    session = aws_session(profile, region)
    bucket, machine = _stack(session, stack)
    s3, sfn = session.client("s3"), session.client("stepfunctions")
    sweep_id = sweep_id or sweeps.latest_sweep_id(s3, bucket)
    if sweep_id is None:
        raise TrainsweepError(f"no sweep in bucket {bucket} yet; start one with `trainsweep run SPEC`")
    arn = sweeps.latest_execution_arn(sfn, machine, sweep_id)
    return sweeps.sweep_view(
        s3=s3, bucket=bucket, sweep_id=sweep_id, sagemaker=session.client("sagemaker"), sfn=sfn,
        execution_arn=arn, region=session.region_name,
    )  # fmt: skip


def download(
    sweep_id: Annotated[str, typer.Argument(help="Sweep id.")],
    to: Annotated[
        Path | None, typer.Option("--to", help="Folder (default: ./trainsweep-results/<id>/).")
    ] = None,
    stack: StackOpt = DEFAULT_STACK,
    profile: ProfileOpt = None,
    region: RegionOpt = None,
) -> None:
    """Download a sweep's spec, jobs, logs and results with the S3 layout below the folder."""
    from trainsweep import layout
    from trainsweep.aws import sweeps
    from trainsweep.errors import SpecError, TrainsweepError

    console = make_console(stderr=True)
    dest = to or DEFAULT_RESULTS / sweep_id
    try:
        _check_folder_id(sweep_id)  # it names the folder and the S3 prefix
        session = aws_session(profile, region)
        bucket, _ = _stack(session, stack)
        files = sweeps.download_sweep(session.client("s3"), bucket, sweep_id, dest)
    except SpecError as e:
        _error(console, str(e))
        raise typer.Exit(EXIT_USAGE) from None
    except TrainsweepError as e:
        _error(console, str(e))
        raise typer.Exit(EXIT_FAILED) from None
    console.print(f"Downloaded {len(files)} files to {dest}/", highlight=False)
    report = dest / layout.RESULTS_DIR / layout.REPORT_HTML
    if report.is_file():
        console.print(f"Report: {report}", highlight=False)


# ---- doctor -----------------------------------------------------------------------------------------


def doctor(
    spec_path: Annotated[
        Path | None,
        typer.Argument(
            metavar="[SPEC]", help="A sweep spec: check the quotas and prices of its instance types."
        ),
    ] = None,
    stack: StackOpt = DEFAULT_STACK,
    profile: ProfileOpt = None,
    region: RegionOpt = None,
) -> None:
    """Check this machine and the AWS account; each line says what to do when something is missing.

    With credentials: the deployed stack, the CDK bootstrap stack, the training quotas and the prices
    of the SPEC's instance types in the region (without a SPEC: common GPU types).
    """
    from trainsweep.errors import SpecError
    from trainsweep.local.doctor import run_checks
    from trainsweep.spec import load_spec

    console = make_console()
    spec = None
    if spec_path is not None:
        try:
            spec = load_spec(spec_path)
        except SpecError as exc:
            _error(make_console(stderr=True), str(exc))
            raise typer.Exit(EXIT_USAGE) from None
    marks = {
        "ok": ("ok  ", "green"),
        "warn": ("warn", "yellow"),
        "fail": ("fail", "red"),
        "info": ("info", "dim"),
    }
    checks = run_checks(stack=stack, profile=profile, region=region, spec=spec)
    for check in checks:
        line = styled(marks[check.level], f" {check.name}: {check.detail}")
        if check.fix and check.level != "ok":
            line += f" — {check.fix}"
        console.print(line)
    if any(c.level == "fail" for c in checks):
        raise typer.Exit(EXIT_FAILED)
