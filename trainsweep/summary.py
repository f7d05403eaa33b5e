"""Seed-compatible per-run outputs: the ``e<N>.json`` of ``parse-exec-times.py`` and the ``e<N>.summary``
of ``training-times-summary.py`` (the cloud-ML scripts whose layout people have years of results in).

The JSON keeps the original's keys, nesting, key order and formatting (``json.dumps(indent=4)`` plus a
newline, floats as Python writes them, batch size as a string, ``-1.0`` for a missing scalar) but holds
the *correct* values: see ``docs/seed-compatibility.md`` for every deliberate difference.

The summary is computed from that JSON, exactly as the original script did, so
``format_seed_summary(reference_json, original=True)`` reproduces a reference ``.summary`` byte for byte,
and ``seed_summary(run)`` gives the same lines for a parsed run.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainsweep.logs.cloudml import ACCURACY_AFTER_EPOCH_TIME
from trainsweep.logs.model import Epoch, RunTimings

__all__ = [
    "ACCURACY_AFTER_EPOCH_TIME",
    "MISSING",
    "dumps_seed_json",
    "format_seed_summary",
    "seed_json",
    "seed_summary",
]

MISSING = -1.0
"""The original scripts' value for a scalar the log did not contain."""

OUTSTANDING_FACTOR = 1.2
"""A step is "outstanding" when it takes more than this many times the average step time."""

# Epoch-level keys, in the order the original wrote them for Keras logs (accuracy from the progress line
# that precedes "Validation time:"). For tf.keras logs the accuracy line follows "Epoch time:", so the
# original, which inserted keys in log order, wrote validation_accuracy last.
_EPOCH_KEYS_ACCURACY_FIRST = ("validation_accuracy", "validation_time", "epoch_time")
_EPOCH_KEYS_ACCURACY_LAST = ("validation_time", "epoch_time", "validation_accuracy")


def _scalar(x: float | None) -> float:
    return x if x is not None and math.isfinite(x) else MISSING


def _accuracy_after_epoch_time(run: RunTimings) -> bool:
    """The parser says whether the log printed the accuracy after ``Epoch time:`` (tf.keras)."""
    return bool(run.extra.get(ACCURACY_AFTER_EPOCH_TIME, False))


def _step_keys(epoch: Epoch) -> list[str]:
    """Step numbers as logged; positions 1..n when the log's numbers would collide as dict keys."""
    numbers = list(epoch.step_numbers)
    if len(numbers) == len(epoch.step_s) and len(set(numbers)) == len(numbers):
        return [str(n) for n in numbers]
    return [str(i) for i in range(1, len(epoch.step_s) + 1)]


def seed_json(run: RunTimings) -> dict[str, Any]:
    """The ``parse-exec-times.py`` JSON of a run (keys and order as the original, correct values).

    Top-level scalars the log lacks are ``-1.0``. ``total_training`` falls back to the ``fit()`` time
    when the log prints no overall training time (as the original did for the tf.keras logs).
    Per epoch, ``validation_time``/``epoch_time`` are ``-1.0`` when missing; ``validation_accuracy``
    is present only when the log reported one.
    """
    total = run.total_s if run.total_s is not None and math.isfinite(run.total_s) else run.fit_s
    order = _EPOCH_KEYS_ACCURACY_LAST if _accuracy_after_epoch_time(run) else _EPOCH_KEYS_ACCURACY_FIRST
    epochs: dict[str, Any] = {}
    indexes = [e.index for e in run.epochs]
    if len(set(indexes)) != len(indexes):  # e.g. a training restarted in the same log: keep every epoch
        indexes = list(range(1, len(indexes) + 1))
    for index, epoch in zip(indexes, run.epochs, strict=True):
        values = {
            "validation_accuracy": epoch.validation_accuracy,
            "validation_time": _scalar(epoch.validation_s),
            "epoch_time": _scalar(epoch.epoch_s),
        }
        steps = zip(_step_keys(epoch), epoch.step_s, strict=True)
        entry: dict[str, Any] = {"steps": {k: t for k, t in steps if math.isfinite(t)}}
        for key in order:
            value = values[key]
            if key == "validation_accuracy" and (value is None or not math.isfinite(value)):
                continue
            entry[key] = value
        epochs[str(index)] = entry
    return {
        "init": _scalar(run.init_s),
        "total_training": _scalar(total),
        "largest_real_time_delta": _scalar(run.largest_real_time_delta),
        "fit_time": _scalar(run.fit_s),
        "write_model_time": _scalar(run.model_save_s),
        "epochs": epochs,
        "computing_system": run.computing_system,
        "batch_size": None if run.batch_size is None else str(run.batch_size),
    }


def dumps_seed_json(data: Mapping[str, Any]) -> str:
    """Serialise a seed JSON exactly as the original wrote it (4-space indent, final newline)."""
    return json.dumps(data, indent=4) + "\n"


# ---- the summary ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Step:
    epoch: str
    step: str
    seconds: float


def _total(values: Iterable[float]) -> float:
    # Left-to-right addition, as the original's loops did (Python >= 3.12's sum() compensates).
    acc = 0.0
    for v in values:
        acc += v
    return acc


def _present(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and x != MISSING


class _Lines:
    """Collects summary lines; a figure that cannot be computed prints ``n/a``."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, text: str) -> None:
        self.lines.append(text)

    def raw(self, template: str, x: float | None) -> None:
        """A value read from the JSON: a missing one prints as the seed's ``-1.0`` sentinel."""
        self.lines.append(template % (x if x is not None else MISSING))

    def value(self, template: str, x: float | None) -> None:
        """A computed figure: ``n/a`` when it cannot be computed."""
        self.lines.append(template % x if x is not None else template.replace("%f", "n/a").replace("%%", "%"))

    def percent(self, template: str, part: float | None, whole: float | None) -> None:
        ratio = _div(part, whole)
        pct = ratio * 100 if ratio is not None else None  # a huge finite ratio can still overflow here
        self.lines.append(
            template % pct
            if pct is not None and math.isfinite(pct)
            else template.replace("%.2f", "n/a").replace("%%", "%")
        )


def _div(a: float | None, b: float | None) -> float | None:
    """a / b, or None when it is not a finite number (missing operand, zero or tiny divisor)."""
    if a is None or b is None or b == 0:
        return None
    try:
        q = a / b
    except OverflowError:
        return None
    return q if math.isfinite(q) else None


def format_seed_summary(data: Mapping[str, Any], *, original: bool = False) -> str:
    """The ``training-times-summary.py`` text for a seed JSON.

    Args:
        data: a seed JSON (from :func:`seed_json` or a reference ``e<N>.json``).
        original: reproduce the original script exactly: ``-1.0`` for a missing value enters the
            arithmetic as a number (giving e.g. a negative percentage). By default a missing value is
            left out of sums and a figure that cannot be computed prints ``n/a``; the lines are the same.
    """
    out = _Lines()
    epochs: Mapping[str, Any] = data.get("epochs") or {}

    def scalar(key: str, src: Mapping[str, Any] = data) -> float | None:
        x = src.get(key, MISSING)
        if original:
            return float(x) if isinstance(x, int | float) else MISSING
        return float(x) if _present(x) else None

    save, fit, total = scalar("write_model_time"), scalar("fit_time"), scalar("total_training")
    delta, init = scalar("largest_real_time_delta"), scalar("init")
    out.raw("Model save time: %f", save)
    out.raw("Fit function time: %f", fit)
    out.raw("Total training time: %f", total)
    out.raw("Largest real time delta: %f", delta)
    out.percent(" - %.2f %% of the total training time.", delta, total)
    out.raw("Initialization time: %f", init)
    out.percent(" - %.2f %% of the total training time.", init, total)

    epoch_times = [t for t in (scalar("epoch_time", e) for e in epochs.values()) if t is not None]
    n_epochs = len(epochs)
    first_epoch = scalar("epoch_time", next(iter(epochs.values()))) if epochs else None
    epochs_total = _total(epoch_times) if epoch_times else None
    out.add("Epochs")
    out.value("  Number of epochs: %f", float(n_epochs))
    out.raw("  Time spent of first epoch: %f", first_epoch)
    out.value("  Total time spent on epochs: %f", epochs_total)
    out.percent("    - %.2f %% of the total training time.", epochs_total, total)
    out.value("  Average epoch time: %f", _div(epochs_total, len(epoch_times)))
    later = None if epochs_total is None or first_epoch is None else epochs_total - first_epoch
    out.value("  Average epoch time (skipping first epoch): %f", _div(later, len(epoch_times) - 1))

    validations = [v for v in (scalar("validation_time", e) for e in epochs.values()) if v is not None]
    validations_total = _total(validations) if validations else None
    out.add("Validations")
    out.value("  Total time spent on validations: %f", validations_total)
    out.percent("    - %.2f %% of the total training time.", validations_total, total)
    out.value("  Average validation time: %f", _div(validations_total, len(validations)))

    steps = [
        _Step(str(ek), str(sk), float(sv))
        for ek, e in epochs.items()
        for sk, sv in (e.get("steps") or {}).items()
        if original or math.isfinite(float(sv))
    ]
    n_steps = len(steps)
    steps_total = _total(s.seconds for s in steps) if steps else None
    first = steps[0].seconds if steps else None
    average = _div(steps_total, n_steps)
    rest = None if steps_total is None or first is None else steps_total - first
    t_mi_iavg = _div(rest, n_steps - 1)
    out.add("Steps")
    out.value("  Number of steps: %f", float(n_steps))
    out.value("  Average number of steps per epoch: %f", _div(float(n_steps), n_epochs))
    out.value("  Total time spent on steps: %f", steps_total)
    out.percent("    - %.2f %% of the total training time.", steps_total, total)
    out.raw("  First step time: %f", first)
    out.value("  Average step time: %f", average)
    out.value("  Time spent on steps (without first step): %f", rest)
    out.value("  T Mi Iavg: %f", t_mi_iavg)
    out.add(f"  Outstanding step times: > {OUTSTANDING_FACTOR}x the average time")
    if average is not None:
        for s in steps:
            times = _div(s.seconds, average)
            if s.seconds > OUTSTANDING_FACTOR * average and times is not None:
                out.add(
                    f"    - Epoch({s.epoch}) Step({s.step}) Time({s.seconds:.3f})"
                    f" - {times:.2f} times larger than average"
                )

    head = None if validations_total is None or first is None else validations_total + first
    beta = _div(head, rest)
    out.add("Beta: %.2f %%" % (beta * 100) if beta is not None else "Beta: n/a %")
    out.value("  - Validations + 1st step time = %f", head)
    out.value("  - Remaining steps time = %f", rest)

    out.add("T Mi Iavg prediction errors")
    flat = [s.seconds for s in steps]
    for label, sample in (
        ("Step 2 of epoch 1", flat[1:2]),
        ("Avg steps 2-6", flat[1:6]),
        ("Avg steps 2-11", flat[1:11]),
    ):
        out.add(_estimator_line(label, sample, n_steps, rest))
    return "\n".join(out.lines) + "\n"


def _estimator_line(label: str, sample: Sequence[float], n_steps: int, rest: float | None) -> str:
    """One "predict the remaining steps from the first few" line: estimate and its error."""
    if not sample or rest is None:
        return f"  - {label}: n/a - Estimated time: n/a - Error: n/a %"
    mean = statistics.mean(sample)
    estimate = mean * (n_steps - 1)
    error = _div(abs(estimate - rest), rest)
    if error is None:
        return f"  - {label}: {mean:f} - Estimated time: {estimate:f} - Error: n/a %"
    return f"  - {label}: {mean:f} - Estimated time: {estimate:f} - Error: {error * 100:.2f} %"


def seed_summary(run: RunTimings) -> str:
    """The ``training-times-summary.py`` text of a parsed run (computed from :func:`seed_json`)."""
    return format_seed_summary(seed_json(run))
