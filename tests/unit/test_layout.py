"""The S3 layout: keys are built in one place and read back the same way."""

from __future__ import annotations

import pytest

from trainsweep import layout


def test_seed_log_name_gives_vmtype_batch_size_and_run():
    assert layout.parse_seed_log_name("result-p3-1-1024-e3.txt") == layout.CellName("p3-1", 1024, 3)


def test_seed_ec2_log_name_without_vmtype_gives_batch_size_and_run():
    assert layout.parse_seed_log_name("result-1-256-e5.out") == layout.CellName("1", 256, 5)


def test_a_name_that_is_not_a_seed_log_is_not_read():
    assert layout.parse_seed_log_name("e0.json") is None


@pytest.mark.parametrize(
    ("job", "cell"),
    [
        ("mysweep-20261122-170000-p3-1-512-e0", layout.CellName("p3-1", 512, 0)),
        ("q-local-cpu-64-e2", layout.CellName("local-cpu", 64, 2)),
        ("q-g4dn-1-packed-e1", layout.CellName("g4dn-1", None, 1)),
    ],
)
def test_job_names_round_trip_their_cell(job, cell):
    assert layout.parse_job_name(job) == cell


def test_sweep_keys_share_one_prefix():
    assert layout.log_key("s1", "job-p3-1-256-e0") == "sweeps/s1/logs/job-p3-1-256-e0.log"
    assert layout.results_key("s1", layout.execution_times_path("p3-1", 256, 0, "json")) == (
        "sweeps/s1/results/execution-times/p3-1/256/e0.json"
    )
    assert layout.spec_key("s1") == "sweeps/s1/spec.json"


def test_url_encoded_log_keys_are_decoded_when_classified():
    loc = layout.classify_log_key("sweeps/s1/logs/job%2Bx-p3-1-256-e0.log")
    assert loc == layout.LogLocation("s1", "job+x-p3-1-256-e0", False)


def test_import_keys_map_to_an_import_sweep():
    loc = layout.classify_log_key("imports/old/2020/result-p2-1-256-e0.txt")
    assert loc == layout.LogLocation("import-old", "result-p2-1-256-e0", True)


@pytest.mark.parametrize(
    "key",
    ["sweeps/s1/results/runs/x.json", "sweeps/s1/spec.json", "imports/", "other/x.log", "sweeps/s1/logs/"],
)
def test_output_and_unrelated_keys_are_not_logs(key):
    assert layout.classify_log_key(key) is None


def test_no_output_path_lies_under_a_trigger_prefix():
    outputs = [
        layout.results_key("s1", p)
        for p in (
            layout.execution_times_path("p3-1", 256, 0, "json"),
            layout.run_record_path("x"),
            layout.plot_path("heatmap"),
            layout.SWEEP_CSV,
            layout.REPORT_HTML,
        )
    ]
    outputs += [layout.spec_key("s1"), layout.jobs_key("s1"), layout.checkpoint_prefix("s1", "j") + "c.pt"]
    assert all(layout.classify_log_key(k) is None for k in outputs)
