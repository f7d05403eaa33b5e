"""The early-stop rule and the full-run predictor (trainsweep.predict)."""

from __future__ import annotations

import random
from array import array

import pytest

from trainsweep.logs.model import Epoch, RunTimings
from trainsweep.predict import (
    Prediction,
    SteadyState,
    StopRule,
    baseline_step_s,
    mser_truncation,
    predict_run,
    replay,
    steady_estimate,
    t_quantile,
)


def noisy(n: int, mean: float, rel_sd: float, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    return [max(1e-6, rng.gauss(mean, mean * rel_sd)) for _ in range(n)]


def test_t_quantile_matches_tables():
    assert t_quantile(0.975, 9) == pytest.approx(2.262, abs=2e-3)
    assert t_quantile(0.975, 30) == pytest.approx(2.042, abs=2e-3)
    assert t_quantile(0.95, 4) == pytest.approx(2.132, abs=1e-2)


def test_mser_finds_a_warmup_transient():
    x = [5.0, 3.0, 2.0, 1.5, *noisy(200, 1.0, 0.02)]
    d = mser_truncation(x)
    assert 3 <= d <= 6


def test_mser_keeps_a_stationary_series_whole():
    assert mser_truncation(noisy(200, 1.0, 0.02)) <= 5


def test_steady_estimate_drops_outliers_and_reports_warmup_excess():
    x = [10.0, *noisy(100, 0.5, 0.01), 50.0, *noisy(100, 0.5, 0.01, seed=2)]
    est = steady_estimate(x)
    assert est is not None
    assert est.mean_s == pytest.approx(0.5, rel=0.01)
    assert est.outliers >= 1
    assert est.warmup >= 1
    assert est.warmup_excess_s == pytest.approx(9.5, rel=0.05)


def test_steady_estimate_needs_two_values():
    assert steady_estimate([1.0]) is None


def test_rule_stops_on_precision_after_enough_steady_steps():
    rule = StopRule(precision=0.02, min_steady_steps=30, max_steps=None, max_seconds=None)
    st = SteadyState(rule)
    for i, v in enumerate([3.0, *noisy(1000, 0.1, 0.05)]):  # noqa: B007 (i is read after the loop)
        st.add(v)
        if st.stop_reason():
            break
    assert st.stop_reason() == "precision"
    assert 30 <= i < 200
    est = st.estimate()
    assert est is not None and est.half_width_rel <= 0.02


def test_a_precise_window_shorter_than_min_seconds_does_not_stop_the_run():
    # 0.1 s steps known to +-0.5 % after a few dozen steps: the rule still watches 5 s before trusting them
    rule = StopRule(precision=0.02, min_steady_steps=10, min_seconds=5.0, max_steps=None, max_seconds=None)
    st = SteadyState(rule)
    for v in [3.0, *noisy(1000, 0.1, 0.01)]:
        st.add(v)
        if st.stop_reason():
            break
    assert st.stop_reason() == "precision"
    assert 5.0 <= st.seconds < 5.0 + 0.2 + 3.0  # stopped at the first check after 5 s


def test_rule_keeps_going_while_steps_are_too_noisy_then_hits_the_step_cap():
    rule = StopRule(precision=0.001, max_steps=150, max_seconds=None)
    st = SteadyState(rule)
    for v in noisy(1000, 0.1, 0.3):
        st.add(v)
        if st.stop_reason():
            break
    assert st.stop_reason() == "max_steps"
    assert st.steps == 150


def test_rule_stops_at_the_seconds_cap():
    st = SteadyState(StopRule(precision=0.0001, max_steps=None, max_seconds=5.0))
    for v in noisy(1000, 0.1, 0.3):
        st.add(v)
        if st.stop_reason():
            break
    assert st.stop_reason() == "max_seconds"
    assert st.seconds >= 5.0


def test_rule_stops_at_the_epoch_cap_on_the_last_step_of_the_last_epoch_watched():
    st = SteadyState(StopRule(precision=0.0001, max_steps=None, max_seconds=None), steps_per_epoch=40)
    for i, v in enumerate(noisy(1000, 0.1, 0.3), start=1):
        st.add(v)
        if i % 40 == 0:
            st.epoch_boundary()
        if st.stop_reason():
            break
    assert (st.stop_reason(), st.steps) == ("max_epochs", 80)  # 2 epochs by default, not a step more


def test_without_the_epoch_length_the_epoch_cap_counts_epoch_boundaries():
    st = SteadyState(StopRule(precision=0.0001, max_epochs=1.0, max_steps=None, max_seconds=None))
    for v in noisy(30, 0.1, 0.3):
        st.add(v)
    assert st.stop_reason() is None
    st.epoch_boundary()
    assert st.stop_reason() == "max_epochs"


def test_no_epoch_cap_when_max_epochs_is_none():
    st = SteadyState(StopRule(precision=0.0001, max_epochs=None, max_steps=None, max_seconds=None))
    st.steps_per_epoch = 10
    for v in noisy(100, 0.1, 0.3):
        st.add(v)
    assert st.stop_reason() is None


def test_epoch_boundary_steps_are_not_steady():
    st = SteadyState(StopRule())
    for v in [9.0, 1.0, 1.0, 1.0, 4.0]:
        st.add(v)
    st.epoch_boundary()
    st.add(3.0)
    st.add(1.0)
    assert st.values == [1.0, 1.0, 1.0, 1.0]
    assert sorted(st.excluded) == [3.0, 4.0, 9.0]


def test_prediction_adds_validation_and_brackets_the_point_estimate():
    step = steady_estimate(noisy(300, 0.2, 0.02))
    val = steady_estimate([1.0, *noisy(20, 0.05, 0.02)])
    assert step is not None and val is not None
    p = predict_run(step, steps_per_epoch=100, epochs=10, validation=val, validation_batches_per_epoch=20)
    assert isinstance(p, Prediction)
    assert p.train_epoch_s == pytest.approx(100 * step.mean_s)
    assert p.validation_s == pytest.approx(20 * val.mean_s)
    assert p.epoch_s == pytest.approx(p.train_epoch_s + p.validation_s)
    assert p.epoch_low_s < p.epoch_s < p.epoch_high_s
    assert p.total_s == pytest.approx(p.warmup_excess_s + 10 * p.epoch_s)
    assert p.to_dict()["version"] == 1


def keras_like_run(epochs: int = 5, steps: int = 60, seed: int = 3) -> RunTimings:
    """Epoch 1 carries one-off costs in its first step and its validation; later epochs are steady."""
    rng = random.Random(seed)
    run = RunTimings(name="result-p3-1-256-e1")
    for k in range(1, epochs + 1):
        st = [max(1e-4, rng.gauss(0.1, 0.002)) for _ in range(steps)]
        if k == 1:
            st[0] = 5.0
        st[-1] += 0.02  # hand-off to validation
        val = 0.8 if k == 1 else 0.3
        run.epochs.append(
            Epoch(index=k, step_s=array("d", st), validation_s=val, epoch_s=sum(st) + val + 0.01)
        )
    return run


def test_replay_takes_the_second_epoch_as_steady_when_the_first_has_one_off_costs():
    run = keras_like_run()
    res = replay(run)
    assert res.steady_epoch == 2
    assert res.epochs_watched == 2
    assert res.steps_used == 120
    assert res.actual_epoch_s == pytest.approx(sum(e.epoch_s for e in run.epochs[2:]) / 3)
    assert res.error is not None and abs(res.error) < 0.01
    assert res.covered is True
    assert res.share_of_90_epochs_watched == pytest.approx(120 / (90 * 60))


def test_replay_reports_the_seed_estimator_beside_the_rule():
    run = keras_like_run()
    res = replay(run)
    flat = run.flat_steps()
    assert baseline_step_s(run) == pytest.approx(sum(flat[1:11]) / 10)
    assert res.baseline_predicted_epoch_s == pytest.approx(sum(flat[1:11]) / 10 * 60)
    assert res.baseline_predicted_total_s == pytest.approx(sum(flat[1:11]) / 10 * 300)


def test_replay_of_a_log_without_epochs_says_so():
    res = replay(RunTimings(name="empty"))
    assert res.predicted_epoch_s is None
    assert res.notes


def test_replay_of_a_two_epoch_log_has_no_unwatched_epochs():
    res = replay(keras_like_run(epochs=2))
    assert res.predicted_epoch_s is not None
    assert res.actual_epoch_s is None
    assert res.error is None


def test_bad_rule_parameters_are_rejected():
    with pytest.raises(ValueError):
        StopRule(precision=0)
    with pytest.raises(ValueError):
        StopRule(min_steady_steps=1)
    with pytest.raises(ValueError, match="max_epochs"):
        StopRule(max_epochs=0)
    with pytest.raises(ValueError, match="min_seconds"):
        StopRule(min_seconds=-1)
