"""moto's hot paths under many concurrent requests (trainsweep/local/moto_load.py, issue 13)."""

from __future__ import annotations

import threading
import time
from typing import Any

import boto3
from moto import mock_aws

from trainsweep.local import moto_load


def test_a_service_model_is_loaded_once_when_many_requests_need_it_at_once(monkeypatch):
    """moto caches each service's model without a lock: the first requests of a Distributed Map's
    children, all at once, each loaded it again (seconds of CPU in a large sweep)."""
    from moto.core import responses, utils

    moto_load.install()
    loads: list[str] = []
    real = utils._load_service_model

    def slow_counting_load(service_name: str, model_name: str) -> Any:
        loads.append(service_name)
        time.sleep(0.05)  # a real load takes longer: the threads meet here unless one loads for all
        return real(service_name, model_name)

    monkeypatch.setattr(utils, "_load_service_model", slow_counting_load)
    responses.get_service_model.cache_clear()
    start = threading.Barrier(16)
    models: list[Any] = []

    def request() -> None:
        start.wait()
        models.append(responses.get_service_model("sagemaker"))

    threads = [threading.Thread(target=request) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert loads == ["sagemaker"]
    assert len(models) == 16 and all(m is models[0] for m in models)


def test_moto_still_creates_and_resets_an_accounts_backends():
    moto_load.install()
    for _ in range(2):  # the second mock starts from a reset: no bucket left over
        with mock_aws():
            s3 = boto3.client("s3", region_name="us-east-1")
            assert s3.list_buckets()["Buckets"] == []
            s3.create_bucket(Bucket="bucket-one")
            assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["bucket-one"]


def test_the_interpreter_parses_a_json_path_once_however_often_states_evaluate_it(monkeypatch):
    """Every evaluation of ``$.x`` built a new ply parser (~3 ms of CPU, some 25 times a job)."""
    from jsonpath_ng.ext.parser import ExtendedJsonPathParser
    from moto.stepfunctions.parser.asl.utils.json_path import extract_json

    moto_load.install()
    parses: list[str] = []
    real = ExtendedJsonPathParser.parse

    def counting(self: Any, string: str, *args: Any, **kwargs: Any) -> Any:
        parses.append(string)
        return real(self, string, *args, **kwargs)

    monkeypatch.setattr(ExtendedJsonPathParser, "parse", counting)
    path = f"$.job.n{time.monotonic_ns()}"  # a path no earlier test parsed
    for n in range(5):
        assert extract_json(path, {"job": {path.rsplit(".", 1)[1]: n}}) == n
    assert parses == [path]
