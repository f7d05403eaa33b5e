"""Step lines with trailing blanks or stray bytes outside their numbers are read as the seed's parser
(``parse-exec-times.py``, run as it was run) reads them, through ``trainsweep parse``; what is dropped is
listed with the line itself, and undecodable bytes are described as what happens to them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainsweep.cli import app

ROOT = Path(__file__).resolve().parents[2]
SEED_PARSER = ROOT.parent / "shared/fixtures/seed-scripts/parse-exec-times.py"
CIFAR_LOG = (
    "cloud-ML/resnet50-cifar/experimental-results/2020-08-CIFAR-on-sagemaker/logs/result-p3-1-512-e2.txt"
)

# Each rewrites every step line's end (``...: 0.069941s``): blanks, or a stray byte after a blank.
TAILS: dict[str, Callable[[bytes], bytes]] = {
    "trailing space": lambda end: end + b" ",
    "trailing tab and carriage return": lambda end: end + b"\t\r",
    "an invalid byte after a blank": lambda end: end + b" \xfe",
    "an invalid UTF-8 sequence after blanks": lambda end: end + b"  \xc3\x28 tail",
}


def _seed_steps(log: Path) -> int:
    """Steps the seed's own parser reads from ``log`` (run, not imported: third-party code)."""
    env = {**os.environ, "PYTHONIOENCODING": "utf-8:surrogateescape"}
    with log.open("rb") as stdin:
        done = subprocess.run(
            [sys.executable, str(SEED_PARSER), "-cs", "p3-1", "-bs", "512"],
            stdin=stdin,
            capture_output=True,
            env=env,
            check=True,
        )
    epochs = json.loads(done.stdout)["epochs"]
    return sum(len(e.get("steps", {})) for e in epochs.values())


def _parse(log: Path) -> dict:
    result = CliRunner().invoke(app, ["parse", str(log), "--vmtype", "p3-1", "--batch-size", "512"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("tail", list(TAILS))
def test_step_lines_with_blanks_or_stray_bytes_after_the_time_are_all_read(
    tail: str, real_data: Path, tmp_path: Path
) -> None:
    original = (real_data / CIFAR_LOG).read_bytes()
    changed = re.sub(rb"(step training time: [0-9.]+s)(?=\n)", lambda m: TAILS[tail](m.group(1)), original)
    assert changed != original
    log = tmp_path / "result-p3-1-512-e2.txt"
    log.write_bytes(changed)

    record = _parse(log)
    steps = sum(len(e["step_s"]) for e in record["epochs"])
    assert steps == _seed_steps(log) == original.count(b" step training time: ") > 400
    assert record["status"] == "complete"
    assert not [p for p in record["problems"] if p["code"] in ("bad-line", "no-training")]
    for problem in record["problems"]:
        assert "skipped" not in problem["message"]


def test_a_dropped_step_line_is_named_in_the_problem(
    cloudml_log: Callable[..., bytes], tmp_path: Path
) -> None:
    """A stray byte inside a step line's number (the seed's parser stops with a ValueError on it) drops
    that line only; the problem shows the line, the undecodable byte escaped."""
    lines = cloudml_log(epochs=1, steps=4).split(b"\n")
    broken = next(i for i, line in enumerate(lines) if line.startswith(b"2 step training time: "))
    lines[broken] = b"\xff" + lines[broken]
    log = tmp_path / "result-p3-1-512-e0.txt"
    log.write_bytes(b"\n".join(lines))

    record = _parse(log)
    assert sum(len(e["step_s"]) for e in record["epochs"]) == 3
    bad = [p for p in record["problems"] if p["code"] == "bad-line"]
    assert len(bad) == 1 and bad[0]["line"] == broken + 1
    assert "'\\xff2 step training time: " in bad[0]["message"]
    undecodable = [p for p in record["problems"] if p["code"] == "undecodable-bytes"]
    assert undecodable and "skipped" not in undecodable[0]["message"]
    assert "listed as a bad line" in undecodable[0]["message"]
