"""The embedded AWS: an in-process moto server with local executors where moto has none.

:class:`EmbeddedAws` starts a fresh ``ThreadedMotoServer`` on a free loopback port with Step Functions
execution on, and installs, for its lifetime only:

* the SageMaker ``createTrainingJob.sync`` service handler for the interpreter (``sfn_sagemaker``);
* the Distributed Map's ``ResultWriter`` that writes the results moto drops (``sfn_map``);
* Lambdas run from their handler source (``lambda_runner``);
* SageMaker training jobs run as local processes (:mod:`trainsweep.local.sagemaker`);
* asynchronous S3 -> Lambda notifications (:mod:`trainsweep.local.notifications`);
* custom resources without CDK's framework Lambdas (:mod:`trainsweep.local.deploy`);
* the alias of moto's two Step Functions backends (CloudFormation creates state machines in one,
  executions look in the other).

:meth:`EmbeddedAws.close` stops training processes and running executions, drains notifications, shuts
the server down, releases its port, resets moto's state and restores every patch and variable. Use it as
a context manager; it also runs on Ctrl-C.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

from trainsweep.local.patching import Patches

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient
    from mypy_boto3_lambda import LambdaClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_ssm import SSMClient
    from mypy_boto3_stepfunctions import SFNClient

DEFAULT_REGION = "us-east-1"


class EmbeddedAws:
    """One local AWS for one run. Not reentrant: moto's state is process-wide."""

    def __init__(
        self,
        *,
        region: str = DEFAULT_REGION,
        entry_point: Path | None = None,
        notification_workers: int = 2,
        stop_grace_s: float = 10.0,
        has_gpu: Callable[[], bool] | None = None,
        job_env: dict[str, str] | None = None,
        handler_resolver: Callable[[Any], Any] | None = None,
    ) -> None:
        self.region = region
        self._entry_point = entry_point
        self._notification_workers = notification_workers
        self._stop_grace_s = stop_grace_s
        self._has_gpu = has_gpu
        self._job_env = job_env or {}
        self._handler_resolver = handler_resolver
        self._patches = Patches()
        self._saved_env: dict[str, str | None] = {}
        self._server: Any = None
        self.credentials: Any = None
        """This run's :class:`~trainsweep.local.access.SweepCredentials` (set by :meth:`start`)."""
        self.port: int | None = None
        self.sagemaker: Any = None
        self.notifications: Any = None
        self.custom_resources: Any = None
        self.timings: dict[str, float] = {}
        self._warnings: Any = None
        self._log_levels: dict[str, int] = {}

    # ---- lifecycle ------------------------------------------------------------------------------

    @property
    def endpoint_url(self) -> str:
        if self.port is None:
            raise RuntimeError("the embedded AWS is not started")
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> EmbeddedAws:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> EmbeddedAws:
        t0 = time.perf_counter()
        import boto3
        import moto.stepfunctions.models as sfn_models
        from moto import settings
        from moto.core.config import default_user_config
        from moto.moto_api._internal.models import moto_api_backend
        from moto.stepfunctions.parser.asl.utils import boto_client
        from moto.stepfunctions.parser.models import stepfunctions_parser_backends

        from trainsweep.local import lambda_runner, sfn_map, sfn_sagemaker
        from trainsweep.local.access import (
            GuardedMotoServer,
            exempt_custom_resource_answers,
            issue_credentials,
        )
        from trainsweep.local.clients import SignedBoto3
        from trainsweep.local.deploy import ACCOUNT_ID, CustomResources
        from trainsweep.local.notifications import AsyncNotifications
        from trainsweep.local.sagemaker import ENTRY_POINT, LocalSageMaker

        moto_api_backend.reset()  # a fresh AWS: nothing from an earlier run in this process
        self._quiet()
        self._patches.set_item(default_user_config, "stepfunctions", {"execute_state_machine": True})
        self._patches.set_item(default_user_config, "lambda", {"use_docker": True})
        # CloudFormation creates state machines through this module global; executions read the parser's
        # backend. Modules that import the name must bind the original first (they would keep the alias).
        importlib.import_module("moto.stepfunctions.responses")
        self._patches.set(sfn_models, "stepfunctions_backends", stepfunctions_parser_backends)
        sfn_sagemaker.install()
        sfn_map.install()
        lambda_runner.install(
            self._handler_resolver, async_s3=False
        )  # our notification workers make S3 events asynchronous

        # Only this run's processes get in: its own access key, every request's signature checked by
        # moto's IAM access control from the first request on (see trainsweep.local.access).
        self.credentials = issue_credentials(ACCOUNT_ID)
        # boto3's default session keeps the first credentials it read: a fresh one reads this run's.
        self._patches.set(boto3, "DEFAULT_SESSION", None)
        self._patches.set(settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)
        exempt_custom_resource_answers(self._patches)
        # The interpreter signs its tasks' requests with fixed dummy keys: sign them with this run's.
        self._patches.set(boto_client, "boto3", SignedBoto3(boto_client.boto3, self.credentials.as_env()))
        self._server = GuardedMotoServer(self.credentials)
        self._server.start()
        self.port = int(self._server.get_host_and_port()[1])
        self._set_env("MOTO_PORT", str(self.port))
        self._set_env("AWS_ENDPOINT_URL", self.endpoint_url)
        self._set_env("AWS_DEFAULT_REGION", self.region)
        for k, v in self.credentials.as_env().items():
            self._set_env(k, v)
        self._set_env("AWS_SESSION_TOKEN", None)
        self._set_env("AWS_PROFILE", None)
        # Handlers log to CloudWatch on AWS, not to the user's terminal: keep their INFO lines out of the
        # live table (set POWERTOOLS_LOG_LEVEL=INFO to see them).
        self._set_env("POWERTOOLS_LOG_LEVEL", os.environ.get("POWERTOOLS_LOG_LEVEL", "WARNING"))

        self.notifications = AsyncNotifications(workers=self._notification_workers)
        self.notifications.install()
        self.custom_resources = CustomResources(response_token=self.credentials.token)
        self.custom_resources.install()
        self.sagemaker = LocalSageMaker(
            endpoint_url=self.endpoint_url,
            region=self.region,
            entry_point=self._entry_point or ENTRY_POINT,
            env={**self.credentials.as_env(), **self._job_env},
            stop_grace_s=self._stop_grace_s,
            has_gpu=self._has_gpu,
        )
        self.sagemaker.install()
        self.timings["server_start"] = time.perf_counter() - t0
        return self

    def close(self, *, drain_timeout: float = 60.0) -> None:
        """Stop everything this run started; safe to call twice."""
        if self._server is None:
            self._patches.restore()
            return
        with contextlib.suppress(Exception):
            self.stop_executions()
        if self.sagemaker is not None:
            self.sagemaker.close()
        if self.notifications is not None:
            self.notifications.drain(stall_s=drain_timeout)
            self.notifications.close()
        if self.custom_resources is not None:
            self.custom_resources.restore()
        server, self._server = self._server, None
        server.stop()
        with contextlib.suppress(Exception):
            server._server.server_close()  # stop() leaves the socket open
        from trainsweep.local import lambda_runner

        lambda_runner.uninstall()
        self._patches.restore()
        if self._warnings is not None:
            self._warnings.__exit__(None, None, None)
            self._warnings = None
        import logging

        for name, level in self._log_levels.items():
            logging.getLogger(name).setLevel(level)
        self._log_levels.clear()
        from moto.moto_api._internal.models import moto_api_backend

        moto_api_backend.reset()
        for k, v in self._saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        self._saved_env.clear()
        self.port = None

    def stop_executions(self) -> int:
        """Stop every running Step Functions execution (the Map's waiting tasks end with it)."""
        sfn = self.client("stepfunctions")
        stopped = 0
        for machine in sfn.list_state_machines().get("stateMachines", []):
            arn = machine["stateMachineArn"]
            for ex in sfn.list_executions(stateMachineArn=arn, statusFilter="RUNNING").get("executions", []):
                with contextlib.suppress(Exception):
                    sfn.stop_execution(executionArn=ex["executionArn"], cause="local run ended")
                    stopped += 1
        return stopped

    # ---- clients --------------------------------------------------------------------------------

    @overload
    def client(self, service: Literal["cloudformation"]) -> CloudFormationClient: ...
    @overload
    def client(self, service: Literal["lambda"]) -> LambdaClient: ...
    @overload
    def client(self, service: Literal["s3"]) -> S3Client: ...
    @overload
    def client(self, service: Literal["sagemaker"]) -> SageMakerClient: ...
    @overload
    def client(self, service: Literal["ssm"]) -> SSMClient: ...
    @overload
    def client(self, service: Literal["stepfunctions"]) -> SFNClient: ...
    @overload
    def client(self, service: str) -> Any: ...
    def client(self, service: str) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(  # type: ignore[call-overload]  # the stubs type literal service names only
            service,
            endpoint_url=self.endpoint_url,
            region_name=self.region,
            aws_access_key_id=self.credentials.access_key_id,
            aws_secret_access_key=self.credentials.secret_access_key,
            config=Config(retries={"max_attempts": 2, "mode": "standard"}),
        )

    def deploy(
        self, *, stack_name: str | None = None, root: Path | None = None, assembly: Path | None = None
    ) -> Any:
        """Create the project's stack here (synthesized now unless ``assembly`` is given); returns a
        :class:`~trainsweep.local.deploy.DeployedStack`."""
        from trainsweep.local.deploy import PROJECT_ROOT, read_stacks, synthesize

        if assembly is None:
            t0 = time.perf_counter()
            assembly = synthesize(root or PROJECT_ROOT, region=self.region)
            self.timings["synth"] = time.perf_counter() - t0
        stacks = read_stacks(assembly)
        if stack_name:
            stacks = [s for s in stacks if s.name == stack_name] or stacks[:1]
        return self.deploy_template(stacks[0], stack_name=stack_name)

    def deploy_template(self, stack: Any, *, stack_name: str | None = None) -> Any:
        from trainsweep.local.deploy import deploy_stack

        t0 = time.perf_counter()
        deployed = deploy_stack(
            stack,
            cfn=self.client("cloudformation"),
            s3=self.client("s3"),
            ssm=self.client("ssm"),
            region=self.region,
            custom_resources=self.custom_resources,
            stack_name=stack_name,
            lambda_=self.client("lambda"),
            sqs=self.client("sqs"),
        )
        self.timings["deploy"] = time.perf_counter() - t0
        return deployed

    # ---- helpers --------------------------------------------------------------------------------

    def _quiet(self) -> None:
        """The server's request log and moto's notes on resources it skips are noise for users."""
        import logging
        import warnings

        for name in ("werkzeug", "moto"):
            logger = logging.getLogger(name)
            self._log_levels[name] = logger.level
            logger.setLevel(max(logger.level, logging.ERROR))
        self._warnings = warnings.catch_warnings()
        self._warnings.__enter__()
        warnings.filterwarnings("ignore", message=".*not supported by moto's CloudFormation.*")

    def _set_env(self, key: str, value: str | None) -> None:
        if key not in self._saved_env:
            self._saved_env[key] = os.environ.get(key)
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
