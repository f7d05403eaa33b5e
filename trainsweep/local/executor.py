"""Run one SageMaker training job as a local process, the way SageMaker local mode does.

The job gets a fresh ``SAGEMAKER_BASE_DIR`` laid out like ``/opt/ml`` (``input/config/hyperparameters.json``,
``input/data/<channel>/``, ``model/``, ``output/``), the entry point runs in its own process group, and
the job's state follows SageMaker's: ``InProgress`` (secondary ``Starting`` -> ``Downloading`` ->
``Training``) then ``Completed``, ``Failed`` (reason from the ``output/failure`` file) or ``Stopped``
(``StopTrainingJob`` or ``MaxRuntimeExceeded``). Billable seconds cover download and training, as on AWS.

A job of ``instance_count`` N > 1 runs as N processes, the hosts ``algo-1`` .. ``algo-N``, each with its
own base folder and the SageMaker multi-host variables (``SM_HOSTS``, ``SM_CURRENT_HOST``), joined over
loopback: ``SM_MASTER_ADDR``/``SM_MASTER_PORT`` say where ``algo-1`` listens, since the host names do not
resolve here. The job fails when any host fails (the others are stopped), as on SageMaker, and bills
N instances.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from trainsweep import atomicio
from trainsweep import sagemaker_contract as sm
from trainsweep.instances import LOCAL_CPU, LOCAL_GPU, MAX_LOCAL_HOSTS
from trainsweep.parentdeath import dying_with_parent

# SageMaker truncates FailureReason to 1024 characters.
FAILURE_REASON_MAX = 1024
DEFAULT_MAX_RUNTIME_S = 86400

ChannelFetcher = Callable[[str, Path], None]
"""(S3 URI, destination folder) -> None: fills a data channel."""


@dataclass(frozen=True)
class TrainingJobRequest:
    """What CreateTrainingJob asked for, reduced to what a local process needs."""

    name: str
    hyperparameters: dict[str, str]
    instance_type: str = LOCAL_CPU
    instance_count: int = 1
    max_runtime_s: float = DEFAULT_MAX_RUNTIME_S
    channels: dict[str, str] = field(default_factory=dict)  # channel name -> S3 URI
    environment: dict[str, str] = field(default_factory=dict)


@dataclass
class JobState:
    """The DescribeTrainingJob fields a local job maintains."""

    status: str = "InProgress"
    secondary_status: str = "Starting"
    failure_reason: str | None = None
    start_time: datetime | None = None
    end_time: datetime | None = None
    billable_seconds: int | None = None
    exit_code: int | None = None
    transitions: list[dict[str, object]] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return self.status in ("Completed", "Failed", "Stopped")


def gpu_available() -> bool:
    """True when ``nvidia-smi -L`` lists a GPU (cheap; does not import torch)."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return False
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


def _free_port() -> int:
    """A TCP port free on loopback now (for the first host's rendezvous)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _now() -> datetime:
    return datetime.now(UTC)


class LocalTrainingJob:
    """One training job executed as a local process; thread-safe state, started with :meth:`start`.

    Args:
        request: the job.
        entry_point: the training script (``container/train.py``), run with this interpreter.
        workdir: an empty folder that becomes the job's ``SAGEMAKER_BASE_DIR``.
        fetch_channel: fills a channel folder from its S3 URI.
        env: extra environment for the process (endpoint URL, credentials, region).
        on_change: called with the state after every transition (from the job's thread).
        on_output: called with new output lines of the process (stdout and stderr), in batches.
        stop_grace_s: SIGTERM first, SIGKILL after this many seconds (SageMaker waits 120 s).
        has_gpu: GPU probe, injectable for tests.
        keep_output: a folder that outlives the job's: at its end, every host's output
            (``<host>.txt``) and the cells' own (``cells/<run>.output.txt``) are copied there.
    """

    def __init__(
        self,
        request: TrainingJobRequest,
        *,
        entry_point: Path,
        workdir: Path,
        fetch_channel: ChannelFetcher | None = None,
        env: dict[str, str] | None = None,
        on_change: Callable[[JobState], None] | None = None,
        on_output: Callable[[list[str]], None] | None = None,
        stop_grace_s: float = 10.0,
        has_gpu: Callable[[], bool] = gpu_available,
        poll_s: float = 0.1,
        keep_output: Path | None = None,
    ) -> None:
        self.request = request
        self.keep_output = keep_output
        self.entry_point = Path(entry_point)
        self.workdir = Path(workdir)
        self._fetch_channel = fetch_channel
        self._env = dict(env or {})
        self._on_change = on_change
        self._on_output = on_output
        self._stop_grace_s = stop_grace_s
        self._has_gpu = has_gpu
        self._poll_s = poll_s
        self._lock = threading.RLock()
        self._stop_requested = threading.Event()
        self._thread: threading.Thread | None = None
        self._procs: dict[str, subprocess.Popen[bytes]] = {}  # host -> its process, algo-1 first
        self._output_pos = 0
        self._output_tail = b""
        self.process_interval: tuple[float, float | None] | None = None  # perf_counter start/end
        self.failed_host: str | None = None
        self.state = JobState()
        self.state.start_time = _now()
        self._transition("Starting", "Preparing the instances for training")

    # ---- public ---------------------------------------------------------------------------------

    @property
    def hosts(self) -> list[str]:
        """The job's hosts, SageMaker's names: ``algo-1`` .. ``algo-N``."""
        return [f"algo-{i}" for i in range(1, self.request.instance_count + 1)]

    def host_base(self, host: str) -> Path:
        """A host's ``SAGEMAKER_BASE_DIR``: the job's folder for ``algo-1``, ``hosts/<host>`` in it else."""
        return self.workdir if host == sm.FIRST_HOST else self.workdir / "hosts" / host

    def host_log_path(self, host: str) -> Path:
        """Everything a host's process wrote to stdout and stderr."""
        return self.workdir / f"{host}.log" if host == "algo-1" else self.host_base(host) / f"{host}.log"

    @property
    def log_path(self) -> Path:
        """Everything the first host's process wrote to stdout and stderr (the job's log stream)."""
        return self.host_log_path("algo-1")

    @property
    def _proc(self) -> subprocess.Popen[bytes] | None:
        return self._procs.get("algo-1")

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"job-{self.request.name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """StopTrainingJob: SIGTERM, then SIGKILL after the grace period; the job ends ``Stopped``."""
        with self._lock:
            if self.state.done:
                return
            self._stop_requested.set()
            self._transition("Stopping", "Stopping the training job", status="Stopping")

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the job has ended; True if it has."""
        if self._thread is not None:
            self._thread.join(timeout)
        return self.state.done

    # ---- the job's thread -----------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._run_job()
        except Exception as exc:  # the job must always end in a terminal state
            self._finish("Failed", "Failed", f"InternalServerError: local executor: {exc!r}")

    def _run_job(self) -> None:
        req = self.request
        problem = self._unsupported()
        if problem:
            self._finish("Failed", "Failed", problem)
            return
        base = self.workdir
        for host in self.hosts:
            self._lay_out(host)
        if req.channels:
            self._transition("Downloading", "Downloading input data")
            for name, uri in req.channels.items():
                dest = sm.Paths(base).channel(name)
                dest.mkdir(parents=True, exist_ok=True)
                if self._fetch_channel is None:
                    raise RuntimeError("no channel fetcher configured")
                try:
                    self._fetch_channel(uri, dest)
                except Exception as exc:
                    self._finish(
                        "Failed", "Failed", f"ClientError: cannot download channel {name} ({uri}): {exc}"
                    )
                    return
                for host in self.hosts[1:]:  # every host sees the same data, downloaded once
                    (self.host_base(host) / "input" / "data" / name).symlink_to(
                        dest, target_is_directory=True
                    )
        if self._stop_requested.is_set():
            self._finish("Stopped", "Stopped", None)
            return
        self._transition("Training", "Training image download completed. Training in progress.")
        self._spawn()
        outcome = self._supervise()
        self.process_interval = (
            self.process_interval[0] if self.process_interval else 0.0,
            time.perf_counter(),
        )
        self._flush_output()
        self._keep_output()
        if outcome == "stopped":
            self._finish("Stopped", "Stopped", None)
        elif outcome == "timeout":
            self._finish(
                "Stopped",
                "MaxRuntimeExceeded",
                f"MaxRuntimeExceeded: Training job runtime exceeded MaxRuntimeInSeconds "
                f"provided ({req.max_runtime_s:g} s)",
            )
        elif self.state.exit_code == 0:
            self._finish("Completed", "Completed", None)
        else:
            self._finish("Failed", "Failed", self._failure_reason())

    def _lay_out(self, host: str) -> None:
        """A host's ``/opt/ml``: the config files SageMaker writes and the folders the job fills."""
        req, paths = self.request, sm.Paths(self.host_base(host))
        paths.lay_out()
        paths.hyperparameters.write_text(json.dumps(req.hyperparameters, indent=1))
        paths.resource_config.write_text(json.dumps(sm.resource_config(host, self.hosts, "lo")))
        paths.input_data_config.write_text(
            json.dumps({name: {"TrainingInputMode": "File"} for name in req.channels})
        )

    def _unsupported(self) -> str | None:
        req = self.request
        if req.instance_type not in (LOCAL_CPU, LOCAL_GPU):
            return (
                f"ValidationException: local mode runs instance types {LOCAL_CPU!r} and {LOCAL_GPU!r}, "
                f"not {req.instance_type!r}; use them in the spec, or run the sweep in the cloud"
            )
        if not 1 <= req.instance_count <= MAX_LOCAL_HOSTS:
            return (
                f"ValidationException: local mode runs 1 to {MAX_LOCAL_HOSTS} hosts per job "
                f"(processes on this machine), not {req.instance_count}"
            )
        if req.instance_count > 1 and req.instance_type == LOCAL_GPU:
            return (
                "ValidationException: local_gpu runs one host per job: several local hosts would share "
                "this machine's GPUs; use 'local' (CPU) for a multi-host job"
            )
        if req.instance_type == LOCAL_GPU and not self._has_gpu():
            return (
                "CapacityError: instance type 'local_gpu' needs an NVIDIA GPU and none was found "
                "(nvidia-smi -L lists none); use 'local' for the CPU"
            )
        if not self.entry_point.is_file():
            return f"AlgorithmError: training entry point not found: {self.entry_point}"
        return None

    def _spawn(self) -> None:
        env = dict(os.environ)
        env.update(self._env)
        env.update(self.request.environment)
        env[sm.JOB_NAME_ENV] = self.request.name
        env[sm.HOSTS_ENV] = json.dumps(self.hosts)
        env["PYTHONUNBUFFERED"] = "1"
        if len(self.hosts) > 1:
            env[sm.MASTER_ADDR_ENV] = "127.0.0.1"
            env[sm.MASTER_PORT_ENV] = str(_free_port())
        if self.request.instance_type == LOCAL_CPU:
            env["CUDA_VISIBLE_DEVICES"] = ""  # `local` means the CPU even on a machine with a GPU
        self.process_interval = (time.perf_counter(), None)
        for host in self.hosts:
            host_env = {**env, sm.BASE_ENV: str(self.host_base(host)), sm.CURRENT_HOST_ENV: host}
            with self.host_log_path(host).open("wb") as out:
                # Killed with the sweep (this thread waits for it); no preexec_fn: the sweep's
                # process may be a notebook's, full of native threads.
                command = dying_with_parent([sys.executable, str(self.entry_point)], env=host_env)
                self._procs[host] = subprocess.Popen(
                    command,
                    cwd=self.host_base(host),
                    env=host_env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group: stopping reaches its children too
                )

    def _supervise(self) -> str:
        """Wait for the hosts' processes; returns 'exited', 'stopped' or 'timeout'.

        The job has exited when every host has, or as soon as one host fails: the others are stopped
        then (they would wait for the failed host until the collective's timeout).
        """
        assert self._procs
        assert self.state.start_time is not None
        deadline = self.state.start_time.timestamp() + self.request.max_runtime_s
        last_flush = time.monotonic()
        while True:
            codes = {host: proc.poll() for host, proc in self._procs.items()}
            failed = [h for h, rc in codes.items() if rc not in (None, 0)]
            if failed or all(rc is not None for rc in codes.values()):
                self.failed_host = failed[0] if failed else None
                self._terminate()
                self.state.exit_code = codes[failed[0]] if failed else 0
                return "exited"
            if self._stop_requested.is_set():
                self._terminate()
                return "stopped"
            if time.time() >= deadline:
                self._terminate()
                return "timeout"
            if time.monotonic() - last_flush > 2.0:
                self._flush_output()
                last_flush = time.monotonic()
            time.sleep(self._poll_s)

    def _terminate(self) -> None:
        """SIGTERM every host still running, SIGKILL after the grace period."""
        running = [p for p in self._procs.values() if p.poll() is None]
        for proc in running:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + self._stop_grace_s
        for proc in running:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        for proc in self._procs.values():
            # Stragglers that ignored SIGTERM but left the leader's exit behind.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        if running and self._proc is not None:
            self.state.exit_code = self._proc.returncode

    def _keep_output(self) -> None:
        """Copy what the job's processes wrote to :attr:`keep_output` (the job's folder is temporary)."""
        keep = self.keep_output
        if keep is None:
            return
        try:
            keep.mkdir(parents=True, exist_ok=True)
            for host in self.hosts:
                if self.host_log_path(host).is_file():
                    atomicio.copy_file(self.host_log_path(host), keep / f"{host}.txt", durable=False)
                cells = sm.Paths(self.host_base(host)).output_data / "cells"
                for cell in sorted(cells.glob("*.output.txt")):
                    (keep / "cells").mkdir(exist_ok=True)
                    atomicio.copy_file(cell, keep / "cells" / cell.name, durable=False)
        except OSError as e:  # losing a copy must not fail the job
            print(f"local mode: could not keep the output of {self.request.name}: {e}", file=sys.stderr)

    def _failure_reason(self) -> str:
        host = self.failed_host or "algo-1"
        where = f" on {host}" if len(self.hosts) > 1 else ""
        failure = sm.Paths(self.host_base(host)).failure
        if failure.is_file():
            text = failure.read_text(errors="replace").strip()
            if text:
                return (text if not where else f"{text} ({host})")[:FAILURE_REASON_MAX]
        if host == "algo-1":
            tail_bytes = self._output_tail
        else:
            try:
                with self.host_log_path(host).open("rb") as f:
                    f.seek(max(0, f.seek(0, os.SEEK_END) - 4096))
                    tail_bytes = f.read()
            except OSError:
                tail_bytes = b""
        tail = tail_bytes.decode(errors="replace").strip().splitlines()[-5:]
        code = self.state.exit_code
        reason = f"AlgorithmError: ExecuteUserScriptError: the entry point exited with code {code}{where}"
        if code is not None and code < 0:
            reason += f" (signal {-code})"
        if tail:
            reason += ": " + " | ".join(tail)
        return reason[:FAILURE_REASON_MAX]

    def _flush_output(self) -> None:
        try:
            with self.log_path.open("rb") as f:
                f.seek(self._output_pos)
                data = f.read()
        except FileNotFoundError:
            return
        if not data:
            return
        # Only whole lines, unless the process has ended.
        ended = self._proc is not None and self._proc.poll() is not None
        cut = len(data) if ended else data.rfind(b"\n") + 1
        if cut <= 0:
            return
        chunk = data[:cut]
        self._output_pos += cut
        self._output_tail = (self._output_tail + chunk)[-4096:]
        if self._on_output is not None:
            lines = chunk.decode(errors="replace").splitlines()
            if lines:
                with contextlib.suppress(Exception):  # losing a log copy must not fail the job
                    self._on_output(lines)

    # ---- state ----------------------------------------------------------------------------------

    def _transition(self, secondary: str, message: str, *, status: str | None = None) -> None:
        with self._lock:
            now = _now()
            if self.state.transitions:
                self.state.transitions[-1].setdefault("EndTime", now)
            self.state.transitions.append({"Status": secondary, "StartTime": now, "StatusMessage": message})
            self.state.secondary_status = secondary
            if status:
                self.state.status = status
            self._notify()

    def _finish(self, status: str, secondary: str, reason: str | None) -> None:
        with self._lock:
            if self.state.done:
                return
            if self._stop_requested.is_set() and status != "Stopped":
                status, secondary, reason = "Stopped", "Stopped", None
            self.state.end_time = _now()
            assert self.state.start_time is not None
            elapsed = (self.state.end_time - self.state.start_time).total_seconds()
            self.state.billable_seconds = max(1, math.ceil(elapsed))
            self.state.failure_reason = reason
            messages = {
                "Completed": "Training job completed",
                "Failed": reason or "Training job failed",
                "Stopped": reason or "Training job stopped",
            }
            self._transition(secondary, messages.get(status, status), status=status)
            self.state.transitions[-1]["EndTime"] = self.state.end_time
            self._notify()

    def _notify(self) -> None:
        if self._on_change is not None:
            with contextlib.suppress(Exception):  # an observer's bug must not wedge the job
                self._on_change(self.state)
