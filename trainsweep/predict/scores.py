"""Figures over many replays: errors, interval coverage, share watched, rankings, per family and class."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from trainsweep.predict.replays import ReplayResult


def _percentile(x: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default), q in [0, 100]."""
    y = sorted(x)
    if not y:
        return math.nan
    pos = (len(y) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(y) - 1)
    return y[lo] + (y[hi] - y[lo]) * (pos - lo)


def _kendall_tau(a: Sequence[float], b: Sequence[float]) -> float:
    n = len(a)
    concordant = discordant = 0
    for i in range(n):
        for j in range(i + 1, n):
            s = (a[i] - a[j]) * (b[i] - b[j])
            concordant += s > 0
            discordant += s < 0
    pairs = n * (n - 1) / 2
    return (concordant - discordant) / pairs if pairs else 1.0


def ranking_by_grid(results: Sequence[ReplayResult], group: dict[str, str]) -> list[dict[str, Any]]:
    """Per grid (``group[log]`` x computing system): batch sizes ordered by predicted vs actual epoch time.

    Repetitions of a batch size are averaged first. ``same_order`` is True when both orders agree.
    """
    cells: dict[tuple[str, str], dict[int, list[tuple[float, float]]]] = {}
    for r in results:
        if r.predicted_epoch_s is None or r.actual_epoch_s is None or r.batch_size is None:
            continue
        key = (group.get(r.log, ""), r.computing_system or "?")
        cells.setdefault(key, {}).setdefault(r.batch_size, []).append((r.predicted_epoch_s, r.actual_epoch_s))
    out = []
    for (grid, system), by_bs in sorted(cells.items()):
        if len(by_bs) < 2:
            continue
        sizes = sorted(by_bs)
        pred = [sum(p for p, _ in by_bs[b]) / len(by_bs[b]) for b in sizes]
        act = [sum(a for _, a in by_bs[b]) / len(by_bs[b]) for b in sizes]
        order_pred = [b for _, b in sorted(zip(pred, sizes, strict=True))]
        order_act = [b for _, b in sorted(zip(act, sizes, strict=True))]
        out.append(
            {
                "grid": grid,
                "computing_system": system,
                "batch_sizes": sizes,
                "order_predicted": order_pred,
                "order_actual": order_act,
                "same_order": order_pred == order_act,
                "kendall_tau": _kendall_tau(pred, act),
            }
        )
    return out


def summarize(results: Sequence[ReplayResult], group: dict[str, str] | None = None) -> dict[str, Any]:
    """Aggregate figures over the logs that have unwatched epochs to compare with."""
    scored = [r for r in results if r.error is not None]
    err = [abs(r.error) for r in scored if r.error is not None]
    base = [abs(r.baseline_error) for r in scored if r.baseline_error is not None]
    covered = [bool(r.covered) for r in scored if r.covered is not None]
    share = [r.share_of_log_watched for r in scored if r.share_of_log_watched is not None]
    share90 = [r.share_of_90_epochs_watched for r in scored if r.share_of_90_epochs_watched is not None]
    ranking = ranking_by_grid(scored, group or {})
    return {
        "logs": len(results),
        "logs_scored": len(scored),
        "median_abs_error": _percentile(err, 50),
        "p95_abs_error": _percentile(err, 95),
        "max_abs_error": max(err) if err else math.nan,
        "interval_coverage": sum(covered) / len(covered) if covered else math.nan,
        "baseline_median_abs_error": _percentile(base, 50),
        "baseline_p95_abs_error": _percentile(base, 95),
        "max_epochs_watched": max((r.epochs_watched for r in scored), default=0),
        "median_share_of_log_watched": _percentile(share, 50),
        "median_share_of_90_epochs_watched": _percentile(share90, 50),
        "max_share_of_90_epochs_watched": max(share90) if share90 else math.nan,
        "grids": len(ranking),
        "grids_same_order": sum(g["same_order"] for g in ranking),
        "ranking": ranking,
        "families": family_summary(results),
        "classes": class_summary(results),
    }


def family_summary(results: Sequence[ReplayResult]) -> dict[str, dict[str, Any]]:
    """Per family (and ``pooled``): logs, logs scored, median |error|, interval coverage, baseline."""
    return group_summary(results, lambda r: r.family)


def class_summary(results: Sequence[ReplayResult]) -> dict[str, dict[str, Any]]:
    """:func:`family_summary` per instance class (and ``pooled``)."""
    return group_summary(results, lambda r: r.instance_class)


def group_summary(
    results: Sequence[ReplayResult], key: Callable[[ReplayResult], str | None]
) -> dict[str, dict[str, Any]]:
    """Per group ``key`` gives (``unknown`` for None; and ``pooled``): see :func:`family_summary`."""
    groups: dict[str, list[ReplayResult]] = {"pooled": list(results)}
    for r in results:
        groups.setdefault(key(r) or "unknown", []).append(r)
    out = {}
    for name, rs in groups.items():
        scored = [r for r in rs if r.error is not None]
        covered = [bool(r.covered) for r in scored if r.covered is not None]
        out[name] = {
            "logs": len(rs),
            "logs_scored": len(scored),
            "median_abs_error": _percentile([abs(r.error) for r in scored if r.error is not None], 50),
            "p95_abs_error": _percentile([abs(r.error) for r in scored if r.error is not None], 95),
            "interval_coverage": sum(covered) / len(covered) if covered else math.nan,
            "baseline_median_abs_error": _percentile(
                [abs(r.baseline_error) for r in scored if r.baseline_error is not None], 50
            ),
            "median_epoch_jitter": _percentile(
                [r.epoch_jitter for r in scored if r.epoch_jitter is not None], 50
            ),
            "median_interval_half_width": _percentile(
                [w for r in scored if (w := r.interval_half_width) is not None], 50
            ),
        }
    return out
