"""trainsweep.logs.parse on every real log of ../shared/fixtures/real-data, against the seed references.

The references (``execution-times/<VMTYPE>/<BS>/e<N>.json``) were written by the original
``parse-exec-times.py``. Its known quirks are the only tolerated differences: ``validation_time`` with its
last character dropped (when the log prints no ``s`` unit), ``init: -1.0`` for every init line that is not
the Python 2 tuple form, and, for the ResNet logs that print no total time, ``total_training`` = fit time.
"""

from __future__ import annotations

import functools
import json
import math
import re
from pathlib import Path

import pytest

from trainsweep.logs import RunTimings, parse

REAL = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "real-data"
LOGS = sorted(
    p
    for p in REAL.glob("**/*")
    if p.is_file() and p.suffix in (".txt", ".out") and "execution-times" not in p.parts
)
REFERENCES = sorted(REAL.glob("**/execution-times/*/*/e*.json"))


def _ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(REAL)) for p in paths]


@functools.cache
def parsed(path: Path) -> RunTimings:
    return parse(path)


def log_for(ref: Path) -> Path:
    """The log a reference was computed from (history references: the FCN e0 logs, p3-2 = p3-1)."""
    vm, bs, run = ref.parent.parent.name, ref.parent.name, ref.stem
    experiment = ref.parents[3]
    if "_history" in ref.parts:
        experiment = REAL / "cloud-ML/seismic-fcn/experimental_results" / experiment.name
        vm = {"p3-2": "p3-1"}.get(vm, vm)
    found = sorted((experiment / "logs").glob(f"result-{vm}-{bs}-{run}.txt"))
    assert len(found) == 1, f"no log for {ref}"
    return found[0]


def ref_steps(epoch: dict) -> list[tuple[int, float]]:
    return sorted((int(k), v) for k, v in epoch["steps"].items())


def test_the_shared_real_data_is_there(real_data: Path) -> None:
    assert len(LOGS) >= 120 and len(REFERENCES) >= 120


# ---- every log -------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", LOGS, ids=_ids(LOGS))
def test_every_real_log_has_as_many_steps_as_it_prints_step_lines(path: Path) -> None:
    data = path.read_bytes()
    printed = len(re.findall(rb"\n\d+ steps? training(?: time)?: ", b"\n" + data))
    printed += data.count(b",It. time,")
    run = parsed(path)
    assert run.steps_total == printed


@pytest.mark.parametrize("path", LOGS, ids=_ids(LOGS))
def test_every_real_log_has_as_many_epochs_as_it_closes(path: Path) -> None:
    data = path.read_bytes()
    closed = data.count(b"\nEpoch time: ") + data.count(b",Epoch time,")
    run = parsed(path)
    assert len(run.epochs) == closed
    assert all(e.epoch_s is not None for e in run.epochs)


@pytest.mark.parametrize("path", LOGS, ids=_ids(LOGS))
def test_every_real_log_is_hashed_and_counted_while_read(path: Path) -> None:
    import hashlib

    data = path.read_bytes()
    run = parsed(path)
    assert run.bytes_read == len(data)
    assert run.sha256 == hashlib.sha256(data).hexdigest()
    assert run.lines_read == data.count(b"\n") + (0 if data.endswith(b"\n") else 1)


# ---- against the reference outputs --------------------------------------------------------------


@pytest.mark.parametrize("ref", REFERENCES, ids=_ids(REFERENCES))
def test_step_times_equal_the_reference(ref: Path) -> None:
    expected = json.loads(ref.read_text())
    run = parsed(log_for(ref))
    assert [e.index for e in run.epochs] == [int(k) for k in expected["epochs"]]
    for ep in run.epochs:
        pairs = ref_steps(expected["epochs"][str(ep.index)])
        assert list(ep.step_numbers) == [n for n, _ in pairs]
        assert list(ep.step_s) == [v for _, v in pairs]


@pytest.mark.parametrize("ref", REFERENCES, ids=_ids(REFERENCES))
def test_epoch_times_equal_the_reference(ref: Path) -> None:
    expected = json.loads(ref.read_text())
    run = parsed(log_for(ref))
    assert [e.epoch_s for e in run.epochs] == [e["epoch_time"] for e in expected["epochs"].values()]


@pytest.mark.parametrize("ref", REFERENCES, ids=_ids(REFERENCES))
def test_validation_accuracy_equals_the_reference(ref: Path) -> None:
    expected = json.loads(ref.read_text())
    run = parsed(log_for(ref))
    for ep in run.epochs:
        want = expected["epochs"][str(ep.index)].get("validation_accuracy")
        if want is not None:  # the oldest script versions did not record it
            assert ep.validation_accuracy == want
        else:
            assert ep.validation_accuracy is not None


@pytest.mark.parametrize("ref", REFERENCES, ids=_ids(REFERENCES))
def test_validation_time_equals_the_reference_but_for_its_dropped_last_digit(ref: Path) -> None:
    expected = json.loads(ref.read_text())
    run = parsed(log_for(ref))
    for ep in run.epochs:
        want = expected["epochs"][str(ep.index)]["validation_time"]
        got = ep.validation_s
        assert got is not None
        assert want == got or want == float(repr(got)[:-1])


@pytest.mark.parametrize("ref", REFERENCES, ids=_ids(REFERENCES))
def test_largest_real_time_delta_equals_the_reference(ref: Path) -> None:
    expected = json.loads(ref.read_text())
    run = parsed(log_for(ref))
    assert run.largest_real_time_delta == expected["largest_real_time_delta"]


@pytest.mark.parametrize("ref", REFERENCES, ids=_ids(REFERENCES))
def test_run_times_equal_the_reference_where_it_read_them(ref: Path) -> None:
    expected = json.loads(ref.read_text())
    run = parsed(log_for(ref))
    assert run.init_s is not None
    if expected["init"] != -1.0:
        assert run.init_s == expected["init"]
    if expected.get("fit_time", -1.0) != -1.0:
        assert run.fit_s == expected["fit_time"]
    if expected.get("write_model_time", -1.0) != -1.0:
        assert run.model_save_s == expected["write_model_time"]
    total = expected["total_training"]
    if run.total_s is None:  # ResNet prints no total: the reference carries the fit time there
        assert total in (-1.0, run.fit_s)
    else:
        assert run.total_s == total


@pytest.mark.parametrize("ref", REFERENCES, ids=_ids(REFERENCES))
def test_reference_logs_parse_complete_with_their_cell_from_the_name(ref: Path) -> None:
    run = parsed(log_for(ref))
    assert run.status == "complete"
    assert run.batch_size == int(ref.parent.name)
    assert run.run_index == int(ref.stem[1:])
    assert run.computing_system == log_for(ref).name.split("-")[1] + "-" + log_for(ref).name.split("-")[2]


# ---- the data defects the README lists -----------------------------------------------------------

HIST = REAL / "cloud-ML/_history"
MNIST_SM = "cnn-mnist/experimental-results/2020-07-MNIST-on-sagemaker/logs"
FCN = REAL / "cloud-ML/seismic-fcn/experimental_results/2020-06-FCN-on-sagemaker/logs"
RESNET = REAL / "cloud-ML/resnet50-cifar/experimental-results"


def test_the_70_byte_log_is_a_failed_job_without_training() -> None:
    run = parsed(HIST / "7398e0c" / MNIST_SM / "result-g4dn-4-256-e1.txt")
    assert run.bytes_read == 70
    assert run.status == "failed"
    assert run.epochs == []
    assert [p.code for p in run.problems] == ["no-training"]


def test_a_batch_size_contradicting_the_name_is_reported() -> None:
    run = parsed(HIST / "7398e0c" / MNIST_SM / "result-g4dn-1-2048-e1.txt")
    assert run.batch_size == 2048 and run.header.batch_size == 1024
    msgs = [p.message for p in run.problems if p.code == "header-contradicts-name"]
    assert msgs == ["the name says batch size 2048, the log says 1024"]
    assert {e.steps for e in run.epochs} == {math.ceil(60000 / 1024)}


def test_a_gpu_count_contradicting_the_name_is_reported() -> None:
    path = FCN / "result-p2-1-256-e2.txt"
    run = parsed(path)
    assert run.header.gpus == 8
    assert [p.message for p in run.problems if p.code == "header-contradicts-name"] == [
        "the name says 1 GPU(s), the log says 8"
    ]


def test_the_cloudwatch_export_without_pagination_starts_mid_epoch() -> None:
    run = parsed(HIST / "8078c07" / MNIST_SM / "result-p2-1-256-e1.txt")
    assert run.status == "partial"
    assert [p.code for p in run.problems] == ["starts-mid-run"]
    assert [e.index for e in run.epochs] == list(range(18, 31))
    assert run.epochs[0].step_numbers[0] == 79 and run.epochs[0].steps == 235 - 78
    assert all(e.steps == 235 for e in run.epochs[1:])


@pytest.mark.parametrize("path", sorted((REAL / "cloud-ML/cnn-mnist/mnist-logs").glob("*/*.out")), ids=str)
def test_ec2_out_logs_report_the_unprinted_last_step_distinctly(path: Path) -> None:
    run = parsed(path)
    assert run.computing_system == "p3-1"  # from the folder p3.2xlarge
    assert [p.code for p in run.problems] == ["last-step-not-logged"]
    assert run.status == "complete"
    expected = math.ceil(60000 / run.batch_size)  # type: ignore[operator]
    assert {e.steps for e in run.epochs} == {expected - 1}


def test_resnet_logs_without_their_first_bytes_and_with_backspace_runs_parse_fully() -> None:
    path = RESNET / "2020-08-CIFAR-on-sagemaker/logs/result-p3-1-256-e0.txt"
    data = path.read_bytes()
    assert data.startswith(b"wnloading") and b"\x08" * 20 in data and not data.endswith(b"\n")
    run = parsed(path)
    assert run.init_s == 15.877895593643188
    assert [e.validation_accuracy for e in run.epochs] == [0.1, 0.1, 0.1, 0.1007, 0.1023]


def test_exponents_in_metrics_are_read() -> None:
    path = RESNET / "2020-07-CIFAR-on-ec2/logs/result-p2-1-2048-e0.txt"
    run = parsed(path)
    assert [e.validation_accuracy for e in run.epochs] == [0.0, 0.0, 0.0, 0.072, 0.0998]


MO833 = REAL / "high-res-distributed/mo833-trabalho/experiment_results"


def test_mo833_rank_logs_give_per_rank_epochs_numbered_from_one() -> None:
    run = parsed(MO833 / "c4x/TEST_NODE-TEST_EXPERIMENT_ID-1625079915.4443638.out")
    assert run.dialect == "mo833"
    assert run.init_s == 28.8954
    assert [e.index for e in run.epochs] == [1]
    assert list(run.epochs[0].step_s) == [8.3120, 6.6178, 5.4400, 4.3528, 4.3758]
    assert list(run.epochs[0].step_numbers) == [1, 2, 3, 4, 5]
    assert run.epochs[0].epoch_s == 29.7503
    assert run.total_s == 58.6458
    assert list(run.ranks) == [0] and run.ranks[0] is run.epochs


def test_a_mo833_log_of_rank_two_alone_makes_rank_two_primary() -> None:
    run = parsed(MO833 / "c5x/TEST_NODE-TEST_EXPERIMENT_ID-1625080072.5994425.out")
    assert list(run.ranks) == [2]
    assert list(run.epochs[0].step_s) == [6.6157, 5.0636, 4.7806]


ONE_PER_FOLDER = sorted({p.parent: p for p in LOGS}.values())


@pytest.mark.parametrize("path", ONE_PER_FOLDER, ids=_ids(ONE_PER_FOLDER))
def test_a_real_log_read_in_odd_sized_chunks_gives_the_same_run(path: Path) -> None:
    data = path.read_bytes()
    chunked = parse((data[i : i + 4093] for i in range(0, len(data), 4093)), name=path.name).to_record()
    whole = parse(data, name=path.name).to_record()
    assert chunked == whole
