"""Number syntax shared by the dialect readers, and what counts as an absurd value."""

from __future__ import annotations

import math

NUM = rb"([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|NaN|NAN|inf|Inf|INF|Infinity))"
"""A float as Python 2/3 print it: 12- and 17-digit forms, ``{:6f}``, exponents, nan/inf."""

NUMX = rb"(?:[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|NaN|NAN|inf|Inf|INF|Infinity))"
""":data:`NUM` without its capturing group."""

MAX_DURATION_S = 30 * 24 * 3600.0
"""No single step, epoch or phase of a training job takes a month: longer is a broken number."""


STEP_NUMBER_DIGITS = 18
"""Step numbers are kept as 64-bit integers; a longer one (19 digits or more) is a broken number."""
MAX_STEP_NUMBER = 10**STEP_NUMBER_DIGITS - 1


def step_number_problem(number: int) -> str | None:
    """Why ``number`` cannot be a step number, or None when it can."""
    return f"is larger than {MAX_STEP_NUMBER}" if number > MAX_STEP_NUMBER else None


def duration_problem(value: float) -> str | None:
    """Why ``value`` cannot be a duration in seconds, or None when it can."""
    if math.isnan(value):
        return "is not a number"
    if math.isinf(value):
        return "is infinite"
    if value < 0:
        return "is negative"
    if value > MAX_DURATION_S:
        return f"is larger than {MAX_DURATION_S:.0f} s"
    return None


def timestamp_problem(value: float) -> str | None:
    """Why ``value`` cannot be a Unix time stamp in seconds, or None when it can."""
    if not math.isfinite(value):
        return "is not a finite number"
    if value < 0:
        return "is negative"
    return None
