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
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainsweep.jsonstream import LazyMapping, RawJSON, iter_json, number_items_text
from trainsweep.logs.cloudml import ACCURACY_AFTER_EPOCH_TIME
from trainsweep.logs.model import Epoch, RunTimings

__all__ = [
    "ACCURACY_AFTER_EPOCH_TIME",
    "MISSING",
    "dumps_seed_json",
    "format_seed_summary",
    "iter_seed_json",
    "iter_seed_summary",
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


def _step_keys(epoch: Epoch, count: int | None = None) -> list[str]:
    """Step numbers as logged; positions 1..n when the log's numbers would collide as dict keys.

    ``count``: the number of step times, when the caller has them at hand (an epoch moved to disk
    reads its step times back for every ``len(epoch.step_s)``).
    """
    n = len(epoch.step_s) if count is None else count
    numbers = epoch.step_numbers
    if isinstance(numbers, range):
        if len(numbers) == n:  # consecutive numbers: unique
            return list(map(str, numbers))
    else:
        listed = list(numbers)
        if len(listed) == n and len(set(listed)) == len(listed):
            return [str(x) for x in listed]
    return [str(i) for i in range(1, n + 1)]


def _seed_epoch_keys(run: RunTimings) -> list[str]:
    indexes = [e.index for e in run.epochs]
    if len(set(indexes)) != len(indexes):  # e.g. a training restarted in the same log: keep every epoch
        indexes = list(range(1, len(indexes) + 1))
    return [str(i) for i in indexes]


def _finite_steps(epoch: Epoch) -> tuple[Sequence[float], list[str] | None]:
    """The epoch's finite step times (the seed JSON's ``steps`` values) and, when some were left out,
    the keys of those kept (None: every step is kept, keys from :func:`_step_keys`)."""
    values = epoch.step_s
    if all(map(math.isfinite, values)):
        return values, None
    kept = [(k, t) for k, t in zip(_step_keys(epoch, len(values)), values, strict=True) if math.isfinite(t)]
    return [t for _, t in kept], [k for k, _ in kept]


def _seed_steps(epoch: Epoch) -> tuple[list[str], Sequence[float]]:
    """The keys and values of the epoch's seed JSON ``steps`` (its finite step times)."""
    values, keys = _finite_steps(epoch)
    return (_step_keys(epoch, len(values)) if keys is None else keys), values


def _seed_epoch_scalars(run: RunTimings, epoch: Epoch) -> dict[str, Any]:
    """The epoch's seed JSON entry without ``steps``, keys in the original's order."""
    order = _EPOCH_KEYS_ACCURACY_LAST if _accuracy_after_epoch_time(run) else _EPOCH_KEYS_ACCURACY_FIRST
    values = {
        "validation_accuracy": epoch.validation_accuracy,
        "validation_time": _scalar(epoch.validation_s),
        "epoch_time": _scalar(epoch.epoch_s),
    }
    entry: dict[str, Any] = {}
    for key in order:
        value = values[key]
        if key == "validation_accuracy" and (value is None or not math.isfinite(value)):
            continue
        entry[key] = value
    return entry


def _seed_head(run: RunTimings) -> dict[str, Any]:
    """The seed JSON's top-level entries; ``epochs`` is None (filled by the caller)."""
    total = run.total_s if run.total_s is not None and math.isfinite(run.total_s) else run.fit_s
    return {
        "init": _scalar(run.init_s),
        "total_training": _scalar(total),
        "largest_real_time_delta": _scalar(run.largest_real_time_delta),
        "fit_time": _scalar(run.fit_s),
        "write_model_time": _scalar(run.model_save_s),
        "epochs": None,
        "computing_system": run.computing_system,
        "batch_size": None if run.batch_size is None else str(run.batch_size),
    }


def seed_json(run: RunTimings) -> dict[str, Any]:
    """The ``parse-exec-times.py`` JSON of a run (keys and order as the original, correct values).

    Top-level scalars the log lacks are ``-1.0``. ``total_training`` falls back to the ``fit()`` time
    when the log prints no overall training time (as the original did for the tf.keras logs).
    Per epoch, ``validation_time``/``epoch_time`` are ``-1.0`` when missing; ``validation_accuracy``
    is present only when the log reported one.
    """
    epochs: dict[str, Any] = {}
    for key, epoch in zip(_seed_epoch_keys(run), run.epochs, strict=True):
        entry: dict[str, Any] = {"steps": dict(zip(*_seed_steps(epoch), strict=True))}
        entry.update(_seed_epoch_scalars(run, epoch))
        epochs[key] = entry
    data = _seed_head(run)
    data["epochs"] = epochs
    return data


def dumps_seed_json(data: Mapping[str, Any]) -> str:
    """Serialise a seed JSON exactly as the original wrote it (4-space indent, final newline)."""
    return json.dumps(data, indent=4) + "\n"


_SEED_INDENT = 4


def _steps_text(keys: Sequence[str], values: Sequence[float]) -> str:
    """``json.dumps(dict(zip(keys, values)), indent=4)`` for step keys (digits) and float times."""
    if not values:
        return "{}"
    inner = "\n" + " " * _SEED_INDENT
    body = number_items_text(keys, values, "," + inner)  # in C, when its text is json.dumps's
    if body is None:
        if type(values) is array and values.typecode == "d":
            texts: Iterable[str] = map(float.__repr__, values)
        else:
            texts = (json.dumps(t) for t in values)
        body = ("," + inner).join([f'"{k}": {t}' for k, t in zip(keys, texts, strict=True)])
    return "{" + inner + body + "\n}"


def iter_seed_json(run: RunTimings) -> Iterator[str]:
    """``dumps_seed_json(seed_json(run))`` in pieces, epoch by epoch (bounded memory for long logs)."""

    def epochs() -> Iterator[tuple[str, Any]]:
        for key, epoch in zip(_seed_epoch_keys(run), run.epochs, strict=True):
            entry: dict[str, Any] = {"steps": RawJSON(_steps_text(*_seed_steps(epoch)))}
            entry.update(_seed_epoch_scalars(run, epoch))
            yield key, entry

    data = _seed_head(run)
    data["epochs"] = LazyMapping(len(run.epochs), epochs)
    yield from iter_json(data, indent=_SEED_INDENT)
    yield "\n"


# ---- the summary ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _EpochSteps:
    """One epoch of a seed JSON as the summary reads it."""

    key: str
    entry: Mapping[str, Any]
    """Its scalars (``epoch_time``, ``validation_time``)."""
    values: Sequence[float]
    """Its step times, in order (those the summary counts)."""
    keys: Callable[[], Sequence[str]]
    """The step keys of ``values`` (asked only for outstanding steps)."""


def _total(values: Iterable[float]) -> float:
    # Left-to-right addition, as the original's loops did (Python >= 3.12's sum() compensates).
    acc = 0.0
    for v in values:
        acc += v
    return acc


def _present(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and x != MISSING


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
    epochs: Mapping[str, Any] = data.get("epochs") or {}

    parsed: list[_EpochSteps] = []  # read once: _summary_lines goes over the epochs twice
    for ek, e in epochs.items():
        steps = [
            (str(sk), float(sv))
            for sk, sv in (e.get("steps") or {}).items()
            if original or math.isfinite(float(sv))
        ]
        keys = [k for k, _ in steps]
        parsed.append(_EpochSteps(str(ek), e, [v for _, v in steps], keys.copy))  # bound to this epoch's keys
    return "".join(_summary_lines(data, len(epochs), lambda: parsed, original=original))


def iter_seed_summary(run: RunTimings) -> Iterator[str]:
    """``format_seed_summary(seed_json(run))`` in pieces, computed from the run's arrays epoch by epoch
    (no seed JSON of millions of entries is built)."""

    def entries() -> Iterator[_EpochSteps]:
        for key, epoch in zip(_seed_epoch_keys(run), run.epochs, strict=True):
            values, keys = _finite_steps(epoch)

            def step_keys(
                epoch: Epoch = epoch, keys: list[str] | None = keys, n: int = len(values)
            ) -> list[str]:
                return keys if keys is not None else _step_keys(epoch, n)

            yield _EpochSteps(key, _seed_epoch_scalars(run, epoch), values, step_keys)

    return _summary_lines(_seed_head(run), len(run.epochs), entries, original=False)


def _summary_lines(
    data: Mapping[str, Any],
    n_epochs: int,
    entries: Callable[[], Iterable[_EpochSteps]],
    *,
    original: bool,
) -> Iterator[str]:
    """The summary's lines (each with its newline) from the seed JSON's scalars and its epochs, which
    ``entries()`` gives in order (called twice: the outstanding steps need the average first)."""
    total = _read(data, "total_training", original)
    yield from _head_lines(data, total, original)
    seen = _pass_over_epochs(entries(), original)
    yield from _epoch_lines(seen, n_epochs, total)
    yield from _validation_lines(seen, total)
    yield from _step_lines(seen, n_epochs, total)
    yield from _outstanding_lines(entries, seen.average)
    head = (
        None
        if seen.validations_total is None or seen.first_step is None
        else seen.validations_total + seen.first_step
    )
    beta = _div(head, seen.rest)
    yield ("Beta: %.2f %%" % (beta * 100) if beta is not None else "Beta: n/a %") + "\n"
    yield _value("  - Validations + 1st step time = %f", head)
    yield _value("  - Remaining steps time = %f", seen.rest)
    yield "T Mi Iavg prediction errors\n"
    for label, sample in (
        ("Step 2 of epoch 1", seen.head_steps[1:2]),
        ("Avg steps 2-6", seen.head_steps[1:6]),
        ("Avg steps 2-11", seen.head_steps[1:11]),
    ):
        yield _estimator_line(label, sample, seen.n_steps, seen.rest) + "\n"


def _read(src: Mapping[str, Any], key: str, original: bool) -> float | None:
    """A number of the seed JSON: None when missing (``original``: the seed's ``-1.0`` sentinel)."""
    x = src.get(key, MISSING)
    if original:
        return float(x) if isinstance(x, int | float) else MISSING
    return float(x) if _present(x) else None


def _raw(template: str, x: float | None) -> str:
    """A value read from the JSON: a missing one prints as the seed's ``-1.0`` sentinel."""
    return template % (x if x is not None else MISSING) + "\n"


def _value(template: str, x: float | None) -> str:
    """A computed figure: ``n/a`` when it cannot be computed."""
    text = template % x if x is not None else template.replace("%f", "n/a").replace("%%", "%")
    return text + "\n"


def _percent(template: str, part: float | None, whole: float | None) -> str:
    """``part`` as a percentage of ``whole``: ``n/a`` when it cannot be computed."""
    ratio = _div(part, whole)
    pct = ratio * 100 if ratio is not None else None  # a huge finite ratio can still overflow here
    text = (
        template % pct
        if pct is not None and math.isfinite(pct)
        else template.replace("%.2f", "n/a").replace("%%", "%")
    )
    return text + "\n"


def _head_lines(data: Mapping[str, Any], total: float | None, original: bool) -> Iterator[str]:
    """The run's own times: model save, fit, total, largest delta, initialisation."""
    delta, init = _read(data, "largest_real_time_delta", original), _read(data, "init", original)
    yield _raw("Model save time: %f", _read(data, "write_model_time", original))
    yield _raw("Fit function time: %f", _read(data, "fit_time", original))
    yield _raw("Total training time: %f", total)
    yield _raw("Largest real time delta: %f", delta)
    yield _percent(" - %.2f %% of the total training time.", delta, total)
    yield _raw("Initialization time: %f", init)
    yield _percent(" - %.2f %% of the total training time.", init, total)


@dataclass
class _Pass:
    """What one pass over the epochs gathers (left-to-right sums, as the original's loops)."""

    epoch_times: list[float]
    validations: list[float]
    first_epoch: float | None
    n_steps: int
    steps_acc: float
    head_steps: list[float]
    """The first 11 steps (the estimators' samples)."""

    @property
    def epochs_total(self) -> float | None:
        return _total(self.epoch_times) if self.epoch_times else None

    @property
    def validations_total(self) -> float | None:
        return _total(self.validations) if self.validations else None

    @property
    def steps_total(self) -> float | None:
        return self.steps_acc if self.n_steps else None

    @property
    def first_step(self) -> float | None:
        return self.head_steps[0] if self.n_steps else None

    @property
    def average(self) -> float | None:
        return _div(self.steps_total, self.n_steps)

    @property
    def rest(self) -> float | None:
        """The steps' time without the first step."""
        total, first = self.steps_total, self.first_step
        return None if total is None or first is None else total - first


def _pass_over_epochs(entries: Iterable[_EpochSteps], original: bool) -> _Pass:
    seen = _Pass([], [], None, 0, 0.0, [])
    for i, ep in enumerate(entries):
        t = _read(ep.entry, "epoch_time", original)
        if i == 0:
            seen.first_epoch = t
        if t is not None:
            seen.epoch_times.append(t)
        v = _read(ep.entry, "validation_time", original)
        if v is not None:
            seen.validations.append(v)
        values = ep.values
        for x in values:
            seen.steps_acc += x
        if len(seen.head_steps) < 11:
            seen.head_steps.extend(values[: 11 - len(seen.head_steps)])
        seen.n_steps += len(values)
    return seen


def _epoch_lines(seen: _Pass, n_epochs: int, total: float | None) -> Iterator[str]:
    epochs_total, first_epoch = seen.epochs_total, seen.first_epoch
    yield "Epochs\n"
    yield _value("  Number of epochs: %f", float(n_epochs))
    yield _raw("  Time spent of first epoch: %f", first_epoch)
    yield _value("  Total time spent on epochs: %f", epochs_total)
    yield _percent("    - %.2f %% of the total training time.", epochs_total, total)
    yield _value("  Average epoch time: %f", _div(epochs_total, len(seen.epoch_times)))
    later = None if epochs_total is None or first_epoch is None else epochs_total - first_epoch
    yield _value("  Average epoch time (skipping first epoch): %f", _div(later, len(seen.epoch_times) - 1))


def _validation_lines(seen: _Pass, total: float | None) -> Iterator[str]:
    validations_total = seen.validations_total
    yield "Validations\n"
    yield _value("  Total time spent on validations: %f", validations_total)
    yield _percent("    - %.2f %% of the total training time.", validations_total, total)
    yield _value("  Average validation time: %f", _div(validations_total, len(seen.validations)))


def _step_lines(seen: _Pass, n_epochs: int, total: float | None) -> Iterator[str]:
    n_steps, steps_total, rest = seen.n_steps, seen.steps_total, seen.rest
    yield "Steps\n"
    yield _value("  Number of steps: %f", float(n_steps))
    yield _value("  Average number of steps per epoch: %f", _div(float(n_steps), n_epochs))
    yield _value("  Total time spent on steps: %f", steps_total)
    yield _percent("    - %.2f %% of the total training time.", steps_total, total)
    yield _raw("  First step time: %f", seen.first_step)
    yield _value("  Average step time: %f", seen.average)
    yield _value("  Time spent on steps (without first step): %f", rest)
    yield _value("  T Mi Iavg: %f", _div(rest, n_steps - 1))
    yield f"  Outstanding step times: > {OUTSTANDING_FACTOR}x the average time\n"


def _outstanding_lines(entries: Callable[[], Iterable[_EpochSteps]], average: float | None) -> Iterator[str]:
    """The steps slower than :data:`OUTSTANDING_FACTOR` x the average (a second pass over the epochs)."""
    if average is None:
        return
    threshold = OUTSTANDING_FACTOR * average
    for ep in entries():
        keys: Sequence[str] | None = None
        for j, seconds in enumerate(ep.values):
            if seconds > threshold:
                times = _div(seconds, average)
                if times is None:
                    continue
                if keys is None:
                    keys = ep.keys()
                yield (
                    f"    - Epoch({ep.key}) Step({keys[j]}) Time({seconds:.3f})"
                    f" - {times:.2f} times larger than average\n"
                )


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
    """The ``training-times-summary.py`` text of a parsed run: ``format_seed_summary(seed_json(run))``,
    computed from the run's arrays (:func:`iter_seed_summary`)."""
    return "".join(iter_seed_summary(run))
