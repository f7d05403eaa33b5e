"""Logs of trainsweep's own container, for the early-stop interval's calibration (``bench_predict.py``).

Runs the entry point (``container/train.py``) as local mode does, in full mode, on this machine's CPU
(``--gpu``: its GPUs): a built-in workload (default ``mnist-cnn``) on synthetic data, one packed job per
session scanning batch sizes 32, 64 and 128 for 5 epochs. Each session is one experiment
(``<out>/<workload>-<cpu|gpu>[-<N>t]-<session>/logs/``, ``-<N>t`` for ``--threads N`` other than 1); its
seed differs. The logs are kept as the worker
wrote them. Then ``python benchmarks/bench_predict.py --write-calibration`` refits the shipped table.

Usage: ``python benchmarks/container_logs.py [--out DIR] [--sessions a,b,c,d,e] [--workload W] [--gpu]
[--threads N] [--samples N] [--dtype D] [--seed-offset K]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trainsweep.workloads import WORKLOADS  # noqa: E402

BATCH_SIZES = (32, 64, 128)


def session(
    name: str,
    seed: int,
    out: Path,
    *,
    workload: str = "mnist-cnn",
    gpu: bool = False,
    threads: int = 1,
    samples: int = 1920,
    dtype: str | None = None,
) -> None:
    """One packed job; its logs copied to ``out/<workload>-<cpu|gpu>[-<threads>t][-<dtype>]-<name>/logs``."""
    exp = f"{workload}-{'gpu' if gpu else 'cpu'}{f'-{threads}t' if threads != 1 else ''}"
    exp += f"-{dtype}-{name}" if dtype else f"-{name}"
    with tempfile.TemporaryDirectory(prefix="trainsweep-logs-") as tmp:
        base = Path(tmp)
        cfg = base / "input" / "config"
        cfg.mkdir(parents=True)
        hyper = {
            "workload": workload,
            "synthetic": "true",
            "synthetic-samples": str(samples),
            "epochs": "5",
            "batch-sizes": ",".join(map(str, BATCH_SIZES)),
            "run-names": ",".join(f"{exp}-{b}" for b in BATCH_SIZES),
            "mode": "full",
            "max-eval-batches": "4",
            "seed": str(seed),
        }
        if dtype:  # the setting of a `dtype` axis, which each cell's log records
            hyper["trainsweep-axes"] = json.dumps([{"dtype": dtype}] * len(BATCH_SIZES))
        (cfg / "hyperparameters.json").write_text(json.dumps(hyper))
        env = dict(
            os.environ, SAGEMAKER_BASE_DIR=str(base), TRAINING_JOB_NAME=exp, OMP_NUM_THREADS=str(threads)
        )
        if not gpu:
            env["CUDA_VISIBLE_DEVICES"] = ""
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
        subprocess.run([sys.executable, str(ROOT / "container" / "train.py")], env=env, check=True,
                       stdout=subprocess.DEVNULL)  # fmt: skip
        dest = out / exp / "logs"
        dest.mkdir(parents=True, exist_ok=True)
        for log in sorted((base / "output" / "data" / "logs").glob("*.log")):
            shutil.copyfile(log, dest / log.name)
            print(dest / log.name)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "data" / "container-logs")
    ap.add_argument("--sessions", default="a,b,c,d,e")
    ap.add_argument("--workload", default="mnist-cnn", choices=sorted(WORKLOADS))
    ap.add_argument("--gpu", action="store_true", help="train on this machine's GPUs")
    ap.add_argument("--threads", type=int, default=1, help="CPU threads of the worker (OMP_NUM_THREADS)")
    ap.add_argument("--samples", type=int, default=1920, help="synthetic training samples an epoch")
    ap.add_argument("--dtype", default=None, help="train every cell in this precision, logged as an axis")
    ap.add_argument("--seed-offset", type=int, default=0, help="the first session's seed")
    a = ap.parse_args()
    for i, name in enumerate(a.sessions.split(",")):
        options = {"workload": a.workload, "gpu": a.gpu, "threads": a.threads, "samples": a.samples}
        session(name, a.seed_offset + i, a.out, **options, dtype=a.dtype)


if __name__ == "__main__":
    main()
