"""Issue 12: every instance-type spelling of the seeds is read, and what is not read is said, never dropped.

Through the CLI (`trainsweep import`, `report`, `parse`) on small logs made here and on the shared real data.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainsweep.cli import app

HIGH_RES = "high-res-distributed"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def import_(runner: CliRunner, src: Path, out: Path, *extra: str) -> dict:
    result = runner.invoke(app, ["import", str(src), "--out", str(out), "--workers", "1", *extra])
    assert result.exit_code == 0, result.output
    return json.loads((out / "quality.json").read_text())


def sweep_rows(root: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO((root / "sweep.csv").read_text())))


# ---- item 1: every spelling ---------------------------------------------------------------------------

SPELLED = {
    # file name (relative to the source folder) -> (instance type, batch size of its row)
    "result-p2-1-256-e0.txt": ("ml.p2.xlarge", "256"),
    "result-p3-2-256-e0.txt": ("ml.p3.2xlarge", "256"),
    "result-g4dn-1-256-e0.txt": ("ml.g4dn.xlarge", "256"),
    "result-g4dnxlarge-1-512-e0.txt": ("ml.g4dn.xlarge", "512"),
    "result-g4dn2xlarge-1-256-e0.txt": ("ml.g4dn.2xlarge", "256"),
    "result-g4dn12xlarge-4-256-e0.txt": ("ml.g4dn.12xlarge", "256"),
    "result-g4dn12xlarge-1-512-e0.txt": ("ml.g4dn.12xlarge", "512"),
    "result-p2-1-ec2-1024-e0.txt": ("ml.p2.xlarge", "1024"),
    "resnet50-p3-gpu4-b512-e0.txt": ("ml.p3.8xlarge", "512"),
}


@pytest.mark.slow
def test_import_reads_every_instance_type_spelling_of_the_seeds(
    runner: CliRunner, cloudml_log: Callable[..., bytes], tmp_path: Path
) -> None:
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    for i, name in enumerate(SPELLED):  # different timings: copies of one log would be left out
        (src / name).write_bytes(cloudml_log(command=False, step_s=0.01 * (i + 1)))
    (src / "c5x").mkdir()
    (src / "c5x" / "TEST_NODE-1625080072.59.out").write_bytes(cloudml_log(command=False))
    q = import_(runner, src, out)

    files = {f["path"]: f for f in q["files"]}
    for name, (itype, _) in SPELLED.items():
        assert files[name]["instance_type"] == itype, name
    assert files["c5x/TEST_NODE-1625080072.59.out"]["instance_type"] == "ml.c5.xlarge"
    assert q["instance_type_unread"] == []
    rows = {(r["instance_type"], r["batch_size"]) for r in sweep_rows(out)}
    assert rows == set(SPELLED.values())
    assert {(r["instance_type"], r["gpus"]) for r in sweep_rows(out / "c5x")} == {("ml.c5.xlarge", "0")}
    # The seed layout keeps the spelling the seed scripts wrote their outputs under.
    assert (out / "execution-times/g4dnxlarge-1/512/e0.json").is_file()


def test_quality_json_names_every_log_whose_instance_type_was_not_read_with_its_spelling(
    runner: CliRunner, cloudml_log: Callable[..., bytes], tmp_path: Path
) -> None:
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    (src / "result-p3-1-256-e0.txt").write_bytes(cloudml_log(command=False))
    (src / "result-zz9-1-256-e0.txt").write_bytes(cloudml_log(command=False))
    (src / "result-g4dnxlarge-2-256-e0.txt").write_bytes(cloudml_log(command=False))  # xlarge has 1 GPU
    (src / "log.txt").write_bytes(cloudml_log(command=False))
    q = import_(runner, src, out)

    unread = {u["path"]: u["spelling"] for u in q["instance_type_unread"]}
    assert unread == {
        "result-zz9-1-256-e0.txt": "zz9-1",
        "result-g4dnxlarge-2-256-e0.txt": "g4dnxlarge-2",
        "log.txt": None,
    }
    assert q["summary"]["instance_type_unread"] == 3
    files = {f["path"]: f for f in q["files"]}
    assert "unknown-instance-type" in {p["code"] for p in files["result-zz9-1-256-e0.txt"]["problems"]}
    assert "import.no_instance_type" in {p["code"] for p in files["log.txt"]["problems"]}
    assert files["result-p3-1-256-e0.txt"]["instance_type"] == "ml.p3.2xlarge"


def test_parse_warns_about_a_spelling_it_cannot_read(
    runner: CliRunner, cloudml_log: Callable[..., bytes], tmp_path: Path
) -> None:
    log = tmp_path / "result-zz9-1-256-e0.txt"
    log.write_bytes(cloudml_log(command=False))
    result = runner.invoke(app, ["parse", str(log)])
    assert "unknown-instance-type" in result.output
    assert "'zz9-1'" in result.output
    known = tmp_path / "result-g4dnxlarge-1-256-e0.txt"
    known.write_bytes(cloudml_log(command=False))
    assert "unknown-instance-type" not in runner.invoke(app, ["parse", str(known)]).output


def test_the_real_per_instance_folders_give_their_instance_types(
    runner: CliRunner, real_data: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    q = import_(runner, real_data / HIGH_RES, out)
    assert q["instance_type_unread"] == []
    rows = sweep_rows(out / "mo833-trabalho/experiment_results")  # one run per folder (item 5: its ranks)
    assert [r["instance_type"] for r in rows] == ["ml.c4.xlarge", "ml.c5.xlarge"]
    # seed 002 ran these on plain EC2: its own figures use EC2's 0.199 and 0.170 USD/h
    assert [(r["platform"], r["usd_per_hour"]) for r in rows] == [("ec2", "0.199"), ("ec2", "0.17")]


# ---- item 2: nothing unknown is silently dropped ------------------------------------------------------


@pytest.mark.slow
def test_the_report_says_what_it_could_not_judge_above_the_recommendation(
    runner: CliRunner, cloudml_log: Callable[..., bytes], tmp_path: Path
) -> None:
    # The ResNet-50/CIFAR case: the cheap g4dn runs were named in a spelling the importer did not know,
    # so the report recommended the dearer p2 without a word.
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    (src / "result-p2-1-2048-e0.txt").write_bytes(cloudml_log(command=False, step_s=0.06))
    (src / "result-g4dnxlarge-1-512-e0.txt").write_bytes(cloudml_log(command=False, step_s=0.05))
    (src / "result-zz9-1-256-e0.txt").write_bytes(cloudml_log(command=False, step_s=0.01))
    import_(runner, src, out)

    rows = {(r["instance_type"], r["batch_size"]): r for r in sweep_rows(out)}
    assert rows[("ml.g4dn.xlarge", "512")]["not_judged"] == ""
    assert rows[("ml.p2.xlarge", "2048")]["not_judged"] == ""
    assert rows[("zz9-1", "256")]["not_judged"].startswith("no instance type")
    doc = json.loads((out / "sweep.json").read_text())
    rec = doc["recommendation"]
    assert rec["pick"]["instance_type"] == "ml.g4dn.xlarge"
    assert rec["text"][0].startswith("Could not judge 1 of 3 configurations: 1 no instance type")
    assert "zz9-1" in rec["text"][0]
    assert "a subset: 1 of 3 configurations could not be judged" in rec["text"][1]
    assert [c["instance_type"] for c in rec["not_judged"]] == ["zz9-1"]
    html = (out / "report.html").read_text()
    section = html[html.index('<section id="recommendation">') :]
    assert section.index("Could not judge 1 of 3") < section.index("Use ml.g4dn.xlarge")

    result = runner.invoke(app, ["report", str(out)])
    assert result.exit_code == 0, result.output
    lines = [line.strip() for line in result.output.splitlines()]
    first = next(i for i, line in enumerate(lines) if line.startswith("Could not judge"))
    assert re.match(r"Use ml\.g4dn\.xlarge", lines[first + 1]) or "Use ml.g4dn.xlarge" in " ".join(
        lines[first:]
    )


def test_a_recommendation_over_every_configuration_says_nothing_about_a_subset(
    runner: CliRunner, cloudml_log: Callable[..., bytes], tmp_path: Path
) -> None:
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    (src / "result-p3-1-256-e0.txt").write_bytes(cloudml_log(command=False))
    (src / "result-p3-1-512-e0.txt").write_bytes(cloudml_log(command=False, step_s=0.02))
    import_(runner, src, out)
    rec = json.loads((out / "sweep.json").read_text())["recommendation"]
    assert rec["not_judged"] == []
    assert rec["text"][0].startswith("Use ")
    assert "subset" not in rec["reason"]
    assert all(r["not_judged"] == "" for r in sweep_rows(out))


# ---- item 7: duplicates keep the copy whose header agrees with its name --------------------------------


def test_of_byte_identical_copies_the_one_whose_header_agrees_with_its_name_is_kept(
    runner: CliRunner, cloudml_log: Callable[..., bytes], tmp_path: Path
) -> None:
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    one_gpu = cloudml_log(batch_size=256)  # its command line says --num-gpus 1
    (src / "result-g4dn12xlarge-4-256-e0.txt").write_bytes(one_gpu)  # first by name, says 4 GPUs: misfiled
    (src / "result-g4dnxlarge-1-256-e0.txt").write_bytes(one_gpu)
    q = import_(runner, src, out)

    [group] = q["duplicates"]
    assert group["kept"] == "result-g4dnxlarge-1-256-e0.txt"
    files = {f["path"]: f for f in q["files"]}
    [flag] = [
        p
        for p in files["result-g4dn12xlarge-4-256-e0.txt"]["problems"]
        if p["code"] == "import.duplicate_log"
    ]
    assert "result-g4dnxlarge-1-256-e0.txt, which is kept as the run" in flag["message"]
    assert "its header agrees with its name" in flag["message"]
    rows = sweep_rows(out)
    assert [(r["instance_type"], r["gpus"], r["runs"]) for r in rows] == [("ml.g4dn.xlarge", "1", "1")]


@pytest.mark.slow
def test_the_real_misfiled_copy_is_the_one_left_out(
    runner: CliRunner, real_data: Path, tmp_path: Path
) -> None:
    # result-p2-1-256-e2.txt is byte-identical to result-p2-8-256-e2.txt and its log says 8 GPUs.
    fcn = "cloud-ML/seismic-fcn/experimental_results/2020-06-FCN-on-sagemaker"
    src = tmp_path / "src"
    (src / "logs").mkdir(parents=True)
    for name in ("result-p2-1-256-e2.txt", "result-p2-8-256-e2.txt", "result-p2-1-256-e1.txt"):
        (src / "logs" / name).symlink_to(real_data / fcn / "logs" / name)
    q = import_(runner, src, tmp_path / "out", "--follow-symlinks")  # links out of DIR: read on request
    [group] = q["duplicates"]
    assert group["kept"] == "logs/result-p2-8-256-e2.txt"
    rows = {(r["instance_type"], r["batch_size"]): r["runs"] for r in sweep_rows(tmp_path / "out")}
    assert rows == {("ml.p2.xlarge", "256"): "1", ("ml.p2.8xlarge", "256"): "1"}


# ---- item 3: billing records beside the logs ----------------------------------------------------------


def describe_training_job(name: str, itype: str, bs: int, billable: int, training: int) -> str:
    return json.dumps(
        {
            "TrainingJobName": name,
            "TrainingJobStatus": "Completed",
            "HyperParameters": {"batch-size": str(bs), "epochs": "3"},
            "ResourceConfig": {"InstanceType": itype, "InstanceCount": 1, "VolumeSizeInGB": 32},
            "EnableManagedSpotTraining": billable < training,
            "TrainingTimeInSeconds": training,
            "BillableTimeInSeconds": billable,
        }
    )


@pytest.mark.slow
def test_describe_training_job_dumps_beside_the_logs_give_the_billable_time(
    runner: CliRunner, cloudml_log: Callable[..., bytes], tmp_path: Path
) -> None:
    src, out = tmp_path / "src", tmp_path / "out"
    (src / "logs").mkdir(parents=True)
    (src / "sagemaker-logs").mkdir()
    (src / "logs" / "result-g4dnxlarge-1-512-e0.txt").write_bytes(cloudml_log(command=False))
    (src / "logs" / "result-g4dnxlarge-1-512-e1.txt").write_bytes(cloudml_log(command=False, step_s=0.02))
    (src / "logs" / "result-p3-1-256-e0.txt").write_bytes(cloudml_log(command=False, step_s=0.03))
    dumps = src / "sagemaker-logs"
    (dumps / "resnet50-g4dn-gpu1-b512-e0.json").write_text(
        describe_training_job("resnet50-g4dn-gpu1-b512-e0", "ml.g4dn.xlarge", 512, 150, 300)
    )
    (dumps / "resnet50-p3-gpu1-b1024-e0.json").write_text(  # no such log
        describe_training_job("resnet50-p3-gpu1-b1024-e0", "ml.p3.2xlarge", 1024, 200, 200)
    )
    (dumps / "notes.json").write_text('{"TrainingJobName": 3}')  # not a record
    q = import_(runner, src, out)

    billing = q["billing_records"]
    assert billing["found"] == 2
    assert billing["matched"] == [
        {
            "record": "sagemaker-logs/resnet50-g4dn-gpu1-b512-e0.json",
            "log": "logs/result-g4dnxlarge-1-512-e0.txt",
        }
    ]
    assert [u["path"] for u in billing["unmatched"]] == ["sagemaker-logs/resnet50-p3-gpu1-b1024-e0.json"]
    files = {f["path"]: f for f in q["files"]}
    assert files["logs/result-g4dnxlarge-1-512-e0.txt"]["billing_record"].endswith("b512-e0.json")
    assert files["logs/result-p3-1-256-e0.txt"]["billing_record"] is None

    def check(doc: dict) -> None:
        runs = {r["name"]: r for r in doc["runs"]}
        assert runs["result-g4dnxlarge-1-512-e0"]["billable_s"] == 150.0
        assert runs["result-g4dnxlarge-1-512-e0"]["billable_source"] == "DescribeTrainingJob"
        assert runs["result-g4dnxlarge-1-512-e0"]["spot_savings_share"] == pytest.approx(0.5)
        assert runs["result-g4dnxlarge-1-512-e1"]["billable_source"] == "model"
        rows = {(r["instance_type"], r["batch_size"]): r for r in doc["configurations"]}
        assert rows[("ml.g4dn.xlarge", 512)]["billable_source"] == "DescribeTrainingJob+model"
        assert rows[("ml.p3.2xlarge", 256)]["billable_source"] == "model"

    check(json.loads((out / "sweep.json").read_text()))
    # `trainsweep report` rebuilds the artefacts from disk and keeps the records (jobs.json).
    assert runner.invoke(app, ["report", str(out)]).exit_code == 0
    check(json.loads((out / "sweep.json").read_text()))


@pytest.mark.slow
def test_the_real_describe_training_job_dumps_are_matched_to_their_logs(
    runner: CliRunner, real_data: Path, tmp_path: Path
) -> None:
    q = import_(runner, real_data / "cloud-ML/resnet50-cifar", tmp_path / "out")
    exp = "experimental-results/2020-08-CIFAR-on-sagemaker"
    pairs = {m["log"]: m["record"] for m in q["billing_records"]["matched"]}
    assert pairs == {
        f"{exp}/logs/result-p3-1-{bs}-e0.txt": f"{exp}/sagemaker-logs/resnet50-p3-gpu1-b{bs}-e0.json"
        for bs in (256, 512, 1024, 2048)
    }
    runs = {r["name"]: r for r in json.loads((tmp_path / "out" / exp / "sweep.json").read_text())["runs"]}
    assert runs["result-p3-1-1024-e0"]["billable_s"] == 184.0  # BillableTimeInSeconds of the dump
    assert runs["result-p3-1-1024-e0"]["billable_source"] == "DescribeTrainingJob"
    assert runs["result-p3-1-1024-e2"]["billable_source"] == "model"


# ---- item 4: platforms ------------------------------------------------------------------------------


def test_an_ec2_run_has_ec2_prices_and_no_sagemaker_overhead(
    runner: CliRunner, cloudml_log: Callable[..., bytes], tmp_path: Path
) -> None:
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    (src / "result-p2-1-512-e0.txt").write_bytes(cloudml_log(command=False))
    (src / "result-p2-1-ec2-512-e0.txt").write_bytes(cloudml_log(command=False, step_s=0.02))
    import_(runner, src, out)

    rows = {r["platform"]: r for r in sweep_rows(out)}
    assert set(rows) == {"sagemaker", "ec2"}
    ec2, sm = rows["ec2"], rows["sagemaker"]
    assert (ec2["instance_type"], sm["instance_type"]) == ("ml.p2.xlarge", "ml.p2.xlarge")
    assert float(ec2["usd_per_hour"]) == 0.9 and float(sm["usd_per_hour"]) == 1.125
    assert float(ec2["billable_s"]) == pytest.approx(float(ec2["time_to_train_s"]), abs=1e-3)
    assert float(sm["billable_s"]) == pytest.approx(float(sm["time_to_train_s"]) + 133.4, abs=1e-3)
    record = json.loads((out / "runs/result-p2-1-ec2-512-e0.json").read_text())
    assert record["extra"]["trainsweep.platform"] == "ec2"
    assert "ml.p2.xlarge (EC2) with batch size 512" in (out / "report.html").read_text()


def test_the_real_ec2_experiment_is_priced_as_ec2(runner: CliRunner, real_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    import_(runner, real_data / "cloud-ML/resnet50-cifar/experimental-results/2020-07-CIFAR-on-ec2", out)
    [row] = sweep_rows(out)
    assert (row["instance_type"], row["platform"], row["usd_per_hour"]) == ("ml.p2.xlarge", "ec2", "0.9")
    assert float(row["billable_s"]) == pytest.approx(float(row["time_to_train_s"]), abs=1e-3)
