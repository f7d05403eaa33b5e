"""Prices where a sweep runs, as PlanSweep and ``trainsweep run`` see them: stack cache, then Pricing API.

The shipped catalogue prices us-east-1 only, and a user's ``prices refresh`` cache lies on their disk,
where the PlanSweep function never looks. So a sweep's instance types are priced in its region, in this
order (the spec's ``prices`` come first: :func:`trainsweep.spec.plan_sweep` applies them):

1. the stack's cache, ``layout.PRICES_KEY`` in the results bucket, when its figures for the region are
   younger than :data:`MAX_AGE`;
2. the AWS Pricing API (``pricing:GetProducts``, asked for the types still unpriced); its answers are
   merged into the stack's cache, so the next sweep in the region asks nothing;
3. the stack's cache however old, then the shipped catalogue (the API did not answer, or has no price).

A cache that cannot be read or written, or a Pricing API that does not answer, only costs the figures
it would have given (logged): the plan goes on with the next source, and says which types stay unpriced.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from trainsweep import layout
from trainsweep.aws import s3 as s3io
from trainsweep.aws.credentials import raise_for_credentials
from trainsweep.cost import prices
from trainsweep.instances import LOCAL_CPU, LOCAL_GPU
from trainsweep.spec import PriceFn

if TYPE_CHECKING:
    from mypy_boto3_pricing import PricingClient
    from mypy_boto3_s3 import S3Client

LOG = logging.getLogger(__name__)
MAX_AGE = timedelta(days=30)
"""Figures of the stack's cache older than this are asked again (AWS changes prices a few times a year)."""


def pricing_client(session: Any | None = None) -> PricingClient:
    """A Pricing API client (of ``session``, default boto3's) in the region that serves every region's
    prices, with short timeouts."""
    import boto3
    from botocore.config import Config

    cfg = Config(connect_timeout=5, read_timeout=10, retries={"max_attempts": 3, "mode": "standard"})
    return (session or boto3).client("pricing", region_name=prices.PRICING_API_REGION, config=cfg)


def read_stack_prices(s3: S3Client, bucket: str) -> dict[str, Any] | None:
    """The stack's price cache, or None when there is none or it cannot be read (logged)."""
    from botocore.exceptions import BotoCoreError, ClientError

    where = f"s3://{bucket}/{layout.PRICES_KEY}"
    try:
        doc = s3io.get_json(s3, bucket, layout.PRICES_KEY)
    except (ValueError, BotoCoreError, ClientError) as exc:
        raise_for_credentials(exc)
        LOG.warning("%s is unreadable (%s): pricing without it", where, exc)
        return None
    if doc is None:
        return None
    try:
        return prices.check_catalogue(doc, where)
    except prices.PriceCatalogueError as exc:
        LOG.warning("%s; pricing without it", exc)
        return None


def write_stack_prices(
    s3: S3Client,
    bucket: str,
    fetched: dict[str, dict[str, float]],
    *,
    now: datetime | None = None,
    replace: Iterable[str] = (),
) -> dict[str, Any]:
    """Merge freshly fetched ``{region: {type: usd}}`` into the stack's cache; returns what was written."""
    doc = prices.merged_catalogue(read_stack_prices(s3, bucket), fetched, now=now, replace=replace)
    s3io.put_bytes(s3, bucket, layout.PRICES_KEY, (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode())
    return doc


def stack_price_fn(
    s3: S3Client,
    bucket: str | None,
    pricing: PricingClient | None,
    region: str,
    instance_types: Iterable[str],
    *,
    now: datetime | None = None,
) -> PriceFn:
    """A price function for :func:`trainsweep.spec.plan_sweep` that knows ``instance_types`` in ``region``.

    ``pricing`` None: the Pricing API is not asked (local mode's embedded AWS has none). ``bucket``
    None: no stack (``trainsweep run`` before the stack is found): no cache read or written.
    """
    now = now or datetime.now(UTC)
    wanted = [t for t in instance_types if t not in (LOCAL_CPU, LOCAL_GPU)]
    cached = read_stack_prices(s3, bucket) if bucket else None
    in_cache = _usable(cached["regions"].get(region)) if cached else {}
    as_of = prices.region_as_of(cached, region) if cached else None
    fresh = as_of is not None and now - as_of <= MAX_AGE
    known = {t: in_cache[t] for t in wanted if fresh and t in in_cache}
    ask = [t for t in wanted if t not in known]
    if ask and pricing is not None:
        known.update(_ask_pricing_api(s3, bucket, pricing, region, ask, now=now, fresh=fresh))
    for t in wanted:
        if t not in known and t in in_cache:  # an old figure of the API beats none, and the shipped one
            known[t] = in_cache[t]

    def price(instance_type: str, where: str) -> float | None:
        if where == region and instance_type in known:
            return known[instance_type]
        return prices.hourly_usd(instance_type, where)

    return price


def _ask_pricing_api(
    s3: S3Client,
    bucket: str | None,
    pricing: PricingClient,
    region: str,
    ask: list[str],
    *,
    now: datetime,
    fresh: bool,
) -> dict[str, float]:
    """The Pricing API's prices of ``ask`` in ``region``, cached in the stack's bucket when there is one
    (the region's figures replaced unless the cache was ``fresh``); nothing when the API does not answer."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        fetched, missing = prices.fetch_prices(pricing, [region], ask)
    except (BotoCoreError, ClientError) as exc:
        raise_for_credentials(exc)  # no credentials is no reason to plan with other prices
        LOG.warning("the AWS Pricing API did not answer (%s); pricing %s otherwise", exc, ", ".join(ask))
        return {}
    got = fetched.get(region, {})
    if missing:
        LOG.info("the AWS Pricing API has no training price for %s", ", ".join(missing))
    if got and bucket:
        try:
            write_stack_prices(s3, bucket, {region: got}, now=now, replace=[] if fresh else [region])
        except (BotoCoreError, ClientError) as exc:
            LOG.warning("could not cache prices in s3://%s/%s: %s", bucket, layout.PRICES_KEY, exc)
    return got


def _usable(region_prices: Any) -> dict[str, float]:
    """The positive numeric figures of one region of a cache (a hand-edited one may hold anything else:
    that is no price, never a made-up one)."""
    if not isinstance(region_prices, dict):
        return {}
    return {
        t: float(v)
        for t, v in region_prices.items()
        if isinstance(v, int | float) and not isinstance(v, bool) and 0 < v < float("inf")
    }
