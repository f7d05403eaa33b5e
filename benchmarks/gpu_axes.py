"""GPU run logs of the built-in ResNet-50 over a precision axis, `dtype: [float32, bfloat16]`, 3 batch sizes.

The spec below is planned by the planner a sweep runs (``plan_sweep``, one packed job per instance type)
and the job runs as SageMaker runs it: the image's entry point (``container/train.py``) on the job's
``/opt/ml`` (hyperparameters written from the typed job record), synthetic CIFAR-10 data. The run logs it
writes are kept (a ``.tar.gz``) for ``trainsweep import`` and the report, which compute each run's samples
per second, MFU and cost figures; this script prints what the parser reads of each log.

    python benchmarks/gpu_axes.py --out DIR [--batch-sizes 256,512,1024] [--epochs 2] [--samples N] [--smoke]

Run on a machine with an NVIDIA GPU; never part of CI. ``--smoke``: the same path on the CPU with the MNIST
CNN (a check of this script).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trainsweep.logs import parse  # noqa: E402
from trainsweep.sagemaker_contract import BASE_ENV, Paths  # noqa: E402
from trainsweep.spec import plan_sweep  # noqa: E402

ENTRY_POINT = ROOT / "container" / "train.py"


def spec(a: argparse.Namespace) -> dict[str, object]:
    return {
        "name": "gpu-axes",
        "workload": {
            "model": "mnist-cnn" if a.smoke else "resnet50-cifar10",
            "epochs": a.epochs,
            "synthetic": True,
            "hyperparameters": {
                **({"synthetic-samples": a.samples} if a.samples else {}),
                **({"max-eval-batches": a.eval_batches} if a.eval_batches else {}),
                **({"max-steps-per-epoch": a.steps} if getattr(a, "steps", None) else {}),
            },
        },
        "axes": {"dtype": ["float32", "bfloat16"]},
        "instance_types": ["local" if a.smoke else "local_gpu"],
        "batch_sizes": [int(x) for x in a.batch_sizes.split(",")],
        "mode": "full",
        "packing": "per-instance",
        "max_runtime_seconds": 3600,
    }


def run_job(hyperparameters: dict[str, str], base: Path, output: Path) -> int:
    paths = Paths(base)
    paths.hyperparameters.parent.mkdir(parents=True, exist_ok=True)
    paths.hyperparameters.write_text(json.dumps(hyperparameters))
    for d in ("model", "output/data/logs"):
        (base / d).mkdir(parents=True, exist_ok=True)
    env = {**os.environ, BASE_ENV: str(base), "PYTHONUNBUFFERED": "1"}
    with output.open("wb") as out:  # the job's own output (every step line): kept, not printed
        cmd = [sys.executable, str(ENTRY_POINT)]
        return subprocess.run(cmd, cwd=base, env=env, stdout=out, stderr=subprocess.STDOUT).returncode


def describe(log: Path) -> str:
    run = parse(log)
    steady = [e.epoch_s for e in run.epochs[1:] if e.epoch_s is not None]
    epoch = f"{sum(steady) / len(steady):.3f} s" if steady else "-"
    problems = ", ".join(p.code for p in run.problems) or "none"
    return f"  {log.name}: {run.status}; steady epoch {epoch}; problems: {problems}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--batch-sizes", default="256,512,1024")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--samples", type=int, default=None, help="synthetic epoch size")
    ap.add_argument("--eval-batches", type=int, default=None, help="validation batches an epoch, at most")
    ap.add_argument("--steps", type=int, default=None, help="training steps an epoch, at most")
    ap.add_argument("--smoke", action="store_true")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    plan = plan_sweep(spec(a), sweep_id="gpu-axes")
    print(f"{len(plan.jobs)} job(s): {', '.join(j.job_name for j in plan.jobs)}", flush=True)
    with tempfile.TemporaryDirectory(prefix="gpu-axes-") as tmp:
        logs: list[Path] = []
        for job in plan.jobs:
            base = Path(tmp) / job.job_name
            t0 = time.perf_counter()
            code = run_job(dict(job.hyperparameters), base, Path(tmp) / f"{job.job_name}.output.txt")
            print(f"{job.job_name}: exit {code} after {time.perf_counter() - t0:.1f} s", flush=True)
            logs += sorted((base / "output" / "data").rglob("*.log"))
            logs += sorted((base / "output" / "data").rglob("*.json"))
            logs.append(Path(tmp) / f"{job.job_name}.output.txt")
        with tarfile.open(a.out / "gpu-axes-logs.tar.gz", "w:gz") as tar:
            for path in logs:
                tar.add(path, arcname=str(path.relative_to(tmp)))
        for log in (p for p in logs if p.suffix == ".log"):
            print(describe(log), flush=True)


if __name__ == "__main__":
    main()
