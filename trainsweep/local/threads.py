"""CPU threads of a local sweep's processes: the jobs that run at once share this machine's cores.

On SageMaker each job has its instance to itself. Local mode runs up to ``max_concurrency`` jobs, each of
``instance_count`` host processes, on one machine, and PyTorch starts one intra-op thread per core in
every one of them. More busy threads than cores make OpenMP's threads wait on each other at every
parallel region, and small steps stall: on a 2-core machine an epoch of ``examples/byo-pytorch`` at batch
size 32 took 54 s beside another process's training and 3 s with one thread per process. Every host
process therefore gets ``OMP_NUM_THREADS`` = cores // (jobs at once x hosts per job), at least 1, unless
the user's environment sets it; a sweep that runs one single-host job at a time keeps PyTorch's default.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

THREADS_ENV = "OMP_NUM_THREADS"
"""Read by PyTorch (its intra-op pool), NumPy's BLAS and every OpenMP runtime at start-up."""


def thread_share(*, cores: int, jobs_at_once: int, hosts_per_job: int) -> int:
    """Threads of each host process when ``jobs_at_once`` jobs of ``hosts_per_job`` hosts share ``cores``."""
    return max(1, cores // max(1, jobs_at_once * hosts_per_job))


def job_thread_env(
    *,
    jobs_at_once: int,
    hosts_per_job: int,
    environ: Mapping[str, str] | None = None,
    cores: int | None = None,
) -> dict[str, str]:
    """The environment that shares the cores among a sweep's processes: ``{}`` when the user set the
    variable or one process has the machine to itself."""
    environ = os.environ if environ is None else environ
    if THREADS_ENV in environ:
        return {}
    cores = cores or os.cpu_count() or 1
    share = thread_share(cores=cores, jobs_at_once=jobs_at_once, hosts_per_job=hosts_per_job)
    return {} if share >= cores else {THREADS_ENV: str(share)}
