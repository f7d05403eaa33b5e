"""``trainsweep parse``, ``summary`` and ``import``: analyse logs you already have.

See trainsweep/cli/__init__.py for the conventions (heavy imports inside the commands).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from trainsweep.cli.common import fail, make_console, styled

PROBLEM_ROWS_SHOWN = 40


def _readable_file(path: Path) -> None:
    if not path.exists():
        raise fail(f"{path} does not exist")
    if path.is_dir():
        raise fail(f"{path} is a folder; give one log file (use `trainsweep import` for a folder)")


def _parse_log(path: Path, *, vmtype: str | None, batch_size: int | None, run: int | None) -> Any:
    from trainsweep.logs import parse

    try:
        return parse(path, computing_system=vmtype, batch_size=batch_size, run_index=run)
    except OSError as exc:
        raise fail(f"cannot read {path}: {exc.strerror or exc}") from None


def parse_command(
    log: Annotated[
        Path, typer.Argument(metavar="LOG", help="A training log (any dialect trainsweep reads).")
    ],
    vmtype: Annotated[
        str | None,
        typer.Option("--vmtype", help="Seed VMTYPE, e.g. p3-1 (default: from a result-VMTYPE-BS-eN name)."),
    ] = None,
    batch_size: Annotated[
        int | None, typer.Option("--batch-size", min=1, help="Batch size (default: from the name).")
    ] = None,
    run: Annotated[
        int | None, typer.Option("--run", min=0, help="Repetition index N (default: from the name).")
    ] = None,
) -> None:
    """Parse one log and print its run record (JSON) to stdout; problems are listed in the record."""
    _readable_file(log)
    from trainsweep.cli.fast import print_run_record

    # Plain arguments do not come here: trainsweep.cli.fast runs the same calls without building the app.
    print_run_record(_parse_log(log, vmtype=vmtype, batch_size=batch_size, run=run))


def _report_problems(timings: Any) -> None:
    """The parser's problems go to stderr, so that stdout stays the seed text."""
    console = make_console(stderr=True, soft_wrap=False)
    for p in timings.problems:
        where = f"line {p.line}: " if p.line else ""
        colour = "red" if p.severity == "error" else "yellow"
        console.print(styled((f"{p.severity}:", colour), f" {where}{p.message} ", (f"({p.code})", "dim")))


def _load_json(path: Path) -> dict[str, Any] | None:
    """The file's JSON object if it is one, else None (then it is read as a log)."""
    with path.open("rb") as f:
        head = f.read(64).lstrip()
    if not head.startswith(b"{"):
        return None
    try:
        data = json.loads(path.read_bytes())
    except (ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


def summary_command(
    source: Annotated[
        Path,
        typer.Argument(
            metavar="LOG_OR_JSON", help="A log, a run record (runs/<name>.json) or a seed e<N>.json."
        ),
    ],
    original: Annotated[
        bool,
        typer.Option(
            "--original",
            help="Reproduce training-times-summary.py exactly: missing values (-1.0) enter the arithmetic.",
        ),
    ] = False,
) -> None:
    """Print the seed's per-run summary (the e<N>.summary text of training-times-summary.py)."""
    _readable_file(source)
    from trainsweep.logs.model import RECORD_KIND, RecordVersionError, RunTimings
    from trainsweep.summary import format_seed_summary, seed_json, seed_summary

    data = _load_json(source)
    if data is not None and "kind" in data:
        if data.get("kind") != RECORD_KIND:
            raise fail(f"{source} is a {data.get('kind')!r} file, not a run record or a seed e<N>.json")
        try:
            seed = seed_json(RunTimings.from_record(data))
        except RecordVersionError as exc:
            raise fail(f"{source}: {exc}") from None
        except (KeyError, TypeError, ValueError) as exc:
            raise fail(f"{source} is not a valid run record ({type(exc).__name__}: {exc})") from None
    elif data is not None:
        if not isinstance(data.get("epochs"), dict):
            raise fail(f"{source} is JSON but neither a run record nor a seed e<N>.json (no 'epochs')")
        seed = data
    else:
        timings = _parse_log(source, vmtype=None, batch_size=None, run=None)
        _report_problems(timings)
        if not original:  # from the run's arrays, without a seed JSON of every step (very long logs)
            sys.stdout.write(seed_summary(timings))
            return
        seed = seed_json(timings)
    try:
        text = format_seed_summary(seed, original=original)
    except (TypeError, ValueError, AttributeError) as exc:
        raise fail(f"{source}: malformed seed JSON ({type(exc).__name__}: {exc})") from None
    sys.stdout.write(text)


def import_command(
    directory: Annotated[
        Path, typer.Argument(metavar="DIR", help="Folder with the logs (searched recursively).")
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder for the results layout.")],
    workers: Annotated[
        int | None, typer.Option("--workers", min=1, help="Parallel processes (default: one per CPU).")
    ] = None,
    report: Annotated[
        bool, typer.Option("--report/--no-report", help="Also write sweep.csv, plots and report.html.")
    ] = True,
    follow_symlinks: Annotated[
        bool,
        typer.Option(
            "--follow-symlinks",
            help="Also read files that symbolic links in DIR lead to outside DIR (default: skip them).",
        ),
    ] = False,
) -> None:
    """Analyse every log below DIR: per-run artefacts, sweep report, quality.json under OUT.

    Exits 0 when every file was processed, even if some had problems (see the table and quality.json).
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from trainsweep.errors import TrainsweepError
    from trainsweep.importer import import_dir

    console = make_console(stderr=True, soft_wrap=False)
    columns = (
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[current]}", style="dim", markup=False),  # a path, as it is
    )
    # No refresh thread (auto_refresh=False): the import forks worker processes, which must not inherit
    # a thread that may hold the terminal's lock; the bar is redrawn after each file instead.
    with Progress(*columns, console=console, transient=False, auto_refresh=False) as bar:
        task = bar.add_task("Importing logs", total=None, current="")

        def progress(done: int, total: int, path: str) -> None:
            bar.update(task, completed=done, total=total, current=path)
            bar.refresh()

        try:
            result = import_dir(
                directory,
                out,
                progress=progress,
                workers=workers,
                report=report,
                follow_symlinks=follow_symlinks,
            )
        except TrainsweepError as exc:
            raise fail(str(exc)) from None
        except OSError as exc:
            raise fail(f"cannot write to {out}: {exc.strerror or exc}") from None
        bar.update(task, completed=result.processed, total=max(result.processed, 1), current="done")
    _print_import_report(result, out)


def _print_import_report(result: Any, out: Path) -> None:
    from rich.table import Table

    from trainsweep.importer import NO_TRAINING_CONTENT, iter_problem_rows

    console = make_console(soft_wrap=False)
    s = result.quality["summary"]
    counts = Table(title=f"Import into {out}", show_header=False, title_justify="left")
    counts.add_column("what")
    counts.add_column("count", justify="right")
    counts.add_row("log files processed", str(s["files"]))
    for status, n in s["by_status"].items():
        counts.add_row(f"  {status}", str(n))
    counts.add_row("files with problems", str(s["files_with_problems"]))
    counts.add_row("problems (errors / warnings)", f"{s['errors']} / {s['warnings']}")
    counts.add_row("duplicate groups", str(s["duplicate_groups"]))
    counts.add_row("other files skipped", str(s["skipped"]))
    console.print(counts)
    rows = list(iter_problem_rows(result))
    if rows:
        # One line per kind of problem (thousands of logs share a few kinds), then every error in full.
        kinds: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for path, severity, code, message in rows:
            kinds.setdefault((severity, code), []).append((path, message))
        by_kind = Table(title="Problems by kind", title_justify="left")
        for name, justify in (("severity", "left"), ("code", "left"), ("files", "right"), ("first", "left")):
            by_kind.add_column(name, overflow="fold", justify=justify)  # type: ignore[arg-type]
        for (severity, code), hits in sorted(kinds.items(), key=lambda kv: (kv[0][0] != "error", kv[0][1])):
            style = "red" if severity == "error" else "yellow"
            path, message = hits[0]
            by_kind.add_row(styled((severity, style)), code, str(len(hits)), f"{path}: {message}")
        console.print(by_kind)
        errors = [r for r in rows if r[1] == "error"]
        if errors:
            table = Table(title="Errors", title_justify="left")
            for name in ("file", "code", "what"):
                table.add_column(name, overflow="fold")
            for path, _severity, code, message in errors[:PROBLEM_ROWS_SHOWN]:
                table.add_row(path, code, message)
            console.print(table)
            if len(errors) > PROBLEM_ROWS_SHOWN:
                console.print(f"... and {len(errors) - PROBLEM_ROWS_SHOWN} more errors")
    # Files left unread for a reason other than their content (links out of DIR, archives past a
    # bound, unreadable archives), one line each; the ones without training content are only counted.
    for entry in result.skipped:
        if entry["reason"] != NO_TRAINING_CONTENT:
            console.print(styled(("skipped:", "yellow"), f" {entry['path']}: {entry['reason']}"))
    for note in result.quality.get("notes", []):
        console.print(styled((f"note: {note}", "dim")))
    console.print(f"Results in {out}; every problem, file by file: {out / 'quality.json'}")
    from trainsweep.logs import mllog

    written = (out / "mlperf").is_dir()  # not with --no-report
    if written and any(mllog.MLPERF in run.extra for run in result.runs.values()):
        console.print(f"MLPerf systems compared by time to train: {out / 'mlperf'}/<benchmark>/report.html")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("parse")(parse_command)
    app.command("summary")(summary_command)
    app.command("import")(import_command)
