"""Bad input never raises: each case gives a clear problem (code, line, severity) and a status."""

from __future__ import annotations

import os

import pytest

from trainsweep.logs import parse


def codes(run) -> list[str]:
    return [p.code for p in run.problems]


def test_an_empty_log_is_empty() -> None:
    run = parse(b"", name="result-p3-1-256-e0.txt")
    assert run.status == "empty"
    assert codes(run) == ["empty"]
    assert run.problems[0].severity == "error"


def test_a_log_of_blank_lines_is_empty() -> None:
    run = parse(b"\n\n  \n")
    assert run.status == "empty" and codes(run) == ["empty"]


def test_binary_garbage_is_unreadable() -> None:
    run = parse(os.urandom(5000) + b"\x00" * 100)
    assert run.status == "unreadable"
    assert "binary" in codes(run)


def test_text_of_an_unknown_format_is_an_unknown_dialect() -> None:
    run = parse(b"hello\nthis is not a training log\n")
    assert run.status == "unreadable"
    assert codes(run) == ["unknown-dialect"]


def test_undecodable_bytes_are_reported_with_their_line_and_the_rest_is_read(cloudml_log) -> None:
    data = cloudml_log()
    lines = data.split(b"\n")
    lines[5] = lines[5] + b" \xff\xfe caf\xe9"
    run = parse(b"\n".join(lines))
    assert [(p.code, p.line) for p in run.problems] == [("undecodable-bytes", 6)]
    assert run.status == "complete"
    assert run.steps_total == 12


def test_the_70_byte_failed_job_log_is_failed_without_training() -> None:
    log = b"Downloading data from https://s3.amazonaws.com/img-datasets/mnist.npz\n"
    assert len(log) == 70
    run = parse(log, name="result-g4dn-4-256-e1.txt")
    assert run.status == "failed"
    assert codes(run) == ["no-training"]
    assert "70 bytes" in run.problems[0].message
    assert run.failure_reason == "the log ends before the first training step"


def test_a_traceback_marks_the_job_failed_with_its_exception(cloudml_log) -> None:
    log = cloudml_log(final=False) + (
        b'Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n'
        b"tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor\n"
    )
    run = parse(log)
    assert run.status == "failed"
    assert run.failure_reason is not None and run.failure_reason.startswith(
        "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM"
    )
    failed = [p for p in run.problems if p.code == "failed"]
    assert failed and failed[0].line == log.count(b"\n") - 2
    assert run.steps_total == 12


def test_a_log_cut_inside_an_epoch_ends_early_and_keeps_its_steps(cloudml_log) -> None:
    data = cloudml_log(epochs=3, steps=4)
    cut = data.index(b"3 step training time", data.index(b"Epoch 3/3"))
    run = parse(data[:cut])
    assert run.status == "partial"
    assert codes(run) == ["ends-early"]
    assert "inside epoch 3" in run.problems[0].message
    assert [e.steps for e in run.epochs] == [4, 4, 2]


def test_a_log_with_fewer_epochs_than_announced_ends_early(cloudml_log) -> None:
    run = parse(cloudml_log(epochs=2, announced=5))
    assert run.status == "partial"
    assert codes(run) == ["ends-early"]
    assert "announces 5 epochs" in run.problems[0].message


def test_a_log_that_begins_mid_epoch_starts_mid_run(cloudml_log) -> None:
    data = cloudml_log(epochs=3, steps=4)
    start = data.index(b"3 step training time", data.index(b"Epoch 2/3"))
    run = parse(data[start:])
    assert run.status == "partial"
    assert codes(run) == ["starts-mid-run"]
    assert [e.index for e in run.epochs] == [2, 3]
    assert list(run.epochs[0].step_numbers) == [3, 4]


def test_a_log_without_final_lines_is_complete_with_a_warning(cloudml_log) -> None:
    run = parse(cloudml_log(final=False))
    assert run.status == "complete"
    assert codes(run) == ["no-final-lines"]


def test_absurd_step_times_are_dropped_with_their_line_and_the_rest_is_kept() -> None:
    log = (
        b"Epoch 1/1\n1 step training time: 0.5s\n2 step training time: -0.5s\n3 step training time: nans\n"
        b"4 step training time: infs\n5 step training time: 1e300s\n"
        b"6 step training time: 0.5s\nEpoch time: 3.0s\n"
    )
    run = parse(log)
    absurd = [(p.line, p.message) for p in run.problems if p.code == "absurd-value"]
    assert [line for line, _ in absurd] == [3, 4, 5, 6]
    assert "negative" in absurd[0][1] and "not a number" in absurd[1][1] and "infinite" in absurd[2][1]
    assert list(run.epochs[0].step_numbers) == [1, 6]


@pytest.mark.parametrize(
    "log",
    [
        b"Epoch 1/1\n1 step training time: 0.5s\n"
        b"99999999999999999999 step training time: 0.5s\nEpoch time: 1s\n",
        b"Epoch 1/1\n1 step training time: 1e-3s\n"
        b"99999999999999999999 step training time: 1e-3s\nEpoch time: 1s\n",
        b"[MO833] Rank,0,Epoch,0,Iteration,0,It. time,1.0,Elapsed time,2.0\n"
        b"[MO833] Rank,0,Epoch,0,Iteration,99999999999999999999,It. time,1.0,Elapsed time,3.0\n",
    ],
    ids=["cloud-ml", "cloud-ml-slow-path", "mo833"],
)
def test_a_step_number_beyond_64_bits_is_dropped_with_its_line(log: bytes) -> None:
    run = parse(log)
    absurd = [p for p in run.problems if p.code == "absurd-value"]
    assert [p.line for p in absurd] == [2] if log.startswith(b"[") else [3]
    assert "step" in absurd[0].message.lower() or "Iteration" in absurd[0].message
    assert list(run.epochs[0].step_numbers) == [1] and run.steps_total == 1


def test_an_absurd_epoch_time_is_dropped() -> None:
    run = parse(b"Epoch 1/1\n1 step training time: 0.5s\nEpoch time: -3.0s\n")
    assert run.epochs[0].epoch_s is None
    assert "absurd-value" in codes(run)


def test_steps_per_epoch_that_differ_from_the_dataset_size_are_reported(cloudml_log) -> None:
    run = parse(cloudml_log(steps=2, samples=1024, batch_size=256))
    assert codes(run) == ["steps-per-epoch"]
    assert run.problems[0].message == (
        "steps per epoch differ from ceil(1024/256) = 4: epoch 1: 2; epoch 2: 2; epoch 3: 2"
    )


def test_a_missing_last_step_in_every_epoch_is_reported_distinctly(cloudml_log) -> None:
    run = parse(cloudml_log(steps=3, samples=1000, batch_size=250))
    assert codes(run) == ["last-step-not-logged"]
    assert run.problems[0].message.startswith("every epoch logs 3 of ceil(1000/250) = 4 steps")


def test_the_given_train_samples_are_used_for_the_steps_check(cloudml_log) -> None:
    run = parse(cloudml_log(steps=4, samples=1024, batch_size=256), train_samples=2048)
    assert codes(run) == ["steps-per-epoch"]


def test_a_batch_size_contradicting_the_name_is_a_warning(cloudml_log) -> None:
    run = parse(cloudml_log(batch_size=256), name="result-p3-1-512-e0.txt")
    assert [(p.code, p.severity) for p in run.problems] == [("header-contradicts-name", "warning")]
    assert run.batch_size == 512 and run.header.batch_size == 256


def test_a_gpu_count_contradicting_the_name_is_a_warning(cloudml_log) -> None:
    run = parse(cloudml_log(), name="result-p3-4-256-e0.txt")
    assert [p.message for p in run.problems] == ["the name says 4 GPU(s), the log says 1"]


def test_a_very_long_line_without_newline_is_read_in_pieces() -> None:
    run = parse(b"Epoch 1/1\n1 step training time: 0.5s\nEpoch time: 1.0s\n" + b"x" * (5 << 20))
    assert "long-line" in codes(run)
    assert run.steps_total == 1


def test_a_bad_log_does_not_change_the_next_run(cloudml_log) -> None:
    good = parse(cloudml_log(), name="a.txt").to_record()
    parse(os.urandom(3000), name="a.txt")
    parse(b"Epoch 1/1\n1 step training time: nan\n", name="a.txt")
    assert parse(cloudml_log(), name="a.txt").to_record() == good


@pytest.mark.parametrize(
    "preamble",
    [
        b"Using TensorFlow backend.\n",
        b"Dados carregados de /opt/ml/input/data/train/train.pickle\n",
        b"Training ...\n",
        b"Train on 60000 samples, validate on 10000 samples\n",
        b"x_train shape: (60000, 28, 28, 1)\n",
    ],
)
def test_a_known_preamble_without_steps_is_a_failed_job_not_an_unknown_format(preamble: bytes) -> None:
    run = parse(b"some noise\n" + preamble)
    assert (run.dialect, run.status, codes(run)) == ("cloud-ml", "failed", ["no-training"])
