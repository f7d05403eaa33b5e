"""moto's SageMaker with real training jobs: CreateTrainingJob starts a :class:`LocalTrainingJob`.

moto marks every training job ``Completed`` at once and has no StopTrainingJob. Here the backend's
``create_training_job`` hands the job to the local executor and DescribeTrainingJob reports the executor's
state (status, secondary status and transitions, FailureReason, times, billable seconds); StopTrainingJob
stops the process. The process output goes to CloudWatch Logs (``/aws/sagemaker/TrainingJobs``,
stream ``<job>/algo-1-<epoch>``), where ExportLog finds it when a job wrote no log to S3.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from trainsweep.local.executor import (
    DEFAULT_MAX_RUNTIME_S,
    JobState,
    LocalTrainingJob,
    TrainingJobRequest,
    gpu_available,
)
from trainsweep.local.patching import Patches
from trainsweep.local.workroot import Workroot
from trainsweep.sagemaker_contract import TRAINING_LOG_GROUP
from trainsweep.training import contract

ENTRY_POINT = Path(__file__).resolve().parents[2] / "container" / "train.py"


def s3_channel_fetcher(endpoint_url: str, region: str) -> Callable[[str, Path], None]:
    """Download every object under an ``s3://bucket/prefix`` into a folder (as SageMaker's File mode)."""

    def fetch(uri: str, dest: Path) -> None:
        import boto3

        from trainsweep.aws import s3 as s3io

        parsed = urlparse(uri)
        if parsed.scheme != "s3":
            raise ValueError(f"channel URI must be s3://, got {uri!r}")
        bucket, prefix = parsed.netloc, parsed.path.lstrip("/")
        s3 = boto3.client("s3", endpoint_url=endpoint_url, region_name=region)
        found = False
        for key in s3io.list_keys(s3, bucket, prefix):
            rel = key[len(prefix) :].lstrip("/") if key != prefix else Path(key).name
            if not rel or key.endswith("/"):
                continue
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            s3.download_file(bucket, key, str(target))
            found = True
        if not found:
            raise FileNotFoundError(f"no objects under {uri}")

    return fetch


class LocalSageMaker:
    """Install/uninstall the executor-backed SageMaker training API into moto (in-process server)."""

    def __init__(
        self,
        *,
        endpoint_url: str,
        region: str,
        entry_point: Path = ENTRY_POINT,
        workroot: Path | None = None,
        env: dict[str, str] | None = None,
        stop_grace_s: float = 10.0,
        has_gpu: Callable[[], bool] | None = None,
    ) -> None:
        self.endpoint_url = endpoint_url
        self.region = region
        self.entry_point = entry_point
        self._own_workroot = Workroot() if workroot is None else None
        self.workroot = self._own_workroot.path if self._own_workroot is not None else Path(workroot or ".")
        self._env = dict(env or {})
        self._stop_grace_s = stop_grace_s
        self._has_gpu = has_gpu
        self._patches = Patches()
        self._lock = threading.Lock()
        self.jobs: dict[str, LocalTrainingJob] = {}
        self.keep_output: Path | None = None
        """A folder that outlives the jobs' own: each job's output is kept in ``<it>/<job name>/``."""

    # ---- lifecycle ------------------------------------------------------------------------------

    def install(self) -> None:
        from moto.sagemaker.models import SageMakerModelBackend
        from moto.sagemaker.responses import SageMakerResponse

        original_create = SageMakerModelBackend.create_training_job
        local = self

        def create_training_job(backend: Any, *args: Any, **kwargs: Any) -> Any:
            if kwargs.get("training_job_name") in backend.training_jobs:
                from moto.sagemaker.exceptions import ValidationError

                raise ValidationError(
                    message=f"Training job names must be unique: {kwargs['training_job_name']}"
                )
            fake = original_create(backend, *args, **kwargs)
            local._start(backend, fake)
            return fake

        def stop_training_job_backend(backend: Any, training_job_name: str) -> None:
            local._stop(backend, training_job_name)

        def stop_training_job_response(response: Any) -> Any:
            from moto.core.responses import EmptyResult

            response.sagemaker_backend.stop_training_job(response._get_param("TrainingJobName"))
            return EmptyResult()

        self._patches.set(SageMakerModelBackend, "create_training_job", create_training_job)
        self._patches.set(SageMakerModelBackend, "stop_training_job", stop_training_job_backend)
        self._patches.set(SageMakerResponse, "stop_training_job", stop_training_job_response)

    def stop_all(self, timeout: float = 30.0) -> None:
        """Stop every job still running and wait for them (Ctrl-C, end of a local run)."""
        with self._lock:
            jobs = list(self.jobs.values())
        for job in jobs:
            job.stop()
        deadline = time.monotonic() + timeout
        for job in jobs:
            job.wait(max(0.1, deadline - time.monotonic()))

    def close(self) -> None:
        self.stop_all()
        self._patches.restore()
        if self._own_workroot is not None:
            self._own_workroot.remove()

    def process_seconds(self) -> float:
        """Wall time during which at least one training process ran (the union of their lifetimes)."""
        now = time.perf_counter()
        with self._lock:
            spans = sorted(
                (start, end if end is not None else now)
                for job in self.jobs.values()
                if job.process_interval is not None
                for start, end in [job.process_interval]
            )
        total, cur_start, cur_end = 0.0, None, None
        for start, end in spans:
            if cur_end is None or start > cur_end:
                if cur_end is not None and cur_start is not None:
                    total += cur_end - cur_start
                cur_start, cur_end = start, end
            else:
                cur_end = max(cur_end, end)
        if cur_end is not None and cur_start is not None:
            total += cur_end - cur_start
        return total

    @property
    def running(self) -> list[str]:
        with self._lock:
            return [name for name, job in self.jobs.items() if not job.state.done]

    # ---- moto glue ------------------------------------------------------------------------------

    def _start(self, backend: Any, fake: Any) -> None:
        channels = {}
        for channel in fake.input_data_config or []:
            uri = (channel.get("DataSource", {}).get("S3DataSource", {}) or {}).get("S3Uri")
            if uri:
                channels[channel.get("ChannelName", "train")] = uri
        resource = fake.resource_config or {}
        stopping = fake.stopping_condition or {}
        request = TrainingJobRequest(
            name=fake.training_job_name,
            hyperparameters={str(k): str(v) for k, v in (fake.hyper_parameters or {}).items()},
            instance_type=str(resource.get("InstanceType", "local")),
            instance_count=int(resource.get("InstanceCount", 1) or 1),
            max_runtime_s=float(stopping.get("MaxRuntimeInSeconds") or DEFAULT_MAX_RUNTIME_S),
            channels=channels,
        )
        # moto filled in a finished job: make it a job that has just started.
        fake.training_job_status = "InProgress"
        fake.secondary_status = "Starting"
        fake.training_start_time = None
        fake.training_end_time = None
        fake.final_metric_data_list = []
        fake.secondary_status_transitions = []
        workdir = self.workroot / fake.training_job_name
        workdir.mkdir(parents=True, exist_ok=True)
        logs = _CloudWatchWriter(backend.account_id, backend.region_name, fake.training_job_name)
        job = LocalTrainingJob(
            request,
            entry_point=self.entry_point,
            workdir=workdir,
            fetch_channel=s3_channel_fetcher(self.endpoint_url, self.region),
            env={
                **self._env,
                "AWS_ENDPOINT_URL": self.endpoint_url,
                "AWS_DEFAULT_REGION": self.region,
                "AWS_REGION": self.region,
                # a script runs in this Python environment, whose requirements were checked up front
                contract.INSTALL_REQUIREMENTS_ENV: "0",
            },
            on_change=lambda state: _mirror(fake, state),
            on_output=logs.write,
            stop_grace_s=self._stop_grace_s,
            has_gpu=self._has_gpu or gpu_available,
            keep_output=self.keep_output / fake.training_job_name if self.keep_output else None,
        )
        with self._lock:
            self.jobs[request.name] = job
        _mirror(fake, job.state)
        job.start()

    def _stop(self, backend: Any, name: str) -> None:
        from moto.sagemaker.exceptions import ValidationError

        if name not in backend.training_jobs:
            raise ValidationError(message=f"Could not find training job '{name}'.")
        job = self.jobs.get(name)
        if job is None or job.state.done:
            raise ValidationError(message=f"The training job {name} is not in progress")
        job.stop()


def _mirror(fake: Any, state: JobState) -> None:
    """Copy the executor's state onto moto's job object (DescribeTrainingJob serialises its attributes)."""
    fake.training_job_status = state.status
    fake.secondary_status = state.secondary_status
    fake.secondary_status_transitions = [dict(t) for t in state.transitions]
    fake.training_start_time = state.start_time
    fake.training_end_time = state.end_time
    if state.failure_reason:
        fake.failure_reason = state.failure_reason
    if state.billable_seconds is not None:
        fake.training_time_in_seconds = state.billable_seconds
        fake.billable_time_in_seconds = state.billable_seconds
    if state.end_time is not None:
        fake.last_modified_time = state.end_time


class _CloudWatchWriter:
    """Append a job's output lines to its CloudWatch Logs stream (in-process logs backend)."""

    def __init__(self, account_id: str, region: str, job_name: str) -> None:
        self._account_id = account_id
        self._region = region
        self.stream = f"{job_name}/algo-1-{int(time.time())}"
        self._ready = False

    def write(self, lines: list[str]) -> None:
        from moto.logs.models import logs_backends

        backend = logs_backends[self._account_id][self._region]
        if not self._ready:
            backend.ensure_log_group(TRAINING_LOG_GROUP)
            with contextlib.suppress(Exception):  # already exists
                backend.create_log_stream(TRAINING_LOG_GROUP, self.stream)
            self._ready = True
        now = int(time.time() * 1000)
        for i in range(0, len(lines), 5000):
            events = [{"timestamp": now, "message": line} for line in lines[i : i + 5000]]
            backend.put_log_events(TRAINING_LOG_GROUP, self.stream, events)
