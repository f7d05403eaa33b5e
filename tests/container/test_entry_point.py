"""The entry point on the CPU, in full, early-stop and packed mode, against a temporary SAGEMAKER_BASE_DIR;
the foundation parser reads every log it writes."""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

import numpy as np
import pytest

from tests.container.conftest import QUICK
from trainsweep.logs import parse
from trainsweep.logs.mllog import TOKEN
from trainsweep.predict import NOISE_FLOOR, load_calibration

pytestmark = pytest.mark.slow


def test_full_mode_writes_a_log_the_parser_reads_without_problems(run_job):
    res = run_job({**QUICK, "epochs": "2", "batch-size": "16", "run-names": "t1-local-cpu-16-e1"})
    assert res.returncode == 0, res.stderr
    assert res.failure is None
    run = parse(res.log_path("t1-local-cpu-16-e1"))
    assert run.problems == []
    assert run.status == "complete"
    assert run.dialect == "mllog"
    assert (run.computing_system, run.batch_size, run.run_index) == ("local-cpu", 16, 1)
    assert [e.steps for e in run.epochs] == [5, 5]
    for e in run.epochs:
        assert e.validation_s is not None and e.validation_s > 0
        assert e.epoch_s is not None and e.epoch_s > sum(e.step_s)
        assert e.data_wait_s is not None and e.compute_s is not None
        for step, wait, comp in zip(e.step_s, e.data_wait_s, e.compute_s, strict=True):
            assert wait >= 0 and comp > 0
            assert wait + comp == pytest.approx(step, rel=1e-6)
    assert run.init_s is not None and run.init_s > 0
    assert run.header.workload == "mnist-cnn"
    assert run.header.epochs == 2
    assert run.model_save_s is not None
    assert (res.base / "model" / "t1-local-cpu-16-e1.pt").stat().st_size > 1_000_000  # the trained CNN


def test_full_mode_writes_the_seeds_legacy_lines_next_to_mllog(run_job):
    res = run_job({**QUICK, "epochs": "1", "batch-size": "8", "run-names": "t2-local-cpu-8-e1"})
    assert res.returncode == 0, res.stderr
    text = res.log("t2-local-cpu-8-e1")
    assert re.search(r"^Initialization time [0-9.]+$", text, re.M)
    assert len(re.findall(r"^\d+ step training time: [0-9.e-]+s$", text, re.M)) == 5
    assert re.search(r"^Validation time: [0-9.e-]+s$", text, re.M)
    assert re.search(r"^Epoch time: [0-9.e-]+s$", text, re.M)
    assert re.search(r"^Real time: [0-9.]+$", text, re.M)
    assert text.count(TOKEN + ' {"namespace": "", "time_ms"') > 5
    # stdout carries the same lines (CloudWatch)
    assert "Epoch time:" in res.stdout


def test_early_stop_writes_the_prediction_into_the_log_and_the_output(run_job):
    hyper = {
        **QUICK,
        "epochs": "30",
        "batch-size": "8",
        "mode": "early-stop",
        "max-steps-per-epoch": "",
        "early-stop-min-steps": "4",
        "early-stop-max-steps": "10",
        "validation-batches": "3",
        "run-names": "t3-local-cpu-8-e1",
    }
    res = run_job(hyper)
    assert res.returncode == 0, res.stderr
    run = parse(res.log_path("t3-local-cpu-8-e1"))
    assert run.status == "complete"
    # the early-stopped epoch is unfinished by design; the parser flags its step count, nothing else
    assert [p.code for p in run.problems if p.code != "steps-per-epoch"] == []
    pred = run.prediction
    assert pred is not None
    assert pred["steps_watched"] <= 10
    assert pred["stop_reason"] in ("precision", "max_steps")
    assert pred["steps_per_epoch"] == 60000 // 8
    assert pred["epoch_low_s"] < pred["epoch_s"] < pred["epoch_high_s"]
    assert pred["total_s"] == pytest.approx(pred["warmup_excess_s"] + 30 * pred["epoch_s"])
    assert pred["validation_s"] > 0 and len(pred["validation_batch_times_s"]) == 3
    # the interval's epoch jitter is the shipped calibration's for the container's own runs on the CPU,
    # a multiple of the run's own noise
    multiple, source, _ = load_calibration().jitter_for("container-cpu")
    factor, _, _ = load_calibration().class_factor("cpu")
    assert (pred["family"], pred["calibration"], pred["instance_class"]) == ("container-cpu", source, "cpu")
    assert pred["epoch_jitter"] == pytest.approx(multiple * factor * pred["run_noise"])
    assert pred["run_noise"] >= NOISE_FLOOR
    out = json.loads((res.base / "output" / "data" / "predictions" / "t3-local-cpu-8-e1.json").read_text())
    assert out == pred
    assert "Predicted epoch time:" in res.log("t3-local-cpu-8-e1")


def test_packed_mode_scans_batch_sizes_with_one_log_each_and_an_oom_is_infeasible(run_job):
    hyper = {
        **QUICK,
        "epochs": "1",
        "mode": "early-stop",
        "batch-sizes": "8,4096,16",
        "run-names": "p-local-cpu-8-e1,p-local-cpu-4096-e1,p-local-cpu-16-e1",
        "early-stop-min-steps": "3",
        "early-stop-max-steps": "5",
        "validation-batches": "2",
    }
    # 4096 MNIST images need ~350 MB for the first activation: more than this worker may allocate
    res = run_job(hyper, env={"TRAINSWEEP_MEMORY_LIMIT_MB": "300"})
    assert res.returncode == 0, res.stderr
    assert res.failure is None
    cells = {c["batch_size"]: c for c in res.job_summary["cells"]}
    assert [cells[b]["status"] for b in (8, 4096, 16)] == ["ok", "oom", "ok"]
    for bs in (8, 16):
        run = parse(res.log_path(f"p-local-cpu-{bs}-e1"))
        assert run.batch_size == bs and run.header.batch_size == bs
        assert run.prediction is not None and run.prediction["batch_size"] == bs
    oom = parse(res.log_path("p-local-cpu-4096-e1"))
    assert oom.status == "failed"
    assert oom.extra["failure_kind"] == "oom"
    assert "out of memory at batch size 4096" in (oom.failure_reason or "")


def _mnist_npz(n_train: int, n_test: int) -> callable:
    def make(ch: Path) -> None:
        rng = np.random.default_rng(0)
        np.savez(
            ch / "mnist.npz",
            x_train=rng.integers(0, 255, (n_train, 28, 28), dtype=np.uint8),
            y_train=rng.integers(0, 10, n_train, dtype=np.uint8),
            x_test=rng.integers(0, 255, (n_test, 28, 28), dtype=np.uint8),
            y_test=rng.integers(0, 10, n_test, dtype=np.uint8),
        )

    return make


def test_mnist_from_the_train_channel(run_job):
    hyper = {"workload": "mnist-cnn", "epochs": "2", "batch-size": "16", "run-names": "c-local-cpu-16-e1"}
    res = run_job(hyper, channel=_mnist_npz(64, 20))
    assert res.returncode == 0, res.stderr
    run = parse(res.log_path("c-local-cpu-16-e1"))
    assert run.problems == []
    assert [e.steps for e in run.epochs] == [4, 4]  # ceil(64 / 16)
    assert run.header.train_samples == 64 and run.header.eval_samples == 20


def test_resnet50_on_cifar10_python_batches_from_the_channel(run_job):
    def cifar(ch: Path) -> None:
        folder = ch / "cifar-10-batches-py"
        folder.mkdir()
        rng = np.random.default_rng(1)
        for name, n in (("data_batch_1", 6), ("data_batch_2", 6), ("test_batch", 4)):
            d = {b"data": rng.integers(0, 255, (n, 3072), dtype=np.uint8), b"labels": list(range(n))}
            (folder / name).write_bytes(pickle.dumps(d))

    hyper = {
        "workload": "resnet50-cifar10",
        "epochs": "1",
        "batch-size": "4",
        "run-names": "r-local-cpu-4-e1",
    }
    res = run_job(hyper, channel=cifar)
    assert res.returncode == 0, res.stderr
    run = parse(res.log_path("r-local-cpu-4-e1"))
    assert run.problems == []
    assert [e.steps for e in run.epochs] == [3]  # 12 samples / 4
    assert run.header.workload == "resnet50-cifar10"


def test_synthetic_samples_give_every_batch_size_the_same_epoch(run_job):
    """With ``synthetic-samples`` an epoch is N samples whatever the batch size: ceil(N / BS) steps."""
    steps = {}
    for bs in (8, 16):
        name = f"t9-local-cpu-{bs}-e0"
        hyper = {**QUICK, "epochs": "1", "batch-size": str(bs), "run-names": name, "synthetic-samples": "48"}
        hyper.pop("max-steps-per-epoch", None)
        res = run_job(hyper)
        assert res.returncode == 0, res.stderr
        run = parse(res.log_path(name))
        assert run.problems == []
        assert run.header.train_samples == 48
        steps[bs] = [e.steps for e in run.epochs]
    assert steps == {8: [6], 16: [3]}


def test_synthetic_samples_without_synthetic_data_is_refused(run_job):
    res = run_job(
        {**QUICK, "synthetic": "false", "epochs": "1", "batch-size": "8", "synthetic-samples": "48"}
    )
    assert res.returncode != 0
    assert "synthetic-samples" in (res.failure or "")


def test_early_stop_counts_the_first_pass_of_the_partial_last_batches_as_a_one_off(run_job):
    """A full run meets its partial last batches (a new shape: cuDNN autotuning on a GPU) in epoch 1;
    early-stop runs each such shape twice and adds the difference to the run's one-off cost."""
    hyper = {
        **QUICK,
        "epochs": "3",
        "batch-size": "16",
        "mode": "early-stop",
        "max-steps-per-epoch": "",
        "max-eval-batches": "",
        "synthetic-samples": "100",  # 6 full batches and one of 4; validation 17 samples: 16 + 1
        "early-stop-min-steps": "3",
        "early-stop-max-steps": "6",
        "validation-batches": "2",
        "run-names": "t10-local-cpu-16-e1",
    }
    res = run_job(hyper)
    assert res.returncode == 0, res.stderr
    pred = parse(res.log_path("t10-local-cpu-16-e1")).prediction
    assert pred is not None
    shapes = pred["new_shape_warmup_s"]
    assert set(shapes) == {"train_partial_batch_s", "validation_partial_batch_s"}
    assert all(v >= 0 for v in shapes.values())
    assert pred["total_s"] == pytest.approx(pred["warmup_excess_s"] + 3 * pred["epoch_s"])


def test_early_stop_with_capped_epochs_has_no_partial_batch_to_warm_up(run_job):
    hyper = {
        **QUICK,
        "epochs": "3",
        "batch-size": "16",
        "mode": "early-stop",
        "early-stop-min-steps": "3",
        "validation-batches": "2",
        "run-names": "t11-local-cpu-16-e1",
    }
    res = run_job(hyper)
    assert res.returncode == 0, res.stderr
    pred = parse(res.log_path("t11-local-cpu-16-e1")).prediction
    assert pred is not None and pred["new_shape_warmup_s"] == {}
