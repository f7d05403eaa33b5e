"""ParseRun: raw logs in S3 -> per-run artefacts; S3 notifications and the state machine's call."""

from __future__ import annotations

import json
from pathlib import Path

import boto3

from tests.handlers.handler_helpers import BUCKET, put_planned_runs, s3_event
from trainsweep import layout
from trainsweep.artefacts import run_artefacts
from trainsweep.local import lambda_runner
from trainsweep.logs import parse

FCN = Path("cloud-ML/seismic-fcn/experimental_results/2020-06-FCN-on-sagemaker")


def _objects(s3, prefix: str) -> dict[str, bytes]:
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])]
    return {k: s3.get_object(Bucket=BUCKET, Key=k)["Body"].read() for k in keys}


def test_a_real_log_under_imports_yields_the_seed_compatible_artefacts(s3, handler, context, real_data):
    log = real_data / FCN / "logs" / "result-p3-4-256-e1.txt"
    key = "imports/fcn 2020/logs/result-p3-4-256-e1.txt"  # a space: S3 sends it URL-encoded
    s3.put_object(Bucket=BUCKET, Key=key, Body=log.read_bytes())

    handler("parse_run")(s3_event(key), context)

    results = layout.results_prefix(layout.import_results_sweep_id("fcn 2020"))
    written = _objects(s3, results)
    expected = run_artefacts(parse(log.read_bytes(), name="result-p3-4-256-e1"))
    assert {k[len(results) :]: v for k, v in written.items()} == expected
    ours = json.loads(written[results + "execution-times/p3-4/256/e1.json"])
    reference = json.loads((real_data / FCN / "execution-times/p3-4/256/e1.json").read_text())
    assert list(ours["epochs"]) == list(reference["epochs"])
    assert ours["computing_system"] == reference["computing_system"] == "p3-4"
    assert ours["batch_size"] == reference["batch_size"]
    assert results + "execution-times/p3-4/256/e1.summary" in written
    assert results + "execution-times/p3-4/256/e1.png" in written


def test_a_duplicated_event_rewrites_byte_identical_artefacts(s3, handler, context, real_data):
    log = real_data / FCN / "logs" / "result-p2-1-1024-e0.txt"
    key = "imports/dup/result-p2-1-1024-e0.txt"
    s3.put_object(Bucket=BUCKET, Key=key, Body=log.read_bytes())
    parse_run = handler("parse_run")
    parse_run(s3_event(key), context)
    prefix = layout.results_prefix("import-dup")
    first = _objects(s3, prefix)
    parse_run(s3_event(key), context)
    assert _objects(s3, prefix) == first
    assert len(first) == 4


def test_a_garbage_object_yields_a_problem_report_not_an_exception(s3, handler, context):
    key = layout.log_key("demo-20260101-000000", "demo-20260101-000000-p3-1-64-e0")
    put_planned_runs(s3, "demo-20260101-000000", "demo-20260101-000000-p3-1-64-e0")
    s3.put_object(Bucket=BUCKET, Key=key, Body=bytes(range(256)) * 64)
    out = handler("parse_run")(s3_event(key), context)
    record_key = layout.results_key(
        "demo-20260101-000000", layout.run_record_path("demo-20260101-000000-p3-1-64-e0")
    )
    assert record_key in out["written"]
    record = json.loads(s3.get_object(Bucket=BUCKET, Key=record_key)["Body"].read())
    assert record["status"] in ("unreadable", "empty", "failed")
    assert record["problems"]


def test_keys_that_are_not_raw_logs_are_ignored(s3, handler, context):
    key = layout.results_key("demo-20260101-000000", "runs/x.log")
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"Epoch time: 1\n")
    assert handler("parse_run")(s3_event(key), context) == {"written": []}


def test_outputs_never_trigger_processing_again(s3, real_data):
    """Real S3 notifications with the stack's filters: one log upload, one invocation."""
    calls: list[str] = []
    real = lambda_runner.load_handler(Path(__file__).resolve().parents[2] / "lambdas/parse_run/handler.py")

    def counting(event, context):  # type: ignore[no-untyped-def]
        calls.extend(r["s3"]["object"]["key"] for r in event["Records"])
        return real(event, context)

    lambda_runner.install(lambda fn: counting)
    try:
        iam = boto3.client("iam")
        role = iam.create_role(RoleName="fn", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        fn = boto3.client("lambda").create_function(
            FunctionName="parse",
            Runtime="python3.12",
            Role=role,
            Handler="handler.handler",
            Code={"ZipFile": b"PK\x05\x06" + b"\x00" * 18},
            Environment={"Variables": {"TRAINSWEEP_BUCKET": BUCKET, "TRAINSWEEP_FUNCTION": "parse_run"}},
        )["FunctionArn"]
        rules = [[("prefix", "sweeps/"), ("suffix", ".log")], [("prefix", "imports/")]]
        s3.put_bucket_notification_configuration(
            Bucket=BUCKET,
            NotificationConfiguration={
                "LambdaFunctionConfigurations": [
                    {
                        "LambdaFunctionArn": fn,
                        "Events": ["s3:ObjectCreated:*"],
                        "Filter": {"Key": {"FilterRules": [{"Name": n, "Value": v} for n, v in r]}},
                    }
                    for r in rules
                ]
            },
        )
        sweep, run = "demo-20260101-000000", "demo-20260101-000000-p3-4-256-e1"
        log = real_data / FCN / "logs" / "result-p3-4-256-e1.txt"
        put_planned_runs(s3, sweep, run)
        s3.put_object(Bucket=BUCKET, Key=layout.log_key(sweep, run), Body=log.read_bytes())
        assert lambda_runner.wait_idle(60)
        written = _objects(s3, layout.results_prefix(sweep))
        assert layout.results_key(sweep, layout.run_record_path(run)) in written
        assert len(calls) == 1, calls
    finally:
        lambda_runner.uninstall()


def test_a_log_replaced_while_it_is_parsed_does_not_overwrite_newer_artefacts(
    s3, handler, context, monkeypatch
):
    from trainsweep.aws import runs

    sweep, run = "demo-20260101-000000", "demo-20260101-000000-p3-1-64-e0"
    key = layout.log_key(sweep, run)
    put_planned_runs(s3, sweep, run)
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"Epoch 1/2\n1 step training time: 0.5s\n")
    real_parse = runs._parse_versioned

    def parse_then_grow(*args, **kwargs):  # type: ignore[no-untyped-def]
        parsed = real_parse(*args, **kwargs)
        s3.put_object(
            Bucket=BUCKET,
            Key=key,
            Body=b"Epoch 1/2\n1 step training time: 0.5s\n2 step training time: 0.4s\n",
        )
        return parsed

    monkeypatch.setattr(runs, "_parse_versioned", parse_then_grow)
    assert handler("parse_run")(s3_event(key), context) == {"written": []}
    monkeypatch.setattr(runs, "_parse_versioned", real_parse)
    assert handler("parse_run")(s3_event(key), context)["written"]


def test_a_growing_log_cut_inside_a_step_line_records_no_wrong_step(s3, handler, context):
    """A running job re-uploads its log as it grows; an upload cut inside the last step time ("0.0" of
    "0.0123s") or holding a step line without its number must not give a step time (issue 11, item 4)."""
    sweep, run = "demo-20260101-000000", "demo-20260101-000000-p3-1-64-e0"
    key = layout.log_key(sweep, run)
    put_planned_runs(s3, sweep, run)
    log = b"Epoch 1/2\n1 step training time: 0.5s\nstep training time: 0.7s\n3 step training time: \n"
    s3.put_object(Bucket=BUCKET, Key=key, Body=log + b"4 step training time: 0.0")
    handler("parse_run")(s3_event(key), context)
    record_key = layout.results_key(sweep, layout.run_record_path(run))
    record = json.loads(s3.get_object(Bucket=BUCKET, Key=record_key)["Body"].read())
    [epoch] = record["epochs"]
    assert (epoch["step_numbers"], epoch["step_s"]) == ([1], [0.5])  # was: [1, 3, 4], [0.5, 0.7, 0.0]
    assert [p["line"] for p in record["problems"] if p["code"] == "bad-line"] == [3, 4, 5]


def test_a_log_no_job_of_the_sweep_writes_is_not_recorded(s3, handler, context, real_data, caplog):
    """Any training job may write any sweep's logs/ (one role serves every sweep): a log named after a
    run that the sweep's jobs.json does not plan must not write or rewrite that sweep's results."""
    sweep, planned = "demo-20260101-000000", "demo-20260101-000000-p3-4-256-e1"
    put_planned_runs(s3, sweep, planned)
    log = (real_data / FCN / "logs" / "result-p3-4-256-e1.txt").read_bytes()
    parse_run = handler("parse_run")
    s3.put_object(Bucket=BUCKET, Key=layout.log_key(sweep, planned), Body=log)
    parse_run(s3_event(layout.log_key(sweep, planned)), context)
    before = _objects(s3, layout.results_prefix(sweep))
    assert layout.results_key(sweep, layout.run_record_path(planned)) in before

    # A foreign job's log, named like a cell of this sweep but planned by none of its jobs, and one
    # written into a sweep that has no jobs.json at all.
    intruder = "demo-20260101-000000-p3-1-64-e0"
    s3.put_object(
        Bucket=BUCKET, Key=layout.log_key(sweep, intruder), Body=b"Epoch 1/1\n1 step training time: 9s\n"
    )
    s3.put_object(Bucket=BUCKET, Key=layout.log_key("other-20260101-000000", intruder), Body=log)
    assert parse_run(s3_event(layout.log_key(sweep, intruder)), context) == {"written": []}
    assert parse_run(s3_event(layout.log_key("other-20260101-000000", intruder)), context) == {"written": []}

    assert _objects(s3, layout.results_prefix(sweep)) == before
    assert _objects(s3, layout.results_prefix("other-20260101-000000")) == {}
    refusals = [r.getMessage() for r in caplog.records if "refusing" in r.getMessage()]
    assert len(refusals) == 2 and all("jobs.json" in m and intruder in m for m in refusals)


def test_a_log_overwriting_a_planned_one_is_still_recorded(s3, handler, context):
    """The check is on the job, not the bytes: a planned job's re-uploaded log keeps being recorded."""
    sweep, run = "demo-20260101-000000", "demo-20260101-000000-p3-1-64-e0"
    put_planned_runs(s3, sweep, run)
    key = layout.log_key(sweep, run)
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"Epoch 1/1\n1 step training time: 0.5s\n")
    assert handler("parse_run")(s3_event(key), context)["written"]
