"""Language-model and hardware figures of runs and configurations: tokens per second, tokens per dollar,
cost per million tokens, and model FLOPs utilisation (MFU).

* **tokens per sample**: what the run's log says (``trainsweep.tokens_per_sample``, MLPerf's
  ``max_sequence_length``, or a metric named ``tokens_per_sample`` / ``seq_len``), else the run's setting
  of an axis of that name (a ``{seq_len}`` placeholder), else the spec's ``workload.tokens_per_sample``
  or its ``seq_len`` / ``tokens_per_sample`` hyperparameter. A run without any has no token figures.
* **tokens/s** = samples/s x tokens per sample; **tokens per dollar** = samples per dollar x tokens per
  sample; **cost per million tokens** = 10^6 / tokens per dollar.
* **MFU** = FLOPs of one step (all ranks, counted once per run: :mod:`trainsweep.instrument.flops`) /
  steady step time / (accelerators x their dense peak FLOP/s in the step's precision). The peak comes from
  :mod:`trainsweep.accelerators`: the instance type's accelerator, or for a local GPU the one the log names.
  When it cannot be computed, ``mfu_note`` says why (no count in the log, a CPU has no peak in the
  catalogue, the vendor publishes no peak for that precision); when it can, what it was set against.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from trainsweep import instances
from trainsweep.accelerators import PRECISIONS, Accelerator, accelerator_named
from trainsweep.logs import mllog

if TYPE_CHECKING:
    from trainsweep.cost.metrics import ConfigMetrics
    from trainsweep.cost.runs import RunMetrics
    from trainsweep.logs.model import RunTimings

TOKEN_NAMES = ("tokens_per_sample", "seq_len")
"""Axis, hyperparameter and metric names read as a sample's tokens."""
TOKEN_COLUMNS = ("tokens_per_sample", "tokens_per_s", "tokens_per_usd", "usd_per_million_tokens")
MFU_COLUMNS = ("flops_per_sample", "mfu", "mfu_note")
OPTIONAL_COLUMNS = TOKEN_COLUMNS + MFU_COLUMNS
"""``sweep.csv`` columns written when a row has them (tokens) or a run counted its FLOPs (MFU)."""


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) and x > 0 else None


def spec_tokens_per_sample(spec: Mapping[str, Any] | None) -> float | None:
    """The spec's tokens per sample: ``workload.tokens_per_sample``, else a ``seq_len`` or
    ``tokens_per_sample`` hyperparameter (None: the spec says none)."""
    workload = (spec or {}).get("workload") or {}
    said = _number(workload.get("tokens_per_sample"))
    if said is not None:
        return said
    given = workload.get("hyperparameters") or {}
    return next((x for n in TOKEN_NAMES if (x := _number(given.get(n))) is not None), None)


def run_tokens_per_sample(
    run: RunTimings, setting: Mapping[str, Any], spec_tokens: float | None
) -> float | None:
    """A run's tokens per sample: its log, then its setting of the axes, then the spec's."""
    said = [run.extra.get(mllog.TOKENS_PER_SAMPLE), run.extra.get(mllog.MAX_SEQUENCE_LENGTH)]
    said += [run.extra.get(mllog.METRIC_PREFIX + n) for n in TOKEN_NAMES]
    said += [setting.get(n) for n in TOKEN_NAMES]
    return next((x for v in said if (x := _number(v)) is not None), spec_tokens)


def accelerator_of(instance_type: str | None, device: str | None) -> Accelerator | None:
    """The accelerator a run trained on: its instance type's, else (a local GPU) the one its name says."""
    known = instances.CATALOGUE.get(instance_type or "")
    if known is not None and known.chip is not None:
        return known.chip
    if not device or device == "cpu":
        return None
    return accelerator_named(device)


def _mfu(m: RunMetrics, event: Mapping[str, Any]) -> tuple[float | None, str]:
    """(MFU, what it was set against or why there is none) of a run with a FLOP count."""
    if "error" in event:
        return None, f"FLOPs not counted: {event['error']}"
    per_step, precision = _number(event.get("per_step")), event.get("precision")
    if per_step is None or precision not in PRECISIONS:
        return None, "FLOPs not counted: the log's count is unreadable"
    device = event.get("device") if isinstance(event.get("device"), str) else None
    chip = accelerator_of(m.instance_type, device)
    if chip is None:
        where = m.instance_type if device in (None, "cpu") else f"{m.instance_type} ({device})"
        return None, f"no peak: the catalogue has no accelerator peak for {where}"
    peak = chip.peak(str(precision))
    if peak is None:
        return None, f"no peak: {chip.key} has no published dense {precision} peak"
    said = _number(event.get("accelerators"))
    known = instances.CATALOGUE.get(m.instance_type or "")
    count = int(said) if said else (known.accelerators if known and known.accelerators else 1)
    if not m.step_s:
        return None, "no steady step time"
    mfu = per_step * (m.batches_per_step or 1.0) / m.step_s / (peak * 1e12 * count)  # a counted batch
    return mfu, f"against {count} x {chip.key} {precision} peak {peak:g} TFLOPS"


def run_figures(m: RunMetrics, run: RunTimings, spec_tokens: float | None = None) -> None:
    """Set a run's tokens per sample, tokens/s, FLOPs per sample and MFU (each where it can be known)."""
    m.tokens_per_sample = run_tokens_per_sample(run, m.axes, spec_tokens)
    if m.tokens_per_sample is not None and m.samples_per_s is not None:
        m.tokens_per_s = m.samples_per_s * m.tokens_per_sample
    event = run.extra.get(mllog.FLOPS)
    if not isinstance(event, Mapping):
        return
    m.flops_per_sample = _number(event.get("per_sample"))
    m.mfu, m.mfu_note = _mfu(m, event)


def _common(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return known[0] if known and all(v == known[0] for v in known) else None


def config_figures(row: ConfigMetrics, ok: Sequence[RunMetrics]) -> None:
    """A configuration's token and MFU figures from its ok runs (after its samples/s and per-dollar
    figures are set)."""
    tokens = _common([r.tokens_per_sample for r in ok])
    row.tokens_per_sample = tokens
    if tokens is not None:
        row.tokens_per_s = row.samples_per_s * tokens if row.samples_per_s is not None else None
        row.tokens_per_usd = row.samples_per_usd * tokens if row.samples_per_usd else None
        row.usd_per_million_tokens = 1e6 / row.tokens_per_usd if row.tokens_per_usd else None
    counted = [r.flops_per_sample for r in ok if r.flops_per_sample is not None]
    row.flops_per_sample = statistics.fmean(counted) if counted else None
    mfus = [r.mfu for r in ok if r.mfu is not None]
    row.mfu = statistics.fmean(mfus) if mfus else None
    row.mfu_note = next((r.mfu_note for r in ok if r.mfu_note), None)


def csv_columns(rows: Sequence[ConfigMetrics]) -> tuple[str, ...]:
    """The optional columns ``rows`` fill: the token columns when a row has tokens, the MFU columns when
    a run counted its FLOPs (then every row says its MFU or why it has none)."""
    out: tuple[str, ...] = ()
    if any(r.tokens_per_sample is not None for r in rows):
        out += TOKEN_COLUMNS
    if any(r.flops_per_sample is not None or r.mfu_note for r in rows):
        out += MFU_COLUMNS
    return out
