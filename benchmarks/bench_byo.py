"""Benchmark: a user's own script under trainsweep on the CPU, against the plain script in the same run.

The three goals of bring-your-own-code, each with its baseline:

1. **Instrumentation overhead <= 1 %** of the plain run. ``examples/byo-pytorch/train.py`` runs plainly
   (``python train.py ...``) and under ``python -m trainsweep.instrument.bootstrap train.py ...`` (mode
   full), interleaved A B A B. Training time is told apart from process start-up: the script prints a
   line at each epoch end, which this benchmark timestamps as it arrives (stdout polled every few ms, the
   same way for both), so epochs 2..E are timed to the millisecond whatever the imports cost; the
   script's own printed epoch times (0.1 s resolution) are shown beside them. Start-up (imports, hooks)
   and the tail after the last epoch (the instrumentation's totals) are reported separately.
2. **Early stop predicts the epoch time within 3 %, watching at most 2 epochs.** Per batch size the
   example runs in early-stop mode and in full mode, interleaved, with what
   ``examples/byo-pytorch/sweep-early-stop.yaml`` gives the script (its hyperparameters, its early-stop
   rule, its epochs: planned and parsed by the code a sweep runs); the
   prediction (read back with ``trainsweep.logs.parse``) is compared with the full run's mean epoch
   time over epochs 2..E, and its total with the full run's fit time. Median |error| over repetitions.
   Beside it, the full runs' own spread (median |one full run / their median - 1|): how far one run of
   the same script lands from another on this machine, the floor under any prediction from a run.
3. **A local early-stop sweep of 3 batch sizes finishes in < 2 minutes.** The real CLI,
   ``trainsweep run examples/byo-pytorch/sweep-early-stop.yaml --local --no-watch``, timed as a process;
   baseline: the full-mode per-cell sweep ``examples/byo-pytorch/sweep.yaml``.

    .venv/bin/python benchmarks/bench_byo.py [--quick] [--json PATH] [--threads N]

Exit status 1 when a goal is missed. The machine should be otherwise idle: the CPU load of other
processes is sampled before each part and printed; figures taken under load say so.
"""

from __future__ import annotations

import argparse
import datetime
import fcntl
import itertools
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trainsweep import __version__, layout  # noqa: E402
from trainsweep.logs import parse  # noqa: E402
from trainsweep.predict import replay  # noqa: E402
from trainsweep.spec import plan_sweep  # noqa: E402
from trainsweep.training.contract import INSTRUMENT_ENV, InstrumentConfig, user_args  # noqa: E402
from trainsweep.training.launch import ScriptConfig, parse_script_config  # noqa: E402

RESULT_VERSION = 1
"""Version of the ``--json`` layout; a reader rejects versions it does not know."""
EXAMPLE = ROOT / "examples" / "byo-pytorch"
SCRIPT = EXAMPLE / "train.py"
EARLY_STOP_SPEC = EXAMPLE / "sweep-early-stop.yaml"
OVERHEAD_TARGET = 0.01
PREDICTION_TARGET = 0.03
MAX_EPOCHS_WATCHED = 2.0
SWEEP_TARGET_S = 120.0
POLL_S = 0.005
EPOCH_LINE = re.compile(rb"^epoch (\d+): .*, ([0-9.]+)s$")
BUSY_WARNING = 15.0  # % of all cores used by other processes before a part starts


# ---- processes -----------------------------------------------------------------------------------------


@dataclass
class Timed:
    """One process: its wall time and when each of the script's epoch lines arrived (from its start)."""

    wall_s: float
    returncode: int
    epoch_at: dict[int, float] = field(default_factory=dict)
    epoch_cpu: dict[int, float] = field(default_factory=dict)
    printed_s: dict[int, float] = field(default_factory=dict)
    stderr: str = ""


def run_timed(command: list[str], env: dict[str, str], cwd: Path) -> Timed:
    """Run ``command``; stdout is polled every ``POLL_S`` (a consumer as CloudWatch is, equal for A and B)."""
    err = cwd / "stderr.txt"
    with err.open("wb") as stderr:
        t0 = time.perf_counter()
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, env=env, cwd=cwd)
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
        out = Timed(0.0, 0)
        pending = b""
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                chunk = None
            now = time.perf_counter() - t0
            if chunk == b"":
                break
            if chunk:
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    m = EPOCH_LINE.match(line)
                    if m:
                        out.epoch_at[int(m[1])] = now
                        out.epoch_cpu[int(m[1])] = cpu_seconds(proc.pid)
                        out.printed_s[int(m[1])] = float(m[2])
            else:
                time.sleep(POLL_S)
        out.returncode = proc.wait()
        out.wall_s = time.perf_counter() - t0
    out.stderr = err.read_text(errors="replace")[-2000:]
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a running process, all its threads (Linux ``/proc``; clock ticks)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child_env(threads: int | None, instrument: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != INSTRUMENT_ENV}
    env["PYTHONUNBUFFERED"] = "1"  # the epoch lines arrive when printed, also from the plain script
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    if instrument is not None:
        env[INSTRUMENT_ENV] = str(instrument)
    return env


def example_job() -> ScriptConfig:
    """The example's early-stop spec as its job reads it: the script's hyperparameters, the rule, the epochs.

    Planned and parsed by the code a sweep runs (``plan_sweep``, then the container's
    ``parse_script_config``), so the benchmark passes the script what ``trainsweep run`` passes it.
    """
    return parse_script_config(plan_sweep(EARLY_STOP_SPEC).jobs[0].hyperparameters)


JOB = example_job()


def instrument_config(folder: Path, *, run: str, batch_size: int, epochs: int, mode: str) -> Path:
    """A cell's InstrumentConfig, as the container's launcher writes it (the example spec's rule)."""
    cfg = InstrumentConfig(
        run_name=run,
        batch_size=batch_size,
        epochs=epochs,
        log_file=str(folder / f"{run}.log"),
        status_file=str(folder / "cells" / f"{run}.json"),
        prediction_file=str(folder / "predictions" / f"{run}.json"),
        mode=mode,
        workload="train.py",
        instance_type="local",
        rule=dict(JOB.rule.__dict__),
    )
    path = folder / f"{run}.instrument.json"
    path.write_text(cfg.to_json())
    return path


def script_command(batch_size: int, epochs: int, folder: Path, *, instrumented: bool) -> list[str]:
    prefix = [sys.executable, "-m", "trainsweep.instrument.bootstrap"] if instrumented else [sys.executable]
    hps = {**JOB.hyperparameters, JOB.batch_size_arg: batch_size, JOB.epochs_arg: epochs}
    return [*prefix, str(SCRIPT), *user_args(hps), "--model-dir", str(folder / "model")]


# ---- the machine ---------------------------------------------------------------------------------------


def others_busy_percent(seconds: float = 2.0) -> float:
    """CPU share (% of all cores) busy or stolen by the host during ``seconds`` while this benchmark runs
    nothing: other processes here, or other machines on the same host (steal)."""
    import psutil

    t = psutil.cpu_times_percent(interval=seconds)
    return 100.0 - t.idle - t.iowait


def machine_noise(blocks: int = 40) -> dict[str, float]:
    """Spread of a fixed CPU workload (one thread, ~20 ms blocks of matrix products): the noise floor that
    no figure below can resolve better than."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        a = torch.randn(256, 256, generator=torch.Generator().manual_seed(0))
        times = []
        for _ in range(blocks):
            t0 = time.perf_counter()
            for _ in range(40):
                a @ a
            times.append(time.perf_counter() - t0)
    finally:
        torch.set_num_threads(threads)
    mean = statistics.mean(times)
    return {"cv": statistics.stdev(times) / mean, "max_over_min": max(times) / min(times), "block_s": mean}


def busy_note(percent: float) -> str:
    warn = "  <- other processes are busy: figures may be disturbed" if percent > BUSY_WARNING else ""
    return f"(CPU busy before: {percent:.0f} %, load average {os.getloadavg()[0]:.2f}){warn}"


# ---- goal 1: overhead ----------------------------------------------------------------------------------


def per_epoch_s(t: Timed, epochs: int) -> float:
    """Mean time of epochs 2..E from the arrival of the epoch lines (start-up and epoch 1 left out)."""
    return (t.epoch_at[epochs] - t.epoch_at[1]) / (epochs - 1)


def best_epoch_s(t: Timed, epochs: int) -> float:
    """The fastest of epochs 2..E (noise only ever adds time)."""
    return min(t.epoch_at[e] - t.epoch_at[e - 1] for e in range(2, epochs + 1))


def per_epoch_cpu_s(t: Timed, epochs: int) -> float:
    """CPU seconds (all threads) per epoch over epochs 2..E: the work, whatever else the machine runs."""
    return (t.epoch_cpu[epochs] - t.epoch_cpu[1]) / (epochs - 1)


def startup_s(t: Timed) -> float:
    """Process start to the start of epoch 1: imports, data, hooks (the script's own epoch-1 time off)."""
    return t.epoch_at[1] - t.printed_s[1]


def overhead(reps: int, epochs: int, batch_size: int, threads: int | None) -> dict[str, Any]:
    plain: list[Timed] = []
    inst: list[Timed] = []
    epoch_steps = 0
    with tempfile.TemporaryDirectory(prefix="bench-byo-overhead-") as tmp:
        folder = Path(tmp)
        for i in range(reps):
            for instrumented in (i % 2 == 1, i % 2 == 0):  # A B, B A, ...: neither side always goes first
                run = f"overhead-{i}-{'b' if instrumented else 'a'}"
                cfg = instrument_config(folder, run=run, batch_size=batch_size, epochs=epochs, mode="full")
                env = child_env(threads, cfg if instrumented else None)
                t = run_timed(
                    script_command(batch_size, epochs, folder, instrumented=instrumented), env, folder
                )
                if t.returncode != 0 or len(t.epoch_at) != epochs:
                    raise RuntimeError(f"{run} failed ({t.returncode}): {t.stderr}")
                (inst if instrumented else plain).append(t)
                if instrumented:
                    check = parse(folder / f"{run}.log")
                    if check.status != "complete" or len(check.epochs) != epochs:
                        raise RuntimeError(f"{run}: the instrumentation's log is {check.status}")
                    epoch_steps = len(check.epochs[-1].step_s)

    def med(values: list[float]) -> float:
        return statistics.median(values)

    a_epoch = [per_epoch_s(t, epochs) for t in plain]
    b_epoch = [per_epoch_s(t, epochs) for t in inst]
    pairs = [b / a for a, b in zip(a_epoch, b_epoch, strict=True)]
    a_a = [abs(b / a - 1) for a, b in itertools.pairwise(a_epoch)]
    a_best = min(best_epoch_s(t, epochs) for t in plain)
    b_best = min(best_epoch_s(t, epochs) for t in inst)
    a_cpu = [per_epoch_cpu_s(t, epochs) for t in plain]
    b_cpu = [per_epoch_cpu_s(t, epochs) for t in inst]
    cpu_pairs = [b / a for a, b in zip(a_cpu, b_cpu, strict=True)]
    a_printed = [statistics.mean(t.printed_s[e] for e in range(2, epochs + 1)) for t in plain]
    b_printed = [statistics.mean(t.printed_s[e] for e in range(2, epochs + 1)) for t in inst]
    a_start, b_start = [startup_s(t) for t in plain], [startup_s(t) for t in inst]
    a_tail = [t.wall_s - t.epoch_at[epochs] for t in plain]
    b_tail = [t.wall_s - t.epoch_at[epochs] for t in inst]
    ratio = med(b_epoch) / med(a_epoch)
    return {
        "batch_size": batch_size,
        "epochs": epochs,
        "repetitions": reps,
        "plain_epoch_s": a_epoch,
        "instrumented_epoch_s": b_epoch,
        "plain_epoch_median_s": med(a_epoch),
        "instrumented_epoch_median_s": med(b_epoch),
        "ratio_of_medians": ratio,
        "paired_ratio_median": med(pairs),
        "paired_ratios": pairs,
        "noise": (statistics.quantiles(pairs, n=4)[2] - statistics.quantiles(pairs, n=4)[0]) / 2,
        "plain_vs_plain_median_abs": med(a_a),
        "overhead": med(pairs) - 1,
        "plain_best_epoch_s": a_best,
        "instrumented_best_epoch_s": b_best,
        "plain_epoch_cpu_s": a_cpu,
        "instrumented_epoch_cpu_s": b_cpu,
        "plain_epoch_cpu_median_s": med(a_cpu),
        "instrumented_epoch_cpu_median_s": med(b_cpu),
        "cpu_overhead": med(cpu_pairs) - 1,
        "printed_plain_epoch_median_s": med(a_printed),
        "printed_instrumented_epoch_median_s": med(b_printed),
        "plain_wall_median_s": med([t.wall_s for t in plain]),
        "instrumented_wall_median_s": med([t.wall_s for t in inst]),
        "plain_startup_median_s": med(a_start),
        "instrumented_startup_median_s": med(b_start),
        "plain_tail_median_s": med(a_tail),
        "instrumented_tail_median_s": med(b_tail),
        "step_cost": step_cost(threads),
        "epoch_steps": epoch_steps,
        "met": med(pairs) - 1 <= OVERHEAD_TARGET,
    }


STEP_COST_CHILD = """
import json, sys, tempfile, time
from pathlib import Path
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from trainsweep.instrument import auto
from trainsweep.instrument.session import activate, open_session
from trainsweep.training import contract

torch.manual_seed(0)
torch.set_num_threads(1)
data = TensorDataset(torch.randn(4096, 4), torch.randint(0, 2, (4096,)))
steps = 3 * 4096 // 8

def loop():  # a model too small to cost anything: what is left is the loop's Python and the hooks'
    model, loss = nn.Linear(4, 2), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(3):
        for x, y in DataLoader(data, batch_size=8, shuffle=True):
            opt.zero_grad()
            loss(model(x), y).backward()
            opt.step()

def cpu_per_step():
    t0 = time.process_time()
    loop()
    return (time.process_time() - t0) / steps

plain, instrumented, logged = [], [], 0
with tempfile.TemporaryDirectory() as tmp:
    for k in range(5):  # interleaved, plain first then instrumented first, so neither gets the quiet spells
        for on in (k % 2 == 1, k % 2 == 0):
            if not on:
                plain.append(cpu_per_step())
                continue
            cfg = contract.InstrumentConfig(
                run_name="cost-local-cpu-8-e0", batch_size=8, epochs=3, log_file=f"{tmp}/cost-{k}.log",
                status_file=f"{tmp}/status.json", prediction_file=f"{tmp}/prediction.json",
            )
            session = open_session(cfg, workload="cost.py", rank=0)
            installed = auto.install(session)
            activate(session)
            instrumented.append(cpu_per_step())
            installed.remove()
            activate(None)
            session.writer.log.close()
            text = Path(cfg.log_file).read_text()
            logged += sum(1 for line in text.splitlines() if "step training time" in line)
print(json.dumps({"plain_s": plain, "instrumented_s": instrumented, "steps": steps, "logged": logged}))
"""


def step_cost(threads: int | None) -> dict[str, Any]:
    """In-process CPU time per step of a loop with almost no compute, plain and instrumented (best of 5
    each, interleaved, one child process): the instrumentation's own cost per step, free of the
    epoch-to-epoch noise of a real model. With stdout a pipe and PYTHONUNBUFFERED as SageMaker's images
    set it."""
    env = {**child_env(threads), "PYTHONUNBUFFERED": "1"}
    out = subprocess.run(
        [sys.executable, "-c", STEP_COST_CHILD], env=env, capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"the step-cost child failed: {out.stderr[-2000:]}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    if r["logged"] != 5 * r["steps"]:  # every step of the 5 instrumented loops
        raise RuntimeError(f"the step-cost child logged {r['logged']} steps of {5 * r['steps']}")
    plain, inst = min(r["plain_s"]), min(r["instrumented_s"])
    return {"plain_step_us": 1e6 * plain, "instrumented_step_us": 1e6 * inst, "cost_us": 1e6 * (inst - plain)}


def print_overhead(o: dict[str, Any]) -> None:
    e = o["epochs"]
    print(
        f"  {o['repetitions']} x plain / instrumented (A B interleaved), batch size {o['batch_size']}, "
        f"{e} epochs; medians:"
    )
    print(
        f"  epochs 2..{e}, from the epoch lines:  plain {o['plain_epoch_median_s']:.3f} s   instrumented "
        f"{o['instrumented_epoch_median_s']:.3f} s   ratio {o['ratio_of_medians']:.4f}"
    )
    best_a, best_b = o["plain_best_epoch_s"], o["instrumented_best_epoch_s"]
    print(
        f"  fastest single epoch of all runs:   plain {best_a:.3f} s   instrumented {best_b:.3f} s   "
        f"ratio {best_b / best_a:.4f}"
    )
    print(
        f"  CPU time per epoch 2..{e} (/proc):    plain {o['plain_epoch_cpu_median_s']:.3f} s   instrumented "
        f"{o['instrumented_epoch_cpu_median_s']:.3f} s   overhead {100 * o['cpu_overhead']:+.2f} %"
    )
    print(
        f"  the same, the script's own print:   plain {o['printed_plain_epoch_median_s']:.3f} s   "
        f"instrumented {o['printed_instrumented_epoch_median_s']:.3f} s   (0.1 s resolution)"
    )
    print(
        f"  start-up to epoch 1 (imports, hooks): plain {o['plain_startup_median_s']:.2f} s   instrumented "
        f"{o['instrumented_startup_median_s']:.2f} s   (+{o['instrumented_startup_median_s'] - o['plain_startup_median_s']:.2f} s, once per process)"  # noqa: E501
    )
    print(
        f"  after the last epoch line:          plain {o['plain_tail_median_s']:.2f} s   instrumented "
        f"{o['instrumented_tail_median_s']:.2f} s"
    )
    print(
        f"  whole process (wall):               plain {o['plain_wall_median_s']:.2f} s   instrumented "
        f"{o['instrumented_wall_median_s']:.2f} s"
    )
    c = o["step_cost"]
    steps = o["epoch_steps"]
    print(
        f"  in process, a loop with no compute (CPU time per step): plain {c['plain_step_us']:.1f} us   "
        f"instrumented {c['instrumented_step_us']:.1f} us: {c['cost_us']:+.1f} us per step; "
        f"x {steps} steps of this epoch = "
        f"{100 * c['cost_us'] * 1e-6 * steps / o['plain_epoch_median_s']:+.2f} %"
    )
    paired = " ".join(f"{100 * (x - 1):+.1f}" for x in o["paired_ratios"])
    print(
        f"  paired differences instrumented / plain: {paired} %; plain vs the plain run before: "
        f"median |diff| {100 * o['plain_vs_plain_median_abs']:.1f} %"
    )
    print(
        f"  per-epoch overhead (median of paired ratios): {100 * o['overhead']:+.2f} %  "
        f"(goal <= {100 * OVERHEAD_TARGET:.0f} %): {'met' if o['met'] else 'MISSED'}"
    )
    if o["noise"] > OVERHEAD_TARGET:
        print(
            f"  caution: the paired differences spread {100 * o['noise']:.1f} % (half their interquartile "
            "range), more than the goal: the verdict is within this machine's noise"
        )


# ---- goal 2: early stop vs the full run -----------------------------------------------------------------


def run_logged(folder: Path, run: str, batch_size: int, epochs: int, mode: str, threads: int | None) -> Any:
    """The example under the instrumentation in ``mode``; returns the parsed log."""
    cfg = instrument_config(folder, run=run, batch_size=batch_size, epochs=epochs, mode=mode)
    with (folder / f"{run}.stdout").open("wb") as out:
        proc = subprocess.run(
            script_command(batch_size, epochs, folder, instrumented=True),
            stdout=out,
            stderr=subprocess.STDOUT,
            env=child_env(threads, cfg),
            cwd=folder,
            check=False,
        )
    if proc.returncode != 0:
        tail = (folder / f"{run}.stdout").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"{run} failed ({proc.returncode}): {tail}")
    return parse(folder / f"{run}.log")


def early_stop(
    batch_sizes: list[int], reps: int, epochs: int, threads: int | None, progress: Callable[[str], None]
) -> dict[str, Any]:
    out: dict[str, Any] = {"epochs": epochs, "repetitions": reps, "batch_sizes": {}}
    with tempfile.TemporaryDirectory(prefix="bench-byo-early-stop-") as tmp:
        folder = Path(tmp)
        for bs in batch_sizes:
            rows = []
            for i in range(reps):
                order = ("early-stop", "full") if i % 2 == 0 else ("full", "early-stop")
                runs = {
                    mode: run_logged(folder, f"es-{bs}-{i}-{mode}", bs, epochs, mode, threads)
                    for mode in order
                }
                es, full = runs["early-stop"], runs["full"]
                pred = es.prediction
                if pred is None:
                    raise RuntimeError(
                        f"batch size {bs}: no prediction in the early-stop log ({es.problems})"
                    )
                measured = [e.epoch_s for e in full.epochs[1:] if e.epoch_s is not None]
                if len(full.epochs) != epochs or len(measured) != epochs - 1:
                    raise RuntimeError(f"batch size {bs}: the full run logged {len(full.epochs)} epochs")
                measured_epoch = statistics.mean(measured)
                # the same rule replayed on the full run's own first epochs, against its later ones: the
                # prediction's error without the difference between two processes of the same script
                same = replay(full, JOB.rule)
                if same.predicted_epoch_s is None or not same.actual_epoch_s:
                    raise RuntimeError(f"batch size {bs}: the rule could not be replayed on the full run")
                measured_total = full.fit_s if full.fit_s is not None else sum(e.epoch_s for e in full.epochs)
                rows.append(
                    {
                        "predicted_epoch_s": pred["epoch_s"],
                        "measured_epoch_s": measured_epoch,
                        "epoch_error": pred["epoch_s"] / measured_epoch - 1,
                        "measured_epochs_s": measured,
                        "predicted_total_s": pred["total_s"],
                        "measured_total_s": measured_total,
                        "total_error": pred["total_s"] / measured_total - 1,
                        "steps_watched": pred["steps_watched"],
                        "steps_per_epoch": pred["steps_per_epoch"],
                        "epochs_watched": pred["steps_watched"] / pred["steps_per_epoch"],
                        "epochs_in_log": len(es.epochs),
                        "stop_reason": pred["stop_reason"],
                        "covered": pred["epoch_low_s"] <= measured_epoch <= pred["epoch_high_s"],
                        "same_run_epoch_error": same.predicted_epoch_s / same.actual_epoch_s - 1,
                    }
                )
                progress(
                    f"    bs {bs} rep {i + 1}: predicted {pred['epoch_s']:.3f} s after "
                    f"{pred['steps_watched']} steps ({pred['stop_reason']}); full run's epochs 2..{epochs}: "
                    f"{' '.join(f'{x:.3f}' for x in measured)} s"
                )
            med_err = statistics.median(abs(r["epoch_error"]) for r in rows)
            watched = max(r["epochs_watched"] for r in rows)
            full_med = statistics.median(r["measured_epoch_s"] for r in rows)
            out["batch_sizes"][bs] = {
                "runs": rows,
                "median_abs_epoch_error": med_err,
                # how far one full run's epoch time is from another's: the floor under any prediction
                "full_run_spread": statistics.median(abs(r["measured_epoch_s"] / full_med - 1) for r in rows),
                "median_abs_total_error": statistics.median(abs(r["total_error"]) for r in rows),
                "median_abs_same_run_error": statistics.median(abs(r["same_run_epoch_error"]) for r in rows),
                "max_epochs_watched": watched,
                "met": med_err <= PREDICTION_TARGET and watched <= MAX_EPOCHS_WATCHED,
            }
    out["met"] = all(v["met"] for v in out["batch_sizes"].values())
    return out


def reasons(runs: list[dict[str, Any]]) -> str:
    """``precision 2, epochs 1``: why the early-stop runs stopped (``epochs``: they never did)."""
    counts: dict[str, int] = {}
    for r in runs:
        counts[r["stop_reason"]] = counts.get(r["stop_reason"], 0) + 1
    return ", ".join(f"{k} {n}" for k, n in sorted(counts.items()))


def print_early_stop(r: dict[str, Any]) -> None:
    print(
        f"  per batch size, {r['repetitions']} x early-stop / full (interleaved), {r['epochs']} epochs, "
        "the example spec's rule; medians:"
    )
    print(
        "     bs  predicted  measured 2..E  |err|    total pred / meas   |err|   steps watched   epochs"
        " (max)  full runs' spread  same-run |err|  stopped by"
    )
    for bs, v in r["batch_sizes"].items():
        runs = v["runs"]
        med: Callable[[str], float] = lambda k, runs=runs: statistics.median(x[k] for x in runs)  # noqa: E731
        print(
            f"  {bs:5d}  {med('predicted_epoch_s'):8.3f} s  {med('measured_epoch_s'):10.3f} s  "
            f"{100 * v['median_abs_epoch_error']:5.2f} %  {med('predicted_total_s'):7.2f} / "
            f"{med('measured_total_s'):6.2f} s  {100 * v['median_abs_total_error']:5.2f} %  "
            f"{int(med('steps_watched')):5d} / {runs[0]['steps_per_epoch']:3d}  "
            f"{med('epochs_watched'):8.2f} ({v['max_epochs_watched']:.2f})  "
            f"{100 * v['full_run_spread']:14.2f} %  {100 * v['median_abs_same_run_error']:11.2f} %  "
            f"{reasons(runs)}"
        )
    print(
        "  same-run |err|: the rule replayed on each full run's first two epochs against its later epochs "
        "(trainsweep.predict.replay, as predict-eval scores logs): the prediction without the difference "
        "between two processes"
    )
    worst = max(v["median_abs_epoch_error"] for v in r["batch_sizes"].values())
    watched = max(v["max_epochs_watched"] for v in r["batch_sizes"].values())
    print(
        f"  worst median |error| {100 * worst:.2f} % (goal <= {100 * PREDICTION_TARGET:.0f} %), at most "
        f"{watched:.2f} epochs watched (goal <= {MAX_EPOCHS_WATCHED:.0f}): {'met' if r['met'] else 'MISSED'}"
    )


# ---- goal 3: the local sweep ---------------------------------------------------------------------------


def cli_sweep(spec: Path) -> dict[str, Any]:
    """``trainsweep run SPEC --local --no-watch`` as a process; wall time and the cells' statuses."""
    cli = Path(sys.executable).parent / "trainsweep"
    with tempfile.TemporaryDirectory(prefix="bench-byo-sweep-") as tmp:
        command = [str(cli), "run", str(spec), "--local", "--no-watch", "--out", tmp]
        t0 = time.perf_counter()
        proc = subprocess.run(command, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
        folders = [d for d in Path(tmp).iterdir() if d.is_dir()]
        cells: dict[str, str] = {}
        if proc.returncode == 0 and len(folders) == 1:
            jobs = json.loads((folders[0] / layout.JOBS_JSON).read_text())
            cells = {str(c["batch_size"]): c["status"] for c in jobs["cells"]}
    ok = proc.returncode == 0 and bool(cells) and all(s == "completed" for s in cells.values())
    return {
        "spec": str(spec.relative_to(ROOT)),
        "wall_s": wall,
        "returncode": proc.returncode,
        "cells": cells,
        "ok": ok,
        "output_tail": "" if ok else (proc.stdout + proc.stderr)[-2000:],
    }


def sweeps(reps: int, progress: Callable[[str], None]) -> dict[str, Any]:
    early: list[dict[str, Any]] = []
    full: list[dict[str, Any]] = []
    for i in range(reps):
        order = ("early-stop", "full") if i % 2 == 0 else ("full", "early-stop")
        for kind in order:
            spec = EXAMPLE / ("sweep-early-stop.yaml" if kind == "early-stop" else "sweep.yaml")
            r = cli_sweep(spec)
            (early if kind == "early-stop" else full).append(r)
            progress(f"    {kind} sweep {i + 1}: {r['wall_s']:.1f} s, cells {r['cells']}")
            if not r["ok"]:
                raise RuntimeError(f"{r['spec']} did not complete: {r['output_tail']}")
    es_s = statistics.median(r["wall_s"] for r in early)
    full_s = statistics.median(r["wall_s"] for r in full)
    return {
        "repetitions": reps,
        "early_stop": early,
        "full": full,
        "early_stop_wall_median_s": es_s,
        "full_wall_median_s": full_s,
        "ratio": es_s / full_s,
        "met": es_s < SWEEP_TARGET_S,
    }


def print_sweeps(r: dict[str, Any]) -> None:
    es, full = r["early_stop"][0], r["full"][0]
    print(f"  {r['repetitions']} x each, interleaved; medians of the whole CLI process:")
    print(
        f"  {es['spec']} (early stop, packed, {len(es['cells'])} batch sizes): "
        f"{r['early_stop_wall_median_s']:6.1f} s"
    )
    print(f"  {full['spec']} (full, per cell, baseline):                {r['full_wall_median_s']:6.1f} s")
    print(
        f"  ratio early stop / full: {r['ratio']:.2f}; goal < {SWEEP_TARGET_S:.0f} s: "
        f"{'met' if r['met'] else 'MISSED'}"
    )


# ---- main ----------------------------------------------------------------------------------------------


def metadata(threads: int | None) -> dict[str, Any]:
    import torch

    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": shlex.join(["python", "benchmarks/bench_byo.py", *sys.argv[1:]]),
        "machine": platform.node(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": threads or torch.get_num_threads(),
        "trainsweep": __version__,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions (a check of the script)")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here (versioned JSON)")
    ap.add_argument(
        "--threads", type=int, default=None, help="OMP_NUM_THREADS of goals 1-2's runs (default: torch's)"
    )
    ap.add_argument("--only", choices=["overhead", "early-stop", "sweep"], action="append", default=None)
    a = ap.parse_args()
    parts = a.only or ["overhead", "early-stop", "sweep"]
    meta = metadata(a.threads)
    print(
        f"{meta['date']}; {meta['cpus']} CPUs, torch {meta['torch']} ({meta['torch_threads']} threads), "
        f"python {meta['python']}; {meta['command']}",
        flush=True,
    )
    results: dict[str, Any] = {"version": RESULT_VERSION, "benchmark": "bench_byo", "metadata": meta}
    noise = machine_noise()
    results["machine_noise"] = noise
    print(
        f"machine noise floor: a fixed 1-thread workload of {1000 * noise['block_s']:.0f} ms blocks varies "
        f"by {100 * noise['cv']:.1f} % (CV), slowest / fastest {noise['max_over_min']:.2f}",
        flush=True,
    )

    def progress(line: str) -> None:
        print(line, flush=True)

    reps, epochs = (5, 4) if a.quick else (10, 6)
    goals: list[tuple[str, str, Callable[[], dict[str, Any]], Callable[[dict[str, Any]], None]]] = [
        ("overhead", "instrumentation overhead of examples/byo-pytorch/train.py",
         lambda: overhead(reps, epochs, 64, a.threads), print_overhead),
        ("early-stop", "early-stop prediction vs the full run",
         lambda: early_stop([32, 64, 128], 1 if a.quick else 3, 4 if a.quick else JOB.epochs, a.threads,
                            progress), print_early_stop),
        ("sweep", "local sweeps through the CLI",
         lambda: sweeps(1 if a.quick else 2, progress), print_sweeps),
    ]  # fmt: skip
    for number, (part, title, measure, show) in enumerate(goals, 1):
        if part not in parts:
            continue
        busy = others_busy_percent()
        print(f"\n{number}. {title} {busy_note(busy)}", flush=True)
        figures = measure()
        figures["busy_before_percent"] = busy
        results[part.replace("-", "_")] = figures
        show(figures)
    missed = [k for k in ("overhead", "early_stop", "sweep") if k in results and not results[k]["met"]]
    results["met"] = not missed
    results["load_average_after"] = os.getloadavg()
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("all goals met" if not missed else f"goals missed: {', '.join(missed)}")
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
        print(f"figures written to {a.json}")
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
