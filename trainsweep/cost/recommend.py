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
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from trainsweep.cost.metrics import OK, ConfigMetrics, not_judged_reason

NEAR_SHARE = 0.05
"""Configurations this close to the pick are named beside it: repetitions rarely separate them."""


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
        if self.pick is not None:
            out.append(f"Use {_describe(self.pick)}: {self.reason}")
        else:
            out.append(f"No configuration meets the constraint: {self.reason}")
        if self.near:
            names = "; ".join(_describe(c) for c in self.near)
            out.append(f"Within {100 * NEAR_SHARE:.0f}% of its {self.near_by}: {names}.")
        if self.fastest is not None:
            out.append(f"Fastest: {_describe(self.fastest)}.")
        if self.cheapest is not None:
            out.append(f"Cheapest: {_describe(self.cheapest)}.")
        if self.pareto:
            names = ", ".join(c.label for c in self.pareto)
            out.append(
                f"Pareto set (no other configuration is both faster and cheaper): {names} "
                f"({len(self.pareto)} of {self.candidates} configurations)."
            )
        return out

    def to_dict(self) -> dict[str, Any]:
        def key(c: ConfigMetrics | None) -> dict[str, Any] | None:
            if c is None:
                return None
            return {
                "instance_type": c.instance_type,
                "instance_count": c.instance_count,
                "platform": c.platform,
                "batch_size": c.batch_size,
                "time_to_train_s": c.time_to_train_s,
                "cost_to_train_usd": c.cost_to_train_usd,
            }

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
            "text": self.sentences(),
        }


def _fmt_s(s: float) -> str:
    if s >= 3600:
        return f"{s / 3600:.2f} h"
    if s >= 120:
        return f"{s / 60:.1f} min"
    return f"{s:.1f} s"


def _describe(c: ConfigMetrics) -> str:
    return (
        f"{c.machine} with batch size {c.batch_size} "
        f"({_fmt_s(c.time_to_train_s or 0)} to train, ${c.cost_to_train_usd or 0:.4f})"
    )


def pareto_front(rows: Sequence[ConfigMetrics]) -> list[ConfigMetrics]:
    """Configurations not dominated in (time to train, cost to train), fastest first."""
    pts = [r for r in rows if r.time_to_train_s is not None and r.cost_to_train_usd is not None]
    front = []
    for r in pts:
        dominated = any(
            o is not r
            and o.time_to_train_s <= r.time_to_train_s  # type: ignore[operator]
            and o.cost_to_train_usd <= r.cost_to_train_usd  # type: ignore[operator]
            and (o.time_to_train_s < r.time_to_train_s or o.cost_to_train_usd < r.cost_to_train_usd)  # type: ignore[operator]
            for o in pts
        )
        if not dominated:
            front.append(r)
    return sorted(front, key=lambda r: (r.time_to_train_s, r.cost_to_train_usd))


def recommend(
    rows: Sequence[ConfigMetrics], *, deadline_s: float | None = None, budget_usd: float | None = None
) -> Recommendation:
    """Pick the fastest, the cheapest, the Pareto set and the answer under an optional deadline/budget.

    With a deadline: the cheapest configuration that trains within it. With a budget: the fastest one
    that costs at most that. With both: the cheapest one meeting both. With neither: the cheapest.
    """
    pts = [
        r
        for r in rows
        if r.status == OK and r.time_to_train_s is not None and r.cost_to_train_usd is not None
    ]
    rec = Recommendation(None, None, deadline_s=deadline_s, budget_usd=budget_usd, candidates=len(pts))
    taken = {id(r) for r in pts}
    rec.not_judged = [r for r in rows if id(r) not in taken]
    for r in rec.not_judged:
        r.not_judged = r.not_judged or not_judged_reason(r) or "no time to train or no cost"
    subset = (
        f", a subset: {len(rec.not_judged)} of {rec.configurations} configurations could not be judged"
        if rec.not_judged
        else ""
    )
    if not pts:
        rec.reason = "no candidates"
        return rec
    by_time = sorted(pts, key=lambda r: (r.time_to_train_s, r.cost_to_train_usd))
    by_cost = sorted(pts, key=lambda r: (r.cost_to_train_usd, r.time_to_train_s))
    rec.fastest, rec.cheapest = by_time[0], by_cost[0]
    rec.pareto = pareto_front(pts)
    ok = [
        r
        for r in pts
        if (deadline_s is None or r.time_to_train_s <= deadline_s)  # type: ignore[operator]
        and (budget_usd is None or r.cost_to_train_usd <= budget_usd)  # type: ignore[operator]
    ]
    limits = []
    if deadline_s is not None:
        limits.append(f"a deadline of {_fmt_s(deadline_s)}")
    if budget_usd is not None:
        limits.append(f"a budget of ${budget_usd:g}")
    if not ok:
        rec.reason = f"none of {len(pts)} configurations meets {' and '.join(limits)}."
        return rec
    if budget_usd is not None and deadline_s is None:
        rec.pick = min(ok, key=lambda r: (r.time_to_train_s, r.cost_to_train_usd))
        rec.reason = f"the fastest of the {len(ok)} configurations within {limits[0]}{subset}."
        rec.near_by = "time to train"
        best = rec.pick.time_to_train_s or 0.0
        rec.near = [
            r for r in ok if r is not rec.pick and (r.time_to_train_s or 0.0) <= best * (1 + NEAR_SHARE)
        ]
    else:
        rec.pick = min(ok, key=lambda r: (r.cost_to_train_usd, r.time_to_train_s))
        within = f" within {' and '.join(limits)}" if limits else ""
        rec.reason = f"the cheapest of the {len(ok)} configurations{within}{subset}."
        rec.near_by = "cost"
        best = rec.pick.cost_to_train_usd or 0.0
        rec.near = [
            r for r in ok if r is not rec.pick and (r.cost_to_train_usd or 0.0) <= best * (1 + NEAR_SHARE)
        ]
    rec.near.sort(key=lambda r: (r.cost_to_train_usd, r.time_to_train_s))
    return rec
