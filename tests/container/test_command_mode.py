"""The container running a command (``workload.command``) and an entry point's argument settings.

The hyperparameters come from the real planner (``plan_sweep``), the source dir is a local folder the
launcher copies (as it fetches an archive), and ``container/train.py`` runs as a process: the command's
words reach the script as written, no shell in between, and the script is timed whether it runs as the
command's process or as a rank under ``torchrun``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trainsweep.spec import plan_sweep

from .conftest import JobResult, write_source

REAL_SCRIPTS = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "real-scripts"

SEEN = """
import json, os, sys
out = os.environ["SM_OUTPUT_DATA_DIR"]
os.makedirs(out, exist_ok=True)
with open(os.environ["TRAINSWEEP_INSTRUMENT"]) as f:
    steps = json.load(f)["steps"]
with open(os.path.join(out, "seen-%s.json" % os.environ.get("RANK", "-")), "w") as f:
    json.dump({"argv": sys.argv, "cwd": os.getcwd(), "steps": steps, "rank": os.environ.get("RANK"),
               "user_args": os.environ.get("SM_USER_ARGS")}, f)
"""

TRAIN = """
import argparse
import torch
from torch.utils.data import DataLoader, TensorDataset
ap = argparse.ArgumentParser()
ap.add_argument("config", nargs="?")
ap.add_argument("--bs", "--batch_size", dest="bs", type=int, required=True)
ap.add_argument("--epochs", type=int, default=1)
ap.add_argument("--use-optimizer", action="store_true")
args, _ = ap.parse_known_args()
data = TensorDataset(torch.randn(48, 4), torch.randint(0, 2, (48,)))
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(args.epochs):
    for x, y in DataLoader(data, batch_size=args.bs):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
"""


def _hyperparameters(
    root: Path, workload: dict[str, Any], batch_sizes: list[int], **more: Any
) -> dict[str, str]:
    spec = {
        "name": "s",
        "workload": {"source_dir": str(root), **workload},
        "instance_types": ["local"],
        "batch_sizes": batch_sizes,
        **more,
    }
    return dict(plan_sweep(spec, sweep_id="s-test").jobs[0].hyperparameters)


def _status(result: JobResult, run: str) -> dict[str, Any]:
    path = result.base / "output" / "data" / "cells" / f"{run}.json"
    return json.loads(path.read_text())


def _seen(result: JobResult, rank: str = "-") -> dict[str, Any]:
    return json.loads((result.base / "output" / "data" / f"seen-{rank}.json").read_text())


def test_a_command_runs_from_the_source_dir_with_its_words_filled_and_is_timed(run_job, tmp_path):
    root = write_source(tmp_path, {"train.py": SEEN + TRAIN})
    hostile = "a b; touch pwned $(touch pwned2)"
    workload = {
        "command": "python train.py config.py --batch_size={batch_size} --note {note} --max_iters={steps}",
        "steps": 7,
        "hyperparameters": {"note": hostile},
    }
    hyper = _hyperparameters(root, workload, [16])

    result = run_job(hyper)

    assert result.returncode == 0, result.stderr
    code = result.base / "code"
    seen = _seen(result)
    args = ["config.py", "--batch_size=16", "--note", hostile, "--max_iters=7"]
    assert seen["argv"] == ["train.py", *args]  # as "python train.py ..." gives it
    assert seen["cwd"] == str(code)
    assert json.loads(seen["user_args"]) == ["--note", hostile]  # SageMaker's: the hyperparameters
    assert seen["steps"] == 7  # workload.steps reaches the instrumentation
    assert not list(code.glob("pwned*")) and not list(Path.cwd().glob("pwned*"))  # no shell read it
    run = hyper["trainsweep-run-names"]
    assert _status(result, run)["status"] == "ok"
    assert result.log(run).count("step training time") == 3  # 48 samples / 16


def test_a_command_under_torchrun_times_the_rank_and_leaves_the_launcher_passive(run_job, tmp_path):
    root = write_source(tmp_path, {"train.py": SEEN + TRAIN})
    workload = {"command": "torchrun --standalone --nproc_per_node={gpus} train.py --bs {batch_size}"}
    hyper = _hyperparameters(root, workload, [24])

    result = run_job(hyper)

    assert result.returncode == 0, result.stderr
    seen = _seen(result, rank="0")  # the script ran as torchrun's rank 0, with nproc 1 on a CPU
    assert seen["argv"][1:] == ["--bs", "24"]
    run = hyper["trainsweep-run-names"]
    status = _status(result, run)
    assert status["status"] == "ok" and status["steps"] == 2
    assert result.log(run).count("step training time") == 2  # once: the launcher wrote nothing


def test_a_command_whose_script_fails_carries_the_scripts_exit(run_job, tmp_path):
    strict = (
        "import argparse\nap = argparse.ArgumentParser()\nap.add_argument('--bs', type=int)\n"
        "ap.add_argument('--use-optimizer', action='store_true')\nap.parse_args()\n"
    )
    root = write_source(tmp_path, {"train.py": strict})
    hyper = _hyperparameters(
        root, {"command": "python train.py --bs={batch_size} --use-optimizer true"}, [16]
    )

    result = run_job(hyper)

    assert result.returncode != 0
    status = _status(result, hyper["trainsweep-run-names"])
    assert status["status"] == "error"
    assert status["reason"] == "the script exited with code 2 before its first training step"
    assert "unrecognized arguments: true" in result.stderr + result.stdout


def test_a_command_whose_program_is_not_found_is_bad_input(run_job, tmp_path):
    root = write_source(tmp_path, {"train.py": TRAIN})
    hyper = _hyperparameters(root, {"command": "notalauncher-xyz train.py --bs={batch_size}"}, [16])

    result = run_job(hyper)

    assert result.returncode == 2
    assert "the command's program 'notalauncher-xyz' is not found" in (result.failure or "")


def test_an_entry_point_gets_equals_style_flags_and_positionals(run_job, tmp_path):
    root = write_source(tmp_path, {"train.py": SEEN + TRAIN})
    workload = {
        "entry_point": "train.py",
        "argument_style": "equals",
        "batch_size_arg": "batch_size",
        "epochs_arg": None,
        "flags": ["use-optimizer", "tied"],
        "arguments": ["config/{batch_size}.py"],
        "hyperparameters": {"tied": False, "lr": 0.5},
    }
    hyper = _hyperparameters(root, workload, [16])

    result = run_job(hyper)

    assert result.returncode == 0, result.stderr
    code = result.base / "code"
    assert _seen(result)["argv"] == [
        str(code / "train.py"),
        "config/16.py",
        "--batch_size=16",
        "--lr=0.5",
        "--use-optimizer",
    ]


@pytest.mark.slow
def test_nanogpt_runs_unchanged_from_its_command(run_job, tmp_path):
    src = tmp_path / "nanoGPT"
    shutil.copytree(REAL_SCRIPTS / "nanoGPT", src)
    prepare = src / "data" / "shakespeare_char" / "prepare.py"
    subprocess.run([sys.executable, str(prepare)], check=True, capture_output=True, timeout=300)
    line = (
        "python train.py config/train_shakespeare_char.py --device=cpu --compile=False --n_layer=2 "
        "--n_head=2 --n_embd=64 --block_size=64 --eval_iters=10 --dropout=0.0 --eval_interval=1000 "
        "--log_interval=1 --batch_size={batch_size} --max_iters={steps}"
    )
    hyper = _hyperparameters(src, {"command": line, "steps": 6}, [8])

    result = run_job(hyper)

    run = hyper["trainsweep-run-names"]
    assert result.returncode == 0, result.stderr[-3000:]
    assert "iter 6: loss" in result.stdout  # nanoGPT's own output: it trained to max_iters
    status = _status(result, run)
    assert status["status"] == "ok"
    assert status["steps"] == 7  # iterations 0..6: GradScaler.step(optimizer) is an optimizer step


def test_a_command_that_runs_a_module_is_timed(run_job, tmp_path):
    root = write_source(tmp_path, {"pkg/__init__.py": "", "pkg/train.py": SEEN + TRAIN})
    hyper = _hyperparameters(root, {"command": "python -m pkg.train --bs={batch_size}"}, [16])

    result = run_job(hyper)

    assert result.returncode == 0, result.stderr
    assert _seen(result)["argv"][1:] == ["--bs=16"]
    run = hyper["trainsweep-run-names"]
    assert _status(result, run)["status"] == "ok"
    assert result.log(run).count("step training time") == 3


@pytest.mark.slow
def test_word_language_model_runs_unchanged_with_its_store_true_flag(run_job, tmp_path):
    src = tmp_path / "wlm"
    shutil.copytree(REAL_SCRIPTS / "pytorch-examples" / "word_language_model", src)
    corpus = src / "data" / "wikitext-2"
    for split in ("train", "valid", "test"):  # a small corpus of its own (the README's train.txt is not here)
        lines = (
            REAL_SCRIPTS / "pytorch-examples" / "word_language_model" / "data" / "wikitext-2" / "valid.txt"
        )
        text = "".join(lines.read_text().splitlines(keepends=True)[:400])
        corpus.joinpath(f"{split}.txt").unlink(missing_ok=True)
        corpus.joinpath(f"{split}.txt").write_text(text)
    (src / "requirements.txt").unlink()  # torch, pinned otherwise: this environment has it
    workload = {
        "entry_point": "main.py",
        "batch_size_arg": "batch_size",
        "flags": ["use-optimizer"],
        "epochs": 1,
        "hyperparameters": {"emsize": 16, "nhid": 16, "nlayers": 1, "bptt": 35, "lr": 0.001},
    }
    hyper = _hyperparameters(src, workload, [64])

    result = run_job(hyper, timeout=600)

    assert result.returncode == 0, result.stderr[-3000:]
    run = hyper["trainsweep-run-names"]
    status = _status(result, run)
    assert status["status"] == "ok"
    tokens = len(corpus.joinpath("train.txt").read_text().split()) + corpus.joinpath(
        "train.txt"
    ).read_text().count("\n")
    assert status["steps"] == -(-(tokens // 64 - 1) // 35)  # one AdamW step per bptt slice


@pytest.mark.slow
def test_a_command_under_accelerate_launch_times_its_script(run_job, tmp_path):
    root = write_source(tmp_path, {"train.py": SEEN + TRAIN})
    workload = {"command": "accelerate launch --cpu --num_processes=1 train.py --bs {batch_size}"}
    hyper = _hyperparameters(root, workload, [16])

    result = run_job(hyper)

    assert result.returncode == 0, result.stderr[-3000:]
    run = hyper["trainsweep-run-names"]
    assert _status(result, run)["status"] == "ok"
    assert result.log(run).count("step training time") == 3


ARGV = """
import json, os, sys
out = os.environ["SM_OUTPUT_DATA_DIR"]
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "argv.json"), "w") as f:
    json.dump(sys.argv[1:], f)
"""

RENDEZVOUS = (
    "python train.py --nnodes={instance_count} --node_rank={node_rank} --master_addr={master_addr} "
    "--master_port={master_port} --nproc_per_node={gpus} --batch_size={batch_size_per_device}"
)
SECOND_OF_TWO = {
    "SM_HOSTS": json.dumps(["algo-1", "algo-2"]),
    "SM_CURRENT_HOST": "algo-2",
    "SM_MASTER_ADDR": "10.0.0.7",
    "SM_MASTER_PORT": "29777",
}


def test_a_multi_host_command_gets_its_rank_rendezvous_and_per_device_batch(run_job, tmp_path):
    root = write_source(tmp_path, {"train.py": ARGV})
    hyper = _hyperparameters(root, {"command": RENDEZVOUS}, [32])

    result = run_job(hyper, env=SECOND_OF_TWO)

    argv = json.loads((result.base / "output" / "data" / "argv.json").read_text())
    assert argv == [
        "--nnodes=2", "--node_rank=1", "--master_addr=10.0.0.7", "--master_port=29777",
        "--nproc_per_node=1", "--batch_size=16",
    ]  # fmt: skip


def test_a_batch_size_the_processes_cannot_share_fails_its_cell_alone_with_the_reason(run_job, tmp_path):
    root = write_source(tmp_path, {"train.py": ARGV})
    hyper = _hyperparameters(root, {"command": RENDEZVOUS}, [33, 64], packing="per-instance")

    result = run_job(hyper, env=SECOND_OF_TWO)

    assert result.returncode != 0
    odd, _ = hyper["trainsweep-run-names"].split(",")
    assert "Training failed: batch size 33 does not split over the job's 2 processes" in result.log(odd)
    argv = json.loads((result.base / "output" / "data" / "argv.json").read_text())
    assert argv[-1] == "--batch_size=32"  # the packed job's next cell ran: 64 over 2 processes


SPAWNED = """
import argparse, os
import torch, torch.distributed as dist, torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

def main(rank, world, args):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    if rank == args.fail_rank:
        raise ValueError(f"rank {rank} cannot find its shard")
    data = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
    model = DDP(torch.nn.Linear(4, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sampler = DistributedSampler(data)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for x, y in DataLoader(data, batch_size=args.bs // world, sampler=sampler):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
    dist.destroy_process_group()

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--bs", type=int)
    ap.add_argument("--epochs", type=int)
    ap.add_argument("--port")
    ap.add_argument("--fail-rank", type=int, default=-1)
    args = ap.parse_args()
    os.environ["MASTER_PORT"] = args.port
    mp.spawn(main, args=(2, args), nprocs=2)
"""


def _free_port() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def test_ranks_the_script_spawns_itself_are_timed_and_rank_0_reports(run_job, tmp_path):
    root = write_source(tmp_path, {"train.py": SPAWNED})
    command = f"python train.py --bs {{batch_size}} --epochs {{epochs}} --port {_free_port()}"
    hyper = _hyperparameters(root, {"command": command, "epochs": 2}, [16])

    result = run_job(hyper)

    assert result.returncode == 0, result.stderr
    run = hyper["trainsweep-run-names"]
    status = _status(result, run)
    assert status["status"] == "ok", status
    assert status["steps"] == 8  # 64 samples / 16 per step (8 per rank, 2 ranks), 2 epochs
    log = result.log(run)
    assert log.count("step training time") == 8  # rank 0 alone writes the steps
    assert log.count('"key": "init_start"') == 1  # the script's process opened the log; rank 0 went on


def test_a_rank_the_script_spawned_that_fails_fails_the_cell_with_its_words(run_job, tmp_path):
    root = write_source(tmp_path, {"train.py": SPAWNED})
    command = f"python train.py --bs {{batch_size}} --epochs 1 --port {_free_port()} --fail-rank 1"
    hyper = _hyperparameters(root, {"command": command}, [16])

    result = run_job(hyper)

    assert result.returncode != 0
    status = _status(result, hyper["trainsweep-run-names"])
    assert status["status"] == "error"
    assert "rank 1 cannot find its shard" in status["reason"]


def test_spawned_ranks_predict_in_early_stop_mode(run_job, tmp_path):
    root = write_source(tmp_path, {"train.py": SPAWNED})
    command = f"python train.py --bs {{batch_size}} --epochs {{epochs}} --port {_free_port()}"
    hyper = _hyperparameters(root, {"command": command, "epochs": 3}, [8], mode="early-stop")

    result = run_job(hyper)

    assert result.returncode == 0, result.stderr
    status = _status(result, hyper["trainsweep-run-names"])
    assert status["status"] == "ok", status
    assert status["prediction"]["steps_per_epoch"] == 8  # 64 samples, 4 per rank per step


def test_a_script_that_spawns_no_rank_fails_as_one_that_never_stepped(run_job, tmp_path):
    # the DDP tutorial spawns torch.cuda.device_count() ranks: none on a machine without a GPU
    no_ranks = "import torch.multiprocessing as mp\n\ndef main(rank):\n    pass\n\n"
    no_ranks += "if __name__ == '__main__':\n    mp.spawn(main, nprocs=0)\n"
    root = write_source(tmp_path, {"train.py": no_ranks})
    hyper = _hyperparameters(root, {"command": "python train.py --bs {batch_size}"}, [16])

    result = run_job(hyper)

    assert result.returncode != 0
    assert "never called optimizer.step()" in _status(result, hyper["trainsweep-run-names"])["reason"]
