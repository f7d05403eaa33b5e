"""PlanSweep prices a sweep in any region (issue 13 item 2): the stack's cache, the Pricing API, the spec.

moto 5.2.5 does not implement the Pricing API (``GetProducts`` answers 404 "Not yet implemented"), so
the Pricing client is a real botocore client stubbed at the AWS edge (``botocore.stub.Stubber``); S3 is
moto's. The handler is the real one, loaded from ``lambdas/plan_sweep/handler.py``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from tests.handlers.handler_helpers import BUCKET, s3_event
from trainsweep import layout
from trainsweep.aws import pricing
from trainsweep.aws import s3 as s3io
from trainsweep.errors import BudgetExceededError, SpecError

SPEC: dict[str, Any] = {
    "name": "eu",
    "workload": {"model": "mnist-cnn", "epochs": 2},
    "instance_types": ["ml.g5.xlarge", "ml.g4dn.xlarge"],
    "batch_sizes": [64, 128],
    "max_runtime_seconds": 3600,
    "budget_usd": 50,
}
EU_PRICES = {"ml.g5.xlarge": 1.57, "ml.g4dn.xlarge": 0.822}


def _product(itype: str, usd: float) -> str:
    return json.dumps(
        {
            "product": {"attributes": {"usagetype": f"EU-Train:{itype}", "instanceName": itype}},
            "terms": {
                "OnDemand": {
                    "T": {"priceDimensions": {"D": {"unit": "Hrs", "pricePerUnit": {"USD": str(usd)}}}}
                }
            },
        }
    )


def _request(itype: str, region: str = "eu-west-1") -> dict[str, Any]:
    return {
        "ServiceCode": "AmazonSageMaker",
        "Filters": [
            {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
            {"Type": "TERM_MATCH", "Field": "instanceName", "Value": itype},
        ],
        "FormatVersion": "aws_v1",
    }


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch, s3: Any) -> Stubber:
    """The Pricing client PlanSweep gets, stubbed; the function runs in eu-west-1."""
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    client = boto3.client("pricing", region_name="us-east-1")
    monkeypatch.setattr(pricing, "pricing_client", lambda *_: client)
    with Stubber(client) as stub:
        yield stub


def test_an_eu_sweep_with_a_budget_is_priced_by_the_pricing_api_and_cached(s3, api, handler, context):
    for itype, usd in EU_PRICES.items():
        api.add_response("get_products", {"PriceList": [_product(itype, usd)]}, _request(itype))
    out = handler("plan_sweep")({"input": {"spec": SPEC, "sweep_id": "eu-1"}}, context)
    api.assert_no_pending_responses()
    # 2 jobs per type, 1 h each
    assert out["worst_case_cost_usd"] == round(2 * (1.57 + 0.822), 2)
    jobs = json.loads(s3io.get_bytes(s3, BUCKET, layout.jobs_key("eu-1")) or b"")
    assert jobs["hourly_usd"] == EU_PRICES
    cache = s3io.get_json(s3, BUCKET, layout.PRICES_KEY)
    assert cache["kind"] == "trainsweep.prices" and cache["regions"]["eu-west-1"] == EU_PRICES
    # the next sweep in the region asks nothing: the stub has no response left and would raise
    out = handler("plan_sweep")({"input": {"spec": SPEC, "sweep_id": "eu-2"}}, context)
    assert out["worst_case_cost_usd"] == round(2 * (1.57 + 0.822), 2)


def test_an_over_budget_eu_sweep_is_refused_with_the_apis_prices(s3, api, handler, context):
    for itype, usd in EU_PRICES.items():
        api.add_response("get_products", {"PriceList": [_product(itype, usd)]}, _request(itype))
    with pytest.raises(BudgetExceededError, match=r"4\.78 USD exceeds budget_usd 1\.00"):
        handler("plan_sweep")({"input": {"spec": {**SPEC, "budget_usd": 1}, "sweep_id": "eu-3"}}, context)
    assert s3io.get_bytes(s3, BUCKET, layout.jobs_key("eu-3")) is None


def test_without_the_api_an_unpriced_type_is_named_with_the_spec_override_to_give(s3, api, handler, context):
    api.add_client_error("get_products", "AccessDeniedException", "no pricing:GetProducts", 400)
    with pytest.raises(SpecError) as err:
        handler("plan_sweep")({"input": {"spec": SPEC, "sweep_id": "eu-4"}}, context)
    text = str(err.value)
    assert "no price known for ml.g5.xlarge, ml.g4dn.xlarge in eu-west-1" in text
    assert "prices: {ml.g5.xlarge: <USD per hour>, ml.g4dn.xlarge: <USD per hour>}" in text
    assert s3io.get_bytes(s3, BUCKET, layout.jobs_key("eu-4")) is None


def test_the_spec_prices_override_plans_what_the_api_cannot_price(s3, api, handler, context):
    api.add_response("get_products", {"PriceList": []}, _request("ml.g5.xlarge"))
    api.add_response(
        "get_products", {"PriceList": [_product("ml.g4dn.xlarge", 0.822)]}, _request("ml.g4dn.xlarge")
    )
    spec = {**SPEC, "prices": {"ml.g5.xlarge": 2.0}}
    out = handler("plan_sweep")({"input": {"spec": spec, "sweep_id": "eu-5"}}, context)
    assert out["worst_case_cost_usd"] == round(2 * (2.0 + 0.822), 2)
    # only what the API said is cached, never the spec's figure
    assert s3io.get_json(s3, BUCKET, layout.PRICES_KEY)["regions"]["eu-west-1"] == {"ml.g4dn.xlarge": 0.822}


def test_old_cached_figures_are_asked_again_and_used_when_the_api_is_down(s3, api, handler, context):
    old = datetime.now(UTC) - pricing.MAX_AGE - timedelta(days=1)
    pricing.write_stack_prices(
        s3, BUCKET, {"eu-west-1": {"ml.g5.xlarge": 1.4, "ml.g4dn.xlarge": 0.7}}, now=old
    )
    for itype, usd in EU_PRICES.items():
        api.add_response("get_products", {"PriceList": [_product(itype, usd)]}, _request(itype))
    out = handler("plan_sweep")({"input": {"spec": SPEC, "sweep_id": "eu-6"}}, context)
    assert out["worst_case_cost_usd"] == round(2 * (1.57 + 0.822), 2)
    cache = s3io.get_json(s3, BUCKET, layout.PRICES_KEY)
    assert cache["regions"]["eu-west-1"] == EU_PRICES
    # refreshed figures that are old again, and no API: the old figures still price the sweep
    pricing.write_stack_prices(
        s3, BUCKET, {"eu-west-1": {"ml.g5.xlarge": 1.4, "ml.g4dn.xlarge": 0.7}}, now=old
    )
    api.add_client_error("get_products", "ThrottlingException", "slow down", 400)
    out = handler("plan_sweep")({"input": {"spec": SPEC, "sweep_id": "eu-7"}}, context)
    assert out["worst_case_cost_usd"] == round(2 * (1.4 + 0.7), 2)


def test_an_unreadable_stack_cache_is_not_a_price(s3, api, handler, context):
    s3.put_object(
        Bucket=BUCKET, Key=layout.PRICES_KEY, Body=b'{"regions": {"eu-west-1": {"ml.g5.xlarge": 0.01}}}'
    )
    for itype, usd in EU_PRICES.items():
        api.add_response("get_products", {"PriceList": [_product(itype, usd)]}, _request(itype))
    out = handler("plan_sweep")({"input": {"spec": SPEC, "sweep_id": "eu-8"}}, context)
    assert out["worst_case_cost_usd"] == round(2 * (1.57 + 0.822), 2)


def test_figures_in_the_stack_cache_that_are_not_prices_are_asked_again(s3, api, handler, context):
    pricing.write_stack_prices(s3, BUCKET, {"eu-west-1": {"ml.g5.xlarge": 1.57}})
    doc = s3io.get_json(s3, BUCKET, layout.PRICES_KEY)
    doc["regions"]["eu-west-1"]["ml.g4dn.xlarge"] = "cheap"  # edited by hand
    s3io.put_json(s3, BUCKET, layout.PRICES_KEY, doc)
    api.add_response(
        "get_products", {"PriceList": [_product("ml.g4dn.xlarge", 0.822)]}, _request("ml.g4dn.xlarge")
    )
    out = handler("plan_sweep")({"input": {"spec": SPEC, "sweep_id": "eu-9"}}, context)
    assert out["worst_case_cost_usd"] == round(2 * (1.57 + 0.822), 2)


def test_the_sweep_report_costs_an_eu_sweep_at_the_prices_its_plan_used(s3, api, handler, context, real_data):
    """The report priced cells from the shipped catalogue (us-east-1 only) and ignored the plan's prices."""
    fcn = real_data / "cloud-ML/seismic-fcn/experimental_results/2020-06-FCN-on-sagemaker/logs"
    api.add_response(
        "get_products", {"PriceList": [_product("ml.p3.8xlarge", 15.0)]}, _request("ml.p3.8xlarge")
    )
    spec = {**SPEC, "instance_types": ["ml.p3.8xlarge"], "batch_sizes": [256, 512], "budget_usd": 100}
    handler("plan_sweep")({"input": {"spec": spec, "sweep_id": "eu-r"}}, context)
    cells = []
    for job in s3io.get_json(s3, BUCKET, layout.jobs_key("eu-r"))["jobs"]:
        run, bs = job["run_names"][0], job["batch_sizes"][0]
        log = (fcn / f"result-p3-4-{bs}-e1.txt").read_bytes()
        s3.put_object(Bucket=BUCKET, Key=layout.log_key("eu-r", run), Body=log)
        handler("parse_run")(s3_event(layout.log_key("eu-r", run)), context)
        cells.append(
            {"run_name": run, "job_name": job["job_name"], "instance_type": "ml.p3.8xlarge", "batch_size": bs,
             "repetition": 0, "status": "completed", "reason": None, "billable_s": 900.0}
        )  # fmt: skip
    handler("aggregate_sweep")({"sweep_id": "eu-r", "cells": [cells]}, context)
    doc = s3io.get_json(s3, BUCKET, layout.results_key("eu-r", layout.SWEEP_JSON))
    rows = doc["configurations"]
    assert [r["usd_per_hour"] for r in rows] == [15.0, 15.0]
    assert all(r["cost_to_train_usd"] is not None for r in rows)
    assert "the sweep's plan (ml.p3.8xlarge 15.000 USD/h)" in doc["prices"]
