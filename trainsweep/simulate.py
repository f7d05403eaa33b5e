"""Replay a sweep strategy on recorded complete logs: what it would cost and take, what it would pick,
and how far that pick is from the answer of the exhaustive grid on the same logs.

``trainsweep simulate SPEC --from DIR`` reads DIR as ``trainsweep import`` does (same walk, parser, copy
checks and instance-type reading; :func:`trainsweep.importer.read_dir`). Each complete log is one
repetition of one (instance type, batch size) configuration. The spec's strategy is replayed on them:

- ``repetitions``: the first R repetitions of each configuration (by run index, then path).
- ``mode: early-stop``: the container's live rule (:class:`trainsweep.predict.SteadyState`) is fed the
  log's steps one by one and stops where the container would, inside an epoch if need be; the job pays
  the steps watched (and the validation the container times), and the recommendation uses the rule's
  prediction of the full run from what it watched (:func:`_live_rule`). Logs without step times fall
  back to whole epochs (:func:`trainsweep.predict.replay`). ``mode: full``: the job pays the whole log.
- ``packing: per-instance``: one job per instance type and repetition runs all its batch sizes, so one
  start-up overhead for all of them; ``per-cell``: one job (and one overhead) per run.
- ``batch_sizes: auto``: each packed job replays the supervisor's batch-size search on the recorded
  sizes and does not run (nor pay for) the sizes past a throughput plateau (:func:`search_batch_sizes`).
- ``warm_pool_seconds``: the jobs of one instance type run one after the other on a warm pool
  (:func:`trainsweep.cost.billing.chain_billable_s`).
- ``target`` (mode full): each run ends at its first evaluation reaching the target, as the container's
  full run does, and its job pays training to there (a run that never reaches it pays every epoch);
  configurations are ranked by time and cost to the target (:func:`trainsweep.cost.metrics.run_metrics`
  with ``target_value``), and one that never reaches it is not picked. The exhaustive grid runs to the
  target too.
- ``phases: [scan, confirm]``: the scan (:func:`trainsweep.phases.scan_spec`: early stop, packed, one
  repetition) is replayed as above, its configurations ranked by :func:`trainsweep.phases.rank_scan`,
  and the ``confirm_top_k`` best replayed as the confirm sweep (:func:`trainsweep.phases.confirm_spec`:
  full runs to the target, one job per cell); the strategy pays both and picks from the confirmed runs.

Costs use the real sweep's billing model and prices (:mod:`trainsweep.cost.billing`, SageMaker training
prices from :mod:`trainsweep.cost.prices`); the picks come from the report's own aggregation and
recommendation (:func:`trainsweep.cost.metrics.aggregate`, :func:`trainsweep.cost.recommend.recommend`).
The exhaustive answer ("truth") is every configuration, every repetition, full runs, one job each.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from trainsweep import axes as axis
from trainsweep import phases
from trainsweep.cost import billing
from trainsweep.cost.metrics import OK, SAGEMAKER, ConfigMetrics, RunMetrics, aggregate, run_metrics
from trainsweep.cost.prices import prices_said
from trainsweep.cost.recommend import config_dict, recommend
from trainsweep.cost.runs import run_setting
from trainsweep.errors import TrainsweepError
from trainsweep.importer import FileOutcome, ImportResult
from trainsweep.logs.model import Epoch, RunTimings
from trainsweep.predict import Calibration, Prediction, SteadyState, StopRule, predict_run, replay
from trainsweep.spec import SweepSpec, hourly_prices, load_spec

if TYPE_CHECKING:
    from trainsweep.race import RaceRule

_SAGEMAKER_JOB = {"platform": SAGEMAKER, "status": OK}
"""A simulated sweep runs SageMaker jobs, whatever platform the logs were recorded on."""

SettingKey = tuple[tuple[str, str], ...]
"""A setting of the spec's axes as ``((name, value text), ...)`` in the spec's order; ``()`` without axes."""
CellKey = tuple[str, int, SettingKey]
"""A configuration of the grid: instance type, batch size, setting of the axes."""


def setting_key(setting: Mapping[str, Any], names: Sequence[str]) -> SettingKey | None:
    """The key of ``setting`` among the axes ``names`` (values compared as text: a log's ``true`` is the
    spec's ``True``); None when it does not give exactly those axes."""
    if set(setting) != set(names):
        return None
    return tuple((n, axis.text(setting[n])) for n in names)


def spec_settings(spec: SweepSpec) -> list[SettingKey]:
    """The keys of the spec's settings, in the planner's order (``[()]`` without axes)."""
    names = list(spec.axes or {})
    return [setting_key(s, names) or () for s in spec.settings]


@dataclass
class Sample:
    """One complete log used as one repetition of one configuration."""

    path: str
    instance_type: str
    batch_size: int
    run: RunTimings
    full: RunMetrics
    """The run's figures as a full run of the spec's epochs (SageMaker billing)."""
    folder: str = ""
    """The import's results root of the log (its experiment folder)."""
    setting: SettingKey = ()
    """Its setting of the spec's axes (``()`` without axes)."""

    @property
    def cell(self) -> CellKey:
        return self.instance_type, self.batch_size, self.setting


@dataclass
class Job:
    """One simulated training job: what it paid for and what it measured."""

    instance_type: str
    samples: list[Sample]
    seconds: float
    """Training seconds the job ran (the epochs watched, in early-stop mode)."""
    instance_count: int = 1
    """Instances of the job (the spec's ``instance_count``; what the grouping reads with the type)."""


@dataclass
class Simulation:
    """The outcome of :func:`simulate` (``to_dict`` is what ``simulate --json`` prints)."""

    strategy: dict[str, Any]
    exhaustive: dict[str, Any]
    picks: dict[str, dict[str, Any] | None]
    truth: dict[str, dict[str, Any] | None]
    regret: dict[str, dict[str, float | None]]
    spread: dict[str, float | None]
    learns_worse: dict[str, str] = field(default_factory=dict)
    """The picks the exhaustive runs flag (the quality check of the report: ``quality_margin``)."""
    cells_without_logs: list[dict[str, Any]] = field(default_factory=list)
    logs_outside_spec: list[dict[str, Any]] = field(default_factory=list)
    logs_unused: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    target: dict[str, Any] | None = None
    """The spec's target (``metric``, ``value``): picks, truth and regret are then to the target."""
    missed_target: list[dict[str, Any]] = field(default_factory=list)
    """With a target: the configurations the exhaustive runs show not reaching it (never recommended)."""
    phases: dict[str, Any] | None = None
    """``phases: [scan, confirm]``: each phase's bill, the scan's ranking and the cells confirmed."""
    prices: str = ""
    """Where the prices come from: the spec's ``prices`` (named), otherwise the catalogue's source."""

    @property
    def cost_ratio(self) -> float | None:
        s, e = self.strategy.get("cost_usd"), self.exhaustive.get("cost_usd")
        return s / e if s is not None and e else None

    def to_dict(self) -> dict[str, Any]:
        fastest, cheapest = self.regret.get("fastest", {}), self.regret.get("cheapest", {})
        return {
            "strategy_cost_usd": self.strategy.get("cost_usd"),
            "exhaustive_cost_usd": self.exhaustive.get("cost_usd"),
            "cost_ratio": self.cost_ratio,
            "strategy_wall_s": self.strategy.get("wall_s"),
            "exhaustive_wall_s": self.exhaustive.get("wall_s"),
            "picks": self.picks,
            "truth": self.truth,
            # how much slower the picked fastest really is than the true fastest, and how much dearer
            # the picked cheapest than the true cheapest (fractions; 0 = the same answer); with a
            # target, in time and cost to reach it
            "regret_time": fastest.get("time"),
            "regret_cost": cheapest.get("cost"),
            "regret": self.regret,
            "repetition_spread": self.spread,
            "learns_worse": self.learns_worse,
            "strategy": self.strategy,
            "exhaustive": self.exhaustive,
            "cells_without_logs": self.cells_without_logs,
            "logs_outside_spec": self.logs_outside_spec,
            "logs_unused": self.logs_unused,
            "target": self.target,
            "missed_target": self.missed_target,
            "phases": self.phases,
            "prices": self.prices,
            "notes": self.notes,
        }


# ---- reading the logs into samples -----------------------------------------------------------------


def _left_out_copies(result: ImportResult) -> dict[str, str]:
    """Logs the import leaves out as copies of another (byte-identical or identical timings)."""
    out: dict[str, str] = {}
    for dup in result.quality.get("duplicates", []):
        for path in dup["paths"]:
            if path != dup["kept"]:
                out.setdefault(path, f"a copy of {dup['kept']} ({dup['kind'].replace('_', ' ')})")
    return out


def _setting_of(run: RunTimings, spec: SweepSpec) -> SettingKey | str:
    """The log's setting of the spec's axes (``()`` for a spec without axes), or why it has none."""
    if not spec.axes:
        return ()
    said = run_setting(run)
    key = setting_key(said, list(spec.axes))
    if key is not None:
        return key
    return (
        f"its setting of the axes ({axis.label(said) or 'none'}) does not give each of the spec's axes "
        f"({', '.join(spec.axes)}) (docs/analysis.md: a log's setting)"
    )


def _outside(o: FileOutcome, setting: SettingKey) -> dict[str, Any]:
    out = {"path": o.path, "instance_type": o.instance_type, "batch_size": o.batch_size}
    return {**out, "axes": dict(setting)} if setting else out


def _setting_or_why(
    o: FileOutcome, run: RunTimings | None, copies: dict[str, str], spec: SweepSpec
) -> SettingKey | str:
    """The setting of the spec's axes an imported log stands for, or why it cannot stand for a run."""
    if run is None:
        return "could not be read"
    if o.path in copies:
        return copies[o.path]
    if run.status != "complete":
        return f"not a complete log (status {run.status})"
    if o.instance_type is None:
        return "its instance type is not read (docs/log-formats.md)"
    if not o.batch_size:
        return "its batch size is not read"
    return _setting_of(run, spec)


def _full_run(run: RunTimings, spec: SweepSpec) -> RunMetrics:
    """The log's figures as a full run of the spec's epochs (to the target, with one), billed as a
    SageMaker job."""
    full = run_metrics(
        run, epochs=spec.workload.epochs, job=_SAGEMAKER_JOB, target_value=_target_value(spec),
        target_metric=_target_metric(spec), minimize=_minimize(spec),
    )  # fmt: skip
    if full.target_epoch is not None and full.target_epoch > spec.workload.epochs:
        # reached after the spec's epochs: a run of the spec's epochs ends before it
        full.target_epoch = full.time_to_target_s = full.billable_to_target_s = None
    if not spec.axes:
        full.axes = {}  # a spec without axes pools the logs' settings (_input_notes says so)
    return full


def samples_from(
    result: ImportResult, spec: SweepSpec
) -> tuple[dict[CellKey, list[Sample]], list[dict[str, Any]], list[dict[str, str]]]:
    """The complete logs by (instance type, batch size, setting of the axes) of the spec's grid, in
    repetition order.

    Returns (samples by cell, logs outside the spec's grid, logs not used with the reason).
    """
    copies = _left_out_copies(result)
    cells = {(t, b, k) for t in spec.instance_types for b in spec.batch_sizes for k in spec_settings(spec)}
    by_cell: dict[CellKey, list[tuple[int, str, Sample]]] = {}
    outside: list[dict[str, Any]] = []
    unused: list[dict[str, str]] = []
    for o in result.files:
        run = result.runs.get(o.path)
        setting = _setting_or_why(o, run, copies, spec)
        if isinstance(setting, str):
            unused.append({"path": o.path, "reason": setting})
            continue
        assert run is not None and o.instance_type is not None and o.batch_size
        if (o.instance_type, o.batch_size, setting) not in cells:
            outside.append(_outside(o, setting))
            continue
        full = _full_run(run, spec)
        if full.status != OK or full.time_to_train_s is None:
            unused.append({"path": o.path, "reason": full.reason or "no time to train"})
            continue
        sample = Sample(o.path, o.instance_type, o.batch_size, run, full, o.results_root, setting)
        order = o.run_index if o.run_index is not None else 1 << 30
        by_cell.setdefault(sample.cell, []).append((order, o.path, sample))
    ordered = {cell: [s for _, _, s in sorted(xs, key=lambda x: x[:2])] for cell, xs in by_cell.items()}
    return ordered, outside, unused


# ---- the strategy --------------------------------------------------------------------------------


def _epoch_seconds(e: Epoch) -> float:
    if e.epoch_s is not None and e.epoch_s > 0:
        return e.epoch_s
    return sum(e.step_s) + (e.validation_s or 0.0)


@dataclass
class _Observed:
    metrics: RunMetrics
    """What the strategy learns of the run (its prediction of the full run in early-stop mode)."""
    job_seconds: float
    """Training seconds the run costs inside its job."""
    step_s: float | None = None
    """The steady step time the strategy measured (what a batch-size search compares)."""
    replay: str = "full"
    """How the run was replayed: ``full`` (paid whole), ``step`` (live rule, step by step) or ``epoch``."""


_UNEVALUATED = {
    "eval_accuracy": None,
    "target_epoch": None,
    "time_to_target_s": None,
    "billable_to_target_s": None,
}
"""What an early-stopped run does not know: it never evaluates."""


def to_target_seconds(sample: Sample, spec: SweepSpec) -> float:
    """Training seconds of the sample's full run under the spec: to its first evaluation reaching the
    target (the container ends a full run there), else every epoch (no target, or never reached)."""
    full = sample.full
    assert full.time_to_train_s is not None
    if spec.target is not None and full.time_to_target_s is not None:
        return full.time_to_target_s
    return full.time_to_train_s


def observe(sample: Sample, spec: SweepSpec, rule: StopRule) -> _Observed:
    """What one run costs and tells under the spec's mode."""
    full = sample.full
    if spec.mode != "early-stop":
        return _Observed(full, to_target_seconds(sample, spec), full.step_s)
    seen = _live_rule(sample, spec, rule) or _epoch_replay(sample, spec, rule)
    if any(getattr(seen.metrics, k) is not None for k in _UNEVALUATED):
        # early-stop mode never evaluates, even run to the end
        seen.metrics = RunMetrics(**{**seen.metrics.to_dict(), **_UNEVALUATED})
    return seen


def _seen(full: RunMetrics, predicted: float) -> RunMetrics:
    # an early-stopped run never evaluates: what the full log's evaluation said is not seen
    seen = RunMetrics(
        **{**full.to_dict(), **_UNEVALUATED, "time_to_train_s": predicted, "prediction_used": True}
    )
    seen.billable_s, seen.billable_source = billing.modelled_billable_s(predicted), "model"
    return seen


def _live_rule(sample: Sample, spec: SweepSpec, rule: StopRule) -> _Observed | None:
    """The container's live rule replayed step by step (:class:`trainsweep.predict.SteadyState`, as
    ``trainsweep.training.worker`` feeds it): the job stops at the step the rule says, inside an epoch
    if need be, and predicts the full run from the steps it watched as the container does
    (:func:`trainsweep.predict.predict_run`: steps per epoch x steady step + a validation pass +
    one-off warm-up). None when the log has one epoch, or does not time the steps of every epoch.

    What the job pays: every step watched, and every epoch it finished whole (validation and hand-off
    included), plus one validation pass, the log's first (with its one-off costs), for the validation
    batches the container times after stopping. The validation pass the prediction uses is the log's
    second (the first is warm-up, as the container leaves its first validation batch out): the one
    figure taken from beyond the stop, since the log times validation only once per epoch, not per
    batch. Returns the full run when the rule would not stop before the spec's epochs end.
    """
    watched = watch(sample, spec, rule)
    if watched is None:
        return None
    full = sample.full
    if watched.prediction is None:
        assert full.time_to_train_s is not None
        return _Observed(full, full.time_to_train_s, full.step_s)  # the rule would watch the whole run
    return _Observed(
        _seen(full, watched.prediction.total_s), watched.paid_s, watched.prediction.step_s, "step"
    )


@dataclass
class Watched:
    """What :func:`watch` saw of one run."""

    paid_s: float
    """Training seconds the job paid for it (steps, the epochs finished whole, one validation pass)."""
    steps: int
    """Training steps watched."""
    prediction: Prediction | None
    """The container's prediction of the full run; None when the rule watched every epoch."""
    settled: bool
    """Whether the live rule stopped by itself (precision or a cap), not at the budget."""


def watch(
    sample: Sample,
    spec: SweepSpec,
    rule: StopRule,
    budget: int | None = None,
    *,
    calibration: Calibration | None = None,
) -> Watched | None:
    """The live rule fed the log's steps one by one until it stops, or until ``budget`` steps were
    watched (what :func:`_live_rule` pays and predicts; the racing strategy's budgeted look).

    None when the log has one epoch, or does not time the steps of every epoch. The prediction's
    interval is the calibration's (the shipped one by default) for the run's family and instance class.
    """
    from trainsweep.instance_class import instance_class
    from trainsweep.predict import run_family

    epochs = [e for e in sample.run.epochs if e.steps > 0 or e.epoch_s]
    if len(epochs) < 2 or any(e.steps == 0 for e in epochs):
        return None
    monitor = SteadyState(rule, steps_per_epoch=epochs[0].steps)
    paid, stopped_in, settled = _feed(monitor, epochs[: spec.workload.epochs], budget)
    est = monitor.estimate()
    if stopped_in is None or est is None:
        return Watched(paid, monitor.steps, None, True)
    passes = [e.validation_s for e in epochs[:2] if e.validation_s is not None]
    validation_s = passes[-1] if passes else 0.0
    one_off = passes[0] - validation_s if passes else 0.0
    if stopped_in == 0 and passes:
        paid += passes[0]
    elif stopped_in:  # the first pass was paid with epoch 1: the container's batches now run warm
        paid += validation_s
    # the container's formula: the log times each epoch's validation pass whole, so it is the epoch's
    # overhead beside the steps, and the first pass's one-off joins the warm-up's
    predicted = predict_run(
        est,
        steps_per_epoch=epochs[0].steps,
        epochs=spec.workload.epochs,
        rule=rule,
        epoch_overhead_s=validation_s,
        warmup_excess_s=est.warmup_excess_s + one_off,
        family=run_family(sample.run, sample.path),
        calibration=calibration,
        instance_class=instance_class(sample.run),
    )
    return Watched(paid, monitor.steps, predicted, settled)


def _feed(monitor: SteadyState, epochs: list[Epoch], budget: int | None) -> tuple[float, int | None, bool]:
    """Feed ``epochs``' steps to the live rule until it stops or ``budget`` steps were fed: (seconds
    paid, the epoch it stopped in or None, whether the rule stopped by itself)."""
    paid = 0.0
    for k, e in enumerate(epochs):
        for step_s in e.step_s:
            monitor.add(step_s)
            paid += step_s
            settled = monitor.stop_reason() is not None
            if settled or (budget is not None and monitor.steps >= budget):
                return paid, k, settled
        monitor.epoch_boundary()
        paid += _epoch_seconds(e) - sum(e.step_s)  # its validation and hand-off
    return paid, None, False


def _epoch_replay(sample: Sample, spec: SweepSpec, rule: StopRule) -> _Observed:
    """The rule replayed on whole epochs (:func:`trainsweep.predict.replay`), for logs without step
    times: the job pays the epochs watched (at most ``rule.max_epochs``)."""
    full = sample.full
    assert full.time_to_train_s is not None
    epochs = [e for e in sample.run.epochs if e.steps > 0]
    res = replay(sample.run, rule, max_epochs=int(rule.max_epochs or 2))
    if res.predicted_epoch_s is None or res.epochs_watched >= spec.workload.epochs:
        return _Observed(full, full.time_to_train_s, full.step_s)  # the rule would watch the whole run
    watched = sum(_epoch_seconds(e) for e in epochs[: res.epochs_watched])
    predicted = watched + (spec.workload.epochs - res.epochs_watched) * res.predicted_epoch_s
    step_s = res.predicted_epoch_s / max(e.steps for e in epochs)
    return _Observed(_seen(full, predicted), watched, step_s, "epoch")


def search_batch_sizes(
    chosen: dict[CellKey, list[Sample]], spec: SweepSpec, observed: dict[str, _Observed]
) -> tuple[dict[CellKey, list[Sample]], list[dict[str, Any]]]:
    """``batch_sizes: auto`` replayed on the recorded grid: each packed job (instance type, repetition)
    walks the spec's batch sizes in order with the supervisor's own rule
    (:class:`trainsweep.training.supervisor.BatchSizeSearch`, on the step time each run's replay
    measured) and does not run the sizes past a throughput plateau. A size without a log is not
    replayed (the search goes on past it, as past a failed cell); logs record no out of memory.

    Returns the samples the search runs and the runs it skipped (with the search's reason).
    """
    from trainsweep.training.supervisor import BatchSizeSearch, CellResult

    search_spec = spec.batch_size_search
    if search_spec is None:
        return chosen, []
    ran: dict[CellKey, list[Sample]] = {cell: [] for cell in chosen}
    skipped: list[dict[str, Any]] = []
    for itype, k, members in _packed(chosen, spec):
        search = BatchSizeSearch(search_spec.min_gain)
        for s in members:
            if search.stop is not None:
                reason = search.stop[1]
                skipped.append(
                    {"instance_type": itype, "batch_size": s.batch_size, "repetition": k, "reason": reason}
                )
                continue
            ran[s.cell].append(s)
            step_s = observed[s.path].step_s
            ok = step_s is not None and step_s > 0
            search.add(
                CellResult(
                    s.path, s.batch_size, "ok" if ok else "error", None, 0, {"step_s": step_s} if ok else None
                )
            )
    return {cell: xs for cell, xs in ran.items() if xs}, skipped


def _packed(chosen: dict[CellKey, list[Sample]], spec: SweepSpec) -> Iterator[tuple[str, int, list[Sample]]]:
    """(instance type, repetition, its samples by setting and batch size) in the order the planner
    expands the packed jobs: instance type, repetition, then setting of the axes and batch size (cells
    without a sample left out)."""
    settings = spec_settings(spec)
    for itype in spec.instance_types:
        cells = [(itype, b, k) for k in settings for b in spec.batch_sizes]
        reps = max((len(chosen.get(c, [])) for c in cells), default=0)
        for k in range(reps):
            yield itype, k, [chosen[c][k] for c in cells if len(chosen.get(c, [])) > k]


def plan_jobs(chosen: dict[CellKey, list[Sample]], spec: SweepSpec, seconds: dict[str, float]) -> list[Job]:
    """The jobs the strategy runs over the chosen samples (``seconds``: each sample's training seconds)."""
    jobs: list[Job] = []
    for itype, _, members in _packed(chosen, spec):
        if spec.packing == "per-instance":
            jobs.append(Job(itype, members, sum(seconds[s.path] for s in members)))
        else:
            jobs.extend(Job(itype, [s], seconds[s.path]) for s in members)
    return jobs


def _list_schedule(durations: Sequence[float], slots: int) -> float:
    """Wall-clock seconds of ``durations`` run in order, each as soon as one of ``slots`` is free."""
    free = [0.0] * max(1, slots)
    for d in durations:
        free[free.index(min(free))] += d
    return max(free)


def bill(jobs: list[Job], spec: SweepSpec, region: str) -> dict[str, Any]:
    """Cost, billable seconds and wall-clock time of ``jobs`` under the sweep's billing model.

    The jobs run as a real sweep runs them: grouped by instance type with the concurrency PlanSweep
    gives each group (:func:`trainsweep.aws.workflow.group_jobs`), in the planner's order within a group,
    warm pools reused within a group (:func:`trainsweep.cost.billing.sweep_billable_s`).
    """
    from trainsweep.aws.workflow import group_jobs

    keep_alive = spec.warm_pool_seconds or 0
    placed = [replace(j, instance_count=spec.instance_count) for j in jobs]
    groups, group_concurrency = group_jobs(placed, spec.max_concurrency)
    billable: dict[str, float] = {}
    start_up: dict[str, float] = {}
    retained = 0.0
    warm = 0
    durations: list[float] = []
    for g in groups:
        b = billing.sweep_billable_s(
            [(j.instance_type, j.seconds) for j in g["jobs"]],
            slots=g["max_concurrency"],
            keep_alive_s=keep_alive,
        )
        for itype, seconds in b.billable_s.items():
            billable[itype] = billable.get(itype, 0.0) + seconds
        # a group is one instance type; its cold starts pay the per-job overhead, its warm ones none
        itype = g["jobs"][0].instance_type
        start_up[itype] = (
            start_up.get(itype, 0.0) + (len(g["jobs"]) - b.warm_starts) * billing.FIXED_OVERHEAD_S
        )
        retained += sum(b.retained_s.values())
        warm += b.warm_starts
        durations.append(b.wall_s)
    cost = start_up_cost = 0.0
    unpriced: list[str] = []
    prices = hourly_prices(spec, region)
    for itype, seconds in billable.items():
        price = prices.get(itype)  # every job is of a spec type: samples_from keeps no other
        if price is None:
            unpriced.append(itype)
        else:
            cost += billing.cost_usd(seconds, price, spec.instance_count)
            start_up_cost += billing.cost_usd(start_up.get(itype, 0.0), price, spec.instance_count)
    priced = not (unpriced and len(unpriced) == len(billable))
    return {
        "jobs": len(jobs),
        "runs": sum(len(j.samples) for j in jobs),
        "billable_s": sum(billable.values()),
        "warm_pool_retained_s": retained,
        "warm_starts": warm,
        "cost_usd": cost if priced else None,
        "start_up_s": sum(start_up.values()),
        "start_up_usd": start_up_cost if priced else None,
        "unpriced_instance_types": sorted(unpriced),
        "wall_s": _list_schedule(durations, group_concurrency) if durations else 0.0,
    }


# ---- picks and regret ----------------------------------------------------------------------------


# The fields of a pick in the simulation's JSON, in their order.
_ROW_FIELDS = (
    "instance_type",
    "batch_size",
    "time_to_train_s",
    "cost_to_train_usd",
    "time_to_target_s",
    "cost_to_target_usd",
    "runs",
    "eval_accuracy",
)


def _target_value(spec: SweepSpec) -> float | None:
    """The spec's target value (what ``run_metrics`` and ``aggregate`` take), or None."""
    return None if spec.target is None else spec.target.value


def _target_said(spec: SweepSpec) -> str | None:
    """The target as the report says it (``eval_accuracy >= 0.97``, ``val_loss <= 1.2``), or None."""
    if spec.target is None:
        return None
    return f"{spec.target.metric} {spec.target.rule().sign} {spec.target.value:g}"


def _target_metric(spec: SweepSpec) -> str:
    return "eval_accuracy" if spec.target is None else spec.target.metric


def _minimize(spec: SweepSpec) -> bool:
    return spec.target is not None and spec.target.direction == "minimize"


def _picks(rows: list[ConfigMetrics], target: str | None = None) -> dict[str, ConfigMetrics | None]:
    rec = recommend(rows, target=target)
    return {"fastest": rec.fastest, "cheapest": rec.cheapest, "recommended": rec.pick}


def _time_cost(row: ConfigMetrics, by_target: bool) -> tuple[float | None, float | None]:
    if by_target:
        return row.time_to_target_s, row.cost_to_target_usd
    return row.time_to_train_s, row.cost_to_train_usd


def _spread(values: Sequence[float | None]) -> float | None:
    xs = [v for v in values if v is not None]
    if len(xs) < 2 or not statistics.fmean(xs):
        return None
    return (max(xs) - min(xs)) / statistics.fmean(xs)


# ---- one sweep, and the two phases ---------------------------------------------------------------


def replay_sweep(
    spec: SweepSpec, by_cell: dict[CellKey, list[Sample]], region: str, rule: StopRule
) -> tuple[dict[str, Any], list[ConfigMetrics]]:
    """One sweep of ``spec`` (its ``cells`` only, when it lists some) replayed on the samples: its bill
    and how it replayed the runs, and the rows its report would aggregate (to the target, with one)."""
    wanted = {(c.instance_type, c.batch_size) for c in spec.cells} if spec.cells else None
    chosen = {
        cell: xs[: spec.repetitions] for cell, xs in by_cell.items() if wanted is None or cell[:2] in wanted
    }
    observed = {s.path: observe(s, spec, rule) for xs in chosen.values() for s in xs}
    chosen, skipped = search_batch_sizes(chosen, spec, observed)
    observed = {s.path: observed[s.path] for xs in chosen.values() for s in xs}
    jobs = plan_jobs(chosen, spec, {p: o.job_seconds for p, o in observed.items()})
    strategy = bill(jobs, spec, region)
    strategy.update(
        mode=spec.mode,
        packing=spec.packing,
        repetitions=spec.repetitions,
        warm_pool_seconds=spec.warm_pool_seconds,
        early_stopped_runs=sum(1 for o in observed.values() if o.metrics.prediction_used),
        early_stop_replay={
            how: sum(1 for o in observed.values() if o.replay == how) for how in ("step", "epoch")
        },
        batch_size_search=spec.batch_size_search is not None,
        skipped_by_search=skipped,
    )
    rows = aggregate(
        [o.metrics for o in observed.values()],
        region=region,
        instance_count=spec.instance_count,
        prices=spec.prices,
        quality_margin=spec.quality_margin,
        target=_target_value(spec),
        target_metric=_target_metric(spec),
        minimize=_minimize(spec),
    )
    return strategy, rows


def refuse_race(spec: SweepSpec) -> None:
    """The race early-stops every run: a spec with a target or phases cannot be raced; nor is a race
    over axes replayed (its entrants are instance type x batch size)."""
    if spec.axes:
        raise TrainsweepError(
            "the racing strategy is replayed over instance types and batch sizes only: remove axes from the "
            "spec to race, or simulate the spec's own strategy"
        )
    if spec.target is not None or spec.phases:
        raise TrainsweepError(
            "the racing strategy early-stops every run, which never evaluates: it ranks by time and "
            "cost to train, not to a target; remove target and phases from the spec to race"
        )


def replay_race(
    spec: SweepSpec,
    by_cell: dict[CellKey, list[Sample]],
    region: str,
    rule: StopRule,
    race_rule: RaceRule,
) -> tuple[dict[str, Any], list[ConfigMetrics]]:
    """The racing strategy (:func:`trainsweep.race.race`) replayed: its bill, with each stage's, and
    the rows its report would aggregate."""
    from trainsweep.race import race

    strategy, runs = race(by_cell, spec, region, rule, race_rule)
    rows = aggregate(
        runs,
        region=region,
        instance_count=spec.instance_count,
        prices=spec.prices,
        quality_margin=spec.quality_margin,
    )
    return strategy, rows


def replay_phases(
    spec: SweepSpec, by_cell: dict[CellKey, list[Sample]], region: str, rule: StopRule
) -> tuple[dict[str, Any], list[ConfigMetrics], dict[str, Any]]:
    """``phases: [scan, confirm]`` replayed as ``trainsweep run`` runs it: the scan sweep
    (:func:`trainsweep.phases.scan_spec`), its configurations ranked by :func:`trainsweep.phases.rank_scan`,
    then the confirm sweep of the ``confirm_top_k`` best (:func:`trainsweep.phases.confirm_spec`: full
    runs to the target, one job per cell, on the ``repetitions`` logs after the one the scan watched).

    Returns the strategy's bill (both sweeps: the confirm sweep starts when the scan has ended), the
    confirmed rows the picks come from, and the ``phases`` block of the JSON.
    """
    scan_spec = load_spec(phases.scan_spec(spec), allow_retired=True)
    scan, scan_rows = replay_sweep(scan_spec, by_cell, region, rule)
    recommend(scan_rows)  # as the scan's report: every row it cannot judge says why
    try:
        ranked = phases.rank_scan({"configurations": [r.to_dict() for r in scan_rows]})
    except TrainsweepError:
        why = "; ".join(f"{r.label}: {r.not_judged}" for r in scan_rows if r.not_judged)
        raise TrainsweepError(
            f"the replayed scan judged no configuration ({why or 'no rows'}): nothing to confirm"
        ) from None
    cells = phases.confirm_cells(ranked, spec.confirm_top_k)
    confirm_spec = load_spec(phases.confirm_spec(spec, cells), allow_retired=True)
    # The confirm sweep's runs are new runs: where a cell has more logs than the one the scan watched,
    # they come from the next ones (wrapping round), so the scan's luck is not confirmed by itself.
    fresh = {cell: xs[1:] + xs[:1] for cell, xs in by_cell.items()}
    confirm, rows = replay_sweep(confirm_spec, fresh, region, rule)
    both = (scan, confirm)
    costs = [b["cost_usd"] for b in both]
    strategy = {
        "jobs": sum(b["jobs"] for b in both),
        "runs": sum(b["runs"] for b in both),
        "billable_s": sum(b["billable_s"] for b in both),
        "warm_pool_retained_s": sum(b["warm_pool_retained_s"] for b in both),
        "warm_starts": sum(b["warm_starts"] for b in both),
        "cost_usd": None if None in costs else sum(c for c in costs if c is not None),
        "start_up_s": sum(b["start_up_s"] for b in both),
        "start_up_usd": None if None in costs else sum(b["start_up_usd"] or 0.0 for b in both),
        "unpriced_instance_types": sorted({t for b in both for t in b["unpriced_instance_types"]}),
        "wall_s": scan["wall_s"] + confirm["wall_s"],
        "mode": "phases",
        "packing": f"scan {scan['packing']}, confirm {confirm['packing']}",
        "repetitions": spec.repetitions,
        "warm_pool_seconds": spec.warm_pool_seconds,
        "early_stopped_runs": scan["early_stopped_runs"],
        "early_stop_replay": scan["early_stop_replay"],
        "batch_size_search": scan["batch_size_search"],
        "skipped_by_search": scan["skipped_by_search"],
    }
    block = {
        "scan": scan,
        "ranking": ranked,
        "confirm_top_k": spec.confirm_top_k,
        "confirmed": [{"instance_type": t, "batch_size": b} for t, b in cells],
        "confirm": confirm,
    }
    return strategy, rows, block


def _check_target_metric(spec: SweepSpec, samples: list[Sample], notes: list[str]) -> None:
    """Refuse a target no log can tell (rather than rank by time to train); say which logs cannot."""
    if spec.target is None or not samples:
        return
    metric, said = spec.target.metric, _target_said(spec)
    blind = [s for s in samples if s.full.target_metric_value is None]
    if len(blind) == len(samples):
        raise TrainsweepError(
            f"no log of the spec's grid records {metric}, the target's metric: the time to reach {said} "
            f"cannot be replayed (ranking by time to train instead would answer another question). "
            f"Give logs that evaluate {metric} every epoch, or remove target"
            + (" and phases" if spec.phases else "")
        )
    if blind:
        notes.append(
            f"{len(blind)} of {len(samples)} logs record no {metric}: their configurations count as "
            f"not reaching {said} (the report's 'no evaluation')"
        )
    short = [
        s
        for s in samples
        if s.full.epochs_measured < spec.workload.epochs
        and s.full.target_metric_value is not None
        and s.full.time_to_target_s is None
    ]
    if short:
        notes.append(
            f"{len(short)} logs ran fewer epochs than the spec's {spec.workload.epochs} and did not reach "
            f"{said} within them: whether they would in the later epochs is not in the logs; they count "
            "as not reaching it"
        )


def simulate(
    spec: SweepSpec,
    result: ImportResult,
    *,
    region: str = "us-east-1",
    rule: StopRule | None = None,
    race: RaceRule | None = None,
) -> Simulation:
    """Replay ``spec``'s strategy on the logs ``result`` read (:func:`trainsweep.importer.read_dir`);
    with ``race``, the racing strategy (:mod:`trainsweep.race`) over the spec's grid instead.

    A spec with ``axes`` replays each (instance type, batch size, setting of the axes) as a
    configuration; a log's setting is the one its header or name carries (``trainsweep import``).

    Raises :class:`TrainsweepError` when the spec has a target and no log records its metric, when
    the replayed scan of ``phases: [scan, confirm]`` can judge no configuration, or when ``race`` is
    asked with a target, phases or axes (an early-stopped run never evaluates).
    """
    rule = rule or StopRule()
    if race is not None:
        refuse_race(spec)
    by_cell, outside, unused = samples_from(result, spec)
    notes = _input_notes(spec, by_cell)
    missing = _cells_without_logs(spec, by_cell)

    # the exhaustive grid: every configuration, every repetition, full runs (to the target, with one),
    # one job each
    everything = [s for xs in by_cell.values() for s in xs]
    _check_target_metric(spec, everything, notes)
    said = _target_said(spec)
    by_target = _target_value(spec) is not None
    truth_rows, exhaustive = _exhaustive(spec, everything, region)
    truth = _picks(truth_rows, said)
    missed = _missed_target(truth_rows) if by_target else []
    if everything and by_target and truth["fastest"] is None:
        notes.append(f"no configuration reaches {said} in every one of its logs: nothing to recommend")

    # the strategy
    notes.extend(_fewer_logs(spec, by_cell))
    strategy, strategy_rows, block = _replay_strategy(spec, by_cell, region, rule, race)
    picks = _picks(strategy_rows, said)
    if by_target and picks["fastest"] is None and truth["fastest"] is not None:
        ran = "confirmed configurations" if spec.phases else "configurations the strategy ran"
        notes.append(f"none of the {ran} reaches {said}: the strategy recommends nothing")

    truth_by_cell = {_row_cell(r, spec): r for r in truth_rows}
    regret, learns_worse = _regret(picks, truth, truth_by_cell, spec, by_target)
    if learns_worse:
        notes.append(_learns_worse_note(picks, learns_worse, said, by_target))
    return Simulation(
        strategy=strategy,
        exhaustive=exhaustive,
        picks={k: config_dict(v, _ROW_FIELDS) for k, v in picks.items()},
        truth={k: config_dict(v, _ROW_FIELDS) for k, v in truth.items()},
        regret=regret,
        spread=_spreads(by_cell, truth, by_target, spec),
        learns_worse=learns_worse,
        cells_without_logs=missing,
        logs_outside_spec=outside,
        logs_unused=unused,
        notes=notes,
        target=None if spec.target is None else spec.target.model_dump(mode="json"),
        missed_target=missed,
        phases=block,
        prices=prices_said(spec.prices, "the spec's prices", region) + f", {region}",
    )


def _fewer_logs(spec: SweepSpec, by_cell: dict[CellKey, list[Sample]]) -> list[str]:
    """A note when some configurations have fewer logs than the spec's repetitions."""
    short = sorted({len(xs) for xs in by_cell.values() if len(xs) < spec.repetitions})
    if not short:
        return []
    return [
        f"some configurations have fewer logs than the spec's {spec.repetitions} repetitions "
        f"({', '.join(map(str, short))}): they are simulated with the repetitions there are"
    ]


def _missed_target(truth_rows: list[ConfigMetrics]) -> list[dict[str, Any]]:
    """The configurations the exhaustive runs show not reaching the target (never recommended)."""
    return [
        {"instance_type": r.instance_type, "batch_size": r.batch_size, "reason": r.quality or r.not_judged}
        for r in truth_rows
        if r.status == OK and r.time_to_target_s is None
    ]


def _replay_strategy(
    spec: SweepSpec,
    by_cell: dict[CellKey, list[Sample]],
    region: str,
    rule: StopRule,
    race: RaceRule | None,
) -> tuple[dict[str, Any], list[ConfigMetrics], dict[str, Any] | None]:
    """The strategy replayed (the race, the two phases, or the spec's sweep): its bill, the rows its
    picks come from, and the ``phases`` block (None but for phases)."""
    if race is not None:
        return (*replay_race(spec, by_cell, region, rule, race), None)
    if spec.phases:
        return replay_phases(spec, by_cell, region, rule)
    return (*replay_sweep(spec, by_cell, region, rule), None)


def _cell_label(cell: CellKey) -> str:
    t, b, setting = cell
    return f"{t} x {b}" + (f" {axis.label(dict(setting))}" if setting else "")


def _input_notes(spec: SweepSpec, by_cell: dict[CellKey, list[Sample]]) -> list[str]:
    """What the logs make of the replay: several experiments pooled into one configuration, logs
    shorter than the spec's epochs, settings of axes the spec does not sweep."""
    notes: list[str] = []
    mixed = sorted(
        f"{_cell_label(cell)} ({', '.join(sorted({s.folder or '.' for s in xs}))})"
        for cell, xs in by_cell.items()
        if len({s.folder for s in xs}) > 1
    )
    if mixed:
        notes.append(
            "logs of several folders are taken as repetitions of one configuration: "
            + "; ".join(mixed)
            + ". If these are different experiments, give --from one experiment's folder"
        )
    short_logs = [s for xs in by_cell.values() for s in xs if s.full.epochs_measured < spec.workload.epochs]
    if short_logs:
        n, shorter = len(short_logs), sorted({s.full.epochs_measured for s in short_logs})
        notes.append(
            f"{n} logs ran fewer epochs ({', '.join(map(str, shorter))}) than the spec's "
            f"{spec.workload.epochs}: their full runs, the exhaustive answer's included, are extrapolated "
            "(epoch 1 + the later epochs' mean for the rest), not measured"
        )
    return notes + _unswept_axes(spec, by_cell)


def _unswept_axes(spec: SweepSpec, by_cell: dict[CellKey, list[Sample]]) -> list[str]:
    """A note when the logs carry settings of axes a spec without axes pools."""
    unswept = [] if spec.axes else axis.names_of([run_setting(s.run) for xs in by_cell.values() for s in xs])
    if not unswept:
        return []
    return [
        f"logs carry settings of axes ({', '.join(unswept)}) the spec does not sweep: their runs are "
        "taken as repetitions of one configuration; give the spec those axes to replay each setting"
    ]


def _cells_without_logs(spec: SweepSpec, by_cell: dict[CellKey, list[Sample]]) -> list[dict[str, Any]]:
    """The grid's cells no complete log stands for (with their setting, in a spec with axes)."""
    out: list[dict[str, Any]] = []
    for t in spec.instance_types:
        for setting in spec_settings(spec):
            for b in spec.batch_sizes:
                if (t, b, setting) not in by_cell:
                    cell = {"instance_type": t, "batch_size": b}
                    out.append({**cell, "axes": dict(setting)} if setting else cell)
    return out


def _exhaustive(
    spec: SweepSpec, everything: list[Sample], region: str
) -> tuple[list[ConfigMetrics], dict[str, Any]]:
    """The exhaustive sweep's rows and bill. Its report flags (and never recommends) configurations
    that learn worse, or, with a target, that do not reach it."""
    truth_rows = aggregate(
        [s.full for s in everything],
        region=region,
        instance_count=spec.instance_count,
        prices=spec.prices,
        quality_margin=spec.quality_margin,
        target=_target_value(spec),
        target_metric=_target_metric(spec),
        minimize=_minimize(spec),
    )
    exhaustive_jobs = [Job(s.instance_type, [s], to_target_seconds(s, spec)) for s in everything]
    no_warm = spec.model_copy(update={"warm_pool_seconds": 0})
    return truth_rows, bill(exhaustive_jobs, no_warm, region)


def _row_cell(row: ConfigMetrics, spec: SweepSpec) -> tuple[str, int | None, SettingKey | None]:
    """The grid cell of a report row (its setting keyed as the samples' are)."""
    return row.instance_type, row.batch_size, setting_key(row.axes, list(spec.axes or {}))


def _regret(
    picks: dict[str, ConfigMetrics | None],
    truth: dict[str, ConfigMetrics | None],
    truth_by_cell: dict[tuple[str, int | None, SettingKey | None], ConfigMetrics],
    spec: SweepSpec,
    by_target: bool,
) -> tuple[dict[str, dict[str, float | None]], dict[str, str]]:
    """How much slower (dearer) each pick really is than the true fastest (cheapest), as a fraction,
    and the picks the exhaustive runs flag as learning worse (their quality note)."""
    best_time = _time_cost(truth["fastest"], by_target)[0] if truth["fastest"] else None
    best_cost = _time_cost(truth["cheapest"], by_target)[1] if truth["cheapest"] else None
    regret: dict[str, dict[str, float | None]] = {}
    learns_worse: dict[str, str] = {}
    for name, row in picks.items():
        real = truth_by_cell.get(_row_cell(row, spec)) if row is not None else None
        if real is not None and real.quality:
            learns_worse[name] = real.quality
        time, cost = _time_cost(real, by_target) if real is not None else (None, None)
        regret[name] = {
            "time": time / best_time - 1 if time is not None and best_time else None,
            "cost": cost / best_cost - 1 if cost is not None and best_cost else None,
        }
    return regret, learns_worse


def _learns_worse_note(
    picks: dict[str, ConfigMetrics | None], learns_worse: dict[str, str], said: str | None, by_target: bool
) -> str:
    """The note on picks the exhaustive runs flag: which, why, and what that does to the regret."""
    by_config: dict[str, list[str]] = {}
    for name, quality in learns_worse.items():
        row = picks[name]
        assert row is not None
        by_config.setdefault(f"{row.label} ({quality})", []).append(name)
    flagged = "; ".join(f"{', '.join(names)}: {what}" for what, names in by_config.items())
    if by_target:
        return (
            f"the strategy picks a configuration the exhaustive runs show missing {said}: {flagged}. "
            "The runs the strategy replayed reached it, not every repetition of the exhaustive grid; "
            "its report would not recommend it, and its regret has no time or cost to the target"
        )
    return (
        f"the strategy picks a configuration the exhaustive runs flag: {flagged}. The exhaustive "
        "sweep's report would not recommend it, and its regret is measured against the best "
        "configuration that does not learn worse. Early-stopped runs do not evaluate: "
        "phases: [scan, confirm] with a target confirms the scan's best before recommending"
    )


def _spreads(
    by_cell: dict[CellKey, list[Sample]],
    truth: dict[str, ConfigMetrics | None],
    by_target: bool,
    spec: SweepSpec,
) -> dict[str, float | None]:
    """(max - min) / mean between the repetitions of a configuration, of time to train and of cost
    (billable seconds: the price is the same), to the target with one: of the true fastest and
    cheapest, and the median."""
    time_of = "time_to_target_s" if by_target else "time_to_train_s"
    cost_of = "billable_to_target_s" if by_target else "billable_s"

    def of(row: ConfigMetrics | None, what: str) -> float | None:
        itype, bs, setting = _row_cell(row, spec) if row is not None else ("", None, None)
        if bs is None or setting is None:
            return None
        return _spread([getattr(s.full, what) for s in by_cell.get((itype, bs, setting), [])])

    times = [
        v
        for v in (_spread([getattr(s.full, time_of) for s in xs]) for xs in by_cell.values())
        if v is not None
    ]
    return {
        "time_of_true_fastest": of(truth["fastest"], time_of),
        "cost_of_true_cheapest": of(truth["cheapest"], cost_of),
        "time_median": statistics.median(times) if times else None,
    }
