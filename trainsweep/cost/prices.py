"""The price catalogue: on-demand SageMaker training USD per instance-hour, per region.

A catalogue ships with the package (``trainsweep/data/prices.json``, dated, with its source).
``trainsweep prices refresh`` asks the AWS Pricing API for current figures and writes them to a user
cache (``$TRAINSWEEP_CACHE_DIR`` or ``$XDG_CACHE_HOME/trainsweep`` or ``~/.cache/trainsweep``); cached
figures win over shipped ones. This module never imports boto3: the refresh takes an injected client.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from trainsweep.instances import CATALOGUE, LOCAL_CPU, LOCAL_GPU

CATALOGUE_KIND = "trainsweep.prices"
CATALOGUE_VERSION = 1
CACHE_FILE = "prices.json"
PRICING_SERVICE_CODE = "AmazonSageMaker"
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


def _check(doc: dict[str, Any], where: str) -> dict[str, Any]:
    if doc.get("kind") != CATALOGUE_KIND or doc.get("schema_version") != CATALOGUE_VERSION:
        raise PriceCatalogueError(
            f"{where} is not a trainsweep price catalogue of version {CATALOGUE_VERSION} "
            f"(kind={doc.get('kind')!r}, schema_version={doc.get('schema_version')!r}); "
            "delete it or run `trainsweep prices refresh`"
        )
    return doc


@lru_cache(maxsize=1)
def shipped_catalogue() -> dict[str, Any]:
    """The catalogue that ships with the package."""
    text = resources.files("trainsweep").joinpath("data", "prices.json").read_text(encoding="utf-8")
    return _check(json.loads(text), "the shipped prices.json")


@lru_cache(maxsize=4)
def _read_cached(path: str, mtime_ns: int) -> dict[str, Any]:
    return _check(json.loads(Path(path).read_text(encoding="utf-8")), path)


def cached_catalogue() -> dict[str, Any] | None:
    """The refreshed catalogue in the user cache, or None when there is none."""
    path = cache_dir() / CACHE_FILE
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        return None
    return _read_cached(str(path), mtime)


def catalogue() -> dict[str, Any]:
    """Shipped prices overlaid with refreshed ones: ``{"regions": {region: {type: usd}}, "sources": ...}``."""
    shipped = shipped_catalogue()
    regions: dict[str, dict[str, float]] = {r: dict(p) for r, p in shipped["regions"].items()}
    sources = [{"as_of": shipped["as_of"], "source": shipped["source"]}]
    cached = cached_catalogue()
    if cached is not None:
        for region, prices in cached["regions"].items():
            regions.setdefault(region, {}).update(prices)
        sources.append({"as_of": cached["as_of"], "source": cached["source"]})
    return {"regions": regions, "sources": sources}


def hourly_usd(instance_type: str, region: str = "us-east-1") -> float | None:
    """On-demand USD per instance-hour of a SageMaker training instance type in a region.

    ``local`` and ``local_gpu`` cost 0. None when the catalogue has no price for the type in that
    region (callers must say so rather than assume a price).
    """
    if instance_type in _FREE:
        return 0.0
    price = catalogue()["regions"].get(region, {}).get(instance_type)
    return float(price) if price is not None else None


def price_source(region: str = "us-east-1") -> str:
    """A one-line statement of where the prices for a region come from (for reports)."""
    cached = cached_catalogue()
    if cached is not None and region in cached["regions"]:
        return f"AWS Pricing API, refreshed {cached['as_of']}"
    shipped = shipped_catalogue()
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
    if not is_training:
        return None
    for term in item.get("terms", {}).get("OnDemand", {}).values():
        for dim in term.get("priceDimensions", {}).values():
            usd = dim.get("pricePerUnit", {}).get("USD")
            if usd is not None and dim.get("unit", "Hrs").lower().startswith("hr"):
                value = float(usd)
                if value > 0:
                    return value
    return None


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
            price = None
            pages = paginator.paginate(
                ServiceCode=PRICING_SERVICE_CODE,
                Filters=[
                    {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
                    {"Type": "TERM_MATCH", "Field": "instanceName", "Value": itype},
                ],
                FormatVersion="aws_v1",
            )
            for page in pages:
                for raw in page.get("PriceList", []):
                    item = json.loads(raw) if isinstance(raw, str) else raw
                    price = _training_on_demand_usd(item, itype)
                    if price is not None:
                        break
                if price is not None:
                    break
            if price is None:
                missing.append(f"{region}/{itype}")
            else:
                out.setdefault(region, {})[itype] = price
    return out, missing


def write_cache(prices: dict[str, dict[str, float]], *, now: datetime | None = None) -> Path:
    """Merge refreshed prices into the user cache and return its path."""
    now = now or datetime.now(UTC)
    path = cache_dir() / CACHE_FILE
    existing = cached_catalogue() or {}
    regions: dict[str, dict[str, float]] = {r: dict(p) for r, p in existing.get("regions", {}).items()}
    for region, p in prices.items():
        regions.setdefault(region, {}).update(p)
    doc = {
        "kind": CATALOGUE_KIND,
        "schema_version": CATALOGUE_VERSION,
        "currency": "USD",
        "unit": "per instance-hour",
        "offer": "Amazon SageMaker Training, On-Demand",
        "as_of": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "source": f"AWS Pricing API GetProducts, service code {PRICING_SERVICE_CODE}",
        "regions": regions,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def refresh(
    pricing_client: Any, regions: Iterable[str] = ("us-east-1",), instance_types: Iterable[str] | None = None
) -> tuple[Path, dict[str, dict[str, float]], list[str]]:
    """Fetch current prices and cache them; returns (cache path, prices fetched, pairs not priced)."""
    prices, missing = fetch_prices(pricing_client, regions, instance_types)
    return write_cache(prices), prices, missing
