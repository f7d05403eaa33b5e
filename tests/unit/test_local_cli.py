"""The sweep commands through the CLI app: status, download, doctor, and run's error paths."""

from __future__ import annotations

import importlib.util
import json
import py_compile
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from typer.testing import CliRunner

from trainsweep import layout
from trainsweep.cli import app
from trainsweep.jobs import SCHEMA_VERSION as JOBS_SCHEMA_VERSION
from trainsweep.local import doctor
from trainsweep.spec import plan_sweep

from .conftest import CLOUD_STACK

SWEEP = "demo-20260101-000000"
CLOUD_SPEC = (
    "name: t\nworkload: {model: mnist-cnn, epochs: 1}\ninstance_types: [ml.g4dn.xlarge]\nbatch_sizes: [32]\n"
)
runner = CliRunner()


def _jobs(sizes: list[int]) -> list[dict[str, Any]]:
    """The planned jobs (``PlannedJob.to_json``) of a local sweep of ``sizes``, one repetition."""
    spec = {"name": "demo", "workload": {"model": "mnist-cnn", "epochs": 1, "synthetic": True}}
    plan = plan_sweep({**spec, "instance_types": ["local"], "batch_sizes": sizes}, sweep_id=SWEEP)
    assert [j.run_names for j in plan.jobs] == [(f"{SWEEP}-local-cpu-{bs}-e0",) for bs in sizes]
    return [j.to_json() for j in plan.jobs]


def _downloaded(root: Path) -> Path:
    jobs = _jobs([32, 64])
    folder = root / SWEEP
    (folder / "results" / "runs").mkdir(parents=True)
    cells = [
        {"run_name": jobs[0]["run_names"][0], "status": "completed", "reason": None, "billable_s": 30},
        {
            "run_name": jobs[1]["run_names"][0],
            "status": "failed",
            "reason": "ValueError: boom",
            "billable_s": 4,
        },
    ]
    (folder / layout.JOBS_JSON).write_text(
        json.dumps({"schema_version": JOBS_SCHEMA_VERSION, "sweep_id": SWEEP, "jobs": jobs, "cells": cells})
    )
    (folder / "results" / "runs" / f"{jobs[0]['run_names'][0]}.json").write_text("{}")
    return folder


def test_status_of_a_downloaded_sweep_as_json(tmp_path: Path) -> None:
    _downloaded(tmp_path)
    result = runner.invoke(app, ["status", SWEEP, "--results", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["counts"] == {
        "pending": 0,
        "running": 0,
        "done": 1,
        "failed": 1,
        "infeasible": 0,
        "skipped": 0,
    }
    assert data["cells"][1]["detail"] == "ValueError: boom"


def test_status_costs_an_eu_sweep_at_the_prices_its_plan_used(tmp_path: Path) -> None:
    """Issue 13 item 2: the catalogue prices us-east-1 only; the plan priced the sweep where it ran."""
    folder = _downloaded(tmp_path)
    doc = json.loads((folder / layout.JOBS_JSON).read_text())
    name = f"{SWEEP}-g5-1-32-e0"
    doc["jobs"] = [{**doc["jobs"][0], "job_name": name, "run_names": [name], "instance_type": "ml.g5.xlarge"}]
    doc["cells"] = [{"run_name": name, "status": "completed", "reason": None, "billable_s": 1800}]
    doc.update(region="eu-west-1", hourly_usd={"ml.g5.xlarge": 1.6})
    (folder / layout.JOBS_JSON).write_text(json.dumps(doc))
    result = runner.invoke(app, ["status", SWEEP, "--results", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["cells"][0]["cost_usd"] == 0.8


def test_status_without_an_id_shows_the_latest_downloaded_sweep_as_a_table(tmp_path: Path) -> None:
    _downloaded(tmp_path)
    result = runner.invoke(app, ["status", "--results", str(tmp_path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert f"sweep {SWEEP}" in result.output
    assert "1 done, 1 failed" in result.output


STACK_TEMPLATE = {
    "Resources": {"Bucket": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": "results-bucket"}}},
    "Outputs": {
        "BucketName": {"Value": {"Ref": "Bucket"}},
        "StateMachineArn": {"Value": "arn:aws:states:us-east-1:123456789012:stateMachine:sweep"},
    },
}


@pytest.fixture
def deployed() -> Any:
    with mock_aws():
        boto3.client("cloudformation", region_name="us-east-1").create_stack(
            StackName="Trainsweep", TemplateBody=json.dumps(STACK_TEMPLATE)
        )
        yield boto3.client("s3", region_name="us-east-1")


def test_download_writes_the_s3_layout_below_the_folder(deployed: Any, tmp_path: Path) -> None:
    deployed.put_object(Bucket="results-bucket", Key=layout.jobs_key(SWEEP), Body=b"{}")
    deployed.put_object(
        Bucket="results-bucket", Key=layout.results_key(SWEEP, layout.REPORT_HTML), Body=b"<html/>"
    )
    dest = tmp_path / "out"
    result = runner.invoke(app, ["download", SWEEP, "--to", str(dest), "--region", "us-east-1"])
    assert result.exit_code == 0, result.output
    assert (dest / "jobs.json").read_bytes() == b"{}"
    assert (dest / "results" / "report.html").read_bytes() == b"<html/>"
    assert "Report:" in result.output


def test_download_of_an_unknown_sweep_fails_clearly(deployed: Any, tmp_path: Path) -> None:
    result = runner.invoke(app, ["download", "nope", "--to", str(tmp_path), "--region", "us-east-1"])
    assert result.exit_code == 1
    assert "no sweep 'nope'" in result.output


def test_run_in_the_cloud_without_a_deployed_stack_says_how_to_deploy(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(CLOUD_SPEC)
    with mock_aws():
        result = runner.invoke(app, ["run", str(spec), "--region", "us-east-1", "--stack", "Missing"])
    assert result.exit_code == 1
    assert "stack 'Missing' not found" in result.output
    assert "cdk deploy" in result.output


def test_run_local_refuses_cloud_instance_types(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(CLOUD_SPEC)
    result = runner.invoke(app, ["run", str(spec), "--local", "--out", str(tmp_path)])
    assert result.exit_code == 1
    assert "local mode runs instance types 'local' and 'local_gpu'" in result.output


def test_run_with_an_invalid_spec_points_at_the_field(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "name: t\nworkload: {model: mnist-cnn, epochs: 0}\ninstance_types: [local]\nbatch_sizes: [32]\n"
    )
    result = runner.invoke(app, ["run", str(spec), "--local", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "workload.epochs" in result.output


# ---- doctor -------------------------------------------------------------------------------------


def _probes(present: dict[str, str]) -> tuple[Any, Any]:
    def which(name: str) -> str | None:
        return name if name in present else None

    def run(cmd: list[str]) -> tuple[int, str]:
        exe = Path(cmd[0]).name
        return (0, present[exe]) if exe in present else (127, "not found")

    return which, run


def test_doctor_reports_each_tool_and_what_to_do(tmp_path: Path) -> None:
    which, run = _probes({"node": "v16.0.0", "nvidia-smi": "GPU 0: NVIDIA H100 (UUID: x)"})
    assert doctor.check_node(which, run).level == "warn"
    assert "install Node.js 18+" in (doctor.check_node(which, run).fix or "")
    gpu = doctor.check_gpu(which, run)
    assert gpu.level == "ok" and "local_gpu" in gpu.detail
    cdk = doctor.check_cdk_cli(which, run, root=tmp_path)
    assert cdk.level == "warn" and "npm ci" in (cdk.fix or "")


def test_doctor_says_whether_the_c_log_scanner_is_built() -> None:
    assert doctor.check_log_scanner().level == "ok"  # this install has a compiler (test_native_scan)
    missing = doctor.check_log_scanner(built=False)
    assert missing.level == "warn" and "half the speed" in missing.detail and "gcc" in (missing.fix or "")


def test_doctor_says_whether_torch_is_compiled_where_python_writes_no_bytecode(tmp_path: Path) -> None:
    assert doctor.check_bytecode(writes=False).level == "ok"  # scripts/install compiles it
    source = tmp_path / "torch" / "__init__.py"
    source.parent.mkdir()
    source.write_text("")

    def find(name: str) -> Any:
        return importlib.util.spec_from_file_location(name, source)

    bare = doctor.check_bytecode(find, writes=False)
    assert bare.level == "warn" and "every training process compiles it" in bare.detail
    assert "scripts/install" in (bare.fix or "")
    assert doctor.check_bytecode(find, writes=True).level == "ok"
    py_compile.compile(str(source), cfile=importlib.util.cache_from_source(str(source)))
    assert doctor.check_bytecode(find, writes=False).level == "ok"
    assert doctor.check_bytecode(lambda name: None).level == "info"


def test_doctor_flags_a_cdk_cli_other_than_the_pinned_one(tmp_path: Path) -> None:
    (tmp_path / "package.json").write_text(json.dumps({"devDependencies": {"aws-cdk": "2.1148.1"}}))
    which, run = _probes({"cdk": "3.0.0 (build abc)"})
    check = doctor.check_cdk_cli(which, run, root=tmp_path)
    assert check.level == "warn"
    assert "pins 2.1148.1" in check.detail
    which, run = _probes({"cdk": "2.1148.1 (build abc)"})
    assert doctor.check_cdk_cli(which, run, root=tmp_path).level == "ok"


def test_doctor_finds_the_stack_and_credentials_in_the_account() -> None:
    with mock_aws():
        boto3.client("cloudformation", region_name="us-east-1").create_stack(
            StackName="Trainsweep", TemplateBody=json.dumps(STACK_TEMPLATE)
        )
        checks = doctor.check_aws(boto3.Session(region_name="us-east-1"), "Trainsweep")
        missing = doctor.check_aws(boto3.Session(region_name="us-east-1"), "Other")
    by_name = {c.name: c for c in checks}
    assert by_name["AWS credentials"].level == "ok"
    assert by_name["stack Trainsweep"].level == "ok"
    other = {c.name: c for c in missing}["stack Other"]
    assert other.level == "warn" and "cdk deploy" in (other.fix or "")


def test_doctor_without_credentials_says_local_mode_still_works(monkeypatch: pytest.MonkeyPatch) -> None:
    class NoCreds:
        region_name = "us-east-1"

        def get_credentials(self) -> None:
            return None

    checks = {c.name: c for c in doctor.check_aws(NoCreds(), "Trainsweep")}
    assert checks["AWS credentials"].level == "warn"
    assert "--local does not" in checks["AWS credentials"].detail


def test_the_default_stack_is_the_one_the_cdk_app_deploys() -> None:
    from trainsweep.aws import outputs
    from trainsweep.cli import sweep

    assert sweep.DEFAULT_STACK == outputs.STACK_NAME


def test_run_in_the_cloud_starts_the_stacks_state_machine_on_the_spec(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(CLOUD_SPEC)
    with mock_aws():
        boto3.client("cloudformation", region_name="us-east-1").create_stack(
            StackName="Trainsweep", TemplateBody=json.dumps(CLOUD_STACK)
        )
        result = runner.invoke(app, ["run", str(spec), "--region", "us-east-1", "--no-watch"])
        sfn = boto3.client("stepfunctions", region_name="us-east-1")
        arn = sfn.list_state_machines()["stateMachines"][0]["stateMachineArn"]
        executions = sfn.list_executions(stateMachineArn=arn)["executions"]
        started = sfn.describe_execution(executionArn=executions[0]["executionArn"])
    assert result.exit_code == 0, result.output
    assert len(executions) == 1
    payload = json.loads(started["input"])
    assert payload["sweep_id"] == executions[0]["name"]
    assert payload["spec"]["instance_types"] == ["ml.g4dn.xlarge"]
    assert f"trainsweep status {payload['sweep_id']}" in result.output


def test_run_in_the_cloud_prices_an_eu_sweep_from_the_stacks_price_cache(tmp_path: Path) -> None:
    """Issue 13 item 2: the shipped catalogue prices us-east-1 only; the CLI refused any budget elsewhere."""
    from trainsweep.aws.pricing import write_stack_prices

    spec = tmp_path / "spec.yaml"
    spec.write_text(CLOUD_SPEC + "budget_usd: 5\n")
    with mock_aws():
        boto3.client("cloudformation", region_name="eu-west-1").create_stack(
            StackName="Trainsweep", TemplateBody=json.dumps(CLOUD_STACK)
        )
        s3 = boto3.client("s3", region_name="eu-west-1")
        refused = runner.invoke(app, ["run", str(spec), "--region", "eu-west-1", "--no-watch"])
        write_stack_prices(s3, "results-bucket", {"eu-west-1": {"ml.g4dn.xlarge": 0.822}})
        started = runner.invoke(app, ["run", str(spec), "--region", "eu-west-1", "--no-watch"])
        sfn = boto3.client("stepfunctions", region_name="eu-west-1")
        arn = sfn.list_state_machines()["stateMachines"][0]["stateMachineArn"]
        executions = sfn.list_executions(stateMachineArn=arn)["executions"]
    assert refused.exit_code == 2, refused.output
    assert "prices: {ml.g4dn.xlarge: <USD per hour>}" in " ".join(refused.output.split())
    assert started.exit_code == 0, started.output
    assert len(executions) == 1


@pytest.mark.parametrize("types", ["[local]", "[local_gpu]"])
def test_run_in_the_cloud_refuses_local_instance_types_before_starting(tmp_path: Path, types: str) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "name: t\nworkload: {model: mnist-cnn, epochs: 1, synthetic: true}\n"
        f"instance_types: {types}\nbatch_sizes: [32]\n"
    )
    with mock_aws():
        boto3.client("cloudformation", region_name="us-east-1").create_stack(
            StackName="Trainsweep", TemplateBody=json.dumps(CLOUD_STACK)
        )
        result = runner.invoke(app, ["run", str(spec), "--region", "us-east-1", "--no-watch"])
        sfn = boto3.client("stepfunctions", region_name="us-east-1")
        arn = sfn.list_state_machines()["stateMachines"][0]["stateMachineArn"]
        executions = sfn.list_executions(stateMachineArn=arn)["executions"]
    assert result.exit_code == 2, result.output
    assert executions == []
    out = " ".join(result.output.split())
    assert "instance_types" in out and "run only in local mode" in out and "--local" in out


def test_without_a_terminal_progress_is_a_line_per_change() -> None:
    import io

    from rich.console import Console

    from trainsweep.aws.sweeps import CellView, SweepView
    from trainsweep.cli.sweep import _watch_factory

    buf = io.StringIO()
    update, close = _watch_factory(Console(file=buf, force_terminal=False), True)
    cell = CellView("r", "j", "local", 32, 0, status="running")
    update(SweepView("s", "RUNNING", [cell]))
    update(SweepView("s", "RUNNING", [cell]))
    update(SweepView("s", "SUCCEEDED", [CellView("r", "j", "local", 32, 0, status="done")]))
    close()
    lines = buf.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].endswith("RUNNING: 1 running") and lines[1].endswith("SUCCEEDED: 1 done")


def _run_local(tmp_path: Path, instance_type: str, extra: str = "") -> Any:
    """``trainsweep run SPEC --local`` on a one-cell synthetic mnist spec (plus ``extra`` YAML lines)."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "name: t\nworkload: {model: mnist-cnn, epochs: 1, synthetic: true}\n"
        f"instance_types: [{instance_type}]\nbatch_sizes: [32]\n{extra}"
    )
    return runner.invoke(app, ["run", str(spec), "--local", "--out", str(tmp_path)])


def test_run_local_refuses_more_hosts_than_it_runs_naming_the_field_once(tmp_path: Path) -> None:
    result = _run_local(tmp_path, "local", "instance_count: 9\n")
    assert result.exit_code == 2
    assert result.output.count("instance_count:") == 1


def test_run_local_gpu_without_a_gpu_is_refused_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainsweep.local import executor

    monkeypatch.setattr(executor, "gpu_available", lambda: False)
    result = _run_local(tmp_path, "local_gpu")
    assert result.exit_code == 1
    assert "no NVIDIA GPU" in result.output
    assert not list(tmp_path.glob("*/jobs.json"))


def test_status_of_an_unknown_sweep_says_where_it_looked(tmp_path: Path) -> None:
    with mock_aws():
        result = runner.invoke(app, ["status", "nope", "--results", str(tmp_path), "--region", "us-east-1"])
    assert result.exit_code == 1
    assert "stack 'Trainsweep' not found" in result.output
    assert f"no downloaded sweep 'nope' under {tmp_path}" in result.output


# ---- resume and Ctrl-C --------------------------------------------------------------------------


LOCAL_SPEC = (
    "name: t\nworkload: {model: mnist-cnn, epochs: 1, synthetic: true}\ninstance_types: [local]\n"
    "batch_sizes: [32]\n"
)


@pytest.mark.parametrize("bad", ["../outside", "a/b", "..", "a\\b", "x" * 81])
def test_resume_status_and_download_refuse_an_id_that_is_not_a_sweep_id(tmp_path: Path, bad: str) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(LOCAL_SPEC)
    commands = [["run", str(spec), "--local", "--out", str(tmp_path), "--resume", bad]]
    if len(bad) < 80:  # status and download also take imports' ids (import-<S3 folder>): path checks only
        commands += [
            ["status", bad, "--results", str(tmp_path)],
            ["download", bad, "--to", str(tmp_path / "d")],
        ]
    for args in commands:
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert "invalid sweep id" in result.output
    assert not (tmp_path / "d").exists()


def test_ctrl_c_while_the_embedded_aws_starts_does_not_claim_results_were_downloaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainsweep.local import deploy, server

    def interrupted(self: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(deploy, "synthesize", lambda *a, **k: tmp_path)  # no CDK synth in the background
    monkeypatch.setattr(server.EmbeddedAws, "start", interrupted)
    spec = tmp_path / "spec.yaml"
    spec.write_text(LOCAL_SPEC)
    result = runner.invoke(app, ["run", str(spec), "--local", "--out", str(tmp_path / "out")])
    assert result.exit_code == 130, result.output
    assert "downloaded to" not in result.output
    assert "nothing was downloaded" in result.output
    assert not (tmp_path / "out").exists()


def test_status_of_an_interrupted_sweep_shows_a_stopped_run_as_failed(tmp_path: Path) -> None:
    """Before aggregation (Ctrl-C), only a run record that says the run finished makes a cell done."""
    folder = _downloaded(tmp_path)
    doc = json.loads((folder / layout.JOBS_JSON).read_text())
    del doc["cells"]
    (folder / layout.JOBS_JSON).write_text(json.dumps(doc))
    stopped = doc["jobs"][1]["run_names"][0]
    record = {"kind": "trainsweep.run", "status": "failed", "failure_reason": "stopped by SIGTERM"}
    (folder / "results" / "runs" / f"{stopped}.json").write_text(json.dumps(record))
    result = runner.invoke(app, ["status", SWEEP, "--results", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    view = json.loads(result.output)
    assert view["counts"]["done"] == 1 and view["counts"]["failed"] == 1
    assert [c["detail"] for c in view["cells"] if c["status"] == "failed"] == ["stopped by SIGTERM"]


# ---- doctor SPEC: the account's readiness for a sweep (issue 13) ------------------------------------

DOCTOR_SPEC = (
    "name: t\nworkload: {model: mnist-cnn, epochs: 1}\nregion: eu-west-1\nbudget_usd: 20\n"
    "instance_types: [ml.g5.xlarge, ml.p4d.24xlarge]\nbatch_sizes: [32]\n"
)
BOOTSTRAP_TEMPLATE = {
    "Resources": {"Assets": {"Type": "AWS::S3::Bucket"}},
    "Outputs": {"BootstrapVersion": {"Value": "28"}},
}


def _edge_stubs(monkeypatch: pytest.MonkeyPatch, quotas: dict[str, float]) -> tuple[Any, Any]:
    """Service Quotas' ListServiceQuotas and the Pricing API (moto implements neither), stubbed at the AWS
    edge: every session's client for them is one real botocore client with a Stubber."""
    from botocore.stub import Stubber

    real = boto3.session.Session.client
    sq = boto3.client("service-quotas", region_name="eu-west-1")
    pricing = boto3.client("pricing", region_name="us-east-1")
    chosen = {"service-quotas": sq, "pricing": pricing}
    monkeypatch.setattr(
        boto3.session.Session,
        "client",
        lambda self, name, *a, **kw: chosen.get(name) or real(self, name, *a, **kw),
    )
    sq_stub, pricing_stub = Stubber(sq), Stubber(pricing)
    sq_stub.add_response(
        "list_service_quotas",
        {"Quotas": [{"QuotaName": f"{t} for training job usage", "Value": v} for t, v in quotas.items()]},
        {"ServiceCode": "sagemaker"},
    )
    return sq_stub, pricing_stub


def _no_price(itype: str) -> tuple[dict[str, Any], dict[str, Any]]:
    return {"PriceList": []}, {
        "ServiceCode": "AmazonSageMaker",
        "Filters": [
            {"Type": "TERM_MATCH", "Field": "regionCode", "Value": "eu-west-1"},
            {"Type": "TERM_MATCH", "Field": "instanceName", "Value": itype},
        ],
        "FormatVersion": "aws_v1",
    }


def test_doctor_with_a_spec_checks_bootstrap_quotas_and_prices_of_its_types(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainsweep.aws.pricing import write_stack_prices

    spec = tmp_path / "spec.yaml"
    spec.write_text(DOCTOR_SPEC)
    sq_stub, pricing_stub = _edge_stubs(monkeypatch, {"ml.g5.xlarge": 2.0, "ml.p4d.24xlarge": 0.0})
    pricing_stub.add_response("get_products", *_no_price("ml.p4d.24xlarge"))
    with mock_aws(), sq_stub, pricing_stub:
        cfn = boto3.client("cloudformation", region_name="eu-west-1")
        cfn.create_stack(StackName="CDKToolkit", TemplateBody=json.dumps(BOOTSTRAP_TEMPLATE))
        cfn.create_stack(StackName="Trainsweep", TemplateBody=json.dumps(CLOUD_STACK))
        write_stack_prices(boto3.client("s3"), "results-bucket", {"eu-west-1": {"ml.g5.xlarge": 1.57}})
        result = runner.invoke(app, ["doctor", str(spec)], env={"COLUMNS": "400"})
    assert result.exit_code == 1, result.output
    lines = {line.split(":")[0].strip(): line for line in result.output.splitlines() if ":" in line}
    assert lines["ok   CDK bootstrap"].endswith("CDKToolkit CREATE_COMPLETE, bootstrap version 28")
    quota = lines["fail training quotas"]
    assert "ml.g5.xlarge=2, ml.p4d.24xlarge=0" in quota and "request 1+ for ml.p4d.24xlarge" in quota
    price = lines["fail prices"]
    assert "no price for ml.p4d.24xlarge in eu-west-1 (budget_usd cannot be checked" in price
    assert "ml.g5.xlarge=1.570 USD/h" in price and "prices: {ml.p4d.24xlarge: <USD per hour>}" in price


def test_doctor_passes_a_ready_account_and_names_a_missing_bootstrap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(DOCTOR_SPEC + "prices: {ml.g5.xlarge: 1.6, ml.p4d.24xlarge: 40.0}\n")
    sq_stub, pricing_stub = _edge_stubs(monkeypatch, {"ml.g5.xlarge": 2.0, "ml.p4d.24xlarge": 1.0})
    with mock_aws(), sq_stub, pricing_stub:  # every price given: the Pricing API is not asked
        result = runner.invoke(app, ["doctor", str(spec)], env={"COLUMNS": "400"})
    lines = {line.split(":")[0].strip(): line for line in result.output.splitlines() if ":" in line}
    assert lines["ok   training quotas"].endswith("ml.g5.xlarge=2, ml.p4d.24xlarge=1")
    assert lines["ok   prices"].endswith("eu-west-1: ml.g5.xlarge=1.600 USD/h, ml.p4d.24xlarge=40.000 USD/h")
    boot = lines["warn CDK bootstrap"]
    assert "no CDKToolkit stack in eu-west-1" in boot and "npx cdk bootstrap aws://ACCOUNT/eu-west-1" in boot


def test_doctor_refuses_a_spec_it_cannot_read(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: t\ninstance_types: [ml.g5.xlarge]\n")
    result = runner.invoke(app, ["doctor", str(spec)])
    assert result.exit_code == 2 and "workload" in result.output


def test_a_download_cut_short_leaves_no_partial_file_and_no_jobs_json(
    deployed: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files are written whole or not at all, ``jobs.json`` after every other: a download that fails
    midway never leaves a cut-short run record, nor final cells whose run records are missing."""
    from trainsweep.aws import s3 as s3io

    record_key = layout.results_key(SWEEP, layout.run_record_path(f"{SWEEP}-local-cpu-32-e0"))
    deployed.put_object(Bucket="results-bucket", Key=layout.jobs_key(SWEEP), Body=b'{"cells": []}')
    deployed.put_object(Bucket="results-bucket", Key=record_key, Body=b'{"status": "complete"}')
    opened = s3io.open_chunks

    def cut(s3: Any, bucket: str, key: str, chunk_size: int = 1 << 20) -> Any:
        got = opened(s3, bucket, key, chunk_size)
        if key != record_key or got is None:
            return got

        def chunks() -> Any:
            yield b'{"stat'
            raise ConnectionResetError("connection reset by peer")

        return chunks(), got[1]

    monkeypatch.setattr(s3io, "open_chunks", cut)
    dest = tmp_path / "out"
    result = runner.invoke(app, ["download", SWEEP, "--to", str(dest), "--region", "us-east-1"])
    assert result.exit_code == 1, result.output
    assert "the download stopped: connection reset by peer" in result.output
    assert not (dest / layout.JOBS_JSON).exists()
    written = [p for p in dest.rglob("*") if p.is_file()]
    assert written == [], written
