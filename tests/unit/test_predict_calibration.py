"""The early-stop interval's calibration: per family, fitted without the experiment it is scored on."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainsweep.cli import app
from trainsweep.cli.predict import replay_logs
from trainsweep.logs import parse
from trainsweep.predict import (
    CALIBRATION_FILE,
    NOISE_FLOOR,
    Calibration,
    JitterCalibration,
    StopRule,
    fit_multiple,
    load_calibration,
    predict_run,
    run_family,
    run_noise,
    steady_estimate,
)

ROOT = Path(__file__).resolve().parents[2]
CONTAINER_LOGS = ROOT / "benchmarks" / "data" / "container-logs"
SEED_FAMILIES = ("fcn", "mnist", "resnet", "mo833")
H200_LOGS = ROOT / "benchmarks" / "data" / "container-logs-gpu-h200"


def write_log(path: Path, *, slowdown: float, seed: int, epochs: int = 5, steps: int = 50) -> None:
    """A cloud-ML (seed dialect) log: epoch 1 warms up, epoch 2 is steady, the later epochs run
    ``slowdown`` slower than epoch 2 (what two epochs cannot show)."""
    rng = random.Random(seed)
    lines = ["Initialization time 0.5"]
    for k in range(1, epochs + 1):
        lines.append(f"Epoch {k}/{epochs}")
        scale = 1.0 if k <= 2 else 1.0 + slowdown * rng.uniform(0.8, 1.2)
        st = [rng.gauss(0.1, 0.0005) * scale for _ in range(steps)]
        if k == 1:
            st[0] = 3.0
        lines += [f"{i} step training time: {s:.6f}s" for i, s in enumerate(st, 1)]
        lines += ["Validation time: 0.200000s", f"Epoch time: {sum(st) + 0.2:.6f}s"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def two_experiments(tmp_path: Path) -> tuple[Path, Path]:
    """Ten MNIST logs whose later epochs match epoch 2, ten whose later epochs run 5 % slower."""
    quiet, slow = tmp_path / "cnn-mnist" / "2021-quiet", tmp_path / "cnn-mnist" / "2021-slow"
    for i, bs in enumerate([64, 128, 256, 512, 1024] * 2):
        write_log(quiet / "logs" / f"result-p3-1-{bs}-e{i // 5}.txt", slowdown=0.0, seed=i)
        write_log(slow / "logs" / f"result-p3-1-{bs}-e{i // 5}.txt", slowdown=0.05, seed=100 + i)
    return quiet, slow


def test_cross_validation_never_calibrates_an_experiment_on_its_own_logs(tmp_path):
    quiet, _ = two_experiments(tmp_path)
    result = CliRunner().invoke(app, ["predict-eval", str(tmp_path), "--json", "--cross-validate"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["summary"]["experiments"] == 2
    held = {Path(o["log"]).parent.parent.name: [] for o in out["logs"]}
    for o in out["logs"]:
        held[Path(o["log"]).parent.parent.name].append(o)
    # the slow experiment is scored with the jitter fitted on the quiet one alone (a multiple of each
    # log's own noise): too narrow to cover it
    quiet_fit = fit_multiple(replay_logs([quiet], StopRule(epoch_jitter=0.01))[0])
    assert quiet_fit is not None
    for o in held["2021-slow"]:
        assert (
            o["epoch_jitter"] == pytest.approx(quiet_fit * run_noise(o["stat_rel"]))
            and o["epoch_jitter"] < 0.01
        )
    assert {o["calibration"] for o in out["logs"]} == {"family"}  # ten logs of the family are enough
    assert not any(o["covered"] for o in held["2021-slow"])
    # ... while the quiet one is scored with the slow one's wide jitter
    assert all(o["covered"] and o["epoch_jitter"] > 0.02 for o in held["2021-quiet"])
    fam = out["summary"]["families"]["mnist"]
    assert fam["logs_scored"] == 20 and fam["interval_coverage"] == 0.5
    # calibrated on all twenty (in-sample), every log would have been covered: the held-out scoring differs
    both = replay_logs([tmp_path], StopRule(epoch_jitter=0.01))[0]
    everything = fit_multiple(both)
    assert everything is not None and everything > 5 * quiet_fit


def test_cross_validation_of_one_experiment_is_a_clear_error_not_the_shipped_figures(tmp_path):
    quiet, _ = two_experiments(tmp_path)
    result = CliRunner().invoke(app, ["predict-eval", str(quiet), "--json", "--cross-validate"])
    assert result.exit_code == 1
    assert "cannot cross-validate" in result.output and "1 experiments given" in result.output


def test_an_experiment_without_enough_others_gets_no_interval(tmp_path):
    from trainsweep.predict import cross_validate

    quiet, _ = two_experiments(tmp_path)
    results, _, _ = replay_logs([quiet], StopRule(epoch_jitter=0.01))
    experiment = {r.log: ("big" if i < 9 else "small") for i, r in enumerate(results)}
    cv = {r.log: r for r in cross_validate(results, experiment)}
    small = [cv[r.log] for r in results[9:]]  # nine others: calibrated
    big = [cv[r.log] for r in results[:9]]  # one other: none
    assert all(r.epoch_jitter is not None and r.covered is not None for r in small)
    assert all(r.epoch_jitter is None and r.covered is None and r.predicted_epoch_low_s is None for r in big)
    assert all("too few scored logs outside its experiment (1)" in r.interval_notes[0] for r in big)


def test_predict_eval_json_has_a_summary_per_family(real_data):
    result = CliRunner().invoke(app, ["predict-eval", str(real_data), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)["summary"]
    fam = summary["families"]
    assert {"fcn", "mnist", "resnet", "mo833", "pooled"} <= fam.keys()
    assert fam["pooled"]["logs"] == sum(v["logs"] for k, v in fam.items() if k != "pooled")
    assert fam["fcn"]["logs_scored"] == 72 and fam["mo833"]["logs_scored"] == 0
    assert fam["mo833"]["median_abs_error"] is None  # nothing to score: no figure, not a zero
    assert fam["pooled"]["median_abs_error"] <= 0.005
    assert summary["calibration"] == f"shipped (fitted {load_calibration().created})"


def test_cross_validated_coverage_is_honest_in_every_family(real_data):
    result = CliRunner().invoke(
        app,
        ["predict-eval", str(real_data), str(CONTAINER_LOGS), str(H200_LOGS), "--json", "--cross-validate"],
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    summary = out["summary"]
    assert summary["calibration"] == "leave-one-experiment-out"
    fam = {n: f for n, f in summary["families"].items() if f["logs_scored"]}
    assert fam.keys() == {"fcn", "mnist", "resnet", "container-cpu", "container-gpu", "pooled"}
    for name, f in fam.items():
        assert 0.85 <= f["interval_coverage"] <= 0.95, (name, f)
    # per class, two are wider than the goal: a class's factor never narrows its family's jitter, and
    # theirs are quieter than their families' (one V100: MNIST, ResNet, FCN; FCN on p3.8x/16x); the two
    # classes of one log each (a g4dn log, one of unknown class) are missed
    classes = {n: f for n, f in summary["classes"].items() if f["logs_scored"]}
    outside = {n for n, f in classes.items() if not 0.85 <= f["interval_coverage"] <= 0.95}
    assert outside == {"volta-single", "volta-multi", "turing-single", "unknown"}
    assert all(classes[n]["interval_coverage"] > 0.95 for n in ("volta-single", "volta-multi"))
    assert classes["turing-single"]["logs_scored"] == classes["unknown"]["logs_scored"] == 1
    # the seeds' logs (shared real data) reach the median goal; the container's own logs, with epochs of
    # 0.1-6 s, do not, and pooled with them neither
    seeds = [abs(o["error"]) for o in out["logs"] if o["error"] is not None and o["family"] in SEED_FAMILIES]
    assert sorted(seeds)[len(seeds) // 2] <= 0.005
    assert (
        fam["container-cpu"]["median_abs_error"] > 0.005 and fam["container-gpu"]["median_abs_error"] > 0.005
    )
    assert fam["pooled"]["median_abs_error"] > 0.005
    for family in ("container-cpu", "container-gpu"):
        _, _, notes = load_calibration().jitter_for(family)
        assert any("off by a median" in n for n in notes), family  # ... and their predictions say so


def test_the_shipped_table_is_the_one_the_benchmark_fits(real_data):
    from trainsweep.predict import calibrate

    logs = [real_data, CONTAINER_LOGS, H200_LOGS]
    results, _, experiment = replay_logs(logs, StopRule(epoch_jitter=0.01))
    fitted, _ = calibrate(results, experiment)
    shipped = json.loads((ROOT / "trainsweep" / "data" / CALIBRATION_FILE).read_text())
    assert shipped["created"] and shipped["source"].startswith("benchmarks/bench_predict.py")
    assert fitted.to_dict()["pooled"] == pytest.approx(shipped["pooled"])
    assert fitted.to_dict()["families"].keys() == shipped["families"].keys()
    for name, fam in fitted.to_dict()["families"].items():
        assert fam == pytest.approx(shipped["families"][name]), name
    assert fitted.to_dict()["classes"].keys() == shipped["classes"].keys()
    for name, cls in fitted.to_dict()["classes"].items():
        assert cls == pytest.approx(shipped["classes"][name]), name
    assert fitted.unseen_class_factor == pytest.approx(shipped["unseen_class_factor"])
    assert fitted.unseen_pooled_factor == pytest.approx(shipped["unseen_pooled_factor"])


def test_run_family_reads_the_header_the_dialect_or_the_path(real_data):
    fcn = next((real_data / "cloud-ML" / "seismic-fcn").rglob("result-p2-1-256-e1.txt"))
    assert run_family(parse(fcn), fcn) == "fcn"
    mo = next((real_data / "high-res-distributed").rglob("*.out"))
    assert run_family(parse(mo), mo) == "mo833"
    own = next(CONTAINER_LOGS.rglob("*.log"))
    assert run_family(parse(own), own) == "container-cpu"
    mlperf = next((ROOT.parent / "shared" / "fixtures" / "mlperf-training-v4.0").rglob("result_0.txt"))
    assert run_family(parse(mlperf), mlperf) is None


def _step():
    est = steady_estimate([0.1, 0.1001, 0.0999, 0.1, 0.1002, 0.0998] * 5)
    assert est is not None
    return est


TABLE = Calibration(
    pooled=JitterCalibration(8.0, 100, 10, 100, 0.90, 0.004),
    families={
        "good": JitterCalibration(2.0, 40, 4, 40, 0.91, 0.003),
        "short": JitterCalibration(1.5, 30, 3, 30, 0.70, 0.008),
        "few": JitterCalibration(None, 3, 1),
    },
)


@pytest.mark.parametrize(
    ("family", "multiple", "source", "validated", "note"),
    [
        ("good", 2.0, "family", True, None),
        ("short", 8.0, "family", False, "covered 70% of held-out logs"),
        ("few", 8.0, "pooled", True, "too few calibration logs (3)"),
        ("nobody", 8.0, "pooled", True, "no calibration logs of family 'nobody'"),
        (None, 8.0, "pooled", True, "family unknown"),
    ],
)
def test_the_prediction_says_which_calibration_its_interval_rests_on(
    family, multiple, source, validated, note
):
    step = _step()
    pred = predict_run(step, steps_per_epoch=100, epochs=10, family=family, calibration=TABLE)
    # the table's multiple of the run's own noise: its steps' standard error, here under the floor
    jitter = multiple * run_noise(step.se_s / step.mean_s)
    assert step.se_s / step.mean_s < NOISE_FLOOR and jitter == pytest.approx(multiple * NOISE_FLOOR, rel=0.01)
    assert (pred.epoch_jitter, pred.calibration, pred.interval_validated) == (
        pytest.approx(jitter),
        source,
        validated,
    )
    half = (pred.epoch_high_s / pred.epoch_s - 1) / 1.6448536269514722
    assert half == pytest.approx(jitter, rel=0.05)
    if note is None:
        assert not any("calibration" in n or "cross-validation" in n for n in pred.notes)
    else:
        assert any(note in n for n in pred.notes), pred.notes


def test_a_run_whose_steps_scatter_more_gets_a_wider_interval_from_the_same_table():
    quiet = _step()
    noisy = steady_estimate([0.1, 0.13, 0.08, 0.1, 0.12, 0.07] * 5)
    assert noisy is not None
    preds = [
        predict_run(s, steps_per_epoch=100, epochs=10, family="good", calibration=TABLE)
        for s in (quiet, noisy)
    ]
    noise = [run_noise(s.se_s / s.mean_s) for s in (quiet, noisy)]
    assert noise[1] > 5 * noise[0]
    assert [p.epoch_jitter for p in preds] == [pytest.approx(2.0 * n) for n in noise]
    widths = [p.epoch_high_s / p.epoch_s - 1 for p in preds]
    assert widths[1] > 5 * widths[0]


def test_a_jitter_set_in_the_rule_wins_over_the_table():
    pred = predict_run(
        _step(), steps_per_epoch=100, epochs=10, rule=StopRule(epoch_jitter=0.03), calibration=TABLE
    )
    assert (pred.epoch_jitter, pred.calibration, pred.interval_validated) == (0.03, "rule", None)


def test_too_few_logs_give_no_conformal_jitter(tmp_path):
    quiet, _ = two_experiments(tmp_path)
    results = replay_logs([quiet], StopRule(epoch_jitter=0.01))[0]
    assert fit_multiple(results[:8]) is None  # ceil(0.9 * 9) = 9 > 8
    assert fit_multiple(results[:9]) is not None
