"""The early-stop interval per instance class: what a class widens, and the fallback for one not seen."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainsweep.class_calibration import ClassCalibration, held_out_scores, prediction_bound, unseen_factor
from trainsweep.cli import app
from trainsweep.cli.predict import replay_logs
from trainsweep.instance_class import class_of, instance_class, kind, known_classes
from trainsweep.logs import parse
from trainsweep.logs.model import RunHeader, RunTimings
from trainsweep.predict import (
    Calibration,
    JitterCalibration,
    StopRule,
    calibrate,
    cross_validate,
    fit_calibration,
    load_calibration,
    predict_run,
    replay,
    run_noise,
    steady_estimate,
)

ROOT = Path(__file__).resolve().parents[2]
CONTAINER_LOGS = ROOT / "benchmarks" / "data" / "container-logs"
H200_LOGS = ROOT / "benchmarks" / "data" / "container-logs-gpu-h200"
FCN = "cloud-ML/seismic-fcn"


@pytest.mark.parametrize(
    ("vmtype", "expected"),
    [("p2-1", "kepler-single"), ("p2-16", "kepler-multi"), ("p3-1", "volta-single"), ("p3-8", "volta-multi")],
)
def test_a_seed_logs_class_comes_from_its_instance_type(real_data, vmtype, expected):
    log = next((real_data / FCN).rglob(f"result-{vmtype}-256-e1.txt"))
    assert instance_class(parse(log)) == expected


def test_the_containers_cpu_log_is_of_the_cpu_class():
    assert instance_class(parse(next(CONTAINER_LOGS.rglob("*.log")))) == "cpu"


def test_a_local_gpu_log_that_names_its_gpu_is_of_that_gpus_class():
    log = next(H200_LOGS.rglob("mnist-cnn-gpu-a-64.log"))  # local_gpu: no instance type, "NVIDIA H200"
    result = CliRunner().invoke(app, ["predict-eval", str(log), "--json"])
    assert result.exit_code == 0, result.output
    (out,) = json.loads(result.output)["logs"]
    assert (out["family"], out["instance_class"]) == ("container-gpu", "hopper-single")


@pytest.mark.parametrize(
    ("gpus", "device", "expected"),
    [
        (1, "NVIDIA A100-SXM4-80GB", "ampere-single"),
        (4, "NVIDIA L4", "ada-multi"),
        (1, "NVIDIA H100 PCIe", "gpu-single"),  # a part the catalogue does not list: generation unknown
        (1, None, "gpu-single"),
        (0, "cpu", "cpu"),
    ],
)
def test_a_header_without_instance_type_takes_the_generation_of_the_gpu_it_names(gpus, device, expected):
    extra = {} if device is None else {"submission_platform": device}
    run = RunTimings(name="run", dialect="mllog", header=RunHeader(gpus=gpus), extra=extra)
    assert instance_class(run) == expected


def test_classes_name_generation_and_gpu_count():
    assert class_of(0) == "cpu"
    assert class_of(8, (9, 0)) == "hopper-multi"
    assert class_of(1, None) == "gpu-single"  # a GPU whose model is not known
    assert {"cpu", "volta-single", "volta-multi", "ampere-multi", "ada-single"} <= set(known_classes())


def _step():
    est = steady_estimate([0.1, 0.1001, 0.0999, 0.1, 0.1002, 0.0998] * 5)
    assert est is not None
    return est


TABLE = Calibration(
    pooled=JitterCalibration(4.0, 100, 10, 100, 0.90, 0.004),
    families={"fam": JitterCalibration(2.0, 40, 4, 40, 0.91, 0.003)},
    classes={
        "volta-multi": ClassCalibration(1.5, 24, 1),
        "volta-single": ClassCalibration(0.7, 60, 3),
        "kepler-single": ClassCalibration(None, 3, 1),
    },
    unseen_class_factor={"gpu": 2.0, "cpu": 3.0},
)


@pytest.mark.parametrize(
    ("cls", "multiple", "source", "note"),
    [
        ("volta-multi", 3.0, "class", None),
        ("volta-single", 2.0, "class", None),  # a class never narrows its family's jitter
        ("kepler-single", 4.0, "unseen-class", "too few calibration logs (3)"),
        ("hopper-single", 4.0, "unseen-class", "no calibration logs of instance class 'hopper-single'"),
        ("cpu", 6.0, "unseen-class", "no calibration logs of instance class 'cpu'"),
        (None, 6.0, "unknown-class", "instance class unknown"),
    ],
)
def test_the_prediction_says_how_its_class_scaled_the_interval(cls, multiple, source, note):
    step = _step()
    pred = predict_run(
        step, steps_per_epoch=100, epochs=10, family="fam", calibration=TABLE, instance_class=cls
    )
    assert (pred.epoch_jitter, pred.calibration, pred.class_calibration) == (
        pytest.approx(multiple * run_noise(step.se_s / step.mean_s)),
        "family",
        source,
    )
    assert pred.instance_class == cls
    assert (note is None) == (not any("class" in n for n in pred.notes)), pred.notes
    if note is not None:
        assert any(note in n and "widened" in n for n in pred.notes), pred.notes


def test_a_run_on_the_pooled_multiple_takes_the_fallback_fitted_over_it():
    both = replace(TABLE, unseen_pooled_factor={"gpu": 2.5, "cpu": 3.5})
    step = _step()
    noise = run_noise(step.se_s / step.mean_s)
    for table, multiple in ((both, 4.0 * 2.5), (TABLE, 4.0 * 2.0)):  # a table without it: the other one
        script = predict_run(step, steps_per_epoch=100, epochs=10, family=None, calibration=table,
                             instance_class="hopper-single")  # fmt: skip
        assert (script.calibration, script.class_calibration) == ("pooled", "unseen-class")
        assert script.epoch_jitter == pytest.approx(multiple * noise)
    # a run of a known family keeps the fallback fitted over the family multiples
    own = predict_run(step, steps_per_epoch=100, epochs=10, family="fam", calibration=both,
                      instance_class="hopper-single")  # fmt: skip
    assert own.epoch_jitter == pytest.approx(2.0 * 2.0 * noise)


def test_the_fallback_over_the_pooled_multiple_is_fitted_on_held_out_classes_scored_against_it(real_data):
    results, _, experiment = replay_logs([real_data / FCN, CONTAINER_LOGS], StopRule(epoch_jitter=0.01))
    cal = fit_calibration(results, experiment)
    scored = [r for r in results if r.error is not None and r.stat_rel is not None]
    seen = [c for c, cc in cal.classes.items() if cc.factor is not None]
    held = held_out_scores(scored, experiment, seen, 0.90, over_pooled=True)
    assert cal.unseen_pooled_factor["gpu"] == pytest.approx(unseen_factor(held, "gpu", 0.90))
    # against the family multiples instead, the FCN logs' scores differ (FCN's multiple is not the pool's)
    by_family = held_out_scores(scored, experiment, seen, 0.90)
    assert held["volta-multi"] != pytest.approx(by_family["volta-multi"])


def test_a_table_without_classes_scales_nothing():
    plain = Calibration(pooled=TABLE.pooled, families=TABLE.families)
    step = _step()
    pred = predict_run(step, steps_per_epoch=100, epochs=10, family="fam", calibration=plain)
    assert (pred.epoch_jitter, pred.class_calibration) == (
        pytest.approx(2.0 * run_noise(step.se_s / step.mean_s)),
        None,
    )


def test_calibration_fits_a_factor_per_class_and_a_fallback_per_kind(real_data):
    results, _, experiment = replay_logs([real_data / FCN], StopRule(epoch_jitter=0.01))
    cal, _ = calibrate(results, experiment)
    assert set(cal.classes) == {"kepler-single", "kepler-multi", "volta-single", "volta-multi"}
    # the FCN runs on one V100 move between epochs by more times their steps' noise than the others
    factor = {c: cal.classes[c].factor or 0 for c in cal.classes}
    assert factor["volta-single"] > 2 > 1.5 > max(f for c, f in factor.items() if c != "volta-single")
    # the GPU classes held out in turn each needed about the family's multiple: no widening for a new
    # GPU class; the CPU, of which there is no log, takes the bound over the GPU classes' factors
    assert cal.unseen_class_factor["gpu"] == 1.0 < 2 < cal.unseen_class_factor["cpu"]
    again = Calibration.from_dict(json.loads(json.dumps(cal.to_dict())))
    assert again.classes == cal.classes and again.unseen_class_factor == cal.unseen_class_factor


def test_a_log_of_a_class_the_calibration_lacks_gets_its_kinds_fallback(real_data):
    results, _, experiment = replay_logs([real_data / FCN, H200_LOGS], StopRule(epoch_jitter=0.01))
    without = [r for r in results if r.instance_class != "volta-multi"]
    cal, _ = calibrate(without, experiment)
    log = next((real_data / FCN).rglob("result-p3-8-256-e1.txt"))
    seen = replay(parse(log), calibration=cal, instance_class="volta-single")
    unseen = replay(parse(log), calibration=cal)
    cpu = replay(parse(log), calibration=cal, instance_class="cpu")
    assert unseen.instance_class == "volta-multi" and unseen.class_calibration == "unseen-class"
    assert seen.class_calibration == "class" and cpu.class_calibration == "unseen-class"
    assert unseen.stat_rel is not None
    base = cal.families["fcn"].noise_multiple * run_noise(unseen.stat_rel)
    factor = cal.classes["volta-single"].factor
    assert factor is not None and factor > 2
    assert seen.epoch_jitter == pytest.approx(base * factor)
    assert unseen.epoch_jitter == pytest.approx(base * cal.unseen_class_factor["gpu"])
    assert cpu.epoch_jitter == pytest.approx(base * cal.unseen_class_factor["cpu"])
    assert any("'volta-multi'" in n for n in unseen.interval_notes)


def test_predict_eval_json_prints_four_cross_validations_per_family_and_class(real_data):
    result = CliRunner().invoke(app, ["predict-eval", str(real_data / FCN), str(CONTAINER_LOGS), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)["summary"]
    assert {"volta-multi", "cpu", "pooled"} <= summary["classes"].keys()
    cv = summary["cross_validation"]
    assert set(cv) == {
        "leave_one_experiment_out",
        "leave_one_family_out",
        "leave_one_class_out",
        "leave_one_class_out_family_unknown",
    }
    for name, held in cv.items():
        assert {"fcn", "container-cpu", "pooled"} <= held["families"].keys(), name
        assert {"volta-multi", "kepler-single", "cpu", "pooled"} <= held["classes"].keys(), name
        assert held["classes"]["pooled"]["logs_scored"] == summary["logs_scored"]
    # held out, the CPU class is calibrated on GPU logs alone: its figures differ from the shipped ones
    lofo = cv["leave_one_family_out"]["families"]["container-cpu"]["interval_coverage"]
    assert lofo != summary["families"]["container-cpu"]["interval_coverage"]


def test_predict_eval_text_names_each_instance_class(real_data):
    result = CliRunner().invoke(app, ["predict-eval", str(real_data / FCN)])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "Per instance class: kepler-single 12/12 logs scored" in text and "volta-multi 24/24" in text


def _bound(factors: list[float], t: float, offset: float = 0.0) -> float:
    logs = [math.log(f) for f in factors]
    mean = sum(logs) / len(logs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
    return math.exp(mean + t * sd * math.sqrt(1 + 1 / len(logs) + offset))


def test_the_unseen_class_factor_covers_the_interval_of_the_kinds_held_out_logs_classes_alike():
    # ten logs of a quiet class, two of a noisy one: each class weighs half, whatever its count
    held = {"volta-single": [0.1 * i for i in range(1, 11)], "volta-multi": [2.0, 3.0], "cpu": [9.0] * 5}
    # 90 % of the weight: all of the quiet class (0.5) and 0.4 of the noisy one's half -> its second log
    assert unseen_factor(held, "gpu", 0.90) == 3.0
    # at 70 %: the quiet half and 0.2 of the other half -> its first log; the CPU class left aside
    assert unseen_factor(held, "gpu", 0.70) == 2.0
    # counted per log instead, the ten quiet logs would have set it at 1.0 (10 of 12 is 83 %)
    assert unseen_factor({"volta-single": [0.5] * 10}, "gpu", 0.90) == 1.0  # never below 1


def test_a_kind_without_classes_takes_a_prediction_bound_over_every_kinds_class_factors():
    nine = [i / 9 for i in range(1, 10)]  # split-conformal over nine logs: the largest, 1.0
    held = {
        "kepler-single": [0.5 * x for x in nine],
        "volta-single": nine,
        "volta-multi": [2 * x for x in nine],
    }
    t2 = 1.8856  # Student's t, 90 %, 2 degrees of freedom
    expected = _bound([0.5, 1.0, 2.0], t2, offset=1.0)
    assert unseen_factor(held, "cpu", 0.90) == pytest.approx(expected, rel=1e-4)
    assert unseen_factor(held, "cpu", 0.90) > 2.0  # wider than every class seen: its kind is not known


@pytest.mark.parametrize(
    ("factors", "offset", "expected"),
    [
        ([], 0.0, None),
        ([0.5], 0.0, 1.0),  # never narrower than the family's jitter
        ([0.5, 2.0], 1.0, 2.0),  # too few classes for a spread: the widest
        ([0.5, 1.0, 2.0], 0.0, _bound([0.5, 1.0, 2.0], 1.8856)),
    ],
)
def test_the_prediction_bound_over_class_factors(factors, offset, expected):
    bound = prediction_bound(factors, 0.90, offset)
    assert bound == (pytest.approx(expected, rel=1e-4) if expected is not None else None)


def test_leaving_a_class_out_calibrates_its_logs_without_any_log_of_it(real_data):
    results, _, experiment = replay_logs([real_data / FCN, CONTAINER_LOGS], StopRule(epoch_jitter=0.01))
    held = {r.log: r.instance_class or "unknown" for r in results}
    cv = cross_validate(results, held)
    everything = fit_calibration(results, experiment).unseen_class_factor
    for cls in ("volta-multi", "cpu"):
        rest = fit_calibration([r for r in results if r.instance_class != cls], experiment)
        fallback = rest.unseen_class_factor[kind(cls)]
        if cls == "cpu":  # the only CPU class held out: its kind takes the bound over the GPU classes'
            assert fallback > 2 * everything["cpu"]
        mine = [c for c in cv if c.instance_class == cls and c.predicted_epoch_s is not None]
        assert mine and {c.class_calibration for c in mine} == {"unseen-class"}
        for c in mine:  # the family's jitter (or the pooled one) fitted without the class, times that
            family = rest.families.get(c.family or "")
            base = family.noise_multiple if family and family.noise_multiple else rest.pooled.noise_multiple
            assert c.epoch_jitter == pytest.approx(base * fallback * run_noise(c.stat_rel)), (cls, c.log)


def test_a_class_held_out_as_a_scripts_runs_takes_the_pooled_multiple_and_keeps_its_family(real_data):
    results, _, experiment = replay_logs([real_data / FCN, CONTAINER_LOGS], StopRule(epoch_jitter=0.01))
    held = {r.log: r.instance_class or "unknown" for r in results}
    as_script = cross_validate(results, held, family_unknown=True)
    rest = fit_calibration([r for r in results if r.instance_class != "volta-multi"], experiment)
    mine = [c for c in as_script if c.instance_class == "volta-multi" and c.predicted_epoch_s is not None]
    assert mine and {c.family for c in mine} == {"fcn"}  # summarised under the family they are of
    assert {c.calibration for c in mine} == {"pooled"} and {c.class_calibration for c in mine} == {
        "unseen-class"
    }
    for c in mine:
        expected = rest.pooled.noise_multiple * rest.unseen_pooled_factor["gpu"] * run_noise(c.stat_rel)
        assert c.epoch_jitter == pytest.approx(expected)
    # the same logs held out with their family known take the family's multiple instead
    known = {c.log: c for c in cross_validate(results, held)}
    assert any(known[c.log].epoch_jitter != pytest.approx(c.epoch_jitter) for c in mine)
    assert all(r.family == "fcn" for r in results if r.instance_class == "volta-multi")  # inputs untouched


def test_predict_eval_covers_held_out_classes_at_the_intervals_level(real_data):
    result = CliRunner().invoke(
        app, ["predict-eval", str(real_data), str(CONTAINER_LOGS), str(H200_LOGS), "--json"]
    )
    assert result.exit_code == 0, result.output
    loco = json.loads(result.output)["summary"]["cross_validation"]["leave_one_class_out"]["classes"]
    # each class held out, its logs calibrated without any log of it: 90 % of them covered pooled, where
    # a jitter not scaled by each run's noise covered 93.6 % at a median half-width of 7 %
    assert 0.85 <= loco["pooled"]["interval_coverage"] <= 0.95
    assert loco["pooled"]["median_interval_half_width"] < 0.03
    # the H200 runs, noisier than any class seen, are covered from their own steps' noise (13 of 15,
    # where the jitter before covered 9); the two classes of one log each (a g4dn log and one of unknown
    # class) are missed
    scored = {c: f for c, f in loco.items() if f["logs_scored"] and c != "pooled"}
    short = {c for c, f in scored.items() if f["interval_coverage"] < 0.85}
    assert short == {"turing-single", "unknown"}
    assert loco["hopper-single"]["interval_coverage"] == pytest.approx(13 / 15)
    assert all(scored[c]["logs_scored"] == 1 for c in short)


def test_predict_eval_widens_the_interval_of_a_class_the_shipped_table_has_not_seen(real_data):
    log = next(real_data.rglob("result-g4dn-1-2048-e1.txt"))  # a T4: too few calibration logs of its class
    result = CliRunner().invoke(app, ["predict-eval", str(log), "--json"])
    assert result.exit_code == 0, result.output
    (out,) = json.loads(result.output)["logs"]
    shipped = load_calibration()
    factor = shipped.unseen_class_factor["gpu"]
    assert (out["instance_class"], out["class_calibration"]) == ("turing-single", "unseen-class")
    own_noise = run_noise(out["stat_rel"])
    assert out["epoch_jitter"] == pytest.approx(shipped.families["mnist"].noise_multiple * factor * own_noise)
    assert any(f"widened {factor:.2f}x" in n for n in out["interval_notes"]), out["interval_notes"]


def test_a_run_on_the_pooled_multiple_takes_its_class_factor_fitted_over_the_pooled_multiple():
    table = Calibration(
        pooled=TABLE.pooled,
        families=TABLE.families,
        classes={"cpu": ClassCalibration(1.0, 30, 1, pooled_factor=2.5)},
        unseen_class_factor=TABLE.unseen_class_factor,
    )
    step = _step()
    noise = run_noise(step.se_s / step.mean_s)
    kwargs = {"steps_per_epoch": 100, "epochs": 10, "calibration": table, "instance_class": "cpu"}
    known = predict_run(step, family="fam", **kwargs)
    unknown = predict_run(step, family=None, **kwargs)  # an instrumented script: the pooled multiple
    assert (known.calibration, known.class_calibration) == ("family", "class")
    assert known.epoch_jitter == pytest.approx(2.0 * 1.0 * noise)
    assert (unknown.calibration, unknown.class_calibration) == ("pooled", "class")
    assert unknown.epoch_jitter == pytest.approx(4.0 * 2.5 * noise)


def test_the_cpu_class_needs_more_than_the_pooled_multiple(real_data):
    results, _, experiment = replay_logs([real_data / FCN, CONTAINER_LOGS], StopRule(epoch_jitter=0.01))
    cal = fit_calibration(results, experiment)
    cpu = cal.classes["cpu"]
    # over its own family's multiple the CPU class needs nothing more; over the pooled one, which the FCN's
    # GPU runs set, it needs more: an instrumented script on a CPU (family unknown) is widened by that
    assert cpu.factor is not None and cpu.pooled_factor is not None
    assert cpu.factor <= 1.0 < 1.5 < cpu.pooled_factor


def test_an_instrumented_scripts_logs_take_the_pooled_multiple_and_the_cpus_factor_over_it():
    # the corpus's word_language_model swept through `trainsweep run --local` (benchmarks/data): its
    # family is unknown to the calibration, its class is this CPU's
    folders = [ROOT / "benchmarks" / "data" / f"script-logs-cpu-heldout{s}" for s in ("", "-2", "-3")]
    result = CliRunner().invoke(app, ["predict-eval", *map(str, folders), "--json"])
    assert result.exit_code == 0, result.output
    logs = [r for r in json.loads(result.output)["logs"] if r["predicted_epoch_s"] is not None]
    assert len(logs) >= 11
    table = load_calibration()
    factor = table.classes["cpu"].pooled_factor
    assert factor is not None
    for r in logs:
        assert (r["family"], r["instance_class"], r["calibration"], r["class_calibration"]) == (
            None,
            "cpu",
            "pooled",
            "class",
        )
        noise = run_noise(r["stat_rel"])
        assert r["epoch_jitter"] == pytest.approx(table.pooled.noise_multiple * max(1.0, factor) * noise)
        assert any("family unknown" in n for n in r["interval_notes"])
