"""The price catalogues: on-demand USD per instance-hour, per region, of SageMaker training and of EC2.

Each platform's catalogue ships with the package, dated, with its source: ``trainsweep/data/prices.json``
(SageMaker training, ``ml.*`` types) and ``trainsweep/data/ec2-prices.json`` (EC2 on-demand Linux, for
the instance families the seeds ran on plain EC2; keys without ``ml.``). ``trainsweep prices refresh
[--platform ec2]`` asks the AWS Pricing API for current figures and writes them to a user cache
(``$TRAINSWEEP_CACHE_DIR`` or ``$XDG_CACHE_HOME/trainsweep`` or ``~/.cache/trainsweep``); cached
figures win over shipped ones. This module never imports boto3: the refresh takes an injected client.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from trainsweep import atomicio
from trainsweep.instances import CATALOGUE, LOCAL_CPU, LOCAL_GPU

CATALOGUE_KIND = "trainsweep.prices"
CATALOGUE_VERSION = 1
CACHE_FILE = "prices.json"
PRICING_SERVICE_CODE = "AmazonSageMaker"
SAGEMAKER, EC2, LOCAL = "sagemaker", "ec2", "local"
"""Where a run ran: a SageMaker training job, a plain EC2 instance, or this machine (SageMaker local mode)."""
PLATFORMS = (SAGEMAKER, EC2, LOCAL)
CATALOGUE_FILES = {SAGEMAKER: "prices.json", EC2: "ec2-prices.json"}
"""Each priced platform's catalogue file: shipped in ``trainsweep/data``, refreshed in the user cache."""
EC2_SERVICE_CODE = "AmazonEC2"
# The Pricing API answers only in a few regions; us-east-1 serves every region's prices.
PRICING_API_REGION = "us-east-1"

_FREE = (LOCAL_CPU, LOCAL_GPU)


class PriceCatalogueError(ValueError):
    """A price catalogue file is not one this version of trainsweep can read."""


def cache_dir() -> Path:
    """The user cache folder for refreshed prices."""
    env = os.environ.get("TRAINSWEEP_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "trainsweep"


def check_catalogue(doc: Any, where: str) -> dict[str, Any]:
    """``doc`` if it is a price catalogue this version reads; else :class:`PriceCatalogueError`."""
    fields = doc if isinstance(doc, dict) else {}
    if (
        fields.get("kind") != CATALOGUE_KIND
        or fields.get("schema_version") != CATALOGUE_VERSION
        or not isinstance(fields.get("regions"), dict)
    ):
        raise PriceCatalogueError(
            f"{where} is not a trainsweep price catalogue of version {CATALOGUE_VERSION} "
            f"(kind={fields.get('kind')!r}, schema_version={fields.get('schema_version')!r}); "
            "delete it or run `trainsweep prices refresh`"
        )
    return fields


@lru_cache(maxsize=2)
def shipped_catalogue(platform: str = SAGEMAKER) -> dict[str, Any]:
    """The catalogue of a platform (``sagemaker``, ``ec2``) that ships with the package."""
    name = CATALOGUE_FILES[platform]
    text = resources.files("trainsweep").joinpath("data", name).read_text(encoding="utf-8")
    return check_catalogue(json.loads(text), f"the shipped {name}")


@lru_cache(maxsize=4)
def _read_cached(path: str, mtime_ns: int) -> dict[str, Any]:
    return check_catalogue(json.loads(Path(path).read_text(encoding="utf-8")), path)


def cached_catalogue(platform: str = SAGEMAKER) -> dict[str, Any] | None:
    """The refreshed catalogue of a platform in the user cache, or None when there is none."""
    path = cache_dir() / CATALOGUE_FILES[platform]
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        return None
    return _read_cached(str(path), mtime)


def catalogue(platform: str = SAGEMAKER) -> dict[str, Any]:
    """Shipped prices overlaid with refreshed ones: ``{"regions": {region: {type: usd}}, "sources": ...}``."""
    shipped = shipped_catalogue(platform)
    regions: dict[str, dict[str, float]] = {r: dict(p) for r, p in shipped["regions"].items()}
    sources = [{"as_of": shipped["as_of"], "source": shipped["source"]}]
    cached = cached_catalogue(platform)
    if cached is not None:
        for region, prices in cached["regions"].items():
            regions.setdefault(region, {}).update(prices)
        sources.append({"as_of": cached["as_of"], "source": cached["source"]})
    return {"regions": regions, "sources": sources}


def hourly_usd(instance_type: str, region: str = "us-east-1", platform: str = SAGEMAKER) -> float | None:
    """On-demand USD per instance-hour of an instance type in a region, on a platform.

    ``platform`` ``sagemaker`` (SageMaker training) or ``ec2`` (the same machine as a plain EC2
    instance: ``ml.p3.2xlarge`` is priced as ``p3.2xlarge``). ``local`` and ``local_gpu``, and the
    ``local`` platform, cost 0. None when the catalogue has no price for the type in that region
    (callers must say so rather than assume a price).
    """
    if instance_type in _FREE or platform == LOCAL:
        return 0.0
    key = instance_type.removeprefix("ml.") if platform == EC2 else instance_type
    price = catalogue(platform)["regions"].get(region, {}).get(key)
    return float(price) if price is not None else None


def prices_said(given: Mapping[str, float] | None, whose: str, region: str = "us-east-1") -> str:
    """Where a figure's prices come from: ``given`` (named, as ``whose``: the sweep's plan, the spec's
    prices) first, then :func:`price_source`."""
    if not given:
        return price_source(region)
    named = ", ".join(f"{t} {p:.3f} USD/h" for t, p in sorted(given.items()))
    return f"{whose} ({named}); otherwise {price_source(region)}"


def price_source(region: str = "us-east-1", platform: str = SAGEMAKER) -> str:
    """A one-line statement of where the prices for a region come from (for reports)."""
    cached = cached_catalogue(platform)
    if cached is not None and region in cached["regions"]:
        return f"AWS Pricing API, refreshed {cached['as_of']}"
    shipped = shipped_catalogue(platform)
    return f"shipped catalogue of {shipped['as_of']} ({shipped['offer']})"


# ---- refresh from the AWS Pricing API ------------------------------------------------------------

_TRAIN_USAGE = re.compile(r"(?:^|-)Train:(?P<type>ml\.[a-z0-9]+\.[a-z0-9]+)$")


def _training_on_demand_usd(item: dict[str, Any], instance_type: str) -> float | None:
    """The hourly on-demand USD of one Pricing API product, if it is training on ``instance_type``."""
    attrs = item.get("product", {}).get("attributes", {})
    usage = attrs.get("usagetype", "")
    m = _TRAIN_USAGE.search(usage)
    is_training = (m is not None and m.group("type") == instance_type) or (
        attrs.get("component") == "Training"
        and attrs.get("instanceName") == instance_type
        and "spot" not in usage.lower()
    )
    return _on_demand_usd(item) if is_training else None


def fetch_prices(
    pricing_client: Any,
    regions: Iterable[str] = ("us-east-1",),
    instance_types: Iterable[str] | None = None,
) -> tuple[dict[str, dict[str, float]], list[str]]:
    """Ask the AWS Pricing API for training prices.

    Args:
        pricing_client: a boto3 ``pricing`` client (region us-east-1); injected so tests can stub it.
        regions: region codes to price.
        instance_types: ``ml.*`` types; default every SageMaker type trainsweep knows.

    Returns:
        ``({region: {instance_type: usd_per_hour}}, missing)`` where ``missing`` lists
        ``region/type`` pairs the API did not price.
    """
    types = list(instance_types) if instance_types is not None else [t for t in CATALOGUE if t not in _FREE]
    out: dict[str, dict[str, float]] = {}
    missing: list[str] = []
    paginator = pricing_client.get_paginator("get_products")
    for region in regions:
        for itype in types:
            filters = {"regionCode": region, "instanceName": itype}
            price = _first_price(
                paginator,
                PRICING_SERVICE_CODE,
                filters,
                functools.partial(_training_on_demand_usd, instance_type=itype),
            )
            if price is None:
                missing.append(f"{region}/{itype}")
            else:
                out.setdefault(region, {})[itype] = price
    return out, missing


def _first_price(
    paginator: Any, service_code: str, filters: dict[str, str], read: Callable[[dict[str, Any]], float | None]
) -> float | None:
    """The first price ``read`` finds in the Pricing API's products matching ``filters`` (TERM_MATCH)."""
    pages = paginator.paginate(
        ServiceCode=service_code,
        Filters=[{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in filters.items()],
        FormatVersion="aws_v1",
    )
    for page in pages:
        for raw in page.get("PriceList", []):
            price = read(json.loads(raw) if isinstance(raw, str) else raw)
            if price is not None:
                return price
    return None


def merged_catalogue(
    existing: dict[str, Any] | None,
    prices: dict[str, dict[str, float]],
    *,
    now: datetime | None = None,
    platform: str = SAGEMAKER,
    replace: Iterable[str] = (),
) -> dict[str, Any]:
    """A catalogue document: ``existing`` (a catalogue, or None) with refreshed ``prices`` merged in.

    Each refreshed region's date goes to ``regions_as_of`` (``as_of`` is the document's last write), so a
    reader can tell how old each region's figures are. Regions in ``replace`` drop their old figures.
    """
    now = now or datetime.now(UTC)
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    existing = existing or {}
    regions: dict[str, dict[str, float]] = {r: dict(p) for r, p in existing.get("regions", {}).items()}
    dated: dict[str, str] = dict(existing.get("regions_as_of", {}))
    for region in replace:
        regions.pop(region, None)
    for region, p in prices.items():
        regions.setdefault(region, {}).update(p)
        dated[region] = stamp
    return {
        "kind": CATALOGUE_KIND,
        "schema_version": CATALOGUE_VERSION,
        "currency": "USD",
        "unit": "per instance-hour",
        "offer": "Amazon EC2, On-Demand, Linux"
        if platform == EC2
        else "Amazon SageMaker Training, On-Demand",
        "as_of": stamp,
        "source": "AWS Pricing API GetProducts, service code "
        + (EC2_SERVICE_CODE if platform == EC2 else PRICING_SERVICE_CODE),
        "regions": regions,
        "regions_as_of": dated,
    }


def region_as_of(doc: dict[str, Any], region: str) -> datetime | None:
    """When a catalogue's figures for ``region`` were fetched (its ``regions_as_of``, else its ``as_of``);
    None when the document does not say in a form this reads."""
    text = doc.get("regions_as_of", {}).get(region) or doc.get("as_of")
    try:
        when = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def write_cache(
    prices: dict[str, dict[str, float]], *, now: datetime | None = None, platform: str = SAGEMAKER
) -> Path:
    """Merge refreshed prices of a platform into the user cache and return its path."""
    path = cache_dir() / CATALOGUE_FILES[platform]
    doc = merged_catalogue(cached_catalogue(platform), prices, now=now, platform=platform)
    return atomicio.write_text(path, json.dumps(doc, indent=2, sort_keys=True) + "\n")


def _on_demand_usd(item: dict[str, Any]) -> float | None:
    """The first positive hourly on-demand USD of one Pricing API product (EC2: the filters chose Linux,
    shared, no SQL; SageMaker: :func:`_training_on_demand_usd` chose the training product)."""
    for term in item.get("terms", {}).get("OnDemand", {}).values():
        for dim in term.get("priceDimensions", {}).values():
            usd = dim.get("pricePerUnit", {}).get("USD")
            if usd is not None and dim.get("unit", "Hrs").lower().startswith("hr") and float(usd) > 0:
                return float(usd)
    return None


def fetch_ec2_prices(
    pricing_client: Any, regions: Iterable[str] = ("us-east-1",), instance_types: Iterable[str] | None = None
) -> tuple[dict[str, dict[str, float]], list[str]]:
    """Ask the AWS Pricing API for EC2 on-demand Linux prices; like :func:`fetch_prices`.

    ``instance_types``: EC2 names (``p3.2xlarge``); default those of the shipped EC2 catalogue.
    """
    shipped = shipped_catalogue(EC2)["regions"]
    default = sorted({t for prices in shipped.values() for t in prices})
    types = list(instance_types) if instance_types is not None else default
    out: dict[str, dict[str, float]] = {}
    missing: list[str] = []
    paginator = pricing_client.get_paginator("get_products")
    for region in regions:
        for itype in types:
            filters = {
                "regionCode": region,
                "instanceType": itype.removeprefix("ml."),
                "operatingSystem": "Linux",
                "tenancy": "Shared",
                "preInstalledSw": "NA",
                "capacitystatus": "Used",
            }
            price = _first_price(paginator, EC2_SERVICE_CODE, filters, _on_demand_usd)
            if price is None:
                missing.append(f"{region}/{itype}")
            else:
                out.setdefault(region, {})[itype.removeprefix("ml.")] = price
    return out, missing


def refresh(
    pricing_client: Any,
    regions: Iterable[str] = ("us-east-1",),
    instance_types: Iterable[str] | None = None,
    platform: str = SAGEMAKER,
) -> tuple[Path, dict[str, dict[str, float]], list[str]]:
    """Fetch current prices of a platform and cache them; returns (cache path, prices, pairs not priced)."""
    fetch = fetch_ec2_prices if platform == EC2 else fetch_prices
    prices, missing = fetch(pricing_client, regions, instance_types)
    return write_cache(prices, platform=platform), prices, missing
