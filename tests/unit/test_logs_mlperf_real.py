"""Issue 12 item 6: real MLPerf Training v4.0 result logs are read as MLPerf defines a run.

Through the CLI (`trainsweep import`, `parse`, `report`) on ../shared/fixtures/mlperf-training-v4.0 (logs and
system descriptions as MLCommons publishes them) and on small logs made here. Expected values are computed in
the tests from the raw ``:::MLLOG`` lines with ``json.loads``, never copied from trainsweep's output.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainsweep.cli import app

MLPERF = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "mlperf-training-v4.0"
LOGS = sorted(MLPERF.glob("*/results/*/*/result_*.txt"))
MLPERF_KEY = "trainsweep.mlperf"


def records(path: Path) -> list[dict]:
    """Every ``:::MLLOG`` record of a log, with the rank of its launcher prefix (``0: ``) if any."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        head, sep, payload = line.partition(":::MLLOG")
        if not sep:
            continue
        rec = json.loads(payload)
        prefix = re.fullmatch(r"\s*(\d+):\s*", head)
        rec["_rank"] = int(prefix.group(1)) if prefix else 0
        out.append(rec)
    return out


def first(recs: list[dict], key: str) -> dict:
    return next(r for r in recs if r["key"] == key and r["_rank"] == 0)


def expected(path: Path) -> dict:
    recs = records(path)
    start, stop = first(recs, "run_start"), first(recs, "run_stop")
    return {
        "time_to_train_s": (stop["time_ms"] - start["time_ms"]) / 1000,
        "status": stop["metadata"]["status"],
        "batch_size": first(recs, "global_batch_size")["value"],
        "benchmark": first(recs, "submission_benchmark")["value"],
    }


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    if not LOGS:
        pytest.fail(f"MLPerf fixtures not found at {MLPERF}: the project expects ../shared beside its root")
    out = tmp_path_factory.mktemp("mlperf-import")
    result = CliRunner().invoke(app, ["import", str(MLPERF), "--out", str(out), "--workers", "1"])
    assert result.exit_code == 0, result.output
    assert "MLPerf systems compared by time to train" in result.output
    return out, json.loads((out / "quality.json").read_text())


def run_record(out: Path, log: Path) -> dict:
    relative = log.relative_to(MLPERF)
    return json.loads((out / relative.parent / "runs" / f"{log.stem}.json").read_text())


# ---- import: status, global batch size, time to train -----------------------------------------------


def test_every_fixture_log_is_a_successful_run_with_its_global_batch_size(imported) -> None:
    out, quality = imported
    by_path = {f["path"]: f for f in quality["files"]}
    assert len(by_path) == len(LOGS) == 26
    for log in LOGS:
        want = expected(log)
        entry = by_path[str(log.relative_to(MLPERF))]
        assert want["status"] == "success"
        assert entry["status"] == "complete", (log, entry["problems"])
        assert entry["batch_size"] == want["batch_size"]
        rec = run_record(out, log)
        mlperf = rec["extra"][MLPERF_KEY]
        assert mlperf["status"] == "success"
        assert mlperf["benchmark"] == want["benchmark"]
        assert mlperf["time_to_train_s"] == pytest.approx(want["time_to_train_s"], abs=1e-9)
    assert quality["summary"]["by_status"] == {"complete": 26}


def test_no_run_that_ended_with_success_is_failed(imported) -> None:
    _, quality = imported
    failed = [f["path"] for f in quality["files"] if f["status"] == "failed"]
    assert failed == []
    codes = {p["code"] for f in quality["files"] for p in f["problems"]}
    assert "no-training" not in codes and "failed" not in codes


def test_every_run_knows_its_system_from_systems_json(imported) -> None:
    out, _ = imported
    for log in LOGS:
        system_name = log.parents[1].name
        desc = json.loads((log.parents[3] / "systems" / f"{system_name}.json").read_text())
        rec = run_record(out, log)
        system = rec["extra"][MLPERF_KEY]["system"]
        nodes, per_node = int(desc["number_of_nodes"]), int(desc["accelerators_per_node"])
        assert system["nodes"] == nodes
        assert system["accelerators_per_node"] == per_node
        assert system["accelerator"] == desc["accelerator_model_name"]
        assert rec["header"]["gpus"] == nodes * per_node


# ---- parse: blocks, throughput, evaluations, rank prefixes ---------------------------------------------


def parse_cli(path: Path) -> dict:
    result = CliRunner().invoke(app, ["parse", str(path)])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_parse_resnet_blocks_of_epochs_give_throughput_and_evaluations() -> None:
    log = MLPERF / "NVIDIA/results/h200_ngc24.04_mxnet/resnet/result_0.txt"
    recs = records(log)
    train_samples = first(recs, "train_samples")["value"]
    starts = [r for r in recs if r["key"] == "block_start"]
    stops = [r for r in recs if r["key"] == "block_stop"]
    evals = [r for r in recs if r["key"] == "eval_accuracy"]
    rec = parse_cli(log)
    mlperf = rec["extra"][MLPERF_KEY]
    assert rec["status"] == "complete" and rec["batch_size"] == first(recs, "global_batch_size")["value"]
    assert len(mlperf["blocks"]) == len(stops) == len(starts)
    for block, start, stop in zip(mlperf["blocks"], starts, stops, strict=True):
        samples = start["metadata"]["epoch_count"] * train_samples
        seconds = (stop["time_ms"] - start["time_ms"]) / 1000
        assert block["first_epoch_num"] == start["metadata"]["first_epoch_num"]
        assert block["samples"] == samples
        assert block["samples_per_s"] == pytest.approx(samples / seconds)
    assert [e["accuracy"] for e in mlperf["evals"]] == [e["value"] for e in evals]
    assert [e["epoch_num"] for e in mlperf["evals"]] == [e["metadata"]["epoch_num"] for e in evals]
    # epoch_start/epoch_stop still give the epochs, every one closed
    epoch_stops = [r for r in recs if r["key"] == "epoch_stop"]
    assert len(rec["epochs"]) == len(epoch_stops)
    assert all(e["end_time"] is not None for e in rec["epochs"])


def test_parse_rank_prefixed_log_counts_samples_per_block_and_keeps_rank_zero() -> None:
    log = MLPERF / "Oracle/results/16xBM.GPU.H100.8/stable_diffusion/result_1.txt"
    recs = [r for r in records(log) if r["_rank"] == 0]
    starts = [r for r in recs if r["key"] == "block_start"]
    stops = [r for r in recs if r["key"] == "block_stop"]
    rec = parse_cli(log)
    mlperf = rec["extra"][MLPERF_KEY]
    assert rec["status"] == "complete"
    assert rec["header"]["gpus"] == 16 * 8
    assert mlperf["system"]["accelerator"] == "NVIDIA H100-SXM5-80GB"
    block = mlperf["blocks"][1]
    samples = stops[1]["metadata"]["samples_count"] - starts[1]["metadata"]["samples_count"]
    assert block["samples"] == samples
    assert block["duration_s"] == pytest.approx((stops[1]["time_ms"] - starts[1]["time_ms"]) / 1000)
    # two metrics per evaluation (FID, CLIP), each with its sample count
    evals = [r for r in recs if r["key"] == "eval_accuracy"]
    assert [(e["metric"], e["samples_count"]) for e in mlperf["evals"]] == [
        (e["metadata"]["metric"], e["metadata"]["samples_count"]) for e in evals
    ]
    assert not [p for p in rec["problems"] if p["code"] == "bad-mllog"]


def test_parse_fujitsu_epochs_counted_in_samples_is_said_not_multiplied() -> None:
    log = MLPERF / "Fujitsu/results/PRIMERGY-CDI-L40Sx14/unet3d/result_0.txt"
    recs = records(log)
    start = first(recs, "block_start")
    rec = parse_cli(log)
    assert "mlperf-epochs-in-samples" in {p["code"] for p in rec["problems"]}
    assert rec["extra"][MLPERF_KEY]["blocks"][0]["samples"] == start["metadata"]["epoch_count"]


def _mlperf_log(stop_status: str | None, prefix: str = "") -> str:
    def line(key, value=None, t=0, **meta) -> str:
        rec = {"namespace": "", "time_ms": 1_700_000_000_000 + t, "event_type": "POINT_IN_TIME"}
        return prefix + ":::MLLOG " + json.dumps(rec | {"key": key, "value": value, "metadata": meta})

    lines = [
        line("submission_benchmark", "bert"),
        line("global_batch_size", 48),
        line("train_samples", 1000),
        line("run_start", t=1000),
        line("block_start", t=1000, samples_count=0),
        line("block_stop", t=3000, samples_count=480),
        line("eval_accuracy", 0.7, t=3100, samples_count=480),
    ]
    if stop_status is not None:
        lines.append(line("run_stop", t=4000, status=stop_status))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("stop", "status"), [("success", "complete"), ("aborted", "failed"), (None, "partial")]
)
def test_parse_status_is_run_stops(tmp_path: Path, stop: str | None, status: str) -> None:
    log = tmp_path / "result_0.txt"
    log.write_text(_mlperf_log(stop, prefix="[0] "))
    rec = parse_cli(log)
    mlperf = rec["extra"][MLPERF_KEY]
    assert rec["status"] == status
    assert rec["batch_size"] == 48
    assert mlperf["time_to_train_s"] == (3.0 if stop else None)
    assert mlperf["blocks"][0]["samples_per_s"] == pytest.approx(480 / 2.0)
    if stop is None:
        assert "ends-early" in {p["code"] for p in rec["problems"]}


def test_rank_prefix_assigns_records_to_their_rank(tmp_path: Path) -> None:
    """Only rank 0's run_stop counts: another rank's aborted line does not fail the run."""
    good = _mlperf_log("success", prefix="0: ")
    other = good.replace("0: :::MLLOG", "3: :::MLLOG").replace('"success"', '"aborted"')
    log = tmp_path / "result_1.txt"
    log.write_text(good + other.splitlines()[-1] + "\n")
    rec = parse_cli(log)
    assert rec["status"] == "complete"
    assert rec["extra"][MLPERF_KEY]["status"] == "success"


# ---- import and report: one comparison of systems per benchmark ---------------------------------------


def systems_csv(folder: Path, benchmark: str) -> list[dict[str, str]]:
    import csv

    return list(csv.DictReader((folder / "mlperf" / benchmark / "systems.csv").open()))


def median_ttt(logs: list[Path]) -> float:
    import statistics

    return statistics.median(expected(log)["time_to_train_s"] for log in logs)


def test_import_compares_systems_per_benchmark_by_time_to_train(imported) -> None:
    out, _ = imported
    benchmarks = {log.parent.name for log in LOGS}
    assert {p.name for p in (out / "mlperf").iterdir()} == benchmarks
    rows = systems_csv(out, "resnet")
    systems = {log.parents[1].name for log in LOGS if log.parent.name == "resnet"}
    want = {}
    for system in systems:
        logs = [log for log in LOGS if log.parent.name == "resnet" and log.parents[1].name == system]
        desc = json.loads((logs[0].parents[3] / "systems" / f"{system}.json").read_text())
        want[desc["system_name"]] = (median_ttt(logs), len(logs))
    assert [r["system"] for r in rows] == sorted(want, key=lambda s: want[s][0])  # fastest first
    for r in rows:
        assert float(r["time_to_train_s"]) == pytest.approx(want[r["system"]][0], rel=1e-5)
        assert int(r["successful_runs"]) == int(r["runs"]) == want[r["system"]][1]
    html = (out / "mlperf" / "resnet" / "report.html").read_text()
    assert "1xBM.GPU.H100.8" in html and "fastest" in html


def test_oracle_bm_gpu_is_said_not_a_sagemaker_type_never_priced(imported) -> None:
    out, quality = imported
    oracle = [r for r in systems_csv(out, "resnet") if "BM.GPU.H100.8" in r["system"]]
    assert len(oracle) == 2
    for r in oracle:
        assert r["instance_type"] == "" and r["usd_per_hour"] == "" and r["cost_to_train_usd"] == ""
        assert "is not a SageMaker instance type" in r["price_note"]
    said = {u["path"]: u for u in quality["not_an_instance_type"]}
    assert len(said) == len(LOGS) == quality["summary"]["not_an_instance_type"]
    entry = said["Oracle/results/1xBM.GPU.H100.8/resnet/result_1.txt"]
    assert entry["system"] == "1xBM.GPU.H100.8" and "not a SageMaker instance type" in entry["reason"]
    # the system is read: no run has an instance type left unread
    assert quality["instance_type_unread"] == [] and quality["summary"]["instance_type_unread"] == 0
    assert "No cost for" in (out / "mlperf" / "resnet" / "report.html").read_text()


def test_a_system_named_as_a_sagemaker_type_is_priced(tmp_path: Path) -> None:
    """A system whose name is a SageMaker type (2 nodes of p4d.24xlarge) gets a cost to train."""
    from trainsweep.cost.prices import hourly_usd

    src = tmp_path / "src" / "Acme"
    desc = {"submitter": "Acme", "system_name": "2xp4d.24xlarge", "status": "cloud"}
    desc |= {"number_of_nodes": "2", "accelerators_per_node": "8", "accelerator_model_name": "A100"}
    (src / "systems").mkdir(parents=True)
    (src / "systems" / "2xp4d.24xlarge.json").write_text(json.dumps(desc))
    logs = src / "results" / "2xp4d.24xlarge" / "bert"
    logs.mkdir(parents=True)
    (logs / "result_0.txt").write_text(_mlperf_log("success"))
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["import", str(tmp_path / "src"), "--out", str(out), "--workers", "1"])
    assert result.exit_code == 0, result.output
    [row] = systems_csv(out, "bert")
    assert row["instance_type"] == "ml.p4d.24xlarge" and row["accelerators"] == "16"
    price = hourly_usd("ml.p4d.24xlarge")
    assert price is not None
    assert float(row["cost_to_train_usd"]) == pytest.approx(3.0 / 3600 * price * 2, rel=1e-5)
    quality = json.loads((out / "quality.json").read_text())
    assert quality["files"][0]["instance_type"] == "ml.p4d.24xlarge"
    assert quality["instance_type_unread"] == [] and "not_an_instance_type" not in quality


@pytest.mark.slow
def test_report_rebuilds_the_benchmark_comparison_from_run_records(imported, tmp_path: Path) -> None:
    import shutil

    out, _ = imported
    copy = tmp_path / "results"
    shutil.copytree(out, copy)
    shutil.rmtree(copy / "mlperf")
    result = CliRunner().invoke(app, ["report", str(copy)])
    assert result.exit_code == 0, result.output
    assert systems_csv(copy, "resnet") == systems_csv(out, "resnet")
    assert (copy / "mlperf" / "unet3d" / "report.html").is_file()


# ---- the seed McGill tooling's instrumented keys: per-step compute, data wait, timeline -------------------

STEPS = [  # (load_batch_mem, all_compute, step_end) in nanoseconds, per step of each epoch
    (30_000_000, 170_000_000, 205_000_000),
    (10_000_000, 160_000_000, 172_000_000),
    (12_000_000, 158_000_000, 171_000_000),
]


def _instrumented_log(ranks: tuple[int, ...] = (0,)) -> str:
    """An MLPerf log with the McGill per-step keys (value {"duration": ns}) in two epochs, per rank."""

    def line(rank, key, value=None, t=0, event="POINT_IN_TIME", **meta) -> str:
        rec = {"namespace": "", "time_ms": 1_700_000_000_000 + t, "event_type": event, "key": key}
        return f"{rank}: :::MLLOG " + json.dumps(rec | {"value": value, "metadata": meta})

    lines = [line(0, "submission_benchmark", "unet3d"), line(0, "global_batch_size", 7)]
    lines += [line(0, "run_start", t=0)]
    for epoch in (1, 2):
        for rank in ranks:
            lines.append(line(rank, "epoch_start", t=epoch * 1000, epoch_num=epoch))
            for wait, comp, step in STEPS:
                lines.append(line(rank, "load_batch_mem", {"duration": wait + rank}, event="INTERVAL_END"))
                lines.append(line(rank, "all_compute", {"duration": comp}, event="INTERVAL_END"))
                lines.append(line(rank, "step_end", {"duration": step}, event="INTERVAL_END"))
            lines.append(line(rank, "epoch_stop", t=epoch * 1000 + 600, epoch_num=epoch))
    lines.append(line(0, "run_stop", t=2700, status="success"))
    return "\n".join(lines) + "\n"


def test_parse_instrumented_keys_give_per_step_compute_and_data_wait(tmp_path: Path) -> None:
    log = tmp_path / "result_0.txt"
    log.write_text(_instrumented_log(ranks=(0, 1)))
    rec = parse_cli(log)
    assert rec["status"] == "complete" and rec["dialect"] == "mllog"
    assert [e["index"] for e in rec["epochs"]] == [1, 2]
    for epoch in rec["epochs"]:
        assert epoch["step_s"] == pytest.approx([s / 1e9 for _, _, s in STEPS])
        assert epoch["compute_s"] == pytest.approx([c / 1e9 for _, c, _ in STEPS])
        assert epoch["data_wait_s"] == pytest.approx([w / 1e9 for w, _, _ in STEPS])
    [rank1] = rec["ranks"].values()  # rank 0 is the primary rank's epochs
    assert rank1[0]["data_wait_s"] == pytest.approx([(w + 1) / 1e9 for w, _, _ in STEPS])


def test_import_instrumented_run_gets_a_timeline_and_step_split(tmp_path: Path) -> None:
    import statistics

    logs = tmp_path / "src" / "McGill" / "results" / "1xA100" / "unet3d"
    logs.mkdir(parents=True)
    (logs / "result_0.txt").write_text(_instrumented_log())
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["import", str(tmp_path / "src"), "--out", str(out), "--workers", "1"])
    assert result.exit_code == 0, result.output
    [row] = systems_csv(out, "unet3d")
    assert float(row["step_compute_s"]) == pytest.approx(statistics.median(c for _, c, _ in STEPS * 2) / 1e9)
    assert float(row["step_data_wait_s"]) == pytest.approx(
        statistics.median(w for w, _, _ in STEPS * 2) / 1e9
    )
    timeline = out / "mlperf" / "unet3d" / "timeline-1xA100-result_0.png"
    assert timeline.read_bytes().startswith(b"\x89PNG")
    assert "Per-step timelines" in (out / "mlperf" / "unet3d" / "report.html").read_text()
