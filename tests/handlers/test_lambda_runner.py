"""moto runs Lambda functions from their handler source once the runner is installed."""

from __future__ import annotations

import io
import json
import os
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


PROBE_HANDLER = """
import os
import threading
import time

lock = threading.Lock()
running = [0, 0]  # now, most at once


def handler(event, context):
    want = os.environ["PROBE"]
    with lock:
        running[0] += 1
        running[1] = max(running[1], running[0])
    try:
        seen = []
        for _ in range(40):
            seen.append((os.environ.get("PROBE"), dict(os.environ).get("PROBE"), os.getenv("ONLY_HERE"),
                         os.environ.get("PROCESS_WIDE"), context.function_name))
            os.environ["WRITTEN"] = want  # stays in this invocation
            time.sleep(0.001)
        return {"want": want, "seen": sorted(set(map(tuple, seen))), "most_at_once": running[1]}
    finally:
        with lock:
            running[0] -= 1
"""


def test_concurrent_invocations_each_see_their_own_environment_and_the_process_keeps_its_own(
    tmp_path, monkeypatch
):
    """Issue 13: the function's variables used to be set in os.environ and removed after each call, so a
    thread reading the environment meanwhile (another invocation, a job's workflow) saw a foreign value
    or lost a variable. Two functions, many invocations at once, and a thread outside any invocation:
    each sees only its own values, all the way through."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    (tmp_path / "probe").mkdir()
    (tmp_path / "probe" / "handler.py").write_text(PROBE_HANDLER)
    monkeypatch.setenv("PROBE", "process")
    monkeypatch.setenv("PROCESS_WIDE", "kept")
    monkeypatch.delenv("ONLY_HERE", raising=False)
    lambda_runner.install(lambda_runner.source_resolver(tmp_path), async_s3=True)
    outside: list[tuple[str | None, str | None, str | None]] = []
    stop = threading.Event()

    def watch() -> None:  # a thread that is no invocation: a training job's, the interpreter's
        while not stop.is_set():
            snapshot = dict(os.environ)
            outside.append((snapshot.get("PROBE"), snapshot.get("ONLY_HERE"), snapshot.get("WRITTEN")))

    try:
        with mock_aws():
            role = boto3.client("iam").create_role(RoleName="r", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
            lam = boto3.client("lambda", region_name="us-east-1")
            for name in ("alpha", "beta"):
                lam.create_function(
                    FunctionName=name,
                    Runtime="python3.12",
                    Role=role,
                    Handler="handler.handler",
                    Code={"ZipFile": _zip()},
                    Environment={
                        "Variables": {lambda_runner.FUNCTION_ENV: "probe", "PROBE": name, "ONLY_HERE": name}
                    },
                )
            watcher = threading.Thread(target=watch)
            watcher.start()

            def call(i: int) -> dict:
                out = lam.invoke(FunctionName=("alpha", "beta")[i % 2], Payload=b"{}")
                assert "FunctionError" not in out, out["Payload"].read()
                return json.loads(out["Payload"].read())

            try:
                with ThreadPoolExecutor(8) as pool:
                    results = list(pool.map(call, range(48)))
            finally:
                stop.set()
                watcher.join()
    finally:
        lambda_runner.uninstall()
    for i, result in enumerate(results):
        name = ("alpha", "beta")[i % 2]
        assert result["want"] == name
        assert result["seen"] == [[name, name, name, "kept", name]], result
    assert outside and set(outside) == {("process", None, None)}
    assert max(r["most_at_once"] for r in results) > 1  # invocations run concurrently, not one by one
    assert os.environ["PROBE"] == "process" and "WRITTEN" not in os.environ


def test_a_function_invoked_many_times_at_once_imports_its_handler_once(tmp_path):
    """The first invocations of a function arrive together (a Distributed Map's children); each imported
    the handler file again: a new module, logger and boto3 clients per invocation."""
    from concurrent.futures import ThreadPoolExecutor

    imports = tmp_path / "imports"
    (tmp_path / "slow_import").mkdir()
    (tmp_path / "slow_import" / "handler.py").write_text(
        "import time\n"
        f"with open({str(imports)!r}, 'a') as f:\n"
        "    f.write('x')\n"
        "time.sleep(0.2)  # a real handler imports boto3, Powertools, trainsweep\n"
        "def handler(event, context):\n"
        "    return {'n': event['n']}\n"
    )
    lambda_runner.install(lambda_runner.source_resolver(tmp_path), async_s3=True)
    try:
        with mock_aws():
            role = boto3.client("iam").create_role(RoleName="r", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
            lam = boto3.client("lambda", region_name="us-east-1")
            lam.create_function(
                FunctionName="slow",
                Runtime="python3.12",
                Role=role,
                Handler="handler.handler",
                Code={"ZipFile": _zip()},
                Environment={"Variables": {lambda_runner.FUNCTION_ENV: "slow_import"}},
            )

            def call(n: int) -> dict:
                return json.loads(
                    lam.invoke(FunctionName="slow", Payload=json.dumps({"n": n}))["Payload"].read()
                )

            with ThreadPoolExecutor(8) as pool:
                results = list(pool.map(call, range(16)))
    finally:
        lambda_runner.uninstall()
    assert results == [{"n": n} for n in range(16)]
    assert imports.read_text() == "x"
