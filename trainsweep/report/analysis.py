"""From runs (+ spec, job records, quality findings) to the sweep analysis the artefacts are built from."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainsweep import instances
from trainsweep.cost import billing
from trainsweep.cost.metrics import ConfigMetrics, RunMetrics, aggregate, run_metrics, steady_steps
from trainsweep.cost.prices import price_source
from trainsweep.cost.recommend import Recommendation, recommend
from trainsweep.logs.model import RunTimings

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

    def runs_of(self, row: ConfigMetrics) -> list[tuple[RunTimings, RunMetrics]]:
        return [
            (r, m)
            for r, m in zip(self.runs, self.run_metrics, strict=True)
            if m.instance_type == row.instance_type and m.batch_size == row.batch_size
        ]

    def steady_samples(self, row: ConfigMetrics) -> list[float]:
        """Steady step times of all ok runs of a configuration (pooled over repetitions)."""
        out: list[float] = []
        for run, m in self.runs_of(row):
            if m.status == "ok":
                out.extend(steady_steps(run.epochs))
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


def _quality_entries(quality: Any) -> list[dict[str, Any]]:
    """Accept the import's quality.json in any of its plausible shapes: list, or dict of lists."""
    if quality is None:
        return []
    if isinstance(quality, list):
        items = quality
    elif isinstance(quality, Mapping):
        items = []
        for key in ("problems", "warnings", "findings", "checks", "issues"):
            if isinstance(quality.get(key), list):
                items.extend(quality[key])
        if not items:
            items = [{"run": k, "message": v} for k, v in quality.items() if not isinstance(v, (dict, list))]
    else:
        items = [{"message": str(quality)}]
    out = []
    for it in items:
        if isinstance(it, Mapping):
            out.append(
                {
                    "source": "import",
                    "run": it.get("run") or it.get("run_name") or it.get("name") or it.get("file") or "",
                    "code": it.get("code") or it.get("check") or "",
                    "severity": it.get("severity") or "warning",
                    "message": it.get("message") or it.get("detail") or str(dict(it)),
                    "line": it.get("line"),
                }
            )
        else:
            out.append({"source": "import", "run": "", "code": "", "severity": "warning", "message": str(it)})
    return out


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
) -> SweepAnalysis:
    """Compute every figure of the sweep: per run, per configuration, and the recommendation."""
    spec_d = _spec_dict(spec)
    epochs = None
    instance_count = 1
    if spec_d:
        epochs = (spec_d.get("workload") or {}).get("epochs")
        instance_count = int(spec_d.get("instance_count") or 1)
        region = spec_d.get("region") or region
    jobs = list(jobs or [])
    by_name = {k: j for j in jobs if (k := _job_key(j))}
    runs = list(runs)
    metrics = [run_metrics(r, epochs=epochs, job=by_name.get(r.name), overhead_s=overhead_s) for r in runs]
    seen = {r.name for r in runs}
    extra = []
    for j in jobs:
        if _job_key(j) in seen:
            continue
        itype = str(j.get("instance_type") or "unknown")
        bs = j.get("batch_size")
        status = str(j.get("status") or "failed").lower()
        status = (
            "infeasible" if status == "infeasible" else ("ok" if status in ("ok", "completed") else "failed")
        )
        reason = j.get("reason") or ("completed but no log was parsed" if status == "ok" else None)
        extra.append(
            (itype, int(bs) if bs is not None else None, "failed" if status == "ok" else status, reason)
        )
    rows = aggregate(metrics, region=region, instance_count=instance_count, extra_cells=extra)
    rec = recommend(rows, deadline_s=deadline_s, budget_usd=budget_usd)
    warnings = _quality_entries(quality)
    for r in runs:
        for p in r.problems:
            warnings.append(
                {
                    "source": "parser",
                    "run": r.name,
                    "code": p.code,
                    "severity": p.severity,
                    "message": p.message,
                    "line": p.line,
                }
            )
    for m in metrics:
        if m.instance_type and m.instance_type not in instances.CATALOGUE:
            warnings.append(
                {
                    "source": "analysis",
                    "run": m.name,
                    "code": "unknown-instance-type",
                    "severity": "warning",
                    "message": f"{m.instance_type!r} is not in the instance catalogue: no price",
                    "line": None,
                }
            )
    return SweepAnalysis(
        runs=runs,
        run_metrics=metrics,
        rows=rows,
        recommendation=rec,
        region=region,
        epochs=epochs,
        instance_count=instance_count,
        overhead_s=overhead_s,
        prices=price_source(region),
        spec=spec_d,
        quality=quality,
        warnings=warnings,
    )


def clean(x: Any) -> Any:
    """JSON-safe: NaN/inf become None, recursively."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, Mapping):
        return {str(k): clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean(v) for v in x]
    return x
