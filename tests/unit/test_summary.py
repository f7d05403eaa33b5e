"""Seed-compatible e<N>.json / e<N>.summary: structure, formatting and statistics."""

from __future__ import annotations

import json
import re
from array import array
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainsweep.logs.model import Epoch, RunTimings
from trainsweep.summary import (
    ACCURACY_AFTER_EPOCH_TIME,
    dumps_seed_json,
    format_seed_summary,
    seed_json,
    seed_summary,
)

CLOUD_ML = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "real-data" / "cloud-ML"


def _reference_jsons(current_format_only: bool) -> list[Path]:
    found = sorted(CLOUD_ML.glob("**/execution-times/*/*/e*.json"))
    if current_format_only:
        # The 2020-06 original (_history/c5ca574) and the 2020-07 EC2 run used older script versions.
        found = [p for p in found if "_history" not in p.parts and "2020-07-CIFAR-on-ec2" not in p.parts]
    return found


def make_run(
    epochs: list[list[float]],
    *,
    validation: list[float | None] | None = None,
    accuracy: list[float | None] | None = None,
    epoch_s: list[float | None] | None = None,
    **kwargs,
) -> RunTimings:
    run = RunTimings(name=kwargs.pop("name", "result-p3-1-256-e0"), **kwargs)
    for i, steps in enumerate(epochs):
        run.epochs.append(
            Epoch(
                index=i + 1,
                step_s=array("d", steps),
                step_numbers=array("l", range(1, len(steps) + 1)),
                validation_s=validation[i] if validation else None,
                validation_accuracy=accuracy[i] if accuracy else None,
                epoch_s=epoch_s[i] if epoch_s else None,
            )
        )
    return run


@pytest.fixture
def two_epoch_run() -> RunTimings:
    return make_run(
        [[2.0, 0.1, 0.1, 0.1], [0.1, 0.1, 0.3, 0.1]],
        validation=[0.5, 0.5],
        accuracy=[0.9, 0.95],
        epoch_s=[3.0, 1.5],
        computing_system="p3-1",
        batch_size=256,
        run_index=0,
        init_s=0.25,
        total_s=5.0,
        real_time=[100.0, 103.0, 104.5],
    )


# ---- the JSON --------------------------------------------------------------------------------------


def test_seed_json_has_the_original_keys_in_the_original_order(two_epoch_run: RunTimings) -> None:
    data = seed_json(two_epoch_run)
    assert list(data) == [
        "init",
        "total_training",
        "largest_real_time_delta",
        "fit_time",
        "write_model_time",
        "epochs",
        "computing_system",
        "batch_size",
    ]
    assert list(data["epochs"]) == ["1", "2"]
    assert list(data["epochs"]["1"]) == ["steps", "validation_accuracy", "validation_time", "epoch_time"]
    assert list(data["epochs"]["1"]["steps"]) == ["1", "2", "3", "4"]


def test_seed_json_values(two_epoch_run: RunTimings) -> None:
    data = seed_json(two_epoch_run)
    assert data["init"] == 0.25
    assert data["total_training"] == 5.0
    assert data["largest_real_time_delta"] == 4.5
    assert data["epochs"]["2"]["steps"]["3"] == 0.3
    assert data["epochs"]["2"]["validation_accuracy"] == 0.95
    assert data["epochs"]["1"]["epoch_time"] == 3.0


def test_seed_json_writes_batch_size_as_a_string_as_the_original_did(two_epoch_run: RunTimings) -> None:
    data = seed_json(two_epoch_run)
    assert data["batch_size"] == "256"
    assert data["computing_system"] == "p3-1"


def test_missing_scalars_are_minus_one(two_epoch_run: RunTimings) -> None:
    data = seed_json(two_epoch_run)
    assert data["fit_time"] == -1.0
    assert data["write_model_time"] == -1.0
    bare = seed_json(make_run([[1.0]]))
    assert (bare["init"], bare["total_training"], bare["largest_real_time_delta"]) == (-1.0, -1.0, -1.0)
    assert bare["epochs"]["1"]["validation_time"] == -1.0
    assert bare["epochs"]["1"]["epoch_time"] == -1.0
    assert "validation_accuracy" not in bare["epochs"]["1"]


def test_total_training_falls_back_to_the_fit_time() -> None:
    data = seed_json(make_run([[1.0]], fit_s=77.5))
    assert data["total_training"] == 77.5
    assert data["fit_time"] == 77.5


def test_accuracy_goes_last_when_the_log_printed_it_after_the_epoch_time(two_epoch_run: RunTimings) -> None:
    two_epoch_run.extra[ACCURACY_AFTER_EPOCH_TIME] = True
    data = seed_json(two_epoch_run)
    assert list(data["epochs"]["1"]) == ["steps", "validation_time", "epoch_time", "validation_accuracy"]


def test_step_keys_are_the_logged_step_numbers() -> None:
    run = make_run([[0.5, 0.2, 0.2]])
    run.epochs[0].step_numbers = array("l", [79, 80, 81])  # a log that begins mid-epoch
    assert list(seed_json(run)["epochs"]["1"]["steps"]) == ["79", "80", "81"]


def test_repeated_step_numbers_do_not_lose_steps() -> None:
    run = make_run([[0.5, 0.2, 0.2]])
    run.epochs[0].step_numbers = array("l", [1, 1, 2])
    assert list(seed_json(run)["epochs"]["1"]["steps"].values()) == [0.5, 0.2, 0.2]


def test_repeated_epoch_numbers_do_not_lose_epochs() -> None:
    run = make_run([[0.5], [0.2], [0.3]])
    run.epochs[2].index = 2  # a restarted training in the same log
    data = seed_json(run)
    assert list(data["epochs"]) == ["1", "2", "3"]
    assert data["epochs"]["3"]["steps"] == {"1": 0.3}


def test_non_finite_step_times_are_left_out_of_the_json() -> None:
    run = make_run([[0.5, float("nan"), 0.2]])
    text = dumps_seed_json(seed_json(run))
    assert "NaN" not in text
    assert list(json.loads(text)["epochs"]["1"]["steps"].values()) == [0.5, 0.2]


@pytest.mark.parametrize("path", _reference_jsons(False), ids=lambda p: str(p.relative_to(CLOUD_ML)))
def test_dumps_formats_exactly_like_every_reference_json(path: Path) -> None:
    raw = path.read_text()
    assert dumps_seed_json(json.loads(raw)) == raw


# ---- the summary -----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", _reference_jsons(True), ids=lambda p: str(p.relative_to(CLOUD_ML)))
def test_original_mode_reproduces_every_reference_summary_byte_for_byte(path: Path) -> None:
    expected = path.with_suffix(".summary").read_text()
    assert format_seed_summary(json.loads(path.read_text()), original=True) == expected


def test_summary_statistics_of_a_known_run(two_epoch_run: RunTimings) -> None:
    lines = seed_summary(two_epoch_run).splitlines()
    # 8 steps, total 2.9 s; without the first step 0.9 s over 7 steps.
    assert "  Number of steps: 8.000000" in lines
    assert "  Total time spent on steps: 2.900000" in lines
    assert "    - 58.00 % of the total training time." in lines
    assert "  Time spent on steps (without first step): 0.900000" in lines
    assert "  T Mi Iavg: 0.128571" in lines
    assert "  Average epoch time (skipping first epoch): 1.500000" in lines
    # Beta = (validations 1.0 + first step 2.0) / 0.9
    assert "Beta: 333.33 %" in lines
    # average step 0.3625: 2.0 is outstanding (> 0.435), 0.3 is not
    assert "    - Epoch(1) Step(1) Time(2.000) - 5.52 times larger than average" in lines
    assert not any("Epoch(2) Step(3)" in line for line in lines)
    assert "  - Step 2 of epoch 1: 0.100000 - Estimated time: 0.700000 - Error: 22.22 %" in lines
    assert "  - Avg steps 2-11: 0.128571 - Estimated time: 0.900000 - Error: 0.00 %" in lines


def test_summary_has_the_same_lines_as_the_original(two_epoch_run: RunTimings) -> None:
    reference = (
        CLOUD_ML
        / "seismic-fcn/experimental_results/2020-06-FCN-on-sagemaker/execution-times/p2-1/256/e0.summary"
    ).read_text()

    def labels(text: str) -> list[str]:
        return [re.sub(r"[-0-9.]+", "N", line) for line in text.splitlines() if "Epoch(" not in line]

    assert labels(seed_summary(two_epoch_run)) == labels(reference)


def test_missing_init_prints_the_sentinel_and_no_made_up_percentage(two_epoch_run: RunTimings) -> None:
    two_epoch_run.init_s = None
    lines = seed_summary(two_epoch_run).splitlines()
    i = lines.index("Initialization time: -1.000000")
    assert lines[i + 1] == " - n/a % of the total training time."


def test_original_mode_keeps_the_original_arithmetic_on_missing_values(two_epoch_run: RunTimings) -> None:
    two_epoch_run.init_s = None
    lines = format_seed_summary(seed_json(two_epoch_run), original=True).splitlines()
    i = lines.index("Initialization time: -1.000000")
    assert lines[i + 1] == " - -20.00 % of the total training time."


def test_non_finite_values_in_a_seed_json_are_left_out_of_the_statistics() -> None:
    data = seed_json(make_run([[2.0, 0.1, 0.1]], validation=[0.5], epoch_s=[3.0], total_s=4.0))
    data["epochs"]["1"]["steps"]["4"] = float("nan")
    data["epochs"]["1"]["validation_time"] = float("inf")
    text = format_seed_summary(data)
    assert "  Number of steps: 3.000000" in text
    assert "  Total time spent on validations: n/a" in text
    assert "nan" not in text and "inf" not in text


@pytest.mark.parametrize(
    "run",
    [
        make_run([]),
        make_run([[]]),
        make_run([[3.0]]),
        make_run([[0.0, 0.0]], total_s=0.0),
    ],
    ids=["no-epochs", "empty-epoch", "one-step", "zero-times"],
)
def test_degenerate_runs_give_a_summary_with_na_instead_of_crashing(run: RunTimings) -> None:
    text = seed_summary(run)
    assert text.startswith("Model save time: -1.000000\n")
    assert "T Mi Iavg prediction errors" in text
    assert "n/a" in text


# ---- never crash ----------------------------------------------------------------------------------


_times = st.one_of(
    st.none(),
    st.floats(min_value=0.0, max_value=1e6),
    st.sampled_from([float("nan"), float("inf"), 0.0, -1.0]),
)


@st.composite
def _runs(draw) -> RunTimings:
    epochs = draw(st.lists(st.lists(st.floats(min_value=0.0, max_value=1e4), max_size=12), max_size=5))
    n = len(epochs)
    run = make_run(
        epochs,
        validation=draw(st.lists(_times, min_size=n, max_size=n)) if n else None,
        accuracy=draw(st.lists(_times, min_size=n, max_size=n)) if n else None,
        epoch_s=draw(st.lists(_times, min_size=n, max_size=n)) if n else None,
        init_s=draw(_times),
        total_s=draw(_times),
        fit_s=draw(_times),
        real_time=draw(st.lists(st.floats(min_value=1e9, max_value=2e9), max_size=3)),
    )
    return run


@settings(max_examples=200, deadline=None)
@given(_runs())
def test_any_run_gives_valid_json_and_a_summary_with_every_line(run: RunTimings) -> None:
    text = dumps_seed_json(seed_json(run))
    data = json.loads(text)  # valid JSON: no NaN/Infinity
    summary = seed_summary(run)
    assert format_seed_summary(data) == summary
    lines = summary.splitlines()
    assert lines[0].startswith("Model save time: ")
    assert lines[-1].startswith("  - Avg steps 2-11: ")
    assert "nan" not in summary and "inf" not in summary


# ---- streamed outputs: the same text as the dict-based functions ------------------------------------


_step_times = st.one_of(
    st.floats(min_value=0.0, max_value=1e4),
    st.sampled_from([float("nan"), float("inf"), -float("inf"), 0.0, -1.0, 1e308]),
)


@st.composite
def _odd_runs(draw) -> RunTimings:
    """Runs with what the streamed writers treat specially: non-finite steps, repeated step or epoch
    numbers, consecutive numbers as a range, accuracy after the epoch time."""
    run = RunTimings(
        name="result-p3-1-256-e0",
        computing_system=draw(st.sampled_from([None, "p3-1"])),
        batch_size=draw(st.sampled_from([None, 256])),
        init_s=draw(_times),
        total_s=draw(_times),
        fit_s=draw(_times),
        model_save_s=draw(_times),
        real_time=draw(st.lists(st.floats(min_value=1e9, max_value=2e9), max_size=3)),
    )
    if draw(st.booleans()):
        run.extra[ACCURACY_AFTER_EPOCH_TIME] = True
    for i in range(draw(st.integers(0, 5))):
        steps = draw(st.lists(_step_times, max_size=15))
        kind = draw(st.sampled_from(["range", "array", "repeated", "short"]))
        if kind == "range":
            numbers = range(1, len(steps) + 1)
        elif kind == "array":
            numbers = array("l", range(5, 5 + len(steps)))
        elif kind == "repeated":
            numbers = array("l", [1] * len(steps))
        else:
            numbers = array("l", range(1, len(steps)))
        run.epochs.append(
            Epoch(
                index=draw(st.sampled_from([i + 1, 1])),
                step_s=array("d", steps),
                step_numbers=numbers,
                validation_s=draw(_times),
                validation_accuracy=draw(_times),
                epoch_s=draw(_times),
            )
        )
    return run


@settings(max_examples=300, deadline=None)
@given(_odd_runs())
def test_the_streamed_seed_json_and_summary_are_the_dict_based_texts(run: RunTimings) -> None:
    from trainsweep.summary import iter_seed_json, iter_seed_summary

    data = seed_json(run)
    assert "".join(iter_seed_json(run)) == dumps_seed_json(data)
    assert "".join(iter_seed_summary(run)) == format_seed_summary(data)
    assert seed_summary(run) == format_seed_summary(data)
