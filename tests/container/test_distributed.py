"""Several ranks: the worker under torchrun (gloo on the CPU) writes per-rank step events into one log;
the supervisor launches torchrun for several GPUs and for several SageMaker hosts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.container.conftest import job_env
from trainsweep.logs import parse
from trainsweep.sagemaker_contract import Paths
from trainsweep.training.config import parse_config
from trainsweep.training.supervisor import Supervisor

HYPER = {"workload": "mnist-cnn", "epochs": "1", "batch-size": "16", "synthetic": "true",
         "max-steps-per-epoch": "3", "max-eval-batches": "2", "run-names": "ddp-local-cpu-16-e1"}  # fmt: skip


@pytest.mark.slow
def test_two_ranks_write_their_own_step_events_into_one_log(tmp_path):
    cfg = parse_config(HYPER, Paths(tmp_path))
    config_file = tmp_path / "job-config.json"
    config_file.write_text(cfg.to_json())
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "-m", "trainsweep.training.worker", "--config", str(config_file), "--cell", "0"]  # fmt: skip
    p = subprocess.run(cmd, env=job_env(tmp_path), capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    run = parse(tmp_path / "output" / "data" / "logs" / "ddp-local-cpu-16-e1.log")
    assert run.problems == []
    assert sorted(run.ranks) == [0, 1]
    assert [e.steps for e in run.ranks[1]] == [3]
    assert run.header.world_size == 2
    assert run.epochs[0].validation_s is not None  # rank 0 writes the epoch-level lines


def _torchrun_command(tmp_path, monkeypatch, hosts: str, current: str, gpus: int) -> list[str]:
    monkeypatch.setenv("SM_HOSTS", hosts)
    monkeypatch.setenv("SM_CURRENT_HOST", current)
    sup = Supervisor(Paths(tmp_path))
    monkeypatch.setattr(sup, "_gpus", lambda cfg: gpus)
    return sup.worker_command(parse_config(HYPER, Paths(tmp_path)), Path("c.json"), 0)


def test_several_gpus_run_under_torchrun_on_one_host(tmp_path, monkeypatch):
    cmd = _torchrun_command(tmp_path, monkeypatch, '["algo-1"]', "algo-1", 4)
    assert cmd[1:4] == ["-m", "torch.distributed.run", "--nproc_per_node=4"]
    assert "--standalone" in cmd
    assert cmd[-6:] == ["-m", "trainsweep.training.worker", "--config", "c.json", "--cell", "0"]


def test_several_hosts_join_one_torchrun_job_led_by_the_first_host(tmp_path, monkeypatch):
    cmd = _torchrun_command(tmp_path, monkeypatch, '["algo-1", "algo-2"]', "algo-2", 8)
    assert "--nnodes=2" in cmd and "--node_rank=1" in cmd and "--master_addr=algo-1" in cmd


def test_one_gpu_or_the_cpu_runs_the_worker_directly(tmp_path, monkeypatch):
    monkeypatch.setenv("SM_HOSTS", '["algo-1"]')
    monkeypatch.setenv("SM_CURRENT_HOST", "algo-1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    sup = Supervisor(Paths(tmp_path))
    cmd = sup.worker_command(parse_config(HYPER, Paths(tmp_path)), Path("c.json"), 0)
    assert cmd[:3] == [sys.executable, "-m", "trainsweep.training.worker"]


def test_only_the_first_host_uploads_the_log(tmp_path, monkeypatch):
    cfg = parse_config({**HYPER, "trainsweep-log-bucket": "logs-bucket"}, Paths(tmp_path))
    monkeypatch.setenv("SM_HOSTS", '["algo-1", "algo-2"]')
    monkeypatch.setenv("SM_CURRENT_HOST", "algo-1")
    assert Supervisor(Paths(tmp_path)).upload_bucket(cfg) == "logs-bucket"
    monkeypatch.setenv("SM_CURRENT_HOST", "algo-2")
    assert Supervisor(Paths(tmp_path)).upload_bucket(cfg) is None
