"""Another local process trying the embedded AWS: every service a local sweep uses, and moto's control API.

Run as a script (a separate process, as an intruder would be):
``python aws_intruder.py ENDPOINT ACCESS_KEY_ID SECRET`` (``-`` ``-`` for unsigned requests). Prints one JSON
object: call -> the HTTP status it got (or the error's text when no HTTP answer came).
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import boto3
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import ClientError

ROLE = "arn:aws:iam::123456789012:role/intruder"

CALLS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "s3:ListBuckets": ("s3", lambda c: c.list_buckets()),
    "s3:PutObject": ("s3", lambda c: c.put_object(Bucket="trainsweep-results", Key="logs/x.log", Body=b"x")),
    "states:ListStateMachines": ("stepfunctions", lambda c: c.list_state_machines()),
    "states:StartExecution": (
        "stepfunctions",
        lambda c: c.start_execution(
            stateMachineArn="arn:aws:states:us-east-1:123456789012:stateMachine:any", input="{}"
        ),
    ),
    "sagemaker:ListTrainingJobs": ("sagemaker", lambda c: c.list_training_jobs()),
    "sagemaker:CreateTrainingJob": (
        "sagemaker",
        lambda c: c.create_training_job(
            TrainingJobName="intruder",
            AlgorithmSpecification={"TrainingImage": "local/image:latest", "TrainingInputMode": "File"},
            RoleArn=ROLE,
            OutputDataConfig={"S3OutputPath": "s3://trainsweep-results/output/"},
            ResourceConfig={"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
            StoppingCondition={"MaxRuntimeInSeconds": 60},
            HyperParameters={"sagemaker_program": "evil.py"},
        ),
    ),
    "lambda:Invoke": ("lambda", lambda c: c.invoke(FunctionName="ParseRun", Payload=b"{}")),
    "logs:DescribeLogGroups": ("logs", lambda c: c.describe_log_groups()),
    "cloudformation:DescribeStacks": ("cloudformation", lambda c: c.describe_stacks()),
    "ssm:GetParameter": ("ssm", lambda c: c.get_parameter(Name="/cdk-bootstrap/hnb659fds/version")),
    "sqs:ListQueues": ("sqs", lambda c: c.list_queues()),
    "sns:ListTopics": ("sns", lambda c: c.list_topics()),
    "iam:ListUsers": ("iam", lambda c: c.list_users()),
    "iam:CreateAccessKey": ("iam", lambda c: c.create_access_key(UserName="trainsweep-local-sweep")),
    "sts:GetCallerIdentity": ("sts", lambda c: c.get_caller_identity()),
}
CONTROL_API = [
    ("GET", "/moto-api/data.json"),
    ("POST", "/moto-api/reset"),
    ("POST", "/moto-api/reset-auth"),
    ("POST", "/moto-api/config"),
]


def _status(call: Callable[[], Any]) -> int | str:
    try:
        call()
    except ClientError as exc:
        return int(exc.response["ResponseMetadata"]["HTTPStatusCode"])
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return 200


def main(endpoint: str, key: str, secret: str) -> dict[str, int | str]:
    config = Config(retries={"max_attempts": 1}, connect_timeout=5, read_timeout=20)
    kwargs: dict[str, Any] = {"endpoint_url": endpoint, "region_name": "us-east-1"}
    if key == "-":
        kwargs["config"] = config.merge(Config(signature_version=UNSIGNED))
    else:
        kwargs.update(config=config, aws_access_key_id=key, aws_secret_access_key=secret)
    got: dict[str, int | str] = {}
    for name, (service, call) in CALLS.items():
        client = boto3.client(service, **kwargs)  # type: ignore[call-overload]
        got[name] = _status(lambda client=client, call=call: call(client))
    for method, path in CONTROL_API:
        body = b"0" if method == "POST" else None
        request = urllib.request.Request(endpoint + path, data=body, method=method)
        got[f"{method} {path}"] = _status(lambda r=request: urllib.request.urlopen(r, timeout=20).close())
    return got


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:4])))
