"""The embedded AWS serves only the run that started it: another process, with any other credentials or
none, is refused by every service a local sweep uses and by moto's control API, and each refusal is logged."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from trainsweep.local.server import EmbeddedAws

INTRUDER = Path(__file__).resolve().parents[1] / "aws_intruder.py"
BUCKET = "trainsweep-results"


def _intrude(endpoint: str, key: str, secret: str) -> dict[str, int | str]:
    """The intruder script's answers, from a separate process."""
    done = subprocess.run(
        [sys.executable, str(INTRUDER), endpoint, key, secret], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def aws():
    embedded = EmbeddedAws().start()
    embedded.client("s3").create_bucket(Bucket=BUCKET)
    yield embedded
    embedded.close()


@pytest.mark.parametrize(
    "who",
    ["the old fixed test keys", "another access key", "the sweep's key id with a wrong secret", "unsigned"],
)
def test_another_process_is_refused_by_every_service(
    aws: EmbeddedAws, who: str, caplog: pytest.LogCaptureFixture
) -> None:
    key, secret = {
        "the old fixed test keys": ("testing", "testing"),
        "another access key": ("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
        "the sweep's key id with a wrong secret": (aws.credentials.access_key_id, "x" * 40),
        "unsigned": ("-", "-"),
    }[who]
    refused_before = len(aws._server.guard.refused)
    with caplog.at_level(logging.WARNING, logger="trainsweep.local.access"):
        got = _intrude(aws.endpoint_url, key, secret)
    assert got and all(status == 403 for status in got.values()), got
    assert len(aws._server.guard.refused) - refused_before == len(got)
    assert sum("refused" in r.getMessage() for r in caplog.records) == len(got)
    assert aws.client("s3").list_objects_v2(Bucket=BUCKET).get("KeyCount", 0) == 0  # nothing written
    assert not aws.client("sagemaker").list_training_jobs()["TrainingJobSummaries"]  # no job of theirs


def test_the_runs_own_credentials_get_in(aws: EmbeddedAws) -> None:
    """The same calls with the run's credentials reach the services (what the sweep's processes use)."""
    got = _intrude(aws.endpoint_url, aws.credentials.access_key_id, aws.credentials.secret_access_key)
    assert got["s3:ListBuckets"] == got["s3:PutObject"] == got["sts:GetCallerIdentity"] == 200, got
    assert got["sagemaker:ListTrainingJobs"] == got["logs:DescribeLogGroups"] == 200, got
    assert all(
        got[f"{m} {p}"] == 403 for m, p in (("GET", "/moto-api/data.json"), ("POST", "/moto-api/reset"))
    )
    aws.client("s3").delete_object(Bucket=BUCKET, Key="logs/x.log")


def test_each_run_issues_new_credentials_and_close_turns_checking_off() -> None:
    from moto import settings

    before = settings.INITIAL_NO_AUTH_ACTION_COUNT
    with EmbeddedAws() as first:
        first_key = first.credentials
        assert settings.INITIAL_NO_AUTH_ACTION_COUNT == 0
    with EmbeddedAws() as second:
        assert second.credentials.access_key_id != first_key.access_key_id
        assert second.credentials.secret_access_key != first_key.secret_access_key
        assert second.client("s3").list_buckets()["Buckets"] == []  # the new keys work
    assert before == settings.INITIAL_NO_AUTH_ACTION_COUNT


def test_a_flood_of_refused_requests_is_counted_not_logged_line_by_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from werkzeug.test import Client

    from trainsweep.local import access

    def never_called(environ: dict, start_response: object) -> list[bytes]:
        raise AssertionError("a refused request reached moto")

    guard = access.AccessGuard(never_called, access.SweepCredentials("AKIAEXAMPLE", "secret", "token"))
    client = Client(guard)
    flood = 2 * access.MAX_REFUSALS_KEPT + 5
    with caplog.at_level(logging.WARNING, logger="trainsweep.local.access"):
        for _ in range(flood):
            assert client.get("/bucket/key").status_code == 403
    assert guard.refused_count == flood
    assert len(guard.refused) == access.MAX_REFUSALS_KEPT
    assert len(caplog.records) == access.MAX_REFUSALS_KEPT + 2  # then one line per thousand
