"""Number syntax shared by the dialect readers, and what counts as an absurd value."""

from __future__ import annotations

import math

NUM = rb"([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|NaN|NAN|inf|Inf|INF|Infinity))"
"""A float as Python 2/3 print it: 12- and 17-digit forms, ``{:6f}``, exponents, nan/inf.

Only these forms are numbers: ``float()`` alone would also take ``1_000`` and ``infinity``, and a regex
that stops at the first foreign character would read ``0x1p3`` as ``0``; the readers match a value with
this pattern *and* what must follow it (the line's end, a separator), so that neither happens."""

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
    if value < 0 or math.copysign(1.0, value) < 0:
        return "is negative"  # -0 too: a sign on a duration is a broken number, not a zero
    if value > MAX_DURATION_S:
        return f"is larger than {MAX_DURATION_S:.0f} s"
    return None


def timestamp_problem(value: float) -> str | None:
    """Why ``value`` cannot be a Unix time stamp in seconds, or None when it can."""
    if not math.isfinite(value):
        return "is not a finite number"
    if value < 0 or math.copysign(1.0, value) < 0:
        return "is negative"
    return None


def small_int(raw: bytes, digits: int = STEP_NUMBER_DIGITS) -> int | None:
    """``int(raw)`` for a run of ASCII digits, or None when it has more than ``digits`` of them.

    ``int()`` refuses strings of more than 4,300 digits with a ValueError; a counter that long (a step,
    an epoch, a rank) is a broken number, reported by the caller, never a reason to stop reading.
    """
    return int(raw) if len(raw) <= digits else None
