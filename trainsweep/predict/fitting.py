"""Fitting the interval's calibration on replays of complete logs, and cross-validating it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from statistics import NormalDist
from typing import Any

from trainsweep.predict.calibration import Calibration, JitterCalibration, epoch_jitter_for, run_noise
from trainsweep.predict.replays import ReplayResult, set_interval
from trainsweep.predict.scores import class_summary, family_summary
from trainsweep.predict.steady import StopRule


def needed_multiple(res: ReplayResult, interval: float = 0.90) -> float | None:
    """The smallest epoch jitter whose interval contains the actual epoch time of a scored replay, as a
    multiple of the replay's own noise (:func:`run_noise`)."""
    if res.error is None or res.stat_rel is None:
        return None
    z = NormalDist().inv_cdf(0.5 + interval / 2)
    return math.sqrt(max(0.0, (abs(res.error) / z) ** 2 - res.stat_rel**2)) / run_noise(res.stat_rel)


def fit_multiple(results: Sequence[ReplayResult], interval: float = 0.90) -> float | None:
    """Split-conformal epoch jitter, as a multiple of each log's own noise: the ceil(interval (n + 1))-th
    smallest needed multiple of n logs.

    A new log exchangeable with these is covered with probability at least ``interval`` (and less than
    ``interval + 1/(n+1)``); None when n is too small for that (n < interval / (1 - interval)).
    """
    scores = [j for r in results if (j := needed_multiple(r, interval)) is not None]
    return conformal_quantile(scores, interval)


def conformal_quantile(scores: Sequence[float], interval: float = 0.90) -> float | None:
    """The ceil(interval (n + 1))-th smallest of n scores (None when n is too small for that)."""
    ranked = sorted(scores)
    k = math.ceil(interval * (len(ranked) + 1))
    if k > len(ranked):
        return None
    return ranked[k - 1] * (1 + 1e-9)  # the k-th log itself on the boundary, covered


def family_multiples(
    scored: Sequence[ReplayResult], experiment: dict[str, str], interval: float
) -> tuple[JitterCalibration, dict[str, JitterCalibration]]:
    by_family: dict[str, list[ReplayResult]] = {}
    for r in scored:
        if r.family:
            by_family.setdefault(r.family, []).append(r)

    def one(rs: Sequence[ReplayResult]) -> JitterCalibration:
        return JitterCalibration(
            fit_multiple(rs, interval), len(rs), len({experiment.get(r.log, r.log) for r in rs})
        )

    return one(scored), {f: one(rs) for f, rs in sorted(by_family.items())}


def fit_calibration(
    results: Sequence[ReplayResult], experiment: dict[str, str], interval: float = 0.90
) -> Calibration:
    """Epoch jitter per family (:func:`run_family`, in ``ReplayResult.family``) and pooled over all logs,
    and per instance class (``ReplayResult.instance_class``) a factor on it, with the unseen-class
    fallback (:class:`Calibration`).

    ``experiment`` maps each log to its experiment (only counted here; see :func:`cross_validate`).
    """
    scored = [r for r in results if r.error is not None and r.stat_rel is not None]
    pooled, families = family_multiples(scored, experiment, interval)
    if pooled.noise_multiple is None:
        return Calibration(pooled, families, interval)
    from trainsweep.class_calibration import fit_classes

    classes, unseen, over_pooled = fit_classes(scored, experiment, pooled, families, interval)
    return Calibration(
        pooled,
        families,
        interval,
        classes=classes,
        unseen_class_factor=unseen,
        unseen_pooled_factor=over_pooled,
    )


def cross_validate(
    results: Sequence[ReplayResult],
    experiment: dict[str, str],
    interval: float = 0.90,
    *,
    family_unknown: bool = False,
) -> list[ReplayResult]:
    """Leave-one-experiment-out: each experiment's logs get the interval of a calibration fitted on all
    the other experiments' logs (its family's jitter if they hold enough of that family, else pooled).

    Returns copies of ``results`` with their intervals (and ``interval_notes``) replaced; replays whose
    jitter was set by the rule are calibrated too. The held-out logs never enter their own calibration:
    where the others are too few to fit one (fewer than 9 scored), the copy has no interval.
    ``family_unknown``: the held-out logs are calibrated as runs of an unknown family would be (an
    instrumented script's: the pooled multiple), and keep their family for the summaries.
    """
    scored: dict[int, ReplayResult] = {}
    for held in sorted({experiment.get(r.log, r.log) for r in results}):
        rest = [r for r in results if experiment.get(r.log, r.log) != held]
        cal = fit_calibration(rest, experiment, interval)
        for r in results:
            if experiment.get(r.log, r.log) != held:
                continue
            if family_unknown:
                scored[id(r)] = calibrated(replace(r, family=None), cal, interval)
                scored[id(r)].family = r.family
            else:
                scored[id(r)] = calibrated(r, cal, interval)
    return [scored[id(r)] for r in results]


def calibrated(res: ReplayResult, cal: Calibration, interval: float = 0.90) -> ReplayResult:
    """A copy of ``res`` with the interval (and ``interval_notes``) ``cal`` gives it; no interval, and a
    note, where ``cal`` was fitted on too few logs for a pooled jitter."""
    import copy

    c = copy.deepcopy(res)
    if c.predicted_epoch_s is None:
        return c
    c.interval_notes = []
    if cal.pooled.noise_multiple is None:  # no interval rather than one fitted on its own logs
        c.epoch_jitter = c.calibration = c.interval_validated = c.class_calibration = None
        c.predicted_epoch_low_s = c.predicted_epoch_high_s = None
        n = cal.pooled.logs
        c.interval_notes.append(f"too few scored logs outside its experiment ({n}) to calibrate its interval")
        return c
    c.epoch_jitter, c.calibration, c.interval_validated, c.class_calibration = epoch_jitter_for(
        c.family, StopRule(interval=interval), cal, c.interval_notes, c.instance_class, c.stat_rel or 0.0
    )
    set_interval(c, interval)
    return c


def calibrate(
    results: Sequence[ReplayResult],
    experiment: dict[str, str],
    interval: float = 0.90,
    *,
    created: str = "",
    source: str = "",
) -> tuple[Calibration, list[ReplayResult]]:
    """The calibration fitted on all ``results`` (the one to ship), each family carrying the figures of
    its leave-one-experiment-out cross-validation; and the cross-validated replays themselves."""
    cv = cross_validate(results, experiment, interval)
    figures, by_class = family_summary(cv), class_summary(cv)
    full = fit_calibration(results, experiment, interval)

    def with_cv(name: str, cal: Any, figs: dict[str, dict[str, Any]]) -> Any:
        f = figs.get(name)
        if not f or not f["logs_scored"]:
            return cal
        return replace(
            cal,
            cv_logs=f["logs_scored"],
            cv_interval_coverage=f["interval_coverage"],
            cv_median_abs_error=f["median_abs_error"],
        )

    families = {k: with_cv(k, v, figures) for k, v in full.families.items()}
    classes = {k: with_cv(k, v, by_class) for k, v in full.classes.items()}
    pooled = with_cv("pooled", full.pooled, figures)
    cal = Calibration(
        pooled,
        families,
        interval,
        created,
        source,
        classes,
        full.unseen_class_factor,
        full.unseen_pooled_factor,
    )
    return cal, cv


def cross_validations(
    results: Sequence[ReplayResult], experiment: dict[str, str], interval: float = 0.90
) -> dict[str, dict[str, Any]]:
    """Leave one experiment, one family and one instance class out (:func:`cross_validate` held out by
    each), each summarised per family and per class. A family or class held out is calibrated without
    any log of it: its interval comes from the pooled jitter or the unseen-class fallback. And
    ``leave_one_class_out_family_unknown``: each class held out, its logs calibrated as an instrumented
    script's runs on an instance class the calibration has not seen (family unknown: the pooled multiple
    x the unseen-class fallback)."""
    out = {}
    for name, key, unknown in (
        ("leave_one_experiment_out", lambda r: experiment.get(r.log, r.log), False),
        ("leave_one_family_out", lambda r: r.family or "unknown", False),
        ("leave_one_class_out", lambda r: r.instance_class or "unknown", False),
        ("leave_one_class_out_family_unknown", lambda r: r.instance_class or "unknown", True),
    ):
        held = {r.log: key(r) for r in results}
        cv = cross_validate(results, held, interval, family_unknown=unknown)
        out[name] = {"families": family_summary(cv), "classes": class_summary(cv)}
    return out
