"""``trainsweep plan`` reads a spec path of any kind (file, pipe, device, FIFO) within one size bound and
one wait bound."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainsweep import spec as spec_module
from trainsweep.cli import app
from trainsweep.cli.plan import EXIT_INVALID

runner = CliRunner()

SPEC_TEXT = (
    "name: piped\nworkload: {model: mnist-cnn, epochs: 1}\n"
    "instance_types: [ml.m5.xlarge]\nbatch_sizes: [32]\n"
)


@pytest.mark.timeout(60)
def test_plan_refuses_an_endless_device_after_the_limit() -> None:
    result = runner.invoke(app, ["plan", "/dev/zero"])
    assert result.exit_code == EXIT_INVALID, result.output
    assert f"more than {spec_module.SPEC_MAX_BYTES:,} bytes" in result.output


@pytest.mark.timeout(60)
def test_plan_reads_no_more_of_a_large_pipe_than_the_limit() -> None:
    read_end, write_end = os.pipe()
    written = 0
    offered = 64 * spec_module.SPEC_MAX_BYTES

    def feed() -> None:
        nonlocal written
        block = b"#" * 65536
        try:
            while written < offered:
                written += os.write(write_end, block)
        except BrokenPipeError:
            pass
        finally:
            os.close(write_end)

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        result = runner.invoke(app, ["plan", f"/dev/fd/{read_end}"])
    finally:
        os.close(read_end)  # the writer's next write fails: it stops where the reader stopped
        writer.join(10)
    assert result.exit_code == EXIT_INVALID, result.output
    assert f"more than {spec_module.SPEC_MAX_BYTES:,} bytes" in result.output
    # What the writer got in: the bytes read plus at most what the pipe's buffer holds (1 MiB at most).
    assert written <= 2 * spec_module.SPEC_MAX_BYTES + 65536, written


@pytest.mark.timeout(60)
def test_plan_gives_up_on_a_fifo_nobody_writes_to(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spec_module, "SPEC_READ_TIMEOUT_S", 0.5)
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    result = runner.invoke(app, ["plan", str(fifo)])
    assert result.exit_code == EXIT_INVALID, result.output
    assert "no data came within 0.5 s" in result.output


@pytest.mark.timeout(60)
def test_plan_reads_a_fifo_whose_writer_comes_late(tmp_path: Path) -> None:
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)

    def write_late() -> None:
        threading.Event().wait(0.3)
        with fifo.open("w") as f:
            f.write(SPEC_TEXT)

    writer = threading.Thread(target=write_late, daemon=True)
    writer.start()
    result = runner.invoke(app, ["plan", str(fifo)])
    writer.join(10)
    assert result.exit_code == 0, result.output
    assert "piped" in result.output
