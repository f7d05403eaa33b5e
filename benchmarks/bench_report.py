"""Benchmark: how long the sweep analysis and report take, against parsing the same logs.

Parses the 72 real FCN logs (the baseline: what every sweep pays anyway), then times the analysis
(metrics + recommendation), the plots, and the whole ``sweep_artefacts`` (csv, json, plots, html), and a
large synthetic sweep (10 instance types x 6 batch sizes x 3 repetitions x 4 ranks x 5,000 steps) to
show how the report scales with steps. Prints CPU seconds of this process (the machine may be shared),
ratios to the parse baseline, the analysis' peak allocations, and sizes.

    .venv/bin/python benchmarks/bench_report.py
"""

from __future__ import annotations

import time
import tracemalloc
from array import array
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FCN = (
    ROOT.parent
    / "shared/fixtures/real-data/cloud-ML/seismic-fcn/experimental_results/2020-06-FCN-on-sagemaker"
)


def _timed(fn):
    """(result, CPU seconds of this process): robust to other work on a shared machine."""
    t = time.process_time()
    out = fn()
    return out, time.process_time() - t


def synthetic_runs(types: int = 10, sizes: int = 6, reps: int = 3, ranks: int = 4, steps: int = 5000):
    import numpy as np

    from trainsweep.instances import CATALOGUE, vmtype
    from trainsweep.logs.model import Epoch, RunTimings

    rng = np.random.default_rng(0)
    names = [n for n, t in CATALOGUE.items() if t.gpus >= 1 and n.startswith("ml.")][:types]
    runs = []
    for itype in names:
        for k in range(sizes):
            bs = 64 * 2**k
            for rep in range(reps):
                rank_epochs = {}
                for r in range(ranks):
                    eps = []
                    for e in range(1, 6):
                        n = steps // 5
                        wait = array("d", np.abs(rng.normal(0.01, 0.005, n)))
                        comp = array("d", np.abs(rng.normal(0.05 * (k + 1), 0.002, n)))
                        step = array("d", np.add(wait, comp))
                        eps.append(
                            Epoch(e, step, array("l", range(1, n + 1)), wait, comp, epoch_s=float(sum(step)))
                        )
                    rank_epochs[r] = eps
                runs.append(
                    RunTimings(
                        name=f"bench-{vmtype(itype)}-{bs}-e{rep}",
                        computing_system=vmtype(itype),
                        batch_size=bs,
                        run_index=rep,
                        epochs=rank_epochs[0],
                        ranks=rank_epochs,
                    )
                )
    return runs


def main() -> None:
    from trainsweep.logs import parse
    from trainsweep.report import analyse, sweep_artefacts, sweep_plots

    logs = sorted((FCN / "logs").glob("result-*.txt"))
    runs, t_parse = _timed(lambda: [parse(p) for p in logs])
    a, t_analyse = _timed(lambda: analyse(runs))
    _, t_plots = _timed(lambda: sweep_plots(a))
    arts, t_all = _timed(lambda: sweep_artefacts(runs))
    size = sum(len(v) for v in arts.values())
    print(f"FCN grid: {len(runs)} logs, {sum(r.steps_total for r in runs):,} steps")
    print(f"  parse (baseline)        {t_parse:8.3f} s CPU  1.00x")
    print(f"  analyse                 {t_analyse:8.3f} s   {t_analyse / t_parse:5.2f}x")
    print(f"  plots                   {t_plots:8.3f} s   {t_plots / t_parse:5.2f}x")
    print(f"  sweep_artefacts (all)   {t_all:8.3f} s   {t_all / t_parse:5.2f}x")
    print(
        f"  artefacts: {len(arts)} files, {size / 1e6:.2f} MB "
        f"(report.html {len(arts['report.html']) / 1e6:.2f} MB)"
    )

    big, t_make = _timed(synthetic_runs)
    steps = sum(sum(e.steps for eps in r.ranks.values() for e in eps) for r in big)
    arts, t_big = _timed(lambda: sweep_artefacts(big))
    tracemalloc.start()
    analyse(big)  # the analysis' own allocations (tracing slows it, so it is not timed)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"synthetic sweep: {len(big)} runs, {steps:,} rank-steps (built in {t_make:.1f} s)")
    print(f"  sweep_artefacts         {t_big:8.3f} s   {t_big / t_parse:5.2f}x the FCN parse")
    print(f"  per million rank-steps  {t_big / steps * 1e6:8.3f} s")
    print(
        f"  analyse peak allocations {peak / 1e6:7.1f} MB; "
        f"report.html {len(arts['report.html']) / 1e6:.2f} MB"
    )


if __name__ == "__main__":
    main()
