"""What a sweep's axes change: the best setting per instance type and each axis's effect.

A sweep with ``axes`` has one configuration per (instance type, batch size, setting). These are the
figures the report shows of them: per instance type, which setting (with its batch size) trains fastest
and which cheapest (:func:`best_settings`); per axis, the epoch time and cost per epoch of each of its
values, the rest of the configuration held (:func:`axis_effects`). A sweep without axes has neither.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trainsweep import axes as axis
from trainsweep.cost.metrics import OK, ConfigMetrics

BY = {"time": "time_to_train_s", "cost": "cost_to_train_usd"}
"""What "best" ranks by: the recommendation's time and cost to train."""


def axis_names(rows: Sequence[ConfigMetrics]) -> list[str]:
    """The sweep's axes (``[]`` without axes), in the spec's order."""
    return axis.names_of([r.axes for r in rows])


def _judged(rows: Sequence[ConfigMetrics], field: str) -> list[ConfigMetrics]:
    """The rows the recommendation could rank by ``field``: ok, learning as well, with a value."""
    return [r for r in rows if r.status == OK and not r.quality and getattr(r, field) is not None]


def best_settings(rows: Sequence[ConfigMetrics], *, priced: bool = True) -> list[dict[str, Any]]:
    """Per instance type (and instance count), the fastest and, with prices, the cheapest configuration:
    ``{instance_type, instance_count, by, batch_size, axes, value, runner_up, not_honoured}``;
    ``runner_up`` is how much slower (dearer) the best of the *other* settings is, as a fraction (None: no
    other setting); ``not_honoured`` what of its setting the best's runs did not do (its figures are then
    another setting's)."""
    out: list[dict[str, Any]] = []
    machines = dict.fromkeys((r.instance_type, r.instance_count) for r in rows)
    for itype, count in machines:
        mine = [r for r in rows if (r.instance_type, r.instance_count) == (itype, count)]
        for by, field in BY.items():
            if by == "cost" and not priced:
                continue
            best = _best(_judged(mine, field), field)
            if best is not None:
                out.append(_best_record(best, by, field, _judged(mine, field)))
    return out


def _best(rows: Sequence[ConfigMetrics], field: str) -> ConfigMetrics | None:
    return min(rows, key=lambda r: getattr(r, field)) if rows else None


def _best_record(best: ConfigMetrics, by: str, field: str, rows: Sequence[ConfigMetrics]) -> dict[str, Any]:
    value = getattr(best, field)
    others = _best([r for r in rows if r.axes != best.axes], field)
    runner_up = getattr(others, field) / value - 1 if others is not None and value else None
    return {
        "instance_type": best.instance_type,
        "instance_count": best.instance_count,
        "by": by,
        "batch_size": best.batch_size,
        "axes": dict(best.axes),
        field: value,
        "other_settings_behind": runner_up,
        "not_honoured": list(best.not_honoured),
    }


@dataclass
class Effect:
    """One line of an axis's effect: the figure per value of the axis, the rest held."""

    instance_type: str
    batch_size: int | None
    others: dict[str, Any]
    """The other axes' values held."""
    values: list[str]
    """The axis's values, as text, in the spec's order."""
    mean: list[float | None]
    spread: list[float | None]
    """± one standard deviation over repetitions (None: one repetition)."""

    @property
    def line(self) -> str:
        """``bs 256, compile=true``: the line's label within its instance type's panel."""
        held = f", {axis.label(self.others)}" if self.others else ""
        return f"bs {self.batch_size}{held}"


FIGURES: dict[str, tuple[str, str | None, str]] = {
    "epoch_time_s": ("epoch_time_std_s", None, "Epoch time (s)"),
    "cost_per_epoch_usd": ("epoch_time_std_s", "epoch_time_s", "Cost per epoch (USD)"),
}
"""Figure -> (the standard deviation's field, the field it is relative to, its label). The cost per
epoch is the epoch time times the price: its spread is the epoch time's, in proportion."""


def _spread_of(row: ConfigMetrics, figure: str) -> float | None:
    std_field, base_field, _ = FIGURES[figure]
    std, value = getattr(row, std_field), getattr(row, figure)
    if std is None or value is None:
        return None
    if base_field is None:
        return float(std)
    base = getattr(row, base_field)
    return float(std) * float(value) / float(base) if base else None


def _held(row: ConfigMetrics, name: str) -> tuple[str, int | None, int, tuple[tuple[str, str], ...]]:
    others = tuple((k, axis.text(v)) for k, v in row.axes.items() if k != name)
    return row.instance_type, row.batch_size, row.instance_count, others


def axis_effects(rows: Sequence[ConfigMetrics], name: str, figure: str) -> list[Effect]:
    """The ``figure`` (:data:`FIGURES`) of each value of axis ``name``, one :class:`Effect` per instance
    type, batch size and values of the other axes; only ok configurations count (a failed or
    infeasible value has no point: None)."""
    values = list(dict.fromkeys(axis.text(r.axes[name]) for r in rows if name in r.axes))
    lines: dict[tuple[str, int | None, int, tuple[tuple[str, str], ...]], dict[str, ConfigMetrics]] = {}
    for r in rows:
        if name in r.axes and r.status == OK and getattr(r, figure) is not None:
            lines.setdefault(_held(r, name), {})[axis.text(r.axes[name])] = r
    out = []
    for (itype, bs, _, others), by_value in lines.items():
        row_of = by_value.get
        out.append(
            Effect(
                itype,
                bs,
                dict(others),
                values,
                [getattr(row, figure) if (row := row_of(v)) else None for v in values],
                [_spread_of(row, figure) if (row := row_of(v)) else None for v in values],
            )
        )
    return out
