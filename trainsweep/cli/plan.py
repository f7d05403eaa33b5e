"""``trainsweep plan`` and ``trainsweep schema``: see a sweep's grid and worst case before spending money.

No AWS call: the plan is pure, prices come from the shipped (or refreshed) catalogue.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from trainsweep.cli.common import make_console, styled

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.console import Console

    from trainsweep.jobs import PlannedJob
    from trainsweep.spec import SweepPlan

EXIT_INVALID = 2
EXIT_OVER_BUDGET = 3
EXIT_TOO_LARGE = 4


def register(app: typer.Typer) -> None:
    """Add ``plan`` and ``schema`` to the app."""
    app.command("plan")(plan)
    app.command("schema")(schema)


def plan(
    spec_path: Annotated[Path, typer.Argument(metavar="SPEC", help="Sweep spec, YAML or JSON.")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the plan as JSON (jobs, cost, time).")
    ] = False,
    region: Annotated[
        str | None, typer.Option(help="Region to price in (default: the spec's region, else us-east-1).")
    ] = None,
    bucket: Annotated[str | None, typer.Option(help="Results bucket, to show the S3 URIs jobs get.")] = None,
) -> None:
    """Validate a sweep spec and show its grid, job names, worst-case cost and time. No AWS call."""
    from trainsweep.aws.workflow import SweepTooLargeError, check_plan_fits
    from trainsweep.errors import BudgetExceededError, SpecError
    from trainsweep.spec import check_budget, plan_sweep

    out = make_console()
    err = make_console(stderr=True)
    from trainsweep import phases
    from trainsweep.spec import load_spec
    from trainsweep.tracking import check_client

    try:
        spec = load_spec(spec_path)
        check_client(spec.tracking)  # the sweep would run, then fail to land where it is tracked
        # a two-phase sweep starts with its scan: that is the plan to show; the confirm phase follows
        sweep = plan_sweep(
            phases.scan_spec(spec) if spec.phases else spec,
            region=region,
            bucket=bucket,
            enforce_budget=False,
        )
    except SpecError as e:
        _print_spec_errors(err, str(spec_path), e)
        raise typer.Exit(EXIT_INVALID) from None
    _check_source(err, spec_path, spec)

    if as_json:
        typer.echo(json.dumps(sweep.to_dict(), indent=2))
    else:
        _print_plan(out, sweep)
        if spec.phases:
            _print_confirm_phase(out, sweep, spec)
    for warning in sweep.warnings:
        err.print(f"Warning: {warning}", highlight=False, markup=False)
    try:
        check_plan_fits(sweep)
    except SweepTooLargeError as e:
        err.print(styled(("Refused:", "bold red"), f" `trainsweep run` would refuse it: {e}"))
        raise typer.Exit(EXIT_TOO_LARGE) from None
    try:
        check_budget(sweep)
    except BudgetExceededError as e:
        err.print(styled(("Refused:", "bold red"), f" {e}"))
        raise typer.Exit(EXIT_OVER_BUDGET) from None
    except SpecError as e:
        _print_spec_errors(err, str(spec_path), e)
        raise typer.Exit(EXIT_INVALID) from None


def _check_source(err: Console, spec_path: Path, spec: Any) -> None:
    """Your code's folder and the script the spec names exist (what ``run`` would pack); exit 2 if not."""
    from trainsweep.errors import SpecError
    from trainsweep.sourcedir import SourceError, is_remote, local_source, spec_dir

    w = spec.workload
    if not w.runs_code or is_remote(w.source_dir):
        return
    try:
        local_source(w, spec_dir(spec_path))
    except SourceError as e:
        field, _, message = str(e).partition(": ")
        _print_spec_errors(err, str(spec_path), SpecError(str(e), [(field, message)]))
        raise typer.Exit(EXIT_INVALID) from None


def schema(
    out: Annotated[Path | None, typer.Option(help="Write the schema to this file instead of stdout.")] = None,
) -> None:
    """Print the JSON Schema of a sweep spec (for editors and validators)."""
    from trainsweep.spec import schema_text

    text = schema_text()
    if out is None:
        typer.echo(text, nl=False)
    else:
        from trainsweep import atomicio

        atomicio.write_text(out, text)
        typer.echo(f"wrote {out}", err=True)


def _print_spec_errors(console: Console, where: str, error: Any) -> None:
    pairs = getattr(error, "errors", None) or [("(spec)", str(error))]
    console.print(styled(("Invalid sweep spec", "bold red"), f" {where}:"))
    for field, message in pairs:
        console.print(styled("  ", (field, "bold"), f": {message}"))
    console.print("Fields and allowed values: `trainsweep schema`.")


def _print_confirm_phase(console: Console, scan: SweepPlan, spec: Any) -> None:
    """What follows the scan of ``phases: [scan, confirm]``, with the confirm sweep's worst case."""
    prices = sorted(
        (scan.hourly_usd.get(t) for t in spec.instance_types for _ in spec.batch_sizes),
        key=lambda p: -1.0 if p is None else p,
        reverse=True,
    )
    k = min(spec.confirm_top_k, len(prices))
    dearest = prices[:k]
    worst = (
        None
        if None in dearest
        else sum(p * spec.max_runtime_seconds / 3600 * spec.instance_count for p in dearest if p is not None)
        * spec.repetitions
    )
    console.print(
        f"This is the scan of phases [scan, confirm]; then a confirm sweep trains the scan's best {k} "
        f"configuration(s) in full mode to {spec.target.metric} {spec.target.value:g} "
        f"({_n(spec.repetitions, 'repetition')}; worst case at most {_usd(worst)}).",
        highlight=False,
    )


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _usd(value: float | None) -> str:
    return "unknown" if value is None else f"{value:,.2f} USD"


def _print_plan(console: Console, sweep: SweepPlan) -> None:
    _print_jobs(console, sweep)
    _print_summary(console, sweep)


def _print_jobs(console: Console, sweep: SweepPlan) -> None:
    from rich.table import Table

    from trainsweep.spec import format_duration

    spec = sweep.spec
    length = f"{spec.workload.steps} steps" if spec.workload.steps else f"{spec.workload.epochs} epochs"
    title = (
        f"Sweep {sweep.sweep_id}: {spec.workload.label} ({length}, {spec.mode}"
        f"{', synthetic data' if spec.workload.synthetic else ''}) in {sweep.region}"
    )
    columns: list[tuple[str, str, Callable[[PlannedJob], str]]] = [
        ("job name", "left", lambda j: j.job_name),
        ("instance type", "left", lambda j: j.instance_type),
        ("batch size", "right", lambda j: ",".join(map(str, j.batch_sizes))),
        ("run", "right", lambda j: f"e{j.repetition}"),
        ("setting", "left", _setting_cell),
        ("instances", "right", lambda j: str(j.instance_count)),
        ("max runtime", "right", lambda j: format_duration(j.max_runtime_seconds)),
        ("worst case", "right", lambda j: _usd(j.worst_case_usd(sweep.hourly_usd.get(j.instance_type)))),
    ]
    if not spec.axes:
        del columns[4]  # no setting column without axes: the table as it always was
    rows = [[cell(job) for _, _, cell in columns] for job in sweep.jobs]
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, (h, _, _) in enumerate(columns)]

    def fits(keep: list[int]) -> bool:
        return sum(widths[i] for i in keep) + 3 * len(keep) + 1 <= console.width

    # Job names stay whole (people copy them): on a narrow terminal drop the columns the name repeats,
    # and where even that does not fit, print one plain line per job.
    keep = list(range(len(columns)))
    last = len(columns) - 1  # the worst case
    if not fits(keep):
        keep = [0, 2, 3, 4, last] if spec.axes else [0, 2, 3, last]
    if not fits(keep):
        console.print(title, highlight=False)
        for r in rows:
            setting = f", {r[4]}" if spec.axes else ""
            console.print(f"  {r[0]}  batch size {r[2]}{setting}, {r[last]}")
        return
    table = Table(title=title, title_justify="left")
    for i in keep:
        header, justify, _ = columns[i]
        table.add_column(header, justify=justify, no_wrap=i == 0, overflow="fold")  # type: ignore[arg-type]
    for r in rows:
        table.add_row(*(r[i] for i in keep))
    console.print(table)


def _setting_cell(job: PlannedJob) -> str:
    """A job's setting of the axes (``dtype=bfloat16 compile=true``), or how many a packed job scans."""
    from trainsweep.axes import label

    distinct = list(dict.fromkeys(label(s) for s in job.axes))
    return distinct[0] if len(distinct) == 1 else f"{len(distinct)} settings"


def _grid_words(sweep: SweepPlan) -> str:
    """``1 instance type × 2 batch sizes × 4 settings (dtype × compile) × 1 repetition``."""
    spec = sweep.spec
    words = [_n(len(spec.instance_types), "instance type"), _n(len(spec.batch_sizes), "batch size")]
    if spec.axes:
        words.append(f"{_n(len(spec.settings), 'setting')} ({' × '.join(spec.axes)})")
    return " × ".join([*words, _n(spec.repetitions, "repetition")])


def _print_summary(console: Console, sweep: SweepPlan) -> None:
    from trainsweep.spec import format_duration

    spec = sweep.spec
    waves = -(-sweep.job_count // spec.max_concurrency)
    console.print(
        f"{_n(sweep.job_count, 'job')} ({_n(sweep.run_count, 'run')}: {_grid_words(sweep)}, "
        f"packing {spec.packing})",
        highlight=False,
    )
    cost_line = styled("Worst-case cost: ", (_usd(sweep.worst_case_cost_usd), "bold"))
    if sweep.unpriced_instance_types:
        cost_line += f" (no price for {', '.join(sweep.unpriced_instance_types)} in {sweep.region})"
    if spec.budget_usd is not None:
        cost_line += f"; budget {spec.budget_usd:,.2f} USD"
    if spec.spot:
        cost_line += " (on-demand prices; spot is cheaper)"
    console.print(cost_line, highlight=False)
    console.print(
        styled(
            "Worst-case time: ",
            (format_duration(sweep.worst_case_seconds), "bold"),
            f" ({_n(waves, 'wave')} of up to {_n(spec.max_concurrency, 'concurrent job')}"
            f"{', each job up to its spot wait limit' if spec.spot else ''})",
        )
    )
