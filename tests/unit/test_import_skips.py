"""``trainsweep import`` names every file it would have read but did not, with the reason: hidden
files and folders, dangling links, link loops, links to folders, and FIFOs or sockets named like logs."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainsweep.cli import app


def _import(src: Path, out: Path) -> tuple[int, str, dict]:
    result = CliRunner().invoke(
        app, ["import", str(src), "--out", str(out), "--workers", "1", "--no-report"], env={"COLUMNS": "300"}
    )
    return result.exit_code, result.output, json.loads((out / "quality.json").read_text())


@pytest.fixture
def odd_folder(tmp_path: Path, cloudml_log: Callable[..., bytes]) -> Path:
    src = tmp_path / "src"
    (src / "runs").mkdir(parents=True)
    (src / "result-p3-1-64-e0.txt").write_bytes(cloudml_log())
    (src / ".result-p3-1-64-e1.txt").write_bytes(cloudml_log())  # hidden
    (src / ".hidden-folder").mkdir()
    (src / ".hidden-folder" / "result-p3-1-64-e2.txt").write_bytes(cloudml_log())
    (src / "gone.log").symlink_to(src / "nowhere.log")  # dangling, inside DIR
    (src / "loop-a.log").symlink_to(src / "loop-b.log")
    (src / "loop-b.log").symlink_to(src / "loop-a.log")
    (src / "linked-runs").symlink_to(src / "runs", target_is_directory=True)
    os.mkfifo(src / "pipe.log")
    return src


def test_import_lists_every_candidate_it_did_not_read_with_the_reason(odd_folder: Path, tmp_path: Path):
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(odd_folder / "sock.log"))
    try:
        code, output, quality = _import(odd_folder, tmp_path / "out")
    finally:
        sock.close()
    assert code == 0, output
    assert [f["path"] for f in quality["files"]] == ["result-p3-1-64-e0.txt"]
    skipped = {s["path"]: s["reason"] for s in quality["skipped"]}
    expected = {
        ".result-p3-1-64-e1.txt": "hidden file",
        ".hidden-folder": "hidden folder",
        "gone.log": "dangling symbolic link",
        "loop-a.log": "symbolic link loop",
        "loop-b.log": "symbolic link loop",
        "linked-runs": "links to folders are not walked into",
        "pipe.log": "not a regular file (a FIFO",
        "sock.log": "not a regular file (a socket",
    }
    for path, reason in expected.items():
        assert reason in skipped.get(path, ""), (path, skipped)
        line = next((ln for ln in output.splitlines() if ln.startswith(f"skipped: {path}: ")), "")
        assert reason in line, (path, output)
    assert quality["summary"]["skipped"] == len(expected)
