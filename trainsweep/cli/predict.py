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


def experiment_of(path: Path, root: Path) -> str:
    """The experiment a log belongs to: the unit cross-validation holds out.

    An experiment is one instance type's runs in one experiment folder: ``<folder name>/<instance
    type>``. The folder is the nearest one (within ``root``) that holds a ``logs/`` folder (seed layout
    ``<experiment>/logs/result-<VMTYPE>-<BS>-e<N>.txt``; a log unpacked elsewhere in the experiment, such
    as ``output/model.tar.gz.extracted/log.txt``, belongs to it too), else the log's own folder. The
    folder's name, not its path, so that older copies of an experiment (``_history/<commit>/...``) are
    the same experiment. The instance type is the run's (header or file name; ``?`` when unknown).
    """
    folder = path.parent
    for anc in path.parents:
        if anc != root and root not in anc.parents:
            break
        if (anc / "logs").is_dir():
            folder = anc
            break
    return folder.name


def _pct(x: float | None, digits: int = 2) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.{digits}f} %"


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def predict_eval_command(
    logs: Annotated[
        list[Path],
        typer.Argument(metavar="LOG...", help="Complete training logs (any dialect), or folders of them."),
    ],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a JSON object: per-log objects and the summary.")
    ] = False,
    cross_validate: Annotated[
        bool,
        typer.Option(
            "--cross-validate",
            help="Score each experiment with the interval calibrated on the other logs given "
            "(leave one experiment out) instead of the shipped calibration.",
        ),
    ] = False,
    precision: Annotated[
        float, typer.Option("--precision", min=0.001, max=0.5, help="Relative 95 % CI half-width to stop at.")
    ] = 0.02,
    max_epochs: Annotated[
        int, typer.Option("--max-epochs", min=1, help="Watch at most this many epochs.")
    ] = 2,
) -> None:
    """Replay the early-stop rule on complete logs: what it predicted from the steps it watched, against
    what the rest of each log shows, beside the seeds' estimator (mean of steps 2-11 x steps)."""
    from trainsweep.predict import StopRule, summarize
    from trainsweep.predict import cross_validate as loeo

    rule = StopRule(precision=precision)
    results, group, experiment = replay_logs(logs, rule, max_epochs=max_epochs)
    if cross_validate:
        results = loeo(results, experiment, rule.interval)
        if not any(r.epoch_jitter is not None for r in results):
            raise fail(
                "cannot cross-validate: no experiment has 9 scored logs outside it to calibrate on "
                f"({len(set(experiment.values()))} experiments given); give more logs, or leave out "
                "--cross-validate to use the shipped calibration"
            )
    agg = summarize(results, group)
    agg["calibration"] = calibration_used(cross_validate)
    agg["experiments"] = len(set(experiment.values()))
    if as_json:
        from trainsweep.predict import cross_validations

        # leave one experiment, family and instance class out: each held-out group calibrated on the rest
        agg["cross_validation"] = cross_validations(results, experiment, rule.interval)
        out = {"logs": [r.to_dict() for r in results], "summary": agg}
        sys.stdout.write(json.dumps(_no_nan(out), indent=2) + "\n")
        return
    _print_table(results, agg)


def replay_logs(
    paths: list[Path], rule: Any, *, max_epochs: int = 2
) -> tuple[list[Any], dict[str, str], dict[str, str]]:
    """Replay the rule on the logs below ``paths``: (results, grid of each log, experiment of each log).

    A grid is one experiment folder (its ``logs/`` folder's parent) x computing system; the experiment
    is :func:`experiment_of`, byte-identical logs being one experiment (the first seen).
    """
    from trainsweep.logs import parse
    from trainsweep.predict import replay, run_family

    results = []
    group: dict[str, str] = {}
    experiment: dict[str, str] = {}
    by_content: dict[str, str] = {}
    for root in paths:
        files = collect_logs([root])
        for f in files:
            try:
                run = parse(f)
            except OSError as exc:
                raise fail(f"cannot read {f}: {exc.strerror or exc}") from None
            res = replay(run, rule, max_epochs=max_epochs, family=run_family(run, f))
            res.log = str(f)
            group[res.log] = str(f.parent.parent if f.parent.name == "logs" else f.parent)
            system = run.computing_system or run.header.instance_type or "?"
            exp = f"{experiment_of(f, root if root.is_dir() else f.parent)}/{system}"
            experiment[res.log] = by_content.setdefault(run.sha256, exp) if run.sha256 else exp
            results.append(res)
    if not results:
        raise fail("no logs found (looked for *.txt, *.out, *.log)")
    return results, group, experiment


def calibration_used(cross_validated: bool) -> str:
    from trainsweep.predict import load_calibration

    if cross_validated:
        return "leave-one-experiment-out"
    cal = load_calibration()
    return f"shipped (fitted {cal.created})"


def _no_nan(x: Any) -> Any:
    """JSON has no NaN: None in its place."""
    if isinstance(x, float) and math.isnan(x):
        return None
    if isinstance(x, dict):
        return {k: _no_nan(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_no_nan(v) for v in x]
    return x


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
    per_family = [
        f"{name} {f['logs_scored']}/{f['logs']} logs scored"
        + (
            f", |error| median {_pct(f['median_abs_error'])}, "
            f"interval covers {_pct(f['interval_coverage'], 1)}"
            if f["logs_scored"]
            else ""
        )
        for name, f in agg["families"].items()
        if name != "pooled"
    ]
    console.print(
        f"Per family ({agg['calibration']} calibration): " + "; ".join(per_family) + ".", highlight=False
    )
    per_class = [
        f"{name} {f['logs_scored']}/{f['logs']} logs scored"
        + (f", interval covers {_pct(f['interval_coverage'], 1)}" if f["logs_scored"] else "")
        for name, f in agg["classes"].items()
        if name != "pooled"
    ]
    console.print("Per instance class: " + "; ".join(per_class) + ".", highlight=False)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("predict-eval")(predict_eval_command)
