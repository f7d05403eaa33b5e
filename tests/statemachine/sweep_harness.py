"""Harness: the synthesized state machine deployed into moto with its real Lambda handlers.

Each sweep gets a fresh moto with the stack's pieces the definition uses (bucket, topic, the four
functions with their template environment) and scripted SageMaker outcomes.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

ACCOUNT = "123456789012"
REGION = "us-east-1"
BUCKET = "trainsweep-sm-test"
# A failure reason longer than any SageMaker writes (it cuts at 1 KiB): the state must not grow with it.
LONG_REASON = "AlgorithmError: " + "x" * 10_000
# Short, real backoff: moto really sleeps between attempts.
INVALID_REQUEST = "The instance type ml.p5.48xlarge is not supported in this region"
RETRY_CONTEXT = {"interval_s": 1, "max_attempts": 3, "backoff_rate": 2.0, "max_delay_s": 2}


def render(value: Any, refs: dict[str, str]) -> Any:
    """Resolve the CloudFormation intrinsics CDK uses in the definition and function environments."""
    pseudo = {
        "AWS::Partition": "aws",
        "AWS::Region": REGION,
        "AWS::AccountId": ACCOUNT,
        "AWS::URLSuffix": "amazonaws.com",
    }
    if isinstance(value, dict):
        if "Ref" in value:
            return pseudo.get(value["Ref"]) or refs[value["Ref"]]
        if "Fn::GetAtt" in value:
            return refs[f"{value['Fn::GetAtt'][0]}.{value['Fn::GetAtt'][1]}"]
        if "Fn::Join" in value:
            sep, parts = value["Fn::Join"]
            return sep.join(str(render(p, refs)) for p in parts)
        if "Fn::Sub" in value:
            text = value["Fn::Sub"]
            for k, v in pseudo.items():
                text = text.replace("${" + k + "}", v)
            return text
        return {k: render(v, refs) for k, v in value.items()}
    if isinstance(value, list):
        return [render(v, refs) for v in value]
    return value


class FakeSageMaker:
    """Scripted training outcomes, keyed by batch size: what the container and SageMaker would do.

    ``ok`` uploads a log and completes; ``fail`` / ``oom`` upload a partial log and fail with that
    reason; ``fail-long`` fails with a :data:`LONG_REASON` (10 kB) reason and no log; ``throttle``
    rejects the first CreateTrainingJob call, then behaves like ``ok``; ``invalid`` rejects every call
    with a ValidationException (a request no retry can fix); ``cloudwatch-only`` completes
    but its log exists only in CloudWatch. ``log`` replaces the log a completed job writes (a user's own
    image logs in its own format).
    """

    def __init__(self, script: dict[int, str], log: bytes | None = None):
        self.script = script
        self.log = log
        self.calls: list[dict[str, Any]] = []
        self.rejected: list[str] = []
        self.lock = threading.Lock()
        self.clients: tuple[Any, Any] | None = None

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from moto.core.exceptions import JsonRESTError
        from moto.sagemaker.models import SageMakerModelBackend

        original = SageMakerModelBackend.create_training_job
        fake = self

        def create_training_job(backend: Any, **kwargs: Any) -> Any:
            hp = kwargs["hyper_parameters"]
            outcome = fake.script.get(int(hp.get("batch-size", 0)), "ok")
            name = kwargs["training_job_name"]
            with fake.lock:
                if outcome == "throttle" and name not in fake.rejected:
                    fake.rejected.append(name)
                    raise JsonRESTError("ThrottlingException", "Rate exceeded")
                if outcome == "invalid":
                    fake.rejected.append(name)
                    raise JsonRESTError("ValidationException", INVALID_REQUEST)
                fake.calls.append(kwargs)
            job = original(backend, **kwargs)
            fake.run(job, name, hp, outcome)
            return job

        monkeypatch.setattr(SageMakerModelBackend, "create_training_job", create_training_job)

    def run(self, job: Any, name: str, hp: dict[str, str], outcome: str) -> None:
        with self.lock:  # jobs start in many threads at once; creating boto3 clients is not thread-safe
            if self.clients is None:  # made once: a client costs ~15 ms of CPU, thousands of jobs
                self.clients = (
                    boto3.client("s3", region_name=REGION),
                    boto3.client("logs", region_name=REGION),
                )
            s3, logs = self.clients
        # Built-in workloads get run-names; users' scripts and images trainsweep-run-names.
        run_names = hp.get("run-names") or hp["trainsweep-run-names"]
        key = hp["trainsweep-log-prefix"] + run_names.split(",")[0] + ".log"
        job.billable_time_in_seconds = 321
        if outcome in ("ok", "throttle"):
            s3.put_object(Bucket=BUCKET, Key=key, Body=make_log() if self.log is None else self.log)
        elif outcome == "cloudwatch-only":
            group, stream = "/aws/sagemaker/TrainingJobs", f"{name}/algo-1-1700000000"
            with contextlib.suppress(logs.exceptions.ResourceAlreadyExistsException):
                logs.create_log_group(logGroupName=group)
            logs.create_log_stream(logGroupName=group, logStreamName=stream)
            now = int(time.time() * 1000)
            events = [
                {"timestamp": now + i, "message": m} for i, m in enumerate(make_log().decode().splitlines())
            ]
            logs.put_log_events(logGroupName=group, logStreamName=stream, logEvents=events)
        elif outcome == "fail-long":
            job.training_job_status = "Failed"
            job.failure_reason = LONG_REASON
        elif outcome in ("fail", "oom"):
            s3.put_object(Bucket=BUCKET, Key=key, Body=make_log(epochs=1, steps=2, finished=False))
            job.training_job_status = "Failed"
            job.failure_reason = (
                "AlgorithmError: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
                if outcome == "oom"
                else "AlgorithmError: ExecuteUserScriptError: exit code 1"
            )


class StatePayloads:
    """Every state's input and output size (bytes of JSON), recorded while the interpreter runs: the
    parent execution's states and each Distributed Map child's. Step Functions' limit is 256 KiB."""

    def __init__(self) -> None:
        self.sizes: list[tuple[str, str, int]] = []  # (state, "input" | "output", bytes)
        self.crashes: list[str] = []  # Python errors inside states (the interpreter's States.Runtime)
        self.lock = threading.Lock()
        self.clients: tuple[Any, Any] | None = None

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
            FailureEventException,
        )
        from moto.stepfunctions.parser.asl.component.state.exec.execute_state import ExecutionState
        from moto.stepfunctions.parser.asl.component.state.state import CommonStateField

        from_error = ExecutionState._from_error
        crashes = self.crashes

        def from_error_recorded(state: Any, env: Any, ex: Exception) -> Any:
            if not isinstance(ex, FailureEventException):  # becomes an uncatchable States.Runtime
                crashes.append(f"{state.name}: {''.join(traceback.format_exception(ex))}")
            return from_error(state, env, ex)

        monkeypatch.setattr(ExecutionState, "_from_error", from_error_recorded)
        entered = CommonStateField._get_state_entered_event_details
        verify = CommonStateField._verify_size_quota
        record = self._record

        def entered_details(state: Any, env: Any) -> Any:
            record(state.name, "input", env.states.get_input())
            return entered(state, env)

        def verify_size(state: Any, env: Any, value: Any) -> None:
            record(state.name, "output", value)
            verify(state, env, value)

        monkeypatch.setattr(CommonStateField, "_get_state_entered_event_details", entered_details)
        monkeypatch.setattr(CommonStateField, "_verify_size_quota", verify_size)

    def _record(self, state: str, kind: str, value: Any) -> None:
        size = len(json.dumps(value, separators=(",", ":")).encode())
        with self.lock:
            self.sizes.append((state, kind, size))

    def largest(self) -> tuple[str, str, int]:
        with self.lock:
            return max(self.sizes, key=lambda s: s[2])


def make_log(epochs: int = 2, steps: int = 5, finished: bool = True) -> bytes:
    """A small cloud-ML style training log (what the seed scripts printed)."""
    lines = ["Tempo de Inicializacao: 1.5"]
    for e in range(1, epochs + 1):
        lines.append(f"Epoch {e}/{epochs}")
        for s in range(1, steps + 1):
            lines.append(f"{s} step training time: {0.25 + 0.01 * s:.6f}s")
        if finished:
            lines.append("Validation time: 0.300000s")
            lines.append(f"Epoch time: {steps * 0.3 + 0.3:.6f}")
    if finished:
        lines.append("Duracao do treinamento: 5.0")
    return ("\n".join(lines) + "\n").encode()


class Sweep:
    """A deployed copy of the state machine in moto, and what it did."""

    def __init__(self, template: dict[str, Any], sagemaker: FakeSageMaker):
        from trainsweep.aws.outputs import STATE_MACHINE_ARN

        self.sagemaker = sagemaker
        self.payloads: StatePayloads | None = None
        res = template["Resources"]
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket=BUCKET)
        self.s3 = s3
        sns = boto3.client("sns", region_name=REGION)
        sqs = boto3.client("sqs", region_name=REGION)
        iam = boto3.client("iam", region_name=REGION)
        role = iam.create_role(RoleName="sm", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        refs: dict[str, str] = {}
        for lid, r in res.items():
            if r["Type"] == "AWS::S3::Bucket":
                refs[lid] = BUCKET
                refs[f"{lid}.Arn"] = f"arn:aws:s3:::{BUCKET}"
            elif r["Type"] == "AWS::SNS::Topic":
                self.topic = sns.create_topic(Name="trainsweep")["TopicArn"]
                refs[lid] = self.topic
            elif r["Type"] in ("AWS::IAM::Role", "AWS::KMS::Key"):
                refs[f"{lid}.Arn"] = f"arn:aws:iam::{ACCOUNT}:role/{lid}"
        queue = sqs.create_queue(QueueName="notifications")["QueueUrl"]
        self.queue, self.sqs = queue, sqs
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        sns.subscribe(
            TopicArn=self.topic, Protocol="sqs", Endpoint=queue_arn, Attributes={"RawMessageDelivery": "true"}
        )
        lam = boto3.client("lambda", region_name=REGION)
        for lid, r in res.items():
            if r["Type"] != "AWS::Lambda::Function":
                continue
            env = render(r["Properties"].get("Environment", {}).get("Variables", {}), refs)
            if "TRAINSWEEP_FUNCTION" not in env:
                continue
            arn = lam.create_function(
                FunctionName=lid,
                Runtime="python3.12",
                Role=role,
                Handler="handler.handler",
                Code={"ZipFile": b"PK\x05\x06" + b"\x00" * 18},
                Timeout=r["Properties"].get("Timeout", 60),
                Environment={"Variables": env},
            )["FunctionArn"]
            refs[f"{lid}.Arn"] = arn
        sm = next(r for r in res.values() if r["Type"] == "AWS::StepFunctions::StateMachine")
        self.definition = json.loads(render(sm["Properties"]["DefinitionString"], refs))
        self.sfn = boto3.client("stepfunctions", region_name=REGION)
        self.arn = self.sfn.create_state_machine(
            name="trainsweep", definition=json.dumps(self.definition), roleArn=role
        )["stateMachineArn"]
        assert STATE_MACHINE_ARN in template["Outputs"]

    def run(self, execution_input: dict[str, Any], timeout: float = 240) -> dict[str, Any]:
        ex = self.sfn.start_execution(stateMachineArn=self.arn, input=json.dumps(execution_input))[
            "executionArn"
        ]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            d = self.sfn.describe_execution(executionArn=ex)
            if d["status"] != "RUNNING":
                return d
            time.sleep(0.2)
        raise AssertionError(f"execution still running after {timeout} s")

    def messages(self) -> list[str]:
        out = self.sqs.receive_message(QueueUrl=self.queue, MaxNumberOfMessages=10)
        return [m["Body"] for m in out.get("Messages", [])]

    def keys(self, prefix: str) -> set[str]:
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
        return {o["Key"] for p in pages for o in p.get("Contents", [])}

    def json(self, key: str) -> Any:
        return json.loads(self.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())


@contextlib.contextmanager
def moto_sweeps(template: dict[str, Any]) -> Iterator[Any]:
    """A fresh moto with the interpreter glue installed; yields ``make(script) -> Sweep``."""
    from trainsweep.local import lambda_runner, sfn_map, sfn_sagemaker

    sfn_sagemaker.install()
    sfn_map.install()
    lambda_runner.install(async_s3=True)
    with (
        pytest.MonkeyPatch.context() as mp,
        mock_aws(config={"stepfunctions": {"execute_state_machine": True}}),
    ):
        mp.setenv("AWS_DEFAULT_REGION", REGION)

        payloads = StatePayloads()
        payloads.install(mp)

        def make(script: dict[int, str], log: bytes | None = None) -> Sweep:
            fake = FakeSageMaker(script, log)
            fake.install(mp)
            sweep = Sweep(template, fake)
            sweep.payloads = payloads
            return sweep

        try:
            yield make
        finally:
            lambda_runner.wait_idle(30)
            lambda_runner.uninstall()
