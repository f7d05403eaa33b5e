"""The cloud-ML dialect on small synthetic logs: line variants, epoch boundaries, header facts."""

from __future__ import annotations

import pytest

from trainsweep.logs import parse
from trainsweep.logs.cloudml import ACCURACY_AFTER_EPOCH_TIME


def test_a_well_formed_log_is_complete_without_problems(cloudml_log) -> None:
    run = parse(cloudml_log(epochs=3, steps=4))
    assert run.dialect == "cloud-ml"
    assert run.status == "complete"
    assert run.problems == []
    assert [e.index for e in run.epochs] == [1, 2, 3]
    assert [list(e.step_numbers) for e in run.epochs] == [[1, 2, 3, 4]] * 3
    assert run.epochs[0].step_s[0] == 0.125 and run.epochs[1].step_s[0] == 0.0125
    assert [e.epoch_s for e in run.epochs] == [1.51, 1.52, 1.53]
    assert [e.validation_s for e in run.epochs] == [0.051, 0.052, 0.053]
    assert [e.validation_accuracy for e in run.epochs] == [0.91, 0.92, 0.93]
    assert run.init_s == 0.25 and run.total_s == 5.5


def test_the_header_comes_from_the_command_line_and_the_dataset_lines(cloudml_log) -> None:
    run = parse(cloudml_log(batch_size=128, samples=512, epochs=2, steps=4))
    h = run.header
    assert (h.batch_size, h.gpus, h.epochs, h.train_samples) == (128, 1, 2, 512)
    assert h.command_line == "python3 mnist_cnn.py --batch-size 128 --num-gpus 1 --epochs 2"


def test_the_batch_size_comes_from_the_first_progress_bar_without_a_command_line(cloudml_log) -> None:
    run = parse(cloudml_log(command=False, batch_size=256, samples=1024))
    assert run.header.batch_size == 256
    assert run.header.gpus is None


def test_the_portuguese_banner_gives_batch_size_gpus_epochs_and_dataset_size() -> None:
    log = (
        b"Informacoes gerais:\n - Conjunto de treinamento:\n    - Total: 40512\n - Tamanho do batch: 1024\n"
        b" - Numero de epocas: 5\n - GPUs solicitadas: 8\nTotal params: 4,252,072\n"
        b"Epoch 1/5\n1 step training time: 0.5s\nEpoch time: 0.5s\n"
    )
    h = parse(log).header
    assert (h.train_samples, h.batch_size, h.epochs, h.gpus) == (40512, 1024, 5, 8)


def test_the_python2_tuple_init_line_is_read(cloudml_log) -> None:
    assert parse(cloudml_log(python2_init=True)).init_s == 0.25


def test_values_without_the_s_unit_are_read_whole(cloudml_log) -> None:
    run = parse(cloudml_log(unit=""))
    assert [e.validation_s for e in run.epochs] == [0.051, 0.052, 0.053]
    assert run.epochs[1].step_s[0] == 0.0125


def test_the_oldest_last_step_form_is_a_step_of_the_epoch() -> None:
    log = b"Epoch 1/1\n1 step training time: 0.25s\n2 steps training: 2.5s\nValidation time: 0.1\n"
    log += b"Epoch time: 3.0s\n"
    run = parse(log)
    assert list(run.epochs[0].step_numbers) == [1, 2]
    assert list(run.epochs[0].step_s) == [0.25, 2.5]


def test_val_accuracy_after_epoch_time_belongs_to_the_epoch_just_closed() -> None:
    log = (
        b"Epoch 1/2\n1 step training time: 0.5s\nValidation time: 0.1s\nEpoch time: 1.0s\n\n"
        b"100/100 [==============================] - 1s - loss: 0.2 - val_loss: 0.3 - val_accuracy: 2.5e-01\n"
        b"Epoch 2/2\n1 step training time: 0.5s\nValidation time: 0.1s\nEpoch time: 1.0s\n\n"
        b"100/100 [==============================] - 1s - loss: 0.2 - val_loss: 0.3 - val_accuracy: 0.5\n"
        b"Tempo do fit: 2.5\n"
    )
    run = parse(log)
    assert [e.validation_accuracy for e in run.epochs] == [0.25, 0.5]
    assert len(run.epochs) == 2
    assert run.extra[ACCURACY_AFTER_EPOCH_TIME] is True


def test_val_accuracy_before_epoch_time_is_flagged_as_such(cloudml_log) -> None:
    assert parse(cloudml_log()).extra[ACCURACY_AFTER_EPOCH_TIME] is False


def test_real_time_between_epochs_belongs_to_the_next_epoch() -> None:
    log = (
        b"Real time: 10.0\nEpoch 1/2\n1 step training time: 0.5s\nReal time: 11.0s\nEpoch time: 1.0s\n"
        b"Real time: 12.0\nEpoch 2/2\n1 step training time: 0.5s\nReal time: 13.0s\nEpoch time: 1.0s\n"
    )
    run = parse(log)
    assert [list(e.real_time) for e in run.epochs] == [[10.0, 11.0], [12.0, 13.0]]
    assert list(run.real_time) == [10.0, 11.0, 12.0, 13.0]
    assert run.largest_real_time_delta == 3.0


def test_keras_callback_stamps_set_epoch_start_and_end() -> None:
    log = (
        b"on_epoch_begin: 100.5s\nEpoch 1/1\non_train_batch_begin: 100.6s\n1 step training time: 0.5s\n"
        b"on_train_batch_end: 101.1s\non_epoch_end: 101.5s\nValidation time: 0.1s\nEpoch time: 1.0s\n"
    )
    ep = parse(log).epochs[0]
    assert (ep.start_time, ep.end_time) == (100.5, 101.5)
    assert list(ep.step_s) == [0.5]


def test_seventeen_digit_and_exponent_numbers_are_read_exactly() -> None:
    log = b"Epoch 1/1\n1 step training time: 0.0067081451416015625s\n"
    log += b"2 step training time: 1.5e-03s\nEpoch time: 1e0s\n"
    ep = parse(log).epochs[0]
    assert list(ep.step_s) == [0.0067081451416015625, 0.0015]
    assert ep.epoch_s == 1.0


def test_carriage_return_line_ends_are_read() -> None:
    log = b"Epoch 1/1\r\n1 step training time: 0.5s\r\nValidation time: 0.1s\r\nEpoch time: 1.0s\r\n"
    run = parse(log)
    assert list(run.epochs[0].step_s) == [0.5] and run.epochs[0].epoch_s == 1.0


def test_step_numbers_that_are_not_consecutive_are_kept_as_logged() -> None:
    log = (
        b"Epoch 1/1\n"
        + b"".join(b"%d step training time: 0.5s\n" % n for n in (1, 2, 2, 4, 10))
        + b"Epoch time: 3s\n"
    )
    run = parse(log)
    assert list(run.epochs[0].step_numbers) == [1, 2, 2, 4, 10]
    assert list(run.epochs[0].step_s) == [0.5] * 5


def test_long_runs_of_consecutive_step_numbers_are_kept_exactly() -> None:
    log = (
        b"Epoch 1/1\n"
        + b"".join(b"%d step training time: 0.5s\n" % n for n in range(7, 20007))
        + b"Epoch time: 3s\n"
    )
    assert list(parse(log).epochs[0].step_numbers) == list(range(7, 20007))


def test_step_numbers_beyond_the_cached_sequence_are_read_exactly() -> None:
    numbers = range(199_995, 200_005)
    log = (
        b"Epoch 1/1\n" + b"".join(b"%d step training time: 0.5s\n" % n for n in numbers) + b"Epoch time: 3s\n"
    )
    assert list(parse(log).epochs[0].step_numbers) == list(numbers)


def test_consecutive_step_numbers_are_held_as_a_range_whatever_the_chunking() -> None:
    log = (
        b"Epoch 1/2\n"
        + b"".join(b"%d step training time: 0.5s\n" % n for n in range(1, 3001))
        + b"Epoch time: 3s\nEpoch 2/2\n"
        + b"".join(b"%d step training time: 0.5s\n" % n for n in (1, 2, 2, 4))
        + b"Epoch time: 3s\n"
    )
    for chunk in (7, 100, 1 << 20):
        run = parse(log[i : i + chunk] for i in range(0, len(log), chunk))
        first, second = run.epochs
        assert first.step_numbers == range(1, 3001)
        assert type(second.step_numbers) is not range and list(second.step_numbers) == [1, 2, 2, 4]


def test_leading_zero_step_numbers_are_consecutive_values() -> None:
    log = b"Epoch 1/1\n01 step training time: 0.5s\n02 step training time: 0.5s\nEpoch time: 3s\n"
    assert parse(log).epochs[0].step_numbers == range(1, 3)


def test_stamps_are_held_once_and_the_run_view_reads_like_a_list() -> None:
    log = (
        b"Real time: 10.0\nEpoch 1/2\n1 step training time: 0.5s\nReal time: 11.0s\nEpoch time: 1.0s\n"
        b"Epoch 2/2\nEpoch time: 1.0s\nReal time: 12.0\nReal time: 13.0\n"
    )
    run = parse(log)
    stamps = run.real_time
    assert [list(e.real_time) for e in run.epochs] == [[10.0, 11.0], []]
    assert stamps == [10.0, 11.0, 12.0, 13.0] and len(stamps) == 4
    assert (stamps[0], stamps[1], stamps[2], stamps[-1], stamps[-3]) == (10.0, 11.0, 12.0, 13.0, 11.0)
    assert stamps[1:3] == [11.0, 12.0] and list(reversed(stamps)) == [13.0, 12.0, 11.0, 10.0]
    run.epochs[0].real_time.append(11.5)  # a view of the epochs' arrays, not a copy
    assert list(stamps) == [10.0, 11.0, 11.5, 12.0, 13.0]
    for bad in (5, -6):
        with pytest.raises(IndexError):
            stamps[bad]


def test_epochs_with_the_same_step_numbers_share_one_range(cloudml_log) -> None:
    run = parse(cloudml_log(epochs=3, steps=4))
    assert run.epochs[0].step_numbers == range(1, 5)
    assert run.epochs[0].step_numbers is run.epochs[1].step_numbers is run.epochs[2].step_numbers
