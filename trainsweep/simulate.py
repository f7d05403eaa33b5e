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

Costs use the real sweep's billing model and prices (:mod:`trainsweep.cost.billing`, SageMaker training
prices from :mod:`trainsweep.cost.prices`); the picks come from the report's own aggregation and
recommendation (:func:`trainsweep.cost.metrics.aggregate`, :func:`trainsweep.cost.recommend.recommend`).
The exhaustive answer ("truth") is every configuration, every repetition, full runs, one job each.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from trainsweep.cost import billing
from trainsweep.cost.metrics import OK, SAGEMAKER, ConfigMetrics, RunMetrics, aggregate, run_metrics
from trainsweep.cost.prices import hourly_usd
from trainsweep.cost.recommend import config_dict, recommend
from trainsweep.importer import ImportResult
from trainsweep.logs.model import Epoch, RunTimings
from trainsweep.predict import SteadyState, StopRule, replay
from trainsweep.spec import SweepSpec

_SAGEMAKER_JOB = {"platform": SAGEMAKER, "status": OK}
"""A simulated sweep runs SageMaker jobs, whatever platform the logs were recorded on."""


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


@dataclass
class Job:
    """One simulated training job: what it paid for and what it measured."""

    instance_type: str
    samples: list[Sample]
    seconds: float
    """Training seconds the job ran (the epochs watched, in early-stop mode)."""


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
            # the picked cheapest than the true cheapest (fractions; 0 = the same answer)
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


def samples_from(
    result: ImportResult, spec: SweepSpec
) -> tuple[dict[tuple[str, int], list[Sample]], list[dict[str, Any]], list[dict[str, str]]]:
    """The complete logs by (instance type, batch size) of the spec's grid, in repetition order.

    Returns (samples by cell, logs outside the spec's grid, logs not used with the reason).
    """
    copies = _left_out_copies(result)
    cells = {(t, b) for t in spec.instance_types for b in spec.batch_sizes}
    by_cell: dict[tuple[str, int], list[tuple[int, str, Sample]]] = {}
    outside: list[dict[str, Any]] = []
    unused: list[dict[str, str]] = []
    for o in result.files:
        run = result.runs.get(o.path)
        reason = None
        if run is None:
            reason = "could not be read"
        elif o.path in copies:
            reason = copies[o.path]
        elif run.status != "complete":
            reason = f"not a complete log (status {run.status})"
        elif o.instance_type is None:
            reason = "its instance type is not read (docs/log-formats.md)"
        elif not o.batch_size:
            reason = "its batch size is not read"
        if reason is not None:
            unused.append({"path": o.path, "reason": reason})
            continue
        assert run is not None and o.instance_type is not None and o.batch_size
        if (o.instance_type, o.batch_size) not in cells:
            outside.append({"path": o.path, "instance_type": o.instance_type, "batch_size": o.batch_size})
            continue
        full = run_metrics(run, epochs=spec.workload.epochs, job=_SAGEMAKER_JOB)
        if full.status != OK or full.time_to_train_s is None:
            unused.append({"path": o.path, "reason": full.reason or "no time to train"})
            continue
        sample = Sample(o.path, o.instance_type, o.batch_size, run, full, o.results_root)
        order = o.run_index if o.run_index is not None else 1 << 30
        by_cell.setdefault((o.instance_type, o.batch_size), []).append((order, o.path, sample))
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


def observe(sample: Sample, spec: SweepSpec, rule: StopRule) -> _Observed:
    """What one run costs and tells under the spec's mode."""
    full = sample.full
    assert full.time_to_train_s is not None
    if spec.mode != "early-stop":
        return _Observed(full, full.time_to_train_s, full.step_s)
    seen = _live_rule(sample, spec, rule) or _epoch_replay(sample, spec, rule)
    if seen.metrics.eval_accuracy is not None:  # early-stop mode never evaluates, even run to the end
        seen.metrics = RunMetrics(**{**seen.metrics.to_dict(), "eval_accuracy": None})
    return seen


def _seen(full: RunMetrics, predicted: float) -> RunMetrics:
    # an early-stopped run never evaluates: what the full log's evaluation said is not seen
    seen = RunMetrics(
        **{**full.to_dict(), "time_to_train_s": predicted, "prediction_used": True, "eval_accuracy": None}
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
    full = sample.full
    epochs = [e for e in sample.run.epochs if e.steps > 0 or e.epoch_s]
    if len(epochs) < 2 or any(e.steps == 0 for e in epochs):
        return None
    monitor = SteadyState(rule, steps_per_epoch=epochs[0].steps)
    paid = 0.0
    stopped_in: int | None = None
    for k, e in enumerate(epochs[: spec.workload.epochs]):
        for step_s in e.step_s:
            monitor.add(step_s)
            paid += step_s
            if monitor.stop_reason():
                stopped_in = k
                break
        if stopped_in is not None:
            break
        monitor.epoch_boundary()
        paid += _epoch_seconds(e) - sum(e.step_s)  # its validation and hand-off
    est = monitor.estimate()
    if stopped_in is None or est is None:
        assert full.time_to_train_s is not None
        return _Observed(full, full.time_to_train_s, full.step_s)  # the rule would watch the whole run
    passes = [e.validation_s for e in epochs[:2] if e.validation_s is not None]
    validation_s = passes[-1] if passes else 0.0
    one_off = passes[0] - validation_s if passes else 0.0
    if stopped_in == 0 and passes:
        paid += passes[0]
    elif stopped_in:  # the first pass was paid with epoch 1: the container's batches now run warm
        paid += validation_s
    epoch_s = epochs[0].steps * est.mean_s + validation_s
    predicted = est.warmup_excess_s + one_off + spec.workload.epochs * epoch_s
    return _Observed(_seen(full, predicted), paid, est.mean_s, "step")


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
    chosen: dict[tuple[str, int], list[Sample]], spec: SweepSpec, observed: dict[str, _Observed]
) -> tuple[dict[tuple[str, int], list[Sample]], list[dict[str, Any]]]:
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
    ran: dict[tuple[str, int], list[Sample]] = {cell: [] for cell in chosen}
    skipped: list[dict[str, Any]] = []
    for itype in spec.instance_types:
        reps = max((len(chosen.get((itype, b), [])) for b in spec.batch_sizes), default=0)
        for k in range(reps):
            search = BatchSizeSearch(search_spec.min_gain)
            for b in spec.batch_sizes:
                xs = chosen.get((itype, b), [])
                if len(xs) <= k:
                    continue
                s = xs[k]
                if search.stop is not None:
                    skipped.append(
                        {"instance_type": itype, "batch_size": b, "repetition": k, "reason": search.stop[1]}
                    )
                    continue
                ran[(itype, b)].append(s)
                step_s = observed[s.path].step_s
                ok = step_s is not None and step_s > 0
                search.add(
                    CellResult(
                        s.path, b, "ok" if ok else "error", None, 0, {"step_s": step_s} if ok else None
                    )
                )
    return {cell: xs for cell, xs in ran.items() if xs}, skipped


def plan_jobs(
    chosen: dict[tuple[str, int], list[Sample]], spec: SweepSpec, seconds: dict[str, float]
) -> list[Job]:
    """The jobs the strategy runs over the chosen samples (``seconds``: each sample's training seconds)."""
    jobs: list[Job] = []
    for itype in spec.instance_types:
        reps = max((len(chosen.get((itype, b), [])) for b in spec.batch_sizes), default=0)
        for k in range(reps):  # in the order the planner expands them: repetition, then batch size
            members = [chosen[(itype, b)][k] for b in spec.batch_sizes if len(chosen.get((itype, b), [])) > k]
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
    records = [
        {"instance_type": j.instance_type, "instance_count": spec.instance_count, "job": j} for j in jobs
    ]
    groups, group_concurrency = group_jobs(records, spec.max_concurrency)
    billable: dict[str, float] = {}
    retained = 0.0
    warm = 0
    durations: list[float] = []
    for g in groups:
        b = billing.sweep_billable_s(
            [(r["job"].instance_type, r["job"].seconds) for r in g["jobs"]],
            slots=g["max_concurrency"],
            keep_alive_s=keep_alive,
        )
        for itype, seconds in b.billable_s.items():
            billable[itype] = billable.get(itype, 0.0) + seconds
        retained += sum(b.retained_s.values())
        warm += b.warm_starts
        durations.append(b.wall_s)
    cost = 0.0
    unpriced: list[str] = []
    for itype, seconds in billable.items():
        price = hourly_usd(itype, region)
        if price is None:
            unpriced.append(itype)
        else:
            cost += billing.cost_usd(seconds, price, spec.instance_count)
    return {
        "jobs": len(jobs),
        "runs": sum(len(j.samples) for j in jobs),
        "billable_s": sum(billable.values()),
        "warm_pool_retained_s": retained,
        "warm_starts": warm,
        "cost_usd": None if unpriced and len(unpriced) == len(billable) else cost,
        "unpriced_instance_types": sorted(unpriced),
        "wall_s": _list_schedule(durations, group_concurrency) if durations else 0.0,
    }


# ---- picks and regret ----------------------------------------------------------------------------


# The fields of a pick in the simulation's JSON, in their order.
_ROW_FIELDS = ("instance_type", "batch_size", "time_to_train_s", "cost_to_train_usd", "runs", "eval_accuracy")


def _picks(rows: list[ConfigMetrics]) -> dict[str, ConfigMetrics | None]:
    rec = recommend(rows)
    return {"fastest": rec.fastest, "cheapest": rec.cheapest, "recommended": rec.pick}


def _spread(values: Sequence[float | None]) -> float | None:
    xs = [v for v in values if v is not None]
    if len(xs) < 2 or not statistics.fmean(xs):
        return None
    return (max(xs) - min(xs)) / statistics.fmean(xs)


def simulate(
    spec: SweepSpec, result: ImportResult, *, region: str = "us-east-1", rule: StopRule | None = None
) -> Simulation:
    """Replay ``spec``'s strategy on the logs ``result`` read (:func:`trainsweep.importer.read_dir`)."""
    rule = rule or StopRule()
    by_cell, outside, unused = samples_from(result, spec)
    notes: list[str] = []
    mixed = sorted(
        f"{t} x {b} ({', '.join(sorted({s.folder or '.' for s in xs}))})"
        for (t, b), xs in by_cell.items()
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
    missing = [
        {"instance_type": t, "batch_size": b}
        for t in spec.instance_types
        for b in spec.batch_sizes
        if (t, b) not in by_cell
    ]

    # the exhaustive grid: every configuration, every repetition, full runs, one job each
    everything = [s for xs in by_cell.values() for s in xs]
    # the exhaustive sweep's report flags (and never recommends) configurations that learn worse
    margin = spec.quality_margin
    truth_rows = aggregate(
        [s.full for s in everything],
        region=region,
        instance_count=spec.instance_count,
        quality_margin=margin,
    )
    truth = _picks(truth_rows)
    full_seconds = {s.path: s.full.time_to_train_s or 0.0 for s in everything}
    exhaustive_jobs = [Job(s.instance_type, [s], full_seconds[s.path]) for s in everything]
    no_warm = spec.model_copy(update={"warm_pool_seconds": 0})
    exhaustive = bill(exhaustive_jobs, no_warm, region)

    # the strategy
    chosen = {cell: xs[: spec.repetitions] for cell, xs in by_cell.items()}
    short = sorted({len(xs) for xs in chosen.values() if len(xs) < spec.repetitions})
    if short:
        notes.append(
            f"some configurations have fewer logs than the spec's {spec.repetitions} repetitions "
            f"({', '.join(map(str, short))}): they are simulated with the repetitions there are"
        )
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
    strategy_rows = aggregate(
        [o.metrics for o in observed.values()],
        region=region,
        instance_count=spec.instance_count,
        quality_margin=margin,
    )
    picks = _picks(strategy_rows)

    truth_by_cell = {(r.instance_type, r.batch_size): r for r in truth_rows}
    best_time = truth["fastest"].time_to_train_s if truth["fastest"] else None
    best_cost = truth["cheapest"].cost_to_train_usd if truth["cheapest"] else None
    regret: dict[str, dict[str, float | None]] = {}
    learns_worse: dict[str, str] = {}
    for name, row in picks.items():
        real = truth_by_cell.get((row.instance_type, row.batch_size)) if row is not None else None
        if real is not None and real.quality:
            learns_worse[name] = real.quality
        regret[name] = {
            "time": real.time_to_train_s / best_time - 1
            if real and real.time_to_train_s is not None and best_time
            else None,
            "cost": real.cost_to_train_usd / best_cost - 1
            if real and real.cost_to_train_usd is not None and best_cost
            else None,
        }
    if learns_worse:
        by_config: dict[str, list[str]] = {}
        for name, quality in learns_worse.items():
            row = picks[name]
            assert row is not None
            by_config.setdefault(f"{row.label} ({quality})", []).append(name)
        notes.append(
            "the strategy picks a configuration the exhaustive runs flag: "
            + "; ".join(f"{', '.join(names)}: {what}" for what, names in by_config.items())
            + ". The exhaustive sweep's report would not recommend it, and its regret is measured against "
            "the best configuration that does not learn worse. Early-stopped runs do not evaluate: "
            "phases: [scan, confirm] with a target confirms the scan's best before recommending"
        )
    spread = _spreads(by_cell, truth)
    return Simulation(
        strategy=strategy,
        exhaustive=exhaustive,
        picks={k: config_dict(v, _ROW_FIELDS) for k, v in picks.items()},
        truth={k: config_dict(v, _ROW_FIELDS) for k, v in truth.items()},
        regret=regret,
        spread=spread,
        learns_worse=learns_worse,
        cells_without_logs=missing,
        logs_outside_spec=outside,
        logs_unused=unused,
        notes=notes,
    )


def _spreads(
    by_cell: dict[tuple[str, int], list[Sample]], truth: dict[str, ConfigMetrics | None]
) -> dict[str, float | None]:
    """(max - min) / mean between the repetitions of a configuration, of time to train and of cost
    (billable seconds: the price is the same): of the true fastest and cheapest, and the median."""

    def of(row: ConfigMetrics | None, what: str) -> float | None:
        if row is None or row.batch_size is None:
            return None
        xs = by_cell.get((row.instance_type, row.batch_size), [])
        return _spread([getattr(s.full, what) for s in xs])

    times = [
        v for v in (_spread([s.full.time_to_train_s for s in xs]) for xs in by_cell.values()) if v is not None
    ]
    return {
        "time_of_true_fastest": of(truth["fastest"], "time_to_train_s"),
        "cost_of_true_cheapest": of(truth["cheapest"], "billable_s"),
        "time_median": statistics.median(times) if times else None,
    }
