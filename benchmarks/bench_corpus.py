"""Benchmark: public training scripts (the real-scripts corpus) under trainsweep, against the plain script.

Each script runs from a temporary copy, with its data prepared as the corpus README says, and with the
command a sweep gives it: the spec below is planned by the planner a sweep runs (``plan_sweep``) and its
job's hyperparameters written to the job's ``/opt/ml``. The instrumented run is the job itself: the image's
entry point (``container/train.py``), whose supervisor parses the job, launches the cell and relays every
line of its output, as in a sweep (``--path launcher``: the cell's process alone, as the container's
launcher builds it). The plain run is the user's own command in the same folder and environment.

1. **Instrumentation overhead <= 1 %**, end to end: the same command with and without trainsweep's
   instrumentation (no ``TRAINSWEEP_INSTRUMENT`` and no injection folder on the path), interleaved
   A B, B A. The training span is timed from the arrival of the script's own progress lines (stdout read as
   it comes, the same way for both), from the first to the last: start-up and teardown are reported
   beside it. The figure is the median of the paired ratios, with their spread.
2. **Early stop predicts the script's own full runs**: per batch size, one early-stop run and two full
   runs. The prediction (the early-stop log's, read back with ``trainsweep.logs.parse``) of the time of an
   epoch, or of the run's N steps for an iteration-based script, against the mean of the two full runs;
   beside it the spread between the two full runs, the floor any prediction from one run meets on this
   machine.

Where the script prints its own time per step (nanoGPT's ``time 12.3ms``), each pair also sets the median
of those times side by side, the first two left out: a per-step figure free of the start-up, evaluation and
teardown scatter a short run's span carries. It is printed beside the training span, which decides the
overhead's verdict (the goal is end to end), and the whole process.

    python benchmarks/bench_corpus.py [--device cpu|cuda] [--scripts nanogpt,word-lm,ddp,ddp-spawn]
                                      [--quick] [--pairs N] [--batch-sizes 16,32]
                                      [--parts overhead,early-stop] [--path job|launcher] [--json PATH]
                                      [--corpus DIR]

The corpus defaults to ``../shared/fixtures/real-scripts`` beside the repository. Exit status 1 when a
goal is missed or undecided (an overhead whose pairs straddle the goal); figures taken on a busy machine
say so (the load average is printed).
"""

from __future__ import annotations

import argparse
import datetime
import fcntl
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trainsweep.instrument.inject import SITE_DIR  # noqa: E402
from trainsweep.logs import parse  # noqa: E402
from trainsweep.sagemaker_contract import BASE_ENV, Paths  # noqa: E402
from trainsweep.spec import plan_sweep  # noqa: E402
from trainsweep.training import contract, cpu_wait  # noqa: E402
from trainsweep.training.launch import Launch, ScriptLauncher, parse_script_config  # noqa: E402

RESULT_VERSION = 1
OVERHEAD_TARGET = 0.01
POLL_S = 0.002
SCHED_POLL_S = 0.05
OWN_CLOCK_WARMUP = 2
DEFAULT_CORPUS = ROOT.parent / "shared" / "fixtures" / "real-scripts"
ENTRY_POINT = ROOT / "container" / "train.py"


# ---- the scripts ---------------------------------------------------------------------------------------


def _prepare_nanogpt(root: Path) -> None:
    prep = root / "data" / "shakespeare_char"
    subprocess.run([sys.executable, "prepare.py"], cwd=prep, check=True, capture_output=True)


def _prepare_word_lm(root: Path) -> None:
    """The README's training split is a copy of valid.txt; here its first 600 lines, and 100-line
    valid and test splits (an epoch of seconds)."""
    data = root / "data" / "wikitext-2"
    lines = (data / "valid.txt").read_text().splitlines(keepends=True)
    (data / "train.txt").write_text("".join(lines[:600]))
    (data / "valid.txt").write_text("".join(lines[600:700]))
    (data / "test.txt").write_text("".join(lines[700:800]))


@dataclass(frozen=True)
class Case:
    """One corpus script: where it lives, how its data is prepared, what a sweep gives it per device."""

    folder: str
    prepare: Callable[[Path], None] | None
    workload: dict[str, dict[str, Any]]  # per device: the spec's workload (source_dir added)
    progress: re.Pattern[bytes]  # a line the script prints as training goes on
    batch_sizes: tuple[int, ...]
    unit: str  # epoch | steps: what early stop predicts
    gpu_only: bool = False
    own_clock: re.Pattern[bytes] | None = None
    """A progress line's own time of one step, in ms (the script's clock): a paired per-step figure."""


NANOGPT_CPU = (
    "python train.py config/train_shakespeare_char.py --device=cpu --compile=False --n_layer=2 --n_head=2 "
    "--n_embd=64 --block_size=64 --eval_iters=10 --dropout=0.0 --eval_interval=50 --log_interval=5 "
    "--always_save_checkpoint=False --batch_size={batch_size} --max_iters={steps}"
)
NANOGPT_GPU = (  # its multi-GPU form: one rank per GPU under torchrun (its DDP path), bfloat16 on Hopper
    "torchrun --standalone --nproc_per_node={gpus} train.py config/train_shakespeare_char.py --compile=False "
    "--eval_iters=20 --eval_interval=200 --log_interval=10 --always_save_checkpoint=False "
    "--batch_size={batch_size} --max_iters={steps}"
)
DDP = (
    "torchrun --standalone --nproc_per_node={gpus} multigpu_torchrun.py {epochs} 10 "
    "--batch_size {batch_size_per_device}"
)
DDP_SPAWN = "python multigpu.py {epochs} 10 --batch_size {batch_size_per_device}"  # its ranks by mp.spawn
WORD_LM = "python main.py --batch_size {batch_size} --epochs {epochs} --emsize 64 --nhid 64"  # by hand

CASES = {
    "nanogpt": Case(
        folder="nanoGPT",
        prepare=_prepare_nanogpt,
        workload={
            "cpu": {"command": NANOGPT_CPU, "steps": 100},
            "cuda": {"command": NANOGPT_GPU, "steps": 400},
        },
        progress=re.compile(rb"^iter (\d+): "),
        batch_sizes=(16, 32),
        unit="steps",
        own_clock=re.compile(rb"^iter \d+: .*, time ([0-9.]+)ms"),
    ),
    "word-lm": Case(
        folder="pytorch-examples/word_language_model",
        prepare=_prepare_word_lm,
        workload={
            "cpu": {"command": WORD_LM, "epochs": 3},
            "cuda": {"command": WORD_LM + " --accel", "epochs": 4},
        },
        progress=re.compile(rb"^\| end of epoch\s+(\d+) "),
        batch_sizes=(20, 40),
        unit="epoch",
    ),
    "ddp": Case(
        folder="pytorch-examples/ddp-tutorial-series",
        prepare=None,
        workload={
            "cpu": {"command": DDP, "epochs": 6},
            "cuda": {"command": DDP, "epochs": 6},
        },
        progress=re.compile(rb"^\[GPU\d+\] Epoch (\d+) "),
        batch_sizes=(32, 64),
        unit="epoch",
        gpu_only=True,
    ),
}  # fmt: skip
# the same tutorial in its mp.spawn form: the ranks the script starts itself are what is timed
SPAWN_WORKLOAD = {"command": DDP_SPAWN, "epochs": 6}
CASES["ddp-spawn"] = replace(CASES["ddp"], workload={"cpu": SPAWN_WORKLOAD, "cuda": SPAWN_WORKLOAD})


# ---- processes -----------------------------------------------------------------------------------------


@dataclass
class Timed:
    """One process: its wall time and when each progress line arrived (seconds from its start)."""

    wall_s: float = 0.0
    returncode: int = 0
    marks: list[float] = field(default_factory=list)
    own_ms: list[float] = field(default_factory=list)  # the script's own step times, where it prints them
    tail: str = ""
    cpu_wait: dict[str, float] | None = None
    """The busiest process of the run's tree (the training process): seconds on a CPU and waiting for one
    over its life (:mod:`trainsweep.training.cpu_wait`), its last reading before it ended."""

    @property
    def span_s(self) -> float:
        """First to last progress line: the training, without start-up and teardown."""
        return self.marks[-1] - self.marks[0] if len(self.marks) > 1 else float("nan")

    @property
    def own_step_ms(self) -> float:
        """The median of the script's own step times, its first OWN_CLOCK_WARMUP left out (compilation,
        allocator and cuDNN warm-up)."""
        steady = self.own_ms[OWN_CLOCK_WARMUP:]
        return statistics.median(steady) if steady else float("nan")


def run_timed(
    launch: Launch,
    env: dict[str, str],
    progress: re.Pattern[bytes],
    log: Path,
    own_clock: re.Pattern[bytes] | None = None,
) -> Timed:
    """Run one process, reading its output as it comes (as a job's log consumer does)."""
    out = Timed()
    with log.open("wb") as keep:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            launch.command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=env, cwd=launch.cwd,
        )  # fmt: skip
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
        pending = b""
        sched = SchedWatch(proc.pid)
        while True:
            try:
                chunk: bytes | None = os.read(fd, 1 << 16)
            except BlockingIOError:
                chunk = None
            now = time.perf_counter() - t0
            sched.poll(now)
            if chunk == b"":
                break
            if not chunk:
                time.sleep(POLL_S)
                continue
            keep.write(chunk)
            *lines, pending = (pending + chunk).split(b"\n")
            out.marks.extend(now for line in lines if progress.match(line))
            if own_clock is not None:
                out.own_ms.extend(float(m[1]) for m in map(own_clock.match, lines) if m)
        out.returncode = proc.wait()
        out.wall_s = time.perf_counter() - t0
    out.tail = log.read_text(errors="replace")[-3000:]
    out.cpu_wait = sched.busiest()
    return out


class SchedWatch:
    """Every SCHED_POLL_S, the scheduler times of each process of a tree (its threads summed), the latest
    kept per process: a process's times are gone when it ends."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.last: dict[int, cpu_wait.SchedTimes] = {}
        self._at = -SCHED_POLL_S

    def poll(self, now: float) -> None:
        if now - self._at < SCHED_POLL_S:
            return
        self._at = now
        try:
            tree = [self.pid, *(c.pid for c in psutil.Process(self.pid).children(recursive=True))]
        except psutil.Error:
            return
        for pid in tree:
            times = cpu_wait.snapshot(Path(f"/proc/{pid}/task"))
            if times is not None:
                self.last[pid] = times

    def busiest(self) -> dict[str, float] | None:
        if not self.last:
            return None
        top = max(self.last.values(), key=lambda t: t.run_ns)
        return cpu_wait.waited(cpu_wait.SchedTimes(0, 0), top)


def plain_env(launch: Launch) -> dict[str, str]:
    """The cell's environment without trainsweep: no instrumentation config, no injection folder."""
    env = {**os.environ, **launch.env}
    env.pop(contract.INSTRUMENT_ENV, None)
    site = str(SITE_DIR)
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and not p.startswith(site)]
    env["PYTHONPATH"] = os.pathsep.join(parts)
    return env


class Cells:
    """A corpus script prepared once, and its cells' processes as a job's launcher builds them."""

    def __init__(self, case: Case, device: str, corpus: Path, folder: Path, path: str = "job") -> None:
        self.case, self.device, self.folder, self.path = case, device, folder, path
        self.source = folder / "src"
        shutil.copytree(corpus / case.folder, self.source)
        if case.prepare is not None:
            case.prepare(self.source)

    def launcher(self, batch_size: int, mode: str, tag: str) -> tuple[ScriptLauncher, Path]:
        spec = {
            "name": "bench",
            "workload": {"source_dir": str(self.source), **self.case.workload[self.device]},
            "instance_types": ["local_gpu" if self.device == "cuda" else "local"],
            "batch_sizes": [batch_size],
            "mode": mode,
            "max_runtime_seconds": 3600,
        }
        job = plan_sweep(spec, sweep_id=f"bench-{tag}").jobs[0]
        hyper = job.hyperparameters
        base = self.folder / f"job-{tag}"
        (base / "input" / "config").mkdir(parents=True, exist_ok=True)
        for d in ("model", "output/data/logs", "work"):
            (base / d).mkdir(parents=True, exist_ok=True)
        paths = Paths(base)
        paths.hyperparameters.write_text(json.dumps(hyper))
        launcher = ScriptLauncher(parse_script_config(dict(hyper)), paths, base / "work")
        launcher.prepare()
        return launcher, paths.log_file(launcher.cfg.cells[0].run_name)

    @staticmethod
    def job_launch(launcher: ScriptLauncher, env: dict[str, str]) -> Launch:
        """The job's own process: the image's entry point on the cell's ``/opt/ml`` (written above)."""
        base = launcher.paths.base
        env[BASE_ENV] = str(base)
        env.pop(contract.INSTRUMENT_ENV, None)  # the supervisor sets the cell's own, and its path
        env.pop("PYTHONPATH", None)
        if "PYTHONPATH" in os.environ:
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        return Launch(command=[sys.executable, str(ENTRY_POINT)], cwd=base, env={})

    def run(self, batch_size: int, mode: str, tag: str, *, instrumented: bool = True) -> tuple[Timed, Path]:
        """One cell. Instrumented, as a job runs it (``path == "job"``: the image's entry point, whose
        supervisor plans the cell, launches it and relays its output) or as the launcher starts it
        (``"launcher"``: no supervisor); plain, the user's own command in the same folder and environment."""
        launcher, log = self.launcher(batch_size, mode, tag)
        launch = launcher.launch(0)
        env = {**os.environ, **launch.env} if instrumented else plain_env(launch)
        env["PYTHONUNBUFFERED"] = "1"  # progress lines arrive when printed, from both
        if instrumented and self.path == "job":
            launch = self.job_launch(launcher, env)
        timed = run_timed(launch, env, self.case.progress, self.folder / f"{tag}.out", self.case.own_clock)
        if timed.returncode != 0:
            raise RuntimeError(f"{tag} exited with {timed.returncode}:\n{timed.tail}")
        return timed, log


# ---- goal 1: overhead ----------------------------------------------------------------------------------


def overhead(cells: Cells, batch_size: int, pairs: int, progress: Callable[[str], None]) -> dict[str, Any]:
    rows = []
    for i in range(pairs):
        order = (False, True) if i % 2 == 0 else (True, False)
        got: dict[bool, Timed] = {}
        for instrumented in order:
            tag = f"ovh-{batch_size}-{i}-{'inst' if instrumented else 'plain'}"
            got[instrumented], _ = cells.run(batch_size, "full", tag, instrumented=instrumented)
        rows.append(_pair(got[False], got[True]))
        progress(_pair_line(i, rows[-1]))
    out = {"batch_size": batch_size, "pairs": rows, **_summary([r["ratio"] for r in rows], "")}
    out["median_wall_ratio"] = statistics.median(r["wall_ratio"] for r in rows)
    own = [r["own_ratio"] for r in rows if r.get("own_ratio") is not None]
    if own:
        out.update(_summary(own, "own_"))
    # the goal is end to end: the span decides; the script's own per-step clock (paired step medians,
    # free of the start-up, evaluation and teardown scatter a short run's span carries) is printed beside
    out["verdict"] = out["span_verdict"]
    out["met"] = out["verdict"] == "met"
    return out


def _pair(plain: Timed, inst: Timed) -> dict[str, Any]:
    row = {
        "plain_span_s": plain.span_s,
        "instrumented_span_s": inst.span_s,
        "ratio": inst.span_s / plain.span_s - 1,
        "plain_wall_s": plain.wall_s,
        "instrumented_wall_s": inst.wall_s,
        "wall_ratio": inst.wall_s / plain.wall_s - 1,
        "progress_lines": len(plain.marks),
        "plain_cpu_wait": plain.cpu_wait,
        "instrumented_cpu_wait": inst.cpu_wait,
    }
    if len(plain.own_ms) > OWN_CLOCK_WARMUP and len(inst.own_ms) > OWN_CLOCK_WARMUP:
        row.update(
            plain_step_ms=plain.own_step_ms,
            instrumented_step_ms=inst.own_step_ms,
            own_ratio=inst.own_step_ms / plain.own_step_ms - 1,
            own_steps=min(len(plain.own_ms), len(inst.own_ms)) - OWN_CLOCK_WARMUP,
        )
    return row


def _pair_line(i: int, r: dict[str, Any]) -> str:
    line = (
        f"    pair {i + 1}: plain {r['plain_span_s']:.3f} s, instrumented {r['instrumented_span_s']:.3f} s "
        f"({100 * r['ratio']:+.2f} %); "
        f"whole process {r['plain_wall_s']:.2f} / {r['instrumented_wall_s']:.2f} s"
    )
    waits = [r.get(f"{k}_cpu_wait") for k in ("plain", "instrumented")]
    if all(waits):
        line += "; waited for a CPU " + " / ".join(f"{100 * w['wait_share']:.1f} %" for w in waits if w)
    if "own_ratio" in r:
        line += (
            f"; the script's own step time (median of {r['own_steps']}) {r['plain_step_ms']:.3f} / "
            f"{r['instrumented_step_ms']:.3f} ms ({100 * r['own_ratio']:+.2f} %)"
        )
    return line


def _summary(ratios: list[float], prefix: str) -> dict[str, Any]:
    verdict_key = f"{prefix}verdict" if prefix else "span_verdict"
    return {
        f"{prefix}median_ratio": statistics.median(ratios),
        f"{prefix}min_ratio": min(ratios),
        f"{prefix}max_ratio": max(ratios),
        verdict_key: overhead_verdict(ratios),
    }


def overhead_verdict(ratios: list[float]) -> str:
    """``met`` when every pair is within the goal, ``missed`` when none is, else ``undecided``: the
    pairs' scatter (the machine's noise) straddles the goal, and their median would decide nothing."""
    if max(ratios) <= OVERHEAD_TARGET:
        return "met"
    if min(ratios) > OVERHEAD_TARGET:
        return "missed"
    return "undecided"


# ---- goal 2: early stop --------------------------------------------------------------------------------


def measured(run: Any, unit: str) -> float:
    """What early stop predicts, as a full run measured it: the mean epoch after the first, or the time
    of the run's steps (the one-off first steps included)."""
    if unit == "epoch":
        epochs = [e.epoch_s for e in run.epochs[1:] if e.epoch_s is not None]
        if not epochs:
            raise RuntimeError("the full run logged fewer than two epochs")
        return statistics.mean(epochs)
    if run.fit_s is not None:
        return float(run.fit_s)
    return float(sum(e.epoch_s for e in run.epochs if e.epoch_s is not None))


def own_run(es: Any, unit: str) -> float | None:
    """What the early-stop run itself measured of what it predicts, where it ran that far (a step-based
    run that watched all its steps; epochs after its first that it finished): the process's own speed,
    which the full runs beside it need not share."""
    if unit != "epoch":
        return float(es.fit_s) if es.fit_s is not None else None
    try:
        return measured(es, unit)
    except RuntimeError:
        return None


def predicted(pred: dict[str, Any], unit: str) -> float:
    return float(pred["epoch_s"] if unit == "epoch" else pred["total_s"])


def early_stop(cells: Cells, batch_size: int, progress: Callable[[str], None]) -> dict[str, Any]:
    unit = cells.case.unit
    _, es_log = cells.run(batch_size, "early-stop", f"es-{batch_size}")
    fulls = [parse(cells.run(batch_size, "full", f"full-{batch_size}-{i}")[1]) for i in (0, 1)]
    es = parse(es_log)
    if es.prediction is None:
        raise RuntimeError(f"batch size {batch_size}: no prediction in the early-stop log ({es.problems})")
    pred = predicted(es.prediction, unit)
    full = [measured(r, unit) for r in fulls]
    mean_full = statistics.mean(full)
    row = {
        "batch_size": batch_size,
        "unit": unit,
        "predicted_s": pred,
        "full_runs_s": full,
        "error": pred / mean_full - 1,
        "full_run_spread": abs(full[0] / full[1] - 1),
        "own_run_s": own_run(es, unit),
        "steps_watched": es.prediction.get("steps_watched"),
        "stop_reason": es.prediction.get("stop_reason"),
    }
    row["within_spread"] = abs(row["error"]) <= max(row["full_run_spread"], 0.0)
    own = row["own_run_s"]
    row["own_run_error"] = pred / own - 1 if own else None
    progress(
        f"    bs {batch_size}: predicted {pred:.3f} s ({unit}) after {row['steps_watched']} steps "
        f"({row['stop_reason']}); full runs {' / '.join(f'{x:.3f}' for x in full)} s: error "
        f"{100 * row['error']:+.2f} %, spread between the full runs {100 * row['full_run_spread']:.2f} %"
        + (
            f"; against the early-stop run's own {own:.3f} s: {100 * row['own_run_error']:+.2f} %"
            if own
            else ""
        )
    )
    return row


# ---- a GPU-only script on a CPU ------------------------------------------------------------------------


def gpu_only_on_cpu(cells: Cells) -> dict[str, Any]:
    """The script must fail, and the cell's reason must carry the script's own words."""
    launcher, _ = cells.launcher(cells.case.batch_sizes[0], "full", "gpu-only")
    launch = launcher.launch(0)
    timed = run_timed(launch, {**os.environ, **launch.env}, cells.case.progress, cells.folder / "gpu.out")
    status_file = contract.cell_status_path(launcher.paths.output, launcher.cfg.cells[0].run_name)
    status = json.loads(status_file.read_text()) if status_file.is_file() else None
    return {"returncode": timed.returncode, "status": status, "output_tail": timed.tail[-600:]}


# ---- main ----------------------------------------------------------------------------------------------


def metadata(device: str) -> dict[str, Any]:
    import torch

    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": shlex.join(["python", "benchmarks/bench_corpus.py", *sys.argv[1:]]),
        "device": torch.cuda.get_device_name(0) if device == "cuda" else platform.processor() or "cpu",
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "load_average_before": os.getloadavg(),
    }


def measure_case(name: str, a: argparse.Namespace, progress: Callable[[str], None]) -> dict[str, Any]:
    case = CASES[name]
    with tempfile.TemporaryDirectory(prefix=f"bench-corpus-{name}-") as tmp:
        cells = Cells(case, a.device, a.corpus, Path(tmp), a.path)
        if case.gpu_only and a.device != "cuda":
            r = gpu_only_on_cpu(cells)
            progress(
                f"    GPU-only on a CPU: exit {r['returncode']}, reason: {(r['status'] or {}).get('reason')}"
            )
            return {"gpu_only_on_cpu": r}
        out: dict[str, Any] = {"overhead": [], "early_stop": []}
        pairs = a.pairs or (3 if a.quick else 6)
        sizes = [int(x) for x in a.batch_sizes.split(",")] if a.batch_sizes else case.batch_sizes
        if "overhead" in a.parts:
            out["overhead"].append(overhead(cells, sizes[0], pairs, progress))
        if "early-stop" in a.parts:
            for bs in sizes:
                out["early_stop"].append(early_stop(cells, bs, progress))
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--scripts", default=",".join(CASES))
    ap.add_argument("--quick", action="store_true", help="fewer pairs (a check of the script)")
    ap.add_argument("--parts", default="overhead,early-stop", help="overhead, early-stop or both")
    ap.add_argument("--pairs", type=int, default=None, help="overhead pairs (default 6; 3 with --quick)")
    ap.add_argument("--batch-sizes", default=None, help="comma-separated; default: the script's two")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here (versioned JSON)")
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument(
        "--path", choices=["job", "launcher"], default="job",
        help="instrumented runs as a job runs them (supervisor, output relay) or as the launcher starts them",
    )  # fmt: skip
    a = ap.parse_args()
    # the scripts' requirements (torch) are this environment's: checked, not installed (as local mode)
    os.environ[contract.INSTALL_REQUIREMENTS_ENV] = "0"
    meta = metadata(a.device)
    load = " ".join(f"{x:.2f}" for x in meta["load_average_before"])
    print(f"{meta['date']}; {meta['device']}; torch {meta['torch']}; python {meta['python']}; load {load}")
    results: dict[str, Any] = {"version": RESULT_VERSION, "benchmark": "bench_corpus", "metadata": meta}
    results["path"] = a.path

    def progress(line: str) -> None:
        print(line, flush=True)

    missed = []
    for name in a.scripts.split(","):
        print(f"\n{name} ({CASES[name].folder}) on {a.device}", flush=True)
        r = measure_case(name, a, progress)
        results[name] = r
        for o in r.get("overhead", []):
            print(
                f"  overhead, batch size {o['batch_size']}: median {100 * o['median_ratio']:+.2f} % of the "
                f"training span (pairs {100 * o['min_ratio']:+.2f} .. {100 * o['max_ratio']:+.2f} %: "
                f"{o['span_verdict']}), whole process {100 * o['median_wall_ratio']:+.2f} %"
            )
            if "own_verdict" in o:
                print(
                    f"  overhead by the script's own step clock: median {100 * o['own_median_ratio']:+.2f} % "
                    f"(pairs {100 * o['own_min_ratio']:+.2f} .. {100 * o['own_max_ratio']:+.2f} %): "
                    f"{o['own_verdict']}"
                )
            print(f"  overhead verdict: {o['verdict'].upper()}")
            if o["verdict"] != "met":
                missed.append(f"{name} overhead ({o['verdict']})")
        for e in r.get("early_stop", []):
            if not e["within_spread"]:
                missed.append(f"{name} early stop at {e['batch_size']}")
    results["load_average_after"] = os.getloadavg()
    results["missed"] = missed
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("all goals met" if not missed else f"goals missed: {', '.join(missed)}")
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(results, indent=2, sort_keys=True, default=str) + "\n")
        print(f"figures written to {a.json}")
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
