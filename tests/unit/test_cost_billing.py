"""The billable-time model: the fixed per-job overhead is fitted from real SageMaker jobs."""

from __future__ import annotations

import json

import pytest

from trainsweep.cost import billing
from trainsweep.logs import parse

CIFAR = "cloud-ML/resnet50-cifar/experimental-results/2020-08-CIFAR-on-sagemaker"


def _pairs(real_data):
    """(BillableTimeInSeconds, in-log fit() seconds) of each DescribeTrainingJob dump and its log."""
    root = real_data / CIFAR
    pairs = []
    for dump in sorted((root / "sagemaker-logs").glob("*.json")):
        desc = json.loads(dump.read_text())
        bs = desc["HyperParameters"]["batch-size"]
        assert desc["ResourceConfig"]["InstanceType"] == "ml.p3.2xlarge"
        run = parse(root / "logs" / f"result-p3-1-{bs}-e0.txt")
        assert run.batch_size == int(bs)
        pairs.append((billing.describe_training_job_times(desc)["billable_s"], run.fit_s))
    return pairs


def test_the_shipped_overhead_is_the_median_gap_of_the_real_jobs(real_data):
    fit = billing.fit_overhead(_pairs(real_data))
    assert fit.jobs == 4
    assert abs(billing.FIXED_OVERHEAD_S - fit.overhead_s) < 0.05
    assert 125 < fit.min_s <= fit.max_s < 145


def test_the_log_explains_only_a_third_of_the_bill(real_data):
    fit = billing.fit_overhead(_pairs(real_data))
    assert 0.29 < fit.training_share_min <= fit.training_share_max < 0.40


def test_modelled_billable_time_adds_the_overhead():
    assert billing.modelled_billable_s(100.0) == pytest.approx(100.0 + billing.FIXED_OVERHEAD_S)
    assert billing.modelled_billable_s(100.0, overhead_s=20) == 120.0


def test_spot_savings_come_from_billable_below_training_time():
    t = billing.describe_training_job_times({"BillableTimeInSeconds": 30, "TrainingTimeInSeconds": 100})
    assert t["spot_savings_share"] == pytest.approx(0.7)
    on_demand = billing.describe_training_job_times(
        {"BillableTimeInSeconds": 211, "TrainingTimeInSeconds": 211}
    )
    assert on_demand["spot_savings_share"] == 0.0


def test_cost_of_seconds_at_an_hourly_price():
    assert billing.cost_usd(3600, 3.825, instance_count=2) == pytest.approx(7.65)


def test_fitting_needs_data():
    with pytest.raises(ValueError, match="at least one"):
        billing.fit_overhead([])
