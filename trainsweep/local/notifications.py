"""S3 -> Lambda notifications delivered asynchronously, as AWS does.

moto calls the notified function inside the ``PutObject`` request; on AWS the upload returns at once and
the function runs later, possibly more than once, with two retries after a function error. A small pool
of worker threads takes events from a queue so uploads never wait for parsing, every event is delivered,
and a failing invocation is retried with backoff. An event still failing after the retries goes, as on
AWS, to the on-failure destination of the function's EventInvokeConfig (an SQS queue).
:meth:`AsyncNotifications.drain` waits for the queue to empty (before downloading results, for as long as
events keep being handled; the benchmark counts deliveries with :attr:`stats`).
"""

from __future__ import annotations

import json
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any

from trainsweep.local.patching import Patches

# AWS retries an asynchronous invocation twice after a function error.
ASYNC_RETRIES = 2


@dataclass
class NotificationStats:
    queued: int = 0
    delivered: int = 0  # the function ran without error
    failed: int = 0  # still failing after the retries
    sent_to_destination: int = 0  # of those, sent to the function's on-failure queue
    retried: int = 0


@dataclass(frozen=True)
class _Event:
    account_id: str
    body: Any
    function_arn: str
    region: str


class AsyncNotifications:
    """Replace moto's synchronous S3 -> Lambda call by a queue served by ``workers`` threads."""

    def __init__(self, *, workers: int = 2, retries: int = ASYNC_RETRIES, backoff_s: float = 0.5) -> None:
        self._queue: queue.Queue[_Event | None] = queue.Queue()
        self._workers = max(1, workers)
        self._retries = retries
        self._backoff_s = backoff_s
        self._threads: list[threading.Thread] = []
        self._patches = Patches()
        self._lock = threading.Condition()
        self._unfinished = 0
        self.stats = NotificationStats()
        self.errors: list[str] = []

    def install(self) -> None:
        import moto.s3.notifications as s3n

        self._patches.set(s3n, "_invoke_awslambda", self._enqueue)
        for i in range(self._workers):
            t = threading.Thread(target=self._work, name=f"s3-notify-{i}", daemon=True)
            t.start()
            self._threads.append(t)

    def close(self, timeout: float = 5.0) -> None:
        """Stop the workers (events still queued are dropped; call :meth:`drain` first to keep them)."""
        self._patches.restore()
        for _ in self._threads:
            self._queue.put(None)
        for t in self._threads:
            t.join(timeout)
        self._threads.clear()

    def drain(self, timeout: float | None = None, *, stall_s: float | None = None) -> bool:
        """Wait until every queued event has been handled; False on timeout.

        ``stall_s``: give up only when no event has finished for that long (a backlog of many
        notifications, such as a thousand cells finishing at once, takes as long as it takes while it
        moves; a handler that hangs does not hold the run forever).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            last, moved = self._unfinished, time.monotonic()
            while self._unfinished:
                now = time.monotonic()
                if self._unfinished != last:
                    last, moved = self._unfinished, now
                waits = [60.0]
                if deadline is not None:
                    waits.append(deadline - now)
                if stall_s is not None:
                    waits.append(moved + stall_s - now)
                left = min(waits)
                if left <= 0:
                    return False
                self._lock.wait(left)
        return True

    @property
    def pending(self) -> int:
        with self._lock:
            return self._unfinished

    # moto.s3.notifications._invoke_awslambda(account_id, event_body, fn_arn, region_name)
    def _enqueue(self, account_id: str, event_body: Any, fn_arn: str, region_name: str) -> None:
        with self._lock:
            self._unfinished += 1
            self.stats.queued += 1
        self._queue.put(_Event(account_id, event_body, fn_arn, region_name))

    def _work(self) -> None:
        while True:
            event = self._queue.get()
            if event is None:
                return
            try:
                self._deliver(event)
            finally:
                with self._lock:
                    self._unfinished -= 1
                    self._lock.notify_all()

    def _deliver(self, event: _Event) -> None:
        from moto.awslambda.utils import get_backend

        last_error = ""
        payload: Any = None  # the function's error, as its on-failure message carries it
        function: Any = None
        for attempt in range(self._retries + 1):
            if attempt:
                with self._lock:
                    self.stats.retried += 1
                time.sleep(self._backoff_s * (2 ** (attempt - 1)))
            try:
                function = get_backend(event.account_id, event.region).get_function(event.function_arn)
                headers: dict[str, str] = {}
                result = function.invoke(json.dumps(event.body), {"x-amz-invocation-type": "Event"}, headers)
                if "x-amz-function-error" not in headers:
                    with self._lock:
                        self.stats.delivered += 1
                    return
                last_error = f"function error in {event.function_arn}"
                payload = _json_or_text(result)
            except Exception as exc:  # a missing function, or a bug: count it, keep serving
                last_error = f"{type(exc).__name__}: {exc}"
                payload = {"errorType": type(exc).__name__, "errorMessage": str(exc)}
        sent = function is not None and self._send_to_destination(event, function, payload)
        with self._lock:
            self.stats.failed += 1
            self.stats.sent_to_destination += sent
            self.errors.append(last_error)

    def _send_to_destination(self, event: _Event, function: Any, error: Any) -> bool:
        """Send the failed event to the SQS queue of the function's on-failure destination, as Lambda does
        (:func:`trainsweep.aws.failures.failure_message`); False when it has none (or not a queue)."""
        from moto.sqs.models import sqs_backends

        from trainsweep.aws.failures import failure_message

        configs = getattr(function, "event_invoke_config", None) or []
        destination = (
            (configs[0].config.get("DestinationConfig") or {}).get("OnFailure", {}).get("Destination")
            if configs
            else None
        )
        if not destination or ":sqs:" not in destination:
            return False
        _, _, _, region, account, queue_name = destination.split(":", 5)
        body = failure_message(event.body, function.function_arn, error, self._retries + 1)
        sqs_backends[account][region].send_message(queue_name, json.dumps(body))
        return True


def _json_or_text(payload: Any) -> Any:
    if isinstance(payload, bytes):
        payload = payload.decode("utf-8", "replace")
    try:
        return json.loads(payload)
    except (TypeError, ValueError):
        return payload
