"""The account's SageMaker training-instance quotas, where Service Quotas lets us read them."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_service_quotas import ServiceQuotasClient

LOG = logging.getLogger(__name__)
SERVICE_CODE = "sagemaker"


def quota_name(instance_type: str, *, spot: bool = False) -> str:
    """The Service Quotas name of the (spot) training quota of an instance type."""
    return f"{instance_type} for {'spot ' if spot else ''}training job usage"


def training_instance_quotas(
    client: ServiceQuotasClient, instance_types: Iterable[str], *, spot: bool = False
) -> dict[str, int | None]:
    """Instances of each type the account may use for training at once; None where unreadable.

    Unreadable (no permission, API not available, quota not listed) is not an error: the sweep runs
    with the spec's concurrency and SageMaker's ResourceLimitExceeded is retried.
    """
    wanted = {quota_name(t, spot=spot): t for t in instance_types}
    found: dict[str, int | None] = {t: None for t in wanted.values()}
    if not wanted:
        return found
    try:
        kwargs: dict[str, Any] = {"ServiceCode": SERVICE_CODE}
        while True:
            page = client.list_service_quotas(**kwargs)
            for q in page.get("Quotas", []):
                t = wanted.get(q.get("QuotaName", ""))
                if t is not None and q.get("Value") is not None:
                    found[t] = int(q["Value"])
            token = page.get("NextToken")
            if not token or token == kwargs.get("NextToken"):
                break
            kwargs["NextToken"] = token
    except Exception as exc:  # any failure just means "unknown": never block a sweep on this read
        LOG.warning("SageMaker quotas unreadable, running without them: %s", exc)
    return found
