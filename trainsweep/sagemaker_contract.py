"""The SageMaker training contract, both sides of it: where a job's files are, what its environment says,
and where its output goes.

SageMaker (or local mode's executor, :mod:`trainsweep.local.executor`) lays out ``/opt/ml`` and sets the
environment; the training image (:mod:`trainsweep.training`) reads them; the stack and the CLI read the
job's output in CloudWatch. Each name is written here once and used by every side, as
sagemaker-training-toolkit's ``environment.py`` does for its containers. ``<base>`` is ``/opt/ml`` unless
``SAGEMAKER_BASE_DIR`` says otherwise (the toolkit's convention), so tests and local mode run the same
entry point anywhere. This module imports nothing of trainsweep's and no torch.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DEFAULT_BASE = "/opt/ml"
BASE_ENV = "SAGEMAKER_BASE_DIR"
JOB_NAME_ENV = "TRAINING_JOB_NAME"
TRAINING_LOG_GROUP = "/aws/sagemaker/TrainingJobs"
"""The CloudWatch log group of every training job's output (one stream per host: ``<job>/algo-N-...``)."""

HYPERPARAMETERS_FILE = "hyperparameters.json"
RESOURCE_CONFIG_FILE = "resourceconfig.json"
INPUT_DATA_CONFIG_FILE = "inputdataconfig.json"
FIRST_HOST = "algo-1"

# the environment SageMaker's framework images set, as sagemaker-training-toolkit names it
HOSTS_ENV = "SM_HOSTS"
CURRENT_HOST_ENV = "SM_CURRENT_HOST"
CURRENT_INSTANCE_TYPE_ENV = "SM_CURRENT_INSTANCE_TYPE"
NUM_GPUS_ENV = "SM_NUM_GPUS"
MASTER_ADDR_ENV = "SM_MASTER_ADDR"
"""Not SageMaker's: a launcher that runs a job's hosts elsewhere than SageMaker (local mode's processes on
loopback) says where the first host's rendezvous listens, which SageMaker resolves from the host names."""
MASTER_PORT_ENV = "SM_MASTER_PORT"
MASTER_PORT = "29500"
"""torchrun's default rendezvous port, where a SageMaker job's first host listens."""


@dataclass(frozen=True)
class Paths:
    """The ``/opt/ml`` layout below one base folder."""

    base: Path

    @classmethod
    def from_env(cls) -> Paths:
        return cls(Path(os.environ.get(BASE_ENV) or DEFAULT_BASE))

    @property
    def is_default_base(self) -> bool:
        return str(self.base) == DEFAULT_BASE

    @property
    def input_config(self) -> Path:
        return self.base / "input" / "config"

    @property
    def hyperparameters(self) -> Path:
        return self.input_config / HYPERPARAMETERS_FILE

    @property
    def resource_config(self) -> Path:
        return self.input_config / RESOURCE_CONFIG_FILE

    @property
    def input_data_config(self) -> Path:
        return self.input_config / INPUT_DATA_CONFIG_FILE

    @property
    def input_data(self) -> Path:
        return self.base / "input" / "data"

    def channel(self, name: str) -> Path:
        return self.input_data / name

    @property
    def code(self) -> Path:
        return self.base / "code"

    @property
    def checkpoints(self) -> Path:
        return self.base / "checkpoints"

    @property
    def model(self) -> Path:
        return self.base / "model"

    @property
    def output(self) -> Path:
        return self.base / "output"

    @property
    def output_data(self) -> Path:
        """Packaged into ``output.tar.gz`` by SageMaker."""
        return self.output / "data"

    @property
    def failure(self) -> Path:
        return self.output / "failure"

    @property
    def logs(self) -> Path:
        """Local copies of the run logs (in ``output/data``, so SageMaker packages them too)."""
        return self.output_data / "logs"

    def log_file(self, run_name: str) -> Path:
        return self.logs / f"{run_name}.log"

    def prediction_file(self, run_name: str) -> Path:
        return self.output_data / "predictions" / f"{run_name}.json"

    def lay_out(self) -> None:
        """Make the folders SageMaker makes before a job starts."""
        for d in (
            self.input_config,
            self.input_data,
            self.model,
            self.output_data,
            self.code,
            self.checkpoints,
        ):
            d.mkdir(parents=True, exist_ok=True)


def resource_config(current_host: str, all_hosts: list[str], network_interface: str) -> dict[str, object]:
    """``resourceconfig.json`` as SageMaker writes it (the keys trainsweep's readers use)."""
    return {"current_host": current_host, "hosts": all_hosts, "network_interface_name": network_interface}


def hosts(paths: Paths, env: Mapping[str, str] | None = None) -> tuple[list[str], str]:
    """(all hosts, this host) from ``SM_HOSTS``/``SM_CURRENT_HOST`` or SageMaker's resourceconfig.json."""
    env = os.environ if env is None else env
    env_hosts, env_current = env.get(HOSTS_ENV), env.get(CURRENT_HOST_ENV)
    if env_hosts and env_current:
        try:
            hs = json.loads(env_hosts)
        except json.JSONDecodeError:
            hs = [h for h in env_hosts.split(",") if h]
        return [str(h) for h in hs], env_current
    try:
        rc = json.loads(paths.resource_config.read_text())
        return list(rc["hosts"]), str(rc["current_host"])
    except (OSError, ValueError, KeyError):
        return [FIRST_HOST], FIRST_HOST


def instance_type(paths: Paths) -> str | None:
    """This instance's type: ``SM_CURRENT_INSTANCE_TYPE`` or SageMaker's resourceconfig.json, else None."""
    if os.environ.get(CURRENT_INSTANCE_TYPE_ENV):
        return os.environ[CURRENT_INSTANCE_TYPE_ENV]
    try:
        value = json.loads(paths.resource_config.read_text()).get("current_instance_type")
    except (OSError, ValueError, AttributeError):
        return None
    return str(value) if value else None


def rendezvous(all_hosts: list[str]) -> tuple[str, str]:
    """Where the first host's launcher listens: its name and torchrun's default port on SageMaker, or
    where ``SM_MASTER_ADDR`` / ``SM_MASTER_PORT`` say."""
    return os.environ.get(MASTER_ADDR_ENV) or all_hosts[0], os.environ.get(MASTER_PORT_ENV) or MASTER_PORT
