"""``trainsweep import`` on hostile folders: links out of DIR and archive bombs (issue 11, item 9)."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainsweep import importer
from trainsweep.cli import app

SECRET = "root:x:0:0:do-not-read"


def _import(src: Path, out: Path, *extra: str) -> tuple[int, str, dict]:
    result = CliRunner().invoke(
        app,
        ["import", str(src), "--out", str(out), "--workers", "1", "--no-report", *extra],
        env={"COLUMNS": "300"},
    )
    quality = json.loads((out / "quality.json").read_text()) if (out / "quality.json").is_file() else {}
    return result.exit_code, result.output, quality


def _everything_written(out: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file())


@pytest.fixture
def linked_folder(tmp_path: Path, cloudml_log: Callable[..., bytes]) -> Path:
    """DIR with one log, a link to a log inside DIR, and links to files outside it."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "result-p3-1-64-e0.txt").write_bytes(cloudml_log())
    (src / "result-p3-1-64-e1.txt").symlink_to(src / "result-p3-1-64-e0.txt")  # stays inside DIR
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "passwd").write_text(SECRET + "\n")
    (outside / "other.txt").write_bytes(cloudml_log(batch_size=128))
    (src / "passwd.log").symlink_to(outside / "passwd")  # a .log is read by its name alone
    (src / "result-p3-1-128-e0.txt").symlink_to(outside / "other.txt")
    (src / "billing.json").symlink_to(outside / "passwd")  # candidate billing records are read too
    (src / "loop-a.log").symlink_to(src / "loop-b.log")  # a loop is neither read nor a crash
    (src / "loop-b.log").symlink_to(src / "loop-a.log")
    return src


def test_links_to_files_outside_dir_are_skipped_and_reported_not_read(linked_folder: Path, tmp_path: Path):
    out = tmp_path / "out"
    code, output, quality = _import(linked_folder, out)
    assert code == 0, output
    assert sorted(f["path"] for f in quality["files"]) == ["result-p3-1-64-e0.txt", "result-p3-1-64-e1.txt"]
    skipped = {s["path"]: s["reason"] for s in quality["skipped"]}
    for link in ("passwd.log", "result-p3-1-128-e0.txt", "billing.json"):
        assert "symbolic link" in skipped[link] and "outside the imported folder" in skipped[link]
        assert "--follow-symlinks" in skipped[link]
        assert f"skipped: {link}: symbolic link" in output
    assert SECRET.encode() not in _everything_written(out)


def test_follow_symlinks_reads_the_linked_files(linked_folder: Path, tmp_path: Path):
    out = tmp_path / "out"
    code, output, quality = _import(linked_folder, out, "--follow-symlinks")
    assert code == 0, output
    paths = {f["path"] for f in quality["files"]}
    assert {"passwd.log", "result-p3-1-128-e0.txt", "result-p3-1-64-e0.txt"} <= paths
    assert not any("outside the imported folder" in s["reason"] for s in quality["skipped"])
    assert (out / "execution-times/p3-1/128/e0.json").is_file()


def _tar_gz(members: list[tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=9) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_an_archive_bomb_stops_at_the_uncompressed_bound_and_the_other_logs_are_imported(
    tmp_path: Path, cloudml_log: Callable[..., bytes], monkeypatch: pytest.MonkeyPatch
):
    """50 MB of zeros compress to ~50 kB: far below the (compressed) archive size limit. The walk and
    the reads stop at the uncompressed bound (lowered here to 1 MiB)."""
    monkeypatch.setattr(importer, "ARCHIVE_MAX_UNCOMPRESSED_BYTES", 1024 * 1024)
    src = tmp_path / "src"
    src.mkdir()
    (src / "result-p3-1-64-e0.txt").write_bytes(cloudml_log())
    bomb = _tar_gz(
        [
            ("output/result-p3-1-128-e0.txt", cloudml_log(batch_size=128)),
            ("output/bomb.log", bytes(50 * 1024 * 1024)),
            ("output/result-p3-1-256-e0.txt", cloudml_log(batch_size=256)),  # after the bomb
        ]
    )
    assert len(bomb) < importer.ARCHIVE_MAX_BYTES // 1000
    (src / "model.tar.gz").write_bytes(bomb)

    decompressed: list[int] = []  # every byte gunzipped, by the walk, the sniffing and the parser
    real_read = gzip._GzipReader.read  # type: ignore[attr-defined]

    def counting_read(self, size=-1):  # type: ignore[no-untyped-def]
        data = real_read(self, size)
        decompressed.append(len(data))
        return data

    monkeypatch.setattr(gzip._GzipReader, "read", counting_read)  # type: ignore[attr-defined]
    out = tmp_path / "out"
    code, output, quality = _import(src, out)
    assert code == 0, output
    assert sorted(f["path"] for f in quality["files"]) == [
        "model.tar.gz/output/result-p3-1-128-e0.txt",
        "result-p3-1-64-e0.txt",
    ]
    assert all(f["status"] != "error" for f in quality["files"])
    [skipped] = [s for s in quality["skipped"] if s["path"] == "model.tar.gz"]
    assert "expands beyond 1 MiB uncompressed" in skipped["reason"]
    assert "output/bomb.log" in skipped["reason"]
    assert "skipped: model.tar.gz: archive expands beyond 1 MiB uncompressed" in output
    assert 0 < sum(decompressed) < 4 * 1024 * 1024  # was all 50 MB, twice (discovery, then parsing)
