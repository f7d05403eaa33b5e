"""The container in script mode: a user's script fetched from S3 as sourcedir.tar.gz, run as SageMaker would.

The hyperparameters come from the real planner (``plan_sweep`` on a script spec), the source dir is packed
by ``trainsweep.sourcedir`` and served by a moto S3 server, and ``container/train.py`` runs as a process.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trainsweep.sourcedir import pack
from trainsweep.spec import plan_sweep

from .conftest import BUCKET, JobResult, S3Server, write_source

SEEN = """
import json, os, sys
out = os.environ["SM_OUTPUT_DATA_DIR"]
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "seen.json"), "w") as f:
    json.dump({"argv": sys.argv, "cwd": os.getcwd(),
               "env": {k: v for k, v in os.environ.items() if k.startswith("SM_")}}, f)
"""

TRAIN = """
import argparse, sys
import torch
from torch.utils.data import DataLoader, TensorDataset
ap = argparse.ArgumentParser()
ap.add_argument("--batch-size", type=int)
ap.add_argument("--epochs", type=int)
args, _ = ap.parse_known_args()
if args.batch_size == 12:
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
data = TensorDataset(torch.randn(48, 4), torch.randint(0, 2, (48,)))
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(args.epochs):
    for x, y in DataLoader(data, batch_size=args.batch_size):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
"""


def _hyperparameters(s3: S3Server, root: Path, workload: dict[str, Any], batch_sizes: list[int],
                     packing: str = "per-cell") -> dict[str, str]:  # fmt: skip
    """The first job's hyperparameters as PlanSweep writes them, with the packed source uploaded."""
    packed = pack(root)
    key = f"sweeps/s-test/code/sourcedir-{packed.digest}.tar.gz"
    s3.client.put_object(Bucket=BUCKET, Key=key, Body=packed.data)  # type: ignore[attr-defined]
    spec = {
        "name": "s",
        "workload": {"source_dir": f"s3://{BUCKET}/{key}", **workload},
        "instance_types": ["ml.g4dn.xlarge"],
        "batch_sizes": batch_sizes,
        "packing": packing,
    }
    job = plan_sweep(spec, sweep_id="s-test").jobs[0]
    return dict(job.hyperparameters)


def _cells(result: JobResult) -> dict[int, dict[str, Any]]:
    return {c["batch_size"]: c for c in result.job_summary["cells"]}


def test_the_script_sees_exactly_sagemakers_arguments_and_environment(run_job, s3_server, tmp_path):
    root = write_source(tmp_path, {"train.py": SEEN + TRAIN})
    workload = {"entry_point": "train.py", "epochs": 1, "hyperparameters": {"lr": 0.1, "optimizer": "sgd"}}
    hyper = _hyperparameters(s3_server, root, workload, [16])

    result = run_job(hyper, env=s3_server.env(), channel=lambda ch: (ch / "x.npz").write_bytes(b"0"))

    assert result.returncode == 0, result.stderr
    base = result.base
    seen = json.loads((base / "output" / "data" / "seen.json").read_text())
    code = base / "code"
    # --name value, sorted by name, the sweep's batch size and epochs among them; nothing of trainsweep's
    assert seen["argv"] == [str(code / "train.py"), "--batch-size", "16", "--epochs", "1", "--lr", "0.1",
                            "--optimizer", "sgd"]  # fmt: skip
    assert seen["cwd"] == str(code)
    env = seen["env"]
    hps = {"batch-size": 16, "epochs": 1, "lr": 0.1, "optimizer": "sgd"}
    expected = {
        "SM_MODEL_DIR": str(base / "model"),
        "SM_CHANNEL_TRAIN": str(base / "input" / "data" / "train"),
        "SM_CHANNELS": '["train"]',
        "SM_OUTPUT_DATA_DIR": str(base / "output" / "data"),
        "SM_NUM_GPUS": "0",
        "SM_HOSTS": '["algo-1"]',
        "SM_CURRENT_HOST": "algo-1",
        "SM_USER_ENTRY_POINT": "train.py",
        "SM_HP_LR": "0.1",
        "SM_HP_BATCH-SIZE": "16",
    }
    assert {k: env.get(k) for k in expected} == expected
    assert json.loads(env["SM_HPS"]) == hps
    assert json.loads(env["SM_USER_ARGS"]) == seen["argv"][1:]
    assert json.loads(env["SM_TRAINING_ENV"])["hyperparameters"] == hps
    assert not any("trainsweep" in k.lower() or "sagemaker_" in k.lower() for k in env)
    # and it was timed: the log holds its steps (48 samples / 16 = 3)
    run = hyper["trainsweep-run-names"]
    assert result.log(run).count("step training time") == 3


def test_a_packed_scan_records_out_of_memory_as_infeasible_and_goes_on(run_job, s3_server, tmp_path):
    root = write_source(tmp_path, {"train.py": TRAIN})
    hyper = _hyperparameters(s3_server, root, {"entry_point": "train.py", "epochs": 1}, [8, 12, 16],
                             packing="per-instance")  # fmt: skip

    result = run_job(hyper, env=s3_server.env())

    assert result.returncode == 0, result.stderr
    cells = _cells(result)
    assert [cells[b]["status"] for b in (8, 12, 16)] == ["ok", "oom", "ok"]
    runs = hyper["trainsweep-run-names"].split(",")
    assert result.log(runs[0]).count("step training time") == 6
    assert "out of memory" in result.log(runs[1])
    assert result.log(runs[2]).count("step training time") == 3


def test_requirements_that_fail_to_install_fail_the_job_with_pips_reason(run_job, s3_server, tmp_path):
    root = write_source(tmp_path, {"train.py": TRAIN, "requirements.txt": "this is ! not a requirement\n"})
    hyper = _hyperparameters(s3_server, root, {"entry_point": "train.py", "epochs": 1}, [16])

    result = run_job(hyper, env=s3_server.env())

    assert result.returncode == 2
    assert result.failure is not None
    assert "requirements failed to install (requirements.txt" in result.failure
    run = hyper["trainsweep-run-names"]
    assert "requirements failed to install" in result.log(run)  # the log is delivered with the reason


def test_an_entry_point_missing_from_the_source_dir_names_what_it_holds(run_job, s3_server, tmp_path):
    root = write_source(tmp_path, {"main.py": TRAIN})
    hyper = _hyperparameters(s3_server, root, {"entry_point": "main.py", "epochs": 1}, [16])
    hyper["sagemaker_program"] = "train.py"  # as if the archive were built from another folder

    result = run_job(hyper, env=s3_server.env())

    assert result.returncode == 2
    assert "entry point 'train.py' is not in the source dir" in (result.failure or "")
    assert "main.py" in (result.failure or "")


def test_a_source_dir_that_cannot_be_fetched_is_bad_input(run_job, s3_server, tmp_path):
    root = write_source(tmp_path, {"train.py": TRAIN})
    hyper = _hyperparameters(s3_server, root, {"entry_point": "train.py", "epochs": 1}, [16])
    hyper["sagemaker_submit_directory"] = f"s3://{BUCKET}/sweeps/s-test/code/sourcedir-missing.tar.gz"

    result = run_job(hyper, env=s3_server.env())

    assert result.returncode == 2
    assert "cannot fetch the source dir" in (result.failure or "")


def test_a_script_jobs_log_settings_are_read_as_the_built_ins_are(s3_server, tmp_path):
    from trainsweep.training.launch import parse_script_config

    root = write_source(tmp_path, {"train.py": TRAIN})
    hyper = _hyperparameters(s3_server, root, {"entry_point": "train.py", "epochs": 1}, [16])
    hyper.update({"trainsweep-log-upload-seconds": "5", "trainsweep-log-bucket": BUCKET})
    cfg = parse_script_config(hyper)
    assert cfg.log_upload_s == 5.0
    assert cfg.log_bucket == BUCKET
