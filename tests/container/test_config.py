"""The job's configuration from its hyperparameters, and the log uploader (fast, in-process)."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from trainsweep import hyperparameters as hp
from trainsweep import spec
from trainsweep.sagemaker_contract import Paths
from trainsweep.training.config import JobConfig, JobConfigError, parse_config, read_hyperparameters
from trainsweep.training.upload import LogUploader, log_object_key


def paths(tmp_path: Path) -> Paths:
    return Paths(tmp_path)


def test_a_per_cell_job_has_one_cell_named_after_its_run_name(tmp_path):
    raw = {
        "workload": "mnist-cnn",
        "epochs": "3",
        "batch-size": "64",
        "synthetic": "true",
        "run-names": "a-p3-1-64-e1",
    }
    cfg = parse_config(raw, paths(tmp_path))
    assert [(c.run_name, c.batch_size) for c in cfg.cells] == [("a-p3-1-64-e1", 64)]
    assert (cfg.epochs, cfg.mode, cfg.packed) == (3, "full", False)
    assert JobConfig.from_json(cfg.to_json()) == cfg


def test_early_stop_settings_reach_the_rule(tmp_path):
    raw = {"workload": "mnist-cnn", "epochs": "3", "batch-size": "64", "synthetic": "true",
           "mode": "early-stop", "early-stop-precision": "0.01", "early-stop-max-steps": "500",
           "early-stop-max-seconds": "120"}  # fmt: skip
    rule = parse_config(raw, paths(tmp_path)).rule
    assert (rule.precision, rule.max_steps, rule.max_seconds) == (0.01, 500, 120.0)


def test_a_packed_job_pairs_batch_sizes_with_run_names(tmp_path):
    raw = {"workload": "resnet50-cifar10", "epochs": "2", "synthetic": "true", "batch-sizes": "256, 512",
           "run-names": "x-p3-1-256-e1,x-p3-1-512-e1"}  # fmt: skip
    cfg = parse_config(raw, paths(tmp_path))
    assert cfg.packed
    assert [(c.run_name, c.batch_size) for c in cfg.cells] == [("x-p3-1-256-e1", 256), ("x-p3-1-512-e1", 512)]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"epochs": "1", "batch-size": "8"}, "missing hyperparameter 'workload'"),
        ({"workload": "mnist-cnn", "epochs": "0", "batch-size": "8"}, "'epochs' must be >= 1"),
        ({"workload": "mnist-cnn", "epochs": "1", "batch-size": "8", "mode": "fast"}, "unknown mode 'fast'"),
        (
            {"workload": "mnist-cnn", "epochs": "1", "batch-size": "8", "early-stop-precision": "2"},
            "is a fraction",
        ),
        (
            {"workload": "mnist-cnn", "epochs": "1", "batch-sizes": "8,x", "run-names": "a,b"},
            "comma-separated",
        ),
        ({"workload": "mnist-cnn", "epochs": "1", "batch-size": "8", "synthetic": "maybe"}, "true or false"),
    ],
)
def test_bad_hyperparameters_are_refused_with_the_name_and_the_fix(tmp_path, raw, message):
    with pytest.raises(JobConfigError, match=message):
        parse_config({"synthetic": "true", **raw} if "synthetic" not in raw else raw, paths(tmp_path))


def test_without_a_channel_only_the_real_opt_ml_downloads(tmp_path):
    raw = {"workload": "mnist-cnn", "epochs": "1", "batch-size": "8"}
    with pytest.raises(JobConfigError, match="channel 'train' is missing"):
        parse_config(raw, paths(tmp_path))
    assert parse_config(raw, Paths(Path("/opt/ml"))).download is True
    assert parse_config({**raw, "download": "true"}, paths(tmp_path)).download is True


def test_hyperparameters_file_must_be_a_json_object(tmp_path):
    p = paths(tmp_path)
    p.hyperparameters.parent.mkdir(parents=True)
    p.hyperparameters.write_text("[1, 2]")
    with pytest.raises(JobConfigError, match="JSON object"):
        read_hyperparameters(p)
    p.hyperparameters.write_text('{"epochs": 3}')
    assert read_hyperparameters(p) == {"epochs": "3"}


@mock_aws
def test_the_uploader_sends_only_logs_that_changed(tmp_path):
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="logs-bucket")
    (tmp_path / "r1.log").write_text("one\n")
    up = LogUploader(
        bucket="logs-bucket", prefix="sweeps/s/logs/", logs_dir=tmp_path, client_factory=lambda: s3
    )
    assert up.flush() == 1
    assert up.flush() == 0
    with (tmp_path / "r1.log").open("a") as f:
        f.write("two\n")
    assert up.flush() == 1
    body = s3.get_object(Bucket="logs-bucket", Key=log_object_key("sweeps/s/logs/", "r1"))["Body"].read()
    assert body == b"one\ntwo\n"


@mock_aws
def test_an_uploaded_log_carries_its_whole_sha256_for_parse_run(tmp_path):
    """ParseRun reads a growing log's new bytes only and takes the run's hash from S3's checksum."""
    import base64
    import hashlib

    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="logs-bucket")
    (tmp_path / "r1.log").write_bytes(b"one\ntwo\n")
    LogUploader(bucket="logs-bucket", prefix="p/", logs_dir=tmp_path, client_factory=lambda: s3).flush()
    head = s3.head_object(Bucket="logs-bucket", Key=log_object_key("p/", "r1"), ChecksumMode="ENABLED")
    assert base64.b64decode(head["ChecksumSHA256"]) == hashlib.sha256(b"one\ntwo\n").digest()


@mock_aws
def test_an_upload_error_is_reported_and_retried_not_raised(tmp_path):
    s3 = boto3.client("s3", region_name="us-east-1")
    (tmp_path / "r1.log").write_text("one\n")
    up = LogUploader(bucket="missing-bucket", prefix="p/", logs_dir=tmp_path, client_factory=lambda: s3)
    assert up.flush() == 0
    assert up.errors and "missing-bucket" in up.errors[0]
    s3.create_bucket(Bucket="missing-bucket")
    assert up.flush() == 1


def test_without_a_bucket_nothing_is_uploaded(tmp_path):
    (tmp_path / "r1.log").write_text("one\n")

    def no_client():
        raise AssertionError("no client may be created without a bucket")

    assert LogUploader(bucket=None, prefix="p/", logs_dir=tmp_path, client_factory=no_client).flush() == 0


SETTABLE = sorted(
    name
    for name in [*hp.WHOLE_NUMBER_MINIMUM, *hp.POSITIVE_NUMBERS, *hp.FRACTIONS, *hp.SWITCHES]
    if name not in spec.MANAGED_HYPERPARAMETERS and not name.startswith(hp.RESERVED_PREFIX)
)
VALUES = ["0", "1", "2", "3", "12", " 4 ", '"5"', "-1", "+3", "2.5", "0.5", "1e-3", "inf", "nan", "x", "",
          "true", "no", "Yes"]  # fmt: skip


@pytest.mark.parametrize("name", SETTABLE)
def test_the_spec_refuses_exactly_the_values_the_container_refuses(tmp_path, name):
    base = {"workload": "mnist-cnn", "epochs": "1", "batch-size": "8", "synthetic": "true"}
    if name == hp.DOWNLOAD:  # read only when there is no data: no channel, not synthetic
        base = {"workload": "mnist-cnn", "epochs": "1", "batch-size": "8"}
    for value in VALUES:
        try:
            parse_config({**base, name: value}, paths(tmp_path))
        except JobConfigError as exc:
            container_ok = not str(exc).startswith(f"hyperparameter {name!r}")  # "no data" is not the value
        else:
            container_ok = True
        spec_ok = spec._value_problem(name, value) is None or value == ""  # "" = unset for the container
        assert spec_ok == container_ok, (name, value)
