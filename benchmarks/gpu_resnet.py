"""GPU figures of the training container: resnet50-cifar10, synthetic data, batch sizes 256-2048.

Prints, per batch size:
* samples/s of a plain PyTorch loop and of the container's instrumented loop (CUDA events, lazy
  resolution, an MLLOG and a legacy line per step), same model and data, alternated in the same run,
  and the instrumentation overhead (target <= 1 % of throughput);
* the early-stop prediction of the epoch time against the epoch-2 time of a full 2-epoch run of the
  real entry point (target within 3 %), and the share of an epoch's steps early-stop ran (target <= 10 %);
* once, a packed early-stop job of the entry point over several batch sizes, one of them too big for the
  device (``--packed``), whose OOM must be recorded as infeasible while the scan goes on;
* for every log the entry point wrote, what ``trainsweep.logs.parse`` makes of it (status, problems).

Run on a machine with an NVIDIA GPU: ``python benchmarks/gpu_resnet.py [--batch-sizes 256,512] [--out DIR]``.
Never part of CI. ``--smoke`` runs a tiny CPU version to check the script itself.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from trainsweep.logs import parse  # noqa: E402
from trainsweep.sagemaker_contract import Paths  # noqa: E402
from trainsweep.training.config import Cell, JobConfig  # noqa: E402
from trainsweep.training.runlog import RunLog  # noqa: E402
from trainsweep.training.worker import CellRun, Rank  # noqa: E402

EPOCH_RE = re.compile(r"^Epoch time: ([0-9.eE+-]+)s$", re.M)
STEP_RE = re.compile(r"^(\d+) step training time: ([0-9.eE+-]+)s$", re.M)


# the early-stopped epoch is unfinished by design: the parser flags its step count, nothing else
EXPECTED_EARLY_STOP_PROBLEMS = {"steps-per-epoch"}


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def release_device_memory() -> None:
    """Hand the allocator's cached blocks back, so the entry point's worker process gets the whole GPU."""
    gc.collect()  # CellRun <-> StepClock is a reference cycle
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def parse_check(path: Path, expected: set[str] = frozenset()) -> dict[str, object]:
    """What the parser makes of one log: status, dialect, problems (the expected ones apart)."""
    run = parse(path)
    codes = [p.code for p in run.problems]
    return {
        "log": path.name,
        "status": run.status,
        "dialect": run.dialect,
        "epochs": [e.steps for e in run.epochs],
        "problems": [p.to_dict() for p in run.problems if p.code not in expected],
        "expected_problems": sorted(set(codes) & set(expected)),
        "failure_reason": run.failure_reason,
    }


def _parse_line(checks: list[dict[str, object]]) -> str:
    bad = [f"{c['log']}: {[p['code'] for p in c['problems']]}" for c in checks if c["problems"]]  # type: ignore[union-attr]
    return "parser: " + ("no problems in " + ", ".join(f"{c['log']} ({c['status']})" for c in checks)
                         if not bad else "PROBLEMS " + "; ".join(bad))  # fmt: skip


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
        samples = sum(min(bs, data.samples - i * bs) for i in range(n))  # the last batch may be partial
        sp, si = samples / statistics.median(t_plain), samples / statistics.median(t_instr)
        return {
            "steps": n,
            "plain_samples_s": sp,
            "instrumented_samples_s": si,
            "overhead": 1 - si / sp,
            "plain_runs_s": t_plain,
            "instrumented_runs_s": t_instr,
        }


KEEP_LOGS: Path | None = None
"""``--keep-logs DIR``: copy every log the entry point wrote to DIR/<label>/."""


def keep_logs(base: Path, label: str) -> None:
    if KEEP_LOGS is None:
        return
    dest = KEEP_LOGS / label
    dest.mkdir(parents=True, exist_ok=True)
    for f in (base / "output" / "data" / "logs").glob("*.log"):
        shutil.copy(f, dest / f.name)


def entry_point(base: Path, hyper: dict[str, str]) -> tuple[int, str, float]:
    (base / "input" / "config").mkdir(parents=True, exist_ok=True)
    (base / "input" / "config" / "hyperparameters.json").write_text(json.dumps(hyper))
    pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, SAGEMAKER_BASE_DIR=str(base), PYTHONPATH=pythonpath)
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, str(ROOT / "container" / "train.py")], env=env, capture_output=True,
                       text=True, check=False)  # fmt: skip
    wall = time.perf_counter() - t0
    if p.returncode:
        print(p.stdout[-3000:], p.stderr[-3000:], file=sys.stderr)
    logs = sorted((base / "output" / "data" / "logs").glob("*.log"))
    return p.returncode, logs[0].read_text() if logs else "", wall


def early_stop_vs_full(bs: int, workload: str, extra: dict[str, str]) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        common = {"workload": workload, "epochs": "2", "batch-size": str(bs), "synthetic": "true", **extra}
        rc_f, full_log, wall_f = entry_point(Path(tmp) / "full", {**common, "run-names": f"full-{bs}"})
        rc_e, _es_log, wall_e = entry_point(Path(tmp) / "es", {**common, "mode": "early-stop",
                                                               "run-names": f"es-{bs}"})  # fmt: skip
        pred_file = Path(tmp) / "es" / "output" / "data" / "predictions" / f"es-{bs}.json"
        pred = json.loads(pred_file.read_text()) if pred_file.is_file() else None
        checks = [
            parse_check(Path(tmp) / "full" / "output" / "data" / "logs" / f"full-{bs}.log"),
            parse_check(Path(tmp) / "es" / "output" / "data" / "logs" / f"es-{bs}.log",
                        EXPECTED_EARLY_STOP_PROBLEMS),
        ]  # fmt: skip
        keep_logs(Path(tmp) / "full", str(bs))
        keep_logs(Path(tmp) / "es", str(bs))
    epochs = [float(x) for x in EPOCH_RE.findall(full_log)]
    steps = [int(n) for n, _ in STEP_RE.findall(full_log)]
    per_epoch = max(steps) if steps else None
    out: dict[str, object] = {"rc_full": rc_f, "rc_early_stop": rc_e, "full_epoch_s": epochs,
                              "wall_full_s": wall_f, "wall_early_stop_s": wall_e,
                              "parse": checks}  # fmt: skip
    if pred and len(epochs) >= 2 and per_epoch:
        actual = epochs[1]
        out.update(
            predicted_epoch_s=pred["epoch_s"],
            predicted_low_s=pred["epoch_low_s"],
            predicted_high_s=pred["epoch_high_s"],
            actual_epoch2_s=actual,
            error=pred["epoch_s"] / actual - 1,
            predicted_total_s=pred["total_s"],
            actual_total_s=sum(epochs),
            total_error=pred["total_s"] / sum(epochs) - 1,
            steps_watched=pred["steps_watched"],
            steps_per_epoch=per_epoch,
            share_of_epoch=pred["steps_watched"] / per_epoch,
            stop_reason=pred["stop_reason"],
            covered=pred["epoch_low_s"] <= actual <= pred["epoch_high_s"],
        )
    return out


def packed(sizes: list[int], workload: str, extra: dict[str, str]) -> dict[str, object]:
    """One packed early-stop job of the entry point over ``sizes``; the job summary and every log parsed."""
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "packed"
        names = [f"packed-{bs}" for bs in sizes]
        hyper = {"workload": workload, "epochs": "2", "mode": "early-stop", "synthetic": "true",
                 "batch-sizes": ",".join(map(str, sizes)), "run-names": ",".join(names), **extra}  # fmt: skip
        rc, _log, wall = entry_point(base, hyper)
        job_file = base / "output" / "data" / "job.json"
        job = json.loads(job_file.read_text()) if job_file.is_file() else {}
        failure_file = base / "output" / "failure"
        failure = failure_file.read_text().strip() if failure_file.is_file() else None
        checks = []
        for name, cell in zip(names, job.get("cells", []), strict=False):
            # a batch size that does not fit is a failed run by design: its log says so
            expected = EXPECTED_EARLY_STOP_PROBLEMS if cell["status"] == "ok" else {"failed"}
            checks.append(parse_check(base / "output" / "data" / "logs" / f"{name}.log", expected))
        keep_logs(base, "packed")
    return {
        "rc": rc,
        "wall_s": wall,
        "failure": failure,
        "cells": [{k: c[k] for k in ("batch_size", "status", "reason")} for c in job.get("cells", [])],
        "parse": checks,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch-sizes", default="256,512,1024,2048")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=0, help="steps per overhead run (0: one epoch)")
    ap.add_argument("--min-steps", default="", help="early-stop-min-steps for the early-stop runs")
    ap.add_argument(
        "--packed", default="256,8192,2048", help="batch sizes of one packed early-stop job ('': none)"
    )
    ap.add_argument("--skip-overhead", action="store_true", help="only the entry-point runs")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--keep-logs", type=Path, default=None, help="copy the entry point's logs here")
    ap.add_argument("--smoke", action="store_true", help="tiny CPU run that checks the script")
    a = ap.parse_args()
    global KEEP_LOGS
    KEEP_LOGS = a.keep_logs
    workload = "resnet50-cifar10"
    extra: dict[str, str] = {}
    if a.min_steps:
        extra["early-stop-min-steps"] = a.min_steps
    if a.smoke:
        workload, a.repeats, a.steps, a.packed = "mnist-cnn", 1, 3, "64,128"
        extra.update({"max-steps-per-epoch": "14", "max-eval-batches": "3", "early-stop-min-steps": "4",
                      "validation-batches": "3"})  # fmt: skip
    dev = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    command = shlex.join(["python", "benchmarks/gpu_resnet.py", *sys.argv[1:]])
    print(f"device: {dev}; torch {torch.__version__}; python {sys.version.split()[0]}; {date}", flush=True)
    print(f"command: {command}", flush=True)
    results: dict[str, object] = {"device": dev, "torch": torch.__version__, "date": date, "command": command,
                                  "batch_sizes": {}}  # fmt: skip

    def save() -> None:
        if a.out:
            a.out.mkdir(parents=True, exist_ok=True)
            (a.out / "gpu_resnet.json").write_text(json.dumps(results, indent=2))

    per_bs: dict[int, object] = results["batch_sizes"]  # type: ignore[assignment]
    for bs in [int(b) for b in a.batch_sizes.split(",") if b.strip()]:
        t0 = time.perf_counter()
        ov = None
        if not a.skip_overhead:
            try:
                ov = overhead(bs, a.repeats, a.steps or None, workload)
            except torch.OutOfMemoryError as e:
                print(f"bs {bs:5d}: overhead runs out of memory: {str(e).splitlines()[0]}", flush=True)
        release_device_memory()
        es = early_stop_vs_full(bs, workload, extra)
        per_bs[bs] = {"overhead": ov, "early_stop": es, "seconds": time.perf_counter() - t0}
        line = f"bs {bs:5d}: "
        if ov is not None:
            line += (f"plain {ov['plain_samples_s']:9.0f} samples/s, instrumented "
                     f"{ov['instrumented_samples_s']:9.0f} samples/s, "
                     f"overhead {100 * ov['overhead']:+.2f} % "
                     f"({ov['steps']} steps x {a.repeats}); ")  # fmt: skip
        if "error" in es:
            line += (f"early-stop epoch {es['predicted_epoch_s']:.3f} s vs full-run epoch 2 "
                     f"{es['actual_epoch2_s']:.3f} s: error {100 * es['error']:+.2f} %, interval covers: "
                     f"{es['covered']}, watched {es['steps_watched']}/{es['steps_per_epoch']} steps "
                     f"({100 * es['share_of_epoch']:.1f} % of an epoch, {es['stop_reason']}); "
                     f"full-run epochs {', '.join(f'{x:.3f}' for x in es['full_epoch_s'])} s, "
                     f"2-epoch total predicted {es['predicted_total_s']:.2f} s vs "
                     f"{es['actual_total_s']:.2f} s "
                     f"({100 * es['total_error']:+.1f} %)")  # type: ignore[union-attr]  # fmt: skip
        else:
            line += f"early-stop comparison failed: {es}"
        print(line, flush=True)
        print(f"bs {bs:5d}: {_parse_line(es['parse'])}; {time.perf_counter() - t0:.0f} s", flush=True)  # type: ignore[arg-type]
        save()
    if a.packed:
        sizes = [int(b) for b in a.packed.split(",") if b.strip()]
        pk = packed(sizes, workload, extra)
        results["packed"] = pk
        cells = ", ".join(f"{c['batch_size']}: {c['status']}" for c in pk["cells"])  # type: ignore[union-attr]
        print(f"packed early-stop job {sizes}: exit {pk['rc']}, {pk['wall_s']:.1f} s, cells {cells}; "
              f"failure file: {pk['failure']!r}", flush=True)  # fmt: skip
        print(f"packed: {_parse_line(pk['parse'])}", flush=True)  # type: ignore[arg-type]
        save()


if __name__ == "__main__":
    main()
