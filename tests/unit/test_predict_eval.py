"""``trainsweep predict-eval``: the early-stop rule replayed on the shared real logs, through the CLI."""

from __future__ import annotations

import json
import random

import pytest
from typer.testing import CliRunner

from trainsweep.cli import app
from trainsweep.predict import replay, summarize

FIELDS = {
    "log", "predicted_epoch_s", "predicted_epoch_low_s", "predicted_epoch_high_s", "actual_epoch_s",
    "predicted_total_s", "actual_total_s", "steps_used", "steps_total", "baseline_predicted_epoch_s",
    "baseline_predicted_total_s",
}  # fmt: skip


@pytest.fixture(scope="module")
def replayed(real_data):
    result = CliRunner().invoke(app, ["predict-eval", str(real_data), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["logs"]


def test_every_log_gets_an_object_with_the_documented_fields(replayed):
    assert len(replayed) >= 130
    for obj in replayed:
        assert obj.keys() >= FIELDS


def test_the_rule_watches_at_most_two_epochs_and_reports_what_it_used(replayed):
    for obj in replayed:
        assert obj["epochs_watched"] <= 2
        assert obj["steps_used"] <= obj["steps_total"]


def test_tf_keras_logs_take_the_second_epoch_as_the_steady_one(replayed):
    keras = [o for o in replayed if "seismic-fcn" in o["log"] or "cnn-mnist" in o["log"]]
    scored = [o for o in keras if o["actual_epoch_s"] is not None]
    # the steady epoch is the second one the log shows (a log that begins mid-run keeps its numbers)
    assert scored and all(o["epochs_watched"] == 2 and o["steady_epoch"] >= 2 for o in scored)


def test_the_predictions_reach_the_noise_floor_of_these_runs(real_data):
    from trainsweep.cli.predict import collect_logs
    from trainsweep.logs import parse

    results = []
    for f in collect_logs([real_data]):
        r = replay(parse(f))
        r.log = str(f)
        results.append(r)
    agg = summarize(results, {r.log: str(r.log).rsplit("/", 2)[0] for r in results})
    assert agg["logs_scored"] >= 120
    assert agg["median_abs_error"] <= 0.005
    assert agg["p95_abs_error"] <= 0.035
    assert agg["interval_coverage"] >= 0.85
    assert agg["median_abs_error"] < agg["baseline_median_abs_error"]
    assert agg["grids"] >= 5 and agg["grids_same_order"] == agg["grids"]


def test_replay_estimates_the_step_time_from_every_step_watched_as_the_live_rule_does(tmp_path):
    """predict-eval scores the rule the container runs: the worker's SteadyState is fed every step and
    told of every epoch boundary, and predicts from all the steady steps it has; replay must not use the
    last watched epoch's steps alone."""
    from trainsweep.predict import SteadyState, steady_estimate

    rng = random.Random(7)
    epochs = [[round(rng.gauss(0.1, 0.003), 6) for _ in range(50)] for _ in range(5)]
    epochs[0][0] = 3.0
    lines = ["Initialization time 0.5"]
    for k, st in enumerate(epochs, 1):
        lines.append(f"Epoch {k}/5")
        lines += [f"{i} step training time: {s:.6f}s" for i, s in enumerate(st, 1)]
        lines += ["Validation time: 0.200000s", f"Epoch time: {sum(st) + 0.21:.6f}s"]
    log = tmp_path / "cnn-mnist" / "logs" / "result-p3-1-256-e1.txt"
    log.parent.mkdir(parents=True)
    log.write_text("\n".join(lines) + "\n")

    result = CliRunner().invoke(app, ["predict-eval", str(log), "--json"])
    assert result.exit_code == 0, result.output
    (obj,) = json.loads(result.output)["logs"]
    assert obj["epochs_watched"] == 2 and obj["steady_epoch"] == 2

    live = SteadyState()  # what the worker does with the same steps
    for st in epochs[:2]:
        for s in st:
            live.add(s)
        live.epoch_boundary()
    est = live.estimate()
    assert est is not None
    inner = epochs[1][1:-1]
    epoch2_s = float(f"{sum(epochs[1]) + 0.21:.6f}")
    assert obj["predicted_epoch_s"] == pytest.approx(len(inner) * est.mean_s + epoch2_s - sum(inner))
    # epoch 2's steps alone give another answer: the check above tells the two apart
    alone = steady_estimate(inner)
    assert alone is not None and abs(alone.mean_s / est.mean_s - 1) > 1e-4  # pytest.approx: 1e-6


def test_the_table_ends_with_the_aggregate_line(real_data):
    folder = real_data / "cloud-ML" / "cnn-mnist" / "experimental-results" / "2020-07-MNIST-on-sagemaker"
    result = CliRunner().invoke(app, ["predict-eval", str(folder)])
    assert result.exit_code == 0, result.output
    assert "seeds' estimator" in result.output
    assert "logs have unwatched epochs" in result.output


def test_a_missing_path_is_a_clear_error(tmp_path):
    result = CliRunner().invoke(app, ["predict-eval", str(tmp_path / "nope.txt")])
    assert result.exit_code == 1
    assert "does not exist" in result.output


def test_an_empty_folder_says_no_logs_were_found(tmp_path):
    result = CliRunner().invoke(app, ["predict-eval", str(tmp_path)])
    assert result.exit_code == 1
    assert "no logs found" in result.output
