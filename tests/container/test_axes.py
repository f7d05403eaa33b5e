"""A built-in job with axes: each cell trains in its own precision (autocast) and compile setting, and its log
says the setting and the precision it really used; out of memory is infeasible for its setting only."""

from __future__ import annotations

import json

import pytest
import torch

from tests.container.conftest import QUICK, write_source
from trainsweep import axes
from trainsweep.logs import parse
from trainsweep.spec import plan_sweep
from trainsweep.training import precision

pytestmark = pytest.mark.slow

SETTINGS = [
    {"dtype": "float32", "compile": False},
    {"dtype": "bfloat16", "compile": False},
    {"dtype": "float16", "compile": True},
]


def test_a_packed_job_trains_each_cell_in_its_setting_and_logs_the_precision_used(run_job):
    names = [f"ax-{s['dtype']}-local-cpu-16-e0" for s in SETTINGS]
    hyper = {
        **QUICK,
        "epochs": "1",
        "max-steps-per-epoch": "3",
        "batch-sizes": "16,16,16",
        "run-names": ",".join(names),
        "trainsweep-axes": json.dumps(SETTINGS),
    }
    res = run_job(hyper, timeout=600)
    assert res.returncode == 0, res.stderr
    assert [c["status"] for c in res.job_summary["cells"]] == ["ok", "ok", "ok"], res.job_summary
    for name, setting in zip(names, SETTINGS, strict=True):
        run = parse(res.log_path(name))
        assert run.status == "complete" and run.steps_total == 3
        assert run.extra[axes.LOG_KEY] == setting
        assert run.extra[axes.PRECISION_KEY] == setting["dtype"]


def test_out_of_memory_is_infeasible_per_setting_and_batch_size(run_job):
    settings = [{"dtype": "float32"}, {"dtype": "float32"}, {"dtype": "bfloat16"}]
    names = ["o-float32-local-cpu-8-e0", "o-float32-local-cpu-4096-e0", "o-bfloat16-local-cpu-8-e0"]
    hyper = {
        **QUICK,
        "epochs": "1",
        "max-steps-per-epoch": "2",
        "batch-sizes": "8,4096,8",
        "run-names": ",".join(names),
        "trainsweep-axes": json.dumps(settings),
    }
    # 4096 MNIST images need ~350 MB for the first activation: more than this worker may allocate
    res = run_job(hyper, env={"TRAINSWEEP_MEMORY_LIMIT_MB": "300"})
    assert res.returncode == 0, res.stderr
    assert [c["status"] for c in res.job_summary["cells"]] == ["ok", "oom", "ok"]
    assert parse(res.log_path(names[1])).extra[axes.LOG_KEY] == {"dtype": "float32"}
    assert parse(res.log_path(names[2])).status == "complete"


def test_a_precision_the_device_cannot_autocast_to_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.amp, "is_autocast_available", lambda device_type: False)
    with pytest.raises(precision.PrecisionInfeasibleError, match="no autocast for cpu"):
        precision.choose("float16", torch.device("cpu"))
    assert precision.choose("float32", torch.device("cpu")).name == "float32"


def test_a_forward_pass_that_comes_out_in_another_precision_is_refused() -> None:
    chosen = precision.choose("bfloat16", torch.device("cpu"))
    with pytest.raises(precision.PrecisionInfeasibleError, match="came out in float32"):
        precision.check_forward(chosen, lambda: torch.zeros(2, dtype=torch.float32))
    assert precision.check_forward(chosen, lambda: torch.nn.Linear(2, 2)(torch.ones(1, 2))) == "bfloat16"


RECORD = """
import json, os, sys
out = os.environ["SM_OUTPUT_DATA_DIR"]
os.makedirs(out, exist_ok=True)
name = json.load(open(os.environ["TRAINSWEEP_INSTRUMENT"]))["run_name"]
with open(os.path.join(out, "argv-%s.json" % name), "w") as f:
    json.dump(sys.argv[1:], f)
"""


def _packed_script_job(root, workload: dict, axes_: dict) -> dict[str, str]:
    spec = {
        "name": "s",
        "workload": {"source_dir": str(root), **workload},
        "axes": axes_,
        "instance_types": ["local"],
        "batch_sizes": [8],
        "packing": "per-instance",
    }
    (job,) = plan_sweep(spec, sweep_id="s-test").jobs
    return dict(job.hyperparameters)


def _argv(res, run: str) -> list[str]:
    return json.loads((res.base / "output" / "data" / f"argv-{run}.json").read_text())


def test_a_packed_command_job_fills_each_cells_placeholders(run_job, tmp_path):
    root = write_source(tmp_path, {"train.py": RECORD})
    hyper = _packed_script_job(
        root, {"command": "python train.py --bs {batch_size} --dtype={dtype}"}, {"dtype": ["a", "b"]}
    )
    res = run_job(hyper)
    runs = hyper["trainsweep-run-names"].split(",")
    assert [_argv(res, r) for r in runs] == [["--bs", "8", "--dtype=a"], ["--bs", "8", "--dtype=b"]]
    assert [parse(res.log_path(r)).extra[axes.LOG_KEY] for r in runs] == [{"dtype": "a"}, {"dtype": "b"}]


def test_a_packed_entry_point_job_gets_each_cells_values_and_flags(run_job, tmp_path):
    root = write_source(tmp_path, {"train.py": RECORD})
    workload = {"entry_point": "train.py", "flags": ["fast"], "epochs_arg": None}
    hyper = _packed_script_job(root, workload, {"fast": [False, True], "seed": [1]})
    res = run_job(hyper)
    runs = hyper["trainsweep-run-names"].split(",")
    assert [_argv(res, r) for r in runs] == [
        ["--batch-size", "8", "--seed", "1"],
        ["--batch-size", "8", "--fast", "--seed", "1"],
    ]
