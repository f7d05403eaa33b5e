"""``trainsweep predict-eval``: replay the early-stop rule on complete logs and score its predictions.

See trainsweep/cli/__init__.py for the conventions (heavy imports inside the commands).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from trainsweep.cli.common import fail, make_console

LOG_SUFFIXES = (".txt", ".out", ".log")
SKIPPED_DIRS = ("execution-times",)  # seed outputs, not logs


def collect_logs(paths: list[Path]) -> list[Path]:
    """The files given, and the logs (``*.txt``, ``*.out``, ``*.log``) below the folders given."""
    out: list[Path] = []
    for p in paths:
        if not p.exists():
            raise fail(f"{p} does not exist")
        if p.is_dir():
            found = [
                f
                for f in sorted(p.rglob("*"))
                if f.is_file()
                and f.suffix in LOG_SUFFIXES
                and not any(part in SKIPPED_DIRS for part in f.relative_to(p).parts)
            ]
            out.extend(found)
        else:
            out.append(p)
    return out


def _pct(x: float | None, digits: int = 2) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.{digits}f} %"


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def predict_eval_command(
    logs: Annotated[
        list[Path],
        typer.Argument(metavar="LOG...", help="Complete training logs (any dialect), or folders of them."),
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list of per-log objects.")] = False,
    precision: Annotated[
        float, typer.Option("--precision", min=0.001, max=0.5, help="Relative 95 % CI half-width to stop at.")
    ] = 0.02,
    max_epochs: Annotated[
        int, typer.Option("--max-epochs", min=1, help="Watch at most this many epochs.")
    ] = 2,
) -> None:
    """Replay the early-stop rule on complete logs: what it predicted from the steps it watched, against
    what the rest of each log shows, beside the seeds' estimator (mean of steps 2-11 x steps)."""
    from trainsweep.logs import parse
    from trainsweep.predict import StopRule, replay, summarize

    files = collect_logs(logs)
    if not files:
        raise fail("no logs found (looked for *.txt, *.out, *.log)")
    rule = StopRule(precision=precision)
    results = []
    group: dict[str, str] = {}
    for f in files:
        try:
            run = parse(f)
        except OSError as exc:
            raise fail(f"cannot read {f}: {exc.strerror or exc}") from None
        res = replay(run, rule, max_epochs=max_epochs)
        res.log = str(f)
        # a grid is one experiment folder (its logs/ folder's parent) x computing system
        group[res.log] = str(f.parent.parent if f.parent.name == "logs" else f.parent)
        results.append(res)
    if as_json:
        sys.stdout.write(json.dumps([r.to_dict() for r in results], indent=2) + "\n")
        return
    _print_table(results, summarize(results, group))


def _print_table(results: list[Any], agg: dict[str, Any]) -> None:
    from rich.table import Table

    console = make_console(soft_wrap=False)
    table = Table(title="early-stop rule replayed on complete logs", show_lines=False)
    for col in ("log", "steps used", "pred. epoch s", "90 % interval", "actual s", "error", "seeds' error"):
        if col == "log":
            table.add_column(col, overflow="fold", min_width=18)
        else:
            table.add_column(col, justify="right")
    for r in results:
        interval = (
            f"{r.predicted_epoch_low_s:.3f}-{r.predicted_epoch_high_s:.3f}"
            if r.predicted_epoch_low_s is not None and r.predicted_epoch_high_s is not None
            else "-"
        )
        table.add_row(
            Path(r.log).name,
            f"{r.steps_used}/{r.steps_total}",
            _s(r.predicted_epoch_s),
            interval,
            _s(r.actual_epoch_s),
            _pct(r.error),
            _pct(r.baseline_error),
        )
    console.print(table)
    console.print(
        f"{agg['logs_scored']} of {agg['logs']} logs have unwatched epochs to compare with. "
        f"|error| median {_pct(agg['median_abs_error'])}, p95 {_pct(agg['p95_abs_error'])}; "
        f"90 % interval covers {_pct(agg['interval_coverage'], 1)}; "
        f"seeds' estimator median {_pct(agg['baseline_median_abs_error'])}, "
        f"p95 {_pct(agg['baseline_p95_abs_error'])}; at most {agg['max_epochs_watched']} epochs watched, "
        f"median share of the log {_pct(agg['median_share_of_log_watched'], 1)}, "
        f"of a 90-epoch run {_pct(agg['median_share_of_90_epochs_watched'])}; "
        f"batch-size order as actual in {agg['grids_same_order']} of {agg['grids']} grids.",
        highlight=False,
    )


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("predict-eval")(predict_eval_command)
