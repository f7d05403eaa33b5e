"""Copy a SageMaker training job's CloudWatch log stream to S3, completely.

The seeds exported logs without pagination and lost their beginnings (a log that starts mid-epoch).
``GetLogEvents`` pages forward from the head; the end is a ``nextForwardToken`` equal to the one sent.
An empty page is not the end (AWS: "it is possible to get a response with no events and a token that
leads to more"), so empty pages are followed too; a stream that hands out new tokens for empty pages
without end (one still being written) is given up after ``MAX_EMPTY_PAGES`` of them in a row, with an
error rather than a silently shortened log.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_logs import CloudWatchLogsClient

MAX_EMPTY_PAGES = 100
_HOST = re.compile(r"/algo-(\d+)(?:-|$)")


class UnfinishedStreamError(RuntimeError):
    """The stream kept handing out new tokens for empty pages: its end was never reached."""


def iter_log_messages(
    logs: CloudWatchLogsClient,
    group: str,
    stream: str,
    *,
    page_limit: int | None = None,
    max_empty_pages: int = MAX_EMPTY_PAGES,
) -> Iterator[str]:
    """Every message of a stream, oldest first, following ``nextForwardToken`` until it repeats.

    Raises:
        UnfinishedStreamError: ``max_empty_pages`` empty pages in a row, each with a new token.
    """
    kwargs: dict[str, Any] = {"logGroupName": group, "logStreamName": stream, "startFromHead": True}
    if page_limit:
        kwargs["limit"] = page_limit
    token: str | None = None
    empty = 0
    while True:
        after: dict[str, Any] = {"nextToken": token} if token else {}
        page = logs.get_log_events(**kwargs, **after)
        events = page.get("events", [])
        for event in events:
            yield event.get("message", "")
        next_token = page.get("nextForwardToken")
        if not next_token or next_token == token:
            return
        empty = 0 if events else empty + 1
        if empty >= max_empty_pages:
            raise UnfinishedStreamError(
                f"{group}/{stream}: {empty} empty pages in a row, each with a new token; the stream's end "
                "was not reached (is the job still writing to it?)"
            )
        token = next_token


def _host_order(stream: str) -> tuple[int, str]:
    """``<job>/algo-<host>-<epoch>`` sorts by host number (algo-2 before algo-10), others after, by name."""
    match = _HOST.search(stream)
    return (int(match.group(1)) if match else sys.maxsize, stream)


def job_streams(logs: CloudWatchLogsClient, group: str, job_name: str) -> list[str]:
    """Streams of one training job (``<job>/algo-<host>-<epoch>``, one per host), in host order."""
    from botocore.exceptions import ClientError

    names: list[str] = []
    kwargs: dict[str, Any] = {"logGroupName": group, "logStreamNamePrefix": f"{job_name}/"}
    try:
        while True:
            page = logs.describe_log_streams(**kwargs)
            names.extend(s["logStreamName"] for s in page.get("logStreams", []))
            token = page.get("nextToken")
            if not token or token == kwargs.get("nextToken"):
                break
            kwargs["nextToken"] = token
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
            return []
        raise
    return sorted(names, key=_host_order)


def stream_lines(
    logs: CloudWatchLogsClient, group: str, stream: str, *, page_limit: int | None = None
) -> Iterator[bytes]:
    """The stream as a log file, one line (message) at a time: what a long stream is written from."""
    for m in iter_log_messages(logs, group, stream, page_limit=page_limit):
        yield (m if m.endswith("\n") else m + "\n").encode("utf-8")
