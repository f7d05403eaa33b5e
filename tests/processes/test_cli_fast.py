"""``trainsweep parse LOG`` as a user runs it (the console script's ``main()`` in a subprocess): plain
arguments run without building the typer app (trainsweep.cli.fast), with the same output and exit status
as the typer command; anything else is left to typer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainsweep.artefacts import run_record_bytes
from trainsweep.cli import app, fast
from trainsweep.logs import parse

ROOT = Path(__file__).resolve().parents[2]
FCN = "cloud-ML/seismic-fcn/experimental_results/2020-06-FCN-on-sagemaker"
# main() as the console script calls it; then which of the app's libraries the process imported.
MAIN = (
    "import sys\n"
    "from trainsweep.cli import main\n"
    "try:\n"
    "    main()\n"
    "finally:\n"
    "    sys.stderr.write('\\nIMPORTED:' + ','.join(m for m in ('typer', 'rich', 'pydantic', 'click') "
    "if m in sys.modules))\n"
)


def trainsweep(*args: str) -> tuple[int, bytes, str, set[str]]:
    """Exit status, stdout, stderr (without the import list) and the libraries imported, of main()."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-c", MAIN, *args], capture_output=True, env=env, cwd=ROOT, timeout=120
    )
    err, _, imported = proc.stderr.decode().rpartition("\nIMPORTED:")
    return proc.returncode, proc.stdout, err, set(filter(None, imported.split(",")))


@pytest.fixture(scope="module")
def log(real_data: Path) -> Path:
    return real_data / FCN / "logs/result-p3-1-256-e0.txt"


def test_parse_of_a_log_runs_without_typer_rich_or_pydantic(log: Path) -> None:
    code, out, err, imported = trainsweep("parse", str(log))
    assert (code, err) == (0, "")
    assert out == run_record_bytes(parse(log))
    assert imported == set()  # building the app costs more CPU than parsing a 25 MB log


@pytest.mark.parametrize(
    "options",
    [
        [],
        ["--vmtype", "g4dn-1", "--batch-size", "512", "--run", "7"],
        ["--run=0", "--vmtype=g4dn-1"],
        ["--batch-size", "1"],
    ],
)
def test_plain_arguments_give_the_typer_commands_bytes(log: Path, options: list[str]) -> None:
    args = ["parse", *options[:2], str(log), *options[2:]]  # LOG among the options, as click allows
    typer_result = CliRunner().invoke(app, args)
    assert typer_result.exit_code == 0, typer_result.output
    code, out, err, imported = trainsweep(*args)
    assert (code, err, imported) == (0, "", set())
    assert out == typer_result.stdout_bytes


@pytest.mark.parametrize(
    "args",
    [
        ["parse"],
        ["parse", "--help"],
        ["parse", "LOG", "--batch-size", "0"],
        ["parse", "LOG", "--batch-size", "01"],
        ["parse", "LOG", "--batch-size", "+1"],
        ["parse", "LOG", "--batch-size", "1_0"],
        ["parse", "LOG", "--run", "-1"],
        ["parse", "LOG", "--run"],
        ["parse", "LOG", "--run", "1", "--run", "2"],
        ["parse", "LOG", "--vmtype", "--run"],
        ["parse", "LOG", "--vmtype="],
        ["parse", "LOG", "--vmtpye", "p3-1"],
        ["parse", "LOG", "OTHER"],
        ["parse", "--", "LOG"],
        ["parse", ""],
        ["summary", "LOG"],
        ["--version"],
        [],
    ],
)
def test_anything_but_plain_arguments_is_left_to_typer(args: list[str]) -> None:
    assert fast._recognise(args) is None


def test_a_missing_log_gets_typers_error_and_status(tmp_path: Path) -> None:
    missing = tmp_path / "missing.log"
    typer_result = CliRunner().invoke(app, ["parse", str(missing)])
    code, out, err, imported = trainsweep("parse", str(missing))
    assert (code, out) == (typer_result.exit_code, b"") and code == 1
    assert err == typer_result.stderr and "does not exist" in err
    assert "typer" in imported


def test_a_value_typer_refuses_gets_typers_usage_error(log: Path) -> None:
    code, out, err, imported = trainsweep("parse", str(log), "--batch-size", "0")
    assert (code, out) == (2, b"")
    assert "--batch-size" in err and "typer" in imported


def test_a_closed_stdout_exits_1_without_a_traceback(log: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    script = "import sys\nfrom trainsweep.cli import main\nmain()\n"
    proc = subprocess.Popen(
        [sys.executable, "-c", script, "parse", str(log)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # a reader that is gone before the record is written, as `| head` soon is
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 1
    assert b"Traceback" not in err
