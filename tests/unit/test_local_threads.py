"""Local mode shares this machine's cores among the job processes that run at once."""

from __future__ import annotations

from trainsweep.local.threads import THREADS_ENV, job_thread_env, thread_share
from trainsweep.spec import load_spec
from trainsweep.sweeps.local import _thread_env


def test_concurrent_jobs_and_hosts_split_the_cores_and_never_get_none() -> None:
    assert thread_share(cores=8, jobs_at_once=2, hosts_per_job=1) == 4
    assert thread_share(cores=8, jobs_at_once=2, hosts_per_job=2) == 2
    assert thread_share(cores=8, jobs_at_once=3, hosts_per_job=1) == 2
    assert thread_share(cores=2, jobs_at_once=4, hosts_per_job=2) == 1


def test_one_process_alone_keeps_pytorchs_default_and_the_users_setting_wins() -> None:
    assert job_thread_env(jobs_at_once=1, hosts_per_job=1, environ={}, cores=16) == {}
    assert job_thread_env(jobs_at_once=4, hosts_per_job=1, environ={}, cores=16) == {THREADS_ENV: "4"}
    assert job_thread_env(jobs_at_once=4, hosts_per_job=1, environ={THREADS_ENV: "16"}, cores=16) == {}


def test_a_sweep_shares_by_its_concurrency_capped_by_its_job_count(monkeypatch) -> None:
    monkeypatch.delenv(THREADS_ENV, raising=False)
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    workload = {"model": "mnist-cnn", "epochs": 1, "synthetic": True}
    spec = {"name": "t", "workload": workload, "instance_types": ["local"]}
    four_jobs = load_spec({**spec, "batch_sizes": [8, 16, 32, 64], "max_concurrency": 2})
    assert _thread_env(four_jobs, 4) == {THREADS_ENV: "4"}
    assert _thread_env(four_jobs, 1) == {}  # one job planned: it runs alone
    two_hosts = load_spec({**spec, "batch_sizes": [8], "instance_counts": [1, 2], "max_concurrency": 2})
    assert _thread_env(two_hosts, 2) == {THREADS_ENV: "2"}
