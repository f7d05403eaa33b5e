"""Figures of the early-stop rule replayed on the shared real logs (../shared/fixtures/real-data).

Prints, over the logs that have epochs the rule did not watch: the |error| of the predicted steady-state
epoch time (median, p95, max) against the mean of the unwatched epochs, the coverage of the 90 %
interval, the same for the seeds' estimator (mean of steps 2-11 x steps) and for two fixed windows
measured in the same run (epoch 1 alone, epoch 2 alone), the share of steps watched (of the log and of a
90-epoch run of the same configuration), and per (experiment, instance type) grid whether the batch
sizes come out in the same order by predicted as by actual epoch time.

Usage: ``python benchmarks/bench_predict.py [DATA_DIR] [--json OUT]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trainsweep.cli.predict import collect_logs  # noqa: E402
from trainsweep.logs import parse  # noqa: E402
from trainsweep.predict import _percentile, replay, summarize  # noqa: E402


def fixed_window_errors(run, watched: int, which: int) -> float | None:
    """|error| of 'epoch <which> alone predicts the mean of the epochs after the first <watched>'."""
    eps = [e for e in run.epochs if e.steps and e.epoch_s]
    if len(eps) <= watched:
        return None
    rest = [e.epoch_s for e in eps[watched:]]
    return abs(eps[which - 1].epoch_s / (sum(rest) / len(rest)) - 1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("data", nargs="?", type=Path, default=ROOT.parent / "shared" / "fixtures" / "real-data")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    files = collect_logs([a.data])
    t0 = time.perf_counter()
    runs = [parse(f) for f in files]
    t_parse = time.perf_counter() - t0
    t0 = time.perf_counter()
    results = []
    for f, run in zip(files, runs, strict=True):
        r = replay(run)
        r.log = str(f)
        results.append(r)
    t_replay = time.perf_counter() - t0
    group = {r.log: str(Path(r.log).parent.parent) for r in results}
    agg = summarize(results, group)
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
    print(f"  seeds' 2-11 estimator median {pct(agg['baseline_median_abs_error'])}  "
          f"p95 {pct(agg['baseline_p95_abs_error'])}")  # fmt: skip
    print(f"  epoch 1 alone         median {pct(_percentile(e1, 50))}  p95 {pct(_percentile(e1, 95))}")
    print(f"  epoch 2 alone         median {pct(_percentile(e2, 50))}  p95 {pct(_percentile(e2, 95))}")
    print(f"90 % interval contains the actual epoch time for {pct(agg['interval_coverage'])} of the logs "
          f"(target >= 85 %)")  # fmt: skip
    print(f"epochs watched: at most {agg['max_epochs_watched']}; steps watched: median "
          f"{pct(agg['median_share_of_log_watched'])} of the log, "
          f"{pct(agg['median_share_of_90_epochs_watched'])} of a 90-epoch run "
          f"(max {pct(agg['max_share_of_90_epochs_watched'])})")  # fmt: skip
    print(f"ranking: batch sizes in the actual order in {agg['grids_same_order']} of {agg['grids']} grids")
    for g in agg["ranking"]:
        grid = "/".join(Path(g["grid"]).parts[-2:])
        print(f"  {grid:55s} {g['computing_system']:6s} predicted {g['order_predicted']} actual "
              f"{g['order_actual']} tau {g['kendall_tau']:+.2f}")  # fmt: skip
    if a.json:
        a.json.write_text(json.dumps({"aggregate": agg, "logs": [r.to_dict() for r in results]}, indent=2))


if __name__ == "__main__":
    main()
