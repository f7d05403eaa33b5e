"""The container's entry point: validate the job, run a worker per batch size, deliver the logs.

The supervisor never imports torch. It owns what must survive a dying worker: the periodic log upload,
the final upload, the ``failure`` file and the exit code. A bad input fails here, before any worker
starts, with the reason in the failure file and in every log the job was asked to write.

Exit codes: 0 success (in packed mode also when some batch sizes were out of memory: they are
recorded as infeasible), 1 failure, 2 bad input, 143 stopped by SIGTERM.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainsweep import axes
from trainsweep import hyperparameters as hp
from trainsweep.logs import mllog
from trainsweep.parentdeath import dying_with_parent
from trainsweep.sagemaker_contract import Paths, hosts
from trainsweep.training import contract, launch
from trainsweep.training.config import (
    DEFAULT_LOG_UPLOAD_S,
    Cell,
    JobConfig,
    JobConfigError,
    parse_config,
    read_hyperparameters,
    run_names_hint,
)
from trainsweep.training.metric_lines import (
    MetricDefinition,
    MetricWatcher,
    TargetRule,
    parse_definitions,
    same_metric,
)
from trainsweep.training.output import OutputCapture, with_script_words
from trainsweep.training.runlog import RunLog
from trainsweep.training.upload import LogUploader

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_STOPPED = (
    contract.EXIT_OK, contract.EXIT_ERROR, contract.EXIT_BAD_INPUT, contract.EXIT_STOPPED,
)  # fmt: skip
STOP_GRACE_S = 60.0
GROUP_GRACE_S = 5.0
"""Workers left behind by a cell's process get this long after SIGTERM before SIGKILL."""
OUTPUT_DRAIN_S = 10.0
JOB_SUMMARY = "job.json"


@dataclass
class CellResult:
    run_name: str
    batch_size: int
    status: str  # ok | oom | infeasible | error | stopped | skipped
    reason: str | None
    exit_code: int | None
    prediction: dict[str, Any] | None = None
    flags: list[str] = field(default_factory=list)  # warnings about an ok run (e.g. batch size ignored)


SKIPPED = "skipped"
"""A cell a batch-size search did not run (beyond the out-of-memory edge, or past a plateau)."""


class BatchSizeSearch:
    """``batch_sizes: auto`` in a packed job: the cells double; the search stops at the first out of memory
    or batch the script cannot use (larger batches do not fit either) or when two doublings in a row each
    gain less than ``min_gain`` of throughput (as SageMaker Inference Recommender ends a load test on a
    plateau). Once a cell said how many samples its training set holds, a batch size larger than that is
    never passed to the script: its cell is beyond the edge, with the reason."""

    def __init__(self, min_gain: float):
        self.min_gain = min_gain
        self.curve: list[tuple[int, float]] = []
        """(batch size, samples/s) of every batch size that trained, from its early-stop prediction."""
        self.flat = 0
        self.stop: tuple[str, str] | None = None
        """(failure kind, reason) given to the cells not run, once the search stops."""
        self.out_of_memory_at: int | None = None
        self.beyond_at: int | None = None
        """The first batch size the script could not use (its training set is smaller)."""
        self.train_samples: int | None = None
        """Samples of the script's training set, as a cell that trained said (None: not said)."""

    def refuse(self, batch_size: int) -> str | None:
        """Why ``batch_size`` is not passed to the script (None: run it): larger than its training set."""
        n = self.train_samples
        if n is None or batch_size <= n:
            return None
        return (
            f"not run: batch size {batch_size} is beyond what the script can train: its training set has "
            f"{n} samples, fewer than one batch (batch-size search)"
        )

    def add(self, res: CellResult, train_samples: int | None = None) -> None:
        if train_samples is not None and train_samples > 0:
            self.train_samples = train_samples
        if res.status in ("oom", contract.INFEASIBLE):
            oom = res.status == "oom"
            if oom:
                self.out_of_memory_at = res.batch_size
            else:
                self.beyond_at = res.batch_size
            why = "ran out of memory, so larger ones do not fit" if oom else "is one the script cannot train"
            self.stop = (res.status, f"not run: batch size {res.batch_size} {why} (batch-size search)")
            return
        pred = (res.prediction or {}) if res.status == "ok" else {}
        step_s = pred.get("step_s")
        if not isinstance(step_s, int | float) or step_s <= 0:
            return  # no throughput to compare (a failed cell): the search goes on
        per_step = pred.get("batches_per_step")  # a script that accumulates gradients trains several
        batches = float(per_step) if isinstance(per_step, int | float) and per_step > 0 else 1.0
        rate = res.batch_size * batches / float(step_s)
        best = max((r for _, r in self.curve), default=None)
        self.curve.append((res.batch_size, rate))
        if best is not None and rate < best * (1 + self.min_gain):
            self.flat += 1
        else:
            self.flat = 0
        if self.flat >= 2:
            self.stop = (
                SKIPPED,
                f"not run: throughput stopped improving (less than {100 * self.min_gain:g} % gain for two "
                f"doublings, up to batch size {res.batch_size}) (batch-size search)",
            )

    def record(self) -> dict[str, Any]:
        """What the job's summary says of the search: the curve, the feasible range, why it stopped."""
        sizes = [bs for bs, _ in self.curve]
        return {
            "curve": [{"batch_size": bs, "samples_per_s": r} for bs, r in self.curve],
            "feasible": [min(sizes), max(sizes)] if sizes else None,
            "largest_feasible": max(sizes) if sizes else None,
            "out_of_memory_at": self.out_of_memory_at,
            "beyond_training_set_at": self.beyond_at,
            "stopped": self._stopped(),
        }

    def _stopped(self) -> str:
        if self.out_of_memory_at:
            return "out of memory"
        if self.beyond_at:
            return "training set"
        return "plateau" if self.stop else "max"


def failure_events(path: Path) -> list[dict[str, Any]]:
    """The FAILURE events of a run's log, with their rank (``rank`` key), in order."""
    try:
        data = path.read_bytes()
    except OSError:
        return []
    out: list[dict[str, Any]] = []
    for raw in data.splitlines():
        if not raw.startswith(mllog.TOKEN.encode()) or mllog.FAILURE.encode() not in raw:
            continue
        try:
            rec = mllog.parse_payload(raw[len(mllog.TOKEN) :].decode(errors="replace"))
        except ValueError:
            continue
        value = rec.get("value")
        if rec["key"] == mllog.FAILURE and isinstance(value, dict):
            out.append({**value, "rank": (rec.get("metadata") or {}).get("rank")})
    return out


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def rank_failure(path: Path) -> str | None:
    """``rank N: reason`` of the first rank whose failure the log holds (None: no rank failed)."""
    failures = failure_events(path)
    if not failures:
        return None
    f = failures[0]
    return f"rank {f.get('rank') or 0} failed: {f.get('reason')}"


class Supervisor:
    def __init__(self, paths: Paths):
        self.paths = paths
        self.stopping = False
        self.child: subprocess.Popen[bytes] | None = None
        self.metric_definitions: list[MetricDefinition] = []
        self.target: TargetRule | None = None

    # ---- signals -----------------------------------------------------------------------------

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        self.stopping = True
        child = self.child
        if child is not None and child.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(signal.SIGTERM)  # the launcher passes it on to its ranks

    # ---- failure bookkeeping -----------------------------------------------------------------

    def append_failure(self, run_name: str, reason: str, kind: str) -> None:
        """Add the failure to a run's log unless the worker already said it; a reason that adds to the
        worker's (what the script said on stderr) is written after it, and so is the one the log keeps."""
        path = self.paths.log_file(run_name)
        said = [str(f.get("reason") or "").strip() for f in failure_events(path)]
        if said and not any(s and s in reason and s != reason.strip() for s in said):
            return
        with RunLog(path, echo=True) as log:
            log.event(mllog.FAILURE, {"reason": reason, "kind": kind}, epoch_num=0)
            log.line(f"Training failed: {reason}")

    def write_failure(self, reason: str) -> None:
        self.paths.output.mkdir(parents=True, exist_ok=True)
        self.paths.failure.write_text(reason.strip() + "\n")
        print(f"trainsweep: {reason}", file=sys.stderr, flush=True)

    # ---- workers -----------------------------------------------------------------------------

    def _gpus(self, cfg: JobConfig) -> int:
        return launch.visible_gpus(cfg.num_gpus)

    def worker_command(self, cfg: JobConfig, config_file: Path, index: int) -> list[str]:
        worker = ["-m", "trainsweep.training.worker", "--config", str(config_file), "--cell", str(index)]
        prefix = launch.launcher_prefix(self.paths, self._gpus(cfg))
        return [*(prefix or [sys.executable]), *worker]

    def run_cell(self, cell: Cell, process: launch.Launch) -> CellResult:
        """Run one cell's process in its own process group, its output captured (and passed through)."""
        status_file = contract.cell_status_path(self.paths.output, cell.run_name)
        status_file.unlink(missing_ok=True)
        if cell.axes:  # the setting the job gives this cell, first in its log (any workload)
            with RunLog(self.paths.log_file(cell.run_name), echo=False) as log:
                log.event(axes.LOG_KEY, cell.setting)
        watcher = self.metric_watcher(cell)
        capture = OutputCapture(
            contract.cell_output_path(self.paths.output, cell.run_name),
            listener=watcher.line if watcher is not None else None,
        )
        env = {**os.environ, **process.env} if process.env else None
        try:  # a killed job leaves no worker behind
            command = dying_with_parent(process.command, env=env, cwd=process.cwd)
            self.child = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env=env, cwd=process.cwd, process_group=0,
            )  # fmt: skip
        except OSError as e:
            capture.join(0)
            reason = f"cannot start {process.command[0]!r}: {e.strerror or e}"
            self.append_failure(cell.run_name, reason, "error")
            return CellResult(cell.run_name, cell.batch_size, "error", reason, None)
        if watcher is not None:
            pgid = self.child.pid
            watcher.on_reached = lambda: _kill_group(pgid, signal.SIGKILL)  # at once: nothing after counts
        capture.start(self.child.stdout, self.child.stderr)
        rc, at_target = self._wait(watcher)
        outlived = self._end_group(self.child.pid)
        self.child = None
        if not capture.join(OUTPUT_DRAIN_S):
            print("trainsweep: a process that left the cell's process group still holds its output",
                  file=sys.stderr, flush=True)  # fmt: skip
        if at_target and watcher is not None:
            watcher.finish_at_target()
            r = watcher.reached_at or {}
            said = f"stopped at the target: {r.get('metric')} {r.get('value')} after epoch {r.get('epoch')}"
            result = CellResult(cell.run_name, cell.batch_size, "ok", None, rc, flags=[said])
        else:
            result = self._outcome(cell, rc, status_file)
        if outlived and not at_target:  # at the target the whole group was killed on purpose
            result.flags.append("processes the script started outlived it: stopped with the cell")
        if result.status == "ok" and watcher is not None:
            result.flags.extend(watcher.say_unmatched())
        if result.status == "error" and result.reason:
            result.reason = with_script_words(result.reason, list(capture.stderr_tail))
        if result.status != "ok":
            self.append_failure(cell.run_name, result.reason or result.status, result.status)
        return result

    def _wait(self, watcher: MetricWatcher | None) -> tuple[int, bool]:
        """Wait for the cell's process; (its exit status, whether it was ended at its target)."""
        assert self.child is not None
        deadline: float | None = None
        while True:
            try:
                rc = self.child.wait(timeout=0.5)
                return rc, watcher is not None and watcher.reached.is_set()
            except subprocess.TimeoutExpired:
                if watcher is not None and watcher.reached.is_set():
                    _kill_group(self.child.pid, signal.SIGKILL)
                    return self.child.wait(), True
                if self.stopping:
                    deadline = deadline or time.monotonic() + STOP_GRACE_S
                    if time.monotonic() > deadline:
                        _kill_group(self.child.pid, signal.SIGKILL)

    @staticmethod
    def _end_group(pgid: int) -> bool:
        """Stop what is left of the cell's process group (workers that outlived the script: SIGTERM, then
        SIGKILL); True when something was left."""
        try:
            os.killpg(pgid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            return False
        deadline = time.monotonic() + GROUP_GRACE_S
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except (ProcessLookupError, PermissionError):
                return True
            time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        return True

    def _outcome(self, cell: Cell, rc: int, status_file: Path) -> CellResult:
        """The cell's result from its status file, else from its exit status."""
        if status_file.is_file():
            st = json.loads(status_file.read_text())
            result = CellResult(
                cell.run_name, cell.batch_size, st["status"], st["reason"], rc, st["prediction"],
                list(st.get("flags") or []),
            )  # fmt: skip
        elif rc == contract.EXIT_OOM:
            result = CellResult(cell.run_name, cell.batch_size, "oom", "out of memory", rc)
        elif self.stopping or rc in (-signal.SIGTERM, EXIT_STOPPED):
            result = CellResult(cell.run_name, cell.batch_size, "stopped", "stopped by SIGTERM", rc)
        else:
            how = f"killed by signal {-rc}" if rc < 0 else f"exited with code {rc}"
            if rc == -signal.SIGKILL:
                how += " (the host may have run out of memory)"
            elif rc == 0:
                how += " without saying how the cell ended (no cell status: did a rank fail?)"
            failed = rank_failure(self.paths.log_file(cell.run_name))  # rank 0 said nothing; another may have
            reason = f"{failed} (training worker {how})" if failed else f"training worker {how}"
            result = CellResult(cell.run_name, cell.batch_size, "error", reason, rc)
        if result.status == "ok":
            failed = rank_failure(self.paths.log_file(cell.run_name))
            if failed is not None:  # a launcher that exits 0 while a rank failed
                result.status, result.reason = "error", failed
        return result

    def metric_watcher(self, cell: Cell) -> MetricWatcher | None:
        """The matcher of the job's metric definitions for one cell (None: the job has none)."""
        if not self.metric_definitions and self.target is None:
            return None
        return MetricWatcher(self.metric_definitions, self.paths.log_file(cell.run_name), self.target)

    # ---- the job -----------------------------------------------------------------------------

    def upload_bucket(self, cfg: JobConfig | launch.ScriptConfig) -> str | None:
        """The log bucket on the first host; None on the others (one log per run name: theirs would
        overwrite it, and it holds rank 0's epoch lines)."""
        all_hosts, current = hosts(self.paths)
        return cfg.log_bucket if current == all_hosts[0] else None

    def bad_input(self, raw: dict[str, str], names: list[str], reason: str) -> int:
        for name in names:
            self.append_failure(name, reason, "error")
        bucket = (raw.get(hp.LOG_BUCKET) or "").strip() or None
        LogUploader(bucket=bucket, prefix=(raw.get(hp.LOG_PREFIX) or "").strip(), logs_dir=self.paths.logs,
                    period_s=DEFAULT_LOG_UPLOAD_S).flush()  # fmt: skip
        self.write_failure(f"bad input: {reason}")
        return EXIT_BAD_INPUT

    def run(self) -> int:
        paths = self.paths
        signal.signal(signal.SIGTERM, self._on_sigterm)
        for d in (paths.model, paths.output, paths.logs):
            d.mkdir(parents=True, exist_ok=True)
        paths.failure.unlink(missing_ok=True)
        raw: dict[str, str] = {}
        names = run_names_hint(raw)
        try:
            raw = read_hyperparameters(paths)
            names = run_names_hint(raw)
            if launch.is_script_job(raw):
                return self.run_script(raw)
            cfg = parse_config(raw, paths)
        except JobConfigError as e:
            return self.bad_input(raw, names, str(e))
        with tempfile.TemporaryDirectory(prefix="trainsweep-") as tmp:
            config_file = Path(tmp) / "job-config.json"
            config_file.write_text(cfg.to_json())
            return self.run_cells(cfg, lambda i: launch.Launch(self.worker_command(cfg, config_file, i)))

    def run_script(self, raw: dict[str, str]) -> int:
        """A user's script (SageMaker script mode): fetch and prepare its source, then a process per cell."""
        cfg = launch.parse_script_config(raw)  # JobConfigError: bad input, before anything is fetched
        self.read_metric_settings(raw)
        with tempfile.TemporaryDirectory(prefix="trainsweep-") as tmp:
            launcher = launch.ScriptLauncher(cfg, self.paths, Path(tmp))
            try:
                launcher.prepare()
            except JobConfigError as e:
                return self.bad_input(raw, [c.run_name for c in cfg.cells], str(e))
            return self.run_cells(cfg, launcher.launch)

    def read_metric_settings(self, raw: dict[str, str]) -> None:
        """The job's metric definitions and target (script jobs); raises :class:`JobConfigError`."""
        try:
            text = (raw.get(contract.METRIC_DEFINITIONS) or "").strip()
            self.metric_definitions = parse_definitions(text) if text else []
            target = (raw.get(contract.TARGET) or "").strip()
            self.target = TargetRule.from_json(target) if target else None
        except ValueError as e:
            raise JobConfigError(str(e)) from None
        known = {d.name for d in self.metric_definitions}
        if self.target is not None and not any(same_metric(self.target.metric, n) for n in known):
            raise JobConfigError(
                f"target metric {self.target.metric!r} is not among the metric definitions ({sorted(known)})"
            )

    def run_cells(self, cfg: JobConfig | launch.ScriptConfig, make: Callable[[int], launch.Launch]) -> int:
        """Run the job's cells in turn (a packed job goes on past a failed one), delivering the logs."""
        paths = self.paths
        uploader = LogUploader(
            bucket=self.upload_bucket(cfg),
            prefix=cfg.log_prefix,
            logs_dir=paths.logs,
            period_s=cfg.log_upload_s,
        )
        uploader.start()
        results: list[CellResult] = []
        gain = getattr(cfg, "search_min_gain", None)
        search = BatchSizeSearch(gain) if gain is not None and cfg.packed else None
        try:
            for i, cell in enumerate(cfg.cells):
                if self.stopping:
                    self.append_failure(cell.run_name, "stopped by SIGTERM before it started", "stopped")
                    results.append(CellResult(cell.run_name, cell.batch_size, "stopped", "not started", None))
                    continue
                skip = self._searched_past(search, cell)
                if skip is not None:
                    results.append(skip)
                    continue
                res = self._launch_cell(cell, make, i)
                results.append(res)
                if search is not None:
                    search.add(res, self._train_samples(cell))
                if res.status == "stopped":
                    self.stopping = True
                if not cfg.packed and res.status != "ok":
                    break
        finally:
            summary = {
                "workload": cfg.workload,
                "mode": cfg.mode,
                "packed": cfg.packed,
                "cells": [r.__dict__ for r in results],
            }
            if search is not None:
                summary["batch_size_search"] = search.record()
            (paths.output / "data" / JOB_SUMMARY).write_text(json.dumps(summary, indent=2))
            uploader.stop()
        return self.outcome(cfg, results)

    def _launch_cell(self, cell: Cell, make: Callable[[int], launch.Launch], index: int) -> CellResult:
        """Run one cell; one whose process cannot be built (its own settings are bad input) fails alone."""
        try:
            how = make(index)
        except JobConfigError as e:
            self.append_failure(cell.run_name, str(e), "error")
            return CellResult(cell.run_name, cell.batch_size, "error", str(e), EXIT_BAD_INPUT)
        return self.run_cell(cell, how)

    def _searched_past(self, search: BatchSizeSearch | None, cell: Cell) -> CellResult | None:
        """The result of a cell the batch-size search does not run (None: run it)."""
        if search is None:
            return None
        if search.stop is not None:
            kind, reason = search.stop
            self.append_failure(cell.run_name, reason, kind)
            return CellResult(cell.run_name, cell.batch_size, SKIPPED, reason, None)
        beyond = search.refuse(cell.batch_size)
        if beyond is None:
            return None
        self.append_failure(cell.run_name, beyond, contract.INFEASIBLE)
        search.beyond_at = search.beyond_at or cell.batch_size
        return CellResult(cell.run_name, cell.batch_size, contract.INFEASIBLE, beyond, None)

    def _train_samples(self, cell: Cell) -> int | None:
        """The training set's samples an instrumented script's cell status says (None: not said)."""
        try:
            st = json.loads(contract.cell_status_path(self.paths.output, cell.run_name).read_text())
        except (OSError, ValueError):
            return None
        n = st.get("train_samples") if isinstance(st, dict) else None
        return n if isinstance(n, int) else None

    def outcome(self, cfg: JobConfig | launch.ScriptConfig, results: list[CellResult]) -> int:
        if self.stopping or any(r.status == "stopped" for r in results):
            self.write_failure("stopped by SIGTERM (StopTrainingJob or MaxRuntimeExceeded); logs delivered")
            return EXIT_STOPPED
        errors = [r for r in results if r.status == "error"]
        ooms = [r for r in results if r.status in ("oom", contract.INFEASIBLE)]
        if errors:
            detail = "; ".join(f"{r.run_name} (batch size {r.batch_size}): {r.reason}" for r in errors)
            self.write_failure(f"training failed: {detail}")
            return EXIT_BAD_INPUT if all(r.exit_code == EXIT_BAD_INPUT for r in errors) else EXIT_FAILED
        beyond = ("oom", contract.INFEASIBLE, SKIPPED)
        if ooms and (not cfg.packed or all(r.status in beyond for r in results)):
            if all(r.status == "oom" for r in ooms):
                sizes = ", ".join(str(r.batch_size) for r in ooms)
                self.write_failure(f"out of memory at batch size {sizes}: does not fit on this instance type")
            else:
                self.write_failure("no batch size trained: " + "; ".join(r.reason or r.status for r in ooms))
            return EXIT_FAILED
        return EXIT_OK


def main() -> int:
    return Supervisor(Paths.from_env()).run()
