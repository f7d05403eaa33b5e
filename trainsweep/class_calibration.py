"""The early-stop interval per instance class: a factor on the family's epoch jitter, and the fallback
for a class the calibration has no factor for (:class:`trainsweep.predict.Calibration` applies them).

A class's factor is split-conformal over its logs' needed jitter divided by their family's fitted
jitter. The unseen-class fallback of a kind (``cpu``, ``gpu``) is an upper prediction bound for the
factor of a class the calibration has not seen, from the spread of the seen classes' held-out factors:
each seen class held out in turn, the family jitters refitted without it, its logs' factor fitted
against those (:func:`held_out_factors`); then :func:`unseen_factor` over their logarithms.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trainsweep.instance_class import CPU, kind
from trainsweep.predict import (
    COVERAGE_GOAL,
    JitterCalibration,
    ReplayResult,
    conformal_quantile,
    family_jitters,
    needed_jitter,
    t_quantile,
)


@dataclass(frozen=True)
class ClassCalibration:
    """How much one instance class widens its family's epoch jitter (applied at least 1)."""

    factor: float | None
    """Split-conformal over the class's logs of (needed jitter / their family's jitter); None when too
    few logs for that."""
    logs: int
    families: int
    cv_logs: int = 0
    cv_interval_coverage: float | None = None
    cv_median_abs_error: float | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ClassCalibration:
        return cls(**{k: v for k, v in d.items() if k != "validated"})

    @property
    def validated(self) -> bool:
        c = self.cv_interval_coverage
        return c is not None and COVERAGE_GOAL[0] <= c <= COVERAGE_GOAL[1]


def class_scores(
    logs: Sequence[ReplayResult],
    pooled: JitterCalibration,
    families: dict[str, JitterCalibration],
    interval: float,
) -> list[float]:
    """Each log's needed jitter over its family's fitted one (the pooled one where it has none)."""
    out = []
    for r in logs:
        own = families.get(r.family or "")
        base = own.epoch_jitter if own is not None and own.epoch_jitter is not None else pooled.epoch_jitter
        need = needed_jitter(r, interval)
        if base and need is not None:
            out.append(need / base)
    return out


MIN_CLASSES = 3
"""Held-out factors a spread is estimated from (two degrees of freedom); with fewer, the widest."""
FACTOR_FLOOR = 0.05
"""A held-out factor counts as at least this in the spread (a class whose logs needed no jitter at all
has a factor of 0, whose logarithm is not finite)."""
KINDS = (CPU, "gpu")


def fit_classes(
    scored: Sequence[ReplayResult],
    experiment: dict[str, str],
    pooled: JitterCalibration,
    families: dict[str, JitterCalibration],
    interval: float,
) -> tuple[dict[str, ClassCalibration], dict[str, float]]:
    """Each instance class's factor, and the unseen-class factor per kind (see :class:`Calibration`)."""
    by_class: dict[str, list[ReplayResult]] = {}
    for r in scored:
        if r.instance_class:
            by_class.setdefault(r.instance_class, []).append(r)
    classes = {
        c: ClassCalibration(
            conformal_quantile(class_scores(rs, pooled, families, interval), interval),
            len(rs),
            len({r.family for r in rs}),
        )
        for c, rs in sorted(by_class.items())
    }
    seen = [c for c, cc in classes.items() if cc.factor is not None]
    held = held_out_factors(scored, experiment, seen, interval)
    unseen = {k: f for k in KINDS if (f := unseen_factor(held, k, interval)) is not None}
    return classes, unseen


def held_out_factors(
    scored: Sequence[ReplayResult], experiment: dict[str, str], seen: Sequence[str], interval: float
) -> dict[str, float]:
    """Per class of ``seen``: the factor its logs needed on the family jitters fitted without them (the
    pooled one where their family goes with them), split-conformal; only the logs of ``scored`` enter."""
    out: dict[str, float] = {}
    for c in seen:
        rest = [r for r in scored if r.instance_class != c]
        pooled_without, families_without = family_jitters(rest, experiment, interval)
        if pooled_without.epoch_jitter is None:
            continue
        logs = [r for r in scored if r.instance_class == c]
        factor = conformal_quantile(class_scores(logs, pooled_without, families_without, interval), interval)
        if factor is not None:
            out[c] = factor
    return out


def unseen_factor(held: dict[str, float], of_kind: str, interval: float) -> float | None:
    """The factor for a class of ``of_kind`` the calibration has not seen (at least 1; None: no classes).

    The held-out factors' logarithms are a sample of classes, the kind's own first: with K of them
    (at least :data:`MIN_CLASSES`), the one-sided ``interval`` Student-t prediction bound for one more
    class, mean + t(K - 1) s sqrt(1 + 1/K). With fewer, too few for a spread: the widest of them. A kind
    with no class at all takes every kind's classes and adds the unknown offset of its kind as one more
    between-class deviation, sqrt(1 + 1/K + 1) (the widest, with fewer than :data:`MIN_CLASSES`).
    """
    own = [f for c, f in held.items() if kind(c) == of_kind]
    sample, offset = (own, 0.0) if own else (list(held.values()), 1.0)
    if not sample:
        return None
    if len(sample) < MIN_CLASSES:
        return max(1.0, *sample)
    logs = [math.log(max(FACTOR_FLOOR, f)) for f in sample]
    k = len(logs)
    mean = sum(logs) / k
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (k - 1))
    bound = mean + upper_t(interval, k - 1) * sd * math.sqrt(1 + 1 / k + offset)
    return max(1.0, math.exp(bound))


def upper_t(p: float, df: int) -> float:
    """Student's t quantile ``p``: exact for 1 and 2 degrees of freedom, :func:`t_quantile` above."""
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    return t_quantile(p, df)
