"""From runs (+ spec, job records, quality findings) to the sweep analysis the artefacts are built from."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainsweep import instances
from trainsweep.cost import billing
from trainsweep.cost.axis_effects import axis_names, best_settings
from trainsweep.cost.metrics import (
    FAILED,
    OK,
    ConfigMetrics,
    RunMetrics,
    aggregate,
    job_status,
    run_metrics,
    run_steady_steps,
    unmatched_metrics,
)
from trainsweep.cost.prices import prices_said
from trainsweep.cost.recommend import Recommendation, recommend
from trainsweep.cost.throughput import spec_tokens_per_sample
from trainsweep.logs import mllog
from trainsweep.logs.model import RunTimings
from trainsweep.training import cpu_wait
from trainsweep.training.metric_lines import TargetRule, default_direction

DEFAULT_QUALITY_MARGIN = 0.02
"""The quality margin when no spec says (== ``trainsweep.spec.DEFAULT_QUALITY_MARGIN``)."""

SWEEP_KIND = "trainsweep.sweep"
SWEEP_SCHEMA_VERSION = 1


@dataclass
class SweepAnalysis:
    runs: list[RunTimings]
    run_metrics: list[RunMetrics]
    rows: list[ConfigMetrics]
    recommendation: Recommendation
    region: str
    epochs: int | None
    instance_count: int
    overhead_s: float
    prices: str
    spec: dict[str, Any] | None = None
    quality: Any = None
    warnings: list[dict[str, Any]] = field(default_factory=list)
    """Data-quality findings: the import's quality.json entries plus every run's own problems."""
    batch_size_search: dict[str, dict[str, Any]] = field(default_factory=dict)
    """``batch_sizes: auto``: per instance type, what :func:`search_summary` says."""
    best_settings: list[dict[str, Any]] = field(default_factory=list)
    """A sweep with axes: per instance type, its fastest and cheapest setting
    (:func:`trainsweep.cost.axis_effects.best_settings`); empty without axes."""

    def runs_of(self, row: ConfigMetrics) -> list[tuple[RunTimings, RunMetrics]]:
        return [
            (r, m)
            for r, m in zip(self.runs, self.run_metrics, strict=True)
            if m.instance_type == row.instance_type
            and m.batch_size == row.batch_size
            and m.platform == row.platform
            and m.axes == row.axes
        ]

    @property
    def priced(self) -> bool:
        """Whether any configuration has a price above 0 (local runs cost nothing)."""
        return any(r.usd_per_hour for r in self.rows)

    def steady_samples(self, row: ConfigMetrics) -> list[float]:
        """Steady step times of all ok runs of a configuration (pooled over repetitions)."""
        out: list[float] = []
        for run, m in self.runs_of(row):
            if m.status == "ok":
                out.extend(run_steady_steps(run, m))
        return out


def _spec_dict(spec: Any) -> dict[str, Any] | None:
    if spec is None:
        return None
    if hasattr(spec, "to_dict"):
        return dict(spec.to_dict())
    if hasattr(spec, "model_dump"):
        return dict(spec.model_dump())
    return dict(spec)


def _job_key(job: Mapping[str, Any]) -> str | None:
    name = job.get("run_name") or job.get("job_name")
    return str(name) if name else None


def _entry(item: Any, run: str = "", source: str = "import") -> dict[str, Any]:
    if not isinstance(item, Mapping):
        return {
            "source": source,
            "run": run,
            "code": "",
            "severity": "warning",
            "message": str(item),
            "line": None,
        }
    return {
        "source": source,
        "run": run or item.get("run") or item.get("run_name") or item.get("name") or item.get("path") or "",
        "code": item.get("code") or item.get("check") or item.get("kind") or "",
        "severity": item.get("severity") or "warning",
        "message": item.get("message") or item.get("reason") or item.get("detail") or str(dict(item)),
        "line": item.get("line"),
    }


def _quality_entries(quality: Any) -> list[dict[str, Any]]:
    """Flatten the import's ``quality.json`` (per-file problems, skipped files, notes) or a list."""
    if quality is None:
        return []
    if isinstance(quality, list):
        return [_entry(it) for it in quality]
    if not isinstance(quality, Mapping):
        return [_entry(quality)]
    out: list[dict[str, Any]] = []
    for f in quality.get("files") or []:
        if isinstance(f, Mapping):
            run = str(f.get("run_name") or f.get("path") or "")
            out.extend(_entry(p, run) for p in f.get("problems") or [])
    for key in ("problems", "warnings", "findings", "checks", "issues"):
        if isinstance(quality.get(key), list):
            out.extend(_entry(p) for p in quality[key])
    for sk in quality.get("skipped") or []:
        e = _entry(sk)
        e["code"] = e["code"] or "import.skipped"
        if isinstance(sk, Mapping) and sk.get("path"):
            e["message"] = f"skipped {sk['path']}: {e['message']}"
        out.append(e)
    out.extend(_entry(n, source="import") for n in quality.get("notes") or [])
    return out


def duplicate_groups(quality: Any) -> list[list[str]]:
    """Run names the import found to be copies of each other (identical bytes or identical timings)."""
    if not isinstance(quality, Mapping):
        return []
    names = {f.get("path"): f.get("run_name") for f in quality.get("files") or [] if isinstance(f, Mapping)}
    groups = []
    for group in quality.get("duplicates") or []:
        if isinstance(group, Mapping):
            runs = sorted({names.get(p) or "" for p in group.get("paths") or []} - {""})
            kept = names.get(group.get("kept"))
            if kept in runs:  # the import's choice first (see copies_to_drop)
                runs.remove(kept)
                runs.insert(0, kept)
            if len(runs) > 1:
                groups.append(runs)
    return groups


def _contradicted(run: RunTimings | None) -> bool:
    return run is not None and any("contradicts" in p.code for p in run.problems)


def copies_to_drop(groups: Sequence[Sequence[str]], runs: Mapping[str, RunTimings]) -> dict[str, str]:
    """``{run name: the run it copies}`` for all but one member of each duplicate group.

    The member kept is the first whose header does not contradict its name (the import's ``kept`` copy
    comes first, else by name): a byte-identical copy filed under another instance type is the misfiled
    one, and a copy that contradicts its name is never kept over one that does not.
    """
    out: dict[str, str] = {}
    for group in groups:
        keep = next((n for n in group if not _contradicted(runs.get(n))), group[0])
        for name in group:
            if name != keep:
                out[name] = keep
    return out


def _unpack_bills(jobs: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Drop the bill of runs that shared one job (``packing: per-instance``).

    A packed job's bill is split evenly among its runs, so it carries one job overhead for several
    configurations; training with one configuration costs its own job, which the model gives.
    """
    per_job = Counter(str(j["job_name"]) for j in jobs if j.get("job_name"))
    out: list[Mapping[str, Any]] = []
    for j in jobs:
        if per_job[str(j.get("job_name"))] > 1 and j.get("billable_s") is not None:
            j = {**j, "billable_s": None, "packed_billable_s": j["billable_s"]}
        out.append(j)
    return out


def search_summary(rows: Sequence[ConfigMetrics]) -> dict[str, dict[str, Any]]:
    """Per instance type of a ``batch_sizes: auto`` sweep: the feasible range (the batch sizes that
    trained), the largest, the batch size that ran out of memory, and why the search stopped."""
    out: dict[str, dict[str, Any]] = {}
    for itype in dict.fromkeys(r.instance_type for r in rows):
        mine = sorted((r for r in rows if r.instance_type == itype), key=lambda r: r.batch_size or 0)
        ok = [r.batch_size for r in mine if r.status == "ok" and r.batch_size is not None]
        tried_oom = [
            r.batch_size
            for r in mine
            if r.status == "infeasible" and "not run:" not in r.notes and r.batch_size is not None
        ]
        plateau = any("throughput stopped improving" in r.notes for r in mine)
        stopped = "out of memory" if tried_oom else ("plateau" if plateau else "max")
        out[itype] = {
            "feasible": [min(ok), max(ok)] if ok else None,
            "largest_feasible": max(ok) if ok else None,
            "out_of_memory_at": min(tried_oom) if tried_oom else None,
            "stopped": stopped,
            "curve": [
                {"batch_size": r.batch_size, "samples_per_s": r.samples_per_s}
                for r in mine
                if r.status == "ok" and r.samples_per_s is not None
            ],
        }
    return out


def target_of(spec: Mapping[str, Any] | None) -> TargetRule | None:
    """The spec's ``target`` (metric, value, direction), or None (no target, or not one it can read)."""
    t = (spec or {}).get("target")
    if not isinstance(t, Mapping):
        return None
    value = t.get("value")
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        return None
    metric = str(t.get("metric") or "eval_accuracy")
    direction = t.get("direction") or default_direction(metric)
    return TargetRule.of(metric, float(value), minimize=direction == "minimize")


def _unmatched_entries(runs: Sequence[RunTimings]) -> list[dict[str, Any]]:
    """A warning per metric definition that never matched a run's output (not "no evaluation": the
    regex, or the script's output, is what to check)."""
    return [
        {
            "source": "analysis",
            "run": r.name,
            "code": "metric-unmatched",
            "severity": "warning",
            "message": f"metric {name} never matched the output",
            "line": None,
        }
        for r in runs
        for name in unmatched_metrics(r)
    ]


def common_epochs(runs: Sequence[RunTimings]) -> int | None:
    """The epochs to compare configurations at when no spec says: the most common requested (or, when
    the header does not say, measured) epoch count among the runs; ties go to the larger count."""
    counts: dict[int, int] = {}
    for r in runs:
        n = r.header.epochs or sum(1 for e in r.epochs if e.steps or e.epoch_s)
        if n:
            counts[n] = counts.get(n, 0) + 1
    if not counts:
        return None
    return max(counts, key=lambda n: (counts[n], n))


def analyse(
    runs: Sequence[RunTimings],
    *,
    spec: Any = None,
    jobs: Sequence[Mapping[str, Any]] | None = None,
    quality: Any = None,
    region: str = "us-east-1",
    deadline_s: float | None = None,
    budget_usd: float | None = None,
    overhead_s: float = billing.FIXED_OVERHEAD_S,
    prices: Mapping[str, float] | None = None,
) -> SweepAnalysis:
    """Compute every figure of the sweep: per run, per configuration, and the recommendation.

    ``prices``: USD per hour of the sweep's SageMaker types as its plan priced them (they win over the
    catalogue: PlanSweep priced a region the catalogue may not know)."""
    spec_d = _spec_dict(spec)
    epochs, instance_count, margin, target = _spec_settings(spec_d)
    region = (spec_d or {}).get("region") or region
    if epochs is None:
        epochs = common_epochs(runs)
    jobs = _unpack_bills(list(jobs or []))
    by_name = {k: j for j in jobs if (k := _job_key(j))}
    runs = list(runs)
    copies = copies_to_drop(duplicate_groups(quality), {r.name: r for r in runs})
    excluded = [r for r in runs if r.name in copies]
    runs = [r for r in runs if r.name not in copies]
    value = target.value if target else None
    goal = target or TargetRule(mllog.EVAL_ACCURACY, 0.0)
    metrics = [
        run_metrics(
            r,
            epochs=epochs,
            job=by_name.get(r.name),
            overhead_s=overhead_s,
            target_value=value,
            target_metric=goal.metric,
            minimize=goal.minimize,
            tokens_per_sample=spec_tokens_per_sample(spec_d),
        )
        for r in runs
    ]
    seen = {r.name for r in runs} | set(copies)  # a left-out copy's job is not a cell without a run
    extra = [_cell_without_run(j, instance_count) for j in jobs if _job_key(j) not in seen]
    rows = aggregate(
        metrics,
        region=region,
        instance_count=instance_count,
        extra_cells=extra,
        prices=prices,
        quality_margin=margin,
        target=value,
        target_metric=goal.metric,
        minimize=goal.minimize,
    )
    said = _target_said(target)
    rec = recommend(rows, deadline_s=deadline_s, budget_usd=budget_usd, target=said)
    warnings = _warnings(quality, runs, metrics, excluded, copies)
    return SweepAnalysis(
        batch_size_search=search_summary(rows) if (spec_d or {}).get("batch_size_search") else {},
        best_settings=_best_settings(rows),
        runs=runs,
        run_metrics=metrics,
        rows=rows,
        recommendation=rec,
        region=region,
        epochs=epochs,
        instance_count=instance_count,
        overhead_s=overhead_s,
        prices=prices_said(prices, "the sweep's plan", region),
        spec=spec_d,
        quality=quality,
        warnings=warnings,
    )


def _spec_settings(
    spec_d: Mapping[str, Any] | None,
) -> tuple[int | None, int, float | None, TargetRule | None]:
    """What the spec says of the analysis: epochs, instance count, quality margin, target."""
    if not spec_d:
        return None, 1, DEFAULT_QUALITY_MARGIN, None
    return (
        (spec_d.get("workload") or {}).get("epochs"),
        int(spec_d.get("instance_count") or 1),
        spec_d.get("quality_margin", DEFAULT_QUALITY_MARGIN),
        target_of(spec_d),
    )


_ExtraCell = tuple[str, int | None, str, str | None, int, Any]


def _cell_without_run(job: Mapping[str, Any], instance_count: int) -> _ExtraCell:
    """A planned cell that left no run, as :func:`trainsweep.cost.metrics.aggregate` takes it: its
    status normalised as a job with a run is (:func:`job_status`); one that ended well failed."""
    bs = job.get("batch_size")
    status = job_status(job) or FAILED
    reason = job.get("reason")
    if status == OK:
        ended = str(job.get("status") or "").strip().lower()
        status, reason = FAILED, reason or f"job {ended} but no log was parsed"
    count = int(job.get("instance_count") or instance_count)
    itype = str(job.get("instance_type") or "unknown")
    return itype, int(bs) if bs is not None else None, status, reason, count, job.get("axes")


def _analysis_warning(run: str, code: str, message: str) -> dict[str, Any]:
    return {
        "source": "analysis",
        "run": run,
        "code": code,
        "severity": "warning",
        "message": message,
        "line": None,
    }


def _warnings(
    quality: Any,
    runs: Sequence[RunTimings],
    metrics: Sequence[RunMetrics],
    excluded: Sequence[RunTimings],
    copies: Mapping[str, str],
) -> list[dict[str, Any]]:
    """The report's data-quality findings: the import's, the copies left out, metrics never matched,
    each run's own problems (once), instance types the catalogue does not know, settings runs did not
    honour (:mod:`trainsweep.honoured`)."""
    warnings = _quality_entries(quality)
    warnings.extend(
        _analysis_warning(
            r.name,
            "excluded-duplicate",
            f"left out of the sweep table: a copy of {copies[r.name]}, not a repetition",
        )
        for r in excluded
    )
    warnings.extend(_unmatched_entries(runs))
    seen_w = {(w["run"], w["code"], w["message"], w["line"]) for w in warnings}
    warnings.extend(
        {
            "source": "parser",
            "run": r.name,
            "code": p.code,
            "severity": p.severity,
            "message": p.message,
            "line": p.line,
        }
        for r in runs
        for p in r.problems
        if (r.name, p.code, p.message, p.line) not in seen_w
    )
    warnings.extend(_unknown_types(metrics))
    warnings.extend(
        _analysis_warning(m.name, "setting-not-honoured", text) for m in metrics for text in m.not_honoured
    )
    warnings.extend(
        _analysis_warning(m.name, cpu_wait.FINDING, f"the training process {cpu_wait.said(m.cpu_wait_share)}")
        for m in metrics
        if m.cpu_wait_share is not None and cpu_wait.contended(m.cpu_wait_share, m.cpu_wait_s)
    )
    return warnings


def _unknown_types(metrics: Sequence[RunMetrics]) -> list[dict[str, Any]]:
    """A warning per instance type the catalogue does not know (no price, no GPU count)."""
    unknown = sorted(
        {m.instance_type for m in metrics if m.instance_type and m.instance_type not in instances.CATALOGUE}
    )
    out = []
    for itype in unknown:
        named = [m.name for m in metrics if m.instance_type == itype]
        runs = ", ".join(named[:3]) + (f" and {len(named) - 3} more" if len(named) > 3 else "")
        message = f"{itype!r} is not in the instance catalogue: no price, no GPU count"
        out.append(_analysis_warning(runs, "unknown-instance-type", message))
    return out


def _target_said(target: TargetRule | None) -> str | None:
    """``eval_accuracy >= 0.97``: the target as the recommendation says it (None: no target)."""
    if target is None:
        return None
    return f"{target.metric} {'<=' if target.minimize else '>='} {target.value:g}"


def _best_settings(rows: Sequence[ConfigMetrics]) -> list[dict[str, Any]]:
    """Per instance type, the fastest and cheapest setting of a sweep with axes; [] without axes."""
    if not axis_names(rows):
        return []
    return best_settings(rows, priced=any(r.usd_per_hour for r in rows))


def clean(x: Any) -> Any:
    """JSON-safe: NaN/inf become None, recursively."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, Mapping):
        return {str(k): clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean(v) for v in x]
    return x
