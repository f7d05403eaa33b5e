"""ParseRun under a running job's uploads: a notification for a version already replaced reads nothing,
and a warm function reads an unchanged jobs.json once."""

from __future__ import annotations

from typing import Any

import pytest

from tests.handlers.handler_helpers import BUCKET, put_planned_runs, s3_event
from trainsweep import layout
from trainsweep.aws import runs
from trainsweep.aws import s3 as s3io

RUN = "demo-1-p3-1-64-e0"
LOG_V1 = b"Epoch 1/2\nIteration time: 0.5\n"
LOG_V2 = LOG_V1 + b"Iteration time: 0.4\nEpoch time: 10.0\n"


@pytest.fixture
def reads(s3: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The keys ParseRun reads (the log's chunks, jobs.json)."""
    seen: list[str] = []
    for name in ("open_chunks", "get_json"):
        original = getattr(s3io, name)

        def spy(client: Any, bucket: str, key: str, *a: Any, _f: Any = original, **kw: Any) -> Any:
            seen.append(key)
            return _f(client, bucket, key, *a, **kw)

        monkeypatch.setattr(s3io, name, spy)
    monkeypatch.setattr(runs, "_JOBS_SEEN", {})
    return seen


def _event(key: str, etag: str) -> dict[str, Any]:
    event = s3_event(key)
    event["Records"][0]["s3"]["object"]["eTag"] = etag.strip('"')
    return event


def test_a_notification_for_a_replaced_version_reads_nothing(s3, handler, context, reads):
    put_planned_runs(s3, "demo-1", RUN)
    key = layout.log_key("demo-1", RUN)
    old = s3.put_object(Bucket=BUCKET, Key=key, Body=LOG_V1)["ETag"]
    new = s3.put_object(Bucket=BUCKET, Key=key, Body=LOG_V2)["ETag"]
    assert handler("parse_run")(_event(key, old), context) == {"written": []}
    assert reads == []  # neither the log nor jobs.json
    written = handler("parse_run")(_event(key, new), context)["written"]
    assert written and key in reads


def test_a_warm_function_reads_an_unchanged_jobs_json_once(s3, handler, context, reads):
    put_planned_runs(s3, "demo-1", RUN, "demo-1-p3-1-128-e0")
    for run in (RUN, "demo-1-p3-1-128-e0"):
        key = layout.log_key("demo-1", run)
        etag = s3.put_object(Bucket=BUCKET, Key=key, Body=LOG_V2)["ETag"]
        assert handler("parse_run")(_event(key, etag), context)["written"]
    assert reads.count(layout.jobs_key("demo-1")) == 1
    put_planned_runs(s3, "demo-1", RUN)  # a new plan is read again
    key = layout.log_key("demo-1", RUN)
    handler("parse_run")(_event(key, s3.head_object(Bucket=BUCKET, Key=key)["ETag"]), context)
    assert reads.count(layout.jobs_key("demo-1")) == 2
