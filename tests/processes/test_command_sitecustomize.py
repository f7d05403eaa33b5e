"""A command-mode cell's Python processes in fresh interpreters: only the named script, inside a cell, is
timed; any other process runs as itself, with the environment's own sitecustomize (the rest of the
command spec: tests/unit/test_command_spec.py)."""

from __future__ import annotations

from pathlib import Path

from trainsweep.training import contract


def _python(tmp_path: Path, args: list[str], env: dict[str, str]) -> str:
    import os
    import subprocess
    import sys

    from trainsweep.instrument.inject import SITE_DIR

    other = tmp_path / "other"
    other.mkdir(exist_ok=True)
    (other / "sitecustomize.py").write_text("print('the environment sitecustomize ran')\n")
    root = str(Path(__file__).resolve().parents[2])
    full = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SITE_DIR), root, str(other)]), **env}
    out = subprocess.run(
        [sys.executable, *args], env=full, capture_output=True, text=True, check=True, cwd=tmp_path
    )
    return out.stdout


def test_a_process_that_is_not_the_named_script_stays_passive_and_the_old_sitecustomize_runs(tmp_path):
    (tmp_path / "helper.py").write_text(
        "import sys\nprint('helper', 'trainsweep.instrument.session' in sys.modules)\n"
    )
    env = {
        contract.INSTRUMENT_ENV: str(tmp_path / "cell.json"),
        contract.COMMAND_SCRIPT_ENV: str(tmp_path / "train.py"),
    }
    out = _python(tmp_path, ["helper.py"], env)
    assert "the environment sitecustomize ran" in out
    assert "helper False" in out  # it ran as itself, with nothing of the timing loaded


def test_outside_a_cell_even_the_named_script_runs_as_itself(tmp_path):
    (tmp_path / "train.py").write_text(
        "import sys\nprint('main', 'trainsweep.instrument.session' in sys.modules)\n"
    )
    out = _python(tmp_path, ["train.py"], {contract.COMMAND_SCRIPT_ENV: str(tmp_path / "train.py")})
    assert "main False" in out
