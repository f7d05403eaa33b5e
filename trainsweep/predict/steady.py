"""Steady-state estimation of a repeated operation's time, and the early-stop rule built on it.

:class:`StopRule` says when early-stop mode has seen enough; :func:`steady_estimate` finds warm-up (MSER),
drops outliers (4 MADs) and gives a batch-means interval; :class:`SteadyState` is the online rule the
training container and the instrumentation feed step by step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

BATCH_MEANS_BLOCKS = 10
OUTLIER_MADS = 4.0


@dataclass(frozen=True)
class StopRule:
    """When early-stop mode has seen enough.

    Args:
        precision: stop when the relative half-width of the ``confidence`` interval of the steady-state
            step time is at most this.
        confidence: confidence level of that interval.
        min_steady_steps: never trust fewer steady steps than this.
        min_seconds: never trust the precision before this many seconds of steps were watched: a short
            window just after the process started can look steady at a speed the run does not keep
            (on a CPU, 18 steps after start-up predicted an epoch 35 % longer than full runs took).
        max_steps: cap on training steps watched (None: no cap).
        max_seconds: cap on training seconds watched (None: no cap).
        max_epochs: cap on epochs watched (None: no cap); a run whose step time is still uncertain after
            this many epochs stops with the interval it has, which says how uncertain it is.
        epoch_jitter: relative standard deviation between epochs of one run, added to the interval;
            None: the calibrated one for the run's family (:func:`load_calibration`).
        interval: coverage of the prediction interval.
        validation_batches: validation batches the container times (the first is warm-up).
    """

    precision: float = 0.02
    confidence: float = 0.95
    min_steady_steps: int = 10
    min_seconds: float = 10.0
    max_steps: int | None = 2000
    max_seconds: float | None = 900.0
    max_epochs: float | None = 2.0
    epoch_jitter: float | None = None
    interval: float = 0.90
    validation_batches: int = 6

    def __post_init__(self) -> None:
        if not 0 < self.precision < 1:
            raise ValueError(f"precision must be in (0, 1), got {self.precision}")
        if not 0 < self.confidence < 1 or not 0 < self.interval < 1:
            raise ValueError("confidence and interval must be in (0, 1)")
        if self.min_steady_steps < 2:
            raise ValueError("min_steady_steps must be at least 2")
        if not self.min_seconds >= 0:
            raise ValueError(f"min_seconds must be >= 0, got {self.min_seconds}")
        if self.max_epochs is not None and not self.max_epochs > 0:
            raise ValueError(f"max_epochs must be positive, got {self.max_epochs}")


# ---- statistics -----------------------------------------------------------------------------------


def t_quantile(p: float, df: int) -> float:
    """Quantile of Student's t distribution (Hill 1970 / Cornish-Fisher expansion; exact enough for df>=3)."""
    z = NormalDist().inv_cdf(p)
    if df <= 0:
        raise ValueError("df must be positive")
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def mser_truncation(x: Sequence[float]) -> int:
    """Number of leading values to drop as warm-up (MSER; searched over the first half, O(n))."""
    n = len(x)
    if n < 4:
        return 0
    # suffix sums so that each candidate truncation point costs O(1)
    s = [0.0] * (n + 1)
    q = [0.0] * (n + 1)
    for i in range(n - 1, -1, -1):
        s[i] = s[i + 1] + x[i]
        q[i] = q[i + 1] + x[i] * x[i]
    best, best_d = math.inf, 0
    for d in range(n // 2 + 1):
        m = n - d
        ss = q[d] - s[d] * s[d] / m  # sum of squared deviations of x[d:]
        v = max(ss, 0.0) / (m * m)
        if v < best:
            best, best_d = v, d
    return best_d


def _median(x: Sequence[float]) -> float:
    y = sorted(x)
    n = len(y)
    return y[n // 2] if n % 2 else 0.5 * (y[n // 2 - 1] + y[n // 2])


def without_outliers(x: Sequence[float]) -> list[float]:
    """The values within ``OUTLIER_MADS`` median absolute deviations of the median."""
    if len(x) < 5:
        return list(x)
    med = _median(x)
    mad = _median([abs(v - med) for v in x]) * 1.4826
    if mad == 0:
        return list(x)
    return [v for v in x if abs(v - med) <= OUTLIER_MADS * mad]


@dataclass(frozen=True)
class SteadyEstimate:
    """Steady-state time of one repeated operation (a training step, a validation batch)."""

    mean_s: float
    se_s: float
    """Standard error of the mean (batch means)."""
    half_width_rel: float
    """Relative half-width of the rule's confidence interval."""
    used: int
    """Values in the mean."""
    warmup: int
    """Leading values dropped as warm-up."""
    outliers: int
    warmup_excess_s: float
    """Time the warm-up values took beyond the steady mean (a one-off cost per run)."""


def steady_estimate(
    x: Sequence[float], *, confidence: float = 0.95, skip_first: int = 0
) -> SteadyEstimate | None:
    """Steady-state mean of ``x`` after warm-up detection and outlier removal; None if too few values."""
    body = list(x[skip_first:])
    if len(body) < 2:
        return None
    d = mser_truncation(body)
    steady = body[d:]
    kept = without_outliers(steady)
    n = len(kept)
    if n < 2:
        return None
    mean = sum(kept) / n
    blocks = min(BATCH_MEANS_BLOCKS, n // 2) if n >= 4 else 0
    if blocks >= 2:
        size = n / blocks
        means = []
        for b in range(blocks):
            chunk = kept[round(b * size) : round((b + 1) * size)]
            means.append(sum(chunk) / len(chunk))
        mm = sum(means) / blocks
        se = math.sqrt(sum((v - mm) ** 2 for v in means) / (blocks - 1) / blocks)
        df = blocks - 1
    else:
        se = math.sqrt(sum((v - mean) ** 2 for v in kept) / (n - 1) / n)
        df = n - 1
    t = t_quantile(0.5 + confidence / 2, df)
    rel = t * se / mean if mean > 0 else math.inf
    warm = list(x[:skip_first]) + body[:d]
    excess = sum(warm) - len(warm) * mean
    return SteadyEstimate(mean, se, rel, n, len(warm), len(steady) - n, excess)


# ---- the online rule (training container) ---------------------------------------------------------


class SteadyState:
    """Online early-stop decision over training step times, in the order they were measured.

    The first step of the run is always warm-up; ``epoch_boundary()`` marks the steps next to an epoch
    boundary (the step before validation, the first step after it) as non-steady. The precision is
    checked every ``check_every`` steps, and at every step while warm-up detection leaves fewer than
    ``min_steady_steps`` steady steps: a GPU's step times settle within a few steps, and waiting
    ``check_every`` more steps each time would watch a large share of a short epoch for nothing.

    The ``max_epochs`` cap needs the training steps of one epoch: ``steps_per_epoch`` when the caller
    knows it (the worker from its loader, the instrumentation from the first epoch it watched); until
    then, whole epochs are counted at their boundaries.
    """

    def __init__(
        self, rule: StopRule | None = None, *, check_every: int = 10, steps_per_epoch: int | None = None
    ):
        self.rule = rule or StopRule()
        self.steps_per_epoch = steps_per_epoch
        self.epochs_done = 0
        self.check_every = max(1, check_every)
        self.values: list[float] = []
        self.excluded: list[float] = []  # boundary steps, kept out of the steady stream
        self.seconds = 0.0
        self._exclude_next = True  # step 1
        self._since_check = 0
        self._too_few = False  # the last check kept fewer than min_steady_steps: check again next step
        self._reason: str | None = None

    def epoch_boundary(self) -> None:
        """Call at an epoch end: the last step just added and the next one are not steady."""
        if self.values:
            self.excluded.append(self.values.pop())
        self._exclude_next = True
        self.epochs_done += 1

    def add(self, step_s: float) -> None:
        self.seconds += step_s
        if self._exclude_next:
            self.excluded.append(step_s)
            self._exclude_next = False
        else:
            self.values.append(step_s)
        self._since_check += 1

    @property
    def steps(self) -> int:
        return len(self.values) + len(self.excluded)

    def estimate(self) -> SteadyEstimate | None:
        est = steady_estimate(self.values, confidence=self.rule.confidence)
        if est is None:
            return None
        boundary = sum(self.excluded) - len(self.excluded) * est.mean_s
        return SteadyEstimate(
            est.mean_s,
            est.se_s,
            est.half_width_rel,
            est.used,
            est.warmup + len(self.excluded),
            est.outliers,
            est.warmup_excess_s + boundary,
        )

    def stop_reason(self) -> str | None:
        """ "precision", "max_steps", "max_seconds" or "max_epochs" once the rule says stop, else None."""
        if self._reason:
            return self._reason
        r = self.rule
        if r.max_steps is not None and self.steps >= r.max_steps:
            self._reason = "max_steps"
        elif r.max_seconds is not None and self.seconds >= r.max_seconds:
            self._reason = "max_seconds"
        elif r.max_epochs is not None and (
            self.steps >= r.max_epochs * self.steps_per_epoch
            if self.steps_per_epoch
            else self.epochs_done >= r.max_epochs
        ):
            self._reason = "max_epochs"
        elif (
            len(self.values) >= r.min_steady_steps
            and self.seconds >= r.min_seconds
            and (self._since_check >= self.check_every or self._too_few)
        ):
            self._since_check = 0
            est = self.estimate()
            self._too_few = est is None or est.used < r.min_steady_steps
            if est is not None and not self._too_few and est.half_width_rel <= r.precision:
                self._reason = "precision"
        return self._reason
