"""The embedded AWS with a small hand-written stack: deploy, a .sync task, async notifications, cleanup.

The project's own stack is exercised end to end in tests/e2e; here each behaviour of the embedded AWS is
checked on its own, with handlers defined in this file and a tiny training entry point.
"""

from __future__ import annotations

import json
import socket
import textwrap
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote_plus

import pytest

from trainsweep.local.deploy import StackArtifact
from trainsweep.local.server import EmbeddedAws

ENTRY = """
import json, os, pathlib, sys, time
base = pathlib.Path(os.environ["SAGEMAKER_BASE_DIR"])
hp = json.loads((base / "input/config/hyperparameters.json").read_text())
print("training", hp)
if hp.get("fail") == "true":
    (base / "output/failure").write_text("ValueError: asked to fail")
    sys.exit(2)
time.sleep(float(hp.get("sleep", "0")))
"""

DEFINITION = {
    "StartAt": "Train",
    "States": {
        "Train": {
            "Type": "Task",
            "Resource": "arn:aws:states:::sagemaker:createTrainingJob.sync",
            "Parameters": {
                "TrainingJobName.$": "$.name",
                "HyperParameters.$": "$.hp",
                "AlgorithmSpecification": {
                    "TrainingImage": "local/image:latest",
                    "TrainingInputMode": "File",
                },
                "RoleArn": "arn:aws:iam::123456789012:role/sm",
                "OutputDataConfig": {"S3OutputPath": "s3://x/output/"},
                "ResourceConfig": {"InstanceType": "local", "InstanceCount": 1, "VolumeSizeInGB": 1},
                "StoppingCondition": {"MaxRuntimeInSeconds": 60},
            },
            "ResultSelector": {"status.$": "$.TrainingJobStatus", "billable.$": "$.BillableTimeInSeconds"},
            "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Failed"}],
            "End": True,
        },
        "Failed": {"Type": "Pass", "End": True},
    },
}


# What every CDK-synthesised test template here shares: the bootstrap version parameter, and the role its
# Lambda functions assume.
CDK_PARAMETERS: dict[str, Any] = {
    "BootstrapVersion": {
        "Type": "AWS::SSM::Parameter::Value<String>",
        "Default": "/cdk-bootstrap/hnb659fds/version",
    }
}
LAMBDA_ROLE: dict[str, Any] = {
    "Type": "AWS::IAM::Role",
    "Properties": {
        "AssumeRolePolicyDocument": {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "lambda.amazonaws.com"},
                    "Action": "sts:AssumeRole",
                }
            ],
        }
    },
}


def _template() -> dict[str, Any]:
    return {
        "Parameters": CDK_PARAMETERS,
        "Resources": {
            "Bucket": {"Type": "AWS::S3::Bucket"},
            "Role": LAMBDA_ROLE,
            "Fn": {
                "Type": "AWS::Lambda::Function",
                "Properties": {
                    "Code": {
                        "S3Bucket": {"Fn::Sub": "cdk-hnb659fds-assets-${AWS::AccountId}-${AWS::Region}"},
                        "S3Key": "code.zip",
                    },
                    "Handler": "handler.handler",
                    "Runtime": "python3.12",
                    "Role": {"Fn::GetAtt": ["Role", "Arn"]},
                    "Environment": {"Variables": {"TRAINSWEEP_FUNCTION": "record_event"}},
                },
            },
            "Notifications": {
                "Type": "Custom::S3BucketNotifications",
                "Properties": {
                    "ServiceToken": {"Fn::GetAtt": ["Fn", "Arn"]},
                    "BucketName": {"Ref": "Bucket"},
                    "NotificationConfiguration": {
                        "LambdaFunctionConfigurations": [
                            {
                                "Events": ["s3:ObjectCreated:*"],
                                "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": "logs/"}]}},
                                "LambdaFunctionArn": {"Fn::GetAtt": ["Fn", "Arn"]},
                            }
                        ]
                    },
                    "Managed": True,
                },
            },
            "Machine": {
                "Type": "AWS::StepFunctions::StateMachine",
                "Properties": {
                    "DefinitionString": json.dumps(DEFINITION),
                    "RoleArn": {"Fn::GetAtt": ["Role", "Arn"]},
                },
            },
        },
        "Outputs": {
            "BucketName": {"Value": {"Ref": "Bucket"}},
            "StateMachineArn": {"Value": {"Ref": "Machine"}},
        },
    }


@pytest.fixture
def stack_artifact(tmp_path: Path) -> StackArtifact:
    return with_lambda_asset(tmp_path, "LocalTest", _template())


def with_lambda_asset(tmp_path: Path, name: str, template: dict[str, Any]) -> StackArtifact:
    """``template`` as a deployable stack whose functions' code is one ``asset.code`` (a no-op handler
    that the embedded AWS replaces with trainsweep's own)."""
    code = tmp_path / "asset.code"
    code.mkdir()
    (code / "handler.py").write_text("def handler(event, context):\n    return {}\n")
    assets = {
        "files": {
            "code": {
                "source": {"path": "asset.code", "packaging": "zip"},
                "destinations": {
                    "d": {
                        "bucketName": "cdk-hnb659fds-assets-${AWS::AccountId}-${AWS::Region}",
                        "objectKey": "code.zip",
                    }
                },
            }
        }
    }
    return StackArtifact(name, template, assets, tmp_path)


class Recorder:
    """The Lambda handler of the test stack: records S3 events, slowly (parsing takes time)."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.keys: list[str] = []
        self.delay_s = delay_s
        self.lock = threading.Lock()

    def handler(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        time.sleep(self.delay_s)
        with self.lock:
            self.keys.extend(r["s3"]["object"]["key"] for r in event.get("Records", []))
        return {"ok": True}


@pytest.fixture
def make_aws(tmp_path: Path):
    entry = tmp_path / "train.py"
    entry.write_text(textwrap.dedent(ENTRY))
    started: list[EmbeddedAws] = []

    def make(recorder: Recorder) -> EmbeddedAws:
        aws = EmbeddedAws(entry_point=entry, stop_grace_s=1.0, handler_resolver=lambda fn: recorder.handler)
        started.append(aws.start())
        return aws

    yield make
    for aws in started:
        aws.close()


def _run(aws: EmbeddedAws, arn: str, payload: dict[str, Any]) -> dict[str, Any]:
    sfn = aws.client("stepfunctions")
    ex = sfn.start_execution(stateMachineArn=arn, input=json.dumps(payload))["executionArn"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        d = sfn.describe_execution(executionArn=ex)
        if d["status"] != "RUNNING":
            return d
        time.sleep(0.2)
    raise AssertionError("execution did not end")


def test_a_deployed_state_machine_runs_a_training_job_as_a_local_process(make_aws, stack_artifact) -> None:
    aws = make_aws(Recorder())
    stack = aws.deploy_template(stack_artifact)
    d = _run(aws, stack.output("StateMachineArn"), {"name": "job-ok", "hp": {"sleep": "0"}})
    assert d["status"] == "SUCCEEDED", d
    out = json.loads(d["output"])
    assert out["status"] == "Completed"
    assert out["billable"] >= 1
    described = aws.client("sagemaker").describe_training_job(TrainingJobName="job-ok")
    assert described["TrainingJobStatus"] == "Completed"
    assert described["SecondaryStatusTransitions"][-1]["Status"] == "Completed"
    logs = aws.client("logs").filter_log_events(logGroupName="/aws/sagemaker/TrainingJobs")["events"]
    assert any("training" in e["message"] for e in logs)


def test_a_failed_job_reaches_the_state_machine_with_its_failure_reason(make_aws, stack_artifact) -> None:
    aws = make_aws(Recorder())
    stack = aws.deploy_template(stack_artifact)
    d = _run(aws, stack.output("StateMachineArn"), {"name": "job-bad", "hp": {"fail": "true"}})
    assert d["status"] == "SUCCEEDED"  # caught
    error = json.loads(d["output"])["error"]
    assert "ValueError: asked to fail" in json.loads(error["Cause"])["FailureReason"]


def test_stop_training_job_stops_a_running_job(make_aws, stack_artifact) -> None:
    aws = make_aws(Recorder())
    stack = aws.deploy_template(stack_artifact)
    sfn = aws.client("stepfunctions")
    sfn.start_execution(
        stateMachineArn=stack.output("StateMachineArn"),
        input=json.dumps({"name": "job-long", "hp": {"sleep": "60"}}),
    )
    sm = aws.client("sagemaker")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if sm.describe_training_job(TrainingJobName="job-long")["SecondaryStatus"] == "Training":
                break
        except sm.exceptions.ClientError:
            pass
        time.sleep(0.1)
    sm.stop_training_job(TrainingJobName="job-long")
    deadline = time.monotonic() + 30
    while sm.describe_training_job(TrainingJobName="job-long")["TrainingJobStatus"] != "Stopped":
        assert time.monotonic() < deadline, "the job did not stop"
        time.sleep(0.1)


def test_s3_notifications_are_asynchronous_and_all_delivered(make_aws, stack_artifact) -> None:
    recorder = Recorder(delay_s=0.2)
    aws = make_aws(recorder)
    stack = aws.deploy_template(stack_artifact)
    s3 = aws.client("s3")
    bucket = stack.output("BucketName")
    t0 = time.monotonic()
    for i in range(10):
        s3.put_object(Bucket=bucket, Key=f"logs/run {i}.log", Body=b"x")
    s3.put_object(Bucket=bucket, Key="other/not-a-log.txt", Body=b"x")
    uploads = time.monotonic() - t0
    assert uploads < 10 * 0.2, "uploads waited for the handler: notifications are synchronous"
    assert aws.notifications.drain(30)
    # Keys arrive URL-encoded (handlers unquote_plus them, correct on AWS too).
    assert sorted(unquote_plus(k) for k in recorder.keys) == sorted(f"logs/run {i}.log" for i in range(10))
    assert aws.notifications.stats.delivered == 10
    assert aws.notifications.stats.failed == 0


def test_close_releases_the_port_and_restores_moto(make_aws, stack_artifact) -> None:
    aws = make_aws(Recorder())
    aws.deploy_template(stack_artifact)
    port = aws.port
    assert port is not None
    aws.close()
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        pass
    from moto.core.config import default_user_config

    assert default_user_config["stepfunctions"]["execute_state_machine"] is False
    assert not [t for t in threading.enumerate() if t.name.startswith(("s3-notify", "job-"))]


class Flaky(Recorder):
    """Fails its first ``failures`` invocations (AWS retries asynchronous invocations twice)."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures
        self.calls = 0

    def handler(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        self.calls += 1
        if self.calls <= self.failures:
            raise RuntimeError("transient")
        return super().handler(event, context)


def test_a_failed_notification_is_retried_until_it_succeeds(make_aws, stack_artifact) -> None:
    flaky = Flaky(failures=1)
    aws = make_aws(flaky)
    stack = aws.deploy_template(stack_artifact)
    aws.client("s3").put_object(Bucket=stack.output("BucketName"), Key="logs/a.log", Body=b"x")
    assert aws.notifications.drain(30)
    assert flaky.calls == 2
    assert [unquote_plus(k) for k in flaky.keys] == ["logs/a.log"]
    assert (aws.notifications.stats.retried, aws.notifications.stats.delivered) == (1, 1)


def test_a_notification_that_keeps_failing_is_counted_after_two_retries(make_aws, stack_artifact) -> None:
    flaky = Flaky(failures=10)
    aws = make_aws(flaky)
    stack = aws.deploy_template(stack_artifact)
    aws.client("s3").put_object(Bucket=stack.output("BucketName"), Key="logs/b.log", Body=b"x")
    assert aws.notifications.drain(30)
    assert flaky.calls == 3
    assert aws.notifications.stats.failed == 1
    assert aws.notifications.errors


def test_a_custom_resource_gets_string_properties_and_its_answer_reaches_the_stack(
    make_aws, stack_artifact
) -> None:
    import urllib.request

    seen: list[dict[str, Any]] = []

    class Answering(Recorder):
        def handler(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
            if "RequestType" not in event:
                return super().handler(event, context)
            seen.append(event["ResourceProperties"])
            body = json.dumps(
                {
                    "Status": "SUCCESS",
                    "PhysicalResourceId": "thing",
                    "StackId": event["StackId"],
                    "RequestId": event["RequestId"],
                    "LogicalResourceId": event["LogicalResourceId"],
                    "Data": {"Answer": "42"},
                }
            ).encode()
            # As AWS's cfn-response module does: an empty content type.
            req = urllib.request.Request(
                event["ResponseURL"], data=body, method="PUT", headers={"Content-Type": ""}
            )
            urllib.request.urlopen(req, timeout=10).read()
            return {}

    aws = make_aws(Answering())
    template = stack_artifact.template
    template["Resources"]["Thing"] = {
        "Type": "Custom::Thing",
        "Properties": {"ServiceToken": {"Fn::GetAtt": ["Fn", "Arn"]}, "Count": 5, "Enabled": True},
    }
    template["Outputs"]["Answer"] = {"Value": {"Fn::GetAtt": ["Thing", "Answer"]}}
    stack = aws.deploy_template(stack_artifact)
    assert seen and seen[0]["Count"] == "5" and seen[0]["Enabled"] == "true"
    assert stack.output("Answer") == "42"


def test_after_close_moto_in_process_mocks_behave_as_before(make_aws, stack_artifact) -> None:
    import boto3
    from moto import mock_aws

    aws = make_aws(Recorder())
    aws.deploy_template(stack_artifact)
    aws.close()
    template = {
        "Resources": {
            "M": {
                "Type": "AWS::StepFunctions::StateMachine",
                "Properties": {
                    "DefinitionString": json.dumps(
                        {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}
                    ),
                    "RoleArn": "arn:aws:iam::123456789012:role/r",
                },
            }
        }
    }
    with mock_aws():
        boto3.client("cloudformation", region_name="us-east-1").create_stack(
            StackName="After", TemplateBody=json.dumps(template)
        )
        machines = boto3.client("stepfunctions", region_name="us-east-1").list_state_machines()[
            "stateMachines"
        ]
    assert len(machines) == 1
