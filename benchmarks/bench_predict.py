"""Figures of the early-stop rule replayed on the shared real logs (../shared/fixtures/real-data).

Prints, over the logs that have epochs the rule did not watch: the |error| of the predicted steady-state
epoch time (median, p95, max) against the mean of the unwatched epochs, the coverage of the 90 %
interval, the same for the rule as it was replayed before (the steady epoch's own steps alone, not every
step watched), for the seeds' estimator (mean of steps 2-11 x steps) and for two fixed windows measured in
the same run (epoch 1 alone, epoch 2 alone), the share of steps watched (of the log and of a
90-epoch run of the same configuration), and per (experiment, instance type) grid whether the batch
sizes come out in the same order by predicted as by actual epoch time. Then, per seed family, where the
errors come from (the steady epoch's steps against the later epochs', the rest of its time against
theirs, the later epochs' own spread and trend, robust step-time estimators in place of the mean).

Then the interval's calibration, scored honestly: leave-one-experiment-out cross-validation (each
experiment -- one instance type's runs in one experiment folder, see
``trainsweep.cli.predict.experiment_of`` -- scored with the epoch jitter fitted on all the other
experiments), per family (FCN, MNIST, ResNet, MO833, the container's own logs), over the seeds' logs and
pooled, beside the old fixed 1 % jitter and the replay before (steady epoch alone) measured in the same
run, and the stricter leave-one-folder-out figures. The container's own logs are
``benchmarks/data/container-logs`` (the settings of ``benchmarks/container_logs.py``) and
``benchmarks/data/container-logs-gpu-h200`` (``--gpu``); ``--container-logs DIR...`` for others. Then the
same per instance class, leaving one experiment, one family and one class out, beside the jitter
before (a relative sd per family and class, not a multiple of the run's own noise; measured in the same
run), with the interval's median half-width; and the three at noise floors around the shipped one.
Then logs held out of every fit (``--held-out DIR...``), scored with the calibration fitted on the
calibration logs without them (the jitter before beside it):
``benchmarks/data/container-logs-2t`` (``container_logs.py --threads 2 --out
benchmarks/data/container-logs-2t``, on a loaded machine), ``benchmarks/data/container-logs-gpu-h200``
(``container_logs.py --gpu`` on one NVIDIA H200) and ``benchmarks/data/container-logs-cpu-heldout``
(mnist-cnn with 6400 samples and resnet50-cifar10 on this CPU, written after the interval's method was
fixed), ``benchmarks/data/script-logs-cpu-heldout``, ``-2`` and ``-3`` (a corpus script's instrumented
runs, each folder written after the method changes made before it, and scored only then).

Usage: ``python benchmarks/bench_predict.py [DATA_DIR] [--container-logs DIR...] [--held-out DIR...]
[--json OUT] [--write-calibration]``; ``--write-calibration`` first rewrites the table the package ships
(``trainsweep/data/predict-calibration.json``), fitted on all those logs, dated, with each family's
cross-validated figures.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import datetime
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trainsweep.cli.predict import collect_logs, replay_logs  # noqa: E402
from trainsweep.logs import parse  # noqa: E402
from trainsweep.predict import (  # noqa: E402
    CALIBRATION_FILE,
    COVERAGE_GOAL,
    NOISE_FLOOR,
    ReplayResult,
    StopRule,
    calibrate,
    calibrated,
    cross_validate,
    cross_validations,
    family_summary,
    load_calibration,
    replay,
    run_family,
    run_noise,
    set_interval,
    steady_estimate,
    summarize,
)
from trainsweep.predict.replays import _epoch_time  # noqa: E402
from trainsweep.predict.scores import _percentile  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "fixtures" / "real-data"
CONTAINER_LOGS = ROOT / "benchmarks" / "data" / "container-logs"
HELD_OUT_LOGS = ROOT / "benchmarks" / "data" / "container-logs-2t"
"""The container's runs at 2 CPU threads on a loaded machine: never in the calibration, scored apart."""
NEW_CPU_LOGS = ROOT / "benchmarks" / "data" / "container-logs-cpu-heldout"
"""Written after the interval's method (noise multiples, the 0.2 % floor) was fixed and committed, and
scored only then: ``container_logs.py --out DIR --sessions f,g,h --seed-offset 20 --samples 6400`` and
``--sessions f,g --seed-offset 30 --workload resnet50-cifar10 --samples 256``, one thread, idle machine."""
SCRIPT_LOGS = ROOT / "benchmarks" / "data" / "script-logs-cpu-heldout"
"""Instrumented runs of a user's own script (family unknown: the pooled calibration), written with the
CPU logs above: ``trainsweep run --local`` of the corpus's word_language_model, full mode, 5 epochs,
batch sizes 10/20/40, ``--emsize 64 --nhid 64`` over a training split copied from ``valid.txt``, once with
``--use-optimizer`` (AdamW) and once updating the weights by hand. Scored, they prompted the class factor
over the pooled multiple (``pooled_factor``)."""
SCRIPT_LOGS_2 = ROOT / "benchmarks" / "data" / "script-logs-cpu-heldout-2"
"""The same script's runs written after that change and scored only then: AdamW with ``--lr 0.001``,
batch sizes 15/30/60."""
SCRIPT_LOGS_3 = ROOT / "benchmarks" / "data" / "script-logs-cpu-heldout-3"
"""The same script's other models, written after the unseen-class fallback over the pooled multiple was
committed and scored only then (``trainsweep run --local``, full mode, 5 epochs, updating the weights by
hand): ``--model Transformer --nhead 2 --lr 1`` (its default sizes, 200) at batch sizes 16/32/64, and
``--model GRU --emsize 128 --nhid 128 --lr 10`` at 12/24/48. One Transformer run waited for
a CPU 10 % or more of its time (the unit tests ran beside it for a minute), as trainsweep's own report
says."""
GPU_LOGS = ROOT / "benchmarks" / "data" / "container-logs-gpu-h200"
"""The container's runs on one NVIDIA H200 (``container_logs.py --gpu``)."""
SEED_FAMILIES = ("fcn", "mnist", "resnet", "mo833")
FAMILIES = (*SEED_FAMILIES, "container-cpu", "container-gpu", "unknown", "seeds", "pooled")
OLD_PRIOR = 0.01  # the fixed epoch jitter the interval used before the calibration


def fixed_window_errors(run, watched: int, which: int) -> float | None:
    """|error| of 'epoch <which> alone predicts the mean of the epochs after the first <watched>'."""
    eps = [e for e in run.epochs if e.steps and e.epoch_s]
    if len(eps) <= watched:
        return None
    rest = [e.epoch_s for e in eps[watched:]]
    return abs(eps[which - 1].epoch_s / (sum(rest) / len(rest)) - 1)


def steady_epoch_alone(res: ReplayResult, run, rule: StopRule) -> ReplayResult:
    """``res`` as the replay before 2026-11 predicted it: the step time from the steady epoch's own inner
    steps (a steady estimate of each watched epoch alone, the last one there is), not from every step
    watched. Both watch the same epochs: at the end of epoch 1 they see the same steps, and the cap is
    reached at the end of epoch 2."""
    old = copy.deepcopy(res)
    epochs = [e for e in run.epochs if e.steps > 0]
    steady = None
    for e in epochs[: res.epochs_watched]:
        inner = list(e.step_s[1:-1]) if e.steps > 3 else list(e.step_s)
        if (est := steady_estimate(inner, confidence=rule.confidence)) is not None:
            steady = (e, inner, est)
    if steady is None or res.predicted_epoch_s is None:
        old.predicted_epoch_s = old.stat_rel = old.predicted_total_s = None
        old.predicted_epoch_low_s = old.predicted_epoch_high_s = None
        return old
    se, inner, est = steady
    overhead = (_epoch_time(se) or 0.0) - sum(inner)
    if se is epochs[0] and se.steps > 3:
        overhead -= se.step_s[0] - est.mean_s
    old.steady_epoch = se.index
    old.predicted_epoch_s = pred = len(inner) * est.mean_s + overhead
    old.stat_rel = len(inner) * est.se_s / pred if pred > 0 else 0.0
    watched_s = sum(_epoch_time(e) or 0.0 for e in epochs[: res.epochs_watched])
    old.predicted_total_s = watched_s + (len(epochs) - res.epochs_watched) * pred
    set_interval(old, rule.interval)
    return old


def error_sources(results: list[ReplayResult], runs: list) -> None:
    """Where the seed families' errors come from, printed: the steady epoch's inner steps against the later
    epochs' (step part), the rest of its time (boundary steps, validation, hand-offs) against theirs, the
    later epochs' own spread and trend, and robust estimators of the step time in place of the mean."""

    def inner(e) -> list[float]:
        return list(e.step_s[1:-1])

    def trimmed(x: list[float], p: float = 0.1) -> float:
        y = sorted(x)
        k = int(len(y) * p)
        y = y[k : len(y) - k] or y
        return sum(y) / len(y)

    def med(x: list[float]) -> float:
        return _percentile(x, 50)

    print("where the errors come from (median over a family's scored logs; % of the actual epoch time):")
    for fam in ("fcn", "mnist", "resnet"):
        rows = []
        for r, run in zip(results, runs, strict=True):
            if r.family != fam or r.error is None or r.actual_epoch_s is None or r.steady_epoch is None:
                continue
            eps = [e for e in run.epochs if e.steps > 3]
            se = next(e for e in eps if e.index == r.steady_epoch)
            later = eps[r.epochs_watched :]
            act, xs = r.actual_epoch_s, inner(se)
            watched = [x for e in eps[: r.epochs_watched] for x in inner(e)]
            rest = (_epoch_time(se) or 0.0) - sum(xs)
            later_steps = [x for e in later for x in inner(e)]
            later_rest = [(_epoch_time(e) or 0.0) - sum(inner(e)) for e in later]
            times = [_epoch_time(e) or 0.0 for e in later]
            sd = (sum((t - sum(times) / len(times)) ** 2 for t in times) / len(times)) ** 0.5 / act
            rows.append(
                {
                    "err": abs(r.error),
                    "steps": abs(len(xs) * (sum(xs) / len(xs) - sum(later_steps) / len(later_steps)) / act),
                    "rest": abs(rest - sum(later_rest) / len(later_rest)) / act,
                    "rest_share": rest / act,
                    "val_share": (se.validation_s or 0.0) / act,
                    "sd": sd if len(later) > 1 else math.nan,
                    "trend": times[-1] / times[0] - 1 if len(later) > 1 else math.nan,
                    "median": abs((len(xs) * med(xs) + rest) / act - 1),
                    "trim": abs((len(xs) * trimmed(xs) + rest) / act - 1),
                    "median_all": abs((len(xs) * med(watched) + rest) / act - 1),
                    "trim_all": abs((len(xs) * trimmed(watched) + rest) / act - 1),
                    "n": se.steps,
                }
            )
        if not rows:
            continue

        def m(k: str, rs: list[dict] = rows) -> str:
            return f"{100 * med([x[k] for x in rs if x[k] == x[k]]):.2f} %"

        print(f"  {fam}: |error| {m('err')}: steady epoch's inner steps vs later epochs' {m('steps')}, "
              f"the rest of its time ({m('rest_share')} of an epoch, validation {m('val_share')}) vs "
              f"later epochs' {m('rest')}; later epochs' own sd {m('sd')}, trend (signed) last/first later "
              f"epoch {m('trend')}")  # fmt: skip
        print(f"    robust step time instead of the mean: median of the steady epoch's steps {m('median')}, "
              f"of all watched {m('median_all')}; 10 % trimmed mean {m('trim')}, of all watched "
              f"{m('trim_all')}")  # fmt: skip
        by_n = sorted({x["n"] for x in rows})
        if len(by_n) <= 6:
            print("    |error| by steps per epoch: " + ", ".join(
                f"{n}: {m('err', [x for x in rows if x['n'] == n])}" for n in by_n))  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA)
    ap.add_argument(
        "--container-logs",
        type=Path,
        nargs="+",
        default=[CONTAINER_LOGS, GPU_LOGS],
        help="the container's own logs",
    )
    ap.add_argument(
        "--held-out",
        type=Path,
        nargs="+",
        default=[HELD_OUT_LOGS, GPU_LOGS, NEW_CPU_LOGS, SCRIPT_LOGS, SCRIPT_LOGS_2, SCRIPT_LOGS_3],
        help="logs scored with the calibration fitted without them",
    )
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--write-calibration", action="store_true", help="rewrite the shipped calibration table")
    a = ap.parse_args()
    a.container_logs, a.held_out = [d.resolve() for d in a.container_logs], [d.resolve() for d in a.held_out]
    if a.write_calibration:  # first, so that the replays below use the table written
        calibration_figures([a.data, *a.container_logs], write=True, show=False)
        load_calibration.cache_clear()
    files = collect_logs([a.data])
    t0 = time.perf_counter()
    runs = [parse(f) for f in files]
    t_parse = time.perf_counter() - t0
    t0 = time.perf_counter()
    results = []
    for f, run in zip(files, runs, strict=True):
        r = replay(run, family=run_family(run, f))
        r.log = str(f)
        results.append(r)
    t_replay = time.perf_counter() - t0
    group = {r.log: str(Path(r.log).parent.parent) for r in results}
    agg = summarize(results, group)
    before = summarize([steady_epoch_alone(r, run, StopRule()) for r, run in zip(results, runs, strict=True)])
    scored = [(r, run) for r, run in zip(results, runs, strict=True) if r.error is not None]
    e1 = [x for _, run in scored if (x := fixed_window_errors(run, 2, 1)) is not None]
    e2 = [x for _, run in scored if (x := fixed_window_errors(run, 2, 2)) is not None]

    def pct(x: float) -> str:
        return f"{100 * x:6.2f} %"

    print(f"logs: {agg['logs']} read, {agg['logs_scored']} with unwatched epochs to score")
    print(f"parse {t_parse:.2f} s, replay {1000 * t_replay / max(len(results), 1):.2f} ms per log")
    print("predicted steady-state epoch time vs mean of the unwatched epochs, |error|:")
    print(f"  early-stop rule       median {pct(agg['median_abs_error'])}  p95 {pct(agg['p95_abs_error'])}"
          f"  max {pct(agg['max_abs_error'])}   (targets: median <= 0.5 %, p95 <= 3.5 %)")  # fmt: skip
    print(f"  before: epoch alone   median {pct(before['median_abs_error'])}  "
          f"p95 {pct(before['p95_abs_error'])}  max {pct(before['max_abs_error'])}   "
          "(the replay before: the steady epoch's own steps, not every step watched)")  # fmt: skip
    print(f"  seeds' 2-11 estimator median {pct(agg['baseline_median_abs_error'])}  "
          f"p95 {pct(agg['baseline_p95_abs_error'])}")  # fmt: skip
    print(f"  epoch 1 alone         median {pct(_percentile(e1, 50))}  p95 {pct(_percentile(e1, 95))}")
    print(f"  epoch 2 alone         median {pct(_percentile(e2, 50))}  p95 {pct(_percentile(e2, 95))}")
    print(f"90 % interval (shipped calibration, fitted on these logs: in-sample) contains the actual "
          f"epoch time for {pct(agg['interval_coverage'])} of the logs; cross-validated below")  # fmt: skip
    print(f"epochs watched: at most {agg['max_epochs_watched']}; steps watched: median "
          f"{pct(agg['median_share_of_log_watched'])} of the log, "
          f"{pct(agg['median_share_of_90_epochs_watched'])} of a 90-epoch run "
          f"(max {pct(agg['max_share_of_90_epochs_watched'])})")  # fmt: skip
    print(f"ranking: batch sizes in the actual order in {agg['grids_same_order']} of {agg['grids']} grids")
    for g in agg["ranking"]:
        grid = "/".join(Path(g["grid"]).parts[-2:])
        print(f"  {grid:55s} {g['computing_system']:6s} predicted {g['order_predicted']} actual "
              f"{g['order_actual']} tau {g['kendall_tau']:+.2f}")  # fmt: skip
    error_sources(results, runs)
    cal = calibration_figures([a.data, *a.container_logs], write=False)
    cal["held_out"] = {
        str(f.relative_to(ROOT)): held_out_figures(f, [a.data, *a.container_logs]) for f in a.held_out
    }
    if a.json:
        out = {
            "aggregate": agg,
            "aggregate_before": before,
            "logs": [r.to_dict() for r in results],
            "calibration": cal,
        }
        a.json.write_text(json.dumps(out, indent=2))


def calibration_figures(data: list[Path], *, write: bool, show: bool = True) -> dict:
    """Cross-validated interval figures per family (and the old 1 % prior's), printed; the table written."""
    # the jitter does not change what is fitted (errors and the steps' own noise): any fixed one will do
    prior, _, experiment = replay_logs(data, StopRule(epoch_jitter=OLD_PRIOR))
    folder = {log: exp.rsplit("/", 1)[0] for log, exp in experiment.items()}
    created = datetime.date.today().isoformat()
    n_logs, n_exps = len(prior), len(set(experiment.values()))
    source = f"benchmarks/bench_predict.py --write-calibration: {n_logs} logs, {n_exps} experiments"
    cal, cv = calibrate(prior, experiment, created=created, source=source)
    strict = cross_validate(prior, folder)
    # the replay before (the steady epoch's own steps alone), cross-validated the same way in the same run
    runs = {r.log: parse(Path(r.log)) for r in prior}
    before = [steady_epoch_alone(r, runs[r.log], StopRule(epoch_jitter=OLD_PRIOR)) for r in prior]
    cv_before, strict_before = cross_validate(before, experiment), cross_validate(before, folder)
    figures = {
        "old_prior": family_summary(prior),
        "cross_validated": family_summary(cv),
        "leave_one_folder_out": family_summary(strict),
        "before_cross_validated": family_summary(cv_before),
        "before_leave_one_folder_out": family_summary(strict_before),
        "calibration": cal.to_dict(),
    }
    # the same pooled over the seeds' logs alone (the shared real data: FCN, MNIST, ResNet, MO833)
    for key, rs in (
        ("old_prior", prior),
        ("cross_validated", cv),
        ("leave_one_folder_out", strict),
        ("before_cross_validated", cv_before),
        ("before_leave_one_folder_out", strict_before),
    ):
        figures[key]["seeds"] = family_summary([r for r in rs if r.family in SEED_FAMILIES])["pooled"]

    def in_row(r: ReplayResult, row: str) -> bool:
        fam = r.family or "unknown"
        return row in ("pooled", fam) or (row == "seeds" and fam in SEED_FAMILIES)

    n_exp = {f: len({experiment[r.log] for r in prior if in_row(r, f)}) for f in FAMILIES}

    def pct(x: float | None, w: int = 6) -> str:
        return f"{'-':>{w}s}  " if x is None or x != x else f"{100 * x:{w}.1f} %"

    def pct2(x: float | None, w: int = 6) -> str:
        return f"{'-':>{w}s}  " if x is None or x != x else f"{100 * x:{w}.2f} %"

    if show:
        lo, hi = (round(100 * g) for g in COVERAGE_GOAL)
        print(f"interval calibration, leave one experiment out: {n_exps} experiments (folder x instance "
              f"type), {len(set(folder.values()))} experiment folders; goals: 90 % interval covers "
              f"{lo}-{hi} % in every family, median |error| <= 0.5 % pooled")  # fmt: skip
        print(f"  {'family':13s} {'logs':>5s} {'exps':>5s} {'median|err|':>11s}  "
              f"{'coverage: 1 % prior':>19s}  {'cross-val.':>10s}  {'by folder':>9s}   "
              f"{'run noise':>9s}   shipped jitter (x the run's noise)")  # fmt: skip
        for f in FAMILIES:
            old, new, fo = (
                figures[k].get(f) for k in ("old_prior", "cross_validated", "leave_one_folder_out")
            )
            if old is None:
                continue
            own = cal.pooled if f == "pooled" else None if f == "seeds" else cal.families.get(f)
            jit = "-" if own is None or own.noise_multiple is None else f"x{own.noise_multiple:.2f}"
            flag = "" if own is None or own.noise_multiple is None else " ok" if own.validated else " FLAGGED"
            if f not in ("pooled", "seeds") and (own is None or own.noise_multiple is None):
                jit = "pooled"
            here = [r.stat_rel for r in prior if in_row(r, f) and r.error is not None]
            noise = _percentile([run_noise(s) for s in here if s is not None], 50)
            print(f"  {f:13s} {new['logs_scored']:5d} {n_exp[f]:5d} {pct2(new['median_abs_error'], 9)}  "
                  f"{pct(old['interval_coverage'], 17)}  {pct(new['interval_coverage'], 8)}  "
                  f"{pct(fo['interval_coverage'], 7)}  {pct2(noise, 6)}   {jit}{flag}")  # fmt: skip
        print("  the same, the replay before (the steady epoch's own steps alone) -> now, in the same run:")
        print(f"  {'family':13s} {'median|err|':>20s}  {'cross-val. coverage':>20s}  {'by folder':>20s}")
        for f in FAMILIES:
            was, now = figures["before_cross_validated"].get(f), figures["cross_validated"].get(f)
            was_fo, now_fo = (
                figures[k].get(f) for k in ("before_leave_one_folder_out", "leave_one_folder_out")
            )
            if was is None or now is None or was_fo is None or now_fo is None or not now["logs_scored"]:
                continue
            print(f"  {f:13s} {pct2(was['median_abs_error'])} -> {pct2(now['median_abs_error'])}  "
                  f"{pct(was['interval_coverage'])} -> {pct(now['interval_coverage'])}  "
                  f"{pct(was_fo['interval_coverage'])} -> {pct(now_fo['interval_coverage'])}")  # fmt: skip
        for f, fig in figures["old_prior"].items():
            if fig["logs"] and not fig["logs_scored"]:
                print(
                    f"  {f}: none of its {fig['logs']} logs has an epoch beyond the ones watched: not scored"
                )
    figures["by_class"] = class_figures(prior, experiment, cal, show=show)
    figures["noise_floor"] = floor_figures(prior, experiment, show=show)
    if write:
        out = ROOT / "trainsweep" / "data" / CALIBRATION_FILE
        out.write_text(json.dumps(cal.to_dict(), indent=2) + "\n")
        print(f"wrote {out.relative_to(ROOT)}")
    return figures


def held_out_figures(folder: Path, calibration_logs: list[Path]) -> dict:
    """Logs of ``folder`` scored with the calibration fitted on ``calibration_logs`` without them, per
    family and class, beside the same with the jitter before (fitted in the same run); printed, with how
    the logs' later epochs sat against the prediction and how far one run's epochs moved."""
    fit_on = [d for d in calibration_logs if d.resolve() != folder.resolve()]
    prior, _, experiment = replay_logs(fit_on, StopRule(epoch_jitter=OLD_PRIOR))
    held, _, _ = replay_logs([folder], StopRule(epoch_jitter=OLD_PRIOR))
    now, _ = calibrate(prior, experiment)
    held_now = [calibrated(r, now) for r in held]
    scored = {"now": summarize(held_now)}
    with jitter_unscaled():
        before, _ = calibrate(prior, experiment)
        scored["before"] = summarize([calibrated(r, before) for r in held])
    used = sorted({f"{c.family}: {c.calibration} x {c.class_calibration}" for c in held_now
                   if c.epoch_jitter is not None})  # fmt: skip
    print(f"held out, {folder.relative_to(ROOT)}: {scored['now']['logs_scored']} logs scored with the "
          f"calibration fitted on {len(prior)} logs without them ({'; '.join(used)}); coverage with the "
          "jitter before (not scaled by the run's noise) -> now, median half-width now:")  # fmt: skip
    for part in ("families", "classes"):
        for name, f in scored["now"][part].items():
            if not f["logs_scored"] or (part == "classes" and name == "pooled"):
                continue
            was = scored["before"][part][name]
            print(f"  {name:15s} {f['logs_scored']:4d} logs  median |error| "
                  f"{100 * f['median_abs_error']:5.2f} %"
                  f"  coverage {pct1(was['interval_coverage'])} -> {pct1(f['interval_coverage'])}"
                  f"  ±{pct1(f['median_interval_half_width'])} (before ±"
                  f"{pct1(was['median_interval_half_width'])})")  # fmt: skip
    errors = [r.error for r in held if r.error is not None]
    ranges = [max(t) / min(t) - 1 for r in held  # epoch 1 left out: its warm-up
              if len(t := [e.epoch_s for e in parse(Path(r.log)).epochs[1:] if e.epoch_s]) > 1]  # fmt: skip
    widest = pct1(max(ranges, default=math.nan))
    print(f"  predicted below the later epochs' mean in {sum(e < 0 for e in errors)} of {len(errors)} "
          f"logs; one run's epochs after its first apart by up to {widest}")  # fmt: skip
    return scored


@contextlib.contextmanager
def jitter_unscaled():
    """The interval before: a family's (and class's) jitter fitted as a relative sd, the same for every
    run, not a multiple of the run's own noise (``run_noise`` held at 1 where it is fitted and used)."""
    from unittest import mock

    with contextlib.ExitStack() as stack:
        for where in ("trainsweep.predict.calibration", "trainsweep.predict.fitting"):
            stack.enter_context(mock.patch(f"{where}.run_noise", lambda stat_rel: 1.0))
        yield


FLOORS = (0.0, 0.001, 0.0015, 0.002, 0.0025, 0.003, 0.005)
FOLDS = {
    "leave_one_experiment_out": "experiment",
    "leave_one_family_out": "family",
    "leave_one_class_out": "class",
    "leave_one_class_out_family_unknown": "class, as a script",
}
"""The cross-validations ``predict-eval --json`` prints, by the label the benchmark gives them."""
ISSUE_FOLDS = tuple(FOLDS)[:3]
"""Those the coverage goal is counted over (a script's fold is printed beside them)."""


def floor_figures(prior: list[ReplayResult], experiment: dict[str, str], *, show: bool) -> dict:
    """The three cross-validations at noise floors around the shipped one: pooled coverage, median
    half-width, and the families and classes (of 5 logs or more) outside the coverage goal."""
    from unittest import mock

    out = {}
    for floor in FLOORS:
        with mock.patch("trainsweep.predict.calibration.NOISE_FLOOR", floor):
            cv = cross_validations(prior, experiment)
        out[str(floor)] = {k: {"pooled": cv[k]["families"]["pooled"], "outside_goal": outside_goal(cv[k])}
                           for k in ISSUE_FOLDS}  # fmt: skip
    if show:
        print(f"noise floor (shipped {100 * NOISE_FLOOR:.2f} %): per cross-validation, pooled coverage, "
              "median half-width, families and classes of 5 logs or more outside 85-95 %")  # fmt: skip
        for floor, folds in out.items():
            cells = [
                f"{pct1(f['pooled']['interval_coverage'])} "
                f"±{pct1(f['pooled']['median_interval_half_width'])} {len(f['outside_goal'])} out"
                for f in folds.values()
            ]
            total = sum(len(f["outside_goal"]) for f in folds.values())
            print(f"  {100 * float(floor):5.2f} %  " + "  |  ".join(cells) + f"  | {total} outside in all")
    return out


def outside_goal(fold: dict) -> list[str]:
    """Families and classes of at least 5 scored logs whose coverage is outside the goal in ``fold``."""
    lo, hi = COVERAGE_GOAL
    return [
        f"{name} {pct1(f['interval_coverage'])}"
        for part in ("families", "classes")
        for name, f in fold[part].items()
        if name != "pooled" and f["logs_scored"] >= 5 and not lo <= f["interval_coverage"] <= hi
    ]


def class_figures(prior: list[ReplayResult], experiment: dict[str, str], cal, *, show: bool) -> dict:
    """Coverage per family and per instance class, leaving out one experiment, one family, one class;
    beside the same with the jitter before (a relative sd per family and class, not scaled by the run's
    own noise), measured in the same run."""
    cv = cross_validations(prior, experiment)
    with jitter_unscaled():
        before = cross_validations(prior, experiment)
    cv["before_unscaled_jitter"] = before
    if not show:
        return cv
    folds = tuple(FOLDS)
    lo, hi = (round(100 * g) for g in COVERAGE_GOAL)
    print(f"interval per family and instance class, three cross-validations (goal: {lo}-{hi} % coverage "
          "in every row; the held-out family or class is calibrated without any log of it) and a "
          "script's (each class held out, its logs calibrated as of an unknown family): coverage "
          "with the jitter before (not scaled by the run's noise) -> now, and the median half-width of "
          "the 90 % interval before -> now:")  # fmt: skip
    print(f"  {'group':15s} {'logs':>5s} {'median|err|':>11s} "
          + " ".join(f"{FOLDS[k]:>34s}" for k in folds) + "   shipped factor")  # fmt: skip
    for part in ("families", "classes"):
        rows = cv["leave_one_experiment_out"][part]
        for name, f in rows.items():
            if not f["logs_scored"] or (part == "classes" and name == "pooled"):
                continue
            cells = []
            for k in folds:
                was, now = before[k][part][name], cv[k][part][name]
                cells.append(f"{pct1(was['interval_coverage'])}->{pct1(now['interval_coverage'])} "
                             f"±{pct1(was['median_interval_half_width'])}->"
                             f"{pct1(now['median_interval_half_width'])}")  # fmt: skip
            own = cal.classes.get(name) if part == "classes" else None
            factor = "-" if own is None else (
                f"x{max(1.0, own.factor):.2f}" if own.factor is not None else "unseen fallback")  # fmt: skip
            print(f"  {name:15s} {f['logs_scored']:5d} {100 * f['median_abs_error']:10.2f} % "
                  + " ".join(f"{c:>34s}" for c in cells) + f"   {factor}")  # fmt: skip
    for name, folds_of in (("before", before), ("now", cv)):
        out = {FOLDS[k]: outside_goal(folds_of[k]) for k in folds}
        counted = sum(len(out[FOLDS[k]]) for k in ISSUE_FOLDS)
        print(f"  outside the goal (5 logs or more), {name}: {counted} in the experiment, family and class "
              f"folds, {len(out[FOLDS[folds[-1]]])} in the script's; "
              + "; ".join(f"{k}: {', '.join(v) or '-'}" for k, v in out.items()))  # fmt: skip
    for name, fallback in (("the family multiples", cal.unseen_class_factor),
                           ("the pooled multiple", cal.unseen_pooled_factor)):  # fmt: skip
        print(f"  unseen-class fallback per kind, over {name}: " + ", ".join(
            f"{k} x{v:.2f}" for k, v in sorted(fallback.items())))  # fmt: skip
    return cv


def pct1(x: float | None) -> str:
    return "-" if x is None or x != x else f"{100 * x:.1f}%"


if __name__ == "__main__":
    main()
