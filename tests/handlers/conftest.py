"""Handlers run against moto S3/CloudWatch Logs: fake credentials, a results bucket, handler loading."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from tests.handlers.handler_helpers import BUCKET, ROOT, STACK_IMAGE
from trainsweep.aws.config import BUCKET_ENV, TRAINING_IMAGE_ENV
from trainsweep.local import lambda_runner


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv(BUCKET_ENV, BUCKET)
    monkeypatch.setenv(TRAINING_IMAGE_ENV, STACK_IMAGE)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        yield client


@pytest.fixture
def handler() -> Callable[[str], Callable[[Any, Any], Any]]:
    """``handler("parse_run")`` -> the ``handler`` function of ``lambdas/parse_run/handler.py``."""

    def load(name: str) -> Callable[[Any, Any], Any]:
        return lambda_runner.load_handler(ROOT / "lambdas" / name / "handler.py")

    return load


class FakeContext:
    function_name = "test"
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:test"
    memory_limit_in_mb = 512
    aws_request_id = "req-1"
    log_group_name = "/aws/lambda/test"
    log_stream_name = "stream"

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 60_000


@pytest.fixture
def context() -> FakeContext:
    return FakeContext()
