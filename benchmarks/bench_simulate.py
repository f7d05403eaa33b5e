"""Sweep strategies replayed on the shared real logs: cost against the exhaustive grid, and regret.

For every results root of ``../shared/fixtures/real-data`` (an experiment folder, as ``trainsweep import``
groups them) the grid is what its complete logs show (instance types x batch sizes, the epochs most runs
did), and each strategy below is replayed on it with :func:`trainsweep.simulate.simulate`. Nothing is
tuned on these folders: the strategies, the early-stop rule (the container's shipped ``StopRule``
defaults) and the batch-size search's plateau gain (the spec's default 3 %) are fixed before, and the
replay has no parameter of its own, so every folder is a held-out grid. Printed per folder and
strategy: cost ratio (strategy / exhaustive), regret of the fastest pick in time and of the cheapest in
cost, beside the spread between repetitions of the true best (``(max - min) / mean``), the goal being
regret <= spread and ratio <= 0.10.

Then ``simulate`` through the CLI on >= 500 logs: the FCN folder's logs replicated into a temporary
folder at run time (each replica's step, validation and epoch times scaled by 1 + k/1000, so that no
replica is a copy the import leaves out), timed end to end.

Then the racing strategy (``simulate --race``) beside the recommended one on wide synthetic grids
(:mod:`wide_grids`: 10 to 50 instance types of the catalogue, those it does not price at a fitted rate
given as the spec's ``prices``, x each seed family's four batch sizes, three repetitions resampled from
the real logs): cost ratio and regret against grid width. The race's intervals are calibrated without
the family a grid is built from (leave one family out: the race is scored on logs its calibration has
not seen), and its settings are :class:`trainsweep.race.RaceRule`'s defaults, fixed before any grid was
scored. Then the same on grids widened the other way: ``--types`` instance types (10) x 1 to 4 batch
sizes each (the same types and seeds at every count).

Usage: ``python benchmarks/bench_simulate.py [DATA_DIR] [--replicas 7] [--widths 10,20,36,50]
[--grids 3] [--types 10] [--json OUT]``.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trainsweep.importer import ImportResult, read_dir  # noqa: E402
from trainsweep.race import RaceRule  # noqa: E402
from trainsweep.simulate import simulate  # noqa: E402
from trainsweep.spec import load_spec  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "fixtures" / "real-data"
CONTAINER_LOGS = ROOT / "benchmarks" / "data" / "container-logs"
FCN = "cloud-ML/seismic-fcn/experimental_results/2020-06-FCN-on-sagemaker"
STRATEGIES = {
    "exhaustive-1rep": {"mode": "full", "packing": "per-cell", "repetitions": 1},
    "full-packed-1rep": {"mode": "full", "packing": "per-instance", "repetitions": 1},
    "early-stop-1rep": {"mode": "early-stop", "packing": "per-cell", "repetitions": 1},
    "early-stop-warm-1rep": {
        "mode": "early-stop",
        "packing": "per-cell",
        "repetitions": 1,
        "warm_pool_seconds": 60,
    },
    "recommended": {"mode": "early-stop", "packing": "per-instance", "repetitions": 1},
    "recommended-3rep-warm": {
        "mode": "early-stop",
        "packing": "per-instance",
        "repetitions": 3,
        "warm_pool_seconds": 60,
    },
    # batch_sizes: auto from the grid's smallest to its largest size, the default 3 % plateau gain
    "recommended-auto": {"mode": "early-stop", "packing": "per-instance", "repetitions": 1, "auto": True},
    # to the folder's TARGETS value (folders without one are left out): every configuration trained to
    # the target, and the two-phase sweep (the scan above, then the default top 3 trained to it)
    "full-to-target-1rep": {"mode": "full", "packing": "per-cell", "repetitions": 1, "target": True},
    "scan-confirm-top3": {"mode": "early-stop", "repetitions": 1, "phases": True, "target": True},
    # the recommended grid raced: packed early-stop jobs that stop watching what their intervals rule out
    "race": {"mode": "early-stop", "packing": "per-instance", "repetitions": 1, "race": True},
}
TARGETS = {"seismic-fcn": 0.95, "cnn-mnist": 0.98}
"""eval_accuracy targets by folder (a part of its path), set from the accuracy curves before any replay
to the value most configurations reach within the logged epochs (FCN 18 of 24, MNIST 3 and 4 of 4); the
ResNet runs stay near chance (0.10) for all five epochs, so no target means anything there."""
_NUMBER = re.compile(rb"((?:step training time|steps training|Validation time|Epoch time):? )([0-9.]+)")


def by_root(result: ImportResult) -> dict[str, ImportResult]:
    """The import's results roots (experiment folders), each as an import of its own."""
    roots: dict[str, list] = {}
    for o in result.files:
        roots.setdefault(o.results_root, []).append(o)
    out = {}
    for root, files in sorted(roots.items()):
        paths = {o.path for o in files}
        quality = {
            "duplicates": [d for d in result.quality["duplicates"] if set(d["paths"]) & paths],
            "skipped": [],
        }
        out[root] = ImportResult(
            result.out, files, [], quality, {p: r for p, r in result.runs.items() if p in paths}
        )
    return out


def grid_spec(result: ImportResult, root: str = "", **strategy) -> dict | None:
    """The grid the folder's complete logs show, as a spec (None: fewer than two configurations, or a
    strategy to a target on a folder without one in :data:`TARGETS`)."""
    runs = [(o, result.runs[o.path]) for o in result.files if o.path in result.runs and o.instance_type]
    runs = [(o, r) for o, r in runs if r.status == "complete" and o.batch_size]
    cells = {(o.instance_type, o.batch_size) for o, _ in runs}
    if len(cells) < 2:
        return None
    epochs = Counter(len([e for e in r.epochs if e.steps]) for _, r in runs).most_common(1)[0][0]
    sizes = sorted({b for _, b in cells})
    auto = strategy.pop("auto", False)
    strategy.pop("race", None)
    if strategy.pop("target", False):
        value = next((v for part, v in TARGETS.items() if part in root), None)
        if value is None:
            return None
        strategy["target"] = {"metric": "eval_accuracy", "value": value}
    if strategy.pop("phases", False):
        strategy["phases"] = ["scan", "confirm"]
    return {
        "name": "replay",
        "workload": {"model": "resnet50-cifar10", "epochs": max(1, epochs)},
        "instance_types": sorted({t for t, _ in cells}),
        "batch_sizes": {"auto": {"min": sizes[0], "max": sizes[-1]}} if auto else sizes,
        "max_concurrency": 4,
        **strategy,
    }


def _pct(x: float | None) -> str:
    return "    -" if x is None else f"{100 * x:5.1f}%"


def _family(result: ImportResult) -> str | None:
    """The seed family of a folder's logs (its first log's)."""
    from trainsweep.predict import run_family

    return next((run_family(r, p) for p, r in result.runs.items()), None)


def calibrations_without(data: Path) -> dict[str, object]:
    """Per seed family, the interval's calibration fitted on the real logs of every other family."""
    from trainsweep.cli.predict import replay_logs
    from trainsweep.predict import StopRule, calibrate

    results, _, experiment = replay_logs([data, CONTAINER_LOGS], StopRule(epoch_jitter=0.01))
    out = {}
    for family in ("fcn", "mnist", "resnet"):
        out[family], _ = calibrate([r for r in results if r.family != family], experiment)
    return out


def replay_folders(data: Path, held_out: dict[str, object]) -> list[dict]:
    everything = read_dir(data)
    rows = []
    print(
        f"{'folder':58} {'strategy':22} {'ratio':>6} "
        f"{'regret t':>8} {'spread t':>8} {'regret $':>8} {'spread $':>8}"
    )
    for root, result in by_root(everything).items():
        for name, strategy in STRATEGIES.items():
            spec = grid_spec(result, root, **strategy)
            if spec is None:
                continue
            loaded = load_spec(spec, allow_retired=True)
            race = RaceRule(calibration=held_out.get(_family(result))) if strategy.get("race") else None
            sim = simulate(loaded, result, race=race).to_dict()
            sp = sim["repetition_spread"]
            row = {
                "folder": root,
                "strategy": name,
                "configurations": len(loaded.instance_types) * len(loaded.batch_sizes)
                - len(sim["cells_without_logs"]),
                "skipped_by_search": len(sim["strategy"]["skipped_by_search"]),
                "runs": sim["exhaustive"]["runs"],
                "cost_ratio": sim["cost_ratio"],
                "strategy_cost_usd": sim["strategy_cost_usd"],
                "exhaustive_cost_usd": sim["exhaustive_cost_usd"],
                "strategy_wall_s": sim["strategy_wall_s"],
                "exhaustive_wall_s": sim["exhaustive_wall_s"],
                "epochs": spec["workload"]["epochs"],
                "regret_time": sim["regret_time"],
                "regret_cost": sim["regret_cost"],
                "spread_time": sp["time_of_true_fastest"],
                "spread_cost": sp["cost_of_true_cheapest"],
                "picks": sim["picks"],
                "learns_worse": sim["learns_worse"],
                "truth": sim["truth"],
                "target": sim["target"],
                "missed_target": len(sim["missed_target"]),
                "confirmed": sim["phases"]["confirmed"] if sim["phases"] else None,
            }
            rows.append(row)
            print(
                f"{root[-58:]:58} {name:22} {row['cost_ratio']:6.3f} {_pct(row['regret_time']):>8} "
                f"{_pct(row['spread_time']):>8} {_pct(row['regret_cost']):>8} {_pct(row['spread_cost']):>8}"
                + (f"  pick flagged: {', '.join(row['learns_worse'])}" if row["learns_worse"] else "")
            )
    return rows


def replicate(src: Path, dest: Path, copies: int) -> int:
    """Copies of the logs below ``src`` into ``dest/replica-k``, times scaled by 1 + k/1000."""
    n = 0
    for k in range(copies):
        factor = 1 + k / 1000
        for f in sorted(src.rglob("result-*.txt")):
            target = dest / f"replica-{k}" / f.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            data = f.read_bytes()
            if k:
                data = _NUMBER.sub(
                    lambda m, x=factor: m.group(1) + f"{float(m.group(2)) * x:.9f}".encode(), data
                )
            target.write_bytes(data)
            n += 1
    return n


def time_cli(data: Path, copies: int) -> dict:
    spec = grid_spec(read_dir(data / FCN), **STRATEGIES["recommended"])
    with tempfile.TemporaryDirectory(prefix="bench-simulate-") as tmp:
        logs = Path(tmp) / "logs"
        n = replicate(data / FCN, logs, copies)
        spec_path = Path(tmp) / "spec.json"
        spec_path.write_text(json.dumps(spec))
        exe = Path(sys.executable).with_name("trainsweep")
        t0 = time.perf_counter()
        out = subprocess.run(
            [str(exe), "simulate", str(spec_path), "--from", str(logs), "--json"],
            capture_output=True,
            check=True,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        )
        wall = time.perf_counter() - t0
    sim = json.loads(out.stdout)
    print(
        f"simulate on {n} logs ({copies} replicas of the FCN grid): {wall:.1f} s wall "
        f"(goal < 30 s); {sim['exhaustive']['runs']} runs used, cost ratio {sim['cost_ratio']:.3f}"
    )
    return {"logs": n, "wall_s": wall, "runs_used": sim["exhaustive"]["runs"]}


def _within(sim: dict) -> bool:
    sp = sim["repetition_spread"]
    time_ok = sp["time_of_true_fastest"] is None or (sim["regret_time"] or 0) <= sp["time_of_true_fastest"]
    cost_ok = sp["cost_of_true_cheapest"] is None or (sim["regret_cost"] or 0) <= sp["cost_of_true_cheapest"]
    return time_ok and cost_ok


HEADER = (
    f"{'family':7} {'types':>5} {'configs':>7} {'seed':>4} {'recommended':>11} {'race':>6} "
    f"{'race regret t/$':>15} {'spread t/$':>13} {'stages: looks (steps)':>22}"
)


def race_row(
    pool, width: int, seed: int, held_out: dict[str, object], batch_sizes: int | None = None
) -> dict:
    """The recommended strategy and the race on one synthetic grid; its row, printed."""
    from wide_grids import grid

    result, spec = grid(pool, width, seed=seed, batch_sizes=batch_sizes)
    loaded = load_spec(spec, allow_retired=True)
    rec = simulate(loaded, result).to_dict()
    raced = simulate(loaded, result, race=RaceRule(calibration=held_out[pool.family])).to_dict()
    sp = raced["repetition_spread"]
    row = {
        "family": pool.family, "instance_types": width, "batch_sizes": len(loaded.batch_sizes),
        "configurations": width * len(loaded.batch_sizes), "seed": seed,
        "recommended": rec["cost_ratio"], "race": raced["cost_ratio"],
        "recommended_within_spread": _within(rec), "race_within_spread": _within(raced),
        "race_regret_time": raced["regret_time"], "race_regret_cost": raced["regret_cost"],
        "spread_time": sp["time_of_true_fastest"], "spread_cost": sp["cost_of_true_cheapest"],
        "stages": raced["strategy"]["stages"],
        "race_start_up_share": raced["strategy"]["start_up_usd"] / raced["strategy_cost_usd"],
    }  # fmt: skip
    looks = " ".join(f"{st['configurations_watched']}({st['steps']})" for st in row["stages"])
    regret = f"{_pct(row['race_regret_time'])}/{_pct(row['race_regret_cost'])}"
    print(f"{pool.family:7} {width:5d} {row['configurations']:7d} {seed:4d} {rec['cost_ratio']:11.3f} "
          f"{raced['cost_ratio']:6.3f} {regret} "
          f"{_pct(row['spread_time'])}/{_pct(row['spread_cost'])} {looks:>22}")  # fmt: skip
    return row


def summary(rows: list[dict], label: str) -> None:
    """The median (max) cost ratio of both strategies over ``rows``, and how often within the spread."""
    for name in ("recommended", "race"):
        ratios = [r[name] for r in rows]
        within = sum(1 for r in rows if r[f"{name}_within_spread"])
        met = sum(x <= 0.10 for x in ratios)
        print(f"  {label}, {name:11}: median {statistics.median(ratios):.3f}, "
              f"max {max(ratios):.3f}, <= 0.10 in {met} of {len(rows)}, "
              f"within spread {within} of {len(rows)}")  # fmt: skip
    share = statistics.median(r["race_start_up_share"] for r in rows)
    print(f"       the jobs' start-up (133 s each, one job per instance type) is {100 * share:.0f} % "
          "of the race's bill (median)")  # fmt: skip


def wide(data: Path, widths: list[int], grids: int, held_out: dict[str, object]) -> list[dict]:
    """The recommended strategy and the race on synthetic grids of each width, per family and seed."""
    from wide_grids import pools

    families = pools(read_dir(data))
    print(HEADER)
    rows = [
        race_row(pool, width, 1000 * width + seed, held_out)
        for width in widths
        for _, pool in sorted(families.items())
        for seed in range(grids)
    ]
    print("by width (median cost ratio over families and seeds; regret within the repetition spread):")
    for width in widths:
        summary([r for r in rows if r["instance_types"] == width], f"{width:3d} types")
    return rows


def per_type(data: Path, types: int, grids: int, held_out: dict[str, object]) -> list[dict]:
    """The same on grids of ``types`` instance types widened by batch sizes: 1 to all of the family's
    (the same types and seeds at every count, the batch sizes drawn from the family's)."""
    from wide_grids import pools

    families = pools(read_dir(data))
    most = min(len(p.by_batch) for p in families.values())
    print(f"{types} instance types, 1 to {most} batch sizes each:")
    print(HEADER)
    rows = [
        race_row(pool, types, 1000 * types + seed, held_out, batch_sizes=k)
        for k in range(1, most + 1)
        for _, pool in sorted(families.items())
        for seed in range(grids)
    ]
    print(f"by batch sizes per instance type ({types} types; median cost ratio over families and seeds):")
    for k in range(1, most + 1):
        summary(
            [r for r in rows if r["batch_sizes"] == k], f"{k} batch sizes ({types * k:3d} configurations)"
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--replicas", type=int, default=7, help="copies of the FCN grid's 72 logs to time")
    ap.add_argument("--widths", default="10,20,36,50", help="instance types of the wide synthetic grids")
    ap.add_argument("--grids", type=int, default=3, help="synthetic grids per width and family")
    ap.add_argument(
        "--types", type=int, default=10, help="instance types of the grids widened by batch sizes"
    )
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    held_out = calibrations_without(a.data)
    rows = replay_folders(a.data, held_out)
    for name in STRATEGIES:
        mine = [r for r in rows if r["strategy"] == name]
        if not mine:
            continue
        cost = sum(r["strategy_cost_usd"] for r in mine) / sum(r["exhaustive_cost_usd"] for r in mine)
        wall = sum(r["strategy_wall_s"] for r in mine) / sum(r["exhaustive_wall_s"] for r in mine)
        print(
            f"{name:22} pooled over {len(mine)} folders: cost {cost:.3f}x, "
            f"wall-clock {wall:.3f}x the exhaustive"
        )
    for name in ("recommended", "recommended-auto", "race"):
        rec = [r for r in rows if r["strategy"] == name]
        within = [
            r
            for r in rec
            if (r["spread_time"] is None or (r["regret_time"] or 0) <= r["spread_time"])
            and (r["spread_cost"] is None or (r["regret_cost"] or 0) <= r["spread_cost"])
        ]
        ratios = [r["cost_ratio"] for r in rec if r["cost_ratio"] is not None]
        met = sum(1 for x in ratios if x <= 0.10)
        print(
            f"{name}: cost ratio median {statistics.median(ratios):.3f}, max {max(ratios):.3f}; "
            f"<= 0.10 in {met} of {len(rec)} folders; regret within the repetition spread in "
            f"{len(within)} of {len(rec)}; {sum(r['skipped_by_search'] for r in rec)} runs skipped by the "
            f"batch-size search; recommended pick flagged 'learns worse' by the exhaustive runs in "
            f"{sum(1 for r in rec if 'recommended' in r['learns_worse'])} of {len(rec)}"
        )
    wide_rows = wide(a.data, [int(w) for w in a.widths.split(",")], a.grids, held_out)
    per_type_rows = per_type(a.data, a.types, a.grids, held_out)
    timing = time_cli(a.data, a.replicas)
    if a.json:
        out = {"folders": rows, "wide": wide_rows, "per_type": per_type_rows, "timing": timing}
        a.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
