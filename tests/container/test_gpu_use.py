"""A job with GPUs that torch cannot use fails its cells: it never trains on the CPU under a GPU's name."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.container.conftest import QUICK
from trainsweep.logs import parse
from trainsweep.sagemaker_contract import Paths
from trainsweep.training import worker

RUN = "gpu-p3-1-16-e0"
HYPER = {**QUICK, "epochs": "1", "batch-size": "16", "run-names": RUN}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"SM_NUM_GPUS": "1"}, "the job has 1 GPU(s) (SM_NUM_GPUS)"),
        ({"SM_CURRENT_INSTANCE_TYPE": "ml.g4dn.xlarge"}, "ml.g4dn.xlarge has 1 GPU(s)"),
    ],
    ids=["sm-num-gpus", "gpu-instance-type"],
)
def test_a_gpu_job_whose_torch_cannot_use_the_gpu_fails_the_cell(run_job, env, says):
    # This machine's torch is the CPU build: exactly the job that used to train on the CPU and succeed.
    res = run_job(HYPER, env=env)
    assert res.returncode != 0
    assert res.failure is not None and "refusing to train on the CPU" in res.failure
    assert says in res.failure
    run = parse(res.log_path(RUN))
    assert run.status == "failed"
    assert "refusing to train on the CPU" in (run.failure_reason or "")
    assert not any(len(e.step_s) for e in run.epochs), "no step may be timed on the CPU"


@pytest.mark.slow
def test_a_cpu_instance_still_trains_on_the_cpu(run_job):
    res = run_job(HYPER, env={"SM_CURRENT_INSTANCE_TYPE": "ml.c5.xlarge"})
    assert res.returncode == 0, res.stderr[-2000:]
    assert parse(res.log_path(RUN)).status != "failed"


class _FakeCuda:
    """torch.cuda on a machine with one GPU of ``capability`` and a build with ``arch_list``."""

    def __init__(self, capability: tuple[int, int], arch_list: list[str]):
        self.capability, self.arch_list = capability, arch_list

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        cuda = worker.torch.cuda
        monkeypatch.setattr(worker.torch.version, "cuda", "12.6")
        monkeypatch.setattr(cuda, "is_available", lambda: True)
        monkeypatch.setattr(cuda, "set_device", lambda _i: None)
        monkeypatch.setattr(cuda, "get_device_capability", lambda _d=None: self.capability)
        monkeypatch.setattr(cuda, "get_arch_list", lambda: list(self.arch_list))
        monkeypatch.setattr(cuda, "get_device_name", lambda _d=None: "Tesla K80")


CU126 = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]


def test_a_gpu_without_kernels_in_this_torch_is_refused(monkeypatch):
    _FakeCuda((3, 7), CU126).install(monkeypatch)
    with pytest.raises(
        worker.UnusableGpuError, match=r"compute capability 3\.7.*refusing to train on the CPU"
    ):
        worker._device(worker.Rank(), 1, "ml.p2.xlarge")


@pytest.mark.parametrize("capability", [(7, 0), (7, 5), (8, 6), (8, 9), (9, 0)])
def test_gpus_the_build_covers_are_used(monkeypatch, capability):
    _FakeCuda(capability, CU126).install(monkeypatch)
    assert worker._device(worker.Rank(), 1, "ml.g6.xlarge").type == "cuda"


def test_the_worker_knows_the_gpus_from_sm_num_gpus_or_the_instance_type(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path))
    monkeypatch.delenv("SM_NUM_GPUS", raising=False)
    monkeypatch.delenv("SM_CURRENT_INSTANCE_TYPE", raising=False)
    paths = Paths.from_env()
    assert worker.expected_gpus(paths) == 0
    monkeypatch.setenv("SM_CURRENT_INSTANCE_TYPE", "ml.p3.8xlarge")
    assert worker.expected_gpus(paths) == 4
    monkeypatch.setenv("SM_NUM_GPUS", "2")
    assert worker.expected_gpus(paths) == 2
