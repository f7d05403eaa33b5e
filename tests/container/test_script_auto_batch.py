"""``batch_sizes: auto`` for a user's script, through the real planner and the container's supervisor: the
doubling search runs the script per batch size and never passes one its training set cannot fill."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainsweep.sourcedir import pack
from trainsweep.spec import plan_sweep

from .conftest import BUCKET, S3Server

SMALL_TRAINING_SET = """
import argparse
import torch
from torch.utils.data import DataLoader, TensorDataset
ap = argparse.ArgumentParser()
ap.add_argument("--batch-size", type=int)
ap.add_argument("--epochs", type=int)
args, _ = ap.parse_known_args()
data = TensorDataset(torch.randn(40, 4), torch.randint(0, 2, (40,)))  # 40 samples: no batch of 64
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(args.epochs):
    for x, y in DataLoader(data, batch_size=args.batch_size):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
"""


def _auto_hyperparameters(s3: S3Server, root: Path, **auto: Any) -> dict[str, str]:
    packed = pack(root)
    key = f"sweeps/s-auto/code/sourcedir-{packed.digest}.tar.gz"
    s3.client.put_object(Bucket=BUCKET, Key=key, Body=packed.data)  # type: ignore[attr-defined]
    spec = {
        "name": "s",
        "workload": {
            "source_dir": f"s3://{BUCKET}/{key}",
            "entry_point": "train.py",
            # every cell runs its few short epochs whole and predicts from them at its end
            "epochs": 30,
            "hyperparameters": {"early-stop-max-epochs": 30},
        },
        "instance_types": ["ml.g4dn.xlarge"],
        "batch_sizes": {"auto": auto},
    }
    job = plan_sweep(spec, sweep_id="s-auto").jobs[0]
    return dict(job.hyperparameters)


def test_a_scripts_search_records_batches_beyond_its_training_set_without_running_them(
    run_job, s3_server, tmp_path
):
    root = tmp_path / "src"
    root.mkdir()
    (root / "train.py").write_text(SMALL_TRAINING_SET)
    # one doubling runs (16 -> 32): a plateau, two flat doublings, cannot end the search first
    hyper = _auto_hyperparameters(s3_server, root, min=16, max=128, min_gain=0.0)
    assert hyper["trainsweep-batch-sizes"] == "16,32,64,128"

    result = run_job(hyper, env=s3_server.env())

    cells = {c["batch_size"]: c for c in result.job_summary["cells"]}
    assert cells[16]["status"] == "ok", result.stderr
    # 32 runs (40 samples make one batch of 32 and one of 8); its two steps an epoch are too few for
    # early stop to predict from, which is early stop's rule, not the search's: its status is not the test
    assert cells[32]["exit_code"] is not None
    for bs in (64, 128):  # the first cell said 40 samples: neither is passed to the script
        assert cells[bs]["status"] == "infeasible" and cells[bs]["exit_code"] is None
        assert cells[bs]["reason"].startswith(f"not run: batch size {bs} is beyond what the script can train")
    runs = hyper["trainsweep-run-names"].split(",")
    assert "Training failed: not run: batch size 64" in result.log(runs[2])
    assert result.job_summary["batch_size_search"]["beyond_training_set_at"] == 64
