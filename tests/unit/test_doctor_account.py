"""``trainsweep doctor`` on what a first deploy into a new account meets: Lambda concurrency headroom,
where the region comes from, expired credentials."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from trainsweep.local import doctor


def _lambda(limit: int, unreserved: int) -> tuple[Any, Stubber]:
    lam = boto3.client("lambda", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    stub = Stubber(lam)
    stub.add_response(
        "get_account_settings",
        {"AccountLimit": {"ConcurrentExecutions": limit, "UnreservedConcurrentExecutions": unreserved}},
    )
    return lam, stub


def test_a_reservation_a_new_account_cannot_afford_fails_before_cdk_deploy_does() -> None:
    lam, stub = _lambda(10, 10)
    with stub:
        check = doctor.check_lambda_concurrency(lam, wanted=5)
    assert check.level == "fail"
    assert "account limit 10, unreserved 10: up to 0 can be reserved" in check.detail
    assert "parse_reserved_concurrency=5 would make `cdk deploy` fail" in check.detail
    assert "parse_reserved_concurrency=0" in (check.fix or "")


def test_no_reservation_on_a_small_account_is_a_warning_about_throttling() -> None:
    lam, stub = _lambda(50, 50)
    with stub:
        check = doctor.check_lambda_concurrency(lam, wanted=0)
    assert check.level == "warn" and "Concurrent executions" in (check.fix or "")


def test_an_account_with_room_says_how_much_it_can_reserve() -> None:
    lam, stub = _lambda(1000, 990)
    with stub:
        check = doctor.check_lambda_concurrency(lam, wanted=5)
    assert check.level == "ok"
    assert check.detail == (
        "account limit 1000, unreserved 990: up to 890 can be reserved; parse_reserved_concurrency=5"
    )


def test_the_reservation_doctor_checks_is_the_one_cdk_json_sets(tmp_path: Path) -> None:
    assert doctor.reserved_in_cdk_json(tmp_path) == 0  # no cdk.json
    (tmp_path / "cdk.json").write_text(json.dumps({"context": {"parse_reserved_concurrency": "7"}}))
    assert doctor.reserved_in_cdk_json(tmp_path) == 7
    assert doctor.reserved_in_cdk_json() == 0  # the repository deploys with none


@pytest.mark.parametrize("value", ["", None, "lots"])
def test_an_unset_or_unusable_reservation_counts_as_none(tmp_path: Path, value: Any) -> None:
    (tmp_path / "cdk.json").write_text(json.dumps({"context": {"parse_reserved_concurrency": value}}))
    assert doctor.reserved_in_cdk_json(tmp_path) == 0
