"""``trainsweep simulate``: a strategy replayed on complete logs, through the CLI.

A hand-computed case on small logs made here (every figure re-derived from the billing formula and the
catalogue's prices), and the shared real logs (retired ml.p2 types accepted, cells without logs and
logs outside the spec named, early stop and warm pools accounted).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tests.unit.axis_logs import seed_log
from trainsweep.cli import app
from trainsweep.cost.billing import FIXED_OVERHEAD_S, WARM_START_OVERHEAD_S, sweep_billable_s
from trainsweep.cost.prices import hourly_usd
from trainsweep.errors import SpecError
from trainsweep.spec import load_spec, plan_sweep

P3, P38 = "ml.p3.2xlarge", "ml.p3.8xlarge"
# (seed VMTYPE, batch size) -> the epoch times of each repetition (two epochs per run)
EPOCHS = {
    ("p3-1", 256): [(20.0, 10.0), (30.0, 20.0)],  # runs of 30 and 50 s: mean 40
    ("p3-1", 512): [(20.0, 15.0), (21.0, 14.0)],  # 35 and 35: mean 35
    ("p3-4", 256): [(12.0, 8.0), (14.0, 8.0)],  # 20 and 22: faster, on a dearer instance
    ("p3-4", 512): [(40.0, 30.0), (40.0, 32.0)],
}
TTT = {key: [sum(e) for e in reps] for key, reps in EPOCHS.items()}


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    texts = {
        f"result-{vm}-{bs}-e{i}.txt": seed_log(bs, epochs)
        for (vm, bs), reps in EPOCHS.items()
        for i, epochs in enumerate(reps)
    }
    return _logs_dir(tmp_path, "grid", texts)


def _spec(tmp_path: Path, **fields) -> Path:
    spec = {
        "name": "sim",
        "workload": {"model": "mnist-cnn", "epochs": 2},
        "instance_types": [P3, P38],
        "batch_sizes": [256, 512],
        "repetitions": 1,
        "max_concurrency": 2,
        **fields,
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _p3_spec(tmp_path: Path, epochs: int, batch_sizes: list[int], **fields) -> Path:
    """A spec of ``epochs`` epochs on ml.p3.2xlarge alone, over ``batch_sizes``."""
    return _spec(
        tmp_path,
        workload={"model": "mnist-cnn", "epochs": epochs},
        instance_types=[P3],
        batch_sizes=batch_sizes,
        **fields,
    )


def _logs_dir(tmp_path: Path, name: str, texts: dict[str, str]) -> Path:
    """A results root ``name`` whose logs folder holds ``texts`` (file name -> log text)."""
    folder = tmp_path / name / "logs"
    folder.mkdir(parents=True)
    for file, text in texts.items():
        (folder / file).write_text(text)
    return folder.parent


def _simulate(spec: Path, logs: Path) -> dict:
    result = CliRunner().invoke(app, ["simulate", str(spec), "--from", str(logs), "--json", "--workers", "1"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _usd(seconds: float, itype: str) -> float:
    return seconds * hourly_usd(itype) / 3600


def test_a_small_grid_agrees_with_the_hand_computed_figures(tmp_path, logs):
    out = _simulate(_spec(tmp_path, packing="per-instance"), logs)
    assert out["prices"].endswith(", us-east-1") and "spec's" not in out["prices"]  # the catalogue's
    # one packed job per instance type, first repetition of each batch size, one overhead each
    strategy = _usd(FIXED_OVERHEAD_S + 30 + 35, P3) + _usd(FIXED_OVERHEAD_S + 20 + 70, P38)
    # every repetition of every configuration as a job of its own
    exhaustive = sum(
        _usd(FIXED_OVERHEAD_S + t, P3 if vm == "p3-1" else P38) for (vm, _), ts in TTT.items() for t in ts
    )
    assert out["strategy_cost_usd"] == pytest.approx(strategy)
    assert out["exhaustive_cost_usd"] == pytest.approx(exhaustive)
    assert out["cost_ratio"] == pytest.approx(strategy / exhaustive)
    assert out["strategy"]["jobs"] == 2 and out["exhaustive"]["jobs"] == 8
    # each bill's start-ups: one per job (every job starts cold without a warm pool)
    assert out["strategy"]["start_up_s"] == pytest.approx(2 * FIXED_OVERHEAD_S)
    assert out["strategy"]["start_up_usd"] == pytest.approx(
        _usd(FIXED_OVERHEAD_S, P3) + _usd(FIXED_OVERHEAD_S, P38)
    )
    assert out["exhaustive"]["start_up_usd"] == pytest.approx(
        4 * (_usd(FIXED_OVERHEAD_S, P3) + _usd(FIXED_OVERHEAD_S, P38))
    )
    # the first repetitions make p3.8xlarge x 256 (20 s) the fastest, as the truth (mean 21 s) does
    assert out["picks"]["fastest"] == {**out["picks"]["fastest"], "instance_type": P38, "batch_size": 256}
    assert out["truth"]["fastest"]["time_to_train_s"] == pytest.approx(21.0)
    assert out["regret_time"] == pytest.approx(0.0)
    # cheapest: the cost to train is (overhead + mean time) x price, from the catalogue
    costs = {
        (it, bs): _usd(FIXED_OVERHEAD_S + sum(TTT[(vm, bs)]) / 2, it)
        for vm, it in (("p3-1", P3), ("p3-4", P38))
        for bs in (256, 512)
    }
    best = min(costs, key=costs.get)
    assert (out["truth"]["cheapest"]["instance_type"], out["truth"]["cheapest"]["batch_size"]) == best
    picked = (out["picks"]["cheapest"]["instance_type"], out["picks"]["cheapest"]["batch_size"])
    assert out["regret_cost"] == pytest.approx(costs[picked] / costs[best] - 1)
    assert out["picks"]["recommended"] == out["picks"]["cheapest"]


def test_the_specs_prices_win_over_the_catalogue_in_the_bill_and_the_picks(tmp_path, logs):
    # a negotiated rate that makes ml.p3.8xlarge cheaper per hour than ml.p3.2xlarge: the bill and the
    # cheapest pick follow the spec's prices, as a planned sweep's do
    prices = {P3: 4.0, P38: 1.0}
    out = _simulate(_spec(tmp_path, packing="per-instance", prices=prices), logs)

    def usd(seconds: float, itype: str) -> float:
        return seconds * prices[itype] / 3600

    strategy = usd(FIXED_OVERHEAD_S + 30 + 35, P3) + usd(FIXED_OVERHEAD_S + 20 + 70, P38)
    exhaustive = sum(
        usd(FIXED_OVERHEAD_S + t, P3 if vm == "p3-1" else P38) for (vm, _), ts in TTT.items() for t in ts
    )
    assert out["strategy_cost_usd"] == pytest.approx(strategy)
    assert out["exhaustive_cost_usd"] == pytest.approx(exhaustive)
    assert out["truth"]["cheapest"]["instance_type"] == P38 and out["truth"]["cheapest"]["batch_size"] == 256
    assert out["truth"]["cheapest"]["cost_to_train_usd"] == pytest.approx(usd(FIXED_OVERHEAD_S + 21, P38))
    assert out["exhaustive"]["unpriced_instance_types"] == []
    assert out["prices"].startswith(
        "the spec's prices (ml.p3.2xlarge 4.000 USD/h, ml.p3.8xlarge 1.000 USD/h)"
    )
    text = CliRunner().invoke(app, ["simulate", str(_spec(tmp_path, prices=prices)), "--from", str(logs)])
    assert "Prices: the spec's prices (ml.p3.2xlarge 4.000 USD/h" in " ".join(text.output.split())


def test_a_type_the_catalogue_does_not_price_is_simulated_with_the_specs_price(tmp_path):
    g6e = "ml.g6e.xlarge"
    assert hourly_usd(g6e) is None
    texts = {
        f"result-g6e-1-256-e{i}.txt": seed_log(256, reps)
        for i, reps in enumerate([(20.0, 10.0), (22.0, 10.0)])
    }
    texts |= {
        f"result-p3-1-256-e{i}.txt": seed_log(256, reps)
        for i, reps in enumerate([(30.0, 20.0), (30.0, 20.0)])
    }
    logs = _logs_dir(tmp_path, "g6e", texts)
    fields = {"instance_types": [g6e, P3], "batch_sizes": [256]}
    unpriced = _simulate(_spec(tmp_path, **fields), logs)
    assert unpriced["exhaustive"]["unpriced_instance_types"] == [g6e]
    priced = _simulate(_spec(tmp_path, **fields, prices={g6e: 2.0}), logs)
    assert priced["exhaustive"]["unpriced_instance_types"] == []
    runs = [FIXED_OVERHEAD_S + 30, FIXED_OVERHEAD_S + 32]
    assert priced["truth"]["cheapest"]["cost_to_train_usd"] == pytest.approx(sum(runs) / 2 * 2.0 / 3600)
    assert priced["truth"]["cheapest"]["instance_type"] == g6e


def _steps_log(
    batch_size: int,
    epochs: list[tuple[list[float], float]],
    val_accuracy: float | list[float] | None = None,
) -> str:
    """A seed-style log with the given step times and validation time of each epoch (and Keras's
    validation accuracy line, when given: one for every epoch, or one per epoch)."""
    lines = [f"python3 train.py --batch-size {batch_size} --epochs {len(epochs)}"]
    total = 0.0
    for e, (steps, validation_s) in enumerate(epochs, 1):
        lines.append(f"Epoch {e}/{len(epochs)}")
        lines += [f"{i} step training time: {s:.6f}s" for i, s in enumerate(steps, 1)]
        acc = val_accuracy[e - 1] if isinstance(val_accuracy, list) else val_accuracy
        if acc is not None:
            lines.append(f"1024/1024 [====] - 1s - loss: 0.1 - val_loss: 0.2 - val_accuracy: {acc}")
        epoch_s = sum(steps) + validation_s
        total += epoch_s
        lines += [f"Validation time: {validation_s}s", f"Epoch time: {epoch_s}s"]
    lines.append(f"Duracao do treinamento: {total}")
    return "\n".join(lines) + "\n"


def test_early_stop_replays_the_live_rule_step_by_step(tmp_path):
    # 40 steps an epoch: a 5 s first step (warm-up), then 1 s steps; validation 2 s once, then 0.5 s
    epochs = [([5.0] + [1.0] * 39, 2.0), ([1.0] * 40, 0.5), ([1.0] * 40, 0.5)]
    logs = _logs_dir(tmp_path, "steps", {"result-p3-1-256-e0.txt": _steps_log(256, epochs)})
    out = _simulate(_p3_spec(tmp_path, 3, [256], mode="early-stop", packing="per-instance"), logs)
    # the container's rule (10 steady steps, 10 s watched, precision 2 %) stops at step 11 of epoch 1,
    # not at an epoch's end: the job pays steps 1-11 (5 + 10 x 1 s) and one validation pass, the first
    assert out["strategy"]["early_stopped_runs"] == 1
    assert out["strategy"]["early_stop_replay"] == {"step": 1, "epoch": 0}
    assert out["strategy"]["billable_s"] == pytest.approx(FIXED_OVERHEAD_S + 15 + 2)
    # its prediction from what it watched: the warm-up excess (5 - 1 s) and the first validation's
    # one-off (2 - 0.5 s) once, then 3 epochs of 40 steady steps and a 0.5 s validation: 127 s, as run
    assert out["picks"]["fastest"]["time_to_train_s"] == pytest.approx(4 + 1.5 + 3 * 40.5)
    assert out["truth"]["fastest"]["time_to_train_s"] == pytest.approx(46 + 2 * 40.5)
    assert out["exhaustive"]["billable_s"] == pytest.approx(FIXED_OVERHEAD_S + 127)


def test_a_pick_the_exhaustive_runs_flag_as_learning_worse_is_said(tmp_path):
    # x 512 trains faster (0.6 s steps against 1 s) but ends at 0.90 accuracy against 0.97: the full
    # report's quality check (margin 0.02) flags it; early-stopped runs never evaluate, so cannot see it
    texts = {
        f"result-p3-1-{bs}-e0.txt": _steps_log(
            bs, [([5.0] + [step] * 39, 2.0)] + [([step] * 40, 0.5)] * 2, val_accuracy=acc
        )
        for bs, step, acc in ((256, 1.0, 0.97), (512, 0.6, 0.90))
    }
    out = _simulate(
        _p3_spec(tmp_path, 3, [256, 512], mode="early-stop"), _logs_dir(tmp_path, "quality", texts)
    )
    assert out["strategy"]["early_stopped_runs"] == 2
    assert out["picks"]["fastest"]["batch_size"] == 512 and out["picks"]["fastest"]["eval_accuracy"] is None
    assert out["truth"]["fastest"]["batch_size"] == 256
    assert out["truth"]["fastest"]["eval_accuracy"] == pytest.approx(0.97)
    assert set(out["learns_worse"]) == {"fastest", "cheapest", "recommended"}
    assert out["learns_worse"]["fastest"].startswith("learns worse: eval_accuracy 0.9 is 0.07 below the best")
    # measured against the best that does not learn worse, the flagged pick is faster: regret below 0
    assert out["regret_time"] < 0
    (note,) = out["notes"]
    assert "ml.p3.2xlarge x 512" in note and "would not recommend it" in note
    # a one-epoch run of 4 steps: the rule cannot stop before its end; still, it does not evaluate
    short = _logs_dir(
        tmp_path, "short", {"result-p3-1-256-e0.txt": _steps_log(256, [([1.0] * 4, 0.5)], val_accuracy=0.9)}
    )
    whole = _simulate(_p3_spec(tmp_path, 1, [256], mode="early-stop"), short)
    assert whole["strategy"]["early_stopped_runs"] == 0
    assert whole["picks"]["fastest"]["eval_accuracy"] is None
    assert whole["truth"]["fastest"]["eval_accuracy"] == pytest.approx(0.9)


def test_auto_batch_sizes_replay_the_search_and_skip_sizes_past_a_plateau(tmp_path):
    # one instance type, 256 samples/s at every batch size: 512 and 1024 each gain nothing (< 3 %)
    logs = _logs_dir(
        tmp_path,
        "auto",
        {
            f"result-p3-1-{bs}-e0.txt": _steps_log(bs, [([bs / 256] * 6, 0.5)] * 2)
            for bs in (256, 512, 1024, 2048)
        },
    )
    spec = _spec(
        tmp_path, instance_types=[P3], batch_sizes={"auto": {"min": 256, "max": 2048}}, max_concurrency=1
    )
    out = _simulate(spec, logs)
    # the supervisor's rule stops the packed job after 1024: 2048 is not run, and not paid
    (skip,) = out["strategy"]["skipped_by_search"]
    assert (skip["instance_type"], skip["batch_size"], skip["repetition"]) == (P3, 2048, 0)
    assert "throughput stopped improving" in skip["reason"]
    assert out["strategy"]["jobs"] == 1 and out["strategy"]["runs"] == 3
    paid = sum(2 * (6 * bs / 256 + 0.5) for bs in (256, 512, 1024))  # two epochs: nothing to stop early
    assert out["strategy"]["billable_s"] == pytest.approx(FIXED_OVERHEAD_S + paid)
    assert out["exhaustive"]["runs"] == 4 and out["truth"]["fastest"]["batch_size"] == 256
    text = CliRunner().invoke(app, ["simulate", str(spec), "--from", str(logs)])
    words = " ".join(text.output.split())
    assert "batch-size search skipped 1 run(s) past a throughput plateau: ml.p3.2xlarge x 2048" in words


def test_one_repetition_can_pick_wrong_and_the_regret_says_by_how_much(tmp_path, logs):
    # only p3.2xlarge: its first repetitions say 256 (30 s) beats 512 (35 s); the means say the opposite
    out = _simulate(_spec(tmp_path, instance_types=[P3]), logs)
    assert (out["picks"]["fastest"]["batch_size"], out["truth"]["fastest"]["batch_size"]) == (256, 512)
    assert out["regret_time"] == pytest.approx(40 / 35 - 1)
    # the spread between the true fastest's repetitions is 0: this regret is larger than the noise
    assert out["repetition_spread"]["time_of_true_fastest"] == pytest.approx(0.0)
    # per cell, not packed: one job per run, one overhead each
    assert out["strategy_cost_usd"] == pytest.approx(_usd(2 * FIXED_OVERHEAD_S + 30 + 35, P3))
    both = _simulate(_spec(tmp_path, instance_types=[P3], repetitions=2), logs)
    assert both["regret_time"] == pytest.approx(0.0) and both["cost_ratio"] == pytest.approx(1.0)


def test_a_warm_pool_pays_the_start_up_once_per_instance_type_and_its_kept_time(tmp_path, logs):
    one = _spec(tmp_path, instance_types=[P3], repetitions=2, warm_pool_seconds=60, max_concurrency=1)
    out = _simulate(one, logs)
    # four jobs back to back (30, 35, 50, 35 s) on one warm pool: one cold start, three warm, 60 s kept
    seconds = FIXED_OVERHEAD_S + 30 + 3 * WARM_START_OVERHEAD_S + 35 + 50 + 35 + 60
    assert out["strategy"]["billable_s"] == pytest.approx(seconds)
    assert out["strategy"]["warm_starts"] == 3 and out["strategy"]["warm_pool_retained_s"] == 60
    assert out["strategy"]["start_up_s"] == pytest.approx(FIXED_OVERHEAD_S)  # the warm starts pay none
    assert out["strategy_cost_usd"] == pytest.approx(_usd(seconds, P3))
    assert out["exhaustive"]["billable_s"] == pytest.approx(4 * FIXED_OVERHEAD_S + 150)
    # two at a time: jobs 1 and 2 start cold at 0; 3 takes job 1's pool, 4 job 2's; two pools kept 60 s
    two = _simulate(_spec(tmp_path, instance_types=[P3], repetitions=2, warm_pool_seconds=60), logs)
    assert two["strategy"]["billable_s"] == pytest.approx(
        2 * FIXED_OVERHEAD_S + 30 + 35 + 2 * WARM_START_OVERHEAD_S + 50 + 35 + 2 * 60
    )
    assert two["strategy_wall_s"] == pytest.approx(FIXED_OVERHEAD_S + 30 + WARM_START_OVERHEAD_S + 50)


def test_a_pool_that_waits_longer_than_its_keep_alive_is_not_reused():
    bill = sweep_billable_s([("a", 100.0), ("b", 100.0), ("a", 10.0)], slots=1, keep_alive_s=60)
    # job 3 starts 233.4 s after job 1's pool was released: that pool expired (billed 60 s), cold start
    assert bill.warm_starts == 0
    assert bill.billable_s["a"] == pytest.approx(2 * FIXED_OVERHEAD_S + 110 + 60 + 60)
    assert bill.billable_s["b"] == pytest.approx(FIXED_OVERHEAD_S + 100 + 60)
    assert sweep_billable_s([("a", 1.0)] * 3, slots=3).billable_s["a"] == pytest.approx(
        3 * (FIXED_OVERHEAD_S + 1)
    )


def test_cells_without_logs_and_logs_outside_the_spec_are_named(tmp_path, logs):
    out = _simulate(_spec(tmp_path, instance_types=[P3], batch_sizes=[256, 1024]), logs)
    assert out["cells_without_logs"] == [{"instance_type": P3, "batch_size": 1024}]
    outside = {(x["instance_type"], x["batch_size"]) for x in out["logs_outside_spec"]}
    assert outside == {(P3, 512), (P38, 256), (P38, 512)}
    text = CliRunner().invoke(
        app, ["simulate", str(_spec(tmp_path, instance_types=[P3])), "--from", str(logs)]
    )
    assert text.exit_code == 0, text.output
    assert "logs match no configuration of the spec" in text.output and "regret" in text.output


def test_logs_of_several_experiments_pooled_into_one_configuration_are_named(tmp_path, logs):
    _logs_dir(logs.parent, "other", {"result-p3-1-256-e0.txt": seed_log(256, (11.0, 12.0))})
    out = _simulate(_spec(tmp_path, instance_types=[P3]), logs.parent)
    assert out["exhaustive"]["runs"] == 5
    (note,) = out["notes"]
    assert "ml.p3.2xlarge x 256 (grid, other)" in note and "--from one experiment's folder" in note


def test_logs_shorter_than_the_specs_epochs_are_said_to_be_extrapolated(tmp_path, logs):
    out = _simulate(_spec(tmp_path, workload={"model": "mnist-cnn", "epochs": 3}), logs)
    (note,) = out["notes"]
    assert note.startswith("8 logs ran fewer epochs (2) than the spec's 3") and "extrapolated" in note
    # epoch 1 + 2 x epoch 2 (one repetition): what the exhaustive answer now rests on
    assert out["truth"]["fastest"]["time_to_train_s"] == pytest.approx(((12 + 2 * 8) + (14 + 2 * 8)) / 2)
    assert _simulate(_spec(tmp_path), logs)["notes"] == []


def test_bad_input_gets_a_clear_error(tmp_path, logs):
    runner = CliRunner()
    missing = runner.invoke(app, ["simulate", str(_spec(tmp_path)), "--from", str(tmp_path / "nope")])
    assert missing.exit_code == 1 and "does not exist" in missing.stderr
    none = runner.invoke(
        app, ["simulate", str(_spec(tmp_path, instance_types=["ml.g5.xlarge"])), "--from", str(logs)]
    )
    assert none.exit_code == 1 and "nothing to replay" in none.stderr
    bad = runner.invoke(app, ["simulate", str(_spec(tmp_path, repetitions=0)), "--from", str(logs)])
    assert bad.exit_code == 1 and "repetitions" in bad.stderr
    counts = runner.invoke(
        app, ["simulate", str(_spec(tmp_path, instance_counts=[1, 2])), "--from", str(logs)]
    )
    assert counts.exit_code == 1 and "instance_counts axis" in counts.stderr
    # these logs never evaluate: a target (and the phases that need one) cannot be replayed on them,
    # and is refused rather than answered by time to train
    target = {"metric": "eval_accuracy", "value": 0.9}
    for extra, remove in (
        ({"target": target}, "remove target"),
        ({"target": target, "phases": ["scan", "confirm"]}, "remove target and phases"),
    ):
        refused = runner.invoke(app, ["simulate", str(_spec(tmp_path, **extra)), "--from", str(logs)])
        assert refused.exit_code == 1, refused.output
        said = " ".join(refused.stderr.split())
        assert "no log of the spec's grid records eval_accuracy, the target's metric" in said
        assert "eval_accuracy >= 0.9 cannot be replayed" in said and remove in said


# ---- a target, and phases: [scan, confirm] -------------------------------------------------------
#
# Every log below trains 4 epochs of n steps of s seconds: the first step of a run is s + w (warm-up,
# w = 4 unless said), the first validation 2 s, the later ones 0.5 s. So epoch 1 takes n s + w + 2 and
# every later one n s + 0.5; the container's rule stops at step 11 of epoch 1 (10 steady steps of
# >= 1 s) and predicts the full run exactly: w + (2 - 0.5) + 4 (n s + 0.5), the log's time to train.
TARGET = {"metric": "eval_accuracy", "value": 0.9}


def _curve(batch_size: int, n: int, s: float, accuracies: list[float], w: float = 4) -> str:
    epochs = [([s + w] + [s] * (n - 1), 2.0)] + [([s] * n, 0.5)] * (len(accuracies) - 1)
    return _steps_log(batch_size, epochs, val_accuracy=accuracies)


def _to(n: int, s: float, epochs: int, w: float = 4) -> float:
    """Seconds from the start of a :func:`_curve` run to the end of its epoch ``epochs``."""
    return n * s + w + 2 + (epochs - 1) * (n * s + 0.5)


def _curves(tmp_path: Path, name: str, runs: dict[tuple[int, int], tuple]) -> Path:
    """Logs of ``_curve(batch size, *runs[batch size, repetition])``."""
    return _logs_dir(
        tmp_path,
        name,
        {f"result-p3-1-{bs}-e{rep}.txt": _curve(bs, *args) for (bs, rep), args in runs.items()},
    )


def test_a_target_ranks_by_time_and_cost_to_reach_it(tmp_path):
    # x 1024 trains fastest (30 steps of 1 s: 127.5 s) but never reaches 0.9; x 512 (40 x 1 s: 167.5 s)
    # and x 256 (40 x 1.5 s: 247.5 s) do, x 256 sooner on average: ranked by time to train, the
    # answer would be x 1024; to the target, it is x 256. (Second repetitions warm up 1 s longer: the
    # import leaves out logs with identical timings as copies.)
    logs = _curves(
        tmp_path,
        "target",
        {
            (256, 0): (40, 1.5, [0.85, 0.91, 0.92, 0.93]),  # reaches 0.9 after epoch 2: 126.5 s
            (256, 1): (40, 1.5, [0.90, 0.91, 0.92, 0.93], 5),  # after epoch 1: 67 s
            (512, 0): (40, 1.0, [0.80, 0.90, 0.91, 0.92]),  # after epoch 2: 86.5 s
            (512, 1): (40, 1.0, [0.70, 0.80, 0.85, 0.90], 5),  # after epoch 4: 168.5 s
            (1024, 0): (30, 1.0, [0.60, 0.70, 0.75, 0.80]),  # never: all 4 epochs, 127.5 s
            (1024, 1): (30, 1.0, [0.60, 0.70, 0.78, 0.80], 5),  # never: 128.5 s
        },
    )
    fields = {
        "workload": {"model": "mnist-cnn", "epochs": 4},
        "instance_types": [P3],
        "batch_sizes": [256, 512, 1024],
        "mode": "full",
        "target": TARGET,
    }
    out = _simulate(_spec(tmp_path, **fields), logs)
    assert out["target"] == {**TARGET, "direction": "maximize"}
    t256 = (_to(40, 1.5, 2), _to(40, 1.5, 1, w=5))
    t512 = (_to(40, 1.0, 2), _to(40, 1.0, 4, w=5))
    t1024 = (_to(30, 1.0, 4), _to(30, 1.0, 4, w=5))
    assert (t256, t512, t1024) == ((126.5, 67.0), (86.5, 168.5), (127.5, 128.5))
    # one job per run, each ending at the target (x 1024 at the end of its epochs), one overhead each
    strategy = 3 * FIXED_OVERHEAD_S + t256[0] + t512[0] + t1024[0]
    assert out["strategy_cost_usd"] == pytest.approx(_usd(strategy, P3))
    exhaustive = 6 * FIXED_OVERHEAD_S + sum(t256) + sum(t512) + sum(t1024)
    assert out["exhaustive_cost_usd"] == pytest.approx(_usd(exhaustive, P3))
    # the first repetitions say x 512 (86.5 s against 126.5); the means say x 256 (96.75 against 127.5)
    for name in ("fastest", "cheapest", "recommended"):
        assert (out["picks"][name]["batch_size"], out["truth"][name]["batch_size"]) == (512, 256)
    assert out["picks"]["fastest"]["time_to_target_s"] == pytest.approx(86.5)
    assert out["truth"]["fastest"]["time_to_target_s"] == pytest.approx(96.75)
    assert out["truth"]["fastest"]["time_to_train_s"] == pytest.approx(247.5 + 0.5)  # the slowest to train
    best_cost = _usd(FIXED_OVERHEAD_S + 96.75, P3)
    assert out["truth"]["cheapest"]["cost_to_target_usd"] == pytest.approx(best_cost)
    assert out["regret_time"] == pytest.approx(127.5 / 96.75 - 1)
    assert out["regret_cost"] == pytest.approx((FIXED_OVERHEAD_S + 127.5) / (FIXED_OVERHEAD_S + 96.75) - 1)
    # the spread between x 256's repetitions, to the target: (126.5 - 67) / 96.75
    assert out["repetition_spread"]["time_of_true_fastest"] == pytest.approx(59.5 / 96.75)
    # x 1024 never reaches it: listed, never picked
    (missed,) = out["missed_target"]
    assert (missed["instance_type"], missed["batch_size"]) == (P3, 1024)
    assert missed["reason"].startswith("did not reach target: eval_accuracy 0.9 not reached by 2 of 2 runs")
    # in a spec of one epoch, only x 256's second repetition reaches it (within its first epoch):
    # x 256 is not reached by every repetition either, and nothing is recommended
    one = _simulate(_spec(tmp_path, **{**fields, "workload": {"model": "mnist-cnn", "epochs": 1}}), logs)
    assert [x["batch_size"] for x in one["missed_target"]] == [256, 512, 1024]
    assert one["picks"]["fastest"] is None and one["truth"]["fastest"] is None
    assert any("nothing to recommend" in n for n in one["notes"])


def test_a_pick_whose_other_repetitions_miss_the_target_is_said(tmp_path):
    # x 512's first run reaches 0.9 after epoch 1 (46 s), its second never: one repetition picks it;
    # the exhaustive runs show it missing the target, so the truth is x 256 (both runs, 126.5 / 127.5 s)
    logs = _curves(
        tmp_path,
        "missed",
        {
            (256, 0): (40, 1.5, [0.85, 0.91, 0.92, 0.93]),
            (256, 1): (40, 1.5, [0.85, 0.91, 0.92, 0.93], 5),
            (512, 0): (40, 1.0, [0.90, 0.91, 0.92, 0.93]),
            (512, 1): (40, 1.0, [0.80, 0.85, 0.88, 0.89], 5),
        },
    )
    out = _simulate(_p3_spec(tmp_path, 4, [256, 512], mode="full", target=TARGET), logs)
    assert out["picks"]["fastest"]["batch_size"] == 512
    assert out["picks"]["fastest"]["time_to_target_s"] == pytest.approx(_to(40, 1.0, 1))
    assert out["truth"]["fastest"]["batch_size"] == 256
    assert out["truth"]["fastest"]["time_to_target_s"] == pytest.approx((126.5 + 127.5) / 2)
    assert set(out["learns_worse"]) == {"fastest", "cheapest", "recommended"}
    assert out["learns_worse"]["fastest"].startswith(
        "did not reach target: eval_accuracy 0.9 not reached by 1"
    )
    # it has no time to the target in the exhaustive runs: no regret to give, and a note says why
    assert out["regret_time"] is None and out["regret_cost"] is None
    assert [x["batch_size"] for x in out["missed_target"]] == [512]
    (note,) = out["notes"]
    assert "exhaustive runs show missing eval_accuracy >= 0.9: " in note and "x 512" in note


# scan: x 1024 (30 x 1 s: 127.5 s to train) < x 512 (40 x 1 s: 167.5 s) < x 256 (40 x 1.5 s: 247.5 s);
# to eval_accuracy 0.9: x 256 after epoch 1 (66 s), x 512 after epoch 3 (127 s), x 1024 never
PHASED = {
    (256, 0): (40, 1.5, [0.90, 0.91, 0.92, 0.93]),
    (512, 0): (40, 1.0, [0.70, 0.80, 0.90, 0.92]),
    (1024, 0): (30, 1.0, [0.60, 0.70, 0.75, 0.80]),
}


def _phased_spec(tmp_path: Path, **fields) -> Path:
    return _p3_spec(tmp_path, 4, [256, 512, 1024], target=TARGET, phases=["scan", "confirm"], **fields)


def test_phases_confirm_the_scans_best_and_can_miss_the_true_best(tmp_path):
    logs = _curves(tmp_path, "phases", PHASED)
    out = _simulate(_phased_spec(tmp_path, confirm_top_k=2), logs)
    p = out["phases"]
    # the scan ranks by cost to train (one instance type: time to train) and confirms the best two
    assert [(r["batch_size"], r["time_to_train_s"]) for r in p["ranking"]] == [
        (1024, pytest.approx(127.5)),
        (512, pytest.approx(167.5)),
        (256, pytest.approx(247.5)),
    ]
    assert p["confirmed"] == [{"instance_type": P3, "batch_size": b} for b in (1024, 512)]
    # scan: one packed job that early-stops each run at step 11 of epoch 1 and times a validation
    # (s + 4 + 10 s + 2 s); confirm: one job per cell, x 512 to the target, x 1024 all its epochs
    scan = FIXED_OVERHEAD_S + (5.5 + 15 + 2) + (5 + 10 + 2) + (5 + 10 + 2)
    assert p["scan"]["billable_s"] == pytest.approx(scan) and p["scan"]["early_stopped_runs"] == 3
    confirm = 2 * FIXED_OVERHEAD_S + 127 + 127.5
    assert (p["confirm"]["jobs"], p["confirm"]["billable_s"]) == (2, pytest.approx(confirm))
    assert p["scan"]["cost_usd"] == pytest.approx(_usd(scan, P3))
    assert out["strategy_cost_usd"] == pytest.approx(_usd(scan + confirm, P3))
    exhaustive = 3 * FIXED_OVERHEAD_S + 66 + 127 + 127.5
    assert out["exhaustive_cost_usd"] == pytest.approx(_usd(exhaustive, P3))
    assert out["cost_ratio"] == pytest.approx((scan + confirm) / exhaustive)
    # the picks come from the confirmed runs: x 1024 never reached the target, so x 512; the true best,
    # x 256, was never confirmed: slower and dearer to the target by these fractions
    for name in ("fastest", "cheapest", "recommended"):
        assert (out["picks"][name]["batch_size"], out["truth"][name]["batch_size"]) == (512, 256)
    assert out["regret_time"] == pytest.approx(127 / 66 - 1)
    assert out["regret_cost"] == pytest.approx((FIXED_OVERHEAD_S + 127) / (FIXED_OVERHEAD_S + 66) - 1)
    assert [x["batch_size"] for x in out["missed_target"]] == [1024]
    # confirming all three finds it, at the price of one more full run
    every = _simulate(_phased_spec(tmp_path, confirm_top_k=3), logs)
    assert every["picks"]["fastest"]["batch_size"] == 256 and every["regret_time"] == pytest.approx(0.0)
    assert every["strategy_cost_usd"] == pytest.approx(_usd(scan + confirm + FIXED_OVERHEAD_S + 66, P3))
    # confirming only the scan's best, which never reaches the target: nothing to recommend
    one = _simulate(_phased_spec(tmp_path, confirm_top_k=1), logs)
    assert one["picks"] == {"fastest": None, "cheapest": None, "recommended": None}
    assert one["truth"]["fastest"]["batch_size"] == 256 and one["regret_time"] is None
    assert "none of the confirmed configurations reaches eval_accuracy >= 0.9" in " ".join(one["notes"])


def test_the_confirm_phase_replays_new_runs_not_the_logs_the_scan_watched(tmp_path):
    # x 512 has a second repetition that reaches 0.9 an epoch sooner (and warms up 1 s longer): the scan
    # watches repetition 0, the confirm sweep's run is a new one, repetition 1
    runs = {**PHASED, (512, 1): (40, 1.0, [0.70, 0.90, 0.92, 0.93], 5)}
    out = _simulate(_phased_spec(tmp_path, confirm_top_k=2), _curves(tmp_path, "fresh", runs))
    p = out["phases"]
    assert p["confirmed"] == [{"instance_type": P3, "batch_size": b} for b in (1024, 512)]
    scan = FIXED_OVERHEAD_S + (5.5 + 15 + 2) + (5 + 10 + 2) + (5 + 10 + 2)
    assert p["scan"]["billable_s"] == pytest.approx(scan)
    # x 512 to the target on repetition 1: 40 + 5 + 2 + 40.5 s; x 1024 has one log: all its epochs
    assert p["confirm"]["billable_s"] == pytest.approx(2 * FIXED_OVERHEAD_S + _to(40, 1.0, 2, w=5) + 127.5)


def test_phases_reuse_a_warm_pool_and_say_both_phases(tmp_path):
    logs = _curves(tmp_path, "warm", PHASED)
    spec = _phased_spec(tmp_path, confirm_top_k=2, warm_pool_seconds=60, max_concurrency=1)
    out = _simulate(spec, logs)
    # each phase is a sweep of its own: the scan's one job keeps its pool 60 s; the confirm sweep's two
    # jobs run back to back on one pool: one cold start, one warm, 60 s kept after the last
    scan = FIXED_OVERHEAD_S + 22.5 + 17 + 17 + 60
    confirm = FIXED_OVERHEAD_S + 127 + WARM_START_OVERHEAD_S + 127.5 + 60
    assert out["phases"]["scan"]["billable_s"] == pytest.approx(scan)
    assert out["phases"]["confirm"]["billable_s"] == pytest.approx(confirm)
    assert out["phases"]["confirm"]["warm_starts"] == 1
    assert out["strategy_cost_usd"] == pytest.approx(_usd(scan + confirm, P3))
    # the exhaustive grid keeps no pool
    assert out["exhaustive"]["billable_s"] == pytest.approx(3 * FIXED_OVERHEAD_S + 66 + 127 + 127.5)
    text = CliRunner().invoke(app, ["simulate", str(spec), "--from", str(logs), "--workers", "1"])
    assert text.exit_code == 0, text.output
    words = " ".join(text.output.split())
    assert "Phase 1, scan (early-stop, packed, 1 repetition, warm pool 60 s): 1 jobs over 3 runs" in words
    assert "1. ml.p3.2xlarge x 1024" in words and "(confirmed)" in words
    assert "Phase 2, confirm (the best 2 of 3, full runs to eval_accuracy 0.9, one job per cell" in words
    assert "full runs to eval_accuracy 0.9, one job each" in words
    assert "do not reach the target (never recommended): ml.p3.2xlarge x 1024" in words


FCN = {
    "name": "fcn",
    "workload": {"model": "resnet50-cifar10", "epochs": 5},
    "instance_types": ["ml.p2.xlarge", "ml.p2.8xlarge", "ml.p2.16xlarge", P3, P38, "ml.p3.16xlarge"],
    "batch_sizes": [256, 512, 1024, 2048],
    "repetitions": 1,
    "mode": "early-stop",
    "packing": "per-instance",
}


def test_retired_instance_types_are_accepted_by_simulate_only(tmp_path, real_data):
    path = tmp_path / "fcn.yaml"
    path.write_text(yaml.safe_dump(FCN))
    with pytest.raises(SpecError, match="K80"):
        plan_sweep(path)
    assert load_spec(path, allow_retired=True).instance_types[0] == "ml.p2.xlarge"
    out = _simulate(path, real_data / "cloud-ML" / "seismic-fcn")
    # 72 logs, one a byte copy of another under a name its header contradicts: left out, and said so
    assert out["exhaustive"]["runs"] == 71
    assert [x["path"].rsplit("/", 1)[1] for x in out["logs_unused"]] == ["result-p2-1-256-e2.txt"]
    assert out["strategy"]["jobs"] == 6 and out["strategy"]["early_stopped_runs"] == 24
    assert 0 < out["cost_ratio"] < 0.2
    for name in ("fastest", "cheapest", "recommended"):
        assert out["picks"][name].keys() >= {"instance_type", "batch_size"}
        assert out["truth"][name].keys() >= {"instance_type", "batch_size"}
    assert out["regret_cost"] is not None and out["regret_time"] is not None


def test_warm_pools_are_refused_with_spot(tmp_path):
    with pytest.raises(SpecError, match="warm pools cannot be used with spot"):
        load_spec({**FCN, "instance_types": [P3], "spot": True, "warm_pool_seconds": 60})
    with pytest.raises(SpecError, match="warm_pool_seconds"):
        load_spec({**FCN, "instance_types": [P3], "warm_pool_seconds": 3601})


def test_the_text_says_how_much_of_each_bill_is_start_ups(tmp_path, logs):
    text = CliRunner().invoke(
        app, ["simulate", str(_spec(tmp_path, packing="per-instance")), "--from", str(logs)]
    )
    assert text.exit_code == 0, text.output
    out = _simulate(_spec(tmp_path, packing="per-instance"), logs)
    s, e = out["strategy"], out["exhaustive"]
    said = " ".join(text.output.split())
    assert f"Start-ups ({FIXED_OVERHEAD_S:g} s for each job that starts cold): the strategy's " in said
    assert f"{100 * s['start_up_usd'] / s['cost_usd']:.1f} % of its cost; the exhaustive grid's" in said
    assert f"{100 * e['start_up_usd'] / e['cost_usd']:.1f} % of its cost." in said
