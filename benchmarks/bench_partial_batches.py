"""How much leaving out each epoch's partial last batch moves the steady step time, on real logs.

Reads the logs of a folder as ``trainsweep import`` reads them (:func:`trainsweep.importer.read_dir`) and,
for every run whose epochs end in a partial batch (its training set does not divide by the samples a step
trains), sets the step time of its figures (:func:`trainsweep.cost.runs.run_metrics`, the partial last
steps left out) against the mean of every step but each epoch's first (the rule before), side by side::

    python benchmarks/bench_partial_batches.py [DATA_DIR ...]

Defaults: the shared real logs (``../shared/fixtures/real-data``) and the H200 ResNet-50 logs kept in
``benchmarks/data/gpu-h200/resnet50-dtype``.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trainsweep.cost.runs import partial_batch_steps, run_metrics, samples_per_step, steady_steps  # noqa: E402
from trainsweep.importer import read_dir  # noqa: E402

DEFAULTS = (
    ROOT.parent / "shared" / "fixtures" / "real-data",
    ROOT / "benchmarks/data/gpu-h200/resnet50-dtype",
)


def moves(folder: Path) -> tuple[int, list[tuple[str, float, float]]]:
    """(runs read, [(run, step time before, after)] of the runs whose epochs end in a partial batch)."""
    runs = read_dir(folder).runs
    out = []
    for path, run in sorted(runs.items()):
        m = run_metrics(run)
        partial = partial_batch_steps(run, samples_per_step(m))
        before = steady_steps(run.epochs)
        if partial is None or not any(e.steps == partial for e in run.epochs) or not before or not m.step_s:
            continue
        out.append((path, statistics.fmean(before), m.step_s))
    return len(runs), out


def main() -> None:
    for folder in [Path(a) for a in sys.argv[1:]] or DEFAULTS:
        read, moved = moves(folder)
        print(f"{folder}: {read} runs read; {len(moved)} end their epochs in a partial batch")
        if not moved:
            continue
        change = [100 * c for c in sorted(after / before - 1 for _, before, after in moved)]
        print(
            f"  step time, partial last batches left out / every step but the first: median "
            f"{statistics.median(change):+.2f} %, range {change[0]:+.2f} .. {change[-1]:+.2f} %"
        )
        for path, before, after in moved if len(moved) <= 6 else ():
            print(f"  {path}: {1000 * before:.1f} -> {1000 * after:.1f} ms")


if __name__ == "__main__":
    main()
