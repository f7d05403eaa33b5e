"""ParseRun's on-failure queue: S3 notifications whose invocation still failed after Lambda's retries.

An S3-triggered ParseRun that raises is retried twice by Lambda; then the event goes to the stack's
``ParseFailures`` queue (output ``ParseFailureQueueUrl``) instead of disappearing. Lambda sends one
JSON message per event: ``requestContext`` (function, ``condition`` such as ``RetriesExhausted``),
``requestPayload`` (the S3 event, with the log's key) and ``responsePayload`` (the error).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class QueuedFailures:
    """How many failed events wait in the queue (approximate, as SQS counts them), or why the queue
    could not be read (``error``; the counts are then None)."""

    queue_url: str
    waiting: int | None
    in_flight: int | None
    error: str | None = None

    @property
    def alarming(self) -> bool:
        """Something for a person to look at: failed events, or a queue that could not be read."""
        return self.error is not None or bool(self.waiting or self.in_flight)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        """One line for ``trainsweep status``."""
        if self.error is not None:
            return f"ParseRun failures: cannot read {self.queue_url} ({self.error})"
        if not self.alarming:
            return f"ParseRun failures: none waiting in {self.queue_url}"
        return (
            f"ParseRun failures: {self.waiting} log event(s) waiting in {self.queue_url}"
            + (f" ({self.in_flight} being read)" if self.in_flight else "")
            + ": raw logs (any sweep of the stack) whose parsing still failed after Lambda's two "
            "retries; read them with `aws sqs receive-message --queue-url URL`, fix the cause, and "
            "re-upload the log to parse it again"
        )

    def local_line(self) -> str:
        """One line for the end of a local sweep, whose queue is gone with the embedded AWS."""
        if self.error is not None:
            return self.line()
        return (
            f"ParseRun failed on {self.waiting} raw-log event(s) even after Lambda's two retries; on AWS "
            "they would wait in the stack's ParseFailures queue (docs/cloud.md, Security), here the "
            "queue ended with the embedded AWS"
        )


def queued_failures(sqs: Any, queue_url: str) -> QueuedFailures:
    """Count the messages of the failure queue without receiving (and so hiding) any of them; a queue
    that cannot be read (no permission, throttled) gives the reason instead of raising."""
    try:
        attrs = sqs.get_queue_attributes(
            QueueUrl=queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
    except Exception as exc:  # botocore's ClientError and friends
        return QueuedFailures(queue_url, None, None, f"{type(exc).__name__}: {exc}")
    return QueuedFailures(
        queue_url,
        int(attrs.get("ApproximateNumberOfMessages", 0)),
        int(attrs.get("ApproximateNumberOfMessagesNotVisible", 0)),
    )


def failure_message(event: Any, function_arn: str, error: Any, attempts: int) -> dict[str, Any]:
    """The message Lambda sends to an asynchronous invocation's on-failure destination (local mode
    sends the same); ``error`` is the function's error payload."""
    return {
        "version": "1.0",
        "requestContext": {
            "functionArn": f"{function_arn}:$LATEST",
            "condition": "RetriesExhausted",
            "approximateInvokeCount": attempts,
        },
        "requestPayload": event,
        "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
        "responsePayload": error,
    }
