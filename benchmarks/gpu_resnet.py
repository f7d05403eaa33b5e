"""GPU figures of the training container: resnet50-cifar10, synthetic data, batch sizes 256-2048.

Prints, per batch size:
* samples/s of a plain PyTorch loop and of the container's instrumented loop (CUDA events, lazy
  resolution, an MLLOG and a legacy line per step), same model and data, alternated in the same run,
  and the instrumentation overhead (target <= 1 % of throughput);
* the early-stop prediction of the epoch time against the epoch-2 time of a full 2-epoch run of the
  real entry point (target within 3 %), and the share of an epoch's steps early-stop ran (target <= 10 %).

Run on a machine with an NVIDIA GPU: ``python benchmarks/gpu_resnet.py [--batch-sizes 256,512] [--out DIR]``.
Never part of CI. ``--smoke`` runs a tiny CPU version to check the script itself.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from trainsweep.training.config import Cell, JobConfig, Paths  # noqa: E402
from trainsweep.training.runlog import RunLog  # noqa: E402
from trainsweep.training.worker import CellRun, Rank  # noqa: E402

EPOCH_RE = re.compile(r"^Epoch time: ([0-9.eE+-]+)s$", re.M)
STEP_RE = re.compile(r"^(\d+) step training time: ([0-9.eE+-]+)s$", re.M)


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def overhead(bs: int, repeats: int, steps: int | None, workload: str) -> dict[str, float]:
    """Plain loop vs the container's instrumented loop, alternated; returns samples/s and overhead."""
    with tempfile.TemporaryDirectory() as tmp:
        paths = Paths(Path(tmp))
        cfg = JobConfig(workload=workload, epochs=1, cells=(Cell("bench", bs),), synthetic=True)
        log = RunLog(paths.log_file("bench"), echo=False)
        run = CellRun(cfg, cfg.cells[0], paths, Rank(), log)
        run.setup()
        model, opt, loss_fn, data = run.model, run.optimizer, run.loss, run.train_data
        n = min(len(data), steps) if steps else len(data)

        def plain() -> None:
            model.train()
            for i, (x, y) in enumerate(data):
                if i >= n:
                    break
                out = model(x)
                loss = loss_fn(out, y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()

        def instrumented() -> None:
            run._train_steps(n, stop_check=False)
            run.clock.drain()

        plain()  # warm-up: cudnn autotuning, allocator
        instrumented()
        sync()
        t_plain, t_instr = [], []
        for _ in range(repeats):
            for fn, acc in ((plain, t_plain), (instrumented, t_instr)):
                sync()
                t0 = time.perf_counter()
                fn()
                sync()
                acc.append(time.perf_counter() - t0)
        log.close()
        samples = n * bs
        sp, si = samples / statistics.median(t_plain), samples / statistics.median(t_instr)
        return {
            "steps": n,
            "plain_samples_s": sp,
            "instrumented_samples_s": si,
            "overhead": 1 - si / sp,
            "plain_runs_s": t_plain,
            "instrumented_runs_s": t_instr,
        }


def entry_point(base: Path, hyper: dict[str, str]) -> tuple[int, str, float]:
    (base / "input" / "config").mkdir(parents=True, exist_ok=True)
    (base / "input" / "config" / "hyperparameters.json").write_text(json.dumps(hyper))
    env = dict(os.environ, SAGEMAKER_BASE_DIR=str(base), PYTHONPATH=str(ROOT))
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, str(ROOT / "container" / "train.py")], env=env, capture_output=True,
                       text=True, check=False)  # fmt: skip
    wall = time.perf_counter() - t0
    if p.returncode:
        print(p.stdout[-3000:], p.stderr[-3000:], file=sys.stderr)
    logs = list((base / "output" / "data" / "logs").glob("*.log"))
    return p.returncode, logs[0].read_text() if logs else "", wall


def early_stop_vs_full(bs: int, workload: str, extra: dict[str, str]) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        common = {"workload": workload, "epochs": "2", "batch-size": str(bs), "synthetic": "true", **extra}
        rc_f, full_log, wall_f = entry_point(Path(tmp) / "full", {**common, "run-names": f"full-{bs}"})
        rc_e, _es_log, wall_e = entry_point(Path(tmp) / "es", {**common, "mode": "early-stop",
                                                               "run-names": f"es-{bs}"})  # fmt: skip
        pred_file = Path(tmp) / "es" / "output" / "data" / "predictions" / f"es-{bs}.json"
        pred = json.loads(pred_file.read_text()) if pred_file.is_file() else None
    epochs = [float(x) for x in EPOCH_RE.findall(full_log)]
    steps = [int(n) for n, _ in STEP_RE.findall(full_log)]
    per_epoch = max(steps) if steps else None
    out: dict[str, object] = {"rc_full": rc_f, "rc_early_stop": rc_e, "full_epoch_s": epochs,
                              "wall_full_s": wall_f, "wall_early_stop_s": wall_e}  # fmt: skip
    if pred and len(epochs) >= 2 and per_epoch:
        actual = epochs[1]
        out.update(
            predicted_epoch_s=pred["epoch_s"],
            predicted_low_s=pred["epoch_low_s"],
            predicted_high_s=pred["epoch_high_s"],
            actual_epoch2_s=actual,
            error=pred["epoch_s"] / actual - 1,
            steps_watched=pred["steps_watched"],
            steps_per_epoch=per_epoch,
            share_of_epoch=pred["steps_watched"] / per_epoch,
            stop_reason=pred["stop_reason"],
            covered=pred["epoch_low_s"] <= actual <= pred["epoch_high_s"],
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch-sizes", default="256,512,1024,2048")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=0, help="steps per overhead run (0: one epoch)")
    ap.add_argument("--min-steps", default="", help="early-stop-min-steps for the early-stop runs")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--smoke", action="store_true", help="tiny CPU run that checks the script")
    a = ap.parse_args()
    workload = "resnet50-cifar10"
    extra: dict[str, str] = {}
    if a.min_steps:
        extra["early-stop-min-steps"] = a.min_steps
    if a.smoke:
        workload, a.repeats, a.steps = "mnist-cnn", 1, 3
        extra.update({"max-steps-per-epoch": "14", "max-eval-batches": "3", "early-stop-min-steps": "4",
                      "validation-batches": "3"})  # fmt: skip
    dev = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    print(f"device: {dev}; torch {torch.__version__}; python {sys.version.split()[0]}", flush=True)
    results = {"device": dev, "torch": torch.__version__, "batch_sizes": {}}
    for bs in [int(b) for b in a.batch_sizes.split(",")]:
        ov = overhead(bs, a.repeats, a.steps or None, workload)
        es = early_stop_vs_full(bs, workload, extra)
        results["batch_sizes"][bs] = {"overhead": ov, "early_stop": es}
        line = (f"bs {bs:5d}: plain {ov['plain_samples_s']:9.0f} samples/s, instrumented "
                f"{ov['instrumented_samples_s']:9.0f} samples/s, "
                f"overhead {100 * ov['overhead']:+.2f} %")  # fmt: skip
        if "error" in es:
            line += (f"; early-stop epoch {es['predicted_epoch_s']:.3f} s vs full-run epoch 2 "
                     f"{es['actual_epoch2_s']:.3f} s: error {100 * es['error']:+.2f} %, interval covers: "
                     f"{es['covered']}, watched {es['steps_watched']}/{es['steps_per_epoch']} steps "
                     f"({100 * es['share_of_epoch']:.1f} % of an epoch, {es['stop_reason']})")  # fmt: skip
        else:
            line += f"; early-stop comparison failed: {es}"
        print(line, flush=True)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "gpu_resnet.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
