"""Where a sweep's runs are tracked: the spec's ``tracking`` field, ``{mlflow: URI or ARN, experiment}``.

``mlflow`` is an MLflow tracking URI (``http://host:5000``, ``https://...``, ``databricks``, ``file:///...``)
or the ARN of a SageMaker managed MLflow resource: a tracking server
(``arn:aws:sagemaker:REGION:ACCOUNT:mlflow-tracking-server/NAME``) or an MLflow App
(``arn:aws:sagemaker:REGION:ACCOUNT:mlflow-app/ID``). At the end of a sweep that ``trainsweep run`` watched,
the sweep is exported there as ``trainsweep export mlflow`` does (:mod:`trainsweep.mlflow_export`); with an
ARN, every training job also gets ``MlflowConfig`` in its ``CreateTrainingJob`` request, so SageMaker
tracks the job itself.

The model checks the form only (PlanSweep validates specs where MLflow is not installed);
:func:`check_client` refuses the field where the sweep is started without the MLflow client.
"""

from __future__ import annotations

import importlib.util
import re
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from trainsweep.errors import SpecError

INSTALL = "pip install 'trainsweep[mlflow]'"
SAGEMAKER_PLUGIN = "sagemaker-mlflow"
"""The MLflow plugin that makes an MLflow client talk to a SageMaker managed MLflow ARN."""
_SAGEMAKER_PLUGIN_MODULE = "sagemaker_mlflow"
# SageMaker's MlflowResourceArn (CreateTrainingJob's MlflowConfig), narrowed to the two resource kinds
# that exist: tracking servers and MLflow Apps.
_SAGEMAKER_ARN = re.compile(
    r"arn:aws[a-z-]*:sagemaker:(?P<region>[a-z0-9-]+):(?P<account>\d{12}):"
    r"(?P<kind>mlflow-tracking-server|mlflow-app)/(?P<name>[A-Za-z0-9][A-Za-z0-9-]*)"
)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
# MLflow's own tracking URIs without a "://" (databricks, databricks://profile, databricks-uc).
_BARE_SCHEMES = ("databricks", "databricks-uc")
EXPERIMENT_MAX = 256  # MlflowConfig.MlflowExperimentName


def is_sagemaker_arn(uri: str) -> bool:
    """True when ``uri`` is a SageMaker managed MLflow ARN (a tracking server's or an MLflow App's)."""
    return _SAGEMAKER_ARN.fullmatch(uri) is not None


def uri_problem(uri: str) -> str | None:
    """What is wrong with ``uri`` as ``tracking.mlflow``, or None."""
    if uri.startswith("arn:"):
        if is_sagemaker_arn(uri):
            return None
        return (
            f"{uri!r} is not a SageMaker MLflow ARN: give arn:aws:sagemaker:REGION:ACCOUNT:"
            "mlflow-tracking-server/NAME or arn:aws:sagemaker:REGION:ACCOUNT:mlflow-app/ID"
        )
    if uri in _BARE_SCHEMES:
        return None
    scheme, sep, _ = uri.partition("://")
    if not sep or not _SCHEME.fullmatch(scheme) or len(scheme) < 2:  # "C://..." is a path, not a scheme
        return (
            f"{uri!r} is not a tracking URI: give one with its scheme (http://host:5000, https://..., "
            "file:///path/mlruns, databricks) or a SageMaker MLflow ARN"
        )
    parts = urlsplit(uri)
    if parts.username or parts.password:
        return (
            "the tracking URI holds credentials, which would be stored with the sweep's spec: "
            "set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (or MLFLOW_TRACKING_TOKEN) instead"
        )
    return None


class Tracking(BaseModel):
    """The spec's ``tracking``: the MLflow tracking server a sweep lands in, and its experiment."""

    model_config = ConfigDict(extra="forbid")

    mlflow: str = Field(
        min_length=1,
        max_length=2048,
        description="MLflow tracking URI (http://host:5000, https://..., databricks, file:///path) or a "
        "SageMaker managed MLflow ARN (arn:aws:sagemaker:REGION:ACCOUNT:mlflow-tracking-server/NAME or "
        "...:mlflow-app/ID): the sweep is exported there at its end; with an ARN every training job "
        "also gets MlflowConfig.",
    )
    experiment: str | None = Field(
        None,
        min_length=1,
        max_length=EXPERIMENT_MAX,
        description="MLflow experiment name (default: the sweep's name): one parent run per sweep, one "
        "child run per configuration.",
    )

    @field_validator("mlflow")
    @classmethod
    def _known_form(cls, value: str) -> str:
        problem = uri_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    def experiment_name(self, sweep_name: str) -> str:
        """The experiment the sweep lands in: ``experiment``, else the spec's ``name``."""
        return self.experiment or sweep_name


def job_fields(tracking: Tracking | None, sweep_name: str, job_name: str) -> dict[str, Any]:
    """The job record's ``mlflow_config`` (CreateTrainingJob's ``MlflowConfig``) when ``tracking`` names
    a SageMaker MLflow ARN, else nothing: SageMaker tracks only into its own managed MLflow."""
    if tracking is None or not is_sagemaker_arn(tracking.mlflow):
        return {}
    return {
        "mlflow_config": {
            "MlflowResourceArn": tracking.mlflow,
            "MlflowExperimentName": tracking.experiment_name(sweep_name),
            "MlflowRunName": job_name,
        }
    }


def _missing(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):  # a module blocked in sys.modules (None) has no spec either
        return True


def check_client(tracking: Tracking | None) -> None:
    """Refuse ``tracking`` where the MLflow client (and, for an ARN, SageMaker's MLflow plugin) is not
    installed: the sweep would run and then fail to land.

    Raises:
        SpecError: on ``tracking.mlflow``, with the command that installs what is missing.
    """
    if tracking is None:
        return
    arn = is_sagemaker_arn(tracking.mlflow)
    if _missing("mlflow"):
        install = f"{INSTALL} {SAGEMAKER_PLUGIN}" if arn else INSTALL
        message = f"tracking needs the MLflow client, which is not installed: {install}"
    elif arn and _missing(_SAGEMAKER_PLUGIN_MODULE):
        message = (
            f"a SageMaker MLflow ARN needs SageMaker's MLflow plugin, which is not installed: "
            f"pip install {SAGEMAKER_PLUGIN}"
        )
    else:
        return
    raise SpecError(f"tracking.mlflow: {message}", [("tracking.mlflow", message)])
