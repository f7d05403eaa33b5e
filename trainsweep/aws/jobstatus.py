"""The SageMaker state of a sweep's training jobs, read with few calls: what ``status`` and ``run`` poll.

One ``ListTrainingJobs`` query by the sweep's name (paged, 100 jobs a page) gives every created job's
status; ``DescribeTrainingJob`` is asked only for the jobs that run (their secondary status and start
time) and once for each job that ended (its failure reason and billable time, which never change after).
A throttled call is retried with backoff; one that stays throttled leaves the job as it was last seen,
never "pending".
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable
from typing import Any

from trainsweep.errors import TrainsweepError

THROTTLING_CODES = frozenset(
    {"ThrottlingException", "Throttling", "TooManyRequestsException", "RequestLimitExceeded"}
)
ENDED = frozenset({"Completed", "Failed", "Stopped"})
ATTEMPTS = 4
PAGE = 100


class ThrottledError(Exception):
    """A call stayed throttled after :data:`ATTEMPTS` tries."""


def _code(exc: Exception) -> str | None:
    response = getattr(exc, "response", None)
    return response.get("Error", {}).get("Code") if isinstance(response, dict) else None


def _unreadable(exc: Exception) -> Exception:
    from trainsweep.aws.credentials import credentials_error, credentials_problem

    if credentials_problem(exc):
        return credentials_error(exc)
    return TrainsweepError(f"cannot read the sweep's training jobs from SageMaker: {exc}")


def call(fn: Callable[[], Any], *, sleep: Callable[[float], None] = time.sleep) -> Any:
    """``fn()``, retried with exponential backoff while AWS throttles it; raises :class:`ThrottledError`."""
    for attempt in range(ATTEMPTS):
        try:
            return fn()
        except Exception as exc:
            if _code(exc) not in THROTTLING_CODES:
                raise
            if attempt == ATTEMPTS - 1:
                raise ThrottledError(str(exc)) from exc
            sleep(0.5 * 2**attempt)
    raise AssertionError("unreachable")


def list_jobs(
    sagemaker: Any, name_part: str, *, sleep: Callable[[float], None] = time.sleep
) -> dict[str, Any]:
    """Every training job whose name contains ``name_part``: name -> its ``ListTrainingJobs`` summary."""
    out: dict[str, Any] = {}
    token: str | None = None
    while True:
        kwargs: dict[str, Any] = {"NameContains": name_part, "MaxResults": PAGE}
        if token:
            kwargs["NextToken"] = token
        page = call(functools.partial(sagemaker.list_training_jobs, **kwargs), sleep=sleep)
        for summary in page.get("TrainingJobSummaries", []):
            out[summary["TrainingJobName"]] = summary
        token = page.get("NextToken")
        if not token:
            return out


def job_states(
    sagemaker: Any,
    sweep_id: str,
    job_names: Iterable[str],
    seen: dict[str, dict[str, Any]] | None = None,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, dict[str, Any] | None]:
    """Each job's description (or its list summary), None for a job not created yet.

    ``seen``: the descriptions of an earlier poll (updated in place): an ended job is not described
    again, and a job whose calls stay throttled keeps what was seen of it.
    """
    seen = {} if seen is None else seen
    names = list(dict.fromkeys(job_names))
    try:
        listed = list_jobs(sagemaker, sweep_id, sleep=sleep)
    except ThrottledError:
        return {name: seen.get(name) for name in names}
    except Exception as exc:  # a refusal is said, never shown as "pending"
        raise _unreadable(exc) from exc
    out: dict[str, dict[str, Any] | None] = {}
    for name in names:
        summary = listed.get(name)
        known = seen.get(name)  # only full descriptions are kept
        if summary is None:
            out[name] = known  # not created yet (or created after the list was read)
        elif known is not None and known.get("TrainingJobStatus") in ENDED:
            out[name] = known  # an ended job's description does not change
        else:
            try:
                describe = functools.partial(sagemaker.describe_training_job, TrainingJobName=name)
                described = call(describe, sleep=sleep)
            except ThrottledError:
                out[name] = known or summary
                continue
            except Exception as exc:
                raise _unreadable(exc) from exc
            seen[name] = out[name] = described
    return out
