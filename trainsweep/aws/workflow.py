"""The state machine's view of a sweep plan: jobs grouped by instance type, with concurrency caps.

The state machine runs an outer Map over instance-type groups and, for each group, a Distributed Map
over the group's jobs, read from S3. Capping each group keeps a type within its SageMaker quota; the
caps of the groups that run at the same time add up to at most the spec's ``max_concurrency``. Pure
functions, no AWS calls.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from trainsweep import layout
from trainsweep.errors import TrainsweepError
from trainsweep.jobs import PlannedJob


class QuotaError(TrainsweepError):
    """The account may not run any training instance of a type the sweep needs."""


class SweepTooLargeError(TrainsweepError):
    """The sweep has more jobs than one sweep may have, or its groups would not fit in the state."""


# Each instance-type group's jobs go to S3 (``layout.map_jobs_key``) and its Distributed Map reads them
# from there and writes the cells' results to S3: the state between steps holds references and counts,
# about 300 bytes per group, whatever the number of jobs or their failure reasons. What bounds a sweep
# is AggregateSweep, which reads every cell's result and run record in one Lambda run (10,000 jobs:
# about a minute of S3 reads), and the plan itself (``jobs.json``, every job's request, ~2 KB a job).
MAX_JOBS = 10_000
# Step Functions passes at most 256 KiB between states; the sweep keeps its state under a tenth of it.
STATE_LIMIT_BYTES = 256 * 1024
STATE_BUDGET_BYTES = STATE_LIMIT_BYTES // 10
# What a deployed stack adds to a plan made without it (check_plan_fits): the longest bucket name, and a
# CDK asset image URI as long as the stack's own.
PLACEHOLDER_BUCKET = "b" * 63
PLACEHOLDER_IMAGE = (
    "123456789012.dkr.ecr.ap-southeast-1.amazonaws.com/"
    "cdk-hnb659fds-container-assets-123456789012-ap-southeast-1:" + "0" * 64
)
# The longest execution name Step Functions allows: it names the fan-out files' prefix.
PLACEHOLDER_EXECUTION = "e" * 80


class Placed(Protocol):
    """What grouping reads of a job: a :class:`PlannedJob`, or a simulated one."""

    @property
    def instance_type(self) -> str: ...

    @property
    def instance_count(self) -> int: ...


JobT = TypeVar("JobT", bound=Placed)


def group_jobs(
    jobs: Sequence[JobT],
    max_concurrency: int,
    quotas: Mapping[str, int | None] | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """Split jobs by instance type and give each group its concurrency.

    Returns ``(groups, group_concurrency)``: each group is ``{instance_type, max_concurrency,
    quota, jobs}`` (``jobs``: the group's jobs, in the given order); ``group_concurrency`` is how
    many groups run at once.

    Raises:
        QuotaError: a type's quota allows no job of the sweep (fewer instances than ``instance_count``).
    """
    quotas = quotas or {}
    by_type: dict[str, list[JobT]] = {}
    for job in jobs:
        by_type.setdefault(job.instance_type, []).append(job)
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
            per_job = max(1, max(j.instance_count for j in group))
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


def with_default_image(jobs: list[PlannedJob], default_image: Callable[[], str]) -> list[PlannedJob]:
    """The jobs with ``image_uri`` set: a job whose spec names no image of its own (None) runs the stack's.

    The training task reads every job's image from ``$.job.image_uri``. ``default_image`` is called only
    when a job needs it (so a sweep of own images plans without it).
    """
    return [
        job if job.image_uri is not None else job.model_copy(update={"image_uri": default_image()})
        for job in jobs
    ]


@dataclass(frozen=True)
class WorkflowInput:
    """PlanSweep's output (``state``, what the state machine carries) and the job lists it writes first
    (``items``: S3 key -> one group's jobs, which that group's Distributed Map reads as a JSON array)."""

    state: dict[str, Any]
    items: dict[str, list[PlannedJob]]

    def item_bytes(self, key: str) -> bytes:
        """The JSON array of the group's jobs at ``key``, as its Distributed Map reads it."""
        return json.dumps([job.to_json() for job in self.items[key]]).encode()


def state_input(
    plan_state: Mapping[str, Any], quotas: Mapping[str, int | None] | None = None, *, execution: str = "run"
) -> WorkflowInput:
    """The plan's state input (``SweepPlan.to_state_input``) with its jobs grouped by instance type,
    each group's jobs moved to S3.

    Raises:
        SweepTooLargeError: more than :data:`MAX_JOBS` jobs, or groups whose references alone would take
            more than :data:`STATE_BUDGET_BYTES` of state.
        QuotaError: see :func:`group_jobs`.
    """
    jobs: list[PlannedJob] = list(plan_state["jobs"])
    cells = sum(len(j.run_names) for j in jobs)
    if len(jobs) > MAX_JOBS:
        raise SweepTooLargeError(
            f"this sweep ({len(jobs)} jobs, {cells} cells) has more than {MAX_JOBS:,} jobs, the most one "
            "sweep aggregates in one AggregateSweep run: split the grid into several sweeps (fewer "
            "instance types, batch sizes or repetitions each)"
        )
    groups, group_concurrency = group_jobs(jobs, int(plan_state["max_concurrency"]), quotas)
    sweep_id = str(plan_state["sweep_id"])
    out = {k: v for k, v in plan_state.items() if k != "jobs"}
    out["job_count"] = len(jobs)
    out["cell_count"] = cells
    out["map_results_prefix"] = layout.map_results_prefix(sweep_id, execution)
    out["groups"] = []
    items: dict[str, list[PlannedJob]] = {}
    for n, group in enumerate(groups):
        key = layout.map_jobs_key(sweep_id, execution, n)
        items[key] = group["jobs"]
        ref = {k: v for k, v in group.items() if k != "jobs"}
        # A failed job's workflow never fails its group: AggregateSweep records its cells.
        out["groups"].append(
            {**ref, "job_count": len(group["jobs"]), "jobs_key": key, "tolerated_failure_percentage": 100}
        )
    out["group_concurrency"] = group_concurrency
    size = len(json.dumps(out))
    if size > STATE_BUDGET_BYTES:
        raise SweepTooLargeError(
            f"this sweep's plan ({len(groups)} instance types) takes {size:,} bytes of workflow state, more "
            f"than the {STATE_BUDGET_BYTES:,} it may (a tenth of Step Functions' {STATE_LIMIT_BYTES // 1024} "
            "KiB): split the instance types over several sweeps"
        )
    return WorkflowInput(out, items)


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
    state_input(state, execution=PLACEHOLDER_EXECUTION)
