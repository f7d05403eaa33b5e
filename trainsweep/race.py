"""The racing strategy replayed on recorded logs: a packed scan that stops watching the configurations
its intervals already rule out.

Successive halving over configurations (the idea behind Hyperband and ASHA, applied to measuring rather
than training): one packed early-stop job per instance type, one repetition. In stage 0 every
configuration is watched for ``first_steps`` steps; from what it watched, the container's prediction of
its full run (:func:`trainsweep.simulate.watch`, with the calibrated 90 % interval of its family and
instance class) gives an interval on its time and cost to train. A configuration whose interval lies
wholly above the best upper bound in time *and* in cost can be neither the fastest, nor the cheapest,
nor the recommended pick (the cheapest): it is dropped. The contenders are watched ``growth`` times
longer in the next stage, until the live rule stops each of them by itself (its precision or its caps).

The jobs run side by side from the sweep's start and post each look's prediction as it ends (in a
sweep, under its S3 prefix); before looking again at a configuration a job reads what the others have
posted by then. Nobody waits for a stage to end: a look is decided on what is known when it would start.
Each job pays its start-up once (in stage 0's cost) and the looks it takes; it ends when its
configurations are all dropped or settled. Each stage's cost is the looks taken in it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trainsweep.cost import billing
from trainsweep.spec import hourly_prices

if TYPE_CHECKING:
    from trainsweep.cost.runs import RunMetrics
    from trainsweep.predict import Calibration, StopRule
    from trainsweep.simulate import CellKey, Sample, Watched
    from trainsweep.spec import SweepSpec


@dataclass(frozen=True)
class RaceRule:
    """How the race watches: ``first_steps`` per configuration, then ``growth`` times more each stage."""

    first_steps: int = 24
    growth: int = 2
    max_stages: int = 8
    calibration: Calibration | None = None
    """The intervals' calibration (None: the shipped one)."""

    def __post_init__(self) -> None:
        if self.first_steps < 4 or self.growth < 2 or self.max_stages < 1:
            raise ValueError("first_steps must be >= 4, growth >= 2 and max_stages >= 1")

    def budget(self, stage: int) -> int:
        return self.first_steps * self.growth**stage


@dataclass
class Entrant:
    """One configuration in the race (its first repetition's log)."""

    sample: Sample
    price: float | None
    watched: Watched | None = None
    dropped_in: int | None = None
    paid_s: float = 0.0

    @property
    def cell(self) -> tuple[str, int]:
        return self.sample.instance_type, self.sample.batch_size

    @property
    def settled(self) -> bool:
        return self.watched is None or self.watched.settled or self.watched.prediction is None

    def bounds(self, instance_count: int) -> tuple[float, float, float, float]:
        """(time low, time high, cost low, cost high) of a full run, from the interval of what it watched."""
        w, full = self.watched, self.sample.full
        if w is None or w.prediction is None:
            assert full.time_to_train_s is not None
            lo = hi = full.time_to_train_s
        else:
            lo, hi = w.prediction.total_low_s, w.prediction.total_high_s
        price = self.price or 0.0

        def usd(s: float) -> float:
            return billing.cost_usd(billing.modelled_billable_s(s), price, instance_count)

        return lo, hi, usd(lo), usd(hi)


@dataclass
class Stage:
    """One stage of the race as ``simulate --json`` prints it."""

    index: int
    steps: int
    """Steps a configuration looked at in this stage has been watched for at its end (at most)."""
    watched: list[str]
    dropped: list[str] = field(default_factory=list)
    settled: list[str] = field(default_factory=list)
    billable_s: float = 0.0
    cost_usd: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.index,
            "steps": self.steps,
            "configurations_watched": len(self.watched),
            "dropped": self.dropped,
            "settled": self.settled,
            "contenders_after": None,
            "billable_s": self.billable_s,
            "cost_usd": self.cost_usd,
        }


def _label(e: Entrant) -> str:
    return f"{e.cell[0]} x {e.cell[1]}"


Bounds = tuple[float, float, float, float]


def excluded(own: Bounds, board: list[Bounds]) -> bool:
    """Whether the others' posted bounds (``board``) rule ``own`` out of the fastest and of the cheapest
    (the recommended pick): its interval lies wholly above the best upper bound in time and in cost."""
    if not board:
        return False
    return own[0] > min(b[1] for b in board) and own[2] > min(b[3] for b in board)


def _board(posted: list[tuple[float, Entrant, Bounds]], now: float, me: Entrant) -> list[Bounds]:
    """The others' latest bounds posted by ``now`` (of those not dropped)."""
    latest: dict[int, tuple[float, Bounds]] = {}
    for t, e, b in posted:
        if t <= now and e is not me and e.dropped_in is None and t >= latest.get(id(e), (-1.0, b))[0]:
            latest[id(e)] = (t, b)
    return [b for _, b in latest.values()]


@dataclass
class _Job:
    """One packed job of the race: its clock (training seconds so far) and its queue of looks."""

    instance_type: str
    clock: float = 0.0
    queue: list[tuple[Entrant, int]] = field(default_factory=list)


@dataclass
class _Race:
    """The race's state while it is replayed: the stages so far and every look's posted bounds."""

    spec: SweepSpec
    rule: StopRule
    race_rule: RaceRule
    stages: dict[int, Stage] = field(default_factory=dict)
    posted: list[tuple[float, Entrant, Bounds]] = field(default_factory=list)
    """Every look's bounds, with the time it was posted."""

    def take(self, job: _Job) -> None:
        """The job's next look: dropped if what is posted by now rules it out, else watched."""
        e, k = job.queue.pop(0)
        stage = self.stages.setdefault(k, Stage(k, self.race_rule.budget(k), []))
        count = self.spec.instance_count
        if k > 0 and excluded(e.bounds(count), _board(self.posted, job.clock, e)):
            e.dropped_in = k
            stage.dropped.append(_label(e))
            return
        added = self._watch(e, k)
        job.clock += added
        stage.watched.append(_label(e))
        stage.billable_s += added
        stage.cost_usd += billing.cost_usd(added, e.price or 0.0, count)
        self.posted.append((job.clock, e, e.bounds(count)))
        if e.settled or k + 1 >= self.race_rule.max_stages:
            stage.settled.append(_label(e))
        else:
            job.queue.append((e, k + 1))

    def _watch(self, e: Entrant, k: int) -> float:
        """Watch ``e`` up to stage ``k``'s budget; the training seconds this look added."""
        from trainsweep.simulate import watch

        before = e.paid_s
        e.watched = watch(
            e.sample, self.spec, self.rule, self.race_rule.budget(k), calibration=self.race_rule.calibration
        )
        e.paid_s = e.watched.paid_s if e.watched is not None else e.sample.full.time_to_train_s or 0.0
        return e.paid_s - before


def race(
    by_cell: dict[CellKey, list[Sample]],
    spec: SweepSpec,
    region: str,
    rule: StopRule,
    race_rule: RaceRule | None = None,
) -> tuple[dict[str, Any], list[RunMetrics]]:
    """Replay the race on the first repetition of each configuration: the strategy's bill (with its
    ``stages``) and the runs its report would aggregate (each configuration's last prediction).

    The jobs run side by side and post each look's prediction as it ends; a job about to look again at
    a configuration first reads what the others have posted by then, and drops it if that rules it out
    (:func:`excluded`). Nobody waits: the look that comes next is decided on what is known at that time.
    """
    state = _Race(spec, rule, race_rule or RaceRule())
    prices = hourly_prices(spec, region)
    entrants, jobs = _line_up(by_cell, prices)
    while waiting := [j for j in jobs.values() if j.queue]:
        state.take(min(waiting, key=lambda j: j.clock))
    start_up = _start_up(
        state.stages.setdefault(0, Stage(0, state.race_rule.first_steps, [])), jobs, prices, spec
    )
    wall = billing.FIXED_OVERHEAD_S + max((j.clock for j in jobs.values()), default=0.0)
    stages = [state.stages[k] for k in sorted(state.stages)]
    strategy = _strategy(stages, entrants, [e for e in entrants if e.dropped_in is None], prices, wall)
    strategy["start_up_usd"] = start_up if strategy["cost_usd"] is not None else None
    strategy["start_up_s"] = billing.FIXED_OVERHEAD_S * len(jobs)
    return strategy, [_last_look(e) for e in entrants]


def _line_up(
    by_cell: dict[CellKey, list[Sample]], prices: dict[str, float | None]
) -> tuple[list[Entrant], dict[str, _Job]]:
    """One entrant per configuration (its first log), and one packed job per instance type, each with
    its configurations' first looks queued."""
    entrants = [Entrant(xs[0], prices.get(cell[0])) for cell, xs in sorted(by_cell.items()) if xs]
    jobs = {t: _Job(t) for t in dict.fromkeys(e.cell[0] for e in entrants)}
    for e in entrants:
        jobs[e.cell[0]].queue.append((e, 0))
    return entrants, jobs


def _start_up(first: Stage, jobs: dict[str, _Job], prices: dict[str, float | None], spec: SweepSpec) -> float:
    """Every job's start-up, paid once, added to stage 0's bill; its cost."""
    cost = sum(
        billing.cost_usd(billing.FIXED_OVERHEAD_S, prices.get(t) or 0.0, spec.instance_count) for t in jobs
    )
    first.billable_s += billing.FIXED_OVERHEAD_S * len(jobs)
    first.cost_usd += cost
    return cost


def _last_look(e: Entrant) -> RunMetrics:
    """What the report aggregates of an entrant: its last look's prediction (the full run if none)."""
    from trainsweep.simulate import _seen

    w, full = e.watched, e.sample.full
    return full if w is None or w.prediction is None else _seen(full, w.prediction.total_s)


def _strategy(
    stages: list[Stage],
    entrants: list[Entrant],
    active: list[Entrant],
    prices: dict[str, float | None],
    wall: float,
) -> dict[str, Any]:
    left = len(entrants)
    rows = []
    for s in stages:
        left -= len(s.dropped)
        d = s.to_dict()
        d["contenders_after"] = left
        rows.append(d)
    priced = all(prices.get(e.cell[0]) is not None for e in entrants)
    return {
        "jobs": len({e.cell[0] for e in entrants}),
        "runs": len(entrants),
        "billable_s": sum(s.billable_s for s in stages),
        "warm_pool_retained_s": 0.0,
        "warm_starts": 0,
        "cost_usd": sum(s.cost_usd for s in stages) if priced else None,
        "unpriced_instance_types": sorted({e.cell[0] for e in entrants if prices.get(e.cell[0]) is None}),
        "wall_s": wall,
        "mode": "race",
        "packing": "per-instance",
        "repetitions": 1,
        "warm_pool_seconds": None,
        "early_stopped_runs": sum(1 for e in entrants if e.watched is not None and e.watched.prediction),
        "early_stop_replay": {"step": sum(1 for e in entrants if e.watched is not None), "epoch": 0},
        "batch_size_search": False,
        "skipped_by_search": [],
        "stages": rows,
        "finalists": [_label(e) for e in active],
    }
