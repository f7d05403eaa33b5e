"""PlanSweep, ExportLog and AggregateSweep handlers against moto (S3, CloudWatch Logs)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest

from tests.handlers.handler_helpers import BUCKET, planned_job, s3_event
from trainsweep import layout
from trainsweep.aws import cloudwatch, quotas
from trainsweep.aws import s3 as s3io
from trainsweep.aws.config import EMBEDDED_ENV
from trainsweep.aws.workflow import QuotaError, SweepTooLargeError, group_jobs
from trainsweep.errors import BudgetExceededError, SpecError

SPEC: dict[str, Any] = {
    "name": "demo",
    "workload": {"model": "mnist-cnn", "epochs": 2},
    "instance_types": ["ml.p3.2xlarge", "ml.g4dn.xlarge"],
    "batch_sizes": [64, 128],
    "repetitions": 1,
    "max_concurrency": 3,
}
FCN = Path("cloud-ML/seismic-fcn/experimental_results/2020-06-FCN-on-sagemaker")


# ---- PlanSweep ------------------------------------------------------------------------------------


def test_plan_groups_jobs_by_instance_type_and_writes_spec_and_jobs(s3, handler, context):
    out = handler("plan_sweep")({"input": {"spec": SPEC, "sweep_id": "demo-1"}}, context)
    assert out["sweep_id"] == "demo-1" and out["job_count"] == 4
    assert [g["instance_type"] for g in out["groups"]] == ["ml.p3.2xlarge", "ml.g4dn.xlarge"]
    assert out["group_concurrency"] == 2
    assert sum(g["max_concurrency"] for g in out["groups"]) <= SPEC["max_concurrency"]
    # the state carries references: each group's jobs are a JSON array in S3 for its Distributed Map
    assert "jobs" not in out and all("jobs" not in g for g in out["groups"])
    job = _group_jobs(s3, out["groups"][0])[0]
    assert [g["job_count"] for g in out["groups"]] == [2, 2]
    assert all(isinstance(v, str) for v in job["hyperparameters"].values())
    assert job["output_s3_uri"].startswith(f"s3://{BUCKET}/sweeps/demo-1/")
    spec = json.loads(s3.get_object(Bucket=BUCKET, Key=layout.spec_key("demo-1"))["Body"].read())
    assert spec["name"] == "demo"
    assert s3.head_object(Bucket=BUCKET, Key=layout.jobs_key("demo-1"))


def _group_jobs(s3: Any, group: dict[str, Any]) -> list[dict[str, Any]]:
    return json.loads(s3.get_object(Bucket=BUCKET, Key=group["jobs_key"])["Body"].read())


def test_plan_accepts_the_bare_spec_as_execution_input(s3, handler, context):
    out = handler("plan_sweep")({"input": SPEC, "execution": "x"}, context)
    assert out["sweep_id"].startswith("demo-")


def test_plan_refuses_an_over_budget_sweep(s3, handler, context):
    with pytest.raises(BudgetExceededError, match="budget_usd"):
        handler("plan_sweep")({"input": {**SPEC, "budget_usd": 0.01}}, context)
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET)


def test_plan_refuses_a_bad_spec_with_the_field(s3, handler, context):
    with pytest.raises(SpecError, match="batch_sizes"):
        handler("plan_sweep")({"input": {**SPEC, "batch_sizes": []}}, context)


LOCAL_SPEC = {**SPEC, "workload": {"model": "mnist-cnn", "epochs": 1, "synthetic": True}}


@pytest.mark.parametrize("types", [["local"], ["local_gpu"]])
def test_plan_refuses_local_instance_types_in_aws(s3, handler, context, monkeypatch, types):
    monkeypatch.delenv(EMBEDDED_ENV, raising=False)
    with pytest.raises(SpecError, match="run only in local mode") as err:
        handler("plan_sweep")({"input": {"spec": {**LOCAL_SPEC, "instance_types": types}}}, context)
    assert err.value.errors[0][0] == "instance_types"
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET)


def test_plan_accepts_local_instance_types_in_local_modes_embedded_aws(s3, handler, context, monkeypatch):
    monkeypatch.setenv(EMBEDDED_ENV, "1")  # what local mode's Lambda runtime sets (lambda_runner)
    out = handler("plan_sweep")({"input": {"spec": {**LOCAL_SPEC, "instance_types": ["local"]}}}, context)
    assert out["job_count"] == 2


def test_quotas_cap_each_type_and_a_zero_quota_fails_fast():
    jobs = [SimpleNamespace(instance_type=t, instance_count=1) for t in ["a"] * 5 + ["b"] * 5]
    groups, outer = group_jobs(jobs, 8, {"a": 2, "b": None})
    assert outer == 2
    assert {g["instance_type"]: g["max_concurrency"] for g in groups} == {"a": 2, "b": 4}
    with pytest.raises(QuotaError, match=r"a \(quota 0"):
        group_jobs(jobs, 8, {"a": 0})
    # fewer concurrent jobs than types: the groups that run together stay within the total
    groups, outer = group_jobs(jobs, 1, {})
    assert outer == 1 and all(g["max_concurrency"] == 1 for g in groups)


def test_a_sweep_above_the_job_limit_fails_fast_and_a_large_one_keeps_a_small_state(s3, handler, context):
    from trainsweep.aws.workflow import MAX_JOBS, STATE_LIMIT_BYTES

    types = ["ml.p3.2xlarge", "ml.g4dn.xlarge", "ml.g5.xlarge"]
    big = {**SPEC, "instance_types": types, "batch_sizes": list(range(8, 8 + 35)), "repetitions": 100}
    assert MAX_JOBS < 3 * 35 * 100
    with pytest.raises(SweepTooLargeError, match="split the grid"):
        handler("plan_sweep")({"input": {"spec": big, "sweep_id": "big"}}, context)
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET, Prefix="sweeps/big/")
    # 3,000 jobs (the inline-Map design refused ~190): the state stays under a tenth of the limit
    ok_spec = {**big, "batch_sizes": list(range(8, 18)), "max_concurrency": 1000}
    ok = handler("plan_sweep")({"input": {"spec": ok_spec, "sweep_id": "ok"}, "execution": "x"}, context)
    assert ok["job_count"] == 3000 and ok["cell_count"] == 3000
    assert len(json.dumps(ok)) < STATE_LIMIT_BYTES // 10
    assert sum(len(_group_jobs(s3, g)) for g in ok["groups"]) == 3000
    assert all(g["jobs_key"].startswith("sweeps/ok/map/x/") for g in ok["groups"])


def _map_results(s3: Any, sweep: str, outputs: list[Any], failed: int = 0) -> dict[str, Any]:
    """What a Distributed Map's ResultWriter leaves (AWS's layout): a manifest naming the result files,
    each a JSON array of child executions with their output as a JSON string; the map's reference."""
    prefix = f"{layout.map_results_prefix(sweep, 'x')}{len(outputs)}-{failed}/"
    files: dict[str, list[dict[str, Any]]] = {"FAILED": [], "PENDING": [], "SUCCEEDED": []}
    rows = {
        "SUCCEEDED": [{"Status": "SUCCEEDED", "Output": json.dumps(o), "Input": "{}"} for o in outputs],
        "FAILED": [
            {"Status": "FAILED", "Error": "States.Timeout", "Cause": "child timed out"} for _ in range(failed)
        ],
    }
    for status, entries in rows.items():
        if entries:
            key = f"{prefix}{status}_0.json"
            s3.put_object(Bucket=BUCKET, Key=key, Body=json.dumps(entries).encode())
            files[status].append({"Key": key, "Size": 1})
    manifest = {"DestinationBucket": BUCKET, "MapRunArn": "arn:x", "ResultFiles": files}
    s3.put_object(Bucket=BUCKET, Key=prefix + "manifest.json", Body=json.dumps(manifest).encode())
    return {"results": {"Bucket": BUCKET, "Key": prefix + "manifest.json"}}


def test_aggregate_gives_every_planned_cell_a_final_status_when_results_are_missing(s3, handler, context):
    """A group whose map failed, a child execution that failed, a fan-out that failed: the cells
    without a result are recorded as failed, saying why, never dropped."""
    spec = {**SPEC, "instance_types": ["ml.p3.2xlarge", "ml.g4dn.xlarge"], "batch_sizes": [64, 128]}
    plan = handler("plan_sweep")({"input": {"spec": spec, "sweep_id": "gaps"}, "execution": "x"}, context)
    p3, g4 = (_group_jobs(s3, g) for g in plan["groups"])
    done = {
        "run_name": p3[0]["run_names"][0],
        "job_name": p3[0]["job_name"],
        "instance_type": "ml.p3.2xlarge",
        "batch_size": 64,
        "repetition": 0,
        "status": "completed",
        "reason": None,
        "billable_s": 60.0,
    }
    maps = [
        _map_results(s3, "gaps", [[done]], failed=1),
        {
            "instance_type": "ml.g4dn.xlarge",
            "error": {"Error": "States.ItemReaderFailed", "Cause": "x" * 20000},
        },
    ]
    summary = handler("aggregate_sweep")({"sweep_id": "gaps", "maps": maps}, context)
    assert summary["cells"] == 4 and summary["status_counts"] == {"completed": 1, "failed": 3}
    cells = {c["run_name"]: c for c in s3io.get_json(s3, BUCKET, layout.jobs_key("gaps"))["cells"]}
    assert cells[done["run_name"]]["status"] == "completed"
    lost = cells[p3[1]["run_names"][0]]
    assert (
        lost["status"] == "failed" and lost["batch_size"] == 128 and lost["instance_type"] == "ml.p3.2xlarge"
    )
    assert "States.Timeout: child timed out" in lost["reason"]
    assert "States.ItemReaderFailed" in cells[g4[0]["run_names"][0]]["reason"]
    assert all(len(c["reason"] or "") <= 1000 for c in cells.values())

    whole = handler("aggregate_sweep")(
        {"sweep_id": "gaps", "maps": {"Error": "States.Runtime", "Cause": "boom"}}, context
    )
    assert whole["status_counts"] == {"failed": 4}
    cells = s3io.get_json(s3, BUCKET, layout.jobs_key("gaps"))["cells"]
    assert all("fan-out failed (States.Runtime: boom)" in c["reason"] for c in cells)


class _Quotas:
    def __init__(self, pages: list[dict[str, Any]] | Exception):
        self.pages = pages

    def list_service_quotas(self, **kwargs: Any) -> dict[str, Any]:
        if isinstance(self.pages, Exception):
            raise self.pages
        return self.pages[1 if kwargs.get("NextToken") else 0]


def test_quotas_are_read_across_pages_and_unreadable_means_unknown():
    pages = [
        {"Quotas": [{"QuotaName": quotas.quota_name("ml.p3.2xlarge"), "Value": 2.0}], "NextToken": "t"},
        {"Quotas": [{"QuotaName": quotas.quota_name("ml.g4dn.xlarge"), "Value": 0.0}]},
    ]
    got = quotas.training_instance_quotas(_Quotas(pages), ["ml.p3.2xlarge", "ml.g4dn.xlarge", "ml.p2.xlarge"])
    assert got == {"ml.p3.2xlarge": 2, "ml.g4dn.xlarge": 0, "ml.p2.xlarge": None}
    spot = quotas.training_instance_quotas(_Quotas(pages), ["ml.p3.2xlarge"], spot=True)
    assert spot == {"ml.p3.2xlarge": None}, "spot sweeps read the spot quotas, which these pages lack"
    assert quotas.quota_name("ml.p3.2xlarge", spot=True) == "ml.p3.2xlarge for spot training job usage"
    denied = quotas.training_instance_quotas(_Quotas(PermissionError("denied")), ["ml.p3.2xlarge"])
    assert denied == {"ml.p3.2xlarge": None}


# ---- ExportLog ------------------------------------------------------------------------------------


def _stream(n: int, job: str = "demo-1-p3-1-64-e0") -> Any:
    logs = boto3.client("logs", region_name="us-east-1")
    logs.create_log_group(logGroupName="/aws/sagemaker/TrainingJobs")
    stream = f"{job}/algo-1-1700000000"
    logs.create_log_stream(logGroupName="/aws/sagemaker/TrainingJobs", logStreamName=stream)
    now_ms = int(time.time() * 1000)  # CloudWatch rejects events older than 14 days
    for start in range(0, n, 5000):
        logs.put_log_events(
            logGroupName="/aws/sagemaker/TrainingJobs",
            logStreamName=stream,
            logEvents=[
                {"timestamp": now_ms + i, "message": f"{i} step training time: 0.25s"}
                for i in range(start, min(n, start + 5000))
            ],
        )
    return logs


def test_export_copies_every_page_of_a_job_without_a_log(s3, handler, context):
    _stream(12_345)
    job = planned_job("demo-1", "demo-1-p3-1-64-e0")
    out = handler("export_log")({"sweep_id": "demo-1", "job": job}, context)
    assert out["exported"] == layout.log_key("demo-1", job["job_name"])
    lines = s3.get_object(Bucket=BUCKET, Key=out["exported"])["Body"].read().decode().splitlines()
    assert len(lines) == 12_345
    assert lines[0].startswith("0 step") and lines[-1].startswith("12344 step")
    tags = s3.get_object_tagging(Bucket=BUCKET, Key=out["exported"])["TagSet"]
    assert tags == [{"Key": layout.RAW_LOG_TAG_KEY, "Value": layout.RAW_LOG_TAG_VALUE}]


def test_export_streams_a_long_stream_in_parts_instead_of_holding_it(s3, handler, context, monkeypatch):
    """A stream longer than one upload part goes up as a multipart upload, one part at a time (the old
    export joined the whole stream in memory and sent it in one put)."""
    monkeypatch.setattr(s3io, "PART_SIZE", 5 << 20)  # S3's smallest part, so the test stays small
    pad = "x" * 90
    logs = boto3.client("logs", region_name="us-east-1")
    logs.create_log_group(logGroupName="/aws/sagemaker/TrainingJobs")
    stream = "demo-1-p3-1-64-e0/algo-1-1700000000"
    logs.create_log_stream(logGroupName="/aws/sagemaker/TrainingJobs", logStreamName=stream)
    now_ms = int(time.time() * 1000)
    n = 70_000  # about 7 MB: two parts
    for start in range(0, n, 10_000):
        events = [
            {"timestamp": now_ms + i, "message": f"{i:06d} {pad}"} for i in range(start, start + 10_000)
        ]
        logs.put_log_events(
            logGroupName="/aws/sagemaker/TrainingJobs", logStreamName=stream, logEvents=events
        )
    job = planned_job("demo-1", "demo-1-p3-1-64-e0")
    out = handler("export_log")({"sweep_id": "demo-1", "job": job}, context)
    got = s3.get_object(Bucket=BUCKET, Key=out["exported"])
    assert got["ETag"].strip('"').endswith("-2"), "two parts of at most PART_SIZE bytes each"
    assert got["Body"].read() == "".join(f"{i:06d} {pad}\n" for i in range(n)).encode()
    tags = s3.get_object_tagging(Bucket=BUCKET, Key=out["exported"])["TagSet"]
    assert tags == [{"Key": layout.RAW_LOG_TAG_KEY, "Value": layout.RAW_LOG_TAG_VALUE}]


def test_a_failed_streamed_export_writes_nothing(s3, monkeypatch):
    monkeypatch.setattr(s3io, "PART_SIZE", 5 << 20)

    def lines():
        yield b"x" * (6 << 20)
        raise RuntimeError("CloudWatch went away")

    with pytest.raises(RuntimeError):
        s3io.put_stream(s3, BUCKET, "sweeps/demo-1/logs/x.txt", lines())
    assert s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", []) == []
    assert not s3io.exists(s3, BUCKET, "sweeps/demo-1/logs/x.txt")


def test_export_leaves_a_job_alone_that_wrote_its_own_log(s3, handler, context):
    _stream(10)
    job = planned_job("demo-1", "demo-1-p3-1-64-e0")
    s3.put_object(Bucket=BUCKET, Key=layout.log_key("demo-1", job["job_name"]), Body=b"own log\n")
    assert handler("export_log")({"sweep_id": "demo-1", "job": job}, context) == {"exported": None}
    assert (
        s3.get_object(Bucket=BUCKET, Key=layout.log_key("demo-1", job["job_name"]))["Body"].read()
        == b"own log\n"
    )


class _Pages:
    """GetLogEvents that never stops handing out tokens (a live stream) or repeats its last one."""

    def __init__(self, pages: list[list[str]], *, repeat: bool):
        self.pages, self.repeat, self.calls = pages, repeat, 0

    def get_log_events(self, **kwargs: Any) -> dict[str, Any]:
        self.calls += 1
        i = int(kwargs.get("nextToken", "f/0").split("/")[1])
        events = [{"message": m} for m in self.pages[i]] if i < len(self.pages) else []
        token = f"f/{i}" if self.repeat and i == len(self.pages) - 1 else f"f/{i + 1}"
        return {"events": events, "nextForwardToken": token}


def test_pagination_follows_empty_pages_and_stops_when_the_token_repeats():
    repeating = _Pages([["a", "b"], [], [], ["c"], []], repeat=True)
    assert list(cloudwatch.iter_log_messages(repeating, "g", "s")) == ["a", "b", "c"]
    assert repeating.calls == 5


def test_a_stream_that_never_ends_is_an_error_not_a_shorter_log():
    endless = _Pages([["a"], ["b"], ["c"]], repeat=False)  # new tokens for empty pages forever
    with pytest.raises(cloudwatch.UnfinishedStreamError, match="end was not reached"):
        list(cloudwatch.iter_log_messages(endless, "g", "s", max_empty_pages=5))
    assert endless.calls == 3 + 5


class _GapsBetweenPages:
    """A CloudWatch Logs client whose every page of events follows an empty page (as AWS may answer)."""

    def __init__(self, real: Any):
        self.real = real

    def get_log_events(self, **kwargs: Any) -> dict[str, Any]:
        token = kwargs.pop("nextToken", None)
        if token is None or not token.startswith("gap:"):
            return {"events": [], "nextForwardToken": f"gap:{token or ''}"}
        if token[4:]:
            kwargs["nextToken"] = token[4:]
        page = self.real.get_log_events(**kwargs)
        if page["nextForwardToken"] != token[4:]:
            return page
        return {**page, "nextForwardToken": token}  # the end: the token sent comes back

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def test_export_reads_past_empty_pages_to_the_end_of_the_stream(s3, handler, context, monkeypatch):
    _stream(2_500)
    real_client = boto3.client

    def client(service: str, *args: Any, **kwargs: Any) -> Any:
        made = real_client(service, *args, **kwargs)
        return _GapsBetweenPages(made) if service == "logs" else made

    monkeypatch.setattr(boto3, "client", client)
    job = planned_job("demo-1", "demo-1-p3-1-64-e0")
    out = handler("export_log")({"sweep_id": "demo-1", "job": job}, context)
    lines = s3.get_object(Bucket=BUCKET, Key=out["exported"])["Body"].read().decode().splitlines()
    assert len(lines) == 2_500
    assert lines[0].startswith("0 step") and lines[-1].startswith("2499 step")


# ---- AggregateSweep -----------------------------------------------------------------------------


def test_aggregate_writes_the_sweep_artefacts_and_every_cells_status(
    s3, handler, context, real_data, monkeypatch
):
    # The functions' assets carry neither pandas nor scipy (lambdas/*/requirements.txt): prove the
    # parse and aggregate paths run without them.
    for module in ("pandas", "scipy"):
        monkeypatch.setitem(sys.modules, module, None)
    sweep = "demo-1"
    plan = handler("plan_sweep")(
        {
            "input": {
                "spec": {**SPEC, "instance_types": ["ml.p3.8xlarge"], "batch_sizes": [256, 512]},
                "sweep_id": sweep,
            }
        },
        context,
    )
    cells = []
    for job in _group_jobs(s3, plan["groups"][0]):
        run = job["run_names"][0]
        bs = job["batch_sizes"][0]
        log = real_data / FCN / "logs" / f"result-p3-4-{bs}-e1.txt"
        s3.put_object(Bucket=BUCKET, Key=layout.log_key(sweep, run), Body=log.read_bytes())
        handler("parse_run")(s3_event(layout.log_key(sweep, run)), context)
        cells.append(
            {
                "run_name": run,
                "job_name": job["job_name"],
                "instance_type": "ml.p3.8xlarge",
                "batch_size": bs,
                "repetition": 0,
                "status": "completed",
                "reason": None,
                "billable_s": 900.0,
            }
        )
    cells.append(
        {
            "run_name": "demo-1-p3-4-4096-e0",
            "job_name": "demo-1-p3-4-4096-e0",
            "instance_type": "ml.p3.8xlarge",
            "batch_size": 4096,
            "repetition": 0,
            "status": "infeasible",
            "reason": "CUDA out of memory",
            "billable_s": 120.0,
        }
    )
    maps = [_map_results(s3, sweep, [[c] for c in cells[:2]]), _map_results(s3, sweep, [cells[2:]])]
    summary = handler("aggregate_sweep")({"sweep_id": sweep, "maps": maps}, context)
    assert summary["status_counts"] == {"completed": 2, "infeasible": 1}
    assert summary["runs_parsed"] == 2
    results = layout.results_prefix(sweep)
    for rel in (layout.SWEEP_CSV, layout.SWEEP_JSON, layout.REPORT_HTML):
        assert s3.head_object(Bucket=BUCKET, Key=results + rel)
    jobs = json.loads(s3.get_object(Bucket=BUCKET, Key=layout.jobs_key(sweep))["Body"].read())
    assert {c["run_name"]: c["status"] for c in jobs["cells"]}["demo-1-p3-4-4096-e0"] == "infeasible"
