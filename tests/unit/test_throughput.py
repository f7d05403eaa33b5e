"""Token and MFU figures of runs and sweeps, from the logs as the container writes them: tokens/s, tokens per
dollar, cost per million tokens; MFU against the catalogue's peak, or why there is none."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from typing import Any

import pytest

from trainsweep import layout
from trainsweep.cost.metrics import CSV_COLUMNS
from trainsweep.cost.prices import hourly_usd
from trainsweep.cost.throughput import MFU_COLUMNS, TOKEN_COLUMNS, accelerator_of
from trainsweep.logs import mllog, parse
from trainsweep.report import analyse, sweep_artefacts, sweep_csv

STEP_S = 0.5  # the fixture log's steady step of rank 0; batch size 64 -> 128 samples/s


def _line(key: str, value: Any) -> bytes:
    return (mllog.format_line(key, value, metadata={"rank": 0}) + "\n").encode()


def _flops(
    per_step: float, precision: str = "fp16", device: str = "Tesla T4", accelerators: int = 1
) -> bytes:
    value = {"per_step": per_step, "per_sample": per_step / 64, "precision": precision, "device": device}
    return _line(mllog.FLOPS, {**value, "accelerators": accelerators})


def _analyse(logs: dict[str, bytes], itype: str = "ml.g4dn.xlarge", spec: dict | None = None):
    runs = [parse(data, name=name) for name, data in logs.items()]
    jobs = [{"run_name": n, "instance_type": itype, "status": "completed", "batch_size": 64} for n in logs]
    return analyse(runs, spec=spec, jobs=jobs)


def _csv(a) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(sweep_csv(a.rows).decode())))


def test_mfu_is_the_counted_flops_per_second_over_the_accelerators_peak(
    mllog_log: Callable[..., bytes],
) -> None:
    per_step = 0.4 * 65e12 * STEP_S  # 40 % of a T4's fp16 peak (65 TFLOPS)
    a = _analyse({"r0": _flops(per_step) + mllog_log()})
    (run,), (row,) = a.run_metrics, a.rows
    assert run.mfu == pytest.approx(0.4) and row.mfu == pytest.approx(0.4)
    assert row.flops_per_sample == pytest.approx(per_step / 64)
    assert row.mfu_note == "against 1 x T4 fp16 peak 65 TFLOPS"
    (line,) = _csv(a)
    assert tuple(line)[-3:] == MFU_COLUMNS and float(line["mfu"]) == pytest.approx(0.4)


def test_mfu_counts_every_accelerator_the_run_trained_on(mllog_log: Callable[..., bytes]) -> None:
    per_step = 0.5 * 8 * 312e12 * STEP_S
    a = _analyse(
        {"r0": _flops(per_step, "bf16", "NVIDIA A100-SXM4-40GB", 8) + mllog_log()}, "ml.p4d.24xlarge"
    )
    assert a.rows[0].mfu == pytest.approx(0.5)


def test_a_cpu_run_says_it_has_no_peak_rather_than_a_figure(mllog_log: Callable[..., bytes]) -> None:
    a = _analyse({"r0": _flops(1e9, "fp32", "cpu", 0) + mllog_log()}, "local")
    (row,) = a.rows
    assert row.mfu is None and row.flops_per_sample == pytest.approx(1e9 / 64)
    assert row.mfu_note == "no peak: the catalogue has no accelerator peak for local"
    assert _csv(a)[0]["mfu"] == ""


def test_a_chip_without_a_published_peak_says_so(mllog_log: Callable[..., bytes]) -> None:
    a = _analyse({"r0": _flops(1e12, "bf16", "NVIDIA A10G") + mllog_log()}, "ml.g5.xlarge")
    assert a.rows[0].mfu is None and a.rows[0].mfu_note == "no peak: A10G has no published dense bf16 peak"


def test_a_count_that_failed_is_named_in_the_note(mllog_log: Callable[..., bytes]) -> None:
    a = _analyse({"r0": _line(mllog.FLOPS, {"error": "RuntimeError: boom"}) + mllog_log()})
    assert a.rows[0].mfu is None and a.rows[0].mfu_note == "FLOPs not counted: RuntimeError: boom"


@pytest.mark.parametrize(
    ("device", "key"),
    [
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("NVIDIA H100 PCIe", None),  # other peaks than the SXM part's: none rather than a wrong one
        ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40S"),
        ("cpu", None),
    ],
)
def test_a_local_gpu_run_takes_the_peak_of_the_gpu_its_log_names(device: str, key: str | None) -> None:
    chip = accelerator_of("local_gpu", device)
    assert (chip.key if chip else None) == key


def test_the_specs_tokens_per_sample_give_tokens_per_second_and_per_dollar(
    mllog_log: Callable[..., bytes],
) -> None:
    spec = {"name": "lm", "workload": {"tokens_per_sample": 1024, "epochs": 2}}
    a = _analyse({"r0": mllog_log()}, spec=spec)
    (row,) = a.rows
    assert row.tokens_per_s == pytest.approx(128 * 1024)
    price = hourly_usd("ml.g4dn.xlarge", "us-east-1", "sagemaker")
    assert row.tokens_per_usd == pytest.approx(128 * 1024 * 3600 / price)
    assert row.usd_per_million_tokens == pytest.approx(1e6 / row.tokens_per_usd)
    (line,) = _csv(a)
    assert tuple(line)[len(CSV_COLUMNS) :] == TOKEN_COLUMNS
    assert float(line["usd_per_million_tokens"]) == pytest.approx(row.usd_per_million_tokens, rel=1e-5)


def test_a_logs_sequence_length_wins_over_the_spec(mllog_log: Callable[..., bytes]) -> None:
    spec = {"name": "lm", "workload": {"hyperparameters": {"seq_len": 256}, "epochs": 2}}
    a = _analyse({"r0": _line(mllog.MAX_SEQUENCE_LENGTH, 2048) + mllog_log(), "r1": mllog_log()}, spec=spec)
    assert sorted(m.tokens_per_s for m in a.run_metrics) == pytest.approx([128 * 256, 128 * 2048])
    assert a.rows[0].tokens_per_sample is None  # the repetitions disagree: no one figure for the row


def test_a_sweep_without_tokens_or_flop_counts_keeps_its_columns(mllog_log: Callable[..., bytes]) -> None:
    assert tuple(_csv(_analyse({"r0": mllog_log()}))[0]) == CSV_COLUMNS


def test_the_report_shows_tokens_and_mfu_per_configuration(mllog_log: Callable[..., bytes]) -> None:
    runs = [parse(_flops(0.4 * 65e12 * STEP_S) + mllog_log(), name="r0")]
    jobs = [{"run_name": "r0", "instance_type": "ml.g4dn.xlarge", "status": "completed", "batch_size": 64}]
    spec = {"name": "lm", "workload": {"tokens_per_sample": 1024, "epochs": 2}}
    page = sweep_artefacts(runs, spec=spec, jobs=jobs)[layout.REPORT_HTML].decode()
    section = page.split('<section id="tokens-mfu">')[1].split("</section>")[0]
    assert "131,072" in section  # tokens/s: 128 samples/s x 1024
    assert "40.0%" in section and "against 1 x T4 fp16 peak 65 TFLOPS" in section


def test_a_report_without_tokens_or_counts_has_no_such_section(mllog_log: Callable[..., bytes]) -> None:
    page = sweep_artefacts([parse(mllog_log(), name="r0")])[layout.REPORT_HTML].decode()
    assert 'id="tokens-mfu"' not in page


def test_a_metric_line_or_a_seq_len_axis_gives_the_tokens(mllog_log: Callable[..., bytes]) -> None:
    metric = (
        mllog.format_line(mllog.METRIC_PREFIX + "seq_len", 512, metadata={"rank": 0, "epoch_num": 1}) + "\n"
    )
    setting = _line("trainsweep.axes", {"seq_len": 128})
    a = _analyse({"m": metric.encode() + mllog_log(), "s": setting + mllog_log()})
    assert {m.name: m.tokens_per_s for m in a.run_metrics} == {"m": 128 * 512, "s": 128 * 128}


def test_an_axis_named_like_a_token_figure_keeps_its_own_column(
    mllog_log: Callable[..., bytes],
) -> None:
    a = _analyse({"s": _line("trainsweep.axes", {"tokens_per_sample": 128}) + mllog_log()})
    (line,) = _csv(a)
    assert line["axis.tokens_per_sample"] == "128" and line["tokens_per_s"] == str(128 * 128)


def _last_step_slow(log: bytes, steps: int, slow_s: float) -> bytes:
    """Every epoch's last step takes ``slow_s``: a GPU tuning a new shape, or real periodic work."""
    return log.replace(
        f'"step": {steps}, "step_s": {STEP_S}'.encode(), f'"step": {steps}, "step_s": {slow_s}'.encode()
    )


@pytest.mark.parametrize(
    ("samples", "steps", "step_s"),
    [
        (150, 3, STEP_S),  # 64 + 64 + 22: the last step trains the rest, once in a new shape
        (192, 3, (STEP_S + 6.0) / 2),  # every batch full: a slow last step is the run's own time
        (150, 2, 6.0),  # an epoch cut short of its partial batch: its last step trains a full one
    ],
)
def test_the_steady_step_leaves_out_an_epochs_partial_last_batch_only(
    mllog_log: Callable[..., bytes], samples: int, steps: int, step_s: float
) -> None:
    """On an H200 the last, partial batch of ResNet-50 at batch size 1024 took 6.4 s against 0.14 s a step
    (a new shape): counted as a steady step it halved the run's samples/s and MFU."""
    log = _last_step_slow(mllog_log(samples=samples, steps=steps, legacy=False), steps, 6.0)
    a = _analyse({"r0": log})
    (run,), (row,) = a.run_metrics, a.rows
    assert run.step_s == pytest.approx(step_s)
    assert row.samples_per_s == pytest.approx(64 / step_s)
    assert float(_csv(a)[0]["samples_per_s"]) == pytest.approx(64 / step_s, rel=1e-3)


def test_a_step_that_accumulates_four_batches_counts_their_samples_and_flops(
    mllog_log: Callable[..., bytes],
) -> None:
    """A script that calls backward() four times per optimizer.step() trains four batches a step: its
    samples/s and MFU count all four (the FLOP count is one batch's forward and backward pass)."""
    per_batch = 0.1 * 65e12 * STEP_S  # 10 % of a T4's fp16 peak a batch
    a = _analyse({"r0": _line(mllog.BATCHES_PER_STEP, 4.0) + _flops(per_batch) + mllog_log()})
    (run,), (row,) = a.run_metrics, a.rows
    assert run.batches_per_step == 4.0
    assert run.samples_per_s == pytest.approx(4 * 64 / STEP_S) and row.samples_per_s == pytest.approx(
        4 * 64 / STEP_S
    )
    assert row.mfu == pytest.approx(0.4)
    assert "r0: a step trains 4 batches of batch size 64 (gradient accumulation)" in row.notes
    one = _analyse({"r0": _line(mllog.BATCHES_PER_STEP, 1.0) + _flops(per_batch) + mllog_log()})
    assert one.run_metrics[0].batches_per_step is None and one.rows[0].samples_per_s == pytest.approx(
        64 / STEP_S
    )
