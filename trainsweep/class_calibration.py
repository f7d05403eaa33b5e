"""The early-stop interval per instance class: a factor on the family's epoch jitter, and the fallback
for a class the calibration has no factor for (:class:`trainsweep.predict.Calibration` applies them).

A class's factor is split-conformal over its logs' needed jitter divided by their family's fitted
jitter. The unseen-class fallback of a kind (``cpu``, ``gpu``) is what a class of that kind needed when
the calibration had not seen it: each seen class held out in turn, the family jitters refitted without
it, its logs' factor fitted against those; the widest, and at least 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trainsweep.instance_class import kind
from trainsweep.predict import (
    COVERAGE_GOAL,
    JitterCalibration,
    ReplayResult,
    conformal_quantile,
    family_jitters,
    needed_jitter,
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
    unseen: dict[str, float] = {}
    for c, rs in sorted(by_class.items()):
        if classes[c].factor is None:
            continue
        rest = [r for r in scored if r.instance_class != c]
        pooled_without, families_without = family_jitters(rest, experiment, interval)
        if pooled_without.epoch_jitter is None:
            continue
        held = conformal_quantile(class_scores(rs, pooled_without, families_without, interval), interval)
        if held is not None:
            unseen[kind(c)] = max(unseen.get(kind(c), 1.0), held)
    return classes, unseen
