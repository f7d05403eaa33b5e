"""``trainsweep report`` (rebuild the sweep artefacts offline) and ``trainsweep prices`` (show, refresh).

See trainsweep/cli/__init__.py for the conventions (heavy imports inside the commands).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from trainsweep.cli.common import fail, make_console, styled

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|hr|d)?\s*$", re.IGNORECASE)
_UNIT_S = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hr": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """``3600``, ``90m``, ``2h``, ``1.5d`` -> seconds; raises ValueError with the accepted forms."""
    m = _DURATION.match(text)
    if not m:
        raise ValueError(f"{text!r} is not a duration: use seconds (3600) or a unit: 90m, 2h, 1d")
    return float(m.group(1)) * _UNIT_S[(m.group(2) or "s").lower()]


def _results_roots(folder: Path) -> list[Path]:
    """The results roots at or below ``folder``: folders that hold a ``runs/`` folder of run records."""
    from trainsweep import layout

    if (folder / layout.RUNS_DIR).is_dir():
        return [folder]
    return sorted(
        p.parent for p in folder.rglob(layout.RUNS_DIR) if p.is_dir() and not p.name.startswith(".")
    )


def report_command(
    folder: Annotated[
        Path,
        typer.Argument(
            metavar="DIR",
            help="Downloaded or imported results: a results root (runs/*.json) or a folder above several.",
        ),
    ],
    deadline: Annotated[
        str | None,
        typer.Option(
            "--deadline", help="Recommend the cheapest configuration that trains within this: 3600, 90m, 2h."
        ),
    ] = None,
    budget: Annotated[
        float | None,
        typer.Option(
            "--budget",
            min=0.0,
            help="Recommend the fastest configuration whose training costs at most this (USD).",
        ),
    ] = None,
    region: Annotated[
        str, typer.Option("--region", help="Region whose prices to use (a spec.json's region wins).")
    ] = "us-east-1",
) -> None:
    """Rebuild sweep.csv, sweep.json, report.html and plots/ from run records, offline, into DIR."""
    if not folder.is_dir():
        raise fail(f"{folder} is not a folder: give the folder `trainsweep download` or `import` wrote")
    try:
        deadline_s = parse_duration(deadline) if deadline is not None else None
    except ValueError as exc:
        raise fail(str(exc)) from None
    roots = _results_roots(folder)
    if not roots:
        raise fail(
            f"no runs/*.json below {folder}: is this a results folder? (`trainsweep import LOGS --out DIR`)"
        )

    from trainsweep import atomicio, layout
    from trainsweep.report import load_results, sweep_artefacts
    from trainsweep.tables import parquet_artefacts

    console = make_console(soft_wrap=False)
    every_run = []
    for root in roots:
        runs, quality, jobs, spec, problems = load_results(root, top=folder)
        every_run.extend(runs)
        for p in problems:
            console.print(styled(("skipped", "yellow"), f" {p}"), soft_wrap=True)
        if not runs and not jobs:
            console.print(styled((f"{root}: no readable run records, nothing to report", "yellow")))
            continue
        artefacts = sweep_artefacts(
            runs,
            spec=spec,
            jobs=jobs,
            quality=quality,
            region=region,
            deadline_s=deadline_s,
            budget_usd=budget,
            title=None if spec else root.resolve().name,
        )
        artefacts |= parquet_artefacts(artefacts[layout.SWEEP_CSV], runs)
        for relative, data in artefacts.items():
            atomicio.write_bytes(root / relative, data, durable=False)
        import json

        rec = json.loads(artefacts[layout.SWEEP_JSON])["recommendation"]
        console.print(styled((str(root), "bold"), f" ({len(runs)} runs)"))
        for line in rec["text"]:
            console.print(f"  {line}", soft_wrap=True)
        console.print(f"  wrote {len(artefacts)} files; open {root / layout.REPORT_HTML}")
    _mlperf_reports(folder, every_run, region, console)


def _mlperf_reports(folder: Path, runs: list, region: str, console) -> None:
    """MLPerf result logs among the runs: per benchmark, the systems compared, into DIR/mlperf/."""
    from trainsweep import atomicio
    from trainsweep.report.mlperf import REPORT_HTML, mlperf_artefacts

    for relative, data in mlperf_artefacts(runs, region).items():
        target = atomicio.write_bytes(folder / relative, data, durable=False)
        if relative.endswith(REPORT_HTML):
            console.print(styled(("MLPerf", "bold"), f" systems compared by time to train: open {target}"))


prices_app = typer.Typer(help="The instance price catalogue: show it, refresh it from the AWS Pricing API.")


_PLATFORM_HELP = "sagemaker (training jobs) or ec2 (the same machines as plain EC2 instances)."


def _platform(value: str) -> str:
    if value not in ("sagemaker", "ec2"):
        raise fail(f"--platform {value!r}: give sagemaker or ec2")
    return value


@prices_app.command("show")
def prices_show(
    region: Annotated[str, typer.Option("--region", help="Region to show.")] = "us-east-1",
    platform: Annotated[str, typer.Option("--platform", help=_PLATFORM_HELP)] = "sagemaker",
) -> None:
    """Print USD per instance-hour for every instance type trainsweep knows, and where it comes from."""
    from rich.table import Table

    from trainsweep.cost.prices import EC2, hourly_usd, price_source
    from trainsweep.instances import CATALOGUE

    platform = _platform(platform)
    what = "EC2, on-demand Linux" if platform == EC2 else "SageMaker training, on-demand"
    table = Table(title=f"{what}, {region}")
    table.add_column("instance type")
    table.add_column("GPUs", justify="right")
    table.add_column("USD/hour", justify="right")
    for name, t in CATALOGUE.items():
        if platform == EC2 and t.is_local:
            continue
        usd = hourly_usd(name, region, platform)
        shown = name.removeprefix("ml.") if platform == EC2 else name
        table.add_row(shown, str(t.gpus), "unknown" if usd is None else f"{usd:.3f}")
    console = make_console(soft_wrap=False)
    console.print(table)
    console.print(f"Prices: {price_source(region, platform)}")


@prices_app.command("refresh")
def prices_refresh(
    region: Annotated[
        list[str] | None,
        typer.Option("--region", help="Region to price (repeat for several; default: your AWS region)."),
    ] = None,
    platform: Annotated[str, typer.Option("--platform", help=_PLATFORM_HELP)] = "sagemaker",
    stack: Annotated[
        str, typer.Option("--stack", help="The deployed stack whose bucket gets the prices too.")
    ] = "Trainsweep",
    no_upload: Annotated[
        bool, typer.Option("--no-upload", help="Only the user cache: leave the stack's bucket alone.")
    ] = False,
) -> None:
    """Fetch current prices from the AWS Pricing API (needs AWS credentials) into the user cache.

    SageMaker prices also go to the deployed stack's bucket (its price cache, which PlanSweep reads), so
    sweeps started in the cloud plan with them too.
    """
    platform = _platform(platform)
    try:
        import boto3
        from botocore.exceptions import BotoCoreError, ClientError
    except ImportError:
        raise fail("boto3 is not installed: pip install 'trainsweep[aws]'") from None
    from trainsweep.aws.region import resolve_region
    from trainsweep.cost.prices import PRICING_API_REGION, SAGEMAKER, refresh

    regions = region or [resolve_region().region or "us-east-1"]
    client = boto3.client("pricing", region_name=PRICING_API_REGION)
    try:
        path, fetched, missing = refresh(client, regions, platform=platform)
    except (BotoCoreError, ClientError) as exc:
        raise fail(f"the AWS Pricing API did not answer: {exc} (check credentials and network)") from None
    n = sum(len(v) for v in fetched.values())
    make_console().print(f"cached {n} prices for {', '.join(regions)} in {path}")
    if missing:
        make_console(stderr=True).print(
            styled(
                ("not priced by the API (shipped price kept where there is one):", "yellow"),
                f" {', '.join(missing)}",
            )
        )
    if platform == SAGEMAKER and fetched and not no_upload:
        _upload_prices(fetched, stack)


def _upload_prices(fetched: dict[str, dict[str, float]], stack: str) -> None:
    """Merge refreshed SageMaker prices into the stack's price cache; a stack not found is a warning."""
    from botocore.exceptions import BotoCoreError, ClientError

    from trainsweep import layout
    from trainsweep.aws import outputs, sweeps
    from trainsweep.aws.pricing import write_stack_prices
    from trainsweep.aws.region import open_session
    from trainsweep.errors import TrainsweepError

    try:
        session = open_session(None, None)  # the stack of the region `cdk deploy` uses here
        bucket = sweeps.pick_output(
            sweeps.stack_outputs(session.client("cloudformation"), stack), outputs.BUCKET_NAME
        )
        write_stack_prices(session.client("s3"), bucket, fetched)
    except (TrainsweepError, BotoCoreError, ClientError) as exc:
        make_console(stderr=True).print(
            styled(
                (f"not uploaded to the stack {stack}:", "yellow"),
                f" {exc} (sweeps in the cloud ask the Pricing API themselves; --no-upload skips this)",
            )
        )
        return
    make_console().print(
        f"uploaded them to s3://{bucket}/{layout.PRICES_KEY} (stack {stack}), read by PlanSweep"
    )


def what_if_command(
    trace: Annotated[
        Path,
        typer.Argument(
            metavar="SIM_INFO_CSV",
            help="Per-iteration, per-GPU DDP trace (DS-Analyzer/FusionFlow sim_info.csv).",
        ),
    ],
    csv_out: Annotated[
        bool, typer.Option("--csv", help="Print CSV (FusionFlow's total_summary columns) instead of a table.")
    ] = False,
) -> None:
    """Data-stall what-if: iteration, stall and delay times with fetch start/duration aligned across GPUs."""
    if not trace.is_file():
        raise fail(f"{trace} is not a file: give a sim_info.csv")
    from trainsweep.stalls import read_sim_info, what_if_table

    try:
        rows = what_if_table(read_sim_info(trace))
    except (ValueError, KeyError) as exc:
        raise fail(f"{trace}: {exc}") from None
    if csv_out:
        import csv
        import sys

        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(
            [
                "Align",
                "Avg iteration time (sec)",
                "Avg training stall time (sec)",
                "Avg delay time (sec)",
                "Effective Delay time (%)",
                "Avg preprocessing start diff (sec)",
                "Avg preprocessing diff (sec)",
            ]
        )
        for r in rows:
            w.writerow(
                [
                    r.label,
                    r.iteration_s.format(),
                    r.stall_s.format(),
                    r.delay_s.format(),
                    r.effective_delay_pct,
                    r.start_diff_s.format(),
                    r.fetch_diff_s.format(),
                ]
            )
        return
    from rich.table import Table

    table = Table(title=f"What-if over {rows[0].iterations if rows else 0} iterations (index > 10)")
    for h in ("aligned", "iteration (s)", "stall (s)", "delay (s)", "delay>30ms"):
        table.add_column(h, justify="left" if h == "aligned" else "right")
    for r in rows:
        table.add_row(
            r.short_label,
            r.iteration_s.format(),
            r.stall_s.format(),
            r.delay_s.format(),
            f"{r.effective_delay_pct:.1f}%",
        )
    make_console(soft_wrap=False).print(table)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("report")(report_command)
    app.add_typer(prices_app, name="prices")
    app.command("what-if")(what_if_command)
