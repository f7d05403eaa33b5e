"""The state machine's view of a sweep plan: jobs grouped by instance type, with concurrency caps.

The state machine runs an outer Map over instance-type groups and an inner Map over each group's
jobs. Capping each group keeps a type within its SageMaker quota; the caps of the groups that run at
the same time add up to at most the spec's ``max_concurrency``. Pure functions, no AWS calls.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from trainsweep.errors import TrainsweepError


class QuotaError(TrainsweepError):
    """The account may not run any training instance of a type the sweep needs."""


class SweepTooLargeError(TrainsweepError):
    """The sweep's jobs and results would not fit in one Step Functions state."""


# Step Functions passes at most 256 KiB between states. After the Map, the state holds the plan and one
# status record per cell; keep a margin for the spec and the summary.
STATE_LIMIT_BYTES = 256 * 1024
STATE_MARGIN_BYTES = 16 * 1024
CELL_RECORD_BYTES = 400
# What a deployed stack adds to a plan made without it (check_plan_fits): the longest bucket name, and a
# CDK asset image URI as long as the stack's own.
PLACEHOLDER_BUCKET = "b" * 63
PLACEHOLDER_IMAGE = (
    "123456789012.dkr.ecr.ap-southeast-1.amazonaws.com/"
    "cdk-hnb659fds-container-assets-123456789012-ap-southeast-1:" + "0" * 64
)


def group_jobs(
    jobs: list[dict[str, Any]],
    max_concurrency: int,
    quotas: Mapping[str, int | None] | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """Split jobs by instance type and give each group its concurrency.

    Returns ``(groups, group_concurrency)``: each group is ``{instance_type, max_concurrency,
    quota, jobs}``; ``group_concurrency`` is how many groups run at once.

    Raises:
        QuotaError: a type's quota allows no job of the sweep (fewer instances than ``instance_count``).
    """
    quotas = quotas or {}
    by_type: dict[str, list[dict[str, Any]]] = {}
    for job in jobs:
        by_type.setdefault(job["instance_type"], []).append(job)
    if not by_type:
        return [], 1
    total = max(1, int(max_concurrency))
    group_concurrency = min(len(by_type), total)
    share = max(1, total // group_concurrency)
    groups: list[dict[str, Any]] = []
    blocked: list[str] = []
    for instance_type, group in by_type.items():
        cap = min(share, len(group))
        quota = quotas.get(instance_type)
        if quota is not None:
            per_job = max(1, max(int(j.get("instance_count", 1)) for j in group))
            by_quota = quota // per_job
            if by_quota <= 0:
                blocked.append(f"{instance_type} (quota {quota}, {per_job} per job)")
                continue
            cap = min(cap, by_quota)
        groups.append({"instance_type": instance_type, "max_concurrency": cap, "quota": quota, "jobs": group})
    if blocked:
        raise QuotaError(
            "the account's SageMaker training quota allows no job for "
            + ", ".join(blocked)
            + ": request an increase in the Service Quotas console (SageMaker, '<type> for training job "
            "usage') or remove these instance types from the spec"
        )
    return groups, group_concurrency


def with_default_image(jobs: list[dict[str, Any]], default_image: Callable[[], str]) -> list[dict[str, Any]]:
    """The jobs with ``image_uri`` set: a job whose spec names no image of its own (None) runs the stack's.

    The training task reads every job's image from ``$.job.image_uri``. ``default_image`` is called only
    when a job needs it (so a sweep of own images plans without it).
    """
    return [
        job if job.get("image_uri") is not None else {**job, "image_uri": default_image()} for job in jobs
    ]


def state_input(
    plan_state: Mapping[str, Any], quotas: Mapping[str, int | None] | None = None
) -> dict[str, Any]:
    """PlanSweep's output: the plan's state input with its jobs grouped for the two nested Maps."""
    groups, group_concurrency = group_jobs(
        list(plan_state["jobs"]), int(plan_state["max_concurrency"]), quotas
    )
    out = {k: v for k, v in plan_state.items() if k != "jobs"}
    out["job_count"] = sum(len(g["jobs"]) for g in groups)
    out["groups"] = groups
    out["group_concurrency"] = group_concurrency
    cells = sum(len(j["run_names"]) for g in groups for j in g["jobs"])
    needed = len(json.dumps(out)) + cells * CELL_RECORD_BYTES + STATE_MARGIN_BYTES
    if needed > STATE_LIMIT_BYTES:
        raise SweepTooLargeError(
            f"this sweep ({out['job_count']} jobs, {cells} cells) needs about {needed // 1024} KiB of "
            f"workflow state, more than Step Functions' {STATE_LIMIT_BYTES // 1024} KiB: split the grid into "
            "several sweeps (fewer instance types, batch sizes or repetitions each)"
        )
    return out


def check_plan_fits(plan: Any) -> None:
    """Raise :class:`SweepTooLargeError` when PlanSweep would refuse the plan (a ``SweepPlan``) for the
    workflow state's size: ``plan`` and ``run`` say so before anything starts.

    A plan made without a bucket is measured as PlanSweep will see it: with the longest bucket name and
    the stack's image for jobs that name none. Quotas are not known here (PlanSweep checks them).
    """
    from trainsweep.spec import plan_sweep

    if plan.bucket is None:
        plan = plan_sweep(
            plan.spec,
            sweep_id=plan.sweep_id,
            region=plan.region,
            bucket=PLACEHOLDER_BUCKET,
            enforce_budget=False,
        )
    state = dict(plan.to_state_input())
    state["jobs"] = with_default_image(state["jobs"], lambda: PLACEHOLDER_IMAGE)
    state_input(state)
