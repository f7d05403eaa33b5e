"""moto runs Lambda functions from their handler source once the runner is installed."""

from __future__ import annotations

import io
import json
import zipfile

import boto3
import pytest
from moto import mock_aws

from trainsweep.local import lambda_runner


def _zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("handler.py", "def handler(event, context):\n    return event\n")
    return buf.getvalue()


@pytest.fixture
def lambdas(tmp_path):
    (tmp_path / "echo_env").mkdir()
    (tmp_path / "echo_env" / "handler.py").write_text(
        "import os\n"
        "import boto3\n"
        "def handler(event, context):\n"
        "    if event.get('fail'):\n"
        "        raise ValueError('asked to fail')\n"
        "    boto3.client('s3').put_object(Bucket=os.environ['BUCKET'], Key='seen', Body=b'x')\n"
        "    return {'got': event, 'bucket': os.environ['BUCKET'], 'fn': context.function_name}\n"
    )
    lambda_runner.install(lambda_runner.source_resolver(tmp_path), async_s3=True)
    yield tmp_path
    lambda_runner.uninstall()


@pytest.fixture
def aws(lambdas):
    with mock_aws():
        iam = boto3.client("iam")
        role = iam.create_role(RoleName="r", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        boto3.client("s3").create_bucket(Bucket="bkt")
        fn = boto3.client("lambda").create_function(
            FunctionName="echo",
            Runtime="python3.12",
            Role=role,
            Handler="handler.handler",
            Code={"ZipFile": _zip()},
            Environment={"Variables": {lambda_runner.FUNCTION_ENV: "echo_env", "BUCKET": "bkt"}},
        )
        yield fn


def test_invoke_runs_the_handler_from_source_with_the_function_environment(aws):
    out = boto3.client("lambda").invoke(FunctionName="echo", Payload=json.dumps({"a": 1}))
    assert "FunctionError" not in out
    assert json.loads(out["Payload"].read()) == {"got": {"a": 1}, "bucket": "bkt", "fn": "echo"}
    assert boto3.client("s3").get_object(Bucket="bkt", Key="seen")["Body"].read() == b"x"


def test_a_raising_handler_reports_a_function_error_with_its_type(aws):
    out = boto3.client("lambda").invoke(FunctionName="echo", Payload=json.dumps({"fail": True}))
    assert out["FunctionError"]
    payload = json.loads(out["Payload"].read())
    assert payload["errorType"] == "ValueError"
    assert payload["errorMessage"] == "asked to fail"


def test_s3_notifications_run_asynchronously_and_can_be_awaited(aws):
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="src")
    s3.put_bucket_notification_configuration(
        Bucket="src",
        NotificationConfiguration={
            "LambdaFunctionConfigurations": [
                {
                    "LambdaFunctionArn": aws["FunctionArn"],
                    "Events": ["s3:ObjectCreated:*"],
                    "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": "in/"}]}},
                }
            ]
        },
    )
    s3.delete_object(Bucket="bkt", Key="seen")
    s3.put_object(Bucket="src", Key="in/x.log", Body=b"hello")
    assert lambda_runner.wait_idle(10)
    assert s3.get_object(Bucket="bkt", Key="seen")["Body"].read() == b"x"


def test_functions_without_a_local_handler_fail_clearly(aws, lambdas):
    lambda_runner.install(lambda _fn: None)
    out = boto3.client("lambda").invoke(FunctionName="echo", Payload=b"{}")
    assert "no local handler" in json.loads(out["Payload"].read())["errorMessage"]
