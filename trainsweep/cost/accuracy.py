"""Does a configuration learn worse than the best one, or can the sweep not tell?

A configuration whose mean ``eval_accuracy`` is more than the quality margin below the best one's gets one
of three verdicts, in this order:

* **not distinguishable**: the gap is within :data:`Z` standard errors of the difference. A configuration's
  standard error is the larger of the spread over its repetitions (standard deviation / sqrt(runs)) and
  the binomial standard error of an accuracy measured on its evaluation samples (Agresti-Coull's, which is
  not 0 at an accuracy of 0 or 1). It still takes part in the recommendation.
* **too short to judge**: its runs made fewer optimizer steps than the best configuration needed to come
  within the margin of its own final accuracy. With the same epochs a larger batch makes fewer updates
  (the statistical efficiency of large-batch training); a ``target`` compares the time to the same
  accuracy instead. It is not recommended.
* **learns worse**: otherwise. It is not recommended.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trainsweep.cost.metrics import ConfigMetrics

Z = 2.0
"""Standard errors of the difference within which two accuracies are not distinguishable (about 95 %)."""

LEARNS_WORSE = "learns worse"
TOO_SHORT = "too short to judge"
NOT_DISTINGUISHABLE = "not distinguishable"

TARGET_HINT = (
    "With the same epochs a larger batch makes fewer optimizer steps (statistical efficiency); "
    "a target (time to the same accuracy) compares them fairly"
)


def binomial_se(accuracy: float, samples: int) -> float:
    """Standard error of an accuracy measured on ``samples`` evaluations (Agresti-Coull: two successes and
    two failures added, so that 0 and 1 are not taken as exact)."""
    n = samples + 4
    p = (accuracy * samples + 2) / n
    return math.sqrt(p * (1 - p) / n)


def accuracy_se(accuracies: Sequence[float], eval_samples: Sequence[int | None]) -> float | None:
    """Standard error of a configuration's mean accuracy over its repetitions.

    The larger of the spread over repetitions (sample standard deviation / sqrt(runs); needs two runs) and
    the binomial standard error of the mean accuracy over all the runs' evaluation samples (needs every
    run's evaluation size). None when neither is known.
    """
    if not accuracies:
        return None
    spread = statistics.stdev(accuracies) / math.sqrt(len(accuracies)) if len(accuracies) > 1 else None
    sizes = [n for n in eval_samples if n]
    binomial = (
        binomial_se(statistics.fmean(accuracies), sum(sizes))
        if sizes and len(sizes) == len(accuracies)
        else None
    )
    known = [x for x in (spread, binomial) if x is not None]
    return max(known) if known else None


def steps_to_learn(curves: Sequence[Sequence[tuple[int, float]]], final: float, margin: float) -> int | None:
    """Optimizer steps the runs took to come within ``margin`` of ``final`` (their configuration's mean
    accuracy): the largest over the runs of the steps done at the first evaluation that did. Runs without
    a curve say nothing; None when no run has one or a run never came within it."""
    needed = []
    for curve in curves:
        if not curve:
            continue
        reached = next((steps for steps, acc in curve if acc >= final - margin), None)
        if reached is None:
            return None
        needed.append(reached)
    return max(needed) if needed else None


def _acc(row: ConfigMetrics) -> str:
    acc = f"{row.eval_accuracy:.4g}"
    return f"{acc} ± {row.eval_accuracy_se:.2g}" if row.eval_accuracy_se else acc


def _evaluated(row: ConfigMetrics) -> str:
    size = f"{row.eval_samples} evaluation samples" if row.eval_samples else "evaluation size not logged"
    return f"{size}, {row.runs} run{'s' if row.runs != 1 else ''}"


def _fewer_steps(row: ConfigMetrics, best: ConfigMetrics) -> bool:
    """Whether the row's runs made fewer optimizer steps than the best configuration's."""
    if row.optimizer_steps is None or best.optimizer_steps is None:
        return False
    return row.optimizer_steps < best.optimizer_steps


def _too_short(row: ConfigMetrics, best: ConfigMetrics) -> bool:
    """Whether the row's runs made fewer optimizer steps than the best one needed to learn."""
    needed = best.steps_to_learn
    return needed is not None and row.optimizer_steps is not None and row.optimizer_steps < needed


def judge(row: ConfigMetrics, best: ConfigMetrics, margin: float) -> tuple[str, str, str]:
    """``(verdict, sentence, hint)`` for ``row`` against ``best`` (verdict "" when within the margin).

    The sentence is what the report and ``sweep.csv`` say, starting with the verdict. The hint says what
    to do about it when the run made fewer optimizer steps than the best (else "").
    """
    if row.eval_accuracy is None or best.eval_accuracy is None:
        return "", "", ""
    gap = best.eval_accuracy - row.eval_accuracy
    if gap <= margin:
        return "", "", ""
    against = f"the best ({_acc(best)}, {best.label}"
    se_d = math.hypot(row.eval_accuracy_se or 0.0, best.eval_accuracy_se or 0.0)
    if gap <= Z * se_d:
        return (
            NOT_DISTINGUISHABLE,
            f"{NOT_DISTINGUISHABLE}: eval_accuracy {_acc(row)} is {gap:.3g} below {against}) but within "
            f"{Z:g} standard errors of the difference ({Z * se_d:.3g}; {_evaluated(row)})",
            "",
        )
    fewer = _fewer_steps(row, best)
    hint = TARGET_HINT if fewer else ""
    if fewer and _too_short(row, best):
        return (
            TOO_SHORT,
            f"{TOO_SHORT}: eval_accuracy {_acc(row)} after {row.optimizer_steps:.0f} optimizer steps; "
            f"{against}) needed {best.steps_to_learn} to come within the margin ({margin:g}) of its final "
            "accuracy",
            hint,
        )
    text = f"{LEARNS_WORSE}: eval_accuracy {_acc(row)} is {gap:.4g} below {against}; margin {margin:g})"
    if fewer:
        text += f", after {row.optimizer_steps:.0f} optimizer steps against {best.optimizer_steps:.0f}"
    return LEARNS_WORSE, text, hint


def flag_below_best(rows: Sequence[ConfigMetrics], margin: float) -> None:
    """Judge every evaluated configuration against the best one: set ``quality`` (learns worse, too
    short to judge: not recommended) or ``accuracy_note`` (not distinguishable: still compared)."""
    evaluated = [r for r in rows if r.status == "ok" and r.eval_accuracy is not None]
    best = max(evaluated, key=lambda r: r.eval_accuracy or 0.0, default=None)
    if best is None:
        return
    for r in evaluated:
        if r is best:
            continue
        verdict, text, hint = judge(r, best, margin)
        full = f"{text}. {hint}" if hint else text
        if verdict == NOT_DISTINGUISHABLE:
            r.accuracy_note = full
        elif verdict:
            r.quality = full
