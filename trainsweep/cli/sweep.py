"""``trainsweep run``, ``status``, ``download`` and ``doctor``: the commands users live in.

Each parses its arguments, calls the sweep drivers (:mod:`trainsweep.sweeps`, through
:func:`trainsweep.api.run` for ``run``) and renders what they report: ``run SPEC --local`` runs the whole
pipeline on this machine, without ``--local`` the deployed stack's state machine with the user's AWS
profile and region, like the AWS CLI. Both show a live table of cells and download the results and logs
to ``./trainsweep-results/<sweep-id>/`` with the S3 layout below it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from trainsweep.cli.common import ProfileOpt, RegionOpt, error_line, make_console, styled
from trainsweep.sweeps.result import DEFAULT_RESULTS_DIR, SweepEvents  # plain data: no pandas, boto3

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

DEFAULT_STACK = "Trainsweep"  # == trainsweep.aws.outputs.STACK_NAME (CLI modules import only typer/rich)
DEFAULT_RESULTS = DEFAULT_RESULTS_DIR
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
ModelsOpt = Annotated[
    bool,
    typer.Option("--models", help="Also download the jobs' models, outputs and checkpoints (can be large)."),
]


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


DETAIL_CHARS = 300


def _clip_middle(text: str, n: int) -> str:
    """``text`` in at most ``n`` characters, its middle left out: a failure's reason starts with what
    failed and ends with what the script said last (argparse's ``error:`` line, the exception)."""
    if len(text) <= n:
        return text
    head = n // 3
    return f"{text[:head]} ... {text[len(text) - (n - head - 5) :]}"


def render_view(view: Any) -> Table:
    """The live table: one row per cell, then counts, elapsed time and spend so far."""
    from rich.table import Table

    from trainsweep.axes import label

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
    with_axes = any(c.axes for c in view.cells)
    columns: list[tuple[str, dict[str, Any]]] = [
        ("instance", {}),
        ("batch", {"justify": "right"}),
        *([("setting", {})] if with_axes else []),
        ("rep", {"justify": "right"}),
        ("status", {}),
        ("elapsed", {"justify": "right"}),
        ("billable", {"justify": "right"}),
        ("cost USD", {"justify": "right"}),
        ("detail", {"overflow": "fold", "max_width": 60}),
    ]
    for col, kw in columns:
        table.add_column(col, **kw)
    for c in view.cells:
        style = _STATUS_STYLE.get(c.status, "")
        setting = (label(c.axes or {}),) if with_axes else ()
        table.add_row(
            c.instance_type if c.instance_count == 1 else f"{c.instance_type} x{c.instance_count}",
            "-" if c.batch_size is None else str(c.batch_size),
            *setting,
            "-" if c.repetition is None else str(c.repetition),
            Text(c.status, style=style),
            _duration(c.elapsed_s),
            _duration(c.billable_s),
            "-" if c.cost_usd is None else f"{c.cost_usd:.4f}",
            _clip_middle(c.detail or "", DETAIL_CHARS),
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


class ConsoleEvents(SweepEvents):
    """A sweep's events on the terminal (:class:`trainsweep.sweeps.result.SweepEvents`): the live table
    while cells change (``watch``), each message as a line (the live table stops first), the final table
    and outcome when a sweep ends."""

    def __init__(self, console: Console, watch: bool) -> None:
        self.console, self.watch = console, watch
        self._live: tuple[Any, Any] | None = None

    def stop(self) -> None:
        """Stop the live table (it is transient: the final table is printed when the sweep ends)."""
        if self._live is not None:
            self._live[1]()
            self._live = None

    def update(self, view: Any) -> None:
        if self._live is None:
            self._live = _watch_factory(self.console, self.watch)
        self._live[0](view)

    def say(self, text: str) -> None:
        self.stop()
        self.console.print(text, highlight=False)

    def note(self, text: str) -> None:
        self.stop()
        self.console.print(Text(text, style="yellow"))

    def warn(self, text: str) -> None:
        self.stop()
        self.console.print(styled(("warning:", "bold yellow"), " ", text))

    def finished(self, run: Any) -> None:
        self.stop()
        _render_end(self.console, run)


def _error(console: Console, message: str) -> None:
    console.print(error_line(message))


def _render_end(console: Console, run: Any) -> None:
    """The final table, why the sweep failed (if it did), and where its results are."""
    from trainsweep.sweeps.result import counts_text

    view = run.view
    if view is not None:
        console.print(render_view(view))
    if run.execution_status != "SUCCEEDED":
        where = f" (details: {run.detail_log})" if run.detail_log is not None else ""
        ended = f"the sweep's execution ended {run.execution_status}"
        _error(console, f"{ended}: {run.error or 'no detail'}{where}")
    elif not run.succeeded:
        counts = counts_text(view) if view is not None and view.cells else ""
        _error(
            console,
            f"no cell of the sweep succeeded ({counts or 'no cells'}): nothing to recommend; "
            "each cell's reason is in the table above and in the report",
        )
    contended = _contended_runs(Path(run.dest))
    if contended:
        from trainsweep.training import cpu_wait

        said = (
            f"{contended} run(s) waited for a CPU {100 * cpu_wait.BUSY_SHARE:g} % or more of the time they "
            "could run (other programs, or their own loader workers and threads, wanted the CPUs too): their "
            "times include that wait; the report's findings name them"
        )
        console.print(styled(("warning:", "bold yellow"), " ", said))
    console.print(f"Results: {run.dest}/")
    if run.report is not None:
        console.print(f"Report:  {run.report}")


def _contended_runs(dest: Path) -> int:
    """The runs of the results in ``dest`` whose CPUs were contended (the report's findings say which)."""
    from trainsweep import layout
    from trainsweep.training import cpu_wait

    try:
        doc = json.loads((dest / layout.RESULTS_DIR / layout.SWEEP_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 0
    found = doc.get("warnings") if isinstance(doc, dict) else None
    runs = {w.get("run") for w in found or [] if isinstance(w, dict) and w.get("code") == cpu_wait.FINDING}
    return len(runs)


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
    models: ModelsOpt = False,
    profile: ProfileOpt = None,
    region: RegionOpt = None,
) -> None:
    """Start a sweep, watch its cells, then download its results and logs to OUT/<sweep-id>/."""
    from trainsweep import api
    from trainsweep.errors import SpecError, TrainsweepError
    from trainsweep.sweeps.result import SweepInterrupted

    console = make_console(stderr=True)
    events = ConsoleEvents(console, watch=not no_watch)
    try:
        result = api.run(
            spec_path, local=local, out=out, resume=resume, watch=not no_watch, models=models, stack=stack,
            profile=profile, region=region, events=events,
        )  # fmt: skip
    except SpecError as e:
        events.stop()
        _error(console, str(e))  # the message lists every (field, problem)
        raise typer.Exit(EXIT_USAGE) from None
    except TrainsweepError as e:
        events.stop()
        _error(console, str(e))
        raise typer.Exit(EXIT_FAILED) from None
    except SweepInterrupted as stop:
        events.stop()
        _say_interrupted(console, stop.result)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except KeyboardInterrupt:
        events.stop()
        console.print(Text.assemble(("Interrupted:", "yellow"), " nothing was started or downloaded."))
        raise typer.Exit(EXIT_INTERRUPTED) from None
    if not result.watched:
        console.print(
            f"Watch it with `trainsweep status {result.sweep_id}`; "
            f"download with `trainsweep download {result.sweep_id}`."
        )
    elif not result.succeeded or result.tracking_error:  # the export's failure was said as it ended
        raise typer.Exit(EXIT_FAILED)


def _say_interrupted(console: Console, got: Any) -> None:
    """What Ctrl-C left: a cloud sweep goes on; a local one says what was downloaded."""
    if not got.local:
        console.print(
            f"Stopped watching; the sweep goes on in AWS. `trainsweep status {got.sweep_id}` shows it.",
            highlight=False,
        )
        return
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
    from trainsweep.sweeps.status import UnreadableSweepError
    from trainsweep.sweeps.status import status as sweep_status

    console = make_console()
    err = make_console(stderr=True)
    try:
        got = sweep_status(sweep_id, results=results, stack=stack, profile=profile, region=region)
    except SpecError as e:
        _error(err, str(e))
        raise typer.Exit(EXIT_USAGE) from None
    except UnreadableSweepError as e:
        _error(err, str(e))
        raise typer.Exit(EXIT_FAILED) from None
    except TrainsweepError as e:
        where = f"sweep {sweep_id!r}" if sweep_id else "a sweep"
        _error(err, f"{e}\n(no downloaded {where} under {results}/ either)")
        raise typer.Exit(EXIT_FAILED) from None
    failures = got.parse_failures
    if as_json:
        doc = got.view.to_dict()
        if failures is not None:
            doc["parse_failures"] = failures.to_dict()
        typer.echo(json.dumps(doc, indent=2, default=str))
    else:
        console.print(render_view(got.view))
        if failures is not None:
            line = failures.line()
            console.print(styled(("warning:", "bold yellow"), " ", line) if failures.alarming else line)


def download(
    sweep_id: Annotated[str, typer.Argument(help="Sweep id.")],
    to: Annotated[
        Path | None, typer.Option("--to", help="Folder (default: ./trainsweep-results/<id>/).")
    ] = None,
    models: ModelsOpt = False,
    stack: StackOpt = DEFAULT_STACK,
    profile: ProfileOpt = None,
    region: RegionOpt = None,
) -> None:
    """Download a sweep's spec, jobs, logs and results with the S3 layout below the folder (its jobs'
    models and checkpoints too with --models)."""
    from botocore.exceptions import BotoCoreError, ClientError

    from trainsweep import layout
    from trainsweep.errors import SpecError, TrainsweepError
    from trainsweep.sweeps.download import download as download_sweep

    console = make_console(stderr=True)
    dest = to or DEFAULT_RESULTS / sweep_id
    events = ConsoleEvents(console, watch=False)
    try:
        files = download_sweep(
            sweep_id, stack=stack, profile=profile, region=region, to=dest, models=models, events=events
        )
    except SpecError as e:
        _error(console, str(e))
        raise typer.Exit(EXIT_USAGE) from None
    except TrainsweepError as e:
        _error(console, str(e))
        raise typer.Exit(EXIT_FAILED) from None
    except (OSError, BotoCoreError, ClientError) as e:  # every file written is whole; run it again
        _error(console, f"the download stopped: {e}; what it wrote is whole, run it again for the rest")
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
