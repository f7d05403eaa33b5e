"""`trainsweep report DIR` rebuilds the sweep artefacts offline; `trainsweep prices` shows and refreshes."""

from __future__ import annotations

import json
from array import array

import boto3
import pytest
from botocore.stub import Stubber
from typer.testing import CliRunner

from trainsweep import layout
from trainsweep.cli import app
from trainsweep.cli.report import parse_duration
from trainsweep.logs.model import Epoch, RunTimings

runner = CliRunner()


def _run(name: str, vm: str, bs: int, step: float) -> RunTimings:
    eps = [
        Epoch(
            i,
            array("d", [step * 20] + [step] * 19),
            array("l", range(1, 21)),
            epoch_s=step * (39 if i == 1 else 20),
        )
        for i in (1, 2, 3)
    ]
    return RunTimings(name=name, computing_system=vm, batch_size=bs, run_index=0, epochs=eps)


@pytest.fixture
def results(tmp_path):
    """An import-style output: quality.json on top, one results root below with three run records."""
    root = tmp_path / "imported" / "grid"
    (root / layout.RUNS_DIR).mkdir(parents=True)
    runs = [
        _run("result-p3-1-64-e0", "p3-1", 64, 0.05),
        _run("result-g4dn-1-64-e0", "g4dn-1", 64, 0.12),
        _run("result-g4dn-1-128-e0", "g4dn-1", 128, 0.2),
    ]
    copy = _run("result-g4dn-1-128-e1", "g4dn-1", 128, 0.2)
    for r in [*runs, copy]:
        (root / layout.run_record_path(r.name)).write_text(json.dumps(r.to_record()))
    (root / layout.RUNS_DIR / "broken.json").write_text("{not json")
    quality = {
        "files": [
            {
                "path": "grid/logs/result-g4dn-1-128-e0.txt",
                "run_name": "result-g4dn-1-128-e0",
                "problems": [],
            },
            {
                "path": "grid/logs/result-g4dn-1-128-e1.txt",
                "run_name": "result-g4dn-1-128-e1",
                "problems": [],
            },
        ],
        "duplicates": [
            {
                "kind": "identical_bytes",
                "paths": ["grid/logs/result-g4dn-1-128-e0.txt", "grid/logs/result-g4dn-1-128-e1.txt"],
            }
        ],
    }
    (tmp_path / "imported" / layout.QUALITY_JSON).write_text(json.dumps(quality))
    return tmp_path / "imported", root


def test_report_rebuilds_artefacts_into_each_results_root(results):
    top, root = results
    res = runner.invoke(app, ["report", str(top)])
    assert res.exit_code == 0, res.output
    for name in (layout.SWEEP_CSV, layout.SWEEP_JSON, layout.REPORT_HTML, layout.plot_path("pareto")):
        assert (root / name).is_file()
    assert "Use ml." in res.output
    assert "broken.json" in res.output  # named, skipped, nothing else lost
    doc = json.loads((root / layout.SWEEP_JSON).read_text())
    assert len(doc["configurations"]) == 3
    assert any(w["code"] == "excluded-duplicate" for w in doc["warnings"])


def test_deadline_and_budget_reach_the_recommendation(results):
    top, root = results
    res = runner.invoke(app, ["report", str(top), "--deadline", "1m", "--budget", "5"])
    assert res.exit_code == 0, res.output
    rec = json.loads((root / layout.SWEEP_JSON).read_text())["recommendation"]
    assert rec["deadline_s"] == 60.0 and rec["budget_usd"] == 5.0


def test_bad_deadline_is_a_clear_error(results):
    res = runner.invoke(app, ["report", str(results[0]), "--deadline", "soon"])
    assert res.exit_code == 1 and "not a duration" in res.output


def test_a_folder_without_run_records_is_a_clear_error(tmp_path):
    res = runner.invoke(app, ["report", str(tmp_path)])
    assert res.exit_code == 1 and "no runs/*.json" in res.output


@pytest.mark.parametrize(("text", "seconds"), [("3600", 3600), ("90m", 5400), ("2h", 7200), ("1.5d", 129600)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


def test_prices_show_lists_every_type_and_the_source(monkeypatch, tmp_path):
    monkeypatch.setenv("TRAINSWEEP_CACHE_DIR", str(tmp_path))
    res = runner.invoke(app, ["prices", "show"])
    assert res.exit_code == 0
    assert "ml.p3.2xlarge" in res.output and "3.825" in res.output and "shipped catalogue" in res.output


def test_prices_refresh_caches_what_the_pricing_api_says(monkeypatch, tmp_path):
    monkeypatch.setenv("TRAINSWEEP_CACHE_DIR", str(tmp_path))
    client = boto3.client("pricing", region_name="us-east-1")
    stub = Stubber(client)
    item = {
        "product": {"attributes": {"usagetype": "USE1-Train:ml.p3.2xlarge", "instanceName": "ml.p3.2xlarge"}},
        "terms": {
            "OnDemand": {"T": {"priceDimensions": {"D": {"unit": "Hrs", "pricePerUnit": {"USD": "3.5"}}}}}
        },
    }
    from trainsweep.instances import CATALOGUE

    for name in CATALOGUE:
        if name.startswith("ml."):
            found = name == "ml.p3.2xlarge"
            stub.add_response("get_products", {"PriceList": [json.dumps(item)] if found else []})
    monkeypatch.setattr(boto3, "client", lambda *a, **k: client)
    with stub:
        res = runner.invoke(app, ["prices", "refresh", "--no-upload"])
    assert res.exit_code == 0, res.output
    assert "cached 1 prices" in res.output
    show = runner.invoke(app, ["prices", "show"])
    assert "3.500" in show.output and "Pricing API" in show.output


FF = "FusionFlow/simulator/no_deps/DDP4GPUFULLTRACE"


def test_what_if_prints_fusionflow_total_summary_figures(real_data):
    trace = real_data / FF / "FETCH_ALIGN_False_START_ALIGN_False/debug/sim_info.csv"
    res = runner.invoke(app, ["what-if", str(trace), "--csv"])
    assert res.exit_code == 0, res.output
    got = {row[0]: row[1:4] for row in (line.split(",") for line in res.output.splitlines()[1:])}
    assert got["FETCH_ALIGN_min_START_ALIGN_min"] == ["0.988±0.5667", "0.1026±0.5682", "0.002±0.0118"]
    assert len(got) == 9
    table = runner.invoke(app, ["what-if", str(trace)], env={"COLUMNS": "120"})
    assert (
        table.exit_code == 0
        and "fetch avg, start avg" in table.output
        and "fetch as run, start" in table.output
    )


def test_what_if_refuses_a_table_that_is_not_a_trace(tmp_path):
    bad = tmp_path / "x.csv"
    bad.write_text(",a\n0,1\n")
    res = runner.invoke(app, ["what-if", str(bad)])
    assert res.exit_code == 1 and "sim_info" in res.output


def _stub_every_type(stub: Stubber, priced: dict[str, str]) -> None:
    from trainsweep.instances import CATALOGUE

    for name in CATALOGUE:
        if not name.startswith("ml."):
            continue
        item = {
            "product": {"attributes": {"usagetype": f"EU-Train:{name}", "instanceName": name}},
            "terms": {
                "OnDemand": {
                    "T": {
                        "priceDimensions": {"D": {"unit": "Hrs", "pricePerUnit": {"USD": priced.get(name)}}}
                    }
                }
            },
        }
        stub.add_response("get_products", {"PriceList": [json.dumps(item)] if name in priced else []})


STACK_WITH_BUCKET = {
    "Resources": {"Bucket": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": "results-bucket"}}},
    "Outputs": {"BucketName": {"Value": {"Ref": "Bucket"}}},
}


@pytest.mark.slow
def test_prices_refresh_also_uploads_to_the_stacks_bucket_for_plan_sweep(monkeypatch, tmp_path):
    """Issue 13 item 2: a refresh used to stay on the user's disk, where PlanSweep never looks."""
    from moto import mock_aws

    from trainsweep.aws.pricing import stack_price_fn

    monkeypatch.setenv("TRAINSWEEP_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    real_client = boto3.client
    pricing = real_client("pricing", region_name="us-east-1")
    monkeypatch.setattr(
        boto3, "client", lambda name, **kw: pricing if name == "pricing" else real_client(name, **kw)
    )
    with mock_aws(), Stubber(pricing) as stub:
        real_client("cloudformation").create_stack(
            StackName="Trainsweep", TemplateBody=json.dumps(STACK_WITH_BUCKET)
        )
        _stub_every_type(stub, {"ml.g5.xlarge": "1.57"})
        res = runner.invoke(app, ["prices", "refresh"], env={"COLUMNS": "300"})
        assert res.exit_code == 0, res.output
        assert "cached 1 prices for eu-west-1" in res.output
        assert f"s3://results-bucket/{layout.PRICES_KEY}" in res.output
        s3 = real_client("s3")
        doc = json.loads(s3.get_object(Bucket="results-bucket", Key=layout.PRICES_KEY)["Body"].read())
        assert doc["regions"] == {"eu-west-1": {"ml.g5.xlarge": 1.57}}
        # what PlanSweep reads: the uploaded figure, with no Pricing API at all
        price = stack_price_fn(s3, "results-bucket", None, "eu-west-1", ["ml.g5.xlarge"])
        assert price("ml.g5.xlarge", "eu-west-1") == 1.57


def test_prices_refresh_without_a_stack_keeps_the_cache_and_says_it_did_not_upload(monkeypatch, tmp_path):
    from moto import mock_aws

    monkeypatch.setenv("TRAINSWEEP_CACHE_DIR", str(tmp_path))
    real_client = boto3.client
    pricing = real_client("pricing", region_name="us-east-1")
    monkeypatch.setattr(
        boto3, "client", lambda name, **kw: pricing if name == "pricing" else real_client(name, **kw)
    )
    with mock_aws(), Stubber(pricing) as stub:
        _stub_every_type(stub, {"ml.g5.xlarge": "1.4"})
        res = runner.invoke(app, ["prices", "refresh", "--stack", "Missing"], env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    assert "cached 1 prices for us-east-1" in res.output
    assert "not uploaded to the stack Missing" in res.output and "--no-upload" in res.output
    assert json.loads((tmp_path / "prices.json").read_text())["regions"]["us-east-1"] == {"ml.g5.xlarge": 1.4}
