"""Shared test fixtures: where the real data lives, fake AWS credentials for every test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REAL_DATA = ROOT.parent / "shared" / "fixtures" / "real-data"


@pytest.fixture(scope="session")
def real_data() -> Path:
    """``../shared/fixtures/real-data`` (read-only; never copied into the repository)."""
    if not REAL_DATA.is_dir():
        pytest.fail(f"real data not found at {REAL_DATA}: the project expects ../shared beside its root")
    return REAL_DATA


@pytest.fixture(autouse=True)
def _fake_aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may reach AWS: dummy credentials and a fixed region for every test."""
    for k in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
