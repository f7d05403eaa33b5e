"""The recommendation: fastest, cheapest, the Pareto set of time to train vs cost, and a constrained pick.

Only configurations with status ok and both a time to train and a cost take part; the others are counted,
with their reason (``ConfigMetrics.not_judged``), above the recommendation, which then says it is over a
subset. "Time" is the
predicted time to train the requested epochs; "cost" is the cost to train (billable time, per-job
overhead included, x price). A configuration is on the Pareto front when no other one is at least as
fast and at least as cheap and strictly better in one of the two.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainsweep.axes import label as axis_label
from trainsweep.cost.metrics import OK, ConfigMetrics, not_judged_reason

NEAR_SHARE = 0.05
"""Configurations this close to the pick are named beside it: repetitions rarely separate them."""

# The fields a pick carries in `Recommendation.to_dict`, in their JSON order.
PICK_FIELDS = (
    "instance_type",
    "instance_count",
    "platform",
    "batch_size",
    "time_to_train_s",
    "cost_to_train_usd",
    "time_to_target_s",
    "cost_to_target_usd",
    "eval_accuracy",
)


def config_dict(c: ConfigMetrics | None, fields: Sequence[str]) -> dict[str, Any] | None:
    """`fields` of a configuration as a JSON-ready dict, in that order (None for no configuration),
    then its setting of the axes (``axes``) in a sweep with axes."""
    if c is None:
        return None
    out = {f: getattr(c, f) for f in fields}
    if c.axes:
        out["axes"] = dict(c.axes)
    return out


@dataclass
class Recommendation:
    fastest: ConfigMetrics | None
    cheapest: ConfigMetrics | None
    pareto: list[ConfigMetrics] = field(default_factory=list)
    pick: ConfigMetrics | None = None
    """The answer under the user's deadline/budget (or the cheapest when none is given)."""
    deadline_s: float | None = None
    budget_usd: float | None = None
    candidates: int = 0
    reason: str = ""
    near: list[ConfigMetrics] = field(default_factory=list)
    """Other qualifying configurations within :data:`NEAR_SHARE` of the pick on the deciding quantity."""
    near_by: str = ""
    not_judged: list[ConfigMetrics] = field(default_factory=list)
    """Configurations left out of the comparison (each says why in ``not_judged``)."""
    target: str | None = None
    """``eval_accuracy >= 0.97`` when the ranking is by time and cost to reach a target, else None."""
    raw_fastest: ConfigMetrics | None = None
    """The fastest configuration, counting those set aside for their accuracy (or for missing the target)."""
    raw_cheapest: ConfigMetrics | None = None
    priced: bool = True
    """Whether any candidate costs something (False: local runs, unpriced types: time decides)."""

    @property
    def configurations(self) -> int:
        """All configurations: those compared and those that could not be judged."""
        return self.candidates + len(self.not_judged)

    def caveat(self) -> str | None:
        """How many configurations could not be judged and why, said above the recommendation."""
        if not self.not_judged:
            return None
        why = Counter(c.not_judged.split(":", 1)[0] for c in self.not_judged)
        reasons = ", ".join(f"{n} {what}" for what, n in why.most_common())
        unknown = sorted({c.instance_type for c in self.not_judged if c.not_judged.startswith("no instance")})
        named = f" (instance types not read: {', '.join(unknown)})" if unknown else ""
        return (
            f"Could not judge {len(self.not_judged)} of {self.configurations} configurations: "
            f"{reasons}{named}; sweep.csv's not_judged column gives the reason per row. "
            + (
                f"The recommendation below is over the other {self.candidates} only."
                if self.candidates
                else "Nothing is left to compare."
            )
        )

    def sentences(self) -> list[str]:
        """The recommendation in words, with the numbers behind it (first what could not be judged)."""
        caveat = self.caveat()
        head = [caveat] if caveat else []
        if not self.candidates:
            return [
                *head,
                "No configuration finished with usable timings and a known price: nothing to recommend.",
            ]
        out: list[str] = head
        if self.target is not None:
            out.append(
                f"Ranked by time and cost to reach {self.target} (MLPerf's time-to-train), not to train "
                "every epoch."
            )
        if self.pick is not None:
            out.append(f"Use {_describe(self.pick)}: {self.reason}")
        else:
            out.append(f"No configuration meets the constraint: {self.reason}")
        if self.near:
            names = "; ".join(_describe(c) for c in self.near)
            out.append(f"Within {100 * NEAR_SHARE:.0f}% of its {self.near_by}: {names}.")
        out.extend(self._fastest_and_cheapest())
        if not self.priced:
            out.append(
                "No configuration has a price (local runs cost nothing; a type without a price has no "
                "cost): time alone ranks them."
            )
        if self.pareto and self.priced:
            names = ", ".join(c.label for c in self.pareto)
            out.append(
                f"Pareto set (no other configuration is both faster and cheaper): {names} "
                f"({len(self.pareto)} of {self.candidates} configurations)."
            )
        return out

    def _fastest_and_cheapest(self) -> list[str]:
        """The fastest and (with prices) the cheapest, saying what they rank, each followed by the one
        of all that was set aside for its accuracy, if it would have been faster (cheaper)."""
        among = self._among()
        raw = self.target is None  # with a target, those set aside never reached it: no time to compare
        out = []
        if self.fastest is not None:
            out.append(f"Fastest{among}: {_describe(self.fastest)}.")
            out.extend(_set_aside(self.raw_fastest, self.fastest, _train_time, by_time=True) if raw else [])
        if self.cheapest is not None and self.priced:
            out.append(f"Cheapest{among}: {_describe(self.cheapest)}.")
            out.extend(
                _set_aside(self.raw_cheapest, self.cheapest, _train_cost, by_time=False) if raw else []
            )
        return out

    def _among(self) -> str:
        """What the fastest and cheapest are picked among, when some were set aside for their accuracy."""
        if not any(c.quality for c in self.not_judged):
            return ""
        if self.target is not None:
            return " of the configurations that reach the target"
        return " of the configurations that learn as well"

    def to_dict(self) -> dict[str, Any]:
        def key(c: ConfigMetrics | None) -> dict[str, Any] | None:
            return config_dict(c, PICK_FIELDS)

        return {
            "fastest": key(self.fastest),
            "cheapest": key(self.cheapest),
            "pareto": [key(c) for c in self.pareto],
            "pick": key(self.pick),
            "deadline_s": self.deadline_s,
            "budget_usd": self.budget_usd,
            "candidates": self.candidates,
            "reason": self.reason,
            "near": [key(c) for c in self.near],
            "not_judged": [dict(key(c) or {}, reason=c.not_judged) for c in self.not_judged],
            "target": self.target,
            "raw_fastest": key(self.raw_fastest),
            "raw_cheapest": key(self.raw_cheapest),
            "priced": self.priced,
            "text": self.sentences(),
        }


def _fmt_s(s: float) -> str:
    if s >= 3600:
        return f"{s / 3600:.2f} h"
    if s >= 120:
        return f"{s / 60:.1f} min"
    return f"{s:.1f} s"


def _describe(c: ConfigMetrics) -> str:
    # the whole configuration: in a sweep with axes, its setting too
    setting = f" and {axis_label(c.axes)}" if c.axes else ""
    if c.time_to_target_s is not None and c.cost_to_target_usd is not None:
        # local runs cost nothing: "$0.0000" says nothing
        usd = "" if c.cost_to_target_usd == 0 else f", ${c.cost_to_target_usd:.4f}"
        took = f"{_fmt_s(c.time_to_target_s)} to reach the target{usd}"
        return f"{c.machine} with batch size {c.batch_size}{setting} ({took}{_unhonoured(c)})"
    usd = "" if not c.cost_to_train_usd else f", ${c.cost_to_train_usd:.4f}"
    took = f"{_fmt_s(c.time_to_train_s or 0)} to train{usd}"
    return f"{c.machine} with batch size {c.batch_size}{setting} ({took}{_unhonoured(c)})"


def _unhonoured(c: ConfigMetrics) -> str:
    """What of its setting the configuration's runs did not do: said wherever it is named."""
    return "".join(f"; {text}" for text in c.not_honoured)


def _train_time(c: ConfigMetrics) -> float | None:
    return c.time_to_train_s


def _train_cost(c: ConfigMetrics) -> float | None:
    return c.cost_to_train_usd


def _set_aside(
    raw: ConfigMetrics | None,
    kept: ConfigMetrics,
    value: Callable[[ConfigMetrics], float | None],
    *,
    by_time: bool,
) -> list[str]:
    """The trade-off in words when the fastest (cheapest) to train of all was set aside for its accuracy:
    how much it would save and why it was set aside."""
    if raw is None or raw is kept or not raw.quality:
        return []
    mine, theirs = value(raw), value(kept)
    if mine is None or theirs is None or theirs <= 0 or mine >= theirs:
        return []
    share = f"{100 * (theirs - mine) / theirs:.0f}%"
    if by_time:
        saves = f"trains in {_fmt_s(mine)}, {share} less time than {kept.label} ({_fmt_s(theirs)})"
    else:
        saves = f"costs ${mine:.4f}, {share} less than {kept.label} (${theirs:.4f})"
    return [f"{raw.label} {saves}, but is set aside: {raw.quality}."]


def _time(r: ConfigMetrics, by_target: bool) -> float | None:
    return r.time_to_target_s if by_target else r.time_to_train_s


def _cost(r: ConfigMetrics, by_target: bool) -> float | None:
    return r.cost_to_target_usd if by_target else r.cost_to_train_usd


def pareto_front(rows: Sequence[ConfigMetrics], *, by_target: bool = False) -> list[ConfigMetrics]:
    """Configurations not dominated in (time, cost) to train (or, ``by_target``, to reach the target),
    fastest first."""
    pts = [
        (r, t, c)
        for r in rows
        if (t := _time(r, by_target)) is not None and (c := _cost(r, by_target)) is not None
    ]
    front = []
    for r, t, c in pts:
        dominated = any(o is not r and ot <= t and oc <= c and (ot < t or oc < c) for o, ot, oc in pts)
        if not dominated:
            front.append(r)
    return sorted(front, key=lambda r: (_time(r, by_target), _cost(r, by_target)))


def _best_of(what: str, n: int) -> str:
    """``the cheapest of the 3 configurations``; ``the only configuration`` when there is one."""
    return f"the {what} of the {n} configurations" if n > 1 else "the only configuration"


def _raw_picks(
    pts: Sequence[ConfigMetrics], not_judged: Sequence[ConfigMetrics]
) -> tuple[ConfigMetrics, ConfigMetrics]:
    """The fastest and the cheapest to train, counting the configurations set aside only for their
    accuracy or their target (by time and cost to train: those missed the target, or have none)."""
    aside = [
        r
        for r in not_judged
        if r.quality
        and r.not_judged == r.quality
        and r.time_to_train_s is not None
        and r.cost_to_train_usd is not None
    ]
    every = [*pts, *aside]
    fastest = min(every, key=lambda r: (_train_time(r) or 0.0, _train_cost(r) or 0.0))
    cheapest = min(every, key=lambda r: (_train_cost(r) or 0.0, _train_time(r) or 0.0))
    return fastest, cheapest


def _choose(
    rec: Recommendation,
    ok: Sequence[ConfigMetrics],
    decide: Callable[[ConfigMetrics], float],
    then: Callable[[ConfigMetrics], float],
    near_by: str,
) -> None:
    """The pick: least ``decide``, then least ``then``; and those within :data:`NEAR_SHARE` of it on
    ``decide`` (named ``near_by``)."""
    rec.pick = min(ok, key=lambda r: (decide(r), then(r)))
    best = decide(rec.pick)
    rec.near = [r for r in ok if r is not rec.pick and decide(r) <= best * (1 + NEAR_SHARE)]
    rec.near_by = near_by


def _candidates(rows: Sequence[ConfigMetrics], by_target: bool) -> list[ConfigMetrics]:
    """The configurations that take part: ok, judged, with a time and a cost (to the target, by target)."""
    return [
        r
        for r in rows
        if r.status == OK
        and not r.not_judged
        and r.time_to_train_s is not None
        and r.cost_to_train_usd is not None
        and (not by_target or (r.time_to_target_s is not None and r.cost_to_target_usd is not None))
    ]


def _not_judged(
    rows: Sequence[ConfigMetrics], candidates: Sequence[ConfigMetrics], by_target: bool
) -> list[ConfigMetrics]:
    """The rows that do not take part, each with its ``not_judged`` reason set."""
    taken = {id(r) for r in candidates}
    out = [r for r in rows if id(r) not in taken]
    for r in out:
        r.not_judged = (
            r.not_judged or not_judged_reason(r, by_target=by_target) or "no time to train or no cost"
        )
    return out


def _limits(deadline_s: float | None, budget_usd: float | None) -> list[str]:
    """The user's limits in words."""
    limits = []
    if deadline_s is not None:
        limits.append(f"a deadline of {_fmt_s(deadline_s)}")
    if budget_usd is not None:
        limits.append(f"a budget of ${budget_usd:g}")
    return limits


def recommend(
    rows: Sequence[ConfigMetrics],
    *,
    deadline_s: float | None = None,
    budget_usd: float | None = None,
    target: str | None = None,
) -> Recommendation:
    """Pick the fastest, the cheapest, the Pareto set and the answer under an optional deadline/budget.

    With a deadline: the cheapest configuration that trains within it. With a budget: the fastest one
    that costs at most that. With both: the cheapest one meeting both. With neither: the cheapest.
    With ``target`` (its description, e.g. ``eval_accuracy >= 0.97``) time and cost are those to reach it.
    A configuration whose ``not_judged`` says why (it learns worse, it missed the target) is left out.
    """
    by_target = target is not None
    pts = _candidates(rows, by_target)
    rec = Recommendation(
        None, None, deadline_s=deadline_s, budget_usd=budget_usd, candidates=len(pts), target=target
    )
    rec.not_judged = _not_judged(rows, pts, by_target)
    subset = (
        f", a subset: {len(rec.not_judged)} of {rec.configurations} configurations could not be judged"
        if rec.not_judged
        else ""
    )
    if not pts:
        rec.reason = "no candidates"
        return rec

    def time(r: ConfigMetrics) -> float:
        return _time(r, by_target) or 0.0

    def cost(r: ConfigMetrics) -> float:
        return _cost(r, by_target) or 0.0

    by_time = sorted(pts, key=lambda r: (time(r), cost(r)))
    by_cost = sorted(pts, key=lambda r: (cost(r), time(r)))
    rec.fastest, rec.cheapest = by_time[0], by_cost[0]
    rec.priced = any(cost(r) > 0 for r in pts)
    rec.raw_fastest, rec.raw_cheapest = _raw_picks(pts, rec.not_judged)
    rec.pareto = pareto_front(pts, by_target=by_target)
    ok = [
        r
        for r in pts
        if (deadline_s is None or time(r) <= deadline_s) and (budget_usd is None or cost(r) <= budget_usd)
    ]
    limits = _limits(deadline_s, budget_usd)
    if not ok:
        rec.reason = f"none of {len(pts)} configurations meets {' and '.join(limits)}."
        return rec
    # time decides with a budget alone, or when nothing has a price (every configuration costs nothing)
    by_time_only = (budget_usd is not None and deadline_s is None) or not rec.priced
    if by_time_only:
        _choose(rec, ok, time, cost, "time to reach the target" if by_target else "time to train")
    else:
        _choose(rec, ok, cost, time, "cost")
    what = "fastest" if by_time_only else "cheapest"
    within = f" within {' and '.join(limits)}" if limits else ""
    rec.reason = f"{_best_of(what, len(ok))}{within}{subset}."
    rec.near.sort(key=lambda r: (cost(r), time(r)))
    return rec
