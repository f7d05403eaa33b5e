"""The early-stop interval per instance class: a factor on the family's epoch jitter, and the fallback
for a class the calibration has no factor for (:class:`trainsweep.predict.Calibration` applies them).

A class's factor is split-conformal over its logs' needed multiple divided by their family's fitted
multiple (both multiples of each log's own noise, :func:`trainsweep.predict.run_noise`). The
unseen-class fallback of a kind (``cpu``, ``gpu``) is set at the interval's level: each seen class
held out in turn, the family multiples refitted without it, its logs scored against those
(:func:`held_out_scores`); the fallback is the factor that covers ``interval`` of those held-out logs,
each class weighing the same (:func:`unseen_factor`). A second fallback, for runs whose family part is
the pooled multiple (an instrumented script's), is fitted the same way over the pooled multiple. A kind
with no class of its own takes a prediction bound over every kind's held-out class factors
(:func:`prediction_bound`).
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
    family_multiples,
    needed_multiple,
    t_quantile,
)


@dataclass(frozen=True)
class ClassCalibration:
    """How much one instance class widens its family's epoch jitter (applied at least 1)."""

    factor: float | None
    """Split-conformal over the class's logs of (needed multiple / their family's multiple); None when too
    few logs for that."""
    logs: int
    families: int
    cv_logs: int = 0
    cv_interval_coverage: float | None = None
    cv_median_abs_error: float | None = None
    pooled_factor: float | None = None
    """The same over the pooled multiple: the factor for a run of the class whose family part is the
    pooled multiple (its family unknown, or with too few logs). The class's logs needed more than the
    pooled multiple where their own family's was higher (the CPU's, whose runs move more between epochs
    for their noise than the GPU runs that make most of the pool)."""

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
    """Each log's needed multiple over its family's fitted one (the pooled one where it has none)."""
    out = []
    for r in logs:
        own = families.get(r.family or "")
        base = pooled.noise_multiple if own is None or own.noise_multiple is None else own.noise_multiple
        need = needed_multiple(r, interval)
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
) -> tuple[dict[str, ClassCalibration], dict[str, float], dict[str, float]]:
    """Each instance class's factor, and the unseen-class factor per kind over the family multiples and
    over the pooled one (see :class:`Calibration`)."""
    by_class: dict[str, list[ReplayResult]] = {}
    for r in scored:
        if r.instance_class:
            by_class.setdefault(r.instance_class, []).append(r)
    classes = {
        c: ClassCalibration(
            conformal_quantile(class_scores(rs, pooled, families, interval), interval),
            len(rs),
            len({r.family for r in rs}),
            pooled_factor=conformal_quantile(class_scores(rs, pooled, {}, interval), interval),
        )
        for c, rs in sorted(by_class.items())
    }
    seen = [c for c, cc in classes.items() if cc.factor is not None]
    unseen: dict[str, float] = {}
    over_pooled: dict[str, float] = {}
    for base, out in ((False, unseen), (True, over_pooled)):
        held = held_out_scores(scored, experiment, seen, interval, over_pooled=base)
        out.update({k: f for k in KINDS if (f := unseen_factor(held, k, interval)) is not None})
    return classes, unseen, over_pooled


def held_out_scores(
    scored: Sequence[ReplayResult],
    experiment: dict[str, str],
    seen: Sequence[str],
    interval: float,
    *,
    over_pooled: bool = False,
) -> dict[str, list[float]]:
    """Per class of ``seen``: its logs' needed multiple over the family multiples fitted without them (the
    pooled one where their family goes with them; ``over_pooled``: the pooled one for every log, as for a
    run whose family is unknown); only the logs of ``scored`` enter."""
    out: dict[str, list[float]] = {}
    for c in seen:
        rest = [r for r in scored if r.instance_class != c]
        pooled_without, families_without = family_multiples(rest, experiment, interval)
        if pooled_without.noise_multiple is None:
            continue
        logs = [r for r in scored if r.instance_class == c]
        bases = {} if over_pooled else families_without
        if scores := class_scores(logs, pooled_without, bases, interval):
            out[c] = scores
    return out


def unseen_factor(held: dict[str, list[float]], of_kind: str, interval: float) -> float | None:
    """The factor for a class of ``of_kind`` the calibration has not seen (at least 1; None: no classes).

    With held-out classes of the kind (:func:`held_out_scores`): the smallest factor that covers
    ``interval`` of their logs, each class weighing the same however many logs it has, so that a log
    of a new class is covered ``interval`` of the time if the new class is like a seen one drawn at
    random. A kind with none has no log that shows how its classes sit against the others':
    :func:`prediction_bound` over every kind's held-out class factors, its kind's offset counted.
    """
    own = {c: s for c, s in held.items() if kind(c) == of_kind and s}
    if own:
        return max(1.0, class_weighted_quantile(own, interval))
    factors = [f for s in held.values() if (f := conformal_quantile(s, interval)) is not None]
    return prediction_bound(factors, interval, offset=1.0)


def class_weighted_quantile(scores: dict[str, list[float]], q: float) -> float:
    """The smallest score at which the classes' share of scores at or below it reaches ``q``, each
    class's scores weighing 1 / (its number of scores) and the classes alike."""
    weighted = sorted((x, 1 / len(s)) for s in scores.values() for x in s)
    need, reached = q * len(scores), 0.0
    for x, w in weighted:
        reached += w
        if reached >= need - 1e-9:
            return x
    return weighted[-1][0]


def prediction_bound(factors: Sequence[float], interval: float, offset: float = 0.0) -> float | None:
    """An upper ``interval`` prediction bound for one more class's factor over ``factors`` (at least 1;
    None: none).

    Their logarithms are a sample of classes: with K of them (at least :data:`MIN_CLASSES`), the
    one-sided Student-t bound mean + t(K - 1) s sqrt(1 + 1/K + ``offset``), where ``offset`` counts an
    unknown shift of the new class's kind as one more between-class deviation; with fewer, too few for
    a spread, the widest of them.
    """
    if not factors:
        return None
    if len(factors) < MIN_CLASSES:
        return max(1.0, *factors)
    logs = [math.log(max(FACTOR_FLOOR, f)) for f in factors]
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
