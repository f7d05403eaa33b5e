"""The sweep's artefacts: ``sweep.csv``, ``sweep.json``, ``report.html`` and ``plots/*.png``.

:func:`sweep_artefacts` is what the AggregateSweep Lambda, ``trainsweep import`` and
``trainsweep report`` call; it returns relative paths under a results root (from
:mod:`trainsweep.layout`) mapped to bytes, and writes nothing itself.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from trainsweep import layout
from trainsweep.cost.metrics import ConfigMetrics, csv_columns, csv_record
from trainsweep.logs.model import RunTimings
from trainsweep.report.analysis import SWEEP_KIND, SWEEP_SCHEMA_VERSION, SweepAnalysis, analyse, clean

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["SweepAnalysis", "analyse", "sweep_artefacts", "sweep_csv", "sweep_json"]


def _num(x: Any) -> str:
    if x is None:
        return ""
    if isinstance(x, bool):
        return str(x).lower()
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        if x != x:  # NaN
            return ""
        return f"{x:.1f}" if abs(x) >= 1e5 else f"{x:.6g}"
    return str(x)


def csv_bytes(
    columns: Sequence[str], records: Iterable[Mapping[str, Any]], fmt: Callable[[Any], str] = _num
) -> bytes:
    """A CSV table: a header of ``columns``, then each record's values of them written with ``fmt``."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for d in records:
        w.writerow([fmt(d[c]) for c in columns])
    return buf.getvalue().encode()


def sweep_csv(rows: Sequence[ConfigMetrics]) -> bytes:
    """One row per configuration, the columns of :data:`trainsweep.cost.metrics.CSV_COLUMNS` (and one per
    axis of a sweep with axes: :func:`trainsweep.cost.metrics.csv_columns`)."""
    return csv_bytes(csv_columns(rows), (csv_record(r) for r in rows))


def sweep_json(a: SweepAnalysis) -> bytes:
    """Everything in the CSV plus per-run figures, the recommendation, the model's parameters, warnings."""
    doc = {
        "kind": SWEEP_KIND,
        "schema_version": SWEEP_SCHEMA_VERSION,
        "region": a.region,
        "prices": a.prices,
        "epochs": a.epochs,
        "instance_count": a.instance_count,
        "fixed_overhead_s": a.overhead_s,
        "columns": list(csv_columns(a.rows)),
        "recommendation": a.recommendation.to_dict(),
        "batch_size_search": a.batch_size_search or None,
        **({"best_settings": a.best_settings} if a.best_settings else {}),
        "configurations": [r.to_dict() for r in a.rows],
        "runs": [m.to_dict() for m in a.run_metrics],
        "warnings": a.warnings,
    }
    return (json.dumps(clean(doc), indent=2, sort_keys=False) + "\n").encode()


_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _safe(name: str) -> str:
    return _SAFE.sub("_", name).strip("_") or "run"


def sweep_plots(a: SweepAnalysis) -> dict[str, tuple[str, bytes]]:
    """Plot name -> (caption, PNG bytes)."""
    from trainsweep.plots import figure_png
    from trainsweep.plots import sweep as sp

    out: dict[str, tuple[str, bytes]] = {}
    if a.priced:
        out["cost-per-epoch"] = (
            "Cost per steady epoch for every instance type and batch size "
            "(grey: no value; the cell says why).",
            figure_png(sp.cost_per_epoch_heatmap(a.rows)),
        )
    out["samples-per-s"] = (
        "Steady-state training throughput for every instance type and batch size.",
        figure_png(sp.samples_per_s_heatmap(a.rows)),
    )
    out["throughput"] = (
        "Throughput against batch size per instance type; "
        "the band is ± one standard deviation over repetitions.",
        figure_png(sp.throughput_figure(a.rows)),
    )
    if a.priced:
        out["pareto"] = (
            "Time to train against cost to train; "
            "the dashed line joins the Pareto set, the star marks the pick.",
            figure_png(sp.pareto_figure(a.rows, a.recommendation)),
        )
    else:
        out["time-to-train"] = (
            "Time to train per configuration; green: the pick, grey: set aside for its accuracy.",
            figure_png(sp.time_to_train_figure(a.rows, a.recommendation)),
        )
    if any(r.status == "ok" and r.data_wait_share is not None for r in a.rows):
        out["step-breakdown"] = (
            "How the steady step splits into waiting for data and compute.",
            figure_png(sp.step_breakdown_figure(a.rows)),
        )
    out.update(_axis_plots(a))
    pick = a.recommendation.pick or a.recommendation.cheapest
    distributions = _distributions(a, pick)
    if distributions is not None:
        out["step-time-distributions"] = distributions
    return _run_plots(a, pick, out)


def _axis_plots(a: SweepAnalysis) -> dict[str, tuple[str, bytes]]:
    """A sweep with axes: the effect of each axis (``axis-<name>``); nothing without axes."""
    from trainsweep.cost.axis_effects import axis_effects, axis_names
    from trainsweep.plots import figure_png
    from trainsweep.plots.axes import axis_effect_figure

    figures = ["epoch_time_s", "cost_per_epoch_usd"] if a.priced else ["epoch_time_s"]
    out: dict[str, tuple[str, bytes]] = {}
    for name in axis_names(a.rows):
        effects = {f: axis_effects(a.rows, name, f) for f in figures}
        out[f"axis-{_safe(name)}"] = (
            f"Effect of {name}: "
            + (" and ".join(("epoch time", "cost per epoch")[: len(figures)]))
            + f" per value of {name}, one line per batch size (and values of the other axes), one panel per "
            "instance type; error bars are ± one standard deviation over repetitions.",
            figure_png(axis_effect_figure(name, effects)),
        )
    return out


def _distributions(a: SweepAnalysis, pick: ConfigMetrics | None) -> tuple[str, bytes] | None:
    """Steady step-time distributions per configuration, the pick's first; None when no configuration
    has two steady steps (a plot of nothing)."""
    from trainsweep.plots import figure_png
    from trainsweep.plots.steps import MAX_PANELS, distribution_figure

    ok = [r for r in a.rows if r.status == "ok"]
    ordered = ([pick] if pick else []) + [r for r in ok if r is not pick]
    samples = {
        f"{r.instance_type.removeprefix('ml.')} bs {r.batch_size}{_setting(r)}": a.steady_samples(r)
        for r in ordered
    }
    if not any(len(v) >= 2 for v in samples.values()):
        return None
    more = (
        f"; first {MAX_PANELS} configurations, the recommended one first."
        if len(samples) > MAX_PANELS
        else "."
    )
    return (
        "Steady step times per configuration (p1-p99, pooled over repetitions) with the fitted normal curve"
        + more,
        figure_png(distribution_figure(samples)),
    )


def _setting(r: ConfigMetrics) -> str:
    """`` dtype=bfloat16``: a configuration's setting in a label (``""`` without axes)."""
    from trainsweep.axes import label

    return f" {label(r.axes)}" if r.axes else ""


def _run_plots(
    a: SweepAnalysis, pick: ConfigMetrics | None, out: dict[str, tuple[str, bytes]]
) -> dict[str, tuple[str, bytes]]:
    """``out`` with the per-rank timeline and the pick's step-time plots added."""
    from trainsweep.plots import figure_png
    from trainsweep.plots.run import step_times_figure

    timeline = _rank_timeline(a, pick)
    if timeline is not None:
        out["rank-timeline"] = timeline
    pairs = [(run, m) for run, m in a.runs_of(pick) if m.status == "ok"] if pick is not None else []
    for run, _ in pairs[:3]:
        out[f"step-times-{_safe(run.name)}"] = (
            f"Step times per epoch of {run.name} (recommended configuration).",
            figure_png(step_times_figure(run)),
        )
    return out


def _rank_timeline(a: SweepAnalysis, pick: ConfigMetrics | None) -> tuple[str, bytes] | None:
    """The per-rank timeline of the recommended configuration's run, unless another configuration shows
    several ranks; None when no run has steps."""
    from trainsweep.plots import figure_png
    from trainsweep.plots.steps import rank_timeline_figure

    ok_runs = [
        run for run, m in zip(a.runs, a.run_metrics, strict=True) if m.status == "ok" and run.steps_total
    ]
    if not ok_runs:
        return None
    pick_runs = [run for run, m in a.runs_of(pick) if m.status == "ok"] if pick is not None else []
    widest = max(ok_runs, key=lambda r: len(r.ranks))
    shown = pick_runs[0] if pick_runs and len(pick_runs[0].ranks) >= len(widest.ranks) else widest
    why = "recommended configuration" if pick_runs and shown is pick_runs[0] else "the run with most ranks"
    return (
        f"Per-rank timeline of steps 2-61 of {shown.name} ({why}).",
        figure_png(rank_timeline_figure(shown)),
    )


def sweep_artefacts(
    runs: list[RunTimings],
    *,
    spec: Any = None,
    jobs: list[dict] | None = None,
    quality: Any = None,
    region: str = "us-east-1",
    deadline_s: float | None = None,
    budget_usd: float | None = None,
    title: str | None = None,
    prices: Mapping[str, float] | None = None,
) -> dict[str, bytes]:
    """The sweep's artefacts as ``{relative path under the results root: bytes}``.

    Args:
        runs: every parsed run of the sweep (failed ones included).
        spec: the sweep spec (dict or ``SweepSpec``): epochs to predict for, instance count, region.
        jobs: per-job status records ``{run_name, instance_type, batch_size, status, reason, billable_s}``;
            cells that left no run appear as failed/infeasible rows.
        quality: the import's data-quality findings (``quality.json``), shown in the report.
        region: prices' region (the spec's region wins).
        deadline_s, budget_usd: constraints for the recommendation.
        title: the report's name (default: the spec's name, else "sweep").
        prices: USD per hour of SageMaker types as the sweep's plan priced them (``jobs.json``'s
            ``hourly_usd``); they win over the catalogue.
    """
    from trainsweep.report.html import render_report

    a = analyse(
        runs,
        spec=spec,
        jobs=jobs,
        quality=quality,
        region=region,
        deadline_s=deadline_s,
        budget_usd=budget_usd,
        prices=prices,
    )
    plots = sweep_plots(a)
    out: dict[str, bytes] = {
        layout.SWEEP_CSV: sweep_csv(a.rows),
        layout.SWEEP_JSON: sweep_json(a),
    }
    for name, (_, png) in plots.items():
        out[layout.plot_path(name)] = png
    out[layout.REPORT_HTML] = render_report(a, plots, title=title)
    return out


def load_results(
    root: Any, *, top: Any = None
) -> tuple[list[RunTimings], Any, list[dict] | None, Any, list[str]]:
    """Read a results root on disk: run records (``runs/*.json``), ``quality.json``, ``jobs.json``,
    ``spec.json`` (each optional but the runs).

    ``quality.json`` is also looked for in the folders between ``root`` and ``top`` (``trainsweep import``
    writes one for all the results roots it creates, at the top of its output).
    Returns ``(runs, quality, jobs, spec, problems)``; unreadable files are skipped and named in ``problems``.
    """
    from pathlib import Path

    from trainsweep.logs.model import RecordVersionError

    root = Path(root)
    runs: list[RunTimings] = []
    problems: list[str] = []
    for p in sorted((root / layout.RUNS_DIR).glob("*.json")):
        try:
            runs.append(RunTimings.from_record(json.loads(p.read_text(encoding="utf-8"))))
        except (OSError, ValueError, KeyError, RecordVersionError) as e:
            problems.append(f"{p.name}: {e}")
    qp = root / layout.QUALITY_JSON
    if top is not None and not qp.is_file():
        top_path = Path(top).resolve()
        for parent in root.resolve().parents:
            if (parent / layout.QUALITY_JSON).is_file():
                qp = parent / layout.QUALITY_JSON
                break
            if parent == top_path:
                break
    quality = _read_json(qp, problems)
    # The aggregated sweep's final cell statuses ("cells"); a bare list is taken as such too.
    # Planned jobs alone carry no outcome, so they are not read as statuses.
    data = _read_json(root / layout.JOBS_JSON, problems)
    jobs = data.get("cells") if isinstance(data, Mapping) else data
    if jobs is not None and not isinstance(jobs, list):
        problems.append(f"{layout.JOBS_JSON}: expected a list of job records")
        jobs = None
    spec = _read_json(root / layout.SPEC_JSON, problems)
    return runs, quality, jobs, spec, problems


def _read_json(path: Path, problems: list[str]) -> Any:
    """The JSON in ``path``, or None when it is absent or unreadable (then named in ``problems``)."""
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        problems.append(f"{path.name}: {e}")
        return None
