"""The price catalogue: shipped figures, the user cache, and the refresh from the AWS Pricing API."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber

from trainsweep.cost import prices
from trainsweep.instances import CATALOGUE


@pytest.fixture(autouse=True)
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINSWEEP_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_shipped_prices_are_of_catalogue_types_and_price_every_example():
    """Types added to the catalogue without a checked price have none shipped (``prices refresh`` or a
    spec's ``prices`` give it); the examples' types must all be priced."""
    shipped = prices.shipped_catalogue()["regions"]["us-east-1"]
    assert sorted(set(shipped) - set(CATALOGUE)) == []
    examples = Path(__file__).resolve().parents[2] / "examples"
    used = set(re.findall(r"\bml\.[a-z0-9-]+\.[0-9]*x?large\b", _texts(examples)))
    assert used and sorted(t for t in used if prices.hourly_usd(t) is None) == []


def _texts(folder: Path) -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(folder.rglob("*.yaml")))


def test_shipped_catalogue_states_date_and_source():
    doc = prices.shipped_catalogue()
    assert doc["as_of"] and "aws.amazon.com/sagemaker/pricing" in doc["source"]


def test_local_modes_cost_nothing():
    assert prices.hourly_usd("local") == 0.0
    assert prices.hourly_usd("local_gpu", "eu-west-1") == 0.0


def test_p3_2xlarge_price_is_the_listed_one():
    assert prices.hourly_usd("ml.p3.2xlarge") == pytest.approx(3.825)


def test_unknown_type_or_region_has_no_price():
    assert prices.hourly_usd("ml.x9.huge") is None
    assert prices.hourly_usd("ml.p3.2xlarge", "mars-north-1") is None


def test_cached_prices_override_shipped_ones(empty_cache):
    prices.write_cache({"us-east-1": {"ml.p3.2xlarge": 3.0}, "eu-west-1": {"ml.p3.2xlarge": 4.1}})
    assert prices.hourly_usd("ml.p3.2xlarge") == 3.0
    assert prices.hourly_usd("ml.p3.2xlarge", "eu-west-1") == 4.1
    assert prices.hourly_usd("ml.g4dn.xlarge") == pytest.approx(0.736)  # untouched entry stays shipped
    assert "Pricing API" in prices.price_source("eu-west-1")


def test_a_foreign_cache_file_is_rejected_with_advice(empty_cache):
    empty_cache.mkdir(parents=True)
    (empty_cache / prices.CACHE_FILE).write_text(json.dumps({"kind": "other"}))
    with pytest.raises(prices.PriceCatalogueError, match="prices refresh"):
        prices.hourly_usd("ml.p3.2xlarge")


def _product(usagetype: str, instance: str, usd: str, component: str = "Training") -> str:
    return json.dumps(
        {
            "product": {
                "attributes": {
                    "usagetype": usagetype,
                    "instanceName": instance,
                    "component": component,
                    "regionCode": "us-east-1",
                }
            },
            "terms": {
                "OnDemand": {
                    "SKU.T": {"priceDimensions": {"SKU.T.R": {"unit": "Hrs", "pricePerUnit": {"USD": usd}}}}
                }
            },
        }
    )


def _request(itype: str, region: str = "us-east-1") -> dict:
    return {
        "ServiceCode": "AmazonSageMaker",
        "Filters": [
            {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
            {"Type": "TERM_MATCH", "Field": "instanceName", "Value": itype},
        ],
        "FormatVersion": "aws_v1",
    }


def test_refresh_reads_training_on_demand_prices_and_caches_them(empty_cache):
    client = boto3.client("pricing", region_name="us-east-1")
    with Stubber(client) as stub:
        # Hosting and spot products of the same type come first and must be ignored.
        stub.add_response(
            "get_products",
            {
                "PriceList": [
                    _product("USE1-Host:ml.p3.2xlarge", "ml.p3.2xlarge", "4.0", component="Hosting"),
                    _product("USE1-Train:ml.p3.2xlarge-Spot", "ml.p3.2xlarge", "1.1"),
                ],
                "FormatVersion": "aws_v1",
                "NextToken": "page2",
            },
            _request("ml.p3.2xlarge"),
        )
        stub.add_response(
            "get_products",
            {"PriceList": [_product("USE1-Train:ml.p3.2xlarge", "ml.p3.2xlarge", "3.9000000000")]},
            {**_request("ml.p3.2xlarge"), "NextToken": "page2"},
        )
        stub.add_response("get_products", {"PriceList": []}, _request("ml.c5.xlarge"))
        path, fetched, missing = prices.refresh(client, ["us-east-1"], ["ml.p3.2xlarge", "ml.c5.xlarge"])
        stub.assert_no_pending_responses()
    assert fetched == {"us-east-1": {"ml.p3.2xlarge": 3.9}}
    assert missing == ["us-east-1/ml.c5.xlarge"]
    assert path.parent == empty_cache
    assert prices.hourly_usd("ml.p3.2xlarge") == 3.9


def test_cache_file_records_when_it_was_written(empty_cache):
    path = prices.write_cache({"us-east-1": {"ml.c5.xlarge": 0.2}}, now=datetime(2026, 1, 2, tzinfo=UTC))
    assert json.loads(path.read_text())["as_of"] == "2026-01-02T00:00:00Z"


# ---- EC2 (issue 12: runs on plain EC2 pay EC2 prices) ---------------------------------------------------


def test_the_shipped_ec2_catalogue_is_dated_sourced_and_prices_the_seed_families():
    doc = prices.shipped_catalogue(prices.EC2)
    assert doc["as_of"] and "aws.amazon.com/ec2/pricing" in doc["source"]
    for itype in ("ml.p2.xlarge", "ml.p3.2xlarge", "ml.g4dn.xlarge", "ml.g4dn.12xlarge", "ml.c4.xlarge"):
        assert prices.hourly_usd(itype, platform=prices.EC2) is not None, itype
    assert prices.hourly_usd("ml.c5.xlarge", platform=prices.EC2) == 0.17  # seed 002's figure
    # the same machine costs less as a plain EC2 instance than as a SageMaker training instance
    assert prices.hourly_usd("ml.p3.2xlarge", platform=prices.EC2) < prices.hourly_usd("ml.p3.2xlarge")


def test_refresh_of_ec2_prices_reads_linux_on_demand_and_caches_them_apart(empty_cache):
    client = boto3.client("pricing", region_name="us-east-1")
    product = json.loads(_product("BoxUsage:p3.2xlarge", "", "3.1000000000"))
    filters = {
        "regionCode": "us-east-1",
        "instanceType": "p3.2xlarge",
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
    }
    request = {
        "ServiceCode": "AmazonEC2",
        "Filters": [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in filters.items()],
        "FormatVersion": "aws_v1",
    }
    with Stubber(client) as stub:
        stub.add_response("get_products", {"PriceList": [json.dumps(product)]}, request)
        path, fetched, missing = prices.refresh(client, ["us-east-1"], ["p3.2xlarge"], platform=prices.EC2)
        stub.assert_no_pending_responses()
    assert fetched == {"us-east-1": {"p3.2xlarge": 3.1}} and missing == []
    assert path.name == "ec2-prices.json"
    assert prices.hourly_usd("ml.p3.2xlarge", platform=prices.EC2) == 3.1
    assert prices.hourly_usd("ml.p3.2xlarge") == 3.825  # SageMaker's price untouched
    assert "refreshed" in prices.price_source("us-east-1", prices.EC2)
